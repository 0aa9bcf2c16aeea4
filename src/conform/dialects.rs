//! The rules of the OpenAI Realtime and vLLM dialects (docs/openai-realtime.md), one pass over
//! a session's records each: fewer than the native protocol's, because these protocols promise
//! less (no acknowledgement per packet, no media time), but each one a promise their clients
//! rely on. The event names are the protocols' own, from their modules.

use super::{Direction, Record, SessionReport, Violation};
use crate::protocol::{openai, vllm, Protocol};
use serde_json::Value;

/// The OpenAI dialect's rules.
#[rustfmt::skip]
pub const OPENAI_RULES: &[(&str, &str)] = &[
    ("client-error", "the client saw no error (a frame it could not read, a timeout, a dropped connection)"),
    ("oa-created-first", "session.created is the first server event, once"),
    ("oa-updated", "every session.update is answered by one session.updated"),
    ("oa-event-id", "every server event has a non-empty string event_id"),
    ("oa-vad-order", "speech_started and speech_stopped alternate, starting with speech_started"),
    ("oa-commit", "every commit is answered by input_audio_buffer.committed or an error"),
    ("oa-response", "every response.created is followed by one response.done with a status, and deltas name a created response"),
    ("oa-transcript", "in a transcription session, every committed names a new item_id, and every committed item gets one transcript, .completed or .failed with its item_id, after its committed"),
    ("oa-known-event", "every server event is one of the API's (GA or beta names)"),
    ("server-error", "the server sent no error event"),
];

/// The vLLM dialect's rules.
#[rustfmt::skip]
pub const VLLM_RULES: &[(&str, &str)] = &[
    ("client-error", "the client saw no error (a frame it could not read, a timeout, a dropped connection)"),
    ("vllm-created-first", "session.created is the first server event, once"),
    ("vllm-delta", "every transcription.delta carries a string delta"),
    ("vllm-done", "one transcription.done, with a string text and a usage object; nothing after it"),
    ("vllm-known-event", "every server event is one of the protocol's"),
    ("server-error", "the server sent no error event (error with a string error and a code)"),
];

/// Checks one session of `protocol` (openai or vllm).
pub fn check(protocol: Protocol, session: &str, records: &[Record]) -> SessionReport {
    let mut v = Findings {
        session,
        violations: Vec::new(),
    };
    let server = || {
        records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.direction == Direction::Receive)
    };
    for (i, r) in records.iter().enumerate() {
        if r.direction == Direction::Error {
            v.add(
                "client-error",
                Some((i, r)),
                "no error",
                &r.event.to_string(),
            );
        }
    }
    let created = if protocol == Protocol::Openai {
        openai::names::SESSION_CREATED
    } else {
        vllm::names::SESSION_CREATED
    };
    let first_rule = if protocol == Protocol::Openai {
        "oa-created-first"
    } else {
        "vllm-created-first"
    };
    for (n, (i, r)) in server().enumerate() {
        let is_created = r.kind() == created;
        if (n == 0) != is_created {
            v.add(
                first_rule,
                Some((i, r)),
                "session.created first, once",
                r.kind(),
            );
        }
        let raced = protocol == Protocol::Openai && refused_in_the_race(records, i);
        if r.kind() == "error" && !raced {
            v.add(
                "server-error",
                Some((i, r)),
                "no error",
                &r.event.to_string(),
            );
        }
    }
    match protocol {
        Protocol::Openai => openai_rules(&mut v, records),
        _ => vllm_rules(&mut v, records),
    }
    let close_recorded = records.iter().any(|r| r.direction == Direction::Close);
    SessionReport {
        session: session.to_string(),
        profile: None,
        violations: v.violations,
        close_recorded,
    }
}

