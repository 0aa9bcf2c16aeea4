//! The vLLM `/v1/realtime` mock session (`mock --protocol vllm`), free of sockets: it wants a
//! `session.update` with a `model` before the first commit (any name, as vLLM started with
//! `VLLM_SKIP_MODEL_NAME_VALIDATION`; with `--served-model`, that one only, as vLLM checks it
//! by default: `_check_model`, `model_not_found`), and transcribes as audio
//! arrives in model steps of 80 ms of audio, as vLLM's Voxtral Realtime does: a step every
//! 80 ms from `--first-delta-ms` after the utterance's first audio, each while 80 ms of its
//! audio are unprocessed, and each sending one `transcription.delta` — a word for every
//! `--delta-interval-ms` of audio the steps have begun, or `""` when none is due (vLLM sends
//! a delta for every step, most of them empty). The final commit is answered
//! `--first-delta-ms` later with the steps of the audio left and `transcription.done`.
//!
//! Each utterance starts with a non-final commit and ends with `transcription.done`; audio
//! appended after that and before the next non-final commit is buffered for the next
//! utterance; audio appended between the final commit and done is dropped (vLLM clears its
//! queue after done). The done `text` is the deltas joined, exactly.
//!
//! Errors are vLLM's (`speech_to_text/realtime/connection.py`), each where vLLM sends it:
//! `{"type":"error","error":MESSAGE,"code":CODE}` with `invalid_json` (not JSON: "Invalid
//! JSON", without the parser's details), `processing_error` (JSON that is not an object, or an
//! event its pydantic model refuses: an append without `audio`, a `final` that is no boolean
//! even to pydantic's lax mode, `null` included), `unknown_event` (a type it does not know, or
//! none), `invalid_event` (a `session.update` whose `model` is absent or null: "Missing
//! required field: model"),
//! `model_not_found` (with `--served-model`, one naming another model; an empty name is
//! served, as vLLM's `_is_model_supported("")`),
//! `model_not_validated` (a commit before the model was), `invalid_audio` (an append whose
//! audio does not decode to PCM16 samples, or is empty; base64 is read as pybase64's
//! non-validating decoder reads it, [`lenient`]), and `--mock-error CODE` on the first
//! append. None closes the connection. With `--max-tokens N` a transcription ends after N
//! model steps, with `transcription.done`, however much audio is left (vLLM's
//! `realtime_max_tokens`); what comes after waits for the next start commit.
//! `transcription.done`'s `usage` is vLLM's `UsageInfo` as pydantic dumps it ([`usage`]).

mod lenient;

use super::stats::Counters;
use super::timed::{Behaviour, Flow, TimedSession};
use crate::protocol::vllm::{codes, names};
use crate::protocol::INPUT_SAMPLE_RATE;
use crate::trace::format::json_string;
use serde::Deserialize;
use std::borrow::Cow;
use std::rc::Rc;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// The word the deltas transcribe (a benchmark does not read it).
const WORD: &str = "la ";

/// One model step of Voxtral Realtime: 80 ms of audio (12.5 tokens a second).
const STEP_S: f64 = 0.08;
const STEP_BYTES: u64 = INPUT_SAMPLE_RATE as u64 * 2 * 8 / 100;

/// The delta of a step that made no text, as pydantic dumps it.
const EMPTY_DELTA: &str = r#"{"type":"transcription.delta","delta":""}"#;

/// The `prompt_tokens` vLLM reports: the length of the first step's prompt
/// (`len(output.prompt_token_ids)` of the first output), which for Voxtral Mini Realtime is
/// the streaming prefix — BOS, 32 left-pad tokens and 6 delay tokens (480 ms) — whatever the
/// audio's length; 0 when the utterance made no step.
const PROMPT_TOKENS: u64 = 1 + 32 + 6;

