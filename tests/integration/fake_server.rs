//! A scripted native-protocol server on 127.0.0.1 that misbehaves on purpose, for the bad-input
//! tests: it closes mid-session, or sends frames that are not JSON events, or oversized ones.

use futures_util::{SinkExt, StreamExt};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

#[derive(Debug, Clone, Copy)]
pub enum Misbehaviour {
    /// Drop the connection without a word after this many appends.
    CloseAfterAppends(u32),
    /// After the first append, send a non-JSON text frame and a binary frame, then go on properly.
    JunkAfterFirstAppend,
    /// After the first append, send a text frame of this many bytes.
    OversizedAfterFirstAppend(usize),
    /// After the first append, send a text frame that is not UTF-8, then go on properly.
    InvalidUtf8AfterFirstAppend,
    /// After `session.updated`, never read again (the socket stays open for at most 60 s), on
    /// a small receive buffer so the client's sends block within seconds.
    StopsReadingAfterSetup,
    /// After `sglang.input_audio.end`, keep sending transcript deltas every 100 ms and never
    /// `drained`.
    NeverDrains,
    /// After every `accepted`, a ping and a transcript delta in one write: a control frame
    /// between data frames that came in one read.
    PingAmongReplies,
    /// Answer `session.update` as sglang-omni answers a request it cannot serve: a non-fatal
    /// `invalid_request` error naming the update's `event_id`, no `session.updated`, and the
    /// session left open.
    RefusesUpdate,
    /// Answer the first `session.update` at once and every later one after this long: a
    /// set-up that takes its time.
    SlowUpdateAfterFirst(Duration),
    /// Answer `session.close` with `session.closed` and leave the socket open (for at most
    /// 10 s), noting how the client ended it in [`FakeServer::ends`].
    KeepsOpenAfterClosed,
}

/// The server; it stops when dropped.
pub struct FakeServer {
    pub url: String,
    /// How clients ended the connections a misbehaviour left open: `close 1000`, or
    /// `dropped` (no close frame).
    pub ends: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _server: crate::util::LoopbackServer,
}

pub fn start(misbehaviour: Misbehaviour) -> FakeServer {
    // A receive buffer set on the listener is inherited by the connections it accepts.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    if matches!(misbehaviour, Misbehaviour::StopsReadingAfterSetup) {
        socket.set_recv_buffer_size(4096).unwrap();
    }
    socket
        .bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
    socket.listen(128).unwrap();
    let std_listener: std::net::TcpListener = socket.into();
    std_listener.set_nonblocking(true).unwrap();
    // `session.update`s so far, for the misbehaviours that treat the first one apart (the
    // client's reachability probe makes a handshake of its own and closes it, sending none).
    let updates = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let ends = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let noted = ends.clone();
    let server = crate::util::LoopbackServer::serve(std_listener, move |stream| {
        session(stream, misbehaviour, updates.clone(), noted.clone())
    });
    FakeServer {
        url: format!("ws://{}/v1/realtime", server.addr),
        ends,
        _server: server,
    }
}

