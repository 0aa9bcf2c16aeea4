//! Trace and receipt writing: one writer thread per worker does every file write, so the
//! runtime never waits on the disk (which is how the study's Python client fell behind).
//!
//! Session tasks lay out their lines at once, from frames already encoded, and hand them over in
//! 0.5 s batches ([`lines`]); with the default `thread` writer one OS thread per worker does
//! every file write, one call per file a batch, and gathers sessions that end within 50 ms. A session finishes only after its
//! lines are written; a write error fails the session when it ends. The `inline` writer writes
//! every line from the async runtime instead: the seed's original bug, kept for A/B study.

pub mod files;
pub mod format;
pub mod lines;
mod writer;

use crate::frame::{AudioSpan, FramePool, Outgoing};
use crate::paths::RunPaths;
use anyhow::Result;
pub use files::WriteLoss;
use files::{SamplesFile, SessionFiles};
use format::{Direction, Payload};
use lines::{Batch, SessionLines};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A JSON event with no audio.
const JSON: Payload = Payload::Json { audio_key: None };

/// How much of each event the session traces keep.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TraceMode {
    /// Every event, base64 audio included (the load the seed's client put on the disk).
    Full,
    /// Every event without audio payloads.
    Meta,
    /// No traces (receipts and samples are still written).
    Off,
}

/// Who writes the traces.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TraceWriterMode {
    /// One writer thread per worker does every file write, in 0.5 s batches.
    Thread,
    /// Line-buffered writes from the async runtime, for A/B study: how the study's Python client
    /// wrote its traces, which made its sends wait on page-cache writeback.
    Inline,
}

impl TraceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceMode::Full => "full",
            TraceMode::Meta => "meta",
            TraceMode::Off => "off",
        }
    }
}

impl TraceWriterMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceWriterMode::Thread => "thread",
            TraceWriterMode::Inline => "inline",
        }
    }
}

/// One sent packet, as recorded in `input-send-receipts.json` and the samples file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Receipt {
    pub event_id: u64,
    pub seq: u32,
    /// The session's start gate (the run's gate plus its `--stagger` offset).
    pub gate_s: f64,
    /// The gate plus `seq` packet intervals: when sglang-omni's client would have scheduled it.
    pub scheduled_s: f64,
    /// Packet 0's actual send plus `seq` packet intervals: what its deviation is measured from.
    pub due_s: f64,
    pub start_s: f64,
    pub completed_s: f64,
}

/// Lines and bytes handed to the writer and not yet written (the writer queue depth).
#[derive(Debug, Default)]
pub struct QueueDepth {
    /// Lines (and their payload bytes) the sessions pushed. Only the runtime thread counts
    /// these, so a plain load and store do (no locked add: six lines a packet); the runtime
    /// thread is also the one that reads the depth.
    pushed: Counts,
    /// ... and those the writer thread has written (or lost).
    written: Counts,
    /// Lines the files did not take, and whether a write found the disk full: shown live.
    lost_lines: AtomicU64,
    disk_full: std::sync::atomic::AtomicBool,
}

/// Two counters on a cache line of their own: the writer's updates do not pull the runtime's
/// line away from it.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Counts {
    lines: AtomicU64,
    bytes: AtomicU64,
}

impl QueueDepth {
    /// Counts pushed lines; called on the runtime thread only (see `pushed`).
    fn add(&self, lines: u64, bytes: u64) {
        let p = &self.pushed;
        p.lines
            .store(p.lines.load(Ordering::Relaxed) + lines, Ordering::Relaxed);
        p.bytes
            .store(p.bytes.load(Ordering::Relaxed) + bytes, Ordering::Relaxed);
    }

