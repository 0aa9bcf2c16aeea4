//! The worker's two lines to the conductor, each on a thread of its own so the runtime never
//! waits: telemetry out on stdout through a bounded queue (full → dropped and counted), and
//! commands in from stdin.

use crate::contract::telemetry::{Telemetry, WorkerCommand};
use std::io::{BufRead as _, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Sender, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

/// Telemetry messages that may wait for the stdout thread before new ones are dropped.
const TELEMETRY_QUEUE: usize = 256;

/// What the stdout thread takes: a message, or a request to say when all before it are out.
enum Out {
    Msg(Telemetry),
    Flushed(Sender<()>),
}

#[derive(Clone)]
pub struct TelemetrySender {
    tx: SyncSender<Out>,
    dropped: Arc<AtomicU64>,
}

impl TelemetrySender {
    /// Starts the stdout thread.
    pub fn spawn() -> std::io::Result<TelemetrySender> {
        let (tx, rx) = sync_channel::<Out>(TELEMETRY_QUEUE);
        std::thread::Builder::new()
            .name("telemetry".to_string())
            .spawn(move || {
                let stdout = std::io::stdout();
                for out in rx {
                    let msg = match out {
                        Out::Msg(msg) => msg,
                        Out::Flushed(ack) => {
                            let _ = ack.send(());
                            continue;
                        }
                    };
                    let Ok(mut line) = serde_json::to_string(&msg) else {
                        continue;
                    };
                    line.push('\n');
                    let mut out = stdout.lock();
                    if out
                        .write_all(line.as_bytes())
                        .and_then(|()| out.flush())
                        .is_err()
                    {
                        // The conductor is gone; PR_SET_PDEATHSIG ends this process.
                        return;
                    }
                }
            })?;
        Ok(TelemetrySender {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Queues a message without ever blocking; counts it when the queue is full.
    pub fn send(&self, msg: Telemetry) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.tx.try_send(Out::Msg(msg))
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends a message that must arrive (`ready`), waiting on the runtime (never blocking it)
    /// while the queue is full.
    pub async fn send_eventually(&self, msg: Telemetry) {
        let mut msg = Out::Msg(msg);
        loop {
            match self.tx.try_send(msg) {
                Err(TrySendError::Full(back)) => {
                    msg = back;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                _ => return,
            }
        }
    }

    /// Sends a message that must arrive, from outside the runtime (`done`, at exit), and waits
    /// (at most `timeout`) until it and everything before it are written to stdout.
    pub fn send_and_flush(&self, msg: Telemetry, timeout: Duration) {
        if self.tx.send(Out::Msg(msg)).is_err() {
            return;
        }
        let (ack_tx, ack_rx) = std::sync::mpsc::channel();
        if self.tx.send(Out::Flushed(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(timeout);
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// How long a worker told to end by a signal (its conductor died: `PR_SET_PDEATHSIG` sends
/// SIGTERM) has to abort its sessions and write its result before it exits anyway.
const SIGNALLED_EXIT_S: u64 = 3;

/// Starts the stdin thread; commands arrive on the returned channel. End of input (the conductor
/// closed the pipe or died) arrives as `Stop`. SIGTERM or SIGHUP (the conductor died; a
/// stopped worker's orphaned process group gets SIGHUP) arrives as `Abort`: the sessions end at
/// once, their receipts are closed and the result written; the worker exits after
/// [`SIGNALLED_EXIT_S`] in any case, so that none outlives its conductor.
pub fn spawn_command_reader() -> std::io::Result<tokio::sync::mpsc::UnboundedReceiver<WorkerCommand>>
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ])?;
    let signalled = tx.clone();
    std::thread::Builder::new()
        .name("signals".to_string())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let _ = signalled.send(WorkerCommand::Abort);
                std::thread::sleep(std::time::Duration::from_secs(SIGNALLED_EXIT_S));
                std::process::exit(128 + signal);
            }
        })?;
    std::thread::Builder::new()
        .name("commands".to_string())
        .spawn(move || {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                let Ok(line) = line else { break };
                if let Some(command) = WorkerCommand::parse(&line) {
                    if tx.send(command).is_err() {
                        return;
                    }
                }
            }
            let _ = tx.send(WorkerCommand::Stop);
        })?;
    Ok(rx)
}
