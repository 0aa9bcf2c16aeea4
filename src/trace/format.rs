//! How trace lines, receipts and samples are laid out on disk (docs/files.md).
//!
//! A frame is encoded once, when it is sent or as it arrived; a trace line only wraps it.

use super::Receipt;
use crate::frame::AudioSpan;
use std::io::Write as _;

/// The `direction` of a trace line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Send,
    Receive,
    Error,
    Admission,
}

impl Direction {
    fn as_str(self) -> &'static str {
        match self {
            Direction::Send => "send",
            Direction::Receive => "receive",
            Direction::Error => "error",
            Direction::Admission => "admission",
        }
    }
}

/// What a trace payload is, as the session that saw it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// A JSON event; `audio_key` names its base64 audio field, if it has one (`audio` in an
    /// append, `delta` in an audio delta).
    Json { audio_key: Option<&'static str> },
    /// A frame that is not JSON: it goes into the trace as a JSON string.
    Text,
}

/// Appends one trace line: `{"direction":…,"time_s":…,"event":<payload>}\n`. A JSON frame is
/// written as it is unless it holds a line break (then it is encoded again, compactly); with
/// `meta`, its audio is replaced by its length.
pub fn trace_line(
    out: &mut Vec<u8>,
    direction: Direction,
    time_s: f64,
    payload: &str,
    kind: Payload,
    meta: bool,
) {
    open_line(out, direction, time_s);
    match kind {
        Payload::Text => out.extend_from_slice(json_string(payload).as_bytes()),
        Payload::Json { audio_key } => {
            // With `meta`, the audio goes first, so that the scan below does not run over it;
            // what is around it goes straight into the line (no `String` per frame: the writer
            // allocated two a packet in meta traces).
            match audio_key
                .filter(|_| meta)
                .and_then(|key| Stripped::find(payload, key))
            {
                Some(stripped) => stripped.push_event(out),
                // memchr: in full traces this runs over every byte of every frame, audio included.
                None if memchr::memchr2(b'\n', b'\r', payload.as_bytes()).is_some() => {
                    push_compact(out, payload.as_bytes());
                }
                None => out.extend_from_slice(payload.as_bytes()),
            }
        }
    }
    out.extend_from_slice(b"}\n");
}

/// The trace line of a sent packet, a JSON frame whose audio is the string value of `audio`:
/// with `meta`, found `at` where the protocol said it put it (the line then reads neither the
/// audio nor the quotes before it), searched for otherwise.
pub fn append_line(out: &mut Vec<u8>, time_s: f64, frame: &str, at: Option<AudioSpan>, meta: bool) {
    match at
        .filter(|_| meta)
        .and_then(|at| Stripped::at(frame, "audio", at))
    {
        Some(stripped) => {
            open_line(out, Direction::Send, time_s);
            stripped.push_event(out);
            out.extend_from_slice(b"}\n");
        }
        None => trace_line(out, Direction::Send, time_s, frame, APPEND, meta),
    }
}

/// What a sent packet's frame is to [`trace_line`].
const APPEND: Payload = Payload::Json {
    audio_key: Some("audio"),
};