    fn sub(&self, (lines, bytes): (u64, u64)) {
        self.written.lines.fetch_add(lines, Ordering::Relaxed);
        self.written.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn lost(&self, lines: u64, disk_full: bool) {
        self.lost_lines.fetch_add(lines, Ordering::Relaxed);
        if disk_full {
            self.disk_full.store(true, Ordering::Relaxed);
        }
    }

    /// (lines not written so far, whether the disk was full).
    pub fn losses(&self) -> (u64, bool) {
        (
            self.lost_lines.load(Ordering::Relaxed),
            self.disk_full.load(Ordering::Relaxed),
        )
    }

    /// (lines, bytes) waiting now. Read on the runtime thread, whose own counts are current; the
    /// writer only ever counts lines pushed before (it got them through the channel).
    pub fn get(&self) -> (u64, u64) {
        let (p, w) = (&self.pushed, &self.written);
        (
            p.lines
                .load(Ordering::Relaxed)
                .saturating_sub(w.lines.load(Ordering::Relaxed)),
            p.bytes
                .load(Ordering::Relaxed)
                .saturating_sub(w.bytes.load(Ordering::Relaxed)),
        )
    }
}

/// What a worker's tracer needs to know.
#[derive(Debug, Clone)]
pub struct TraceConfig {
    pub output_dir: PathBuf,
    pub worker: u32,
    pub mode: TraceMode,
    pub writer: TraceWriterMode,
}

/// A worker's trace machinery: the writer thread, or the inline writer's shared samples file.
pub struct Tracer {
    config: TraceConfig,
    depth: Arc<QueueDepth>,
    kind: TracerKind,
    /// The buffers the worker's sessions build their packets in.
    frames: FramePool,
}

enum TracerKind {
    Thread(writer::WriterHandle),
    Inline(Rc<RefCell<SamplesFile>>),
}

impl Tracer {
    pub fn start(config: TraceConfig) -> Result<Tracer> {
        let depth = Arc::new(QueueDepth::default());
        let kind = match config.writer {
            TraceWriterMode::Thread => {
                TracerKind::Thread(writer::spawn(config.clone(), depth.clone())?)
            }
            TraceWriterMode::Inline => {
                TracerKind::Inline(Rc::new(RefCell::new(SamplesFile::create(
                    &RunPaths::new(&config.output_dir),
                    config.worker,
                    depth.clone(),
                ))))
            }
        };
        Ok(Tracer {
            config,
            depth,
            kind,
            frames: FramePool::default(),
        })
    }

    pub fn depth(&self) -> Arc<QueueDepth> {
        self.depth.clone()
    }

    /// The handle a session task writes through.
    pub fn open_session(&self, session: u32) -> SessionTrace {
        let traced = self.config.mode != TraceMode::Off;
        let meta = self.config.mode == TraceMode::Meta;
        let sink = match &self.kind {
            TracerKind::Thread(handle) => {
                handle.send(writer::WriterMsg::Open { session });
                Sink::Thread(handle.clone())
            }
            TracerKind::Inline(samples) => {
                let dir =
                    RunPaths::new(&self.config.output_dir).session_dir(self.config.worker, session);
                Sink::Inline {
                    files: Box::new(SessionFiles::open(&dir, traced, self.depth.clone())),
                    samples: samples.clone(),
                }
            }
        };
        SessionTrace {
            session,
            lines: SessionLines::new(
                self.config.worker,
                session,
                (traced, meta),
                self.frames.clone(),
            ),
            depth: self.depth.clone(),
            sink,
            finished: false,
            close: None,
        }
    }

    /// Stops the writer thread after everything queued is written; returns what the samples
    /// file lost.
    pub fn shutdown(self) -> Result<(), WriteLoss> {
        match self.kind {
            TracerKind::Thread(handle) => handle.shutdown(),
            TracerKind::Inline(samples) => {
                let mut samples = samples.borrow_mut();
                samples.flush();
                samples.loss.take().map_or(Ok(()), Err)
            }
        }
    }
}

enum Sink {
    Thread(writer::WriterHandle),
    Inline {
        files: Box<SessionFiles>,
        samples: Rc<RefCell<SamplesFile>>,
    },
}

/// One session's way to its trace, receipts and samples: its lines are laid out here, at once,
/// and handed to the writer every [`lines::BATCH_S`] (with the `inline` writer, written at once).
pub struct SessionTrace {
    session: u32,
    lines: SessionLines,
    depth: Arc<QueueDepth>,
    sink: Sink,
    /// The last batch has gone (`finish`); otherwise dropping the trace hands it over.
    finished: bool,
    /// The server's close frame, for the receipts ([`format::close_frame`]).
    close: Option<String>,
}

impl SessionTrace {
    /// A sent event other than an append (setup, end, close).
    pub fn send(&mut self, time_s: f64, frame: &str) {
        self.line(Direction::Send, time_s, frame, JSON);
    }

    /// A sent control frame that is not JSON (a Fun-ASR command): a JSON string in the trace.
    pub fn send_text(&mut self, time_s: f64, frame: &str) {
        self.line(Direction::Send, time_s, frame, Payload::Text);
    }

    /// A received frame as it arrived; `kind` says whether it parsed and where its audio is.
    pub fn receive(&mut self, time_s: f64, frame: &str, kind: Payload) {
        self.line(Direction::Receive, time_s, frame, kind);
    }

