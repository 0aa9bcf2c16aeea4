//! What to do about a connection that failed, when its error says: a `ws://` URL to a server
//! that answers in TLS, a `wss://` URL to one that does not, a certificate the client does not
//! trust. The hint follows the library's own error text, which is kept.

use rustls::InvalidMessage;
use std::borrow::Cow;
use tokio_tungstenite::tungstenite::error::{ProtocolError, SubProtocolError};
use tokio_tungstenite::tungstenite::http::HeaderMap;
use tokio_tungstenite::tungstenite::Error as WsError;

/// How far a connection got: where it was when it failed or ran out of time, and the first
/// bytes the server sent in answer to a plain WebSocket handshake.
#[derive(Debug, Default)]
pub struct Progress {
    pub stage: Stage,
    pub reply: Vec<u8>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Opening the TCP connection.
    #[default]
    Tcp,
    /// The TLS handshake of a `wss://` URL.
    Tls,
    /// The WebSocket (HTTP upgrade) handshake.
    WebSocket,
}

pub const USE_WSS: &str =
    "the server answered in TLS: it serves wss://, so give a wss:// URL (with --ca-file FILE.pem or --insecure if its certificate is self-signed)";
pub const PLAIN_TO_TLS: &str =
    "the server says this port takes TLS (its 400 answers a plain request): give a wss:// URL (with --ca-file FILE.pem or --insecure if its certificate is self-signed)";
pub const USE_WS: &str =
    "the server's answer is not TLS: if it serves plain WebSocket, give a ws:// URL";
pub const CLOSED_IN_TLS: &str =
    "the server closed the connection during the TLS handshake: if it serves plain WebSocket, give a ws:// URL; if it serves TLS, it may take no TLS version or cipher this client offers (TLS 1.2 and 1.3)";
pub const SILENT_IN_TLS: &str =
    "the server never answered the TLS handshake: if it serves plain WebSocket, give a ws:// URL";
pub const SILENT_IN_UPGRADE: &str =
    "the connection was made, but the server did not answer the WebSocket handshake (the HTTP upgrade) in time: check that --url's port is the WebSocket server's and not another service's that waits for words of its own, whether a proxy in front of it holds the upgrade, or whether the server is too busy to take connections (its log; fewer sessions, or a longer --connect-timeout)";
pub const CLIENT_CERT: &str =
    "the server asked for a client certificate (mutual TLS) and none was given: give it with --client-cert FILE.pem and --client-key FILE.pem";
pub const CLIENT_KEY_UNUSABLE: &str =
    "the server asked for a client certificate but takes none of the signature schemes of the --client-key's key (an Ed25519 key, say), so none could be sent: give a certificate with an ECDSA (P-256, P-384) or RSA key";
pub const CLIENT_CERT_DROPPED: &str =
    "the server ended the connection before answering, after it was shown the client certificate (--client-cert) and without a TLS alert saying why, as a server that refuses a certificate silently does (Python asyncio, uvloop): check that the certificate is signed by a CA the server trusts (give the intermediates in the same file, after it), that it is in its validity period, and that it is for a TLS client (extendedKeyUsage clientAuth, if it has one); if only some sessions fail so, the server may be out of connections";
pub const CLIENT_CERT_REFUSED: &str =
    "the server refused the client certificate (--client-cert) with a TLS alert: check that it is signed by a CA the server trusts (give the intermediates in the same file, after it), that it is in its validity period, and that it is for a TLS client (extendedKeyUsage clientAuth, if it has one)";
pub const CHAIN_TOO_LARGE: &str =
    "the server sent a certificate chain larger than a TLS handshake message may be (64 KiB): configure it to send only its certificate and the intermediates up to the root";

pub const OVERSIZED_ANSWER: &str =
    "the server's answer to the handshake did not end its headers within 64 KiB (or came in hundreds of tiny pieces), the WebSocket library's limit against a hostile server: check that --url is the server's WebSocket endpoint, and ask its operator what sends so large an answer";
pub const RESET: &str =
    "the server reset the connection before answering the WebSocket handshake, so something listens there but will not talk to this client (a proxy or firewall that refuses it, a full accept queue, a server shutting down): check --url and the server's log";
