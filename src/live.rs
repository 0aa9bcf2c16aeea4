//! What the conductor knows while a run goes on, from the workers' telemetry and from reading the
//! children in /proc: a plain struct that the headless progress lines and the dashboard render.
//! The final figures never come from here.

use crate::contract::figures::ProtocolFigures;
use crate::contract::telemetry::{Progress, Telemetry};
use crate::pacing::Thresholds;
use crate::procstat::{self, LiveReading};
use crate::stats::DurationHistogram;
use crate::verdict::{self, Facts, Verdict};
use std::collections::VecDeque;

/// How many recent telemetry samples (200 ms apart) a worker's lag and queue history keeps.
pub const HISTORY: usize = 600;
/// The heatmap's time bucket.
pub const BUCKET_S: f64 = 1.0;
/// A worker that has not reported for longer than this is shown as silent (it reports 5×/s).
pub const SILENT_S: f64 = 1.0;
/// The most buckets kept per session (one hour at 1 s).
const MAX_BUCKETS: usize = 3600;

/// A child process as read from /proc about once a second.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessLive {
    pub pid: u32,
    pub reading: Option<LiveReading>,
    pub cpu_cores: f64,
    read_at_s: f64,
}

impl ProcessLive {
    pub fn new(pid: u32) -> Self {
        ProcessLive {
            pid,
            ..ProcessLive::default()
        }
    }

    /// Reads `/proc/<pid>` again; CPU in cores is the CPU time since the previous reading.
    pub fn refresh(&mut self, now_s: f64) {
        let reading = procstat::read_live(self.pid);
        if let (Some(new), Some(old)) = (reading, self.reading) {
            let wall_s = now_s - self.read_at_s;
            if wall_s > 0.0 {
                self.cpu_cores = (new.cpu_seconds - old.cpu_seconds).max(0.0) / wall_s;
            }
        }
        self.reading = reading;
        self.read_at_s = now_s;
    }
}

#[derive(Debug, Clone, Default)]
pub struct WorkerLive {
    pub process: ProcessLive,
    /// (connected, rejected, failed) once the worker's sessions have set up.
    pub ready: Option<(u32, u32, u32)>,
    /// (connected, rejected, failed) so far, while the worker's sessions set up (`ready`
    /// has the final figures).
    pub setting_up: (u32, u32, u32),
    pub first_error: Option<String>,
    pub progress: Progress,
    pub deviation: Option<DurationHistogram>,
    /// Packet 0's lateness after its gate, per session so far.
    pub start_lateness: Option<DurationHistogram>,
    /// The summary's `server` histograms as the last telemetry had them, for a worker that
    /// leaves no result.
    pub server: Option<ServerLatency>,
    /// The protocol's own figures (cumulative, once a second): the server's latency as this
    /// worker's sessions see it.
    pub protocol: Option<ProtocolFigures>,
    /// Loop-lag window maxima (µs), oldest first.
    pub lag_history: VecDeque<u64>,
    /// Writer queue depth in lines, oldest first.
    pub queue_history: VecDeque<u64>,
    pub queue_peak_lines: u64,
    pub queue_peak_bytes: u64,
    pub done: bool,
    pub gone: bool,
}

/// The summary's `server` histograms of one worker, cumulative.
#[derive(Debug, Clone, Default)]
pub struct ServerLatency {
    pub accepted: DurationHistogram,
    pub unit_lag: DurationHistogram,
    pub first_audio: DurationHistogram,
}

/// `p50 / p95` in ms of a figure that may be negative, or "–" when it holds no sample.
pub fn p50_p95_signed(h: &crate::stats::SignedHistogram) -> String {
    if h.count() == 0 {
        "–".to_string()
    } else {
        format!("{:.1}/{:.1} ms", h.quantile_ms(0.5), h.quantile_ms(0.95))
    }
}

/// The end of a run, as the dashboard shows it.
#[derive(Debug, Clone, Default)]
pub struct Finished {
    pub verdict: String,
    pub reasons: Vec<String>,
    pub summary_path: String,
    pub exit_code: i32,
}

