//! The result model of a run: one struct that feeds `summary.json`, `summary.md`, the final
//! table and the exit code, built from the workers' result files and the mock's stats.
//! docs/summary.md documents every key; docs/summary.schema.json is its JSON Schema.
//!
//! * `funasr`: the Fun-ASR benchmark's figures, for runs of that protocol.
//! * `serving`: sglang-omni's serving metrics, for runs of the native protocol.
//! * `multihost`: the start gate, the streaming window, the clock's sync state, a merge's shards.
//! * `pooled`: the workers' results added up: sessions, errors by kind, one row per process.
//! * `pacing`: the pacing figures and when the streams ran (peak overlap, window, gate).
//! * `reasons`: the verdict and its reasons, in the order a reader needs them.
//! * `stalls`: the stalls listed, the faults injected, what the late packets fell into.
//! * `server_stalls`: latency jumps of the server the client does not explain.

pub mod funasr;
pub mod multihost;
mod pacing;
mod pooled;
mod reasons;
pub mod server_stalls;
pub mod serving;
mod stalls;

pub use pacing::peak_overlap;
use pooled::{results, Pooled};

use crate::clock::ClockAnchor;
use crate::contract::mock::MockStats;
use crate::contract::worker::{TurnCounts, TurnHistograms, WorkerResult};
use crate::contract::Role;
use crate::host::HostFacts;
use crate::looplag::LoopLagStats;
use crate::options::{RunPlan, Settings};
use crate::pacing::PacketCounts;
use crate::sampler::attribution::Attribution;
use crate::sampler::server_stall::ServerStall;
use crate::sampler::{Episode, SamplerSummary};
use crate::stats::{DurationHistogram, FullPercentiles, ShortPercentiles};
use crate::sys::clock_sync::ClockSync;
pub use crate::verdict::Verdict;
use serde::{Deserialize, Serialize};

/// 2: the pacing vocabulary (`slow_sends` beside `slow_send_threshold_ms`,
/// `sessions_with_late_packets`, `unsent_packets`, `max_deviation_us`), server percentiles
/// `null` without samples, `send_backpressure` in the attribution.
/// 3: `attribution.loop_lag_windows` (was `loop_stalls`: "stall" is the sampler's episode only).
pub const SCHEMA_VERSION: u32 = 3;

/// The oldest summary this build reads (`report`): 2 differs from 3 only in a key read by alias.
pub const OLDEST_READ_SCHEMA_VERSION: u32 = 2;

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
    /// What the late packets and loop-lag windows fell into.
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
    /// sglang-omni's serving metrics, under their names (the native protocol; docs/metrics.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<serving::ServingSection>,
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

