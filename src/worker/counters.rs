//! The live counters a worker's sessions add to, on its single runtime thread: the source of
//! its telemetry and of its result file.

use crate::contract::figures::TranscriptTally;
use crate::contract::telemetry::Progress;
use crate::contract::worker::{
    ReplyKind, ReplySecond, SessionStatus, TurnCounts, WorkerHistograms,
};
use crate::contract::StreamingUsage;
use crate::pacing::PacketCounts;
use crate::procstat::Mark;

/// Counters every session of a worker adds to, on the worker's single runtime thread.
#[derive(Debug, Default)]
pub struct WorkerStats {
    pub hist: WorkerHistograms,
    pub counts: PacketCounts,
    pub sessions_with_late_packets: u32,
    pub protocol_errors: u64,
    pub error_events: u64,
    pub sessions_streaming: u32,
    pub sessions_done: u32,
    pub sessions_completed: u32,
    pub sessions_incomplete: u32,
    pub sessions_rejected: u32,
    /// `[scheduled_s, start_s]` of late packets (at most [`MAX_WINDOWS`]), for attribution;
    /// a packet counted late while still unsent ends its window when it was counted.
    pub late_windows: Vec<[f64; 2]>,
    /// `[start_s, end_s]` of sends that blocked for more than a late threshold.
    pub send_blocked_windows: Vec<[f64; 2]>,
    /// The session of each late window and of each blocked send, in the same order.
    pub late_sessions: Vec<u32>,
    pub send_blocked_sessions: Vec<u32>,
    /// The worst server reply of each second (one entry a second: no allocation per reply).
    pub reply_seconds: Vec<ReplySecond>,
    /// Per session, the heat cell since the last heat telemetry: the worst deviation (µs + 1;
    /// 0 = no packet).
    pub heat: Vec<u32>,
    /// When the latest packet of the heat window was due: the window's place on the heatmap's
    /// time axis (its send time would draw a stalled worker's packets late by the stall).
    pub heat_due_s: Option<f64>,
    pub queue_peak_lines: u64,
    pub queue_peak_bytes: u64,
    /// The live figures of a transcript protocol (Fun-ASR); the result's come from the
    /// sessions' own records.
    pub transcripts: TranscriptTally,
    /// What the sessions' turns counted so far (openai, vllm), for the live figures; the
    /// result's are each session's own.
    pub turn_counts: TurnCounts,
    /// The start gate, and the CPU seconds and allocations when the first session passed it.
    streaming_start: Option<(f64, Mark)>,
    /// The end of the last streaming session's last packet's send, and the mark then.
    streaming_end: Option<(f64, Mark)>,
    /// Sessions that sent their last packet.
    last_packets_sent: u32,
    /// What the sessions an abort dropped before their end had recorded (their machines leave
    /// it here as they are dropped): the worker's result keeps their packets and send times.
    pub abandoned: Vec<crate::contract::worker::SessionOutcome>,
}

impl WorkerStats {
    pub fn new(sessions: u32) -> Self {
        WorkerStats {
            heat: vec![0; sessions as usize],
            ..WorkerStats::default()
        }
    }

    /// A server reply of `kind` arrived at `arrival_s` for what was sent at `sent_s`.
    pub fn reply(&mut self, kind: ReplyKind, sent_s: f64, arrival_s: f64) {
        ReplySecond::record(&mut self.reply_seconds, kind, sent_s, arrival_s);
    }

    /// A session passed the start gate `gate_s` and streams. The first one starts the
    /// streaming window with the process's CPU seconds (and the thread's allocations) then:
    /// the CPU clock is a system call, read once a worker, not once a session.
    pub fn stream_started(&mut self, gate_s: f64, mark: impl FnOnce() -> Mark) {
        if self.streaming_start.is_none() {
            self.streaming_start = Some((gate_s, mark()));
        }
        self.sessions_streaming += 1;
    }

    /// A session's last packet was sent by `sent_s`. When no other session is still streaming,
    /// the window ends here, and only then is the CPU clock read: at one gate every session's
    /// last packet is due at once, and a clock read after each send would make that burst
    /// longer.
    pub fn last_packet_sent(&mut self, sent_s: f64, mark: impl FnOnce() -> Mark) {
        self.last_packets_sent += 1;
        if self.sessions_streaming == 1 {
            self.streaming_end = Some((sent_s, mark()));
        }
    }

    /// A session stopped streaming, its last packet sent or not (`now`: the time and the
    /// mark, read only when needed). When the last one to stop had failed while others
    /// had sent their last packets, the window ends now.
    pub fn stream_ended(&mut self, now: impl FnOnce() -> (f64, Mark)) {
        self.sessions_streaming = self.sessions_streaming.saturating_sub(1);
        if self.sessions_streaming == 0
            && self.last_packets_sent > 0
            && self.streaming_end.is_none()
        {
            self.streaming_end = Some(now());
        }
    }

