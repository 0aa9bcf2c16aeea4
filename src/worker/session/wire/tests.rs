use super::*;
use crate::worker::session::connect::{connect_ws, Dialer};
use futures_util::{FutureExt as _, SinkExt, StreamExt};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// A server frame (unmasked unless `mask` is given), in the shortest length form.
fn frame(fin: bool, opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | opcode];
    let m = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n @ 0..=125 => out.push(m | n as u8),
        n @ 126..=0xffff => {
            out.push(m | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(m | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let start = out.len();
    match mask {
        Some(key) => {
            out.extend_from_slice(&key);
            out.extend_from_slice(payload);
            apply_mask(&mut out[start + 4..], key);
        }
        None => out.extend_from_slice(payload),
    }
    out
}

/// Runs a loopback test, failing it (not hanging CI) if it waits for something that never comes.
async fn within(test: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(std::time::Duration::from_secs(30), test)
        .await
        .expect("the test waited 30 s for something that never came");
}

fn text(s: &str) -> Message {
    Message::Text(s.into())
}

/// Every message `bytes` decode to, fed `step` bytes at a time.
fn decode_all(bytes: &[u8], step: usize, max: usize) -> Result<Vec<Message>, WsError> {
    let mut decoder = Decoder::new(max);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in bytes.chunks(step.max(1)) {
        buf.extend_from_slice(chunk);
        while let Some(message) = decoder.decode(&mut buf)? {
            out.push(message);
        }
    }
    assert!(buf.is_empty(), "{} bytes left undecoded", buf.len());
    Ok(out)
}

fn protocol_error(bytes: &[u8]) -> ProtocolError {
    match decode_all(bytes, bytes.len(), 1 << 20) {
        Err(WsError::Protocol(e)) => e,
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[test]
fn frames_of_every_length_form_decode_wherever_the_reads_split_them() {
    let mid = "m".repeat(300);
    let long = "L".repeat(70_000);
    let mut bytes = frame(true, 0x1, b"hi", None);
    bytes.extend(frame(true, 0x1, mid.as_bytes(), None));
    bytes.extend(frame(true, 0x1, long.as_bytes(), None));
    bytes.extend(frame(true, 0x2, &[0, 1, 2, 255], None));
    bytes.extend(frame(true, 0x9, b"p", None));
    bytes.extend(frame(true, 0xa, b"", None));
    bytes.extend(frame(true, 0x1, b"", None));
    // A server frame masked against the rules is taken, unmasked.
    bytes.extend(frame(true, 0x1, b"masked", Some([1, 2, 3, 4])));
    let expected = vec![
        text("hi"),
        text(&mid),
        text(&long),
        Message::Binary(Bytes::from_static(&[0, 1, 2, 255])),
        Message::Ping(Bytes::from_static(b"p")),
        Message::Pong(Bytes::new()),
        text(""),
        text("masked"),
    ];
    for step in [1, 2, 3, 7, 125, 4096, bytes.len()] {
        assert_eq!(
            decode_all(&bytes, step, 1 << 20).unwrap(),
            expected,
            "step {step}"
        );
    }
}

#[test]
fn fragments_join_with_control_frames_between_them() {
    let mut bytes = frame(false, 0x1, "{\"type\":".as_bytes(), None);
    bytes.extend(frame(true, 0x9, b"x", None));
    bytes.extend(frame(false, 0x0, "\"a\u{e9}".as_bytes(), None));
    bytes.extend(frame(true, 0x0, "\"}".as_bytes(), None));
    bytes.extend(frame(false, 0x2, &[1], None));
    bytes.extend(frame(true, 0x0, &[2], None));
    let expected = vec![
        Message::Ping(Bytes::from_static(b"x")),
        text("{\"type\":\"a\u{e9}\"}"),
        Message::Binary(Bytes::from_static(&[1, 2])),
    ];
    for step in [1, 5, bytes.len()] {
        assert_eq!(decode_all(&bytes, step, 1 << 20).unwrap(), expected);
    }
}

#[test]
fn close_frames_keep_the_servers_own_code_and_reason() {
    let mut payload = 4001u16.to_be_bytes().to_vec();
    payload.extend_from_slice(b"bye");
    let mut bytes = frame(true, 0x8, &payload, None);
    bytes.extend(frame(true, 0x8, &1005u16.to_be_bytes(), None));
    bytes.extend(frame(true, 0x8, b"", None));
    let got = decode_all(&bytes, 1, 1 << 20).unwrap();
    let codes: Vec<_> = got
        .iter()
        .map(|m| match m {
            Message::Close(Some(f)) => Some((u16::from(f.code), f.reason.to_string())),
            Message::Close(None) => None,
            other => panic!("not a close: {other:?}"),
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            Some((4001, "bye".into())),
            Some((1005, String::new())),
            None
        ]
    );
}

#[test]
fn what_tungstenite_refused_is_refused() {
    let reserved = {
        let mut f = frame(true, 0x1, b"a", None);
        f[0] |= 0x40;
        f
    };
    assert_eq!(
        protocol_error(&reserved),
        ProtocolError::NonZeroReservedBits
    );
    assert_eq!(
        protocol_error(&frame(true, 0x3, b"", None)),
        ProtocolError::UnknownDataFrameType(3)
    );
    assert_eq!(
        protocol_error(&frame(true, 0xb, b"", None)),
        ProtocolError::UnknownControlFrameType(0xb)
    );
    assert_eq!(
        protocol_error(&frame(false, 0x9, b"", None)),
        ProtocolError::FragmentedControlFrame
    );
    assert_eq!(
        protocol_error(&frame(true, 0x9, &[0; 126], None)),
        ProtocolError::ControlFrameTooBig
    );
    assert_eq!(
        protocol_error(&frame(true, 0x0, b"x", None)),
        ProtocolError::UnexpectedContinueFrame
    );
    let mut restart = frame(false, 0x1, b"a", None);
    restart.extend(frame(true, 0x2, b"b", None));
    assert_eq!(
        protocol_error(&restart),
        ProtocolError::ExpectedFragment(Data::Binary),
        "named by the frame that came instead, as tungstenite does"
    );
    assert_eq!(
        protocol_error(&frame(true, 0x8, &[3], None)),
        ProtocolError::InvalidCloseSequence
    );
    assert!(matches!(
        decode_all(&frame(true, 0x1, &[0xff, 0xfe], None), 1, 1 << 20),
        Err(WsError::Utf8(_))
    ));
    let mut bad_reason = 1000u16.to_be_bytes().to_vec();
    bad_reason.push(0xff);
    assert!(matches!(
        decode_all(&frame(true, 0x8, &bad_reason, None), 1, 1 << 20),
        Err(WsError::Utf8(_))
    ));
}

#[test]
fn a_message_over_the_limit_is_refused_from_its_header_alone() {
    let big = frame(true, 0x1, &vec![b'a'; 5000], None);
    let mut decoder = Decoder::new(4096);
    // Only the header has arrived: nothing of the payload is waited for or reserved.
    let mut buf = BytesMut::from(&big[..4]);
    match decoder.decode(&mut buf) {
        Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size })) => {
            assert_eq!((size, max_size), (5000, 4096));
        }
        other => panic!("{other:?}"),
    }
    // A 64-bit length no memory could hold is the same error, not an allocation.
    let mut huge = vec![0x81, 127];
    huge.extend_from_slice(&u64::MAX.to_be_bytes());
    let mut buf = BytesMut::from(&huge[..]);
    assert!(matches!(
        Decoder::new(4096).decode(&mut buf),
        Err(WsError::Capacity(_))
    ));
    // Fragments count together.
    let mut parts = frame(false, 0x1, &[b'a'; 3000], None);
    parts.extend(frame(true, 0x0, &[b'a'; 3000], None));
    assert!(matches!(
        decode_all(&parts, parts.len(), 4096),
        Err(WsError::Capacity(_))
    ));
    // At the limit is within it, and a ping between the fragments does not count.
    assert_eq!(
        decode_all(&frame(true, 0x1, &[b'a'; 4096], None), 100, 4096)
            .unwrap()
            .len(),
        1
    );
    let mut pinged = frame(false, 0x1, &[b'a'; 4000], None);
    pinged.extend(frame(true, 0x9, &[0; 125], None));
    pinged.extend(frame(true, 0x0, &[b'a'; 96], None));
    assert_eq!(decode_all(&pinged, 7, 4096).unwrap().len(), 2);
    // A limit no allocation could reach is clamped, so no length can overflow.
    let mut huge = vec![0x81, 127];
    huge.extend_from_slice(&u64::MAX.to_be_bytes());
    let mut buf = BytesMut::from(&huge[..]);
    assert!(matches!(
        Decoder::new(usize::MAX).decode(&mut buf),
        Err(WsError::Capacity(_))
    ));
}

#[test]
fn a_large_message_read_in_pieces_gets_its_room_once() {
    // 100 kB in reads of 1,000 bytes: the buffer is sized for the frame when its header comes
    // and is not topped up while the frame is read.
    let payload = vec![b'x'; 100_000];
    let bytes = frame(true, 0x1, &payload, None);
    let mut decoder = Decoder::new(1 << 20);
    let mut buf = BytesMut::new();
    let mut capacities = std::collections::BTreeSet::new();
    let mut got = None;
    for chunk in bytes.chunks(1000) {
        buf.extend_from_slice(chunk);
        if let Some(message) = decoder.decode(&mut buf).unwrap() {
            got = Some(message);
        } else {
            assert!(decoder.missing() > 0);
            capacities.insert(buf.capacity());
        }
    }
    assert_eq!(
        got,
        Some(Message::Text(String::from_utf8(payload).unwrap().into()))
    );
    assert_eq!(
        capacities.len(),
        1,
        "one allocation for the frame: {capacities:?}"
    );
}

#[test]
fn the_mask_is_the_bytewise_xor_at_every_length() {
    let key = [0x12, 0x34, 0x56, 0x78];
    for len in 0..40 {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let mut masked = data.clone();
        apply_mask(&mut masked, key);
        let expected: Vec<u8> = data
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i % 4])
            .collect();
        assert_eq!(masked, expected, "length {len}");
    }
}

