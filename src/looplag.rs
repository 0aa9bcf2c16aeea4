//! The event-loop lag monitor: a 10 ms ticker on the runtime it watches, recording how
//! late each tick wakes. A blocked runtime shows here first: every packet of every session on that
//! runtime waits with the ticker.

use crate::clock;
use crate::stats::DurationHistogram;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The ticker period.
pub const TICK: Duration = Duration::from_millis(10);

/// What the ticker found, shared with whoever reports it.
#[derive(Debug, Default)]
pub struct LoopLag {
    hist: Mutex<DurationHistogram>,
    over_20ms: AtomicU64,
    over_80ms: AtomicU64,
    max_us: AtomicU64,
    /// The largest lag since the live reader last took it (see [`LoopLag::take_window_max_us`]).
    window_max_us: AtomicU64,
    /// `[due_s, woke_s]` of ticks more than [`LAG_WINDOW_US`] late (at most
    /// [`MAX_LAG_WINDOWS`]).
    lag_windows: Mutex<Vec<[f64; 2]>>,
}

/// How late a tick must be for its window to be kept for attribution ("stall" is the
/// sampler's word for a process that stopped running; a late tick is loop lag).
pub const LAG_WINDOW_US: u64 = 20_000;
/// The most lag windows kept.
const MAX_LAG_WINDOWS: usize = 100_000;

/// Loop-lag figures as they appear in result files and the summary.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoopLagStats {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub over_80ms: u64,
    pub over_20ms: u64,
}

impl LoopLag {
    pub fn new() -> Arc<Self> {
        Arc::new(LoopLag::default())
    }

    /// Records one tick that woke `lag_us` late.
    pub fn record_us(&self, lag_us: u64) {
        if let Ok(mut hist) = self.hist.lock() {
            hist.record_us(lag_us as i64);
        }
        if lag_us > 20_000 {
            self.over_20ms.fetch_add(1, Ordering::Relaxed);
        }
        if lag_us > 80_000 {
            self.over_80ms.fetch_add(1, Ordering::Relaxed);
        }
        self.max_us.fetch_max(lag_us, Ordering::Relaxed);
        self.window_max_us.fetch_max(lag_us, Ordering::Relaxed);
    }

    /// Records a tick due at `due_s` that woke at `woke_s`.
    pub fn record_tick(&self, due_s: f64, woke_s: f64) {
        let lag_us = ((woke_s - due_s) * 1e6).max(0.0) as u64;
        self.record_us(lag_us);
        if lag_us > LAG_WINDOW_US {
            if let Ok(mut windows) = self.lag_windows.lock() {
                if windows.len() < MAX_LAG_WINDOWS {
                    windows.push([due_s, woke_s]);
                }
            }
        }
    }

    /// The windows of ticks more than [`LAG_WINDOW_US`] late.
    pub fn lag_windows(&self) -> Vec<[f64; 2]> {
        self.lag_windows
            .lock()
            .map(|w| w.clone())
            .unwrap_or_default()
    }

    /// The largest lag since the previous call, for live telemetry.
    pub fn take_window_max_us(&self) -> u64 {
        self.window_max_us.swap(0, Ordering::Relaxed)
    }

    pub fn max_us(&self) -> u64 {
        self.max_us.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> LoopLagStats {
        let short = self.hist.lock().map(|h| h.short()).unwrap_or_default();
        LoopLagStats {
            p50: short.p50,
            p99: short.p99,
            // Exact, unlike the histogram's bucket-wide max.
            max: self.max_us() as f64 / 1000.0,
            over_80ms: self.over_80ms.load(Ordering::Relaxed),
            over_20ms: self.over_20ms.load(Ordering::Relaxed),
        }
    }
}

/// Runs the ticker until `stop` fires, calling `on_tick` after every tick (the worker samples its
/// writer queue depth there). Ticks are on an absolute schedule; ticks missed during a stall are
/// skipped, not replayed, so one stall counts once.
pub async fn run(
    lag: Arc<LoopLag>,
    mut on_tick: impl FnMut(),
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let tick_s = TICK.as_secs_f64();
    let mut due_s = clock::monotonic_s() + tick_s;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(clock::instant_at(due_s)) => {}
            _ = stop.changed() => return,
        }
        let now_s = clock::monotonic_s();
        lag.record_tick(due_s, now_s);
        on_tick();
        due_s += tick_s;
        if due_s < now_s {
            // Skip the ticks the stall swallowed.
            let missed = ((now_s - due_s) / tick_s).ceil();
            due_s += missed * tick_s;
        }
        if *stop.borrow() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_counts_once_in_each_bucket() {
        let lag = LoopLag::new();
        lag.record_us(1_000);
        lag.record_us(150_000);
        let stats = lag.stats();
        assert_eq!(stats.over_20ms, 1);
        assert_eq!(stats.over_80ms, 1);
        assert!((stats.max - 150.0).abs() < 0.2);
        assert_eq!(lag.take_window_max_us(), 150_000);
        assert_eq!(lag.take_window_max_us(), 0);
    }
}