/// `{"direction":…,"time_s":…,"event":` (the event and `}\n` follow).
fn open_line(out: &mut Vec<u8>, direction: Direction, time_s: f64) {
    out.extend_from_slice(br#"{"direction":""#);
    out.extend_from_slice(direction.as_str().as_bytes());
    out.extend_from_slice(br#"","time_s":"#);
    push_seconds(out, time_s);
    out.extend_from_slice(br#","event":"#);
}

/// A frame with a line break, as one line: parsed and written again compactly, or as a JSON
/// string when it is not JSON.
fn push_compact(out: &mut Vec<u8>, event: &[u8]) {
    let line = match serde_json::from_slice::<serde_json::Value>(event) {
        Ok(value) => value.to_string(),
        Err(_) => json_string(&String::from_utf8_lossy(event)),
    };
    out.extend_from_slice(line.as_bytes());
}

/// Writes seconds with six decimals, as integers: float formatting showed up in profiles.
pub fn push_seconds(out: &mut Vec<u8>, seconds: f64) {
    if !seconds.is_finite() || seconds < 0.0 {
        let _ = write!(out, "{seconds:.6}");
        return;
    }
    // Rounded half away from zero, as `f64::round`, without its call into libm (one a time
    // field, a dozen a packet): the fraction of a non-negative float is exact.
    let micros = seconds * 1e6;
    let whole = micros as u64;
    let us = whole + u64::from(micros - whole as f64 >= 0.5);
    // The microseconds in one `itoa`, the point put in before the last six digits (under a
    // second, a leading 1 makes the seventh, written as 0).
    let under_a_second = us < 1_000_000;
    let mut digits = itoa::Buffer::new();
    let digits = digits
        .format(us + u64::from(under_a_second) * 1_000_000)
        .as_bytes();
    let (whole_s, fraction) = digits.split_at(digits.len() - 6);
    out.extend_from_slice(if under_a_second { b"0" } else { whole_s });
    out.push(b'.');
    out.extend_from_slice(fraction);
}

/// Writes an integer in decimal (`itoa`: `write!` and its formatter showed up in profiles of
/// the writer thread, which writes three of these a packet).
pub fn push_int<I: itoa::Integer>(out: &mut Vec<u8>, n: I) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Writes an event id as the protocols spell it: 16 lower-case hex digits.
pub fn push_hex16(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&hex16(n));
}

/// The same into a `String`: the append frames, built per packet (with `write!`, its formatter
/// showed up in profiles).
pub fn push_hex16_str(out: &mut String, n: u64) {
    // Hex digits are ASCII: one `push_str`, not sixteen pushes of a `char`.
    if let Ok(digits) = std::str::from_utf8(&hex16(n)) {
        out.push_str(digits);
    }
}

fn hex16(n: u64) -> [u8; 16] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    std::array::from_fn(|i| DIGITS[((n >> ((15 - i) * 4)) & 0xf) as usize])
}

/// A JSON string literal (for error messages that go into trace lines).
pub fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// A frame with the base64 string value of `key` cut out, to be written with `null`, its
/// length (`audio_b64_chars`) and the bytes it decodes to (`audio_bytes`, exact: the length
/// alone hides up to two bytes of padding a packet, which `conform` would count as input that
/// was never sent) in its place. Whitespace around the colon is allowed (servers written in
/// Python put a space there); base64 holds no quote or backslash, so the value ends at the next
/// quote.
struct Stripped<'a> {
    /// Up to `"key"`.
    head: &'a str,
    key: &'a str,
    b64_chars: usize,
    bytes: usize,
    /// After the value's closing quote.
    tail: &'a str,
}

impl<'a> Stripped<'a> {
    fn find(payload: &'a str, key: &'a str) -> Option<Stripped<'a>> {
        let (key_start, value_start) = string_value(payload, key)?;
        let b64_chars = memchr::memchr(b'"', &payload.as_bytes()[value_start..])?;
        let value = &payload.as_bytes()[value_start..value_start + b64_chars];
        Some(Stripped {
            head: &payload[..key_start],
            key,
            b64_chars,
            bytes: base64_decoded_len(value),
            tail: &payload[value_start + b64_chars + 1..],
        })
    }

    /// The same where the value is known to be at `at` (its bytes, without the quotes): checked
    /// to be the string value of `"key"` written compactly, or `None` (then search for it).
    fn at(payload: &'a str, key: &'a str, at: AudioSpan) -> Option<Stripped<'a>> {
        let b = payload.as_bytes();
        let key_start = at.start.checked_sub(key.len() + 4)?;
        let before = b.get(key_start..at.start)?;
        let compact = before[0] == b'"'
            && &before[1..=key.len()] == key.as_bytes()
            && &before[key.len() + 1..] == br#"":""#;
        if !compact || b.get(at.end) != Some(&b'"') {
            return None;
        }
        Some(Stripped {
            head: payload.get(..key_start)?,
            key,
            b64_chars: at.len(),
            bytes: base64_decoded_len(b.get(at.clone())?),
            tail: payload.get(at.end + 1..)?,
        })
    }

    fn has_line_break(&self) -> bool {
        [self.head, self.tail]
            .iter()
            .any(|part| memchr::memchr2(b'\n', b'\r', part.as_bytes()).is_some())
    }

    /// The event with `null`, the length and the bytes in the audio's place, as one line: what
    /// is around the audio is written as it is unless it holds a line break.
    fn push_event(&self, out: &mut Vec<u8>) {
        if self.has_line_break() {
            let mut event = Vec::new();
            self.push_to(&mut event);
            push_compact(out, &event);
        } else {
            self.push_to(out);
        }
    }

    fn push_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head.as_bytes());
        out.push(b'"');
        out.extend_from_slice(self.key.as_bytes());
        out.extend_from_slice(br#"":null,"audio_b64_chars":"#);
        push_int(out, self.b64_chars);
        out.extend_from_slice(br#","audio_bytes":"#);
        push_int(out, self.bytes);
        out.extend_from_slice(self.tail.as_bytes());
    }
}

