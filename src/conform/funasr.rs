//! The Fun-ASR realtime protocol's rules (docs/funasr.md) as one pure check over a session's
//! recorded lines, beside the native rules. Audio frames are binary and leave no trace line:
//! their send times come from the session's receipts (`input-send-receipts.json`).

use super::{Direction, Record, SessionReport, Violation};
use crate::protocol::funasr::names;
use serde_json::Value;

/// Every Fun-ASR rule: its id and what it asks of a server.
#[rustfmt::skip]
pub const RULES: &[(&str, &str)] = &[
    ("trace-record", "every trace line is a record {direction, time_s, event}, in time order"),
    ("client-error", "the client saw no error (a frame it could not read, a timeout, a dropped connection)"),
    ("started-first", "START is answered by started, before any audio is sent"),
    ("setting-ack", "LANGUAGE:<lang> is answered by language_set with the language, HOTWORDS:… by hotwords_set with a list"),
    ("result-shape", "a result has sentences as a list of {text, start, end}, a string partial, a boolean is_final and a duration_ms >= 0"),
    ("duration-monotonic", "duration_ms never decreases"),
    ("final-once", "exactly one final result, after STOP (none when no audio was sent)"),
    ("stopped-last", "STOP is answered by exactly one stopped, after the final, and nothing follows it"),
    ("server-error", "the server sent no error event"),
    ("unknown-event", "every server frame is a result or one of started, language_set, hotwords_set, stopped, error"),
];

/// Checks a session's records; `audio_sends_s` are the send starts of its audio frames.
pub fn check_session(session: &str, records: &[Record], audio_sends_s: &[f64]) -> SessionReport {
    let mut c = Check {
        session,
        violations: Vec::new(),
        line: 0,
        kind: String::new(),
        audio_sends_s,
        last_time_s: f64::NEG_INFINITY,
        start_sent: false,
        started_s: None,
        awaiting: Vec::new(),
        stop_sent: false,
        finals: 0,
        stopped: 0,
        last_duration: None,
        close_recorded: false,
    };
    for (index, record) in records.iter().enumerate() {
        c.line = index + 1;
        c.kind = kind(record);
        c.record(record);
    }
    c.line = 0;
    c.check_end();
    SessionReport {
        session: session.to_string(),
        profile: None,
        violations: c.violations,
        close_recorded: c.close_recorded,
    }
}

fn kind(record: &Record) -> String {
    match (&record.direction, &record.event) {
        (Direction::Send, Value::String(command)) => command.chars().take(24).collect(),
        (_, e) => match e.get("event").and_then(Value::as_str) {
            Some(event) => event.to_string(),
            None if e.get("is_final") == Some(&Value::Bool(true)) => "final".to_string(),
            // What the client keeps of a binary frame, or of a text frame that is not JSON.
            None if e.get("_binary_bytes").is_some() => "binary frame".to_string(),
            None if e.get("_raw").is_some() => "text frame, not JSON".to_string(),
            None if e.is_object() => "result".to_string(),
            None => "?".to_string(),
        },
    }
}

/// One session's check: its findings, the line read, and what its records said so far.
struct Check<'a> {
    session: &'a str,
    violations: Vec<Violation>,
    line: usize,
    kind: String,
    /// The send starts of the session's audio frames.
    audio_sends_s: &'a [f64],
    last_time_s: f64,
    start_sent: bool,
    started_s: Option<f64>,
    /// The answers owed, in the order their commands were sent.
    awaiting: Vec<&'static str>,
    stop_sent: bool,
    finals: u32,
    stopped: u32,
    last_duration: Option<f64>,
    close_recorded: bool,
}