    /// Something that went wrong, e.g. a frame that was not JSON. `event` is a JSON object.
    pub fn error(&mut self, time_s: f64, event: &str) {
        self.line(Direction::Error, time_s, event, JSON);
    }

    /// A connection attempt and its outcome. `event` is a JSON object.
    pub fn admission(&mut self, time_s: f64, event: &str) {
        self.line(Direction::Admission, time_s, event, JSON);
    }

    /// The server's close frame (its code and reason; `None` for a frame without a code): kept
    /// for the receipts, not the trace, whose readers allow only the four directions above.
    /// The first one counts.
    pub fn close(&mut self, time_s: f64, frame: Option<(u16, &str)>) {
        if self.close.is_none() {
            self.close = Some(format::close_frame(time_s, frame));
        }
    }

    fn line(&mut self, direction: Direction, time_s: f64, payload: &str, kind: Payload) {
        if !self.lines.traced() {
            return;
        }
        self.lines.push_line(direction, time_s, payload, kind);
        self.pushed(time_s, payload.len());
    }

    /// A buffer to build the next packet's frame in: that of a packet already laid out, so a
    /// packet allocates nothing. Give it back with [`SessionTrace::append`].
    pub fn frame_buffer(&mut self) -> Outgoing {
        self.lines.frame_buffer()
    }

    /// A sent packet: trace line (of a text frame), receipt and sample. `frame`: the packet as
    /// sent (its buffer is reused for a later packet once the line is laid out); `audio`: where
    /// its audio is, as the protocol built it.
    pub fn append(&mut self, receipt: Receipt, frame: Outgoing, audio: Option<AudioSpan>) {
        let bytes = self.lines.defer_append(receipt, frame, audio);
        self.pushed(receipt.completed_s, bytes);
    }

    /// Counts a line into the queue and hands the batch over when it is due (with the `inline`
    /// writer: at once).
    fn pushed(&mut self, time_s: f64, bytes: usize) {
        let due = match &self.sink {
            Sink::Thread(_) => {
                self.depth.add(1, bytes as u64);
                self.lines.due(time_s)
            }
            Sink::Inline { .. } => true,
        };
        if due {
            self.sink.deliver(self.session, self.lines.take(), None);
        }
    }

    /// Hands over what waits now: before the session waits for the server for long (set-up,
    /// ending), so that a session that goes quiet does not keep its lines from the files.
    pub fn hand_over(&mut self) {
        if self.lines.pending() {
            self.sink.deliver(self.session, self.lines.take(), None);
        }
    }

    /// Waits until every line of the session is written; an error means some were not.
    /// `admitted`: whether the server let the session in (the receipts say so).
    pub async fn finish(mut self, admitted: bool) -> Result<(), WriteLoss> {
        self.finished = true;
        let last = self.lines.finish(admitted, self.close.as_deref());
        let (ack, done) = tokio::sync::oneshot::channel();
        self.sink.deliver(self.session, last, Some(ack));
        done.await.unwrap_or_else(|_| {
            Err(WriteLoss {
                message: "the trace writer thread stopped".to_string(),
                ..WriteLoss::default()
            })
        })
    }
}

impl Sink {
    /// A batch to the files: to the writer thread, or written at once by the `inline` writer.
    /// With `end`, the session's last batch; `end` hears whether all its lines were written.
    fn deliver(&mut self, session: u32, batch: Batch, end: Option<writer::Ack>) {
        match (self, end) {
            (Sink::Thread(handle), None) => {
                handle.send(writer::WriterMsg::Batch { session, batch })
            }
            (Sink::Thread(handle), Some(ack)) => handle.send(writer::WriterMsg::End {
                session,
                batch,
                ack,
            }),
            (Sink::Inline { files, samples }, end) => {
                files.write(&batch);
                // A session dropped while the samples are borrowed (a panic there) keeps its
                // trace and receipts at least.
                if let Ok(mut samples) = samples.try_borrow_mut() {
                    samples.push(&batch);
                    samples.flush();
                }
                if let Some(ack) = end {
                    let _ = ack.send(files.result());
                }
            }
        }
    }
}

impl Drop for SessionTrace {
    /// A session that never finished (its run was aborted, or it panicked) still hands its
    /// lines over, with its receipts closed; it was let in if it sent.
    fn drop(&mut self) {
        if !self.finished {
            let last = self
                .lines
                .finish(self.lines.sent_any(), self.close.as_deref());
            self.sink.deliver(self.session, last, None);
        }
    }
}
