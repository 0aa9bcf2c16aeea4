//! The files of one session (trace and receipts) and of one worker (samples). They are written
//! with the batches the sessions hand over ([`super::lines`]): by the writer thread every 0.5 s,
//! or by the inline writer after every line, on the runtime, as the seed's original client did.

use super::format;
use super::lines::Batch;
use super::QueueDepth;
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

/// ENOSPC, EDQUOT or EFBIG (the file-size limit, `ulimit -f`): no room left for the run's
/// files.
pub fn is_disk_full(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::StorageFull
            | std::io::ErrorKind::QuotaExceeded
            | std::io::ErrorKind::FileTooLarge
    )
}

/// A file written in whole lines: a write that fails part way is cut back to where it began,
/// so the file never ends in half a line (a CSV row, a JSON line, a receipt).
struct WholeFile {
    file: File,
    /// Bytes written whole so far.
    len: u64,
}

impl WholeFile {
    fn new(file: File) -> WholeFile {
        WholeFile { file, len: 0 }
    }

    fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self.file.write_all(buf) {
            Ok(()) => {
                self.len += buf.len() as u64;
                Ok(())
            }
            Err(err) => {
                // Best effort: cutting back frees nothing new, so it works on a full disk.
                let _ = self.file.set_len(self.len);
                let _ = std::io::Seek::seek(&mut self.file, std::io::SeekFrom::Start(self.len));
                Err(err)
            }
        }
    }
}

impl WholeFile {
    /// Cuts the receipts file back, whole receipts at a time, until an end of `need` bytes fits
    /// in the room its last block has (a full disk gives no new block; a block begun is the
    /// file's; the block is the file system's allocation unit, `f_frsize`); returns how many
    /// receipts that dropped and their bytes, or `None` where no cut makes room.
    fn make_room_for_end(&mut self, need: usize) -> Option<(u64, Vec<u8>)> {
        use std::os::unix::fs::FileExt as _;
        let block = rustix::fs::fstatvfs(&self.file).ok()?.f_frsize.max(512);
        let tail_at = self.len.saturating_sub(2 * block);
        let mut tail = vec![0; (self.len - tail_at) as usize];
        self.file.read_exact_at(&mut tail, tail_at).ok()?;
        let (cut, dropped) = receipts_cut(&tail, tail_at, block, need as u64)?;
        self.file.set_len(cut).ok()?;
        std::io::Seek::seek(&mut self.file, std::io::SeekFrom::Start(cut)).ok()?;
        self.len = cut;
        Some((dropped, tail.split_off((cut - tail_at) as usize)))
    }
}

/// Where to cut a receipts file whose last bytes are `tail` (from offset `tail_at`) so that
/// `need` bytes fit in its last block of `block` bytes: the last receipt boundary (before a
/// receipt's comma, or after the `[` before the first) with that room, and how many receipts
/// are dropped to get there.
fn receipts_cut(tail: &[u8], tail_at: u64, block: u64, need: u64) -> Option<(u64, u64)> {
    let room = |at: u64| match at % block {
        0 => 0,
        used => block - used,
    };
    let mut dropped = 0;
    for at in memchr::memmem::rfind_iter(tail, br#"{"event_id""#) {
        dropped += 1;
        let cut = match at.checked_sub(1).map(|before| tail[before]) {
            Some(b',') => at - 1,
            Some(b'[') => at,
            _ => continue,
        };
        let cut = tail_at + cut as u64;
        if room(cut) >= need {
            return Some((cut, dropped));
        }
    }
    None
}

/// One session's trace and receipts files: what its batches are written to, by the writer
/// thread (or, with the `inline` writer, by the runtime after every line).
pub struct SessionFiles {
    trace: Option<WholeFile>,
    receipts: Option<WholeFile>,
    /// The receipts file's start (`{"session_start_s":…,"appends":[`) was lost: what follows
    /// would not make it JSON, so nothing more is written to it.
    receipts_headless: bool,
    /// The first write error and what was lost, reported when the session ends.
    loss: Option<WriteLoss>,
    /// Receipts at the receipts file's end whose lines were counted lost with their trace
    /// lines: cutting them for the file's end loses nothing more.
    counted_tail: CountedTail,
    depth: Arc<QueueDepth>,
}

/// How many receipts at the receipts file's end belong to lines already counted lost (their
/// trace lines were not written), so that a line is counted once when its receipt is cut too.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct CountedTail(u64);

impl CountedTail {
    /// A batch's receipts were written (`receipts` of them), after its trace lines were
    /// (`trace_written`) or were not.
    fn written(&mut self, receipts: u64, trace_written: bool) {
        self.0 = if trace_written { 0 } else { self.0 + receipts };
    }

