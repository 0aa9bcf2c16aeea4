//! `summary.md`: what a reader of an issue needs first — the verdict, the layout, the key
//! figures of the client and the server, the reasons and the command — then the machine, the
//! causes of stalls, and the details last.

use super::{
    error_codes, kernel_share, mib, percentiles, server_figures, turn_counts, turn_figures,
    verdict_line,
};
use crate::contract::process_name;
use crate::sampler::attribution::plural;
use crate::summary::Summary;
use std::fmt::Write as _;

/// Appends one line (writing into a String cannot fail).
macro_rules! md {
    ($out:expr) => { $out.push('\n') };
    ($out:expr, $($arg:tt)*) => {{ let _ = writeln!($out, $($arg)*); }};
}

/// `summary.md`.
pub fn markdown(s: &Summary) -> String {
    let mut out = String::new();
    headline(&mut out, s);
    super::multihost::section(&mut out, s);
    key_figures(&mut out, s);
    funasr_section(&mut out, s);
    serving_section(&mut out, s);
    md!(out, "Command: `{}`\n", s.command_line);
    host(&mut out, s);
    stalls_section(&mut out, s);
    details(&mut out, s);
    out
}

fn headline(out: &mut String, s: &Summary) {
    md!(out, "# duplexbench-tui run: {}\n", verdict_line(s));
    md!(
        out,
        "{} × {} sessions ({} in all), {} of audio each ({}) in {} ms packets, against {}{}; started {} ({} {}).\n",
        s.layout.processes,
        s.layout.sessions_per_process,
        s.layout.sessions_total,
        crate::clock::seconds_text(s.settings.duration_s),
        s.settings.audio,
        s.settings.packet_ms,
        s.settings.url,
        if s.settings.builtin_mock { " (built-in mock)" } else { "" },
        s.started_at,
        s.tool.name,
        s.tool.version
    );
    if !s.verdict.reasons.is_empty() {
        md!(out, "Why:\n");
        for r in &s.verdict.reasons {
            md!(out, "- {r}");
        }
        md!(out);
    }
}

/// The Fun-ASR benchmark's summary lines as it prints them, then ours under other names.
fn funasr_section(out: &mut String, s: &Summary) {
    let Some(f) = &s.funasr else {
        return;
    };
    md!(out, "## Fun-ASR benchmark figures\n");
    md!(
        out,
        "As `realtime_ws_benchmark.py` prints them (definitions: docs/funasr.md):\n\n```"
    );
    for line in crate::summary::funasr::summary_lines(f) {
        md!(out, "{line}");
    }
    md!(out, "```\n\nOurs, beside them:\n");
    for line in crate::summary::funasr::our_lines(f) {
        md!(out, "- {}", line.trim_start_matches("ours: "));
    }
    md!(out);
}

/// sglang-omni's serving metrics, in a few lines (every figure is in summary.json's `serving`).
fn serving_section(out: &mut String, s: &Summary) {
    let Some(serving) = &s.serving else {
        return;
    };
    md!(
        out,
        "## sglang-omni serving metrics
"
    );
    md!(
        out,
        "Under the names of sglang-omni's `serving_metrics.py`, all in summary.json's `serving` (definitions: docs/metrics.md):\n\n```"
    );
    for line in crate::summary::serving::lines(serving, s.sessions.stopped_early) {
        md!(out, "{line}");
    }
    md!(out, "```\n");
}

/// The key figures' table: the client's rows, the server's, and the peak of streams.
fn key_figures(out: &mut String, s: &Summary) {
    md!(out, "| figure | value |\n|---|---|");
    client_rows(out, s);
    server_rows(out, s);
    md!(
        out,
        "| peak overlapping streams | {} |\n",
        s.peak_overlapping_streams
    );
}

