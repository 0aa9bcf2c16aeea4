//! A session's lines as its task formats them, on the runtime, while the frame is still in the
//! cache: trace lines, receipt entries and sample lines, handed to the writer in batches.
//!
//! The writer used to get every frame (a slice of the session's read buffer) in a message of
//! its own and format the line itself half a second later: six channel messages a packet, and
//! every reply kept the session's read buffer from being reused until the writer dropped it, so
//! each read went into fresh memory (issue 17). Here a frame is copied into its line once, at
//! once, and the buffer it came in is free again.

use super::format::{self, Direction, Payload};
use super::Receipt;
use crate::frame::{AudioSpan, FramePool, Outgoing};

/// How long a session's lines may wait before they are handed to the writer.
pub const BATCH_S: f64 = 0.5;
/// How many bytes of lines a session may hold before it hands them over sooner: with full
/// traces half a second of a session's frames was about 60 kB at 1 x 256 (the peak RSS went from
/// 43 to 60 MiB when sessions began to hold their lines); meta lines never reach it.
pub const BATCH_BYTES: usize = 32 << 10;

/// What a session's files get in one write each: bytes already laid out, and how many lines
/// (trace lines and appends; an append's receipt and sample count with it) they hold.
#[derive(Debug, Default)]
pub struct Batch {
    pub trace: Vec<u8>,
    pub receipts: Vec<u8>,
    pub samples: Vec<u8>,
    /// Trace lines and appends.
    pub lines: u64,
    /// The payload bytes of those lines (the writer queue's byte count).
    pub bytes: u64,
    /// Sample lines in `samples`.
    pub sample_lines: u64,
    /// In a session's last batch, where the end of the receipts file starts in `receipts`:
    /// written on its own when the whole batch could not be, so the file stays JSON.
    pub receipts_end_at: Option<usize>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.lines == 0 && self.receipts.is_empty()
    }
}

/// The lines of one session not yet handed over.
pub struct SessionLines {
    worker: u32,
    session: u32,
    /// `--trace full` or `meta` (not `off`).
    traced: bool,
    meta: bool,
    batch: Batch,
    receipts_count: u64,
    /// When the oldest line in the batch was pushed.
    oldest_s: Option<f64>,
    /// The last packet sent, counted but its receipt and sample not laid out yet
    /// ([`SessionLines::defer_append`]); its frame too when its line is not (full traces).
    deferred: Option<(Receipt, Option<Outgoing>)>,
    /// The worker's buffers of packets laid out already, for the next packet to be built in.
    frames: FramePool,
}

impl SessionLines {
    pub fn new(
        worker: u32,
        session: u32,
        (traced, meta): (bool, bool),
        frames: FramePool,
    ) -> SessionLines {
        SessionLines {
            worker,
            session,
            traced,
            meta,
            batch: Batch::default(),
            receipts_count: 0,
            oldest_s: None,
            deferred: None,
            frames,
        }
    }

    pub fn traced(&self) -> bool {
        self.traced
    }

    /// One event of the trace; nothing with `--trace off`.
    pub fn push_line(&mut self, direction: Direction, time_s: f64, payload: &str, kind: Payload) {
        if !self.traced {
            return;
        }
        self.settle();
        format::trace_line(
            &mut self.batch.trace,
            direction,
            time_s,
            payload,
            kind,
            self.meta,
        );
        self.counted(time_s, payload.len());
    }

    /// A buffer for the next packet's frame: that of the packet the worker laid out last (empty
    /// when every frame is still waiting to be laid out).
    pub fn frame_buffer(&mut self) -> Outgoing {
        self.frames.take()
    }

