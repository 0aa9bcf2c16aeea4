//! What the workers' result files add up to: their histograms and counts pooled, their
//! sessions' outcomes and errors grouped by kind, one process row per worker (and the mock),
//! and the lines the run's files lost.

use super::{
    sampled, ErrorCount, FilesLost, MockFigures, ProcessSummary, RunRecord, ServerView, Sessions,
};
use crate::contract::mock::MockStats;
use crate::contract::worker::{SessionStatus, TurnCounts, WorkerHistograms, WorkerResult};
use crate::contract::Role;
use crate::looplag::LoopLagStats;
use crate::options::Settings;
use crate::pacing::PacketCounts;
use std::collections::BTreeMap;

/// What the workers' result files add up to.
#[derive(Default)]
pub(super) struct Pooled {
    pub(super) histograms: WorkerHistograms,
    pub(super) counts: PacketCounts,
    pub(super) sessions_with_late_packets: u64,
    pub(super) sessions: Sessions,
    pub(super) server: ServerView,
    pub(super) processes: Vec<ProcessSummary>,
    /// Reasons that name one worker (a missing result, a writer error).
    pub(super) reasons: Vec<String>,
    pub(super) missing: u64,
    pub(super) writer_errors: u64,
    pub(super) turns: TurnCounts,
    /// The protocol the server's errors say it speaks, when not the run's, and the first such
    /// error (`code: message`).
    pub(super) speaks_instead: Option<(crate::protocol::Protocol, String)>,
}

impl Pooled {
    pub(super) fn of(record: &RunRecord<'_>) -> Pooled {
        let settings = &record.plan.settings;
        let mut p = Pooled {
            sessions: Sessions {
                configured: settings.total_sessions(),
                ..Sessions::default()
            },
            ..Pooled::default()
        };
        // By kind (paths and numbers aside), each with its first message as the example.
        let mut errors: BTreeMap<String, (String, u64)> = BTreeMap::new();
        let mut codes: BTreeMap<String, (String, u64)> = BTreeMap::new();
        // The provisional summary (written at the start) has no result yet from any worker:
        // that is no worker's fault, and not one it may blame on them.
        if record.cancelled.as_deref() == Some(crate::summary::UNFINISHED) {
            p.sessions.incomplete += settings.total_sessions();
            // Nothing about the workers' packets is known: not pacing-qualified.
            p.missing = record.workers.len() as u64;
            let err = "the run did not finish: the session's outcome is not known".to_string();
            errors.insert(error_kind(&err), (err, settings.total_sessions()));
            for (index, (pid, _)) in record.workers.iter().enumerate() {
                p.processes.push(ProcessSummary::without_result(
                    Role::Worker,
                    Some(index as u32),
                    *pid,
                ));
            }
            p.sessions.errors = most_frequent(errors);
            return p;
        }
        for (index, (pid, result)) in record.workers.iter().enumerate() {
            match result {
                Some(r) if r.from_telemetry => {
                    p.add_from_telemetry(r, settings);
                    sessions_without_outcome(r.pid, settings, &mut errors);
                }
                Some(r) => {
                    p.add_worker(r, settings, &mut errors);
                    for s in &r.sessions {
                        p.turns.add(&s.turns);
                        if p.speaks_instead.is_none() {
                            let error = s.foreign_server_error.as_ref();
                            p.speaks_instead =
                                error.or(s.last_server_error.as_ref()).and_then(|e| {
                                    Some((settings.protocol.speaks_instead(e)?, e.clone()))
                                });
                        }
                        for (code, n) in &s.error_codes {
                            codes
                                .entry(code.clone())
                                .or_insert_with(|| (code.clone(), 0))
                                .1 += n;
                        }
                    }
                }
                None => {
                    p.add_missing(index as u32, *pid, settings);
                    sessions_without_outcome(*pid, settings, &mut errors);
                }
            }
        }
        p.sessions.incomplete += record.absent_sessions;
        p.missing += record.absent_workers;
        p.sessions.errors = most_frequent(errors);
        p.server.error_codes = most_frequent(codes);
        p.server.accepted_ms = sampled(&p.histograms.accepted);
        p.server.unit_lag_ms = sampled(&p.histograms.unit_lag);
        p.server.first_audio_ms = sampled(&p.histograms.first_audio);
        p
    }

