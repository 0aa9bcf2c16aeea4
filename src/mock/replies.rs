//! The frames the mock sends (docs/protocol-native.md), written with `write!` into one
//! buffer per frame.
//!
//! The mock must answer 1024 sessions × 12.5 appends/s on one thread with little CPU, so nothing
//! here goes through a JSON serialiser: the silence of one unit is encoded in base64 once per
//! process, and each frame is formatted straight into a buffer of its size. Every frame carries
//! its own `event_id`, so even the audio deltas are formatted per event: a copy of the silence,
//! which costs far less than encoding it.

use crate::cli::MockBehaviourArgs;
use crate::profile::{self, Profile};
use crate::protocol::{names, BYTES_PER_SAMPLE};
use base64::Engine as _;
use std::fmt::Write as _;
use tokio_tungstenite::tungstenite::Utf8Bytes;

mod response;

pub use response::ResponseFrames;

pub const MODEL: &str = "duplexbench-mock";
/// The input a session may hold unprocessed (sglang-omni's `MAX_BUFFERED_INPUT_S`), in seconds
/// of 16 kHz PCM16, the rate its `RuntimeLimits` default counts in for every model.
const MAX_BUFFERED_INPUT_S: usize = 60;
/// sglang-omni's `RuntimeLimits` defaults, stated in the grant's `limits`.
/// The image input of a profile that takes it, as sglang-omni's MiniCPM-o deployment grants it
/// with its defaults (`Capabilities.max_image_bytes`; the vision config's 4 frames a unit at
/// one slice, up to 9 slices).
pub const MAX_IMAGE_BYTES: usize = 512 * 1024;
pub const MAX_FRAMES_PER_UNIT: u32 = 4;
const MAX_SLICE_NUMS: u32 = 9;
/// How many units past those its pending input starts a frame may be for (the server's
/// `MAX_FRAME_LOOKAHEAD_UNITS`).
pub const FRAME_LOOKAHEAD_UNITS: u64 = 2;
const MAX_OUTPUT_BYTES: usize = 4 << 20;
const MAX_OUTPUT_EVENTS: usize = 256;
const MAX_HISTORY_CHARS: usize = 65_536;
const CLEANUP_TIMEOUT_S: u32 = 30;
/// Largest WebSocket message read; a larger one ends only its own session.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// The text of every text delta (its content does not matter to a benchmark).
const TEXT: &str = "…";

/// What the mock was told to do, and what every session's frames share.
#[derive(Debug)]
pub struct Templates {
    pub profile: Profile,
    pub replies_per_unit: u32,
    pub burst_units: u32,
    /// The profile's native unit, in ms and in bytes of input.
    pub unit_ms: u32,
    pub unit_input_bytes: u64,
    /// The profile's input rate, and its PCM16 bytes per ms (a whole number: 32 at 16 kHz, 48
    /// at 24 kHz).
    pub input_rate: u32,
    pub input_bytes_per_ms: u64,
    /// The input a session may hold unprocessed (`limits.max_input_bytes`): sglang-omni's
    /// `RuntimeLimits` default, 60 s at 16 kHz whatever the profile's rate (PersonaPlex passes
    /// no limits of its own: 40 s of its 24 kHz input).
    pub max_input_bytes: usize,
    pub output_sample_rate: u32,
    /// One unit of PCM16 silence at the output rate, in base64: the `delta` of every audio delta
    /// (the padded tail unit included, so the output audio is conserved).
    silence_b64: String,
}

impl Templates {
    pub fn new(behaviour: &MockBehaviourArgs) -> Self {
        let profile = behaviour.profile;
        let unit_ms = profile.unit_ms();
        let output_sample_rate = behaviour
            .output_sample_rate
            .unwrap_or_else(|| profile.output_sample_rate());
        let silence = vec![0u8; profile::unit_output_bytes(unit_ms, output_sample_rate)];
        let input_rate = profile.input_sample_rate();
        let input_bytes_per_ms = u64::from(input_rate) * BYTES_PER_SAMPLE as u64 / 1000;
        Templates {
            profile,
            replies_per_unit: behaviour.replies_per_append,
            burst_units: behaviour.burst_units.max(1),
            unit_ms,
            unit_input_bytes: u64::from(unit_ms) * input_bytes_per_ms,
            input_rate,
            input_bytes_per_ms,
            max_input_bytes: MAX_BUFFERED_INPUT_S
                * crate::protocol::native::INPUT_SAMPLE_RATE as usize
                * BYTES_PER_SAMPLE,
            output_sample_rate,
            silence_b64: base64::engine::general_purpose::STANDARD.encode(silence),
        }
    }