/// Whether the error at `i` is the end-of-input race's (docs/openai-realtime.md): the
/// client's commit after its last append refused as empty (`input_audio_buffer_commit_empty`)
/// because the server's VAD stopped the speech and committed the input itself after that
/// append, or the `response.create` right after such a refused commit refused for the VAD
/// turn's response under way. The server did as it should.
fn refused_in_the_race(records: &[Record], i: usize) -> bool {
    use openai::names as n;
    let Some((code, answers)) = error_of(&records[i]) else {
        return false;
    };
    let sent = |id: &str| {
        (0..i).rev().find(|&j| {
            let r = &records[j];
            r.direction == Direction::Send
                && r.event.get("event_id").and_then(Value::as_str) == Some(id)
        })
    };
    let Some(j) = sent(answers) else {
        return false;
    };
    match (code, records[j].kind()) {
        ("input_audio_buffer_commit_empty", n::COMMIT) => vad_committed_after_input(records, j, i),
        ("conversation_already_has_active_response", n::RESPONSE_CREATE) => {
            // The commit sent just before it, itself refused in the race.
            let Some(k) = (0..j)
                .rev()
                .find(|&k| records[k].direction == Direction::Send)
            else {
                return false;
            };
            let commit_id = records[k].event.get("event_id").and_then(Value::as_str);
            records[k].kind() == n::COMMIT
                && records[..i].iter().enumerate().any(|(e, r)| {
                    error_of(r).is_some_and(|(code, answers)| {
                        code == "input_audio_buffer_commit_empty"
                            && Some(answers) == commit_id
                            && vad_committed_after_input(records, k, e)
                    })
                })
        }
        _ => false,
    }
}

/// An error event's code and the client event it names.
fn error_of(r: &Record) -> Option<(&str, &str)> {
    let code = r.event.pointer("/error/code").and_then(Value::as_str);
    let answers = r.event.pointer("/error/event_id").and_then(Value::as_str);
    (r.direction == Direction::Receive && r.kind() == openai::names::ERROR)
        .then_some(code.zip(answers))
        .flatten()
}

/// Whether, between the last append before the commit at `commit` and record `until`, the
/// server's VAD stopped the speech and then committed the input.
fn vad_committed_after_input(records: &[Record], commit: usize, until: usize) -> bool {
    use openai::names as n;
    let last_append = (0..commit)
        .rev()
        .find(|&k| records[k].direction == Direction::Send && records[k].kind() == n::APPEND);
    let after = last_append.map_or(0, |k| k + 1);
    let received = |r: &&Record| r.direction == Direction::Receive;
    let mut events = records[after..until].iter().filter(received);
    events.any(|r| r.kind() == n::SPEECH_STOPPED) && events.any(|r| r.kind() == n::COMMITTED)
}

struct Findings<'a> {
    session: &'a str,
    violations: Vec<Violation>,
}

impl Findings<'_> {
    fn add(&mut self, rule: &'static str, at: Option<(usize, &Record)>, expected: &str, got: &str) {
        let got: String = got.chars().take(160).collect();
        self.violations.push(Violation {
            rule,
            session: self.session.to_string(),
            event: at.map(|(i, r)| (i + 1, r.kind().to_string())),
            expected: expected.to_string(),
            got,
        });
    }
}

/// Every server event of the OpenAI Realtime API, in both namings: the union of openai-python's
/// `RealtimeServerEvent` (GA, `types/realtime/realtime_server_event.py`) and its beta
/// counterpart (`types/beta/realtime/realtime_server_event.py`), sorted.
const OPENAI_EVENTS: &[&str] = &[
    "conversation.created",
    "conversation.item.added",
    "conversation.item.created",
    "conversation.item.deleted",
    "conversation.item.done",
    "conversation.item.input_audio_transcription.completed",
    "conversation.item.input_audio_transcription.delta",
    "conversation.item.input_audio_transcription.failed",
    "conversation.item.input_audio_transcription.segment",
    "conversation.item.retrieved",
    "conversation.item.truncated",
    "error",
    "input_audio_buffer.cleared",
    "input_audio_buffer.committed",
    "input_audio_buffer.dtmf_event_received",
    "input_audio_buffer.speech_started",
    "input_audio_buffer.speech_stopped",
    "input_audio_buffer.timeout_triggered",
    "mcp_list_tools.completed",
    "mcp_list_tools.failed",
    "mcp_list_tools.in_progress",
    "output_audio_buffer.cleared",
    "output_audio_buffer.started",
    "output_audio_buffer.stopped",
    "rate_limits.updated",
    "response.audio.delta",
    "response.audio.done",
    "response.audio_transcript.delta",
    "response.audio_transcript.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.created",
    "response.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.mcp_call.in_progress",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.output_audio.delta",
    "response.output_audio.done",
    "response.output_audio_transcript.delta",
    "response.output_audio_transcript.done",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.text.delta",
    "response.text.done",
    "session.created",
    "session.updated",
    "transcription_session.updated",
];