    /// The file's last `dropped` receipts were cut: how many of their lines are newly lost.
    fn cut(&mut self, dropped: u64) -> u64 {
        let counted = self.0.min(dropped);
        self.0 -= counted;
        dropped - counted
    }
}

impl SessionFiles {
    /// Creates the session folder and files. `trace` is false with `--trace off`.
    pub fn open(dir: &Path, trace: bool, depth: Arc<QueueDepth>) -> SessionFiles {
        let mut files = SessionFiles {
            trace: None,
            receipts: None,
            receipts_headless: false,
            loss: None,
            counted_tail: CountedTail::default(),
            depth,
        };
        let opened = std::fs::create_dir_all(dir).and_then(|()| {
            if trace {
                files.trace = Some(WholeFile::new(File::create(dir.join(TRACE_FILE))?));
            }
            // Read too: a full disk may have it cut back to make room for its end.
            let receipts = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(dir.join(RECEIPTS_FILE))?;
            files.receipts = Some(WholeFile::new(receipts));
            Ok(())
        });
        if let Err(err) = opened {
            let what = format!("cannot create files in {}", dir.display());
            WriteLoss::note(&mut files.loss, &files.depth, (&what, &err), 0);
        }
        files
    }

    /// Writes a batch's trace lines and receipts. They are written independently: a failing
    /// trace does not cost the receipts; a line is lost when its trace line or its receipt is,
    /// counted once either way.
    pub fn write(&mut self, batch: &Batch) {
        let trace = write_all(&mut self.trace, &batch.trace);
        let mut dropped = 0;
        let receipts = if self.receipts_headless {
            // Lost with the file's start; counted then.
            Ok(())
        } else {
            let written = write_all(&mut self.receipts, &batch.receipts);
            match &written {
                Err(_) => {
                    let cut = self.end_receipts(batch);
                    dropped = self.counted_tail.cut(cut);
                }
                // Only a batch whose trace failed needs its receipts counted (a full disk).
                Ok(()) if trace.is_err() => self
                    .counted_tail
                    .written(count_receipts(&batch.receipts), false),
                Ok(()) => self.counted_tail.written(0, true),
            }
            written
        };
        let mut lines = batch.lines;
        for (what, result, also) in [
            ("trace write failed", trace, 0),
            ("receipts write failed", receipts, dropped),
        ] {
            if let Err(err) = result {
                let lost = std::mem::take(&mut lines) + also;
                WriteLoss::note(&mut self.loss, &self.depth, (what, &err), lost);
            }
        }
    }

    /// After a failed write of the receipts: a file that lost its start takes nothing more;
    /// one that lost its end (the session's last batch) gets that end alone, which a full disk
    /// still takes where it fits in the room of the file's last block, so the file stays JSON
    /// with the receipts that were written. Where it does not (an end with the server's close
    /// frame is some 90 bytes), the last receipts make room for it; returns how many (they are
    /// counted as lost).
    fn end_receipts(&mut self, batch: &Batch) -> u64 {
        let Some(file) = self.receipts.as_mut() else {
            return 0;
        };
        if file.len == 0 {
            self.receipts_headless = true;
            return 0;
        }
        let Some(at) = batch.receipts_end_at else {
            return 0;
        };
        let end = &batch.receipts[at..];
        match file.write(end) {
            Ok(()) => return 0,
            Err(err) if !is_disk_full(&err) => return 0,
            Err(_) => {}
        }
        let Some((dropped, receipts)) = file.make_room_for_end(end.len()) else {
            return 0;
        };
        if file.write(end).is_ok() {
            return dropped;
        }
        // Refused even so (a file system that allocates otherwise): the receipts go back.
        let _ = file.write(&receipts);
        0
    }

    /// Whether everything reached the files.
    pub fn result(&mut self) -> Result<(), WriteLoss> {
        self.loss.take().map_or(Ok(()), Err)
    }
}

/// The receipts in a batch's receipts bytes (each begins with its `event_id`).
fn count_receipts(receipts: &[u8]) -> u64 {
    memchr::memmem::find_iter(receipts, br#"{"event_id""#).count() as u64
}

fn write_all(file: &mut Option<WholeFile>, buf: &[u8]) -> std::io::Result<()> {
    match file {
        Some(f) if !buf.is_empty() => f.write(buf),
        Some(_) => Ok(()),
        None if buf.is_empty() => Ok(()),
        None => Err(std::io::Error::other("its file could not be created")),
    }
}

/// Mends the receipts files a dead worker left open (see [`mend_receipts`]); returns how many
/// were.
pub fn mend_receipts_of(output_dir: &Path, worker: u32) -> usize {
    let prefix = format!("w{worker}-s");
    let Ok(entries) = std::fs::read_dir(RunPaths::new(output_dir).sessions_dir()) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| mend_receipts(&e.path().join(RECEIPTS_FILE)).unwrap_or(false))
        .count()
}

