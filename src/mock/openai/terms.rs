//! The openai mock's session terms: what a `session.update` may say in the connection's naming,
//! checked as the API checks it, and the session object `session.created` and
//! `session.updated` carry.
//!
//! The naming is the connection's (the `OpenAI-Beta: realtime=v1` header), never guessed from
//! the update's shape: a GA session is openai-python's `RealtimeSessionCreateRequest`
//! (`types/realtime/`), a beta one its beta `Session` (`types/beta/realtime/`), and a key of
//! the other naming is refused as the API refuses it (`Unknown parameter: 'session.modalities'.`).
//! GA's PCM is 24 kHz only (`AudioPCM.rate: Literal[24000]`), and a PCM format without its
//! rate is refused; GA's `output_modalities` is audio or text, not both.

use super::super::vad::SILENCE_MS;
use crate::protocol::openai::DEFAULT_SAMPLE_RATE;
use serde_json::{json, Value};

/// Keys of the beta session that GA does not have.
const BETA_ONLY: &[&str] = &[
    "client_secret",
    "input_audio_format",
    "input_audio_noise_reduction",
    "input_audio_transcription",
    "max_response_output_tokens",
    "modalities",
    "output_audio_format",
    "speed",
    "temperature",
    "turn_detection",
    "voice",
];
/// Keys of the GA session that beta does not have.
const GA_ONLY: &[&str] = &[
    "audio",
    "include",
    "max_output_tokens",
    "output_modalities",
    "parallel_tool_calls",
    "prompt",
    "reasoning",
    "truncation",
    "type",
];
/// Beta's audio formats.
const BETA_FORMATS: &[&str] = &["pcm16", "g711_ulaw", "g711_alaw"];

/// A `session.update` the API would refuse: the `error` it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub param: String,
    pub message: String,
}

impl Refusal {
    fn unknown(key: &str) -> Refusal {
        Refusal {
            code: "unknown_parameter",
            param: format!("session.{key}"),
            message: format!("Unknown parameter: 'session.{key}'."),
        }
    }

    pub(super) fn missing(param: &str) -> Refusal {
        Refusal {
            code: "missing_required_parameter",
            param: param.to_string(),
            message: format!("Missing required parameter: '{param}'."),
        }
    }

    fn invalid(param: &str, message: String) -> Refusal {
        Refusal {
            code: "invalid_value",
            param: param.to_string(),
            message,
        }
    }
}

/// What an accepted update changes (`None`: left as it was).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked {
    /// Audio out (with its transcript), or text only.
    pub audio_out: Option<bool>,
    /// The server's VAD on, or off (`turn_detection: null`).
    pub vad: Option<bool>,
}

/// Reads the `session` of a `session.update` in the connection's naming.
pub fn read(beta: bool, session: Option<&Value>) -> Result<Asked, Refusal> {
    let Some(session @ Value::Object(keys)) = session else {
        return Err(Refusal::missing("session"));
    };
    let other_naming = if beta { GA_ONLY } else { BETA_ONLY };
    if let Some(key) = other_naming.iter().find(|k| keys.contains_key(**k)) {
        return Err(Refusal::unknown(key));
    }
    if beta {
        read_beta(session)
    } else {
        read_ga(session)
    }
}

fn read_ga(session: &Value) -> Result<Asked, Refusal> {
    match session.get("type").and_then(Value::as_str) {
        Some("realtime") => {}
        None => return Err(Refusal::missing("session.type")),
        Some("transcription") => {
            return Err(Refusal::invalid(
                "session.type",
                "This mock serves `realtime` sessions only; transcription sessions are not mocked."
                    .to_string(),
            ))
        }
        Some(other) => {
            return Err(Refusal::invalid(
                "session.type",
                format!(
                "Invalid value: '{other}'. Supported values are: 'realtime' and 'transcription'."
            ),
            ))
        }
    }
    for side in ["input", "output"] {
        if let Some(format) = session.pointer(&format!("/audio/{side}/format")) {
            check_ga_format(side, format)?;
        }
    }
    let modalities = session.get("output_modalities").and_then(Value::as_array);
    let audio_out = match modalities {
        Some(m) if m.len() > 1 => {
            return Err(Refusal::invalid(
                "session.output_modalities",
                "Invalid 'session.output_modalities': give ['audio'] or ['text']; a session cannot ask for both.".to_string(),
            ))
        }
        Some(m) => Some(m.iter().any(|m| m == "audio")),
        None => None,
    };
    Ok(Asked {
        audio_out,
        vad: vad_asked(session.pointer("/audio/input/turn_detection")),
    })
}

/// A GA `audio/pcm` format names its rate, and the rate is 24000.
fn check_ga_format(side: &str, format: &Value) -> Result<(), Refusal> {
    if format.get("type").and_then(Value::as_str) != Some("audio/pcm") {
        return Ok(());
    }
    let param = format!("session.audio.{side}.format.rate");
    match format.get("rate") {
        None => Err(Refusal::missing(&param)),
        Some(rate) if rate.as_u64() == Some(u64::from(DEFAULT_SAMPLE_RATE)) => Ok(()),
        Some(rate) => Err(Refusal::invalid(
            &param,
            format!("Invalid value: {rate}. Supported values are: {DEFAULT_SAMPLE_RATE}."),
        )),
    }
}

