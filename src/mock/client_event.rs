//! The parts of a client event the mock reads, parsed liberally ("be liberal in what
//! you accept"): any JSON number where a time is expected (the real client sends `t_start_ms`
//! as `80.0`), unknown fields ignored, event ids of any string shape. Only `sglang.seq` is kept
//! as written, since sglang-omni's server refuses a seq that is not a JSON integer.

use serde::Deserialize;
use std::borrow::Cow;

/// The fields of a client event the mock reads. Everything else is skipped without a copy.
#[derive(Debug, Deserialize)]
pub struct ClientEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub event_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub audio: Option<Cow<'a, str>>,
    /// `sglang.input_image.append`: the frame, base64 JPEG or PNG.
    #[serde(default, borrow)]
    pub image: Option<Cow<'a, str>>,
    #[serde(default)]
    pub sglang: Option<ClientSglang>,
    /// `session.update`: the terms asked for.
    #[serde(default, borrow)]
    pub session: Option<ClientSession<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct ClientSglang {
    /// Any JSON number, as written; [`ClientSglang::seq`] says whether it is a seq.
    #[serde(default, rename = "seq")]
    pub seq_number: Option<serde_json::Number>,
    #[serde(default)]
    pub t_start_ms: Option<f64>,
    /// An image's media time, in ms of input.
    #[serde(default)]
    pub t_ms: Option<f64>,
}

impl ClientSglang {
    /// The sequence number, when it is a JSON integer from 0; otherwise the number as written.
    /// `3.0` is not a seq: sglang-omni's server takes seq as a strict integer and refuses it.
    pub fn seq(&self) -> Option<Result<u64, String>> {
        self.seq_number
            .as_ref()
            .map(|n| n.as_u64().ok_or_else(|| n.to_string()))
    }
}

#[derive(Debug, Deserialize)]
pub struct ClientSession<'a> {
    #[serde(default, borrow)]
    pub output_modalities: Option<Vec<Cow<'a, str>>>,
}

/// Parses the parts of a client event the mock needs.
pub fn parse(text: &str) -> Result<ClientEvent<'_>, serde_json::Error> {
    serde_json::from_str(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_milliseconds_are_read_and_a_float_seq_is_not_a_seq() {
        let e = parse(r#"{"type":"input_audio_buffer.append","event_id":"9f8e","audio":"AAAA","sglang":{"seq":3,"t_start_ms":240.0}}"#).unwrap();
        let s = e.sglang.unwrap();
        assert_eq!(s.seq(), Some(Ok(3)));
        assert_eq!(s.t_start_ms, Some(240.0));
        let e = parse(r#"{"type":"x","sglang":{"seq":3.0}}"#).unwrap();
        assert_eq!(e.sglang.unwrap().seq(), Some(Err("3.0".to_string())));
    }

    #[test]
    fn unknown_fields_are_ignored_and_ids_may_be_any_string() {
        let e = parse(r#"{"type":"session.update","event_id":"0b7c1d2e3f4a45b6a7c8d9e0f1a2b3c4-x","extra":{"a":[1]},"session":{"output_modalities":["audio","text"],"voice":"x"}}"#).unwrap();
        assert_eq!(
            e.event_id.as_deref(),
            Some("0b7c1d2e3f4a45b6a7c8d9e0f1a2b3c4-x")
        );
        let asked = e.session.unwrap().output_modalities.unwrap();
        assert_eq!(asked, ["audio", "text"]);
    }

    #[test]
    fn a_fractional_or_negative_seq_is_not_a_seq() {
        let e = parse(r#"{"type":"x","sglang":{"seq":2.5}}"#).unwrap();
        assert_eq!(e.sglang.unwrap().seq(), Some(Err("2.5".to_string())));
        let e = parse(r#"{"type":"x","sglang":{"seq":-1}}"#).unwrap();
        assert_eq!(e.sglang.unwrap().seq(), Some(Err("-1".to_string())));
    }
}
