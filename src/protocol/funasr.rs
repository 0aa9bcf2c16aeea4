//! Fun-ASR-Nano's realtime recognition protocol, as `serve_realtime_ws.py` serves it and its
//! `realtime_ws_benchmark.py` drives it (docs/funasr.md). No path; default port 10095.
//!
//! Client → server: text commands, compared by the server after trimming and upper-casing —
//! `START` → `{"event":"started"}`, `HOTWORDS:w1,w2` → `hotwords_set`, `LANGUAGE:<lang>` →
//! `language_set`, `STOP` → the final result (when there was audio), then `stopped` — and
//! binary frames of raw PCM16 (16 kHz, mono, little-endian).
//!
//! Server → client: JSON, either an event (`{"event":…}`) or a result (`sentences`, `partial`,
//! `is_final`, `duration_ms`). Read liberally: numbers as integers or floats, unknown fields
//! ignored, a field of an unexpected type read as the benchmark's Python would (truthiness), and
//! a frame that is not JSON, or binary, counted as a message and otherwise passed over.

use super::{
    AudioPacket, AudioSpan, ClientProtocol, Ending, EventIds, Meaning, Milestone, Outgoing,
    Received, Step,
};
use crate::trace::format::Payload;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

/// The server has no path: `ws://HOST:PORT` is `/`.
pub const PATH: &str = "/";

/// The benchmark's frame length.
pub const DEFAULT_CHUNK_MS: u32 = 100;

pub mod names {
    pub const START: &str = "START";
    pub const STOP: &str = "STOP";
    pub const LANGUAGE: &str = "LANGUAGE:";
    pub const HOTWORDS: &str = "HOTWORDS:";
    /// Text corrections after decoding (`wrong=>right,…`); the client never sends it, the
    /// mock answers it as the server does.
    pub const POSTPROCESS_HOTWORDS: &str = "POSTPROCESS_HOTWORDS:";
    pub const COMMIT: &str = "COMMIT";
    pub const STARTED: &str = "started";
    pub const LANGUAGE_SET: &str = "language_set";
    pub const HOTWORDS_SET: &str = "hotwords_set";
    pub const POSTPROCESS_HOTWORDS_SET: &str = "postprocess_hotwords_set";
    pub const STOPPED: &str = "stopped";
    pub const ERROR: &str = "error";
}

/// The Fun-ASR client side: the optional language and hotwords it sets after `START`.
#[derive(Debug, Clone, Default)]
pub struct Funasr {
    language: Option<String>,
    hotwords: Option<String>,
}

impl Funasr {
    /// Empty values are not sent, as the benchmark skips them.
    pub fn new(language: Option<&str>, hotwords: Option<&str>) -> Funasr {
        let given = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(str::to_string);
        Funasr {
            language: given(language),
            hotwords: given(hotwords),
        }
    }
}

impl ClientProtocol for Funasr {
    /// `START`, then `HOTWORDS:` and `LANGUAGE:` when given, in the benchmark's order.
    fn set_up(&self, _ids: EventIds) -> Vec<Step> {
        let mut steps = vec![Step {
            send: Some(Outgoing::Text(names::START.to_string())),
            until: Some(Milestone::Ready),
            awaiting: names::STARTED,
            turn: None,
        }];
        if let Some(hotwords) = &self.hotwords {
            steps.push(Step {
                send: Some(Outgoing::Text(format!("{}{hotwords}", names::HOTWORDS))),
                until: Some(Milestone::Configured),
                awaiting: names::HOTWORDS_SET,
                turn: None,
            });
        }
        if let Some(language) = &self.language {
            steps.push(Step {
                send: Some(Outgoing::Text(format!("{}{language}", names::LANGUAGE))),
                until: Some(Milestone::Configured),
                awaiting: names::LANGUAGE_SET,
                turn: None,
            });
        }
        steps
    }

    fn packet(
        &self,
        frame: &mut Outgoing,
        _ids: EventIds,
        _seq: u32,
        _t_start_ms: u64,
        audio: AudioPacket<'_>,
    ) -> Option<AudioSpan> {
        frame.binary_buffer().extend_from_slice(audio.pcm);
        None
    }

    /// `STOP`, answered by `stopped` whether or not audio was sent.
    fn finish(&self, _ids: EventIds, _ending: Ending) -> Vec<Step> {
        vec![Step {
            send: Some(Outgoing::Text(names::STOP.to_string())),
            until: Some(Milestone::Closed),
            awaiting: names::STOPPED,
            turn: None,
        }]
    }

