//! The native full-duplex session protocol: sglang-omni's `/v1/realtime`, as its benchmark
//! client and server speak it (docs/protocol-native.md). Text JSON frames only.
//!
//! Set-up: `session.created` → `session.update` → `session.updated`. Streaming: one
//! `input_audio_buffer.append` per packet. Ending: `sglang.input_audio.end` →
//! `sglang.input_audio.drained`, then `session.close` → `session.closed`.

use super::{
    AudioPacket, AudioSpan, ClientProtocol, Ending, EventIds, Meaning, Milestone, Outgoing,
    Received, Step,
};
use crate::frame::push_audio;
use crate::trace::format::{push_hex16_str, Payload};
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;

/// The path the native protocol is served on.
pub const PATH: &str = "/v1/realtime";

pub mod names {
    pub const SESSION_CREATED: &str = "session.created";
    pub const SESSION_UPDATE: &str = "session.update";
    pub const SESSION_UPDATED: &str = "session.updated";
    pub const APPEND: &str = "input_audio_buffer.append";
    pub const ACCEPTED: &str = "sglang.input_audio.accepted";
    pub const AUDIO_DELTA: &str = "response.output_audio.delta";
    pub const TRANSCRIPT_DELTA: &str = "response.output_audio_transcript.delta";
    pub const TEXT_DELTA: &str = "response.output_text.delta";
    pub const TRANSCRIPT_DONE: &str = "response.output_audio_transcript.done";
    pub const TEXT_DONE: &str = "response.output_text.done";
    pub const UNIT_DONE: &str = "sglang.unit.done";
    pub const RESPONSE_CREATED: &str = "response.created";
    pub const AUDIO_DONE: &str = "response.output_audio.done";
    pub const RESPONSE_DONE: &str = "response.done";
    pub const INPUT_END: &str = "sglang.input_audio.end";
    pub const INPUT_ENDED: &str = "sglang.input_audio.ended";
    pub const INPUT_DRAINED: &str = "sglang.input_audio.drained";
    pub const SESSION_CLOSE: &str = "session.close";
    pub const SESSION_CLOSED: &str = "session.closed";
    pub const ERROR: &str = "error";
    /// A video frame for a native unit (MiniCPM-o, whose grant lists `image` input), and its
    /// answer naming the unit it joins.
    pub const IMAGE_APPEND: &str = "sglang.input_image.append";
    pub const IMAGE_ACCEPTED: &str = "sglang.input_image.accepted";
    /// Drops the input not yet cut into a unit.
    pub const CLEAR: &str = "input_audio_buffer.clear";
    pub const CLEARED: &str = "input_audio_buffer.cleared";
    /// Manual turn commands: part of the protocol, never granted to a native session.
    pub const COMMIT: &str = "input_audio_buffer.commit";
    pub const RESPONSE_CREATE: &str = "response.create";
}

/// The native protocol's default input audio: 16 kHz mono PCM16 little-endian (VoiceChat,
/// MiniCPM-o; PersonaPlex takes 24 kHz: `--input-sample-rate`, [`crate::profile::Profile`]).
pub const INPUT_SAMPLE_RATE: u32 = 16_000;
pub const BYTES_PER_SAMPLE: usize = 2;

/// Bytes of PCM16 input audio at `rate` Hz in a packet of `packet_ms`.
pub fn input_packet_bytes(rate: u32, packet_ms: u32) -> usize {
    (rate as usize * packet_ms as usize / 1000) * BYTES_PER_SAMPLE
}

/// The native protocol's client side.
#[derive(Debug, Clone)]
pub struct Native {
    /// The `session.update` that asks for the output modalities, encoded once per session.
    modalities: Vec<String>,
    /// A grant without the audio asked for is streamed on ([`ClientSettings`]'s
    /// `audio_grant_optional`).
    audio_grant_optional: bool,
    /// The PCM16 rate the client sends (`--input-sample-rate`): the grant must take it.
    input_rate: u32,
}

impl Default for Native {
    fn default() -> Native {
        Native::new(&["audio".to_string()], false, INPUT_SAMPLE_RATE)
    }
}

impl Native {
    /// A client that asks for `modalities` (`audio`, `text`) in its `session.update` and sends
    /// PCM16 at `input_rate`; a grant without the audio asked for fails the set-up unless
    /// `audio_grant_optional`.
    pub fn new(modalities: &[String], audio_grant_optional: bool, input_rate: u32) -> Native {
        Native {
            modalities: modalities.to_vec(),
            audio_grant_optional,
            input_rate,
        }
    }
}

impl Native {
    /// Audio asked for and not granted fails the set-up: the run would stream and measure no
    /// audio at all. sglang-omni grants only the first output modality it supports, in the
    /// order asked (`negotiation.py`'s `[:1]`), so `text,audio` gets text alone. A grant that
    /// names no list, or an empty one (an older server), or leaves out only text is taken as
    /// it is; names are compared as the server might write them (`"Audio"`).
    fn check_audio_granted(&self, session: Option<&serde_json::Value>) -> Result<(), String> {
        let is_audio = |m: &serde_json::Value| {
            m.as_str()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("audio"))
        };
        if self.audio_grant_optional || !self.modalities.iter().any(|m| m == "audio") {
            return Ok(());
        }
        // Each place a grant may be named, when it names a list that is not empty.
        let lists: Vec<&Vec<serde_json::Value>> =
            ["/output_modalities", "/sglang/granted/output_modalities"]
                .iter()
                .filter_map(|at| session?.pointer(at)?.as_array())
                .filter(|list| !list.is_empty())
                .collect();
        let Some(granted) = lists.first() else {
            return Ok(());
        };
        if lists.iter().any(|list| list.iter().any(is_audio)) {
            return Ok(());
        }
        let names: Vec<&str> = granted.iter().filter_map(|m| m.as_str()).collect();
        Err(format!(
            "the server granted output_modalities {names:?} of the {:?} asked for (session.output_modalities in session.updated), so the run would measure no audio: sglang-omni grants only the first modality it supports, in the order asked — put audio first (--modalities audio,text), or ask for --modalities text to measure text alone",
            self.modalities
        ))
    }
}