    /// The terms a session asking for `asked` output modalities gets, or the modalities it asked
    /// for that this profile cannot serve. Nothing asked means everything the profile serves.
    pub fn grant(&self, asked: Option<&[std::borrow::Cow<'_, str>]>) -> Result<Grant, String> {
        let served = self.profile.output_modalities();
        let Some(asked) = asked else {
            return Ok(Grant::new(served.to_vec()));
        };
        let mut granted: Vec<&'static str> = Vec::with_capacity(served.len());
        let mut refused: Vec<&str> = Vec::new();
        for modality in asked {
            match served.iter().find(|s| **s == modality.as_ref()) {
                Some(s) if !granted.contains(s) => granted.push(s),
                Some(_) => {}
                None => refused.push(modality.as_ref()),
            }
        }
        if !refused.is_empty() {
            return Err(format!(
                "output_modalities {} cannot be served: this server plays {} and serves output_modalities {}",
                json_list(&refused),
                self.profile.name(),
                json_list(served)
            ));
        }
        if granted.is_empty() {
            return Err(format!(
                "output_modalities is empty: ask for some of {}",
                json_list(served)
            ));
        }
        Ok(Grant::new(granted))
    }

    /// The `granted` object of `session.updated`: every capability, stated, in the keys and
    /// order of sglang-omni's server (`Capabilities.to_granted_capabilities` and its
    /// negotiation: no microturns, an empty `rejections`, since the mock grants what was asked
    /// or refuses). `limits` are sglang-omni's `RuntimeLimits` with their defaults, the input
    /// budget at the profile's input rate (the server's newer keys; an older one also stated
    /// `session_timeout_s` and chunk counts).
    fn granted_json(&self, grant: &Grant) -> String {
        let terms = self.terms_json(&grant.modalities_json, "null");
        format!(r#"{{{terms},"rejections":[]}}"#)
    }

    /// What the deployment serves, as sglang-omni's `GET /v1/realtime/capabilities` states it
    /// before any session (a readiness check its docs give: `curl --fail …/capabilities`): the
    /// model, then the capabilities with every output modality of the profile and
    /// `microturn_ms` `"variable"` (a session's grant says `null`), and the limits.
    pub fn capabilities_json(&self) -> String {
        let served = json_list(self.profile.output_modalities());
        let terms = self.terms_json(&served, r#""variable""#);
        format!(r#"{{"model":"{MODEL}",{terms}}}"#)
    }

    /// The capabilities and limits, without the braces around them.
    fn terms_json(&self, modalities_json: &str, microturn: &str) -> String {
        format!(
            concat!(
                r#""interaction":"native","native_full_duplex":true,"proactive_output":false,"#,
                r#""turn_control":[null],"client_commit":false,"input_modalities":{input_modalities},"#,
                r#""output_modalities":{modalities},"#,
                r#""input_audio_format":{{"type":"audio/pcm","rate":{input_rate}}},"#,
                r#""output_audio_format":{{"type":"audio/pcm","rate":{output_rate}}},"#,
                r#""native_unit_ms":{unit_ms},"first_unit_ms":{unit_ms},"microturn_ms":{microturn},"#,
                r#""tail_policy":"pad","supports_server_interrupt":false,"supports_truncate":false,"#,
                r#""supports_resume":false,"partial_style":"append_only","pressure_policy":"reject","#,
                r#""strict_order":true,{model_terms}"#,
                r#"{image_format}"limits":{{"max_input_bytes":{input_bytes},"max_output_bytes":{output_bytes},"#,
                r#""max_output_events":{output_events},"max_history_chars":{history_chars},"#,
                r#""cleanup_timeout_s":{cleanup_s}}}"#
            ),
            input_modalities = if self.profile.takes_images() {
                r#"["audio","image"]"#
            } else {
                r#"["audio"]"#
            },
            // MiniCPM-o's deployment takes its sampling and a reference voice (sglang-omni's
            // MiniCPM-o page lists them in its capabilities); the mock takes and ignores them.
            model_terms = if self.profile.takes_images() {
                concat!(
                    r#""sampling_parameters":["greedy","temperature","top_k","top_p","repetition_penalty","#,
                    r#""listen_prob_scale","force_listen_count","max_new_tokens_per_unit","#,
                    r#""repetition_window_size","talker_temperature","talker_repetition_penalty"],"#,
                    r#""supports_reference_audio":true,"#
                )
            } else {
                r#""sampling_parameters":[],"supports_reference_audio":false,"#
            },
            image_format = if self.profile.takes_images() {
                format!(
                    r#""input_image_format":{{"types":["image/jpeg","image/png"],"max_bytes":{MAX_IMAGE_BYTES},"max_frames_per_unit":{MAX_FRAMES_PER_UNIT},"max_slice_nums":{MAX_SLICE_NUMS}}},"#
                )
            } else {
                String::new()
            },
            input_rate = self.input_rate,
            output_rate = self.output_sample_rate,
            modalities = modalities_json,
            microturn = microturn,
            unit_ms = self.unit_ms,
            input_bytes = self.max_input_bytes,
            output_bytes = MAX_OUTPUT_BYTES,
            output_events = MAX_OUTPUT_EVENTS,
            history_chars = MAX_HISTORY_CHARS,
            cleanup_s = CLEANUP_TIMEOUT_S,
        )
    }
}

/// The output modalities granted to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub audio: bool,
    /// Text granted: the text is sent as `response.output_text.*`, else as the audio's
    /// transcript.
    pub text: bool,
    modalities_json: String,
}

impl Grant {
    fn new(modalities: Vec<&'static str>) -> Grant {
        Grant {
            audio: modalities.contains(&"audio"),
            text: modalities.contains(&"text"),
            modalities_json: json_list(&modalities),
        }
    }
}

/// `["audio","text"]`: modality names never need escaping, but a client's may.
fn json_list(items: &[&str]) -> String {
    let mut out = String::from("[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_str(&mut out, Some(item));
    }
    out.push(']');
    out
}

/// Server event ids: `evt_<session>_<n>`, unique in the process.
#[derive(Debug)]
pub struct EventIds {
    session: u64,
    last: u64,
}

impl EventIds {
    pub fn new(session: u64) -> EventIds {
        EventIds { session, last: 0 }
    }

    pub fn next(&mut self) -> String {
        self.last += 1;
        format!("evt_{:06}_{}", self.session, self.last)
    }
}

/// The input span one native unit covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitSpan {
    pub index: u64,
    pub t_start_ms: f64,
    pub duration_ms: f64,
}

pub fn session_created(event_id: &str, session_id: &str) -> Utf8Bytes {
    Utf8Bytes::from(format!(
        r#"{{"type":"{}","event_id":"{event_id}","session":{{"id":"{session_id}","object":"realtime.session","type":"realtime","model":"{MODEL}","sglang":{{"granted":null}}}}}}"#,
        names::SESSION_CREATED
    ))
}

pub fn session_updated(
    templates: &Templates,
    grant: &Grant,
    event_id: &str,
    client_event_id: Option<&str>,
    session_id: &str,
) -> Utf8Bytes {
    let granted = templates.granted_json(grant);
    let mut out = String::with_capacity(granted.len() + 256);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","client_event_id":"#,
        names::SESSION_UPDATED
    );
    push_json_str(&mut out, client_event_id);
    // The session as configured, as sglang-omni's server echoes it: the granted modalities and
    // the audio formats in use beside the grant.
    let _ = write!(
        out,
        concat!(
            r#","session":{{"id":"{session_id}","object":"realtime.session","type":"realtime","model":"{model}","#,
            r#""output_modalities":{modalities},"audio":{{"input":{{"format":{{"type":"audio/pcm","rate":{input_rate}}}}},"#,
            r#""output":{{"format":{{"type":"audio/pcm","rate":{output_rate}}}}}}},"sglang":{{"granted":"#
        ),
        session_id = session_id,
        model = MODEL,
        modalities = grant.modalities_json,
        input_rate = templates.input_rate,
        output_rate = templates.output_sample_rate,
    );
    out.push_str(&granted);
    out.push_str("}}}");
    Utf8Bytes::from(out)
}

pub fn accepted(
    event_id: &str,
    seq: u64,
    accepted_end_ms: f64,
    client_event_id: Option<&str>,
) -> Utf8Bytes {
    let mut out = String::with_capacity(160);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","seq":{seq},"accepted_end_ms":{accepted_end_ms:?},"client_event_id":"#,
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
        r#","accepted_end_ms":{accepted_end_ms:?},"tail_policy":"pad"}}"#
    );
    Utf8Bytes::from(out)
}

