//! Headless output on stderr: a line for each phase of the run (set-up, streaming, draining,
//! writing results) and a progress line every second on a terminal, every 5 s otherwise, so a
//! run is never silent for longer than that.

use crate::contract::figures::{ProtocolFigures, Value};
use crate::live::{p50_p95_signed, LiveState};

/// How often a progress line is printed when stderr is a terminal...
pub const TERMINAL_PROGRESS_INTERVAL_S: f64 = 1.0;
/// ...and when it is a file or a pipe (CI logs).
pub const PIPE_PROGRESS_INTERVAL_S: f64 = 5.0;

/// The progress interval for a stderr that is (or is not) a terminal.
pub fn progress_interval_s(stderr_is_terminal: bool) -> f64 {
    if stderr_is_terminal {
        TERMINAL_PROGRESS_INTERVAL_S
    } else {
        PIPE_PROGRESS_INTERVAL_S
    }
}

/// The phase lines, each printed once, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    SettingUp,
    Streaming,
    Draining,
}

/// `setting up 64 sessions (2 × 32) against ws://…`, with `shard 1 of 3: ` first for a shard
/// of a run over several hosts.
pub fn setting_up_line(live: &LiveState) -> String {
    let info = &live.info;
    format!(
        "{}setting up {} ({} × {}) against {}",
        shard_prefix(live),
        crate::sampler::attribution::plural(
            u64::from(info.processes) * u64::from(info.sessions_per_process),
            "session"
        ),
        info.processes,
        info.sessions_per_process,
        info.url
    )
}

/// `shard 1 of 3: `, or nothing on one host.
fn shard_prefix(live: &LiveState) -> String {
    live.info
        .shard
        .map_or(String::new(), |(i, n)| format!("shard {i} of {n}: "))
}

/// `--start-at`'s time in UTC, for the lines that wait for it.
fn start_at_text(live: &LiveState) -> String {
    live.info
        .start_at_unix_s
        .map_or(String::new(), crate::options::shard::rfc3339)
}

/// After a worker's sessions have set up: `32 of 64 sessions connected (1 of 2 workers set up)`,
/// with the first set-up error quoted when sessions failed.
pub fn connected_line(live: &LiveState) -> String {
    let total = u64::from(live.info.processes) * u64::from(live.info.sessions_per_process);
    let ready = live.workers.iter().filter(|w| w.ready.is_some()).count();
    // The workers still setting up count the sessions they have set up so far.
    let (connected, rejected, failed) = live.set_up_so_far();
    let mut line = format!("{connected} of {total} sessions connected");
    if ready < live.workers.len() {
        line += &format!(" ({ready} of {} workers set up)", live.workers.len());
    }
    if rejected > 0 {
        line += &format!(", {rejected} rejected by the server");
    }
    if failed > 0 {
        line += &format!(", {failed} failed to set up");
    }
    if let Some(error) = live.workers.iter().find_map(|w| w.first_error.as_deref()) {
        line += &format!("; first error: {error}");
    }
    line
}

/// When the gate is set; with `--start-at` still ahead, `waiting for the start at T (in 2.7 s), then streaming: …`.
pub fn streaming_line(live: &LiveState, now_s: f64) -> String {
    let wait = match live.countdown_s(now_s) {
        Some(left) if live.info.start_at_unix_s.is_some() => format!(
            "waiting for the start at {} (in {left:.1} s), then ",
            start_at_text(live)
        ),
        _ => String::new(),
    };
    format!(
        "{}{wait}streaming: {} of audio per session from the start gate",
        shard_prefix(live),
        crate::clock::seconds_text(live.info.duration_s)
    )
}

/// While the gate is ahead: `[start in   2.7 s] all 64 sessions set up; the gate opens at T`.
pub fn countdown_line(live: &LiveState, left_s: f64) -> String {
    format!(
        "[start in {left_s:>5.1} s] {}all {} set up; the gate opens at {}",
        shard_prefix(live),
        crate::sampler::attribution::plural(
            u64::from(live.info.processes) * u64::from(live.info.sessions_per_process),
            "session"
        ),
        start_at_text(live)
    )
}

