//! The clock every process of a run shares: `CLOCK_MONOTONIC` seconds, so that samples
//! taken by the conductor, the workers and the mock line up, plus one realtime anchor per process
//! so that runs on several hosts can be aligned afterwards.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A clock in seconds (rustix reads it through the vDSO, as libc does: no system call).
pub fn read(clock: rustix::time::ClockId) -> f64 {
    let ts = rustix::time::clock_gettime(clock);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// `CLOCK_MONOTONIC` in seconds: the time base of every `*_s` figure the tool records.
pub fn monotonic_s() -> f64 {
    read(rustix::time::ClockId::Monotonic)
}

/// `CLOCK_REALTIME` in seconds since the Unix epoch.
pub fn realtime_s() -> f64 {
    read(rustix::time::ClockId::Realtime)
}

/// `CLOCK_REALTIME` in nanoseconds since the Unix epoch: exact, where seconds in an `f64` are
/// only good to a quarter of a microsecond this far from the epoch.
pub fn realtime_ns() -> i64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    ts.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec)
}

/// One simultaneous reading of both clocks.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockAnchor {
    pub realtime_s: f64,
    pub monotonic_s: f64,
}

impl ClockAnchor {
    pub fn now() -> Self {
        let monotonic_s = monotonic_s();
        ClockAnchor {
            realtime_s: realtime_s(),
            monotonic_s,
        }
    }
}

/// The tokio instant at which `CLOCK_MONOTONIC` reads `target_s` (tokio's clock is the same
/// monotonic clock on Linux, so only the offset from "now" is needed).
pub fn instant_at(target_s: f64) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    let delta_s = target_s - monotonic_s();
    if delta_s > 0.0 {
        now + Duration::from_secs_f64(delta_s)
    } else {
        now
    }
}

/// A UTC timestamp `YYYYmmdd-HHMMSS` for default output folder names.
pub fn utc_stamp() -> String {
    let text = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // "2026-11-30T10:16:08Z" -> "20261130-101608"
    text.trim_end_matches('Z')
        .replace('T', "-")
        .replace([':'], "")
        .replacen('-', "", 2)
}

/// An RFC 3339 UTC timestamp for summaries.
pub fn utc_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_backwards() {
        let a = monotonic_s();
        let b = monotonic_s();
        assert!(b >= a);
    }

    #[test]
    fn utc_stamp_has_folder_friendly_shape() {
        let stamp = utc_stamp();
        assert_eq!(stamp.len(), 15, "{stamp}");
        assert_eq!(&stamp[8..9], "-");
        assert!(stamp.chars().all(|c| c.is_ascii_digit() || c == '-'));
    }
}

/// A length of time for people: whole seconds as `30 s`, others to the hundredth (`17.48 s`,
/// `5.83 s`), so that a file's audio length is not rounded to a different one.
pub fn seconds_text(s: f64) -> String {
    let hundredths = (s * 100.0).round();
    if hundredths % 100.0 == 0.0 {
        format!("{:.0} s", hundredths / 100.0)
    } else {
        let text = format!("{:.2}", hundredths / 100.0);
        format!("{} s", text.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod seconds_text_tests {
    #[test]
    fn whole_seconds_stay_whole_and_others_keep_their_hundredths() {
        assert_eq!(super::seconds_text(30.0), "30 s");
        assert_eq!(super::seconds_text(17.48), "17.48 s");
        assert_eq!(super::seconds_text(5.8312), "5.83 s");
        assert_eq!(super::seconds_text(2.5), "2.5 s");
        assert_eq!(super::seconds_text(0.999), "1 s");
    }
}