/// Gives the receipts file of a session whose worker died (`kill -9`, the OOM killer) its end,
/// so that it is JSON again: what the worker had written stays, cut back to its last whole
/// receipt, then `],"admitted":true,"close":null}` (it sent appends, so it was admitted; no
/// close was seen). A file that is whole, empty (nothing was written) or not a receipts file
/// is left as it is. Returns whether the file was mended.
pub fn mend_receipts(path: &Path) -> std::io::Result<bool> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err),
    };
    const OPENING: &str = r#"{"session_start_s":"#;
    const APPENDS: &str = r#","appends":["#;
    if text.is_empty()
        || !text.starts_with(OPENING)
        || serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok()
    {
        return Ok(false);
    }
    let Some(list) = text.find(APPENDS).map(|at| at + APPENDS.len()) else {
        return Ok(false);
    };
    // Entries are flat objects: the last `}` ends the last whole one (if any).
    let keep = text[list..].rfind('}').map_or(list, |at| list + at + 1);
    let mut mended = text[..keep].to_string();
    mended.push_str(r#"],"admitted":true,"close":null}"#);
    mended.push('\n');
    if serde_json::from_str::<serde::de::IgnoredAny>(&mended).is_err() {
        return Ok(false);
    }
    std::fs::write(path, mended)?;
    Ok(true)
}

