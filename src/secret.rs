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

/// Whether a URL query parameter named `name` carries a credential (Azure's `api-key`, a
/// `token`, an `access_token`, a signature): its value is a secret.
fn is_secret_param(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "key",
        "apikey",
        "token",
        "accesstoken",
        "authtoken",
        "secret",
        "password",
        "passwd",
        "pwd",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "signature",
        "sig",
    ];
    // Word by word (`api-key`, `access_token`, `X-Auth-Token`): `max_tokens`, `keywords` and
    // `author` are not credentials.
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| WORDS.contains(&word.to_ascii_lowercase().as_str()))
}

/// `url` with the values of its credential query parameters written as `<redacted>`, and
/// those values in order (to put back with [`restore_url`] where the connection is made).
pub fn split_url_secrets(url: &str) -> (String, Vec<Secret>) {
    let Some((base, rest)) = url.split_once('?') else {
        return (url.to_string(), Vec::new());
    };
    let (query, fragment) = match rest.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (rest, None),
    };
    let mut secrets = Vec::new();
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if is_secret_param(name) && !value.is_empty() => {
                secrets.push(Secret::new(value));
                format!("{name}={REDACTED}")
            }
            _ => pair.to_string(),
        })
        .collect();
    let mut out = format!("{base}?{}", pairs.join("&"));
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    (out, secrets)
}

/// The URL to connect to: `redacted` (from [`split_url_secrets`]) with its secrets put back.
pub fn restore_url(redacted: &str, secrets: &[Secret]) -> String {
    let marker = format!("={REDACTED}");
    let mut out = String::with_capacity(redacted.len() + 64);
    let mut rest = redacted;
    let mut values = secrets.iter();
    while let Some(at) = rest.find(&marker) {
        let Some(value) = values.next() else { break };
        out.push_str(&rest[..=at]);
        out.push_str(value.expose());
        rest = &rest[at + marker.len()..];
    }
    out.push_str(rest);
    out
}

/// The flags whose value is a secret; `--header` is redacted after its name.
const SECRET_FLAGS: &[&str] = &["--api-key"];
const HEADER_FLAG: &str = "--header";
const URL_FLAG: &str = "--url";

/// The arguments with every secret replaced: `--api-key KEY`, `--api-key=KEY`, and the value
/// of `--header 'Name: value'` (a header may carry a key, as Azure's `api-key` does).
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut next_is: Option<&str> = None;
    for arg in args {
        match next_is.take() {
            Some(HEADER_FLAG) => out.push(redact_header(arg)),
            Some(URL_FLAG) => out.push(split_url_secrets(arg).0),
            Some(_) => out.push(REDACTED.to_string()),
            None => {
                if SECRET_FLAGS.contains(&arg.as_str()) || arg == HEADER_FLAG || arg == URL_FLAG {
                    next_is = Some(match arg.as_str() {
                        HEADER_FLAG => HEADER_FLAG,
                        URL_FLAG => URL_FLAG,
                        _ => "secret",
                    });
                    out.push(arg.clone());
                } else if let Some(flag) = SECRET_FLAGS
                    .iter()
                    .find(|f| arg.starts_with(&format!("{f}=")))
                {
                    out.push(format!("{flag}={REDACTED}"));
                } else if let Some(header) = arg.strip_prefix("--header=") {
                    out.push(format!("--header={}", redact_header(header)));
                } else if let Some(url) = arg.strip_prefix("--url=") {
                    out.push(format!("--url={}", split_url_secrets(url).0));
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

/// The command line as typed, quoted where a word needs it, its secrets redacted.
pub fn command_line() -> String {
    // A path that is not UTF-8 is written as near as it can be, not a panic.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    redact_args(&args)
        .into_iter()
        .map(|arg| {
            if !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
            {
                arg
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_credential_parameters_are_redacted_and_put_back_for_the_connection() {
        let url = "wss://h.example/openai/realtime?api-version=2025-04-01&deployment=d&api-key=K1&access_token=T2#x";
        let (redacted, secrets) = split_url_secrets(url);
        assert_eq!(
            redacted,
            "wss://h.example/openai/realtime?api-version=2025-04-01&deployment=d&api-key=<redacted>&access_token=<redacted>#x"
        );
        assert_eq!(secrets.len(), 2);
        assert_eq!(restore_url(&redacted, &secrets), url);
        let plain =
            "ws://127.0.0.1:9/v1/realtime?model=gpt-realtime&max_tokens=5&keywords=a&author=b";
        assert_eq!(split_url_secrets(plain), (plain.to_string(), Vec::new()));
        let recorded = redact_args(&args(&["run", "--url", url, "--url=ws://h/?token=T3"]));
        let recorded = recorded.join(" ");
        assert!(
            !recorded.contains("K1") && !recorded.contains("T2") && !recorded.contains("T3"),
            "{recorded}"
        );
    }

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
