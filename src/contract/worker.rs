//! What a worker is told and what it leaves behind: its configuration (written by the
//! conductor) and its result file (read back by the conductor to build the summary).

use crate::clock::ClockAnchor;
use crate::contract::ProcessUsage;
use crate::looplag::LoopLagStats;
use crate::options::Settings;
use crate::pacing::PacketCounts;
use crate::stats::{DurationHistogram, SignedHistogram};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What the conductor tells a worker (written to `workers/worker-K.config.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerConfig {
    pub index: u32,
    pub settings: Settings,
    pub output_dir: PathBuf,
    /// This worker injects the `--inject-*` faults, once each, halfway through the run.
    pub inject_faults: bool,
}

/// The histograms a worker keeps, pooled over its sessions (microseconds).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerHistograms {
    /// |deviation| of every packet from its schedule.
    pub deviation: DurationHistogram,
    /// `completed_s − start_s` of every packet.
    pub websocket_send: DurationHistogram,
    /// `completed_s − due time` of every packet.
    pub append_span: DurationHistogram,
    /// From a packet's send start to its `sglang.input_audio.accepted`.
    pub accepted: DurationHistogram,
    /// From the send start of the packet that completes a unit to its `sglang.unit.done`.
    pub unit_lag: DurationHistogram,
    /// From packet 0's send start to the first audio delta, once per session.
    pub first_audio: DurationHistogram,
    /// From a session's start gate to its packet 0's send start, once per session.
    pub start_lateness: DurationHistogram,
    /// The turn latencies of the dialects that have turns (openai, vllm).
    #[serde(default)]
    pub turns: TurnHistograms,
    /// sglang-omni's serving metrics of the native protocol (docs/metrics.md, "sglang-omni's
    /// serving metrics").
    #[serde(default)]
    pub serving: ServingHistograms,
}

/// The per-packet and per-response distributions of sglang-omni's serving metrics
/// (`benchmarks/duplex/serving_metrics.py`), pooled over a worker's sessions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServingHistograms {
    /// `unit_lag`: a unit's `sglang.unit.done` against its scheduled end (the session's start
    /// gate + (k + 1) units); the terminal unit left out.
    pub unit_lag: SignedHistogram,
    /// `send_lateness`: a packet's send start after `session_start_s + seq × packet`, at least 0.
    pub send_lateness: DurationHistogram,
    /// `output_gap`, `output_gap_excess`, `output_drift`: between consecutive audio deltas of
    /// the session (continuous-output profiles only).
    pub output_gap: DurationHistogram,
    pub output_gap_excess: DurationHistogram,
    pub output_drift: SignedHistogram,
    /// Per response: its first audio after its `response.created`; the gaps between its deltas
    /// beyond the audio the previous one held; its largest drift, and the playout buffer that
    /// drift needs.
    pub response_ttfa: SignedHistogram,
    pub response_gap_excess: DurationHistogram,
    pub response_max_drift: SignedHistogram,
    pub response_required_playout_buffer: DurationHistogram,
    /// The first audio delta of each media time (`sglang.media_time.t_start_ms`) after the
    /// schedule, and after the send start, of the packet that starts at that media time.
    #[serde(default)]
    pub media_schedule_lag: SignedHistogram,
    #[serde(default)]
    pub media_send_lag: SignedHistogram,
    /// For the live figures only (the summary takes these from the sessions' outcomes, and the
    /// result file leaves them out): each session's `ttfa` as its first audio comes, and the
    /// late sends and responses so far.
    #[serde(skip)]
    pub ttfa: SignedHistogram,
    #[serde(skip)]
    pub late_sends: u64,
    #[serde(skip)]
    pub responses: u64,
}

impl ServingHistograms {
    pub fn add(&mut self, from: &ServingHistograms) {
        self.unit_lag.add(&from.unit_lag);
        self.send_lateness.add(&from.send_lateness);
        self.output_gap.add(&from.output_gap);
        self.output_gap_excess.add(&from.output_gap_excess);
        self.output_drift.add(&from.output_drift);
        self.response_ttfa.add(&from.response_ttfa);
        self.response_gap_excess.add(&from.response_gap_excess);
        self.response_max_drift.add(&from.response_max_drift);
        self.response_required_playout_buffer
            .add(&from.response_required_playout_buffer);
        self.media_schedule_lag.add(&from.media_schedule_lag);
        self.media_send_lag.add(&from.media_send_lag);
        self.ttfa.add(&from.ttfa);
        self.late_sends += from.late_sends;
        self.responses += from.responses;
    }
}

/// sglang-omni's `LATE_SEND_THRESHOLD_S`: a send more than this after its schedule is late.
pub const LATE_SEND_THRESHOLD_S: f64 = 0.02;
/// sglang-omni's `--startup-reserve-ms` default: the output a player holds before it plays.
pub const STARTUP_RESERVE_S: f64 = 0.08;

/// One native session as sglang-omni's serving metrics see it: the figures it has once (its
/// distributions are in [`ServingHistograms`]). Times in seconds, as theirs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServingOutcome {
    /// The input's length (all its samples at the input rate).
    pub input_duration_s: f64,
    /// The unit and output rate the server granted (`sglang.granted.native_unit_ms`, the output
    /// audio format's `rate`); `None` before a grant.
    pub native_unit_ms: Option<f64>,
    pub output_sample_rate: Option<f64>,
    /// Whether the granted unit is a continuous-output profile's (VoiceChat's 80 ms).
    pub continuous: Option<bool>,
    /// The first audio delta after the session's start gate (continuous profiles).
    pub ttfa_s: Option<f64>,
    pub final_output_drift_s: Option<f64>,
    pub required_playout_buffer_s: Option<f64>,
    pub output_samples: u64,
    pub output_coverage: Option<f64>,
    /// Playback underruns of the output (continuous profiles; `None` when not known).
    pub underrun_count: Option<u64>,
    pub underrun_total_s: Option<f64>,
    pub underrun_worst_s: Option<f64>,
    pub sends: u64,
    pub late_sends: u64,
    pub excluded_terminal_units: u64,
    /// Responses that sent audio.
    pub responses: u64,
    /// `response.done`s, and of them those whose status is not `completed`.
    #[serde(default)]
    pub responses_done: u64,
    #[serde(default)]
    pub responses_not_completed: u64,
    /// Audio deltas that were empty or not whole PCM16 samples.
    #[serde(default)]
    pub invalid_audio_deltas: u64,
}

/// Turn latencies, anchored on the client's audio clock (see `machine::turns`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TurnHistograms {
    pub first_text_after_end: DurationHistogram,
    pub first_text_after_start: DurationHistogram,
    pub first_audio_after_end: DurationHistogram,
    pub first_audio_after_start: DurationHistogram,
    pub done_after_end: DurationHistogram,
    pub speech_stopped: DurationHistogram,
}

impl TurnHistograms {
    pub fn add(&mut self, from: &TurnHistograms) {
        self.first_text_after_end.add(&from.first_text_after_end);
        self.first_text_after_start
            .add(&from.first_text_after_start);
        self.first_audio_after_end.add(&from.first_audio_after_end);
        self.first_audio_after_start
            .add(&from.first_audio_after_start);
        self.done_after_end.add(&from.done_after_end);
        self.speech_stopped.add(&from.speech_stopped);
    }
}

/// What one session's turns came to (openai, vllm); zero for the native protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnCounts {
    /// Turns whose input ended (a commit, or the server's VAD).
    pub ended: u64,
    /// Answers that finished (`response.done`, `transcription.done`).
    pub answered: u64,
    /// ...of which did not complete (a response failed, cancelled or incomplete).
    pub failed: u64,
    /// Turns the server refused to answer: their `response.create` got an error
    /// (`conversation_already_has_active_response` while one was in progress). No answer
    /// will come; they wait for none, so later answers stay with their own turns.
    #[serde(default)]
    pub refused: u64,
    /// Answers that came for no turn: none waited, and the client had sent no audio since the
    /// last answer (a `response.done` of a response it never asked for). Not in `answered`;
    /// their latencies are not timed.
    #[serde(default)]
    pub unmatched: u64,
    /// Answers that came before the client ended the input they answer (a
    /// `transcription.done` before the final commit: the server answered no more of that
    /// input). In `answered` too.
    #[serde(default)]
    pub early: u64,
    /// Turns the server's VAD ended that got no response of their own: a response created
    /// while several VAD turns waited was taken as the newest one's, or the turn ended while a
    /// response was under way and none came after it (OpenAI with `interrupt_response: false`
    /// may create none). Not timed; the session does not wait for them.
    #[serde(default)]
    pub unanswered: u64,
    /// `speech_started` events of the server's VAD.
    pub speech_started: u64,
    pub text_deltas: u64,
    pub audio_deltas: u64,
    /// Gaps between consecutive text deltas of one answer, and their total length: the text
    /// delta rate is `text_intervals / text_span_s`.
    pub text_intervals: u64,
    pub text_span_s: f64,
}

impl TurnCounts {
    pub fn add(&mut self, o: &TurnCounts) {
        self.ended += o.ended;
        self.answered += o.answered;
        self.failed += o.failed;
        self.refused += o.refused;
        self.unmatched += o.unmatched;
        self.early += o.early;
        self.unanswered += o.unanswered;
        self.speech_started += o.speech_started;
        self.text_deltas += o.text_deltas;
        self.audio_deltas += o.audio_deltas;
        self.text_intervals += o.text_intervals;
        self.text_span_s += o.text_span_s;
    }

    /// Adds what changed from `before` to `after` (a session's counts around one event: the
    /// worker's live tally, O(1) per event).
    pub fn add_change(&mut self, before: &TurnCounts, after: &TurnCounts) {
        // A turn withdrawn (the end-of-input race) takes one back.
        self.ended = (self.ended + after.ended).saturating_sub(before.ended);
        self.answered += after.answered.saturating_sub(before.answered);
        self.failed += after.failed.saturating_sub(before.failed);
        self.refused += after.refused.saturating_sub(before.refused);
        self.unmatched += after.unmatched.saturating_sub(before.unmatched);
        self.early += after.early.saturating_sub(before.early);
        self.unanswered += after.unanswered.saturating_sub(before.unanswered);
        self.speech_started += after.speech_started.saturating_sub(before.speech_started);
        self.text_deltas += after.text_deltas.saturating_sub(before.text_deltas);
        self.audio_deltas += after.audio_deltas.saturating_sub(before.audio_deltas);
        self.text_intervals += after.text_intervals.saturating_sub(before.text_intervals);
        self.text_span_s += after.text_span_s - before.text_span_s;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Set up, streamed, ended, drained and closed by the protocol, and every line written.
    Completed,
    /// Anything else that got past admission.
    Incomplete,
    /// Refused with HTTP 503 on every attempt.
    Rejected,
}

/// How one session went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionOutcome {
    pub index: u32,
    pub status: SessionStatus,
    /// Why it is not completed (or a trace write error).
    pub error: Option<String>,
    /// Stopped before its last packet because the run was cancelled.
    pub stopped_early: bool,
    #[serde(flatten)]
    pub counts: PacketCounts,
    pub protocol_errors: u64,
    /// Send start of packet 0 and of the last packet (for peak overlapping streams).
    pub first_send_s: Option<f64>,
    pub last_send_s: Option<f64>,
    /// The session's turns (openai, vllm).
    #[serde(default)]
    pub turns: TurnCounts,
    /// `error` events the server sent, by code.
    #[serde(default)]
    pub error_codes: BTreeMap<String, u64>,
    /// The last of them, `code: message`, for the reason a failed session gives.
    #[serde(default)]
    pub last_server_error: Option<String>,
    /// The first of them that only a server of another protocol sends
    /// ([`crate::protocol::Protocol::speaks_instead`]), `code: message`: later errors (a
    /// refused commit) would hide it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_server_error: Option<String>,
    /// The recognition metrics, for protocols that return transcripts (Fun-ASR).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcripts: Option<TranscriptClient>,
    /// Text and binary frames the server sent (a sweep's events per second).
    #[serde(default)]
    pub server_events: u64,
    /// sglang-omni's serving metrics of the session (the native protocol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<ServingOutcome>,
    /// Trace and receipt lines of this session that could not be written.
    #[serde(default)]
    pub lines_not_written: u64,
    /// Whether those writes found the disk (or a quota) full.
    #[serde(default)]
    pub disk_full: bool,
}

/// One client as Fun-ASR's `realtime_ws_benchmark.py` measures it, unrounded (the summary
/// rounds as the benchmark does), with our own figures beside it. Times in ms are from the
/// audio start (packet 0's send) unless said otherwise; docs/funasr.md defines each.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TranscriptClient {
    /// Server messages after the audio started, of any kind.
    pub messages: u64,
    /// Messages with `sentences`, `partial` or `is_final: true`.
    pub result_messages: u64,
    /// Results whose partial is non-empty (a final's partial is empty).
    pub partial_messages: u64,
    pub final_messages: u64,
    /// Messages per event name, in the order first seen.
    pub events: Vec<(String, u64)>,
    /// The first result, even one with an empty partial.
    pub first_update_ms: Option<f64>,
    /// The last final received.
    pub final_update_ms: Option<f64>,
    /// STOP sent (the clock started just before the send) → the last final received.
    pub final_after_stop_ms: Option<f64>,
    pub stopped: bool,
    /// The benchmark's error strings, in its wording where it has one.
    pub errors: Vec<String>,
    /// Audio start → STOP sent, in seconds.
    pub send_seconds: Option<f64>,
    /// Connection start → the session's end, in seconds, without [`Self::gate_wait_s`].
    pub wall_seconds: f64,
    /// (receive − audio start) − `duration_ms` of non-final results: max and p95.
    pub response_lag_ms_max: Option<f64>,
    pub response_lag_ms_p95: Option<f64>,
    /// Ours: the first result with any text (not an empty partial).
    pub first_text_update_ms: Option<f64>,
    /// Ours: STOP sent → `stopped`.
    pub stopped_after_stop_ms: Option<f64>,
    /// Ours: finals received before STOP was sent.
    pub finals_before_stop: u64,
    /// Monotonic seconds: connection start, audio start, the session's end.
    pub started_s: f64,
    pub audio_start_s: Option<f64>,
    pub ended_s: f64,
    /// Set-up done → audio start, in seconds: the wait at the run's start gate, which the
    /// benchmark's client does not have (it streams as soon as its own set-up is done), so
    /// its wall times leave it out.
    #[serde(default)]
    pub gate_wait_s: f64,
}

impl SessionOutcome {
    pub fn new(index: u32) -> Self {
        SessionOutcome {
            index,
            status: SessionStatus::Incomplete,
            error: None,
            stopped_early: false,
            counts: PacketCounts::default(),
            protocol_errors: 0,
            first_send_s: None,
            last_send_s: None,
            turns: TurnCounts::default(),
            error_codes: BTreeMap::new(),
            last_server_error: None,
            foreign_server_error: None,
            transcripts: None,
            serving: None,
            server_events: 0,
            lines_not_written: 0,
            disk_full: false,
        }
    }
}

/// `workers/worker-K.json`: everything the conductor needs from a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerResult {
    pub schema_version: u32,
    pub index: u32,
    pub pid: u32,
    pub anchor: ClockAnchor,
    pub started_s: f64,
    pub gate_s: Option<f64>,
    pub ended_s: f64,
    pub usage: ProcessUsage,
    pub loop_lag: LoopLagStats,
    pub writer_queue_peak_lines: u64,
    pub writer_queue_peak_bytes: u64,
    #[serde(flatten)]
    pub counts: PacketCounts,
    pub sessions_with_late_packets: u32,
    pub protocol_errors: u64,
    pub error_events: u64,
    pub histograms: WorkerHistograms,
    /// When the first `--inject-*` fault (of any kind) began.
    #[serde(alias = "stall_injected_at_s")]
    pub first_injection_s: Option<f64>,
    pub injections: Vec<Injection>,
    /// `[scheduled_s, start_s]` of late packets, for attribution.
    pub late_packet_windows: Vec<[f64; 2]>,
    /// `[start_s, end_s]` of sends that blocked for more than a late threshold.
    pub send_blocked_windows: Vec<[f64; 2]>,
    /// The session of each late packet window and of each blocked send, in their order
    /// (absent in results of earlier versions).
    #[serde(default)]
    pub late_packet_sessions: Vec<u32>,
    #[serde(default)]
    pub send_blocked_sessions: Vec<u32>,
    /// `[due_s, woke_s]` of loop-lag ticks over 20 ms, for attribution (named
    /// `loop_stall_windows` in results of earlier versions).
    #[serde(alias = "loop_stall_windows")]
    pub loop_lag_windows: Vec<[f64; 2]>,
    pub telemetry_dropped: u64,
    /// The worst server reply of each second, for finding server stalls.
    #[serde(default)]
    pub reply_seconds: Vec<ReplySecond>,
    /// An error of the worker's samples file or writer thread.
    pub writer_error: Option<String>,
    /// Samples-file lines that could not be written.
    #[serde(default)]
    pub sample_lines_not_written: u64,
    /// Whether a write of this worker's files (samples or any session's) found the disk full.
    #[serde(default)]
    pub disk_full: bool,
    pub sessions: Vec<SessionOutcome>,
    /// Made by the conductor from the worker's last telemetry, because the worker left no
    /// result: counts and histograms up to its last report; no session outcomes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_telemetry: bool,
}

/// 2: packet counts in the pacing vocabulary (`slow_sends`, `unsent_packets`, …).
pub const RESULT_SCHEMA_VERSION: u32 = 2;

/// The most late-packet or loop-stall windows a worker keeps for attribution.
pub const MAX_WINDOWS: usize = 100_000;

/// Which server reply latency a [`ReplySecond`] holds; each has its own typical value.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum ReplyKind {
    /// Native: a packet's send start → its `sglang.input_audio.accepted`.
    #[default]
    Accepted,
    /// Fun-ASR: a partial result after the end of the audio it covers.
    Response,
    /// openai, vllm: a turn's input end → its first text or audio delta.
    FirstReply,
    /// openai, vllm: one delta of an answer → the next; Fun-ASR: one result → the next, while
    /// the audio streams.
    DeltaGap,
}

impl ReplyKind {
    /// How the summary names it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplyKind::Accepted => "accepted",
            ReplyKind::Response => "response",
            ReplyKind::FirstReply => "first reply after turn end",
            ReplyKind::DeltaGap => "gap between replies",
        }
    }
}

/// The worst server reply of one kind that arrived in one second of the monotonic clock: how
/// long after what it answers was sent (or, for a delta gap, after the previous delta).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReplySecond {
    #[serde(default)]
    pub kind: ReplyKind,
    /// `floor` of the arrivals' monotonic time.
    pub second: u64,
    pub replies: u32,
    pub max_lag_ms: f64,
    /// When what the worst reply answers was sent (monotonic seconds).
    pub max_sent_s: f64,
}

impl ReplySecond {
    /// Files a reply of `kind` that arrived at `arrival_s` for something sent at `sent_s` into
    /// `seconds` (arrivals come in order: a worker has one runtime thread; the kinds of one
    /// second sit side by side at the end).
    pub fn record(seconds: &mut Vec<ReplySecond>, kind: ReplyKind, sent_s: f64, arrival_s: f64) {
        let second = arrival_s.max(0.0) as u64;
        let lag_ms = (arrival_s - sent_s) * 1000.0;
        let recent = seconds.len().saturating_sub(4);
        let found = seconds[recent..]
            .iter_mut()
            .rev()
            .find(|s| s.second == second && s.kind == kind);
        if let Some(last) = found {
            last.replies += 1;
            if lag_ms > last.max_lag_ms {
                last.max_lag_ms = lag_ms;
                last.max_sent_s = sent_s;
            }
        } else if seconds.len() < MAX_WINDOWS {
            seconds.push(ReplySecond {
                kind,
                second,
                replies: 1,
                max_lag_ms: lag_ms,
                max_sent_s: sent_s,
            });
        }
    }
}

/// A fault injected into a worker (`--inject-*`), and when.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Injection {
    /// `busy`, `disk_wait` or `cpu_starvation`: the class the sampler should find.
    pub kind: String,
    pub start_s: f64,
    pub end_s: f64,
    /// e.g. whether the starving thread got real-time priority.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::TurnCounts;

    /// A turn withdrawn (the end-of-input race) takes its `ended` back from the live tally
    /// too: the session's counts said 1 where the dashboard went on saying 2.
    #[test]
    fn the_live_tally_takes_back_a_withdrawn_turn() {
        let mut live = TurnCounts::default();
        let (none, one, two) = (
            TurnCounts::default(),
            TurnCounts {
                ended: 1,
                ..TurnCounts::default()
            },
            TurnCounts {
                ended: 2,
                ..TurnCounts::default()
            },
        );
        live.add_change(&none, &one);
        live.add_change(&one, &two);
        live.add_change(&two, &one);
        assert_eq!(live.ended, 1);
    }
}
