//! The result model of a run: one struct that feeds `summary.json`, `summary.md`, the final
//! table and the exit code, built from the workers' result files and the mock's stats.
//! docs/summary.md documents every key; docs/summary.schema.json is its JSON Schema.
//!
//! * `funasr`: the Fun-ASR benchmark's figures, for runs of that protocol.
//! * `multihost`: the start gate, the streaming window, the clock's sync state, a merge's shards.

pub mod funasr;
pub mod multihost;
pub mod server_stalls;

use crate::clock::ClockAnchor;
use crate::contract::worker::{
    SessionStatus, TurnCounts, TurnHistograms, WorkerHistograms, WorkerResult,
};
use crate::contract::Role;
use crate::host::HostFacts;
use crate::looplag::LoopLagStats;
use crate::mock::stats::MockStats;
use crate::options::{RunPlan, Settings};
use crate::pacing::PacketCounts;
use crate::sampler::attribution::plural;
use crate::sampler::attribution::{self, Attribution, WorkerWindows};
use crate::sampler::server_stall::{self, ServerStall};
use crate::sampler::{Episode, SamplerSummary, STALL_MS};
use crate::stats::{DurationHistogram, FullPercentiles, ShortPercentiles};
use crate::sys::clock_sync::ClockSync;
pub use crate::verdict::Verdict;
use crate::verdict::{self, Facts};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// 2: the pacing vocabulary (`slow_sends` beside `slow_send_threshold_ms`,
/// `sessions_with_late_packets`, `unsent_packets`, `max_deviation_us`), server percentiles
/// `null` without samples, `send_backpressure` in the attribution.
pub const SCHEMA_VERSION: u32 = 2;

/// duplexbench-tui run summary (`summary.json`); every key is documented in docs/summary.md.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub schema_version: u32,
    pub tool: Tool,
    pub command_line: String,
    pub cancelled: bool,
    pub started_at: String,
    pub wall_seconds: f64,
    pub clock_anchor: ClockAnchor,
    pub verdict: Verdict,
    pub layout: Layout,
    pub settings: Settings,
    pub host: HostFacts,
    pub pacing: Pacing,
    pub sessions: Sessions,
    /// Lines the run's files did not take (a full disk, a quota, an I/O error); absent when
    /// every line was written. The figures above come from the workers' counters, not the files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_lost: Option<FilesLost>,
    pub peak_overlapping_streams: u64,
    pub processes: Vec<ProcessSummary>,
    pub server: ServerView,
    /// The turns of an OpenAI Realtime run (`--protocol openai`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openai: Option<TurnSummary>,
    /// The turns of a vLLM run (`--protocol vllm`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm: Option<TurnSummary>,
    /// Episodes of 20 ms or more of any watched thread (at most 200, by start time).
    pub stalls: Vec<Episode>,
    /// What the late packets and loop stalls fell into.
    pub attribution: Attribution,
    /// Times the server's reply latency jumped while the client was clean (docs/sampler.md).
    #[serde(default)]
    pub server_stalls: Vec<ServerStall>,
    pub sampler: SamplerSummary,
    /// Faults injected with `--inject-*`.
    pub injections: Vec<InjectionRecord>,
    /// Fun-ASR's benchmark figures, under its names (`--protocol funasr`; docs/funasr.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub funasr: Option<funasr::FunasrSection>,
    /// `--start-at`: when the start gate was to open and when it did (absent without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_gate: Option<multihost::StartGate>,
    /// The first packet's send to the last one's, on this host's wall clock (absent when no
    /// packet was sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming_window: Option<multihost::StreamingWindow>,
    /// What the kernel said about its clock at the start (adjtimex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_sync: Option<ClockSync>,
    /// A merged run (`merge`): its shards and their overlap (absent for a run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<multihost::MergeSection>,
    pub output_dir: String,
}

