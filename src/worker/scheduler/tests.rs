use super::*;
use crate::clock::monotonic_s;
use std::cell::{Cell, RefCell};
use std::time::Duration;

fn in_local_runtime<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let within = async {
        tokio::time::timeout(Duration::from_secs(30), f)
            .await
            .expect("the test ends within 30 s")
    };
    tokio::task::LocalSet::new().block_on(&rt, within)
}

fn ended(index: u32) -> SessionOutcome {
    let mut outcome = SessionOutcome::new(index);
    outcome.error = Some(format!("ended {index}"));
    outcome
}

fn boxed(f: impl Future<Output = SessionOutcome> + 'static) -> SessionFuture {
    Box::pin(f)
}

#[test]
fn every_session_runs_to_its_end_and_a_panic_ends_only_its_own() {
    in_local_runtime(async {
        let pacer = Rc::new(Pacer::new(3).unwrap());
        let sessions = vec![
            boxed(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ended(0)
            }),
            boxed(async {
                tokio::task::yield_now().await;
                panic!("session 1 broke");
            }),
            boxed(async { ended(2) }),
        ];
        let mut scheduler = Scheduler::new(sessions, pacer);
        scheduler.run().await;
        let outcomes = scheduler.into_outcomes();
        let errors: Vec<_> = outcomes
            .iter()
            .map(|o| o.as_ref().unwrap().error.clone().unwrap())
            .collect();
        assert_eq!(errors[0], "ended 0");
        assert_eq!(
            errors[1],
            "session task failed: it panicked: session 1 broke"
        );
        assert_eq!(errors[2], "ended 2");
        assert_eq!(outcomes[1].as_ref().unwrap().index, 1);
    });
}

/// A session whose packet fell due is polled before sessions woken earlier by their sockets,
/// and without the pacer's own timer task: its deadline is checked between polls.
#[test]
fn a_session_the_pacer_finds_due_is_polled_before_sessions_woken_earlier() {
    in_local_runtime(async {
        let pacer = Rc::new(Pacer::new(4).unwrap());
        let order = Rc::new(RefCell::new(Vec::new()));
        let parked: Rc<RefCell<Vec<Waker>>> = Rc::default();
        let due = monotonic_s() + 0.005;
        let mut sessions = Vec::new();
        for index in 0..3u32 {
            let (order, parked) = (order.clone(), parked.clone());
            sessions.push(boxed(async move {
                let mut first = true;
                poll_fn(|cx| {
                    if std::mem::take(&mut first) {
                        parked.borrow_mut().push(cx.waker().clone());
                        Poll::Pending
                    } else {
                        Poll::Ready(())
                    }
                })
                .await;
                order.borrow_mut().push(index);
                ended(index)
            }));
        }
        sessions.push(boxed({
            let (order, pacer) = (order.clone(), pacer.clone());
            async move {
                pacer.sleep_until(3, due).await;
                order.borrow_mut().push(3);
                ended(3)
            }
        }));
        // Once every session waits: block the thread past the deadline, then wake 0, 1 and 2
        // (as server frames arriving during a busy stretch would).
        let waker = tokio::task::spawn_local({
            let parked = parked.clone();
            async move {
                while parked.borrow().len() < 3 {
                    tokio::task::yield_now().await;
                }
                std::thread::sleep(Duration::from_millis(10));
                for w in parked.borrow_mut().drain(..) {
                    w.wake();
                }
            }
        });
        let mut scheduler = Scheduler::new(sessions, pacer);
        scheduler.run().await;
        waker.await.unwrap();
        assert_eq!(*order.borrow(), [3, 0, 1, 2]);
    });
}

/// A session that is always ready again does not keep the runtime from its reactor and timers.
#[test]
fn a_session_that_never_waits_leaves_room_for_the_others_timers() {
    in_local_runtime(async {
        let pacer = Rc::new(Pacer::new(2).unwrap());
        let done = Rc::new(Cell::new(false));
        let spins = Rc::new(Cell::new(0u64));
        let sessions = vec![
            boxed({
                let (done, spins) = (done.clone(), spins.clone());
                poll_fn(move |cx| {
                    if done.get() {
                        return Poll::Ready(ended(0));
                    }
                    spins.set(spins.get() + 1);
                    cx.waker().wake_by_ref();
                    Poll::Pending
                })
            }),
            boxed({
                let done = done.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    done.set(true);
                    ended(1)
                }
            }),
        ];
        let mut scheduler = Scheduler::new(sessions, pacer);
        scheduler.run().await;
        assert!(spins.get() > 1);
        assert!(scheduler.into_outcomes().iter().all(Option::is_some));
    });
}

#[test]
fn a_dropped_run_leaves_the_outcomes_of_the_sessions_that_ended() {
    in_local_runtime(async {
        let pacer = Rc::new(Pacer::new(2).unwrap());
        let sessions = vec![boxed(async { ended(0) }), boxed(std::future::pending())];
        let mut scheduler = Scheduler::new(sessions, pacer);
        let stopped = tokio::time::timeout(Duration::from_millis(20), scheduler.run()).await;
        assert!(stopped.is_err(), "session 1 never ends");
        let outcomes = scheduler.into_outcomes();
        assert_eq!(
            outcomes[0].as_ref().unwrap().error.as_deref(),
            Some("ended 0")
        );
        assert!(outcomes[1].is_none());
    });
}
