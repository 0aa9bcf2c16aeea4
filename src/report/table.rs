//! The short table printed on stdout at the end of a headless run (and after the dashboard
//! closes): the verdict and its reasons, the client's pacing and the server's latency.

use super::{
    error_codes, kernel_share, mib, percentiles, server_figures, turn_counts, turn_figures,
    verdict_line,
};
use crate::contract::process_name;
use crate::summary::Summary;
use std::fmt::Write as _;

/// Appends one line (writing into a String cannot fail).
macro_rules! row {
    ($out:expr, $($arg:tt)*) => {{ let _ = writeln!($out, $($arg)*); }};
}

/// The table.
pub fn table(s: &Summary) -> String {
    let mut out = table_body(s);
    row!(
        out,
        "summary            {} (figures: summary.json)",
        in_folder(&s.output_dir, "summary.md")
    );
    out
}

/// The same, for a summary the disk did not take: the files in the folder are the provisional
/// ones written at the start, so the table must not send the reader to them.
pub fn table_unwritten(s: &Summary) -> String {
    let mut out = table_body(s);
    row!(
        out,
        "summary            NOT written: {} is the provisional one from the run's start; this table is the only copy",
        in_folder(&s.output_dir, "summary.json")
    );
    out
}

/// `dir/name` as a path joins them: `-o out/` gives `out/summary.md`, not `out//summary.md`.
fn in_folder(dir: &str, name: &str) -> String {
    std::path::Path::new(dir).join(name).display().to_string()
}

fn table_body(s: &Summary) -> String {
    let mut out = String::new();
    verdict(&mut out, s);
    layout(&mut out, s);
    pacing(&mut out, s);
    server(&mut out, s);
    processes(&mut out, s);
    funasr(&mut out, s);
    if let Some(serving) = &s.serving {
        for line in crate::summary::serving::lines(serving, s.sessions.stopped_early) {
            row!(out, "{line}");
        }
    }
    out
}

/// The verdict and its reasons.
fn verdict(out: &mut String, s: &Summary) {
    row!(out, "verdict            {}", verdict_line(s));
    for r in &s.verdict.reasons {
        row!(out, "                   - {r}");
    }
}

/// The layout, and the shard or the merge this run is.
fn layout(out: &mut String, s: &Summary) {
    row!(
        out,
        "layout             {} x {} sessions, {} of {}, trace {}/{}",
        s.layout.processes,
        s.layout.sessions_per_process,
        crate::clock::seconds_text(s.settings.duration_s),
        s.settings.audio,
        s.settings.trace.as_str(),
        s.settings.trace_writer.as_str()
    );
    if let Some(shard) = &s.settings.shard {
        let gate = s
            .start_gate
            .as_ref()
            .and_then(|g| g.opened_late_ms)
            .map_or(String::new(), |ms| {
                format!(", first packet {ms:.1} ms after --start-at")
            });
        row!(
            out,
            "shard              {} of {} of run {}{gate}",
            shard.index,
            shard.count,
            shard.run_id
        );
    }
    if let Some(m) = &s.merge {
        let present = m.shards.iter().filter(|r| r.present).count();
        let spread = m
            .first_packet_spread_ms
            .map_or(String::new(), |ms| format!(", gate spread {ms:.1} ms"));
        row!(
            out,
            "merge              {present} of {} shards of run {}, together {:.0} % of the time{}{spread}",
            m.shard_count,
            m.run_id,
            m.overlap_fraction * 100.0,
            super::multihost::unwindowed(m)
        );
    }
}

/// What the packets' line of a killed run's provisional summary says in place of its zeros.
pub(super) const UNFINISHED_PACKETS: &str = "the run did not finish, and this summary was written when it started; samples/worker-*.csv has a row for every packet sent";

