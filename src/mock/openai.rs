//! The OpenAI Realtime mock session (`mock --protocol openai`), free of sockets: GA or beta
//! names as the connection asked (`OpenAI-Beta: realtime=v1` in the handshake means beta), the
//! session terms each naming allows ([`terms`]), server VAD on energy ([`super::vad`]), client
//! commits, and responses whose deltas come on a clock: the first `--first-delta-ms` after the
//! turn's end, then one every `--delta-interval-ms`, `--response-deltas` of them, each an
//! interval of PCM16 silence at `--output-sample-rate` with a transcript delta.
//!
//! Every client event of openai-python's `RealtimeClientEvent` union is taken: the
//! conversation item events are answered with their server events (the mock keeps no
//! conversation: any item id is taken as one it holds), and `output_audio_buffer.clear`
//! (WebRTC/SIP only in the API) with `output_audio_buffer.cleared` of the last response.
//!
//! Errors follow the API's shape (`error.type/code/message/param/event_id`): `invalid_json`,
//! `unknown_event`, `invalid_audio` (base64 that does not decode), the refused terms of a
//! `session.update`, `input_audio_buffer_commit_empty`, and `--mock-error CODE` on the first
//! append; each leaves the session open.

mod terms;

use super::stats::Counters;
use super::timed::{Behaviour, Flow, TimedSession};
use super::vad::{Vad, VadEvent};
use crate::protocol::openai::{names, BETA_HEADER, DEFAULT_SAMPLE_RATE};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::rc::Rc;
use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;
use tokio_tungstenite::tungstenite::http::{HeaderMap, HeaderValue};
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// The event names of one naming.
struct Names {
    audio_delta: &'static str,
    audio_done: &'static str,
    transcript_delta: &'static str,
    text_delta: &'static str,
}

const GA: Names = Names {
    audio_delta: names::AUDIO_DELTA,
    audio_done: names::AUDIO_DONE,
    transcript_delta: names::TRANSCRIPT_DELTA,
    text_delta: names::TEXT_DELTA,
};
const BETA: Names = Names {
    audio_delta: names::BETA_AUDIO_DELTA,
    audio_done: names::BETA_AUDIO_DONE,
    transcript_delta: names::BETA_TRANSCRIPT_DELTA,
    text_delta: names::BETA_TEXT_DELTA,
};

#[derive(Debug)]
struct Response {
    id: String,
    item_id: String,
    next_at_s: f64,
    sent: u32,
}

pub struct Session {
    behaviour: Rc<Behaviour>,
    id: String,
    next_event: u64,
    next_item: u64,
    /// The connection asked for beta names (`OpenAI-Beta: realtime=v1`).
    beta: bool,
    audio_out: bool,
    vad: Option<Vad>,
    input_bytes: u64,
    uncommitted_bytes: u64,
    first_arrival_s: Option<f64>,
    appends: u64,
    responses: VecDeque<Response>,
    /// The last response created, for `output_audio_buffer.cleared`.
    last_response_id: Option<String>,
    pcm: Vec<u8>,
    vad_events: Vec<VadEvent>,
}

#[derive(Debug, Deserialize)]
struct ClientEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    event_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    audio: Option<Cow<'a, str>>,
    #[serde(default)]
    session: Option<Value>,
    /// `conversation.item.create`.
    #[serde(default)]
    item: Option<Value>,
    /// `conversation.item.truncate/delete/retrieve`.
    #[serde(default, borrow)]
    item_id: Option<Cow<'a, str>>,
    #[serde(default)]
    content_index: Option<u64>,
    #[serde(default)]
    audio_end_ms: Option<u64>,
}

impl Session {
    /// Session `number` of a connection that asked for beta names (`beta`) or GA ones.
    pub fn new(behaviour: Rc<Behaviour>, number: u64, beta: bool) -> Session {
        Session {
            behaviour,
            id: format!("sess_{number:06}"),
            next_event: 0,
            next_item: 0,
            beta,
            audio_out: true,
            vad: Some(Vad::new(DEFAULT_SAMPLE_RATE)),
            input_bytes: 0,
            uncommitted_bytes: 0,
            first_arrival_s: None,
            appends: 0,
            responses: VecDeque::new(),
            last_response_id: None,
            pcm: Vec::with_capacity(8192),
            vad_events: Vec::with_capacity(2),
        }
    }