/// What is fixed for the whole run.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    pub processes: u32,
    pub sessions_per_process: u32,
    pub duration_s: f64,
    pub url: String,
    pub trace: String,
    pub thresholds: Thresholds,
    pub output_dir: String,
    /// `--no-pace`: pacing is not judged.
    pub unpaced: bool,
    /// The protocol's own figures with no sample yet: which figures the protocol panel and the
    /// headless lines show, in order.
    pub protocol_figures: ProtocolFigures,
    /// Shard `I` of `N` of a run over several hosts.
    pub shard: Option<(u32, u32)>,
    /// `--start-at`: the wall-clock time (Unix seconds) the gate opens.
    pub start_at_unix_s: Option<f64>,
}

#[derive(Debug, Clone, Default)]
pub struct LiveState {
    pub info: RunInfo,
    pub workers: Vec<WorkerLive>,
    pub mock: Option<ProcessLive>,
    /// A local server the sampler watches that is not the built-in mock (`--server-pid`).
    pub server: Option<ProcessLive>,
    /// `CLOCK_MONOTONIC` time of the start gate, once given.
    pub start_s: Option<f64>,
    /// The latest time any telemetry was stamped with (the dashboard's "now").
    pub now_s: f64,
    /// The largest loop lag any worker reported since the last headless progress line.
    pub loop_lag_window_max_us: u64,
    /// Per session (worker-major), the worst |deviation| (µs + 1) of each time bucket; 0 = none.
    pub heat: Vec<Vec<u32>>,
    pub cancelled: Option<String>,
    pub finished: Option<Finished>,
    /// Stalls already mentioned in a headless progress line.
    pub stalls_reported: u64,
    /// What the procfs sampler sees (absent with `--no-sampler`).
    pub sampler: Option<std::sync::Arc<std::sync::Mutex<crate::sampler::SamplerLive>>>,
    /// The sweep this run is a level of (`sweep`; absent for a plain run).
    pub sweep: Option<SweepLive>,
}

/// Where a sweep is, for the dashboard: which level this run is, and the levels done so far.
#[derive(Debug, Clone, Default)]
pub struct SweepLive {
    /// This run's level, from 1, of `levels`.
    pub level: usize,
    pub levels: usize,
    /// `64 sessions` or `64 sessions, repeat 2 of 3`.
    pub label: String,
    /// The per-level table: its header, then one line per run already finished.
    pub header: String,
    pub rows: Vec<String>,
}

impl LiveState {
    pub fn new(info: RunInfo) -> Self {
        let sessions = (info.processes * info.sessions_per_process) as usize;
        LiveState {
            workers: vec![WorkerLive::default(); info.processes as usize],
            heat: vec![Vec::new(); sessions],
            info,
            ..LiveState::default()
        }
    }

