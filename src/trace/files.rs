//! The files of one session (trace and receipts) and of one worker (samples), with the buffers
//! that batch their writes. The writer thread flushes them every 0.5 s; the inline writer after
//! every line, on the runtime, as the seed's original client did.

use super::format::{self, Direction, Payload};
use super::{QueueDepth, Receipt};
use crate::paths::RunPaths;
use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

pub const TRACE_FILE: &str = "trace.jsonl";
pub const RECEIPTS_FILE: &str = "input-send-receipts.json";

/// What a session's (or a worker's samples) files could not take: the first error, how many
/// lines were lost, and whether the disk (or a quota) was full.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteLoss {
    pub message: String,
    pub lines: u64,
    pub disk_full: bool,
}

impl WriteLoss {
    /// Records a failed write of `lines` lines in `slot`, and in the live counters.
    fn note(
        slot: &mut Option<WriteLoss>,
        depth: &QueueDepth,
        (what, err): (&str, &std::io::Error),
        lines: u64,
    ) {
        let loss = slot.get_or_insert_with(|| WriteLoss {
            message: format!("{what}: {err}"),
            ..WriteLoss::default()
        });
        loss.lines += lines;
        loss.disk_full |= is_disk_full(err);
        depth.lost(lines, is_disk_full(err));
    }

    /// The message with the count, e.g. "trace write failed: No space left on device (os error
    /// 28) (153 lines not written)".
    pub fn describe(&self) -> String {
        if self.lines > 0 {
            format!("{} ({} lines not written)", self.message, self.lines)
        } else {
            self.message.clone()
        }
    }
}