    /// The CPU the worker spent from its gate to its last packet; none when no session sent
    /// its last packet (a run stopped early, or every session failed).
    pub fn streaming_usage(&self) -> Option<StreamingUsage> {
        let ((from_s, from), (to_s, to)) = (self.streaming_start?, self.streaming_end?);
        Some(StreamingUsage {
            seconds: (to_s - from_s).max(0.0),
            cpu_seconds: (to.cpu_s - from.cpu_s).max(0.0),
            allocations: to
                .allocations
                .zip(from.allocations)
                .map(|(to, from)| to.saturating_sub(from)),
            huge_page_bytes: to.huge_page_bytes,
        })
    }

    /// Takes the per-session window maxima, and when the window's latest packet was due, and
    /// starts a new window.
    pub fn take_heat(&mut self) -> (Vec<u32>, Option<f64>) {
        let fresh = vec![0; self.heat.len()];
        (
            std::mem::replace(&mut self.heat, fresh),
            self.heat_due_s.take(),
        )
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
            counts: self.counts,
            sessions_with_late_packets: self.sessions_with_late_packets,
            sessions_streaming: self.sessions_streaming,
            sessions_done: self.sessions_done,
            sessions_completed: self.sessions_completed,
            sessions_incomplete: self.sessions_incomplete,
            sessions_rejected: self.sessions_rejected,
            protocol_errors: self.protocol_errors,
            ..Progress::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mark at `cpu_s` CPU seconds, with a thousand allocations a CPU second.
    fn mark(cpu_s: f64) -> Mark {
        Mark {
            cpu_s,
            allocations: Some((cpu_s * 1000.0) as u64),
            huge_page_bytes: None,
        }
    }

    #[test]
    fn the_streaming_window_runs_from_the_gate_to_the_last_streaming_sessions_last_packet() {
        let mut stats = WorkerStats::new(3);
        let mut reads = 0;
        let mut clock = |cpu_s: f64| {
            reads += 1;
            mark(cpu_s)
        };
        assert_eq!(stats.streaming_usage(), None);
        // Three sessions pass the gate: the first one's CPU reading counts, the others read none.
        stats.stream_started(100.0, || clock(0.5));
        stats.stream_started(100.0, || clock(0.6));
        stats.stream_started(100.0, || clock(0.7));
        // Two send their last packet while another still streams: no clock read.
        stats.last_packet_sent(119.9, || clock(2.4));
        stats.stream_ended(|| (119.9, clock(2.4)));
        stats.last_packet_sent(120.0, || clock(2.45));
        stats.stream_ended(|| (120.0, clock(2.45)));
        assert_eq!(stats.streaming_usage(), None, "a session still streams");
        stats.last_packet_sent(120.1, || clock(2.5));
        stats.stream_ended(|| (120.2, clock(2.6)));
        let usage = stats.streaming_usage().unwrap();
        assert!((usage.seconds - 20.1).abs() < 1e-9, "{usage:?}");
        assert!((usage.cpu_seconds - 2.0).abs() < 1e-9, "{usage:?}");
        assert_eq!(
            usage.allocations,
            Some(2000),
            "from the gate's 500 to the end's 2500"
        );
        assert_eq!(reads, 2, "one read at the gate, one at the end");
    }

    #[test]
    fn when_the_last_session_fails_the_window_ends_as_it_stops() {
        let mut stats = WorkerStats::new(2);
        stats.stream_started(10.0, || mark(1.0));
        stats.stream_started(10.0, || mark(1.0));
        stats.last_packet_sent(30.0, || mark(3.0));
        stats.stream_ended(|| (30.0, mark(3.0)));
        // The other one's connection was lost before its last packet.
        stats.stream_ended(|| (30.5, mark(3.25)));
        let usage = stats.streaming_usage().unwrap();
        assert!((usage.seconds - 20.5).abs() < 1e-9, "{usage:?}");
        assert!((usage.cpu_seconds - 2.25).abs() < 1e-9, "{usage:?}");
    }

    #[test]
    fn allocations_are_left_out_where_they_were_not_counted() {
        let mut stats = WorkerStats::new(1);
        stats.stream_started(10.0, || Mark {
            cpu_s: 1.0,
            allocations: None,
            huge_page_bytes: None,
        });
        stats.last_packet_sent(30.0, || mark(3.0));
        stats.stream_ended(|| (30.0, mark(3.0)));
        let usage = stats.streaming_usage().unwrap();
        assert_eq!(usage.allocations, None, "{usage:?}");
        assert!(
            (usage.cpu_seconds - 2.0).abs() < 1e-9,
            "the CPU still counts: {usage:?}"
        );
    }

    #[test]
    fn a_run_stopped_before_any_last_packet_has_no_streaming_window() {
        let mut stats = WorkerStats::new(1);
        stats.stream_started(10.0, || mark(1.0));
        stats.stream_ended(|| (12.0, mark(1.5)));
        assert_eq!(stats.streaming_usage(), None);
    }
}