pub struct Session {
    behaviour: Rc<Behaviour>,
    id: String,
    validated: bool,
    /// A non-final commit started the utterance, whose done has not been sent.
    started: bool,
    appends: u64,
    /// Audio received on the connection, in bytes, for the arrival deviation.
    input_bytes: u64,
    first_arrival_s: Option<f64>,
    /// The utterance's audio, in bytes: what came since the last done, less what came between
    /// a final commit and its done.
    utterance_bytes: u64,
    /// Of that, the audio the model steps have processed.
    processed_bytes: u64,
    /// The utterance's model steps: a delta and a completion token each.
    steps: u64,
    /// The words its deltas have sent.
    words: u64,
    next_step_s: Option<f64>,
    /// The final commit came: `transcription.done` is due then.
    done_at_s: Option<f64>,
    pcm: Vec<u8>,
}

#[derive(Debug, Deserialize)]
struct ClientEvent<'a> {
    /// vLLM reads `event.get("type")`: an event without one is an unknown event.
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    audio: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    /// A boolean to pydantic's lax mode (`"yes"` is true), so read as any value; `null` is
    /// present (`Some(Null)`), which pydantic refuses, where an absent `final` is false.
    #[serde(rename = "final", default, deserialize_with = "present")]
    last: Option<serde_json::Value>,
}

/// A field that is there, even as `null` (serde's `Option` reads `null` as absent).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(deserializer).map(Some)
}

