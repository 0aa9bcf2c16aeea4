//! The native full-duplex session protocol (SPEC §4): event names, the frames a client sends and
//! the parts of server events it reads.
//!
//! This module is the one seam between the tool and a wire protocol. The client session
//! (`worker::session`) and the mock (`mock`) speak only through it, so another realtime protocol
//! (OpenAI Realtime, vLLM, Fun-ASR) can be added beside it without touching pacing or tracing.

use serde::Deserialize;
use std::borrow::Cow;
use std::fmt::Write as _;

/// The path the native protocol is served on.
pub const PATH: &str = "/v1/realtime";

pub mod names {
    pub const SESSION_CREATED: &str = "session.created";
    pub const SESSION_UPDATE: &str = "session.update";
    pub const SESSION_UPDATED: &str = "session.updated";
    pub const APPEND: &str = "input_audio_buffer.append";
    pub const ACCEPTED: &str = "sglang.input_audio.accepted";
    pub const AUDIO_DELTA: &str = "response.output_audio.delta";
    pub const TRANSCRIPT_DELTA: &str = "response.output_audio_transcript.delta";
    pub const TEXT_DELTA: &str = "response.output_text.delta";
    pub const UNIT_DONE: &str = "sglang.unit.done";
    pub const RESPONSE_CREATED: &str = "response.created";
    pub const AUDIO_DONE: &str = "response.output_audio.done";
    pub const RESPONSE_DONE: &str = "response.done";
    pub const INPUT_END: &str = "sglang.input_audio.end";
    pub const INPUT_ENDED: &str = "sglang.input_audio.ended";
    pub const INPUT_DRAINED: &str = "sglang.input_audio.drained";
    pub const SESSION_CLOSE: &str = "session.close";
    pub const SESSION_CLOSED: &str = "session.closed";
    pub const ERROR: &str = "error";
}

/// Input audio format of the native protocol: 16 kHz mono PCM16 little-endian.
pub const INPUT_SAMPLE_RATE: u32 = 16_000;
pub const BYTES_PER_SAMPLE: usize = 2;

/// Bytes of PCM16 input audio in a packet of `packet_ms`.
pub fn input_packet_bytes(packet_ms: u32) -> usize {
    (INPUT_SAMPLE_RATE as usize * packet_ms as usize / 1000) * BYTES_PER_SAMPLE
}

/// A run-unique event id in hex: worker, session and sequence number packed in 64 bits.
pub fn event_id(worker: u32, session: u32, seq: u32) -> u64 {
    (u64::from(worker & 0xffff) << 48) | (u64::from(session & 0xffff) << 32) | u64::from(seq)
}

/// The `session.update` a client sends after `session.created`.
pub fn session_update(event_id: u64) -> String {
    format!(
        r#"{{"type":"{}","event_id":"{event_id:016x}","session":{{"output_modalities":["audio"]}}}}"#,
        names::SESSION_UPDATE
    )
}

/// An `input_audio_buffer.append` frame. `audio_b64` is the already-encoded packet, so a frame
/// costs no JSON serialisation, and exactly one allocation: the buffer is sized to the frame, so
/// that handing it to the WebSocket (as `Bytes`) does not copy it again.
pub fn append_frame(event_id: u64, seq: u32, t_start_ms: u64, audio_b64: &str) -> String {
    const HEAD: &str = concat!(
        r#"{"type":""#,
        "input_audio_buffer.append",
        r#"","event_id":""#
    );
    const AUDIO: &str = r#"","audio":""#;
    const SEQ: &str = r#"","sglang":{"seq":"#;
    const T_START: &str = r#","t_start_ms":"#;
    const TAIL: &str = "}}";
    let len = HEAD.len()
        + 16
        + AUDIO.len()
        + audio_b64.len()
        + SEQ.len()
        + decimal_digits(u64::from(seq))
        + T_START.len()
        + decimal_digits(t_start_ms)
        + TAIL.len();
    let mut out = String::with_capacity(len);
    out.push_str(HEAD);
    // Writing into a String cannot fail.
    let _ = write!(out, "{event_id:016x}");
    out.push_str(AUDIO);
    out.push_str(audio_b64);
    out.push_str(SEQ);
    let _ = write!(out, "{seq}");
    out.push_str(T_START);
    let _ = write!(out, "{t_start_ms}");
    out.push_str(TAIL);
    debug_assert_eq!(out.len(), len);
    out
}

fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The `sglang.input_audio.end` a client sends after its last packet.
pub fn input_end(event_id: u64) -> String {
    format!(
        r#"{{"type":"{}","event_id":"{event_id:016x}"}}"#,
        names::INPUT_END
    )
}

/// The `session.close` a client sends after `drained`.
pub fn session_close(event_id: u64) -> String {
    format!(
        r#"{{"type":"{}","event_id":"{event_id:016x}"}}"#,
        names::SESSION_CLOSE
    )
}

/// The fields of a server event the client reads. Everything else, audio payloads included, is
/// skipped without being copied.
#[derive(Debug, Deserialize)]
pub struct ServerEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    /// `sglang.input_audio.accepted`: the sequence number accepted.
    #[serde(default)]
    pub seq: Option<u64>,
    #[serde(default)]
    pub sglang: Option<ServerSglang>,
    #[serde(default, borrow)]
    pub error: Option<ErrorBody<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct ServerSglang {
    /// `sglang.unit.done`: the input span the unit covers.
    #[serde(default)]
    pub media_time: Option<MediaTime>,
    /// `error`: whether the server ends the session.
    #[serde(default)]
    pub fatal: Option<bool>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct MediaTime {
    pub t_start_ms: f64,
    pub duration_ms: f64,
}

#[derive(Debug, Deserialize)]
pub struct ErrorBody<'a> {
    #[serde(default, borrow)]
    pub code: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub message: Option<Cow<'a, str>>,
}

/// Parses the parts of a server event the client needs.
pub fn parse_server_event(text: &str) -> Result<ServerEvent<'_>, serde_json::Error> {
    serde_json::from_str(text)
}

/// The fields of a client event the mock reads.
#[derive(Debug, Deserialize)]
pub struct ClientEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub event_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub audio: Option<Cow<'a, str>>,
    #[serde(default)]
    pub sglang: Option<ClientSglang>,
}

#[derive(Debug, Deserialize)]
pub struct ClientSglang {
    #[serde(default)]
    pub seq: Option<u64>,
    #[serde(default)]
    pub t_start_ms: Option<u64>,
}

/// Parses the parts of a client event the mock needs.
pub fn parse_client_event(text: &str) -> Result<ClientEvent<'_>, serde_json::Error> {
    serde_json::from_str(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_frame_is_valid_json_with_the_spec_fields() {
        let out = append_frame(event_id(1, 2, 3), 3, 240, "AAAA");
        assert_eq!(
            out.capacity(),
            out.len(),
            "sized exactly, so Bytes can take it as it is"
        );
        assert_eq!(names::APPEND, "input_audio_buffer.append");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["type"], names::APPEND);
        assert_eq!(v["event_id"], "0001000200000003");
        assert_eq!(v["audio"], "AAAA");
        assert_eq!(v["sglang"]["seq"], 3);
        assert_eq!(v["sglang"]["t_start_ms"], 240);
        let parsed = parse_client_event(&out).unwrap();
        assert_eq!(parsed.sglang.unwrap().seq, Some(3));
    }

    #[test]
    fn server_event_parse_skips_audio_and_reads_unit_times() {
        let text = r#"{"type":"sglang.unit.done","unit_id":"unit_4","sglang":{"unit_id":"unit_4","chunk_seq":4,"media_time":{"t_start_ms":320,"duration_ms":80}}}"#;
        let ev = parse_server_event(text).unwrap();
        assert_eq!(ev.kind, names::UNIT_DONE);
        let mt = ev.sglang.unwrap().media_time.unwrap();
        assert_eq!((mt.t_start_ms, mt.duration_ms), (320.0, 80.0));
    }

    #[test]
    fn packet_of_80ms_is_2560_bytes() {
        assert_eq!(input_packet_bytes(80), 2560);
    }
}
