//! The check of one session: one pass over its records in order (responses and their media in
//! `responses`), then the rules about the session as a whole (`totals`: counts, unit totals,
//! audio conservation). Pure: records in, report out.
//!
//! The client's own lines (what it sent, the errors it saw) are the yardstick: the input the
//! server must account for is what the appends carried, and every acknowledgement must name a
//! command the client really sent.

mod responses;
mod totals;

use super::grant::{self, Terms};
use super::{Direction, Record, SessionReport, Violation};
use crate::profile::Profile;
use crate::protocol::names;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Times and sizes arrive as JSON numbers, integer or not: compared to a microsecond.
const TOLERANCE: f64 = 1e-6;

/// Checks the records of `session` against the native protocol's rules; `given` is the profile
/// the server must serve (otherwise the one its grant names).
pub fn check_session(session: &str, records: &[Record], given: Option<Profile>) -> SessionReport {
    let mut check = Check::new(session, given);
    for (index, record) in records.iter().enumerate() {
        check.record(index + 1, record);
    }
    check.finish()
}

/// A client command, as sent.
/// What [`Sent::answered`] holds for a command an `error` refused.
const REFUSED: &str = "error";

struct Sent {
    kind: String,
    seq: Option<f64>,
    /// The input sent up to and including this command, in ms.
    input_end_ms: f64,
    /// The acknowledgements received for it.
    answered: HashSet<&'static str>,
}

#[derive(Default)]
struct Response {
    audio_seen: bool,
    audio_done: bool,
    done: bool,
}

struct Check<'a> {
    session: &'a str,
    given: Option<Profile>,
    violations: Vec<Violation>,
    /// The record being checked: its 1-based position and type.
    line: usize,
    kind: String,
    last_time_s: f64,
    started: bool,
    admissions: u64,
    sent: HashMap<String, Sent>,
    /// Event ids of the appends, in order.
    appends: Vec<String>,
    asked: Option<Value>,
    input_bytes: u64,
    update_sent: bool,
    end_sent: bool,
    close_sent: bool,
    server_ids: HashSet<String>,
    received: HashMap<&'static str, usize>,
    terms: Option<Terms>,
    /// `(n, duration_ms)` of each unit.
    units: Vec<(u64, f64)>,
    next_unit: u64,
    output_bytes: u64,
    /// Bytes the output count may be off by: a `--trace meta` delta keeps only its length in
    /// base64, which hides up to 2 bytes of padding.
    output_slack: u64,
    responses: HashMap<String, Response>,
    ended: bool,
    drained: bool,
    closed: bool,
    close_recorded: bool,
    /// The code of the fatal `error` the server sent, if it sent one: the session ends there
    /// (`session.closed` with that code as its reason and no `client_event_id`, then the close).
    fatal: Option<String>,
    /// The session's last record is an `error` the client saw (a connection that failed): the
    /// session ended there, before the client's later commands and the server's answers.
    client_failed: bool,
}

/// The acknowledgements and the client command each answers.
const ANSWERS: &[(&str, &str)] = &[
    (names::SESSION_UPDATED, names::SESSION_UPDATE),
    (names::ACCEPTED, names::APPEND),
    (names::INPUT_ENDED, names::INPUT_END),
    (names::INPUT_DRAINED, names::INPUT_END),
    (names::SESSION_CLOSED, names::SESSION_CLOSE),
];

const MEDIA_DELTAS: &[&str] = &[
    names::AUDIO_DELTA,
    names::TRANSCRIPT_DELTA,
    names::TEXT_DELTA,
];

/// Server events of the protocol that carry nothing a rule checks.
const QUIET_EVENTS: &[&str] = &[names::TRANSCRIPT_DONE, names::TEXT_DONE];

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".to_string(), Value::to_string)
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * b.abs().max(1.0)
}

fn number(event: &Value, key: &str) -> Option<f64> {
    event.get(key).and_then(Value::as_f64)
}

