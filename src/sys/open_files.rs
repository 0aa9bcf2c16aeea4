//! The open-file budget of a run (issue 13, item 5): how many descriptors each process of a
//! layout holds at most, and the check, before anything starts, that `RLIMIT_NOFILE` allows it.
//! Without it, a run under `ulimit -n 64` failed session by session with "Too many open files"
//! and the headline blamed `--connect-timeout`.
//!
//! The limit is per process, and children inherit the conductor's, so what matters is the
//! largest need of any one process: usually a worker (three descriptors per session), or the
//! built-in mock when the sessions are spread over many workers (one socket per session of the
//! whole run).

use crate::options::Settings;
use anyhow::Result;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// What a worker holds whatever its sessions: stdio, its log, its samples file, the runtime's
/// epoll and eventfd, the pacer's timerfd, the telemetry and command pipes (13 measured).
const WORKER_FIXED: u64 = 16;
/// What the mock holds whatever its sessions: stdio, its log, the listener, the runtime's
/// descriptors, the signal pipe (12 measured).
const MOCK_FIXED: u64 = 16;
/// The conductor's own: stdio, the run folder's lock, the signal socket pair, the dashboard's
/// terminal, a /proc file read now and then, the pipe of a spawn under way.
const CONDUCTOR_FIXED: u64 = 16;
/// Per child of the conductor: its stdin and stdout pipes, and the sampler's `stat` and
/// `schedstat` of each of its threads (a worker has 4, up to 7 with `--inject-*`), plus `wchan`
/// for the few seen in `D` state (src/sampler/procfs.rs).
const CONDUCTOR_PER_CHILD: u64 = 2 + 2 * 6 + 2;
/// Room for what the figures above do not count.
const MARGIN: u64 = 16;

/// A run's shape, as far as open files go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub processes: u32,
    pub sessions_per_process: u32,
    /// Each session keeps a trace file open beside its receipts (`--trace` other than `off`);
    /// see src/trace/files.rs.
    pub traced: bool,
    /// The built-in mock runs (it holds the server side of every session of the run).
    pub builtin_mock: bool,
}

impl Layout {
    pub fn of(settings: &Settings) -> Layout {
        Layout {
            processes: settings.processes,
            sessions_per_process: settings.sessions_per_process,
            traced: settings.trace != crate::cli::TraceMode::Off,
            builtin_mock: settings.builtin_mock,
        }
    }
}

/// The process of a run that needs the most descriptors, and how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub files: u64,
    /// Which process, and why, for the message.
    pub who: String,
}

/// The descriptors the hungriest process of `layout` holds at most.
pub fn needed(layout: &Layout) -> Need {
    let per_session = if layout.traced { 3 } else { 2 };
    let sessions = u64::from(layout.sessions_per_process);
    let worker = Need {
        files: sessions * per_session + WORKER_FIXED + MARGIN,
        who: format!(
            "each worker of --sessions {sessions}: a socket, a receipts file{} per session",
            if layout.traced {
                " and a trace file"
            } else {
                ""
            }
        ),
    };
    let children = u64::from(layout.processes) + u64::from(layout.builtin_mock);
    let conductor = Need {
        files: CONDUCTOR_FIXED + children * CONDUCTOR_PER_CHILD + MARGIN,
        who: format!("the conductor: pipes and /proc files for {children} child processes"),
    };
    let mut hungriest = if conductor.files > worker.files {
        conductor
    } else {
        worker
    };
    if layout.builtin_mock {
        let total = u64::from(layout.processes) * sessions;
        let mock = MOCK_FIXED + total + MARGIN;
        if mock > hungriest.files {
            hungriest = Need {
                files: mock,
                who: format!("the built-in mock: a socket per session, {total} in all"),
            };
        }
    }
    hungriest
}

/// What to do with the soft limit for a need, given the current limits (`None` is unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The soft limit is enough already.
    Enough,
    /// Raise the soft limit to this (the hard limit, as the workers and the mock always did, or
    /// just the need when the hard limit is unlimited, which the kernel does not take as a
    /// soft limit).
    Raise(u64),
    /// Even the hard limit is too low.
    TooLow { hard: u64 },
}

