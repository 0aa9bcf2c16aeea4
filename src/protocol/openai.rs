//! The OpenAI Realtime API as a client speaks it to OpenAI, Azure OpenAI, vllm-omni or
//! sglang-omni's compatible endpoint (docs/openai-realtime.md). Text JSON frames only.
//!
//! Set-up: `session.created` → `session.update` (modalities, audio formats, turn detection) →
//! `session.updated`. Streaming: one `input_audio_buffer.append` per packet; with
//! `--commit-every`, an `input_audio_buffer.commit` and a `response.create` every N seconds.
//! Ending: with `--turn-detection none` (or server VAD still hearing speech) a commit →
//! `input_audio_buffer.committed`, and once no response is in progress a `response.create` →
//! `response.done`; then the answers to every open turn; then the client closes the socket
//! (the API has no goodbye).
//!
//! A transcription session (`--session-type transcription`, GA only) sends a `session.update`
//! of `type` `"transcription"` and no `response.create`: each committed turn's answer is its
//! input's transcript, `conversation.item.input_audio_transcription.delta`s then `.completed`
//! (or `.failed`), timed as a response's text and `done` are.
//!
//! What is sent follows `--api-version` exactly (GA or beta names and session shape); what is
//! received is read in both namings, whichever was asked for, and audio in `delta` (OpenAI) or
//! `audio` (vllm-omni, beside `sample_rate_hz`).

use super::native::ErrorBody;
use super::{ApiVersion, ClientSettings, SessionType, TurnDetection};
use super::{
    AudioPacket, AudioSpan, ClientProtocol, Ending, EventIds, Meaning, Milestone, Outgoing,
    Received, Step, TurnMark,
};
use crate::frame::push_audio;
use crate::trace::format::{json_string, push_hex16_str, Payload};
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::borrow::Cow;

/// The path OpenAI serves the API on (the model goes in the query: `?model=gpt-realtime`).
pub const PATH: &str = "/v1/realtime";
/// PCM16 at 24 kHz: the API's audio format unless told otherwise (beta knows no other).
pub const DEFAULT_SAMPLE_RATE: u32 = 24_000;
/// The built-in mock's default time between two deltas of an answer (`--delta-interval-ms`), in ms.
pub const MOCK_DELTA_INTERVAL_MS: u32 = 40;
/// The transcription model a transcription session names against the built-in mock when
/// `--model` does not say (one of the API's; with `--url`, `--model` is required).
pub const MOCK_TRANSCRIPTION_MODEL: &str = "gpt-4o-transcribe";
/// The header a beta connection sends.
pub const BETA_HEADER: (&str, &str) = ("OpenAI-Beta", "realtime=v1");