fn read_beta(session: &Value) -> Result<Asked, Refusal> {
    for key in ["input_audio_format", "output_audio_format"] {
        if let Some(format) = session.get(key) {
            if !format.as_str().is_some_and(|f| BETA_FORMATS.contains(&f)) {
                return Err(Refusal::invalid(
                    &format!("session.{key}"),
                    format!(
                        "Invalid value: {format}. Supported values are: 'pcm16', 'g711_ulaw', and 'g711_alaw'."
                    ),
                ));
            }
        }
    }
    Ok(Asked {
        audio_out: session
            .get("modalities")
            .and_then(Value::as_array)
            .map(|m| m.iter().any(|m| m == "audio")),
        vad: vad_asked(session.get("turn_detection")),
    })
}

/// `turn_detection`: `null` turns the VAD off, an object (server or semantic VAD) on.
fn vad_asked(turn_detection: Option<&Value>) -> Option<bool> {
    match turn_detection? {
        Value::Null => Some(false),
        Value::Object(_) => Some(true),
        _ => None,
    }
}

/// The session as the mock runs it, in the connection's naming.
pub struct Shown<'a> {
    pub beta: bool,
    pub id: &'a str,
    pub model: &'a str,
    pub audio_out: bool,
    pub vad: bool,
    pub output_rate: u32,
}

impl Shown<'_> {
    /// The `session` of `session.created` and `session.updated`.
    pub fn object(&self) -> Value {
        let vad = if self.vad {
            json!({"type": "server_vad", "silence_duration_ms": SILENCE_MS})
        } else {
            Value::Null
        };
        if self.beta {
            let modalities = if self.audio_out {
                json!(["audio", "text"])
            } else {
                json!(["text"])
            };
            json!({"object": "realtime.session", "id": self.id, "model": self.model,
                "modalities": modalities, "input_audio_format": "pcm16",
                "output_audio_format": "pcm16", "turn_detection": vad})
        } else {
            let modality = if self.audio_out { "audio" } else { "text" };
            json!({"object": "realtime.session", "type": "realtime", "id": self.id,
                "model": self.model, "output_modalities": [modality],
                "audio": {
                    "input": {"format": {"type": "audio/pcm", "rate": DEFAULT_SAMPLE_RATE},
                        "turn_detection": vad},
                    "output": {"format": {"type": "audio/pcm", "rate": self.output_rate}}}})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ga(session: Value) -> Result<Asked, Refusal> {
        read(false, Some(&session))
    }

    #[test]
    fn a_ga_rate_other_than_24000_is_refused_as_the_api_refuses_it_issue_12() {
        let refusal = ga(json!({"type": "realtime",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}))
        .unwrap_err();
        assert_eq!(refusal.code, "invalid_value");
        assert_eq!(refusal.param, "session.audio.input.format.rate");
        assert_eq!(
            refusal.message,
            "Invalid value: 16000. Supported values are: 24000."
        );
        let refusal = ga(json!({"type": "realtime",
            "audio": {"output": {"format": {"type": "audio/pcm"}}}}))
        .unwrap_err();
        assert_eq!(refusal.code, "missing_required_parameter");
        assert_eq!(refusal.param, "session.audio.output.format.rate");
        // G.711 has no rate to give.
        ga(json!({"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcmu"}}}}))
            .unwrap();
    }

    #[test]
    fn each_naming_refuses_the_other_namings_keys_issue_12() {
        let beta_shape = json!({"modalities": ["text"], "turn_detection": null});
        assert_eq!(
            ga(beta_shape.clone()).unwrap_err(),
            Refusal::unknown("modalities")
        );
        assert_eq!(
            read(true, Some(&beta_shape)).unwrap(),
            Asked {
                audio_out: Some(false),
                vad: Some(false)
            }
        );
        let ga_shape = json!({"type": "realtime", "output_modalities": ["audio"]});
        assert_eq!(
            read(true, Some(&ga_shape)).unwrap_err(),
            Refusal::unknown("output_modalities")
        );
        assert_eq!(
            ga(json!({"output_modalities": ["audio"]})).unwrap_err(),
            Refusal::missing("session.type")
        );
        assert_eq!(read(false, None).unwrap_err(), Refusal::missing("session"));
    }

    #[test]
    fn a_ga_session_asking_for_audio_and_text_is_refused_issue_12() {
        let refusal =
            ga(json!({"type": "realtime", "output_modalities": ["audio", "text"]})).unwrap_err();
        assert_eq!(refusal.code, "invalid_value");
        assert_eq!(refusal.param, "session.output_modalities");
    }

    #[test]
    fn the_session_object_is_in_the_connections_naming_issue_12() {
        let shown = |beta| {
            Shown {
                beta,
                id: "s",
                model: "m",
                audio_out: true,
                vad: false,
                output_rate: 24_000,
            }
            .object()
        };
        let ga = shown(false);
        assert_eq!(ga["type"], "realtime");
        assert_eq!(ga["audio"]["input"]["format"]["rate"], 24_000);
        assert_eq!(ga["audio"]["input"]["turn_detection"], Value::Null);
        let beta = shown(true);
        assert!(beta.get("type").is_none(), "{beta}");
        assert_eq!(beta["modalities"], json!(["audio", "text"]));
    }
}