    fn add_missing(&mut self, index: u32, pid: u32, settings: &Settings) {
        self.missing += 1;
        self.sessions.incomplete += u64::from(settings.sessions_per_process);
        self.reasons.push(format!(
            "worker {index} (pid {pid}) left no result file: its sessions' figures are missing"
        ));
        self.processes.push(ProcessSummary::without_result(
            Role::Worker,
            Some(index),
            pid,
        ));
    }

    /// A worker that left no result but whose last telemetry the conductor kept: its packets
    /// and histograms count (marked as such), its sessions are incomplete and unknown.
    fn add_from_telemetry(&mut self, r: &WorkerResult, settings: &Settings) {
        pool(&mut self.histograms, &r.histograms);
        self.counts.add(&r.counts);
        self.sessions_with_late_packets += u64::from(r.sessions_with_late_packets);
        self.server.protocol_errors += r.protocol_errors;
        self.missing += 1;
        self.sessions.incomplete += u64::from(settings.sessions_per_process);
        self.reasons.push(format!(
            "worker {} (pid {}) left no result file: its {} packets and histograms come from its last telemetry (≤ 1 s old), its sessions' outcomes are missing",
            r.index, r.pid, r.counts.packets
        ));
        self.processes.push(ProcessSummary::without_result(
            Role::Worker,
            Some(r.index),
            r.pid,
        ));
    }

    fn add_worker(
        &mut self,
        r: &WorkerResult,
        settings: &Settings,
        errors: &mut BTreeMap<String, (String, u64)>,
    ) {
        pool(&mut self.histograms, &r.histograms);
        self.counts.add(&r.counts);
        self.sessions_with_late_packets += u64::from(r.sessions_with_late_packets);
        self.server.protocol_errors += r.protocol_errors;
        self.server.error_events += r.error_events;
        for s in &r.sessions {
            match s.status {
                SessionStatus::Completed => self.sessions.completed += 1,
                SessionStatus::Incomplete => self.sessions.incomplete += 1,
                SessionStatus::Rejected => self.sessions.rejected += 1,
            }
            self.sessions.stopped_early += u64::from(s.stopped_early);
            if let Some(err) = &s.error {
                errors
                    .entry(error_kind(err))
                    .or_insert_with(|| (err.clone(), 0))
                    .1 += 1;
            }
        }
        if let Some(err) = &r.writer_error {
            self.writer_errors += 1;
            self.reasons.push(format!(
                "worker {}: {err}; its samples are incomplete",
                r.index
            ));
        }
        self.processes.push(ProcessSummary {
            role: Role::Worker,
            index: Some(r.index),
            pid: r.pid,
            cpu_cores: r.usage.cpu_cores,
            cpu_seconds: r.usage.cpu_seconds,
            system_cpu_seconds: r.usage.system_cpu_seconds,
            peak_rss_bytes: r.usage.peak_rss_bytes,
            streaming: r.usage.streaming,
            loop_lag_ms: r.loop_lag,
            result_present: true,
            writer_queue_peak_lines: Some(r.writer_queue_peak_lines),
            writer_queue_peak_bytes: Some(r.writer_queue_peak_bytes),
            pacing: Some(super::pacing::pacing_of(
                &r.histograms,
                r.counts,
                u64::from(r.sessions_with_late_packets),
                settings,
            )),
            first_injection_s: r.first_injection_s,
            telemetry_dropped: Some(r.telemetry_dropped),
            mock: None,
        });
    }
}

