//! The summary's pacing: the pooled figures of every packet, and when the streams ran (their
//! peak overlap, the streaming window, the start gate).

use super::{multihost, results, Pacing, RunRecord};
use crate::contract::worker::WorkerHistograms;
use crate::options::Settings;
use crate::pacing::PacketCounts;

/// The pacing figures of `h` and `counts` (a worker's or the whole run's).
pub(super) fn pacing_of(
    h: &WorkerHistograms,
    counts: PacketCounts,
    sessions_with_late_packets: u64,
    settings: &Settings,
) -> Pacing {
    // The exact maximum, not the top of its histogram bucket.
    let deviation_ms = h
        .deviation
        .full()
        .with_exact_max(counts.max_deviation_us as f64 / 1000.0);
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

/// When the sessions streamed: from each one's first packet's send to its last one's.
pub(super) struct Streams {
    /// The largest number of sessions streaming at once.
    pub peak: u64,
    pub window: Option<multihost::StreamingWindow>,
    /// `--start-at`: when the gate was to open and when it did.
    pub start_gate: Option<multihost::StartGate>,
}

impl Streams {
    pub(super) fn of(record: &RunRecord<'_>) -> Streams {
        let settings = &record.plan.settings;
        let intervals = || {
            results(record).flat_map(|r| {
                r.sessions
                    .iter()
                    .filter_map(|s| Some((s.first_send_s?, s.last_send_s?)))
            })
        };
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
        Streams {
            peak: peak_overlap(intervals()),
            window: multihost::StreamingWindow::of(&record.anchor, intervals()),
            start_gate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_streams_are_counted_at_their_peak() {
        let intervals = [(0.0, 10.0), (5.0, 15.0), (10.0, 20.0), (30.0, 40.0)];
        assert_eq!(peak_overlap(intervals.into_iter()), 3);
        assert_eq!(peak_overlap(std::iter::empty()), 0);
    }
}