pub fn decide(need: u64, soft: Option<u64>, hard: Option<u64>) -> Decision {
    if soft.is_none_or(|soft| soft >= need) {
        return Decision::Enough;
    }
    match hard {
        Some(hard) if hard < need => Decision::TooLow { hard },
        Some(hard) => Decision::Raise(hard),
        None => Decision::Raise(need),
    }
}

/// Raises the soft limit to what `layout` needs (children inherit it), or refuses the run with
/// the number needed and the `ulimit -n` to use.
pub fn ensure(layout: &Layout) -> Result<()> {
    let need = needed(layout);
    let limit = getrlimit(Resource::Nofile);
    let too_low = |hard: u64| {
        anyhow::anyhow!(
            "the run needs up to {} open files in one process ({}), but the limit here is {hard}; \
             raise it with `ulimit -n {}` before the run (above the hard limit that needs root, \
             e.g. in /etc/security/limits.conf), or give fewer --sessions",
            need.files,
            need.who,
            need.files
        )
    };
    match decide(need.files, limit.current, limit.maximum) {
        Decision::Enough => Ok(()),
        Decision::TooLow { hard } => Err(too_low(hard)),
        Decision::Raise(to) => {
            let raised = Rlimit {
                current: Some(to),
                maximum: limit.maximum,
            };
            setrlimit(Resource::Nofile, raised).map_err(|_| too_low(limit.current.unwrap_or(0)))
        }
    }
}

/// Raises the soft limit to the hard limit, for a process that cannot know its need (the mock
/// started by hand). Failure leaves the limit as it was.
pub fn raise_to_hard() {
    let limit = getrlimit(Resource::Nofile);
    if let (Some(soft), Some(hard)) = (limit.current, limit.maximum) {
        if soft < hard {
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(hard),
                    maximum: Some(hard),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(processes: u32, sessions: u32) -> Layout {
        Layout {
            processes,
            sessions_per_process: sessions,
            traced: true,
            builtin_mock: true,
        }
    }

    #[test]
    fn a_traced_worker_needs_three_descriptors_per_session_issue_13() {
        let need = needed(&layout(2, 64));
        assert_eq!(need.files, 64 * 3 + WORKER_FIXED + MARGIN);
        assert!(need.who.contains("each worker"), "{}", need.who);
        assert!(need.who.contains("trace file"), "{}", need.who);
    }

    #[test]
    fn without_traces_a_worker_needs_two_per_session_issue_13() {
        let mut l = layout(2, 64);
        l.traced = false;
        assert_eq!(needed(&l).files, 64 * 2 + WORKER_FIXED + MARGIN);
        assert!(!needed(&l).who.contains("trace"));
    }

    #[test]
    fn the_mock_is_the_hungriest_when_sessions_are_spread_over_many_workers_issue_13() {
        let need = needed(&layout(4, 64));
        assert_eq!(need.files, 4 * 64 + MOCK_FIXED + MARGIN);
        assert!(need.who.contains("mock"), "{}", need.who);
        // With --url there is no mock to count.
        let mut l = layout(4, 64);
        l.builtin_mock = false;
        assert!(needed(&l).who.contains("each worker"));
    }

    #[test]
    fn the_conductor_counts_pipes_and_proc_files_per_child_issue_13() {
        let need = needed(&layout(200, 1));
        assert_eq!(
            need.files,
            CONDUCTOR_FIXED + 201 * CONDUCTOR_PER_CHILD + MARGIN
        );
        assert!(need.who.contains("conductor"), "{}", need.who);
    }

    #[test]
    fn the_smallest_run_fits_in_64_descriptors_issue_13() {
        assert!(needed(&layout(1, 1)).files <= 64);
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one_or_the_run_refused_issue_13() {
        assert_eq!(decide(100, Some(1024), Some(4096)), Decision::Enough);
        assert_eq!(decide(100, None, None), Decision::Enough);
        assert_eq!(decide(2000, Some(1024), Some(4096)), Decision::Raise(4096));
        assert_eq!(decide(2000, Some(1024), None), Decision::Raise(2000));
        assert_eq!(
            decide(224, Some(64), Some(64)),
            Decision::TooLow { hard: 64 }
        );
    }
}