#[test]
fn client_frames_are_masked_in_the_shortest_length_form() {
    for (len, header) in [
        (0usize, 2usize),
        (125, 2),
        (126, 4),
        (65_535, 4),
        (65_536, 10),
    ] {
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut out = Vec::new();
        encode(&mut out, 0x2, &payload, [9, 8, 7, 6]);
        assert_eq!(out.len(), header + 4 + len);
        assert_eq!(out[0], 0x82, "FIN and binary");
        assert_eq!(out[1] & 0x80, 0x80, "masked");
        let h = super::header(&out).unwrap().unwrap();
        assert_eq!(
            (h.len, h.payload, h.mask),
            (header + 4, len as u64, Some([9, 8, 7, 6]))
        );
        let mut body = out[header + 4..].to_vec();
        apply_mask(&mut body, [9, 8, 7, 6]);
        assert_eq!(body, payload);
    }
}

#[test]
fn the_frames_start_right_after_the_handshake_response() {
    let response = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";
    let mut seen = response.to_vec();
    seen.extend(frame(true, 0x1, b"early", None));
    assert_eq!(
        after_response(&seen).unwrap(),
        &frame(true, 0x1, b"early", None)[..]
    );
    assert_eq!(after_response(response).unwrap(), b"");
    assert!(after_response(b"HTTP/1.1 101 Switching").is_err());
    // As many headers as tungstenite takes, and bare line feeds (httparse takes both).
    let mut many = b"HTTP/1.1 101 Switching Protocols\n".to_vec();
    for i in 0..100 {
        many.extend_from_slice(format!("X-Header-{i}: {i}\n").as_bytes());
    }
    many.extend_from_slice(b"\n");
    many.extend(frame(true, 0x1, b"\r\n\r\n", None));
    assert_eq!(
        after_response(&many).unwrap(),
        &frame(true, 0x1, b"\r\n\r\n", None)[..]
    );
}

