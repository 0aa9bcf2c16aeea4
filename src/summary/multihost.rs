//! The parts of a summary that matter when a run spans several hosts: when its start gate was
//! to open and when it did (`--start-at`), its streaming window on the wall clock, the clock's
//! sync state, and, for a merged run, one row per shard (docs/multihost.md).

use crate::clock::ClockAnchor;
use crate::options::shard::rfc3339;
use crate::sys::clock_sync::ClockSync;
use crate::verdict::Verdict;
use serde::{Deserialize, Serialize};

/// `--start-at`: when every session's gate was to open, and when it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StartGate {
    /// `--start-at` in UTC (RFC 3339, milliseconds).
    pub start_at: String,
    pub start_at_unix_s: f64,
    /// When the conductor set the gate, on this host's wall clock: `--start-at`, or later when
    /// the sessions were not all set up by then; `null` when it never did.
    pub gate_unix_s: Option<f64>,
    /// When the run's first packet left, on this host's wall clock.
    pub first_packet_unix_s: Option<f64>,
    /// First packet − `--start-at`, in ms: how late the gate opened.
    pub opened_late_ms: Option<f64>,
    /// It opened more than the late threshold after `--start-at`, or never.
    pub late: bool,
}

/// From the first packet's send start to the last packet's, on this host's wall clock
/// (`CLOCK_REALTIME` through the clock anchor).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamingWindow {
    pub start_unix_s: f64,
    pub end_unix_s: f64,
}

impl StreamingWindow {
    /// The window of send intervals given in monotonic seconds of a process with `anchor`.
    pub fn of(
        anchor: &ClockAnchor,
        intervals: impl Iterator<Item = (f64, f64)>,
    ) -> Option<StreamingWindow> {
        let offset = anchor.realtime_s - anchor.monotonic_s;
        intervals.fold(None, |w: Option<StreamingWindow>, (a, b)| {
            let (a, b) = (a + offset, b + offset);
            Some(match w {
                None => StreamingWindow {
                    start_unix_s: a,
                    end_unix_s: b,
                },
                Some(w) => StreamingWindow {
                    start_unix_s: w.start_unix_s.min(a),
                    end_unix_s: w.end_unix_s.max(b),
                },
            })
        })
    }

    pub fn seconds(&self) -> f64 {
        self.end_unix_s - self.start_unix_s
    }
}

/// The start gate of a run with `--start-at`, from the monotonic gate the conductor set and
/// the run's first packet (both on the clock of `anchor`).
pub fn start_gate(
    start_at_unix_s: f64,
    anchor: &ClockAnchor,
    gate_s: Option<f64>,
    first_packet_s: Option<f64>,
    late_threshold_ms: u32,
) -> StartGate {
    let to_unix = |mono: f64| anchor.realtime_s + (mono - anchor.monotonic_s);
    let first_packet_unix_s = first_packet_s.map(to_unix);
    let opened_late_ms =
        first_packet_unix_s.map(|t| ((t - start_at_unix_s) * 1e6).round() / 1000.0);
    StartGate {
        start_at: rfc3339(start_at_unix_s),
        start_at_unix_s,
        gate_unix_s: gate_s.map(to_unix),
        first_packet_unix_s,
        opened_late_ms,
        late: opened_late_ms.is_none_or(|ms| ms > f64::from(late_threshold_ms)),
    }
}

/// The reasons a run over several hosts gives beside its verdict: a late gate, a clock that
/// is not synchronised. `who` names the run in them ("this shard", "shard 2").
pub fn reasons(
    who: &str,
    gate: Option<&StartGate>,
    clock: Option<&ClockSync>,
    late_threshold_ms: u32,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if let Some(g) = gate.filter(|g| g.late) {
        reasons.push(match g.opened_late_ms {
            Some(ms) => format!(
                "late gate: {who} started {ms:.1} ms after --start-at {} (more than {late_threshold_ms} ms); its sessions were not all set up in time or its host was busy, so it streamed behind the other shards",
                g.start_at
            ),
            None => format!(
                "late gate: {who} never opened its start gate (--start-at {}): no packet left",
                g.start_at
            ),
        });
    }
    if let Some(c) = clock.filter(|c| !c.synchronised) {
        reasons.push(format!(
            "unsynchronised clock: the kernel of {who} says its clock is not synchronised (adjtimex {}, max error {:.1} ms), so its --start-at and wall-clock times may be off; run chrony or ntpd (or PTP) on every host",
            c.state,
            c.max_error_us as f64 / 1000.0
        ));
    }
    reasons
}

