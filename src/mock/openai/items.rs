//! The openai mock's conversation items: the events an item joining the conversation makes
//! in each naming (GA: `conversation.item.added` then `conversation.item.done`, openai-python's
//! `conversation_item_create_event.py`; beta: `conversation.item.created`), and the answers to
//! `conversation.item.create/truncate/delete/retrieve`. The mock keeps no conversation beyond
//! its last item's id: any item id is taken as one it holds.

use super::response::item_event;
use super::{names, terms, ClientEvent, Session};
use crate::mock::stats::Counters;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Utf8Bytes;

impl Session {
    /// A complete item joined the conversation after `previous`.
    pub(super) fn item_events(
        &mut self,
        previous: Option<String>,
        item: Value,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let names = self.names();
        let previous = previous.as_deref();
        if let Some(done) = names.item_done {
            self.push(out, item_event(names.item_added, previous, item.clone()));
            self.push(out, item_event(done, previous, item));
        } else {
            self.push(out, item_event(names.item_added, previous, item));
        }
    }

    /// The input transcription of a committed user item (the session's
    /// `audio.input.transcription`, beta's `input_audio_transcription`), which the API runs
    /// beside the response on a separate model: a `…input_audio_transcription.delta` a word,
    /// then `.completed` with the whole transcript and its `usage` (whisper-1 is billed by
    /// duration, the other models by tokens). The words are stand-ins, one a second of audio,
    /// as the Fun-ASR mock's.
    pub(super) fn transcription(
        &mut self,
        item_id: &str,
        model: &str,
        audio_s: f64,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let words = transcript_words(audio_s);
        for k in 0..words.len() {
            self.transcript_delta(item_id, &words, k, out);
        }
        self.transcript_completed(item_id, model, audio_s, &words, out);
    }

    /// The next word of the transcript under way in a transcription session, and after its
    /// last `.completed`; the one queued behind it starts a delta interval later at the
    /// earliest.
    pub(super) fn transcribe_step(&mut self, out: &mut Vec<Utf8Bytes>) {
        let Some(mut t) = self.transcribing.pop_front() else {
            return;
        };
        let words = transcript_words(t.audio_s);
        self.transcript_delta(&t.item_id, &words, t.sent, out);
        t.sent += 1;
        let next_at_s = t.next_at_s + self.behaviour.delta_interval_s;
        if t.sent < words.len() {
            t.next_at_s = next_at_s;
            self.transcribing.push_front(t);
            return;
        }
        self.transcript_completed(&t.item_id, &t.model, t.audio_s, &words, out);
        if let Some(next) = self.transcribing.front_mut() {
            next.next_at_s = next.next_at_s.max(next_at_s);
        }
    }

    /// Word `k` of `words`, the transcript of `item_id`, as a delta.
    fn transcript_delta(
        &mut self,
        item_id: &str,
        words: &[&str],
        k: usize,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let delta = match k {
            0 => words[0].to_string(),
            k => format!(" {}", words[k]),
        };
        let mut event = json!({"type": names::INPUT_TRANSCRIPT_DELTA, "item_id": item_id,
            "content_index": 0, "delta": delta});
        if terms::logprobs(&self.asked) {
            event["logprobs"] = logprobs(&[&delta]);
        }
        self.push(out, event);
    }

    /// The transcript of `item_id` is complete: the whole of it, and what it cost.
    fn transcript_completed(
        &mut self,
        item_id: &str,
        model: &str,
        audio_s: f64,
        words: &[&str],
        out: &mut Vec<Utf8Bytes>,
    ) {
        let usage = if model == "whisper-1" {
            json!({"type": "duration", "seconds": (audio_s * 1000.0).round() / 1000.0})
        } else {
            // About 10 audio tokens a second, a text token a word.
            let audio_tokens = (audio_s * 10.0).ceil() as u64;
            let output_tokens = words.len() as u64;
            json!({"type": "tokens", "input_tokens": audio_tokens,
                "output_tokens": output_tokens, "total_tokens": audio_tokens + output_tokens,
                "input_token_details": {"audio_tokens": audio_tokens, "text_tokens": 0}})
        };
        let transcript = words.join(" ");
        let mut event = json!({"type": names::INPUT_TRANSCRIPT_DONE, "item_id": item_id,
            "content_index": 0, "transcript": transcript, "usage": usage});
        if terms::logprobs(&self.asked) {
            let tokens: Vec<String> = words
                .iter()
                .enumerate()
                .map(|(k, w)| {
                    if k == 0 {
                        w.to_string()
                    } else {
                        format!(" {w}")
                    }
                })
                .collect();
            let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
            event["logprobs"] = logprobs(&tokens);
        }
        self.push(out, event);
    }
}

/// The log probabilities of `tokens` when the session asked for them (`include`:
/// `item.input_audio_transcription.logprobs`), in openai-python's `LogProbProperties`: each
/// token sure (the stand-in words are what the mock heard).
fn logprobs(tokens: &[&str]) -> Value {
    tokens
        .iter()
        .map(|t| json!({"token": t, "logprob": -0.01, "bytes": t.as_bytes()}))
        .collect()
}

/// The stand-in words of `audio_s` of audio: one a second, at least one.
fn transcript_words(audio_s: f64) -> Vec<&'static str> {
    crate::mock::funasr::stand_in_words()
        .take((audio_s.round_ties_even() as usize).max(1))
        .collect()
}

impl Session {
    /// `conversation.item.create`: the item, with an id if it came without one, joins the
    /// conversation after its last item.
    pub(super) fn on_item_create(&mut self, item: Option<Value>, out: &mut Vec<Utf8Bytes>) {
        let mut item = match item {
            Some(Value::Object(item)) => item,
            _ => serde_json::Map::new(),
        };
        let id = match item.get("id").and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => {
                let id = format!("item_{}", self.next_item);
                self.next_item += 1;
                item.insert("id".into(), Value::String(id.clone()));
                id
            }
        };
        item.insert("object".into(), Value::String("realtime.item".into()));
        item.insert("status".into(), Value::String("completed".into()));
        let previous = self.last_item_id.replace(id);
        self.item_events(previous, Value::Object(item), out);
    }

    /// `conversation.item.truncate/delete/retrieve`, each answered with its server event.
    pub(super) fn on_item(
        &mut self,
        event: &ClientEvent<'_>,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
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
