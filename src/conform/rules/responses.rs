//! The rules about responses: their lifecycle, their media deltas and how they end.

use super::{audio_len, show, Check, Response};
use crate::profile::Profile;
use crate::protocol::names;
use serde_json::Value;

impl Check<'_> {
    pub(super) fn response_created(&mut self, event: &Value) {
        let response = event.get("response");
        let Some(id) = response.and_then(|r| r.get("id")).and_then(Value::as_str) else {
            self.flag(
                "response-lifecycle",
                "response.id",
                show(response.and_then(|r| r.get("id"))),
            );
            return;
        };
        let status = response.and_then(|r| r.get("status"));
        if status.and_then(Value::as_str) != Some("in_progress") {
            self.flag("response-lifecycle", "status \"in_progress\"", show(status));
        }
        if self
            .responses
            .insert(id.to_string(), Response::default())
            .is_some()
        {
            self.flag(
                "response-lifecycle",
                "one response.created per response",
                format!("{id:?} again"),
            );
        }
    }

    /// The open response an event names (`response_id`, or `response.id`), flagging an unknown
    /// or finished one.
    pub(super) fn response_of(&mut self, event: &Value) -> Option<&mut Response> {
        let id = event
            .get("response_id")
            .or_else(|| event.get("response").and_then(|r| r.get("id")))
            .and_then(Value::as_str)
            .map(str::to_string);
        let Some(id) = id else {
            self.flag(
                "response-lifecycle",
                "the response_id it belongs to",
                "absent",
            );
            return None;
        };
        match self.responses.get(&id).map(|r| r.done) {
            None => {
                self.flag(
                    "response-lifecycle",
                    "a response opened by response.created",
                    format!("{id:?}, never created"),
                );
                None
            }
            Some(true) => {
                self.flag(
                    "response-lifecycle",
                    format!("nothing of {id} after its response.done"),
                    self.kind.clone(),
                );
                None
            }
            Some(false) => self.responses.get_mut(&id),
        }
    }

    /// A response event that is not media, after drained.
    pub(super) fn after_drained_response_event(&mut self) {
        if self.drained {
            self.flag(
                "response-done-order",
                "response events before drained",
                "after it",
            );
        }
    }

    pub(super) fn delta(&mut self, event: &Value) {
        if self.drained {
            // The media rule says it all; the response's own bookkeeping would only repeat it.
            self.flag(
                "after-drained",
                "no media delta after drained",
                self.kind.clone(),
            );
            return;
        }
        let is_audio = self.kind == names::AUDIO_DELTA;
        if let Some(response) = self.response_of(event) {
            response.audio_seen |= is_audio;
        }
        if !is_audio {
            return;
        }
        if !event.get("item_id").is_some_and(Value::is_string) {
            self.flag("audio-delta", "item_id", show(event.get("item_id")));
        }
        for key in ["output_index", "content_index"] {
            if event.get(key).and_then(Value::as_u64) != Some(0) {
                self.flag("audio-delta", format!("{key} 0"), show(event.get(key)));
            }
        }
        match audio_len(event, "delta") {
            Some((bytes, true)) if bytes > 0 && bytes % 2 == 0 => self.output_bytes += bytes,
            Some((bytes, false)) => {
                self.output_bytes += bytes;
                self.output_slack += 2;
            }
            Some((bytes, true)) => self.flag(
                "audio-delta",
                "delta of whole PCM16 samples",
                format!("{bytes} bytes"),
            ),
            None => self.flag(
                "audio-delta",
                "delta: base64 PCM16",
                show(event.get("delta"))
                    .chars()
                    .take(40)
                    .collect::<String>(),
            ),
        }
    }

    pub(super) fn response_done(&mut self, event: &Value) {
        // A response the client's `session.close` cut short ends cancelled for `client_closed`
        // (sglang-omni's `run_close`, and its checker's TERMINAL_REASONS), at any time; one a
        // fatal error cut short ends failed for the error's code (`run_close` with any other
        // reason, then `finish_responses`), owed no order; else completed for `stop` (PersonaPlex:
        // `input_audio_ended`, as its converter ends the call), after the close too (one
        // already on its way).
        let status = event.get("response").and_then(|r| r.get("status"));
        let cancelled = self.close_sent && status.and_then(Value::as_str) == Some("cancelled");
        let personaplex = matches!(self.profile(), Some(Profile::Personaplex) | None);
        let (want_status, want_reasons): (&str, Vec<String>) = match self.fatal.clone() {
            Some(code) => ("failed", vec![code]),
            None if cancelled => ("cancelled", vec!["client_closed".into()]),
            None if personaplex => ("completed", vec!["stop".into(), "input_audio_ended".into()]),
            None => ("completed", vec!["stop".into()]),
        };
        // MiniCPM-o's model may stop a reply of its own while the input goes on (sglang-omni's
        // checker: `stop_requires_eos` false); VoiceChat's one response ends with the input.
        let stop_requires_end = self.profile().is_none_or(Profile::stop_requires_end);
        let ended_in_order = self.fatal.is_some() || self.close_sent || self.end_sent;
        if !ended_in_order && stop_requires_end {
            self.flag(
                "response-done-order",
                "response.done after the client's sglang.input_audio.end",
                "before it",
            );
        }
        if self.drained && self.fatal.is_none() {
            self.flag(
                "response-done-order",
                "response.done before drained",
                "after it",
            );
        }
        let response = event.get("response");
        let status = response.and_then(|r| r.get("status"));
        let reason = response
            .and_then(|r| r.get("status_details"))
            .and_then(|d| d.get("reason"));
        if status.and_then(Value::as_str) != Some(want_status) {
            self.flag(
                "response-done",
                format!("response.status \"{want_status}\""),
                show(status),
            );
        }
        if !reason
            .and_then(Value::as_str)
            .is_some_and(|r| want_reasons.iter().any(|w| w == r))
        {
            self.flag(
                "response-done",
                format!(
                    "response.status_details.reason {}",
                    want_reasons
                        .iter()
                        .map(|r| format!("\"{r}\""))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
                show(reason),
            );
        }
        let kind = self.kind.clone();
        if let Some(state) = self.response_of(event) {
            let missing_audio_done = state.audio_seen && !state.audio_done;
            state.done = true;
            if missing_audio_done {
                self.flag(
                    "response-lifecycle",
                    "response.output_audio.done before response.done",
                    kind,
                );
            }
        }
    }
}
