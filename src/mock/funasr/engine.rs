//! The Fun-ASR mock's decode engine: a cost model instead of a model, shared by every session
//! of the mock. Decodes wait in one queue; those of several sessions that arrive within
//! `--decode-batch-wait-ms` of the first are collected together (at most
//! `--decode-max-batch-size`), on at most `--decode-slots` collections at once. As the real
//! `RealtimeBatchingEngine`, a collection goes to the engine as one call per group of
//! compatible decodes — equal settings: partial or final (their `max_new_tokens` differ), and
//! the session's hotwords and language — the groups one after the other. A call costs
//! `--decode-ms` plus `--decode-ms-per-audio-sec` for the longest audio in it (a batch runs in
//! parallel, padded to its longest).
//!
//! [`Batcher`] is the queue without I/O (tested on a fake clock); [`Engine`] drives it with
//! tokio timers on the mock's loop and logs each call like `--log-decode-profile`.

use crate::cli::FunasrMockArgs;
use crate::clock::{instant_at, monotonic_s};
use crate::stats::exact::{median, percentile};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Write as _;
use std::rc::Rc;
use tokio::sync::{oneshot, Notify};

/// One decode waiting for the engine.
#[derive(Debug)]
pub struct Queued<T> {
    pub enqueued_s: f64,
    /// Audio the decode covers, in seconds (what it costs).
    pub audio_s: f64,
    pub is_final: bool,
    /// The decode's settings apart from partial/final ([`super::session::Decode::settings`]).
    pub settings: u64,
    pub item: T,
}

/// The decodes of one collection as the engine calls them: one group of equal settings (final
/// or not, and the session's), in the order each group's first decode came.
pub fn groups<T>(batch: Vec<Queued<T>>) -> Vec<Vec<Queued<T>>> {
    let mut groups: Vec<Vec<Queued<T>>> = Vec::new();
    for q in batch {
        match groups
            .iter_mut()
            .find(|g| g[0].is_final == q.is_final && g[0].settings == q.settings)
        {
            Some(group) => group.push(q),
            None => groups.push(vec![q]),
        }
    }
    groups
}

/// The queue and the slots, without I/O.
#[derive(Debug)]
pub struct Batcher<T> {
    queue: VecDeque<Queued<T>>,
    busy: u32,
    slots: u32,
    wait_s: f64,
    max_batch: usize,
    /// When the collection of the next batch began: the real server's collector takes the
    /// first waiting decode, then waits `--decode-batch-wait-ms` from then for company; one
    /// that was busy begins when it is done, not when the decode came.
    collect_from_s: Option<f64>,
}

impl<T> Batcher<T> {
    pub fn new(slots: u32, wait_ms: f64, max_batch: u32) -> Batcher<T> {
        Batcher {
            queue: VecDeque::new(),
            busy: 0,
            slots: slots.max(1),
            wait_s: wait_ms.max(0.0) / 1000.0,
            max_batch: max_batch.max(1) as usize,
            collect_from_s: None,
        }
    }

    pub fn submit(&mut self, queued: Queued<T>) {
        if self.collect_from_s.is_none() && self.busy < self.slots {
            self.collect_from_s = Some(queued.enqueued_s);
        }
        self.queue.push_back(queued);
    }

    /// The next call to start at `now_s`, if a slot is free and a batch is ready: full, or
    /// the batch wait has passed since its collection began. A wait of 0 takes the first
    /// decode alone, as the real server's collector does (its deadline has passed before it
    /// looks for a second): batching off.
    pub fn ready(&mut self, now_s: f64) -> Option<Vec<Queued<T>>> {
        if self.queue.is_empty() || self.busy >= self.slots {
            return None;
        }
        let from_s = *self.collect_from_s.get_or_insert(now_s);
        let due = self.queue.len() >= self.max_batch || now_s >= from_s + self.wait_s;
        if !due {
            return None;
        }
        self.busy += 1;
        let n = if self.wait_s > 0.0 {
            self.queue.len().min(self.max_batch)
        } else {
            1
        };
        let batch = self.queue.drain(..n).collect();
        // Another free collector takes the next waiting decode at once.
        self.collect_from_s = (!self.queue.is_empty() && self.busy < self.slots).then_some(now_s);
        Some(batch)
    }