    /// A text frame that is not JSON is kept and counted, not refused: the benchmark's
    /// `receive_message` makes it `{"_raw": …}`, which counts in `messages` and nowhere else.
    /// JSON that is not an object stays an error, as it fails the benchmark's client.
    fn classify<'a>(&self, text: &'a str) -> Result<Received<'a>, String> {
        let frame: ServerFrame<'a> = match super::json_object(text) {
            Ok(frame) => frame,
            // Not JSON at all (a JSON value of another shape is a data error).
            Err(err) if err.is_syntax() || err.is_eof() => {
                return Ok(Received {
                    meaning: Meaning::Other,
                    payload: Payload::Text,
                    event: None,
                    item: None,
                });
            }
            Err(err) => return Err(format!("server frame is not a JSON object ({err})")),
        };
        let is_result = frame.sentences.present || frame.partial.present || frame.is_final;
        let meaning = if is_result {
            Meaning::Transcript {
                is_final: frame.is_final,
                partial_text: frame.partial.truthy,
                any_text: frame.partial.truthy || frame.sentences.truthy,
                duration_ms: frame.duration_ms,
                stopped: frame.event.as_deref() == Some(names::STOPPED),
            }
        } else {
            match frame.event.as_deref() {
                Some(names::STARTED) => Meaning::Milestone(Milestone::Ready),
                Some(names::LANGUAGE_SET | names::HOTWORDS_SET) => {
                    Meaning::Milestone(Milestone::Configured)
                }
                Some(names::STOPPED) => Meaning::Milestone(Milestone::Closed),
                Some(names::ERROR) => Meaning::Error {
                    fatal: false,
                    code: Cow::Borrowed(names::ERROR),
                    message: frame.error.unwrap_or_default(),
                    answers: None,
                },
                _ => Meaning::Other,
            }
        };
        Ok(Received {
            meaning,
            payload: Payload::Json { audio_key: None },
            event: frame.event.filter(|e| !e.is_empty()),
            item: None,
        })
    }

    /// Kept and counted like a frame that is not JSON (`{"_binary_bytes": n}`).
    fn classify_binary(&self, _bytes: &[u8]) -> Result<Meaning<'static>, String> {
        Ok(Meaning::Other)
    }

    fn records_transcripts(&self) -> bool {
        true
    }

    fn recv_timeout_per_gap(&self) -> bool {
        true
    }

    fn client_closes(&self) -> bool {
        true
    }
}

/// The fields of a server frame the client reads; everything else is skipped without a copy.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ServerFrame<'a> {
    #[serde(borrow, deserialize_with = "string_or_none")]
    event: Option<Cow<'a, str>>,
    #[serde(deserialize_with = "presence")]
    sentences: Presence,
    #[serde(deserialize_with = "presence")]
    partial: Presence,
    /// `is_final` is exactly `true`, as the benchmark's `is True`.
    #[serde(deserialize_with = "exactly_true")]
    is_final: bool,
    #[serde(deserialize_with = "number_or_none")]
    duration_ms: Option<f64>,
    #[serde(borrow, deserialize_with = "string_or_none")]
    error: Option<Cow<'a, str>>,
}

/// Whether a key is in the frame (even as `null`), and whether its value is truthy in Python's
/// sense (a non-empty string or list, a non-zero number, `true`).
#[derive(Debug, Default, Clone, Copy)]
struct Presence {
    present: bool,
    truthy: bool,
}

fn presence<'de, D: Deserializer<'de>>(d: D) -> Result<Presence, D::Error> {
    Ok(Presence {
        present: true,
        truthy: d.deserialize_any(Truthy)?,
    })
}

struct Truthy;

impl<'de> Visitor<'de> for Truthy {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
    fn visit_i64<E>(self, v: i64) -> Result<bool, E> {
        Ok(v != 0)
    }
    fn visit_u64<E>(self, v: u64) -> Result<bool, E> {
        Ok(v != 0)
    }
    fn visit_f64<E>(self, v: f64) -> Result<bool, E> {
        Ok(v != 0.0)
    }
    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(!v.is_empty())
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_none<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut any = false;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            any = true;
        }
        Ok(any)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut any = false;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
            any = true;
        }
        Ok(any)
    }
}

fn exactly_true<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum BoolOrNot {
        Bool(bool),
        Not(IgnoredAny),
    }
    Ok(matches!(BoolOrNot::deserialize(d)?, BoolOrNot::Bool(true)))
}

fn number_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrNot {
        Number(f64),
        Not(IgnoredAny),
    }
    Ok(match NumberOrNot::deserialize(d)? {
        NumberOrNot::Number(n) => Some(n),
        NumberOrNot::Not(_) => None,
    })
}

