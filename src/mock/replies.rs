//! The frames the mock sends (SPEC §4), written with `write!` into one buffer per frame.
//!
//! The mock must answer 1024 sessions × 12.5 appends/s on one thread with little CPU, so nothing
//! here goes through a JSON serialiser: the parts that never change (the granted terms, 80 ms of
//! silence in base64) are built once per process, the frames that never change within a session
//! (its audio and transcript deltas) once per session and then shared by reference count, and only
//! the small per-unit frames are formatted per event.

use crate::cli::MockBehaviourArgs;
use crate::protocol::{names, BYTES_PER_SAMPLE, INPUT_SAMPLE_RATE};
use base64::Engine as _;
use std::fmt::Write as _;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// The unit the mock produces output in, and the boundary the tail is padded to.
pub const UNIT_MS: u64 = 80;
pub const MODEL: &str = "duplexbench-mock";
/// Stated in the granted limits; the mock does not enforce it (a benchmark session ends itself).
pub const SESSION_TIMEOUT_S: u32 = 240;
/// Largest decoded audio in one append: 2 s of 16 kHz PCM16, twice the largest `--packet-ms`.
pub const MAX_APPEND_BYTES: usize = 2 * INPUT_SAMPLE_RATE as usize * BYTES_PER_SAMPLE;
/// Largest WebSocket message read; a larger one ends only its own session.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// The text of every transcript delta (its content does not matter to a benchmark).
const TRANSCRIPT_TEXT: &str = "…";

/// What the mock was told to do, and the text every session's frames share.
#[derive(Debug)]
pub struct Templates {
    pub replies_per_append: u32,
    pub burst_units: u32,
    /// 80 ms of PCM16 silence at the output rate, in base64: the `delta` of every audio delta.
    silence_b64: String,
    /// The `granted` object of `session.updated`.
    granted_json: String,
}

impl Templates {
    pub fn new(behaviour: &MockBehaviourArgs) -> Self {
        let samples = behaviour.output_sample_rate as usize * UNIT_MS as usize / 1000;
        let silence = vec![0u8; samples * BYTES_PER_SAMPLE];
        let silence_b64 = base64::engine::general_purpose::STANDARD.encode(silence);
        let max_sessions = behaviour
            .max_sessions
            .map_or_else(|| "null".to_string(), |n| n.to_string());
        let granted_json = format!(
            concat!(
                r#"{{"interaction":"native","native_full_duplex":true,"#,
                r#""input_audio_format":{{"type":"audio/pcm","rate":{input_rate}}},"#,
                r#""output_audio_format":{{"type":"audio/pcm","rate":{output_rate}}},"#,
                r#""native_unit_ms":{unit_ms},"tail_policy":"pad","client_commit":false,"#,
                r#""pressure_policy":"reject","strict_order":true,"#,
                r#""limits":{{"session_timeout_s":{timeout_s},"max_append_bytes":{append_bytes},"#,
                r#""max_message_bytes":{message_bytes},"max_sessions":{max_sessions}}}}}"#
            ),
            input_rate = INPUT_SAMPLE_RATE,
            output_rate = behaviour.output_sample_rate,
            unit_ms = UNIT_MS,
            timeout_s = SESSION_TIMEOUT_S,
            append_bytes = MAX_APPEND_BYTES,
            message_bytes = MAX_MESSAGE_BYTES,
            max_sessions = max_sessions,
        );
        Templates {
            replies_per_append: behaviour.replies_per_append,
            burst_units: behaviour.burst_units.max(1),
            silence_b64,
            granted_json,
        }
    }
}

/// The input span one output unit covers (one unit per accepted append).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitSpan {
    pub index: u64,
    pub t_start_ms: u64,
    pub duration_ms: f64,
}

/// The frames of one session's response that repeat unchanged for every unit.
#[derive(Debug)]
pub struct ResponseFrames {
    response_id: String,
    item_id: String,
    audio_delta: Utf8Bytes,
    transcript_delta: Utf8Bytes,
}