async fn session(
    stream: tokio::net::TcpStream,
    misbehaviour: Misbehaviour,
    updates: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ends: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let send = |text: String| Message::Text(text.into());
    let _ = ws
        .send(send(r#"{"type":"session.created","session":{"id":"s","object":"realtime.session","model":"fake","sglang":{"granted":null}}}"#.into()))
        .await;
    let mut appends = 0u32;
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Text(text) = msg else { continue };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        match v["type"].as_str().unwrap_or("") {
            "session.update" if matches!(misbehaviour, Misbehaviour::RefusesUpdate) => {
                let refusal = serde_json::json!({
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "code": "invalid_request",
                        "message": "no supported output combination",
                        "param": null,
                        "event_id": v["event_id"],
                    },
                    "sglang": {"fatal": false},
                    "event_id": "evt_1",
                });
                let _ = ws.send(send(refusal.to_string())).await;
            }
            "session.update" => {
                let nth = updates.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if let Misbehaviour::SlowUpdateAfterFirst(delay) = misbehaviour {
                    if nth > 0 {
                        tokio::time::sleep(delay).await;
                    }
                }
                let _ = ws.send(send(r#"{"type":"session.updated","session":{"sglang":{"granted":{"interaction":"native"}}}}"#.into())).await;
                if matches!(misbehaviour, Misbehaviour::StopsReadingAfterSetup) {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    return;
                }
            }
            "input_audio_buffer.append" => {
                appends += 1;
                let seq = v["sglang"]["seq"].as_u64().unwrap_or(0);
                let _ = ws
                    .send(send(format!(r#"{{"type":"sglang.input_audio.accepted","seq":{seq},"accepted_end_ms":{}}}"#, (seq + 1) * 80)))
                    .await;
                match misbehaviour {
                    Misbehaviour::CloseAfterAppends(n) if appends >= n => return, // dropped, no close frame
                    Misbehaviour::JunkAfterFirstAppend if appends == 1 => {
                        let _ = ws.send(send("this is not json".into())).await;
                        let _ = ws.send(Message::Binary(vec![1u8, 2, 3].into())).await;
                    }
                    Misbehaviour::PingAmongReplies => {
                        let delta = format!(
                            r#"{{"type":"response.output_audio_transcript.delta","delta":"{seq}"}}"#
                        );
                        let _ = ws.feed(Message::Ping(vec![7u8].into())).await;
                        let _ = ws.feed(send(delta)).await;
                        let _ = ws.flush().await;
                    }
                    Misbehaviour::InvalidUtf8AfterFirstAppend if appends == 1 => {
                        use tokio_tungstenite::tungstenite::protocol::frame::{
                            coding::{Data, OpCode},
                            Frame,
                        };
                        let bad = b"{\"type\":\"response.output_audio_transcript.delta\",\"delta\":\"\xff\"}";
                        let frame = Frame::message(&bad[..], OpCode::Data(Data::Text), true);
                        let _ = ws.send(Message::Frame(frame)).await;
                    }
                    Misbehaviour::OversizedAfterFirstAppend(bytes) if appends == 1 => {
                        let big = format!(
                            r#"{{"type":"response.output_audio.delta","delta":"{}"}}"#,
                            "A".repeat(bytes)
                        );
                        let _ = ws.send(send(big)).await;
                    }
                    _ => {}
                }
            }
            "sglang.input_audio.end" if matches!(misbehaviour, Misbehaviour::NeverDrains) => {
                // Bounded like everything here: at most 10 minutes of chatter.
                for _ in 0..6000 {
                    let delta = r#"{"type":"response.output_audio_transcript.delta","delta":"…"}"#;
                    if ws.send(send(delta.into())).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                return;
            }
            "sglang.input_audio.end" => {
                let end_ms = appends as u64 * 80;
                let _ = ws.send(send(format!(r#"{{"type":"sglang.input_audio.ended","accepted_end_ms":{end_ms},"tail_policy":"pad"}}"#))).await;
                let _ = ws.send(send(format!(r#"{{"type":"sglang.input_audio.drained","accepted_end_ms":{end_ms},"consumed_ms":{end_ms},"discarded_ms":0,"padding_ms":0}}"#))).await;
            }
            "session.close" => {
                let _ = ws
                    .send(send(
                        r#"{"type":"session.closed","reason":"client_closed"}"#.into(),
                    ))
                    .await;
                if matches!(misbehaviour, Misbehaviour::KeepsOpenAfterClosed) {
                    let end = tokio::time::timeout(Duration::from_secs(10), async {
                        loop {
                            match ws.next().await {
                                Some(Ok(Message::Close(frame))) => {
                                    break format!(
                                        "close {}",
                                        frame.map_or(0, |f| u16::from(f.code))
                                    )
                                }
                                Some(Ok(_)) => continue,
                                _ => break "dropped".to_string(),
                            }
                        }
                    })
                    .await
                    .unwrap_or_else(|_| "still open after 10 s".to_string());
                    ends.lock().unwrap().push(end);
                    return;
                }
                // As sglang-omni's server: a normal close after `session.closed`.
                let _ = ws
                    .close(Some(tokio_tungstenite::tungstenite::protocol::CloseFrame {
                        code: tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode::Normal,
                        reason: "".into(),
                    }))
                    .await;
                return;
            }
            _ => {}
        }
    }
}
