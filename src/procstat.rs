//! CPU time and memory of a process, for the per-process figures.
//!
//! A process measures itself with `getrusage(2)` at its end; the conductor reads children it
//! watches live from `/proc/<pid>/stat` and `/proc/<pid>/status` (see proc(5)).

use crate::contract::ProcessUsage;

/// The calling process's CPU time and peak RSS so far.
pub fn self_usage(wall_seconds: f64) -> ProcessUsage {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid and writable; RUSAGE_SELF always exists.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let cpu_seconds = tv(usage.ru_utime) + tv(usage.ru_stime);
    ProcessUsage {
        cpu_seconds,
        wall_seconds,
        cpu_cores: if wall_seconds > 0.0 {
            cpu_seconds / wall_seconds
        } else {
            0.0
        },
        peak_rss_bytes: usage.ru_maxrss.max(0) as u64 * 1024,
    }
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
    parse_live(&stat, &status, clock_ticks_per_second())
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

fn parse_live(stat: &str, status: &str, ticks_per_s: f64) -> Option<LiveReading> {
    let stat = crate::sampler::procfs::parse_stat(stat)?;
    let kb = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Some(LiveReading {
        state: stat.state,
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks_per_s,
        rss_bytes: kb("VmRSS:"),
        peak_rss_bytes: kb("VmHWM:"),
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
        assert!(self_usage(1.0).peak_rss_bytes > 0);
    }
}
