//! The vLLM `/v1/realtime` mock session (`mock --protocol vllm`), free of sockets: it wants a
//! `session.update` naming `--served-model` before the first commit, transcribes as audio
//! arrives — a `transcription.delta` every `--delta-interval-ms` of received audio, the first
//! `--first-delta-ms` after the first audio — and answers the final commit with the last delta
//! and `transcription.done` (`text`, `usage`) `--first-delta-ms` later.
//!
//! Errors are vLLM's (`speech_to_text/realtime/connection.py`), each where vLLM sends it:
//! `{"type":"error","error":MESSAGE,"code":CODE}` with `invalid_json` (not JSON),
//! `unknown_event` (a type it does not know, or none), `invalid_event` (a `session.update`
//! without `model`), `model_not_found` (one naming a model not served), `model_not_validated`
//! (a commit before the model was), `invalid_audio` (an append whose audio is not base64 PCM16,
//! or empty), and `--mock-error CODE` (e.g. `processing_error`) on the first append. None
//! closes the connection. `transcription.done`'s `usage` has vLLM's `UsageInfo` fields.

use super::stats::Counters;
use super::timed::{Behaviour, Flow, TimedSession};
use crate::protocol::vllm::{codes, names};
use crate::protocol::INPUT_SAMPLE_RATE;
use crate::trace::format::json_string;
use base64::Engine as _;
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
    #[serde(rename = "final", default)]
    last: Option<bool>,
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
        self.pcm.clear();
        let decoded = audio.map(|a| {
            base64::engine::general_purpose::STANDARD.decode_vec(a.as_bytes(), &mut self.pcm)
        });
        // vLLM refuses audio that does not decode to whole PCM16 samples, and empty audio.
        if !matches!(decoded, Some(Ok(()))) || self.pcm.len() % 2 != 0 || self.pcm.is_empty() {
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

impl TimedSession for Session {
    fn greet(&mut self, _now_s: f64, out: &mut Vec<Utf8Bytes>) {
        out.push(Utf8Bytes::from(format!(
            r#"{{"type":"{}","id":"{}","created":0}}"#,
            names::SESSION_CREATED,
            self.id
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
                let message = format!("Invalid JSON ({err})");
                self.error(out, counters, codes::INVALID_JSON, &message);
                return Flow::Continue;
            }
        };
        match event.kind.as_deref() {
            Some(names::APPEND) => self.on_append(event.audio.as_deref(), now_s, counters, out),
            Some(names::SESSION_UPDATE) => match event.model.as_deref() {
                Some(model) if model == self.behaviour.served_model => self.validated = true,
                Some(model) => {
                    let message = format!(
                        "The model `{model}` does not exist (this mock serves `{}`).",
                        self.behaviour.served_model
                    );
                    self.error(out, counters, codes::MODEL_NOT_FOUND, &message);
                }
                None => {
                    let message = "Missing required field: model";
                    self.error(out, counters, codes::INVALID_EVENT, message);
                }
            },
            Some(names::COMMIT) => self.on_commit(event.last == Some(true), now_s, counters, out),
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
            let seconds = self.input_bytes / (u64::from(INPUT_SAMPLE_RATE) * 2);
            // vLLM's UsageInfo, in its field order: prompt, total, completion, details.
            let (prompt, completion) = (seconds * 13, self.deltas);
            out.push(Utf8Bytes::from(format!(
                r#"{{"type":"{}","text":{},"usage":{{"prompt_tokens":{prompt},"total_tokens":{},"completion_tokens":{completion},"prompt_tokens_details":null}}}}"#,
                names::DONE,
                json_string(text.trim_end()),
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
}
