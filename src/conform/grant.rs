//! What `session.updated` must grant: every capability, stated (`grant-listed`); the output
//! modalities asked for (`grant-request`); the terms of the model's profile (`grant-profile`).

use crate::profile::Profile;
use serde_json::{json, Value};

/// The terms the rest of the session is checked against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Terms {
    pub profile: Option<Profile>,
    pub unit_ms: Option<f64>,
    pub output_rate_hz: Option<f64>,
}

/// A broken grant rule: (rule, expected, got).
pub type Finding = (&'static str, String, String);

/// The capabilities every native server grants with these values, whatever its model.
fn fixed_capabilities() -> Vec<(&'static str, Value)> {
    vec![
        ("interaction", json!("native")),
        ("native_full_duplex", json!(true)),
        ("tail_policy", json!("pad")),
        ("client_commit", json!(false)),
        ("pressure_policy", json!("reject")),
        ("strict_order", json!(true)),
        ("proactive_output", json!(false)),
        ("supports_server_interrupt", json!(false)),
        ("supports_resume", json!(false)),
        ("supports_truncate", json!(false)),
    ]
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".to_string(), Value::to_string)
}

/// Checks the `session.updated` event `updated` against what the client `asked` for
/// (`session.output_modalities` of its `session.update`) and the `given` profile, if any.
pub fn check(
    updated: &Value,
    asked: Option<&Value>,
    given: Option<Profile>,
    findings: &mut Vec<Finding>,
) -> Terms {
    let session = updated.get("session");
    let granted = session
        .and_then(|s| s.get("sglang"))
        .and_then(|s| s.get("granted"));
    let Some(granted) = granted.filter(|g| g.is_object()) else {
        findings.push((
            "grant-listed",
            "session.sglang.granted, an object of capabilities".to_string(),
            show(granted),
        ));
        return Terms {
            profile: given,
            unit_ms: given.map(|p| f64::from(p.unit_ms())),
            output_rate_hz: given.map(|p| f64::from(p.output_sample_rate())),
        };
    };
    check_fixed(granted, findings);
    let stated = Stated::read(granted, findings);
    check_request(asked, granted, session, stated.modalities, findings);
    let profile = check_profile(given, &stated, findings);
    Terms {
        profile,
        unit_ms: stated
            .unit_ms
            .or_else(|| profile.map(|p| f64::from(p.unit_ms()))),
        output_rate_hz: stated
            .output_rate_hz
            .or_else(|| profile.map(|p| f64::from(p.output_sample_rate()))),
    }
}

/// `grant-listed` for what every native server grants alike: the fixed capabilities, no
/// microturns, and limits that are limits. Which limits a server states, and their values,
/// are its own (sglang-omni's mock-free server states no session timeout; the mock's is 240 s).
fn check_fixed(granted: &Value, findings: &mut Vec<Finding>) {
    for (key, expected) in fixed_capabilities() {
        let got = granted.get(key);
        if got != Some(&expected) {
            findings.push(("grant-listed", format!("{key} {expected}"), show(got)));
        }
    }
    if let Some(microturn) = granted.get("microturn_ms").filter(|m| !m.is_null()) {
        findings.push((
            "grant-listed",
            "microturn_ms null or absent".to_string(),
            microturn.to_string(),
        ));
    }
    // PCM16 at a rate of sglang-omni's models; which one, the profile says.
    let input = granted.get("input_audio_format");
    let rates = crate::protocol::Protocol::Native.input_sample_rates();
    let pcm = input.and_then(|f| f.get("type")) == Some(&json!("audio/pcm"));
    let rate = input
        .and_then(|f| f.get("rate"))
        .and_then(Value::as_f64)
        .filter(|r| rates.iter().any(|known| f64::from(*known) == *r));
    if !pcm || rate.is_none() {
        findings.push((
            "grant-listed",
            format!(
                "input_audio_format {{\"type\":\"audio/pcm\",\"rate\":…}} at {}",
                rates
                    .iter()
                    .map(|r| format!("{r}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
            show(input),
        ));
    }
    let timeout = granted
        .get("limits")
        .and_then(|l| l.get("session_timeout_s"));
    if let Some(timeout) = timeout {
        if !timeout.as_f64().is_some_and(|s| s > 0.0) {
            findings.push((
                "grant-listed",
                "limits.session_timeout_s, a positive number of seconds, or absent".to_string(),
                timeout.to_string(),
            ));
        }
    }
}

/// The capabilities whose values depend on the model: the unit, the output format and the
/// output modalities, as granted.
struct Stated<'a> {
    unit: Option<&'a Value>,
    unit_ms: Option<f64>,
    input_format: Option<&'a Value>,
    input_rate_hz: Option<f64>,
    output_format: Option<&'a Value>,
    output_rate_hz: Option<f64>,
    modalities: Option<&'a Value>,
    names: Option<Vec<&'a str>>,
}

impl<'a> Stated<'a> {
    /// Reads them, with a `grant-listed` finding for each one missing or of the wrong shape.
    fn read(granted: &'a Value, findings: &mut Vec<Finding>) -> Stated<'a> {
        let unit = granted.get("native_unit_ms");
        let unit_ms = unit.and_then(Value::as_f64).filter(|ms| *ms > 0.0);
        if unit_ms.is_none() {
            findings.push((
                "grant-listed",
                "native_unit_ms, a number of ms".to_string(),
                show(unit),
            ));
        }
        let input_format = granted.get("input_audio_format");
        let input_rate_hz = input_format
            .and_then(|f| f.get("rate"))
            .and_then(Value::as_f64);
        let output_format = granted.get("output_audio_format");
        let output_rate_hz = output_format
            .and_then(|f| f.get("rate"))
            .and_then(Value::as_f64);
        let pcm = output_format.and_then(|f| f.get("type")) == Some(&json!("audio/pcm"));
        if output_rate_hz.is_none() || !pcm {
            findings.push((
                "grant-listed",
                r#"output_audio_format {"type":"audio/pcm","rate":<Hz>}"#.to_string(),
                show(output_format),
            ));
        }
        let modalities = granted.get("output_modalities");
        let names: Option<Vec<&str>> = modalities
            .and_then(Value::as_array)
            .and_then(|list| list.iter().map(Value::as_str).collect());
        if names.is_none() {
            findings.push((
                "grant-listed",
                "output_modalities, a list of names".to_string(),
                show(modalities),
            ));
        }
        Stated {
            unit,
            unit_ms,
            input_format,
            input_rate_hz,
            output_format,
            output_rate_hz,
            modalities,
            names,
        }
    }
}

/// `grant-request`: what was granted is what was asked, or some of it with the rest stated in
/// `rejections` (sglang-omni's server grants one output modality and rejects the others that
/// way): never other terms, and never fewer in silence. The session level says the same.
fn check_request(
    asked: Option<&Value>,
    granted: &Value,
    session: Option<&Value>,
    modalities: Option<&Value>,
    findings: &mut Vec<Finding>,
) {
    if let (Some(asked), Some(modalities)) = (asked, modalities) {
        if asked != modalities && !rejected_in_part(asked, modalities, granted) {
            findings.push((
                "grant-request",
                format!(
                    "granted output_modalities {asked} (as asked), or some of them with a \
                     `rejections` entry for output_modalities"
                ),
                modalities.to_string(),
            ));
        }
    }
    let session_level = session.and_then(|s| s.get("output_modalities"));
    if let (Some(session_level), Some(modalities)) = (session_level, modalities) {
        if session_level != modalities {
            findings.push((
                "grant-request",
                format!("session.output_modalities {modalities} (as granted)"),
                session_level.to_string(),
            ));
        }
    }
}

/// Whether `modalities` is a part of what was `asked` and the grant's `rejections` say so: an
/// entry for `output_modalities` that names what was asked and what was granted.
fn rejected_in_part(asked: &Value, modalities: &Value, granted: &Value) -> bool {
    let (Some(asked_list), Some(granted_list)) = (asked.as_array(), modalities.as_array()) else {
        return false;
    };
    if granted_list.is_empty() || !granted_list.iter().all(|m| asked_list.contains(m)) {
        return false;
    }
    let rejections = granted.get("rejections").and_then(Value::as_array);
    rejections.is_some_and(|list| {
        list.iter().any(|r| {
            r.get("field").and_then(Value::as_str) == Some("output_modalities")
                && r.get("requested") == Some(asked)
                && r.get("granted") == Some(modalities)
        })
    })
}

/// `grant-profile`: the profile given, or the one the unit names, and whether what was granted
/// keeps to its terms; returns that profile.
fn check_profile(
    given: Option<Profile>,
    stated: &Stated<'_>,
    findings: &mut Vec<Finding>,
) -> Option<Profile> {
    let profile = given.or_else(|| {
        stated
            .unit_ms
            .and_then(|ms| Profile::from_grant(ms, stated.input_rate_hz))
    });
    let Some(p) = profile else {
        findings.push((
            "grant-profile",
            format!(
                "native_unit_ms and input rate of a known profile ({})",
                Profile::ALL
                    .iter()
                    .map(|p| format!(
                        "{} {} ms at {} Hz",
                        p.name(),
                        p.unit_ms(),
                        p.input_sample_rate()
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "{} at {}",
                show(stated.unit),
                show(stated.input_format.and_then(|f| f.get("rate")))
            ),
        ));
        return None;
    };
    if stated.input_rate_hz.is_some()
        && stated.input_rate_hz != Some(f64::from(p.input_sample_rate()))
    {
        findings.push((
            "grant-profile",
            format!(
                "input_audio_format.rate {} ({})",
                p.input_sample_rate(),
                p.name()
            ),
            show(stated.input_format.and_then(|f| f.get("rate"))),
        ));
    }
    if stated.unit_ms != Some(f64::from(p.unit_ms())) {
        findings.push((
            "grant-profile",
            format!("native_unit_ms {} ({})", p.unit_ms(), p.name()),
            show(stated.unit),
        ));
    }
    let output_rate_hz = stated.output_rate_hz;
    if output_rate_hz.is_some() && output_rate_hz != Some(f64::from(p.output_sample_rate())) {
        findings.push((
            "grant-profile",
            format!(
                "output_audio_format.rate {} ({})",
                p.output_sample_rate(),
                p.name()
            ),
            show(stated.output_format.and_then(|f| f.get("rate"))),
        ));
    }
    if let Some(names) = &stated.names {
        let served = p.output_modalities();
        if let Some(extra) = names.iter().find(|n| !served.contains(n)) {
            findings.push((
                "grant-profile",
                format!("output_modalities among {served:?} ({})", p.name()),
                format!("{extra:?} granted"),
            ));
        }
    }
    profile
}