/// The sessions and the pacing of their packets.
fn pacing(out: &mut String, s: &Summary) {
    let p = &s.pacing;
    let c = &p.counts;
    let d = &p.deviation_ms;
    // As summary.md says it: the sessions a cancelled run stopped before their last packet.
    let stopped = match s.sessions.stopped_early {
        0 => String::new(),
        n => format!("; {n} of them stopped early (before their input's end)"),
    };
    row!(
        out,
        "sessions           {} completed, {} incomplete, {} rejected of {}{stopped}",
        s.sessions.completed,
        s.sessions.incomplete,
        s.sessions.rejected,
        s.sessions.configured
    );
    if s.unfinished() {
        // The provisional summary of a killed run: its zeros are no count.
        row!(out, "packets            not known: {}", UNFINISHED_PACKETS);
        return;
    }
    row!(
        out,
        "packets            {} sent, {} late (> {} ms) in {} sessions, {} slow (> {} ms)",
        c.packets,
        c.late_packets,
        p.late_threshold_ms,
        p.sessions_with_late_packets,
        c.slow_sends,
        p.slow_send_threshold_ms
    );
    if c.unsent_packets > 0 {
        row!(
            out,
            "never sent         {} packets ({})",
            c.unsent_packets,
            crate::verdict::unsent_why(c.packets, s.cancelled)
        );
    }
    if c.packets == 0 {
        // Zeros here would read as perfect pacing.
        row!(out, "deviation (ms)     no samples (no packet was sent)");
        return;
    }
    row!(
        out,
        "deviation (ms)     p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
        d.p50,
        d.p90,
        d.p99,
        d.p999,
        d.max
    );
    let l = &p.start_lateness_ms;
    row!(
        out,
        "start lateness     p50 {:.2}  p99 {:.2}  max {:.2} ms (packet 0 after its gate)",
        l.p50,
        l.p99,
        l.max
    );
}

/// The server's latency, errors and turns.
fn server(out: &mut String, s: &Summary) {
    for (name, q) in server_figures(s) {
        row!(
            out,
            "{:<18} {}{}",
            format!("server {name}")
                .chars()
                .take(18)
                .collect::<String>(),
            percentiles(q),
            if q.is_some() {
                " (p50 / p99 / max)"
            } else {
                ""
            }
        );
    }
    if s.server.protocol_errors + s.server.error_events > 0 {
        row!(
            out,
            "server errors      {} protocol errors, {} error events",
            s.server.protocol_errors,
            s.server.error_events
        );
    }
    if let Some(codes) = error_codes(s) {
        row!(out, "server error codes {codes}");
    }
    if let Some((name, figures, t)) = turn_figures(s) {
        row!(out, "{:<18} {}", format!("{name} turns"), turn_counts(t));
        for (figure, q) in figures {
            row!(
                out,
                "  {name} {figure:<27} {} (p50 / p99 / max)",
                percentiles(Some(q))
            );
        }
    }
}

/// Each process, the CPU split and the causes of stalls.
fn processes(out: &mut String, s: &Summary) {
    for proc in &s.processes {
        let name = process_name(proc.role, proc.index);
        if !proc.result_present {
            row!(
                out,
                "{name:<18} no result (pid {}): its CPU, memory and loop lag are not known",
                proc.pid
            );
            continue;
        }
        row!(
            out,
            "{name:<18} {:.3} cores{}, {:.1} MiB peak RSS, loop lag max {:.1} ms",
            proc.cpu_cores,
            kernel_share(proc),
            mib(proc.peak_rss_bytes),
            proc.loop_lag_ms.max
        );
    }
    let load = &s.sampler.host_load;
    if load.seconds > 0 {
        let server = load
            .server_cores_mean
            .map_or("– (not watched)".to_string(), |c| format!("{c:.2}"));
        let steal = load.steal_note();
        row!(
            out,
            "cpu split          client {:.2} / server {server} / other {:.2}{steal} cores (mean over {} s)",
            load.client_cores_mean,
            load.foreign_cores_mean,
            load.seconds
        );
    }
    for e in &s.attribution.explanations {
        row!(out, "stall cause        {e}");
    }
}

/// The Fun-ASR benchmark's own summary lines, as it prints them, then ours beside them.
fn funasr(out: &mut String, s: &Summary) {
    if let Some(f) = &s.funasr {
        for line in crate::summary::funasr::summary_lines(f) {
            row!(out, "{line}");
        }
        for line in crate::summary::funasr::our_lines(f) {
            row!(out, "{line}");
        }
    }
}