fn pool(into: &mut WorkerHistograms, from: &WorkerHistograms) {
    into.deviation.add(&from.deviation);
    into.websocket_send.add(&from.websocket_send);
    into.append_span.add(&from.append_span);
    into.accepted.add(&from.accepted);
    into.unit_lag.add(&from.unit_lag);
    into.first_audio.add(&from.first_audio);
    into.start_lateness.add(&from.start_lateness);
    into.turns.add(&from.turns);
    into.serving.add(&from.serving);
}

/// The sessions of a worker that left no result count as incomplete: say why among the
/// sessions' errors too, so that `sessions.errors` accounts for them.
fn sessions_without_outcome(
    pid: u32,
    settings: &Settings,
    errors: &mut BTreeMap<String, (String, u64)>,
) {
    let err = format!(
        "its worker (pid {pid}) exited without a result: the session's outcome is not known"
    );
    errors.entry(error_kind(&err)).or_insert_with(|| (err, 0)).1 +=
        u64::from(settings.sessions_per_process);
}

/// Why sessions did not complete, most frequent first (at most 10).
fn most_frequent(errors: BTreeMap<String, (String, u64)>) -> Vec<ErrorCount> {
    let mut errors: Vec<ErrorCount> = errors
        .into_values()
        .map(|(message, count)| ErrorCount { message, count })
        .collect();
    errors.sort_by(|a, b| b.count.cmp(&a.count).then(a.message.cmp(&b.message)));
    errors.truncate(10);
    errors
}

/// What errors are grouped by: the message with its paths and numbers taken out, so that 53
/// sessions failing with "cannot create files in …/w0-s0012: Too many open files" are one
/// error counted 53 times, not 53 errors.
fn error_kind(message: &str) -> String {
    let mut kind = String::with_capacity(message.len());
    for (i, word) in message.split(' ').enumerate() {
        if i > 0 {
            kind.push(' ');
        }
        if word.contains('/') && !word.contains("://") {
            kind.push('…');
            // Keep what ends the word, e.g. the colon of "…/w0-s0012:".
            kind.extend(
                word.chars()
                    .rev()
                    .take_while(|c| c.is_ascii_punctuation() && *c != '/'),
            );
            continue;
        }
        let mut in_number = false;
        for c in word.chars() {
            if c.is_ascii_digit() {
                if !in_number {
                    kind.push('#');
                }
                in_number = true;
            } else {
                kind.push(c);
                in_number = false;
            }
        }
    }
    kind
}

/// The worker results that exist.
pub(super) fn results<'r>(record: &'r RunRecord<'_>) -> impl Iterator<Item = &'r WorkerResult> {
    record.workers.iter().filter_map(|(_, r)| r.as_ref())
}

impl FilesLost {
    pub(super) fn of<'r>(results: impl Iterator<Item = &'r WorkerResult>) -> Option<FilesLost> {
        let mut lost = FilesLost::default();
        for r in results {
            lost.disk_full |= r.disk_full;
            if r.writer_error.is_some() {
                lost.workers += 1;
                lost.sample_lines += r.sample_lines_not_written;
            }
            for s in r.sessions.iter().filter(|s| s.lines_not_written > 0) {
                lost.sessions += 1;
                lost.trace_lines += s.lines_not_written;
            }
        }
        (lost != FilesLost::default()).then_some(lost)
    }
}

/// The least CPU time a process's kernel share is given for. The kernel splits a process's
/// CPU time into user and system by what it was doing at its timer ticks, and a process that
/// runs in short bursts on an otherwise idle CPU is seldom running at a tick: the mock of three
/// 8 s runs at 0.012 cores showed 0, 39 and 94 % in the kernel. Over a few CPU-seconds the split
/// agrees with a profile (1 × 256 meta for 20 s: 60 %, perf 61.6 %).
const MIN_CPU_S_FOR_SPLIT: f64 = 2.0;

