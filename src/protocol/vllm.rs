//! vLLM's transcription `/v1/realtime` (Voxtral Realtime and other streaming ASR models), as
//! its server speaks it (docs/openai-realtime.md). Text JSON frames only.
//!
//! Set-up: `session.created`, then `session.update` with `model` at the top level (required
//! before the first commit, or the server answers `model_not_validated`), then an
//! `input_audio_buffer.commit` that starts the transcription; neither is answered. Streaming:
//! one `input_audio_buffer.append` per packet, transcribed as it arrives
//! (`transcription.delta`). Ending: `input_audio_buffer.commit` with `"final": true` →
//! `transcription.done`; then the client closes the socket.
//!
//! vLLM's `error` carries the message in `error` (a string) and the code beside it (`code`,
//! [`codes`]); either may also come in OpenAI's shape. vLLM closes no connection on an error,
//! but some leave nothing to wait for: the transcription failed (`processing_error`), or the
//! model was refused (`invalid_event`, `model_not_found` at the `session.update`,
//! `model_not_validated` at the commit), so no `transcription.done` will come: those are fatal
//! to the session. The others (`invalid_json`, `invalid_audio`, `unknown_event`, a code vLLM
//! does not send) refuse one event and the transcription goes on.

use super::native::ErrorBody;
use super::{
    AudioPacket, AudioSpan, ClientProtocol, ClientSettings, Ending, EventIds, Meaning, Milestone,
    Outgoing, Received, Step, TurnMark,
};
use crate::frame::push_audio;
use crate::trace::format::{json_string, Payload};
use serde::Deserialize;
use std::borrow::Cow;

/// The path vLLM serves it on.
pub const PATH: &str = "/v1/realtime";
/// The model the client names when `--model` is not given: the built-in mock's.
pub const MOCK_MODEL: &str = "duplexbench-mock";
/// The built-in mock's default audio a word of its transcript stands for (`--delta-interval-ms`),
/// in ms: one model step of three makes text, about what vLLM's Voxtral Realtime gave for the
/// speech sample (5 text deltas and 25 empty ones, with its pauses).
pub const MOCK_WORD_MS: u32 = 240;

pub mod names {
    pub const SESSION_CREATED: &str = "session.created";
    pub const SESSION_UPDATE: &str = "session.update";
    pub const APPEND: &str = "input_audio_buffer.append";
    pub const COMMIT: &str = "input_audio_buffer.commit";
    pub const DELTA: &str = "transcription.delta";
    pub const DONE: &str = "transcription.done";
    pub const ERROR: &str = "error";
}

/// The error codes vLLM sends (`speech_to_text/realtime/connection.py`), and where.
pub mod codes {
    /// A frame that is not JSON.
    pub const INVALID_JSON: &str = "invalid_json";
    /// An event that failed (the transcription itself, when it fails, ends with it).
    pub const PROCESSING_ERROR: &str = "processing_error";
    /// An append whose audio is not base64 PCM16, or empty.
    pub const INVALID_AUDIO: &str = "invalid_audio";
    /// A `session.update` without `model`.
    pub const INVALID_EVENT: &str = "invalid_event";
    /// A `session.update` naming a model the server does not serve.
    pub const MODEL_NOT_FOUND: &str = "model_not_found";
    /// A commit before a `session.update` validated the model.
    pub const MODEL_NOT_VALIDATED: &str = "model_not_validated";
    /// An event type vLLM does not know.
    pub const UNKNOWN_EVENT: &str = "unknown_event";
    pub const ALL: [&str; 7] = [
        INVALID_JSON,
        PROCESSING_ERROR,
        INVALID_AUDIO,
        INVALID_EVENT,
        MODEL_NOT_FOUND,
        MODEL_NOT_VALIDATED,
        UNKNOWN_EVENT,
    ];
    /// The codes after which no `transcription.done` will come. `processing_error` is also
    /// what vLLM answers an event its handler failed on, after which it goes on; for the
    /// well-formed frames this client sends that is a server fault, while a failed
    /// transcription (its other use) would otherwise leave the session waiting out
    /// `--recv-timeout` with the cause lost: fatal.
    pub const FATAL: [&str; 4] = [
        PROCESSING_ERROR,
        INVALID_EVENT,
        MODEL_NOT_FOUND,
        MODEL_NOT_VALIDATED,
    ];
}

/// The vLLM client.
#[derive(Debug, Clone)]
pub struct Vllm {
    update: String,
}

impl Vllm {
    pub fn new(c: &ClientSettings) -> Vllm {
        let model = c.model.as_deref().unwrap_or(MOCK_MODEL);
        Vllm {
            update: session_update(model),
        }
    }
}

/// `session.update` naming the model, at the top level as vLLM reads it.
pub fn session_update(model: &str) -> String {
    format!(
        r#"{{"type":"{}","model":{}}}"#,
        names::SESSION_UPDATE,
        json_string(model)
    )
}