/// The client's rows: sessions, packets, send deviation and start lateness.
fn client_rows(out: &mut String, s: &Summary) {
    let p = &s.pacing;
    let c = &p.counts;
    let d = &p.deviation_ms;
    let ss = &s.sessions;
    md!(
        out,
        "| sessions | {} completed, {} incomplete, {} rejected of {}{} |",
        ss.completed,
        ss.incomplete,
        ss.rejected,
        ss.configured,
        if ss.stopped_early > 0 {
            format!(
                "; {} of them stopped early (before their input's end)",
                ss.stopped_early
            )
        } else {
            String::new()
        }
    );
    if s.unfinished() {
        // The provisional summary of a killed run: its zeros are no count.
        md!(
            out,
            "| packets | not known: {} |",
            super::table::UNFINISHED_PACKETS
        );
        return;
    }
    md!(
        out,
        "| packets | {} sent, {} late (> {} ms) in {} sessions, {} slow (> {} ms){} |",
        c.packets,
        c.late_packets,
        p.late_threshold_ms,
        p.sessions_with_late_packets,
        c.slow_sends,
        p.slow_send_threshold_ms,
        if c.unsent_packets > 0 {
            format!(", {} never sent", c.unsent_packets)
        } else {
            String::new()
        }
    );
    if c.packets == 0 {
        // Zeros here would read as perfect pacing.
        md!(
            out,
            "| client deviation | no samples (no packet was sent) |"
        );
        return;
    }
    md!(
        out,
        "| client deviation p50 / p99 / p99.9 / max | {:.2} / {:.2} / {:.2} / {:.2} ms |",
        d.p50,
        d.p99,
        d.p999,
        d.max
    );
    let l = &p.start_lateness_ms;
    md!(
        out,
        "| start lateness after the gate p50 / p99 / max | {:.2} / {:.2} / {:.2} ms |",
        l.p50,
        l.p99,
        l.max
    );
}

/// The server's rows: its latencies, errors, error codes and turns.
fn server_rows(out: &mut String, s: &Summary) {
    for (name, q) in server_figures(s) {
        md!(
            out,
            "| server {name} p50 / p99 / max | {} |",
            percentiles(q)
        );
    }
    md!(
        out,
        "| server protocol errors / error events | {} / {} |",
        s.server.protocol_errors,
        s.server.error_events
    );
    if let Some(codes) = error_codes(s) {
        md!(out, "| server error codes | {codes} |");
    }
    if let Some((name, figures, t)) = turn_figures(s) {
        md!(out, "| {name} turns | {} |", turn_counts(t));
        for (figure, q) in figures {
            md!(
                out,
                "| {name} {figure} p50 / p99 / max | {} |",
                percentiles(Some(q))
            );
        }
    }
}