    pub fn apply(&mut self, worker: u32, msg: Telemetry) {
        let per_worker = self.info.sessions_per_process as usize;
        let start_s = self.start_s;
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
                w.process.pid = pid;
                w.ready = Some((connected, rejected, failed));
                w.first_error = first_error;
            }
            Telemetry::SetupProgress {
                connected,
                rejected,
                failed,
            } => w.setting_up = (connected, rejected, failed),
            Telemetry::Progress(p) => {
                self.loop_lag_window_max_us =
                    self.loop_lag_window_max_us.max(p.loop_lag_window_max_us);
                push_bounded(&mut w.lag_history, p.loop_lag_window_max_us);
                push_bounded(&mut w.queue_history, p.queue_lines);
                w.queue_peak_lines = w.queue_peak_lines.max(p.queue_lines);
                w.queue_peak_bytes = w.queue_peak_bytes.max(p.queue_bytes);
                self.now_s = self.now_s.max(p.time_s);
                w.progress = p;
            }
            Telemetry::Heat { time_s, cells } => {
                let Some(start_s) = start_s else { return };
                // The cells go where their latest packet was due: a worker that stalled sends
                // its packets late, and they are drawn late by colour, not by place.
                let bucket = ((time_s - start_s) / BUCKET_S).floor();
                if !(0.0..MAX_BUCKETS as f64).contains(&bucket) {
                    return;
                }
                let bucket = bucket as usize;
                let first_row = worker as usize * per_worker;
                for (i, &value) in cells.iter().enumerate().take(per_worker) {
                    if value == 0 {
                        continue;
                    }
                    if let Some(row) = self.heat.get_mut(first_row + i) {
                        if row.len() <= bucket {
                            row.resize(bucket + 1, 0);
                        }
                        row[bucket] = row[bucket].max(value);
                    }
                }
            }
            Telemetry::Histogram(h) => {
                let h = *h;
                w.deviation = Some(h.deviation);
                w.start_lateness = Some(h.start_lateness);
                w.server = Some(ServerLatency {
                    accepted: h.accepted,
                    unit_lag: h.unit_lag,
                    first_audio: h.first_audio,
                });
                if h.protocol.is_some() {
                    w.protocol = h.protocol;
                }
            }
            Telemetry::Done { .. } => w.done = true,
        }
    }

    /// Reads the children's /proc entries (about once a second).
    pub fn refresh_processes(&mut self, now_s: f64) {
        for w in &mut self.workers {
            if w.process.pid != 0 && !w.gone {
                w.process.refresh(now_s);
            }
        }
        for p in [&mut self.mock, &mut self.server].into_iter().flatten() {
            p.refresh(now_s);
        }
    }

    /// The sessions set up so far over all workers, those still setting up included:
    /// (connected, rejected, failed).
    pub fn set_up_so_far(&self) -> (u64, u64, u64) {
        self.workers.iter().fold((0, 0, 0), |(c, r, f), w| {
            let (wc, wr, wf) = w.ready.unwrap_or(w.setting_up);
            (c + u64::from(wc), r + u64::from(wr), f + u64::from(wf))
        })
    }

    pub fn all_ready(&self) -> bool {
        self.workers.iter().all(|w| w.ready.is_some() || w.gone)
    }

    /// Whether any worker set up at least one session (there is something to stream).
    pub fn any_connected(&self) -> bool {
        self.workers
            .iter()
            .any(|w| w.ready.is_some_and(|r| r.0 > 0))
    }

    pub fn all_gone(&self) -> bool {
        self.workers.iter().all(|w| w.gone)
    }

    /// Counters summed over the workers; maxima are maxima.
    pub fn totals(&self) -> Progress {
        let mut t = Progress::default();
        for w in &self.workers {
            let p = &w.progress;
            t.counts.add(&p.counts);
            t.sessions_with_late_packets += p.sessions_with_late_packets;
            t.sessions_streaming += p.sessions_streaming;
            t.sessions_done += p.sessions_done;
            t.sessions_completed += p.sessions_completed;
            t.sessions_incomplete += p.sessions_incomplete;
            t.sessions_rejected += p.sessions_rejected;
            t.loop_lag_max_us = t.loop_lag_max_us.max(p.loop_lag_max_us);
            t.queue_lines += p.queue_lines;
            t.queue_bytes += p.queue_bytes;
            t.protocol_errors += p.protocol_errors;
            t.telemetry_dropped += p.telemetry_dropped;
            t.lines_not_written += p.lines_not_written;
            t.disk_full |= p.disk_full;
        }
        t
    }

    /// Workers still running whose last progress report is more than a second old (stopped,
    /// frozen, or starved): their "late 0" means nothing. (index, seconds since it reported).
    pub fn silent_workers(&self, now_s: f64) -> Vec<(usize, f64)> {
        self.workers
            .iter()
            .enumerate()
            .filter(|(_, w)| !w.done && !w.gone && w.progress.time_s > 0.0)
            .map(|(i, w)| (i, now_s - w.progress.time_s))
            .filter(|&(_, silent_s)| silent_s > SILENT_S)
            .collect()
    }

    /// "w0 silent 3.2 s" for the workers that stopped reporting, or None.
    pub fn silent_text(&self, now_s: f64) -> Option<String> {
        let silent = self.silent_workers(now_s);
        let (&(first, first_s), rest) = silent.split_first()?;
        Some(if rest.is_empty() {
            format!("worker {first} silent {first_s:.1} s (stopped? see its state)")
        } else {
            format!(
                "{} workers silent (worker {first} for {first_s:.1} s)",
                silent.len()
            )
        })
    }

    /// The deviation histogram pooled over the workers' latest cumulative histograms.
    pub fn pooled_deviation(&self) -> DurationHistogram {
        self.pooled(|w| w.deviation.as_ref())
    }

    /// One of the workers' latest cumulative histograms, pooled over the workers that sent it.
    fn pooled(&self, of: impl Fn(&WorkerLive) -> Option<&DurationHistogram>) -> DurationHistogram {
        let mut pooled = DurationHistogram::new();
        for h in self.workers.iter().filter_map(of) {
            pooled.add(h);
        }
        pooled
    }

    /// The sessions' start lateness pooled over the workers' latest histograms.
    pub fn pooled_start_lateness(&self) -> DurationHistogram {
        self.pooled(|w| w.start_lateness.as_ref())
    }

    /// The protocol's own figures pooled over the workers' latest ones, in the run's order.
    pub fn pooled_protocol(&self) -> ProtocolFigures {
        let mut pooled = self.info.protocol_figures.clone();
        for f in self.workers.iter().filter_map(|w| w.protocol.as_ref()) {
            pooled.add(f);
        }
        pooled
    }

    /// Seconds since the start gate (0 before it).
    /// Seconds until the start gate opens, while it is still ahead (`--start-at`).
    pub fn countdown_s(&self, now_s: f64) -> Option<f64> {
        self.start_s.filter(|&s| s > now_s).map(|s| s - now_s)
    }

    pub fn elapsed_s(&self, now_s: f64) -> f64 {
        self.start_s.map_or(0.0, |s| (now_s - s).max(0.0))
    }

    /// Sessions the server refused: reported at set-up, and again when they end.
    pub fn rejected(&self) -> u32 {
        let at_setup: u32 = self
            .workers
            .iter()
            .filter_map(|w| w.ready.map(|r| r.1))
            .sum();
        at_setup.max(self.totals().sessions_rejected)
    }

    /// The verdict so far, decided as the summary decides it.
    pub fn verdict(&self) -> Verdict {
        let t = self.totals();
        verdict::judge(&Facts {
            counts: t.counts,
            sessions_with_late_packets: u64::from(t.sessions_with_late_packets),
            late_threshold_ms: (self.info.thresholds.late_us / 1000) as u32,
            sessions_configured: u64::from(self.info.processes)
                * u64::from(self.info.sessions_per_process),
            incomplete: u64::from(t.sessions_incomplete),
            rejected: u64::from(self.rejected()),
            protocol_errors: t.protocol_errors,
            unpaced: self.info.unpaced,
            ..Facts::default()
        })
    }
}