impl ProcessSummary {
    /// How much of its CPU time the process spent in the kernel, in percent; `None` when that
    /// is not known, or when the process used too little CPU for the kernel's split to mean
    /// anything ([`MIN_CPU_S_FOR_SPLIT`]).
    pub fn kernel_share_pct(&self) -> Option<f64> {
        let system = self.system_cpu_seconds?;
        (self.cpu_seconds >= MIN_CPU_S_FOR_SPLIT).then(|| 100.0 * system / self.cpu_seconds)
    }

    /// A process that left no result: its figures are zero.
    fn without_result(role: Role, index: Option<u32>, pid: u32) -> Self {
        ProcessSummary {
            role,
            index,
            pid,
            cpu_cores: 0.0,
            cpu_seconds: 0.0,
            system_cpu_seconds: None,
            peak_rss_bytes: 0,
            streaming: None,
            loop_lag_ms: LoopLagStats::default(),
            result_present: false,
            writer_queue_peak_lines: None,
            writer_queue_peak_bytes: None,
            pacing: None,
            first_injection_s: None,
            telemetry_dropped: None,
            mock: None,
        }
    }
}

/// The built-in mock's process, with what its stats file says.
pub(super) fn mock_process(pid: u32, stats: Option<&MockStats>) -> ProcessSummary {
    let mut process = ProcessSummary::without_result(Role::Mock, None, pid);
    if let Some(s) = stats {
        process.cpu_cores = s.usage.cpu_cores;
        process.cpu_seconds = s.usage.cpu_seconds;
        process.system_cpu_seconds = s.usage.system_cpu_seconds;
        process.peak_rss_bytes = s.usage.peak_rss_bytes;
        process.loop_lag_ms = s.loop_lag_ms;
        process.result_present = true;
        process.mock = Some(MockFigures {
            sessions_served: s.sessions_served,
            sessions_rejected: s.sessions_rejected,
            appends_received: s.appends_received,
            protocol_errors: s.protocol_errors,
            arrival_deviation_ms: s.arrival_deviation_ms,
        });
    }
    process
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_grouped_by_kind_not_by_their_paths_or_numbers_issue_13() {
        let a =
            "cannot create files in /tmp/run/sessions/w0-s0012: Too many open files (os error 24)";
        let b =
            "cannot create files in /tmp/run/sessions/w1-s0003: Too many open files (os error 24)";
        assert_eq!(error_kind(a), error_kind(b));
        assert_eq!(
            error_kind(a),
            "cannot create files in …: Too many open files (os error #)"
        );
        assert_eq!(
            error_kind("the server stopped reading (send blocked 412 ms)"),
            error_kind("the server stopped reading (send blocked 398 ms)")
        );
        assert_ne!(
            error_kind("connection refused"),
            error_kind("connection reset")
        );
        let mut errors = BTreeMap::new();
        for e in [a, b, "connection reset"] {
            errors
                .entry(error_kind(e))
                .or_insert_with(|| (e.to_string(), 0))
                .1 += 1;
        }
        let grouped = most_frequent(errors);
        assert_eq!(grouped.len(), 2);
        assert_eq!((grouped[0].message.as_str(), grouped[0].count), (a, 2));
    }

    #[test]
    fn the_kernel_share_is_given_only_over_enough_cpu_time_to_mean_something() {
        let mut worker = ProcessSummary::without_result(Role::Worker, Some(0), 1);
        worker.cpu_seconds = 5.0;
        assert_eq!(worker.kernel_share_pct(), None, "not known");
        worker.system_cpu_seconds = Some(3.0);
        assert_eq!(worker.kernel_share_pct(), Some(60.0));
        // 0.1 CPU-s is a handful of timer ticks: no share rather than noise.
        worker.cpu_seconds = 0.1;
        worker.system_cpu_seconds = Some(0.09);
        assert_eq!(worker.kernel_share_pct(), None);
    }
}