impl Session {
    pub fn new(behaviour: Rc<Behaviour>, number: u64) -> Session {
        Session {
            behaviour,
            // vLLM's `f"sess-{random_uuid()}"` (32 hex digits): here the session's number,
            // spread over the digits, with the process's id, so that ids differ between runs.
            id: format!(
                "sess-{:032x}",
                (u128::from(std::process::id()) << 64)
                    | u128::from(number.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            ),
            validated: false,
            started: false,
            appends: 0,
            input_bytes: 0,
            first_arrival_s: None,
            utterance_bytes: 0,
            processed_bytes: 0,
            steps: 0,
            words: 0,
            next_step_s: None,
            done_at_s: None,
            pcm: Vec::with_capacity(8192),
        }
    }

    /// The audio a word stands for: one `--delta-interval-ms`.
    fn word_bytes(&self) -> u64 {
        (self.behaviour.delta_interval_s * f64::from(INPUT_SAMPLE_RATE) * 2.0).max(2.0) as u64
    }

    fn error(&self, out: &mut Vec<Utf8Bytes>, counters: &Counters, code: &str, message: &str) {
        counters.protocol_error();
        out.push(Utf8Bytes::from(format!(
            r#"{{"type":"{}","error":{},"code":"{code}"}}"#,
            names::ERROR,
            json_string(message)
        )));
    }

    /// One model step over the next 80 ms of the utterance's audio (or what is left of it):
    /// its delta holds a word for each delta interval of audio the steps have begun since the
    /// last, so the first step makes text and the words keep `--delta-interval-ms`'s cadence.
    fn step(&mut self, out: &mut Vec<Utf8Bytes>) {
        self.steps += 1;
        self.processed_bytes = self.utterance_bytes.min(self.processed_bytes + STEP_BYTES);
        let due = self.processed_bytes.div_ceil(self.word_bytes());
        let words = due.saturating_sub(self.words);
        if words == 0 {
            out.push(Utf8Bytes::from_static(EMPTY_DELTA));
            return;
        }
        self.words = due;
        out.push(Utf8Bytes::from(format!(
            r#"{{"type":"{}","delta":"{}"}}"#,
            names::DELTA,
            WORD.repeat(words as usize)
        )));
    }

    /// The transcription has made its `--max-tokens` steps.
    fn at_token_limit(&self) -> bool {
        self.behaviour
            .max_tokens
            .is_some_and(|max| self.steps >= u64::from(max))
    }

    /// `transcription.done` after the steps of the audio left (up to the token limit); the
    /// next utterance starts anew.
    fn done(&mut self, out: &mut Vec<Utf8Bytes>) {
        while self.processed_bytes < self.utterance_bytes && !self.at_token_limit() {
            self.step(out);
        }
        let text = WORD.repeat(self.words as usize);
        let prompt = if self.steps > 0 { PROMPT_TOKENS } else { 0 };
        out.push(Utf8Bytes::from(format!(
            r#"{{"type":"{}","text":{},"usage":{}}}"#,
            names::DONE,
            json_string(&text),
            usage(prompt, self.steps)
        )));
        self.started = false;
        self.utterance_bytes = 0;
        self.processed_bytes = 0;
        self.steps = 0;
        self.words = 0;
    }

    fn on_append(
        &mut self,
        audio: Option<&str>,
        now_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        counters.append_received();
        self.appends += 1;
        if self.appends == 1 {
            if let Some(code) = &self.behaviour.mock_error {
                let message = format!("the mock was told to fail with {code} (--mock-error)");
                self.error(out, counters, code, &message);
            }
        }
        let Some(audio) = audio else {
            // vLLM's pydantic model refuses the event.
            let message = "1 validation error for InputAudioBufferAppend\naudio\n  Field required";
            self.error(out, counters, codes::PROCESSING_ERROR, message);
            return;
        };
        self.pcm.clear();
        let decoded = lenient::decode_base64(audio, &mut self.pcm);
        // vLLM refuses audio that does not decode to whole PCM16 samples, and empty audio.
        if decoded.is_err() || self.pcm.len() % 2 != 0 || self.pcm.is_empty() {
            self.error(out, counters, codes::INVALID_AUDIO, "Invalid audio data");
            return;
        }
        let before_s = self.input_bytes as f64 / (f64::from(INPUT_SAMPLE_RATE) * 2.0);
        let first = *self.first_arrival_s.get_or_insert(now_s);
        counters.record_arrival_deviation_s(((now_s - first) - before_s).abs());
        self.input_bytes += self.pcm.len() as u64;
        if self.done_at_s.is_some() {
            // vLLM's audio queue ends at the final commit and is cleared after done.
            return;
        }
        self.utterance_bytes += self.pcm.len() as u64;
        if self.started && self.next_step_s.is_none() {
            self.next_step_s = Some(now_s + self.behaviour.first_delta_s);
        }
    }

    fn on_commit(&mut self, last: bool, now_s: f64, counters: &Counters, out: &mut Vec<Utf8Bytes>) {
        if !self.validated {
            let message = "Model not validated. Make sure to validate the model by sending a session.update event.";
            self.error(out, counters, codes::MODEL_NOT_VALIDATED, message);
            return;
        }
        if last {
            // vLLM's final commit only ends the audio queue of a transcription a start commit
            // began: one that started nothing is answered by nothing (`connection.py`).
            if self.started {
                self.done_at_s = Some(now_s + self.behaviour.first_delta_s);
            }
            self.next_step_s = None;
        } else {
            self.started = true;
            // Audio buffered before the commit is the utterance's: its steps start now.
            if self.utterance_bytes > 0 && self.next_step_s.is_none() && self.done_at_s.is_none() {
                self.next_step_s = Some(now_s + self.behaviour.first_delta_s);
            }
        }
    }
}

impl Session {
    /// A frame that is no event vLLM reads: not JSON (`invalid_json`), JSON that is not an
    /// object (vLLM's `event.get` fails: `processing_error`), or an object whose fields are
    /// of the wrong kinds (its pydantic model refuses them: `processing_error`).
    fn refuse_unreadable(
        &self,
        text: &str,
        err: &serde_json::Error,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        match serde_json::from_str::<serde_json::Value>(text) {
            // vLLM's words exactly, without the parser's details.
            Err(_) => self.error(out, counters, codes::INVALID_JSON, "Invalid JSON"),
            Ok(serde_json::Value::Object(_)) => {
                let message = format!("Invalid event ({err})");
                self.error(out, counters, codes::PROCESSING_ERROR, &message);
            }
            Ok(other) => {
                let kind = match other {
                    serde_json::Value::Array(_) => "list",
                    serde_json::Value::String(_) => "str",
                    serde_json::Value::Bool(_) => "bool",
                    serde_json::Value::Null => "NoneType",
                    _ => "int",
                };
                let message = format!("'{kind}' object has no attribute 'get'");
                self.error(out, counters, codes::PROCESSING_ERROR, &message);
            }
        }
    }
}

impl TimedSession for Session {
    fn greet(&mut self, _now_s: f64, out: &mut Vec<Utf8Bytes>) {
        out.push(Utf8Bytes::from(format!(
            r#"{{"type":"{}","id":"{}","created":{}}}"#,
            names::SESSION_CREATED,
            self.id,
            crate::clock::realtime_s() as u64
        )));
    }

