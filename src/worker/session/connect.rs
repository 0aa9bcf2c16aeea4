//! Connecting a session: the TCP connection, TLS for `wss://`, the WebSocket handshake with the
//! run's headers (`--header`, `--api-key`, the protocol's own), and admission — a full server
//! refuses the handshake with HTTP 503, and the session retries a few times before it counts
//! as rejected.

mod hint;

use super::wire::{after_response, Conn, Recording, Ws};
use super::{End, SessionCtx};
use crate::clock::monotonic_s;
use crate::sys::arrival::TimedTcp;
use crate::trace::format::json_string;
use crate::trace::SessionTrace;
use std::time::Duration;
use tokio::io::BufReader;
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::error::{ProtocolError, TlsError, UrlError};
use tokio_tungstenite::tungstenite::handshake::machine::TryParse as _;
use tokio_tungstenite::tungstenite::http::{
    HeaderMap, HeaderName, HeaderValue, Response, StatusCode,
};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Error as WsError;

/// How a worker's sessions connect, made once per worker: the TLS configuration (loading the
/// system's roots takes milliseconds) and the handshake headers.
pub struct Dialer {
    /// The URL connected to: `--url` with its credential parameters, which every message
    /// and file leaves out (they name the session's `url`).
    pub url: String,
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// `(name, value)`; the values may be secrets and are never logged.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Dialer {
    pub fn new(
        settings: &crate::options::Settings,
        protocol: &dyn crate::protocol::ClientProtocol,
    ) -> anyhow::Result<Dialer> {
        let c = &settings.connection;
        let tls = if settings.url.starts_with("wss://") {
            let identity = c
                .client_cert
                .as_deref()
                .zip(c.client_key.as_deref())
                .map(|(cert, key)| crate::tls::Identity::client(cert, key));
            Some(crate::tls::client_config(
                c.insecure,
                c.ca_file.as_deref(),
                identity,
            )?)
        } else {
            None
        };
        let mut headers = Vec::new();
        let named = protocol
            .headers()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .chain(c.handshake_headers());
        for (name, value) in named {
            // Checked by the options already; a header that still does not parse names itself
            // (never its value).
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| anyhow::anyhow!("--header `{name}` is not a header name"))?;
            let value = HeaderValue::from_str(&value)
                .map_err(|_| anyhow::anyhow!("--header {name}: the value cannot be sent"))?;
            headers.push((name, value));
        }
        Ok(Dialer {
            url: c.connect_url(&settings.url),
            tls,
            headers,
        })
    }
}

/// What one read from the socket may take under TLS: rustls reads the socket a record at a time,
/// and the replies to one packet (about 10 kB) would take several system calls; the buffer under
/// it makes that one. Plain connections read straight into the session's frame buffer
/// ([`super::wire`]).
const SOCKET_READ_BYTES: usize = 64 << 10;
/// tungstenite's buffer for the handshake response (it makes the handshake only).
const HANDSHAKE_BUFFER_BYTES: usize = 8 << 10;

