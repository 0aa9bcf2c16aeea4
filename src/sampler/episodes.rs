//! Turning a thread's samples into episodes: runs of consecutive sample intervals in
//! which the thread was off the CPU in `D` (disk wait), runnable but waiting in the run queue
//! (CPU starvation), or on the CPU (busy). Sleeping intervals end an episode and start none.

use super::procfs::SchedStat;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What kept a thread from running its loop.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StallClass {
    /// In uninterruptible sleep (`D`), e.g. waiting for page-cache writeback.
    DiskWait,
    /// Runnable, but waiting for a CPU (schedstat's run-queue wait grew).
    CpuStarvation,
    /// On the CPU (schedstat's on-CPU time grew): the thread itself was busy.
    Busy,
    /// Nothing the sampler saw explains it.
    Unknown,
}

impl StallClass {
    pub fn as_str(self) -> &'static str {
        match self {
            StallClass::DiskWait => "disk_wait",
            StallClass::CpuStarvation => "cpu_starvation",
            StallClass::Busy => "busy",
            StallClass::Unknown => "unknown",
        }
    }
}

/// Share of an interval that counts: more than half of it waiting, or on the CPU.
const SHARE: f64 = 0.5;

/// The class of one sample interval, or `None` when the thread mostly slept.
///
/// The kernel adds to a thread's run-queue wait only when the thread gets the CPU back, so a
/// thread starved right now shows as runnable (`R`) without on-CPU time; the wait shows up later,
/// all at once (see [`Tracker::observe`], which dates it back).
pub fn classify(state: char, on_cpu_share: f64, wait_share: f64) -> Option<StallClass> {
    if state == 'D' {
        Some(StallClass::DiskWait)
    } else if wait_share > SHARE || (state == 'R' && on_cpu_share < SHARE) {
        Some(StallClass::CpuStarvation)
    } else if on_cpu_share > SHARE {
        Some(StallClass::Busy)
    } else {
        None
    }
}

/// How often a kernel function was seen as the wchan of a `D` episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WchanShare {
    pub name: String,
    pub samples: u32,
    pub share: f64,
}

/// An episode of one thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub class: StallClass,
    pub start_s: f64,
    pub end_s: f64,
    pub samples: u32,
    /// `D` episodes: the wchan names seen, most frequent first (empty when wchan read as 0).
    pub wchan: Vec<WchanShare>,
}

impl Span {
    pub fn duration_ms(&self) -> f64 {
        (self.end_s - self.start_s) * 1000.0
    }
}

struct Open {
    class: StallClass,
    start_s: f64,
    end_s: f64,
    samples: u32,
    wchans: BTreeMap<String, u32>,
}

/// Sample counts per wchan name as shares, most frequent first.
pub fn shares(counts: BTreeMap<String, u32>) -> Vec<WchanShare> {
    let total: u32 = counts.values().sum();
    let mut wchan: Vec<WchanShare> = counts
        .into_iter()
        .map(|(name, samples)| WchanShare {
            name,
            samples,
            share: (f64::from(samples) / f64::from(total.max(1)) * 1000.0).round() / 1000.0,
        })
        .collect();
    wchan.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
    wchan
}

impl Open {
    fn close(self) -> Span {
        let wchan = shares(self.wchans);
        Span {
            class: self.class,
            start_s: self.start_s,
            end_s: self.end_s,
            samples: self.samples,
            wchan,
        }
    }
}

/// Follows one thread's samples.
#[derive(Default)]
pub struct Tracker {
    prev: Option<(f64, SchedStat)>,
    open: Option<Open>,
    /// Where the last closed episode ended: a dated-back one never reaches before it.
    last_end_s: f64,
    /// Samples in `D` whose wchan read as 0.
    pub hidden_wchan: u64,
}

impl Tracker {
    /// Takes the sample at `time_s`; returns the episode this sample ended, if any.
    pub fn observe(
        &mut self,
        time_s: f64,
        state: char,
        sched: SchedStat,
        wchan: Option<String>,
    ) -> Option<Span> {
        let Some((prev_s, prev)) = self.prev.replace((time_s, sched)) else {
            // Nothing is dated back to before the thread was first seen.
            self.last_end_s = time_s;
            return None;
        };
        let interval_ns = (time_s - prev_s) * 1e9;
        if interval_ns <= 0.0 {
            return None;
        }
        let on_cpu = sched.on_cpu_ns.saturating_sub(prev.on_cpu_ns) as f64 / interval_ns;
        let wait = sched.wait_ns.saturating_sub(prev.wait_ns) as f64 / interval_ns;
        let mut class = classify(state, on_cpu, wait);
        // The kernel moves a running thread's on-CPU time only at scheduler ticks, so an interval
        // without one shows a spinning thread as `R` with nothing moved: that continues whatever
        // episode is under way rather than starting a starvation one.
        if state == 'R' && on_cpu == 0.0 && wait == 0.0 {
            if let Some(open) = &self.open {
                class = Some(open.class);
            }
        }
        if state == 'D' && wchan.is_none() {
            self.hidden_wchan += 1;
        }
        // A wait longer than the interval began before it: date the starvation back to then.
        let waited_s = sched.wait_ns.saturating_sub(prev.wait_ns) as f64 / 1e9;
        let mut start_s = prev_s;
        if class == Some(StallClass::CpuStarvation) && waited_s > time_s - prev_s {
            start_s = (time_s - waited_s).max(self.last_end_s);
        }
        let mut closed = None;
        if self.open.as_ref().map(|o| o.class) != class {
            closed = self.open.take().map(Open::close);
            if let Some(span) = &closed {
                self.last_end_s = span.end_s;
                start_s = start_s.max(span.end_s);
            }
            if let Some(class) = class {
                self.open = Some(Open {
                    class,
                    start_s,
                    end_s: time_s,
                    samples: 0,
                    wchans: BTreeMap::new(),
                });
            }
        } else if let Some(open) = &mut self.open {
            open.start_s = open.start_s.min(start_s.max(self.last_end_s));
        }
        if let Some(open) = &mut self.open {
            open.end_s = time_s;
            open.samples += 1;
            if let Some(name) = wchan {
                *open.wchans.entry(name).or_default() += 1;
            }
        }
        closed
    }

