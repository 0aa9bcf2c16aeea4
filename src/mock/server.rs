//! The mock's transport: the accept loop, admission at the WebSocket handshake, and one task per
//! connection that feeds client messages to its [`Session`] and writes the replies.
//!
//! Everything runs as local tasks on one current-thread runtime, so shared state is `Rc`/`Cell`
//! and costs no atomics or locks. A connection that misbehaves at the transport level (bad
//! handshake, oversized message, invalid UTF-8, a vanished peer) ends only its own task.

use super::replies::{Templates, MAX_MESSAGE_BYTES};
use super::session::{Session, Step};
use super::stats::Counters;
use crate::clock;
use crate::protocol::Protocol;
use futures_util::{SinkExt, StreamExt};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

/// A connection that has not finished its handshake by then is dropped, so idle sockets cannot
/// pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the best-effort goodbye to a session that sent an oversized message may take.
const GOODBYE_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause after a failed accept (out of file descriptors, say), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Read buffer per connection: an 80 ms append is about 3.5 KB, and the default 128 KiB would
/// cost 128 MiB at 1024 sessions.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// What every connection task shares.
pub struct Shared {
    /// The protocol served: its path, and the session state machine each connection gets.
    pub protocol: Protocol,
    pub templates: Rc<Templates>,
    pub counters: Rc<Counters>,
    admission: Admission,
    next_session: Cell<u64>,
    /// What the openai and vllm sessions are told.
    pub timed: Rc<super::timed::Behaviour>,
    /// `--tls-cert`: serve wss://.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// The Fun-ASR mock's decode engine (with `--protocol funasr`).
    pub funasr: Option<Rc<super::funasr::Engine>>,
    /// Told when the first session has connected (the `--stall-at` clock starts then).
    pub first_session: Rc<tokio::sync::Notify>,
}

impl Shared {
    pub fn new(
        protocol: Protocol,
        templates: Templates,
        counters: Rc<Counters>,
        max_sessions: Option<u32>,
    ) -> Self {
        Shared {
            protocol,
            templates: Rc::new(templates),
            counters,
            admission: Admission {
                open: Rc::new(Cell::new(0)),
                max: max_sessions,
            },
            next_session: Cell::new(0),
            timed: Rc::new(super::timed::Behaviour::new(
                &crate::cli::MockBehaviourArgs::defaults(),
                crate::protocol::Protocol::Openai,
            )),
            tls: None,
            funasr: None,
            first_session: Rc::new(tokio::sync::Notify::new()),
        }
    }

    /// The sessions open now (admitted and not ended).
    pub fn open_sessions(&self) -> u32 {
        self.admission.open.get()
    }

    /// The openai and vllm sessions' behaviour.
    pub fn with_timed(mut self, timed: super::timed::Behaviour) -> Self {
        self.timed = Rc::new(timed);
        self
    }

    /// Serve wss:// with this configuration.
    pub fn with_tls(mut self, config: std::sync::Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(tokio_rustls::TlsAcceptor::from(config));
        self
    }
}

/// Counts open sessions against `--max-sessions`.
struct Admission {
    open: Rc<Cell<u32>>,
    max: Option<u32>,
}

impl Admission {
    fn try_acquire(&self) -> Option<Slot> {
        let open = self.open.get();
        if self.max.is_some_and(|max| open >= max) {
            return None;
        }
        self.open.set(open + 1);
        Some(Slot {
            open: Rc::clone(&self.open),
        })
    }
}

/// One open session's place under `--max-sessions`, given back when dropped, however the
/// connection ends.
struct Slot {
    open: Rc<Cell<u32>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.set(self.open.get().saturating_sub(1));
    }
}

/// Accepts connections forever; the caller stops it by dropping the future.
pub async fn serve(listener: TcpListener, shared: Rc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                tokio::task::spawn_local(serve_accepted(stream, Rc::clone(&shared)));
            }
            Err(err) => {
                let _ = std::io::Write::write_fmt(
                    &mut std::io::stderr(),
                    format_args!("mock: cannot accept a connection: {err}\n"),
                );
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

fn websocket_config(protocol: Protocol) -> WebSocketConfig {
    let max = match protocol {
        Protocol::Funasr => super::funasr::MAX_MESSAGE_BYTES,
        _ => MAX_MESSAGE_BYTES,
    };
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

fn refusal(status: StatusCode, body: String) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(body));
    *response.status_mut() = status;
    response
}

