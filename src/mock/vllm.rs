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
//! `{"type":"error","error":MESSAGE,"code":CODE}` with `invalid_json` (not JSON),
//! `processing_error` (JSON that is not an object, or an event its pydantic model refuses: an
//! append without `audio`, a `final` that is no boolean even to pydantic's lax mode),
//! `unknown_event` (a type it does not know, or none), `invalid_event` (a `session.update`
//! without `model`), `model_not_found` (one naming a model not served; an empty name is
//! served, as vLLM's `_is_model_supported("")`), `model_not_validated` (a commit before the
//! model was), `invalid_audio` (an append whose audio does not decode to PCM16 samples, or is
//! empty; base64 is read as pybase64's non-validating decoder reads it, [`lenient`]), and
//! `--mock-error CODE` on the first append. None closes the connection.
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
    /// A boolean to pydantic's lax mode (`"yes"` is true), so read as any value.
    #[serde(rename = "final", default)]
    last: Option<serde_json::Value>,
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
            Err(_) => {
                let message = format!("Invalid JSON ({err})");
                self.error(out, counters, codes::INVALID_JSON, &message);
            }
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
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use base64::Engine as _;
    use clap::Parser;

    fn behaviour(extra: &[&str]) -> Rc<Behaviour> {
        let mut argv = vec!["duplexbench-tui", "mock", "--protocol", "vllm"];
        argv.extend_from_slice(extra);
        let Some(Command::Mock(args)) = Cli::try_parse_from(argv).unwrap().command else {
            unreachable!()
        };
        Rc::new(Behaviour::new(&args.behaviour, 24_000))
    }

    fn kinds(out: &mut Vec<Utf8Bytes>) -> Vec<String> {
        out.drain(..)
            .map(|f| {
                let v: serde_json::Value = serde_json::from_str(f.as_str()).unwrap();
                match v.get("code") {
                    Some(code) => format!("error {}", code.as_str().unwrap()),
                    None => v["type"].as_str().unwrap().to_string(),
                }
            })
            .collect()
    }

    const PACKET: &str = r#"{"type":"input_audio_buffer.append","audio":"AAAAAAAAAAAAAAAA"}"#;

    #[test]
    fn the_vllm_mock_transcribes_between_the_commits_issue_12() {
        let mut s = Session::new(
            behaviour(&["--first-delta-ms", "100", "--delta-interval-ms", "1"]),
            0,
        );
        let c = Counters::new();
        let mut out = Vec::new();
        s.greet(0.0, &mut out);
        assert_eq!(kinds(&mut out), ["session.created"]);
        s.on_text(
            r#"{"type":"session.update","model":"duplexbench-mock"}"#,
            0.0,
            &c,
            &mut out,
        );
        s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
        let b64 = base64::engine::general_purpose::STANDARD.encode([0u8; 3200]);
        let packet = format!(r#"{{"type":"input_audio_buffer.append","audio":"{b64}"}}"#);
        s.on_text(&packet, 0.0, &c, &mut out);
        assert!(out.is_empty(), "neither is answered");
        assert_eq!(s.next_wake_s(), Some(0.1));
        s.on_timer(0.1, &mut out);
        assert_eq!(kinds(&mut out), ["transcription.delta"]);
        s.on_text(
            r#"{"type":"input_audio_buffer.commit","final":true}"#,
            0.2,
            &c,
            &mut out,
        );
        s.on_timer(0.31, &mut out);
        let done: serde_json::Value = serde_json::from_str(out.last().unwrap().as_str()).unwrap();
        assert_eq!(done["type"], "transcription.done");
        // vLLM's UsageInfo, not OpenAI's input/output names.
        let usage = done["usage"].as_object().unwrap();
        let keys: Vec<&str> = usage.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "completion_tokens",
                "prompt_tokens",
                "prompt_tokens_details",
                "total_tokens"
            ]
        );
        assert_eq!(
            usage["total_tokens"].as_u64(),
            Some(
                usage["prompt_tokens"].as_u64().unwrap()
                    + usage["completion_tokens"].as_u64().unwrap()
            )
        );
    }

    #[test]
    fn the_vllm_mock_answers_each_error_code_where_vllm_sends_it_issue_12() {
        let c = Counters::new();
        let mut out = Vec::new();
        let mut s = Session::new(behaviour(&[]), 0);
        s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
        s.on_text(
            r#"{"type":"session.update","model":"other"}"#,
            0.0,
            &c,
            &mut out,
        );
        s.on_text(r#"{"type":"session.update"}"#, 0.0, &c, &mut out);
        s.on_text("not json", 0.0, &c, &mut out);
        s.on_text(r#"{"type":"what.is.this"}"#, 0.0, &c, &mut out);
        s.on_text(r#"{"audio":"AAAA"}"#, 0.0, &c, &mut out);
        for audio in ["***", ""] {
            let append = format!(r#"{{"type":"input_audio_buffer.append","audio":"{audio}"}}"#);
            s.on_text(&append, 0.0, &c, &mut out);
        }
        assert_eq!(
            kinds(&mut out),
            [
                "error model_not_validated",
                "error model_not_found",
                "error invalid_event",
                "error invalid_json",
                "error unknown_event",
                "error unknown_event",
                "error invalid_audio",
                "error invalid_audio"
            ]
        );
        let mut s = Session::new(behaviour(&["--mock-error", "processing_error"]), 1);
        s.on_text(PACKET, 0.0, &c, &mut out);
        assert_eq!(kinds(&mut out), ["error processing_error"]);
    }

    fn update(s: &mut Session, c: &Counters, out: &mut Vec<Utf8Bytes>) {
        s.on_text(
            r#"{"type":"session.update","model":"duplexbench-mock"}"#,
            0.0,
            c,
            out,
        );
    }

    fn json(frame: &Utf8Bytes) -> serde_json::Value {
        serde_json::from_str(frame.as_str()).unwrap()
    }

    #[test]
    fn audio_after_done_is_not_transcribed_until_the_next_utterance_starts() {
        let mut s = Session::new(behaviour(&["--first-delta-ms", "100"]), 0);
        let (c, mut out) = (Counters::new(), Vec::new());
        // 100 ms at 16 kHz: more than a delta's worth (40 ms).
        let b64 = base64::engine::general_purpose::STANDARD.encode([0u8; 3200]);
        let packet = format!(r#"{{"type":"input_audio_buffer.append","audio":"{b64}"}}"#);
        update(&mut s, &c, &mut out);
        s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
        s.on_text(&packet, 0.0, &c, &mut out);
        s.on_text(
            r#"{"type":"input_audio_buffer.commit","final":true}"#,
            0.0,
            &c,
            &mut out,
        );
        s.on_timer(1.0, &mut out);
        assert_eq!(kinds(&mut out).last().unwrap(), "transcription.done");
        for i in 0..3 {
            s.on_text(&packet, 1.0 + f64::from(i), &c, &mut out);
            while let Some(at) = s.next_wake_s() {
                s.on_timer(at, &mut out);
            }
        }
        assert!(out.is_empty(), "{:?}", kinds(&mut out));
        s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 5.0, &c, &mut out);
        s.on_text(&packet, 5.0, &c, &mut out);
        s.on_timer(5.2, &mut out);
        assert_eq!(kinds(&mut out), ["transcription.delta"], "a new utterance");
    }

    #[test]
    fn the_done_text_is_the_deltas_joined_exactly() {
        let mut s = Session::new(behaviour(&["--delta-interval-ms", "1"]), 0);
        let (c, mut out) = (Counters::new(), Vec::new());
        update(&mut s, &c, &mut out);
        s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
        s.on_text(PACKET, 0.0, &c, &mut out);
        s.on_text(
            r#"{"type":"input_audio_buffer.commit","final":"yes"}"#,
            0.0,
            &c,
            &mut out,
        );
        s.on_timer(1.0, &mut out);
        let events: Vec<serde_json::Value> = out.iter().map(json).collect();
        let joined: String = events.iter().filter_map(|e| e["delta"].as_str()).collect();
        let done = events.last().unwrap();
        assert_eq!(
            done["type"], "transcription.done",
            "\"yes\" is final to pydantic"
        );
        assert_eq!(done["text"], joined.as_str());
    }

    #[test]
    fn base64_that_pybase64_takes_is_audio() {
        let mut s = Session::new(behaviour(&[]), 0);
        let (c, mut out) = (Counters::new(), Vec::new());
        for audio in ["AAAA\\nAAAA\\n", "AAB=", "AAAA-AAAA"] {
            let append = format!(r#"{{"type":"input_audio_buffer.append","audio":"{audio}"}}"#);
            s.on_text(&append, 0.0, &c, &mut out);
        }
        assert!(out.is_empty(), "{:?}", kinds(&mut out));
    }

    #[test]
    fn malformed_events_get_vllms_codes_and_an_empty_model_is_served() {
        let mut s = Session::new(behaviour(&[]), 0);
        let (c, mut out) = (Counters::new(), Vec::new());
        s.on_text(r#"{"type":"session.update","model":""}"#, 0.0, &c, &mut out);
        s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
        assert!(out.is_empty(), "validated: {:?}", kinds(&mut out));
        s.on_text(r#"{"type":"input_audio_buffer.append"}"#, 0.0, &c, &mut out);
        s.on_text("[1,2]", 0.0, &c, &mut out);
        s.on_text(
            r#"{"type":"input_audio_buffer.commit","final":"maybe"}"#,
            0.0,
            &c,
            &mut out,
        );
        s.on_text(
            r#"{"type":"session.update","model":"x"}"#,
            0.0,
            &c,
            &mut out,
        );
        let last = json(out.last().unwrap());
        assert_eq!(
            last["error"], "The model `x` does not exist.",
            "as vLLM says it"
        );
        assert_eq!(
            kinds(&mut out),
            [
                "error processing_error",
                "error processing_error",
                "error processing_error",
                "error model_not_found"
            ]
        );
    }

    #[test]
    fn session_created_says_when_in_unix_seconds() {
        let mut out = Vec::new();
        Session::new(behaviour(&[]), 0).greet(0.0, &mut out);
        let created = json(&out[0])["created"].as_u64().unwrap();
        let now = crate::clock::realtime_s() as u64;
        assert!(now.abs_diff(created) < 5, "{created} vs {now}");
    }
}
