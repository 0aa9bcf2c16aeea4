//! One pacing vocabulary for every part of the tool: the thresholds a packet is judged by, the
//! one function that classes a packet, and the packet counts that a session, a worker, its
//! telemetry and the summary all carry in the same shape.
//!
//! Deviation is kept in whole microseconds everywhere (`deviation_us`), and is always the
//! magnitude: a packet early by 30 ms is as far from its schedule as one late by 30 ms.

use serde::{Deserialize, Serialize};

/// The default slow-send threshold: the serving benchmark's load-generator diagnostic counts
/// sends more than this far behind.
pub const DEFAULT_SLOW_SEND_THRESHOLD_MS: u32 = 20;

/// The thresholds a packet's deviation is judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Beyond this a packet is late, and the run is not a valid server measurement.
    pub late_us: u64,
    /// Beyond this a send is counted as slow (a diagnostic, not a verdict).
    pub slow_us: u64,
}

/// How one packet kept its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PacketClass {
    OnTime,
    Slow,
    Late,
}

impl Default for Thresholds {
    /// One 80 ms packet, and the serving benchmark's 20 ms.
    fn default() -> Thresholds {
        Thresholds::from_ms(80, DEFAULT_SLOW_SEND_THRESHOLD_MS)
    }
}

impl Thresholds {
    pub fn from_ms(late_ms: u32, slow_ms: u32) -> Thresholds {
        Thresholds {
            late_us: u64::from(late_ms) * 1000,
            slow_us: u64::from(slow_ms) * 1000,
        }
    }

    /// Whether a packet counted late while it was still unsent (one late threshold past its
    /// due time) is slow then too: when the late threshold is the higher one.
    fn overdue_is_slow(&self) -> bool {
        self.late_us >= self.slow_us
    }

    /// The class of a packet `deviation_us` from its schedule, for the heatmap's colour (the
    /// worse of the two when `--late-threshold-ms` is below the slow threshold).
    pub fn classify(&self, deviation_us: u64) -> PacketClass {
        if deviation_us > self.late_us {
            PacketClass::Late
        } else if deviation_us > self.slow_us {
            PacketClass::Slow
        } else {
            PacketClass::OnTime
        }
    }
}

/// Packet counts, from one session up to a whole run, with the same keys at every level.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct PacketCounts {
    /// Packets sent.
    pub packets: u64,
    /// Packets beyond the late threshold, sent or still unsent when they became late.
    pub late_packets: u64,
    /// Packets beyond the slow-send threshold (late ones beyond it included; with a late
    /// threshold below it, a late packet is slow only if it is beyond it too).
    pub slow_sends: u64,
    /// Packets never sent because their session failed (while streaming, or in its set-up).
    pub unsent_packets: u64,
    /// The exact largest deviation of a sent packet.
    pub max_deviation_us: u64,
}

impl PacketCounts {
    /// Counts a sent packet `deviation_us` from its schedule, late and slow by `t`'s two
    /// thresholds each on its own; what was already counted while it waited (`late_counted`:
    /// see [`PacketCounts::overdue`]) is not counted again.
    pub fn sent(&mut self, deviation_us: u64, t: &Thresholds, late_counted: bool) {
        self.packets += 1;
        let slow_counted = late_counted && t.overdue_is_slow();
        self.slow_sends += u64::from(deviation_us > t.slow_us && !slow_counted);
        self.late_packets += u64::from(deviation_us > t.late_us && !late_counted);
        self.max_deviation_us = self.max_deviation_us.max(deviation_us);
    }

    /// Counts a packet still unsent one late threshold after its due time: late, whether or
    /// not it is ever sent, and slow too when the late threshold is not below the slow one
    /// (otherwise its send says whether it was).
    pub fn overdue(&mut self, t: &Thresholds) {
        self.late_packets += 1;
        self.slow_sends += u64::from(t.overdue_is_slow());
    }

    /// Adds `other` (another session's or worker's counts).
    pub fn add(&mut self, other: &PacketCounts) {
        self.packets += other.packets;
        self.late_packets += other.late_packets;
        self.slow_sends += other.slow_sends;
        self.unsent_packets += other.unsent_packets;
        self.max_deviation_us = self.max_deviation_us.max(other.max_deviation_us);
    }
}

/// The deviation of a send that started at `start_s` for a packet due at `due_s`.
pub fn deviation_us(start_s: f64, due_s: f64) -> u64 {
    ((start_s - due_s).abs() * 1e6) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_is_on_time_slow_or_late_by_the_thresholds() {
        let t = Thresholds::from_ms(80, 20);
        assert_eq!(t.classify(0), PacketClass::OnTime);
        assert_eq!(t.classify(20_000), PacketClass::OnTime);
        assert_eq!(t.classify(20_001), PacketClass::Slow);
        assert_eq!(t.classify(80_000), PacketClass::Slow);
        assert_eq!(t.classify(80_001), PacketClass::Late);
    }

    /// `--late-threshold-ms 10`: a packet 16 ms behind is late, not slow (> 20 ms); it was
    /// counted slow as well, reporting 20 ms stalls that never happened (the figures audit of
    /// 2026-12-05).
    #[test]
    fn slow_is_its_own_threshold_when_the_late_one_is_lower() {
        let t = Thresholds::from_ms(10, 20);
        let mut a = PacketCounts::default();
        a.sent(16_000, &t, false);
        assert_eq!((a.late_packets, a.slow_sends), (1, 0));
        a.sent(25_000, &t, false);
        assert_eq!((a.late_packets, a.slow_sends), (2, 1));
        // Counted late while it waited (10 ms), and slow only when it leaves 25 ms late.
        a.overdue(&t);
        assert_eq!((a.late_packets, a.slow_sends), (3, 1));
        a.sent(25_000, &t, true);
        assert_eq!((a.late_packets, a.slow_sends), (3, 2));
    }

    #[test]
    fn counts_add_up_and_keep_the_exact_maximum() {
        let t = Thresholds::from_ms(80, 20);
        let mut a = PacketCounts::default();
        a.sent(90_000, &t, false);
        a.sent(30_000, &t, false);
        // Counted late (and slow) while it waited: not counted again when it leaves.
        a.overdue(&t);
        assert_eq!((a.packets, a.late_packets, a.slow_sends), (2, 2, 3));
        a.sent(200_000, &t, true);
        assert_eq!((a.packets, a.late_packets, a.slow_sends), (3, 2, 3));
        let mut b = PacketCounts {
            unsent_packets: 4,
            ..PacketCounts::default()
        };
        b.add(&a);
        assert_eq!(b.max_deviation_us, 200_000);
        assert_eq!(b.unsent_packets, 4);
        assert_eq!(b.packets, 3);
    }
}
