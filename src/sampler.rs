//! The procfs sampler: an OS thread of the conductor that reads `stat`, `schedstat`
//! and (in `D`) `wchan` of every thread of every worker and of the mock, on an absolute 5 ms
//! schedule, from outside the processes it measures. It turns the samples into episodes (see
//! [`episodes`]) that [`attribution`] lines up with late packets and loop stalls.

pub mod attribution;
pub mod episodes;
pub mod host_load;
pub mod listener;
pub mod procfs;
pub mod server_stall;

use crate::clock::monotonic_s;
use crate::contract::Role;
use crate::stats::{DurationHistogram, ShortPercentiles};
use episodes::{Span, StallClass, Tracker};
use procfs::{ReadError, ThreadFiles};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Busy or starved episodes shorter than this are not kept (a thread on the CPU for one tick is
/// normal); every disk wait is kept, since a loop thread has no business in `D` at all.
const MIN_EPISODE_MS: f64 = 10.0;
/// Episodes of one thread and one class closer than this are one episode (a disk wait broken by
/// a few milliseconds of copying is still one stall).
const MERGE_GAP_MS: f64 = 15.0;
/// At most this many episodes are kept; later ones are counted.
const MAX_EPISODES: usize = 20_000;
/// Threads are listed again every this many ticks (new threads appear, old ones go).
const RELIST_TICKS: u64 = 20;
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

/// What the dashboard and the headless lines show while the run goes on.
#[derive(Debug, Clone, Default)]
pub struct SamplerLive {
    /// Per watched pid: the loop thread's state letter and the episode under way.
    pub processes: BTreeMap<u32, ProcessView>,
    /// The latest stalls (episodes of at least [`STALL_MS`]), newest last.
    pub recent: VecDeque<Episode>,
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

struct Thread {
    pid: u32,
    files: ThreadFiles,
    tracker: Tracker,
    comm: String,
    target: usize,
    /// The index of this thread's latest kept episode, for merging.
    last_kept: Option<usize>,
    /// The previous sample's schedstat and state letter.
    last: Option<(procfs::SchedStat, char)>,
}

/// What to say once when a watched process's /proc may not be read.
fn denied_note(target: &Target) -> String {
    match target.role {
        Role::Server => format!(
            "/proc of the server (pid {}) cannot be read: its stalls are not classified; run duplexbench-tui as the server's user to sample it",
            target.pid
        ),
        _ => format!(
            "/proc of {} (pid {}) cannot be read: its stalls are not classified; run duplexbench-tui as the same user as its workers",
            target.name(),
            target.pid
        ),
    }
}

/// Extends `into` by `span` (same thread, same class), pooling their wchan counts.
fn merge(into: &mut Episode, span: &Span) {
    into.end_s = span.end_s;
    into.duration_ms = ((into.end_s - into.start_s) * 1e6).round() / 1000.0;
    into.samples += span.samples;
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for w in into.wchan.drain(..).chain(span.wchan.iter().cloned()) {
        *counts.entry(w.name).or_default() += w.samples;
    }
    into.wchan = episodes::shares(counts);
}

/// The sampling itself, without the thread and the clock: [`SamplerCore::tick`] takes one sample
/// of every thread at the time it is given, so tests drive it over a fake /proc tree.
pub struct SamplerCore {
    root: PathBuf,
    targets: Vec<Target>,
    threads: BTreeMap<u32, Thread>,
    gone: BTreeSet<u32>,
    episodes: Vec<Episode>,
    episodes_dropped: u64,
    ticks: u64,
    malformed: u64,
    hidden_wchan: u64,
    /// Samples of any thread in `D`.
    d_samples: u64,
    threads_seen: u64,
    /// `stat` reads skipped because the thread provably still slept.
    stat_reads_saved: u64,
    live: Arc<Mutex<SamplerLive>>,
}

impl SamplerCore {
    pub fn new(root: PathBuf, targets: Vec<Target>, live: Arc<Mutex<SamplerLive>>) -> Self {
        SamplerCore {
            root,
            targets,
            threads: BTreeMap::new(),
            gone: BTreeSet::new(),
            episodes: Vec::new(),
            episodes_dropped: 0,
            ticks: 0,
            malformed: 0,
            hidden_wchan: 0,
            d_samples: 0,
            threads_seen: 0,
            stat_reads_saved: 0,
            live,
        }
    }

    fn note(&self, text: String) {
        if let Ok(mut live) = self.live.lock() {
            live.notes.insert(text);
        }
    }

    fn relist(&mut self) {
        for (t, target) in self.targets.iter().enumerate() {
            let tids = match procfs::list_threads(&self.root, target.pid) {
                Ok(tids) => tids,
                // A server the user named that cannot be read is said once; a worker that
                // exited is no news.
                Err(err) if target.role == Role::Server && self.ticks == 0 => {
                    self.note(if err.kind() == std::io::ErrorKind::PermissionDenied {
                        denied_note(target)
                    } else {
                        format!(
                            "the server (pid {}) cannot be read under /proc ({err}): it is not sampled",
                            target.pid
                        )
                    });
                    continue;
                }
                Err(_) => continue,
            };
            for tid in tids {
                if self.threads.contains_key(&tid) || self.gone.contains(&tid) {
                    continue;
                }
                match ThreadFiles::open(&self.root, target.pid, tid) {
                    Ok(files) => {
                        self.threads_seen += 1;
                        self.threads.insert(
                            tid,
                            Thread {
                                pid: target.pid,
                                files,
                                tracker: Tracker::default(),
                                comm: String::new(),
                                target: t,
                                last_kept: None,
                                last: None,
                            },
                        );
                    }
                    Err(ReadError::Denied) => self.note(denied_note(target)),
                    Err(_) => {}
                }
            }
        }
    }

    fn keep(&mut self, thread: &mut Thread, tid: u32, span: Span) {
        if span.class != StallClass::DiskWait && span.duration_ms() < MIN_EPISODE_MS {
            return;
        }
        if let Some(last) = thread.last_kept.and_then(|i| self.episodes.get_mut(i)) {
            if last.class == span.class && (span.start_s - last.end_s) * 1000.0 <= MERGE_GAP_MS {
                let was_stall = last.duration_ms >= STALL_MS;
                merge(last, &span);
                if !was_stall && last.duration_ms >= STALL_MS {
                    let merged = last.clone();
                    self.count_stall(merged);
                }
                return;
            }
        }
        let target = &self.targets[thread.target];
        let episode = Episode {
            process: target.name(),
            role: target.role,
            index: target.index,
            pid: thread.pid,
            tid,
            thread: thread.comm.clone(),
            loop_thread: tid == thread.pid,
            class: span.class,
            start_s: span.start_s,
            end_s: span.end_s,
            duration_ms: (span.duration_ms() * 1000.0).round() / 1000.0,
            samples: span.samples,
            wchan: span.wchan,
        };
        if let (StallClass::DiskWait, Ok(mut live)) = (episode.class, self.live.lock()) {
            live.processes.entry(episode.pid).or_default().disk_stalls += 1;
        }
        if episode.duration_ms >= STALL_MS {
            self.count_stall(episode.clone());
        }
        // Half the room is kept for loop threads: only their episodes explain late packets.
        let cap = if episode.loop_thread {
            MAX_EPISODES
        } else {
            MAX_EPISODES / 2
        };
        if self.episodes.len() < cap {
            thread.last_kept = Some(self.episodes.len());
            self.episodes.push(episode);
        } else {
            self.episodes_dropped += 1;
        }
    }

    /// Counts a stall for the live views.
    fn count_stall(&self, episode: Episode) {
        if let Ok(mut live) = self.live.lock() {
            live.stalls += 1;
            if live.recent.len() == 50 {
                live.recent.pop_front();
            }
            live.recent.push_back(episode);
        }
    }

    /// Takes one sample of every watched thread at `now_s`.
    pub fn tick(&mut self, now_s: f64) {
        if self.ticks % RELIST_TICKS == 0 {
            self.relist();
        }
        self.ticks += 1;
        let mut ended = Vec::new();
        let mut views: BTreeMap<u32, ProcessView> = BTreeMap::new();
        // Taken out for the loop, so that `keep` may borrow the rest of `self`.
        let mut threads = std::mem::take(&mut self.threads);
        for (&tid, thread) in threads.iter_mut() {
            // schedstat first: it is cheap. A thread that slept through the last interval and
            // whose schedstat has not moved still sleeps (to get into `D` it has to run), so its
            // `stat`, the costlier read, is skipped; threads in `R` or `D` are always read.
            // Never for the loop thread, whose state the dashboard shows, and not every
            // RELIST_TICKS for the others: a thread woken but still waiting for a CPU has not
            // moved its schedstat yet.
            let may_skip = tid != thread.pid && self.ticks % RELIST_TICKS != 0;
            let sample = thread
                .files
                .schedstat()
                .and_then(|sched| match thread.last {
                    Some((last_sched, 'S')) if may_skip && last_sched == sched => {
                        self.stat_reads_saved += 1;
                        Ok(('S', sched))
                    }
                    _ => thread.files.stat().map(|stat| {
                        thread.comm = stat.comm;
                        (stat.state, sched)
                    }),
                });
            match sample {
                Ok((state, sched)) => {
                    thread.last = Some((sched, state));
                    let wchan = if state == 'D' {
                        thread.files.wchan().unwrap_or(None)
                    } else {
                        None
                    };
                    self.d_samples += u64::from(state == 'D');
                    let hidden_before = thread.tracker.hidden_wchan;
                    if let Some(span) = thread.tracker.observe(now_s, state, sched, wchan.clone()) {
                        self.keep(thread, tid, span);
                    }
                    self.hidden_wchan += thread.tracker.hidden_wchan - hidden_before;
                    if tid == thread.pid {
                        let view = views.entry(thread.pid).or_default();
                        view.state = state;
                        view.current = thread.tracker.current().map(|c| c.0);
                        if wchan.is_some() {
                            view.last_wchan = wchan;
                        }
                    }
                }
                Err(ReadError::Malformed) => self.malformed += 1,
                Err(ReadError::Gone | ReadError::Denied) => {
                    if let Some(span) = thread.tracker.finish() {
                        self.keep(thread, tid, span);
                    }
                    ended.push(tid);
                }
            }
        }
        for tid in &ended {
            threads.remove(tid);
        }
        self.threads = threads;
        self.gone.extend(ended);
        if let Ok(mut live) = self.live.lock() {
            for (pid, view) in views {
                let entry = live.processes.entry(pid).or_default();
                entry.state = view.state;
                entry.current = view.current;
                if view.last_wchan.is_some() {
                    entry.last_wchan = view.last_wchan;
                }
            }
        }
    }

    /// Ends every open episode and returns everything seen.
    pub fn finish(mut self) -> CoreReport {
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for tid in tids {
            if let Some(mut thread) = self.threads.remove(&tid) {
                if let Some(span) = thread.tracker.finish() {
                    self.keep(&mut thread, tid, span);
                }
            }
        }
        // A thread caught on its way into or out of D reads 0 now and then; only when most D
        // samples do is the kernel hiding wchan (kptr_restrict, permissions).
        if self.hidden_wchan >= 3 && self.hidden_wchan * 2 > self.d_samples {
            self.note(format!(
                "wchan read as 0 in {} of {} samples of threads in D state: the kernel hides it here, so those disk waits are reported without their function",
                self.hidden_wchan, self.d_samples
            ));
        }
        self.episodes
            .sort_by(|a, b| a.start_s.total_cmp(&b.start_s).then(a.tid.cmp(&b.tid)));
        let notes = self
            .live
            .lock()
            .map(|l| l.notes.iter().cloned().collect())
            .unwrap_or_default();
        CoreReport {
            episodes: self.episodes,
            episodes_dropped: self.episodes_dropped,
            ticks: self.ticks,
            malformed: self.malformed,
            threads_seen: self.threads_seen,
            notes,
        }
    }
}

/// What a [`SamplerCore`] saw.
#[derive(Debug, Clone, Default)]
pub struct CoreReport {
    pub episodes: Vec<Episode>,
    pub episodes_dropped: u64,
    pub ticks: u64,
    pub malformed: u64,
    pub threads_seen: u64,
    pub notes: Vec<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A fake /proc tree in a temporary folder: the sampler's /proc root is a seam.
    struct FakeProc(PathBuf);

    impl FakeProc {
        fn new(name: &str) -> FakeProc {
            let root = std::env::temp_dir().join(format!(
                "duplexbench-fakeproc-{}-{name}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&root);
            FakeProc(root)
        }

        /// Writes a thread's stat, schedstat and wchan.
        /// `ids` is (pid, tid); `sched_ms` is (time on the CPU, time waiting in the run queue).
        fn thread(
            &self,
            ids: (u32, u32),
            comm: &str,
            state: char,
            sched_ms: (u64, u64),
            wchan: &str,
        ) {
            let ((pid, tid), (on_cpu_ms, wait_ms)) = (ids, sched_ms);
            let dir = procfs::task_dir(&self.0, pid, tid);
            std::fs::create_dir_all(&dir).unwrap();
            let mut fields: Vec<String> = (3..=41).map(|_| "0".to_string()).collect();
            fields[0] = state.to_string();
            std::fs::write(
                dir.join("stat"),
                format!("{tid} ({comm}) {}\n", fields.join(" ")),
            )
            .unwrap();
            std::fs::write(
                dir.join("schedstat"),
                format!("{} {} 7\n", on_cpu_ms * 1_000_000, wait_ms * 1_000_000),
            )
            .unwrap();
            std::fs::write(dir.join("wchan"), wchan).unwrap();
        }

        /// The thread exits: like the kernel's, its open files then read as nothing.
        fn remove(&self, pid: u32, tid: u32) {
            let dir = procfs::task_dir(&self.0, pid, tid);
            for name in ["stat", "schedstat", "wchan"] {
                std::fs::write(dir.join(name), "").unwrap();
            }
            std::fs::remove_dir_all(dir).unwrap();
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for FakeProc {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn core(proc_: &FakeProc) -> SamplerCore {
        let targets = vec![Target {
            role: Role::Worker,
            index: Some(0),
            pid: 100,
        }];
        SamplerCore::new(
            proc_.path().to_path_buf(),
            targets,
            Arc::new(Mutex::new(SamplerLive::default())),
        )
    }

    #[test]
    fn a_loop_thread_in_d_state_becomes_a_disk_wait_stall_with_its_wchan() {
        let fake = FakeProc::new("d-state");
        fake.thread((100, 100), "duplexbench-tui", 'S', (10, 0), "0");
        fake.thread((100, 101), "trace-writer", 'S', (1, 0), "0");
        let mut c = core(&fake);
        c.tick(1.000);
        for i in 1..=8 {
            // Getting into D takes a moment on the CPU: on-CPU time moves from 10 to 11 ms.
            fake.thread(
                (100, 100),
                "duplexbench-tui",
                'D',
                (11, 0),
                "folio_wait_bit_common",
            );
            c.tick(1.0 + 0.005 * f64::from(i));
        }
        fake.thread((100, 100), "duplexbench-tui", 'S', (11, 0), "0");
        c.tick(1.045);
        let live = c.live.clone();
        let report = c.finish();
        assert_eq!(report.episodes.len(), 1, "{:?}", report.episodes);
        let e = &report.episodes[0];
        assert_eq!(
            (e.class, e.tid, e.loop_thread),
            (StallClass::DiskWait, 100, true)
        );
        assert_eq!(e.thread, "duplexbench-tui");
        assert!((e.duration_ms - 40.0).abs() < 1e-6);
        assert_eq!(e.wchan[0].name, "folio_wait_bit_common");
        let live = live.lock().unwrap();
        assert_eq!(live.stalls, 1);
        assert_eq!(live.processes[&100].disk_stalls, 1);
    }

    #[test]
    fn run_queue_wait_growth_is_cpu_starvation() {
        let fake = FakeProc::new("starved");
        fake.thread((100, 100), "duplexbench-tui", 'R', (10, 0), "0");
        let mut c = core(&fake);
        c.tick(2.000);
        for i in 1..=6u64 {
            fake.thread((100, 100), "duplexbench-tui", 'R', (10, 4 * i), "0");
            c.tick(2.0 + 0.005 * i as f64);
        }
        fake.thread((100, 100), "duplexbench-tui", 'S', (11, 24), "0");
        c.tick(2.035);
        let report = c.finish();
        assert_eq!(report.episodes.len(), 1, "{:?}", report.episodes);
        assert_eq!(report.episodes[0].class, StallClass::CpuStarvation);
    }

    #[test]
    fn a_thread_that_disappears_ends_its_episode_and_new_threads_are_found() {
        let fake = FakeProc::new("threads");
        fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
        fake.thread((100, 105), "spinner", 'R', (0, 0), "0");
        let mut c = core(&fake);
        c.tick(3.000);
        for i in 1..=5u64 {
            fake.thread((100, 105), "spinner", 'R', (5 * i, 0), "0");
            c.tick(3.0 + 0.005 * i as f64);
        }
        fake.remove(100, 105);
        c.tick(3.030);
        // A thread that appears later is picked up at the next listing.
        fake.thread((100, 106), "late", 'S', (0, 0), "0");
        for i in 0..RELIST_TICKS {
            c.tick(3.035 + 0.005 * i as f64);
        }
        let report = c.finish();
        assert_eq!(report.threads_seen, 3);
        let spinner: Vec<_> = report.episodes.iter().filter(|e| e.tid == 105).collect();
        assert_eq!(spinner.len(), 1);
        assert_eq!(spinner[0].class, StallClass::Busy);
        assert!(!spinner[0].loop_thread);
    }

    #[test]
    fn truncated_files_are_counted_and_skipped() {
        let fake = FakeProc::new("truncated");
        fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
        let mut c = core(&fake);
        c.tick(4.000);
        let dir = procfs::task_dir(fake.path(), 100, 100);
        std::fs::write(dir.join("stat"), "100 (dup").unwrap();
        std::fs::write(dir.join("schedstat"), "12").unwrap();
        c.tick(4.005);
        fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
        c.tick(4.010);
        let report = c.finish();
        assert_eq!(report.malformed, 1);
        assert!(report.episodes.is_empty());
    }

    #[test]
    fn a_server_that_cannot_be_read_is_said_once_and_the_workers_are_still_sampled_issue_15() {
        let fake = FakeProc::new("server-gone");
        fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
        let targets = vec![
            Target {
                role: Role::Worker,
                index: Some(0),
                pid: 100,
            },
            Target {
                role: Role::Server,
                index: None,
                pid: 4242,
            },
        ];
        let live = Arc::new(Mutex::new(SamplerLive::default()));
        let mut c = SamplerCore::new(fake.path().to_path_buf(), targets, live);
        for i in 0..(2 * RELIST_TICKS) {
            c.tick(6.0 + 0.005 * i as f64);
        }
        let report = c.finish();
        assert_eq!(report.threads_seen, 1);
        assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
        assert!(
            report.notes[0].starts_with("the server (pid 4242) cannot be read under /proc"),
            "{:?}",
            report.notes
        );
    }

    #[test]
    fn hidden_wchan_is_said_once_instead_of_guessed() {
        let fake = FakeProc::new("hidden");
        fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
        let mut c = core(&fake);
        c.tick(5.000);
        for i in 1..=4 {
            fake.thread((100, 100), "duplexbench-tui", 'D', (1, 0), "0");
            c.tick(5.0 + 0.005 * f64::from(i));
        }
        let report = c.finish();
        assert_eq!(report.episodes[0].wchan, Vec::new());
        assert_eq!(report.notes.len(), 1);
        assert!(
            report.notes[0].contains("wchan read as 0"),
            "{:?}",
            report.notes
        );
    }
}
