//! What a worker measures: live counters shared by its sessions, and the result file it writes
//! at the end, from which the conductor builds the summary.

use crate::clock::ClockAnchor;
use crate::looplag::LoopLagStats;
use crate::procstat::ProcessUsage;
use crate::stats::DurationHistogram;
use crate::telemetry::Progress;
use serde::{Deserialize, Serialize};

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
}

/// Counters every session of a worker adds to, on the worker's single runtime thread.
#[derive(Debug, Default)]
pub struct WorkerStats {
    pub hist: WorkerHistograms,
    pub packets: u64,
    pub late_packets: u64,
    pub sends_over_20ms: u64,
    pub sessions_with_violation: u32,
    pub max_deviation_us: u64,
    pub protocol_errors: u64,
    pub error_events: u64,
    pub sessions_streaming: u32,
    pub sessions_done: u32,
    pub sessions_completed: u32,
    pub sessions_incomplete: u32,
    pub sessions_rejected: u32,
    /// Packets never sent because their session failed while streaming.
    pub unsent_packets: u64,
    /// `[scheduled_s, start_s]` of late packets (at most [`MAX_WINDOWS`]), for attribution;
    /// a packet counted late while still unsent ends its window when it was counted.
    pub late_windows: Vec<[f64; 2]>,
    /// `[start_s, end_s]` of sends that blocked for more than a late threshold.
    pub send_blocked_windows: Vec<[f64; 2]>,
    /// Per session, the worst |deviation| (µs + 1) since the last heat telemetry; 0 = no packet.
    pub window_max_deviation_us: Vec<u32>,
    pub queue_peak_lines: u64,
    pub queue_peak_bytes: u64,
}

impl WorkerStats {
    pub fn new(sessions: u32) -> Self {
        WorkerStats {
            window_max_deviation_us: vec![0; sessions as usize],
            ..WorkerStats::default()
        }
    }

    /// Takes the per-session window maxima and starts a new window.
    pub fn take_heat(&mut self) -> Vec<u32> {
        let fresh = vec![0; self.window_max_deviation_us.len()];
        std::mem::replace(&mut self.window_max_deviation_us, fresh)
    }

    /// Counts a finished session by how it ended.
    pub fn session_ended(&mut self, status: SessionStatus) {
        self.sessions_done += 1;
        match status {
            SessionStatus::Completed => self.sessions_completed += 1,
            SessionStatus::Incomplete => self.sessions_incomplete += 1,
            SessionStatus::Rejected => self.sessions_rejected += 1,
        }
    }

    pub fn progress(&self, time_s: f64) -> Progress {
        Progress {
            time_s,
            packets: self.packets,
            late_packets: self.late_packets,
            sends_over_20ms: self.sends_over_20ms,
            sessions_with_violation: self.sessions_with_violation,
            sessions_streaming: self.sessions_streaming,
            sessions_done: self.sessions_done,
            sessions_completed: self.sessions_completed,
            sessions_incomplete: self.sessions_incomplete,
            sessions_rejected: self.sessions_rejected,
            max_deviation_us: self.max_deviation_us,
            protocol_errors: self.protocol_errors,
            ..Progress::default()
        }
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
    pub packets: u64,
    pub late_packets: u64,
    /// Packets never sent because the session failed while streaming.
    #[serde(default)]
    pub unsent_packets: u64,
    pub sends_over_20ms: u64,
    pub max_deviation_ms: f64,
    pub protocol_errors: u64,
    /// Send start of packet 0 and of the last packet (for peak overlapping streams).
    pub first_send_s: Option<f64>,
    pub last_send_s: Option<f64>,
}

impl SessionOutcome {
    pub fn new(index: u32) -> Self {
        SessionOutcome {
            index,
            status: SessionStatus::Incomplete,
            error: None,
            stopped_early: false,
            packets: 0,
            late_packets: 0,
            unsent_packets: 0,
            sends_over_20ms: 0,
            max_deviation_ms: 0.0,
            protocol_errors: 0,
            first_send_s: None,
            last_send_s: None,
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
    pub packets: u64,
    pub late_packets: u64,
    pub sends_over_20ms: u64,
    pub sessions_with_violation: u32,
    /// The exact largest |deviation| (a histogram's max is only exact to its bucket).
    pub max_deviation_us: u64,
    pub protocol_errors: u64,
    pub error_events: u64,
    pub histograms: WorkerHistograms,
    pub stall_injected_at_s: Option<f64>,
    pub injections: Vec<Injection>,
    /// Packets never sent because their session failed while streaming.
    #[serde(default)]
    pub unsent_packets: u64,
    /// `[scheduled_s, start_s]` of late packets, for attribution.
    pub late_packet_windows: Vec<[f64; 2]>,
    /// `[start_s, end_s]` of sends that blocked for more than a late threshold.
    #[serde(default)]
    pub send_blocked_windows: Vec<[f64; 2]>,
    /// `[due_s, woke_s]` of loop-lag ticks over 20 ms, for attribution.
    pub loop_stall_windows: Vec<[f64; 2]>,
    pub telemetry_dropped: u64,
    /// An error of the worker's samples file or writer thread.
    pub writer_error: Option<String>,
    pub sessions: Vec<SessionOutcome>,
}

pub const RESULT_SCHEMA_VERSION: u32 = 1;

/// The most late-packet or loop-stall windows a worker keeps for attribution.
pub const MAX_WINDOWS: usize = 100_000;

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