/// The decoded length of base64 audio under `key`, and whether it is exact: a `--trace meta`
/// line keeps `audio_bytes` (exact), and before that kept only `audio_b64_chars`. `None` when
/// there is no audio or it is not base64.
fn audio_len(event: &Value, key: &str) -> Option<(u64, bool)> {
    match event.get(key) {
        // Padded base64: whole quads, at most two `=`.
        Some(Value::String(b64)) => (b64.len() % 4 == 0 && !b64.ends_with("===")).then(|| {
            let bytes = crate::trace::format::base64_decoded_len(b64.as_bytes());
            (bytes as u64, true)
        }),
        Some(Value::Null) | None => match event.get("audio_bytes").and_then(Value::as_u64) {
            Some(bytes) => Some((bytes, true)),
            None => event
                .get("audio_b64_chars")
                .and_then(Value::as_u64)
                .map(|chars| (chars / 4 * 3, false)),
        },
        _ => None,
    }
}

impl<'a> Check<'a> {
    fn new(session: &'a str, given: Option<Profile>) -> Self {
        Check {
            session,
            given,
            violations: Vec::new(),
            line: 0,
            kind: String::new(),
            last_time_s: f64::NEG_INFINITY,
            started: false,
            admissions: 0,
            sent: HashMap::new(),
            appends: Vec::new(),
            asked: None,
            input_bytes: 0,
            update_sent: false,
            end_sent: false,
            close_sent: false,
            server_ids: HashSet::new(),
            received: HashMap::new(),
            terms: None,
            units: Vec::new(),
            next_unit: 0,
            output_bytes: 0,
            output_slack: 0,
            responses: HashMap::new(),
            ended: false,
            drained: false,
            closed: false,
            close_recorded: false,
            fatal: None,
            client_failed: false,
        }
    }

    /// A violation at the record being checked.
    fn flag(&mut self, rule: &'static str, expected: impl Into<String>, got: impl Into<String>) {
        self.violations.push(Violation {
            rule,
            session: self.session.to_string(),
            event: Some((self.line, self.kind.clone())),
            expected: expected.into(),
            got: got.into(),
        });
    }

    /// A violation of the session as a whole.
    fn flag_session(
        &mut self,
        rule: &'static str,
        expected: impl Into<String>,
        got: impl Into<String>,
    ) {
        self.violations.push(Violation {
            rule,
            session: self.session.to_string(),
            event: None,
            expected: expected.into(),
            got: got.into(),
        });
    }

    /// The profile the session is checked against: the one its grant names, or the one given.
    fn profile(&self) -> Option<Profile> {
        self.terms.and_then(|t| t.profile).or(self.given)
    }

    fn unit_ms(&self) -> Option<f64> {
        self.terms.and_then(|t| t.unit_ms)
    }

    /// The input sent so far, in ms at the profile's input rate (16 kHz when unknown).
    fn input_ms(&self) -> f64 {
        let rate = self.profile().map_or(
            crate::protocol::INPUT_SAMPLE_RATE,
            Profile::input_sample_rate,
        );
        self.input_bytes as f64 / (f64::from(rate) * 2.0 / 1000.0)
    }

    fn record(&mut self, line: usize, record: &Record) {
        self.line = line;
        self.kind = record.kind().to_string();
        if let Direction::Unreadable(why) = &record.direction {
            self.flag(
                "trace-record",
                "a JSON line {direction, time_s, event}",
                why.clone(),
            );
            return;
        }
        let event = &record.event;
        if record.in_time_order() {
            if record.time_s < self.last_time_s {
                let expected = format!("time_s from {:.6} on", self.last_time_s);
                self.flag("trace-record", expected, format!("{:.6}", record.time_s));
            }
            self.last_time_s = self.last_time_s.max(record.time_s);
        }
        match record.direction {
            Direction::Admission => self.admission(event),
            Direction::Error => {
                let message = event.get("message").and_then(Value::as_str);
                let got = message.map_or_else(|| event.to_string(), str::to_string);
                self.flag("client-error", "no error seen by the client", got);
                self.client_failed = true;
            }
            Direction::Close => self.close(event),
            Direction::Send | Direction::Receive => {
                self.started = true;
                // An error the session went on after did not end it.
                self.client_failed = false;
                if event.get("type").and_then(Value::as_str).is_none() {
                    self.flag(
                        "trace-record",
                        "an event: a JSON object with a string type",
                        event.to_string(),
                    );
                } else if record.direction == Direction::Send {
                    self.send(event);
                } else {
                    self.receive(event);
                }
            }
            Direction::Unreadable(_) => {}
        }
    }

