//! One response of the openai mock, streamed as the API streams one (openai-python's
//! `types/realtime/response_create_event.py`): `response.created`; before the first delta the
//! assistant message item (`response.output_item.added`, `conversation.item.added` — beta's
//! `conversation.item.created`) and its content part (`response.content_part.added`); the
//! deltas, each naming that item and part; then the part's end (`response.output_audio.done`
//! and `response.output_audio_transcript.done` with the whole transcript, or
//! `response.output_text.done` with the text), `response.content_part.done`,
//! `response.output_item.done`, GA's `conversation.item.done`, and `response.done` whose
//! `output` holds the finished item. A cancelled response ends the same way, its item
//! `incomplete`, and its `response.done` says why (`status_details`).
//!
//! An out-of-band response (`response.create` with `response.conversation` `"none"`) streams
//! the same way outside the conversation: no `conversation.item.*` events, `conversation_id`
//! null, and the request's `metadata` echoed (clients tell such responses apart by it).
//!
//! The deltas are most of the frames: the ids they carry are formatted once per response.

use super::Names;
use serde_json::{json, Value};

/// The text of every transcript or text delta (a benchmark does not read it).
pub const DELTA_TEXT: &str = "…";

/// An item event (`conversation.item.added/done/created`): `previous_item_id` only when there
/// is one (openai-node types it `previous_item_id?: string`, no null).
pub fn item_event(kind: &str, previous: Option<&str>, item: Value) -> Value {
    let mut event = json!({"type": kind, "item": item});
    if let Some(previous) = previous {
        event["previous_item_id"] = json!(previous);
    }
    event
}

/// How a response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Completed,
    /// Cancelled, for this `status_details.reason` (`client_cancelled`, `turn_detected`).
    Cancelled(&'static str),
}

#[derive(Debug)]
pub struct Response {
    pub id: String,
    pub item_id: String,
    /// Audio (with its transcript) or text, as the session or the `response.create` asked.
    pub audio_out: bool,
    pub next_at_s: f64,
    /// Deltas sent.
    pub sent: u32,
    /// `"response_id":…,"item_id":…,"output_index":0,"content_index":0`, for every delta.
    pub ids: String,
    /// Its item and part were announced (before the first delta), after this item.
    pub opened: Option<Option<String>>,
    /// Out of band: `Some` with the request's `metadata` (null when it gave none).
    pub out_of_band: Option<Value>,
}

impl Response {
    pub fn new(id: String, item_id: String, audio_out: bool, next_at_s: f64) -> Response {
        let ids = format!(
            r#""response_id":"{id}","item_id":"{item_id}","output_index":0,"content_index":0"#
        );
        Response {
            id,
            item_id,
            audio_out,
            next_at_s,
            sent: 0,
            ids,
            opened: None,
            out_of_band: None,
        }
    }

    /// An out-of-band response's `conversation_id` (null) and `metadata`, on its
    /// `response.created` and `response.done`.
    fn mark_out_of_band(&self, response: &mut Value) {
        if let Some(metadata) = &self.out_of_band {
            response["conversation_id"] = Value::Null;
            response["metadata"] = metadata.clone();
        }
    }

    fn modalities(&self, names: &Names) -> (&'static str, Value) {
        let modalities = match (self.audio_out, names.beta) {
            (true, true) => json!(["audio", "text"]),
            (true, false) => json!(["audio"]),
            (false, _) => json!(["text"]),
        };
        (names.modalities_key, modalities)
    }

    /// `response.created`.
    pub fn created(&self, names: &Names) -> Value {
        let (key, modalities) = self.modalities(names);
        let mut created = json!({"type": "response.created", "response": {"id": self.id,
            "object": "realtime.response", "status": "in_progress", "output": [],
            key: modalities}});
        self.mark_out_of_band(&mut created["response"]);
        created
    }