impl Check<'_> {
    /// One record: in time order, then by its direction.
    fn record(&mut self, record: &Record) {
        if let Direction::Unreadable(why) = &record.direction {
            self.flag("trace-record", "a trace record", why.clone());
            return;
        }
        if record.in_time_order() {
            if record.time_s < self.last_time_s {
                self.flag(
                    "trace-record",
                    "records in time order",
                    format!("{} after {}", record.time_s, self.last_time_s),
                );
            }
            self.last_time_s = record.time_s;
        }
        match &record.direction {
            Direction::Send => self.sent(&record.event),
            Direction::Error => {
                self.flag("client-error", "no client error", record.event.to_string());
            }
            Direction::Close => self.close_recorded = true,
            Direction::Admission | Direction::Unreadable(_) => {}
            Direction::Receive => self.received(record),
        }
    }

    /// A command the client sent: the answer it is owed.
    fn sent(&mut self, event: &Value) {
        let command = event.as_str().unwrap_or("").trim().to_uppercase();
        if command == names::START {
            self.start_sent = true;
            self.awaiting.push(names::STARTED);
        } else if command.starts_with(names::LANGUAGE) {
            self.awaiting.push(names::LANGUAGE_SET);
        } else if command.starts_with(names::HOTWORDS) {
            self.awaiting.push(names::HOTWORDS_SET);
        } else if command == names::STOP {
            self.stop_sent = true;
        }
    }

    /// A server frame: a result, or one of the named events.
    fn received(&mut self, record: &Record) {
        let e = &record.event;
        if self.stopped > 0 {
            self.flag("stopped-last", "nothing after stopped", e.to_string());
        }
        let is_result = e.get("sentences").is_some()
            || e.get("partial").is_some()
            || e.get("is_final") == Some(&Value::Bool(true));
        if is_result {
            self.result(e);
            if e.get("is_final") == Some(&Value::Bool(true)) {
                self.finals += 1;
                if !self.stop_sent {
                    self.flag("final-once", "the final after STOP", "a final before STOP");
                }
            }
            // A result that says `stopped` too is both (the client takes it so), where the
            // server sends a bare `stopped` after the final.
            if e.get("event").and_then(Value::as_str) == Some(names::STOPPED) {
                self.stopped += 1;
                self.flag(
                    "stopped-last",
                    "a stopped of its own after the final",
                    "stopped in a result's frame",
                );
            }
            return;
        }
        let event = e.get("event").and_then(Value::as_str).unwrap_or("");
        match event {
            names::STARTED | names::LANGUAGE_SET | names::HOTWORDS_SET => {
                self.answer(event, e, record.time_s);
            }
            names::STOPPED => {
                self.stopped += 1;
                if !self.stop_sent {
                    self.flag("stopped-last", "stopped after STOP", "stopped before STOP");
                }
                if !self.audio_sends_s.is_empty() && self.finals == 0 {
                    self.flag("stopped-last", "stopped after the final", "no final yet");
                }
            }
            names::ERROR => self.flag("server-error", "no error event", e.to_string()),
            _ => self.flag("unknown-event", "a result or a known event", e.to_string()),
        }
    }

    /// `started`, `language_set` or `hotwords_set` at `time_s`: the answer owed first, with the
    /// setting echoed back.
    fn answer(&mut self, event: &str, e: &Value, time_s: f64) {
        let answered = self.awaiting.first() == Some(&event);
        let rule = if event == names::STARTED {
            "started-first"
        } else {
            "setting-ack"
        };
        if answered {
            self.awaiting.remove(0);
        } else {
            self.flag(rule, format!("{event} answering its command"), "unasked");
        }
        if event == names::STARTED {
            self.started_s.get_or_insert(time_s);
        }
        let shaped = match event {
            names::LANGUAGE_SET => e.get("language").is_some_and(Value::is_string),
            names::HOTWORDS_SET => e.get("hotwords").is_some_and(Value::is_array),
            _ => true,
        };
        if !shaped {
            self.flag("setting-ack", "the setting echoed back", e.to_string());
        }
    }

    /// The rules over the whole session: started before the audio, one final and one stopped.
    fn check_end(&mut self) {
        let first_audio_s = self
            .audio_sends_s
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        if self.start_sent && self.started_s.is_none() {
            self.flag_session("started-first", "started", "none");
        }
        if let Some(started_s) = self.started_s {
            if first_audio_s < started_s {
                self.flag_session(
                    "started-first",
                    "started before the first audio frame",
                    format!("audio at {first_audio_s:.6} s, started at {started_s:.6} s"),
                );
            }
        }
        if self.stop_sent {
            let expected = u32::from(!self.audio_sends_s.is_empty());
            let finals = self.finals;
            if finals != expected {
                self.flag_session(
                    "final-once",
                    format!("{expected} final result"),
                    format!("{finals}"),
                );
            }
            let stopped = self.stopped;
            if stopped != 1 {
                self.flag_session("stopped-last", "exactly one stopped", format!("{stopped}"));
            }
        }
    }

    fn flag(&mut self, rule: &'static str, expected: impl Into<String>, got: impl Into<String>) {
        self.violations.push(Violation {
            rule,
            session: self.session.to_string(),
            event: (self.line > 0).then(|| (self.line, self.kind.clone())),
            expected: expected.into(),
            got: got.into(),
        });
    }

    fn flag_session(
        &mut self,
        rule: &'static str,
        expected: impl Into<String>,
        got: impl Into<String>,
    ) {
        self.line = 0;
        self.flag(rule, expected, got);
    }

    /// A result's shape, and its duration against the last one.
    fn result(&mut self, e: &Value) {
        let sentences_ok = match e.get("sentences") {
            None => true,
            Some(Value::Array(list)) => list.iter().all(|s| {
                s.get("text").is_some_and(Value::is_string)
                    && s.get("start").is_some_and(Value::is_number)
                    && s.get("end").is_some_and(Value::is_number)
            }),
            Some(_) => false,
        };
        let partial_ok = e.get("partial").is_none_or(Value::is_string);
        let final_ok = e.get("is_final").is_none_or(Value::is_boolean);
        let duration = e.get("duration_ms").and_then(Value::as_f64);
        let duration_ok = duration.is_some_and(|d| d >= 0.0);
        if !(sentences_ok && partial_ok && final_ok && duration_ok) {
            self.flag("result-shape", "a well-formed result", e.to_string());
        }
        if let Some(d) = duration {
            if let Some(last) = self.last_duration {
                if d < last {
                    self.flag(
                        "duration-monotonic",
                        format!("duration_ms >= {last}"),
                        format!("{d}"),
                    );
                }
            }
            self.last_duration = Some(d);
        }
    }
}

