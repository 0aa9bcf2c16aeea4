//! One send timer per worker: every session's next deadline in a queue, one `timerfd` armed for
//! the earliest, and wake-ups at least [`GRANULARITY_NS`] apart.
//!
//! tokio's timer rounds deadlines up to the next millisecond and parks in `epoll_wait` with a
//! timeout in milliseconds, so a packet left 1–2 ms after its due time even on an idle machine
//! (deviation p50 1.2–1.5 ms in docs/benchmarks.md). A timerfd per session was exact but woke
//! the thread once per deadline: at 1 × 1024 with `--stagger` 12,800 times a second and 80 % more
//! worker CPU. Here the thread wakes at most once per granule for all sessions due by then, so
//! a packet leaves at most about a granule late and a worker wakes at most 4,000 times a second.

use crate::clock::monotonic_s;
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::poll_fn;
use std::io;
use std::os::fd::OwnedFd;
use std::task::{Poll, Waker};
use tokio::io::unix::AsyncFd;

/// The least time between two wake-ups of the pacer (the precision it trades for CPU).
pub const GRANULARITY_NS: u64 = 250_000;
/// "Not waiting" / "not armed".
const NEVER: u64 = u64::MAX;

pub struct Pacer {
    fd: AsyncFd<OwnedFd>,
    state: RefCell<State>,
    /// When the timerfd expires next (`NEVER` when it is not armed).
    armed_ns: Cell<u64>,
    /// When the pacer last woke sessions.
    last_fire_ns: Cell<u64>,
    /// The sessions woken since the last [`Pacer::take_fired`], in deadline order; kept only
    /// once someone takes them.
    fired: RefCell<Vec<u32>>,
    keep_fired: Cell<bool>,
}

struct State {
    /// (deadline, session); entries whose session has moved on are skipped when they come up.
    queue: BinaryHeap<Reverse<(u64, u32)>>,
    /// Per session: the deadline it waits for and the waker to call then.
    due_ns: Vec<u64>,
    wakers: Vec<Option<Waker>>,
}

