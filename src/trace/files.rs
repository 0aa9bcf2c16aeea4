//! The files of one session (trace and receipts) and of one worker (samples), with the buffers
//! that batch their writes. The writer thread flushes them every 0.5 s; the inline writer after
//! every line, on the runtime, as the seed's original client did.

use super::format::{self, Direction, Payload};
use super::Receipt;
use crate::paths::RunPaths;
use std::fs::File;
use std::io::Write as _;
use std::path::Path;

pub const TRACE_FILE: &str = "trace.jsonl";
pub const RECEIPTS_FILE: &str = "input-send-receipts.json";

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
    /// The first write error, reported when the session ends.
    error: Option<String>,
    lost_lines: u64,
}

impl SessionFiles {
    /// Creates the session folder and files. `trace` is false with `--trace off`.
    pub fn open(dir: &Path, trace: bool, meta: bool, now_s: f64) -> SessionFiles {
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
            error: None,
            lost_lines: 0,
        };
        let opened = std::fs::create_dir_all(dir).and_then(|()| {
            if trace {
                files.trace = Some(File::create(dir.join(TRACE_FILE))?);
            }
            files.receipts = Some(File::create(dir.join(RECEIPTS_FILE))?);
            Ok(())
        });
        if let Err(err) = opened {
            files.error = Some(format!("cannot create files in {}: {err}", dir.display()));
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
        if let Err(err) = write_all(&mut self.trace, &self.trace_buf) {
            self.lost_lines += self.pending_lines;
            self.error
                .get_or_insert(format!("trace write failed: {err}"));
        }
        if let Err(err) = write_all(&mut self.receipts, &self.receipts_buf) {
            self.error
                .get_or_insert(format!("receipts write failed: {err}"));
        }
        self.trace_buf.clear();
        self.receipts_buf.clear();
        self.pending_lines = 0;
        self.pending_bytes = 0;
        self.last_flush_s = now_s;
        done
    }

    /// Writes the rest, closes the receipts, and says whether everything reached the files.
    pub fn finish(mut self, now_s: f64, admitted: bool) -> (Result<(), String>, (u64, u64)) {
        format::receipts_close(&mut self.receipts_buf, self.receipts_count == 0, admitted);
        let done = self.flush(now_s);
        let result = match self.error.take() {
            None => Ok(()),
            Some(err) if self.lost_lines > 0 => {
                Err(format!("{err} ({} lines not written)", self.lost_lines))
            }
            Some(err) => Err(err),
        };
        (result, done)
    }
}

fn write_all(file: &mut Option<File>, buf: &[u8]) -> std::io::Result<()> {
    match file {
        Some(f) if !buf.is_empty() => f.write_all(buf),
        Some(_) => Ok(()),
        None if buf.is_empty() => Ok(()),
        None => Err(std::io::Error::other("file could not be created")),
    }
}

/// A worker's samples file: one CSV line per packet of every session.
pub struct SamplesFile {
    file: Option<File>,
    buf: Vec<u8>,
    worker: u32,
    pub error: Option<String>,
}

impl SamplesFile {
    pub fn create(paths: &RunPaths, worker: u32) -> SamplesFile {
        let dir = paths.samples_dir();
        let path = paths.samples(worker);
        let mut samples = SamplesFile {
            file: None,
            buf: format::SAMPLES_HEADER.as_bytes().to_vec(),
            worker,
            error: None,
        };
        match std::fs::create_dir_all(&dir).and_then(|()| File::create(&path)) {
            Ok(f) => samples.file = Some(f),
            Err(err) => samples.error = Some(format!("cannot create {}: {err}", path.display())),
        }
        samples
    }

    pub fn push(&mut self, session: u32, receipt: &Receipt) {
        format::sample_line(&mut self.buf, self.worker, session, receipt);
    }

    pub fn flush(&mut self) {
        if let Err(err) = write_all(&mut self.file, &self.buf) {
            self.error
                .get_or_insert(format!("samples write failed: {err}"));
        }
        self.buf.clear();
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
        let mut files = SessionFiles::open(&dir, true, false, 0.0);
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
        let mut files = SessionFiles::open(&dir, true, false, 0.0);
        // /dev/full answers every write with ENOSPC, as a full disk does.
        files.trace = Some(File::options().write(true).open("/dev/full").unwrap());
        files.push_append(&receipt(0), Some("{}"));
        files.push_append(&receipt(1), Some("{}"));
        let (lines, _) = files.flush(0.5);
        assert_eq!(lines, 2, "the lines leave the queue either way");
        let (result, _) = files.finish(1.0, true);
        let err = result.unwrap_err();
        assert!(err.contains("No space left on device"), "{err}");
        assert!(err.contains("2 lines not written"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
