//! A scripted Fun-ASR server on 127.0.0.1, the protocol of `realtime_ws.py` without a model:
//! `started` for START, one partial a second of audio, the final and `stopped` for STOP. After
//! the first audio frame it slips in a text frame that is not JSON and a binary frame, as a
//! proxy or a debugging server might, and it records the close frame each client sends.

use futures_util::{SinkExt, StreamExt};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// 1 s of 16 kHz PCM16.
const BYTES_PER_S: usize = 32_000;

/// The close frames received, one a connection that sent one: its code (`None`: no code).
type Closes = Arc<Mutex<Vec<Option<u16>>>>;

/// The server; it stops when dropped.
pub struct FakeFunasr {
    pub url: String,
    closes: Closes,
    _server: crate::util::LoopbackServer,
}

impl FakeFunasr {
    pub fn closes(&self) -> Vec<Option<u16>> {
        self.closes.lock().unwrap().clone()
    }
}

pub fn start() -> FakeFunasr {
    let closes = Closes::default();
    let recorded = Arc::clone(&closes);
    let server =
        crate::util::LoopbackServer::start(move |stream| session(stream, Arc::clone(&recorded)));
    FakeFunasr {
        url: format!("ws://{}", server.addr),
        closes,
        _server: server,
    }
}

async fn session(stream: tokio::net::TcpStream, closes: Closes) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let text = |t: String| Message::Text(t.into());
    let mut received = 0usize;
    // Bounded: a session of these tests lasts seconds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(deadline, ws.next()).await {
        let sent = match msg {
            Message::Text(command) if command.trim().eq_ignore_ascii_case("START") => {
                ws.send(text(r#"{"event":"started"}"#.into())).await
            }
            Message::Text(command) if command.trim().eq_ignore_ascii_case("STOP") => {
                let ms = received * 1000 / BYTES_PER_S;
                let _ = ws.send(text(format!(r#"{{"sentences":[{{"text":"x","start":0,"end":{ms}}}],"partial":"","partial_start_ms":0,"duration_ms":{ms},"is_final":true}}"#))).await;
                ws.send(text(r#"{"event":"stopped"}"#.into())).await
            }
            Message::Binary(pcm) => {
                let before = received;
                received += pcm.len();
                if before == 0 {
                    let _ = ws.send(text("server busy, please hold".into())).await;
                    let _ = ws.send(Message::Binary(vec![1u8, 2, 3].into())).await;
                }
                if received / BYTES_PER_S > before / BYTES_PER_S {
                    let ms = received * 1000 / BYTES_PER_S;
                    ws.send(text(format!(r#"{{"sentences":[],"partial":"x","partial_start_ms":0,"duration_ms":{ms},"is_final":false}}"#))).await
                } else {
                    Ok(())
                }
            }
            Message::Close(frame) => {
                closes
                    .lock()
                    .unwrap()
                    .push(frame.map(|f| u16::from(f.code)));
                Ok(())
            }
            _ => Ok(()),
        };
        if sent.is_err() {
            return;
        }
    }
}