    /// A refusal in the real client's shape `{type:"connection_denied", http_status, attempt}`,
    /// or an attempt in the older shape `{attempt, outcome}`.
    fn admission(&mut self, event: &Value) {
        if self.started {
            self.flag(
                "admission",
                "admission records before the session's first event",
                "one after it",
            );
        }
        let attempt = event.get("attempt").and_then(Value::as_u64);
        if attempt != Some(self.admissions + 1) {
            let expected = format!("attempt {}", self.admissions + 1);
            self.flag("admission", expected, show(event.get("attempt")));
        }
        self.admissions += 1;
        let refused_with = match event.get("type").and_then(Value::as_str) {
            Some("connection_denied") => event.get("http_status").map(Value::to_string),
            _ => event
                .get("outcome")
                .and_then(Value::as_str)
                .and_then(|o| o.strip_prefix("http_"))
                .map(str::to_string),
        };
        if let Some(status) = refused_with.filter(|s| s != "503") {
            self.flag(
                "admission",
                "a full server refuses with HTTP 503",
                format!("HTTP {status}"),
            );
        }
    }

    fn send(&mut self, event: &Value) {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            names::SESSION_UPDATE => {
                self.update_sent = true;
                self.asked = event
                    .get("session")
                    .and_then(|s| s.get("output_modalities"))
                    .cloned();
            }
            names::APPEND => {
                self.input_bytes += audio_len(event, "audio").map_or(0, |(bytes, _)| bytes);
            }
            names::INPUT_END => self.end_sent = true,
            names::SESSION_CLOSE => self.close_sent = true,
            _ => {}
        }
        if let Some(id) = event.get("event_id").and_then(Value::as_str) {
            if kind == names::APPEND {
                self.appends.push(id.to_string());
            }
            let seq = event
                .get("sglang")
                .and_then(|s| s.get("seq"))
                .and_then(Value::as_f64);
            self.sent.insert(
                id.to_string(),
                Sent {
                    kind: kind.to_string(),
                    seq,
                    input_end_ms: self.input_ms(),
                    answered: HashSet::new(),
                },
            );
        }
    }

    /// A server event: the rules every event keeps, then those of its kind.
    fn receive(&mut self, event: &Value) {
        let kind = self.kind.clone();
        self.check_every_event(event, &kind);
        let after_fatal = kind == names::SESSION_CLOSED && self.fatal.is_some();
        if let Some(&(answer, command)) = ANSWERS.iter().find(|(a, _)| *a == kind) {
            if !after_fatal {
                self.answer(event, answer, command);
            }
        }
        let counted = [
            names::SESSION_CREATED,
            names::SESSION_UPDATED,
            names::INPUT_ENDED,
            names::INPUT_DRAINED,
            names::SESSION_CLOSED,
        ];
        if let Some(name) = counted.into_iter().find(|n| *n == kind) {
            *self.received.entry(name).or_default() += 1;
        } else {
            *self.received.entry("other").or_default() += 1;
        }
        match kind.as_str() {
            names::SESSION_CREATED => {}
            names::SESSION_UPDATED => self.updated(event),
            names::ACCEPTED => self.accepted(event),
            names::INPUT_ENDED => self.ended(event),
            names::INPUT_DRAINED => self.drained(event),
            names::UNIT_DONE => self.unit(event),
            names::RESPONSE_CREATED => self.response_created(event),
            names::RESPONSE_DONE => self.response_done(event),
            names::SESSION_CLOSED => self.session_closed(event),
            names::ERROR => self.server_error(event),
            k if MEDIA_DELTAS.contains(&k) => self.delta(event),
            names::AUDIO_DONE => {
                if let Some(response) = self.response_of(event) {
                    response.audio_done = true;
                }
                self.after_drained_response_event();
            }
            k if QUIET_EVENTS.contains(&k) => {
                self.response_of(event);
                self.after_drained_response_event();
            }
            other => {
                let other = other.to_string();
                self.flag("unknown-event", "an event of the native protocol", other);
            }
        }
    }

    /// What every server event of `kind` keeps: session.created first, an event_id of its own,
    /// nothing after session.closed.
    fn check_every_event(&mut self, event: &Value, kind: &str) {
        if self.received.is_empty() && kind != names::SESSION_CREATED {
            self.flag(
                "session-complete",
                "session.created as the first server event",
                kind,
            );
        }
        match event.get("event_id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => {
                if !self.server_ids.insert(id.to_string()) {
                    self.flag(
                        "event-id-unique",
                        "an event_id of its own",
                        format!("{id:?} again"),
                    );
                }
            }
            other => {
                let got = other.map_or_else(|| show(event.get("event_id")), |_| "\"\"".to_string());
                self.flag("event-id", "its own event_id", got);
            }
        }
        if self.closed {
            self.flag("closed-order", "no server event after session.closed", kind);
        }
    }

    /// The first `session.updated`: what it grants sets the session's terms.
    fn updated(&mut self, event: &Value) {
        if self.terms.is_some() {
            return;
        }
        let mut findings = Vec::new();
        self.terms = Some(grant::check(
            event,
            self.asked.as_ref(),
            self.given,
            &mut findings,
        ));
        for (rule, expected, got) in findings {
            self.flag(rule, expected, got);
        }
    }

    /// `session.closed`: after the input drained, for the reason the client gave — or, after a
    /// fatal error, answering nothing, with the error's code as its reason.
    fn session_closed(&mut self, event: &Value) {
        let reason = event.get("reason");
        if let Some(code) = self.fatal.clone() {
            let cid = event.get("client_event_id");
            if !cid.is_none_or(Value::is_null) {
                self.flag(
                    "client-event-id",
                    "null after a fatal error (it answers no session.close)",
                    show(cid),
                );
            }
            if reason.and_then(Value::as_str) != Some(code.as_str()) {
                self.flag(
                    "closed-order",
                    format!("reason {code:?} (the fatal error's code)"),
                    show(reason),
                );
            }
            self.closed = true;
            return;
        }
        if !self.drained {
            self.flag(
                "closed-order",
                "session.closed after sglang.input_audio.drained",
                "before it",
            );
        }
        if reason.and_then(Value::as_str) != Some("client_closed") {
            self.flag("closed-order", "reason \"client_closed\"", show(reason));
        }
        self.closed = true;
    }

    /// An `error` event: its code, whether fatal, and its message.
    fn server_error(&mut self, event: &Value) {
        let error = event.get("error");
        let field = |key: &str| {
            error
                .and_then(|e| e.get(key))
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string()
        };
        let fatal = event
            .get("sglang")
            .and_then(|s| s.get("fatal"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let got = format!("{} (fatal {fatal}): {}", field("code"), field("message"));
        self.flag("server-error", "no error event", got);
        // A command the error refuses (its `error.event_id`) is owed no acknowledgement: an
        // append refused (`buffer_overflow`, out of order) gets no `accepted` (sglang-omni's
        // `runtime.append` raises before it), which `accepted-input` would name again.
        if let Some(sent) = error
            .and_then(|e| e.get("event_id"))
            .and_then(Value::as_str)
            .and_then(|id| self.sent.get_mut(id))
        {
            sent.answered.insert(REFUSED);
        }
        if fatal && self.fatal.is_none() {
            self.fatal = Some(field("code"));
        }
    }

    /// `client-event-id`: `answer` names a `command` the client sent, and answers it once.
    fn answer(&mut self, event: &Value, answer: &'static str, command: &str) {
        let cid = event.get("client_event_id");
        let Some(id) = cid.and_then(Value::as_str) else {
            let expected = format!("the client_event_id of the {command} it answers");
            self.flag("client-event-id", expected, show(cid));
            return;
        };
        let problem = match self.sent.get_mut(id) {
            None => Some((
                format!("the event_id of a {command} sent before"),
                format!("{id:?}, which the client never sent"),
            )),
            Some(sent) if sent.kind != command => Some((
                format!("the event_id of a {command}"),
                format!("that of a {}", sent.kind),
            )),
            Some(sent) => (!sent.answered.insert(answer)).then(|| {
                (
                    format!("one {answer} per {command}"),
                    "a second one".to_string(),
                )
            }),
        };
        if let Some((expected, got)) = problem {
            self.flag("client-event-id", expected, got);
        }
    }

    fn accepted(&mut self, event: &Value) {
        let cause = event
            .get("client_event_id")
            .and_then(Value::as_str)
            .and_then(|id| self.sent.get(id))
            .filter(|s| s.kind == names::APPEND)
            .map(|s| (s.seq, s.input_end_ms));
        let Some((seq, input_end_ms)) = cause else {
            return;
        };
        if let Some(seq) = seq {
            if number(event, "seq").is_none_or(|got| !same(got, seq)) {
                self.flag(
                    "accepted-input",
                    format!("seq {seq}"),
                    show(event.get("seq")),
                );
            }
        }
        let end = number(event, "accepted_end_ms");
        if end.is_none_or(|got| !same(got, input_end_ms)) {
            self.flag(
                "accepted-input",
                format!("accepted_end_ms {input_end_ms} (the input sent so far)"),
                show(event.get("accepted_end_ms")),
            );
        }
    }

    fn ended(&mut self, event: &Value) {
        self.ended = true;
        let input_ms = self.input_ms();
        if number(event, "accepted_end_ms").is_none_or(|got| !same(got, input_ms)) {
            self.flag(
                "ended-input",
                format!("accepted_end_ms {input_ms} (the input sent)"),
                show(event.get("accepted_end_ms")),
            );
        }
        let policy = event.get("tail_policy");
        if policy.and_then(Value::as_str) != Some("pad") {
            self.flag("ended-input", "tail_policy \"pad\"", show(policy));
        }
    }

    fn drained(&mut self, event: &Value) {
        if !self.ended {
            self.flag(
                "session-complete",
                "sglang.input_audio.ended before drained",
                "drained first",
            );
        }
        let input_ms = self.input_ms();
        for key in ["accepted_end_ms", "consumed_ms"] {
            if number(event, key).is_none_or(|got| !same(got, input_ms)) {
                self.flag(
                    "drained-consumed",
                    format!("{key} {input_ms} (the accepted input)"),
                    show(event.get(key)),
                );
            }
        }
        if let Some(unit_ms) = self.unit_ms() {
            let padding_ms = (input_ms / unit_ms).ceil() * unit_ms - input_ms;
            if number(event, "padding_ms").is_none_or(|got| !same(got, padding_ms)) {
                self.flag(
                    "drained-padding",
                    format!("padding_ms {padding_ms} (to a whole {unit_ms} ms unit)"),
                    show(event.get("padding_ms")),
                );
            }
        }
        if number(event, "discarded_ms") != Some(0.0) {
            self.flag(
                "drained-discarded",
                "discarded_ms 0",
                show(event.get("discarded_ms")),
            );
        }
        let open: Vec<String> = self
            .responses
            .iter()
            .filter(|(_, r)| !r.done)
            .map(|(id, _)| id.clone())
            .collect();
        for id in open {
            self.flag(
                "response-done-order",
                format!("response.done of {id} before drained"),
                "drained with the response open",
            );
        }
        self.drained = true;
    }

    fn unit(&mut self, event: &Value) {
        if self.drained {
            self.flag("after-drained", "no unit after drained", "sglang.unit.done");
        }
        let unit_id = event.get("unit_id");
        let n = unit_id
            .and_then(Value::as_str)
            .and_then(|id| id.strip_prefix("unit_"))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok());
        let Some(n) = n else {
            self.flag("unit-id", "unit_id \"unit_<n>\"", show(unit_id));
            return;
        };
        let sglang = event.get("sglang");
        let inner = sglang.and_then(|s| s.get("unit_id"));
        if inner != unit_id {
            self.flag(
                "unit-id",
                format!("sglang.unit_id {}", show(unit_id)),
                show(inner),
            );
        }
        let media = sglang.and_then(|s| s.get("media_time"));
        let times = media.and_then(|m| Some((number(m, "t_start_ms")?, number(m, "duration_ms")?)));
        let Some((t_start_ms, duration_ms)) = times else {
            self.flag(
                "unit-id",
                "sglang.media_time {t_start_ms, duration_ms}",
                show(media),
            );
            return;
        };
        if n != self.next_unit {
            self.flag(
                "unit-contiguous",
                format!("unit_{}", self.next_unit),
                format!("unit_{n}"),
            );
        }
        self.next_unit = n + 1;
        if let Some(unit_ms) = self.unit_ms() {
            let expected = n as f64 * unit_ms;
            if !same(t_start_ms, expected) {
                self.flag(
                    "unit-media-time",
                    format!("t_start_ms {expected} (unit {n} × {unit_ms} ms)"),
                    t_start_ms.to_string(),
                );
            }
        }
        self.units.push((n, duration_ms));
    }

    /// The server's close frame: a fact of the session, flagged as such.
    fn close(&mut self, event: &Value) {
        self.close_recorded = true;
        if !self.closed {
            self.flag_session(
                "close-code",
                "the close frame after session.closed",
                "a close frame with no session.closed before it",
            );
        }
        // The receipts write a close without a status code as `"code": null`.
        let code = event.get("code").filter(|c| !c.is_null());
        if code.and_then(Value::as_u64) != Some(1000) {
            let reason = event.get("reason").and_then(Value::as_str).unwrap_or("");
            let got = match code {
                Some(code) => format!("{code} {reason:?}"),
                None => "no status code (1005)".to_string(),
            };
            self.flag_session("close-code", "1000 (normal closure)", got);
        }
    }
}

#[cfg(test)]
mod audio_len_tests {
    use super::audio_len;
    use serde_json::json;

    #[test]
    fn audio_is_counted_exactly_from_base64_or_a_meta_line_and_refused_when_not_base64() {
        let len = |event: serde_json::Value| audio_len(&event, "audio");
        assert_eq!(len(json!({"audio": "QUJDRA=="})), Some((4, true)));
        assert_eq!(len(json!({"audio": "QUJD"})), Some((3, true)));
        assert_eq!(len(json!({"audio": ""})), Some((0, true)));
        // Not padded base64: not whole quads, or more padding than base64 has.
        assert_eq!(len(json!({"audio": "QUJDRA"})), None);
        assert_eq!(len(json!({"audio": "Q==="})), None);
        assert_eq!(len(json!({"audio": 7})), None);
        // Meta lines: the exact bytes, or an estimate from the characters (older traces).
        let meta = json!({"audio": null, "audio_b64_chars": 3416, "audio_bytes": 2560});
        assert_eq!(len(meta), Some((2560, true)));
        assert_eq!(
            len(json!({"audio": null, "audio_b64_chars": 3416})),
            Some((2562, false))
        );
        assert_eq!(len(json!({"type": "x"})), None);
    }
}
