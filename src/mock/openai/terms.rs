//! The openai mock's session terms: what a `session.update` may say in the connection's naming,
//! checked as the API checks it; the accepted fields of every update, merged, which the session
//! echoes; what the mock acts on ([`Terms`]); and the session object `session.created` and
//! `session.updated` carry.
//!
//! The naming is the connection's (the `OpenAI-Beta: realtime=v1` header), never guessed from
//! the update's shape: a GA session is openai-python's `RealtimeSessionCreateRequest`
//! (`types/realtime/`), a beta one its beta `Session` (`types/beta/realtime/`), and a key of
//! the other naming is refused as the API refuses it (`Unknown parameter: 'session.modalities'.`).
//! A GA transcription session (`session.type` `"transcription"`: openai-python's
//! `RealtimeTranscriptionSessionCreateRequest`) has its input and `include` only; a key of a
//! conversation's is refused in it as unknown.
//! GA's PCM is 24 kHz only (`AudioPCM.rate: Optional[Literal[24000]]`: a format without its
//! rate is 24 kHz too); GA's `output_modalities` is audio or text, not both. G.711 (GA's
//! `audio/pcmu`/`audio/pcma`, beta's `g711_ulaw`/`g711_alaw`) is the API's but not the mock's:
//! it decodes PCM16 only, so it refuses them rather than take them and misread the audio.

use super::super::vad::SILENCE_MS;
use crate::protocol::openai::DEFAULT_SAMPLE_RATE;
use serde_json::{json, Map, Value};

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

    pub(super) fn invalid(param: &str, message: String) -> Refusal {
        Refusal {
            code: "invalid_value",
            param: param.to_string(),
            message,
        }
    }

    /// G.711: the API's, not the mock's.
    fn not_mocked(param: &str, format: &str, pcm: &str) -> Refusal {
        Refusal::invalid(
            param,
            format!("The mock decodes PCM16 only: '{format}' (G.711) is not mocked; give {pcm}."),
        )
    }
}

/// Checks the `session` of a `session.update` in the connection's naming; the request, when
/// the API (and the mock) would take it.
pub fn check(beta: bool, session: Option<&Value>) -> Result<&Value, Refusal> {
    let Some(session @ Value::Object(keys)) = session else {
        return Err(Refusal::missing("session"));
    };
    let other_naming = if beta { GA_ONLY } else { BETA_ONLY };
    if let Some(key) = other_naming.iter().find(|k| keys.contains_key(**k)) {
        return Err(Refusal::unknown(key));
    }
    if beta {
        check_beta(session)?;
    } else {
        check_ga(session)?;
    }
    Ok(session)
}

/// The keys of a GA transcription session, and of its `audio`.
const TRANSCRIPTION_KEYS: &[&str] = &["audio", "include", "type"];
const TRANSCRIPTION_AUDIO_KEYS: &[&str] = &["input"];
const AUDIO_INPUT_KEYS: &[&str] = &[
    "format",
    "noise_reduction",
    "transcription",
    "turn_detection",
];
/// The transcription model that takes no VAD (its transcript streams as the audio comes).
const REALTIME_WHISPER: &str = "gpt-realtime-whisper";
/// What a GA session's `include` may list (openai-python's `Literal`).
pub const LOGPROBS: &str = "item.input_audio_transcription.logprobs";

/// Whether a GA `session` asks for a transcription session (`type` `"transcription"`).
pub fn asks_for_transcription(session: Option<&Value>) -> bool {
    session.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("transcription")
}

