//! The connection loop of the mock sessions that answer on a clock (openai, vllm): each is a
//! state machine without sockets ([`TimedSession`]) that takes client text and timer ticks and
//! fills an outbox; this loop reads the socket, wakes the session when it asks, and writes the
//! outbox with one flush.

use super::stats::Counters;
use crate::cli::MockBehaviourArgs;
use crate::clock::{self, instant_at};
use crate::protocol::Protocol;
use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

/// How long the goodbye of a session that ends itself may take.
const GOODBYE_TIMEOUT: Duration = Duration::from_secs(1);

/// What the timed mocks were told (`mock --first-delta-ms …`), shared by every session.
#[derive(Debug)]
pub struct Behaviour {
    pub first_delta_s: f64,
    pub delta_interval_s: f64,
    pub response_deltas: u32,
    pub served_model: String,
    /// vllm: refuse a model other than `served_model` (`model_not_found`), as servers of the
    /// dialect that check do: only when `--served-model` names one. Without it any name is
    /// served, as vLLM serves it with `VLLM_SKIP_MODEL_NAME_VALIDATION` set.
    pub check_model: bool,
    /// Answer the first append with an error of this code.
    pub mock_error: Option<String>,
    /// vllm: the model steps after which a transcription ends.
    pub max_tokens: Option<u32>,
    /// openai: a VAD turn that ends while a response is in progress gets none.
    pub skip_busy_turns: bool,
    /// One delta interval of PCM16 silence at the output rate (`--output-sample-rate`, 24 kHz
    /// for openai), in base64.
    pub delta_audio_b64: String,
}

impl Behaviour {
    /// The behaviour `mock --protocol PROTOCOL EXTRA…` gives (tests of the timed mocks).
    #[cfg(test)]
    pub fn of_mock_flags(protocol: &str, extra: &[&str]) -> std::rc::Rc<Behaviour> {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let argv = ["duplexbench-tui", "mock", "--protocol", protocol];
        let cli = Cli::try_parse_from(argv.iter().chain(extra)).unwrap();
        let Some(Command::Mock(args)) = cli.command else {
            unreachable!()
        };
        std::rc::Rc::new(Behaviour::new(&args.behaviour, args.protocol))
    }

    pub fn new(args: &MockBehaviourArgs, protocol: Protocol) -> Behaviour {
        let output_sample_rate = args
            .output_sample_rate
            .unwrap_or_else(|| protocol.mock_output_sample_rate(args.profile));
        let delta_interval_ms = args.delta_interval_ms(protocol);
        let samples = u64::from(output_sample_rate) * u64::from(delta_interval_ms) / 1000;
        let silence = vec![0u8; samples as usize * 2];
        Behaviour {
            first_delta_s: f64::from(args.first_delta_ms) / 1000.0,
            delta_interval_s: f64::from(delta_interval_ms) / 1000.0,
            response_deltas: args.response_deltas,
            served_model: args.served_model.clone(),
            check_model: args.served_model != crate::protocol::vllm::MOCK_MODEL,
            mock_error: args.mock_error.clone(),
            max_tokens: args.max_tokens,
            skip_busy_turns: args.skip_busy_turns,
            delta_audio_b64: base64::engine::general_purpose::STANDARD.encode(silence),
        }
    }
}

/// Whether the session goes on after a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Send the outbox, close the WebSocket (1000), drop the connection.
    Close,
}

/// A mock session that answers on a clock.
pub trait TimedSession {
    /// The frames sent as soon as the handshake completes.
    fn greet(&mut self, now_s: f64, out: &mut Vec<Utf8Bytes>);
    /// One client text message, arrived at `now_s`.
    fn on_text(
        &mut self,
        text: &str,
        now_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) -> Flow;
    /// The clock reached the time [`TimedSession::next_wake_s`] asked for (or later).
    fn on_timer(&mut self, now_s: f64, out: &mut Vec<Utf8Bytes>);
    /// When the session next has something to send unprompted.
    fn next_wake_s(&self) -> Option<f64>;
}

/// Serves one session until it or the client ends it.
pub async fn run<S, T>(mut ws: WebSocketStream<S>, mut session: T, counters: Rc<Counters>)
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: TimedSession,
{
    let mut out: Vec<Utf8Bytes> = Vec::with_capacity(8);
    session.greet(clock::monotonic_s(), &mut out);
    loop {
        if !out.is_empty() && send_all(&mut ws, &mut out).await.is_err() {
            return;
        }
        let wake = session.next_wake_s();
        let message = tokio::select! {
            message = ws.next() => message,
            () = tokio::time::sleep_until(instant_at(wake.unwrap_or(0.0))), if wake.is_some() => {
                session.on_timer(clock::monotonic_s(), &mut out);
                continue;
            }
        };
        let flow = match message {
            Some(Ok(Message::Text(text))) => {
                session.on_text(text.as_str(), clock::monotonic_s(), &counters, &mut out)
            }
            Some(Ok(Message::Binary(_))) => {
                counters.protocol_error();
                Flow::Continue
            }
            Some(Ok(_)) => {
                // Pings, pongs and the close reply are queued by tungstenite; flush sends them.
                if ws.flush().await.is_err() {
                    return;
                }
                Flow::Continue
            }
            Some(Err(_)) | None => return,
        };
        if flow == Flow::Close {
            let _ = send_all(&mut ws, &mut out).await;
            let _ = tokio::time::timeout(GOODBYE_TIMEOUT, ws.close(None)).await;
            return;
        }
    }
}

async fn send_all<S: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<S>,
    out: &mut Vec<Utf8Bytes>,
) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    for frame in out.drain(..) {
        ws.feed(Message::Text(frame)).await?;
    }
    ws.flush().await
}