pub mod names {
    pub const SESSION_CREATED: &str = "session.created";
    pub const SESSION_UPDATE: &str = "session.update";
    pub const SESSION_UPDATED: &str = "session.updated";
    pub const APPEND: &str = "input_audio_buffer.append";
    pub const COMMIT: &str = "input_audio_buffer.commit";
    pub const CLEAR: &str = "input_audio_buffer.clear";
    pub const COMMITTED: &str = "input_audio_buffer.committed";
    pub const SPEECH_STARTED: &str = "input_audio_buffer.speech_started";
    pub const SPEECH_STOPPED: &str = "input_audio_buffer.speech_stopped";
    /// Beta's item event (GA's `conversation.item.created` too, in its union, though the GA
    /// API sends `conversation.item.added` and `conversation.item.done`).
    pub const ITEM_CREATED: &str = "conversation.item.created";
    pub const ITEM_ADDED: &str = "conversation.item.added";
    pub const ITEM_DONE: &str = "conversation.item.done";
    pub const INPUT_TRANSCRIPT_DELTA: &str = "conversation.item.input_audio_transcription.delta";
    pub const INPUT_TRANSCRIPT_DONE: &str = "conversation.item.input_audio_transcription.completed";
    pub const INPUT_TRANSCRIPT_FAILED: &str = "conversation.item.input_audio_transcription.failed";
    /// A diarizing model's (`gpt-4o-transcribe-diarize`) piece of transcript, with its speaker.
    pub const INPUT_TRANSCRIPT_SEGMENT: &str =
        "conversation.item.input_audio_transcription.segment";
    pub const RESPONSE_CREATE: &str = "response.create";
    pub const RESPONSE_CANCEL: &str = "response.cancel";
    /// The rest of openai-python's `RealtimeClientEvent` union (the client sends none of them).
    pub const ITEM_CREATE: &str = "conversation.item.create";
    pub const ITEM_TRUNCATE: &str = "conversation.item.truncate";
    pub const ITEM_DELETE: &str = "conversation.item.delete";
    pub const ITEM_RETRIEVE: &str = "conversation.item.retrieve";
    pub const OUTPUT_AUDIO_CLEAR: &str = "output_audio_buffer.clear";
    /// Beta only.
    pub const BETA_TRANSCRIPTION_SESSION_UPDATE: &str = "transcription_session.update";
    pub const RESPONSE_CREATED: &str = "response.created";
    pub const RESPONSE_DONE: &str = "response.done";
    pub const ERROR: &str = "error";
    /// GA names of the output deltas...
    pub const AUDIO_DELTA: &str = "response.output_audio.delta";
    pub const AUDIO_DONE: &str = "response.output_audio.done";
    pub const TRANSCRIPT_DELTA: &str = "response.output_audio_transcript.delta";
    pub const TRANSCRIPT_DONE: &str = "response.output_audio_transcript.done";
    pub const TEXT_DELTA: &str = "response.output_text.delta";
    pub const TEXT_DONE: &str = "response.output_text.done";
    /// ...and their beta names.
    pub const BETA_AUDIO_DELTA: &str = "response.audio.delta";
    pub const BETA_AUDIO_DONE: &str = "response.audio.done";
    pub const BETA_TRANSCRIPT_DELTA: &str = "response.audio_transcript.delta";
    pub const BETA_TRANSCRIPT_DONE: &str = "response.audio_transcript.done";
    pub const BETA_TEXT_DELTA: &str = "response.text.delta";
    pub const BETA_TEXT_DONE: &str = "response.text.done";
}

/// Control ids (see [`EventIds::control`]); the commits of `--commit-every` take two ids per
/// packet above these.
const UPDATE_ID: u32 = 0;
const FINAL_COMMIT_ID: u32 = 1;
const FINAL_RESPONSE_ID: u32 = 2;
const TURN_IDS_FROM: u32 = 16;

/// The OpenAI Realtime client.
#[derive(Debug, Clone)]
pub struct Openai {
    version: ApiVersion,
    /// A transcription session: commits ask for nothing more, and the input's transcript is
    /// each turn's answer.
    transcription: bool,
    turn_detection: TurnDetection,
    /// `--commit-every`, in ms of input.
    commit_every_ms: Option<u64>,
    packet_ms: u64,
    /// The `session.update`, without its event id (the same for every session).
    session: String,
}

/// The least audio the API commits: `input_audio_buffer_commit_empty` ("buffer too small.
/// Expected at least 100ms of audio") answers a commit of less.
pub const MIN_COMMIT_MS: u64 = 100;