/// A server that answers the handshake and sends `frames` in the same write (so they arrive
/// with the response), then does what `then` says with the raw socket.
async fn raw_server<F, Fut>(frames: Vec<u8>, then: F) -> String
where
    F: FnOnce(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client left during the handshake");
            request.extend_from_slice(&buf[..n]);
        }
        let request = String::from_utf8(request).unwrap();
        let key = request
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .or_else(|| {
                request
                    .lines()
                    .find_map(|l| l.strip_prefix("sec-websocket-key: "))
            })
            .unwrap()
            .trim()
            .to_string();
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        let mut out = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
        )
        .into_bytes();
        out.extend(frames);
        socket.write_all(&out).await.unwrap();
        then(socket).await;
    });
    format!("ws://{addr}/v1/realtime")
}

async fn client(url: &str) -> Ws {
    let dialer = Dialer {
        url: url.to_string(),
        tls: None,
        headers: Vec::new(),
    };
    let config = WebSocketConfig::default().max_message_size(Some(1 << 20));
    connect_ws(url, &dialer, config, None).await.unwrap()
}

/// Reads one client frame from the raw socket: its opcode and unmasked payload.
async fn read_client_frame(socket: &mut tokio::net::TcpStream) -> (u8, Vec<u8>) {
    let mut buf = Vec::new();
    loop {
        if let Some(h) = super::header(&buf).unwrap() {
            let whole = h.len + h.payload as usize;
            if buf.len() >= whole {
                let key = h.mask.expect("client frames are masked");
                let mut payload = buf[h.len..whole].to_vec();
                apply_mask(&mut payload, key);
                return (h.opcode, payload);
            }
        }
        let mut chunk = [0; 4096];
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the client closed before a whole frame");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn a_frame_sent_with_the_101_is_not_lost_and_pings_and_closes_are_answered() {
    within(async {
        let mut early = frame(true, 0x1, br#"{"type":"session.created"}"#, None);
        early.extend(frame(true, 0x9, b"are you there", None));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let url = raw_server(early, |mut socket| async move {
            let pong = read_client_frame(&mut socket).await;
            let mut payload = 1001u16.to_be_bytes().to_vec();
            payload.extend_from_slice(b"going");
            socket
                .write_all(&frame(true, 0x8, &payload, None))
                .await
                .unwrap();
            let echo = read_client_frame(&mut socket).await;
            tx.send((pong, echo)).unwrap();
            // The server ends the connection after the closing handshake.
        })
        .await;
        let mut ws = client(&url).await;
        assert_eq!(
            ws.next().await.unwrap().unwrap(),
            text(r#"{"type":"session.created"}"#)
        );
        assert_eq!(
            ws.next().await.unwrap().unwrap(),
            Message::Ping(Bytes::from_static(b"are you there"))
        );
        match ws.next().await.unwrap().unwrap() {
            Message::Close(Some(f)) => {
                assert_eq!((u16::from(f.code), f.reason.as_str()), (1001, "going"))
            }
            other => panic!("{other:?}"),
        }
        // After both close frames, the end of the connection is the end of the stream, no error.
        assert!(ws.next().await.is_none());
        let ((pong_op, pong), (close_op, close)) = rx.await.unwrap();
        assert_eq!((pong_op, pong.as_slice()), (0xa, &b"are you there"[..]));
        assert_eq!(close_op, 0x8);
        assert_eq!(
            &close[..2],
            &1001u16.to_be_bytes(),
            "the close code is echoed"
        );
    })
    .await;
}

#[tokio::test]
async fn a_close_code_no_endpoint_may_send_is_kept_and_answered_with_1002() {
    within(async {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let url = raw_server(
            frame(true, 0x8, &1006u16.to_be_bytes(), None),
            |mut socket| async move {
                tx.send(read_client_frame(&mut socket).await).unwrap();
            },
        )
        .await;
        let mut ws = client(&url).await;
        match ws.next().await.unwrap().unwrap() {
            Message::Close(Some(f)) => assert_eq!(u16::from(f.code), 1006),
            other => panic!("{other:?}"),
        }
        let (op, payload) = rx.await.unwrap();
        assert_eq!((op, &payload[..2]), (0x8, &1002u16.to_be_bytes()[..]));
    })
    .await;
}

/// What the server's broken frame makes the client send: its close frame's code and reason,
/// and whether anything came after it (the session's own close must add no second frame).
async fn failed_with(bad: Vec<u8>) -> (u16, String, bool) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let url = raw_server(bad, |mut socket| async move {
        let (op, payload) = read_client_frame(&mut socket).await;
        assert_eq!(op, 0x8, "the client's first frame is its close");
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), socket.read_to_end(&mut rest)).await;
        tx.send((payload, rest.is_empty())).unwrap();
    })
    .await;
    let mut ws = client(&url).await;
    assert!(matches!(ws.next().await, Some(Err(_))));
    assert!(ws.next().await.is_none(), "nothing after the error");
    ws.close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: Utf8Bytes::default(),
    }))
    .await
    .unwrap();
    drop(ws);
    let (payload, nothing_after) = rx.await.unwrap();
    let code = u16::from_be_bytes([payload[0], payload[1]]);
    (
        code,
        String::from_utf8(payload[2..].to_vec()).unwrap(),
        nothing_after,
    )
}

