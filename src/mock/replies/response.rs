//! The frames of a session's response and of its native units, shaped as sglang-omni's server
//! projects them (projection.py, protocol.py): every event a unit produces carries that unit's
//! `sglang` block, and the response ends with the last unit, before its `sglang.unit.done`.

use super::{EventIds, Grant, Templates, UnitSpan, TEXT};
use crate::protocol::names;
use std::fmt::Write as _;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// One session's response: its ids and granted modalities, and the frames of each unit, shaped
/// as sglang-omni's server projects them (projection.py): every event a unit produces carries
/// that unit's `sglang` block, whose `chunk_seq` numbers the session's output events from 0
/// (`response.created`); the response ends with the last unit, before its `sglang.unit.done`.
#[derive(Debug)]
pub struct ResponseFrames {
    response_id: String,
    item_id: String,
    /// `,"response_id":…,"content_index":0`: the part of every content event's head after its
    /// `event_id`, the same for the whole response.
    content_ids: String,
    grant: Grant,
    /// The `chunk_seq` of the next output event.
    next_chunk_seq: u64,
    /// Text deltas sent: the response's text is that many [`TEXT`]s.
    text_deltas: usize,
    /// An audio delta went out (the audio is visible to the client).
    audio_sent: bool,
    /// `response.done` went out.
    done_sent: bool,
}

impl ResponseFrames {
    pub fn new(session_number: u64, grant: &Grant) -> Self {
        let response_id = format!("resp_{session_number:06}");
        let item_id = format!("item_{session_number:06}");
        let content_ids = format!(
            r#","response_id":"{response_id}","item_id":"{item_id}","output_index":0,"content_index":0"#
        );
        ResponseFrames {
            response_id,
            item_id,
            content_ids,
            grant: grant.clone(),
            next_chunk_seq: 0,
            text_deltas: 0,
            audio_sent: false,
            done_sent: false,
        }
    }

    /// `,"sglang":{…}}`: the block of the unit an output event belongs to, its `chunk_seq` the
    /// next one, and the end of the event.
    fn close_with_unit(&mut self, out: &mut String, unit: &UnitBlock) {
        unit.push(out, self.next_chunk_seq);
        out.push('}');
        self.next_chunk_seq += 1;
    }

    /// `response.created`, opened by the first unit that has replies.
    pub fn created(&mut self, event_id: &str, unit: &UnitSpan) -> Utf8Bytes {
        let mut out = String::with_capacity(320);
        let _ = write!(
            out,
            r#"{{"type":"{}","event_id":"{event_id}","response":{{"id":"{}","object":"realtime.response","status":"in_progress","output":[]}}"#,
            names::RESPONSE_CREATED,
            self.response_id,
        );
        self.close_with_unit(&mut out, &UnitBlock::new(unit));
        Utf8Bytes::from(out)
    }

