//! Renderings of a [`Summary`]: `summary.md` for issues, and the short table printed at the end
//! of a headless run.

use crate::summary::{process_name, Summary};
use std::fmt::Write as _;

/// "pacing-qualified, complete" and its negatives.
pub fn verdict_line(s: &Summary) -> String {
    let pacing = if s.verdict.pacing_qualified {
        "pacing-qualified"
    } else {
        "PACING-UNQUALIFIED"
    };
    let complete = if s.verdict.complete {
        "complete"
    } else {
        "NOT complete"
    };
    format!("{pacing}, {complete}")
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `summary.md`.
pub fn markdown(s: &Summary) -> String {
    let mut out = String::new();
    let p = &s.pacing;
    let _ = writeln!(out, "# duplexbench-tui run: {}\n", verdict_line(s));
    let _ = writeln!(
        out,
        "{} × {} sessions, {:.0} s of audio each in {} ms packets, against {}{}; started {} ({} {}).\n",
        s.layout.processes,
        s.layout.sessions_per_process,
        s.settings.duration_s,
        s.settings.packet_ms,
        s.settings.url,
        if s.settings.builtin_mock { " (built-in mock)" } else { "" },
        s.started_at,
        s.tool.name,
        s.tool.version
    );
    if !s.verdict.reasons.is_empty() {
        let _ = writeln!(out, "Why:\n");
        for r in &s.verdict.reasons {
            let _ = writeln!(out, "- {r}");
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "## Pacing\n");
    let _ = writeln!(out, "| figure | value |\n|---|---|");
    let _ = writeln!(out, "| packets | {} |", p.packets);
    let _ = writeln!(
        out,
        "| late packets (> {} ms) | {} |",
        p.late_threshold_ms, p.late_packets
    );
    if p.unsent_packets > 0 {
        let _ = writeln!(out, "| packets never sent | {} |", p.unsent_packets);
    }
    let _ = writeln!(
        out,
        "| sessions with a violation | {} |",
        p.sessions_with_violation
    );
    let _ = writeln!(out, "| sends over 20 ms behind | {} |", p.sends_over_20ms);
    let d = &p.deviation_ms;
    let _ = writeln!(
        out,
        "| deviation p50 / p90 / p99 / p99.9 / max | {:.2} / {:.2} / {:.2} / {:.2} / {:.2} ms |",
        d.p50, d.p90, d.p99, d.p999, d.max
    );
    let w = &p.websocket_send_ms;
    let _ = writeln!(
        out,
        "| websocket send p50 / p99 / max | {:.3} / {:.3} / {:.3} ms |",
        w.p50, w.p99, w.max
    );
    let a = &p.append_span_ms;
    let _ = writeln!(
        out,
        "| append span p50 / p99 / max | {:.3} / {:.3} / {:.3} ms |",
        a.p50, a.p99, a.max
    );
    let _ = writeln!(
        out,
        "| peak overlapping streams | {} |\n",
        s.peak_overlapping_streams
    );

    let _ = writeln!(out, "## Sessions\n");
    let ss = &s.sessions;
    let _ = writeln!(
        out,
        "{} configured: {} completed, {} incomplete, {} rejected{}.\n",
        ss.configured,
        ss.completed,
        ss.incomplete,
        ss.rejected,
        if ss.stopped_early > 0 {
            format!(", {} stopped early", ss.stopped_early)
        } else {
            String::new()
        }
    );
    for e in &ss.errors {
        let _ = writeln!(out, "- {} × {}", e.count, e.message);
    }
    if !ss.errors.is_empty() {
        let _ = writeln!(out);
    }

    let _ = writeln!(out, "## Processes\n");
    let _ = writeln!(
        out,
        "| process | pid | CPU (cores) | peak RSS (MiB) | loop lag p99 / max (ms) | lags > 20 / > 80 ms | late packets | deviation p99 / max (ms) | writer queue peak |\n|---|---|---|---|---|---|---|---|---|"
    );
    for proc in &s.processes {
        let name = process_name(proc.role, proc.index);
        let (late, dev) =
            proc.pacing
                .as_ref()
                .map_or(("–".to_string(), "–".to_string()), |p| {
                    (
                        p.late_packets.to_string(),
                        format!("{:.2} / {:.2}", p.deviation_ms.p99, p.deviation_ms.max),
                    )
                });
        let queue = match (proc.writer_queue_peak_lines, proc.writer_queue_peak_bytes) {
            (Some(l), Some(b)) => format!("{l} lines, {:.1} MiB", mib(b)),
            _ => "–".to_string(),
        };
        let l = &proc.loop_lag_ms;
        let _ = writeln!(
            out,
            "| {name}{} | {} | {:.3} | {:.1} | {:.2} / {:.2} | {} / {} | {late} | {dev} | {queue} |",
            if proc.result_present { "" } else { " (no result)" },
            proc.pid,
            proc.cpu_cores,
            mib(proc.peak_rss_bytes),
            l.p99,
            l.max,
            l.over_20ms,
            l.over_80ms
        );
    }
    if let Some(m) = s.processes.iter().find_map(|p| p.mock.as_ref()) {
        let a = &m.arrival_deviation_ms;
        let _ = writeln!(
            out,
            "\nThe mock served {} sessions ({} refused), received {} appends, saw {} protocol errors; arrival deviation p50 / p99 / max {:.2} / {:.2} / {:.2} ms.",
            m.sessions_served, m.sessions_rejected, m.appends_received, m.protocol_errors, a.p50, a.p99, a.max
        );
    }
    let _ = writeln!(out, "\n## Server, as the client saw it\n");
    let v = &s.server;
    let _ = writeln!(out, "| figure | p50 | p99 | max |\n|---|---|---|---|");
    for (name, q) in [
        ("append → accepted (ms)", &v.accepted_ms),
        ("unit lag (ms)", &v.unit_lag_ms),
        ("time to first audio (ms)", &v.first_audio_ms),
    ] {
        let _ = writeln!(
            out,
            "| {name} | {:.2} | {:.2} | {:.2} |",
            q.p50, q.p99, q.max
        );
    }
    let _ = writeln!(
        out,
        "\nProtocol errors: {}; server error events: {}.",
        v.protocol_errors, v.error_events
    );
    stalls_section(&mut out, s);
    let h = &s.host;
    let _ = writeln!(out, "\n## Host\n");
    let _ = writeln!(
        out,
        "{} ({} logical CPUs), kernel {}, vm.dirty_expire_centisecs {}, vm.dirty_ratio {}; output on {} ({}).",
        h.cpu_model,
        h.logical_cpus,
        h.kernel,
        h.dirty_expire_centisecs.map_or("?".to_string(), |v| v.to_string()),
        h.dirty_ratio.map_or("?".to_string(), |v| v.to_string()),
        h.output_filesystem.fs_type,
        h.output_filesystem.mount_point
    );
    let _ = writeln!(out, "\nCommand: `{}`", s.command_line);
    out
}

/// What the procfs sampler found, in sentences and a table.
fn stalls_section(out: &mut String, s: &Summary) {
    let _ = writeln!(out, "\n## Stalls and their causes\n");
    let sm = &s.sampler;
    if !sm.enabled {
        let _ = writeln!(
            out,
            "The procfs sampler was off (`--no-sampler`): stalls are not classified."
        );
        return;
    }
    let _ = writeln!(
        out,
        "The procfs sampler read every thread of the workers and the mock every {} ms ({} ticks, lateness p99 {:.2} ms, {:.4} cores).\n",
        sm.interval_ms, sm.ticks, sm.lateness_ms.p99, sm.cpu_cores
    );
    for i in &s.injections {
        let _ = writeln!(
            out,
            "- Injected into worker {}: {} ({:.0} ms), {}.",
            i.worker, i.kind, i.duration_ms, i.detail
        );
    }
    for e in &s.attribution.explanations {
        let _ = writeln!(out, "- {e}.");
    }
    let a = &s.attribution;
    if a.late_packets.total() + a.loop_stalls.total() == 0 {
        let _ = writeln!(
            out,
            "- No late packet and no loop stall over 20 ms to explain."
        );
    } else {
        let _ = writeln!(
            out,
            "\n| cause | late packets | loop stalls > 20 ms |\n|---|---|---|"
        );
        for (name, l, st) in [
            (
                "disk_wait",
                a.late_packets.disk_wait,
                a.loop_stalls.disk_wait,
            ),
            (
                "cpu_starvation",
                a.late_packets.cpu_starvation,
                a.loop_stalls.cpu_starvation,
            ),
            ("busy", a.late_packets.busy, a.loop_stalls.busy),
            (
                "send_backpressure",
                a.late_packets.send_backpressure,
                a.loop_stalls.send_backpressure,
            ),
            ("unknown", a.late_packets.unknown, a.loop_stalls.unknown),
        ] {
            let _ = writeln!(out, "| {name} | {l} | {st} |");
        }
    }
    for n in &sm.notes {
        let _ = writeln!(out, "\nNote: {n}.");
    }
    if !s.stalls.is_empty() {
        let _ = writeln!(
            out,
            "\n| process | thread (tid) | cause | start (s) | duration (ms) | wchan |\n|---|---|---|---|---|---|"
        );
        for e in s.stalls.iter().take(20) {
            let wchan: Vec<String> = e
                .wchan
                .iter()
                .map(|w| format!("{} {:.0}%", w.name, w.share * 100.0))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {}{} ({}) | {} | {:.3} | {:.0} | {} |",
                e.process,
                e.thread,
                if e.loop_thread { ", loop" } else { "" },
                e.tid,
                e.class.as_str(),
                e.start_s,
                e.duration_ms,
                if wchan.is_empty() {
                    "–".to_string()
                } else {
                    wchan.join(", ")
                }
            );
        }
        if s.stalls.len() > 20 {
            let _ = writeln!(
                out,
                "\n({} stalls in all; see summary.json.)",
                s.stalls.len()
            );
        }
    }
}

/// The short table printed on stdout at the end of a headless run.
pub fn table(s: &Summary) -> String {
    let mut out = String::new();
    let p = &s.pacing;
    let d = &p.deviation_ms;
    let _ = writeln!(out, "verdict            {}", verdict_line(s));
    for r in &s.verdict.reasons {
        let _ = writeln!(out, "                   - {r}");
    }
    let _ = writeln!(
        out,
        "layout             {} x {} sessions, {:.0} s, trace {:?}/{:?}",
        s.layout.processes,
        s.layout.sessions_per_process,
        s.settings.duration_s,
        s.settings.trace,
        s.settings.trace_writer
    );
    let _ = writeln!(
        out,
        "sessions           {} completed, {} incomplete, {} rejected of {}",
        s.sessions.completed, s.sessions.incomplete, s.sessions.rejected, s.sessions.configured
    );
    let _ = writeln!(
        out,
        "packets            {} sent, {} late (> {} ms), {} over 20 ms, {} sessions with a violation",
        p.packets, p.late_packets, p.late_threshold_ms, p.sends_over_20ms, p.sessions_with_violation
    );
    if p.unsent_packets > 0 {
        let _ = writeln!(
            out,
            "never sent         {} packets (their sessions failed while streaming)",
            p.unsent_packets
        );
    }
    let _ = writeln!(
        out,
        "deviation (ms)     p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
        d.p50, d.p90, d.p99, d.p999, d.max
    );
    for proc in &s.processes {
        let name = process_name(proc.role, proc.index);
        let _ = writeln!(
            out,
            "{name:<18} {:.3} cores, {:.1} MiB peak RSS, loop lag max {:.1} ms",
            proc.cpu_cores,
            mib(proc.peak_rss_bytes),
            proc.loop_lag_ms.max
        );
    }
    for e in &s.attribution.explanations {
        let _ = writeln!(out, "stall cause        {e}");
    }
    let _ = writeln!(out, "summary            {}/summary.json", s.output_dir);
    out
}