fn check_ga(session: &Value) -> Result<(), Refusal> {
    match session.get("type").and_then(Value::as_str) {
        Some("realtime") => {}
        None => return Err(Refusal::missing("session.type")),
        Some("transcription") => {
            let unknown = |keys: Option<&Map<String, Value>>, known: &[&str], at: &str| {
                keys.into_iter()
                    .flat_map(|k| k.keys())
                    .find(|k| !known.contains(&k.as_str()))
                    .map(|k| Refusal::unknown(&format!("{at}{k}")))
            };
            // openai-python: "For `gpt-realtime-whisper` transcription sessions, turn
            // detection must be set to `null`; VAD is not supported."
            let model = session.pointer("/audio/input/transcription/model");
            let vad = session.pointer("/audio/input/turn_detection");
            if model.and_then(Value::as_str) == Some(REALTIME_WHISPER)
                && vad.is_some_and(Value::is_object)
            {
                return Err(Refusal::invalid(
                    "session.audio.input.turn_detection",
                    format!(
                        "Turn detection is not supported for '{REALTIME_WHISPER}': set it to null."
                    ),
                ));
            }
            let audio = session.get("audio").and_then(Value::as_object);
            let input = session.pointer("/audio/input").and_then(Value::as_object);
            if let Some(refused) = unknown(session.as_object(), TRANSCRIPTION_KEYS, "")
                .or_else(|| unknown(audio, TRANSCRIPTION_AUDIO_KEYS, "audio."))
                .or_else(|| unknown(input, AUDIO_INPUT_KEYS, "audio.input."))
            {
                return Err(refused);
            }
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
    match session.get("include") {
        None | Some(Value::Null) => {}
        Some(Value::Array(listed)) if listed.iter().all(|i| i == LOGPROBS) => {}
        Some(other) => {
            return Err(Refusal::invalid(
                "session.include",
                format!("Invalid value: {other}. Supported values are: ['{LOGPROBS}']."),
            ))
        }
    }
    let modalities = session.get("output_modalities").and_then(Value::as_array);
    if modalities.is_some_and(|m| m.len() > 1) {
        return Err(Refusal::invalid(
            "session.output_modalities",
            "Invalid 'session.output_modalities': give ['audio'] or ['text']; a session cannot ask for both.".to_string(),
        ));
    }
    Ok(())
}

/// A GA `audio/pcm` format is 24 kHz, its rate given or not; G.711 is not mocked.
fn check_ga_format(side: &str, format: &Value) -> Result<(), Refusal> {
    const PCM: &str = r#"{"type": "audio/pcm", "rate": 24000}"#;
    match format.get("type").and_then(Value::as_str) {
        Some("audio/pcm") => {}
        Some(g711 @ ("audio/pcmu" | "audio/pcma")) => {
            let param = format!("session.audio.{side}.format.type");
            return Err(Refusal::not_mocked(&param, g711, PCM));
        }
        _ => return Ok(()),
    }
    match format.get("rate") {
        None | Some(Value::Null) => Ok(()),
        Some(rate) if rate.as_u64() == Some(u64::from(DEFAULT_SAMPLE_RATE)) => Ok(()),
        Some(rate) => Err(Refusal::invalid(
            &format!("session.audio.{side}.format.rate"),
            format!("Invalid value: {rate}. Supported values are: {DEFAULT_SAMPLE_RATE}."),
        )),
    }
}

fn check_beta(session: &Value) -> Result<(), Refusal> {
    for key in ["input_audio_format", "output_audio_format"] {
        let Some(format) = session.get(key) else {
            continue;
        };
        let param = format!("session.{key}");
        match format.as_str() {
            Some("pcm16") => {}
            Some(g711) if BETA_FORMATS.contains(&g711) => {
                return Err(Refusal::not_mocked(&param, g711, "'pcm16'"));
            }
            _ => {
                return Err(Refusal::invalid(
                    &param,
                    format!(
                        "Invalid value: {format}. Supported values are: 'pcm16', 'g711_ulaw', and 'g711_alaw'."
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// Whether a session's accepted fields ask for logprobs on its transcripts (`include`).
pub fn logprobs(asked: &Value) -> bool {
    asked
        .get("include")
        .and_then(Value::as_array)
        .is_some_and(|i| i.iter().any(|i| i == LOGPROBS))
}

/// A turn detection of another type than the one before it replaces it whole: the settings
/// of one type are not the other's (`idle_timeout_ms` is server VAD's, `eagerness` semantic
/// VAD's).
pub fn drop_replaced_turn_detection(beta: bool, asked: &mut Value, update: &Value) {
    let at = if beta {
        "/turn_detection"
    } else {
        "/audio/input/turn_detection"
    };
    let kind = |v: Option<&Value>| v.and_then(|t| t.get("type")).cloned();
    let new = update.pointer(at);
    if kind(new).is_some() && kind(new) != kind(asked.pointer(at)) {
        if let Some(old) = asked.pointer_mut(at) {
            *old = Value::Null;
        }
    }
}

/// Merges an accepted update into the session's accepted fields: objects key by key, any
/// other value (a `null` too) replacing what was there.
pub fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                merge(into.entry(key.as_str()).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// What the mock acts on, from the session's accepted fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    /// Audio out (with its transcript), or text only.
    pub audio_out: bool,
    /// The server's VAD, or none (`turn_detection: null`).
    pub vad: Option<VadTerms>,
}

/// The server VAD's terms the mock follows (its energy VAD has no threshold or padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VadTerms {
    /// A response after each turn (`create_response`, default true).
    pub create_response: bool,
    /// A new turn cancels the response in progress (`interrupt_response`, default true as the
    /// API's: openai-python's push-to-talk example asks for `server_vad` alone and gets
    /// barge-in). duplexbench-tui's client always says it.
    pub interrupt_response: bool,
    pub silence_ms: u64,
}

impl Terms {
    /// The terms of a session whose accepted fields are `asked`.
    pub fn of(beta: bool, asked: &Value) -> Terms {
        let (modalities, turn_detection) = if beta {
            (asked.get("modalities"), asked.get("turn_detection"))
        } else {
            (
                asked.get("output_modalities"),
                asked.pointer("/audio/input/turn_detection"),
            )
        };
        let audio_out = modalities
            .and_then(Value::as_array)
            .is_none_or(|m| m.iter().any(|m| m == "audio"));
        // A transcription session of gpt-realtime-whisper has none unless it said otherwise.
        let no_vad_model = asked.get("type").and_then(Value::as_str) == Some("transcription")
            && transcription_model(false, asked).as_deref() == Some(REALTIME_WHISPER);
        let vad = match turn_detection {
            Some(Value::Null) => None,
            None if no_vad_model => None,
            given => {
                let flag = |key, default| {
                    given
                        .and_then(|t| t.get(key))
                        .and_then(Value::as_bool)
                        .unwrap_or(default)
                };
                Some(VadTerms {
                    create_response: flag("create_response", true),
                    interrupt_response: flag("interrupt_response", true),
                    silence_ms: given
                        .and_then(|t| t.get("silence_duration_ms"))
                        .and_then(Value::as_u64)
                        .unwrap_or(SILENCE_MS),
                })
            }
        };
        Terms { audio_out, vad }
    }
}

/// The model of the input transcription the session asked for (GA's
/// `audio.input.transcription`, beta's `input_audio_transcription`), when it asked for one: a
/// transcription of no model named is the API's default (`whisper-1` for beta, as its docs
/// give; `gpt-4o-transcribe` for GA).
pub fn transcription_model(beta: bool, asked: &Value) -> Option<String> {
    let (given, default) = if beta {
        (asked.get("input_audio_transcription"), "whisper-1")
    } else {
        (
            asked.pointer("/audio/input/transcription"),
            "gpt-4o-transcribe",
        )
    };
    let given = given.filter(|t| t.is_object())?;
    let model = given
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(default);
    Some(model.to_string())
}

/// The `session` of a GA transcription session's `session.created` and `session.updated`:
/// what it asked for over the defaults, the model it transcribes with (none until it asks for
/// a transcription: the API's `audio.input.transcription` "defaults to off", in a
/// transcription session too), and its VAD's terms (a transcription session's VAD creates no
/// responses: no response flags are shown).
pub fn transcription_object(id: &str, asked: &Value) -> Value {
    let terms = Terms::of(false, asked);
    let mut shown = json!({"object": "realtime.transcription_session", "id": id,
        "type": "transcription", "include": null,
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": DEFAULT_SAMPLE_RATE},
            "noise_reduction": null, "transcription": null}}});
    merge(&mut shown, asked);
    let mut vad = shown_turn_detection(&terms, asked.pointer("/audio/input/turn_detection"));
    if let Value::Object(vad) = &mut vad {
        vad.remove("create_response");
        vad.remove("interrupt_response");
    }
    merge(&mut shown, &json!({"audio": {"input": {}}}));
    if let Some(input) = shown
        .pointer_mut("/audio/input")
        .and_then(Value::as_object_mut)
    {
        input.insert("turn_detection".into(), vad);
    }
    if let Some(model) = transcription_model(false, asked) {
        merge(
            &mut shown,
            &json!({"audio": {"input": {"transcription": {"model": model}}}}),
        );
    }
    shown
}

/// The `turn_detection` shown: the one asked, its defaults filled in, or `null`.
fn shown_turn_detection(terms: &Terms, asked: Option<&Value>) -> Value {
    let Some(vad) = terms.vad else {
        return Value::Null;
    };
    let mut shown = match asked.and_then(|t| t.get("type")).and_then(Value::as_str) {
        Some("semantic_vad") => json!({"type": "semantic_vad", "eagerness": "auto"}),
        _ => json!({"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300}),
    };
    if let Some(asked) = asked {
        merge(&mut shown, asked);
    }
    if shown["type"] == "server_vad" {
        shown["silence_duration_ms"] = json!(vad.silence_ms);
    }
    shown["create_response"] = json!(vad.create_response);
    shown["interrupt_response"] = json!(vad.interrupt_response);
    shown
}

/// The session as the mock runs it, in the connection's naming.
pub struct Shown<'a> {
    pub beta: bool,
    pub id: &'a str,
    /// The model the connection asked for (`?model=`), or the one the mock serves.
    pub model: &'a str,
    /// The accepted fields of every update, merged.
    pub asked: &'a Value,
}

impl Shown<'_> {
    /// The `session` of `session.created` and `session.updated`: the accepted fields, and
    /// the ones the mock decides as it runs them.
    pub fn object(&self) -> Value {
        let terms = Terms::of(self.beta, self.asked);
        // The API states every setting, its defaults included (a client reads the voice it
        // got from here); what the session asked for goes over them.
        let mut shown = if self.beta {
            json!({"voice": "alloy", "instructions": "", "temperature": 0.8, "tools": [],
                "tool_choice": "auto", "max_response_output_tokens": "inf",
                "input_audio_transcription": null, "input_audio_noise_reduction": null,
                "speed": 1.0, "tracing": null})
        } else {
            json!({"instructions": "", "tools": [], "tool_choice": "auto",
                "max_output_tokens": "inf", "tracing": null, "prompt": null,
                "audio": {"input": {"transcription": null, "noise_reduction": null},
                    "output": {"voice": "marin", "speed": 1.0}}})
        };
        merge(&mut shown, self.asked);
        // A transcription asked for without a model names the one that runs (and bills).
        if let Some(model) = transcription_model(self.beta, self.asked) {
            let at = if self.beta {
                "/input_audio_transcription"
            } else {
                "/audio/input/transcription"
            };
            if let Some(Value::Object(t)) = shown.pointer_mut(at) {
                t.insert("model".into(), json!(model));
            }
        }
        let mut shown = match shown {
            Value::Object(shown) => shown,
            _ => Map::new(),
        };
        let model = self
            .asked
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(self.model);
        shown.insert("object".into(), json!("realtime.session"));
        shown.insert("id".into(), json!(self.id));
        shown.insert("model".into(), json!(model));
        if self.beta {
            let modalities = if terms.audio_out {
                json!(["audio", "text"])
            } else {
                json!(["text"])
            };
            let vad = shown_turn_detection(&terms, self.asked.get("turn_detection"));
            shown.insert("modalities".into(), modalities);
            shown.insert("input_audio_format".into(), json!("pcm16"));
            shown.insert("output_audio_format".into(), json!("pcm16"));
            shown.insert("turn_detection".into(), vad);
            return Value::Object(shown);
        }
        let modality = if terms.audio_out { "audio" } else { "text" };
        let vad = shown_turn_detection(&terms, self.asked.pointer("/audio/input/turn_detection"));
        let pcm = json!({"type": "audio/pcm", "rate": DEFAULT_SAMPLE_RATE});
        shown.insert("type".into(), json!("realtime"));
        shown.insert("output_modalities".into(), json!([modality]));
        let mut shown = Value::Object(shown);
        merge(
            &mut shown,
            &json!({"audio": {"input": {"format": pcm, "turn_detection": vad},
                "output": {"format": pcm}}}),
        );
        shown
    }
}

/// The `session` of beta's `transcription_session.updated`: openai-python's
/// `TranscriptionSession`, its `client_secret` a placeholder (the mock issues no keys).
pub fn transcription_session(asked: Option<&Value>) -> Value {
    let field = |key| asked.and_then(|a| a.get(key)).cloned();
    let turn_detection = match field("turn_detection") {
        Some(Value::Null) => Value::Null,
        _ => json!({"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
            "silence_duration_ms": SILENCE_MS}),
    };
    json!({"client_secret": {"value": "ek_duplexbench_mock", "expires_at": 0},
        "input_audio_format": "pcm16",
        "input_audio_transcription": field("input_audio_transcription").unwrap_or(Value::Null),
        "modalities": ["text"], "turn_detection": turn_detection})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ga(session: Value) -> Result<Terms, Refusal> {
        check(false, Some(&session)).map(|asked| Terms::of(false, asked))
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
    }

    #[test]
    fn a_ga_pcm_format_without_its_rate_is_24_khz_as_the_sdk_says() {
        // openai-python: `rate: Optional[Literal[24000]] = None`, "Always 24000".
        let asked = json!({"type": "realtime",
            "audio": {"output": {"format": {"type": "audio/pcm"}}}});
        ga(asked.clone()).unwrap();
        let shown = Shown {
            beta: false,
            id: "s",
            model: "m",
            asked: &asked,
        }
        .object();
        assert_eq!(shown["audio"]["output"]["format"]["rate"], 24_000);
    }

    #[test]
    fn g711_is_refused_in_either_naming_for_the_mock_decodes_pcm16_only() {
        let refusal = ga(json!({"type": "realtime",
            "audio": {"input": {"format": {"type": "audio/pcmu"}}}}))
        .unwrap_err();
        assert_eq!(refusal.param, "session.audio.input.format.type");
        assert!(refusal.message.contains("'audio/pcmu'"), "{refusal:?}");
        let refusal = check(true, Some(&json!({"output_audio_format": "g711_alaw"}))).unwrap_err();
        assert_eq!(refusal.param, "session.output_audio_format");
        assert!(refusal.message.contains("PCM16 only"), "{refusal:?}");
        check(true, Some(&json!({"input_audio_format": "pcm16"}))).unwrap();
    }

    #[test]
    fn each_naming_refuses_the_other_namings_keys_issue_12() {
        let beta_shape = json!({"modalities": ["text"], "turn_detection": null});
        assert_eq!(
            ga(beta_shape.clone()).unwrap_err(),
            Refusal::unknown("modalities")
        );
        assert_eq!(
            Terms::of(true, check(true, Some(&beta_shape)).unwrap()),
            Terms {
                audio_out: false,
                vad: None
            }
        );
        let ga_shape = json!({"type": "realtime", "output_modalities": ["audio"]});
        assert_eq!(
            check(true, Some(&ga_shape)).unwrap_err(),
            Refusal::unknown("output_modalities")
        );
        assert_eq!(
            ga(json!({"output_modalities": ["audio"]})).unwrap_err(),
            Refusal::missing("session.type")
        );
        assert_eq!(check(false, None).unwrap_err(), Refusal::missing("session"));
    }

    #[test]
    fn a_ga_session_asking_for_audio_and_text_is_refused_issue_12() {
        let refusal =
            ga(json!({"type": "realtime", "output_modalities": ["audio", "text"]})).unwrap_err();
        assert_eq!(refusal.code, "invalid_value");
        assert_eq!(refusal.param, "session.output_modalities");
    }

    #[test]
    fn the_vad_terms_are_the_asked_ones_with_the_apis_defaults() {
        let terms = ga(
            json!({"type": "realtime", "audio": {"input": {"turn_detection":
            {"type": "server_vad", "create_response": false, "silence_duration_ms": 800}}}}),
        )
        .unwrap();
        assert_eq!(
            terms.vad,
            Some(VadTerms {
                create_response: false,
                interrupt_response: true,
                silence_ms: 800
            })
        );
        let default = Terms::of(false, &json!({}));
        assert!(default.audio_out);
        assert_eq!(default.vad.map(|v| v.create_response), Some(true));
    }

    #[test]
    fn the_session_object_is_in_the_connections_naming_and_echoes_what_was_asked_issue_12() {
        let shown = |beta, asked: Value| {
            Shown {
                beta,
                id: "s",
                model: "m",
                asked: &asked,
            }
            .object()
        };
        let ga = shown(
            false,
            json!({"type": "realtime", "instructions": "Be brief.", "tools": [],
                "tool_choice": "auto", "audio": {"input": {"turn_detection": null,
                "transcription": {"model": "whisper-1"}}, "output": {"voice": "alloy"}}}),
        );
        assert_eq!(ga["type"], "realtime");
        assert_eq!(ga["model"], "m");
        assert_eq!(ga["instructions"], "Be brief.");
        assert_eq!(ga["tool_choice"], "auto");
        assert_eq!(ga["audio"]["output"]["voice"], "alloy");
        assert_eq!(ga["audio"]["input"]["transcription"]["model"], "whisper-1");
        assert_eq!(ga["audio"]["input"]["format"]["rate"], 24_000);
        assert_eq!(ga["audio"]["input"]["turn_detection"], Value::Null);
        let beta = shown(
            true,
            json!({"voice": "alloy", "turn_detection": {"type": "server_vad", "threshold": 0.7}}),
        );
        assert!(beta.get("type").is_none(), "{beta}");
        assert_eq!(beta["modalities"], json!(["audio", "text"]));
        assert_eq!(beta["voice"], "alloy");
        assert_eq!(beta["turn_detection"]["threshold"], 0.7);
        assert_eq!(beta["turn_detection"]["silence_duration_ms"], 500);
    }

    #[test]
    fn merging_replaces_values_and_joins_objects() {
        let mut into = json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge(&mut into, &json!({"a": {"c": 3}, "d": null}));
        assert_eq!(into, json!({"a": {"b": 1, "c": 3}, "d": null}));
    }
}