/// Which control command an id stands for (see [`EventIds::control`]).
const UPDATE_ID: u32 = 0;
const END_ID: u32 = 1;
const CLOSE_ID: u32 = 2;

impl ClientProtocol for Native {
    fn set_up(&self, ids: EventIds) -> Vec<Step> {
        vec![
            Step {
                send: None,
                until: Some(Milestone::Created),
                awaiting: names::SESSION_CREATED,
                turn: None,
            },
            Step {
                send: Some(Outgoing::Text(session_update_for(
                    ids.control(UPDATE_ID),
                    &self.modalities,
                ))),
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
        t_start_ms: u64,
        audio: AudioPacket<'_>,
    ) -> Option<AudioSpan> {
        Some(push_append_frame(
            frame.text_buffer(),
            ids.id(seq),
            seq,
            t_start_ms,
            audio.b64,
        ))
    }

    fn finish(&self, ids: EventIds, ending: Ending) -> Vec<Step> {
        let mut steps = Vec::with_capacity(2);
        if ending.streamed {
            steps.push(Step {
                send: Some(Outgoing::Text(input_end(ids.control(END_ID)))),
                until: Some(Milestone::Drained),
                awaiting: names::INPUT_DRAINED,
                turn: None,
            });
        }
        steps.push(Step {
            send: Some(Outgoing::Text(session_close(ids.control(CLOSE_ID)))),
            until: Some(Milestone::Closed),
            awaiting: names::SESSION_CLOSED,
            turn: None,
        });
        steps
    }

    /// sglang-omni's client, after any error that is not fatal, sends `session.close` and
    /// waits for `session.closed` (`benchmarks/duplex/client.py`), so that the server ends the
    /// session as closed by the client, not as a disconnect.
    fn goodbye(&self, ids: EventIds) -> Option<(String, Milestone)> {
        Some((session_close(ids.control(CLOSE_ID)), Milestone::Closed))
    }

    /// sglang-omni's runtime takes appends in `seq` order with contiguous media time: a refused
    /// append (`buffer_overflow`, `invalid_state`, …) does not advance either, so every later
    /// one is refused as out of order. Its own client stops streaming at any error.
    fn refused_packet_ends_input(&self, ids: EventIds, answers: &str) -> Option<u32> {
        let id = u64::from_str_radix(answers, 16)
            .ok()
            .filter(|_| answers.len() == 16)?;
        ids.packet_of(id)
    }

    fn classify<'a>(&self, text: &'a str) -> Result<Received<'a>, String> {
        // The deltas (most frames, nearly all the bytes) mean their type alone: their audio is
        // not parsed at all. Everything else is parsed in full.
        let delta = match super::leading_type(text) {
            Some(names::AUDIO_DELTA) => Some((Meaning::AudioDelta, Some("delta"))),
            Some(names::TRANSCRIPT_DELTA | names::TEXT_DELTA) => Some((Meaning::TextDelta, None)),
            _ => None,
        };
        if let Some((meaning, audio_key)) = delta {
            return Ok(Received {
                meaning,
                payload: Payload::Json { audio_key },
                event: None,
                item: None,
            });
        }
        let event: ServerEvent<'a> = super::json_object(text)
            .map_err(|err| format!("server frame is not a JSON event ({err})"))?;
        let mut payload = Payload::Json { audio_key: None };
        let meaning = match &*event.kind {
            names::SESSION_CREATED => Meaning::Milestone(Milestone::Created),
            names::SESSION_UPDATED => {
                // sglang-omni's session as granted names the input format it takes (the
                // model's: PersonaPlex 24 kHz, the others 16 kHz); audio at another rate would
                // have its second packet refused as not sample-contiguous, and every one after.
                let rate = event
                    .session
                    .as_ref()
                    .and_then(|s| s.pointer("/audio/input/format/rate"))
                    .and_then(|r| r.as_f64().or_else(|| r.as_str()?.trim().parse().ok()));
                if let Some(rate) = rate.filter(|r| *r != f64::from(self.input_rate)) {
                    let why = format!(
                        "the server takes PCM16 at {rate} Hz (session.audio.input.format.rate in session.updated) and this run sends {} Hz: give --input-sample-rate {rate} (with --audio, a WAV at {rate} Hz: nothing is resampled; sglang-omni's PersonaPlex takes 24000 Hz, VoiceChat and MiniCPM-o 16000 Hz)",
                        self.input_rate
                    );
                    return Ok(unusable(why));
                }
                if let Err(why) = self.check_audio_granted(event.session.as_ref()) {
                    return Ok(unusable(why));
                }
                let number = |at: &str| {
                    let v = event.session.as_ref()?.pointer(at)?;
                    v.as_f64().or_else(|| v.as_str()?.trim().parse().ok())
                };
                Meaning::Granted {
                    native_unit_ms: number("/sglang/granted/native_unit_ms"),
                    output_rate: number("/sglang/granted/output_audio_format/rate")
                        .or_else(|| number("/audio/output/format/rate")),
                }
            }
            names::RESPONSE_CREATED => Meaning::ResponseCreated,
            names::RESPONSE_DONE => Meaning::ResponseDone {
                completed: event.response.as_deref() == Some("completed"),
            },
            names::INPUT_DRAINED => Meaning::Milestone(Milestone::Drained),
            names::SESSION_CLOSED => Meaning::Milestone(Milestone::Closed),
            // An `accepted` is worth only its `seq`: one the client cannot read (absent, not a
            // number, negative, fractional, beyond the u32 the client numbers its packets with)
            // answers no packet, and is counted as the protocol error it is (as one whose seq
            // JSON cannot hold, `1e400`, always was), not dropped without a word.
            names::ACCEPTED => match event.seq.or(event.sglang.as_ref().and_then(|s| s.seq)) {
                Some(seq) if (0.0..=f64::from(u32::MAX)).contains(&seq) && seq.fract() == 0.0 => {
                    Meaning::Accepted { seq: seq as u64 }
                }
                _ => {
                    return Err(
                        "sglang.input_audio.accepted without a seq the client sent (a whole number from 0)"
                            .to_string(),
                    )
                }
            },
            names::AUDIO_DELTA => {
                payload = Payload::Json {
                    audio_key: Some("delta"),
                };
                Meaning::AudioDelta
            }
            names::TRANSCRIPT_DELTA | names::TEXT_DELTA => Meaning::TextDelta,
            // An empty unit (the one a server cuts at the end of unit-aligned input) covers no
            // input, so no packet's send is what it lags: it has no input end.
            names::UNIT_DONE => {
                let input_end_ms = match event.sglang.as_ref().and_then(|s| s.media_time) {
                    Some(MediaTime {
                        t_start_ms: Some(start_ms),
                        duration_ms: Some(duration_ms),
                    }) if duration_ms > 0.0 => Some(start_ms + duration_ms),
                    _ => None,
                };
                // sglang-omni's serving metrics read the unit by its `unit_id`, `unit_<n>`.
                let index = event
                    .unit_id
                    .as_deref()
                    .and_then(|id| id.strip_prefix("unit_"))
                    .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse().ok());
                match (index, input_end_ms) {
                    (None, None) => Meaning::Other,
                    _ => Meaning::UnitDone {
                        index,
                        input_end_ms,
                    },
                }
            }
            names::ERROR => {
                let fatal = event.sglang.as_ref().and_then(|s| s.fatal).unwrap_or(false);
                let (code, message, answers) = match event.error {
                    Some(e) => (
                        e.code
                            .or(event.code)
                            .unwrap_or(Cow::Borrowed(super::NULL_CODE)),
                        e.message.unwrap_or_default(),
                        e.event_id,
                    ),
                    None => (
                        event.code.unwrap_or(Cow::Borrowed(super::NULL_CODE)),
                        Cow::Borrowed(""),
                        None,
                    ),
                };
                Meaning::Error {
                    fatal,
                    code,
                    message,
                    answers,
                }
            }
            _ => Meaning::Other,
        };
        Ok(Received {
            meaning,
            payload,
            event: None,
            item: None,
        })
    }
}

