//! The procfs sampler: an OS thread of the conductor that reads `stat`, `schedstat`
//! and (in `D`) `wchan` of every thread of every worker and of the mock, on an absolute 5 ms
//! schedule, from outside the processes it measures. It turns the samples into episodes (see
//! [`episodes`]) that [`attribution`] lines up with late packets and loop-lag windows.
//!
//! This file holds the thread, its schedule and the types the live views and the summary read;
//! `sampling.rs` is the sampling itself ([`SamplerCore`]), free of the thread and the clock.

pub mod attribution;
pub mod episodes;
pub mod host_load;
pub mod listener;
pub mod procfs;
mod sampling;
pub mod server_stall;

pub use sampling::{CoreReport, SamplerCore};

use crate::clock::monotonic_s;
use crate::contract::Role;
use crate::stats::{DurationHistogram, ShortPercentiles};
use episodes::StallClass;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A stall: an episode at least this long.
pub const STALL_MS: f64 = 20.0;

/// A process the sampler watches.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub role: Role,
    pub index: Option<u32>,
    pub pid: u32,
}

impl Target {
    pub fn name(&self) -> String {
        crate::contract::process_name(self.role, self.index)
    }
}

/// An episode of one thread of one watched process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Episode {
    pub process: String,
    pub role: Role,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub index: Option<u32>,
    pub pid: u32,
    pub tid: u32,
    /// The thread's name (`comm`).
    pub thread: String,
    /// The thread that runs the process's event loop (its main thread).
    pub loop_thread: bool,
    pub class: StallClass,
    pub start_s: f64,
    pub end_s: f64,
    pub duration_ms: f64,
    pub samples: u32,
    pub wchan: Vec<episodes::WchanShare>,
}

impl Episode {
    /// Whether `other` is this episode, perhaps at another length (merged pieces keep the
    /// thread and the start).
    pub fn is_same(&self, other: &Episode) -> bool {
        self.tid == other.tid && self.start_s == other.start_s
    }
}

/// What the dashboard and the headless lines show while the run goes on.
#[derive(Debug, Clone, Default)]
pub struct SamplerLive {
    /// Per watched pid: the loop thread's state letter and the episode under way.
    pub processes: BTreeMap<u32, ProcessView>,
    /// The latest stalls (episodes of at least [`STALL_MS`]), newest last; a stall that grows
    /// after it was first counted (its pieces merged) is updated in place.
    pub recent: VecDeque<Episode>,
    /// The longest stall of a loop thread so far (the stalls that hold packets back): shown
    /// when the latest ones leave it out.
    pub longest: Option<Episode>,
    /// Stalls seen so far.
    pub stalls: u64,
    pub notes: BTreeSet<String>,
    /// The latest second's CPU split: client, server, other.
    pub cpu_split: Option<host_load::CpuSplit>,
}

#[derive(Debug, Clone, Default)]
pub struct ProcessView {
    pub state: char,
    pub current: Option<StallClass>,
    pub disk_stalls: u32,
    pub last_wchan: Option<String>,
}

/// The sampler's own figures, as they appear in the summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SamplerSummary {
    pub enabled: bool,
    pub interval_ms: f64,
    pub ticks: u64,
    /// How late the sampler's own ticks woke.
    pub lateness_ms: ShortPercentiles,
    /// The sampler thread's CPU time over the time it ran.
    pub cpu_cores: f64,
    pub cpu_seconds: f64,
    pub threads_seen: u64,
    pub episodes: u64,
    pub episodes_dropped: u64,
    pub malformed_reads: u64,
    /// Things the sampler could not see, said once each (permissions, hidden wchan).
    pub notes: Vec<String>,
    /// CPU used on the box by processes outside the run, once a second.
    #[serde(default)]
    pub host_load: host_load::HostLoad,
    /// The server process sampled beside the workers, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<WatchedServer>,
}

/// The local server the sampler watched, and how it was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WatchedServer {
    pub pid: u32,
    /// `built-in mock`, `--server-pid`, or `listening on port N`.
    pub found_by: String,
}

/// What the sampler thread hands back: the core's report, its tick lateness, its CPU seconds,
/// its wall time, and the host's load.
type Sampled = (CoreReport, DurationHistogram, f64, f64, host_load::HostLoad);

