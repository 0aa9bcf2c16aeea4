//! Send deadlines to the microsecond: one `timerfd` per session, armed at the absolute
//! `CLOCK_MONOTONIC` time of its next packet and awaited through the runtime's epoll.
//!
//! tokio's timer rounds every deadline up to the next millisecond and parks in `epoll_wait`
//! with a timeout in milliseconds, so a packet left 1–2 ms after its due time even on an idle
//! machine (deviation p50 1.2–1.6 ms in docs/benchmarks.md, where the Python reference, which
//! sleeps with a finer timer, had 0.6–0.8 ms). A timerfd expires on the kernel's high-resolution
//! timer and makes the socket-polling `epoll_wait` return at once.

use crate::clock::monotonic_s;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::io::unix::AsyncFd;

pub struct PaceTimer {
    fd: AsyncFd<OwnedFd>,
}

impl PaceTimer {
    /// A disarmed timer; needs a tokio runtime with I/O enabled.
    pub fn new() -> io::Result<PaceTimer> {
        // SAFETY: timerfd_create has no memory arguments; a non-negative result is a new fd
        // that nothing else owns.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid descriptor owned by no one else (just created).
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `fd` is an OwnedFd that the AsyncFd owns from here on: it stays open and the
        // same descriptor until the AsyncFd is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(PaceTimer { fd })
    }

    /// Arms the timer to expire once at `deadline_s` (on the `CLOCK_MONOTONIC` scale of
    /// [`crate::clock::monotonic_s`]); a deadline already past expires at once.
    pub fn arm_once(&self, deadline_s: f64) -> io::Result<()> {
        self.set(deadline_s, None)
    }

    /// Arms the timer to expire at `first_s` and every `period_s` after it. The kernel keeps
    /// the period (no drift, no system call per packet); [`Self::wait_until`] does the rest.
    pub fn arm_periodic(&self, first_s: f64, period_s: f64) -> io::Result<()> {
        self.set(first_s, Some(period_s))
    }

    fn set(&self, first_s: f64, period_s: Option<f64>) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: period_s.map_or(ZERO, timespec),
            it_value: timespec(first_s.max(1e-9)),
        };
        // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Returns once `deadline_s` has passed: at once if it already has, else when an expiry of
    /// the timer (armed for it) wakes the task. The time decides, not the expiry count: a late
    /// packet (past its deadline when its turn comes) goes at once, as with a timer reset into
    /// the past. Cancel-safe.
    pub async fn wait_until(&self, deadline_s: f64) -> io::Result<()> {
        loop {
            // The timer's nanoseconds are truncated, so it may expire up to 1 ns before the f64
            // deadline; the slack keeps that expiry from being taken for a spurious one.
            if monotonic_s() >= deadline_s - 1e-6 {
                return Ok(());
            }
            let mut guard = self.fd.readable().await?;
            // Reading the expiry count is what re-arms a periodic timerfd for its next period
            // (without it, no further expiry wakes epoll).
            match guard.try_io(|fd| read_expirations(fd.get_ref())) {
                Ok(Ok(_)) => guard.clear_ready(),
                Ok(Err(err)) => return Err(err),
                // Readiness left from an expiry already read: try_io cleared it.
                Err(_would_block) => {}
            }
        }
    }
}

/// Reads (and so resets) a timerfd's count of expirations.
fn read_expirations(fd: &OwnedFd) -> io::Result<u64> {
    let mut expirations = 0u64;
    // SAFETY: reads at most 8 bytes into a u64 this function owns.
    let n = unsafe {
        libc::read(
            fd.as_raw_fd(),
            (&mut expirations as *mut u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(expirations)
    }
}

const ZERO: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

fn timespec(seconds: f64) -> libc::timespec {
    let secs = seconds.trunc();
    libc::timespec {
        tv_sec: secs as libc::time_t,
        tv_nsec: (((seconds - secs) * 1e9) as libc::c_long).clamp(0, 999_999_999),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_one_shot_timer_wakes_at_its_deadline_not_before() {
        runtime().block_on(async {
            let timer = PaceTimer::new().unwrap();
            let due_s = monotonic_s() + 0.0105;
            timer.arm_once(due_s).unwrap();
            timer.wait_until(due_s).await.unwrap();
            assert!(monotonic_s() >= due_s - 1e-6);
        });
    }

    #[test]
    fn a_periodic_timer_keeps_its_schedule_and_past_deadlines_return_at_once() {
        runtime().block_on(async {
            let timer = PaceTimer::new().unwrap();
            let first_s = monotonic_s() + 0.005;
            let period_s = 0.004;
            timer.arm_periodic(first_s, period_s).unwrap();
            for n in 0..5 {
                let due_s = first_s + f64::from(n) * period_s;
                tokio::time::timeout(std::time::Duration::from_secs(10), timer.wait_until(due_s))
                    .await
                    .expect("each expiry wakes the waiter")
                    .unwrap();
                assert!(monotonic_s() >= due_s - 1e-6, "woke before packet {n}");
            }
            // Busy past three periods: those deadlines are already gone, nothing waits.
            std::thread::sleep(std::time::Duration::from_millis(13));
            let late_s = first_s + 5.0 * period_s;
            let before = monotonic_s();
            timer.wait_until(late_s).await.unwrap();
            assert!(monotonic_s() - before < 0.001 || monotonic_s() >= late_s);
        });
    }

    #[test]
    fn a_cancelled_wait_loses_nothing() {
        runtime().block_on(async {
            let timer = PaceTimer::new().unwrap();
            let due_s = monotonic_s() + 0.02;
            timer.arm_once(due_s).unwrap();
            // Give up waiting halfway, as the session loop does when a reply arrives first.
            let early =
                tokio::time::timeout(std::time::Duration::from_millis(5), timer.wait_until(due_s))
                    .await;
            assert!(early.is_err(), "the deadline is 20 ms away");
            tokio::time::timeout(std::time::Duration::from_secs(10), timer.wait_until(due_s))
                .await
                .expect("the expiry still wakes a new waiter")
                .unwrap();
            assert!(monotonic_s() >= due_s - 1e-6);
        });
    }
}