/// A TCP connection: the TLS handshake first with `--tls-cert`, then the WebSocket.
async fn serve_accepted(stream: TcpStream, shared: Rc<Shared>) {
    // Replies are small and latency is what the client measures: never wait for Nagle.
    let _ = stream.set_nodelay(true);
    match shared.tls.clone() {
        None => {
            if !refused_plain_http(&stream, &shared, false).await {
                serve_connection(stream, shared).await;
            }
        }
        Some(acceptor) => {
            // Plain HTTP (or ws://) to this TLS port is told so, in plain HTTP.
            if refused_plain_http(&stream, &shared, true).await {
                return;
            }
            // A certificate the client refused, or too slow: nothing was opened.
            let accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            if let Ok(Ok(mut tls)) = accepted {
                // Inside TLS, as on a plain port: HTTP (`/health` over https://) is answered,
                // a WebSocket handshake goes on with the head already read.
                if let Some(head) = http_head_over(&mut tls, &shared).await {
                    serve_connection(
                        Prefixed {
                            head,
                            at: 0,
                            inner: tls,
                        },
                        shared,
                    )
                    .await;
                }
            }
        }
    }
}

/// Reads the request head from a stream that cannot be peeked (TLS): `Some(bytes read)` when
/// it is a WebSocket handshake, to be read again; `None` when it was answered as plain HTTP
/// (or the peer sent nothing usable in time).
async fn http_head_over<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    shared: &Shared,
) -> Option<Vec<u8>> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = memchr::memmem::find(&head, b"\r\n\r\n") {
            if asks_for_websocket(&head[..end]) {
                return Some(head);
            }
            let reply = plain_reply(&head[..end], shared);
            let _ = tokio::time::timeout_at(deadline, stream.write_all(reply.as_bytes())).await;
            let _ = tokio::time::timeout_at(deadline, stream.shutdown()).await;
            return None;
        }
        if head.len() >= buf.len() {
            // No end of head within 4 KiB: the WebSocket handshake's to judge (and refuse).
            return Some(head);
        }
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

