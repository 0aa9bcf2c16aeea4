//! The Markdown of a run over several hosts: a shard's place in its run, its start gate and
//! clock; a merge's per-shard table, their overlap and the gate spread (docs/multihost.md).

use super::verdict_line;
use crate::options::shard::rfc3339;
use crate::summary::multihost::{MergeSection, ShardRow, StartGate};
use crate::summary::Summary;
use crate::sys::clock_sync::ClockSync;
use std::fmt::Write as _;

/// The section, or nothing for a run on one host without `--start-at`.
pub fn section(out: &mut String, s: &Summary) {
    if let Some(m) = &s.merge {
        merged(out, s, m);
        return;
    }
    let mut line = String::new();
    if let Some(shard) = &s.settings.shard {
        let _ = write!(
            line,
            "Shard {} of {} of run `{}`. ",
            shard.index, shard.count, shard.run_id
        );
    }
    if let Some(g) = &s.start_gate {
        let _ = write!(line, "{} ", gate_text(g));
    }
    if line.is_empty() {
        return;
    }
    let _ = write!(line, "Clock: {}.", clock_text(s.clock_sync.as_ref()));
    let _ = writeln!(out, "{line}\n");
}

fn gate_text(g: &StartGate) -> String {
    match g.opened_late_ms {
        Some(ms) => format!(
            "Start gate at {} (--start-at): the first packet left {ms:.1} ms after it{}.",
            g.start_at,
            if g.late { " (late)" } else { "" }
        ),
        None => format!("Start gate at {} (--start-at): no packet left.", g.start_at),
    }
}

fn clock_text(c: Option<&ClockSync>) -> String {
    match c {
        Some(c) if c.synchronised => format!(
            "synchronised (estimated error {:.3} ms, max {:.3} ms)",
            c.estimated_error_us as f64 / 1000.0,
            c.max_error_us as f64 / 1000.0
        ),
        Some(c) => format!("NOT synchronised (adjtimex {})", c.state),
        None => "sync state unknown".to_string(),
    }
}

/// `" (of the 1 shard that recorded a window)"` when some present shard recorded none (its run
/// did not finish): the overlap is of the others only.
pub fn unwindowed(m: &MergeSection) -> String {
    let present = m.shards.iter().filter(|r| r.present);
    let with = present.clone().filter(|r| r.window.is_some()).count();
    if with == present.count() {
        return String::new();
    }
    let shards = if with == 1 { "shard" } else { "shards" };
    format!(" (of the {with} {shards} that recorded a window)")
}

fn merged(out: &mut String, s: &Summary, m: &MergeSection) {
    let present = m.shards.iter().filter(|r| r.present).count();
    let _ = writeln!(
        out,
        "Merge of {present} of {} shards of run `{}`: {} sessions streamed at once at the peak (of {}).",
        m.shard_count, m.run_id, s.peak_overlapping_streams, s.layout.sessions_total
    );
    let overlap = match &m.overlap {
        Some(o) => format!(
            "the shards streamed together from {} to {} ({:.1} s, {:.0} % of the shortest shard's window)",
            rfc3339(o.start_unix_s),
            rfc3339(o.end_unix_s),
            o.seconds(),
            m.overlap_fraction * 100.0
        ),
        None => "the shards never all streamed at the same time".to_string(),
    };
    let overlap = overlap + &unwindowed(m);
    let spread = m.first_packet_spread_ms.map_or(String::new(), |ms| {
        format!("; first packets within {ms:.1} ms")
    });
    let cpu = m.cpu_per_session_second.map_or(String::new(), |c| {
        format!("; worker CPU {:.2} ms per session-second", c * 1000.0)
    });
    let _ = writeln!(out, "On the hosts' wall clocks {overlap}{spread}{cpu}.\n");
    let _ = writeln!(out, "## Shards\n");
    let _ = writeln!(
        out,
        "| shard | host | sessions | completed | packets | late | p99 deviation ms | worker CPU s | gate | clock | verdict |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &m.shards {
        shard_row(out, r);
    }
    let _ = writeln!(
        out,
        "\nThe pooled figures below add the shards' histograms (never their percentiles); the merged verdict is {}.\n",
        verdict_line(s)
    );
}

/// One shard's row of the `## Shards` table; a missing shard says so.
fn shard_row(out: &mut String, r: &ShardRow) {
    if !r.present {
        let _ = writeln!(
            out,
            "| {} | – | {} | – | – | – | – | – | – | – | MISSING |",
            r.index, r.sessions
        );
        return;
    }
    // A shard whose run did not finish (its conductor was killed) has neither recorded.
    let unfinished = r.verdict.is_none();
    let gate = r.start_gate.as_ref().map_or(
        if unfinished {
            "not known"
        } else {
            "no --start-at"
        }
        .to_string(),
        |g| {
            g.opened_late_ms.map_or("never opened".to_string(), |ms| {
                format!("+{ms:.1} ms{}", if g.late { " LATE" } else { "" })
            })
        },
    );
    let clock = match &r.clock_sync {
        Some(c) if c.synchronised => "synced".to_string(),
        Some(_) => "NOT synced".to_string(),
        None => "?".to_string(),
    };
    let verdict = r.verdict.as_ref().map_or("UNFINISHED".to_string(), |v| {
        let pacing = if v.pacing_qualified {
            "qualified"
        } else {
            "UNQUALIFIED"
        };
        let complete = if v.complete {
            "complete"
        } else {
            "NOT complete"
        };
        format!("{pacing}, {complete}")
    });
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {gate} | {clock} | {verdict} |",
        r.index,
        r.hostname.as_deref().unwrap_or("?"),
        r.sessions,
        r.completed,
        r.packets,
        r.late_packets,
        r.deviation_p99_ms
            .map_or("–".to_string(), |p| format!("{p:.2}")),
        r.worker_cpu_seconds
            .map_or("–".to_string(), |c| format!("{c:.2}")),
    );
}