pub fn draining_line(live: &LiveState, audio_sent: bool) -> String {
    let t = live.totals();
    let total = live.info.processes * live.info.sessions_per_process;
    if !audio_sent {
        // Sessions ended before their audio did (the server closed or failed them): that is
        // no drain, and their reasons come with the summary.
        return format!(
            "sessions ending early: {} of {total} ended before the end of their audio (why: in the summary)",
            t.sessions_done
        );
    }
    // A worker that died ends none of its sessions: they are not waited for.
    let per_worker = u64::from(live.info.sessions_per_process);
    let dead: Vec<usize> = (live.workers.iter().enumerate())
        .filter(|(_, w)| w.gone && !w.done)
        .map(|(k, _)| k)
        .collect();
    let waiting: u64 = live
        .workers
        .iter()
        .filter(|w| !w.gone || w.done)
        .map(|w| per_worker.saturating_sub(u64::from(w.progress.sessions_done)))
        .sum();
    let dead_note = match dead.as_slice() {
        [] => String::new(),
        [k] => format!(
            "; worker {k} exited early (its {} not waited for)",
            crate::sampler::attribution::plural(
                per_worker.saturating_sub(u64::from(live.workers[*k].progress.sessions_done)),
                "open session"
            )
        ),
        many => format!(
            "; workers {} exited early (their sessions not waited for)",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!(
        "draining: the audio is sent; waiting for the server to finish {waiting} of {total} session{}{dead_note}",
        if total == 1 { "" } else { "s" }
    )
}

/// Before the start gate: `[setup   3.0 s] 40 of 64 sessions connected, 1 of 2 workers set up`,
/// with the sessions refused or failed so far.
pub fn setup_progress_line(live: &LiveState, setup_s: f64) -> String {
    let ready = live.workers.iter().filter(|w| w.ready.is_some()).count();
    format!(
        "[setup {setup_s:>5.1} s] {}, {ready} of {} workers set up; waiting for the rest (at most --connect-timeout, then --recv-timeout per event)",
        set_up_so_far_text(live),
        live.workers.len()
    )
}

/// `40 of 64 sessions connected, 2 failed`: the sessions set up so far, with those refused or
/// failed when there are any (the set-up lines here and the dashboard's header).
pub fn set_up_so_far_text(live: &LiveState) -> String {
    let total = u64::from(live.info.processes) * u64::from(live.info.sessions_per_process);
    let (connected, rejected, failed) = live.set_up_so_far();
    let mut text = format!("{connected} of {total} sessions connected");
    if rejected > 0 {
        text += &format!(", {rejected} rejected");
    }
    if failed > 0 {
        text += &format!(", {failed} failed");
    }
    text
}

/// `[  10.0 s / 30 s] packets 4000  late 0  … sglang-omni p50/p95: accepted 1.2/1.9 ms (4000), ttfa –, …`
pub fn progress_line(live: &mut LiveState, now_s: f64) -> String {
    let t = live.totals();
    let window_lag_us = std::mem::take(&mut live.loop_lag_window_max_us);
    let stalls: Vec<String> = live
        .take_new_stalls()
        .iter()
        .map(crate::live::describe_stall)
        .collect();
    // The server's latency, as the protocol names it.
    let server = protocol_figures(&live.pooled_protocol());
    // Past the duration the sessions are ending: the clock stops at the duration, and the
    // duration is written as given (7.5 s is not "8 s").
    let elapsed_s = live.elapsed_s(now_s);
    let d = live.info.duration_s;
    // In hundredths at most (a WAV's 5.8280625 s reads 5.83 s, as on the streaming line).
    let total = crate::clock::seconds_text(d);
    let clock = if elapsed_s > d {
        format!("[{d:>6.1} s / {total}, ending sessions]")
    } else {
        format!("[{elapsed_s:>6.1} s / {total}]")
    };
    let cpu = live
        .sampler
        .as_ref()
        .and_then(|s| s.lock().ok().and_then(|l| l.cpu_split))
        .map_or(String::new(), |split| format!("  cpu {}", split.describe()));
    let start = live.pooled_start_lateness();
    let start = if start.count() == 0 {
        String::new()
    } else {
        format!("  start lateness p99 {:.1} ms", start.quantile_ms(0.99))
    };
    format!(
        "{clock} packets {}  late {}  sessions with late packets {}  worst deviation {:.1} ms{start}  loop lag {:.1} ms (max {:.1})  writer queue {} lines  {server}{}{cpu}",
        t.counts.packets,
        t.counts.late_packets,
        t.sessions_with_late_packets,
        t.counts.max_deviation_us as f64 / 1000.0,
        window_lag_us as f64 / 1000.0,
        t.loop_lag_max_us as f64 / 1000.0,
        t.queue_lines,
        if t.protocol_errors > 0 {
            format!("  protocol errors {}", t.protocol_errors)
        } else {
            String::new()
        }
    ) + &files_lost_text(&t).map(|f| format!("  {f}")).unwrap_or_default()
        + &live.silent_text(now_s).map(|s| format!("  {s}")).unwrap_or_default()
        + &match stalls.as_slice() {
        [] => String::new(),
        [one] => format!("  stall: {one}"),
        [.., last] => format!("  {} stalls, latest: {last}", stalls.len()),
    }
}

/// `Fun-ASR p50/p95: first update 412.0/530.1 ms (8), …; partials 312, finals 8, errors 0`:
/// the latencies with their sample counts, then the counts and rates.
fn protocol_figures(figures: &ProtocolFigures) -> String {
    let mut latencies = Vec::new();
    let mut others = Vec::new();
    for f in &figures.figures {
        match &f.value {
            Value::Latency(h) if h.count() == 0 => latencies.push(format!("{} –", f.name)),
            Value::Latency(h) => {
                latencies.push(format!("{} {} ({})", f.name, p50_p95_signed(h), h.count()))
            }
            Value::Count(n) => others.push(format!("{} {n}", f.name)),
            Value::Rate { events, seconds } if *seconds > 0.0 => {
                others.push(format!("{} {:.1}", f.name, *events as f64 / seconds))
            }
            Value::Rate { .. } => others.push(format!("{} –", f.name)),
        }
    }
    format!(
        "{} p50/p95: {}; {}",
        figures.title,
        latencies.join(", "),
        others.join(", ")
    )
}

/// "DISK FULL: 153 lines not written" once the files lose lines, or None.
pub fn files_lost_text(t: &crate::contract::telemetry::Progress) -> Option<String> {
    (t.lines_not_written > 0 || t.disk_full).then(|| {
        let what = if t.disk_full {
            "DISK FULL"
        } else {
            "write errors"
        };
        format!("{what}: {} lines not written", t.lines_not_written)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::telemetry::Telemetry;
    use crate::live::RunInfo;
    use crate::stats::DurationHistogram;

    fn live() -> LiveState {
        LiveState::new(RunInfo {
            processes: 2,
            sessions_per_process: 4,
            duration_s: 6.0,
            url: "ws://127.0.0.1:9/v1/realtime".to_string(),
            ..RunInfo::default()
        })
    }

    #[test]
    fn the_connected_line_counts_ready_workers_and_quotes_the_first_error_issue_14() {
        let mut l = live();
        l.workers[0].ready = Some((0, 0, 4));
        l.workers[0].first_error = Some("server frame is not a JSON event".to_string());
        let line = connected_line(&l);
        assert_eq!(
            line,
            "0 of 8 sessions connected (1 of 2 workers set up), 4 failed to set up; first error: server frame is not a JSON event"
        );
    }

    #[test]
    fn set_up_lines_count_the_sessions_of_workers_still_setting_up() {
        let mut l = live();
        l.apply(
            1,
            Telemetry::SetupProgress {
                connected: 2,
                rejected: 0,
                failed: 1,
            },
        );
        assert_eq!(
            setup_progress_line(&l, 3.0),
            "[setup   3.0 s] 2 of 8 sessions connected, 1 failed, 0 of 2 workers set up; waiting for the rest (at most --connect-timeout, then --recv-timeout per event)"
        );
        l.apply(
            0,
            Telemetry::Ready {
                pid: 1,
                connected: 4,
                rejected: 0,
                failed: 0,
                first_error: None,
            },
        );
        assert_eq!(
            connected_line(&l),
            "6 of 8 sessions connected (1 of 2 workers set up), 1 failed to set up"
        );
        // A progress message that comes after `ready` does not undo it.
        l.apply(
            0,
            Telemetry::SetupProgress {
                connected: 3,
                rejected: 0,
                failed: 0,
            },
        );
        assert_eq!(l.set_up_so_far(), (6, 0, 1));
    }

    #[test]
    fn progress_shows_sglang_omnis_figures_or_a_dash_without_samples_issue_14() {
        use crate::contract::figures::{ProtocolFigures, TranscriptTally};
        use crate::contract::worker::{TurnCounts, WorkerHistograms};
        let settings = crate::options::settings_of("native", &[]);
        let mut l = live();
        l.info.protocol_figures = ProtocolFigures::template(&settings);
        let line = progress_line(&mut l, 0.0);
        assert!(
            line.contains("sglang-omni p50/p95: accepted –, ttfa –, unit_lag –, response_ttfa –, output_gap_excess –; late sends 0, responses 0"),
            "{line}"
        );
        let mut hist = WorkerHistograms::default();
        hist.accepted.record_us(1_500);
        hist.serving.unit_lag.record_us(-79_000);
        l.workers[1].protocol = Some(ProtocolFigures::of(
            &settings,
            &hist,
            &TranscriptTally::default(),
            &TurnCounts::default(),
        ));
        let line = progress_line(&mut l, 0.0);
        assert!(line.contains("accepted 1.5/1.5 ms (1), ttfa –"), "{line}");
        assert!(line.contains("unit_lag -79.0/-79.0 ms (1)"), "{line}");
    }

    #[test]
    fn past_the_duration_the_clock_stops_and_says_sessions_are_ending_issue_13() {
        let mut l = LiveState::new(RunInfo {
            duration_s: 7.5,
            ..RunInfo::default()
        });
        l.start_s = Some(100.0);
        let line = progress_line(&mut l, 110.0);
        assert!(
            line.starts_with("[   7.5 s / 7.5 s, ending sessions]"),
            "{line}"
        );
        assert!(!line.contains("10.0 s"), "{line}");
        let line = progress_line(&mut l, 103.0);
        assert!(line.starts_with("[   3.0 s / 7.5 s]"), "{line}");
        // A WAV's length is said in hundredths, as the streaming line says it.
        l.info.duration_s = 5.8280625;
        let line = progress_line(&mut l, 103.0);
        assert!(line.starts_with("[   3.0 s / 5.83 s]"), "{line}");
    }

    #[test]
    fn progress_shows_the_start_lateness_once_sessions_started_issue_10() {
        let mut l = live();
        assert!(!progress_line(&mut l, 0.0).contains("start lateness"));
        let mut h = DurationHistogram::new();
        h.record_us(12_000);
        l.workers[0].start_lateness = Some(h);
        let line = progress_line(&mut l, 0.0);
        assert!(line.contains("start lateness p99 12.0 ms"), "{line}");
    }

    #[test]
    fn progress_shows_the_protocols_own_figures_in_place_of_the_servers_issue_11() {
        use crate::contract::figures::{ProtocolFigures, TranscriptTally};
        use crate::contract::worker::{TurnCounts, WorkerHistograms};
        let settings = crate::options::settings_of("funasr", &[]);
        let mut l = live();
        l.info.protocol_figures = ProtocolFigures::template(&settings);
        let line = progress_line(&mut l, 0.0);
        assert!(
            line.contains("Fun-ASR p50/p95: first update –, final after STOP –, response lag –; partials 0, finals 0, errors 0"),
            "{line}"
        );
        assert!(!line.contains("sglang-omni"), "{line}");
        let mut tally = TranscriptTally::default();
        tally.first_update.record_us(41_000);
        tally.response_lag.record_us(-20_000);
        tally.partials = 7;
        l.workers[0].protocol = Some(ProtocolFigures::of(
            &settings,
            &WorkerHistograms::default(),
            &tally,
            &TurnCounts::default(),
        ));
        let line = progress_line(&mut l, 0.0);
        assert!(line.contains("first update 41.0/41.0 ms (1)"), "{line}");
        assert!(line.contains("response lag -20.0/-20.0 ms (1)"), "{line}");
        assert!(line.contains("partials 7"), "{line}");
    }

    #[test]
    fn a_worker_that_stops_reporting_is_called_silent_issue_13() {
        let mut l = live();
        l.start_s = Some(100.0);
        for w in &mut l.workers {
            w.progress.time_s = 103.0;
        }
        assert!(!progress_line(&mut l, 103.5).contains("silent"));
        l.workers[1].progress.time_s = 106.0;
        let line = progress_line(&mut l, 106.2);
        assert!(line.contains("worker 0 silent 3.2 s"), "{line}");
        l.workers[1].progress.time_s = 102.0;
        let line = progress_line(&mut l, 106.2);
        assert!(
            line.contains("2 workers silent (worker 0 for 3.2 s)"),
            "{line}"
        );
        // One that finished is not silent.
        l.workers[0].done = true;
        l.workers[1].gone = true;
        assert!(!progress_line(&mut l, 106.2).contains("silent"));
    }

    #[test]
    fn a_dead_workers_sessions_are_not_waited_for_while_draining() {
        let mut l = live();
        let per = u64::from(l.info.sessions_per_process);
        let total = 2 * per;
        assert!(draining_line(&l, true).contains(&format!("finish {total} of {total}")));
        // Worker 1 died (the QA pass of 2026-12-07: still "8 of 8" after a SIGKILL).
        l.workers[1].gone = true;
        let line = draining_line(&l, true);
        assert!(
            line.contains(&format!(
                "finish {per} of {total} sessions; worker 1 exited early"
            )),
            "{line}"
        );
        // One that finished is no death.
        l.workers[1].done = true;
        l.workers[1].progress.sessions_done = l.info.sessions_per_process;
        assert!(!draining_line(&l, true).contains("exited early"));
    }

    #[test]
    fn lines_the_disk_did_not_take_are_shown_live_issue_13() {
        let mut l = live();
        assert!(!progress_line(&mut l, 0.0).contains("not written"));
        l.workers[0].progress.lines_not_written = 140;
        l.workers[1].progress.lines_not_written = 2;
        l.workers[1].progress.disk_full = true;
        let line = progress_line(&mut l, 0.0);
        assert!(line.contains("DISK FULL: 142 lines not written"), "{line}");
    }
}