/// Terms the client cannot use, traced as the event they came in.
fn unusable(why: String) -> Received<'static> {
    Received {
        meaning: Meaning::Unusable(why),
        payload: Payload::Json { audio_key: None },
        event: None,
        item: None,
    }
}

/// The `session.update` a client sends after `session.created`, asking for audio out.
pub fn session_update(event_id: u64) -> String {
    session_update_for(event_id, &["audio".to_string()])
}

/// The `session.update` asking for `modalities` as output.
pub fn session_update_for(event_id: u64, modalities: &[String]) -> String {
    let modalities: Vec<String> = modalities
        .iter()
        .map(|m| crate::trace::format::json_string(m))
        .collect();
    format!(
        r#"{{"type":"{}","event_id":"{event_id:016x}","session":{{"output_modalities":[{}]}}}}"#,
        names::SESSION_UPDATE,
        modalities.join(",")
    )
}

/// An `input_audio_buffer.append` frame, in a `String` of its own.
pub fn append_frame(event_id: u64, seq: u32, t_start_ms: u64, audio_b64: &str) -> String {
    let mut out = String::new();
    push_append_frame(&mut out, event_id, seq, t_start_ms, audio_b64);
    out
}

/// Writes an `input_audio_buffer.append` frame into `out` (the session's frame buffer, reused
/// from packet to packet). `audio_b64` is the already-encoded packet, so a frame costs no JSON
/// serialisation; `out` grows at most once, to the frame's size.
pub fn push_append_frame(
    out: &mut String,
    event_id: u64,
    seq: u32,
    t_start_ms: u64,
    audio_b64: &str,
) -> AudioSpan {
    const HEAD: &str = concat!(
        r#"{"type":""#,
        "input_audio_buffer.append",
        r#"","event_id":""#
    );
    const AUDIO: &str = r#"","audio":""#;
    const SEQ: &str = r#"","sglang":{"seq":"#;
    const T_START: &str = r#","t_start_ms":"#;
    const TAIL: &str = "}}";
    let len = HEAD.len()
        + 16
        + AUDIO.len()
        + audio_b64.len()
        + SEQ.len()
        + decimal_digits(u64::from(seq))
        + T_START.len()
        + decimal_digits(t_start_ms)
        + TAIL.len();
    let start = out.len();
    out.reserve(len);
    out.push_str(HEAD);
    push_hex16_str(out, event_id);
    out.push_str(AUDIO);
    let audio = push_audio(out, audio_b64);
    out.push_str(SEQ);
    out.push_str(itoa::Buffer::new().format(seq));
    out.push_str(T_START);
    out.push_str(itoa::Buffer::new().format(t_start_ms));
    out.push_str(TAIL);
    debug_assert_eq!(out.len() - start, len);
    audio
}

fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The `sglang.input_audio.end` a client sends after its last packet.
pub fn input_end(event_id: u64) -> String {
    format!(
        r#"{{"type":"{}","event_id":"{event_id:016x}"}}"#,
        names::INPUT_END
    )
}

/// The `session.close` a client sends after `drained`.
pub fn session_close(event_id: u64) -> String {
    format!(
        r#"{{"type":"{}","event_id":"{event_id:016x}"}}"#,
        names::SESSION_CLOSE
    )
}

/// The fields of a server event the client reads. Everything else, audio payloads included, is
/// skipped without being copied; numbers may be integers or floats.
#[derive(Debug, Deserialize)]
struct ServerEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    /// `sglang.input_audio.accepted`: the sequence number accepted.
    #[serde(default, deserialize_with = "lenient_number")]
    seq: Option<f64>,
    #[serde(default)]
    sglang: Option<ServerSglang>,
    /// `sglang.unit.done`: `unit_<n>`.
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    unit_id: Option<Cow<'a, str>>,
    /// An object as sglang-omni and OpenAI send it; a bare message (vLLM's and others'
    /// `"error": "…"`, with the code beside it) is read as that message.
    #[serde(default, borrow, deserialize_with = "lenient_error")]
    error: Option<ErrorBody<'a>>,
    /// The code of an error whose `error` is a bare message.
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    code: Option<Cow<'a, str>>,
    /// `session.created` / `session.updated`: the session as granted (read for its input
    /// format; any JSON is taken).
    #[serde(default)]
    session: Option<serde_json::Value>,
    /// `response.done`: the response's `status` (any JSON is taken: one that is no object, or
    /// has no string status, reads as none). Read without building the response.
    #[serde(default, borrow, deserialize_with = "status_of")]
    response: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
struct ServerSglang {
    #[serde(default, deserialize_with = "lenient_number")]
    seq: Option<f64>,
    /// `sglang.unit.done`: the input span the unit covers.
    #[serde(default)]
    media_time: Option<MediaTime>,
    /// `error`: whether the server ends the session (absent, or not a bool: it does not).
    #[serde(default, deserialize_with = "lenient_bool")]
    fatal: Option<bool>,
}

/// Either field unreadable or absent: the unit has no lag to time, and the event is not
/// refused for it.
#[derive(Debug, Clone, Copy, Deserialize)]
struct MediaTime {
    #[serde(default, deserialize_with = "lenient_number")]
    t_start_ms: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    duration_ms: Option<f64>,
}

/// An error's body, read leniently: an error is counted by whatever the server put in it (a
/// numeric code is its digits). The native, OpenAI and vLLM clients read errors so.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ErrorBody<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    pub code: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    pub message: Option<Cow<'a, str>>,
    /// The client event the error answers.
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    pub event_id: Option<Cow<'a, str>>,
}

/// A JSON value as a lenient field reads it: a scalar, or `Other` for anything else (`null`,
/// an array, an object — read past, not kept).
pub(super) enum Scalar<'de> {
    Int(i128),
    Float(f64),
    Bool(bool),
    Str(Cow<'de, str>),
    Other,
}

/// Reads any JSON value as a [`Scalar`]. A visitor, not an untagged enum: serde buffers an
/// untagged value before it tries the variants, which made every `accepted` cost an allocation
/// (issue 17); a borrowed string is not copied either.
pub(super) fn scalar<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Scalar<'de>, D::Error> {
    struct Any;

    impl<'de> serde::de::Visitor<'de> for Any {
        type Value = Scalar<'de>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
            Ok(Scalar::Float(n))
        }
        fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
            Ok(Scalar::Int(i128::from(n)))
        }
        fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
            Ok(Scalar::Int(i128::from(n)))
        }
        fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
            Ok(Scalar::Bool(b))
        }
        fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
            Ok(Scalar::Str(Cow::Borrowed(s)))
        }
        fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
            Ok(Scalar::Str(Cow::Owned(s.to_string())))
        }
        fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
            Ok(Scalar::Str(Cow::Owned(s)))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Scalar::Other)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(Scalar::Other)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(Any)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(Scalar::Other)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Ok(Scalar::Other)
        }
    }

    deserializer.deserialize_any(Any)
}

