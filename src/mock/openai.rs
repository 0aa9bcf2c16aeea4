//! The OpenAI Realtime mock session (`mock --protocol openai`), free of sockets: GA or beta
//! names as the connection asked ([`handshake`]), the session terms each naming allows and
//! the accepted ones echoed ([`terms`]), server VAD on energy ([`super::vad`]), client commits,
//! and responses streamed as the API streams them ([`response`]) whose deltas come on a clock:
//! the first `--first-delta-ms` after the turn's end, then one every `--delta-interval-ms`,
//! `--response-deltas` of them, each an interval of PCM16 silence at 24 kHz with a transcript
//! delta.
//!
//! Every client event of openai-python's `RealtimeClientEvent` union is taken: the
//! conversation item events are answered with their server events ([`items`]; the mock keeps
//! no conversation beyond the last item's id: any item id is taken as one it holds), and
//! `output_audio_buffer.clear` (WebRTC/SIP only in the API) with `output_audio_buffer.cleared`
//! of the last response.
//!
//! One response of the conversation at a time, as the API: a `response.create` while one is in
//! progress is refused (`conversation_already_has_active_response`) unless it is out of band
//! (`conversation: "none"`: outside the conversation, queued behind the responses under way, and
//! left alone by a barge-in), a `response.cancel` with none is
//! (`response_cancel_not_active`). The server VAD's turns queue their responses behind the one
//! in progress (with `--skip-busy-turns` they get none, as the API "may fail to create a
//! response if the model is already responding") when the session asked for
//! `interrupt_response: false`; with `true` (the API's default) a new turn cancels it
//! (`turn_detected`);
//! `create_response: false` commits turns without answering.
//!
//! A transcription session (a connection with `?intent=transcription`, or a GA
//! `session.update` of `type` `"transcription"` before any audio) creates no responses: once
//! it asked for a transcription (`audio.input.transcription`, off until then as the API's),
//! each committed item gets its transcript on the deltas' clock, the first
//! `conversation.item.input_audio_transcription.delta` `--first-delta-ms` after the commit,
//! then one word every `--delta-interval-ms`, then `.completed` (one transcript at a time, in
//! the order committed); a `response.create` is refused.
//!
//! Errors follow the API's shape (`error.type/code/message/param/event_id`): `invalid_json`,
//! `unknown_event`, `invalid_audio` (base64 that does not decode), the refused terms of a
//! `session.update`, `input_audio_buffer_commit_empty` (less than 100 ms of audio), and
//! `--mock-error CODE` on the first append; each leaves the session open.

mod handshake;
mod items;
mod response;
mod terms;

pub use handshake::{subprotocol, Hello};

use super::stats::Counters;
use super::timed::{Behaviour, Flow, TimedSession};
use super::vad::{Vad, VadEvent};
use crate::protocol::openai::{names, DEFAULT_SAMPLE_RATE, MIN_COMMIT_MS};
use base64::Engine as _;
use response::{Ended, Response, DELTA_TEXT};
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::rc::Rc;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// The event names and shapes of one naming.
struct Names {
    beta: bool,
    audio_delta: &'static str,
    audio_done: &'static str,
    transcript_delta: &'static str,
    transcript_done: &'static str,
    text_delta: &'static str,
    text_done: &'static str,
    /// An item joined the conversation: GA's `conversation.item.added`, beta's `.created`.
    item_added: &'static str,
    /// An item is final: GA's `conversation.item.done`; beta has none.
    item_done: Option<&'static str>,
    /// The key of a response's modalities.
    modalities_key: &'static str,
    /// The content types of an assistant message.
    audio_content: &'static str,
    text_content: &'static str,
}

