//! What vLLM's Python takes that a strict reader would refuse: base64 as pybase64's
//! `b64decode(validate=False)` reads it, and a boolean as pydantic's lax mode reads one.

use base64::alphabet::STANDARD;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

/// Decoding that takes stray trailing bits and missing or extra padding.
const LAX: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes `text` into `out` as pybase64's non-validating decoder does: bytes outside the
/// alphabet (newlines, spaces, `-`, `_`) are skipped. Strict base64 — every client's — takes
/// the direct path.
pub fn decode_base64(text: &str, out: &mut Vec<u8>) -> Result<(), base64::DecodeError> {
    if base64::engine::general_purpose::STANDARD
        .decode_vec(text.as_bytes(), out)
        .is_ok()
    {
        return Ok(());
    }
    out.clear();
    let kept: Vec<u8> = text
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
        .collect();
    LAX.decode_vec(&kept, out)
}

/// A boolean as pydantic's lax mode reads one: `true`/`false`, 0 and 1, and the strings
/// `1 on t true y yes` / `0 off f false n no` in any case; anything else is refused.
pub fn pydantic_bool(value: &serde_json::Value) -> Option<bool> {
    use serde_json::Value;
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_f64() {
            Some(1.0) => Some(true),
            Some(0.0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
            "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decoded(text: &str) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        decode_base64(text, &mut out).ok().map(|()| out)
    }

    #[test]
    fn base64_is_read_as_pybase64_reads_it_without_validation() {
        assert_eq!(decoded("AAAA").unwrap(), [0, 0, 0]);
        assert_eq!(decoded("AAAA\nAAAA\n").unwrap(), [0; 6], "newlines skipped");
        assert_eq!(decoded("AAB=").unwrap(), [0, 0], "stray trailing bits");
        assert_eq!(decoded("AAA").unwrap(), [0, 0], "no padding");
        assert_eq!(
            decoded("AAAA-AAAA").unwrap(),
            [0; 6],
            "url-safe bytes skipped"
        );
        assert_eq!(decoded("A"), None, "one character is no byte");
    }

    #[test]
    fn a_boolean_is_read_as_pydantic_reads_one_in_lax_mode() {
        for yes in [json!(true), json!("yes"), json!("On"), json!(1), json!("1")] {
            assert_eq!(pydantic_bool(&yes), Some(true), "{yes}");
        }
        for no in [json!(false), json!("no"), json!(0), json!("off")] {
            assert_eq!(pydantic_bool(&no), Some(false), "{no}");
        }
        for neither in [json!("maybe"), json!(2), json!(null), json!([])] {
            assert_eq!(pydantic_bool(&neither), None, "{neither}");
        }
    }
}