/// The send starts of a session's audio frames, from the receipts beside its trace.
pub fn audio_sends(trace: &std::path::Path) -> Vec<f64> {
    let Some(value) = super::trace_file::read_receipts(trace) else {
        return Vec::new();
    };
    value
        .get("appends")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("start_s").and_then(Value::as_f64))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn send(t: f64, command: &str) -> Record {
        Record::new(Direction::Send, t, json!(command))
    }

    fn recv(t: f64, event: Value) -> Record {
        Record::new(Direction::Receive, t, event)
    }

    fn partial(duration_ms: u64) -> Value {
        json!({"sentences":[],"partial":"w","partial_start_ms":0,"duration_ms":duration_ms,"is_final":false})
    }

    fn good() -> Vec<Record> {
        vec![
            send(1.0, "START"),
            recv(1.01, json!({"event":"started"})),
            send(1.02, "LANGUAGE:en"),
            recv(1.03, json!({"event":"language_set","language":"en"})),
            recv(1.6, partial(500)),
            recv(2.4, partial(1300)),
            send(3.0, "STOP"),
            recv(
                3.1,
                json!({"sentences":[{"text":"w","start":0,"end":2000}],"partial":"","duration_ms":2000,"is_final":true}),
            ),
            recv(3.11, json!({"event":"stopped"})),
        ]
    }

    fn rules(records: &[Record], audio: &[f64]) -> Vec<&'static str> {
        check_session("s", records, audio)
            .violations
            .iter()
            .map(|v| v.rule)
            .collect()
    }

    #[test]
    fn a_well_behaved_session_breaks_no_rule_issue_11() {
        assert_eq!(rules(&good(), &[1.1, 1.2]), Vec::<&str>::new());
    }

    #[test]
    fn audio_before_started_is_flagged_issue_11() {
        assert_eq!(rules(&good(), &[1.005]), ["started-first"]);
    }

    #[test]
    fn a_shrinking_duration_and_a_malformed_result_are_flagged_issue_11() {
        let mut r = good();
        r[5] = recv(2.4, partial(400));
        r.insert(5, recv(2.0, json!({"partial": 3, "duration_ms": 450})));
        let broken = rules(&r, &[1.1]);
        assert!(broken.contains(&"result-shape"), "{broken:?}");
        assert!(broken.contains(&"duration-monotonic"), "{broken:?}");
    }

    #[test]
    fn two_finals_or_a_missing_stopped_are_flagged_issue_11() {
        let mut r = good();
        r.insert(8, r[7].clone());
        assert_eq!(rules(&r, &[1.1]), ["final-once"]);
        let mut r = good();
        r.pop();
        assert_eq!(rules(&r, &[1.1]), ["stopped-last"]);
        let mut r = good();
        r.push(recv(3.2, partial(2000)));
        assert_eq!(rules(&r, &[1.1]), ["stopped-last"]);
    }

    /// A final that says `stopped` too is one stopped in the wrong place, not none ("exactly
    /// one stopped … got 0" was false).
    #[test]
    fn a_stopped_inside_the_final_is_named_so() {
        let mut r = good();
        r.pop();
        r[7].event["event"] = json!("stopped");
        let report = check_session("s", &r, &[1.1]);
        let found: Vec<(&str, &str)> = report
            .violations
            .iter()
            .map(|v| (v.rule, v.got.as_str()))
            .collect();
        assert_eq!(found, [("stopped-last", "stopped in a result's frame")]);
        // A binary frame's line is named as one, not as a result.
        let binary = recv(2.5, json!({"_binary_bytes": 3}));
        assert_eq!(kind(&binary), "binary frame");
    }
}