const GA: Names = Names {
    beta: false,
    audio_delta: names::AUDIO_DELTA,
    audio_done: names::AUDIO_DONE,
    transcript_delta: names::TRANSCRIPT_DELTA,
    transcript_done: names::TRANSCRIPT_DONE,
    text_delta: names::TEXT_DELTA,
    text_done: names::TEXT_DONE,
    item_added: names::ITEM_ADDED,
    item_done: Some(names::ITEM_DONE),
    modalities_key: "output_modalities",
    audio_content: "output_audio",
    text_content: "output_text",
};
const BETA: Names = Names {
    beta: true,
    audio_delta: names::BETA_AUDIO_DELTA,
    audio_done: names::BETA_AUDIO_DONE,
    transcript_delta: names::BETA_TRANSCRIPT_DELTA,
    transcript_done: names::BETA_TRANSCRIPT_DONE,
    text_delta: names::BETA_TEXT_DELTA,
    text_done: names::BETA_TEXT_DONE,
    item_added: names::ITEM_CREATED,
    item_done: None,
    modalities_key: "modalities",
    audio_content: "audio",
    text_content: "text",
};

/// A committed item's transcript under way in a transcription session.
struct Transcribing {
    item_id: String,
    model: String,
    audio_s: f64,
    /// Words sent so far.
    sent: usize,
    next_at_s: f64,
}

pub struct Session {
    behaviour: Rc<Behaviour>,
    /// A transcription session (GA `session.type` `"transcription"`).
    transcription: bool,
    /// Its items' transcripts, the one under way first.
    transcribing: VecDeque<Transcribing>,
    id: String,
    /// The model the connection asked for (`?model=`), or `--served-model`.
    model: String,
    next_event: u64,
    next_item: u64,
    /// The connection asked for beta names (`OpenAI-Beta: realtime=v1`).
    beta: bool,
    /// The accepted fields of every `session.update`, merged: what `session.updated` echoes.
    asked: Value,
    terms: terms::Terms,
    vad: Option<Vad>,
    input_bytes: u64,
    uncommitted_bytes: u64,
    first_arrival_s: Option<f64>,
    appends: u64,
    /// The response in progress first, then those the server VAD's turns queued.
    responses: VecDeque<Response>,
    /// The last response created, for `output_audio_buffer.cleared`.
    last_response_id: Option<String>,
    /// The conversation's last item, the `previous_item_id` of the next.
    last_item_id: Option<String>,
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
    /// `response.create`'s per-response settings.
    #[serde(default)]
    response: Option<Value>,
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
    /// `response.cancel`'s response, when it names one.
    #[serde(default, borrow)]
    response_id: Option<Cow<'a, str>>,
}