#[tokio::test]
async fn a_broken_frame_fails_the_connection_with_the_rfcs_close_code() {
    within(async {
        let (code, reason, only) = failed_with(frame(true, 0x1, &[b'{', 0xff], None)).await;
        assert_eq!((code, reason.as_str(), only), (1007, "invalid UTF-8", true));
        let mut bad_reason = 1000u16.to_be_bytes().to_vec();
        bad_reason.push(0xc3);
        let (code, _, only) = failed_with(frame(true, 0x8, &bad_reason, None)).await;
        assert_eq!((code, only), (1007, true), "a close reason too");
        // The header alone: a message over the limit is refused before its payload comes.
        let mut big = vec![0x81, 127];
        big.extend_from_slice(&(2u64 << 20).to_be_bytes());
        let (code, reason, _) = failed_with(big).await;
        assert_eq!((code, reason.as_str()), (1009, "message too big"));
        let mut rsv = frame(true, 0x1, b"x", None);
        rsv[0] |= 0x40;
        let (code, reason, _) = failed_with(rsv).await;
        assert_eq!((code, reason.as_str()), (1002, "protocol error"));
    })
    .await;
}

#[tokio::test]
async fn a_reset_after_the_closing_handshake_ends_the_stream_without_an_error() {
    within(async {
        let url = raw_server(
            frame(true, 0x8, &1000u16.to_be_bytes(), None),
            |mut socket| async move {
                let _echo = read_client_frame(&mut socket).await;
                // A reset instead of an orderly end, once the close frames have crossed.
                socket.set_zero_linger().unwrap();
                drop(socket);
            },
        )
        .await;
        let mut ws = client(&url).await;
        assert!(matches!(ws.next().await, Some(Ok(Message::Close(Some(_))))));
        assert!(ws.next().await.is_none());
    })
    .await;
}

