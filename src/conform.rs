//! The native protocol's rules (docs/protocol-native.md) as one pure check over the recorded
//! events of one session: "is this server speaking the protocol?". The mock's tests and the
//! `conform` command use the same rules; later protocols add their own beside them.
//!
//! * `rules`: the check itself, one pass over a session's records;
//! * `grant`: what `session.updated` must grant;
//! * `trace_file`: reading `trace.jsonl` into records;
//! * `dialects`: the rules of the openai and vllm protocols (`conform --protocol`);
//! * `funasr`: the Fun-ASR realtime protocol's rules (`--protocol funasr`);
//! * `command`: `duplexbench-tui conform --trace FILE… | --url URL`.

mod command;
mod dialects;
pub mod funasr;
mod grant;
mod rules;
mod trace_file;

pub use command::run;
pub use dialects::{OPENAI_RULES, VLLM_RULES};
pub use rules::check_session;
pub use trace_file::{parse_trace, read_trace, session_name, trace_files};

use crate::profile::Profile;
use serde_json::Value;
use std::fmt;

/// Who recorded a line, as the trace's `direction` says (docs/files.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Direction {
    /// A frame the client sent.
    Send,
    /// A frame the server sent, as it arrived.
    Receive,
    /// An error the client saw.
    Error,
    /// A connection attempt (a refusal, in the real client's shape).
    Admission,
    /// The server's WebSocket close frame: `{"code":1000,"reason":"…"}`.
    Close,
    /// A trace line that could not be read, and why.
    Unreadable(String),
}

/// One recorded line of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub direction: Direction,
    pub time_s: f64,
    pub event: Value,
}

impl Record {
    pub fn new(direction: Direction, time_s: f64, event: Value) -> Record {
        Record {
            direction,
            time_s,
            event,
        }
    }

    /// Whether the record is one of the trace's lines, which come in time order: the server's
    /// close frame is read from the receipts and comes after them (docs/files.md).
    pub fn in_time_order(&self) -> bool {
        self.direction != Direction::Close
    }

    fn kind(&self) -> &str {
        self.event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(match self.direction {
                Direction::Close => "close",
                Direction::Admission => "admission",
                Direction::Error => "client error",
                _ => "?",
            })
    }
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// The rule's id, one of [`RULES`].
    pub rule: &'static str,
    pub session: String,
    /// The 1-based position of the record at fault (the trace line) and its type; `None` when
    /// the rule is about the session as a whole.
    pub event: Option<(usize, String)>,
    pub expected: String,
    pub got: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let event = match &self.event {
            Some((line, kind)) => format!("line {line} {kind}"),
            None => "session".to_string(),
        };
        write!(
            f,
            "{}  {}  {}  expected: {}  got: {}",
            self.rule, self.session, event, self.expected, self.got
        )
    }
}

/// The check of one session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionReport {
    pub session: String,
    /// The profile the rules were checked against: given, or named by the grant.
    pub profile: Option<Profile>,
    pub violations: Vec<Violation>,
    /// Whether the server's close frame was recorded (older traces do not have it).
    pub close_recorded: bool,
}

/// Whether a session's trace is only the server's admission refusals (HTTP 503), the last of
/// them the one that used up the client's retries: a session the server did not take, which a
/// run counts rejected, not failed, and in which the session rules have nothing to check. A
/// real server that admits fewer sessions at once than `conform` runs leaves these (sglang-omni's
/// VoiceChat takes one connection).
pub fn refused_admission(records: &[Record]) -> bool {
    let refusal = |r: &Record| {
        r.direction == Direction::Admission
            && r.event.get("http_status").and_then(Value::as_u64) == Some(503)
    };
    records.iter().all(refusal)
        && records
            .last()
            .and_then(|r| r.event.get("exhausted"))
            .and_then(Value::as_bool)
            == Some(true)
}

/// Every rule: its id and what it asks of a server.
#[rustfmt::skip]
pub const RULES: &[(&str, &str)] = &[
    ("trace-record", "every trace line is a record {direction, time_s, event}, in time order"),
    ("admission", "a full server refuses the handshake with HTTP 503; refusals come before the session, attempts numbered from 1"),
    ("client-error", "the client saw no error (a frame it could not read, a timeout, a dropped connection)"),
    ("event-id", "every server event has its own non-empty string event_id"),
    ("event-id-unique", "no two server events share an event_id"),
    ("client-event-id", "session.updated, accepted, ended, drained and session.closed carry the event_id of the client command they answer, once"),
    ("grant-listed", "session.updated grants every capability with its value; limits are the server's own (a stated session_timeout_s is a positive number)"),
    ("grant-request", "the granted output_modalities are those the client asked for, or some of them with the rest in a `rejections` entry"),
    ("grant-profile", "the granted unit, output rate and modalities are those of the model's profile"),
    ("session-complete", "exactly one session.created (first), session.updated, ended, drained and session.closed"),
    ("accepted-input", "every append gets one accepted with its seq and accepted_end_ms = the input so far (one an error refused by its event_id gets none)"),
    ("ended-input", "ended states accepted_end_ms = the input, tail_policy pad"),
    ("drained-consumed", "drained states accepted_end_ms and consumed_ms = the accepted input"),
    ("drained-padding", "drained states padding_ms = ceil(input / unit) x unit - input"),
    ("drained-discarded", "drained states discarded_ms = 0"),
    ("unit-id", "sglang.unit.done has unit_id unit_<n> (in sglang too) and a media_time"),
    ("unit-contiguous", "unit ids run contiguously from unit_0"),
    ("unit-media-time", "unit n starts at n x unit_ms"),
    ("unit-duration", "whole units last unit_ms, one unit per started unit of input, durations adding up to the input; an empty unit only at the end of unit-aligned input"),
    ("audio-conserved", "one unit of output audio per unit, the padded tail included (profiles with continuous output)"),
    ("audio-delta", "audio deltas have item_id, output_index 0, content_index 0 and whole PCM16 samples"),
    ("response-lifecycle", "a response is created in_progress, its events name it, output_audio.done comes before response.done, nothing after"),
    ("response-done", "response.done has status completed and status_details.reason stop (PersonaPlex: input_audio_ended), cancelled for client_closed after the client's session.close, failed for the error's code after a fatal error"),
    ("response-done-order", "response.done comes before drained, and (VoiceChat) after the client's end"),
    ("after-drained", "no media delta or unit after drained"),
    ("closed-order", "session.closed comes after drained with reason client_closed, and no server event follows it"),
    ("close-code", "the server closes the WebSocket with code 1000 after session.closed"),
    ("server-error", "the server sent no error event"),
    ("unknown-event", "every server event is one of the protocol's"),
];

#[cfg(test)]
mod tests;