pub const CLOSED_IN_HANDSHAKE: &str =
    "the server closed the connection before it finished answering the WebSocket handshake, so something listens there but will not talk to this client (a proxy or firewall that refuses it, a server shutting down or out of connections): check --url and the server's log";
pub const UNASKED_EXTENSION: &str =
    "the server accepted with a WebSocket extension the client did not ask for (Sec-WebSocket-Extensions, e.g. permessage-deflate), so its frames would be ones this client cannot read, and RFC 6455 §4.1 has the client fail the connection: turn the extension off for clients that do not offer it, or check the proxy in front of the server";
pub const UNASKED_SUBPROTOCOL: &str =
    "the server accepted with a WebSocket subprotocol (Sec-WebSocket-Protocol) the client did not offer, and RFC 6455 §4.1 has the client fail the connection: offer the one it names with --header 'Sec-WebSocket-Protocol: NAME' (OpenAI's is `realtime`), or turn it off on the server for clients that offer none";
pub const TOO_MANY_HEADERS: &str =
    "the server's answer to the handshake has more headers than the WebSocket library reads (124): check that --url is the server's WebSocket endpoint, or what proxy in front of it adds so many";

pub const NO_ENDPOINT: &str =
    "the server has no WebSocket endpoint at this path: check --url's path (sglang-omni, the OpenAI Realtime API and vLLM serve /v1/realtime; Fun-ASR's server the path it was started with) and --protocol";
pub const NOT_AUTHORISED: &str =
    "the server refused the handshake's credentials: give the key with --api-key (openai and vllm default to $OPENAI_API_KEY) or the header it expects with --header; if one was given, check that it is this server's and still valid";
pub const SERVER_FAILED: &str =
    "the server failed while answering the handshake (an HTTP 5xx other than 503, which is retried as a full server): its log says why; check that it is up and done loading";

/// `err` as said in a message: its first 300 characters (rustls's debug form of an unsupported
/// signature algorithm lists every algorithm it supports, over a thousand characters), with
/// what the body of an HTTP refusal says.
pub fn error_text(err: &WsError) -> String {
    const LONGEST: usize = 300;
    let mut text = err.to_string();
    if let WsError::Http(response) = err {
        if let Some(said) = body_text(response.body().as_deref()) {
            text = format!("{text} (the server said: {said})");
        }
    }
    match text.char_indices().nth(LONGEST) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// What the body of an HTTP refusal says, on one line: gateways and hosted APIs put the reason
/// there (a wrong key, an unknown model, a quota), which the status alone does not name. An HTML
/// page (a proxy's error page) is left out: its markup says no more than the status.
fn body_text(body: Option<&[u8]>) -> Option<String> {
    let body = String::from_utf8_lossy(body?);
    let text = body
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!text.is_empty() && !text.starts_with('<')).then_some(text)
}

/// The hint for a connection that failed with `err`, if there is one.
pub fn for_error(err: &WsError, progress: &Progress) -> Option<Cow<'static, str>> {
    if let WsError::Http(response) = err {
        return match response.status().as_u16() {
            // A page or a route for other methods where the upgrade was asked: a web UI, a
            // health check, an HTTP API beside the WebSocket one.
            200 | 404 | 405 => Some(NO_ENDPOINT.into()),
            401 | 403 => Some(NOT_AUTHORISED.into()),
            301 | 302 | 303 | 307 | 308 => Some(redirect(response.headers()).into()),
            429 => Some(rate_limited(response.headers()).into()),
            // A TLS server's answer to plain HTTP on its port: nginx's "The plain HTTP request
            // was sent to HTTPS port", the mock's "this is a TLS server (wss://…".
            400 if answers_plain_on_tls_port(response.body().as_deref()) => {
                Some(PLAIN_TO_TLS.into())
            }
            500..=502 | 504..=599 => Some(SERVER_FAILED.into()),
            _ => None,
        };
    }
    for_transport_error(err, progress).map(Cow::Borrowed)
}

/// Whether an HTTP 400's body says the request went to a TLS port in plain.
fn answers_plain_on_tls_port(body: Option<&[u8]>) -> bool {
    let body = String::from_utf8_lossy(body.unwrap_or_default()).to_ascii_lowercase();
    body.contains("https port") || body.contains("tls server")
}