/// Connects, retrying refusals with HTTP 503. The trace gets an `admission` line for each
/// refusal, in the shape sglang-omni's client writes (`connection_denied`, `exhausted` on the
/// last); an admitted session needs none (its receipts say `admitted`).
pub(super) async fn connect(ctx: &SessionCtx, trace: &mut SessionTrace) -> Result<Ws, End> {
    let s = &ctx.settings;
    let config = WebSocketConfig::default()
        .read_buffer_size(HANDSHAKE_BUFFER_BYTES)
        .max_message_size(Some(s.max_message_bytes as usize))
        .max_frame_size(Some(s.max_message_bytes as usize));
    let timeout = Duration::from_secs_f64(s.connect_timeout_s);
    let attempts = s.admission_retries + 1;
    for attempt in 1..=attempts {
        let t_s = monotonic_s();
        let mut progress = hint::Progress::default();
        let connecting = connect_ws_with(
            &ctx.dialer.url,
            &ctx.dialer,
            config,
            s.send_buffer_bytes,
            &mut progress,
        );
        let why = match tokio::time::timeout(timeout, connecting).await {
            Ok(Ok(ws)) => return Ok(ws),
            Ok(Err(WsError::Http(response))) if response.status().as_u16() == 503 => {
                let exhausted = if attempt == attempts {
                    r#","exhausted":true"#
                } else {
                    ""
                };
                trace.admission(
                    t_s,
                    &format!(
                        r#"{{"type":"connection_denied","http_status":503,"attempt":{attempt}{exhausted}}}"#
                    ),
                );
                if attempt < attempts {
                    tokio::time::sleep(Duration::from_millis(s.admission_retry_interval_ms)).await;
                }
                continue;
            }
            Ok(Err(err)) => with_hint(
                format!("cannot connect to {}: {}", ctx.url, hint::error_text(&err)),
                hint::for_error(&err, &progress).as_deref(),
            ),
            Err(_) => with_hint(
                format!(
                    "connecting to {} took longer than --connect-timeout {}s",
                    ctx.url, s.connect_timeout_s
                ),
                hint::for_timeout(&progress),
            ),
        };
        trace.error(t_s, &format!(r#"{{"message":{}}}"#, json_string(&why)));
        return Err(End::Failed(why));
    }
    Err(End::Rejected(format!(
        "the server refused the connection with HTTP 503 on all {attempts} attempts"
    )))
}

/// How long the probe before a run gives the rest of its handshake, once its TCP connection is
/// open, and the server's answer to its close.
const PROBE_GRACE: Duration = Duration::from_secs(2);

/// Whether the server at `--url` can be reached at all, asked once before a run: `Err` (what
/// the system said) when the TCP connection cannot be opened within `connect_timeout`. Once
/// it is open, the probe makes the handshake the sessions make and closes it with 1000, as a
/// client that changed its mind: a connection that ends before its request is what WebSocket
/// servers log as a failed handshake (Python `websockets`, which Fun-ASR's server runs on, at
/// ERROR with a traceback), one in the server's log for every run and sweep level. What goes
/// wrong after the TCP connection (TLS, a refusal, an answer slower than [`PROBE_GRACE`]) is
/// the sessions' to meet and say in full; the probe lets it be. (The probe is a session to the
/// server for that moment, and counts in its statistics as one.)
pub async fn probe(dialer: &Dialer, connect_timeout: Duration) -> Result<(), Unreachable> {
    let socket = match tokio::time::timeout(connect_timeout, open_tcp(&dialer.url, None)).await {
        Ok(Ok(socket)) => socket,
        Ok(Err(WsError::Io(err))) => return Err(tcp_failure(&err)),
        Ok(Err(err)) => return Err(Unreachable::NoConnection(err.to_string())),
        Err(_) => {
            return Err(Unreachable::NoConnection(format!(
                "no address of the host took the connection within --connect-timeout {}s",
                connect_timeout.as_secs_f64()
            )))
        }
    };
    let config = WebSocketConfig::default().read_buffer_size(HANDSHAKE_BUFFER_BYTES);
    let mut progress = hint::Progress::default();
    let mut answered = false;
    let shown_before = crate::tls::client_certificates_shown();
    let goodbye = async {
        let mut ws = handshake_on(socket, &dialer.url, dialer, config, &mut progress).await?;
        answered = true;
        let close = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        ws.close(Some(close)).await?;
        // The server's close in answer, then the end of the connection, which the server makes
        // (as the protocol has it) once its handler is done: a server that admits few
        // sessions has given the probe's place back before the sessions ask for theirs.
        while let Some(message) = futures_util::StreamExt::next(&mut ws).await {
            message?;
        }
        Ok::<(), WsError>(())
    };
    let ended = tokio::time::timeout(PROBE_GRACE, goodbye).await;
    // A server that asked for a client certificate and then ended the connection before the
    // handshake's answer refuses every session as it refused the probe (by an alert, a reset
    // or a close, by TLS version): said now, one way. (One that only asks, nginx's
    // `ssl_verify_client optional`, answers; a slow answer or a refusal is the sessions'.)
    let transport_failed = matches!(&ended, Ok(Err(WsError::Io(_) | WsError::Tls(_))));
    if !answered && transport_failed && crate::tls::client_certificate_asked() {
        return Err(Unreachable::Reset(hint::CLIENT_CERT.to_string()));
    }
    if !answered && transport_failed && crate::tls::client_key_unusable() {
        return Err(Unreachable::Reset(hint::CLIENT_KEY_UNUSABLE.to_string()));
    }
    // A connection reset before the server answered the handshake (a server that takes
    // connections only to drop them) cannot carry a session either: said now, not as every
    // session's failure (a reset once the connect returned passed the probe).
    if let Ok(Err(WsError::Io(err))) = &ended {
        let dropped = matches!(
            err.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        );
        // (Unless this connection showed it a client certificate: one that refuses it silently
        // resets, and the sessions say so with what to check, as they do of a refusal by an
        // alert.)
        let shown_here = crate::tls::client_certificates_shown() > shown_before;
        if dropped && !answered && !shown_here {
            return Err(tcp_failure(&std::io::Error::from(
                std::io::ErrorKind::ConnectionReset,
            )));
        }
    }
    Ok(())
}

/// Why the probe before a run could not talk to the server, in words to put after the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    /// No TCP connection opened: nothing listens, or the host is not there.
    NoConnection(String),
    /// Something listens, and took the connection only to reset it: "start the server" would
    /// send the user to the wrong place.
    Reset(String),
}

/// Why the probe's TCP connection failed: the system's words (without tungstenite's "IO error: "
/// before them), and for a reset what it means.
fn tcp_failure(err: &std::io::Error) -> Unreachable {
    if err.kind() == std::io::ErrorKind::ConnectionReset {
        Unreachable::Reset(format!("{err}: {}", hint::RESET))
    } else {
        Unreachable::NoConnection(err.to_string())
    }
}

/// `message; hint`, or the message alone.
fn with_hint(message: String, hint: Option<&str>) -> String {
    match hint {
        Some(hint) => format!("{message}; {hint}"),
        None => message,
    }
}

/// Opens the TCP connection (without Nagle's delay: every packet leaves when it is due; with
/// `--send-buffer-bytes`, on a send buffer of that size), makes the TLS handshake for `wss://`
/// (over a read buffer of [`SOCKET_READ_BYTES`]) and tungstenite's WebSocket handshake, then
/// hands the stream, with whatever the server sent behind its `101`, to [`Ws`].
#[cfg(test)]
pub(super) async fn connect_ws(
    url: &str,
    dialer: &Dialer,
    config: WebSocketConfig,
    send_buffer_bytes: Option<u32>,
) -> Result<Ws, WsError> {
    let mut progress = hint::Progress::default();
    connect_ws_with(url, dialer, config, send_buffer_bytes, &mut progress).await
}

/// [`connect_ws`], noting in `progress` how far it got, for the hint of an error or a timeout.
async fn connect_ws_with(
    url: &str,
    dialer: &Dialer,
    config: WebSocketConfig,
    send_buffer_bytes: Option<u32>,
    progress: &mut hint::Progress,
) -> Result<Ws, WsError> {
    let socket = open_tcp(url, send_buffer_bytes).await?;
    handshake_on(socket, url, dialer, config, progress).await
}

/// The TCP connection to `url`'s host (without Nagle's delay; with `--send-buffer-bytes`, on a
/// send buffer of that size).
async fn open_tcp(url: &str, send_buffer_bytes: Option<u32>) -> Result<TcpStream, WsError> {
    let authority = crate::options::url_authority(url).ok_or(WsError::Url(UrlError::NoHostName))?;
    let socket = match send_buffer_bytes {
        None => TcpStream::connect(authority).await.map_err(WsError::Io)?,
        Some(bytes) => {
            let addr = tokio::net::lookup_host(authority)
                .await
                .map_err(WsError::Io)?
                .next()
                .ok_or_else(|| WsError::Io(std::io::Error::other("the host has no address")))?;
            let socket = if addr.is_ipv4() {
                TcpSocket::new_v4()
            } else {
                TcpSocket::new_v6()
            }
            .map_err(WsError::Io)?;
            socket.set_send_buffer_size(bytes).map_err(WsError::Io)?;
            socket.connect(addr).await.map_err(WsError::Io)?
        }
    };
    socket.set_nodelay(true).map_err(WsError::Io)?;
    Ok(socket)
}

/// TLS for `wss://` and the WebSocket handshake over a connected `socket`.
async fn handshake_on(
    socket: TcpStream,
    url: &str,
    dialer: &Dialer,
    config: WebSocketConfig,
    progress: &mut hint::Progress,
) -> Result<Ws, WsError> {
    let mut request = url.into_client_request()?;
    for (name, value) in &dialer.headers {
        request.headers_mut().append(name.clone(), value.clone());
    }
    let conn = match &dialer.tls {
        None => Conn::Plain(TimedTcp::new(socket)),
        Some(tls) => {
            progress.stage = hint::Stage::Tls;
            // rustls wants an IPv6 address without its brackets.
            let host = request
                .uri()
                .host()
                .ok_or(WsError::Url(UrlError::NoHostName))?;
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            let name = rustls_pki_types::ServerName::try_from(host.to_string())
                .map_err(|_| WsError::Tls(TlsError::InvalidDnsName))?;
            let stream = BufReader::with_capacity(SOCKET_READ_BYTES, TimedTcp::new(socket));
            let tls = tokio_rustls::TlsConnector::from(tls.clone())
                .connect(name, stream)
                .await
                .map_err(WsError::Io)?;
            Conn::Tls(Box::new(tls))
        }
    };
    progress.stage = hint::Stage::WebSocket;
    let mut recording = Recording {
        inner: conn,
        seen: Vec::new(),
    };
    // Lent, not given, to the handshake: after a failure what the server sent is still here.
    let handshake =
        tokio_tungstenite::client_async_with_config(request, &mut recording, Some(config)).await;
    if dialer.tls.is_some() && matches!(&handshake, Ok(_) | Err(WsError::Http(_))) {
        crate::tls::note_handshake_answered();
    }
    let response = match handshake {
        Ok((_, response)) => response,
        Err(err) => {
            progress.reply = recording.seen.iter().take(16).copied().collect();
            return Err(match err {
                WsError::Protocol(ProtocolError::WrongHttpVersion) => {
                    http_10_refusal(&recording.seen).unwrap_or(err)
                }
                err => err,
            });
        }
    };
    // The client asks for no extension; a server that names one anyway (permessage-deflate)
    // would send frames this client cannot read. RFC 6455 §4.1: the client fails the
    // connection. (tungstenite checks the subprotocol, not this.)
    if response
        .headers()
        .get_all(tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_EXTENSIONS)
        .iter()
        .any(|v| !v.as_bytes().trim_ascii().is_empty())
    {
        return Err(WsError::Protocol(ProtocolError::InvalidHeader(Box::new(
            tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_EXTENSIONS,
        ))));
    }
    let Recording { inner, seen } = recording;
    let tail = after_response(&seen)?;
    Ok(Ws::new(
        inner,
        tail,
        config.max_message_size.unwrap_or(usize::MAX),
    ))
}

/// The HTTP error an `HTTP/1.0` answer to the upgrade says, which tungstenite reports as a wrong
/// version before it reads the status: a proxy or a small server that refuses with
/// `HTTP/1.0 503` (Python's `http.server` answers so) is refusing admission, and its 503 is
/// retried and counted as a refusal like any other. Its headers are read by tungstenite's own
/// parser, as an HTTP/1.1 answer's are, so that the hint reads them alike (a redirect's
/// `Location`); a head cut short or that does not parse leaves the status alone to tell.
/// `None` for what is not such an answer, and for a `101` (no upgrade happens over HTTP/1.0:
/// the version error stands).
fn http_10_refusal(seen: &[u8]) -> Option<WsError> {
    let line_end = seen.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&seen[..line_end]).ok()?;
    let rest = line.strip_prefix("HTTP/1.0 ")?;
    let status = StatusCode::from_bytes(rest.get(..3)?.as_bytes()).ok()?;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return None;
    }
    let mut response = Response::builder().status(status).body(None).ok()?;
    if let Ok(Some((_, headers))) = HeaderMap::try_parse(&seen[line_end + 2..]) {
        *response.headers_mut() = headers;
    }
    Some(WsError::Http(Box::new(response)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_tungstenite::tungstenite::Message;

    #[test]
    fn an_http_10_status_is_read_as_the_error_it_is() {
        let status = |seen: &[u8]| match http_10_refusal(seen) {
            Some(WsError::Http(response)) => Some(response.status().as_u16()),
            _ => None,
        };
        assert_eq!(
            status(b"HTTP/1.0 503 Service Unavailable\r\nServer: x\r\n\r\nbusy"),
            Some(503)
        );
        assert_eq!(status(b"HTTP/1.0 404 File not found\r\n"), Some(404));
        assert_eq!(status(b"HTTP/1.0 101 Switching Protocols\r\n\r\n"), None);
        assert_eq!(status(b"HTTP/0.9 503 x\r\n"), None);
        assert_eq!(status(b"HTTP/1.0 5x3 x\r\n"), None);
        assert_eq!(status(b"HTTP/1.0 503"), None, "no whole status line yet");
    }

    /// Its headers are read as an HTTP/1.1 answer's: a redirect's `Location` reaches the hint.
    #[test]
    fn an_http_10_answer_keeps_its_headers() {
        let read = |seen: &[u8]| match http_10_refusal(seen) {
            Some(WsError::Http(response)) => {
                let location = response.headers().get("location");
                let location = location.map(|v| v.to_str().unwrap().to_string());
                Some((response.status().as_u16(), location))
            }
            _ => None,
        };
        let head = b"HTTP/1.0 301 Moved Permanently\r\nLocation: ws://h/v1/realtime\r\n\r\n";
        assert_eq!(read(head), Some((301, Some("ws://h/v1/realtime".into()))));
        let cut = b"HTTP/1.0 301 Moved Permanently\r\nLocation: ws://h/";
        assert_eq!(
            read(cut),
            Some((301, None)),
            "a head cut short: the status alone"
        );
    }

    /// A server that answers every upgrade with `reply` and closes.
    async fn answering(reply: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/v1/realtime", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        url
    }

    #[test]
    fn a_refusal_over_http_10_is_an_http_error_not_a_version_error() {
        block_on(async {
            let dialer = dialer(String::new());
            let config = WebSocketConfig::default();
            let url =
                answering("HTTP/1.0 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
                    .await;
            match connect_ws(&url, &dialer, config, None).await {
                Err(WsError::Http(response)) => assert_eq!(response.status(), 503),
                Err(err) => panic!("expected HTTP 503, got {err}"),
                Ok(_) => panic!("expected HTTP 503, got a connection"),
            }
            let url = answering("HTTP/1.0 101 Switching Protocols\r\n\r\n").await;
            match connect_ws(&url, &dialer, config, None).await {
                Err(WsError::Protocol(ProtocolError::WrongHttpVersion)) => {}
                Err(err) => panic!("expected the version error, got {err}"),
                Ok(_) => panic!("an upgrade over HTTP/1.0 was taken"),
            }
        });
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(future)
    }

    /// A server that names an extension the client did not offer: the client fails the
    /// connection (RFC 6455 §4.1), with the hint that says why, rather than take frames it
    /// cannot read.
    #[test]
    // tungstenite's callback type: its error is an HTTP response.
    #[allow(clippy::result_large_err)]
    fn an_extension_the_client_did_not_ask_for_fails_the_handshake() {
        block_on(async {
            use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("ws://{}/v1/realtime", listener.local_addr().unwrap());
            tokio::spawn(async move {
                let (stream, _) = listener.accept().await.unwrap();
                let deflate = |_: &Request, mut response: Response| {
                    response.headers_mut().insert(
                        "sec-websocket-extensions",
                        "permessage-deflate".parse().unwrap(),
                    );
                    Ok(response)
                };
                let _ = tokio_tungstenite::accept_hdr_async(stream, deflate).await;
            });
            let err = connect_ws(&url, &dialer(url.clone()), WebSocketConfig::default(), None)
                .await
                .err()
                .expect("the handshake fails");
            let hint = hint::for_error(&err, &hint::Progress::default());
            assert_eq!(hint.as_deref(), Some(hint::UNASKED_EXTENSION), "{err}");
        });
    }

    fn dialer(url: String) -> Dialer {
        Dialer {
            url,
            tls: None,
            headers: Vec::new(),
        }
    }

    /// The probe before a run leaves a WebSocket server a whole handshake and a close with
    /// 1000, never a connection that ends before its request (which Python `websockets` logs as
    /// a failed handshake, with a traceback at ERROR).
    #[test]
    fn the_probe_makes_a_whole_handshake_and_closes_it_with_1000() {
        block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("ws://{}/v1/realtime", listener.local_addr().unwrap());
            let server = tokio::spawn(async move {
                let (stream, _) = listener.accept().await.unwrap();
                let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
                let first = futures_util::StreamExt::next(&mut ws).await;
                let _ = futures_util::SinkExt::close(&mut ws).await;
                first
            });
            probe(&dialer(url), Duration::from_secs(5)).await.unwrap();
            match server.await.unwrap() {
                Some(Ok(Message::Close(Some(frame)))) => assert_eq!(frame.code, CloseCode::Normal),
                other => panic!("expected a close with 1000, got {other:?}"),
            }
        });
    }

    #[test]
    fn a_connection_reset_at_once_is_said_as_such_not_as_no_server() {
        use std::io::{Error, ErrorKind};
        let reset = tcp_failure(&Error::from(ErrorKind::ConnectionReset));
        assert!(
            matches!(&reset, Unreachable::Reset(why) if why.contains(hint::RESET)),
            "{reset:?}"
        );
        let refused = tcp_failure(&Error::from(ErrorKind::ConnectionRefused));
        assert!(
            matches!(refused, Unreachable::NoConnection(_)),
            "{refused:?}"
        );
        // A session whose connection is reset before the server answers its handshake gets
        // the same words as its hint.
        let io = WsError::Io(Error::from(ErrorKind::ConnectionReset));
        let progress = hint::Progress {
            stage: hint::Stage::WebSocket,
            reply: Vec::new(),
        };
        assert_eq!(
            hint::for_error(&io, &progress).as_deref(),
            Some(hint::RESET)
        );
    }

    #[test]
    fn the_probe_fails_only_where_no_tcp_connection_opens() {
        block_on(async {
            // Nothing listens on a port that was bound a moment ago.
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let why = probe(
                &dialer(format!("ws://127.0.0.1:{port}/")),
                Duration::from_secs(5),
            )
            .await
            .unwrap_err();
            assert!(
                matches!(&why, Unreachable::NoConnection(w) if w.contains("refused")),
                "{why:?}"
            );
            // A server that resets every connection it takes, before answering: reset, though
            // the TCP connect returned (the probe passed it, and every session failed).
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let resetting = format!("ws://{}/", listener.local_addr().unwrap());
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    // Linger 0: the close is a reset.
                    let _ = stream.set_zero_linger();
                    drop(stream);
                }
            });
            for _ in 0..5 {
                let why = probe(&dialer(resetting.clone()), Duration::from_secs(5))
                    .await
                    .unwrap_err();
                assert!(matches!(&why, Unreachable::Reset(_)), "{why:?}");
            }
            // A refusal of the handshake is the sessions' to meet and say in full.
            let refusing = answering("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n").await;
            probe(&dialer(refusing), Duration::from_secs(5))
                .await
                .unwrap();
            // So is a server that takes the request and never answers: the probe lets it be.
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let silent = format!("ws://{}/", listener.local_addr().unwrap());
            tokio::spawn(async move {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut sink = [0u8; 4096];
                while stream.read(&mut sink).await.is_ok_and(|n| n > 0) {}
            });
            let started = std::time::Instant::now();
            probe(&dialer(silent), Duration::from_secs(300))
                .await
                .unwrap();
            // Bounded by the probe's grace, not by --connect-timeout (a generous bound: this
            // asserts that the wait ends, not how fast).
            assert!(
                started.elapsed() < Duration::from_secs(100),
                "{:?}",
                started.elapsed()
            );
        });
    }
}