/// A number where one is expected, also when a server sends it as a string (`"seq":"3"`);
/// `None` for anything else (`null`, text): a field the client cannot read is not worth
/// failing the whole event for.
pub(crate) fn lenient_number<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<f64>, D::Error> {
    Ok(match scalar(deserializer)? {
        Scalar::Int(n) => Some(n as f64),
        Scalar::Float(n) => Some(n),
        Scalar::Str(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
        _ => None,
    })
}

/// An error event's `error`: the object sglang-omni and OpenAI send, or a bare message as a
/// string (vLLM's, with the code beside it); anything else reads as no body (the event is still
/// an error, with a null code).
pub(super) fn lenient_error<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ErrorBody<'de>>, D::Error> {
    object_or(deserializer, |message| Some(ErrorBody::message(message)))
}

/// A `response.done`'s response, read for its `status` alone (the rest read past, unbuilt).
#[derive(Deserialize)]
struct ResponseStatus<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_str")]
    status: Option<Cow<'a, str>>,
}

/// The `status` string of a `response.done`'s response; `None` for a response that is no
/// object or has no such string.
fn status_of<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'de, str>>, D::Error> {
    let response: Option<ResponseStatus<'de>> = object_or(deserializer, |_| None)?;
    Ok(response.and_then(|r| r.status))
}

/// An object read as `T`, or, for a string, what `text` makes of it; anything else (a number,
/// an array, null) reads as `None`, never as an error that would cost the whole event.
fn object_or<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
    text: fn(Cow<'de, str>) -> Option<T>,
) -> Result<Option<T>, D::Error> {
    struct Lenient<'de, T> {
        text: fn(Cow<'de, str>) -> Option<T>,
    }

    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Lenient<'de, T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object or a string")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
        }
        fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
            Ok((self.text)(Cow::Borrowed(text)))
        }
        fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
            Ok((self.text)(Cow::Owned(text.to_string())))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }

    deserializer.deserialize_any(Lenient { text })
}

impl<'a> ErrorBody<'a> {
    fn message(message: Cow<'a, str>) -> ErrorBody<'a> {
        ErrorBody {
            code: None,
            message: Some(message),
            event_id: None,
        }
    }
}

/// A bool where one is expected (`error`'s `sglang.fatal`), `None` for anything else.
fn lenient_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    Ok(match scalar(deserializer)? {
        Scalar::Bool(b) => Some(b),
        _ => None,
    })
}