impl Openai {
    /// A client of `c`'s terms asking for `modalities` (a transcription session: transcribing
    /// `language`, when given), sending packets of `packet_ms`.
    pub fn new(
        c: &ClientSettings,
        modalities: &[String],
        language: Option<&str>,
        packet_ms: u32,
    ) -> Openai {
        let transcription = c.session_type == Some(SessionType::Transcription);
        let session = if transcription {
            transcription_session_object(
                c.model.as_deref().unwrap_or(MOCK_TRANSCRIPTION_MODEL),
                language,
                c.input_sample_rate,
                c.turn_detection.unwrap_or_default(),
            )
        } else {
            session_object(
                c.api_version.unwrap_or_default(),
                c.model.as_deref(),
                modalities,
                c.input_sample_rate,
                c.turn_detection.unwrap_or_default(),
                c.interrupt_response.unwrap_or(false),
            )
        };
        Openai {
            version: c.api_version.unwrap_or_default(),
            transcription,
            turn_detection: c.turn_detection.unwrap_or_default(),
            commit_every_ms: c.commit_every_ms,
            packet_ms: u64::from(packet_ms),
            session,
        }
    }

    fn update(&self, event_id: u64) -> String {
        format!(
            r#"{{"type":"{}","event_id":"{}","session":{}}}"#,
            names::SESSION_UPDATE,
            event_id_text(event_id),
            self.session
        )
    }

    /// A commit and the `response.create` after it.
    fn commit_and_respond(&self, commit_id: u64, response_id: u64) -> [Outgoing; 2] {
        [
            Outgoing::Text(bare(names::COMMIT, commit_id)),
            Outgoing::Text(bare(names::RESPONSE_CREATE, response_id)),
        ]
    }

    /// The ending of a transcription session: the final commit when the client ends the last
    /// turn (its transcript comes unasked, so nothing is waited for but it: an error refusing
    /// the commit ends that wait), then the transcripts of every turn.
    fn finish_transcription(&self, ids: EventIds, client_ends: bool) -> Vec<Step> {
        let mut steps = Vec::with_capacity(2);
        if client_ends {
            steps.push(Step {
                send: Some(Outgoing::Text(bare(
                    names::COMMIT,
                    ids.control(FINAL_COMMIT_ID),
                ))),
                until: None,
                awaiting: names::COMMIT,
                turn: Some(TurnMark::EndsAsking),
            });
        }
        steps.push(Step {
            send: None,
            until: Some(Milestone::Idle),
            awaiting: names::INPUT_TRANSCRIPT_DONE,
            turn: None,
        });
        steps
    }
}