/// What `sglang.input_audio.drained` reports about the input of a session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drained {
    pub accepted_end_ms: f64,
    /// The accepted input consumed, the padding apart.
    pub consumed_ms: f64,
    /// The accepted input dropped by `input_audio_buffer.clear`.
    pub discarded_ms: f64,
    pub padding_ms: f64,
}

pub fn input_drained(
    event_id: &str,
    client_event_id: Option<&str>,
    drained: &Drained,
) -> Utf8Bytes {
    let mut out = String::with_capacity(200);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","client_event_id":"#,
        names::INPUT_DRAINED
    );
    push_json_str(&mut out, client_event_id);
    let _ = write!(
        out,
        r#","accepted_end_ms":{:?},"consumed_ms":{:?},"discarded_ms":{:?},"padding_ms":{:?}}}"#,
        drained.accepted_end_ms, drained.consumed_ms, drained.discarded_ms, drained.padding_ms
    );
    Utf8Bytes::from(out)
}

/// `sglang.input_image.accepted`: the frame joins unit `unit_index` (sglang-omni's
/// `ImageAccepted`).
pub fn image_accepted(event_id: &str, unit_index: u64, client_event_id: Option<&str>) -> Utf8Bytes {
    let mut out = String::with_capacity(120);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","unit_id":"unit_{unit_index}","client_event_id":"#,
        names::IMAGE_ACCEPTED
    );
    push_json_str(&mut out, client_event_id);
    out.push('}');
    Utf8Bytes::from(out)
}