    fn on_text(
        &mut self,
        text: &str,
        now_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) -> Flow {
        let event: ClientEvent<'_> = match serde_json::from_str(text) {
            Ok(event) => event,
            Err(err) => {
                self.refuse_unreadable(text, &err, counters, out);
                return Flow::Continue;
            }
        };
        match event.kind.as_deref() {
            Some(names::APPEND) => self.on_append(event.audio.as_deref(), now_s, counters, out),
            Some(names::SESSION_UPDATE) => match event.model.as_deref() {
                // vLLM's `_is_model_supported` takes an empty name as the served model.
                Some(model)
                    if !self.behaviour.check_model
                        || model.is_empty()
                        || model == self.behaviour.served_model =>
                {
                    self.validated = true;
                }
                Some(model) => {
                    let message = format!("The model `{model}` does not exist.");
                    self.error(out, counters, codes::MODEL_NOT_FOUND, &message);
                }
                // vLLM (0.34) takes an absent or null `model` as missing.
                None => self.error(
                    out,
                    counters,
                    codes::INVALID_EVENT,
                    "Missing required field: model",
                ),
            },
            Some(names::COMMIT) => match event.last.as_ref().map(lenient::pydantic_bool) {
                None => self.on_commit(false, now_s, counters, out),
                Some(Some(last)) => self.on_commit(last, now_s, counters, out),
                Some(None) if event.last == Some(serde_json::Value::Null) => {
                    let message = "1 validation error for InputAudioBufferCommit\nfinal\n  Input should be a valid boolean [type=bool_type, input_value=None, input_type=NoneType]";
                    self.error(out, counters, codes::PROCESSING_ERROR, message);
                }
                Some(None) => {
                    let message = "1 validation error for InputAudioBufferCommit\nfinal\n  Input should be a valid boolean";
                    self.error(out, counters, codes::PROCESSING_ERROR, message);
                }
            },
            other => {
                let message = format!("Unknown event type: {}", other.unwrap_or("None"));
                self.error(out, counters, codes::UNKNOWN_EVENT, &message);
            }
        }
        Flow::Continue
    }

    fn on_timer(&mut self, now_s: f64, out: &mut Vec<Utf8Bytes>) {
        if let Some(at) = self.next_step_s.filter(|at| *at <= now_s) {
            if self.processed_bytes + STEP_BYTES <= self.utterance_bytes {
                self.step(out);
            }
            self.next_step_s = Some(at + STEP_S);
            if self.at_token_limit() {
                // The generation is over: done now, the audio left untranscribed.
                self.next_step_s = None;
                self.done_at_s = None;
                self.done(out);
                return;
            }
        }
        if self.done_at_s.is_some_and(|at| at <= now_s) {
            self.done_at_s = None;
            self.done(out);
        }
    }

    fn next_wake_s(&self) -> Option<f64> {
        match (self.next_step_s, self.done_at_s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// vLLM's `UsageInfo` as pydantic's `model_dump_json` writes it: its field order,
/// `prompt_tokens_details` left out when None (`exclude_if`), `completion_tokens_details` not.
fn usage(prompt: u64, completion: u64) -> String {
    format!(
        r#"{{"prompt_tokens":{prompt},"total_tokens":{},"completion_tokens":{completion},"completion_tokens_details":null}}"#,
        prompt + completion
    )
}

#[cfg(test)]
mod tests;