    /// The assistant message item with the content of `sent` deltas, `status` as given.
    fn item(&self, names: &Names, status: &str) -> Value {
        let text = DELTA_TEXT.repeat(self.sent as usize);
        let content = match self.audio_out {
            true => json!([{"type": names.audio_content, "transcript": text}]),
            false => json!([{"type": names.text_content, "text": text}]),
        };
        let content = if status == "in_progress" {
            json!([])
        } else {
            content
        };
        json!({"id": self.item_id, "object": "realtime.item", "type": "message",
            "role": "assistant", "status": status, "content": content})
    }

    /// The content part (`part` of `response.content_part.*`): audio or text, of the deltas
    /// so far.
    fn part(&self) -> Value {
        let text = DELTA_TEXT.repeat(self.sent as usize);
        match self.audio_out {
            true => json!({"type": "audio", "transcript": text}),
            false => json!({"type": "text", "text": text}),
        }
    }

    fn part_event(&self, kind: &str) -> Value {
        json!({"type": kind, "response_id": self.id, "item_id": self.item_id,
            "output_index": 0, "content_index": 0, "part": self.part()})
    }

    /// The item and its part, announced before the first delta; the item follows `previous`
    /// in the conversation (an out-of-band one joins none).
    pub fn opening(&mut self, names: &Names, previous: Option<String>) -> Vec<Value> {
        let item = self.item(names, "in_progress");
        let mut events = vec![json!({"type": "response.output_item.added",
            "response_id": self.id, "output_index": 0, "item": item})];
        if self.out_of_band.is_none() {
            events.push(item_event(names.item_added, previous.as_deref(), item));
        }
        events.push(self.part_event("response.content_part.added"));
        self.opened = Some(previous);
        events
    }

    /// The events that end the response: the part's and the item's (if they were announced),
    /// then `response.done`.
    pub fn closing(&self, names: &Names, ended: Ended) -> Vec<Value> {
        let mut events = Vec::with_capacity(7);
        // `status_details` only when there are some (openai-node: no null).
        let (status, item_status, details) = match ended {
            Ended::Completed => ("completed", "completed", None),
            Ended::Cancelled(reason) => (
                "cancelled",
                "incomplete",
                Some(json!({"type": "cancelled", "reason": reason})),
            ),
        };
        let mut output = Vec::new();
        if let Some(previous) = &self.opened {
            let text = DELTA_TEXT.repeat(self.sent as usize);
            let ids = |kind: &str| {
                json!({"type": kind, "response_id": self.id, "item_id": self.item_id,
                    "output_index": 0, "content_index": 0})
            };
            if self.audio_out {
                events.push(ids(names.audio_done));
                let mut done = ids(names.transcript_done);
                done["transcript"] = json!(text);
                events.push(done);
            } else {
                let mut done = ids(names.text_done);
                done["text"] = json!(text);
                events.push(done);
            }
            events.push(self.part_event("response.content_part.done"));
            let item = self.item(names, item_status);
            events.push(
                json!({"type": "response.output_item.done", "response_id": self.id,
                "output_index": 0, "item": item}),
            );
            if let Some(item_done) = names.item_done.filter(|_| self.out_of_band.is_none()) {
                events.push(json!({"type": item_done, "previous_item_id": previous, "item": item}));
            }
            output.push(item);
        }
        let (key, modalities) = self.modalities(names);
        // The API's usage always has its details (clients read token counts from them); the
        // mock counts a token a delta, and none of the input.
        let (text_tokens, audio_tokens) = if self.audio_out {
            (0, self.sent)
        } else {
            (self.sent, 0)
        };
        let mut done = json!({"type": "response.done", "response": {"id": self.id,
            "object": "realtime.response", "status": status, "output": output, key: modalities,
            "usage": {"total_tokens": self.sent, "input_tokens": 0, "output_tokens": self.sent,
                "input_token_details": {"cached_tokens": 0, "text_tokens": 0, "audio_tokens": 0,
                    "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0}},
                "output_token_details": {"text_tokens": text_tokens, "audio_tokens": audio_tokens}}}});
        if let Some(details) = details {
            done["response"]["status_details"] = details;
        }
        self.mark_out_of_band(&mut done["response"]);
        events.push(done);
        events
    }
}
