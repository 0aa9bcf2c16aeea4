//! One Fun-ASR mock session without I/O: client frames in, reply frames and decode requests out.
//!
//! The server's handler (`realtime_ws.py`'s `handle_client`) is serial: it takes one frame, and
//! awaits `add_audio` and then the decode it asks for before it reads the next, so while a
//! decode runs the session's frames and its `STOP` wait in the socket. The session is that
//! queue: frames are [`pushed`](Session::push) as they arrive and [`processed`](Session::process)
//! in order, and processing halts at a decode until it is [`decoded`](Session::decoded).
//!
//! Segments (the server's default `--endpoint-mode server`): the audio processed goes through
//! the server's VAD ([`super::segments`]); a segment it closes is decoded whole right there, in
//! `add_audio` (up to 512 tokens, as STOP's final), and its text joins the `sentences` every
//! later result carries.
//!
//! Partials (`should_decode`): after an audio frame is processed, a partial is looked at when
//! both hold — at least `--decode-interval` seconds of wall time since the last one was, and
//! enough audio *processed* since the last decoded partial: 480 ms until the first text came
//! back, then the server's 960 ms chunk. So `duration_ms` (the audio processed) steps by what
//! the frames carry, and a slow engine leaves partials to fire on the queued frames later, even
//! on frames sent before `STOP`. A partial decodes the open segment, at most the newest
//! `--partial-window-sec` of it (≤ 0: all of it); with no segment open (silence) the result
//! goes out at once with an empty partial and nothing decoded, and with under 480 ms of the
//! segment, likewise with the last partial's text. `STOP`, once reached, decodes the open
//! segment (costlier when longer; nothing when none is open), sends the final with every
//! sentence, then `stopped` (no final without audio). Commands the server does not know get no
//! answer. The session may `START` again.

use super::segments::{Change, Segmenter};
use crate::cli::FunasrMockArgs;
use crate::protocol::funasr::names;
use crate::trace::format::json_string;
use bytes::Bytes;
use std::collections::VecDeque;
use std::fmt::Write as _;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// New audio before the first partial decode (the server's `first_chunk_samples`).
pub const FIRST_DECODE_MS: f64 = 480.0;
/// New audio between partial decodes once text has come back (the server's `chunk_ms`, 960 by
/// default and not a flag of its).
pub const DECODE_CHUNK_MS: f64 = 960.0;
/// A partial decodes at least this much of the segment (`chunk_samples // 2`).
const LEAST_PARTIAL_MS: f64 = DECODE_CHUNK_MS / 2.0;
/// A completed segment shorter than this is not decoded (`_decode_segment`'s 1600 samples).
const LEAST_SEGMENT_MS: u64 = 100;
/// 16 kHz PCM16: bytes per ms.
const BYTES_PER_MS: f64 = 32.0;
/// The stand-in text's words, one a second of audio, over and over: distinct words, so the
/// server's repeat filter (`detect_and_fix_hallucination`, which cuts a word said three times
/// running down to one) would keep them all.
pub(super) const WORDS: [&str; 26] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
];

/// A decode the session asks the engine for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decode {
    /// Audio the decode covers, in seconds (what it costs).
    pub audio_s: f64,
    /// A decode of up to 512 tokens — a completed segment, or STOP's final — not a partial's
    /// 200: the real engine batches the two kinds apart.
    pub is_final: bool,
    /// The session's decode settings (its `HOTWORDS:` and `LANGUAGE:`), as a key: the real
    /// engine batches only decodes of equal settings into one call.
    pub settings: u64,
}

/// A client frame waiting its turn.
#[derive(Debug)]
pub enum Frame {
    /// A text frame (a command).
    Text(Utf8Bytes),
    /// A binary frame: PCM16.
    Audio(Bytes),
}

/// What a decode in flight is for, so its result lands in the right place.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Owed {
    /// A partial covering the audio from this ms.
    Partial { start_ms: u64 },
    /// A segment that closed: its text becomes a sentence.
    Segment { start_ms: u64, end_ms: u64 },
    /// STOP's final, decoding the segment still open, if any.
    Final { open: Option<(u64, u64)> },
}

/// Work an audio frame left for after its segment decodes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Todo {
    Segment {
        start_ms: u64,
        end_ms: u64,
    },
    /// The partial cadence, looked at once the frame's `add_audio` is done.
    Partial,
}

