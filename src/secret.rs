//! Credentials (`--api-key`, `OPENAI_API_KEY`, `--header` values) and how they stay out of every
//! file and log: a [`Secret`] serialises and prints as `<redacted>`, the command line recorded
//! in the summary has them redacted ([`redact_args`]), and the conductor hands them to its
//! workers in their environment ([`SECRETS_ENV`]), never in the worker config files it writes
//! into the run folder.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// What a secret is written as, wherever it is written.
pub const REDACTED: &str = "<redacted>";

/// The environment variable that carries a run's secrets from the conductor to its workers.
pub const SECRETS_ENV: &str = "DUPLEXBENCH_WORKER_SECRETS";

/// A value that must not be written anywhere. Read back from a file, it is empty: the real
/// value only ever comes from the command line, the environment, or [`SECRETS_ENV`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the handshake and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Secret, D::Error> {
        let _ = serde::de::IgnoredAny::deserialize(deserializer)?;
        Ok(Secret::default())
    }
}

impl schemars::JsonSchema for Secret {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Secret".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "const": REDACTED,
            "description": "A credential; never written, always `<redacted>`."
        })
    }
}

/// The flags whose value is a secret; `--header` is redacted after its name.
const SECRET_FLAGS: &[&str] = &["--api-key"];
const HEADER_FLAG: &str = "--header";

/// The arguments with every secret replaced: `--api-key KEY`, `--api-key=KEY`, and the value
/// of `--header 'Name: value'` (a header may carry a key, as Azure's `api-key` does).
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut next_is: Option<&str> = None;
    for arg in args {
        match next_is.take() {
            Some(HEADER_FLAG) => out.push(redact_header(arg)),
            Some(_) => out.push(REDACTED.to_string()),
            None => {
                if SECRET_FLAGS.contains(&arg.as_str()) || arg == HEADER_FLAG {
                    next_is = Some(if arg == HEADER_FLAG {
                        HEADER_FLAG
                    } else {
                        "secret"
                    });
                    out.push(arg.clone());
                } else if let Some(flag) = SECRET_FLAGS
                    .iter()
                    .find(|f| arg.starts_with(&format!("{f}=")))
                {
                    out.push(format!("{flag}={REDACTED}"));
                } else if let Some(header) = arg.strip_prefix("--header=") {
                    out.push(format!("--header={}", redact_header(header)));
                } else {
                    out.push(arg.clone());
                }
            }
        }
    }
    out
}

/// `Name: value` → `Name: <redacted>`.
fn redact_header(header: &str) -> String {
    match header.split_once(':') {
        Some((name, _)) => format!("{name}: {REDACTED}"),
        None => REDACTED.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn keys_and_header_values_are_redacted_from_the_command_line_issue_12() {
        let out = redact_args(&args(&[
            "duplexbench-tui",
            "run",
            "--api-key",
            "sk-live",
            "--api-key=sk-eq",
            "--header",
            "api-key: azure-secret",
            "--header=X-Trace: t1",
            "--url",
            "wss://h/v1/realtime",
        ]))
        .join(" ");
        for secret in ["sk-live", "sk-eq", "azure-secret", "t1"] {
            assert!(!out.contains(secret), "{out}");
        }
        assert!(out.contains("--header api-key: <redacted>"), "{out}");
        assert!(out.contains("--url wss://h/v1/realtime"), "{out}");
    }

    #[test]
    fn a_secret_never_serialises_or_prints_its_value_issue_12() {
        let s = Secret::new("sk-123");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"<redacted>\"");
        assert_eq!(format!("{s:?}"), "<redacted>");
        let back: Secret = serde_json::from_str("\"<redacted>\"").unwrap();
        assert!(back.is_empty());
        assert_eq!(s.expose(), "sk-123");
    }
}