/// The `session` of a transcription session's `session.update` (GA: openai-python's
/// `RealtimeTranscriptionSessionCreateRequest`): the input's format, the transcription model
/// (without one the session transcribes nothing) and its language when given (ISO-639-1, as
/// `AudioTranscription.language` takes it), and who ends a turn. The server VAD is asked
/// for by its type alone: a transcription session creates no responses for its flags to steer.
pub fn transcription_session_object(
    model: &str,
    language: Option<&str>,
    rate: u32,
    turn_detection: TurnDetection,
) -> String {
    let vad = match turn_detection {
        TurnDetection::ServerVad => r#"{"type":"server_vad"}"#,
        TurnDetection::None => "null",
    };
    let language = language
        .map(|l| format!(r#","language":{}"#, json_string(l)))
        .unwrap_or_default();
    format!(
        r#"{{"type":"transcription","audio":{{"input":{{"format":{{"type":"audio/pcm","rate":{rate}}},"transcription":{{"model":{}{language}}},"turn_detection":{vad}}}}}}}"#,
        json_string(model)
    )
}

/// The `session` of a `session.update`, in the shape of `version`.
pub fn session_object(
    version: ApiVersion,
    model: Option<&str>,
    modalities: &[String],
    rate: u32,
    turn_detection: TurnDetection,
    interrupt_response: bool,
) -> String {
    // Both VAD flags said, not left to the server: the API's default interrupt_response is
    // true (speech that starts cancels the response in progress) where the mock's is false,
    // and a benchmark's turns are only the same on both when the session says which.
    let vad = match turn_detection {
        TurnDetection::ServerVad => format!(
            r#"{{"type":"server_vad","create_response":true,"interrupt_response":{interrupt_response}}}"#
        ),
        TurnDetection::None => "null".to_string(),
    };
    let model = model
        .map(|m| format!(r#""model":{},"#, json_string(m)))
        .unwrap_or_default();
    match version {
        ApiVersion::Ga => {
            let modalities: Vec<String> = modalities.iter().map(|m| json_string(m)).collect();
            format!(
                r#"{{"type":"realtime",{model}"output_modalities":[{}],"audio":{{"input":{{"format":{{"type":"audio/pcm","rate":{rate}}},"turn_detection":{vad}}},"output":{{"format":{{"type":"audio/pcm","rate":{DEFAULT_SAMPLE_RATE}}}}}}}}}"#,
                modalities.join(",")
            )
        }
        ApiVersion::Beta => {
            // Beta's modalities are ["text"] or ["audio","text"]: audio always comes with its
            // transcript.
            let modalities = if modalities.iter().any(|m| m == "audio") {
                r#"["audio","text"]"#
            } else {
                r#"["text"]"#
            };
            format!(
                r#"{{{model}"modalities":{modalities},"input_audio_format":"pcm16","output_audio_format":"pcm16","turn_detection":{vad}}}"#
            )
        }
    }
}

/// `evt_` and the id in hex: OpenAI's event ids are strings.
fn event_id_text(event_id: u64) -> String {
    format!("evt_{event_id:016x}")
}

/// A command with nothing but its type and event id.
fn bare(kind: &str, event_id: u64) -> String {
    format!(
        r#"{{"type":"{kind}","event_id":"{}"}}"#,
        event_id_text(event_id)
    )
}

/// Writes an `input_audio_buffer.append` into `out` (the session's frame buffer, reused from
/// packet to packet), growing it at most once (as the native one).
pub fn push_append_frame(out: &mut String, event_id: u64, audio_b64: &str) -> AudioSpan {
    const HEAD: &str = r#"{"type":"input_audio_buffer.append","event_id":"evt_"#;
    const AUDIO: &str = r#"","audio":""#;
    const TAIL: &str = r#""}"#;
    out.reserve(HEAD.len() + 16 + AUDIO.len() + audio_b64.len() + TAIL.len());
    out.push_str(HEAD);
    push_hex16_str(out, event_id);
    out.push_str(AUDIO);
    let audio = push_audio(out, audio_b64);
    out.push_str(TAIL);
    audio
}

impl ClientProtocol for Openai {
    fn set_up(&self, ids: EventIds) -> Vec<Step> {
        vec![
            Step {
                send: None,
                until: Some(Milestone::Created),
                awaiting: names::SESSION_CREATED,
                turn: None,
            },
            Step {
                send: Some(Outgoing::Text(self.update(ids.control(UPDATE_ID)))),
                until: Some(Milestone::Ready),
                awaiting: names::SESSION_UPDATED,
                turn: None,
            },
        ]
    }

    fn packet(
        &self,
        frame: &mut Outgoing,
        ids: EventIds,
        seq: u32,
        _t_start_ms: u64,
        audio: AudioPacket<'_>,
    ) -> Option<AudioSpan> {
        Some(push_append_frame(
            frame.text_buffer(),
            ids.id(seq),
            audio.b64,
        ))
    }

    fn turn_end(
        &self,
        ids: EventIds,
        seq: u32,
        t_end_ms: u64,
        rest_ms: u64,
    ) -> Option<Vec<Outgoing>> {
        let every = self.commit_every_ms?;
        // The API refuses a commit of less than 100 ms of audio (`input_audio_buffer_commit_empty`):
        // a boundary that would leave less for the final commit is left to it.
        if rest_ms < MIN_COMMIT_MS {
            return None;
        }
        let before = t_end_ms.saturating_sub(self.packet_ms);
        if t_end_ms / every == before / every {
            return None;
        }
        let n = TURN_IDS_FROM.saturating_add(seq.saturating_mul(2));
        if self.transcription {
            return Some(vec![Outgoing::Text(bare(names::COMMIT, ids.control(n)))]);
        }
        Some(
            self.commit_and_respond(ids.control(n), ids.control(n + 1))
                .into(),
        )
    }

    fn finish(&self, ids: EventIds, ending: Ending) -> Vec<Step> {
        let mut steps = Vec::with_capacity(3);
        let client_ends = match self.turn_detection {
            TurnDetection::None => ending.streamed,
            TurnDetection::ServerVad => ending.speech_open,
        };
        if self.transcription {
            return self.finish_transcription(ids, client_ends);
        }
        if client_ends {
            let [commit, respond] = self
                .commit_and_respond(ids.control(FINAL_COMMIT_ID), ids.control(FINAL_RESPONSE_ID));
            steps.push(Step {
                send: Some(commit),
                until: Some(Milestone::Committed),
                awaiting: names::COMMITTED,
                turn: Some(TurnMark::Ends),
            });
            // One response at a time: the final turn's is asked for once none is under way
            // (asked for during one, the API refuses it: conversation_already_has_active_response).
            steps.push(Step {
                send: None,
                until: Some(Milestone::Quiet),
                awaiting: names::RESPONSE_DONE,
                turn: None,
            });
            steps.push(Step {
                send: Some(respond),
                until: None,
                awaiting: names::RESPONSE_CREATE,
                turn: Some(TurnMark::Asks),
            });
        }
        steps.push(Step {
            send: None,
            until: Some(Milestone::Idle),
            awaiting: names::RESPONSE_DONE,
            turn: None,
        });
        steps
    }

    /// A turn's `response.create` (the final one, or the odd one of a `--commit-every` turn's
    /// two control ids): the API refuses it while a response is in progress
    /// (`conversation_already_has_active_response`). That response still ends the session's
    /// wait; the refused turn gets no answer.
    fn refuses_turn(&self, ids: EventIds, answers: &str) -> Option<u32> {
        let id = answers
            .strip_prefix("evt_")
            .filter(|hex| hex.len() == 16)
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())?;
        let n = ids.control_of(id)?;
        // A transcription session's answer comes with the commit: a refused commit is a
        // refused turn.
        let asks = if self.transcription {
            FINAL_COMMIT_ID
        } else {
            FINAL_RESPONSE_ID
        };
        if n == asks {
            return Some(super::FINAL_TURN);
        }
        let turn = n.checked_sub(TURN_IDS_FROM)?;
        // The commit after packet seq is TURN_IDS_FROM + 2 seq, its response.create the next.
        (turn % 2 == u32::from(!self.transcription)).then_some(turn / 2)
    }

    fn refuses_an_empty_commit(&self, code: &str) -> bool {
        code == "input_audio_buffer_commit_empty"
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        match self.version {
            ApiVersion::Ga => Vec::new(),
            ApiVersion::Beta => vec![(BETA_HEADER.0, BETA_HEADER.1.to_string())],
        }
    }

    fn client_closes(&self) -> bool {
        true
    }

    fn classify<'a>(&self, text: &'a str) -> Result<Received<'a>, String> {
        classify_in(text, self.transcription)
    }
}

/// What a server event of the API means, in either naming.
pub fn classify(text: &str) -> Result<Received<'_>, String> {
    classify_in(text, false)
}