#[derive(Debug)]
pub struct Session {
    interval_s: f64,
    window_ms: f64,
    never_stopped: bool,
    /// Between `START` and `STOP` (the server's `is_active`).
    started: bool,
    /// Audio processed since `START` (the server's `total_samples`), in bytes.
    processed_bytes: u64,
    /// Audio processed when the last partial was decoded, in ms (`last_decode_samples`).
    decoded_ms: f64,
    /// A partial came back with text (the mock's always has some); the chunk is 960 ms now.
    first_decode_done: bool,
    /// When the last partial was looked at (monotonic seconds; `last_decode_time`). Kept
    /// across `START`, as the server keeps it for the connection.
    last_decode_s: Option<f64>,
    /// The server's VAD over the audio processed since `START`.
    segments: Segmenter,
    changes: Vec<Change>,
    /// The completed segments' sentences, as the JSON objects of `sentences`, comma-joined.
    sentences: String,
    /// The last partial's text (by the audio it covered, in s) and start; `None` when there
    /// is none, or a segment closed since.
    partial: Option<(f64, u64)>,
    /// Frames taken from the client but not processed yet, oldest first.
    queue: VecDeque<Frame>,
    /// What the frame being processed still owes, in order.
    todo: VecDeque<Todo>,
    /// The decode in flight: nothing more is processed until it is done.
    pending: Option<(Decode, Owed)>,
    /// `stopped` events sent since [`take_stops`](Session::take_stops) was last called.
    stops_sent: u64,
    /// The hotwords and language set (the real server's `asr_kwargs`, which its decodes pass).
    hotwords: String,
    language: String,
    /// An audio frame of an odd number of bytes came while active: the server's
    /// `np.frombuffer(…, dtype=np.int16)` raises, its handler ends, and the connection closes.
    failed: bool,
}

impl Session {
    pub fn new(model: &FunasrMockArgs) -> Session {
        Session {
            interval_s: model.decode_interval,
            window_ms: model.partial_window_sec * 1000.0,
            never_stopped: model.fault_never_stopped,
            started: false,
            processed_bytes: 0,
            decoded_ms: 0.0,
            first_decode_done: false,
            last_decode_s: None,
            segments: Segmenter::new(),
            changes: Vec::new(),
            sentences: String::new(),
            partial: None,
            queue: VecDeque::new(),
            todo: VecDeque::new(),
            pending: None,
            stops_sent: 0,
            hotwords: String::new(),
            language: String::new(),
            failed: false,
        }
    }

    /// The session ended as the server's handler does on an error: close the connection.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The `stopped` events sent since the last call (sessions the client may now close).
    pub fn take_stops(&mut self) -> u64 {
        std::mem::take(&mut self.stops_sent)
    }

    fn processed_ms(&self) -> f64 {
        self.processed_bytes as f64 / BYTES_PER_MS
    }

    /// A frame from the client, queued behind those not processed yet.
    pub fn push(&mut self, frame: Frame) {
        self.queue.push_back(frame);
    }

    /// Processes the queued frames in order at `now_s` (monotonic seconds), replies into
    /// `out`, until one asks for a decode — returned, and nothing more is processed until it
    /// is [`decoded`](Session::decoded) — or none is left. Nothing while a decode is in flight.
    pub fn process(&mut self, now_s: f64, out: &mut Vec<Utf8Bytes>) -> Option<Decode> {
        if self.pending.is_some() || self.failed {
            return None;
        }
        loop {
            let asked = if let Some(todo) = self.todo.pop_front() {
                match todo {
                    Todo::Segment { start_ms, end_ms } => self.on_segment(start_ms, end_ms),
                    Todo::Partial => self.on_partial(now_s, out),
                }
            } else if let Some(frame) = self.queue.pop_front() {
                match frame {
                    Frame::Text(text) => self.on_text(text.as_str(), out),
                    Frame::Audio(pcm) if self.started && pcm.len() % 2 == 1 => {
                        self.failed = true;
                        self.queue.clear();
                        return None;
                    }
                    Frame::Audio(pcm) => {
                        self.on_audio(&pcm);
                        None
                    }
                }
            } else {
                return None;
            };
            if let Some((decode, owed)) = asked {
                self.pending = Some((decode, owed));
                return Some(decode);
            }
        }
    }