impl Pacer {
    /// A pacer for `sessions` sessions (indices `0..sessions`); needs a runtime with I/O.
    pub fn new(sessions: u32) -> io::Result<Pacer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // SAFETY: the AsyncFd owns `fd` from here on; it stays open and the same descriptor
        // until the AsyncFd is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(io::Error::from)?;
        let n = sessions as usize;
        Ok(Pacer {
            fd,
            state: RefCell::new(State {
                queue: BinaryHeap::with_capacity(n + 1),
                due_ns: vec![NEVER; n],
                wakers: vec![None; n],
            }),
            armed_ns: Cell::new(NEVER),
            last_fire_ns: Cell::new(0),
            fired: RefCell::new(Vec::with_capacity(n)),
            keep_fired: Cell::new(false),
        })
    }

    /// Returns once `due_s` (on the [`monotonic_s`] scale) has passed; at once if it has.
    /// Cancel-safe: a dropped wait leaves the deadline queued, and waiting again for the same
    /// deadline queues nothing new.
    pub async fn sleep_until(&self, session: u32, due_s: f64) {
        let due_ns = to_ns(due_s);
        poll_fn(|cx| {
            if to_ns(monotonic_s()) >= due_ns {
                self.forget(session);
                return Poll::Ready(());
            }
            let mut state = self.state.borrow_mut();
            let i = session as usize;
            match &mut state.wakers[i] {
                Some(w) if w.will_wake(cx.waker()) => {}
                slot => *slot = Some(cx.waker().clone()),
            }
            if state.due_ns[i] != due_ns {
                state.due_ns[i] = due_ns;
                state.queue.push(Reverse((due_ns, session)));
            }
            drop(state);
            if due_ns < self.armed_ns.get() {
                self.arm(due_ns.max(self.last_fire_ns.get() + GRANULARITY_NS));
            }
            Poll::Pending
        })
        .await
    }

    /// The session no longer waits (its deadline passed, or it ended): a queued entry for it
    /// is skipped when it comes up.
    pub fn forget(&self, session: u32) {
        let mut state = self.state.borrow_mut();
        state.due_ns[session as usize] = NEVER;
        state.wakers[session as usize] = None;
    }

    /// Wakes the sessions whose deadlines pass, for as long as the worker runs. A tokio sleep
    /// a millisecond past the armed time (or 50 ms ahead while nothing is armed, since a
    /// session may arm the timer while this waits) backs the timerfd up, so a pacer whose timer
    /// failed would still work, like tokio's timer.
    pub async fn run(&self) {
        let backstop = tokio::time::sleep(std::time::Duration::from_secs(3600));
        tokio::pin!(backstop);
        loop {
            let at_s = match self.armed_ns.get() {
                NEVER => monotonic_s() + 0.05,
                armed_ns => armed_ns as f64 * 1e-9 + 0.001,
            };
            let at = crate::clock::instant_at(at_s);
            if backstop.deadline() != at {
                backstop.as_mut().reset(at);
            }
            tokio::select! {
                ready = self.fd.readable() => {
                    // The expiry count is never read: re-arming resets it, and every expiry of a
                    // one-shot timer wakes epoll (tokio registers edge-triggered). A read per
                    // wake-up would be one more system call on the hot path.
                    if let Ok(mut guard) = ready {
                        guard.clear_ready();
                    }
                }
                () = &mut backstop => {}
            }
            self.fire();
        }
    }

    /// Wakes the sessions due by now if the timer's time has passed, as its expiry would: for
    /// a caller that polls sessions one after another, so that a deadline passing meanwhile is
    /// seen at once, not when the reactor next reads the timerfd. One clock read when nothing
    /// is due.
    pub fn fire_if_due(&self) {
        let armed_ns = self.armed_ns.get();
        if armed_ns != NEVER && to_ns(monotonic_s()) >= armed_ns {
            self.fire();
        }
    }

    /// Moves the sessions woken since the last call into `into`, in deadline order; from the
    /// first call on, the pacer keeps them (up to one entry per deadline) until taken.
    pub fn take_fired(&self, into: &mut VecDeque<u32>) {
        self.keep_fired.set(true);
        into.extend(self.fired.borrow_mut().drain(..));
    }

    /// Wakes every session due by now and arms the timer for the next deadline, at least a
    /// granule after this wake-up.
    fn fire(&self) {
        let now_ns = to_ns(monotonic_s());
        let mut state = self.state.borrow_mut();
        while let Some(&Reverse((due_ns, session))) = state.queue.peek() {
            if due_ns > now_ns {
                break;
            }
            state.queue.pop();
            let i = session as usize;
            if state.due_ns[i] == due_ns {
                if let Some(waker) = state.wakers[i].take() {
                    if self.keep_fired.get() {
                        self.fired.borrow_mut().push(session);
                    }
                    waker.wake();
                }
            }
        }
        let next = state.queue.peek().map(|&Reverse((due_ns, _))| due_ns);
        drop(state);
        self.last_fire_ns.set(now_ns);
        match next_arm(now_ns, self.armed_ns.get(), next) {
            Arm::Leave => {}
            Arm::At(at_ns) => self.arm(at_ns),
            Arm::Never => self.armed_ns.set(NEVER),
        }
    }

    fn arm(&self, at_ns: u64) {
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: (at_ns / 1_000_000_000) as _,
                tv_nsec: (at_ns % 1_000_000_000) as _,
            },
        };
        // A failure leaves the backstop in `run` to wake the sessions.
        let _ = timerfd_settime(self.fd.get_ref(), TimerfdTimerFlags::ABSTIME, &spec);
        self.armed_ns.set(at_ns);
    }
}

/// What a wake-up does with the timer.
#[derive(Debug, PartialEq, Eq)]
enum Arm {
    /// Leave it: it will expire when it must.
    Leave,
    At(u64),
    /// Nothing is queued: leave it unarmed.
    Never,
}

/// The timer after a wake-up at `now_ns`, armed for `armed_ns` (`NEVER`: not armed), with the
/// earliest deadline still queued `next_ns`. A timer that has yet to expire stays where it is:
/// this wake-up came before it (a deadline passed while the thread was busy and the scheduler
/// fired the pacer itself, or the timerfd's readiness of an expiry already handled), and its
/// time was set for the deadlines queued, never later than they need. Moving it to a granule
/// from now, as the pacer did, was one more system call on most staggered wake-ups, and put the
/// next send up to a granule later (issue 17). An expired timer is armed for the next deadline,
/// a granule from now at the earliest.
fn next_arm(now_ns: u64, armed_ns: u64, next_ns: Option<u64>) -> Arm {
    match next_ns {
        None => Arm::Never,
        Some(_) if armed_ns != NEVER && armed_ns > now_ns => Arm::Leave,
        Some(next_ns) => Arm::At(next_ns.max(now_ns + GRANULARITY_NS)),
    }
}