/// A string where one is expected (an error's code, message, event id): a number is taken as
/// its digits (`"code": 500`), anything else is `None`.
pub(crate) fn lenient_str<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'de, str>>, D::Error> {
    Ok(match scalar(deserializer)? {
        Scalar::Str(s) => Some(s),
        Scalar::Int(n) => Some(Cow::Owned(n.to_string())),
        Scalar::Float(n) => Some(Cow::Owned(n.to_string())),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(text: &str) -> Meaning<'_> {
        Native::default().classify(text).unwrap().meaning
    }

    #[test]
    fn deltas_read_by_their_type_alone_mean_what_a_full_parse_says() {
        for (text, meaning, audio_key) in [
            (
                r#"{"type":"response.output_audio.delta","event_id":"e","delta":"AAAA"}"#,
                Meaning::AudioDelta,
                Some("delta"),
            ),
            (
                r#"{"type": "response.output_audio_transcript.delta", "delta": "hi"}"#,
                Meaning::TextDelta,
                None,
            ),
            (
                r#"{"event_id":"e","type":"response.output_text.delta","delta":"hi"}"#,
                Meaning::TextDelta,
                None,
            ),
        ] {
            let fast = Native::default().classify(text).unwrap();
            assert_eq!(fast.meaning, meaning, "{text}");
            assert_eq!(fast.payload, Payload::Json { audio_key }, "{text}");
        }
        // A delta cut off is not taken by its type: the full parse says what is wrong.
        let cut = r#"{"type":"response.output_audio.delta","delta":"AA"#;
        assert!(Native::default().classify(cut).is_err());
    }

    #[test]
    fn append_frame_is_valid_json_with_the_protocol_fields() {
        let ids = EventIds {
            shard: 0,
            worker: 1,
            session: 2,
        };
        let out = append_frame(ids.id(3), 3, 240, "AAAA");
        assert_eq!(out.capacity(), out.len(), "grown once, to its size");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["type"], names::APPEND);
        assert_eq!(v["event_id"], "0001000200000003");
        assert_eq!(v["audio"], "AAAA");
        assert_eq!(v["sglang"]["seq"], 3);
        assert_eq!(v["sglang"]["t_start_ms"], 240);
        // Built into a session's frame, a packet replaces the one before.
        let mut frame = Outgoing::Text(out);
        let audio = AudioPacket {
            pcm: &[],
            b64: "BBBB",
        };
        Native::default().packet(&mut frame, ids, 4, 320, audio);
        assert_eq!(
            frame.text(),
            Some(append_frame(ids.id(4), 4, 320, "BBBB").as_str())
        );
    }

    #[test]
    fn unit_done_gives_its_index_and_the_end_of_the_input_it_answers() {
        let text = r#"{"type":"sglang.unit.done","unit_id":"unit_4","sglang":{"unit_id":"unit_4","chunk_seq":4,"media_time":{"t_start_ms":320,"duration_ms":80}}}"#;
        assert_eq!(
            classify(text),
            Meaning::UnitDone {
                index: Some(4),
                input_end_ms: Some(400.0)
            }
        );
        // sglang-omni's serving metrics read `unit_<n>` whole, as a regex's full match.
        for id in ["unit_", "unit_4x", "u_4", "unit_-4", "4"] {
            let text = format!(r#"{{"type":"sglang.unit.done","unit_id":"{id}"}}"#);
            assert_eq!(classify(&text), Meaning::Other, "{id}");
        }
    }

    #[test]
    fn the_empty_unit_at_the_end_of_aligned_input_has_no_input_end() {
        let text = r#"{"type":"sglang.unit.done","unit_id":"unit_5","sglang":{"unit_id":"unit_5","chunk_seq":0,"media_time":{"t_start_ms":400,"duration_ms":0}}}"#;
        assert_eq!(
            classify(text),
            Meaning::UnitDone {
                index: Some(5),
                input_end_ms: None
            }
        );
        let without_id = r#"{"type":"sglang.unit.done","sglang":{"media_time":{"t_start_ms":400,"duration_ms":0}}}"#;
        assert_eq!(classify(without_id), Meaning::Other);
    }

    #[test]
    fn the_grant_gives_the_native_unit_and_the_output_rate() {
        let granted = r#"{"type":"session.updated","session":{"audio":{"output":{"format":{"rate":22050}}},"sglang":{"granted":{"native_unit_ms":80,"output_audio_format":{"type":"audio/pcm","rate":"24000"}}}}}"#;
        assert_eq!(
            classify(granted),
            Meaning::Granted {
                native_unit_ms: Some(80.0),
                output_rate: Some(24_000.0)
            },
            "the grant's own output format first, a number in a string read"
        );
        let session_only = r#"{"type":"session.updated","session":{"audio":{"output":{"format":{"rate":22050}}}}}"#;
        assert_eq!(
            classify(session_only),
            Meaning::Granted {
                native_unit_ms: None,
                output_rate: Some(22_050.0)
            }
        );
        // A grant is the set-up's Ready to whoever waits for milestones (the floor client).
        assert_eq!(classify(granted).milestone(), Some(Milestone::Ready));
        let created = r#"{"type":"response.created","event_id":"e","response":{"id":"r"}}"#;
        assert_eq!(classify(created), Meaning::ResponseCreated);
        // A response.done's status, as sglang-omni's serving metrics read it: anything but
        // `completed` (or none) is not completed.
        for (done, completed) in [
            (
                r#"{"type":"response.done","response":{"id":"r","status":"completed"}}"#,
                true,
            ),
            (
                r#"{"type":"response.done","response":{"status":"cancelled"}}"#,
                false,
            ),
            (r#"{"type":"response.done","response":{"id":"r"}}"#, false),
            (r#"{"type":"response.done","response":"odd"}"#, false),
            (
                r#"{"type":"response.done","response":{"output":[{"status":"completed"}],"status":"cancelled"}}"#,
                false,
            ),
            (
                r#"{"type":"response.done","response":{"st\u0061tus":"completed"}}"#,
                true,
            ),
            (r#"{"type":"response.done"}"#, false),
        ] {
            assert_eq!(
                classify(done),
                Meaning::ResponseDone { completed },
                "{done}"
            );
        }
    }

    #[test]
    fn accepted_seq_may_be_a_float_or_inside_sglang() {
        let top = r#"{"type":"sglang.input_audio.accepted","seq":3.0,"accepted_end_ms":320.0}"#;
        assert_eq!(classify(top), Meaning::Accepted { seq: 3 });
        let inner = r#"{"type":"sglang.input_audio.accepted","sglang":{"seq":7}}"#;
        assert_eq!(classify(inner), Meaning::Accepted { seq: 7 });
        let last = r#"{"type":"sglang.input_audio.accepted","seq":4294967295}"#;
        assert_eq!(classify(last), Meaning::Accepted { seq: 4294967295 });
        // A seq no packet has is a protocol error, whatever makes it one: as `1e400` (which JSON
        // numbers cannot hold) always was, not an event dropped without a word.
        let refused = |text: &str| {
            let why = Native::default().classify(text).map(|r| r.meaning);
            assert!(
                why.as_ref().is_err_and(|w| w.contains("without a seq")),
                "{text}: {why:?}"
            );
        };
        for seq in [
            r#""x""#,
            "null",
            "true",
            "[1,[2]]",
            r#"{"n":1,"m":[{}]}"#,
            "-1",
            "2.5",
            "4294967296",
            "18446744073709551615",
        ] {
            refused(&format!(
                r#"{{"type":"sglang.input_audio.accepted","seq":{seq},"client_event_id":"e"}}"#
            ));
        }
        refused(r#"{"type":"sglang.input_audio.accepted","accepted_end_ms":80}"#);
        refused(
            r#"{"type":"sglang.input_audio.accepted","sglang":{"seq":{"x":[1]},"fatal":false}}"#,
        );
        let out_of_range = r#"{"type":"sglang.input_audio.accepted","seq":1e400}"#;
        assert!(Native::default().classify(out_of_range).is_err());
    }

    #[test]
    fn audio_deltas_say_where_their_audio_is_for_the_trace() {
        let r = Native::default()
            .classify(r#"{"type":"response.output_audio.delta","delta":"AAAA","extra":1}"#)
            .unwrap();
        assert_eq!(r.meaning, Meaning::AudioDelta);
        assert_eq!(
            r.payload,
            Payload::Json {
                audio_key: Some("delta")
            }
        );
    }

    #[test]
    fn odd_fields_of_an_error_or_a_unit_are_read_leniently_not_refused() {
        // Be liberal in what you accept: a field of an odd type loses that field, not the event.
        let text = r#"{"type":"error","sglang":{"fatal":"yes"},"error":{"code":500,"message":["x"],"event_id":7}}"#;
        assert_eq!(
            classify(text),
            Meaning::Error {
                fatal: false,
                code: "500".into(),
                message: "".into(),
                answers: Some("7".into())
            }
        );
        let no_fatal = r#"{"type":"error","error":{"code":"x","message":"y"}}"#;
        assert!(matches!(
            classify(no_fatal),
            Meaning::Error { fatal: false, .. }
        ));
        for media in [
            r#"{"t_start_ms":320}"#,
            r#"{"t_start_ms":"soon","duration_ms":80}"#,
            "null",
        ] {
            let text = format!(
                r#"{{"type":"sglang.unit.done","sglang":{{"unit_id":"unit_4","media_time":{media}}}}}"#
            );
            assert_eq!(classify(&text), Meaning::Other, "{text}");
        }
        // A number sent as a string is still that number: its latency sample is kept.
        let text = r#"{"type":"sglang.unit.done","sglang":{"media_time":{"t_start_ms":"320","duration_ms":80}}}"#;
        assert_eq!(
            classify(text),
            Meaning::UnitDone {
                index: None,
                input_end_ms: Some(400.0)
            }
        );
        let accepted = r#"{"type":"sglang.input_audio.accepted","seq":"3"}"#;
        assert_eq!(classify(accepted), Meaning::Accepted { seq: 3 });
    }

    /// Why the client cannot use the terms `text` grants (a set-up end, no protocol error).
    fn unusable_of(native: &Native, text: &str) -> String {
        match native.classify(text).map(|r| r.meaning) {
            Ok(Meaning::Unusable(why)) => why,
            other => panic!("not unusable terms: {other:?}"),
        }
    }

    /// A server that takes another input rate (PersonaPlex's 24 kHz) says so in its session:
    /// the set-up fails naming it, where the session would otherwise have its second packet
    /// refused as not sample-contiguous, and every packet after.
    #[test]
    fn a_granted_input_rate_other_than_the_clients_fails_the_set_up_naming_it() {
        let at = |rate: &str| {
            format!(
                r#"{{"type":"session.updated","event_id":"e","session":{{"audio":{{"input":{{"format":{{"type":"audio/pcm","rate":{rate}}}}}}}}}}}"#
            )
        };
        let native = Native::default();
        assert_eq!(
            native.classify(&at("16000")).unwrap().meaning,
            Meaning::Granted {
                native_unit_ms: None,
                output_rate: None
            }
        );
        let err = unusable_of(&native, &at("24000"));
        assert!(err.contains("the server takes PCM16 at 24000 Hz"), "{err}");
        assert!(err.contains("give --input-sample-rate 24000"), "{err}");
        // A client sending 24 kHz (PersonaPlex) takes that grant and refuses a 16 kHz one.
        let at_24k = Native::new(&["audio".to_string()], false, 24_000);
        assert!(at_24k.classify(&at("24000")).is_ok());
        let err = unusable_of(&at_24k, &at("16000"));
        assert!(err.contains("this run sends 24000 Hz"), "{err}");
        // No rate said, or one the client cannot read: nothing to go by.
        for session in [
            r#""session":{}"#,
            r#""session":"odd""#,
            r#""session":{"audio":{"input":{"format":{"rate":"fast"}}}}"#,
        ] {
            let text = format!(r#"{{"type":"session.updated",{session}}}"#);
            assert_eq!(
                native.classify(&text).unwrap().meaning,
                Meaning::Granted {
                    native_unit_ms: None,
                    output_rate: None
                },
                "{text}"
            );
        }
    }

    #[test]
    fn an_error_whose_body_is_a_bare_message_is_read_with_the_code_beside_it() {
        // vLLM's (and other servers') shape: the native client against such a server named a
        // serde type instead of the server's message.
        let text = r#"{"type":"error","error":"Missing required field: model","code":"invalid_request_error"}"#;
        assert_eq!(
            classify(text),
            Meaning::Error {
                fatal: false,
                code: "invalid_request_error".into(),
                message: "Missing required field: model".into(),
                answers: None
            }
        );
        for odd in ["null", "42", "[1,2]", "true"] {
            let text = format!(r#"{{"type":"error","error":{odd}}}"#);
            assert!(
                matches!(classify(&text), Meaning::Error { code, .. } if code == super::super::NULL_CODE),
                "{text}"
            );
        }
    }

    #[test]
    fn error_reads_fatal_code_and_message() {
        let text = r#"{"type":"error","sglang":{"fatal":true},"error":{"type":"x","code":"too_fast","message":"slow down"}}"#;
        assert_eq!(
            classify(text),
            Meaning::Error {
                fatal: true,
                code: "too_fast".into(),
                message: "slow down".into(),
                answers: None
            }
        );
    }

    #[test]
    fn a_frame_without_a_type_is_refused_with_the_reason() {
        let err = Native::default().classify(r#"{"hello":1}"#).unwrap_err();
        assert!(err.contains("missing field `type`"), "{err}");
    }

    #[test]
    fn set_up_waits_for_created_then_sends_the_update_and_waits_for_updated() {
        let ids = EventIds {
            shard: 0,
            worker: 0,
            session: 1,
        };
        let steps = Native::default().set_up(ids);
        assert_eq!(steps.len(), 2);
        assert_eq!(
            (steps[0].send.as_ref(), steps[0].until),
            (None, Some(Milestone::Created))
        );
        let Some(Outgoing::Text(update)) = &steps[1].send else {
            panic!("the update is a text frame")
        };
        let v: serde_json::Value = serde_json::from_str(update).unwrap();
        assert_eq!(v["type"], names::SESSION_UPDATE);
        assert_eq!(steps[1].until, Some(Milestone::Ready));
        let ends: Vec<_> = Native::default()
            .finish(
                ids,
                Ending {
                    streamed: true,
                    ..Ending::default()
                },
            )
            .iter()
            .map(|s| s.until)
            .collect();
        assert_eq!(ends, [Some(Milestone::Drained), Some(Milestone::Closed)]);
        let ends: Vec<_> = Native::default()
            .finish(ids, Ending::default())
            .iter()
            .map(|s| s.until)
            .collect();
        assert_eq!(
            ends,
            [Some(Milestone::Closed)],
            "no input, nothing to drain"
        );
    }

    /// sglang-omni's `negotiation.py` grants the first supported modality in the order asked
    /// (`[:1]`), with a `rejections` entry for the rest: `text,audio` gets text alone, and the
    /// run would measure no audio. Audio granted, or no grant named, goes on.
    #[test]
    fn audio_asked_for_and_not_granted_fails_the_set_up_saying_to_put_it_first() {
        let updated = |granted: &str| {
            format!(
                r#"{{"type":"session.updated","event_id":"e","session":{{"output_modalities":{granted},"sglang":{{"granted":{{"output_modalities":{granted},"rejections":[{{"field":"output_modalities","reason":"deployment modalities"}}]}}}}}}}}"#
            )
        };
        let ready = Meaning::Granted {
            native_unit_ms: None,
            output_rate: None,
        };
        let text_first = Native::new(
            &["text".to_string(), "audio".to_string()],
            false,
            INPUT_SAMPLE_RATE,
        );
        let err = unusable_of(&text_first, &updated(r#"["text"]"#));
        assert!(
            err.contains(r#"granted output_modalities ["text"]"#),
            "{err}"
        );
        assert!(err.contains("--modalities audio,text"), "{err}");
        let audio_first = Native::new(
            &["audio".to_string(), "text".to_string()],
            false,
            INPUT_SAMPLE_RATE,
        );
        assert_eq!(
            audio_first
                .classify(&updated(r#"["audio"]"#))
                .unwrap()
                .meaning,
            ready
        );
        assert_eq!(
            audio_first
                .classify(&updated(r#"["audio","text"]"#))
                .unwrap()
                .meaning,
            ready
        );
        // Text alone asked for: text alone granted is what was wanted.
        let text = Native::new(&["text".to_string()], false, INPUT_SAMPLE_RATE);
        assert_eq!(
            text.classify(&updated(r#"["text"]"#)).unwrap().meaning,
            ready
        );
        // Only sglang.granted names it.
        let nested = r#"{"type":"session.updated","session":{"sglang":{"granted":{"output_modalities":["text"]}}}}"#;
        assert!(unusable_of(&Native::default(), nested).contains("granted output_modalities"));
        // Named as a server might write it; or named in one place only.
        for session in [
            r#"{"output_modalities":[" Audio "]}"#,
            r#"{"output_modalities":["text"],"sglang":{"granted":{"output_modalities":["AUDIO"]}}}"#,
        ] {
            let text = format!(r#"{{"type":"session.updated","session":{session}}}"#);
            assert_eq!(
                Native::default().classify(&text).unwrap().meaning,
                ready,
                "{text}"
            );
        }
        // conform judges the grant itself: its sessions stream on.
        let judged = Native::new(
            &["text".to_string(), "audio".to_string()],
            true,
            INPUT_SAMPLE_RATE,
        );
        assert_eq!(
            judged.classify(&updated(r#"["text"]"#)).unwrap().meaning,
            ready
        );
        // Nothing named, an empty list, or not a list: nothing to go by.
        for session in [
            r#"{}"#,
            r#"null"#,
            r#"{"output_modalities":[]}"#,
            r#"{"output_modalities":null}"#,
            r#"{"output_modalities":"audio"}"#,
        ] {
            let text = format!(r#"{{"type":"session.updated","session":{session}}}"#);
            assert_eq!(
                Native::default().classify(&text).unwrap().meaning,
                ready,
                "{text}"
            );
        }
    }

    #[test]
    fn the_update_asks_for_the_modalities_given_issue_10() {
        let ids = EventIds {
            shard: 0,
            worker: 0,
            session: 0,
        };
        let both = Native::new(
            &["audio".to_string(), "text".to_string()],
            false,
            INPUT_SAMPLE_RATE,
        );
        let Some(Outgoing::Text(update)) = both.set_up(ids).remove(1).send else {
            panic!("the update is a text frame")
        };
        let v: serde_json::Value = serde_json::from_str(&update).unwrap();
        assert_eq!(
            v["session"]["output_modalities"],
            serde_json::json!(["audio", "text"])
        );
    }

    #[test]
    fn packet_of_80ms_is_2560_bytes() {
        assert_eq!(input_packet_bytes(INPUT_SAMPLE_RATE, 80), 2560);
        assert_eq!(
            input_packet_bytes(24_000, 80),
            3840,
            "PersonaPlex's 1920 samples"
        );
    }
}
