//! What the conductor knows while a run goes on, from the workers' telemetry. It drives the
//! headless progress lines (and the dashboard); the final figures never come from here.

use crate::telemetry::{Progress, Telemetry};

#[derive(Debug, Clone, Default)]
pub struct WorkerLive {
    pub pid: Option<u32>,
    /// (connected, rejected, failed) once the worker's sessions have set up.
    pub ready: Option<(u32, u32, u32)>,
    pub first_error: Option<String>,
    pub progress: Progress,
    pub done: bool,
    pub gone: bool,
}

#[derive(Debug, Clone, Default)]
pub struct LiveState {
    pub workers: Vec<WorkerLive>,
    /// `CLOCK_MONOTONIC` time of the start gate, once given.
    pub start_s: Option<f64>,
    pub duration_s: f64,
    /// The largest loop lag any worker reported since the last progress line.
    pub loop_lag_window_max_us: u64,
}

impl LiveState {
    pub fn new(workers: usize, duration_s: f64) -> Self {
        LiveState {
            workers: vec![WorkerLive::default(); workers],
            start_s: None,
            duration_s,
            loop_lag_window_max_us: 0,
        }
    }

    pub fn apply(&mut self, worker: u32, msg: Telemetry) {
        let Some(w) = self.workers.get_mut(worker as usize) else {
            return;
        };
        match msg {
            Telemetry::Ready {
                pid,
                connected,
                rejected,
                failed,
                first_error,
            } => {
                w.pid = Some(pid);
                w.ready = Some((connected, rejected, failed));
                w.first_error = first_error;
            }
            Telemetry::Progress(p) => {
                self.loop_lag_window_max_us =
                    self.loop_lag_window_max_us.max(p.loop_lag_window_max_us);
                w.progress = p;
            }
            Telemetry::Done { .. } => w.done = true,
        }
    }

    pub fn all_ready(&self) -> bool {
        self.workers.iter().all(|w| w.ready.is_some() || w.gone)
    }

    pub fn all_gone(&self) -> bool {
        self.workers.iter().all(|w| w.gone)
    }

    /// Counters summed over the workers; maxima are maxima.
    pub fn totals(&self) -> Progress {
        let mut t = Progress::default();
        for w in &self.workers {
            let p = &w.progress;
            t.packets += p.packets;
            t.late_packets += p.late_packets;
            t.sends_over_20ms += p.sends_over_20ms;
            t.sessions_with_violation += p.sessions_with_violation;
            t.sessions_streaming += p.sessions_streaming;
            t.sessions_done += p.sessions_done;
            t.max_deviation_us = t.max_deviation_us.max(p.max_deviation_us);
            t.loop_lag_max_us = t.loop_lag_max_us.max(p.loop_lag_max_us);
            t.queue_lines += p.queue_lines;
            t.queue_bytes += p.queue_bytes;
            t.protocol_errors += p.protocol_errors;
            t.telemetry_dropped += p.telemetry_dropped;
        }
        t
    }

    /// Seconds since the start gate (0 before it).
    pub fn elapsed_s(&self, now_s: f64) -> f64 {
        self.start_s.map_or(0.0, |s| (now_s - s).max(0.0))
    }
}