/// The commit that starts the transcription, or (`final`) ends it.
pub fn commit(last: bool) -> String {
    if last {
        format!(r#"{{"type":"{}","final":true}}"#, names::COMMIT)
    } else {
        format!(r#"{{"type":"{}"}}"#, names::COMMIT)
    }
}

/// Writes an `input_audio_buffer.append` into `out` (the session's frame buffer, reused from
/// packet to packet), growing it at most once.
pub fn push_append_frame(out: &mut String, audio_b64: &str) -> AudioSpan {
    const HEAD: &str = r#"{"type":"input_audio_buffer.append","audio":""#;
    const TAIL: &str = r#""}"#;
    out.reserve(HEAD.len() + audio_b64.len() + TAIL.len());
    out.push_str(HEAD);
    let audio = push_audio(out, audio_b64);
    out.push_str(TAIL);
    audio
}

impl ClientProtocol for Vllm {
    /// vLLM's first realtime builds read no `final` on a commit: the commit that ends the
    /// input is taken as another start, and `transcription.done` never comes.
    fn timeout_hint(&self, awaiting: &str) -> Option<&'static str> {
        (awaiting == names::DONE).then_some(
            "the server sent transcription deltas but no done: it may be one of vLLM's first realtime builds, which read no \"final\": true on the last commit and never end the transcription: upgrade vLLM",
        )
    }

    fn set_up(&self, _ids: EventIds) -> Vec<Step> {
        vec![
            Step {
                send: None,
                until: Some(Milestone::Created),
                awaiting: names::SESSION_CREATED,
                turn: None,
            },
            Step {
                send: Some(Outgoing::Text(self.update.clone())),
                until: None,
                awaiting: names::SESSION_UPDATE,
                turn: None,
            },
            Step {
                send: Some(Outgoing::Text(commit(false))),
                until: None,
                awaiting: names::COMMIT,
                turn: None,
            },
        ]
    }

    fn packet(
        &self,
        frame: &mut Outgoing,
        _ids: EventIds,
        _seq: u32,
        _t: u64,
        audio: AudioPacket<'_>,
    ) -> Option<AudioSpan> {
        Some(push_append_frame(frame.text_buffer(), audio.b64))
    }

    /// The final commit, answered by `transcription.done`; after an early done (the model
    /// stopped before the audio did: vLLM ends the transcription at the model's
    /// `realtime_max_tokens`, then clears its audio queue) it is still sent, as the input's
    /// end, but nothing answers it: vLLM transcribes again only after another start commit.
    fn finish(&self, _ids: EventIds, ending: Ending) -> Vec<Step> {
        if !ending.streamed {
            return Vec::new();
        }
        let answered = !ending.answered_early;
        vec![Step {
            send: Some(Outgoing::Text(commit(true))),
            until: answered.then_some(Milestone::Answered),
            awaiting: if answered { names::DONE } else { names::COMMIT },
            turn: answered.then_some(TurnMark::EndsAsking),
        }]
    }

    fn client_closes(&self) -> bool {
        true
    }

    fn classify<'a>(&self, text: &'a str) -> Result<Received<'a>, String> {
        let event: ServerEvent<'a> = super::json_object(text)
            .map_err(|err| format!("server frame is not a JSON event ({err})"))?;
        let meaning = match &*event.kind {
            names::SESSION_CREATED => Meaning::Milestone(Milestone::Created),
            // vLLM sends a delta for every step of the model, text or not: an empty one is
            // no text, but the server answering all the same (a pause in speech is no stall).
            names::DELTA if event.delta.as_deref().is_some_and(|d| !d.is_empty()) => {
                Meaning::TextDelta
            }
            names::DELTA => Meaning::Progress,
            names::DONE => Meaning::TurnDone {
                completed: true,
                failure: None,
            },
            names::ERROR => {
                let body = event.error.unwrap_or_default();
                let message = body.message.unwrap_or_default();
                let code = event
                    .code
                    .or(body.code)
                    .unwrap_or(Cow::Borrowed(super::NULL_CODE));
                Meaning::Error {
                    fatal: codes::FATAL.contains(&&*code),
                    code,
                    message,
                    answers: None,
                }
            }
            _ => Meaning::Other,
        };
        Ok(Received {
            meaning,
            payload: Payload::Json { audio_key: None },
            event: None,
            item: None,
        })
    }
}