/// A fault injected into a worker.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InjectionRecord {
    pub worker: u32,
    pub kind: String,
    pub start_s: f64,
    pub duration_ms: f64,
    pub detail: String,
}

/// At most this many stalls are listed in the summary.
const MAX_STALLS_LISTED: usize = 200;

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Layout {
    pub processes: u32,
    pub sessions_per_process: u32,
    pub sessions_total: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pacing {
    /// `packets`, `late_packets`, `slow_sends`, `unsent_packets`, `max_deviation_us`.
    #[serde(flatten)]
    pub counts: PacketCounts,
    pub late_threshold_ms: u32,
    pub slow_send_threshold_ms: u32,
    pub sessions_with_late_packets: u64,
    /// |deviation| of every packet from its schedule; `max` is exact.
    pub deviation_ms: FullPercentiles,
    /// Per session, how long after its start gate its packet 0 left. Deviation is measured
    /// from packet 0's actual send, so this is the one delay deviation cannot show (with one
    /// gate for 1024 sessions the last one leaves several ms late).
    pub start_lateness_ms: FullPercentiles,
    pub websocket_send_ms: ShortPercentiles,
    pub append_span_ms: ShortPercentiles,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sessions {
    pub configured: u64,
    pub completed: u64,
    pub incomplete: u64,
    pub rejected: u64,
    /// Sessions stopped before their last packet because the run was cancelled.
    pub stopped_early: u64,
    /// Why sessions did not complete, most frequent first (at most 10 distinct messages).
    pub errors: Vec<ErrorCount>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FilesLost {
    /// A write found the disk (or a quota) full (ENOSPC, EDQUOT).
    pub disk_full: bool,
    /// Trace and receipt lines not written, over `sessions` sessions.
    pub trace_lines: u64,
    pub sessions: u64,
    /// Samples-file lines not written, over `workers` workers.
    pub sample_lines: u64,
    pub workers: u64,
}

impl FilesLost {
    fn of<'r>(results: impl Iterator<Item = &'r WorkerResult>) -> Option<FilesLost> {
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

    /// The verdict's reason: what was lost, that the figures are whole, what to do.
    fn reason(&self, output_dir: &str) -> String {
        let what = if self.disk_full {
            format!("the disk holding {output_dir} is full (No space left on device)")
        } else {
            format!("files under {output_dir} could not be written")
        };
        format!(
            "{what}: {} trace/receipt lines of {} and {} sample lines of {} were not written; the counts and percentiles here come from the workers' counters and are whole; free space, or trace less (--trace meta or off)",
            self.trace_lines,
            plural(self.sessions, "session"),
            self.sample_lines,
            plural(self.workers, "worker")
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorCount {
    pub message: String,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessSummary {
    pub role: Role,
    /// The worker's index (absent for the mock).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub index: Option<u32>,
    pub pid: u32,
    pub cpu_cores: f64,
    pub cpu_seconds: f64,
    pub peak_rss_bytes: u64,
    pub loop_lag_ms: LoopLagStats,
    /// False when the process left no result file; its figures are then zero.
    pub result_present: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub writer_queue_peak_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub writer_queue_peak_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pacing: Option<Pacing>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stall_injected_at_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub telemetry_dropped: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mock: Option<MockFigures>,
}

/// What the built-in mock saw.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MockFigures {
    pub sessions_served: u64,
    pub sessions_rejected: u64,
    pub appends_received: u64,
    pub protocol_errors: u64,
    /// Arrival of every packet against its session's first arrival.
    pub arrival_deviation_ms: ShortPercentiles,
}

/// The server as the client saw it; a figure with no sample is `null`, not zero.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerView {
    /// From a packet's send start to its `sglang.input_audio.accepted`.
    pub accepted_ms: Option<ShortPercentiles>,
    /// From the send start of the packet completing a unit to its `sglang.unit.done`.
    pub unit_lag_ms: Option<ShortPercentiles>,
    /// From packet 0's send start to the first audio delta.
    pub first_audio_ms: Option<ShortPercentiles>,
    /// Frames that were not JSON events, binary frames, oversized messages.
    pub protocol_errors: u64,
    /// `error` events the server sent.
    pub error_events: u64,
    /// ...by their code, most frequent first.
    #[serde(default)]
    pub error_codes: Vec<ErrorCount>,
}

/// The turns of a dialect that has them, anchored on the client's audio clock: a turn's input
/// ends at the send start of the packet that completes it (the commit's, or the one holding
/// the moment the server's VAD says speech stopped). A figure with no sample is `null`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnSummary {
    #[serde(flatten)]
    pub counts: TurnCounts,
    /// From the end of a turn's input to its first transcript (or text) delta.
    pub first_text_after_end_ms: Option<ShortPercentiles>,
    /// From a turn's first packet to its first transcript delta, when that came before the
    /// turn's input ended (a streaming transcription).
    pub first_text_after_start_ms: Option<ShortPercentiles>,
    /// From the end of a turn's input to its first audio delta.
    pub first_audio_after_end_ms: Option<ShortPercentiles>,
    /// From a turn's first packet to its first audio delta, when it came before the end.
    pub first_audio_after_start_ms: Option<ShortPercentiles>,
    /// From the end of a turn's input to `response.done` / `transcription.done`.
    pub done_after_end_ms: Option<ShortPercentiles>,
    /// Server VAD: from the send of the packet holding the audio where speech stopped (the
    /// event's `audio_end_ms`) to `speech_stopped`.
    pub speech_stopped_after_audio_ms: Option<ShortPercentiles>,
    /// Transcript deltas per second within an answer (first to last delta).
    pub text_deltas_per_s: Option<f64>,
}

impl TurnSummary {
    fn of(counts: TurnCounts, h: &TurnHistograms) -> TurnSummary {
        TurnSummary {
            counts,
            first_text_after_end_ms: sampled(&h.first_text_after_end),
            first_text_after_start_ms: sampled(&h.first_text_after_start),
            first_audio_after_end_ms: sampled(&h.first_audio_after_end),
            first_audio_after_start_ms: sampled(&h.first_audio_after_start),
            done_after_end_ms: sampled(&h.done_after_end),
            speech_stopped_after_audio_ms: sampled(&h.speech_stopped),
            text_deltas_per_s: (counts.text_span_s > 0.0).then(|| {
                ((counts.text_intervals as f64 / counts.text_span_s) * 100.0).round() / 100.0
            }),
        }
    }
}

/// Everything the conductor knows at the end of a run.
pub struct RunRecord<'a> {
    pub plan: &'a RunPlan,
    pub host: HostFacts,
    pub started_at: String,
    pub anchor: ClockAnchor,
    pub wall_seconds: f64,
    pub cancelled: Option<String>,
    /// Per worker: its pid and result file, if it wrote one.
    pub workers: Vec<(u32, Option<WorkerResult>)>,
    pub mock: Option<(u32, Option<MockStats>)>,
    /// Problems the conductor saw itself (a worker that died, a mock without stats...).
    pub notes: Vec<String>,
    /// The sampler's episodes and figures (`None` with `--no-sampler`).
    pub sampler: Option<(Vec<Episode>, SamplerSummary)>,
    /// When the start gate was set to open (`CLOCK_MONOTONIC`), if it was.
    pub gate_s: Option<f64>,
    /// The clock's sync state at the start.
    pub clock_sync: Option<ClockSync>,
    /// Sessions and workers with no result at all (a merge's missing shards): counted as
    /// incomplete and missing; `notes` says why.
    pub absent_sessions: u64,
    pub absent_workers: u64,
}

fn pacing_of(
    h: &WorkerHistograms,
    counts: PacketCounts,
    sessions_with_late_packets: u64,
    settings: &Settings,
) -> Pacing {
    let mut deviation_ms = h.deviation.full();
    // The exact maximum, not the top of its histogram bucket.
    deviation_ms.max = counts.max_deviation_us as f64 / 1000.0;
    Pacing {
        counts,
        late_threshold_ms: settings.late_threshold_ms,
        slow_send_threshold_ms: settings.slow_send_threshold_ms,
        sessions_with_late_packets,
        deviation_ms,
        start_lateness_ms: h.start_lateness.full(),
        websocket_send_ms: h.websocket_send.short(),
        append_span_ms: h.append_span.short(),
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
}

/// Percentiles of `h`, or `None` when it holds no sample.
fn sampled(h: &DurationHistogram) -> Option<ShortPercentiles> {
    (h.count() > 0).then(|| h.short())
}

/// The largest number of sessions streaming at once, over every worker.
pub fn peak_overlap(intervals: impl Iterator<Item = (f64, f64)>) -> u64 {
    let mut edges: Vec<(f64, i64)> = intervals.flat_map(|(a, b)| [(a, 1), (b, -1)]).collect();
    // At equal times, a start counts before an end: touching streams overlap.
    edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(y.1.cmp(&x.1)));
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, step) in edges {
        now += step;
        peak = peak.max(now);
    }
    peak as u64
}

/// What the workers' result files add up to.
#[derive(Default)]
struct Pooled {
    histograms: WorkerHistograms,
    counts: PacketCounts,
    sessions_with_late_packets: u64,
    sessions: Sessions,
    server: ServerView,
    processes: Vec<ProcessSummary>,
    /// Reasons that name one worker (a missing result, a writer error).
    reasons: Vec<String>,
    missing: u64,
    writer_errors: u64,
    turns: TurnCounts,
}

impl Pooled {
    fn of(record: &RunRecord<'_>) -> Pooled {
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
        for (index, (pid, result)) in record.workers.iter().enumerate() {
            match result {
                Some(r) if r.from_telemetry => p.add_from_telemetry(r, settings),
                Some(r) => {
                    p.add_worker(r, settings, &mut errors);
                    for s in &r.sessions {
                        p.turns.add(&s.turns);
                        for (code, n) in &s.error_codes {
                            codes
                                .entry(code.clone())
                                .or_insert_with(|| (code.clone(), 0))
                                .1 += n;
                        }
                    }
                }
                None => p.add_missing(index as u32, *pid, settings),
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
            peak_rss_bytes: r.usage.peak_rss_bytes,
            loop_lag_ms: r.loop_lag,
            result_present: true,
            writer_queue_peak_lines: Some(r.writer_queue_peak_lines),
            writer_queue_peak_bytes: Some(r.writer_queue_peak_bytes),
            pacing: Some(pacing_of(
                &r.histograms,
                r.counts,
                u64::from(r.sessions_with_late_packets),
                settings,
            )),
            stall_injected_at_s: r.stall_injected_at_s,
            telemetry_dropped: Some(r.telemetry_dropped),
            mock: None,
        });
    }
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
fn results<'r>(record: &'r RunRecord<'_>) -> impl Iterator<Item = &'r WorkerResult> {
    record.workers.iter().filter_map(|(_, r)| r.as_ref())
}

fn attribution_of(
    record: &RunRecord<'_>,
    episodes: &[Episode],
    foreign: &[[f64; 2]],
    sampled: bool,
) -> Attribution {
    let windows: Vec<WorkerWindows<'_>> = results(record)
        .map(|r| WorkerWindows {
            index: r.index,
            pid: r.pid,
            late_packets: &r.late_packet_windows,
            loop_stalls: &r.loop_stall_windows,
            send_blocked: &r.send_blocked_windows,
        })
        .collect();
    attribution::attribute(sampled.then_some(episodes), foreign, &windows)
}

fn injections_of(record: &RunRecord<'_>) -> Vec<InjectionRecord> {
    results(record)
        .flat_map(|r| {
            r.injections.iter().map(|i| InjectionRecord {
                worker: r.index,
                kind: i.kind.clone(),
                start_s: i.start_s,
                duration_ms: ((i.end_s - i.start_s) * 1e6).round() / 1000.0,
                detail: i.detail.clone(),
            })
        })
        .collect()
}

impl Summary {
    pub fn build(record: RunRecord<'_>) -> Summary {
        let settings = &record.plan.settings;
        let mut pooled = Pooled::of(&record);
        if let Some((pid, stats)) = &record.mock {
            pooled.processes.push(mock_process(*pid, stats.as_ref()));
        }
        let intervals = || {
            results(&record).flat_map(|r| {
                r.sessions
                    .iter()
                    .filter_map(|s| Some((s.first_send_s?, s.last_send_s?)))
            })
        };
        let peak = peak_overlap(intervals());
        let streaming_window = multihost::StreamingWindow::of(&record.anchor, intervals());
        let start_gate = settings.start_at_unix_s.map(|at| {
            let first_packet_s = intervals().map(|(a, _)| a).reduce(f64::min);
            multihost::start_gate(
                at,
                &record.anchor,
                record.gate_s,
                first_packet_s,
                settings.late_threshold_ms,
            )
        });
        let pacing = pacing_of(
            &pooled.histograms,
            pooled.counts,
            pooled.sessions_with_late_packets,
            settings,
        );
        let funasr = funasr::section(results(&record), settings);
        let mut verdict = verdict::judge(&Facts {
            unpaced: settings.no_pace,
            client_errors: funasr.as_ref().map_or(0, |f| f.summary.errors),
            counts: pooled.counts,
            sessions_with_late_packets: pooled.sessions_with_late_packets,
            late_threshold_ms: settings.late_threshold_ms,
            sessions_configured: pooled.sessions.configured,
            incomplete: pooled.sessions.incomplete,
            rejected: pooled.sessions.rejected,
            stopped_early: pooled.sessions.stopped_early,
            protocol_errors: pooled.server.protocol_errors,
            most_common_error: pooled.sessions.errors.first().map(|e| e.message.as_str()),
            cancelled: record.cancelled.as_deref(),
            missing_results: pooled.missing,
            writer_errors: pooled.writer_errors,
        });
        let output_dir = record.plan.output_dir.display().to_string();
        let files_lost = FilesLost::of(results(&record));
        if let Some(lost) = &files_lost {
            // First: it explains the incomplete sessions and the cut files the other reasons name.
            verdict.reasons.insert(0, lost.reason(&output_dir));
        }
        verdict.reasons.append(&mut pooled.reasons);
        verdict.reasons.extend(record.notes.iter().cloned());
        if settings.shard.is_some() || start_gate.is_some() {
            let who = settings.shard.as_ref().map_or("this run".to_string(), |s| {
                format!("shard {} of {}", s.index, s.count)
            });
            verdict.reasons.extend(multihost::reasons(
                &who,
                start_gate.as_ref(),
                record.clock_sync.as_ref(),
                settings.late_threshold_ms,
            ));
        }
        let (episodes, sampler) = record.sampler.clone().unwrap_or_default();
        let attribution = attribution_of(
            &record,
            &episodes,
            &sampler.host_load.windows,
            sampler.enabled,
        );
        let load = &sampler.host_load;
        if load.seconds_over_threshold > 0 {
            verdict.reasons.push(format!(
                "other processes used up to {:.1} cores during {} s of the run (over {} cores): figures may be perturbed; don't build or benchmark beside a run",
                load.foreign_cores_max, load.seconds_over_threshold, load.threshold_cores
            ));
        }
        let server = server_stalls::find(&record, &episodes);
        verdict
            .reasons
            .extend(server.stalls.iter().take(5).map(server_stall::describe));
        if server.client_explained > 0 {
            verdict.reasons.push(format!(
                "the server's reply latency jumped {} while the client itself stalled: the client's doing, not called a server stall",
                match server.client_explained {
                    1 => "once".to_string(),
                    n => format!("{n} times"),
                }
            ));
        }
        let stalls: Vec<Episode> = episodes
            .into_iter()
            .filter(|e| e.duration_ms >= STALL_MS)
            .take(MAX_STALLS_LISTED)
            .collect();
        Summary {
            schema_version: SCHEMA_VERSION,
            tool: Tool {
                name: env!("CARGO_PKG_NAME").to_string(),
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
            command_line: record.plan.command_line.clone(),
            cancelled: record.cancelled.is_some(),
            started_at: record.started_at.clone(),
            wall_seconds: (record.wall_seconds * 1000.0).round() / 1000.0,
            clock_anchor: record.anchor,
            verdict,
            layout: Layout {
                processes: settings.processes,
                sessions_per_process: settings.sessions_per_process,
                sessions_total: settings.total_sessions(),
            },
            settings: settings.clone(),
            host: record.host.clone(),
            pacing,
            sessions: pooled.sessions,
            files_lost,
            peak_overlapping_streams: peak,
            processes: pooled.processes,
            openai: (settings.protocol == crate::protocol::Protocol::Openai)
                .then(|| TurnSummary::of(pooled.turns, &pooled.histograms.turns)),
            vllm: (settings.protocol == crate::protocol::Protocol::Vllm)
                .then(|| TurnSummary::of(pooled.turns, &pooled.histograms.turns)),
            server: pooled.server,
            stalls,
            attribution,
            server_stalls: server.stalls,
            sampler,
            injections: injections_of(&record),
            funasr,
            start_gate,
            streaming_window,
            clock_sync: record.clock_sync.clone(),
            merge: None,
            output_dir,
        }
    }

    /// 0 qualified (or unpaced, so not judged) and complete; 1 anything else (a cancelled
    /// run's code is the conductor's: 128 + the signal).
    pub fn exit_code(&self) -> i32 {
        if (self.verdict.pacing_qualified || self.verdict.unpaced) && self.verdict.complete {
            0
        } else {
            1
        }
    }
}

impl ProcessSummary {
    /// A process that left no result: its figures are zero.
    fn without_result(role: Role, index: Option<u32>, pid: u32) -> Self {
        ProcessSummary {
            role,
            index,
            pid,
            cpu_cores: 0.0,
            cpu_seconds: 0.0,
            peak_rss_bytes: 0,
            loop_lag_ms: LoopLagStats::default(),
            result_present: false,
            writer_queue_peak_lines: None,
            writer_queue_peak_bytes: None,
            pacing: None,
            stall_injected_at_s: None,
            telemetry_dropped: None,
            mock: None,
        }
    }
}

fn mock_process(pid: u32, stats: Option<&MockStats>) -> ProcessSummary {
    let mut process = ProcessSummary::without_result(Role::Mock, None, pid);
    if let Some(s) = stats {
        process.cpu_cores = s.usage.cpu_cores;
        process.cpu_seconds = s.usage.cpu_seconds;
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

/// The JSON Schema of `summary.json`, generated from these types (docs/summary.schema.json).
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(Summary);
    // Serialising a schema (a JSON value) cannot fail.
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `UPDATE_SCHEMA=1 cargo test --lib committed_schema` writes it anew.
    #[test]
    fn the_committed_schema_is_the_one_the_types_generate() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/summary.schema.json");
        let generated = schema_json();
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap();
        assert!(
            committed == generated,
            "docs/summary.schema.json is not what the summary's types generate: run UPDATE_SCHEMA=1 cargo test --lib committed_schema"
        );
    }

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
    fn overlapping_streams_are_counted_at_their_peak() {
        let intervals = [(0.0, 10.0), (5.0, 15.0), (10.0, 20.0), (30.0, 40.0)];
        assert_eq!(peak_overlap(intervals.into_iter()), 3);
        assert_eq!(peak_overlap(std::iter::empty()), 0);
    }
}