/// The bytes the base64 string value of `key` in `payload` decodes to, without decoding it,
/// and the rest of `payload` around that value (before its key, after its closing quote);
/// `None` when `payload` has no such value.
pub fn string_value_bytes<'a>(payload: &'a str, key: &str) -> Option<(usize, [&'a str; 2])> {
    let (key_start, value_start) = string_value(payload, key)?;
    let b = &payload.as_bytes()[value_start..];
    let len = memchr::memchr(b'"', b)?;
    let rest = [
        payload.get(..key_start)?,
        payload.get(value_start + len + 1..)?,
    ];
    Some((base64_decoded_len(&b[..len]), rest))
}

/// The number after `"key":` in `text` (whitespace allowed around the colon), if one is there.
pub fn number_value(text: &str, key: &str) -> Option<f64> {
    let b = text.as_bytes();
    // By its opening quote, as `string_value` finds keys (the text is a few dozen bytes).
    memchr::memchr_iter(b'"', b).find_map(|quote| {
        let at = quote + 1;
        let named = b.get(at..at + key.len()) == Some(key.as_bytes())
            && b.get(at + key.len()) == Some(&b'"');
        if !named {
            return None;
        }
        let mut i = at + key.len() + 1;
        let skip = |i: &mut usize| {
            while b
                .get(*i)
                .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
            {
                *i += 1;
            }
        };
        skip(&mut i);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        skip(&mut i);
        let end = b[i..]
            .iter()
            .position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .map_or(b.len(), |n| i + n);
        text.get(i..end)?.parse().ok()
    })
}

/// The bytes base64 text decodes to, padded or not: every 4 characters but the padding (up to
/// two `=`) are 3 bytes. What a meta line's `audio_bytes` says, and what `conform` counts.
pub fn base64_decoded_len(b64: &[u8]) -> usize {
    let padding = b64.iter().rev().take(2).take_while(|&&b| b == b'=').count();
    (b64.len() - padding) * 3 / 4
}

/// Where the first string value of `key` is: (where `"key"` starts, where the value starts, just
/// after its opening quote), found without parsing — `"key"`, whitespace, `:`, whitespace, `"`.
/// Whitespace is allowed where JSON allows it. Found by looking at each quote in turn: the
/// key comes a few fields in, and `memmem` built its searcher for every frame (twice a packet).
pub fn string_value(payload: &str, key: &str) -> Option<(usize, usize)> {
    let b = payload.as_bytes();
    let is_ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let skip_ws = |mut i: usize| {
        while b.get(i).is_some_and(is_ws) {
            i += 1;
        }
        i
    };
    let first = key.as_bytes().first();
    memchr::memchr_iter(b'"', b).find_map(|key_start| {
        let name = key_start + 1..key_start + 1 + key.len();
        let closing = name.end;
        // The first byte before the rest: most quotes open or close other names and values,
        // and comparing the rest is a call to `memcmp`.
        if b.get(key_start + 1) != first
            || b.get(closing) != Some(&b'"')
            || b.get(name) != Some(key.as_bytes())
        {
            return None;
        }
        let colon = skip_ws(closing + 1);
        let quote = skip_ws(colon + 1);
        (b.get(colon) == Some(&b':') && b.get(quote) == Some(&b'"'))
            .then_some((key_start, quote + 1))
    })
}

/// The opening of a receipts file, written with the first append.
pub fn receipts_open(out: &mut Vec<u8>, session_start_s: f64) {
    out.extend_from_slice(br#"{"session_start_s":"#);
    push_seconds(out, session_start_s);
    out.extend_from_slice(br#","appends":["#);
}

/// One entry of a receipts file's `appends` (preceded by a comma unless it is the first).
pub fn receipt_entry(out: &mut Vec<u8>, r: &Receipt, first: bool) {
    if !first {
        out.push(b',');
    }
    out.extend_from_slice(br#"{"event_id":""#);
    push_hex16(out, r.event_id);
    out.extend_from_slice(br#"","seq":"#);
    push_int(out, r.seq);
    out.extend_from_slice(br#","scheduled_s":"#);
    push_seconds(out, r.scheduled_s);
    out.extend_from_slice(br#","start_s":"#);
    push_seconds(out, r.start_s);
    out.extend_from_slice(br#","completed_s":"#);
    push_seconds(out, r.completed_s);
    out.push(b'}');
}

/// The end of a receipts file; `empty` when the session sent no append, `close` the server's
/// close frame as a JSON object (`time_s`, `code`, `reason`) if one came.
pub fn receipts_close(out: &mut Vec<u8>, empty: bool, admitted: bool, close: Option<&str>) {
    if empty {
        out.extend_from_slice(br#"{"session_start_s":null,"appends":[]"#);
    } else {
        out.push(b']');
    }
    out.extend_from_slice(if admitted {
        br#","admitted":true"#
    } else {
        br#","admitted":false"#
    });
    out.extend_from_slice(br#","close":"#);
    out.extend_from_slice(close.map_or(&b"null"[..], str::as_bytes));
    out.extend_from_slice(b"}\n");
}

/// The server's close frame as the receipts keep it: when it came and what it said (`code`
/// null for a frame without a status code).
pub fn close_frame(time_s: f64, frame: Option<(u16, &str)>) -> String {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(br#"{"time_s":"#);
    push_seconds(&mut out, time_s);
    match frame {
        Some((code, reason)) => {
            out.extend_from_slice(br#","code":"#);
            push_int(&mut out, code);
            out.extend_from_slice(br#","reason":"#);
            out.extend_from_slice(json_string(reason).as_bytes());
        }
        None => out.extend_from_slice(br#","code":null,"reason":"""#),
    }
    out.push(b'}');
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// The header of a worker's samples file.
pub const SAMPLES_HEADER: &str =
    "worker,session,seq,due_s,start_s,completed_s,deviation_us,websocket_send_us,append_span_us\n";

/// One packet in a worker's samples file: its due time (packet 0's send plus `seq` packets),
/// its send, and its deviation as a magnitude, as every other figure has it.
pub fn sample_line(out: &mut Vec<u8>, worker: u32, session: u32, r: &Receipt) {
    let deviation_us = crate::pacing::deviation_us(r.start_s, r.due_s);
    let send_us = ((r.completed_s - r.start_s) * 1e6).round() as i64;
    let span_us = ((r.completed_s - r.due_s) * 1e6).round() as i64;
    for n in [worker, session, r.seq] {
        push_int(out, n);
        out.push(b',');
    }
    push_seconds(out, r.due_s);
    out.push(b',');
    push_seconds(out, r.start_s);
    out.push(b',');
    push_seconds(out, r.completed_s);
    out.push(b',');
    push_int(out, deviation_us);
    out.push(b',');
    push_int(out, send_us);
    out.push(b',');
    push_int(out, span_us);
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(payload: &str, kind: Payload, meta: bool) -> serde_json::Value {
        let mut out = Vec::new();
        trace_line(&mut out, Direction::Receive, 1.5, payload, kind, meta);
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn a_number_value_is_read_after_its_key_whatever_the_spacing() {
        let tail = r#","sglang":{"unit_id":"unit_3","media_time":{"t_start_ms": 240.0,"duration_ms":80}}}"#;
        assert_eq!(number_value(tail, "t_start_ms"), Some(240.0));
        assert_eq!(number_value(tail, "duration_ms"), Some(80.0));
        assert_eq!(number_value(r#"{"t_start_ms":"240"}"#, "t_start_ms"), None);
        assert_eq!(number_value(r#"{"xt_start_ms":5}"#, "t_start_ms"), None);
        assert_eq!(number_value("", "t_start_ms"), None);
        let frame = r#"{"type":"d","delta":"AAAA","sglang":{"media_time":{"t_start_ms":80}}}"#;
        let (bytes, [head, tail]) = string_value_bytes(frame, "delta").unwrap();
        assert_eq!((bytes, head), (3, r#"{"type":"d","#));
        assert_eq!(number_value(tail, "t_start_ms"), Some(80.0));
    }

    #[test]
    fn meta_mode_drops_append_audio_and_keeps_valid_json() {
        let frame = r#"{"type":"input_audio_buffer.append","event_id":"01","audio":"QUJDRA==","sglang":{"seq":0,"t_start_ms":0}}"#;
        let v = line(frame, APPEND, true);
        assert_eq!(v["event"]["audio"], serde_json::Value::Null);
        assert_eq!(v["event"]["audio_b64_chars"], 8);
        assert_eq!(v["event"]["sglang"]["seq"], 0);
        assert_eq!(line(frame, APPEND, false)["event"]["audio"], "QUJDRA==");
    }

    /// A packet's line, meta and full, with its audio where the protocol put it and searched for.
    fn append_lines(frame: &str, at: Option<AudioSpan>) -> [Vec<u8>; 2] {
        [true, false].map(|meta| {
            let mut out = Vec::new();
            append_line(&mut out, 1.5, frame, at.clone(), meta);
            out
        })
    }

    #[test]
    fn an_append_line_is_the_same_whether_its_audio_is_given_or_searched_for_issue_17() {
        use crate::protocol::{native, openai, vllm};
        let b64 = "QUJD".repeat(40) + "RA==";
        let mut frames = Vec::new();
        let mut out = String::new();
        let at = native::push_append_frame(&mut out, 7, 3, 240, &b64);
        frames.push((out, at));
        let mut out = String::new();
        let at = openai::push_append_frame(&mut out, 7, &b64);
        frames.push((out, at));
        let mut out = String::new();
        let at = vllm::push_append_frame(&mut out, &b64);
        frames.push((out, at));
        for (frame, at) in frames {
            assert_eq!(&frame[at.clone()], b64, "{frame}");
            let [meta, full] = append_lines(&frame, Some(at.clone()));
            assert_eq!([meta.clone(), full], append_lines(&frame, None), "{frame}");
            let v: serde_json::Value = serde_json::from_slice(&meta).unwrap();
            assert_eq!(v["event"]["audio_b64_chars"], b64.len(), "{frame}");
            assert_eq!(v["event"]["audio_bytes"], 40 * 3 + 1, "{frame}");
            // A span that is not the audio's value is not trusted: the line searches.
            for wrong in [
                at.start + 1..at.end,
                at.start..at.end - 1,
                0..4,
                9_000..9_004,
            ] {
                assert_eq!(
                    append_lines(&frame, Some(wrong)),
                    [meta.clone(), append_lines(&frame, None)[1].clone()]
                );
            }
        }
    }

    #[test]
    fn an_append_line_writes_the_audio_it_is_given_not_the_first_it_would_find() {
        // Not a frame any protocol builds: two `audio` values, to show which one the line took.
        let frame = r#"{"audio":"AAAA","x":{"audio":"QUJDRA=="}}"#;
        let second = frame.find("QUJD").unwrap();
        let [meta, _] = append_lines(frame, Some(second..second + 8));
        let v: serde_json::Value = serde_json::from_slice(&meta).unwrap();
        assert_eq!(v["event"]["audio"], "AAAA");
        assert_eq!(v["event"]["x"]["audio_b64_chars"], 8);
        let [searched, _] = append_lines(frame, None);
        let v: serde_json::Value = serde_json::from_slice(&searched).unwrap();
        assert_eq!(v["event"]["audio_b64_chars"], 4);
    }

    #[test]
    fn meta_mode_finds_audio_written_with_spaces() {
        let frame = r#"{"type": "response.output_audio.delta", "delta": "AAAA", "item_id": "x"}"#;
        let v = line(
            frame,
            Payload::Json {
                audio_key: Some("delta"),
            },
            true,
        );
        assert_eq!(v["event"]["delta"], serde_json::Value::Null);
        assert_eq!(v["event"]["audio_b64_chars"], 4);
        assert_eq!(v["event"]["item_id"], "x");
        // The key's name as a value first, then the key itself.
        let named = r#"{"type":"t","name":"delta","delta" :"AAAAAA"}"#;
        let v = line(
            named,
            Payload::Json {
                audio_key: Some("delta"),
            },
            true,
        );
        assert_eq!(
            (&v["event"]["name"], &v["event"]["audio_b64_chars"]),
            (&"delta".into(), &6.into())
        );
        let text = r#"{"type":"response.output_audio_transcript.delta","delta":"hi"}"#;
        assert_eq!(
            line(text, Payload::Json { audio_key: None }, true)["event"]["delta"],
            "hi"
        );
    }

    #[test]
    fn frames_with_line_breaks_or_not_json_stay_one_valid_line() {
        let pretty = "{\n  \"type\": \"session.created\"\n}";
        assert_eq!(
            line(pretty, Payload::Json { audio_key: None }, false)["event"]["type"],
            "session.created"
        );
        let junk = "not json\nat all";
        assert_eq!(line(junk, Payload::Text, false)["event"], junk);
        // A pretty-printed delta in a meta trace: its audio left out, the rest made compact.
        let delta = "{\n  \"type\": \"response.output_audio.delta\",\n  \"delta\": \"AAAA\"\n}";
        let v = line(
            delta,
            Payload::Json {
                audio_key: Some("delta"),
            },
            true,
        );
        assert_eq!(v["event"]["type"], "response.output_audio.delta");
        assert_eq!(v["event"]["delta"], serde_json::Value::Null);
        assert_eq!(v["event"]["audio_b64_chars"], 4);
        let broken = "{\"type\":\"x\",\n\"audio\":\"AAAA\"";
        assert_eq!(
            line(broken, APPEND, true)["event"],
            broken.replace("\"AAAA\"", "null,\"audio_b64_chars\":4,\"audio_bytes\":3")
        );
    }

    #[test]
    fn meta_lines_give_the_exact_bytes_the_audio_decodes_to() {
        use base64::Engine as _;
        for len in [0, 1, 2, 3, 4, 2560] {
            let b64 = base64::engine::general_purpose::STANDARD.encode(vec![7u8; len]);
            let unpadded = b64.trim_end_matches('=');
            for value in [b64.as_str(), unpadded] {
                let frame = format!(r#"{{"type":"t","audio":"{value}"}}"#);
                let v = line(&frame, APPEND, true);
                assert_eq!(v["event"]["audio_b64_chars"], value.len(), "{value}");
                assert_eq!(v["event"]["audio_bytes"], len, "{value}");
            }
        }
    }

    #[test]
    fn meta_lines_keep_the_frame_byte_for_byte_around_the_audio() {
        let frame = r#"{"type":"input_audio_buffer.append","audio" : "QUJDRA==","seq":3}"#;
        let mut out = Vec::new();
        trace_line(&mut out, Direction::Send, 2.0, frame, APPEND, true);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"direction\":\"send\",\"time_s\":2.000000,\"event\":{\"type\":\"input_audio_buffer.append\",\"audio\":null,\"audio_b64_chars\":8,\"audio_bytes\":4,\"seq\":3}}\n"
        );
    }

    #[test]
    fn seconds_are_written_with_six_decimals() {
        let mut out = Vec::new();
        push_seconds(&mut out, 81234.5678904);
        out.push(b' ');
        push_seconds(&mut out, 0.0000004);
        assert_eq!(String::from_utf8(out).unwrap(), "81234.567890 0.000000");
    }

    #[test]
    fn seconds_round_to_the_microsecond_as_f64_round_does() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let halves = [0.0000005, 2.5e-6, 81234.0000005, 1.0 / 3.0, 4503.5999995];
        let random = (0..20_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 * 200_000.0
        });
        for seconds in halves.into_iter().chain(random) {
            let us = (seconds * 1e6).round() as u64;
            let expected = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
            let mut out = Vec::new();
            push_seconds(&mut out, seconds);
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{seconds:e}");
        }
    }

    #[test]
    fn integers_and_ids_are_written_as_the_formatter_would() {
        for n in [0u64, 7, 10, 0xabc, 1 << 40, u64::MAX] {
            let (mut dec, mut hex, mut secs) = (Vec::new(), Vec::new(), Vec::new());
            push_int(&mut dec, n);
            push_hex16(&mut hex, n);
            let mut hex_str = String::new();
            push_hex16_str(&mut hex_str, n);
            assert_eq!(hex_str.as_bytes(), hex);
            let s = (n % 10_000_000_000) as f64 / 1e6;
            push_seconds(&mut secs, s);
            assert_eq!(dec, n.to_string().into_bytes());
            assert_eq!(hex, format!("{n:016x}").into_bytes());
            assert_eq!(secs, format!("{s:.6}").into_bytes(), "{s}");
        }
        let mut neg = Vec::new();
        push_int(&mut neg, -42i64);
        assert_eq!(neg, b"-42");
    }

    #[test]
    fn receipts_file_is_json_in_the_seed_shape() {
        let r = Receipt {
            event_id: 7,
            seq: 0,
            gate_s: 0.99,
            scheduled_s: 0.99,
            due_s: 1.0,
            start_s: 1.0,
            completed_s: 1.0001,
        };
        let mut out = Vec::new();
        receipts_open(&mut out, r.gate_s);
        receipt_entry(&mut out, &r, true);
        receipt_entry(&mut out, &Receipt { seq: 1, ..r }, false);
        let close = close_frame(1.5, Some((1000, "bye \"now\"")));
        receipts_close(&mut out, false, true, Some(&close));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["appends"].as_array().unwrap().len(), 2);
        assert_eq!(v["appends"][1]["seq"], 1);
        // sglang-omni's client's meaning: the session starts at its gate, packets are
        // scheduled from it, and the receipts say whether the server let the session in.
        assert_eq!(v["session_start_s"], 0.99);
        assert_eq!(v["appends"][0]["scheduled_s"], 0.99);
        assert_eq!(v["admitted"], true);
        // The server's close frame is kept here, not as a trace line: sglang-omni's trace
        // checker allows only send, receive, error and admission lines.
        assert_eq!(v["close"]["time_s"], 1.5);
        assert_eq!(v["close"]["code"], 1000);
        assert_eq!(v["close"]["reason"], "bye \"now\"");
        let mut empty = Vec::new();
        receipts_close(&mut empty, true, false, None);
        let v: serde_json::Value = serde_json::from_slice(&empty).unwrap();
        assert!(v["session_start_s"].is_null());
        assert_eq!(v["admitted"], false);
        assert!(v["close"].is_null());
        let codeless: serde_json::Value = serde_json::from_str(&close_frame(2.0, None)).unwrap();
        assert!(codeless["code"].is_null());
    }
}