/// What to do about HTTP 429: the server (or a gateway in front of it) limits how many
/// connections or requests it takes. Not retried as a 503 is: the protocols name 503 as the
/// full server's refusal, and a rate limit is the deployment's, not the load's.
fn rate_limited(headers: &HeaderMap) -> String {
    let after = headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.chars()
                .filter(|c| !c.is_control())
                .take(40)
                .collect::<String>()
        })
        .filter(|v| !v.is_empty())
        .map(|v| format!(" (Retry-After: {v})"))
        .unwrap_or_default();
    format!(
        "the server (or a gateway in front of it) is rate-limiting connections{after}: run fewer sessions (-s, -p), wait before running again, or raise the limit (for a hosted API, the account's rate limits)"
    )
}

/// What to do about a redirect: a client does not follow one for a WebSocket (RFC 6455
/// §4.1), so the URL it names is the one to give. Its scheme is said in WebSocket terms (an
/// `https://` redirect is a proxy's move to TLS: `wss://`), a credential in its query (a proxy
/// keeps `--url`'s own) is left out as `--url`'s is, and a path alone is said as a path.
fn redirect(headers: &HeaderMap) -> String {
    const LONGEST: usize = 300;
    let location = headers
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.chars().filter(|c| !c.is_control()).collect::<String>())
        .filter(|v| !v.is_empty());
    let Some(location) = location else {
        return "the server answered with a redirect that names no URL: ask its operator for the WebSocket URL".to_string();
    };
    let (location, _) = crate::secret::split_url_secrets(&location);
    if location.chars().count() > LONGEST {
        return format!(
            "the server redirects the handshake to a URL of {} characters (its `Location` header): give that as --url",
            location.chars().count()
        );
    }
    if location.starts_with('/') {
        return format!(
            "the server redirects the handshake to the path `{location}`: give --url with that path"
        );
    }
    let as_ws = if let Some(rest) = location.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = location.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        location.clone()
    };
    if as_ws == location {
        format!("the server redirects the handshake to `{location}`: give that as --url")
    } else {
        format!("the server redirects the handshake to `{location}`: give `{as_ws}` as --url")
    }
}

/// The hint for a connection that failed below HTTP (TLS, or an answer that is not HTTP).
fn for_transport_error(err: &WsError, progress: &Progress) -> Option<&'static str> {
    // Whatever the connection then died of (an alert, a reset, a close during or just after
    // the handshake), a server that asked for a certificate this client has none of refused it.
    // (Only past the TCP connection, before any answer: a server that asks for a certificate
    // without requiring one answers the handshake.)
    let refused_in_tls = progress.stage != Stage::Tcp && progress.reply.is_empty();
    if refused_in_tls && matches!(err, WsError::Io(_) | WsError::Tls(_)) {
        if crate::tls::client_certificate_asked() {
            return Some(CLIENT_CERT);
        }
        if crate::tls::client_key_unusable() {
            return Some(CLIENT_KEY_UNUSABLE);
        }
    }
    // A server that takes no certificate it was shown says so by an alert, which TLS 1.3
    // delivers after the client's side of the handshake is done: at the first read, in any
    // stage, before any answer.
    if progress.reply.is_empty()
        && crate::tls::client_certificate_shown()
        && refuses_a_certificate(err)
    {
        return Some(CLIENT_CERT_REFUSED);
    }
    // One that refuses it without an alert (Python's asyncio and uvloop) ends the connection:
    // an end of file or a reset, in the TLS handshake (TLS 1.2) or at the first read.
    // (Not once the server has answered a handshake after it was shown the certificate: it
    // took it, and a connection it drops later is dropped for another reason.)
    if refused_in_tls
        && crate::tls::client_certificate_shown()
        && !crate::tls::client_certificate_taken()
        && ended_silently(err)
    {
        return Some(CLIENT_CERT_DROPPED);
    }
    match err {
        WsError::AttackAttempt => Some(OVERSIZED_ANSWER),
        WsError::Protocol(ProtocolError::InvalidHeader(name))
            if **name == tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_EXTENSIONS =>
        {
            Some(UNASKED_EXTENSION)
        }
        WsError::Protocol(ProtocolError::SecWebSocketSubProtocolError(
            SubProtocolError::ServerSentSubProtocolNoneRequested,
        )) => Some(UNASKED_SUBPROTOCOL),
        WsError::Protocol(ProtocolError::HttparseError(httparse::Error::TooManyHeaders)) => {
            Some(TOO_MANY_HEADERS)
        }
        WsError::Protocol(ProtocolError::HttparseError(_)) if is_tls_record(&progress.reply) => {
            Some(USE_WSS)
        }
        WsError::Io(io) if progress.stage == Stage::Tls => {
            if matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ) {
                return Some(CLOSED_IN_TLS);
            }
            match io.get_ref()?.downcast_ref::<rustls::Error>()? {
                rustls::Error::InvalidMessage(InvalidMessage::InvalidContentType) => Some(USE_WS),
                rustls::Error::InvalidCertificate(cert) => Some(crate::tls::certificate_hint(cert)),
                rustls::Error::InvalidMessage(InvalidMessage::HandshakePayloadTooLarge) => {
                    Some(CHAIN_TOO_LARGE)
                }
                _ => None,
            }
        }
        WsError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionReset => Some(RESET),
        // The connection ended (a FIN, or a reset read as the end) before the answer's headers
        // did: tungstenite says only "Handshake not finished".
        WsError::Protocol(ProtocolError::HandshakeIncomplete) => Some(CLOSED_IN_HANDSHAKE),
        _ => None,
    }
}