fn host(out: &mut String, s: &Summary) {
    let h = &s.host;
    md!(out, "## Host\n");
    md!(
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
}

/// What the procfs sampler found, in sentences and a table.
fn stalls_section(out: &mut String, s: &Summary) {
    md!(out, "\n## Stalls and their causes\n");
    if s.unfinished() {
        md!(
            out,
            "The run did not finish: what the procfs sampler found is not known (its samples are in `samples/`)."
        );
        return;
    }
    if s.rebuilt() && s.settings.sample_interval_ms.is_some() {
        // The sampler ran; its findings were the conductor's, lost with its summary.
        md!(
            out,
            "The procfs sampler ran, but its findings were lost with the run's own summary (its conductor was killed, or the disk refused it): stalls are not classified; the workers' own figures (late packets, loop lag) are above."
        );
        return;
    }
    if !s.sampler.enabled {
        md!(
            out,
            "The procfs sampler was off (`--no-sampler`): stalls are not classified."
        );
        return;
    }
    sampler_line(out, s);
    cpu_split(out, s);
    server_stalls_table(out, s);
    for i in &s.injections {
        md!(
            out,
            "- Injected into worker {}: {} ({:.0} ms), {}.",
            i.worker,
            i.kind,
            i.duration_ms,
            i.detail
        );
    }
    for e in &s.attribution.explanations {
        md!(out, "- {e}.");
    }
    attribution_table(out, s);
    for n in &s.sampler.notes {
        md!(out, "\nNote: {n}.");
    }
    stalls_table(out, s);
}

/// What the sampler read, how often, and what it cost.
fn sampler_line(out: &mut String, s: &Summary) {
    let sm = &s.sampler;
    md!(
        out,
        "The procfs sampler read every thread of the workers{} every {} ms ({} ticks, lateness p99 {:.2} ms, {:.4} cores).\n",
        match &sm.server {
            Some(w) => format!(" and of the server (pid {}, {})", w.pid, w.found_by),
            None => String::new(),
        },
        sm.interval_ms,
        sm.ticks,
        sm.lateness_ms.p99,
        sm.cpu_cores
    );
}

/// The CPU split between the client, the server and other processes.
fn cpu_split(out: &mut String, s: &Summary) {
    let load = &s.sampler.host_load;
    if load.seconds > 0 {
        let server = match load.server_cores_mean {
            Some(mean) => format!(
                "server {mean:.2} (at most {:.2})",
                load.server_cores_max.unwrap_or(mean)
            ),
            None => "server not watched (counted as other)".to_string(),
        };
        let steal = load.steal_note();
        md!(
            out,
            "CPU split, cores on average over {} s: client {:.2}, {server}, other processes {:.2} (at most {:.2}; over {} cores in {} s){steal}; the box {:.2}.\n",
            load.seconds,
            load.client_cores_mean,
            load.foreign_cores_mean,
            load.foreign_cores_max,
            load.threshold_cores,
            load.seconds_over_threshold,
            load.host_cores_mean
        );
    }
}

/// The server's stalls, one row each.
fn server_stalls_table(out: &mut String, s: &Summary) {
    if !s.server_stalls.is_empty() {
        md!(
            out,
            "| server stall at (s) | latency | peak (ms) | typical (ms) | held back (ms) | the server's own episodes |\n|---|---|---|---|---|---|"
        );
        for st in &s.server_stalls {
            md!(
                out,
                "| {:.1} | {} | {:.0} | {:.0} | {:.0} | {} |",
                st.run_time_s,
                st.latency,
                st.peak_lag_ms,
                st.typical_lag_ms,
                st.size_ms,
                if st.server_episodes.is_empty() {
                    "none over 20 ms".to_string()
                } else {
                    st.server_episodes.join(", ")
                }
            );
        }
        md!(out, "");
    }
}

/// What the late packets and loop-lag windows fell into, by cause.
fn attribution_table(out: &mut String, s: &Summary) {
    let a = &s.attribution;
    if a.late_packets.total() + a.loop_lag_windows.total() == 0 {
        md!(
            out,
            "- No late packet and no loop-lag window over 20 ms to explain."
        );
    } else {
        md!(
            out,
            "\n| cause | late packets | loop-lag windows > 20 ms |\n|---|---|---|"
        );
        for (name, l, st) in [
            (
                "disk_wait",
                a.late_packets.disk_wait,
                a.loop_lag_windows.disk_wait,
            ),
            (
                "cpu_starvation",
                a.late_packets.cpu_starvation,
                a.loop_lag_windows.cpu_starvation,
            ),
            ("busy", a.late_packets.busy, a.loop_lag_windows.busy),
            (
                "stopped",
                a.late_packets.stopped,
                a.loop_lag_windows.stopped,
            ),
            (
                "send_backpressure",
                a.late_packets.send_backpressure,
                a.loop_lag_windows.send_backpressure,
            ),
            (
                "foreign_load",
                a.late_packets.foreign_load,
                a.loop_lag_windows.foreign_load,
            ),
            (
                "unknown",
                a.late_packets.unknown,
                a.loop_lag_windows.unknown,
            ),
        ] {
            md!(out, "| {name} | {l} | {st} |");
        }
    }
}

/// The first stalls, one row each.
fn stalls_table(out: &mut String, s: &Summary) {
    if !s.stalls.is_empty() {
        md!(
            out,
            "\n| process | thread (tid) | cause | start (s) | duration (ms) | wchan |\n|---|---|---|---|---|---|"
        );
        for e in s.stalls.iter().take(20) {
            let wchan: Vec<String> = e
                .wchan
                .iter()
                .map(|w| format!("{} {:.0}%", w.name, w.share * 100.0))
                .collect();
            md!(
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
            md!(
                out,
                "\n({} stalls in all; see summary.json.)",
                s.stalls.len()
            );
        }
    }
}

/// The rest: why sessions failed, the processes, the mock, the timing of sends, the files.
fn details(out: &mut String, s: &Summary) {
    md!(out, "\n## Details\n");
    for e in &s.sessions.errors {
        md!(out, "- {} × {}", e.count, e.message);
    }
    if !s.sessions.errors.is_empty() {
        md!(out);
    }
    let p = &s.pacing;
    md!(
        out,
        "WebSocket send p50 / p99 / max {:.3} / {:.3} / {:.3} ms; append span {:.3} / {:.3} / {:.3} ms.\n",
        p.websocket_send_ms.p50,
        p.websocket_send_ms.p99,
        p.websocket_send_ms.max,
        p.append_span_ms.p50,
        p.append_span_ms.p99,
        p.append_span_ms.max
    );
    md!(
        out,
        "| process | CPU (cores) | peak RSS (MiB) | loop lag p99 / max (ms) | late packets | deviation p99 / max (ms) |\n|---|---|---|---|---|---|"
    );
    for proc in &s.processes {
        let name = process_name(proc.role, proc.index);
        let (late, dev) =
            proc.pacing
                .as_ref()
                .map_or(("–".to_string(), "–".to_string()), |p| {
                    (
                        p.counts.late_packets.to_string(),
                        format!("{:.2} / {:.2}", p.deviation_ms.p99, p.deviation_ms.max),
                    )
                });
        md!(
            out,
            "| {name}{} | {:.3}{} | {:.1} | {:.2} / {:.2} | {late} | {dev} |",
            if proc.result_present {
                ""
            } else {
                " (no result)"
            },
            proc.cpu_cores,
            kernel_share(proc),
            mib(proc.peak_rss_bytes),
            proc.loop_lag_ms.p99,
            proc.loop_lag_ms.max
        );
    }
    if s.processes.iter().any(|p| p.kernel_share_pct().is_some()) {
        md!(
            out,
            "\nThe share in the kernel is CPU time spent in system calls and the network stack they run (the loopback TCP path is most of it); the rest is user space."
        );
    }
    if let Some(line) = streaming_line(s) {
        md!(out, "\n{line}");
    }
    if let Some(m) = s.processes.iter().find_map(|p| p.mock.as_ref()) {
        let a = &m.arrival_deviation_ms;
        md!(
            out,
            "\nThe mock served {} ({} refused), received {}, saw {}; arrival deviation p50 / p99 / max {:.2} / {:.2} / {:.2} ms.",
            plural(m.sessions_served, "session"), m.sessions_rejected, plural(m.appends_received, "append"), plural(m.protocol_errors, "protocol error"), a.p50, a.p99, a.max
        );
    }
    md!(
        out,
        "\nFiles: `summary.json` (every figure), `samples/worker-K.csv` (one line per packet), `sessions/wK-sNNNN/` (receipts, and traces when kept), `workers/` (configs, results, logs){}; see docs/files.md.",
        if s.settings.builtin_mock { ", `mock-stats.json`" } else { "" }
    );
}

/// The workers' CPU while they streamed (gate to last packet), when every worker measured it.
fn streaming_line(s: &Summary) -> Option<String> {
    let cpu = super::streaming_cpu(s)?;
    let (cores, per_session_s) = (cpu.cores, cpu.per_session_s());
    Some(format!(
        "While streaming (start gate to last packet; set-up and closing left out) the workers used {cores:.3} cores, {per_session_s:.6} CPU-s per session-second."
    ))
}