fn to_ns(seconds: f64) -> u64 {
    (seconds.max(0.0) * 1e9) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::time::Duration;

    fn in_local_runtime<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    #[test]
    fn a_timer_yet_to_expire_is_left_where_it_is_issue_17() {
        let ms = 1_000_000;
        // A wake-up before the timer's time (the scheduler fired the pacer itself, or a stale
        // readiness): the timer stays, even when the next deadline is within a granule.
        assert_eq!(
            next_arm(100 * ms, 100 * ms + 50_000, Some(100 * ms + 100_000)),
            Arm::Leave
        );
        assert_eq!(
            next_arm(100 * ms, 100 * ms + 50_000, Some(180 * ms)),
            Arm::Leave
        );
        // Expired (or never armed): the next deadline, a granule from now at the earliest.
        assert_eq!(
            next_arm(100 * ms, 100 * ms, Some(180 * ms)),
            Arm::At(180 * ms)
        );
        assert_eq!(
            next_arm(100 * ms, 99 * ms, Some(100 * ms + 10_000)),
            Arm::At(100 * ms + GRANULARITY_NS)
        );
        assert_eq!(
            next_arm(100 * ms, NEVER, Some(100 * ms + 10_000)),
            Arm::At(100 * ms + GRANULARITY_NS)
        );
        // Nothing queued: unarmed.
        assert_eq!(next_arm(100 * ms, 100 * ms + 50_000, None), Arm::Never);
    }

    #[test]
    fn sessions_wake_at_their_deadlines_not_before_and_at_most_a_granule_late_when_idle() {
        in_local_runtime(async {
            let pacer = Rc::new(Pacer::new(3).unwrap());
            let driver = tokio::task::spawn_local({
                let pacer = pacer.clone();
                async move { pacer.run().await }
            });
            let start = monotonic_s();
            let waits: Vec<_> = [(0u32, 0.030), (1, 0.010), (2, 0.0205)]
                .into_iter()
                .map(|(session, offset)| {
                    let pacer = pacer.clone();
                    tokio::task::spawn_local(async move {
                        let due = start + offset;
                        pacer.sleep_until(session, due).await;
                        monotonic_s() - due
                    })
                })
                .collect();
            for wait in waits {
                let late = tokio::time::timeout(Duration::from_secs(10), wait)
                    .await
                    .expect("every session wakes")
                    .unwrap();
                assert!(late >= 0.0, "woke {:.6} s early", -late);
            }
            driver.abort();
        });
    }

    #[test]
    fn a_dropped_wait_keeps_its_deadline_and_a_forgotten_session_is_skipped() {
        in_local_runtime(async {
            let pacer = Rc::new(Pacer::new(2).unwrap());
            let driver = tokio::task::spawn_local({
                let pacer = pacer.clone();
                async move { pacer.run().await }
            });
            let due = monotonic_s() + 0.02;
            // Session 1 waits, then ends before its deadline.
            let gone =
                tokio::time::timeout(Duration::from_millis(2), pacer.sleep_until(1, due)).await;
            assert!(gone.is_err());
            pacer.forget(1);
            // Session 0 gives up once halfway (as the session loop does when a reply comes
            // first), then waits again for the same deadline.
            let early =
                tokio::time::timeout(Duration::from_millis(5), pacer.sleep_until(0, due)).await;
            assert!(early.is_err(), "the deadline is 20 ms away");
            tokio::time::timeout(Duration::from_secs(10), pacer.sleep_until(0, due))
                .await
                .expect("the queued deadline still wakes the new wait");
            assert!(monotonic_s() >= due);
            // A deadline already past returns at once, without the pacer.
            pacer.sleep_until(0, due - 1.0).await;
            driver.abort();
        });
    }

    #[test]
    fn many_deadlines_close_together_are_woken_in_few_wake_ups() {
        in_local_runtime(async {
            let n = 64u32;
            let pacer = Rc::new(Pacer::new(n).unwrap());
            let driver = tokio::task::spawn_local({
                let pacer = pacer.clone();
                async move { pacer.run().await }
            });
            let start = monotonic_s() + 0.01;
            let waits: Vec<_> = (0..n)
                .map(|k| {
                    let pacer = pacer.clone();
                    // 64 deadlines 10 µs apart: 0.64 ms in all.
                    let due = start + f64::from(k) * 10e-6;
                    tokio::task::spawn_local(async move {
                        pacer.sleep_until(k, due).await;
                        assert!(monotonic_s() >= due);
                    })
                })
                .collect();
            for wait in waits {
                tokio::time::timeout(Duration::from_secs(10), wait)
                    .await
                    .expect("every session wakes")
                    .unwrap();
            }
            assert!(pacer.state.borrow().queue.is_empty());
            driver.abort();
        });
    }
}