/// A stream whose first bytes were already read (the request head): they are read again first.
struct Prefixed<S> {
    head: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.at < this.head.len() {
            let n = (this.head.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.head[this.at..this.at + n]);
            this.at += n;
            if this.at == this.head.len() {
                this.head = Vec::new();
                this.at = 0;
            }
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Looks at the request head without taking it: a complete HTTP request that does not ask for
/// a WebSocket (a browser, `curl`, a health check) gets a `400` that says what this is, instead
/// of a closed connection; true when it was answered (or the peer sent nothing and is dropped).
/// Anything else, complete or not, is the WebSocket handshake's to judge.
async fn refused_plain_http(stream: &TcpStream, shared: &Shared, tls: bool) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    loop {
        let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.peek(&mut buf)).await else {
            // Silent for the whole handshake time, or broken: there is nothing to serve.
            return true;
        };
        let head = &buf[..n];
        // A TLS handshake record: the TLS port's to take; on a plain port a client that took
        // it for a wss:// one (a ClientHello never ends in a blank line), answered at once, not
        // left to time out.
        let reply = match (head, tls) {
            ([22, ..], true) => return false,
            ([22, 3, ..], false) => Some(bad_request(
                "this is a plain WebSocket server (ws://), not TLS: connect with ws://\n",
            )),
            _ => match memchr::memmem::find(head, b"\r\n\r\n") {
                // A client that took this wss:// server for a plain one.
                Some(_) if tls => Some(bad_request(
                    "this is a TLS server (wss://, https:// for /health): connect with wss://\n",
                )),
                Some(end) if asks_for_websocket(&head[..end]) => return false,
                Some(end) => Some(plain_reply(&head[..end], shared)),
                None => None,
            },
        };
        if let Some(reply) = reply {
            let _ = tokio::time::timeout_at(deadline, write_all(stream, reply.as_bytes())).await;
            // Take the request: closing with it unread would reset the connection, and a reset
            // can throw away the reply before the client reads it.
            let _ = stream.try_read(&mut buf[..n]);
            return true;
        }
        if n == 0 {
            return true;
        }
        if n == buf.len() {
            // No head in 4 KiB: the WebSocket (or TLS) handshake refuses it.
            return false;
        }
        // The head is not all here yet; peeking again at once would return the same bytes.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A `400 Bad Request` that says `body`, and closes.
fn bad_request(body: &str) -> String {
    format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The whole HTTP answer to a request head that asks for no WebSocket ([`plain_answer`]); a
/// HEAD gets the headers a GET would, and no body.
fn plain_reply(head: &[u8], shared: &Shared) -> String {
    let (status, content_type, body) = plain_answer(head, shared);
    let sent = if head.starts_with(b"HEAD ") {
        ""
    } else {
        body.as_str()
    };
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{sent}",
        body.len()
    )
}

/// The answer to a plain HTTP request (status line, content type, body): `GET /health` is
/// 200, as a readiness check expects of sglang-omni's and vLLM's servers; the native mock's
/// `GET /v1/realtime/capabilities` states what the deployment serves, as sglang-omni's server
/// does (its docs wait for the server with `curl --fail` on it); anything else is a 400 that
/// says what this is.
fn plain_answer(head: &[u8], shared: &Shared) -> (&'static str, &'static str, String) {
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let method = words.next().unwrap_or_default();
    let target = words.next().unwrap_or_default();
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    if method == b"GET" || method == b"HEAD" {
        if path == b"/health" {
            return ("200 OK", "text/plain; charset=utf-8", String::new());
        }
        if path == b"/v1/realtime/capabilities" && shared.protocol == Protocol::Native {
            let body = shared.templates.capabilities_json();
            return ("200 OK", "application/json", body);
        }
    }
    let body = format!(
        "this is a WebSocket server (duplexbench-tui mock, {} protocol on {}): connect with a WebSocket client (Upgrade: websocket)\n",
        shared.protocol.as_str(),
        shared.protocol.path()
    );
    ("400 Bad Request", "text/plain; charset=utf-8", body)
}

/// Whether a request head has `Upgrade: websocket`.
fn asks_for_websocket(head: &[u8]) -> bool {
    head.split(|&b| b == b'\n').any(|line| {
        let line = String::from_utf8_lossy(line).to_ascii_lowercase();
        line.split_once(':')
            .is_some_and(|(name, value)| name.trim() == "upgrade" && value.contains("websocket"))
    })
}

async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin>(stream: S, shared: Rc<Shared>) {
    let slot: Cell<Option<Slot>> = Cell::new(None);
    let hello = std::cell::RefCell::new(super::openai::Hello::default());
    // The error type is tungstenite's `Callback` signature, not ours to shrink.
    #[allow(clippy::result_large_err)]
    let callback = |request: &Request, mut response: Response| {
        for name in request.headers().keys() {
            shared.counters.header_seen(name.as_str());
        }
        if shared.protocol == Protocol::Openai {
            *hello.borrow_mut() = super::openai::Hello::read(request.uri(), request.headers());
            if let Some(chosen) = super::openai::subprotocol(request.headers()) {
                response
                    .headers_mut()
                    .insert(SEC_WEBSOCKET_PROTOCOL, chosen);
            }
        }
        if !shared.protocol.serves_path(request.uri().path()) {
            let path = shared.protocol.path();
            let body = format!(
                "no such path; the {} protocol is served on {path}",
                shared.protocol.as_str()
            );
            return Err(refusal(StatusCode::NOT_FOUND, body));
        }
        // Admission is decided here, inside the handshake, so two clients racing for the last
        // place cannot both get it.
        match shared.admission.try_acquire() {
            Some(acquired) => {
                slot.set(Some(acquired));
                Ok(response)
            }
            None => {
                shared.counters.session_rejected();
                let max = shared.admission.max.unwrap_or(0);
                Err(refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("server full: {max} sessions open; retry later"),
                ))
            }
        }
    };
    let handshake = tokio_tungstenite::accept_hdr_async_with_config(
        stream,
        callback,
        Some(websocket_config(shared.protocol)),
    );
    let ws = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(ws)) => ws,
        // Refused, malformed or too slow: nothing was opened, and a reserved slot (if the
        // handshake failed after admission) is released when `slot` drops.
        _ => return,
    };
    let Some(_slot) = slot.take() else {
        return;
    };
    shared.counters.session_served();
    let number = shared.next_session.get();
    shared.next_session.set(number + 1);
    if number == 0 {
        // Stored as a permit if nobody waits yet.
        shared.first_session.notify_one();
    }
    match shared.protocol {
        Protocol::Native => {
            let session = Session::new(Rc::clone(&shared.templates), number);
            run_session(ws, session, &shared.counters).await;
        }
        Protocol::Openai => {
            let hello = hello.take();
            let session = super::openai::Session::new(Rc::clone(&shared.timed), number, hello);
            super::timed::run(ws, session, Rc::clone(&shared.counters)).await;
        }
        Protocol::Vllm => {
            let session = super::vllm::Session::new(Rc::clone(&shared.timed), number);
            super::timed::run(ws, session, Rc::clone(&shared.counters)).await;
        }
        Protocol::Funasr => {
            if let Some(engine) = &shared.funasr {
                super::funasr::run_session(ws, Rc::clone(engine), &shared.counters).await;
            }
        }
    }
}

