//! The sampling itself, without the thread and the clock: [`SamplerCore::tick`] takes one
//! sample of every watched thread at the time it is given (schedstat first, `stat` when it may
//! have moved, `wchan` in `D`), turns the samples into kept episodes and updates the live view,
//! so tests drive it over a fake /proc tree.

use super::episodes::{self, Span, StallClass, Tracker};
use super::procfs::{self, ReadError, ThreadFiles};
use super::{Episode, ProcessView, SamplerLive, Target, STALL_MS};
use crate::contract::Role;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

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

/// What one sample found of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sampled {
    /// Read (or malformed this once): it is still there.
    Read,
    /// Exited, or no longer readable: its episode is ended.
    Gone,
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

/// Keeps `episode` as the longest loop-thread stall when it is (or is that one, grown).
fn keep_longest(live: &mut SamplerLive, episode: &Episode) {
    let longer = live
        .longest
        .as_ref()
        .is_none_or(|l| episode.duration_ms > l.duration_ms);
    if episode.loop_thread && longer {
        live.longest = Some(episode.clone());
    }
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
    pub(super) live: Arc<Mutex<SamplerLive>>,
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
                if last.duration_ms >= STALL_MS {
                    let merged = last.clone();
                    if was_stall {
                        // Counted at its first piece's length: the live views show it whole.
                        self.update_stall(merged);
                    } else {
                        self.count_stall(merged);
                    }
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
            keep_longest(&mut live, &episode);
            if live.recent.len() == 50 {
                live.recent.pop_front();
            }
            live.recent.push_back(episode);
        }
    }

    /// A stall already counted that grew (a piece of it merged: the same thread and start).
    fn update_stall(&self, episode: Episode) {
        if let Ok(mut live) = self.live.lock() {
            keep_longest(&mut live, &episode);
            if let Some(shown) = live.recent.iter_mut().rev().find(|e| e.is_same(&episode)) {
                *shown = episode;
            }
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
            if self.sample(tid, thread, now_s, &mut views) == Sampled::Gone {
                ended.push(tid);
            }
        }
        for tid in &ended {
            threads.remove(tid);
        }
        self.threads = threads;
        self.gone.extend(ended);
        self.publish(views);
    }

    /// One sample of one thread: its episode moved on, and (for a loop thread) its view.
    fn sample(
        &mut self,
        tid: u32,
        thread: &mut Thread,
        now_s: f64,
        views: &mut BTreeMap<u32, ProcessView>,
    ) -> Sampled {
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
                Sampled::Read
            }
            Err(ReadError::Malformed) => {
                self.malformed += 1;
                Sampled::Read
            }
            Err(ReadError::Gone | ReadError::Denied) => {
                if let Some(span) = thread.tracker.finish() {
                    self.keep(thread, tid, span);
                }
                Sampled::Gone
            }
        }
    }

    /// The loop threads' latest states, for the live views.
    fn publish(&self, views: BTreeMap<u32, ProcessView>) {
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

#[cfg(test)]
mod tests;