/// The OpenAI Realtime API's rules over one session's records.
fn openai_rules(v: &mut Findings<'_>, records: &[Record]) {
    use openai::names as n;
    let mut tally = OpenaiTally::default();
    for (i, r) in records.iter().enumerate() {
        let kind = r.kind();
        if r.direction == Direction::Send {
            match kind {
                n::SESSION_UPDATE => {
                    tally.updates += 1;
                    tally.transcription |= r.event.pointer("/session/type")
                        == Some(&Value::String("transcription".into()));
                }
                n::COMMIT => tally.commits += 1,
                _ => {}
            }
            continue;
        }
        if r.direction != Direction::Receive {
            continue;
        }
        tally.received(v, (i, r));
    }
    tally.finish(v);
}

/// What an OpenAI Realtime session owes so far: updates and commits unanswered, whether the
/// server's VAD has speech open, and the responses created and not done.
#[derive(Default)]
struct OpenaiTally {
    updates: i64,
    commits: i64,
    speaking: bool,
    open: Vec<String>,
    /// A transcription session (its `session.update` or `session.created` says so).
    transcription: bool,
    /// Items committed whose transcript has not come, in a transcription session.
    untranscribed: Vec<String>,
    /// Every item committed, in a transcription session: an item_id names one item.
    committed_items: Vec<String>,
}

impl OpenaiTally {
    /// A server event (record `i`): an event_id, a known kind, and the order of its kind.
    fn received(&mut self, v: &mut Findings<'_>, (i, r): (usize, &Record)) {
        use openai::names as n;
        let kind = r.kind();
        if !matches!(r.event.get("event_id"), Some(Value::String(id)) if !id.is_empty()) {
            v.add(
                "oa-event-id",
                Some((i, r)),
                "a non-empty string event_id",
                "none",
            );
        }
        if OPENAI_EVENTS.binary_search(&kind).is_err() {
            v.add("oa-known-event", Some((i, r)), "an event of the API", kind);
        }
        match kind {
            n::SESSION_UPDATED => {
                self.updates -= 1;
                if self.updates < 0 {
                    v.add(
                        "oa-updated",
                        Some((i, r)),
                        "a session.update before it",
                        "none",
                    );
                }
            }
            n::SPEECH_STARTED | n::SPEECH_STOPPED => {
                let starts = kind == n::SPEECH_STARTED;
                if self.speaking == starts {
                    v.add(
                        "oa-vad-order",
                        Some((i, r)),
                        "alternating, speech_started first",
                        kind,
                    );
                }
                self.speaking = starts;
            }
            n::SESSION_CREATED => {
                self.transcription |= r.event.pointer("/session/type")
                    == Some(&Value::String("transcription".into()));
            }
            n::COMMITTED => {
                let id = r.event.get("item_id").and_then(Value::as_str);
                if let Some(id) = id {
                    self.untranscribed.push(id.to_string());
                }
                // A transcript is matched to its item by the item_id of its committed.
                let reused = id.is_some_and(|id| self.committed_items.iter().any(|c| c == id));
                if self.transcription && (id.is_none() || reused) {
                    v.add(
                        "oa-transcript",
                        Some((i, r)),
                        "a committed naming a new item_id",
                        id.map_or("no item_id", |_| "an item_id committed before"),
                    );
                }
                if let Some(id) = id {
                    self.committed_items.push(id.to_string());
                }
                // A commit of the server's VAD is not one the client asked for.
                self.commits = (self.commits - 1).max(0);
            }
            n::ERROR if self.commits > 0 => self.commits -= 1,
            n::INPUT_TRANSCRIPT_DONE | n::INPUT_TRANSCRIPT_FAILED if self.transcription => {
                let id = r.event.get("item_id").and_then(Value::as_str);
                match id.and_then(|id| self.untranscribed.iter().position(|u| u == id)) {
                    Some(at) => {
                        self.untranscribed.remove(at);
                    }
                    None => v.add(
                        "oa-transcript",
                        Some((i, r)),
                        "the item_id of a committed item without its transcript",
                        id.unwrap_or("none"),
                    ),
                }
            }
            n::RESPONSE_CREATED => {
                let id = r.event.pointer("/response/id").and_then(Value::as_str);
                self.open.push(id.unwrap_or_default().to_string());
            }
            n::RESPONSE_DONE => self.response_done(v, (i, r)),
            _ if kind.starts_with("response.") && kind.ends_with(".delta") => {
                let id = r.event.get("response_id").and_then(Value::as_str);
                if id.is_some_and(|id| !self.open.iter().any(|o| o == id)) {
                    v.add(
                        "oa-response",
                        Some((i, r)),
                        "the response_id of a created response",
                        id.unwrap_or_default(),
                    );
                }
            }
            _ => {}
        }
    }

