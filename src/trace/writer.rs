//! The writer thread: the only code of a worker that writes trace, receipt and sample files
//! (in `thread` mode). The sessions hand it their lines in 0.5 s batches, already laid out
//! ([`super::lines`]); it writes each batch with one call per file and gathers sessions that
//! end within 50 ms of each other, so the runtime never waits for the disk.

use super::files::{SamplesFile, SessionFiles, WriteLoss};
use super::lines::Batch;
use super::{QueueDepth, TraceConfig};
use crate::clock::monotonic_s;
use crate::paths::RunPaths;
use crate::trace::TraceMode;
use anyhow::{Context, Result};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the writer waits for more sessions to end before it writes their last batches.
const END_GATHER_S: f64 = 0.05;
/// How often the writer wakes to take what was queued and write it. It does not wake for each
/// batch: waking for every line was, at 128 sessions, 8,000 wake-ups a second, the largest
/// kernel cost in a profile of the worker. Every 20 ms, its sleeps and wake-ups were still 15 %
/// of its samples at 1 x 256 meta; every 100 ms the thread took 15 % fewer samples (3
/// interleaved perf runs, issue 17). Sessions hand their lines over every 0.5 s, and the last
/// ones wait [`END_GATHER_S`] more anyway: 100 ms changes when lines reach the disk, not whether.
const POLL: Duration = Duration::from_millis(100);

pub enum WriterMsg {
    Open {
        session: u32,
    },
    Batch {
        session: u32,
        batch: Batch,
    },
    /// The session's last batch (its receipts closed); the writer answers once it is written.
    End {
        session: u32,
        batch: Batch,
        ack: Ack,
    },
}

/// Whom the writer tells whether a session's lines were all written.
pub type Ack = tokio::sync::oneshot::Sender<Result<(), WriteLoss>>;

/// A session that ended: its index, its last batch, and whom to tell when it is written.
type Ended = (u32, Batch, Ack);

/// The sending side, cloned into every session.
#[derive(Clone)]
pub struct WriterHandle {
    tx: mpsc::Sender<WriterMsg>,
    thread: Arc<std::sync::Mutex<Option<JoinHandle<Option<WriteLoss>>>>>,
}

impl WriterHandle {
    pub fn send(&self, msg: WriterMsg) {
        // A closed channel means the thread is gone; `finish` reports that to the session.
        let _ = self.tx.send(msg);
    }

    pub fn shutdown(self) -> Result<(), WriteLoss> {
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        drop(self.tx);
        match thread.map(|t| t.join()) {
            Some(Ok(None)) | None => Ok(()),
            Some(Ok(Some(err))) => Err(err),
            Some(Err(_)) => Err(WriteLoss {
                message: "the trace writer thread panicked".to_string(),
                ..WriteLoss::default()
            }),
        }
    }
}

/// Puts the writer below every other thread (SCHED_BATCH at nice 19, what any process may do
/// to its own threads), so that on a busy box it takes the CPU only when the runtime thread
/// does not want it. At normal priority, waking every 20 ms (then) with a batch to write, it
/// preempted the runtime thread on its CPU: at 1 × 1024 with `--stagger` the sends were
/// delayed in bursts of a millisecond or more, p99 1.75 ms (median of 7 runs) against 0.74 ms
/// with the writer at this priority (docs/benchmarks.md). A SCHED_BATCH thread never preempts
/// another when it wakes. Where the system refuses, the writer keeps its normal priority.
fn step_aside() {
    use thread_priority::unix::{
        set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
        ThreadSchedulePolicy,
    };
    let _ = set_thread_priority_and_policy(
        thread_native_id(),
        thread_priority::ThreadPriority::Min,
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch),
    );
}

pub fn spawn(config: TraceConfig, depth: Arc<QueueDepth>) -> Result<WriterHandle> {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("trace-writer".to_string())
        .spawn(move || {
            step_aside();
            Writer::new(config, depth).run(rx)
        })
        .context("cannot start the trace writer thread")?;
    Ok(WriterHandle {
        tx,
        thread: Arc::new(std::sync::Mutex::new(Some(thread))),
    })
}

struct Writer {
    config: TraceConfig,
    depth: Arc<QueueDepth>,
    sessions: Vec<Option<SessionFiles>>,
    samples: SamplesFile,
    /// Sessions that ended and wait for their last batch.
    ends: Vec<Ended>,
    ends_due_s: Option<f64>,
}

