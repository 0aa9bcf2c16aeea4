//! The Fun-ASR mock: `serve_realtime_ws.py`'s protocol and cadence with a cost model instead of
//! a model (docs/funasr.md), so the seed's shapes — finals after STOP that grow with the
//! clients, batching that tames them, a blocking server that gives fewer partials — can be
//! reproduced without a GPU.
//!
//! * `session`: one session's serial queue and state machine, free of sockets;
//! * `segments`: the server's speech segments (its dynamic-threshold VAD), on loudness;
//! * `engine`: the shared decode queue, batching and cost model.
//!
//! This file is the connection task: it queues client messages in the session as they arrive
//! (which processes them in order, halting at each decode as the server's handler does), and
//! hands decodes to the engine — or, with `--blocking-decode`, runs them right here, stalling
//! every session of the mock meanwhile.

mod engine;
mod segments;
mod session;

pub use engine::Engine;

/// `realtime_ws.py`'s `--ws-max-size` default (10 MiB): a larger message is refused with a
/// close of 1009, as its `websockets` server refuses it.
pub const MAX_MESSAGE_BYTES: usize = 10 << 20;

use super::stats::Counters;
use futures_util::{FutureExt as _, SinkExt, StreamExt};
use session::{Frame, Session};
use std::rc::Rc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

/// The mocks' stand-in words, a second of speech each, over and over (`alpha bravo …`): the
/// Fun-ASR mock's text, and the openai mock's input transcription.
pub fn stand_in_words() -> impl Iterator<Item = &'static str> {
    session::WORDS.iter().copied().cycle()
}

/// Reads and drops what the peer still sends, until it closes (at most 5 s, 64 MiB).
async fn drain<S: AsyncRead + Unpin>(stream: &mut S) {
    use tokio::io::AsyncReadExt as _;
    let mut buf = vec![0u8; 64 << 10];
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut left: usize = 64 << 20;
    while left > 0 {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => left = left.saturating_sub(n),
            _ => return,
        }
    }
}

/// Serves one connection until the client closes it.
pub async fn run_session<S: AsyncRead + AsyncWrite + Unpin>(
    mut ws: WebSocketStream<S>,
    engine: Rc<Engine>,
    counters: &Counters,
) {
    let mut session = Session::new(engine.model());
    let mut arrivals = Arrivals::default();
    let mut out: Vec<Utf8Bytes> = Vec::with_capacity(4);
    let mut pending: Option<tokio::sync::oneshot::Receiver<()>> = None;
    let mut keepalive = Keepalive::new(engine.model());
    loop {
        let message = tokio::select! {
            message = ws.next() => message,
            () = keepalive.due() => {
                match keepalive.tick() {
                    Beat::Ping(payload) => {
                        if ws.send(Message::Ping(payload)).await.is_err() {
                            return;
                        }
                    }
                    Beat::TimedOut => {
                        // websockets fails the connection: 1011, "keepalive ping timeout".
                        let frame = CloseFrame {
                            code: CloseCode::Error,
                            reason: Utf8Bytes::from_static("keepalive ping timeout"),
                        };
                        let _ = ws.close(Some(frame)).await;
                        return;
                    }
                    Beat::Early => {}
                }
                continue;
            }
            () = decoded(&mut pending), if pending.is_some() => {
                pending = None;
                session.decoded(&mut out);
                if let Err(()) = after(&mut ws, &mut session, &engine, &mut pending, &mut out, counters).await {
                    return;
                }
                continue;
            }
        };
        let Some(Ok(message)) = message else {
            // A vanished peer, or the end of the stream: the session is over.
            match message {
                Some(Err(WsError::Protocol(_) | WsError::Utf8(_))) => counters.protocol_error(),
                // Over --ws-max-size: `websockets` closes with 1009 (message too big).
                Some(Err(WsError::Capacity(_))) => {
                    counters.protocol_error();
                    let frame = CloseFrame {
                        code: CloseCode::Size,
                        reason: Utf8Bytes::from_static("message too big"),
                    };
                    let _ = ws.close(Some(frame)).await;
                    // The rest of the message is still coming: read it away (a bounded while)
                    // so that closing does not reset the connection under the client's send.
                    drain(ws.get_mut()).await;
                }
                _ => {}
            }
            return;
        };
        keepalive.heard(&message);
        if !take(&mut session, &mut arrivals, message, counters) {
            let _ = ws.flush().await;
            return;
        }
        // Everything that has already arrived, so that one flush carries the replies.
        while let Some(Some(Ok(message))) = ws.next().now_or_never() {
            keepalive.heard(&message);
            if !take(&mut session, &mut arrivals, message, counters) {
                let _ = ws.flush().await;
                return;
            }
        }
        if let Err(()) = after(
            &mut ws,
            &mut session,
            &engine,
            &mut pending,
            &mut out,
            counters,
        )
        .await
        {
            return;
        }
    }
}

/// The server's WebSocket keepalive (`websockets`' `ping_interval` / `ping_timeout`, which
/// `realtime_ws.py` sets from `--ws-ping-interval` 20 and `--ws-ping-timeout` 0): a ping every
/// interval from the connection's opening, with a 4-byte payload; with a timeout, a ping whose
/// pong has not come within it fails the connection. As in `websockets`, a pong answers its
/// own ping and every earlier one, and a pong of a payload never sent answers nothing.
struct Keepalive {
    interval_s: Option<f64>,
    timeout_s: Option<f64>,
    next_ping_s: f64,
    /// The pings not answered yet (with a timeout only), oldest first: payload, send time.
    unanswered: std::collections::VecDeque<(u32, f64)>,
    sent: u32,
}