/// What a server event means in a conversation or, when `transcription`, a transcription
/// session, whose answers are the input's transcripts: a delta (or a diarizing model's
/// segment) with text is the answer's text, `.completed` its end, `.failed` its end in failure.
fn classify_in(text: &str, transcription: bool) -> Result<Received<'_>, String> {
    if let Some(delta) = delta_by_leading_type(text) {
        return Ok(delta);
    }
    let event: ServerEvent<'_> = super::json_object(text)
        .map_err(|err| format!("server frame is not a JSON event ({err})"))?;
    let mut payload = Payload::Json { audio_key: None };
    let meaning = match &*event.kind {
        names::INPUT_TRANSCRIPT_DELTA | names::INPUT_TRANSCRIPT_SEGMENT if transcription => {
            match event.delta.or(event.text) {
                Some(t) if !t.is_empty() => Meaning::TextDelta,
                _ => Meaning::Progress,
            }
        }
        names::INPUT_TRANSCRIPT_DONE if transcription => {
            if event.transcript.is_some_and(|t| !t.is_empty()) {
                Meaning::DoneWithText
            } else {
                Meaning::TurnDone {
                    completed: true,
                    failure: None,
                }
            }
        }
        names::INPUT_TRANSCRIPT_FAILED if transcription => {
            let error = event.error.unwrap_or_default();
            Meaning::TurnDone {
                completed: false,
                failure: Some((
                    error.code.unwrap_or(Cow::Borrowed(super::NULL_CODE)),
                    error
                        .message
                        .unwrap_or(Cow::Borrowed("the input's transcription failed")),
                )),
            }
        }
        names::SESSION_CREATED => Meaning::Milestone(Milestone::Created),
        names::SESSION_UPDATED => Meaning::Milestone(Milestone::Ready),
        names::COMMITTED => Meaning::Milestone(Milestone::Committed),
        names::RESPONSE_CREATED => Meaning::ResponseCreated,
        names::SPEECH_STARTED => Meaning::SpeechStarted {
            audio_ms: event.audio_start_ms,
        },
        names::SPEECH_STOPPED => Meaning::SpeechStopped {
            audio_ms: event.audio_end_ms,
        },
        names::AUDIO_DELTA | names::BETA_AUDIO_DELTA => {
            // vllm-omni puts the audio in `audio`, OpenAI in `delta`.
            let key = if event.delta.is_none() && event.audio.is_some() {
                "audio"
            } else {
                "delta"
            };
            payload = Payload::Json {
                audio_key: Some(key),
            };
            Meaning::AudioDelta
        }
        // An empty delta is no text (it must not start the first-text clock): it shows the
        // server answering, as vLLM's empty deltas do.
        names::TRANSCRIPT_DELTA
        | names::BETA_TRANSCRIPT_DELTA
        | names::TEXT_DELTA
        | names::BETA_TEXT_DELTA => {
            if event.delta.as_deref() == Some("") {
                Meaning::Progress
            } else {
                Meaning::TextDelta
            }
        }
        // The transcript of the input: each delta, and the completed transcript (a server may
        // send only that), when it holds any text.
        names::INPUT_TRANSCRIPT_DELTA | names::INPUT_TRANSCRIPT_DONE => {
            if event
                .delta
                .or(event.transcript)
                .is_some_and(|t| !t.is_empty())
            {
                Meaning::InputText {
                    done: event.kind == names::INPUT_TRANSCRIPT_DONE,
                }
            } else {
                Meaning::Other
            }
        }
        names::RESPONSE_DONE => {
            let response = event.response.unwrap_or_default();
            let status = response.status.as_deref();
            // `failed` carries `status_details.error` (`type`, `code`); its code as it came,
            // a null one as null, as for an `error` event.
            let failure = (status == Some("failed")).then(|| {
                let error = response
                    .status_details
                    .and_then(|d| d.error)
                    .unwrap_or_default();
                (
                    error.code.unwrap_or(Cow::Borrowed(super::NULL_CODE)),
                    error
                        .message
                        .unwrap_or(Cow::Borrowed("response.done with status failed")),
                )
            });
            Meaning::TurnDone {
                completed: status.is_none_or(|s| s == "completed"),
                failure,
            }
        }
        names::ERROR => {
            // The code as it came: a null code stays null (`error.type` is not a code).
            let body = event.error.unwrap_or_default();
            let code = body
                .code
                .or(event.code)
                .unwrap_or(Cow::Borrowed(super::NULL_CODE));
            let (message, answers) = (body.message.unwrap_or_default(), body.event_id);
            // The API's errors leave the session open; a turn they spoil shows as not answered.
            Meaning::Error {
                fatal: false,
                code,
                message,
                answers,
            }
        }
        _ => Meaning::Other,
    };
    // A transcription session's transcripts name their item: OpenAI does not promise their
    // order across items ("use item_id to match these events to the
    // input_audio_buffer.committed events", its transcription guide).
    let by_item = transcription
        && matches!(
            &*event.kind,
            names::COMMITTED
                | names::SPEECH_STOPPED
                | names::INPUT_TRANSCRIPT_DELTA
                | names::INPUT_TRANSCRIPT_SEGMENT
                | names::INPUT_TRANSCRIPT_DONE
                | names::INPUT_TRANSCRIPT_FAILED
        );
    let item = event
        .item_id
        .filter(|_| by_item)
        .map(|id| item_key(id.as_bytes()));
    Ok(Received {
        meaning,
        payload,
        event: None,
        item,
    })
}

