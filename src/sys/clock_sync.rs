//! The kernel's view of its own clock: is `CLOCK_REALTIME` synchronised (by NTP, chrony or
//! PTP), and how far off it may be. Shards of one run on several hosts open their start gates
//! on their own wall clocks (`--start-at`), so this is what says how well they line up.
//!
//! Neither rustix nor nix wraps `adjtimex(2)`, so this file holds the one `unsafe` call, in
//! read-only mode (`modes = 0` changes nothing and needs no privilege).

use serde::{Deserialize, Serialize};

/// `STA_UNSYNC` (adjtimex(2), `status`): the kernel's clock is not synchronised.
const STA_UNSYNC: i32 = 0x0040;
/// `TIME_ERROR`, adjtimex's return value when the clock is not synchronised.
const TIME_ERROR: i32 = 5;

/// What `adjtimex(2)` says about the clock (read only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockSync {
    /// The clock is synchronised: adjtimex returned no `TIME_ERROR` and `STA_UNSYNC` is clear.
    pub synchronised: bool,
    /// adjtimex's return value by name: `ok`, `ins`, `del`, `oop`, `wait` or `error`.
    pub state: String,
    /// `esterror`: the estimated error of the clock, in µs, as the sync daemon last set it.
    pub estimated_error_us: i64,
    /// `maxerror`: the maximum error, in µs (it grows by 500 µs/s while no daemon updates it).
    pub max_error_us: i64,
    /// `status`: the raw `STA_*` flags.
    pub status: i32,
}

/// Reads the clock's sync state, or `None` where the call fails (not Linux, a seccomp filter).
pub fn read() -> Option<ClockSync> {
    // SAFETY: an all-zero `timex` is a valid value of this plain C struct (integers only);
    // `modes = 0` asks the kernel to read only, and the pointer is to a live, writable,
    // correctly sized struct that outlives the call.
    let (state, tx) = unsafe {
        let mut tx: libc::timex = std::mem::zeroed();
        (libc::adjtimex(&mut tx), tx)
    };
    if state < 0 {
        return None;
    }
    Some(of(state, tx.status, tx.esterror, tx.maxerror))
}

/// The record of adjtimex's return value `state` and its `status`, `esterror` and `maxerror`.
fn of(state: i32, status: i32, esterror: i64, maxerror: i64) -> ClockSync {
    let name = match state {
        0 => "ok",
        1 => "ins",
        2 => "del",
        3 => "oop",
        4 => "wait",
        TIME_ERROR => "error",
        _ => "unknown",
    };
    ClockSync {
        synchronised: state != TIME_ERROR && status & STA_UNSYNC == 0,
        state: name.to_string(),
        estimated_error_us: esterror,
        max_error_us: maxerror,
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_state_can_be_read_on_linux() {
        let sync = read().expect("adjtimex works read-only without privilege");
        assert!(!sync.state.is_empty());
        assert!(sync.max_error_us >= 0);
    }

    #[test]
    fn an_unsync_flag_or_time_error_means_unsynchronised() {
        assert!(of(0, 0, 100, 1000).synchronised);
        assert!(!of(0, STA_UNSYNC, 100, 1000).synchronised);
        assert!(!of(TIME_ERROR, 0, 100, 1000).synchronised);
        assert_eq!(of(TIME_ERROR, 0, 0, 0).state, "error");
    }
}