/// The running sampler thread.
pub struct Sampler {
    thread: JoinHandle<Sampled>,
    stop: Arc<AtomicBool>,
    pub live: Arc<Mutex<SamplerLive>>,
    interval_s: f64,
    server_pid: Option<u32>,
    /// The server watched, as the summary names it (set by the conductor).
    pub server: Option<WatchedServer>,
}

fn thread_cpu_seconds() -> f64 {
    crate::clock::read(rustix::time::ClockId::ThreadCPUTime)
}

impl Sampler {
    /// Starts sampling `targets` under `root` (normally `/proc`) every `interval`.
    pub fn start(
        root: PathBuf,
        targets: Vec<Target>,
        interval: Duration,
    ) -> std::io::Result<Sampler> {
        let live = Arc::new(Mutex::new(SamplerLive::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let interval_s = interval.as_secs_f64();
        // The client's CPU: the workers and this conductor; the server's: the watched one.
        let mut client: Vec<u32> = targets
            .iter()
            .filter(|t| t.role == Role::Worker)
            .map(|t| t.pid)
            .collect();
        client.push(std::process::id());
        let server = targets
            .iter()
            .find(|t| matches!(t.role, Role::Mock | Role::Server))
            .map(|t| t.pid);
        let external_server = targets
            .iter()
            .find(|t| t.role == Role::Server)
            .map(|t| t.pid);
        let host = host_load::HostLoadTracker::new(
            root.clone(),
            client,
            server,
            host_load::DEFAULT_THRESHOLD_CORES,
        );
        let core = SamplerCore::new(root, targets, live.clone());
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("procfs-sampler".to_string())
            .spawn(move || run(core, host, interval_s, &stopping))?;
        Ok(Sampler {
            thread,
            stop,
            live,
            interval_s,
            server_pid: external_server,
            server: None,
        })
    }

    /// The watched server that is not the built-in mock (`--server-pid`, or found on the port).
    pub fn server_pid(&self) -> Option<u32> {
        self.server_pid
    }

    /// Stops the thread and returns its episodes and figures.
    pub fn stop(self) -> (Vec<Episode>, SamplerSummary) {
        self.stop.store(true, Ordering::Relaxed);
        let Ok((report, lateness, cpu_seconds, wall_s, host_load)) = self.thread.join() else {
            return (Vec::new(), SamplerSummary::default());
        };
        let summary = SamplerSummary {
            enabled: true,
            interval_ms: self.interval_s * 1000.0,
            ticks: report.ticks,
            lateness_ms: lateness.short(),
            cpu_cores: if wall_s > 0.0 {
                cpu_seconds / wall_s
            } else {
                0.0
            },
            cpu_seconds,
            threads_seen: report.threads_seen,
            episodes: report.episodes.len() as u64,
            episodes_dropped: report.episodes_dropped,
            malformed_reads: report.malformed,
            notes: report.notes,
            host_load,
            server: self.server,
        };
        (report.episodes, summary)
    }
}

/// The thread: an absolute schedule (tick N due at start + N × interval), its own lateness
/// recorded, ticks it slept through skipped rather than replayed; the host's load once a second.
fn run(
    mut core: SamplerCore,
    mut host: host_load::HostLoadTracker,
    interval_s: f64,
    stop: &AtomicBool,
) -> Sampled {
    let mut lateness = DurationHistogram::new();
    let start_s = monotonic_s();
    let cpu_start_s = thread_cpu_seconds();
    let mut due_s = start_s;
    let mut next_host_s = start_s;
    while !stop.load(Ordering::Relaxed) {
        let now_s = monotonic_s();
        if now_s < due_s {
            std::thread::sleep(Duration::from_secs_f64(due_s - now_s));
            continue;
        }
        lateness.record_s(now_s - due_s);
        core.tick(now_s);
        if now_s >= next_host_s {
            host.sample(now_s);
            next_host_s = now_s + 1.0;
            if let (Some(split), Ok(mut live)) = (host.latest, core.live.lock()) {
                live.cpu_split = Some(split);
            }
        }
        due_s += interval_s;
        let after_s = monotonic_s();
        if due_s < after_s {
            due_s += ((after_s - due_s) / interval_s).ceil() * interval_s;
        }
    }
    let wall_s = monotonic_s() - start_s;
    let cpu_s = thread_cpu_seconds() - cpu_start_s;
    (core.finish(), lateness, cpu_s, wall_s, host.finish())
}