/// `input_audio_buffer.cleared`: the input not yet cut into a unit was dropped
/// (sglang-omni's `Cleared`).
pub fn cleared(event_id: &str, client_event_id: Option<&str>, discarded_ms: f64) -> Utf8Bytes {
    let mut out = String::with_capacity(120);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","client_event_id":"#,
        names::CLEARED
    );
    push_json_str(&mut out, client_event_id);
    let _ = write!(out, r#","sglang":{{"discarded_ms":{discarded_ms:?}}}}}"#);
    Utf8Bytes::from(out)
}

/// `session.closed`, answering the client's `session.close` (`reason` `client_closed`) or
/// ending a session after a fatal error (`reason` its code).
pub fn session_closed(event_id: &str, client_event_id: Option<&str>, reason: &str) -> Utf8Bytes {
    let mut out = String::with_capacity(160);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","client_event_id":"#,
        names::SESSION_CLOSED
    );
    push_json_str(&mut out, client_event_id);
    out.push_str(r#","reason":"#);
    push_json_str(&mut out, Some(reason));
    out.push('}');
    Utf8Bytes::from(out)
}

/// The `code` of an `error` event: sglang-omni's server's codes (protocol.py, runtime.py,
/// negotiation.py), and one of the mock's own where that server has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// Not JSON, a binary frame, a field missing or of the wrong type, audio that is not base64
    /// PCM16, modalities that cannot be served.
    InvalidRequest,
    /// Valid, but not now: before `session.update`, after the end, a seq out of order, a
    /// `t_start_ms` that is not where the input stands.
    InvalidState,
    /// An append larger than the input budget.
    BufferOverflow,
    /// An event type the protocol does not have.
    NotSupported,
    /// A command of the protocol the grant rules out (`client_commit` false: no manual turns).
    NotApplicable,
    /// The mock's own: a message larger than it reads (sglang-omni's server drops the
    /// connection without an event).
    MessageTooLarge,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidState => "invalid_state",
            ErrorCode::BufferOverflow => "buffer_overflow",
            ErrorCode::NotSupported => "not_supported",
            ErrorCode::NotApplicable => "not_applicable",
            ErrorCode::MessageTooLarge => "message_too_large",
        }
    }
}

/// What an `error` event says: the code, a message for the client's developer, and the field at
/// fault (`param`, a dotted path as sglang-omni's server gives it), when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
    pub param: Option<&'static str>,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
            param: None,
        }
    }

    /// The same refusal, naming the field at fault.
    pub fn at(self, param: &'static str) -> Refusal {
        Refusal {
            param: Some(param),
            ..self
        }
    }
}