/// Whether `err` is a TLS alert by which a server refuses the certificate it was shown
/// (`decrypt_error`: a signature in its chain did not verify, as OpenSSL and rustls say it of a
/// certificate whose issuer's name matches a CA the server trusts but not its key).
fn refuses_a_certificate(err: &WsError) -> bool {
    use rustls::AlertDescription as A;
    let alert = match err {
        WsError::Tls(tokio_tungstenite::tungstenite::error::TlsError::Rustls(e)) => match &**e {
            rustls::Error::AlertReceived(a) => Some(*a),
            _ => None,
        },
        WsError::Io(io) => match io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::AlertReceived(a)) => Some(*a),
            _ => None,
        },
        _ => None,
    };
    matches!(
        alert,
        Some(
            A::BadCertificate
                | A::UnsupportedCertificate
                | A::CertificateRevoked
                | A::CertificateExpired
                | A::CertificateUnknown
                | A::UnknownCA
                | A::AccessDenied
                | A::CertificateRequired
                | A::DecryptError
        )
    )
}

/// Whether `err` is the connection ending without a word: an end of file (rustls' "peer
/// closed connection without sending TLS close_notify", "tls handshake eof"), a reset, or the
/// end before the handshake's answer.
fn ended_silently(err: &WsError) -> bool {
    use std::io::ErrorKind as K;
    match err {
        WsError::Io(io) => matches!(
            io.kind(),
            K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe
        ),
        WsError::Protocol(ProtocolError::HandshakeIncomplete) => true,
        _ => false,
    }
}

/// The hint for a connection that ran out of `--connect-timeout`, if there is one.
pub fn for_timeout(progress: &Progress) -> Option<&'static str> {
    match progress.stage {
        Stage::Tcp => None,
        Stage::Tls => Some(SILENT_IN_TLS),
        // A bare "took longer than --connect-timeout" did not say that the connection was made
        // (the QA pass of 2026-12-07).
        Stage::WebSocket => Some(SILENT_IN_UPGRADE),
    }
}