    /// `response.done`: of a created response, with a status; it is no longer open.
    fn response_done(&mut self, v: &mut Findings<'_>, (i, r): (usize, &Record)) {
        let id = r
            .event
            .pointer("/response/id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let status = r.event.pointer("/response/status").and_then(Value::as_str);
        match self.open.iter().position(|o| o == id) {
            Some(at) if status.is_some() => {
                self.open.remove(at);
            }
            _ => v.add(
                "oa-response",
                Some((i, r)),
                "a created response, with a status",
                id,
            ),
        }
    }

    /// At the end of the session: nothing left unanswered or open.
    fn finish(self, v: &mut Findings<'_>) {
        if self.updates > 0 {
            v.add(
                "oa-updated",
                None,
                "a session.updated per session.update",
                &format!("{} unanswered", self.updates),
            );
        }
        if self.commits > 0 {
            v.add(
                "oa-commit",
                None,
                "committed (or an error) per commit",
                &format!("{} unanswered", self.commits),
            );
        }
        if !self.open.is_empty() {
            v.add(
                "oa-response",
                None,
                "response.done for every response",
                &format!("{} open", self.open.len()),
            );
        }
        if self.transcription && !self.untranscribed.is_empty() {
            v.add(
                "oa-transcript",
                None,
                "a transcript for every committed item",
                &format!(
                    "{} without: {}",
                    self.untranscribed.len(),
                    self.untranscribed.join(", ")
                ),
            );
        }
    }
}

fn vllm_rules(v: &mut Findings<'_>, records: &[Record]) {
    use vllm::names as n;
    let mut final_sent = false;
    let mut done = 0;
    for (i, r) in records.iter().enumerate() {
        let kind = r.kind();
        if r.direction == Direction::Send {
            if kind == n::COMMIT && r.event.get("final") == Some(&Value::Bool(true)) {
                final_sent = true;
            }
            continue;
        }
        if r.direction != Direction::Receive {
            continue;
        }
        if done > 0 {
            v.add(
                "vllm-done",
                Some((i, r)),
                "nothing after transcription.done",
                kind,
            );
        }
        match kind {
            n::SESSION_CREATED => {}
            n::DELTA => {
                if !r.event.get("delta").is_some_and(Value::is_string) {
                    v.add(
                        "vllm-delta",
                        Some((i, r)),
                        "a string delta",
                        &r.event.to_string(),
                    );
                }
            }
            // A done before the final commit is vLLM's own at its token limit
            // (`realtime_max_tokens`): the run counts that answer `early`; conform read a server
            // that has one as not speaking the protocol.
            n::DONE => {
                done += 1;
                let ok = r.event.get("text").is_some_and(Value::is_string)
                    && r.event.get("usage").is_some_and(Value::is_object);
                if !ok {
                    v.add(
                        "vllm-done",
                        Some((i, r)),
                        "with text and usage",
                        &r.event.to_string(),
                    );
                }
            }
            n::ERROR => {}
            other => v.add(
                "vllm-known-event",
                Some((i, r)),
                "an event of the protocol",
                other,
            ),
        }
    }
    if final_sent && done != 1 {
        v.add(
            "vllm-done",
            None,
            "one transcription.done",
            &format!("{done}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(direction: Direction, event: Value) -> Record {
        Record::new(direction, 0.0, event)
    }

    /// In a transcription session every committed item is owed its transcript, by its
    /// item_id (their order across items is not promised); a conversation owes none.
    #[test]
    fn a_transcription_session_owes_each_committed_item_its_transcript() {
        let session = |update_type: &str, completed_item: &str| {
            vec![
                rec(
                    Direction::Receive,
                    json!({"type":"session.created","event_id":"e0","session":{"type":"realtime"}}),
                ),
                rec(
                    Direction::Send,
                    json!({"type":"session.update","session":{"type":update_type}}),
                ),
                rec(
                    Direction::Receive,
                    json!({"type":"session.updated","event_id":"e1"}),
                ),
                rec(
                    Direction::Receive,
                    json!({"type":"input_audio_buffer.committed","event_id":"e2","item_id":"item_a"}),
                ),
                rec(
                    Direction::Receive,
                    json!({"type":"input_audio_buffer.committed","event_id":"e3","item_id":"item_b"}),
                ),
                rec(
                    Direction::Receive,
                    json!({"type":"conversation.item.input_audio_transcription.completed","event_id":"e4","item_id":completed_item,"transcript":"x"}),
                ),
            ]
        };
        let rules = |records: &[Record]| -> Vec<(&str, String)> {
            check(Protocol::Openai, "s", records)
                .violations
                .into_iter()
                .map(|v| (v.rule, v.got))
                .collect()
        };
        assert_eq!(
            rules(&session("transcription", "item_b")),
            [("oa-transcript", "1 without: item_a".to_string())]
        );
        let mut stray = session("transcription", "item_z");
        stray.push(rec(Direction::Receive, json!({"type":"conversation.item.input_audio_transcription.failed","event_id":"e5","item_id":"item_a","error":{}})));
        stray.push(rec(Direction::Receive, json!({"type":"conversation.item.input_audio_transcription.completed","event_id":"e6","item_id":"item_b","transcript":"x"})));
        assert_eq!(rules(&stray), [("oa-transcript", "item_z".to_string())]);
        assert!(rules(&session("realtime", "item_z")).is_empty());
        // An item_id names one item: a committed without one, or reusing one, is named.
        let mut reused = session("transcription", "item_b");
        reused.push(rec(
            Direction::Receive,
            json!({"type":"input_audio_buffer.committed","event_id":"e7","item_id":"item_a"}),
        ));
        reused.push(rec(
            Direction::Receive,
            json!({"type":"input_audio_buffer.committed","event_id":"e8"}),
        ));
        let got: Vec<String> = rules(&reused).into_iter().map(|(_, got)| got).collect();
        assert_eq!(
            got,
            [
                "an item_id committed before",
                "no item_id",
                "2 without: item_a, item_a"
            ]
        );
    }

    /// The end-of-input race: the server's VAD committed the input after the last append, so
    /// the client's final commit is refused as empty and its response.create as one too many:
    /// no server error. The same refusal with nothing committed after the last append is one.
    #[test]
    fn the_end_of_input_race_is_no_server_error() {
        let records = |vad_committed: bool| {
            let mut r = vec![
                rec(
                    Direction::Receive,
                    json!({"type":"session.created","event_id":"e0"}),
                ),
                rec(
                    Direction::Send,
                    json!({"type":"input_audio_buffer.append","event_id":"evt_1","audio":""}),
                ),
                rec(
                    Direction::Send,
                    json!({"type":"input_audio_buffer.commit","event_id":"evt_c"}),
                ),
                rec(
                    Direction::Send,
                    json!({"type":"response.create","event_id":"evt_r"}),
                ),
            ];
            if vad_committed {
                r.push(rec(
                    Direction::Receive,
                    json!({"type":"input_audio_buffer.speech_stopped","event_id":"e0b","audio_end_ms":100}),
                ));
                r.push(rec(
                    Direction::Receive,
                    json!({"type":"input_audio_buffer.committed","event_id":"e1","item_id":"i"}),
                ));
            }
            r.push(rec(Direction::Receive, json!({"type":"error","event_id":"e2","error":{"code":"input_audio_buffer_commit_empty","message":"m","event_id":"evt_c"}})));
            r.push(rec(Direction::Receive, json!({"type":"error","event_id":"e3","error":{"code":"conversation_already_has_active_response","message":"m","event_id":"evt_r"}})));
            r
        };
        let errors = |r: &[Record]| {
            check(Protocol::Openai, "s", r)
                .violations
                .iter()
                .filter(|v| v.rule == "server-error")
                .count()
        };
        assert_eq!(errors(&records(true)), 0);
        assert_eq!(errors(&records(false)), 2);
        // A response.create refused after a commit the server took (--commit-every shorter
        // than the answers) is the server's error, its committed notwithstanding.
        let busy = [
            rec(
                Direction::Receive,
                json!({"type":"session.created","event_id":"e0"}),
            ),
            rec(
                Direction::Send,
                json!({"type":"input_audio_buffer.append","event_id":"evt_1","audio":""}),
            ),
            rec(
                Direction::Send,
                json!({"type":"input_audio_buffer.commit","event_id":"evt_c"}),
            ),
            rec(
                Direction::Send,
                json!({"type":"response.create","event_id":"evt_r"}),
            ),
            rec(
                Direction::Receive,
                json!({"type":"input_audio_buffer.committed","event_id":"e1","item_id":"i"}),
            ),
            rec(
                Direction::Receive,
                json!({"type":"error","event_id":"e3","error":{"code":"conversation_already_has_active_response","message":"m","event_id":"evt_r"}}),
            ),
        ];
        assert_eq!(errors(&busy), 1);
    }

    #[test]
    fn a_vllm_session_without_done_and_with_an_error_breaks_its_rules_issue_12() {
        let r = [
            rec(Direction::Receive, json!({"type":"session.created"})),
            rec(
                Direction::Send,
                json!({"type":"input_audio_buffer.commit","final":true}),
            ),
            rec(
                Direction::Receive,
                json!({"type":"transcription.delta","delta":1}),
            ),
            rec(
                Direction::Receive,
                json!({"type":"error","error":"x","code":"processing_error"}),
            ),
        ];
        let rules: Vec<&str> = check(Protocol::Vllm, "s", &r)
            .violations
            .iter()
            .map(|v| v.rule)
            .collect();
        assert_eq!(rules, ["server-error", "vllm-delta", "vllm-done"]);
    }

    /// vLLM at its token limit (`realtime_max_tokens`) sends `transcription.done` before the
    /// client's final commit: conform read that as a broken rule (the QA run against the mock's
    /// `--max-tokens` of 2026-12-07). A second done still is one.
    #[test]
    fn a_vllm_done_at_the_token_limit_before_the_final_commit_is_conformant() {
        let done = || {
            rec(
                Direction::Receive,
                json!({"type":"transcription.done","text":"la ","usage":{"prompt_tokens":39,"total_tokens":44}}),
            )
        };
        let commit = |last: bool| {
            rec(
                Direction::Send,
                json!({"type":"input_audio_buffer.commit","final":last}),
            )
        };
        let mut r = vec![
            rec(Direction::Receive, json!({"type":"session.created"})),
            commit(false),
            done(),
            commit(true),
        ];
        assert!(check(Protocol::Vllm, "s", &r).violations.is_empty());
        r.push(done());
        let rules: Vec<&str> = check(Protocol::Vllm, "s", &r)
            .violations
            .iter()
            .map(|v| v.rule)
            .collect();
        assert_eq!(rules, ["vllm-done", "vllm-done"], "after it, and not one");
    }

    #[test]
    fn an_openai_response_left_open_and_an_unknown_event_are_named_issue_12() {
        let r = [
            rec(
                Direction::Receive,
                json!({"type":"session.created","event_id":"e1"}),
            ),
            rec(
                Direction::Receive,
                json!({"type":"response.created","event_id":"e2","response":{"id":"r1"}}),
            ),
            rec(
                Direction::Receive,
                json!({"type":"response.audio.delta","event_id":"e3","response_id":"r1"}),
            ),
            rec(
                Direction::Receive,
                json!({"type":"response.bogus","event_id":"e4"}),
            ),
        ];
        let rules: Vec<&str> = check(Protocol::Openai, "s", &r)
            .violations
            .iter()
            .map(|v| v.rule)
            .collect();
        assert_eq!(rules, ["oa-known-event", "oa-response"]);
    }

    /// The server events the client and the mock name are the ones the rule knows: a renamed
    /// constant cannot leave the list behind.
    #[test]
    fn every_server_event_the_client_and_mock_name_is_in_the_known_list() {
        use openai::names as n;
        for kind in [
            n::SESSION_CREATED,
            n::SESSION_UPDATED,
            n::COMMITTED,
            n::SPEECH_STARTED,
            n::SPEECH_STOPPED,
            n::ITEM_CREATED,
            n::ITEM_ADDED,
            n::ITEM_DONE,
            n::INPUT_TRANSCRIPT_DELTA,
            n::INPUT_TRANSCRIPT_DONE,
            n::RESPONSE_CREATED,
            n::RESPONSE_DONE,
            n::ERROR,
            n::AUDIO_DELTA,
            n::AUDIO_DONE,
            n::TRANSCRIPT_DELTA,
            n::TRANSCRIPT_DONE,
            n::TEXT_DELTA,
            n::TEXT_DONE,
            n::BETA_AUDIO_DELTA,
            n::BETA_AUDIO_DONE,
            n::BETA_TRANSCRIPT_DELTA,
            n::BETA_TRANSCRIPT_DONE,
            n::BETA_TEXT_DELTA,
            n::BETA_TEXT_DONE,
        ] {
            assert!(OPENAI_EVENTS.binary_search(&kind).is_ok(), "{kind}");
        }
        // And no client event is taken for a server event.
        for kind in [
            n::SESSION_UPDATE,
            n::APPEND,
            n::COMMIT,
            n::CLEAR,
            n::RESPONSE_CREATE,
            n::RESPONSE_CANCEL,
            n::ITEM_CREATE,
            n::ITEM_TRUNCATE,
            n::ITEM_DELETE,
            n::ITEM_RETRIEVE,
            n::OUTPUT_AUDIO_CLEAR,
            n::BETA_TRANSCRIPTION_SESSION_UPDATE,
        ] {
            assert!(OPENAI_EVENTS.binary_search(&kind).is_err(), "{kind}");
        }
    }

    #[test]
    fn every_server_event_of_the_api_in_either_naming_is_known_issue_12() {
        assert!(
            OPENAI_EVENTS.windows(2).all(|w| w[0] < w[1]),
            "sorted, for the binary search"
        );
        // A few of each kind the rule used to flag: GA-only, beta-only, WebRTC-only, tools.
        let mut r = vec![rec(
            Direction::Receive,
            json!({"type":"session.created","event_id":"e0"}),
        )];
        for (n, kind) in [
            "conversation.created",
            "output_audio_buffer.started",
            "input_audio_buffer.timeout_triggered",
            "conversation.item.input_audio_transcription.segment",
            "conversation.item.input_audio_transcription.failed",
            "conversation.item.truncated",
            "conversation.item.deleted",
            "conversation.item.retrieved",
            "response.function_call_arguments.done",
            "mcp_list_tools.completed",
            "response.mcp_call.in_progress",
            "transcription_session.updated",
        ]
        .iter()
        .enumerate()
        {
            r.push(rec(
                Direction::Receive,
                json!({"type": kind, "event_id": format!("e{}", n + 1)}),
            ));
        }
        let report = check(Protocol::Openai, "s", &r);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
    }
}