#[derive(Debug, Deserialize)]
struct ServerEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "super::native::lenient_str")]
    code: Option<Cow<'a, str>>,
    /// vLLM's is the message; OpenAI's is an object.
    #[serde(default, borrow, deserialize_with = "super::native::lenient_error")]
    error: Option<ErrorBody<'a>>,
    #[serde(default, borrow)]
    delta: Option<Cow<'a, str>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: EventIds = EventIds {
        shard: 0,
        worker: 0,
        session: 0,
    };

    /// A client naming the model `m`.
    fn client() -> Vllm {
        Vllm {
            update: session_update("m"),
        }
    }

    fn meaning(text: &str) -> Meaning<'_> {
        client().classify(text).unwrap().meaning
    }

    #[test]
    fn vllm_frames_are_exact_issue_12() {
        let v: serde_json::Value =
            serde_json::from_str(&session_update("mistralai/Voxtral")).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"session.update","model":"mistralai/Voxtral"})
        );
        let v: serde_json::Value = serde_json::from_str(&commit(true)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"input_audio_buffer.commit","final":true})
        );
        let v: serde_json::Value = serde_json::from_str(&commit(false)).unwrap();
        assert_eq!(v, serde_json::json!({"type":"input_audio_buffer.commit"}));
        let mut out = String::new();
        push_append_frame(&mut out, "AAAA");
        assert_eq!(out.capacity(), out.len());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type":"input_audio_buffer.append","audio":"AAAA"})
        );
    }

    #[test]
    fn set_up_names_the_model_then_commits_to_start_before_any_append_issue_12() {
        let (v, ids) = (client(), IDS);
        let steps = v.set_up(ids);
        let sent: Vec<String> = steps
            .iter()
            .filter_map(|s| match &s.send {
                Some(Outgoing::Text(t)) => Some(t.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(sent, [session_update("m"), commit(false)]);
        assert_eq!(steps[0].until, Some(Milestone::Created));
        assert!(steps[1..].iter().all(|s| s.until.is_none()), "not answered");
        let end = v.finish(
            ids,
            Ending {
                streamed: true,
                ..Ending::default()
            },
        );
        assert_eq!(end.len(), 1);
        assert_eq!(end[0].send, Some(Outgoing::Text(commit(true))));
        assert_eq!(end[0].until, Some(Milestone::Answered));
        assert_eq!(end[0].turn, Some(TurnMark::EndsAsking));
    }

    #[test]
    fn after_an_early_done_the_final_commit_waits_for_no_answer() {
        let (v, ids) = (client(), IDS);
        let end = v.finish(
            ids,
            Ending {
                streamed: true,
                answered_early: true,
                ..Ending::default()
            },
        );
        assert_eq!(end.len(), 1);
        assert_eq!(
            end[0].send,
            Some(Outgoing::Text(commit(true))),
            "still sent"
        );
        assert_eq!(end[0].until, None, "vLLM answers it with nothing");
        assert_eq!(end[0].turn, None, "no turn waits on it");
    }

    #[test]
    fn vllm_server_events_have_their_meanings_issue_12() {
        assert_eq!(
            meaning(r#"{"type":"session.created","id":"s"}"#),
            Meaning::Milestone(Milestone::Created)
        );
        assert_eq!(
            meaning(r#"{"type":"transcription.delta","delta":"Hel"}"#),
            Meaning::TextDelta
        );
        assert_eq!(
            meaning(r#"{"type":"transcription.done","text":"Hello","usage":{"input_tokens":3}}"#),
            Meaning::TurnDone {
                completed: true,
                failure: None,
            }
        );
    }

    #[test]
    fn each_vllm_error_code_is_read_with_its_message_issue_12() {
        for code in codes::ALL {
            let text = format!(r#"{{"type":"error","error":"it broke","code":"{code}"}}"#);
            assert_eq!(
                meaning(&text),
                Meaning::Error {
                    fatal: codes::FATAL.contains(&code),
                    code: code.into(),
                    message: "it broke".into(),
                    answers: None
                }
            );
        }
        let openai_shaped =
            r#"{"type":"error","error":{"code":"invalid_audio","message":"bad base64"}}"#;
        assert_eq!(
            meaning(openai_shaped),
            Meaning::Error {
                fatal: false,
                code: "invalid_audio".into(),
                message: "bad base64".into(),
                answers: None
            }
        );
    }

    #[test]
    fn only_errors_that_end_the_transcription_are_fatal_issue_12() {
        // vLLM goes on after these: one event was refused.
        for code in [
            "invalid_json",
            "invalid_audio",
            "unknown_event",
            "rate_limited",
        ] {
            let text = format!(r#"{{"type":"error","error":"x","code":"{code}"}}"#);
            assert!(
                matches!(meaning(&text), Meaning::Error { fatal: false, .. }),
                "{code}"
            );
        }
        // ... and no transcription.done comes after these.
        for code in [
            "processing_error",
            "invalid_event",
            "model_not_found",
            "model_not_validated",
        ] {
            let text = format!(r#"{{"type":"error","error":"x","code":"{code}"}}"#);
            assert!(
                matches!(meaning(&text), Meaning::Error { fatal: true, .. }),
                "{code}"
            );
        }
    }

    #[test]
    fn a_null_code_is_reported_as_null_not_a_question_mark_issue_12() {
        // vLLM's ErrorEvent has `code: str | None`.
        for text in [
            r#"{"type":"error","error":"x","code":null}"#,
            r#"{"type":"error","error":"x"}"#,
        ] {
            assert_eq!(
                meaning(text),
                Meaning::Error {
                    fatal: false,
                    code: "null".into(),
                    message: "x".into(),
                    answers: None
                }
            );
        }
    }

    #[test]
    fn an_empty_transcription_delta_is_no_text_issue_12() {
        assert_eq!(
            meaning(r#"{"type":"transcription.delta","delta":""}"#),
            Meaning::Progress
        );
        assert_eq!(
            meaning(r#"{"type":"transcription.delta","delta":" a"}"#),
            Meaning::TextDelta
        );
    }
}
