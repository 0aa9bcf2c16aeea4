//! What workers and the conductor say to each other while a run goes on.
//!
//! Workers write [`Telemetry`] as JSON lines on their stdout from a thread of their own, through a
//! bounded queue: a slow or frozen reader makes them drop (and count) telemetry, never wait. The
//! conductor writes [`WorkerCommand`] lines on their stdin. Final figures come from the workers' result
//! files, or from `done` when a worker could not write its file.

use super::figures::ProtocolFigures;
use crate::pacing::PacketCounts;
use crate::stats::DurationHistogram;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Telemetry {
    /// Every session has connected and set up, or failed to.
    Ready {
        pid: u32,
        connected: u32,
        rejected: u32,
        failed: u32,
        /// The first set-up error, for the conductor to show.
        first_error: Option<String>,
    },
    /// While sessions set up, once a second: how many have so far (the figures `ready` will
    /// carry once all have), so that a slow set-up against a real server shows its progress.
    SetupProgress {
        connected: u32,
        rejected: u32,
        failed: u32,
    },
    /// Cumulative counters, five times a second.
    Progress(Progress),
    /// Per session, the worst deviation of its packets since the previous `heat`, encoded as a
    /// heat cell (deviation µs + 1; 0 when the session sent nothing), five times a second: the
    /// dashboard's heatmap. `time_s`: when the latest of those packets was due (the message's
    /// own time when none was sent), which places the cells on the heatmap's time axis.
    Heat { time_s: f64, cells: Vec<u32> },
    /// The worker's cumulative histograms, once a second, so that the conductor can show pooled
    /// percentiles (a dropped message loses nothing: the next one carries it all): the client's
    /// deviation, and the server's latency as the protocol's figures name it.
    /// Boxed: the histograms are large beside the other messages.
    Histogram(Box<LiveHistograms>),
    /// The worker wrote its result file and is about to exit. When the file could not be
    /// written (a full disk), the result comes here instead, with the write error: the figures
    /// measured survive what the disk refused.
    Done {
        result_path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        write_error: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Box<crate::contract::worker::WorkerResult>>,
    },
}

/// What a `histogram` message carries (a JSON object beside its `type`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LiveHistograms {
    pub deviation: DurationHistogram,
    /// The summary's `server` histograms, for a worker that dies before it writes its result
    /// (the conductor keeps what the last message said): from a packet's send start to its
    /// `sglang.input_audio.accepted`; from the send start of the packet that completes a unit
    /// to its `sglang.unit.done`; from packet 0's send start to the first audio delta.
    #[serde(default)]
    pub accepted: DurationHistogram,
    #[serde(default)]
    pub unit_lag: DurationHistogram,
    #[serde(default)]
    pub first_audio: DurationHistogram,
    /// From a session's start gate to its packet 0's send, once per session.
    #[serde(default)]
    pub start_lateness: DurationHistogram,
    /// The protocol's own figures (the native protocol's: sglang-omni's serving metrics and
    /// the `accepted` latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolFigures>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Progress {
    pub time_s: f64,
    #[serde(flatten)]
    pub counts: PacketCounts,
    pub sessions_with_late_packets: u32,
    pub sessions_streaming: u32,
    pub sessions_done: u32,
    pub sessions_completed: u32,
    pub sessions_incomplete: u32,
    pub sessions_rejected: u32,
    /// The largest loop lag since the previous progress message.
    pub loop_lag_window_max_us: u64,
    pub loop_lag_max_us: u64,
    pub queue_lines: u64,
    pub queue_bytes: u64,
    pub protocol_errors: u64,
    pub telemetry_dropped: u64,
    /// Trace, receipt and sample lines the files did not take so far.
    #[serde(default)]
    pub lines_not_written: u64,
    /// Whether a write found the disk (or a quota) full.
    #[serde(default)]
    pub disk_full: bool,
}

/// Conductor to worker, one per line on the worker's stdin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WorkerCommand {
    /// Start streaming: packet 0 of every session is due at this `CLOCK_MONOTONIC` time.
    Go { start_s: f64 },
    /// Stop streaming now, end the sessions properly and write the results.
    Stop,
    /// Give up on the sessions at once (they count as incomplete) and write the results.
    Abort,
}

impl WorkerCommand {
    pub fn to_line(self) -> String {
        match self {
            WorkerCommand::Go { start_s } => format!("go {start_s:.6}\n"),
            WorkerCommand::Stop => "stop\n".to_string(),
            WorkerCommand::Abort => "abort\n".to_string(),
        }
    }

    pub fn parse(line: &str) -> Option<WorkerCommand> {
        let mut words = line.split_whitespace();
        match (words.next()?, words.next()) {
            ("go", Some(t)) => t.parse().ok().map(|start_s| WorkerCommand::Go { start_s }),
            ("stop", None) => Some(WorkerCommand::Stop),
            ("abort", None) => Some(WorkerCommand::Abort),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip() {
        for c in [
            WorkerCommand::Go { start_s: 12.5 },
            WorkerCommand::Stop,
            WorkerCommand::Abort,
        ] {
            assert_eq!(WorkerCommand::parse(&c.to_line()), Some(c));
        }
        assert_eq!(WorkerCommand::parse("go"), None);
    }

    #[test]
    fn telemetry_is_tagged_json() {
        let line = serde_json::to_string(&Telemetry::Progress(Progress::default())).unwrap();
        assert!(line.starts_with(r#"{"type":"progress""#), "{line}");
        let back: Telemetry = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Telemetry::Progress(_)));
    }

    #[test]
    fn histograms_carry_the_start_lateness_and_a_bare_line_still_reads_issue_14() {
        let mut h = LiveHistograms::default();
        h.start_lateness.record_us(800);
        let line = serde_json::to_string(&Telemetry::Histogram(Box::new(h))).unwrap();
        assert!(
            line.starts_with(r#"{"type":"histogram","deviation":"#),
            "{line}"
        );
        let Telemetry::Histogram(back) = serde_json::from_str(&line).unwrap() else {
            panic!("{line}")
        };
        assert_eq!(back.start_lateness.count(), 1);
        let deviation = serde_json::to_string(&DurationHistogram::new()).unwrap();
        let old = format!(r#"{{"type":"histogram","deviation":{deviation}}}"#);
        let Telemetry::Histogram(back) = serde_json::from_str(&old).unwrap() else {
            panic!("{old}")
        };
        assert!(back.protocol.is_none() && back.start_lateness.count() == 0);
    }
}