    /// A text command, compared after trimming and upper-casing as the server does; one it
    /// does not know is not answered. `STOP` with audio asks for the final decode.
    fn on_text(&mut self, text: &str, out: &mut Vec<Utf8Bytes>) -> Option<(Decode, Owed)> {
        let trimmed = text.trim();
        let upper = trimmed.to_uppercase();
        if upper == names::START {
            // The server's `session.reset()`; the wall time of the last partial stays.
            self.started = true;
            self.processed_bytes = 0;
            self.decoded_ms = 0.0;
            self.first_decode_done = false;
            self.segments = Segmenter::new();
            self.sentences.clear();
            self.partial = None;
            out.push(event(names::STARTED, ""));
        } else if let Some(value) = strip_prefix_ci(trimmed, &upper, names::HOTWORDS) {
            let words: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(json_string)
                .collect();
            let extra = format!(r#","hotwords":[{}]"#, words.join(","));
            self.hotwords = words.join(",");
            out.push(event(names::HOTWORDS_SET, &extra));
        } else if let Some(value) = strip_prefix_ci(trimmed, &upper, names::POSTPROCESS_HOTWORDS) {
            let pairs: Vec<String> = postprocess_pairs(value)
                .iter()
                .map(|(wrong, right)| format!("{}:{}", json_string(wrong), json_string(right)))
                .collect();
            let extra = format!(r#","postprocess_hotwords":{{{}}}"#, pairs.join(","));
            out.push(event(names::POSTPROCESS_HOTWORDS_SET, &extra));
        } else if let Some(value) = strip_prefix_ci(trimmed, &upper, names::LANGUAGE) {
            let extra = format!(r#","language":{}"#, json_string(value.trim()));
            self.language = value.trim().to_string();
            out.push(event(names::LANGUAGE_SET, &extra));
        } else if upper == names::COMMIT {
            // The mock endpoints as the server does by default (`--endpoint-mode server`).
            out.push(error("COMMIT requires --endpoint-mode client"));
        } else if upper == names::STOP {
            // As the server: the final when active with audio, then `stopped` in any case.
            if self.started && self.processed_bytes > 0 {
                // `_finalize_server_session`: the segment still open is decoded, if any.
                let open = self.segments.finish();
                match open {
                    Some((start_ms, end_ms)) if end_ms - start_ms >= LEAST_SEGMENT_MS => {
                        let decode = self.decode((end_ms - start_ms) as f64, true);
                        return Some((decode, Owed::Final { open }));
                    }
                    _ => self.finished(Owed::Final { open: None }, out),
                }
                return None;
            }
            self.stopped(out);
        }
        None
    }

    /// Audio: processed after `START` and before `STOP`, ignored otherwise. The segments it
    /// closes are decoded first, then the partial cadence is looked at.
    fn on_audio(&mut self, pcm: &[u8]) {
        if !self.started {
            return;
        }
        self.processed_bytes += pcm.len() as u64;
        self.changes.clear();
        self.segments.feed(pcm, &mut self.changes);
        for change in &self.changes {
            if let Change::Closed { start_ms, end_ms } = *change {
                self.todo.push_back(Todo::Segment { start_ms, end_ms });
            }
        }
        self.todo.push_back(Todo::Partial);
    }

    /// A segment closed: decoded whole when long enough (`_decode_segment`); the partial so
    /// far is cleared either way.
    fn on_segment(&mut self, start_ms: u64, end_ms: u64) -> Option<(Decode, Owed)> {
        self.partial = None;
        (end_ms - start_ms >= LEAST_SEGMENT_MS).then(|| {
            let decode = self.decode((end_ms - start_ms) as f64, true);
            (decode, Owed::Segment { start_ms, end_ms })
        })
    }

    /// The partial cadence after an audio frame, at `now_s`: if the wall-time gap since the
    /// last look is at least `--decode-interval` and the audio processed since the last
    /// decoded partial at least the chunk, a partial decode of the open segment's newest
    /// window — or, with no segment open or too little of it, a result at once.
    fn on_partial(&mut self, now_s: f64, out: &mut Vec<Utf8Bytes>) -> Option<(Decode, Owed)> {
        let processed_ms = self.processed_ms();
        let gap_passed = self
            .last_decode_s
            .is_none_or(|last_s| now_s - last_s >= self.interval_s);
        let chunk_ms = if self.first_decode_done {
            DECODE_CHUNK_MS
        } else {
            FIRST_DECODE_MS
        };
        if !gap_passed || processed_ms - self.decoded_ms < chunk_ms {
            return None;
        }
        self.last_decode_s = Some(now_s);
        let Some(segment_start_ms) = self.segments.open_start_ms() else {
            // Silence: nothing to decode; the partial empties.
            self.decoded_ms = processed_ms;
            self.partial = None;
            self.result(false, out);
            return None;
        };
        let mut start_ms = segment_start_ms as f64;
        if self.window_ms > 0.0 {
            start_ms = start_ms.max(processed_ms - self.window_ms);
        }
        let audio_ms = processed_ms - start_ms;
        if audio_ms < LEAST_PARTIAL_MS {
            self.result(false, out);
            return None;
        }
        let decode = self.decode(audio_ms, false);
        Some((
            decode,
            Owed::Partial {
                start_ms: start_ms.floor() as u64,
            },
        ))
    }

    fn decode(&self, audio_ms: f64, is_final: bool) -> Decode {
        Decode {
            audio_s: audio_ms / 1000.0,
            is_final,
            settings: self.settings_key(),
        }
    }

    fn settings_key(&self) -> u64 {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.hotwords, &self.language).hash(&mut h);
        h.finish()
    }

    /// The decode in flight is done: its result (after the final, `stopped` too; a segment's
    /// text joins the sentences and sends nothing). Processing may go on.
    pub fn decoded(&mut self, out: &mut Vec<Utf8Bytes>) {
        let Some((decode, owed)) = self.pending.take() else {
            return;
        };
        match owed {
            Owed::Partial { start_ms } => {
                // Nothing was processed since the decode was asked for.
                self.decoded_ms = self.processed_ms();
                self.first_decode_done = true;
                self.partial = Some((decode.audio_s, start_ms));
                self.result(false, out);
            }
            Owed::Segment { start_ms, end_ms } => self.add_sentence(start_ms, end_ms),
            Owed::Final { .. } => self.finished(owed, out),
        }
    }

    /// STOP's final: the open segment's sentence, the final result, `stopped`.
    fn finished(&mut self, owed: Owed, out: &mut Vec<Utf8Bytes>) {
        if let Owed::Final {
            open: Some((start_ms, end_ms)),
        } = owed
        {
            self.add_sentence(start_ms, end_ms);
        }
        self.partial = None;
        self.result(true, out);
        self.stopped(out);
    }

    fn add_sentence(&mut self, start_ms: u64, end_ms: u64) {
        if !self.sentences.is_empty() {
            self.sentences.push(',');
        }
        let text = words((end_ms - start_ms) as f64 / 1000.0);
        let _ = write!(
            self.sentences,
            r#"{{"text":{},"start":{start_ms},"end":{end_ms}}}"#,
            json_string(&text)
        );
    }

    /// A result as `_build_response` makes it: every sentence so far, and the partial — its
    /// start, or the open segment's, or the end of the audio when there is neither.
    fn result(&mut self, is_final: bool, out: &mut Vec<Utf8Bytes>) {
        // The server's `int(total_samples * 1000 / sample_rate)`.
        let duration_ms = self.processed_ms().floor() as u64;
        let sentences = &self.sentences;
        out.push(Utf8Bytes::from(if is_final {
            format!(
                r#"{{"sentences":[{sentences}],"partial":"","partial_start_ms":0,"duration_ms":{duration_ms},"is_final":true}}"#
            )
        } else {
            let (text, start_ms) = match (self.partial, self.segments.open_start_ms()) {
                (Some((audio_s, start_ms)), _) => (words(audio_s), start_ms),
                (None, Some(open_ms)) => (String::new(), open_ms),
                (None, None) => (String::new(), duration_ms),
            };
            format!(
                r#"{{"sentences":[{sentences}],"partial":{},"partial_start_ms":{start_ms},"duration_ms":{duration_ms},"is_final":false}}"#,
                json_string(&text)
            )
        }));
    }

    fn stopped(&mut self, out: &mut Vec<Utf8Bytes>) {
        self.started = false;
        if !self.never_stopped {
            self.stops_sent += 1;
            out.push(event(names::STOPPED, ""));
        }
    }
}

/// `value` after `prefix` when `upper` (the upper-cased text) starts with it.
fn strip_prefix_ci<'a>(text: &'a str, upper: &str, prefix: &str) -> Option<&'a str> {
    upper
        .starts_with(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

/// The pairs of a `POSTPROCESS_HOTWORDS:` payload as the server reads them
/// (`_parse_postprocess_hotwords_command`): commas and line breaks separate entries; blank ones
/// and `#` comments are skipped; `wrong=>right` (or `->`, `→`, tried in that order, split at
/// the first) maps when both sides are non-empty and is dropped otherwise; a bare word maps to
/// itself, after every mapping. A key given again keeps its first place and takes the last
/// value, as a Python dict does.
fn postprocess_pairs(payload: &str) -> Vec<(String, String)> {
    const SEPARATORS: [&str; 3] = ["=>", "->", "→"];
    // `str.splitlines`' line boundaries.
    let breaks = |c: char| {
        matches!(
            c,
            ',' | '\n'
                | '\r'
                | '\u{0b}'
                | '\u{0c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    };
    let mut explicit: Vec<(String, String)> = Vec::new();
    let mut bare: Vec<&str> = Vec::new();
    for entry in payload.split(breaks).map(str::trim) {
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        match SEPARATORS.iter().find_map(|sep| entry.split_once(sep)) {
            Some((wrong, right)) => {
                let (wrong, right) = (wrong.trim(), right.trim());
                if !wrong.is_empty() && !right.is_empty() {
                    insert(&mut explicit, wrong, right);
                }
            }
            None => bare.push(entry),
        }
    }
    for word in bare {
        insert(&mut explicit, word, word);
    }
    explicit
}

fn insert(pairs: &mut Vec<(String, String)>, key: &str, value: &str) {
    match pairs.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value.to_string(),
        None => pairs.push((key.to_string(), value.to_string())),
    }
}

fn event(name: &str, extra: &str) -> Utf8Bytes {
    Utf8Bytes::from(format!(r#"{{"event":"{name}"{extra}}}"#))
}

fn error(message: &str) -> Utf8Bytes {
    event(
        names::ERROR,
        &format!(r#","error":{}"#, json_string(message)),
    )
}

/// Stand-in text for `audio_s` of speech: a word a second (at least one; halves to even, as
/// Python's `round` in the fake engine we ran the real server with), `alpha bravo …`.
fn words(audio_s: f64) -> String {
    let n = (audio_s.round_ties_even() as usize).max(1);
    let mut text = String::with_capacity(n * 8);
    for (k, word) in WORDS.iter().cycle().take(n).enumerate() {
        if k > 0 {
            text.push(' ');
        }
        text.push_str(word);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(out: &[Utf8Bytes]) -> Vec<serde_json::Value> {
        out.iter()
            .map(|f| serde_json::from_str(f.as_str()).unwrap())
            .collect()
    }

    /// 100 ms of loud audio (speech to the VAD).
    fn loud() -> Bytes {
        Bytes::from(crate::mock::vad::tests::tone(100, 3_000))
    }

    /// 100 ms of silence.
    fn quiet() -> Bytes {
        Bytes::from(vec![0; 3_200])
    }

    /// Sends a command and processes what it can.
    fn command(s: &mut Session, text: &'static str, out: &mut Vec<Utf8Bytes>) -> Option<Decode> {
        s.push(Frame::Text(Utf8Bytes::from_static(text)));
        s.process(0.0, out)
    }

    /// A client frame sent at a wall time (seconds).
    enum Send {
        Audio(Bytes),
        Stop,
    }

    /// Plays `sends` (in time order) into a session that has had `START`, each decode taking
    /// `cost_s` of it; every reply with the wall time it was sent at.
    fn play(
        s: &mut Session,
        sends: &[(f64, Send)],
        cost_s: impl Fn(&Decode) -> f64,
    ) -> Vec<(f64, serde_json::Value)> {
        let mut replies = Vec::new();
        let mut done_s = f64::INFINITY;
        let mut next = sends.iter().peekable();
        let mut out = Vec::new();
        loop {
            let send_s = next.peek().map_or(f64::INFINITY, |(at_s, _)| *at_s);
            let now_s = send_s.min(done_s);
            if now_s.is_infinite() {
                return replies;
            }
            if done_s <= send_s {
                done_s = f64::INFINITY;
                s.decoded(&mut out);
            } else if let Some((_, send)) = next.next() {
                s.push(match send {
                    Send::Audio(pcm) => Frame::Audio(pcm.clone()),
                    Send::Stop => Frame::Text(Utf8Bytes::from_static("STOP")),
                });
            }
            if let Some(d) = s.process(now_s, &mut out) {
                done_s = now_s + cost_s(&d);
            }
            replies.extend(texts(&out).into_iter().map(|v| (now_s, v)));
            out.clear();
        }
    }

    /// `frames` of 100 ms of audio, one every `frame_s` from 0.
    fn frames(n: u32, frame_s: f64) -> Vec<(f64, Send)> {
        (0..n)
            .map(|k| (f64::from(k) * frame_s, Send::Audio(loud())))
            .collect()
    }

    /// The `duration_ms` of each partial.
    fn partial_ms(replies: &[(f64, serde_json::Value)]) -> Vec<u64> {
        replies
            .iter()
            .filter(|(_, v)| v["is_final"] == false)
            .map(|(_, v)| v["duration_ms"].as_u64().unwrap())
            .collect()
    }

    fn started(model: FunasrMockArgs) -> Session {
        let mut s = Session::new(&model);
        command(&mut s, "START", &mut Vec::new());
        s
    }

    #[test]
    fn start_language_hotwords_are_acknowledged_in_any_case_issue_11() {
        let mut s = Session::new(&FunasrMockArgs::default());
        let mut out = Vec::new();
        command(&mut s, " start ", &mut out);
        command(&mut s, "language:中文", &mut out);
        command(&mut s, "HOTWORDS:a, b,", &mut out);
        let v = texts(&out);
        assert_eq!(v[0], serde_json::json!({"event":"started"}));
        assert_eq!(
            v[1],
            serde_json::json!({"event":"language_set","language":"中文"})
        );
        assert_eq!(
            v[2],
            serde_json::json!({"event":"hotwords_set","hotwords":["a","b"]})
        );
    }

    /// `realtime_ws.py`'s `handle_client`: no branch for an unknown command, COMMIT's error
    /// without `--endpoint-mode client`, and `postprocess_hotwords_set` with the pairs read.
    #[test]
    fn other_commands_are_answered_as_the_real_server_answers_them() {
        let mut s = Session::new(&FunasrMockArgs::default());
        let mut out = Vec::new();
        command(&mut s, "HELLO", &mut out);
        command(&mut s, "FLUSH", &mut out);
        assert!(out.is_empty(), "an unknown command gets no answer");
        command(&mut s, "commit", &mut out);
        command(
            &mut s,
            "postprocess_hotwords: Fun ASR=>FunASR, a->b\nc→d, x=>, #note, word, a=>B, word",
            &mut out,
        );
        let v = texts(&out);
        assert_eq!(
            v[0],
            serde_json::json!({"event":"error","error":"COMMIT requires --endpoint-mode client"})
        );
        assert_eq!(v[1]["event"], "postprocess_hotwords_set");
        // In order: the mappings (a later `a` changes the value, not the place), then the
        // bare words mapped to themselves; `x=>` and the comment are dropped.
        let text = out[1].as_str();
        let pairs = &text[text.find(r#""postprocess_hotwords":"#).unwrap()..];
        assert_eq!(
            pairs,
            r#""postprocess_hotwords":{"Fun ASR":"FunASR","a":"B","c":"d","word":"word"}}"#
        );
    }

    #[test]
    fn partials_come_after_480_ms_then_each_960_ms_of_new_audio_when_paced() {
        let mut s = Session::new(&FunasrMockArgs::default());
        s.push(Frame::Audio(loud()));
        assert_eq!(
            s.process(0.0, &mut Vec::new()),
            None,
            "audio before START is ignored"
        );
        command(&mut s, "START", &mut Vec::new());
        // 500 ms (the first frame past 480 ms), then the first frame past 960 ms more.
        let replies = play(&mut s, &frames(40, 0.1), |_| 0.02);
        assert_eq!(partial_ms(&replies), [500, 1500, 2500, 3500]);
    }

    #[test]
    fn audio_sent_faster_than_real_time_waits_for_the_decode_interval_of_wall_time() {
        let mut s = started(FunasrMockArgs::default());
        // 100 ms of audio every 31.25 ms: 960 ms of audio come in 0.3 s, the gap needs 0.48 s
        // (16 frames), so each decode waits for the first frame past it.
        let replies = play(&mut s, &frames(100, 0.03125), |_| 0.02);
        assert_eq!(partial_ms(&replies), [500, 2100, 3700, 5300, 6900, 8500]);
        // With no interval, the audio alone paces the decodes.
        let mut s = started(FunasrMockArgs {
            decode_interval: 0.0,
            ..FunasrMockArgs::default()
        });
        let replies = play(&mut s, &frames(40, 0.02), |_| 0.01);
        assert_eq!(
            partial_ms(&replies),
            [500, 1500, 2500, 3500],
            "one frame past each 960 ms"
        );
    }

    /// `realtime_ws.py`'s handler awaits each decode before it reads the next frame, so the
    /// frames and the `STOP` sent meanwhile wait; then they are processed one by one, the
    /// cadence looking at the audio *processed*. Measured on the real server with this cost
    /// (decode 100 ms + 300 ms an audio second) and 5.83 s of audio: partials at 500, 1500, …
    /// 5500 ms, two of them after STOP, the final 3.83 s after it.
    #[test]
    fn a_slow_decode_leaves_frames_and_stop_queued_behind_it_in_order() {
        let mut s = started(FunasrMockArgs::default());
        let mut sends = frames(58, 0.1);
        let stop_s = 5.8;
        sends.push((stop_s, Send::Stop));
        let replies = play(&mut s, &sends, |d| 0.1 + 0.3 * d.audio_s);
        // In steps of the audio processed, not of the audio that had arrived.
        assert_eq!(partial_ms(&replies), [500, 1500, 2500, 3500, 4500, 5500]);
        let at = |ms: u64| {
            replies
                .iter()
                .find(|(_, v)| v["duration_ms"] == ms)
                .unwrap()
                .0
        };
        // 3500 asked at 3.4 s, done at 4.55 s; the queued frames up to 4500 ms then ask for
        // the next at once (4.55 s − 3.4 s is past the 0.48 s gap), done at 6.0 s, after STOP;
        // 5500 at 7.75 s, also on a frame sent before STOP.
        assert!((at(3500) - 4.55).abs() < 1e-6, "{replies:?}");
        assert!((at(4500) - 6.0).abs() < 1e-6, "{replies:?}");
        assert!((at(5500) - 7.75).abs() < 1e-6, "{replies:?}");
        // STOP is reached only after them: the final covers all 5.8 s (1.84 s of decode).
        let (final_s, final_) = &replies[replies.len() - 2];
        assert_eq!(final_["is_final"], true);
        assert_eq!(final_["duration_ms"], 5800);
        assert!((final_s - stop_s - 3.79).abs() < 1e-6, "{replies:?}");
        assert_eq!(
            replies.last().unwrap().1,
            serde_json::json!({"event":"stopped"})
        );
        assert_eq!(s.take_stops(), 1);
    }

    #[test]
    fn nothing_is_processed_while_a_decode_is_in_flight() {
        let mut s = started(FunasrMockArgs::default());
        for _ in 0..5 {
            s.push(Frame::Audio(loud()));
        }
        let mut out = Vec::new();
        assert!(s.process(1.0, &mut out).is_some());
        s.push(Frame::Text(Utf8Bytes::from_static("LANGUAGE:en")));
        assert_eq!(s.process(9.0, &mut out), None, "one in flight");
        assert!(out.is_empty(), "the command waits behind the decode");
        s.decoded(&mut out);
        assert_eq!(s.process(9.0, &mut out), None);
        let v = texts(&out);
        assert_eq!(v[0]["duration_ms"], 500);
        assert_eq!(v[1]["event"], "language_set", "answered after the partial");
    }

    #[test]
    fn the_window_caps_what_a_partial_covers() {
        let mut s = started(FunasrMockArgs {
            partial_window_sec: 2.0,
            ..FunasrMockArgs::default()
        });
        let replies = play(&mut s, &frames(35, 0.1), |_| 0.02);
        let (_, last) = replies.last().unwrap();
        assert_eq!(last["duration_ms"], 3500);
        assert_eq!(last["partial_start_ms"], 1500, "the newest 2 s");
        // ≤ 0: no cap.
        let mut s = started(FunasrMockArgs {
            partial_window_sec: 0.0,
            decode_interval: 0.0,
            ..FunasrMockArgs::default()
        });
        let replies = play(&mut s, &frames(35, 0.1), |_| 0.02);
        assert_eq!(replies.last().unwrap().1["partial_start_ms"], 0);
    }

    #[test]
    fn a_command_is_not_audio_so_it_does_not_trigger_a_partial() {
        let mut s = started(FunasrMockArgs::default());
        for _ in 0..5 {
            s.push(Frame::Audio(loud()));
        }
        assert!(s.process(0.0, &mut Vec::new()).is_some());
        s.decoded(&mut Vec::new());
        for _ in 0..10 {
            s.push(Frame::Audio(loud()));
        }
        assert_eq!(
            s.process(0.1, &mut Vec::new()),
            None,
            "0.1 s after the last: too soon"
        );
        s.push(Frame::Text(Utf8Bytes::from_static("LANGUAGE:en")));
        assert_eq!(
            s.process(5.0, &mut Vec::new()),
            None,
            "the server looks only as audio comes in"
        );
        s.push(Frame::Audio(loud()));
        assert!(s.process(5.0, &mut Vec::new()).is_some());
    }

    #[test]
    fn stop_gives_one_final_covering_all_audio_then_stopped_issue_11() {
        let mut s = started(FunasrMockArgs {
            decode_interval: 1e9,
            ..FunasrMockArgs::default()
        });
        let mut out = Vec::new();
        for _ in 0..30 {
            s.push(Frame::Audio(loud()));
        }
        // No partial on the way: one was just asked for, and the gap is long.
        s.last_decode_s = Some(0.0);
        let d = command(&mut s, "STOP", &mut out).unwrap();
        assert!(out.is_empty());
        assert!(d.is_final && (d.audio_s - 3.0).abs() < 1e-9);
        s.decoded(&mut out);
        let v = texts(&out);
        assert_eq!(v[0]["is_final"], true);
        assert_eq!(v[0]["partial"], "");
        assert_eq!(v[0]["partial_start_ms"], 0, "as the server's final");
        assert_eq!(v[0]["duration_ms"], 3000);
        assert_eq!(v[1], serde_json::json!({"event":"stopped"}));
        // Without audio, STOP is answered by stopped alone; so is a STOP after it.
        let mut out = Vec::new();
        command(&mut s, "START", &mut out);
        command(&mut s, "STOP", &mut out);
        command(&mut s, "STOP", &mut out);
        let stopped = serde_json::json!({"event":"stopped"});
        assert_eq!(texts(&out)[1..], [stopped.clone(), stopped]);
        assert_eq!(s.take_stops(), 3);
    }

    #[test]
    fn the_never_stopped_fault_sends_the_final_but_not_stopped_issue_11() {
        let mut s = started(FunasrMockArgs {
            fault_never_stopped: true,
            ..FunasrMockArgs::default()
        });
        let mut out = Vec::new();
        s.push(Frame::Audio(loud()));
        assert!(command(&mut s, "STOP", &mut out).is_some());
        s.decoded(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(texts(&out)[0]["is_final"], true);
        assert_eq!(s.take_stops(), 0);
    }

    /// The real server's default `--endpoint-mode server`: its VAD cuts the input into
    /// segments; a closed one is decoded whole in `add_audio` and becomes a sentence every
    /// later result carries; partials restart at the new segment; STOP decodes the open one.
    #[test]
    fn a_pause_long_enough_closes_a_segment_decoded_whole_and_partials_restart() {
        let mut s = started(FunasrMockArgs::default());
        // Speech 0-3 s, 2.2 s of silence (a segment under 5 s ends after 2 s of it), speech
        // 5.2-7.2 s, STOP.
        let mut sends = Vec::new();
        for k in 0..72 {
            let pcm = if (30..52).contains(&k) {
                quiet()
            } else {
                loud()
            };
            sends.push((f64::from(k) * 0.1, Send::Audio(pcm)));
        }
        sends.push((7.2, Send::Stop));
        let asked = std::cell::RefCell::new(Vec::new());
        let replies = play(&mut s, &sends, |d| {
            asked.borrow_mut().push(*d);
            0.001
        });
        let asked: Vec<(bool, u64)> = asked
            .borrow()
            .iter()
            .map(|d| (d.is_final, (d.audio_s * 1000.0).round() as u64))
            .collect();
        // Partials (200 tokens) of the open segment; the closed segment [0, 3100] (the last
        // speech at 3 s and fsmn-vad's 100 ms after it) at 5 s; then partials of the segment
        // opened at 5.0 s (speech heard at 5.2 s, 200 ms before); STOP decodes [5000, 7200].
        assert_eq!(
            asked,
            [
                (false, 500),
                (false, 1500),
                (false, 2500),
                (false, 3500),
                (false, 4500),
                (true, 3100),
                (false, 500),
                (false, 1500),
                (true, 2200),
            ]
        );
        let partials: Vec<&serde_json::Value> = replies
            .iter()
            .map(|(_, v)| v)
            .filter(|v| v["is_final"] == false)
            .collect();
        let first_sentence = serde_json::json!({"text":"alpha bravo charlie","start":0,"end":3100});
        let last = partials.last().unwrap();
        assert_eq!(last["duration_ms"], 6500);
        assert_eq!(last["partial_start_ms"], 5000, "{last}");
        assert_eq!(last["partial"], "alpha bravo", "1.5 s of the new segment");
        assert_eq!(
            last["sentences"],
            serde_json::json!([first_sentence.clone()])
        );
        assert_eq!(partials[0]["sentences"], serde_json::json!([]));
        let (_, final_) = &replies[replies.len() - 2];
        assert_eq!(final_["is_final"], true);
        assert_eq!(
            final_["sentences"],
            serde_json::json!([first_sentence, {"text":"alpha bravo","start":5000,"end":7200}])
        );
    }

    /// Silence opens no segment: the results come at the cadence with an empty partial
    /// starting at the end of the audio, nothing is decoded, and the final has no sentence.
    #[test]
    fn silence_is_answered_with_empty_results_and_never_decoded() {
        let mut s = started(FunasrMockArgs::default());
        let mut sends: Vec<(f64, Send)> = (0..30)
            .map(|k| (f64::from(k) * 0.1, Send::Audio(quiet())))
            .collect();
        sends.push((3.0, Send::Stop));
        let replies = play(&mut s, &sends, |d| panic!("decoded {d:?}"));
        let results: Vec<serde_json::Value> = replies
            .iter()
            .map(|(_, v)| v.clone())
            .filter(|v| v.get("event").is_none())
            .collect();
        // The first at 500 ms; the chunk stays 480 ms, as no text came back.
        assert_eq!(partial_ms(&replies), [500, 1000, 1500, 2000, 2500, 3000]);
        assert_eq!(
            results[1],
            serde_json::json!({"sentences":[],"partial":"","partial_start_ms":1000,"duration_ms":1000,"is_final":false})
        );
        assert_eq!(
            results.last().unwrap(),
            &serde_json::json!({"sentences":[],"partial":"","partial_start_ms":0,"duration_ms":3000,"is_final":true})
        );
        assert_eq!(replies.last().unwrap().1["event"], "stopped");
    }

    /// The first 480 ms of a new segment are too little to decode: a result goes out with no
    /// partial, starting where the segment does, and the cadence looks again at the next frame.
    #[test]
    fn under_480_ms_of_a_segment_gives_a_result_without_a_decode() {
        let mut s = started(FunasrMockArgs {
            decode_interval: 0.0,
            ..FunasrMockArgs::default()
        });
        let mut out = Vec::new();
        // 400 ms of silence, then speech: at 500 ms the segment (from 200 ms) is 300 ms long.
        for k in 0..5 {
            s.push(Frame::Audio(if k < 4 { quiet() } else { loud() }));
        }
        assert_eq!(s.process(0.0, &mut out), None);
        let v = texts(&out);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0]["partial"], "");
        assert_eq!(v[0]["partial_start_ms"], 200);
        s.push(Frame::Audio(loud()));
        s.push(Frame::Audio(loud()));
        let d = s.process(0.0, &mut out).unwrap();
        // At 600 ms another result without one (400 ms); at 700 ms, 500 ms are decoded.
        assert_eq!(texts(&out)[1]["duration_ms"], 600);
        assert!(!d.is_final && (d.audio_s - 0.5).abs() < 1e-9, "{d:?}");
    }

    /// `np.frombuffer(pcm_bytes, dtype=np.int16)` raises on an odd number of bytes; the
    /// handler's `except Exception` ends it and the connection closes. Before `START` the
    /// frame is not looked at.
    #[test]
    fn an_odd_length_audio_frame_while_active_ends_the_session_as_the_server_errs() {
        let mut s = Session::new(&FunasrMockArgs::default());
        s.push(Frame::Audio(Bytes::from_static(&[0; 3])));
        assert_eq!(s.process(0.0, &mut Vec::new()), None);
        assert!(!s.failed(), "ignored before START");
        command(&mut s, "START", &mut Vec::new());
        s.push(Frame::Audio(Bytes::from_static(&[0; 3])));
        s.push(Frame::Text(Utf8Bytes::from_static("STOP")));
        let mut out = Vec::new();
        assert_eq!(s.process(0.0, &mut out), None);
        assert!(s.failed());
        assert!(out.is_empty(), "nothing after it is answered");
    }

    #[test]
    fn the_stand_in_text_is_a_word_a_second_none_said_twice_running() {
        assert_eq!(words(0.2), "alpha");
        assert_eq!(words(3.4), "alpha bravo charlie");
        assert_eq!(words(2.5), "alpha bravo", "halves to even");
        let long = words(60.0);
        let said: Vec<&str> = long.split(' ').collect();
        assert_eq!(said.len(), 60);
        assert_eq!(said[26], "alpha", "over and over");
        assert!(said.windows(2).all(|w| w[0] != w[1]), "{long}");
    }
}