/// `error`: `error.type` is `server_error` when the error ends the session, as sglang-omni's
/// server says it, `invalid_request_error` otherwise.
pub fn error(
    event_id: &str,
    refusal: &Refusal,
    client_event_id: Option<&str>,
    fatal: bool,
) -> Utf8Bytes {
    let mut out = String::with_capacity(240 + refusal.message.len());
    let error_type = if fatal {
        "server_error"
    } else {
        "invalid_request_error"
    };
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","sglang":{{"fatal":{fatal}}},"error":{{"type":"{error_type}","code":"{}","message":"#,
        names::ERROR,
        refusal.code.as_str()
    );
    push_json_str(&mut out, Some(&refusal.message));
    out.push_str(r#","event_id":"#);
    push_json_str(&mut out, client_event_id);
    out.push_str(r#","param":"#);
    push_json_str(&mut out, refusal.param);
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

    fn templates(profile: Profile) -> Templates {
        Templates::new(&MockBehaviourArgs {
            profile,
            replies_per_append: 3,
            burst_units: 1,
            output_sample_rate: None,
            ..MockBehaviourArgs::defaults()
        })
    }

    fn json(frame: &Utf8Bytes) -> Value {
        serde_json::from_str(frame.as_str()).unwrap()
    }

    #[test]
    fn client_strings_are_escaped() {
        let v = json(&accepted("e", 2, 240.0, Some("a\"b\\c\n")));
        assert_eq!(v["client_event_id"], "a\"b\\c\n");
        let refusal = Refusal::new(ErrorCode::InvalidRequest, "bad \"x\"");
        let v = json(&error("e", &refusal, None, false));
        assert_eq!(v["error"]["message"], "bad \"x\"");
        assert_eq!(v["error"]["code"], "invalid_request");
        assert_eq!(v["error"]["event_id"], Value::Null);
        assert_eq!(v["error"]["param"], Value::Null);
        assert_eq!(v["sglang"]["fatal"], false);
    }

    #[test]
    fn errors_are_shaped_as_sglang_omni_sends_them_server_error_when_fatal() {
        let refusal = Refusal::new(ErrorCode::InvalidRequest, "m").at("audio");
        let v = json(&error("e", &refusal, Some("c"), false));
        assert_eq!(
            v["error"],
            serde_json::json!({"type": "invalid_request_error", "code": "invalid_request",
                "message": "m", "event_id": "c", "param": "audio"})
        );
        let v = json(&error("e", &refusal, Some("c"), true));
        assert_eq!(v["error"]["type"], "server_error");
        assert_eq!(v["sglang"]["fatal"], true);
    }

    #[test]
    fn a_refusal_quotes_the_client_modalities_safely() {
        let t = templates(Profile::Voicechat);
        let asked = [std::borrow::Cow::Borrowed("te\"xt")];
        let message = t.grant(Some(&asked)).unwrap_err();
        assert!(message.contains(r#"["te\"xt"]"#), "{message}");
    }

    #[test]
    fn every_frame_is_valid_json_with_an_event_id() {
        for profile in Profile::ALL {
            let t = templates(profile);
            let grant = t.grant(None).unwrap();
            let mut r = ResponseFrames::new(2, &grant);
            let mut ids = EventIds::new(2);
            let unit = UnitSpan {
                index: 0,
                t_start_ms: 0.0,
                duration_ms: 40.0,
            };
            let mut frames = vec![
                session_created("e", "s"),
                session_updated(&t, &grant, "e", Some("c"), "s"),
                r.created("e", &unit),
                input_ended("e", None, 360.0),
                input_drained(
                    "e",
                    Some("c"),
                    &Drained {
                        accepted_end_ms: 360.0,
                        consumed_ms: 360.0,
                        discarded_ms: 0.0,
                        padding_ms: 40.0,
                    },
                ),
                session_closed("e", Some("c"), "client_closed"),
            ];
            r.push_unit(&t, &unit, false, &mut ids, &mut frames);
            r.push_unit(&t, &unit, true, &mut ids, &mut frames);
            for frame in &frames {
                let v = json(frame);
                assert!(v["event_id"].is_string(), "{v}");
            }
        }
    }
}