    fn names(&self) -> &'static Names {
        if self.beta {
            &BETA
        } else {
            &GA
        }
    }

    fn event_id(&mut self) -> String {
        self.next_event += 1;
        format!("event_{}_{}", self.id, self.next_event)
    }

    fn push(&mut self, out: &mut Vec<Utf8Bytes>, mut event: Value) {
        event["event_id"] = Value::String(self.event_id());
        out.push(Utf8Bytes::from(event.to_string()));
    }

    fn error(
        &mut self,
        out: &mut Vec<Utf8Bytes>,
        counters: &Counters,
        code: &str,
        message: &str,
        client_event_id: Option<&str>,
    ) {
        self.error_at(out, counters, code, None, message, client_event_id);
    }

    /// An `error` naming the parameter it is about (`param`), as the API's do.
    fn error_at(
        &mut self,
        out: &mut Vec<Utf8Bytes>,
        counters: &Counters,
        code: &str,
        param: Option<&str>,
        message: &str,
        client_event_id: Option<&str>,
    ) {
        counters.protocol_error();
        let kind = if code == "server_error" || code == "processing_error" {
            "server_error"
        } else {
            "invalid_request_error"
        };
        self.push(
            out,
            json!({"type": names::ERROR, "error": {"type": kind, "code": code,
                "message": message, "param": param, "event_id": client_event_id}}),
        );
    }

    /// The `error` the API answers a request it refuses.
    fn refuse(
        &mut self,
        refused: &terms::Refusal,
        client_event_id: Option<&str>,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let (code, param) = (refused.code, Some(refused.param.as_str()));
        self.error_at(
            out,
            counters,
            code,
            param,
            &refused.message,
            client_event_id,
        );
    }

    /// Input audio in ms: PCM16 at 24 kHz, the one rate the API takes.
    fn audio_ms(bytes: u64) -> u64 {
        bytes * 1000 / (u64::from(DEFAULT_SAMPLE_RATE) * 2)
    }

    /// The session as it stands, for `session.created` and `session.updated`.
    fn session_object(&self) -> Value {
        terms::Shown {
            beta: self.beta,
            id: &self.id,
            model: &self.behaviour.served_model,
            audio_out: self.audio_out,
            vad: self.vad.is_some(),
            output_rate: self.behaviour.output_sample_rate,
        }
        .object()
    }

    fn on_update(
        &mut self,
        session: Option<&Value>,
        client_event_id: Option<&str>,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let asked = match terms::read(self.beta, session) {
            Ok(asked) => asked,
            Err(refused) => {
                self.refuse(&refused, client_event_id, counters, out);
                return;
            }
        };
        if let Some(audio_out) = asked.audio_out {
            self.audio_out = audio_out;
        }
        match asked.vad {
            Some(false) => self.vad = None,
            Some(true) if self.vad.is_none() => self.vad = Some(Vad::new(DEFAULT_SAMPLE_RATE)),
            _ => {}
        }
        let session = self.session_object();
        self.push(
            out,
            json!({"type": names::SESSION_UPDATED, "session": session}),
        );
    }

    fn on_append(
        &mut self,
        audio: Option<&str>,
        client_event_id: Option<&str>,
        now_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        counters.append_received();
        self.appends += 1;
        if self.appends == 1 {
            if let Some(code) = self.behaviour.mock_error.clone() {
                let message = format!("the mock was told to fail with {code} (--mock-error)");
                self.error(out, counters, &code, &message, client_event_id);
            }
        }
        self.pcm.clear();
        let decoded = audio.map(|a| {
            base64::engine::general_purpose::STANDARD.decode_vec(a.as_bytes(), &mut self.pcm)
        });
        if !matches!(decoded, Some(Ok(()))) {
            let message = "audio is not base64 PCM16";
            self.error(out, counters, "invalid_audio", message, client_event_id);
            return;
        }
        let before_s = Self::audio_ms(self.input_bytes) as f64 / 1000.0;
        let first = *self.first_arrival_s.get_or_insert(now_s);
        counters.record_arrival_deviation_s(((now_s - first) - before_s).abs());
        self.input_bytes += self.pcm.len() as u64;
        self.uncommitted_bytes += self.pcm.len() as u64;
        let Some(vad) = &mut self.vad else { return };
        vad.feed(&self.pcm, &mut self.vad_events);
        let events = std::mem::take(&mut self.vad_events);
        for event in &events {
            let item_id = format!("item_{}", self.next_item);
            match *event {
                VadEvent::Started { audio_start_ms } => self.push(
                    out,
                    json!({"type": names::SPEECH_STARTED, "audio_start_ms": audio_start_ms, "item_id": item_id}),
                ),
                VadEvent::Stopped { audio_end_ms } => {
                    self.push(
                        out,
                        json!({"type": names::SPEECH_STOPPED, "audio_end_ms": audio_end_ms, "item_id": item_id}),
                    );
                    self.commit(now_s, out);
                    self.respond(now_s, out);
                }
            }
        }
        self.vad_events = events;
        self.vad_events.clear();
    }

    fn commit(&mut self, _now_s: f64, out: &mut Vec<Utf8Bytes>) {
        let item_id = format!("item_{}", self.next_item);
        self.next_item += 1;
        self.uncommitted_bytes = 0;
        self.push(
            out,
            json!({"type": names::COMMITTED, "previous_item_id": null, "item_id": item_id}),
        );
        self.push(
            out,
            json!({"type": names::ITEM_CREATED, "item": {"id": item_id, "type": "message",
                "role": "user", "content": [{"type": "input_audio"}]}}),
        );
    }

    fn respond(&mut self, now_s: f64, out: &mut Vec<Utf8Bytes>) {
        let n = self.next_event;
        let id = format!("resp_{}_{n}", self.id);
        let item_id = format!("item_{}_{n}", self.id);
        self.push(
            out,
            json!({"type": names::RESPONSE_CREATED, "response": {"id": id,
                "object": "realtime.response", "status": "in_progress", "output": []}}),
        );
        self.last_response_id = Some(id.clone());
        let after = self
            .responses
            .back()
            .map_or(now_s, |r| r.next_at_s.max(now_s));
        self.responses.push_back(Response {
            id,
            item_id,
            next_at_s: after + self.behaviour.first_delta_s,
            sent: 0,
        });
    }

    /// One step of the front response: its deltas, or its end.
    fn step(&mut self, out: &mut Vec<Utf8Bytes>) {
        let names = self.names();
        let Some(r) = self.responses.front_mut() else {
            return;
        };
        r.sent += 1;
        r.next_at_s += self.behaviour.delta_interval_s;
        let (id, item_id, sent) = (r.id.clone(), r.item_id.clone(), r.sent);
        let head = |kind: &str| {
            format!(
                r#"{{"type":"{kind}","response_id":"{id}","item_id":"{item_id}","output_index":0,"content_index":0"#
            )
        };
        if self.audio_out {
            let event_id = self.event_id();
            out.push(Utf8Bytes::from(format!(
                r#"{},"event_id":"{event_id}","delta":"{}"}}"#,
                head(names.audio_delta),
                self.behaviour.delta_audio_b64
            )));
        }
        let text_kind = if self.audio_out {
            names.transcript_delta
        } else {
            names.text_delta
        };
        let event_id = self.event_id();
        out.push(Utf8Bytes::from(format!(
            r#"{},"event_id":"{event_id}","delta":"…"}}"#,
            head(text_kind)
        )));
        if sent >= self.behaviour.response_deltas {
            if self.audio_out {
                let event_id = self.event_id();
                out.push(Utf8Bytes::from(format!(
                    r#"{},"event_id":"{event_id}"}}"#,
                    head(names.audio_done)
                )));
            }
            self.responses.pop_front();
            self.push(
                out,
                json!({"type": names::RESPONSE_DONE, "response": {"id": id,
                    "object": "realtime.response", "status": "completed", "output": [],
                    "usage": {"total_tokens": sent, "output_tokens": sent}}}),
            );
        }
    }
}