impl LiveState {
    /// Stalls the sampler saw since the previous call, newest last.
    pub fn take_new_stalls(&mut self) -> Vec<crate::sampler::Episode> {
        let Some(sampler) = &self.sampler else {
            return Vec::new();
        };
        let Ok(live) = sampler.lock() else {
            return Vec::new();
        };
        let new = live.stalls.saturating_sub(self.stalls_reported) as usize;
        self.stalls_reported = live.stalls;
        let skip = live.recent.len().saturating_sub(new);
        live.recent.iter().skip(skip).cloned().collect()
    }
}

/// One line about a stall: `worker 0 loop thread: disk_wait 120 ms in folio_wait_bit`.
pub fn describe_stall(e: &crate::sampler::Episode) -> String {
    let thread = if e.loop_thread {
        "loop thread".to_string()
    } else {
        format!("thread {}", e.thread)
    };
    let wchan = e
        .wchan
        .first()
        .map(|w| format!(" in {}", w.name))
        .unwrap_or_default();
    format!(
        "{} {thread}: {} {:.0} ms{wchan}",
        e.process,
        e.class.as_str(),
        e.duration_ms
    )
}

fn push_bounded(history: &mut VecDeque<u64>, value: u64) {
    if history.len() == HISTORY {
        history.pop_front();
    }
    history.push_back(value);
}