impl ResponseFrames {
    pub fn new(templates: &Templates, session_number: u64) -> Self {
        let response_id = format!("resp_{session_number:06}");
        let item_id = format!("item_{session_number:06}");
        let head = |kind: &str, extra: usize| {
            let mut out = String::with_capacity(160 + extra);
            let _ = write!(
                out,
                r#"{{"type":"{kind}","response_id":"{response_id}","item_id":"{item_id}","output_index":0,"content_index":0,"delta":""#
            );
            out
        };
        let mut audio = head(names::AUDIO_DELTA, templates.silence_b64.len());
        audio.push_str(&templates.silence_b64);
        audio.push_str("\"}");
        let mut text = head(names::TRANSCRIPT_DELTA, TRANSCRIPT_TEXT.len());
        text.push_str(TRANSCRIPT_TEXT);
        text.push_str("\"}");
        ResponseFrames {
            response_id,
            item_id,
            audio_delta: Utf8Bytes::from(audio),
            transcript_delta: Utf8Bytes::from(text),
        }
    }

    pub fn created(&self, event_id: &str) -> Utf8Bytes {
        Utf8Bytes::from(format!(
            r#"{{"type":"{}","event_id":"{event_id}","response":{{"id":"{}","object":"realtime.response","status":"in_progress","output_modalities":["audio"]}}}}"#,
            names::RESPONSE_CREATED,
            self.response_id
        ))
    }

    pub fn audio_done(&self, event_id: &str) -> Utf8Bytes {
        Utf8Bytes::from(format!(
            r#"{{"type":"{}","event_id":"{event_id}","response_id":"{}","item_id":"{}","output_index":0,"content_index":0}}"#,
            names::AUDIO_DONE,
            self.response_id,
            self.item_id
        ))
    }

    pub fn done(&self, event_id: &str) -> Utf8Bytes {
        Utf8Bytes::from(format!(
            r#"{{"type":"{}","event_id":"{event_id}","response":{{"id":"{}","object":"realtime.response","status":"completed"}}}}"#,
            names::RESPONSE_DONE,
            self.response_id
        ))
    }

    /// Appends the `replies` events of one unit: the audio delta first (from two replies on), the
    /// transcript deltas between, `sglang.unit.done` last (from one reply on).
    pub fn push_unit(&self, replies: u32, unit: &UnitSpan, out: &mut Vec<Utf8Bytes>) {
        if replies == 0 {
            return;
        }
        if replies >= 2 {
            out.push(self.audio_delta.clone());
        }
        for _ in 2..replies {
            out.push(self.transcript_delta.clone());
        }
        out.push(unit_done(unit));
    }
}

pub fn unit_done(unit: &UnitSpan) -> Utf8Bytes {
    let k = unit.index;
    Utf8Bytes::from(format!(
        r#"{{"type":"{}","unit_id":"unit_{k}","sglang":{{"unit_id":"unit_{k}","chunk_seq":{k},"media_time":{{"t_start_ms":{},"duration_ms":{}}}}}}}"#,
        names::UNIT_DONE,
        unit.t_start_ms,
        unit.duration_ms
    ))
}

pub fn session_created(event_id: &str, session_id: &str) -> Utf8Bytes {
    Utf8Bytes::from(format!(
        r#"{{"type":"{}","event_id":"{event_id}","session":{{"id":"{session_id}","object":"realtime.session","model":"{MODEL}","sglang":{{"granted":null}}}}}}"#,
        names::SESSION_CREATED
    ))
}

pub fn session_updated(
    templates: &Templates,
    event_id: &str,
    client_event_id: Option<&str>,
    session_id: &str,
) -> Utf8Bytes {
    let mut out = String::with_capacity(templates.granted_json.len() + 256);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","client_event_id":"#,
        names::SESSION_UPDATED
    );
    push_json_str(&mut out, client_event_id);
    let _ = write!(
        out,
        r#","session":{{"id":"{session_id}","object":"realtime.session","model":"{MODEL}","output_modalities":["audio"],"sglang":{{"granted":"#
    );
    out.push_str(&templates.granted_json);
    out.push_str("}}}");
    Utf8Bytes::from(out)
}

pub fn accepted(seq: u64, accepted_end_ms: f64, client_event_id: Option<&str>) -> Utf8Bytes {
    let mut out = String::with_capacity(128);
    let _ = write!(
        out,
        r#"{{"type":"{}","seq":{seq},"accepted_end_ms":{accepted_end_ms},"client_event_id":"#,
        names::ACCEPTED
    );
    push_json_str(&mut out, client_event_id);
    out.push('}');
    Utf8Bytes::from(out)
}

