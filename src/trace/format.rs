//! How trace lines, receipts and samples are laid out on disk (SPEC §6, docs/files.md).
//!
//! A frame is encoded once, when it is sent or as it arrived; a trace line only wraps it.

use super::Receipt;
use std::borrow::Cow;
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

/// Appends one trace line: `{"direction":…,"time_s":…,"event":<payload>}\n`. With `meta`, audio
/// payloads are replaced by their length.
pub fn trace_line(out: &mut Vec<u8>, direction: Direction, time_s: f64, payload: &str, meta: bool) {
    let event = if meta {
        strip_audio(payload)
    } else {
        Cow::Borrowed(payload)
    };
    let _ = write!(
        out,
        r#"{{"direction":"{}","time_s":{time_s:.6},"event":"#,
        direction.as_str()
    );
    out.extend_from_slice(event.as_bytes());
    out.extend_from_slice(b"}\n");
}

/// A JSON string literal (for error messages that go into trace lines).
pub fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// Replaces the base64 audio of an append (`"audio"`) or of an audio delta (`"delta"` in
/// `response.output_audio.delta`) with `null` plus an `audio_b64_chars` count. Base64 holds no
/// quote or backslash, so the value ends at the next quote.
pub fn strip_audio(payload: &str) -> Cow<'_, str> {
    let key = if payload.contains(r#""type":"input_audio_buffer.append""#) {
        r#""audio":""#
    } else if payload.contains(r#""type":"response.output_audio.delta""#) {
        r#""delta":""#
    } else {
        return Cow::Borrowed(payload);
    };
    let Some(start) = payload.find(key) else {
        return Cow::Borrowed(payload);
    };
    let value_start = start + key.len();
    let Some(len) = payload[value_start..].find('"') else {
        return Cow::Borrowed(payload);
    };
    let name = &key[..key.len() - 1]; // `"audio":` without the opening quote of the value
    let mut out = String::with_capacity(payload.len() - len + 32);
    out.push_str(&payload[..start]);
    out.push_str(name);
    out.push_str("null,\"audio_b64_chars\":");
    out.push_str(&len.to_string());
    out.push_str(&payload[value_start + len + 1..]);
    Cow::Owned(out)
}

/// The opening of a receipts file, written with the first append.
pub fn receipts_open(out: &mut Vec<u8>, session_start_s: f64) {
    let _ = write!(
        out,
        r#"{{"session_start_s":{session_start_s:.6},"appends":["#
    );
}

/// One entry of a receipts file's `appends` (preceded by a comma unless it is the first).
pub fn receipt_entry(out: &mut Vec<u8>, r: &Receipt, first: bool) {
    if !first {
        out.push(b',');
    }
    let _ = write!(
        out,
        r#"{{"event_id":"{:016x}","seq":{},"scheduled_s":{:.6},"start_s":{:.6},"completed_s":{:.6}}}"#,
        r.event_id, r.seq, r.scheduled_s, r.start_s, r.completed_s
    );
}

/// The end of a receipts file; `empty` when the session sent no append.
pub fn receipts_close(out: &mut Vec<u8>, empty: bool) {
    if empty {
        out.extend_from_slice(br#"{"session_start_s":null,"appends":[]}"#);
    } else {
        out.extend_from_slice(b"]}");
    }
    out.push(b'\n');
}

/// The header of a worker's samples file.
pub const SAMPLES_HEADER: &str =
    "worker,session,seq,scheduled_s,start_s,completed_s,deviation_us,websocket_send_us,append_span_us\n";

/// One packet in a worker's samples file.
pub fn sample_line(out: &mut Vec<u8>, worker: u32, session: u32, r: &Receipt) {
    let deviation_us = ((r.start_s - r.scheduled_s) * 1e6).round() as i64;
    let send_us = ((r.completed_s - r.start_s) * 1e6).round() as i64;
    let span_us = ((r.completed_s - r.scheduled_s) * 1e6).round() as i64;
    let _ = writeln!(
        out,
        "{worker},{session},{},{:.6},{:.6},{:.6},{deviation_us},{send_us},{span_us}",
        r.seq, r.scheduled_s, r.start_s, r.completed_s
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_mode_drops_append_audio_and_keeps_valid_json() {
        let frame = r#"{"type":"input_audio_buffer.append","event_id":"01","audio":"QUJDRA==","sglang":{"seq":0,"t_start_ms":0}}"#;
        let mut out = Vec::new();
        trace_line(&mut out, Direction::Send, 1.5, frame, true);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["direction"], "send");
        assert_eq!(v["event"]["audio"], serde_json::Value::Null);
        assert_eq!(v["event"]["audio_b64_chars"], 8);
        assert_eq!(v["event"]["sglang"]["seq"], 0);
    }

    #[test]
    fn meta_mode_keeps_text_deltas() {
        let frame = r#"{"type":"response.output_audio_transcript.delta","delta":"hi"}"#;
        assert_eq!(strip_audio(frame), frame);
        let audio = r#"{"type":"response.output_audio.delta","delta":"AAAA","item_id":"x"}"#;
        let v: serde_json::Value = serde_json::from_str(&strip_audio(audio)).unwrap();
        assert_eq!(v["delta"], serde_json::Value::Null);
        assert_eq!(v["item_id"], "x");
    }

    #[test]
    fn receipts_file_is_json_in_the_seed_shape() {
        let r = Receipt {
            event_id: 7,
            seq: 0,
            scheduled_s: 1.0,
            start_s: 1.0,
            completed_s: 1.0001,
        };
        let mut out = Vec::new();
        receipts_open(&mut out, 1.0);
        receipt_entry(&mut out, &r, true);
        receipt_entry(&mut out, &Receipt { seq: 1, ..r }, false);
        receipts_close(&mut out, false);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["appends"].as_array().unwrap().len(), 2);
        assert_eq!(v["appends"][1]["seq"], 1);
        let mut empty = Vec::new();
        receipts_close(&mut empty, true);
        let v: serde_json::Value = serde_json::from_slice(&empty).unwrap();
        assert!(v["session_start_s"].is_null());
    }
}