    /// Ends the open episode (the thread is gone, or sampling stops).
    pub fn finish(&mut self) -> Option<Span> {
        self.last_end_s = self.open.as_ref().map_or(self.last_end_s, |o| o.end_s);
        self.open.take().map(Open::close)
    }

    /// The class of the episode under way, if any.
    pub fn current(&self) -> Option<(StallClass, f64)> {
        self.open.as_ref().map(|o| (o.class, o.start_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(on_cpu_ms: u64, wait_ms: u64) -> SchedStat {
        SchedStat {
            on_cpu_ns: on_cpu_ms * 1_000_000,
            wait_ns: wait_ms * 1_000_000,
            timeslices: 0,
        }
    }

    #[test]
    fn a_d_state_run_becomes_one_disk_wait_episode_with_its_wchan_shares() {
        let mut t = Tracker::default();
        assert!(t.observe(0.000, 'S', sched(10, 0), None).is_none());
        for i in 1..=4 {
            let wchan = if i == 4 {
                "do_get_write_access"
            } else {
                "folio_wait_bit_common"
            };
            assert!(t
                .observe(i as f64 * 0.005, 'D', sched(10, 0), Some(wchan.into()))
                .is_none());
        }
        let span = t
            .observe(0.025, 'S', sched(10, 0), None)
            .expect("the D run ends");
        assert_eq!(span.class, StallClass::DiskWait);
        assert_eq!(span.samples, 4);
        assert!((span.duration_ms() - 20.0).abs() < 1e-6);
        assert_eq!(span.wchan[0].name, "folio_wait_bit_common");
        assert!((span.wchan[0].share - 0.75).abs() < 1e-9);
    }

    #[test]
    fn run_queue_wait_growth_is_cpu_starvation_and_on_cpu_growth_is_busy() {
        let mut t = Tracker::default();
        t.observe(0.000, 'R', sched(0, 0), None);
        t.observe(0.005, 'R', sched(0, 5), None);
        t.observe(0.010, 'R', sched(0, 10), None);
        let span = t.observe(0.015, 'R', sched(5, 10), None).unwrap();
        assert_eq!(span.class, StallClass::CpuStarvation);
        assert!((span.duration_ms() - 10.0).abs() < 1e-6);
        assert_eq!(t.current().map(|c| c.0), Some(StallClass::Busy));
        let busy = t.finish().unwrap();
        assert_eq!(busy.class, StallClass::Busy);
    }

    #[test]
    fn a_starved_thread_is_runnable_without_cpu_and_its_late_wait_is_dated_back() {
        let mut t = Tracker::default();
        t.observe(1.000, 'S', sched(10, 0), None);
        // Starved: runnable, no CPU time, and the kernel has not added the wait yet.
        t.observe(1.005, 'R', sched(10, 0), None);
        t.observe(1.010, 'R', sched(10, 0), None);
        t.observe(1.015, 'S', sched(10, 0), None);
        // ...then a wait of 300 ms appears all at once when it finally ran.
        t.observe(1.300, 'S', sched(10, 0), None);
        let span = t.observe(1.305, 'S', sched(11, 300), None);
        assert!(span.is_none());
        let span = t.observe(1.310, 'S', sched(11, 300), None).unwrap();
        assert_eq!(span.class, StallClass::CpuStarvation);
        // 300 ms back from 1.305 is 1.005, but the R episode before it ended at 1.010.
        assert!(
            (span.start_s - 1.010).abs() < 1e-9,
            "dated back, not before the last episode: {span:?}"
        );
        assert!((span.end_s - 1.305).abs() < 1e-9);
    }

    #[test]
    fn a_busy_thread_between_scheduler_ticks_stays_busy() {
        let mut t = Tracker::default();
        t.observe(0.000, 'R', sched(0, 0), None);
        t.observe(0.005, 'R', sched(5, 0), None);
        // No tick in this interval: on-CPU time did not move.
        t.observe(0.007, 'R', sched(5, 0), None);
        t.observe(0.012, 'R', sched(10, 0), None);
        let span = t.observe(0.017, 'S', sched(10, 0), None).unwrap();
        assert_eq!(span.class, StallClass::Busy);
        assert!((span.duration_ms() - 12.0).abs() < 1e-6, "{span:?}");
    }

    #[test]
    fn sleeping_makes_no_episode_and_hidden_wchan_is_counted() {
        let mut t = Tracker::default();
        t.observe(0.0, 'S', sched(0, 0), None);
        assert!(t.observe(0.005, 'S', sched(0, 0), None).is_none());
        assert!(t.current().is_none());
        t.observe(0.010, 'D', sched(0, 0), None);
        assert_eq!(t.hidden_wchan, 1);
    }
}