    /// The head shared by the deltas and the done events of the content, up to the comma after
    /// `content_index`.
    fn content_head(&self, out: &mut String, kind: &str, event_id: &str) {
        out.push_str(r#"{"type":""#);
        out.push_str(kind);
        out.push_str(r#"","event_id":""#);
        out.push_str(event_id);
        out.push('"');
        out.push_str(&self.content_ids);
    }

    /// One unit of silence. The frame is sized up front: at 1000 ms units it is 64 kB.
    fn audio_delta(
        &mut self,
        templates: &Templates,
        event_id: &str,
        unit: &UnitBlock,
    ) -> Utf8Bytes {
        let mut out = String::with_capacity(320 + templates.silence_b64.len());
        self.content_head(&mut out, names::AUDIO_DELTA, event_id);
        out.push_str(r#","delta":""#);
        out.push_str(&templates.silence_b64);
        out.push('"');
        self.close_with_unit(&mut out, unit);
        self.audio_sent = true;
        Utf8Bytes::from(out)
    }

    fn text_delta(&mut self, event_id: &str, unit: &UnitBlock) -> Utf8Bytes {
        let mut out = String::with_capacity(320);
        let kind = if self.grant.text {
            names::TEXT_DELTA
        } else {
            names::TRANSCRIPT_DELTA
        };
        self.content_head(&mut out, kind, event_id);
        out.push_str(r#","delta":""#);
        out.push_str(TEXT);
        out.push('"');
        self.close_with_unit(&mut out, unit);
        self.text_deltas += 1;
        Utf8Bytes::from(out)
    }

    /// The whole text of the response, in a JSON string.
    fn push_text(&self, out: &mut String) {
        out.push('"');
        for _ in 0..self.text_deltas {
            out.push_str(TEXT);
        }
        out.push('"');
    }

    /// `response.output_audio_transcript.done` (`transcript`) or `response.output_text.done`
    /// (`text`, when text is granted): the whole text, as each model's output converter ends
    /// its response.
    fn text_done(&mut self, event_id: &str, unit: Option<&UnitBlock>) -> Utf8Bytes {
        let mut out = String::with_capacity(320 + self.text_deltas * TEXT.len());
        let (kind, key) = if self.grant.text {
            (names::TEXT_DONE, "text")
        } else {
            (names::TRANSCRIPT_DONE, "transcript")
        };
        self.content_head(&mut out, kind, event_id);
        let _ = write!(out, r#","{key}":"#);
        self.push_text(&mut out);
        self.close_event(&mut out, unit);
        Utf8Bytes::from(out)
    }

    /// The end of an event: the unit's block when it belongs to one; a closing event of the
    /// response (on `session.close`) carries no `sglang` key, as sglang-omni's.
    fn close_event(&mut self, out: &mut String, unit: Option<&UnitBlock>) {
        match unit {
            Some(unit) => self.close_with_unit(out, unit),
            None => out.push('}'),
        }
    }

    /// `response.output_audio.done`, when audio was granted.
    fn audio_done(&mut self, event_id: &str, unit: Option<&UnitBlock>) -> Utf8Bytes {
        let mut out = String::with_capacity(320);
        self.content_head(&mut out, names::AUDIO_DONE, event_id);
        self.close_event(&mut out, unit);
        Utf8Bytes::from(out)
    }

    /// `response.done` with the one message item the response was, its content the text (when
    /// text is granted) and the audio with its transcript (when `with_audio`), and no usage, as
    /// VoiceChat and MiniCPM-o report none: `completed` for `stop` at the last unit, or
    /// `cancelled` for `client_closed` on an early `session.close`.
    fn done(
        &mut self,
        event_id: &str,
        (status, reason): (&str, &str),
        with_audio: bool,
        unit: Option<&UnitBlock>,
    ) -> Utf8Bytes {
        let mut out = String::with_capacity(480 + 2 * self.text_deltas * TEXT.len());
        let _ = write!(
            out,
            concat!(
                r#"{{"type":"{}","event_id":"{}","response":{{"id":"{}","object":"realtime.response","#,
                r#""status":"{}","status_details":{{"reason":"{}"}},"#,
                r#""output":[{{"id":"{}","object":"realtime.item","type":"message","role":"assistant","content":["#
            ),
            names::RESPONSE_DONE,
            event_id,
            self.response_id,
            status,
            reason,
            self.item_id,
        );
        let text = self.grant.text;
        if text {
            out.push_str(r#"{"type":"output_text","text":"#);
            self.push_text(&mut out);
            out.push('}');
        }
        if with_audio {
            if text {
                out.push(',');
            }
            out.push_str(r#"{"type":"output_audio","transcript":"#);
            self.push_text(&mut out);
            out.push('}');
        }
        out.push_str(r#"]}],"usage":null}"#);
        self.close_event(&mut out, unit);
        self.done_sent = true;
        Utf8Bytes::from(out)
    }

    /// The client closed the session with the response still open: sglang-omni's server ends
    /// it first (`output_buffer.finish_responses("cancelled", "client_closed")`): the text's
    /// done event, the audio's when audio went out, `response.done` cancelled for
    /// `client_closed`, none of them with an `sglang` key. Nothing for a response already done.
    pub fn cancel(&mut self, ids: &mut EventIds, out: &mut Vec<Utf8Bytes>) {
        if self.done_sent {
            return;
        }
        out.push(self.text_done(&ids.next(), None));
        if self.audio_sent {
            out.push(self.audio_done(&ids.next(), None));
        }
        let audio = self.audio_sent;
        out.push(self.done(&ids.next(), ("cancelled", "client_closed"), audio, None));
    }

    /// Appends the replies of one unit: the audio delta first (from two replies on, when audio
    /// is granted), the text deltas between, `sglang.unit.done` last (from one reply on). A unit
    /// without input (the empty unit at the end of unit-aligned input) has no deltas. The
    /// `last` unit ends the response before its `sglang.unit.done`: the text's done event, the
    /// audio's (when audio is granted), `response.done`.
    pub fn push_unit(
        &mut self,
        templates: &Templates,
        span: &UnitSpan,
        last: bool,
        ids: &mut EventIds,
        out: &mut Vec<Utf8Bytes>,
    ) {
        let replies = templates.replies_per_unit;
        if replies == 0 {
            return;
        }
        let unit = &UnitBlock::new(span);
        if span.duration_ms > 0.0 {
            let mut texts = replies.saturating_sub(2);
            if replies >= 2 {
                if self.grant.audio {
                    out.push(self.audio_delta(templates, &ids.next(), unit));
                } else {
                    texts += 1;
                }
            }
            for _ in 0..texts {
                out.push(self.text_delta(&ids.next(), unit));
            }
        }
        if last {
            out.push(self.text_done(&ids.next(), Some(unit)));
            if self.grant.audio {
                out.push(self.audio_done(&ids.next(), Some(unit)));
            }
            let audio = self.grant.audio;
            out.push(self.done(&ids.next(), ("completed", "stop"), audio, Some(unit)));
        }
        out.push(unit_done(&ids.next(), unit));
    }
}

/// `,"sglang":{"unit_id":…,"chunk_seq":…,"media_time":{…}}`: the unit an event belongs to, the
/// input span it covers (its unpadded duration), and `chunk_seq`. Formatted once per unit, as
/// every event of the unit carries it and only `chunk_seq` differs.
struct UnitBlock {
    /// `unit_{index}`.
    unit_id: String,
    /// Up to and including `"chunk_seq":`.
    head: String,
    /// From `,"media_time"` to the block's closing brace.
    tail: String,
}

impl UnitBlock {
    fn new(unit: &UnitSpan) -> Self {
        let unit_id = format!("unit_{}", unit.index);
        let head = format!(r#","sglang":{{"unit_id":"{unit_id}","chunk_seq":"#);
        let tail = format!(
            r#","media_time":{{"t_start_ms":{:?},"duration_ms":{:?}}}}}"#,
            unit.t_start_ms, unit.duration_ms
        );
        UnitBlock {
            unit_id,
            head,
            tail,
        }
    }

    fn push(&self, out: &mut String, chunk_seq: u64) {
        out.push_str(&self.head);
        let _ = write!(out, "{chunk_seq}");
        out.push_str(&self.tail);
    }
}

/// `sglang.unit.done`. Its `chunk_seq` is 0, as sglang-omni's server sends it: the server numbers
/// only output events, and a unit's completion is not one.
fn unit_done(event_id: &str, unit: &UnitBlock) -> Utf8Bytes {
    let mut out = String::with_capacity(200);
    let _ = write!(
        out,
        r#"{{"type":"{}","event_id":"{event_id}","unit_id":"{}""#,
        names::UNIT_DONE,
        unit.unit_id
    );
    unit.push(&mut out, 0);
    out.push('}');
    Utf8Bytes::from(out)
}