/// ENOSPC or EDQUOT: no room left for the run's files.
pub fn is_disk_full(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// One session's trace and receipts, with what is waiting to be written.
pub struct SessionFiles {
    trace: Option<File>,
    trace_buf: Vec<u8>,
    receipts: Option<File>,
    receipts_buf: Vec<u8>,
    receipts_count: u64,
    meta: bool,
    /// Lines and payload bytes buffered and not yet written (the queue depth's share).
    pub pending_lines: u64,
    pub pending_bytes: u64,
    pub last_flush_s: f64,
    /// The first write error and what was lost, reported when the session ends.
    loss: Option<WriteLoss>,
    depth: Arc<QueueDepth>,
}

impl SessionFiles {
    /// Creates the session folder and files. `trace` is false with `--trace off`, `meta` true
    /// with `--trace meta`.
    pub fn open(
        dir: &Path,
        (trace, meta): (bool, bool),
        now_s: f64,
        depth: Arc<QueueDepth>,
    ) -> SessionFiles {
        let mut files = SessionFiles {
            trace: None,
            trace_buf: Vec::new(),
            receipts: None,
            receipts_buf: Vec::new(),
            receipts_count: 0,
            meta,
            pending_lines: 0,
            pending_bytes: 0,
            last_flush_s: now_s,
            loss: None,
            depth,
        };
        let opened = std::fs::create_dir_all(dir).and_then(|()| {
            if trace {
                files.trace = Some(File::create(dir.join(TRACE_FILE))?);
            }
            files.receipts = Some(File::create(dir.join(RECEIPTS_FILE))?);
            Ok(())
        });
        if let Err(err) = opened {
            let what = format!("cannot create files in {}", dir.display());
            WriteLoss::note(&mut files.loss, &files.depth, (&what, &err), 0);
        }
        files
    }

    pub fn push_line(&mut self, direction: Direction, time_s: f64, payload: &str, kind: Payload) {
        if self.trace.is_some() {
            format::trace_line(
                &mut self.trace_buf,
                direction,
                time_s,
                payload,
                kind,
                self.meta,
            );
        }
        self.pending_lines += 1;
        self.pending_bytes += payload.len() as u64;
    }

    /// One sent packet: its trace line (if traced) and its receipt.
    pub fn push_append(&mut self, receipt: &Receipt, frame: Option<&str>) {
        if let (Some(frame), Some(_)) = (frame, &self.trace) {
            format::trace_line(
                &mut self.trace_buf,
                Direction::Send,
                receipt.start_s,
                frame,
                Payload::Json {
                    audio_key: Some("audio"),
                },
                self.meta,
            );
        }
        if self.receipts_count == 0 {
            format::receipts_open(&mut self.receipts_buf, receipt.gate_s);
        }
        format::receipt_entry(&mut self.receipts_buf, receipt, self.receipts_count == 0);
        self.receipts_count += 1;
        self.pending_lines += 1;
        self.pending_bytes += frame.map_or(0, |f| f.len() as u64);
    }

    /// Whether the session sent any packet.
    pub fn sent_any(&self) -> bool {
        self.receipts_count > 0
    }

    pub fn has_pending(&self) -> bool {
        self.pending_lines > 0
    }

    /// Writes what is buffered; returns the (lines, bytes) that left the queue. The trace and
    /// the receipts are written independently: a failing trace does not cost the receipts.
    pub fn flush(&mut self, now_s: f64) -> (u64, u64) {
        let done = (self.pending_lines, self.pending_bytes);
        let trace = write_all(&mut self.trace, &self.trace_buf);
        let receipts = write_all(&mut self.receipts, &self.receipts_buf);
        // A line is lost when its trace line or its receipt is; counted once either way.
        let mut lines = self.pending_lines;
        for (what, result) in [
            ("trace write failed", trace),
            ("receipts write failed", receipts),
        ] {
            if let Err(err) = result {
                let lost = std::mem::take(&mut lines);
                WriteLoss::note(&mut self.loss, &self.depth, (what, &err), lost);
            }
        }
        self.trace_buf.clear();
        self.receipts_buf.clear();
        self.pending_lines = 0;
        self.pending_bytes = 0;
        self.last_flush_s = now_s;
        done
    }

    /// Writes the rest, closes the receipts, and says whether everything reached the files.
    pub fn finish(mut self, now_s: f64, admitted: bool) -> (Result<(), WriteLoss>, (u64, u64)) {
        format::receipts_close(&mut self.receipts_buf, self.receipts_count == 0, admitted);
        let done = self.flush(now_s);
        (self.loss.take().map_or(Ok(()), Err), done)
    }
}

fn write_all(file: &mut Option<File>, buf: &[u8]) -> std::io::Result<()> {
    match file {
        Some(f) if !buf.is_empty() => f.write_all(buf),
        Some(_) => Ok(()),
        None if buf.is_empty() => Ok(()),
        None => Err(std::io::Error::other("its file could not be created")),
    }
}

/// A worker's samples file: one CSV line per packet of every session.
pub struct SamplesFile {
    file: Option<File>,
    buf: Vec<u8>,
    /// Lines in `buf`.
    pending: u64,
    worker: u32,
    pub loss: Option<WriteLoss>,
    depth: Arc<QueueDepth>,
}

impl SamplesFile {
    pub fn create(paths: &RunPaths, worker: u32, depth: Arc<QueueDepth>) -> SamplesFile {
        let dir = paths.samples_dir();
        let path = paths.samples(worker);
        let mut samples = SamplesFile {
            file: None,
            buf: format::SAMPLES_HEADER.as_bytes().to_vec(),
            pending: 0,
            worker,
            loss: None,
            depth,
        };
        match std::fs::create_dir_all(&dir).and_then(|()| File::create(&path)) {
            Ok(f) => samples.file = Some(f),
            Err(err) => {
                let what = format!("cannot create {}", path.display());
                WriteLoss::note(&mut samples.loss, &samples.depth, (&what, &err), 0);
            }
        }
        samples
    }

    pub fn push(&mut self, session: u32, receipt: &Receipt) {
        format::sample_line(&mut self.buf, self.worker, session, receipt);
        self.pending += 1;
    }

    pub fn flush(&mut self) {
        if let Err(err) = write_all(&mut self.file, &self.buf) {
            let what = ("samples write failed", &err);
            WriteLoss::note(&mut self.loss, &self.depth, what, self.pending);
        }
        self.buf.clear();
        self.pending = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Receipt;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("duplexbench-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn receipt(seq: u32) -> Receipt {
        Receipt {
            event_id: u64::from(seq),
            seq,
            gate_s: 1.0,
            scheduled_s: 1.0 + f64::from(seq) * 0.08,
            due_s: 1.0 + f64::from(seq) * 0.08,
            start_s: 1.0 + f64::from(seq) * 0.08,
            completed_s: 1.0001 + f64::from(seq) * 0.08,
        }
    }

    #[test]
    fn lines_wait_in_the_buffer_until_flushed() {
        let dir = temp_dir("batch");
        let mut files = SessionFiles::open(&dir, (true, false), 0.0, Arc::default());
        files.push_append(&receipt(0), Some(r#"{"type":"input_audio_buffer.append"}"#));
        files.push_line(
            Direction::Receive,
            1.1,
            r#"{"type":"x"}"#,
            Payload::Json { audio_key: None },
        );
        assert_eq!(std::fs::metadata(dir.join(TRACE_FILE)).unwrap().len(), 0);
        assert_eq!(files.flush(1.5).0, 2);
        let (result, _) = files.finish(2.0, true);
        assert!(result.is_ok());
        let trace = std::fs::read_to_string(dir.join(TRACE_FILE)).unwrap();
        assert_eq!(trace.lines().count(), 2);
        let receipts: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(RECEIPTS_FILE)).unwrap())
                .unwrap();
        assert_eq!(receipts["appends"][0]["seq"], 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_full_disk_fails_the_session_at_its_end_and_says_how_much_was_lost() {
        let dir = temp_dir("full");
        let mut files = SessionFiles::open(&dir, (true, false), 0.0, Arc::default());
        // /dev/full answers every write with ENOSPC, as a full disk does.
        files.trace = Some(File::options().write(true).open("/dev/full").unwrap());
        files.push_append(&receipt(0), Some("{}"));
        files.push_append(&receipt(1), Some("{}"));
        let (lines, _) = files.flush(0.5);
        assert_eq!(lines, 2, "the lines leave the queue either way");
        let (result, _) = files.finish(1.0, true);
        let loss = result.unwrap_err();
        assert!(loss.disk_full, "{loss:?}");
        assert_eq!(loss.lines, 2);
        let err = loss.describe();
        assert!(err.contains("No space left on device"), "{err}");
        assert!(err.contains("2 lines not written"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_full_disk_under_the_samples_counts_their_lines_live_and_at_the_end() {
        let dir = temp_dir("samples-full");
        let depth = Arc::new(QueueDepth::default());
        let mut samples = SamplesFile::create(&RunPaths::new(&dir), 0, depth.clone());
        samples.file = Some(File::options().write(true).open("/dev/full").unwrap());
        for seq in 0..3 {
            samples.push(0, &receipt(seq));
        }
        samples.flush();
        samples.push(0, &receipt(3));
        samples.flush();
        let loss = samples.loss.take().unwrap();
        assert_eq!((loss.lines, loss.disk_full), (4, true), "{loss:?}");
        assert_eq!(depth.losses(), (4, true), "the live counters agree");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