    /// One sent packet: its trace line (of a text frame, when traced), receipt and sample,
    /// counted now. Its receipt and sample are laid out later: with the next line, or when the
    /// batch is taken. A session sends its packet and goes on; at one start gate every session
    /// sends before any reads, and laying out each append between two sends made the burst,
    /// and so its deviations, longer (1 x 256: p99 2.0-2.6 ms became 2.8-4.1 ms).
    /// A meta trace line is laid out now, while the frame is still in the cache: given where
    /// the protocol put the audio (`audio`), it copies the hundred bytes around it and reads
    /// nothing else, and the buffer goes back to the pool at once, for the next packet of any
    /// session to be built in warm (the frames of 1,024 sessions waiting at one gate were 5 MB;
    /// peak RSS 72 -> 60 MiB). A full line holds the whole frame, kept until then, not copied.
    /// Returns the frame's bytes as counted (0 without traces, and for binary frames).
    pub fn defer_append(
        &mut self,
        receipt: Receipt,
        frame: Outgoing,
        audio: Option<AudioSpan>,
    ) -> usize {
        self.settle();
        let bytes = self.traced_text(&frame).map_or(0, str::len);
        self.counted(receipt.completed_s, bytes);
        let frame = match self.traced_text(&frame) {
            // A full line copies the whole frame, audio and all: where the audio is, is moot.
            Some(_) if !self.meta => Some(frame),
            text => {
                if let Some(text) = text {
                    format::append_line(&mut self.batch.trace, receipt.start_s, text, audio, true);
                }
                self.frames.give_back(frame);
                None
            }
        };
        self.deferred = Some((receipt, frame));
        bytes
    }

