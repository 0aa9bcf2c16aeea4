//! CPU time and memory of a process, for the per-process figures.
//!
//! A process measures itself at its end (`CLOCK_PROCESS_CPUTIME_ID`, `VmHWM`); the conductor reads children it
//! watches live from `/proc/<pid>/stat` and `/proc/<pid>/status` (see proc(5)).

use crate::contract::ProcessUsage;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The calling process's CPU time (all threads, to the nanosecond) and peak RSS so far.
pub fn self_usage(wall_seconds: f64) -> ProcessUsage {
    let cpu_seconds = self_cpu_s();
    let peak_rss_bytes = std::fs::read_to_string("/proc/self/status")
        .map_or(0, |status| status_kb(&status, "VmHWM:"));
    ProcessUsage {
        cpu_seconds,
        wall_seconds,
        cpu_cores: if wall_seconds > 0.0 {
            cpu_seconds / wall_seconds
        } else {
            0.0
        },
        peak_rss_bytes,
        system_cpu_seconds: self_system_s().map(|s| s.min(cpu_seconds)),
        streaming: None,
    }
}

/// The kernel's share of this process's CPU time so far (`stime` of `/proc/self/stat`, in
/// seconds); `None` when it cannot be read.
fn self_system_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let stat = crate::sampler::procfs::parse_stat(&stat)?;
    Some(stat.stime as f64 / ticks_per_s())
}

/// Clock ticks a second, the unit of `/proc/<pid>/stat`'s CPU times.
fn ticks_per_s() -> f64 {
    rustix::param::clock_ticks_per_second().max(1) as f64
}

/// This process's CPU time so far (user plus system, every thread), in seconds.
pub fn self_cpu_s() -> f64 {
    crate::clock::read(rustix::time::ClockId::ProcessCPUTime)
}

/// What a worker's streaming window is measured with at each end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    /// The process's CPU seconds ([`self_cpu_s`]).
    pub cpu_s: f64,
    /// The calling thread's allocations ([`thread_allocations`]).
    pub allocations: Option<u64>,
    /// The process's memory on huge pages ([`huge_page_bytes`]); read at the window's end only.
    pub huge_page_bytes: Option<u64>,
}

/// The process's CPU seconds and the calling thread's allocations, now.
pub fn mark() -> Mark {
    Mark {
        cpu_s: self_cpu_s(),
        allocations: thread_allocations(),
        huge_page_bytes: None,
    }
}

/// [`mark`] with the memory on huge pages: for the streaming window's end, while every
/// session's state is still there (once the sessions end, the heap is given back).
pub fn end_mark() -> Mark {
    Mark {
        huge_page_bytes: huge_page_bytes(),
        ..mark()
    }
}

/// The process's anonymous memory on transparent huge pages (`AnonHugePages` of
/// `/proc/self/smaps_rollup`); `None` where it cannot be read.
pub fn huge_page_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .filter(|rollup| rollup.contains("AnonHugePages:"))
        .map(|rollup| status_kb(&rollup, "AnonHugePages:"))
}

/// The binary's global allocator: the system's, counting on each thread the blocks it
/// allocates or reallocates, so that a worker can say what a packet allocates on its runtime
/// thread (the hot path should allocate nothing a packet: issue 17). A count is one
/// thread-local add: no lock, no shared cache line.
pub struct CountingAlloc;

thread_local! {
    /// Allocations and reallocations made by this thread. Const-initialised and without a
    /// destructor: reading or adding to it never allocates, and works until the thread ends.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_allocation() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call goes unchanged to `System`, which keeps `GlobalAlloc`'s contract; the
// count only adds to a thread-local `Cell`, which neither allocates nor unwinds.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's guarantees for `layout` are those `System.alloc` needs.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: `ptr` was allocated by this allocator, that is by `System`, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, that is by `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The allocations (and reallocations) this thread has made so far; `None` when nothing
/// counts them: [`CountingAlloc`] is not the global allocator (the library's unit tests), so
/// the count of a thread that surely allocated is still 0.
pub fn thread_allocations() -> Option<u64> {
    ALLOCATIONS.try_with(Cell::get).ok().filter(|&n| n > 0)
}

/// A `/proc/<pid>/status` figure given in kB, in bytes; 0 when absent.
fn status_kb(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// A live reading of another process: CPU seconds so far, current and peak RSS, and its state
/// letter, from `/proc/<pid>/stat` (fields 3, 14, 15) and `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveReading {
    pub state: char,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
}

/// Reads `/proc/<pid>`; `None` when the process is gone.
pub fn read_live(pid: u32) -> Option<LiveReading> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_live(&stat, &status, ticks_per_s())
}

fn parse_live(stat: &str, status: &str, ticks_per_s: f64) -> Option<LiveReading> {
    let stat = crate::sampler::procfs::parse_stat(stat)?;
    Some(LiveReading {
        state: stat.state,
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks_per_s,
        rss_bytes: status_kb(status, "VmRSS:"),
        peak_rss_bytes: status_kb(status, "VmHWM:"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_parentheses_in_the_name() {
        let stat = "42 (dup (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1 1 1";
        let status = "Name:\tdup\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        let r = parse_live(stat, status, 100.0).unwrap();
        assert_eq!(r.state, 'S');
        assert!((r.cpu_seconds - 3.0).abs() < 1e-9);
        assert_eq!(r.rss_bytes, 1024 * 1024);
        assert_eq!(r.peak_rss_bytes, 2048 * 1024);
    }

    #[test]
    fn reads_this_process() {
        let r = read_live(std::process::id()).unwrap();
        assert!(r.rss_bytes > 0);
        let usage = self_usage(1.0);
        assert!(usage.peak_rss_bytes > 0);
        let system = usage.system_cpu_seconds.expect("/proc/self/stat has stime");
        assert!(
            huge_page_bytes().is_some(),
            "smaps_rollup has AnonHugePages"
        );
        assert!((0.0..=usage.cpu_seconds).contains(&system), "{usage:?}");
    }
}
