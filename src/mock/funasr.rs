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
use crate::protocol::keepalive::{Keepalive, Tick};
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
    let mut keepalive = keepalive(engine.model());
    let mut pings: u32 = 0;
    // One timer for the keepalive, moved on as it goes (a pong that moves its deadline later
    // leaves a wake-up that finds nothing due; without a keepalive it is never polled).
    let due = tokio::time::sleep_until(crate::clock::instant_at(
        keepalive.as_ref().map_or(0.0, Keepalive::deadline_s),
    ));
    tokio::pin!(due);
    loop {
        let message = tokio::select! {
            message = ws.next() => message,
            () = &mut due, if keepalive.is_some() => {
                let Some(k) = keepalive.as_mut() else { continue };
                let tick = k.tick(crate::clock::monotonic_s());
                due.as_mut().reset(crate::clock::instant_at(k.deadline_s()));
                match tick {
                    Tick::SendPing => {
                        pings = pings.wrapping_add(1);
                        let payload = pings.wrapping_mul(0x9E37_79B9).to_be_bytes();
                        if ws.send(Message::Ping(payload.to_vec().into())).await.is_err() {
                            return;
                        }
                    }
                    Tick::TimedOut => {
                        // websockets fails the connection: 1011, "keepalive ping timeout".
                        let frame = CloseFrame {
                            code: CloseCode::Error,
                            reason: Utf8Bytes::from_static("keepalive ping timeout"),
                        };
                        let _ = ws.close(Some(frame)).await;
                        return;
                    }
                    Tick::Nothing => {}
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
        // This message and everything that has already arrived, so that one flush carries the
        // replies.
        let mut next = Some(message);
        while let Some(message) = next {
            if !take(
                &mut session,
                &mut arrivals,
                keepalive.as_mut(),
                message,
                counters,
            ) {
                let _ = ws.flush().await;
                return;
            }
            next = match ws.next().now_or_never() {
                Some(Some(Ok(message))) => Some(message),
                _ => None,
            };
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
/// `realtime_ws.py` sets from `--ws-ping-interval` 20 and `--ws-ping-timeout` 0): a ping of 4
/// bytes every interval from the connection's opening; with a timeout, one left unanswered that
/// long fails the connection. Any pong answers every ping so far (websockets matches payloads;
/// a client answers its pings in order).
fn keepalive(model: &crate::cli::FunasrMockArgs) -> Option<Keepalive> {
    let finite = |s: f64| if s.is_finite() { s } else { 0.0 };
    Keepalive::new(
        finite(model.ws_ping_interval),
        finite(model.ws_ping_timeout),
        crate::clock::monotonic_s(),
    )
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

/// Queues one message in the session (a pong answers the keepalive's pings); false when the
/// client closed.
fn take(
    session: &mut Session,
    arrivals: &mut Arrivals,
    keepalive: Option<&mut Keepalive>,
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
        Message::Pong(_) => {
            if let Some(k) = keepalive {
                k.pong();
            }
        }
        Message::Ping(_) | Message::Frame(_) => {}
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