impl Session {
    /// Session `number` of a connection whose handshake asked for `hello`.
    pub fn new(behaviour: Rc<Behaviour>, number: u64, hello: Hello) -> Session {
        let asked = Value::Object(serde_json::Map::new());
        let terms = terms::Terms::of(hello.beta, &asked);
        Session {
            id: format!("sess_{number:06}"),
            model: hello
                .model
                .unwrap_or_else(|| behaviour.served_model.clone()),
            behaviour,
            transcription: hello.transcription && !hello.beta,
            transcribing: VecDeque::new(),
            next_event: 0,
            next_item: 0,
            beta: hello.beta,
            asked,
            terms,
            vad: Some(Vad::new(DEFAULT_SAMPLE_RATE)),
            input_bytes: 0,
            uncommitted_bytes: 0,
            first_arrival_s: None,
            appends: 0,
            responses: VecDeque::new(),
            last_response_id: None,
            last_item_id: None,
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
        if self.transcription {
            return terms::transcription_object(&self.id, &self.asked);
        }
        terms::Shown {
            beta: self.beta,
            id: &self.id,
            model: &self.model,
            asked: &self.asked,
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
        let asked = match terms::check(self.beta, session) {
            Ok(asked) => asked,
            Err(refused) => {
                self.refuse(&refused, client_event_id, counters, out);
                return;
            }
        };
        // A session becomes the other type only before it has heard anything.
        let transcription = !self.beta && terms::asks_for_transcription(Some(asked));
        if transcription != self.transcription {
            if self.input_bytes > 0 || !self.responses.is_empty() {
                let current = if self.transcription {
                    "transcription"
                } else {
                    "realtime"
                };
                let message = format!("The session's type cannot change once audio has arrived: this is a '{current}' session.");
                let refused = terms::Refusal::invalid("session.type", message);
                self.refuse(&refused, client_event_id, counters, out);
                return;
            }
            self.transcription = transcription;
            self.asked = Value::Object(serde_json::Map::new());
        }
        terms::drop_replaced_turn_detection(self.beta, &mut self.asked, asked);
        terms::merge(&mut self.asked, asked);
        self.terms = terms::Terms::of(self.beta, &self.asked);
        match self.terms.vad {
            None => self.vad = None,
            Some(terms) => self
                .vad
                .get_or_insert_with(|| Vad::new(DEFAULT_SAMPLE_RATE))
                .set_silence_ms(terms.silence_ms),
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
            self.on_vad(*event, now_s, out);
        }
        self.vad_events = events;
        self.vad_events.clear();
    }

    /// A turn of the server's VAD: its start (which may interrupt the response in progress),
    /// or its end, committed and (unless `create_response: false`) answered.
    fn on_vad(&mut self, event: VadEvent, now_s: f64, out: &mut Vec<Utf8Bytes>) {
        let item_id = format!("item_{}", self.next_item);
        let vad = self.terms.vad;
        match event {
            VadEvent::Started { audio_start_ms } => {
                self.push(
                    out,
                    json!({"type": names::SPEECH_STARTED, "audio_start_ms": audio_start_ms, "item_id": item_id}),
                );
                // The conversation's response is interrupted; out-of-band ones go on.
                if vad.is_some_and(|v| v.interrupt_response) {
                    let responses = std::mem::take(&mut self.responses);
                    let mut front_cancelled = false;
                    for (i, r) in responses.into_iter().enumerate() {
                        if r.out_of_band.is_some() {
                            self.responses.push_back(r);
                        } else {
                            front_cancelled |= i == 0;
                            self.end(r, Ended::Cancelled("turn_detected"), out);
                        }
                    }
                    // An out-of-band response queued behind the cancelled one starts now; one
                    // under way goes on as it was.
                    if front_cancelled {
                        self.start_next(now_s);
                    }
                }
            }
            VadEvent::Stopped { audio_end_ms } => {
                self.push(
                    out,
                    json!({"type": names::SPEECH_STOPPED, "audio_end_ms": audio_end_ms, "item_id": item_id}),
                );
                self.commit(now_s, out);
                if self.transcription {
                    return;
                }
                let busy = self.behaviour.skip_busy_turns
                    && self.responses.iter().any(|r| r.out_of_band.is_none());
                if vad.is_none_or(|v| v.create_response) && !busy {
                    self.respond(self.terms.audio_out, None, now_s, out);
                }
            }
        }
    }

    /// `input_audio_buffer.commit`: at least 100 ms of audio, as the API takes.
    fn on_commit(
        &mut self,
        client_event_id: Option<&str>,
        now_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let ms = self.uncommitted_bytes as f64 * 1000.0 / (f64::from(DEFAULT_SAMPLE_RATE) * 2.0);
        if ms < MIN_COMMIT_MS as f64 {
            let message = format!("Error committing input audio buffer: buffer too small. Expected at least {MIN_COMMIT_MS}ms of audio, but buffer only has {ms:.2}ms of audio.");
            let code = "input_audio_buffer_commit_empty";
            self.error(out, counters, code, &message, client_event_id);
        } else {
            self.commit(now_s, out);
        }
    }

    /// The buffer becomes a user message item: `committed`, then the item's events, then its
    /// transcription when the session asked for one (a transcription session's on the
    /// deltas' clock, from `now_s`).
    fn commit(&mut self, now_s: f64, out: &mut Vec<Utf8Bytes>) {
        let item_id = format!("item_{}", self.next_item);
        self.next_item += 1;
        let audio_s = self.uncommitted_bytes as f64 / (f64::from(DEFAULT_SAMPLE_RATE) * 2.0);
        self.uncommitted_bytes = 0;
        let previous = self.last_item_id.replace(item_id.clone());
        self.push(
            out,
            json!({"type": names::COMMITTED, "previous_item_id": previous, "item_id": item_id}),
        );
        // No `transcript` (the mock transcribes nothing): openai-node types it `string`, no null.
        let item = json!({"id": item_id, "object": "realtime.item", "type": "message",
            "status": "completed", "role": "user", "content": [{"type": "input_audio"}]});
        self.item_events(previous, item, out);
        if self.transcription {
            // As the API: no transcript unless the session asked for one.
            if let Some(model) = terms::transcription_model(false, &self.asked) {
                self.transcribing.push_back(Transcribing {
                    item_id,
                    model,
                    audio_s,
                    sent: 0,
                    next_at_s: now_s + self.behaviour.first_delta_s,
                });
            }
            return;
        }
        if let Some(model) = terms::transcription_model(self.beta, &self.asked) {
            self.transcription(&item_id, &model, audio_s, out);
        }
    }

    /// `response.create`: one response at a time; its own `output_modalities` (beta's
    /// `modalities`) over the session's.
    fn on_response_create(
        &mut self,
        settings: Option<&Value>,
        client_event_id: Option<&str>,
        now_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        if self.transcription {
            let refused = terms::Refusal::invalid(
                "type",
                "A transcription session creates no responses: response.create is not supported in it.".to_string(),
            );
            self.refuse(&refused, client_event_id, counters, out);
            return;
        }
        // Out of band (`conversation: "none"`): outside the conversation, beside its response
        // (the mock streams responses one after another, so it queues behind the one under way).
        let out_of_band = settings
            .filter(|r| r.get("conversation").and_then(Value::as_str) == Some("none"))
            .map(|r| r.get("metadata").cloned().unwrap_or(Value::Null));
        if let Some(active) = self
            .responses
            .iter()
            .find(|r| r.out_of_band.is_none())
            .filter(|_| out_of_band.is_none())
        {
            let message = format!("Conversation already has an active response in progress: {}. Wait until the response is finished before creating a new one.", active.id);
            let code = "conversation_already_has_active_response";
            self.error(out, counters, code, &message, client_event_id);
            return;
        }
        let audio_out = settings
            .and_then(|r| r.get(self.names().modalities_key))
            .and_then(Value::as_array)
            .map_or(self.terms.audio_out, |m| m.iter().any(|m| m == "audio"));
        self.respond(audio_out, out_of_band, now_s, out);
    }

    /// `response.cancel`: the response it names, or else the conversation's (an out-of-band one
    /// is cancelled by its id only, as the API), ends, cancelled by the client.
    fn on_response_cancel(
        &mut self,
        response_id: Option<&str>,
        client_event_id: Option<&str>,
        now_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let at = self.responses.iter().position(|r| match response_id {
            Some(id) => r.id == id,
            None => r.out_of_band.is_none(),
        });
        match at.and_then(|at| Some((at, self.responses.remove(at)?))) {
            Some((at, r)) => {
                self.end(r, Ended::Cancelled("client_cancelled"), out);
                // The next starts only when the one under way was cancelled.
                if at == 0 {
                    self.start_next(now_s);
                }
            }
            None => {
                let message = "Cancellation failed: no active response found";
                let code = "response_cancel_not_active";
                self.error(out, counters, code, message, client_event_id);
            }
        }
    }

    /// A new response: its first delta `first_delta_s` from now, or, queued behind the one in
    /// progress, from when that one ends ([`Session::start_next`]).
    fn respond(
        &mut self,
        audio_out: bool,
        out_of_band: Option<Value>,
        now_s: f64,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let n = self.next_event;
        let mut r = Response::new(
            format!("resp_{}_{n}", self.id),
            format!("item_{}_{n}", self.id),
            audio_out,
            now_s + self.behaviour.first_delta_s,
        );
        r.out_of_band = out_of_band;
        let created = r.created(self.names());
        self.push(out, created);
        self.last_response_id = Some(r.id.clone());
        self.responses.push_back(r);
    }

    /// One step of the front response: its item and part before its first delta, a delta,
    /// and after the last its end.
    fn step(&mut self, out: &mut Vec<Utf8Bytes>) {
        let names = self.names();
        let Some(mut r) = self.responses.pop_front() else {
            return;
        };
        if r.opened.is_none() {
            let previous = match r.out_of_band {
                Some(_) => None,
                None => self.last_item_id.replace(r.item_id.clone()),
            };
            for event in r.opening(names, previous) {
                self.push(out, event);
            }
        }
        let at_s = r.next_at_s;
        r.sent += 1;
        r.next_at_s += self.behaviour.delta_interval_s;
        if r.audio_out {
            let behaviour = Rc::clone(&self.behaviour);
            out.push(self.delta(names.audio_delta, &r.ids, &behaviour.delta_audio_b64));
        }
        let text_kind = if r.audio_out {
            names.transcript_delta
        } else {
            names.text_delta
        };
        out.push(self.delta(text_kind, &r.ids, DELTA_TEXT));
        if r.sent >= self.behaviour.response_deltas {
            self.end(r, Ended::Completed, out);
            self.start_next(at_s);
        } else {
            self.responses.push_front(r);
        }
    }

    /// A delta frame, written by hand with its `type` first (the client classifies deltas by
    /// their leading type): the response's ids are formatted once, in `ids`.
    fn delta(&mut self, kind: &str, ids: &str, delta: &str) -> Utf8Bytes {
        self.next_event += 1;
        let mut frame = String::with_capacity(kind.len() + ids.len() + delta.len() + 64);
        let _ = write!(
            frame,
            r#"{{"type":"{kind}",{ids},"event_id":"event_{}_{}","delta":"{delta}"}}"#,
            self.id, self.next_event
        );
        Utf8Bytes::from(frame)
    }

    /// The response in progress ended at `at_s`: the one queued behind it starts generating
    /// then, its first delta `first_delta_s` later and the rest at the delta interval (queued
    /// responses' deltas were timed from their creation and came in a burst to catch up).
    fn start_next(&mut self, at_s: f64) {
        let first_delta_s = self.behaviour.first_delta_s;
        if let Some(next) = self.responses.front_mut().filter(|r| r.sent == 0) {
            next.next_at_s = next.next_at_s.max(at_s + first_delta_s);
        }
    }

    /// The events that end response `r`.
    fn end(&mut self, r: Response, ended: Ended, out: &mut Vec<Utf8Bytes>) {
        for event in r.closing(self.names(), ended) {
            self.push(out, event);
        }
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
            names::COMMIT => self.on_commit(client_event_id, now_s, counters, out),
            names::CLEAR => {
                self.uncommitted_bytes = 0;
                self.push(out, json!({"type": "input_audio_buffer.cleared"}));
            }
            names::RESPONSE_CREATE => self.on_response_create(
                event.response.as_ref(),
                client_event_id,
                now_s,
                counters,
                out,
            ),
            names::RESPONSE_CANCEL => {
                let id = event.response_id.as_deref();
                self.on_response_cancel(id, client_event_id, now_s, counters, out);
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
                let session = terms::transcription_session(event.session.as_ref());
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
        while self
            .transcribing
            .front()
            .is_some_and(|t| t.next_at_s <= now_s)
        {
            self.transcribe_step(out);
        }
    }

    fn next_wake_s(&self) -> Option<f64> {
        let response = self.responses.front().map(|r| r.next_at_s);
        let transcript = self.transcribing.front().map(|t| t.next_at_s);
        match (response, transcript) {
            (Some(r), Some(t)) => Some(r.min(t)),
            (r, t) => r.or(t),
        }
    }
}

#[cfg(test)]
mod tests;