pub fn input_ended(
    event_id: &str,
    client_event_id: Option<&str>,
    accepted_end_ms: f64,
) -> Utf8Bytes {
    let mut out = String::with_capacity(160);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","client_event_id":"#,
        names::INPUT_ENDED
    );
    push_json_str(&mut out, client_event_id);
    let _ = write!(
        out,
        r#","accepted_end_ms":{accepted_end_ms},"tail_policy":"pad"}}"#
    );
    Utf8Bytes::from(out)
}

/// What `sglang.input_audio.drained` reports about the input of a session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drained {
    pub accepted_end_ms: f64,
    pub consumed_ms: f64,
    pub padding_ms: f64,
}

pub fn input_drained(event_id: &str, drained: &Drained) -> Utf8Bytes {
    Utf8Bytes::from(format!(
        r#"{{"type":"{}","event_id":"{event_id}","accepted_end_ms":{},"consumed_ms":{},"discarded_ms":0,"padding_ms":{}}}"#,
        names::INPUT_DRAINED,
        drained.accepted_end_ms,
        drained.consumed_ms,
        drained.padding_ms
    ))
}

pub fn session_closed(event_id: &str) -> Utf8Bytes {
    Utf8Bytes::from(format!(
        r#"{{"type":"{}","event_id":"{event_id}","reason":"client_closed"}}"#,
        names::SESSION_CLOSED
    ))
}

/// The `code` of an `error` event: one per way a client can get the protocol wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidJson,
    BinaryNotSupported,
    UnknownEvent,
    SessionNotConfigured,
    SeqOutOfOrder,
    MissingField,
    InvalidAudio,
    AppendTooLarge,
    InputEnded,
    MessageTooLarge,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::BinaryNotSupported => "binary_not_supported",
            ErrorCode::UnknownEvent => "unknown_event",
            ErrorCode::SessionNotConfigured => "session_not_configured",
            ErrorCode::SeqOutOfOrder => "seq_out_of_order",
            ErrorCode::MissingField => "missing_field",
            ErrorCode::InvalidAudio => "invalid_audio",
            ErrorCode::AppendTooLarge => "append_too_large",
            ErrorCode::InputEnded => "input_ended",
            ErrorCode::MessageTooLarge => "message_too_large",
        }
    }
}

pub fn error(
    event_id: &str,
    code: ErrorCode,
    message: &str,
    client_event_id: Option<&str>,
    fatal: bool,
) -> Utf8Bytes {
    let mut out = String::with_capacity(200 + message.len());
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","sglang":{{"fatal":{fatal}}},"error":{{"type":"invalid_request_error","code":"{}","message":"#,
        names::ERROR,
        code.as_str()
    );
    push_json_str(&mut out, Some(message));
    out.push_str(r#","event_id":"#);
    push_json_str(&mut out, client_event_id);
    out.push_str("}}");
    Utf8Bytes::from(out)
}