#[tokio::test]
async fn a_connection_that_ends_without_a_close_frame_is_an_error_once() {
    within(async {
        let url = raw_server(frame(true, 0x1, b"last", None), |socket| async move {
            drop(socket);
        })
        .await;
        let mut ws = client(&url).await;
        assert_eq!(ws.next().await.unwrap().unwrap(), text("last"));
        assert!(matches!(
            ws.next().await,
            Some(Err(WsError::Protocol(
                ProtocolError::ResetWithoutClosingHandshake
            )))
        ));
        assert!(
            ws.next().await.is_none(),
            "the stream is over after the error"
        );
    })
    .await;
}

#[tokio::test]
async fn frames_of_one_read_share_its_time_and_a_later_read_gets_its_own_issue_17() {
    within(async {
        let mut two = frame(true, 0x1, b"one", None);
        two.extend(frame(true, 0x1, b"two", None));
        let (go, went) = tokio::sync::oneshot::channel::<()>();
        let url = raw_server(two, |mut socket| async move {
            went.await.unwrap();
            socket
                .write_all(&frame(true, 0x1, b"three", None))
                .await
                .unwrap();
            let _ = read_client_frame(&mut socket).await;
        })
        .await;
        let mut ws = client(&url).await;
        assert_eq!(ws.next().await.unwrap().unwrap(), text("one"));
        let first_s = ws.read_s();
        assert_eq!(ws.next().await.unwrap().unwrap(), text("two"));
        assert_eq!(ws.read_s(), first_s, "one read, one time");
        let asked_s = crate::clock::monotonic_s();
        assert!(first_s <= asked_s);
        go.send(()).unwrap();
        assert_eq!(ws.next().await.unwrap().unwrap(), text("three"));
        assert!(
            ws.read_s() >= asked_s,
            "the third frame was read after it was asked for: {} < {asked_s}",
            ws.read_s()
        );
        ws.close(None).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_frame_read_late_is_timed_when_it_reached_the_socket() {
    within(async {
        let (go, went) = tokio::sync::oneshot::channel::<()>();
        let (sent, sent_at) = tokio::sync::oneshot::channel::<f64>();
        let url = raw_server(Vec::new(), |mut socket| async move {
            went.await.unwrap();
            let sent_s = crate::clock::monotonic_s();
            socket
                .write_all(&frame(true, 0x1, b"late", None))
                .await
                .unwrap();
            sent.send(sent_s).unwrap();
            let _ = read_client_frame(&mut socket).await;
        })
        .await;
        let mut ws = client(&url).await;
        crate::sys::arrival::tests::until_the_kernel_stamps().await;
        go.send(()).unwrap();
        let sent_s = sent_at.await.unwrap();
        // The session is busy for 150 ms before it reads.
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        assert_eq!(ws.next().await.unwrap().unwrap(), text("late"));
        let read_s = crate::clock::monotonic_s();
        assert!(ws.read_s() >= sent_s - 0.001, "{} < {sent_s}", ws.read_s());
        assert!(
            read_s - ws.read_s() >= 0.14,
            "timed when read ({}), not when it came ({sent_s})",
            ws.read_s()
        );
        ws.close(None).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn buffered_data_frames_come_without_a_read_and_control_frames_are_left_to_the_stream() {
    within(async {
        let mut frames = frame(true, 0x1, b"a", None);
        frames.extend(frame(true, 0x1, b"b", None));
        frames.extend(frame(true, 0x9, b"p", None));
        frames.extend(frame(true, 0x1, b"c", None));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let url = raw_server(frames, |mut socket| async move {
            tx.send(read_client_frame(&mut socket).await).unwrap();
            let _ = read_client_frame(&mut socket).await;
        })
        .await;
        let mut ws = client(&url).await;
        assert_eq!(ws.next().await.unwrap().unwrap(), text("a"));
        assert_eq!(ws.next_buffered().unwrap().unwrap(), text("b"));
        assert!(
            ws.next_buffered().is_none(),
            "a ping is next: the stream takes it"
        );
        assert_eq!(
            ws.next().await.unwrap().unwrap(),
            Message::Ping(Bytes::from_static(b"p"))
        );
        assert_eq!(rx.await.unwrap(), (0xa, b"p".to_vec()), "answered at once");
        assert_eq!(ws.next_buffered().unwrap().unwrap(), text("c"));
        assert!(ws.next_buffered().is_none(), "nothing more is buffered");
        ws.close(None).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_frame_the_socket_takes_only_in_part_is_written_whole_by_the_flush() {
    within(async {
        // Far more than a loopback socket's buffers: written from the scratch in part, the
        // rest from the session's own buffer. Then a small one, straight from the scratch.
        let big: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 251) as u8).collect();
        let expected = big.clone();
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let (second_tx, second_rx) = tokio::sync::oneshot::channel();
        let url = raw_server(Vec::new(), |mut socket| async move {
            // (`read_client_frame` drops what it read past its frame: one frame at a time.)
            first_tx.send(read_client_frame(&mut socket).await).unwrap();
            second_tx
                .send(read_client_frame(&mut socket).await)
                .unwrap();
            let _ = read_client_frame(&mut socket).await;
        })
        .await;
        let mut ws = client(&url).await;
        ws.send_frame(&Outgoing::Binary(big)).unwrap();
        assert!(ws.pending_output(), "the socket cannot take 8 MB at once");
        assert!(
            SCRATCH.with_borrow(Vec::capacity) <= SCRATCH_KEPT,
            "the scratch does not keep 8 MB for the packets after it"
        );
        ws.flush().await.unwrap();
        let (opcode, got) = first_rx.await.unwrap();
        assert_eq!((opcode, got.len()), (0x2, expected.len()));
        assert!(got == expected, "the big frame arrived whole and in order");
        ws.send_frame(&Outgoing::Text("after".into())).unwrap();
        assert!(!ws.pending_output(), "a small frame leaves at once");
        ws.flush().await.unwrap();
        assert_eq!(second_rx.await.unwrap(), (0x1, b"after".to_vec()));
        ws.close(None).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_read_buffer_one_session_emptied_last_is_the_next_read_of_another_issue_17() {
    within(async {
        let (go, went) = tokio::sync::oneshot::channel::<()>();
        let url_b = raw_server(Vec::new(), |mut socket| async move {
            went.await.unwrap();
            socket
                .write_all(&frame(true, 0x1, b"b", None))
                .await
                .unwrap();
            let _ = read_client_frame(&mut socket).await;
        })
        .await;
        let url_a = raw_server(frame(true, 0x1, b"a", None), |mut socket| async move {
            let _ = read_client_frame(&mut socket).await;
        })
        .await;
        let mut b = client(&url_b).await;
        assert!(
            b.next().now_or_never().is_none(),
            "b has nothing to read yet"
        );
        let mut a = client(&url_a).await;
        let Message::Text(got) = a.next().await.unwrap().unwrap() else {
            panic!("a text frame")
        };
        assert_eq!(got.as_str(), "a");
        let a_at = got.as_str().as_ptr() as usize;
        drop(got);
        assert!(a.next().now_or_never().is_none(), "a has read everything");
        go.send(()).unwrap();
        let Message::Text(got) = b.next().await.unwrap().unwrap() else {
            panic!("a text frame")
        };
        assert_eq!(got.as_str(), "b");
        // b's frame ("b", 3 bytes) is read into a's buffer, right behind a's frame (3 bytes).
        assert_eq!(
            got.as_str().as_ptr() as usize,
            a_at + 3,
            "b read into a's buffer"
        );
        drop(got);
        a.close(None).await.unwrap();
        b.close(None).await.unwrap();
    })
    .await;
}

/// Against tungstenite's server (an independent implementation that checks a client's masking
/// and framing): every length form and kind of frame goes through and comes back.
#[tokio::test]
async fn tungstenites_server_takes_every_frame_the_client_sends() {
    within(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let mut ws = tokio_tungstenite::accept_async(socket).await.unwrap();
            let mut seen = Vec::new();
            while let Some(message) = ws.next().await {
                let message = message.unwrap();
                match &message {
                    Message::Text(_) | Message::Binary(_) => {
                        ws.send(message.clone()).await.unwrap()
                    }
                    Message::Close(_) => {
                        seen.push(message);
                        break;
                    }
                    _ => {}
                }
                seen.push(message);
            }
            // tungstenite has answered the close; the server ends the connection.
            let _ = ws.flush().await;
            seen
        });
        let mut ws = client(&format!("ws://{addr}/")).await;
        let sent = vec![
            text("short"),
            text(&"x".repeat(300)),
            Message::Binary(Bytes::from(vec![7u8; 70_000])),
            Message::Ping(Bytes::from_static(b"ping")),
        ];
        for message in &sent {
            ws.send(message.clone()).await.unwrap();
        }
        let mut echoed = Vec::new();
        while echoed.len() < 3 {
            match ws.next().await.unwrap().unwrap() {
                Message::Pong(p) => assert_eq!(&p[..], b"ping"),
                m => echoed.push(m),
            }
        }
        assert_eq!(echoed, sent[..3].to_vec());
        ws.close(None).await.unwrap();
        // The server's answer to our close, then the end.
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(_))) => break,
                Some(Ok(Message::Pong(_))) => {}
                other => panic!("expected the server's close, got {other:?}"),
            }
        }
        assert!(ws.next().await.is_none());
        assert!(matches!(
            ws.send(text("after")).await,
            Err(WsError::Protocol(ProtocolError::SendAfterClosing))
        ));
        let seen = server.await.unwrap();
        assert_eq!(seen[..4].to_vec(), sent);
        assert_eq!(seen.last(), Some(&Message::Close(None)));
    })
    .await;
}

#[test]
fn a_reads_time_never_goes_before_the_last_reads() {
    // Stamps of back-to-back segments, moved to the monotonic scale by a clock difference read
    // afresh each time, can come out a microsecond the wrong way round.
    assert_eq!(next_read_s(100.000_002, Some(100.000_001)), 100.000_002);
    assert_eq!(next_read_s(100.000_001, Some(100.000_002)), 100.000_002);
    // No stamp: the clock's now, and still not before the last read.
    let far_s = crate::clock::monotonic_s() + 3600.0;
    assert_eq!(next_read_s(far_s, None), far_s);
    let now_s = next_read_s(0.0, None);
    assert!(now_s > 0.0 && now_s <= crate::clock::monotonic_s());
}