    /// When a waiting batch becomes ready (if a slot is free then).
    pub fn wake_at(&self) -> Option<f64> {
        if self.queue.is_empty() || self.busy >= self.slots {
            return None;
        }
        self.collect_from_s.map(|from_s| from_s + self.wait_s)
    }

    /// A call finished at `now_s`: its slot is free, and its collector takes the next waiting
    /// decode from then.
    pub fn done(&mut self, now_s: f64) {
        self.busy = self.busy.saturating_sub(1);
        if self.collect_from_s.is_none() && !self.queue.is_empty() {
            self.collect_from_s = Some(now_s);
        }
    }
}

/// What one engine call costs, in seconds.
pub fn call_cost_s(model: &FunasrMockArgs, longest_audio_s: f64) -> f64 {
    (model.decode_ms + model.decode_ms_per_audio_sec * longest_audio_s).max(0.0) / 1000.0
}

/// One engine call of `(queue wait ms, audio s, final)` decodes as the real server's
/// `--log-decode-profile` logs it (`realtime_ws.py`, without the logger's time stamp and level):
/// `requests` the decodes in the call, `samples` its audio inputs (one a decode), the audio's
/// total, shortest and longest seconds, the queue wait's median and largest ms, the engine's ms.
/// Then ours, under names the real line does not use: how many decodes were partials and finals.
pub fn profile_line(shape: &[(f64, f64, bool)], engine_ms: f64) -> String {
    let waits: Vec<f64> = shape.iter().map(|s| s.0).collect();
    let audio = || shape.iter().map(|s| s.1);
    let finals = shape.iter().filter(|s| s.2).count();
    let (min_s, max_s) = if shape.is_empty() {
        (0.0, 0.0)
    } else {
        (
            audio().fold(f64::INFINITY, f64::min),
            audio().fold(f64::NEG_INFINITY, f64::max),
        )
    };
    format!(
        "Realtime decode profile: requests={} samples={} audio_sec_total={:.3} audio_sec_min={:.3} audio_sec_max={:.3} queue_ms_p50={:.3} queue_ms_max={:.3} engine_ms={:.3} partial_requests={} final_requests={}\n",
        shape.len(),
        shape.len(),
        audio().sum::<f64>(),
        min_s,
        max_s,
        median(&waits).unwrap_or(0.0),
        waits.iter().copied().fold(0.0, f64::max),
        engine_ms,
        shape.len() - finals,
        finals,
    )
}

/// The engine's totals, for the last profile line.
#[derive(Debug, Default)]
struct Totals {
    calls: u64,
    requests: u64,
    largest_batch: usize,
    queue_waits_ms: Vec<f64>,
}

pub struct Engine {
    model: FunasrMockArgs,
    batcher: RefCell<Batcher<oneshot::Sender<()>>>,
    wake: Notify,
    totals: RefCell<Totals>,
}

impl Engine {
    /// The engine, with its dispatcher running on the current local task set.
    pub fn start(model: FunasrMockArgs) -> Rc<Engine> {
        let engine = Rc::new(Engine {
            batcher: RefCell::new(Batcher::new(
                model.decode_slots,
                model.decode_batch_wait_ms,
                model.decode_max_batch_size,
            )),
            model,
            wake: Notify::new(),
            totals: RefCell::new(Totals::default()),
        });
        if !engine.model.blocking_decode {
            tokio::task::spawn_local(Rc::clone(&engine).dispatch());
        }
        engine
    }

    pub fn model(&self) -> &FunasrMockArgs {
        &self.model
    }