impl Tool {
    /// This build of duplexbench-tui.
    fn this() -> Tool {
        Tool {
            name: env!("CARGO_PKG_NAME").to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

impl Layout {
    fn of(settings: &Settings) -> Layout {
        Layout {
            processes: settings.processes,
            sessions_per_process: settings.sessions_per_process,
            sessions_total: settings.total_sessions(),
        }
    }
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
    /// Sessions stopped before their last packet: the run was cancelled, or went past its
    /// deadline.
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
    /// The part of `cpu_seconds` spent in the kernel (`stime`, 10 ms ticks); absent for
    /// results of earlier versions and where `/proc` could not be read.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub system_cpu_seconds: Option<f64>,
    pub peak_rss_bytes: u64,
    /// A worker's CPU from its start gate to its last packet's send (what a streaming session
    /// costs, set-up and closing left out); absent for the mock, for results of earlier
    /// versions, and when no session sent its last packet.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub streaming: Option<crate::contract::StreamingUsage>,
    pub loop_lag_ms: LoopLagStats,
    /// False when the process left no result file; its figures are then zero.
    pub result_present: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub writer_queue_peak_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub writer_queue_peak_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pacing: Option<Pacing>,
    /// When the first `--inject-*` fault (of any kind) began in this worker; read from
    /// summaries of before 2026-12-02 under its old name, `stall_injected_at_s`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        default,
        alias = "stall_injected_at_s"
    )]
    pub first_injection_s: Option<f64>,
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
    /// The `error` events counted by their code (under `message`, as the sessions' errors),
    /// most frequent first.
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

/// Percentiles of `h`, or `None` when it holds no sample.
fn sampled(h: &DurationHistogram) -> Option<ShortPercentiles> {
    (h.count() > 0).then(|| h.short())
}

/// Why a provisional summary (written when the run started, replaced when it ends) says the
/// run was cancelled: a run killed before its end leaves this one.
pub const UNFINISHED: &str = "the run did not finish: this summary was written when it started; receipts and samples hold what was sent";

/// Why a summary rebuilt by `report --rebuild` (of a run whose conductor was killed) says the
/// run was cancelled: the verdict's `cancelled (…)` reason.
pub const REBUILT: &str = "the run's final summary was never written (its conductor was killed, or the disk refused it): this summary was rebuilt by `report --rebuild` from the results its workers wrote as they ended; the sampler's stall findings and the conductor's own notes were lost with it";

impl Summary {
    /// Whether this summary was rebuilt by `report --rebuild` (its run never wrote its own).
    pub fn rebuilt(&self) -> bool {
        self.cancelled && self.verdict.reasons.iter().any(|r| r.contains(REBUILT))
    }

    /// Whether this is the provisional summary of a run that never finished (killed).
    pub fn unfinished(&self) -> bool {
        self.cancelled && self.verdict.reasons.iter().any(|r| r.contains(UNFINISHED))
    }

    /// The summary of a run: the workers' results pooled, the verdict and its reasons, the
    /// sampler's stalls and what they explain.
    pub fn build(record: RunRecord<'_>) -> Summary {
        let settings = &record.plan.settings;
        let mut pooled = Pooled::of(&record);
        if let Some((pid, stats)) = &record.mock {
            pooled
                .processes
                .push(pooled::mock_process(*pid, stats.as_ref()));
        }
        let streams = pacing::Streams::of(&record);
        let pacing = pacing::pacing_of(
            &pooled.histograms,
            pooled.counts,
            pooled.sessions_with_late_packets,
            settings,
        );
        let funasr = funasr::section(results(&record), settings);
        let serving = serving::section(
            results(&record),
            &pooled.histograms.serving,
            settings.client.input_sample_rate,
        );
        let output_dir = record.plan.output_dir.display().to_string();
        let files_lost = FilesLost::of(results(&record));
        let (episodes, sampler) = record.sampler.clone().unwrap_or_default();
        let attribution = stalls::attribution_of(
            &record,
            &episodes,
            &sampler.host_load.windows,
            sampler.enabled,
        );
        let mut verdict = reasons::verdict(
            &record,
            &mut pooled,
            (
                funasr.as_ref().map_or(0, |f| f.summary.errors),
                attribution.late_packets.send_backpressure,
            ),
            files_lost.as_ref(),
            streams.start_gate.as_ref(),
            &output_dir,
        );
        verdict
            .reasons
            .extend(reasons::host_load(&sampler.host_load));
        let server = server_stalls::find(&record, &episodes);
        verdict.reasons.extend(reasons::server_stalls(&server));
        // A server of another protocol explains the rest: it comes before the sampler's
        // reasons, and no "no turn ended" (its advice, speech, would not help).
        match reasons::other_protocol(settings.protocol, pooled.speaks_instead.as_ref()) {
            Some(other) => verdict.reasons.insert(0, other),
            None => verdict.reasons.extend(reasons::no_turns(
                settings,
                pooled.turns,
                pooled.sessions.completed,
            )),
        }
        verdict
            .reasons
            .extend(reasons::unmatched_answers(pooled.turns));
        verdict.reasons.extend(reasons::early_answers(
            settings.protocol,
            settings.client.session_type,
            pooled.turns,
        ));
        verdict
            .reasons
            .extend(reasons::unanswered_turns(pooled.turns));
        Summary {
            schema_version: SCHEMA_VERSION,
            tool: Tool::this(),
            command_line: record.plan.command_line.clone(),
            cancelled: record.cancelled.is_some(),
            started_at: record.started_at.clone(),
            wall_seconds: (record.wall_seconds * 1000.0).round() / 1000.0,
            clock_anchor: record.anchor,
            verdict,
            layout: Layout::of(settings),
            settings: settings.clone(),
            host: record.host.clone(),
            pacing,
            sessions: pooled.sessions,
            files_lost,
            peak_overlapping_streams: streams.peak,
            processes: pooled.processes,
            openai: (settings.protocol == crate::protocol::Protocol::Openai)
                .then(|| TurnSummary::of(pooled.turns, &pooled.histograms.turns)),
            vllm: (settings.protocol == crate::protocol::Protocol::Vllm)
                .then(|| TurnSummary::of(pooled.turns, &pooled.histograms.turns)),
            server: pooled.server,
            stalls: stalls::listed(episodes),
            attribution,
            server_stalls: server.stalls,
            sampler,
            injections: stalls::injections_of(&record),
            funasr,
            serving,
            start_gate: streams.start_gate,
            streaming_window: streams.window,
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
}