impl Writer {
    fn new(config: TraceConfig, depth: Arc<QueueDepth>) -> Writer {
        let samples = SamplesFile::create(
            &RunPaths::new(&config.output_dir),
            config.worker,
            depth.clone(),
        );
        Writer {
            config,
            depth,
            sessions: Vec::new(),
            samples,
            ends: Vec::new(),
            ends_due_s: None,
        }
    }

    /// Runs until every sender is gone; returns what the samples file lost, if anything.
    fn run(mut self, rx: mpsc::Receiver<WriterMsg>) -> Option<WriteLoss> {
        let mut connected = true;
        while connected {
            let now_s = monotonic_s();
            let poll_s = now_s + POLL.as_secs_f64();
            let wake_s = self.ends_due_s.map_or(poll_s, |due| due.min(poll_s));
            if wake_s > now_s {
                std::thread::sleep(Duration::from_secs_f64(wake_s - now_s));
            }
            loop {
                match rx.try_recv() {
                    Ok(msg) => self.handle(msg),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        connected = false;
                        break;
                    }
                }
            }
            if self.ends_due_s.is_some_and(|due| monotonic_s() >= due) {
                self.finish_ended();
            }
            self.samples.flush();
        }
        self.finish_ended();
        // Sessions whose end never came (a worker that stopped without ending them) handed
        // their lines over when they were dropped; their files close here.
        self.sessions.clear();
        self.samples.flush();
        self.samples.loss.take()
    }

    fn slot(&mut self, session: u32) -> &mut Option<SessionFiles> {
        let index = session as usize;
        if self.sessions.len() <= index {
            self.sessions.resize_with(index + 1, || None);
        }
        &mut self.sessions[index]
    }

    fn handle(&mut self, msg: WriterMsg) {
        match msg {
            WriterMsg::Open { session } => {
                let dir =
                    RunPaths::new(&self.config.output_dir).session_dir(self.config.worker, session);
                let traced = self.config.mode != TraceMode::Off;
                let depth = self.depth.clone();
                *self.slot(session) = Some(SessionFiles::open(&dir, traced, depth));
            }
            WriterMsg::Batch { session, batch } => self.write(session, &batch),
            WriterMsg::End {
                session,
                batch,
                ack,
            } => {
                self.ends.push((session, batch, ack));
                self.ends_due_s.get_or_insert(monotonic_s() + END_GATHER_S);
            }
        }
    }

    /// Writes a session's batch and its samples (with the next flush); its lines leave the queue.
    fn write(&mut self, session: u32, batch: &Batch) {
        if let Some(files) = self.slot(session) {
            files.write(batch);
        }
        self.samples.push(batch);
        self.depth.sub((batch.lines, batch.bytes));
    }

    /// Writes the last batches of the sessions that ended together and lets them close.
    fn finish_ended(&mut self) {
        self.ends_due_s = None;
        for (session, batch, ack) in std::mem::take(&mut self.ends) {
            self.write(session, &batch);
            let result = match self.slot(session).take() {
                Some(mut files) => files.result(),
                None => Err(WriteLoss {
                    message: format!("session {session} was never opened"),
                    ..WriteLoss::default()
                }),
            };
            let _ = ack.send(result);
        }
        self.samples.flush();
    }
}

#[cfg(test)]
mod tests {
    /// (nice, scheduling policy) of the calling thread, from /proc/thread-self/stat.
    fn own_priority() -> (i64, u32) {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The fields after the command name (which may hold spaces) end at its ')'.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        // Fields 19 (nice) and 41 (policy) of proc(5), counted from field 3 here.
        (
            fields[19 - 3].parse().unwrap(),
            fields[41 - 3].parse().unwrap(),
        )
    }

    #[test]
    fn the_writer_steps_aside_to_sched_batch_at_nice_19_and_others_keep_theirs() {
        const SCHED_BATCH: u32 = 3;
        let before = own_priority();
        let after = std::thread::spawn(|| {
            super::step_aside();
            own_priority()
        })
        .join()
        .unwrap();
        assert_eq!(after, (19, SCHED_BATCH));
        assert_eq!(
            own_priority(),
            before,
            "only the writer's own thread changes"
        );
    }
}