/// Reads client messages until the session closes or the connection ends.
async fn run_session<S: AsyncRead + AsyncWrite + Unpin>(
    mut ws: WebSocketStream<S>,
    mut session: Session,
    counters: &Counters,
) {
    let mut out: Vec<Utf8Bytes> = Vec::with_capacity(8);
    session.created(&mut out);
    if send_all(&mut ws, &mut out).await.is_err() {
        return;
    }
    loop {
        let message = match ws.next().await {
            Some(Ok(message)) => message,
            Some(Err(err)) => {
                on_read_error(&mut ws, &mut session, counters, err).await;
                return;
            }
            None => return,
        };
        let step = match message {
            Message::Text(text) => {
                let arrival_s = clock::monotonic_s();
                session.on_text(text.as_str(), arrival_s, counters, &mut out)
            }
            Message::Binary(_) => {
                session.on_binary(counters, &mut out);
                Step::Continue
            }
            // tungstenite queues the pong (or the close reply) itself; flushing sends it now.
            // After a close, the next read ends the stream.
            Message::Ping(_) | Message::Pong(_) | Message::Close(_) | Message::Frame(_) => {
                if ws.flush().await.is_err() {
                    return;
                }
                continue;
            }
        };
        if !out.is_empty() && send_all(&mut ws, &mut out).await.is_err() {
            return;
        }
        if step == Step::Close {
            // The close frame states why: 1000 after session.closed, never none (1005).
            let frame = CloseFrame {
                code: CloseCode::Normal,
                reason: Utf8Bytes::from_static("session closed"),
            };
            let _ = tokio::time::timeout(GOODBYE_TIMEOUT, ws.close(Some(frame))).await;
            return;
        }
    }
}

/// Queues every frame of the outbox, then writes them with one flush.
async fn send_all<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
    out: &mut Vec<Utf8Bytes>,
) -> Result<(), WsError> {
    for frame in out.drain(..) {
        ws.feed(Message::Text(frame)).await?;
    }
    ws.flush().await
}

/// A read failed: a vanished peer just ends the session; unreadable input also counts as a
/// protocol error, and an oversized message gets a fatal error event and a 1009 close first.
async fn on_read_error<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
    session: &mut Session,
    counters: &Counters,
    err: WsError,
) {
    match err {
        WsError::Capacity(_) => {
            let mut out = Vec::with_capacity(1);
            session.too_large(counters, &mut out);
            let goodbye = async {
                send_all(ws, &mut out).await?;
                ws.close(Some(CloseFrame {
                    code: CloseCode::Size,
                    reason: Utf8Bytes::from_static("message too large"),
                }))
                .await
            };
            let _ = tokio::time::timeout(GOODBYE_TIMEOUT, goodbye).await;
        }
        // A peer that drops the TCP connection without a close frame simply left.
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {}
        WsError::Protocol(_) | WsError::Utf8(_) | WsError::AttackAttempt => {
            counters.protocol_error();
        }
        _ => {}
    }
}
