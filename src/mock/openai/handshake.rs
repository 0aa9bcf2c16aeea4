//! What the openai mock reads from a connection's handshake: the naming (`OpenAI-Beta:
//! realtime=v1` means beta), the model the client connected with (`?model=`, which both
//! official SDKs always send, and the session then states), whether it asked for a
//! transcription session (`?intent=transcription`, as OpenAI's endpoint takes it), and the
//! subprotocol to answer.

use crate::protocol::openai::BETA_HEADER;
use crate::protocol::query_value;
use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;
use tokio_tungstenite::tungstenite::http::{HeaderMap, HeaderValue, Uri};

/// What a connection's handshake asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hello {
    /// Beta names (`OpenAI-Beta: realtime=v1`), or GA ones.
    pub beta: bool,
    /// The `model` of the query string, decoded.
    pub model: Option<String>,
    /// The query asked for a transcription session (`intent=transcription`).
    pub transcription: bool,
}

impl Hello {
    pub fn read(uri: &Uri, headers: &HeaderMap) -> Hello {
        Hello {
            beta: asks_for_beta(headers),
            model: uri.query().and_then(|q| query_value(q, "model")),
            transcription: uri
                .query()
                .and_then(|q| query_value(q, "intent"))
                .is_some_and(|intent| intent == "transcription"),
        }
    }
}

/// Whether a handshake asks for beta names: `OpenAI-Beta: realtime=v1`, as openai-python's
/// beta client sends it.
pub fn asks_for_beta(headers: &HeaderMap) -> bool {
    offers(headers, BETA_HEADER.0, BETA_HEADER.1)
}

/// The subprotocol to answer: `realtime` when the client offers it, as openai-node's browser
/// client does (`['realtime', 'openai-insecure-api-key.<key>']`, and a browser fails a
/// connection whose answer names none); the key one is never echoed.
pub fn subprotocol(headers: &HeaderMap) -> Option<HeaderValue> {
    offers(
        headers,
        SEC_WEBSOCKET_PROTOCOL.as_str(),
        REALTIME_SUBPROTOCOL,
    )
    .then(|| HeaderValue::from_static(REALTIME_SUBPROTOCOL))
}

/// Whether any `name` header lists `token` among its comma-separated values.
fn offers(headers: &HeaderMap, name: &str, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim() == token)
}

/// The subprotocol OpenAI's endpoint speaks.
const REALTIME_SUBPROTOCOL: &str = "realtime";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_of_the_query_is_read_decoded() {
        let uri: Uri = "/v1/realtime?foo=1&model=Qwen%2FQwen3-Omni+x"
            .parse()
            .unwrap();
        let hello = Hello::read(&uri, &HeaderMap::new());
        assert_eq!(hello.model.as_deref(), Some("Qwen/Qwen3-Omni x"));
        assert!(!hello.beta);
        let uri: Uri = "/v1/realtime?model=".parse().unwrap();
        assert_eq!(Hello::read(&uri, &HeaderMap::new()).model, None);
        let uri: Uri = "/v1/realtime".parse().unwrap();
        assert_eq!(Hello::read(&uri, &HeaderMap::new()).model, None);
    }

    #[test]
    fn a_transcription_session_is_asked_for_by_the_intent_of_the_query() {
        let read = |uri: &str| Hello::read(&uri.parse().unwrap(), &HeaderMap::new());
        assert!(read("/v1/realtime?intent=transcription").transcription);
        assert!(read("/v1/realtime?model=m&intent=transcription").transcription);
        assert!(!read("/v1/realtime?intent=realtime").transcription);
        assert!(!read("/v1/realtime?model=gpt-realtime").transcription);
    }
}