/// What the keepalive does when it is due.
enum Beat {
    Ping(tokio_tungstenite::tungstenite::Bytes),
    TimedOut,
    /// Woken before anything was due.
    Early,
}

impl Keepalive {
    fn new(model: &crate::cli::FunasrMockArgs) -> Keepalive {
        let positive = |s: f64| (s > 0.0 && s.is_finite()).then_some(s);
        let interval_s = positive(model.ws_ping_interval);
        Keepalive {
            interval_s,
            timeout_s: positive(model.ws_ping_timeout),
            next_ping_s: crate::clock::monotonic_s() + interval_s.unwrap_or(0.0),
            unanswered: std::collections::VecDeque::new(),
            sent: 0,
        }
    }

    /// When the next ping, or the oldest unanswered one's timeout, is due.
    fn due_s(&self) -> Option<f64> {
        let ping = self.interval_s.map(|_| self.next_ping_s);
        let timeout = self
            .unanswered
            .front()
            .zip(self.timeout_s)
            .map(|(&(_, at_s), t)| at_s + t);
        match (ping, timeout) {
            (Some(p), Some(t)) => Some(p.min(t)),
            (p, t) => p.or(t),
        }
    }

    async fn due(&self) {
        match self.due_s() {
            Some(at_s) => tokio::time::sleep_until(crate::clock::instant_at(at_s)).await,
            None => std::future::pending().await,
        }
    }

    fn tick(&mut self) -> Beat {
        let now_s = crate::clock::monotonic_s();
        if let (Some(&(_, at_s)), Some(t)) = (self.unanswered.front(), self.timeout_s) {
            if now_s >= at_s + t {
                return Beat::TimedOut;
            }
        }
        if now_s < self.next_ping_s {
            // Woken early (the timer's rounding): the select loop asks again.
            return Beat::Early;
        }
        self.sent = self.sent.wrapping_add(1);
        let payload = self.sent.wrapping_mul(0x9E37_79B9);
        if self.timeout_s.is_some() {
            self.unanswered.push_back((payload, now_s));
        }
        self.next_ping_s = now_s + self.interval_s.unwrap_or(f64::INFINITY);
        Beat::Ping(payload.to_be_bytes().to_vec().into())
    }

    /// A pong answers the pings up to its own.
    fn heard(&mut self, message: &Message) {
        let Message::Pong(payload) = message else {
            return;
        };
        let Ok(bytes) = <[u8; 4]>::try_from(payload.as_ref()) else {
            return;
        };
        let payload = u32::from_be_bytes(bytes);
        if let Some(k) = self.unanswered.iter().position(|&(p, _)| p == payload) {
            self.unanswered.drain(..=k);
        }
    }
}

/// Waits for the decode in flight, if any.
async fn decoded(pending: &mut Option<tokio::sync::oneshot::Receiver<()>>) {
    match pending.as_mut() {
        // A dropped sender (the engine gone) counts as done.
        Some(rx) => {
            let _ = rx.await;
        }
        None => std::future::pending().await,
    }
}

/// When each audio frame arrived against its place in the stream: the mock's own view of the
/// client's pacing (the session's first frame is the origin; `START` resets it).
#[derive(Default)]
struct Arrivals {
    origin_s: Option<f64>,
    bytes: u64,
}

impl Arrivals {
    fn frame(&mut self, bytes: usize, counters: &Counters) {
        let now_s = crate::clock::monotonic_s();
        let origin_s = *self.origin_s.get_or_insert(now_s);
        let due_s = origin_s + self.bytes as f64 / 32_000.0;
        counters.record_arrival_deviation_s((now_s - due_s).abs());
        self.bytes += bytes as u64;
    }
}

/// Queues one message in the session; false when the client closed.
fn take(
    session: &mut Session,
    arrivals: &mut Arrivals,
    message: Message,
    counters: &Counters,
) -> bool {
    match message {
        Message::Text(text) => {
            if text
                .trim()
                .eq_ignore_ascii_case(crate::protocol::funasr::names::START)
            {
                *arrivals = Arrivals::default();
            }
            session.push(Frame::Text(text));
        }
        Message::Binary(bytes) => {
            counters.append_received();
            arrivals.frame(bytes.len(), counters);
            session.push(Frame::Audio(bytes));
        }
        Message::Close(_) => return false,
        Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
    }
    true
}

/// Processes what the session has queued, starting each decode it asks for (or running it,
/// blocking, and going on), then sends the outbox.
async fn after<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
    session: &mut Session,
    engine: &Engine,
    pending: &mut Option<tokio::sync::oneshot::Receiver<()>>,
    out: &mut Vec<Utf8Bytes>,
    counters: &Counters,
) -> Result<(), ()> {
    while pending.is_none() {
        let Some(decode) = session.process(crate::clock::monotonic_s(), out) else {
            break;
        };
        if engine.model().blocking_decode {
            engine.decode_blocking(decode.audio_s, decode.is_final);
            session.decoded(out);
        } else {
            *pending = Some(engine.submit(decode));
        }
    }
    for _ in 0..session.take_stops() {
        counters.session_closed();
    }
    // With nothing to send, the flush still sends the pongs and close replies tungstenite queued.
    for frame in out.drain(..) {
        ws.feed(Message::Text(frame)).await.map_err(|_| ())?;
    }
    if session.failed() {
        // The server's handler ended on the error; `websockets` closes with 1000.
        let _ = ws
            .close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            }))
            .await;
        return Err(());
    }
    ws.flush().await.map_err(|_| ())
}