/// Whether a handshake asks for beta names: `OpenAI-Beta: realtime=v1`, as openai-python's
/// beta client sends it.
pub fn asks_for_beta(headers: &HeaderMap) -> bool {
    offers(headers, BETA_HEADER.0, BETA_HEADER.1)
}

/// The subprotocol to answer: `realtime` when the client offers it, as openai-node's browser
/// client does (`['realtime', 'openai-insecure-api-key.<key>']`, and a browser fails a
/// connection whose answer names none); the key one is never echoed.
pub fn subprotocol(headers: &HeaderMap) -> Option<HeaderValue> {
    offers(
        headers,
        SEC_WEBSOCKET_PROTOCOL.as_str(),
        REALTIME_SUBPROTOCOL,
    )
    .then(|| HeaderValue::from_static(REALTIME_SUBPROTOCOL))
}

/// Whether any `name` header lists `token` among its comma-separated values.
fn offers(headers: &HeaderMap, name: &str, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim() == token)
}

/// The subprotocol OpenAI's endpoint speaks.
const REALTIME_SUBPROTOCOL: &str = "realtime";

impl Session {
    /// `conversation.item.create`: the item, with an id if it came without one, is created.
    fn on_item_create(&mut self, item: Option<Value>, out: &mut Vec<Utf8Bytes>) {
        let mut item = match item {
            Some(Value::Object(item)) => item,
            _ => serde_json::Map::new(),
        };
        if !item.get("id").is_some_and(Value::is_string) {
            item.insert(
                "id".into(),
                Value::String(format!("item_{}", self.next_item)),
            );
            self.next_item += 1;
        }
        item.insert("object".into(), Value::String("realtime.item".into()));
        item.insert("status".into(), Value::String("completed".into()));
        self.push(
            out,
            json!({"type": "conversation.item.created", "previous_item_id": null, "item": item}),
        );
    }