/// An `item_id` as a number (FNV-1a), so that turns can be matched to items without keeping
/// their ids.
fn item_key(id: &[u8]) -> u64 {
    id.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The audio deltas (most frames, nearly all the bytes) by their leading `type` alone, their
/// audio not parsed; everything else (text deltas, small, are read for an empty one; an audio
/// delta whose `type` is not first) is parsed in full.
fn delta_by_leading_type(text: &str) -> Option<Received<'_>> {
    let (meaning, audio_key) = match super::leading_type(text)? {
        names::AUDIO_DELTA | names::BETA_AUDIO_DELTA => {
            // As the full parse decides: vllm-omni's `audio` only when there is no `delta`.
            let in_audio =
                !super::has_string_key(text, "delta") && super::has_string_key(text, "audio");
            let key = if in_audio { "audio" } else { "delta" };
            (Meaning::AudioDelta, Some(key))
        }
        _ => return None,
    };
    Some(Received {
        meaning,
        payload: Payload::Json { audio_key },
        event: None,
        item: None,
    })
}

/// The fields of a server event the client reads; audio is skipped without being copied.
#[derive(Debug, Deserialize)]
struct ServerEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    /// Borrowed, not copied (an audio delta's base64 costs the same scan as skipping it); a
    /// value that is not a string reads as none.
    #[serde(default, borrow, deserialize_with = "super::funasr::string_or_none")]
    delta: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "super::funasr::string_or_none")]
    transcript: Option<Cow<'a, str>>,
    /// A transcript segment's text.
    #[serde(default, borrow, deserialize_with = "super::funasr::string_or_none")]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "super::funasr::string_or_none")]
    item_id: Option<Cow<'a, str>>,
    #[serde(default)]
    audio: Option<IgnoredAny>,
    #[serde(default, deserialize_with = "super::native::lenient_number")]
    audio_start_ms: Option<f64>,
    #[serde(default, deserialize_with = "super::native::lenient_number")]
    audio_end_ms: Option<f64>,
    #[serde(default, borrow)]
    response: Option<ResponseBody<'a>>,
    /// An object as OpenAI sends it; a bare message (vLLM's `"error": "…"`, the code beside
    /// it) is read as that message.
    #[serde(default, borrow, deserialize_with = "super::native::lenient_error")]
    error: Option<ErrorBody<'a>>,
    /// The code of an error whose `error` is a bare message.
    #[serde(default, borrow, deserialize_with = "super::native::lenient_str")]
    code: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
struct ResponseBody<'a> {
    #[serde(default, borrow, deserialize_with = "super::native::lenient_str")]
    status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    status_details: Option<StatusDetails<'a>>,
}

/// A failed response's details: `{"type":"failed","error":{"type":…,"code":…}}`.
#[derive(Debug, Default, Deserialize)]
struct StatusDetails<'a> {
    #[serde(default, borrow, deserialize_with = "super::native::lenient_error")]
    error: Option<ErrorBody<'a>>,
}

#[cfg(test)]
mod tests;