/// Writes `text` as a JSON string (or `null`). Client event ids are short hex in practice, so the
/// plain copy is the common path; anything that needs escaping goes through serde_json.
fn push_json_str(out: &mut String, text: Option<&str>) {
    let Some(text) = text else {
        out.push_str("null");
        return;
    };
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        match serde_json::to_string(text) {
            Ok(escaped) => out.push_str(&escaped),
            // Serialising a &str cannot fail; null keeps the frame valid if it ever did.
            Err(_) => out.push_str("null"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn templates(replies_per_append: u32) -> Templates {
        Templates::new(&MockBehaviourArgs {
            replies_per_append,
            burst_units: 1,
            output_sample_rate: 22_050,
            max_sessions: None,
        })
    }

    fn json(frame: &Utf8Bytes) -> Value {
        serde_json::from_str(frame.as_str()).unwrap()
    }

    fn kinds_of_unit_replies(replies: u32) -> Vec<String> {
        let t = templates(replies);
        let frames = ResponseFrames::new(&t, 7);
        let mut out = Vec::new();
        let unit = UnitSpan {
            index: 4,
            t_start_ms: 320,
            duration_ms: 80.0,
        };
        frames.push_unit(replies, &unit, &mut out);
        out.iter()
            .map(|f| json(f)["type"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn unit_replies_have_the_requested_count_and_order() {
        let audio = names::AUDIO_DELTA.to_string();
        let text = names::TRANSCRIPT_DELTA.to_string();
        let done = names::UNIT_DONE.to_string();
        assert!(kinds_of_unit_replies(0).is_empty());
        assert_eq!(kinds_of_unit_replies(1), vec![done.clone()]);
        assert_eq!(kinds_of_unit_replies(2), vec![audio.clone(), done.clone()]);
        assert_eq!(
            kinds_of_unit_replies(3),
            vec![audio.clone(), text.clone(), done.clone()]
        );
        let six = kinds_of_unit_replies(6);
        assert_eq!(six.len(), 6);
        assert_eq!(six[0], audio);
        assert!(six[1..5].iter().all(|k| *k == text));
        assert_eq!(six[5], done);
    }

    #[test]
    fn audio_delta_is_80ms_of_silence_at_the_output_rate() {
        let frames = ResponseFrames::new(&templates(3), 1);
        let v = json(&frames.audio_delta);
        let pcm = base64::engine::general_purpose::STANDARD
            .decode(v["delta"].as_str().unwrap())
            .unwrap();
        assert_eq!(pcm.len(), 22_050 * 80 / 1000 * 2);
        assert!(pcm.iter().all(|&b| b == 0));
        assert_eq!(v["response_id"], "resp_000001");
        assert_eq!(v["output_index"], 0);
        assert_eq!(v["content_index"], 0);
    }

    #[test]
    fn unit_done_carries_its_media_time() {
        let v = json(&unit_done(&UnitSpan {
            index: 3,
            t_start_ms: 240,
            duration_ms: 31.25,
        }));
        assert_eq!(v["unit_id"], "unit_3");
        assert_eq!(v["sglang"]["unit_id"], "unit_3");
        assert_eq!(v["sglang"]["chunk_seq"], 3);
        assert_eq!(v["sglang"]["media_time"]["t_start_ms"], 240);
        assert_eq!(v["sglang"]["media_time"]["duration_ms"], 31.25);
    }

    #[test]
    fn session_updated_states_the_granted_terms() {
        let v = json(&session_updated(
            &templates(3),
            "evt_1",
            Some("c1"),
            "sess_1",
        ));
        assert_eq!(v["client_event_id"], "c1");
        assert_eq!(v["session"]["output_modalities"][0], "audio");
        let g = &v["session"]["sglang"]["granted"];
        assert_eq!(g["interaction"], "native");
        assert_eq!(g["native_full_duplex"], true);
        assert_eq!(g["input_audio_format"]["rate"], 16_000);
        assert_eq!(g["output_audio_format"]["rate"], 22_050);
        assert_eq!(g["native_unit_ms"], 80);
        assert_eq!(g["tail_policy"], "pad");
        assert_eq!(g["client_commit"], false);
        assert_eq!(g["pressure_policy"], "reject");
        assert_eq!(g["strict_order"], true);
        assert_eq!(g["limits"]["session_timeout_s"], 240);
        assert_eq!(g["limits"]["max_append_bytes"], 64_000);
    }

    #[test]
    fn client_strings_are_escaped() {
        let v = json(&accepted(2, 240.0, Some("a\"b\\c\n")));
        assert_eq!(v["client_event_id"], "a\"b\\c\n");
        let v = json(&error(
            "e",
            ErrorCode::InvalidJson,
            "bad \"x\"",
            None,
            false,
        ));
        assert_eq!(v["error"]["message"], "bad \"x\"");
        assert_eq!(v["error"]["code"], "invalid_json");
        assert_eq!(v["error"]["event_id"], Value::Null);
        assert_eq!(v["sglang"]["fatal"], false);
    }

    #[test]
    fn every_fixed_frame_is_valid_json() {
        let t = templates(3);
        let r = ResponseFrames::new(&t, 2);
        let drained = Drained {
            accepted_end_ms: 360.0,
            consumed_ms: 400.0,
            padding_ms: 40.0,
        };
        for frame in [
            session_created("e", "s"),
            r.created("e"),
            r.audio_done("e"),
            r.done("e"),
            r.transcript_delta.clone(),
            input_ended("e", None, 360.0),
            input_drained("e", &drained),
            session_closed("e"),
        ] {
            json(&frame);
        }
    }
}