/// A string where one is expected, `None` for any other JSON value (read past, not kept).
pub(super) fn string_or_none<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    Ok(match super::native::scalar(d)? {
        super::native::Scalar::Str(s) => Some(s),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(text: &str) -> Received<'_> {
        Funasr::default().classify(text).unwrap()
    }

    fn ids() -> EventIds {
        EventIds {
            shard: 0,
            worker: 0,
            session: 0,
        }
    }

    #[test]
    fn set_up_sends_start_then_hotwords_then_language_each_awaiting_its_ack_issue_11() {
        let steps = Funasr::new(Some("中文"), Some("a,b")).set_up(ids());
        let sent: Vec<_> = steps
            .iter()
            .map(|s| (s.send.clone(), s.until, s.awaiting))
            .collect();
        assert_eq!(
            sent,
            [
                (
                    Some(Outgoing::Text("START".into())),
                    Some(Milestone::Ready),
                    "started"
                ),
                (
                    Some(Outgoing::Text("HOTWORDS:a,b".into())),
                    Some(Milestone::Configured),
                    "hotwords_set"
                ),
                (
                    Some(Outgoing::Text("LANGUAGE:中文".into())),
                    Some(Milestone::Configured),
                    "language_set"
                ),
            ]
        );
        assert_eq!(Funasr::new(Some(""), None).set_up(ids()).len(), 1);
        let end = Funasr::default().finish(ids(), Ending::default());
        assert_eq!(end[0].send, Some(Outgoing::Text("STOP".into())));
        assert_eq!(end[0].until, Some(Milestone::Closed));
    }

    #[test]
    fn packets_are_the_raw_pcm_as_a_binary_frame_issue_11() {
        let pcm = [1u8, 2, 3, 4];
        // Into a frame that was text before: the buffer becomes a binary frame's.
        let mut frame = Outgoing::Text("left over".to_string());
        let audio = AudioPacket { pcm: &pcm, b64: "" };
        Funasr::default().packet(&mut frame, ids(), 0, 0, audio);
        assert_eq!(frame, Outgoing::Binary(pcm.to_vec()));
        Funasr::default().packet(&mut frame, ids(), 1, 80, audio);
        assert_eq!(
            frame,
            Outgoing::Binary(pcm.to_vec()),
            "not appended to the last packet"
        );
    }

    #[test]
    fn events_become_milestones_and_keep_their_names_issue_11() {
        let r = classify(r#"{"event":"started"}"#);
        assert_eq!(r.meaning, Meaning::Milestone(Milestone::Ready));
        assert_eq!(r.event.as_deref(), Some("started"));
        let r = classify(r#"{"event":"language_set","language":"en"}"#);
        assert_eq!(r.meaning, Meaning::Milestone(Milestone::Configured));
        let r = classify(r#"{"event":"stopped","extra":[1,2]}"#);
        assert_eq!(r.meaning, Meaning::Milestone(Milestone::Closed));
        let r = classify(r#"{"event":"error","error":"COMMIT needs client endpointing"}"#);
        assert!(
            matches!(r.meaning, Meaning::Error { fatal: false, ref message, .. } if message.contains("COMMIT"))
        );
        let r = classify(r#"{"event":"something_new"}"#);
        assert_eq!(
            (r.meaning, r.event.as_deref()),
            (Meaning::Other, Some("something_new"))
        );
    }

    #[test]
    fn results_are_read_liberally_issue_11() {
        let partial = r#"{"sentences":[],"partial":"ni hao","partial_start_ms":0,"duration_ms":960.0,"is_final":false}"#;
        assert_eq!(
            classify(partial).meaning,
            Meaning::Transcript {
                is_final: false,
                partial_text: true,
                any_text: true,
                duration_ms: Some(960.0),
                stopped: false
            }
        );
        let final_ = r#"{"sentences":[{"text":"ni hao","start":0,"end":900}],"partial":"","duration_ms":1000,"is_final":true,"new":1}"#;
        assert_eq!(
            classify(final_).meaning,
            Meaning::Transcript {
                is_final: true,
                partial_text: false,
                any_text: true,
                duration_ms: Some(1000.0),
                stopped: false
            }
        );
        // An empty partial is a result; `is_final: 1` is not `true`; a string duration is none.
        let odd = r#"{"partial":"","is_final":1,"duration_ms":"5"}"#;
        assert_eq!(
            classify(odd).meaning,
            Meaning::Transcript {
                is_final: false,
                partial_text: false,
                any_text: false,
                duration_ms: None,
                stopped: false
            }
        );
        // `sentences: null` is still a result, as `"sentences" in data` is.
        assert!(matches!(
            classify(r#"{"sentences":null}"#).meaning,
            Meaning::Transcript { .. }
        ));
        assert_eq!(classify(r#"{"hello":1}"#).meaning, Meaning::Other);
    }

    /// The benchmark keeps what it cannot parse (`{"_raw": …}`, `{"_binary_bytes": n}`) and
    /// goes on; JSON that is not an object fails its client (`data.get`), so it is refused.
    #[test]
    fn text_that_is_not_json_and_binary_frames_are_other_frames_not_errors() {
        let r = classify("hello");
        assert_eq!(
            (r.meaning, r.payload, r.event),
            (Meaning::Other, Payload::Text, None)
        );
        assert_eq!(
            Funasr::default().classify_binary(&[1, 2, 3]),
            Ok(Meaning::Other)
        );
        for json in ["5", r#""started""#, "null"] {
            let err = Funasr::default().classify(json).unwrap_err();
            assert!(err.contains("not a JSON object"), "{err}");
        }
    }
}
