//! The vLLM `/v1/realtime` mock session (`mock --protocol vllm`), free of sockets: it wants a
//! `session.update` naming `--served-model` before the first commit, transcribes as audio
//! arrives — a `transcription.delta` every `--delta-interval-ms` of received audio, the first
//! `--first-delta-ms` after the first audio — and answers the final commit with the last delta
//! and `transcription.done` (`text`, `usage`) `--first-delta-ms` later.
//!
//! Each utterance starts with a non-final commit and ends with `transcription.done`; audio
//! appended after that and before the next non-final commit is buffered, not transcribed. The
//! done `text` is the deltas joined, exactly.
//!
//! Errors are vLLM's (`speech_to_text/realtime/connection.py`), each where vLLM sends it:
//! `{"type":"error","error":MESSAGE,"code":CODE}` with `invalid_json` (not JSON: "Invalid
//! JSON", without the parser's details), `processing_error` (JSON that is not an object, or an
//! event its pydantic model refuses: an append without `audio`, a `final` that is no boolean
//! even to pydantic's lax mode, `null` included), `unknown_event` (a type it does not know, or
//! none), `invalid_event` (a `session.update` without `model`), `model_not_found` (one naming
//! a model not served; an empty name is served, as vLLM's `_is_model_supported("")`),
//! `model_not_validated` (a commit before the model was), `invalid_audio` (an append whose
//! audio does not decode to PCM16 samples, or is empty; base64 is read as pybase64's
//! non-validating decoder reads it, [`lenient`]), and `--mock-error CODE` on the first
//! append. None closes the connection.
//! `transcription.done`'s `usage` has vLLM's `UsageInfo` fields.

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

/// The word every delta transcribes (a benchmark does not read it).
const WORD: &str = "la ";

pub struct Session {
    behaviour: Rc<Behaviour>,
    id: String,
    validated: bool,
    started: bool,
    appends: u64,
    input_bytes: u64,
    first_arrival_s: Option<f64>,
    /// Audio transcribed so far, in bytes of input.
    transcribed_bytes: u64,
    deltas: u64,
    next_delta_s: Option<f64>,
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
            id: format!("sess_{number:06}"),
            validated: false,
            started: false,
            appends: 0,
            input_bytes: 0,
            first_arrival_s: None,
            transcribed_bytes: 0,
            deltas: 0,
            next_delta_s: None,
            done_at_s: None,
            pcm: Vec::with_capacity(8192),
        }
    }

    fn interval_bytes(&self) -> u64 {
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

    fn delta(&mut self, out: &mut Vec<Utf8Bytes>) {
        self.deltas += 1;
        out.push(Utf8Bytes::from(format!(
            r#"{{"type":"{}","delta":"{WORD}"}}"#,
            names::DELTA
        )));
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
        if self.started && self.next_delta_s.is_none() && self.done_at_s.is_none() {
            self.next_delta_s = Some(now_s + self.behaviour.first_delta_s);
        }
    }

    fn on_commit(&mut self, last: bool, now_s: f64, counters: &Counters, out: &mut Vec<Utf8Bytes>) {
        if !self.validated {
            let message = "Model not validated. Make sure to validate the model by sending a session.update event.";
            self.error(out, counters, codes::MODEL_NOT_VALIDATED, message);
            return;
        }
        if last {
            self.done_at_s = Some(now_s + self.behaviour.first_delta_s);
            self.next_delta_s = None;
        } else {
            self.started = true;
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
                Some(model) if model.is_empty() || model == self.behaviour.served_model => {
                    self.validated = true;
                }
                Some(model) => {
                    let message = format!("The model `{model}` does not exist.");
                    self.error(out, counters, codes::MODEL_NOT_FOUND, &message);
                }
                None => {
                    let message = "Missing required field: model";
                    self.error(out, counters, codes::INVALID_EVENT, message);
                }
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
        let step = self.interval_bytes();
        if let Some(at) = self.next_delta_s.filter(|at| *at <= now_s) {
            if self.transcribed_bytes + step <= self.input_bytes {
                self.transcribed_bytes += step;
                self.delta(out);
            }
            self.next_delta_s = Some(at + self.behaviour.delta_interval_s);
        }
        if self.done_at_s.is_some_and(|at| at <= now_s) {
            self.done_at_s = None;
            if self.transcribed_bytes < self.input_bytes {
                self.transcribed_bytes = self.input_bytes;
                self.delta(out);
            }
            let text = WORD.repeat(self.deltas as usize);
            // The utterance is over: the next starts with a non-final commit.
            self.started = false;
            self.deltas = 0;
            let seconds = self.input_bytes / (u64::from(INPUT_SAMPLE_RATE) * 2);
            // vLLM's UsageInfo, in its field order: prompt, total, completion, details.
            let (prompt, completion) = (seconds * 13, self.deltas);
            out.push(Utf8Bytes::from(format!(
                r#"{{"type":"{}","text":{},"usage":{{"prompt_tokens":{prompt},"total_tokens":{},"completion_tokens":{completion},"prompt_tokens_details":null}}}}"#,
                names::DONE,
                json_string(&text),
                prompt + completion
            )));
        }
    }

    fn next_wake_s(&self) -> Option<f64> {
        match (self.next_delta_s, self.done_at_s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests;