/// A worker's samples file: one CSV line per packet of every session.
pub struct SamplesFile {
    file: Option<WholeFile>,
    buf: Vec<u8>,
    /// Lines in `buf`.
    pending: u64,
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
            loss: None,
            depth,
        };
        match std::fs::create_dir_all(&dir).and_then(|()| File::create(&path)) {
            Ok(f) => samples.file = Some(WholeFile::new(f)),
            Err(err) => {
                let what = format!("cannot create {}", path.display());
                WriteLoss::note(&mut samples.loss, &samples.depth, (&what, &err), 0);
            }
        }
        samples
    }

    /// A batch's sample lines, written with the next flush.
    pub fn push(&mut self, batch: &Batch) {
        self.buf.extend_from_slice(&batch.samples);
        self.pending += batch.sample_lines;
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
    use crate::frame::{FramePool, Outgoing};
    use crate::trace::format::{Direction, Payload};
    use crate::trace::lines::SessionLines;
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

    fn lines() -> SessionLines {
        SessionLines::new(0, 0, (true, false), FramePool::default())
    }

    /// A worker killed mid-run leaves its receipts without their end (sglang-omni's readers
    /// cannot open them); the conductor mends them to what was written, as JSON.
    #[test]
    fn receipts_a_killed_worker_left_open_are_mended_to_their_last_whole_receipt() {
        let dir = temp_dir("mend");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(RECEIPTS_FILE);
        let mut open = Vec::new();
        format::receipts_open(&mut open, 1.0);
        for seq in 0..3 {
            format::receipt_entry(&mut open, &receipt(seq), seq == 0);
        }
        // A third receipt cut part way (a write the kill interrupted).
        open.extend_from_slice(br#",{"event_id":"00000000000000"#);
        std::fs::write(&path, &open).unwrap();
        assert!(mend_receipts(&path).unwrap());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["appends"].as_array().unwrap().len(), 3, "{v}");
        assert_eq!(
            (v["admitted"].clone(), v["close"].clone()),
            (true.into(), serde_json::Value::Null)
        );
        // Whole already, empty, or only the opening: left alone, or ended with no receipt.
        assert!(
            !mend_receipts(&path).unwrap(),
            "a whole file is left as it is"
        );
        std::fs::write(&path, b"").unwrap();
        assert!(!mend_receipts(&path).unwrap());
        let mut only_open = Vec::new();
        format::receipts_open(&mut only_open, 1.0);
        std::fs::write(&path, &only_open).unwrap();
        assert!(mend_receipts(&path).unwrap());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["appends"], serde_json::json!([]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_batch_goes_to_the_files_in_one_write_each_and_the_last_closes_the_receipts() {
        let dir = temp_dir("batch");
        let mut files = SessionFiles::open(&dir, true, Arc::default());
        let mut lines = lines();
        lines.defer_append(
            receipt(0),
            Outgoing::Text(r#"{"type":"input_audio_buffer.append"}"#.to_string()),
            None,
        );
        lines.push_line(
            Direction::Receive,
            1.1,
            r#"{"type":"x"}"#,
            Payload::Json { audio_key: None },
        );
        assert_eq!(std::fs::metadata(dir.join(TRACE_FILE)).unwrap().len(), 0);
        files.write(&lines.take());
        assert_eq!(
            std::fs::read_to_string(dir.join(TRACE_FILE))
                .unwrap()
                .lines()
                .count(),
            2
        );
        lines.defer_append(receipt(1), Outgoing::Text("{}".to_string()), None);
        files.write(&lines.finish(true, None));
        assert!(files.result().is_ok());
        let trace = std::fs::read_to_string(dir.join(TRACE_FILE)).unwrap();
        assert_eq!(trace.lines().count(), 3);
        let receipts: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(RECEIPTS_FILE)).unwrap())
                .unwrap();
        assert_eq!(receipts["appends"][1]["seq"], 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_receipts_end_that_does_not_fit_the_last_block_drops_whole_receipts_for_room() {
        let head = r#"{"session_start_s":1.5,"appends":["#;
        let one = r#"{"event_id":"0000000000000001","seq":1}"#;
        let text = format!("{head}{one},{one},{one}");
        let tail = text.as_bytes();
        let first = head.len() as u64;
        let n = one.len() as u64;
        assert_eq!((first, n), (34, 39));
        // Blocks of 64 bytes: the file (153 bytes) ends 25 bytes into its third block. The
        // places to cut: before the third receipt's comma (113: 15 bytes left in its block),
        // before the second's (73: 55 left), after the `[` (34: 30 left).
        let cut = |at: u64, need: u64| receipts_cut(&tail[at as usize..], at, 64, need);
        assert_eq!(cut(0, 10), Some((first + 2 * n + 1, 1)));
        assert_eq!(cut(0, 20), Some((first + n, 2)));
        assert_eq!(cut(0, 55), Some((first + n, 2)));
        assert_eq!(cut(0, 56), None, "no cut leaves 56 bytes");
        // A tail that starts inside the file counts from its offset, and a receipt whose
        // predecessor it cannot see is not a place to cut.
        assert_eq!(cut(first, 10), Some((first + 2 * n + 1, 1)));
        assert_eq!(cut(first, 20), Some((first + n, 2)));
        assert_eq!(cut(first, 30), Some((first + n, 2)));
        assert_eq!(cut(first + n + 1, 20), None);
        // The cut leaves JSON once the end follows.
        let (at, _) = cut(0, 20).unwrap();
        let whole = format!("{}]}}", &text[..at as usize]);
        let v: serde_json::Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(v["appends"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn receipts_cut_after_their_trace_lines_were_lost_are_not_counted_twice() {
        let mut tail = CountedTail::default();
        // Trace lost, receipts written: 3 then 2 receipts whose lines are counted already.
        tail.written(3, false);
        tail.written(2, false);
        assert_eq!(
            tail.cut(4),
            0,
            "all four were counted with their trace lines"
        );
        assert_eq!(tail.cut(2), 1, "one of these two was");
        assert_eq!(tail.cut(2), 2, "none left counted");
        // A batch whose trace was written puts uncounted receipts at the end.
        tail.written(5, false);
        tail.written(1, true);
        assert_eq!(tail, CountedTail(0));
        assert_eq!(
            tail.cut(3),
            3,
            "the last receipts' lines were written: newly lost"
        );
        let mut lines = lines();
        lines.defer_append(receipt(0), Outgoing::Text("{}".to_string()), None);
        lines.defer_append(receipt(1), Outgoing::Text("{}".to_string()), None);
        assert_eq!(count_receipts(&lines.take().receipts), 2);
    }

    #[test]
    fn a_full_disk_fails_the_session_at_its_end_and_says_how_much_was_lost() {
        let dir = temp_dir("full");
        let mut files = SessionFiles::open(&dir, true, Arc::default());
        // /dev/full answers every write with ENOSPC, as a full disk does.
        files.trace = Some(WholeFile::new(
            File::options().write(true).open("/dev/full").unwrap(),
        ));
        let mut lines = lines();
        lines.defer_append(receipt(0), Outgoing::Text("{}".to_string()), None);
        lines.defer_append(receipt(1), Outgoing::Text("{}".to_string()), None);
        files.write(&lines.take());
        files.write(&lines.finish(true, None));
        let loss = files.result().unwrap_err();
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
        samples.file = Some(WholeFile::new(
            File::options().write(true).open("/dev/full").unwrap(),
        ));
        let mut lines = lines();
        for seq in 0..3 {
            lines.defer_append(receipt(seq), Outgoing::Binary(vec![0; 4]), None);
        }
        samples.push(&lines.take());
        samples.flush();
        lines.defer_append(receipt(3), Outgoing::Binary(vec![0; 4]), None);
        samples.push(&lines.finish(true, None));
        samples.flush();
        let loss = samples.loss.take().unwrap();
        assert_eq!((loss.lines, loss.disk_full), (4, true), "{loss:?}");
        assert_eq!(depth.losses(), (4, true), "the live counters agree");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