/// Whether `bytes` start a TLS record: a handshake (22) or an alert (21) of TLS 1.x. A TLS
/// server answers an HTTP request with an alert, or closes.
fn is_tls_record(bytes: &[u8]) -> bool {
    matches!(bytes, [21 | 22, 3, 0..=4, ..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{
        CA_AS_SERVER, CERT_REFUSED, EXPIRED, WEAK_SIGNATURE, WRONG_NAME, WRONG_PURPOSE,
    };
    use rustls::CertificateError;

    fn progress(stage: Stage, reply: &[u8]) -> Progress {
        Progress {
            stage,
            reply: reply.to_vec(),
        }
    }

    /// The hint for an upgrade refused with `status` (and a `Location`, if given).
    fn http_hint(status: u16, location: Option<&str>) -> Option<Cow<'static, str>> {
        let mut response = tokio_tungstenite::tungstenite::http::Response::builder();
        if let Some(location) = location {
            response = response.header("Location", location);
        }
        let response = response.status(status).body(None).unwrap();
        for_error(&WsError::Http(Box::new(response)), &Progress::default())
    }

    fn rustls_io(err: rustls::Error) -> WsError {
        WsError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, err))
    }

    /// A connection that ended without a word (an end of file, a reset, the end before the
    /// handshake's answer) is told apart from one that said why.
    #[test]
    fn a_connection_that_ended_silently_is_told_apart() {
        use std::io::{Error, ErrorKind};
        for kind in [ErrorKind::UnexpectedEof, ErrorKind::ConnectionReset] {
            assert!(ended_silently(&WsError::Io(Error::from(kind))));
        }
        assert!(ended_silently(&WsError::Protocol(
            ProtocolError::HandshakeIncomplete
        )));
        assert!(!ended_silently(&rustls_io(rustls::Error::AlertReceived(
            rustls::AlertDescription::UnknownCA
        ))));
        assert!(!ended_silently(&WsError::Io(Error::from(
            ErrorKind::ConnectionRefused
        ))));
    }

    /// The alerts by which a server refuses a certificate it was shown are told apart from the
    /// rest (a protocol version, a handshake failure), however the library carries them.
    #[test]
    fn a_certificate_alert_is_a_refused_client_certificate() {
        use rustls::AlertDescription as A;
        for alert in [
            A::UnknownCA,
            A::BadCertificate,
            A::CertificateRequired,
            A::AccessDenied,
            A::DecryptError,
        ] {
            assert!(refuses_a_certificate(&rustls_io(
                rustls::Error::AlertReceived(alert)
            )));
            let tls = WsError::Tls(tokio_tungstenite::tungstenite::error::TlsError::Rustls(
                Box::new(rustls::Error::AlertReceived(alert)),
            ));
            assert!(refuses_a_certificate(&tls), "{alert:?}");
        }
        for alert in [A::ProtocolVersion, A::HandshakeFailure, A::InternalError] {
            assert!(!refuses_a_certificate(&rustls_io(
                rustls::Error::AlertReceived(alert)
            )));
        }
    }

    #[test]
    fn an_oversized_handshake_answer_is_said_in_words_not_the_librarys_alarm() {
        let hint = |err| for_error(&err, &progress(Stage::WebSocket, b"HTTP/1.1 101"));
        assert_eq!(
            hint(WsError::AttackAttempt).as_deref(),
            Some(OVERSIZED_ANSWER)
        );
        let many = WsError::Protocol(ProtocolError::HttparseError(
            httparse::Error::TooManyHeaders,
        ));
        assert_eq!(hint(many).as_deref(), Some(TOO_MANY_HEADERS));
        let cut = WsError::Protocol(ProtocolError::HandshakeIncomplete);
        assert_eq!(hint(cut).as_deref(), Some(CLOSED_IN_HANDSHAKE));
    }

    #[test]
    fn a_refused_upgrade_says_what_to_check_by_its_status() {
        let refused = |status: u16| http_hint(status, None);
        assert_eq!(refused(404).as_deref(), Some(NO_ENDPOINT));
        assert_eq!(refused(200).as_deref(), Some(NO_ENDPOINT));
        assert_eq!(refused(405).as_deref(), Some(NO_ENDPOINT));
        assert_eq!(refused(401).as_deref(), Some(NOT_AUTHORISED));
        assert_eq!(refused(403).as_deref(), Some(NOT_AUTHORISED));
        assert_eq!(
            refused(500).as_deref(),
            Some(SERVER_FAILED),
            "a server error sends the user to its log"
        );
        assert_eq!(
            refused(418),
            None,
            "a status with no known cause has no hint"
        );
        // Plain HTTP to a TLS port, as nginx (and the mock) answer it: use wss://.
        let plain_to_tls = tokio_tungstenite::tungstenite::http::Response::builder()
            .status(400)
            .body(Some(
                b"<center>The plain HTTP request was sent to HTTPS port</center>".to_vec(),
            ))
            .unwrap();
        assert_eq!(
            for_error(&WsError::Http(Box::new(plain_to_tls)), &Progress::default()).as_deref(),
            Some(PLAIN_TO_TLS)
        );
        assert_eq!(refused(400), None, "a 400 of another cause");
        // A rate limit (the QA pass of 2026-12-07: a bare "429 Too Many Requests"), with the
        // server's Retry-After when it gave one.
        assert!(refused(429)
            .unwrap()
            .contains("rate-limiting connections: run fewer sessions"));
        let response = tokio_tungstenite::tungstenite::http::Response::builder()
            .header("Retry-After", "30")
            .status(429)
            .body(None)
            .unwrap();
        let hint = for_error(&WsError::Http(Box::new(response)), &Progress::default()).unwrap();
        assert!(hint.contains("(Retry-After: 30)"), "{hint}");
    }

    #[test]
    fn a_redirect_names_its_url_in_websocket_terms() {
        let redirect_to =
            |status: u16, location: Option<&str>| http_hint(status, location).unwrap().into_owned();
        let hint = redirect_to(301, Some("https://asr.example.test/ws"));
        assert!(
            hint.contains("redirects the handshake to `https://asr.example.test/ws`: give `wss://asr.example.test/ws` as --url"),
            "{hint}"
        );
        let hint = redirect_to(307, Some("http://10.0.0.2:8000/v1/realtime"));
        assert!(
            hint.contains("give `ws://10.0.0.2:8000/v1/realtime` as --url"),
            "{hint}"
        );
        let hint = redirect_to(308, Some("wss://other.test/"));
        assert!(
            hint.ends_with("to `wss://other.test/`: give that as --url"),
            "{hint}"
        );
        let hint = redirect_to(302, None);
        assert!(hint.contains("names no URL"), "{hint}");
        // A proxy keeps the query, and with it a key given in --url: it is left out.
        let hint = redirect_to(
            301,
            Some("https://h.test/v1/realtime?api-key=sk-SECRET&x=1"),
        );
        assert!(!hint.contains("SECRET"), "{hint}");
        assert!(
            hint.contains("give `wss://h.test/v1/realtime?api-key=<redacted>&x=1` as --url"),
            "{hint}"
        );
        let hint = redirect_to(308, Some("/v1/realtime/"));
        assert!(
            hint.ends_with("to the path `/v1/realtime/`: give --url with that path"),
            "{hint}"
        );
        let hint = redirect_to(302, Some(&format!("https://h.test/{}", "a".repeat(400))));
        assert!(hint.contains("a URL of 415 characters"), "{hint}");
    }

    #[test]
    fn a_tls_alert_in_answer_to_a_plain_handshake_says_use_wss() {
        let err = WsError::Protocol(ProtocolError::HttparseError(httparse::Error::Version));
        let alert = [21, 3, 3, 0, 2, 2, 50];
        assert_eq!(
            for_error(&err, &progress(Stage::WebSocket, &alert)).as_deref(),
            Some(USE_WSS)
        );
        assert_eq!(
            for_error(&err, &progress(Stage::WebSocket, b"HTTX/1.1 200")).as_deref(),
            None,
            "a reply that is not TLS either gets no guess"
        );
    }

    #[test]
    fn a_reply_that_is_not_tls_to_a_tls_handshake_says_use_ws() {
        let err = rustls_io(rustls::Error::InvalidMessage(
            InvalidMessage::InvalidContentType,
        ));
        assert_eq!(
            for_error(&err, &progress(Stage::Tls, b"")).as_deref(),
            Some(USE_WS)
        );
        let eof = WsError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "tls handshake eof",
        ));
        assert_eq!(
            for_error(&eof, &progress(Stage::Tls, b"")).as_deref(),
            Some(CLOSED_IN_TLS)
        );
        assert_eq!(for_timeout(&progress(Stage::Tls, b"")), Some(SILENT_IN_TLS));
        assert_eq!(
            for_timeout(&progress(Stage::WebSocket, b"")),
            Some(SILENT_IN_UPGRADE)
        );
        assert_eq!(for_timeout(&progress(Stage::Tcp, b"")), None);
    }

    #[test]
    fn an_untrusted_certificate_names_ca_file_and_insecure() {
        let err = rustls_io(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer,
        ));
        let hint = for_error(&err, &progress(Stage::Tls, b"")).unwrap();
        assert!(
            hint.contains("not trusted")
                && hint.contains("--ca-file")
                && hint.contains("--insecure"),
            "{hint}"
        );
        // `openssl req -x509`'s certificate given to --ca-file is trusted, but is a CA's:
        // "give the CA with --ca-file" would send the user round in a circle.
        let ca = rustls_io(rustls::Error::InvalidCertificate(CertificateError::Other(
            rustls::OtherError(std::sync::Arc::new(std::io::Error::other(
                "CaUsedAsEndEntity",
            ))),
        )));
        assert_eq!(
            for_error(&ca, &progress(Stage::Tls, b"")).as_deref(),
            Some(CA_AS_SERVER)
        );
        for cert in [CertificateError::Expired, CertificateError::NotValidYet] {
            let err = rustls_io(rustls::Error::InvalidCertificate(cert));
            assert_eq!(
                for_error(&err, &progress(Stage::Tls, b"")).as_deref(),
                Some(EXPIRED)
            );
        }
        let reset = WsError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(
            for_error(&reset, &progress(Stage::Tls, b"")).as_deref(),
            Some(CLOSED_IN_TLS)
        );
        let name = rustls_io(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName,
        ));
        assert_eq!(
            for_error(&name, &progress(Stage::Tls, b"")).as_deref(),
            Some(WRONG_NAME)
        );
        // Refusals that trusting its CA would not mend are not sent to --ca-file (the QA pass
        // of 2026-12-07: SHA-1, RSA-1024 and a clientAuth-only certificate all were).
        for (cert, hint) in [
            (CertificateError::BadSignature, WEAK_SIGNATURE),
            (CertificateError::InvalidPurpose, WRONG_PURPOSE),
            (CertificateError::Revoked, CERT_REFUSED),
        ] {
            let err = rustls_io(rustls::Error::InvalidCertificate(cert));
            assert_eq!(
                for_error(&err, &progress(Stage::Tls, b"")).as_deref(),
                Some(hint)
            );
        }
        let chain = rustls_io(rustls::Error::InvalidMessage(
            InvalidMessage::HandshakePayloadTooLarge,
        ));
        assert_eq!(
            for_error(&chain, &progress(Stage::Tls, b"")).as_deref(),
            Some(CHAIN_TOO_LARGE)
        );
    }

    /// The body of a refusal is the server's reason (the QA pass of 2026-12-07: "HTTP error: 400
    /// Bad Request" alone, the gateway's `{"error":"…"}` lost); an HTML error page is not.
    #[test]
    fn an_http_refusal_says_what_its_body_says_unless_it_is_a_page() {
        let refusal = |body: &[u8]| {
            let response = tokio_tungstenite::tungstenite::http::Response::builder()
                .status(401)
                .body(Some(body.to_vec()))
                .unwrap();
            error_text(&WsError::Http(Box::new(response)))
        };
        assert_eq!(
            refusal(b"{\"detail\": \"Invalid API key\"}\r\n"),
            r#"HTTP error: 401 Unauthorized (the server said: {"detail": "Invalid API key"})"#
        );
        assert_eq!(
            refusal(b"<html>\n<head><title>401</title></head></html>"),
            "HTTP error: 401 Unauthorized"
        );
        assert_eq!(refusal(b" \n"), "HTTP error: 401 Unauthorized");
        assert!(refusal(&[b'x'; 1000]).ends_with("xx…"), "cut as any error");
    }

    /// A server that names a subprotocol the client did not offer (the QA pass of 2026-12-07:
    /// tungstenite's words alone); offering it with --header lets the handshake through.
    #[test]
    fn an_unasked_subprotocol_names_the_header_that_offers_it() {
        let err = WsError::Protocol(ProtocolError::SecWebSocketSubProtocolError(
            SubProtocolError::ServerSentSubProtocolNoneRequested,
        ));
        assert_eq!(
            for_error(&err, &progress(Stage::WebSocket, b"HTTP/1.1 101")).as_deref(),
            Some(UNASKED_SUBPROTOCOL)
        );
    }

    #[test]
    fn a_long_error_is_cut_to_300_characters() {
        let err = WsError::Io(std::io::Error::other("é".repeat(400)));
        let text = error_text(&err);
        assert_eq!(text.chars().count(), 301, "{text}");
        assert!(text.starts_with("IO error: éé") && text.ends_with('…'));
        let short = WsError::Io(std::io::Error::other("short"));
        assert_eq!(error_text(&short), "IO error: short");
    }
}