    /// The text a sent frame's trace line holds: binary frames have no line.
    fn traced_text<'f>(&self, frame: &'f Outgoing) -> Option<&'f str> {
        frame.text().filter(|_| self.traced)
    }

    /// Lays out the deferred append, if there is one, and gives its frame's buffer back (full
    /// traces).
    fn settle(&mut self) {
        if let Some((receipt, frame)) = self.deferred.take() {
            if let Some(frame) = frame {
                if let Some(text) = self.traced_text(&frame) {
                    format::append_line(&mut self.batch.trace, receipt.start_s, text, None, false);
                }
                self.frames.give_back(frame);
            }
            self.lay_out_append(&receipt);
        }
    }

    fn lay_out_append(&mut self, receipt: &Receipt) {
        if self.receipts_count == 0 {
            format::receipts_open(&mut self.batch.receipts, receipt.gate_s);
        }
        format::receipt_entry(&mut self.batch.receipts, receipt, self.receipts_count == 0);
        self.receipts_count += 1;
        format::sample_line(&mut self.batch.samples, self.worker, self.session, receipt);
        self.batch.sample_lines += 1;
    }

    fn counted(&mut self, time_s: f64, payload_bytes: usize) {
        self.batch.lines += 1;
        self.batch.bytes += payload_bytes as u64;
        self.oldest_s.get_or_insert(time_s);
    }

    /// Whether the oldest line waiting has waited [`BATCH_S`] by `now_s`, or the lines waiting
    /// hold [`BATCH_BYTES`].
    pub fn due(&self, now_s: f64) -> bool {
        self.oldest_s
            .is_some_and(|oldest| now_s - oldest >= BATCH_S)
            || self.held_bytes() >= BATCH_BYTES
    }

    /// The bytes of the lines waiting, the deferred append's frame included when its line will
    /// hold it whole (full traces).
    fn held_bytes(&self) -> usize {
        let b = &self.batch;
        let deferred = match &self.deferred {
            Some((_, Some(frame))) => self.traced_text(frame).map_or(0, str::len),
            _ => 0,
        };
        b.trace.len() + b.receipts.len() + b.samples.len() + deferred
    }

    /// Whether anything waits.
    pub fn pending(&self) -> bool {
        !self.batch.is_empty()
    }

    /// Whether the session sent any packet.
    pub fn sent_any(&self) -> bool {
        self.receipts_count > 0 || self.deferred.is_some()
    }

    /// Everything waiting, for the writer; the next batch starts with room for a little more
    /// than this one held (batches of 6 and 7 packets alternate at 80 ms), so its buffers are
    /// not grown and copied as it fills; never more than [`BATCH_BYTES`] and a quarter (a
    /// batch that held one very large frame does not make every next one as large).
    pub fn take(&mut self) -> Batch {
        self.settle();
        self.oldest_s = None;
        let room = |v: &Vec<u8>| (v.len() + v.len() / 4).min(BATCH_BYTES + BATCH_BYTES / 4);
        let next = Batch {
            trace: Vec::with_capacity(room(&self.batch.trace)),
            receipts: Vec::with_capacity(room(&self.batch.receipts)),
            samples: Vec::with_capacity(room(&self.batch.samples)),
            ..Batch::default()
        };
        std::mem::replace(&mut self.batch, next)
    }

    /// The last batch: what waits, and the end of the receipts file. `admitted`: whether the
    /// server let the session in, `close` its close frame ([`format::close_frame`]), if one
    /// came (the receipts say both).
    pub fn finish(&mut self, admitted: bool, close: Option<&str>) -> Batch {
        self.settle();
        let mut last = std::mem::take(&mut self.batch);
        self.oldest_s = None;
        last.receipts_end_at = (self.receipts_count > 0).then_some(last.receipts.len());
        format::receipts_close(
            &mut last.receipts,
            self.receipts_count == 0,
            admitted,
            close,
        );
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(seq: u32) -> Receipt {
        let t = 1.0 + f64::from(seq) * 0.08;
        Receipt {
            event_id: u64::from(seq),
            seq,
            gate_s: 1.0,
            scheduled_s: t,
            due_s: t,
            start_s: t,
            completed_s: t + 0.0001,
        }
    }

    /// Each trace line's event, as written.
    fn events(trace: &str) -> Vec<&str> {
        trace
            .lines()
            .map(|l| &l[l.find(r#""event":"#).unwrap()..])
            .collect()
    }

    #[test]
    fn an_append_makes_a_trace_line_a_receipt_and_a_sample_counted_as_one_line() {
        let mut lines = SessionLines::new(2, 7, (true, true), FramePool::default());
        let frame = r#"{"type":"input_audio_buffer.append","event_id":"0","audio":"QUFB","sglang":{"seq":0}}"#;
        lines.defer_append(receipt(0), Outgoing::Text(frame.to_string()), None);
        lines.push_line(
            Direction::Receive,
            1.01,
            r#"{"type":"x"}"#,
            Payload::Json { audio_key: None },
        );
        let batch = lines.take();
        assert_eq!((batch.lines, batch.sample_lines), (2, 1));
        assert_eq!(batch.bytes, (frame.len() + 12) as u64);
        let trace = String::from_utf8(batch.trace).unwrap();
        assert_eq!(trace.lines().count(), 2);
        assert!(
            trace.contains(r#""audio":null,"audio_b64_chars":4"#),
            "{trace}"
        );
        let samples = String::from_utf8(batch.samples).unwrap();
        assert!(samples.starts_with("2,7,0,1.000000,"), "{samples}");
        assert!(String::from_utf8(batch.receipts)
            .unwrap()
            .contains(r#""seq":0"#));
        assert!(!lines.pending(), "taken means nothing waits");
    }

    #[test]
    fn a_deferred_append_is_laid_out_before_the_next_line_in_the_order_they_came() {
        let mut lines = SessionLines::new(0, 0, (true, false), FramePool::default());
        lines.defer_append(receipt(0), Outgoing::Text(r#"{"n":0}"#.to_string()), None);
        assert!(lines.pending() && lines.sent_any(), "counted at once");
        lines.push_line(
            Direction::Receive,
            1.01,
            r#"{"r":0}"#,
            Payload::Json { audio_key: None },
        );
        lines.defer_append(receipt(1), Outgoing::Text(r#"{"n":1}"#.to_string()), None);
        let batch = lines.take();
        assert_eq!((batch.lines, batch.sample_lines), (3, 2));
        let trace = String::from_utf8(batch.trace).unwrap();
        let events = events(&trace);
        assert_eq!(
            events,
            [
                r#""event":{"n":0}}"#,
                r#""event":{"r":0}}"#,
                r#""event":{"n":1}}"#
            ]
        );
        lines.defer_append(receipt(2), Outgoing::Binary(vec![0; 4]), None);
        let last = String::from_utf8(lines.finish(true, None).receipts).unwrap();
        assert!(
            last.starts_with(r#",{"event_id":"0000000000000002","seq":2,"#),
            "the last one is in the last batch: {last}"
        );
    }

    #[test]
    fn a_frame_buffer_is_reused_only_once_its_packet_is_laid_out() {
        let mut lines = SessionLines::new(0, 0, (true, false), FramePool::default());
        // Packet 0, built into the first buffer.
        let mut frame = lines.frame_buffer();
        frame.text_buffer().push_str(r#"{"n":0}"#);
        lines.defer_append(receipt(0), frame, None);
        // Packet 1 is built before packet 0 is laid out: into another buffer, so packet 0's
        // line still says packet 0.
        let mut frame = lines.frame_buffer();
        assert_eq!(frame, Outgoing::default(), "not packet 0's buffer");
        frame.text_buffer().push_str(r#"{"n":1}"#);
        lines.defer_append(receipt(1), frame, None);
        lines.push_line(
            Direction::Receive,
            1.1,
            r#"{"r":1}"#,
            Payload::Json { audio_key: None },
        );
        // Both are laid out now; the next packet gets the buffer of one of them, capacity kept.
        let mut frame = lines.frame_buffer();
        assert!(frame.text_buffer().capacity() >= 7);
        frame.text_buffer().push_str(r#"{"n":2}"#);
        lines.defer_append(receipt(2), frame, None);
        let trace = String::from_utf8(lines.take().trace).unwrap();
        let events = events(&trace);
        assert_eq!(
            events,
            [
                r#""event":{"n":0}}"#,
                r#""event":{"n":1}}"#,
                r#""event":{"r":1}}"#,
                r#""event":{"n":2}}"#
            ]
        );
        // After a packet laid out in time, the next one reuses its very buffer.
        let mut frame = lines.frame_buffer();
        let reused = frame.text().map(str::as_ptr);
        frame.text_buffer().push_str(r#"{"n":3}"#);
        lines.defer_append(receipt(3), frame, None);
        lines.take();
        assert_eq!(lines.frame_buffer().text().map(str::as_ptr), reused);
    }

    #[test]
    fn a_buffer_laid_out_by_one_session_is_the_next_packet_of_another() {
        let pool = FramePool::default();
        // Full traces: a line holds the frame whole, so the buffer waits for its line.
        let mut a = SessionLines::new(0, 0, (true, false), pool.clone());
        let mut b = SessionLines::new(0, 1, (true, false), pool.clone());
        let mut frame = a.frame_buffer();
        frame.text_buffer().push_str(r#"{"a":0}"#);
        let sent = frame.text().map(str::as_ptr);
        a.defer_append(receipt(0), frame, None);
        assert!(pool.is_empty(), "held until its line is laid out");
        let trace = String::from_utf8(a.take().trace).unwrap();
        assert_eq!(events(&trace), [r#""event":{"a":0}}"#]);
        assert_eq!(pool.len(), 1);
        let mut frame = b.frame_buffer();
        assert_eq!(
            frame.text().map(str::as_ptr),
            sent,
            "a's buffer, still warm"
        );
        frame.text_buffer().push_str(r#"{"b":0}"#);
        b.defer_append(receipt(0), frame, None);
        let trace = String::from_utf8(b.take().trace).unwrap();
        assert_eq!(events(&trace), [r#""event":{"b":0}}"#]);
    }

    #[test]
    fn a_meta_append_is_laid_out_as_it_is_sent_and_its_buffer_is_the_next_packets() {
        let pool = FramePool::default();
        let mut lines = SessionLines::new(0, 0, (true, true), pool.clone());
        let mut frame = lines.frame_buffer();
        let at = crate::protocol::vllm::push_append_frame(frame.text_buffer(), "QUJD");
        let sent = frame.text().map(str::as_ptr);
        lines.defer_append(receipt(0), frame, Some(at));
        assert_eq!(
            pool.len(),
            1,
            "given back at once, before the session's next line"
        );
        // The next packet (of this session or any other) overwrites that very buffer.
        let mut next = pool.take();
        assert_eq!(next.text().map(str::as_ptr), sent);
        next.text_buffer().push_str("overwritten");
        let batch = lines.take();
        assert_eq!(
            events(&String::from_utf8(batch.trace).unwrap()),
            [concat!(
                r#""event":{"type":"input_audio_buffer.append","audio":null,"#,
                r#""audio_b64_chars":4,"audio_bytes":3}}"#
            )],
        );
        let receipts = String::from_utf8(batch.receipts).unwrap();
        assert!(receipts.contains(r#""seq":0"#), "{receipts}");
        assert_eq!(batch.sample_lines, 1);
    }

    #[test]
    fn full_lines_are_due_sooner_once_they_hold_batch_bytes_and_meta_lines_are_not() {
        let audio = "A".repeat(4 << 10);
        let frame = format!(r#"{{"type":"input_audio_buffer.append","audio":"{audio}"}}"#);
        for meta in [false, true] {
            let mut lines = SessionLines::new(0, 0, (true, meta), FramePool::default());
            let mut sent = 0;
            // Ten packets within 0.45 s: never due by time.
            for seq in 0..10 {
                let mut r = receipt(seq);
                r.completed_s = 1.0 + f64::from(seq) * 0.045;
                lines.defer_append(r, Outgoing::Text(frame.clone()), None);
                sent += 1;
                if lines.due(r.completed_s) {
                    break;
                }
            }
            if meta {
                assert_eq!(
                    sent, 10,
                    "meta lines of ten packets are far below BATCH_BYTES"
                );
                continue;
            }
            assert!(sent < 10, "full lines of ten 4 kB packets pass BATCH_BYTES");
            let batch = lines.take();
            let held = batch.trace.len() + batch.receipts.len() + batch.samples.len();
            assert!(held >= BATCH_BYTES, "due at {held} bytes");
            assert!(
                held - held / sent < BATCH_BYTES,
                "one packet earlier it was not"
            );
            assert!(!lines.due(1.44), "a taken batch holds nothing");
        }
    }

    #[test]
    fn lines_are_due_half_a_second_after_the_oldest_was_pushed() {
        let mut lines = SessionLines::new(0, 0, (true, false), FramePool::default());
        assert!(!lines.due(100.0), "nothing waits");
        lines.push_line(
            Direction::Send,
            10.0,
            "{}",
            Payload::Json { audio_key: None },
        );
        lines.push_line(
            Direction::Send,
            10.4,
            "{}",
            Payload::Json { audio_key: None },
        );
        assert!(!lines.due(10.49));
        assert!(lines.due(10.5));
        lines.take();
        assert!(!lines.due(11.0), "a taken batch starts the wait again");
    }

    #[test]
    fn without_traces_only_receipts_and_samples_are_kept() {
        let mut lines = SessionLines::new(0, 0, (false, false), FramePool::default());
        lines.push_line(
            Direction::Receive,
            1.0,
            "{}",
            Payload::Json { audio_key: None },
        );
        assert!(!lines.pending());
        lines.defer_append(receipt(0), Outgoing::Text("{}".to_string()), None);
        let last = lines.finish(true, None);
        assert!(last.trace.is_empty());
        assert_eq!((last.lines, last.bytes), (1, 0));
        let receipts: serde_json::Value = serde_json::from_slice(&last.receipts).unwrap();
        assert_eq!(receipts["appends"][0]["seq"], 0);
        assert_eq!(receipts["admitted"], true);
    }

    #[test]
    fn a_session_that_sent_nothing_closes_its_receipts_empty() {
        let mut lines = SessionLines::new(0, 0, (true, false), FramePool::default());
        assert!(!lines.sent_any());
        let last = lines.finish(false, None);
        let receipts: serde_json::Value = serde_json::from_slice(&last.receipts).unwrap();
        assert_eq!(receipts["appends"], serde_json::json!([]));
        assert_eq!(receipts["admitted"], false);
    }
}