    /// `conversation.item.truncate/delete/retrieve`, each answered with its server event.
    fn on_item(&mut self, event: &ClientEvent<'_>, counters: &Counters, out: &mut Vec<Utf8Bytes>) {
        let Some(item_id) = event.item_id.as_deref() else {
            let refused = terms::Refusal::missing("item_id");
            self.refuse(&refused, event.event_id.as_deref(), counters, out);
            return;
        };
        let reply = match &*event.kind {
            names::ITEM_TRUNCATE => json!({"type": "conversation.item.truncated",
                "item_id": item_id, "content_index": event.content_index.unwrap_or(0),
                "audio_end_ms": event.audio_end_ms.unwrap_or(0)}),
            names::ITEM_DELETE => json!({"type": "conversation.item.deleted", "item_id": item_id}),
            _ => json!({"type": "conversation.item.retrieved", "item": {"id": item_id,
                "object": "realtime.item", "type": "message", "status": "completed",
                "role": "user", "content": []}}),
        };
        self.push(out, reply);
    }
}

impl TimedSession for Session {
    fn greet(&mut self, _now_s: f64, out: &mut Vec<Utf8Bytes>) {
        let session = self.session_object();
        self.push(
            out,
            json!({"type": names::SESSION_CREATED, "session": session}),
        );
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
                let message = format!("not a JSON event with a string `type`: {err}");
                self.error(out, counters, "invalid_json", &message, None);
                return Flow::Continue;
            }
        };
        let client_event_id = event.event_id.as_deref();
        match &*event.kind {
            names::APPEND => self.on_append(
                event.audio.as_deref(),
                client_event_id,
                now_s,
                counters,
                out,
            ),
            names::SESSION_UPDATE => {
                self.on_update(event.session.as_ref(), client_event_id, counters, out);
            }
            names::COMMIT => {
                if self.uncommitted_bytes == 0 {
                    let message = "the input audio buffer is empty: nothing to commit";
                    let code = "input_audio_buffer_commit_empty";
                    self.error(out, counters, code, message, client_event_id);
                } else {
                    self.commit(now_s, out);
                }
            }
            names::CLEAR => {
                self.uncommitted_bytes = 0;
                self.push(out, json!({"type": "input_audio_buffer.cleared"}));
            }
            names::RESPONSE_CREATE => self.respond(now_s, out),
            names::RESPONSE_CANCEL => {
                if let Some(r) = self.responses.pop_front() {
                    self.push(
                        out,
                        json!({"type": names::RESPONSE_DONE, "response": {"id": r.id,
                            "object": "realtime.response", "status": "cancelled", "output": []}}),
                    );
                }
            }
            names::ITEM_CREATE => self.on_item_create(event.item, out),
            names::ITEM_TRUNCATE | names::ITEM_DELETE | names::ITEM_RETRIEVE => {
                self.on_item(&event, counters, out);
            }
            names::OUTPUT_AUDIO_CLEAR => {
                if let Some(id) = self.last_response_id.clone() {
                    self.push(
                        out,
                        json!({"type": "output_audio_buffer.cleared", "response_id": id}),
                    );
                }
            }
            names::BETA_TRANSCRIPTION_SESSION_UPDATE if self.beta => {
                let session = event.session.unwrap_or(Value::Null);
                self.push(
                    out,
                    json!({"type": "transcription_session.updated", "session": session}),
                );
            }
            other => {
                let message = format!("unknown event type `{other}`");
                self.error(out, counters, "unknown_event", &message, client_event_id);
            }
        }
        Flow::Continue
    }

    fn on_timer(&mut self, now_s: f64, out: &mut Vec<Utf8Bytes>) {
        while self.responses.front().is_some_and(|r| r.next_at_s <= now_s) {
            self.step(out);
        }
    }

    fn next_wake_s(&self) -> Option<f64> {
        self.responses.front().map(|r| r.next_at_s)
    }
}

#[cfg(test)]
mod tests;