/// A merged run (`merge`): its shards and how their streaming windows overlap.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeSection {
    pub run_id: String,
    pub shard_count: u32,
    /// The shards that were merged, by index, then a row for each missing one.
    pub shards: Vec<ShardRow>,
    /// Indices of the shards that were not given.
    pub missing_shards: Vec<u32>,
    /// Where every present shard was streaming at once, on the shared wall clock: from the
    /// latest first packet to the earliest last packet (`null`: they never all streamed).
    pub overlap: Option<StreamingWindow>,
    /// The overlap's length over the shortest shard's window (1: they streamed together).
    pub overlap_fraction: f64,
    /// The largest spread of the shards' first packets, in ms (the gate spread).
    pub first_packet_spread_ms: Option<f64>,
    /// The workers' CPU seconds over every shard, per second of session audio streamed.
    pub cpu_per_session_second: Option<f64>,
}

/// One shard of a merged run.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShardRow {
    pub index: u32,
    /// Its output folder as given to `merge` (absent for a missing shard).
    pub dir: Option<String>,
    pub present: bool,
    pub hostname: Option<String>,
    pub cpu_model: Option<String>,
    pub sessions: u64,
    pub completed: u64,
    pub packets: u64,
    pub late_packets: u64,
    pub deviation_p99_ms: Option<f64>,
    pub worker_cpu_seconds: Option<f64>,
    pub window: Option<StreamingWindow>,
    pub start_gate: Option<StartGate>,
    pub clock_sync: Option<ClockSync>,
    /// The shard's own verdict (absent for a missing shard, and for one whose run did not
    /// finish: its conductor was killed before it judged the run; so is its `start_gate`).
    pub verdict: Option<Verdict>,
}

/// The part of every window that all of them share, if any.
pub fn overlap(windows: &[StreamingWindow]) -> Option<StreamingWindow> {
    let start = windows.iter().map(|w| w.start_unix_s).reduce(f64::max)?;
    let end = windows.iter().map(|w| w.end_unix_s).reduce(f64::min)?;
    (end > start).then_some(StreamingWindow {
        start_unix_s: start,
        end_unix_s: end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(a: f64, b: f64) -> StreamingWindow {
        StreamingWindow {
            start_unix_s: a,
            end_unix_s: b,
        }
    }

    #[test]
    fn windows_overlap_where_all_of_them_stream() {
        assert_eq!(overlap(&[w(0.0, 10.0), w(1.0, 11.0)]), Some(w(1.0, 10.0)));
        assert_eq!(overlap(&[w(0.0, 10.0), w(20.0, 30.0)]), None);
        assert_eq!(overlap(&[]), None);
    }

    #[test]
    fn a_gate_that_opened_past_the_threshold_is_late_and_gives_a_reason() {
        let anchor = ClockAnchor {
            realtime_s: 1000.0,
            monotonic_s: 10.0,
        };
        let on_time = start_gate(1005.0, &anchor, Some(15.0), Some(15.004), 80);
        assert_eq!(on_time.opened_late_ms, Some(4.0));
        assert!(!on_time.late);
        let late = start_gate(1005.0, &anchor, Some(15.0), Some(15.2), 80);
        assert!(late.late);
        let why = reasons("this shard", Some(&late), None, 80);
        assert!(
            why[0].starts_with("late gate: this shard started 200.0 ms"),
            "{why:?}"
        );
        assert!(start_gate(1005.0, &anchor, None, None, 80).late);
    }
}
