//! What the mock counts while it serves, and how it builds and writes its statistics file
//! ([`MockStats`], a contract of the run: `contract/mock.rs`) on SIGINT/SIGTERM.
//!
//! The mock runs on one thread, so the counters are plain `Cell`s shared by every session task;
//! the arrival-deviation histogram is one pooled histogram, not one per session, so memory stays
//! flat however many sessions come and go.

use crate::contract::mock::{MockStats, SCHEMA_VERSION, STATS_LINE_PREFIX};
use crate::contract::ProcessUsage;
use crate::looplag::LoopLagStats;
use crate::stats::{DurationHistogram, ShortPercentiles};
use anyhow::{Context, Result};
use std::cell::{Cell, RefCell};
use std::path::Path;

/// The live counters of one mock process.
#[derive(Debug, Default)]
pub struct Counters {
    sessions_served: Cell<u64>,
    sessions_closed: Cell<u64>,
    sessions_rejected: Cell<u64>,
    appends_received: Cell<u64>,
    protocol_errors: Cell<u64>,
    arrival_deviation: RefCell<DurationHistogram>,
    /// Names of the handshake headers seen (lowercase), and how many handshakes had each.
    headers_seen: RefCell<std::collections::BTreeMap<String, u64>>,
}

fn bump(cell: &Cell<u64>) {
    cell.set(cell.get().saturating_add(1));
}

impl Counters {
    pub fn new() -> Self {
        Counters::default()
    }

    /// A WebSocket handshake was accepted.
    pub fn session_served(&self) {
        bump(&self.sessions_served);
    }

    /// A session reached `session.closed`.
    pub fn session_closed(&self) {
        bump(&self.sessions_closed);
    }

    /// A handshake was refused with HTTP 503.
    pub fn session_rejected(&self) {
        bump(&self.sessions_rejected);
    }

    /// An `input_audio_buffer.append` arrived, accepted or not.
    pub fn append_received(&self) {
        bump(&self.appends_received);
    }

    /// An `error` event was sent, or a session ended on input it could not read.
    pub fn protocol_error(&self) {
        bump(&self.protocol_errors);
    }

    pub fn record_arrival_deviation_s(&self, deviation_s: f64) {
        // Only one task runs at a time and none holds the borrow across an await, so this never
        // fails; a missed sample is still better than a panic if that ever changes.
        if let Ok(mut hist) = self.arrival_deviation.try_borrow_mut() {
            hist.record_s(deviation_s);
        }
    }

    /// A handshake carried a header called `name` (its value is not kept: it may be a key).
    pub fn header_seen(&self, name: &str) {
        if let Ok(mut seen) = self.headers_seen.try_borrow_mut() {
            match seen.get_mut(name) {
                Some(n) => *n += 1,
                None => {
                    seen.insert(name.to_string(), 1);
                }
            }
        }
    }

    pub fn arrival_deviation(&self) -> ShortPercentiles {
        self.arrival_deviation
            .try_borrow()
            .map(|h| h.short())
            .unwrap_or_default()
    }
}

impl MockStats {
    /// The statistics of this process from its counters and measurements.
    pub fn build(
        counters: &Counters,
        listen_addr: &str,
        loop_lag_ms: LoopLagStats,
        usage: ProcessUsage,
    ) -> Self {
        MockStats {
            schema_version: SCHEMA_VERSION,
            pid: std::process::id(),
            listen_addr: listen_addr.to_string(),
            sessions_served: counters.sessions_served.get(),
            sessions_closed: counters.sessions_closed.get(),
            sessions_rejected: counters.sessions_rejected.get(),
            appends_received: counters.appends_received.get(),
            protocol_errors: counters.protocol_errors.get(),
            arrival_deviation_ms: counters.arrival_deviation(),
            loop_lag_ms,
            usage,
            request_headers: counters
                .headers_seen
                .try_borrow()
                .map(|h| h.clone())
                .unwrap_or_default(),
        }
    }

    /// Writes the statistics as pretty JSON. The file appears complete or not at all (written
    /// beside it, then renamed), because the conductor may read it the moment the mock exits.
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut text =
            serde_json::to_string_pretty(self).context("cannot encode mock statistics")?;
        text.push('\n');
        let context = || {
            format!(
                "cannot write mock statistics to {} (--stats-output)",
                path.display()
            )
        };
        if let Err(err) = crate::paths::write_whole(path, text.as_bytes()) {
            // A full disk: no half file is left; the figures still reach whoever reads stdout.
            if let Ok(line) = serde_json::to_string(self) {
                println!("{STATS_LINE_PREFIX}{line}");
            }
            return Err(err).with_context(context);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_carry_the_counters() {
        let counters = Counters::new();
        counters.session_served();
        counters.session_served();
        counters.session_closed();
        counters.session_rejected();
        for _ in 0..5 {
            counters.append_received();
        }
        counters.protocol_error();
        counters.record_arrival_deviation_s(0.0);
        counters.record_arrival_deviation_s(0.004);
        let stats = MockStats::build(
            &counters,
            "127.0.0.1:1",
            LoopLagStats::default(),
            ProcessUsage::default(),
        );
        assert_eq!(stats.schema_version, 1);
        assert_eq!(stats.pid, std::process::id());
        assert_eq!(
            (
                stats.sessions_served,
                stats.sessions_closed,
                stats.sessions_rejected
            ),
            (2, 1, 1)
        );
        assert_eq!((stats.appends_received, stats.protocol_errors), (5, 1));
        assert!((stats.arrival_deviation_ms.max - 4.0).abs() < 0.01);
    }

    #[test]
    fn stats_file_round_trips() {
        let dir = std::env::temp_dir().join(format!(
            "duplexbench-mock-stats-unit-{}-{}",
            std::process::id(),
            crate::clock::monotonic_s()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mock.json");
        let stats = MockStats::build(
            &Counters::new(),
            "127.0.0.1:2",
            LoopLagStats::default(),
            ProcessUsage::default(),
        );
        stats.write(&path).unwrap();
        let back: MockStats =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back.listen_addr, "127.0.0.1:2");
        assert!(!dir.join("mock.json.partial").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