    /// Queues `decode`; the receiver fires when it is done.
    pub fn submit(&self, decode: super::session::Decode) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.batcher.borrow_mut().submit(Queued {
            enqueued_s: monotonic_s(),
            audio_s: decode.audio_s,
            is_final: decode.is_final,
            settings: decode.settings,
            item: tx,
        });
        self.wake.notify_one();
        rx
    }

    /// `--blocking-decode`: the decode runs here and now, on the WebSocket loop.
    pub fn decode_blocking(&self, audio_s: f64, is_final: bool) {
        let cost_s = call_cost_s(&self.model, audio_s);
        std::thread::sleep(std::time::Duration::from_secs_f64(cost_s));
        self.account(&[(0.0, audio_s, is_final)], cost_s);
    }

    async fn dispatch(self: Rc<Engine>) {
        loop {
            let now_s = monotonic_s();
            let batch = self.batcher.borrow_mut().ready(now_s);
            if let Some(batch) = batch {
                tokio::task::spawn_local(Rc::clone(&self).run(batch, now_s));
                continue;
            }
            let wake_at = self.batcher.borrow().wake_at();
            match wake_at {
                Some(at_s) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(instant_at(at_s)) => {}
                        () = self.wake.notified() => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }

    /// One collection: a call per group, one after the other; each group's decodes are done
    /// when its call is.
    async fn run(self: Rc<Engine>, batch: Vec<Queued<oneshot::Sender<()>>>, start_s: f64) {
        let mut call_start_s = start_s;
        for group in groups(batch) {
            let longest_s = group.iter().map(|q| q.audio_s).fold(0.0, f64::max);
            let cost_s = call_cost_s(&self.model, longest_s);
            tokio::time::sleep_until(instant_at(call_start_s + cost_s)).await;
            let shape: Vec<(f64, f64, bool)> = group
                .iter()
                .map(|q| {
                    (
                        (call_start_s - q.enqueued_s) * 1000.0,
                        q.audio_s,
                        q.is_final,
                    )
                })
                .collect();
            for q in group {
                let _ = q.item.send(());
            }
            self.account(&shape, cost_s);
            call_start_s += cost_s;
        }
        self.batcher.borrow_mut().done(monotonic_s());
        self.wake.notify_one();
    }

    /// Counts one call of `(queue wait ms, audio s, final)` decodes, and logs it if asked.
    fn account(&self, shape: &[(f64, f64, bool)], cost_s: f64) {
        let waits: Vec<f64> = shape.iter().map(|s| s.0).collect();
        {
            let mut t = self.totals.borrow_mut();
            t.calls += 1;
            t.requests += shape.len() as u64;
            t.largest_batch = t.largest_batch.max(shape.len());
            t.queue_waits_ms.extend_from_slice(&waits);
        }
        if self.model.log_decode_profile {
            let line = profile_line(shape, cost_s * 1000.0);
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    /// The totals as one last profile line.
    pub fn totals_line(&self) -> String {
        let t = self.totals.borrow();
        format!(
            "decode_profile_total calls={} requests={} batch_mean={:.2} batch_max={} queue_wait_ms_p50={:.1} queue_wait_ms_p95={:.1} queue_wait_ms_max={:.1} blocking={}\n",
            t.calls,
            t.requests,
            t.requests as f64 / t.calls.max(1) as f64,
            t.largest_batch,
            median(&t.queue_waits_ms).unwrap_or(0.0),
            percentile(&t.queue_waits_ms, 95.0).unwrap_or(0.0),
            t.queue_waits_ms.iter().copied().fold(0.0, f64::max),
            self.model.blocking_decode
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(at_s: f64, n: u32) -> Queued<u32> {
        Queued {
            enqueued_s: at_s,
            audio_s: 1.0,
            is_final: false,
            settings: 0,
            item: n,
        }
    }

    /// As `RealtimeBatchingEngine._run`: a collection is grouped by the decodes' settings —
    /// partials and finals apart (`max_new_tokens` 200 and 512), sessions of other hotwords or
    /// language apart — and each group is one engine call, in the order its first decode came.
    #[test]
    fn a_collection_is_one_call_per_group_of_equal_settings_issue_11() {
        let with = |n: u32, is_final: bool, settings: u64| Queued {
            is_final,
            settings,
            ..queued(0.0, n)
        };
        let batch = vec![
            with(0, false, 1),
            with(1, true, 1),
            with(2, false, 2),
            with(3, false, 1),
            with(4, true, 1),
        ];
        let calls: Vec<Vec<u32>> = groups(batch)
            .into_iter()
            .map(|g| g.into_iter().map(|q| q.item).collect())
            .collect();
        assert_eq!(calls, [vec![0, 3], vec![1, 4], vec![2]]);
    }

    #[test]
    fn decodes_within_the_batch_wait_go_as_one_call_issue_11() {
        let mut b = Batcher::new(1, 10.0, 16);
        b.submit(queued(1.000, 0));
        assert!(b.ready(1.005).is_none(), "waits for company");
        assert_eq!(b.wake_at(), Some(1.010));
        b.submit(queued(1.004, 1));
        let batch = b.ready(1.010).unwrap();
        assert_eq!(batch.iter().map(|q| q.item).collect::<Vec<_>>(), [0, 1]);
        // The one slot is busy: the next waits for it even when its wait is over.
        b.submit(queued(1.011, 2));
        assert!(b.ready(1.5).is_none());
        assert_eq!(b.wake_at(), None);
        // Freed, its collector takes that decode and waits the batch wait from then, as the
        // real one does, not from when the decode came.
        b.done(1.5);
        assert!(
            b.ready(1.5).is_none(),
            "waits for company from the slot's end"
        );
        assert_eq!(b.wake_at(), Some(1.51));
        b.submit(queued(1.505, 3));
        let batch = b.ready(1.51).unwrap();
        assert_eq!(batch.iter().map(|q| q.item).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn a_batch_wait_of_zero_turns_batching_off_as_on_the_real_server_issue_11() {
        // The seed's "set the wait to 0 for a no-wait comparison": one decode a call, even
        // with others waiting (they had batched together before).
        let mut b = Batcher::new(1, 0.0, 16);
        for n in 0..3 {
            b.submit(queued(1.0, n));
        }
        assert_eq!(b.ready(1.0).unwrap().len(), 1);
        assert!(b.ready(1.0).is_none(), "the one slot is busy");
        b.done(1.02);
        assert_eq!(b.ready(1.02).unwrap().len(), 1);
    }

    #[test]
    fn a_full_batch_starts_at_once_and_size_one_turns_batching_off_issue_11() {
        let mut b = Batcher::new(2, 10.0, 2);
        b.submit(queued(0.0, 0));
        b.submit(queued(0.0, 1));
        b.submit(queued(0.0, 2));
        assert_eq!(b.ready(0.0).unwrap().len(), 2);
        assert!(b.ready(0.0).is_none(), "one left, under its wait");
        assert_eq!(b.ready(0.01).unwrap().len(), 1);
        let mut single = Batcher::new(1, 0.0, 1);
        single.submit(queued(0.0, 0));
        single.submit(queued(0.0, 1));
        assert_eq!(single.ready(0.0).unwrap().len(), 1);
    }

    /// The real server's line, name for name: `samples` counts audio inputs (here one a
    /// decode), not PCM samples; our partial/final split comes after, under other names.
    #[test]
    fn the_profile_line_has_the_real_servers_names_and_meanings() {
        let shape = [(1.5, 0.96, false), (0.5, 8.0, false), (3.0, 12.25, true)];
        assert_eq!(
            profile_line(&shape, 141.25),
            "Realtime decode profile: requests=3 samples=3 audio_sec_total=21.210 audio_sec_min=0.960 audio_sec_max=12.250 queue_ms_p50=1.500 queue_ms_max=3.000 engine_ms=141.250 partial_requests=2 final_requests=1\n"
        );
    }

    #[test]
    fn a_call_costs_its_fixed_part_plus_its_longest_audio_issue_11() {
        let model = FunasrMockArgs {
            decode_ms: 20.0,
            decode_ms_per_audio_sec: 10.0,
            ..FunasrMockArgs::default()
        };
        assert!((call_cost_s(&model, 8.0) - 0.1).abs() < 1e-12);
    }
}
