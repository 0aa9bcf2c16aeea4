//! The mock server end to end: the real binary on 127.0.0.1, driven by a scripted WebSocket
//! client through a whole session, malformed input, admission and its statistics file.

use crate::util::ws::{self, STEP};
use base64::Engine as _;
use duplexbench_tui::mock::MockStats;
use duplexbench_tui::protocol::{self, names};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

/// The mock binary, killed (and its temp dir removed) however the test ends.
pub struct Mock {
    child: Child,
    pub addr: String,
    dir: PathBuf,
}

impl Mock {
    pub fn start(extra: &[&str]) -> Mock {
        let dir = std::env::temp_dir().join(format!(
            "duplexbench-mock-it-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("create the test's temp dir");
        let stats = dir.join("mock-stats.json");
        let child = Command::new(env!("CARGO_BIN_EXE_duplexbench-tui"))
            .args([
                "mock",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--stats-output",
            ])
            .arg(&stats)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the mock binary");
        let mut mock = Mock {
            child,
            addr: String::new(),
            dir,
        };
        // Read the listening line on a thread so the wait can time out.
        let stdout = mock.child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the mock prints `listening on ADDR` within 10 s");
        mock.addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        assert!(mock.addr.starts_with("127.0.0.1:"), "{}", mock.addr);
        mock
    }

    pub fn url(&self) -> String {
        format!("ws://{}{}", self.addr, protocol::PATH)
    }

    fn stats_path(&self) -> PathBuf {
        self.dir.join("mock-stats.json")
    }

    /// SIGTERM, then the exit status and the statistics the mock wrote.
    pub fn terminate(&mut self) -> MockStats {
        duplexbench_tui::sys::signal(self.child.id(), rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("poll the mock") {
                break status;
            }
            assert!(Instant::now() < deadline, "mock did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status:?}");
        let text = std::fs::read_to_string(self.stats_path()).expect("the mock wrote its stats");
        serde_json::from_str(&text).expect("the stats file is a MockStats")
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Client {
    ws: ws::Client,
}

impl Client {
    async fn connect(mock: &Mock) -> Client {
        Client {
            ws: ws::connect(&mock.url(), &[]).await.0,
        }
    }

    async fn send(&mut self, text: String) {
        ws::send(&mut self.ws, Message::Text(text.into())).await;
    }

    async fn recv(&mut self) -> Value {
        ws::next_json(&mut self.ws).await
    }

    /// The next event, which must be of type `kind`.
    async fn next_event(&mut self, kind: &str) -> Value {
        let event = self.recv().await;
        assert_eq!(event["type"], kind, "{event}");
        event
    }

    async fn append(&mut self, seq: u32, t_start_ms: u64, pcm_bytes: usize) {
        let audio = base64::engine::general_purpose::STANDARD.encode(vec![0u8; pcm_bytes]);
        let id = protocol::EventIds {
            shard: 0,
            worker: 0,
            session: 0,
        }
        .id(100 + seq);
        let frame = protocol::append_frame(id, seq, t_start_ms, &audio);
        self.send(frame).await;
    }

    /// created → update → updated.
    async fn set_up(mock: &Mock) -> Client {
        let mut client = Client::connect(mock).await;
        client.next_event(names::SESSION_CREATED).await;
        client.send(protocol::session_update(1)).await;
        client.next_event(names::SESSION_UPDATED).await;
        client
    }

    /// end → ended … drained → close → closed, then the server's close frame.
    async fn finish(&mut self) {
        self.send(protocol::input_end(2)).await;
        loop {
            if self.recv().await["type"] == names::INPUT_DRAINED {
                break;
            }
        }
        self.send(protocol::session_close(3)).await;
        self.next_event(names::SESSION_CLOSED).await;
        self.expect_close().await;
    }

    /// The replies of one 80 ms unit: a whole unit of audio, a transcript, `sglang.unit.done`.
    async fn expect_unit(&mut self, n: u32, t_start_ms: u64, duration_ms: u64) {
        self.expect_deltas(n).await;
        self.expect_unit_done(n, t_start_ms, duration_ms).await;
    }

    /// A whole unit of audio and a transcript, each naming unit `n` in its `sglang` block.
    async fn expect_deltas(&mut self, n: u32) {
        let audio = self.next_event(names::AUDIO_DELTA).await;
        let pcm = base64::engine::general_purpose::STANDARD
            .decode(audio["delta"].as_str().unwrap())
            .unwrap();
        assert_eq!(pcm.len(), 22_050 * 80 / 1000 * 2, "the padded tail too");
        assert_eq!(audio["sglang"]["unit_id"], format!("unit_{n}"));
        let text = self.next_event(names::TRANSCRIPT_DELTA).await;
        assert_eq!(text["sglang"]["unit_id"], format!("unit_{n}"));
    }

    async fn expect_unit_done(&mut self, n: u32, t_start_ms: u64, duration_ms: u64) {
        let unit = self.next_event(names::UNIT_DONE).await;
        assert_eq!(unit["unit_id"], format!("unit_{n}"));
        assert_eq!(unit["sglang"]["unit_id"], format!("unit_{n}"));
        // Floats, as the real server's.
        let media = &unit["sglang"]["media_time"];
        assert_eq!(media["t_start_ms"], t_start_ms as f64);
        assert_eq!(media["duration_ms"], duration_ms as f64);
    }

    /// The server's close frame after `session.closed`: code 1000 (issue #10; it was none).
    async fn expect_close(&mut self) {
        let next = tokio::time::timeout(STEP, self.ws.next()).await;
        match next.expect("the server closes in time") {
            Some(Ok(Message::Close(Some(frame)))) => {
                assert_eq!(u16::from(frame.code), 1000, "{frame:?}");
            }
            other => panic!("expected the server to close with 1000, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn full_session_gets_every_event_in_order() {
    let mock = Mock::start(&[]);
    let mut client = Client::connect(&mock).await;

    let created = client.next_event(names::SESSION_CREATED).await;
    assert_eq!(created["session"]["object"], "realtime.session");
    assert_eq!(created["session"]["model"], "duplexbench-mock");
    assert_eq!(created["session"]["sglang"]["granted"], Value::Null);
    let session_id = created["session"]["id"].clone();

    client.send(protocol::session_update(1)).await;
    let updated = client.next_event(names::SESSION_UPDATED).await;
    assert_eq!(updated["client_event_id"], "0000000000000001");
    assert_eq!(updated["session"]["id"], session_id);
    assert_eq!(updated["session"]["output_modalities"][0], "audio");
    let granted = &updated["session"]["sglang"]["granted"];
    assert_eq!(granted["interaction"], "native");
    assert_eq!(granted["native_full_duplex"], true);
    assert_eq!(granted["input_audio_format"]["type"], "audio/pcm");
    assert_eq!(granted["input_audio_format"]["rate"], 16_000);
    assert_eq!(granted["output_audio_format"]["rate"], 22_050);
    assert_eq!(granted["native_unit_ms"], 80);
    assert_eq!(granted["tail_policy"], "pad");
    assert_eq!(granted["client_commit"], false);
    assert_eq!(granted["pressure_policy"], "reject");
    assert_eq!(granted["strict_order"], true);
    // sglang-omni's RuntimeLimits: 60 s of 16 kHz input unprocessed at most.
    assert_eq!(granted["limits"]["max_input_bytes"], 1_920_000);

    // Four full 80 ms packets and a 40 ms one, so the tail is padded by 40 ms.
    for seq in 0..5u32 {
        let t_start_ms = u64::from(seq) * 80;
        let (bytes, duration_ms) = if seq == 4 { (1280, 40) } else { (2560, 80) };
        client.append(seq, t_start_ms, bytes).await;

        let accepted = client.next_event(names::ACCEPTED).await;
        assert_eq!(accepted["seq"], seq);
        assert_eq!(
            accepted["accepted_end_ms"],
            (t_start_ms + duration_ms) as f64
        );
        let id = protocol::EventIds {
            shard: 0,
            worker: 0,
            session: 0,
        }
        .id(100 + seq);
        assert_eq!(accepted["client_event_id"], format!("{id:016x}"));
        if seq == 0 {
            client.next_event(names::RESPONSE_CREATED).await;
        }
        // The 40 ms tail is not a whole unit: its unit comes at the end of input.
        if seq < 4 {
            client.expect_unit(seq, t_start_ms, duration_ms).await;
        }
    }

    client.send(protocol::input_end(2)).await;
    let ended = client.next_event(names::INPUT_ENDED).await;
    assert_eq!(ended["accepted_end_ms"], 360.0);
    assert_eq!(ended["tail_policy"], "pad");
    // The tail's deltas, then the response ends with it, before its unit.done.
    client.expect_deltas(4).await;
    let transcript = client.next_event(names::TRANSCRIPT_DONE).await;
    assert_eq!(transcript["transcript"], "…".repeat(5));
    client.next_event(names::AUDIO_DONE).await;
    let done = client.next_event(names::RESPONSE_DONE).await;
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(done["response"]["status_details"]["reason"], "stop");
    client.expect_unit_done(4, 320, 40).await;
    let drained = client.next_event(names::INPUT_DRAINED).await;
    assert_eq!(drained["accepted_end_ms"], 360.0);
    assert_eq!(drained["padding_ms"], 40.0);
    // Issue #10: consumed is the accepted input, the padding apart.
    assert_eq!(drained["consumed_ms"], 360.0);
    assert_eq!(drained["discarded_ms"], 0.0);

    client.send(protocol::session_close(3)).await;
    let closed = client.next_event(names::SESSION_CLOSED).await;
    assert_eq!(closed["reason"], "client_closed");
    client.expect_close().await;
}

#[tokio::test]
async fn malformed_messages_get_errors_and_the_session_keeps_working() {
    let mock = Mock::start(&[]);
    let mut client = Client::set_up(&mock).await;

    client.send("this is not json".to_string()).await;
    let error = client.next_event(names::ERROR).await;
    // sglang-omni's server's codes: invalid_request, invalid_state, …
    assert_eq!(error["error"]["code"], "invalid_request");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["sglang"]["fatal"], false);

    client.append(1, 80, 2560).await;
    let error = client.next_event(names::ERROR).await;
    assert_eq!(error["error"]["code"], "invalid_state");

    tokio::time::timeout(STEP, client.ws.send(Message::Binary(vec![1, 2, 3].into())))
        .await
        .unwrap()
        .unwrap();
    let error = client.next_event(names::ERROR).await;
    assert_eq!(error["error"]["code"], "invalid_request");

    client.append(0, 0, 2560).await;
    assert_eq!(client.next_event(names::ACCEPTED).await["seq"], 0);
    client.next_event(names::RESPONSE_CREATED).await;
    client.next_event(names::AUDIO_DELTA).await;
    client.next_event(names::TRANSCRIPT_DELTA).await;
    client.next_event(names::UNIT_DONE).await;
    client.finish().await;
}

#[tokio::test]
async fn wrong_path_is_refused_with_404() {
    let mock = Mock::start(&[]);
    let url = format!("ws://{}/elsewhere", mock.addr);
    let result = tokio::time::timeout(STEP, tokio_tungstenite::connect_async(url))
        .await
        .unwrap();
    match result {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 404);
        }
        other => panic!("expected HTTP 404, got {other:?}"),
    }
}

#[tokio::test]
async fn a_plain_http_request_gets_a_400_that_says_what_the_mock_is_issue_13() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mock = Mock::start(&[]);
    let mut tcp = TcpStream::connect(&mock.addr).await.unwrap();
    // The head in two pieces, as a slow client sends it.
    tcp.write_all(b"GET /v1/realtime HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    tcp.write_all(b"Accept: */*\r\n\r\n").await.unwrap();
    let mut reply = String::new();
    tokio::time::timeout(STEP, tcp.read_to_string(&mut reply))
        .await
        .unwrap()
        .unwrap();
    assert!(reply.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{reply}");
    assert!(
        reply.contains("this is a WebSocket server") && reply.contains("/v1/realtime"),
        "{reply}"
    );
    // A WebSocket client right after is served as ever.
    let url = format!("ws://{}/v1/realtime", mock.addr);
    let connected = tokio::time::timeout(STEP, tokio_tungstenite::connect_async(url))
        .await
        .unwrap();
    assert!(connected.is_ok(), "{connected:?}");
}

/// A plain `GET` of `path` on a real socket: the whole reply.
async fn http_get(addr: &str, path: &str) -> String {
    http_request(addr, "GET", path).await
}

/// A plain HTTP request on a real socket: the whole reply.
async fn http_request(addr: &str, method: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let request = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    tokio::time::timeout(STEP, tcp.read_to_string(&mut reply))
        .await
        .unwrap()
        .unwrap();
    reply
}

/// sglang-omni's docs wait for the server with `curl --fail …/v1/realtime/capabilities`, and a
/// readiness probe asks `/health`: the mock answers both as the real server does (the
/// capabilities before any session: every modality served, `microturn_ms` "variable").
#[tokio::test]
async fn the_mock_answers_a_health_check_and_states_its_capabilities() {
    let mock = Mock::start(&["--profile", "minicpmo"]);
    let health = http_get(&mock.addr, "/health").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    // `curl -I`: the headers, no body.
    let head = http_request(&mock.addr, "HEAD", "/v1/realtime/capabilities").await;
    assert!(
        head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    let reply = http_get(&mock.addr, "/v1/realtime/capabilities?x=1").await;
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(
        reply.contains("content-type: application/json\r\n"),
        "{reply}"
    );
    let body = reply.split_once("\r\n\r\n").unwrap().1;
    let caps: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(caps["model"], "duplexbench-mock");
    assert_eq!(caps["native_full_duplex"], true);
    assert_eq!(caps["native_unit_ms"], 1000);
    assert_eq!(caps["microturn_ms"], "variable");
    assert_eq!(
        caps["output_modalities"],
        serde_json::json!(["audio", "text"])
    );
    assert_eq!(caps["input_image_format"]["max_frames_per_unit"], 4);
    assert_eq!(caps["limits"]["max_output_events"], 256);
    assert!(caps.get("rejections").is_none(), "{caps}");
    // Another protocol has no such page; the health check it answers all the same.
    let vllm = Mock::start(&["--protocol", "vllm"]);
    let reply = http_get(&vllm.addr, "/v1/realtime/capabilities").await;
    assert!(reply.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{reply}");
    let health = http_get(&vllm.addr, "/health").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
}

/// With `--tls-cert` the mock answers HTTP inside TLS as on a plain port (`/health` over
/// https://, for a readiness probe), and a plain request to its TLS port with a 400 that says
/// it is a TLS server (the QA pass of 2026-12-07: an empty reply, and a bare TLS alert).
#[tokio::test]
async fn a_tls_mock_answers_https_health_and_tells_a_plain_client_it_is_tls() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let dir = crate::util::TempDir::new("mock-tls-http");
    let (cert, key) = crate::openai::self_signed(&dir);
    let mock = Mock::start(&["--tls-cert", &cert, "--tls-key", &key]);
    let plain = http_get(&mock.addr, "/health").await;
    assert!(plain.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{plain}");
    assert!(plain.contains("this is a TLS server (wss://"), "{plain}");
    // https://127.0.0.1/health, trusting the mock's certificate.
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject as _;
    for c in rustls::pki_types::CertificateDer::pem_file_iter(&cert).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = TcpStream::connect(&mock.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut reply = Vec::new();
    // The mock closes after its answer (with or without close_notify).
    let _ = tokio::time::timeout(STEP, tls.read_to_end(&mut reply)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
}

#[tokio::test]
async fn max_sessions_refuses_a_second_connection_with_503_until_the_first_leaves() {
    let mut mock = Mock::start(&["--max-sessions", "1"]);
    let mut first = Client::connect(&mock).await;
    first.next_event(names::SESSION_CREATED).await;

    let second = tokio::time::timeout(STEP, tokio_tungstenite::connect_async(mock.url()))
        .await
        .unwrap();
    match second {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503);
        }
        other => panic!("expected HTTP 503, got {other:?}"),
    }

    // Once the first session has closed, its place is free again.
    first.send(protocol::session_close(3)).await;
    first.next_event(names::SESSION_CLOSED).await;
    first.expect_close().await;
    let mut third = Client::connect(&mock).await;
    third.next_event(names::SESSION_CREATED).await;
    third.send(protocol::session_close(3)).await;
    third.next_event(names::SESSION_CLOSED).await;

    let stats = mock.terminate();
    assert_eq!(stats.sessions_rejected, 1);
    assert_eq!(stats.sessions_served, 2);
}

#[tokio::test]
async fn sigterm_writes_the_statistics_file() {
    let mut mock = Mock::start(&[]);
    let mut client = Client::set_up(&mock).await;
    for seq in 0..3u32 {
        client.append(seq, u64::from(seq) * 80, 2560).await;
        client.next_event(names::ACCEPTED).await;
        if seq == 0 {
            client.next_event(names::RESPONSE_CREATED).await;
        }
        client.next_event(names::AUDIO_DELTA).await;
        client.next_event(names::TRANSCRIPT_DELTA).await;
        client.next_event(names::UNIT_DONE).await;
    }
    client.append(7, 560, 2560).await;
    client.next_event(names::ERROR).await;
    client.finish().await;

    // A second client that leaves without a word is served but never closed.
    let mut leaver = Client::connect(&mock).await;
    leaver.next_event(names::SESSION_CREATED).await;
    drop(leaver);

    let stats = mock.terminate();
    assert_eq!(stats.schema_version, 1);
    assert_eq!(stats.pid, mock.child.id());
    assert_eq!(stats.listen_addr, mock.addr);
    assert_eq!(stats.sessions_served, 2);
    assert_eq!(stats.sessions_closed, 1);
    assert_eq!(stats.sessions_rejected, 0);
    assert_eq!(stats.appends_received, 4);
    assert_eq!(stats.protocol_errors, 1);
    assert!(stats.usage.wall_seconds > 0.0);
    // The appends were sent as fast as possible, so they arrived early, but well within 80 ms
    // per packet of their schedule.
    assert!(stats.arrival_deviation_ms.max < 250.0, "{stats:?}");
}

#[test]
fn a_taken_port_fails_with_a_message_that_names_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let child = Command::new(env!("CARGO_BIN_EXE_duplexbench-tui"))
        .args(["mock", "--host", "127.0.0.1", "--port", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Mock {
        child,
        addr: String::new(),
        dir: std::env::temp_dir().join("duplexbench-mock-it-unused"),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = guard.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "mock kept running on a taken port"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(2));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut guard.child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && stderr.contains("--port 0"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_oversized_message_ends_only_its_own_session() {
    let mut mock = Mock::start(&[]);
    let mut big = Client::set_up(&mock).await;
    // The mock rejects the frame from its header and drops the connection while the client is
    // still writing, so the send may fail with a reset and the fatal error event (sent best
    // effort) may be lost with it. Either way the connection must end.
    let huge = Message::Text("x".repeat(5 << 20).into());
    let _ = tokio::time::timeout(STEP, big.ws.send(huge)).await;
    loop {
        match tokio::time::timeout(STEP, big.ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                let event: Value = serde_json::from_str(text.as_str()).expect("events are JSON");
                assert_eq!(event["error"]["code"], "message_too_large", "{event}");
                assert_eq!(event["sglang"]["fatal"], true);
            }
            Ok(Some(Ok(Message::Close(_))) | Some(Err(_)) | None) => break,
            Ok(Some(Ok(other))) => panic!("unexpected {other:?}"),
            Err(_) => panic!("the mock kept an oversized session open"),
        }
    }

    let mut next = Client::set_up(&mock).await;
    next.finish().await;
    let stats = mock.terminate();
    assert_eq!(stats.protocol_errors, 1);
    assert_eq!((stats.sessions_served, stats.sessions_closed), (2, 1));
}

/// Issue #10: the real client sends `t_start_ms` as `80.0` and ids as uuid4 hex; the mock took
/// the float for invalid JSON and 0 of 8 sessions got past their first append.
#[tokio::test]
async fn float_milliseconds_and_unknown_fields_are_accepted() {
    let mock = Mock::start(&[]);
    let mut client = Client::connect(&mock).await;
    client.next_event(names::SESSION_CREATED).await;
    client
        .send(r#"{"type":"session.update","event_id":"9b2f4c1de0a84f6b8a3e5d7c9b1a2f3e","session":{"output_modalities":["audio"],"voice":"any"},"unknown":{"x":1}}"#.to_string())
        .await;
    client.next_event(names::SESSION_UPDATED).await;
    let audio = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 2560]);
    for seq in 0..2u32 {
        let t_start_ms = f64::from(seq) * 80.0;
        client
            .send(format!(
                r#"{{"type":"input_audio_buffer.append","event_id":"{:032x}","audio":"{audio}","sglang":{{"seq":{seq},"t_start_ms":{t_start_ms:?},"extra":true}}}}"#,
                u128::from(seq) + 0xfeed
            ))
            .await;
        let accepted = client.next_event(names::ACCEPTED).await;
        assert_eq!(accepted["seq"], seq);
        assert!(accepted["event_id"].is_string(), "{accepted}");
        if seq == 0 {
            client.next_event(names::RESPONSE_CREATED).await;
        }
        client.expect_unit(seq, u64::from(seq) * 80, 80).await;
    }
    client.finish().await;
}

#[tokio::test]
async fn asking_voicechat_for_minicpmo_modalities_is_a_fatal_error_naming_what_it_serves() {
    let mock = Mock::start(&["--profile", "voicechat"]);
    let mut client = Client::connect(&mock).await;
    client.next_event(names::SESSION_CREATED).await;
    client
        .send(r#"{"type":"session.update","event_id":"u1","session":{"output_modalities":["audio","text"]}}"#.to_string())
        .await;
    let error = client.next_event(names::ERROR).await;
    assert_eq!(error["sglang"]["fatal"], true);
    assert_eq!(error["error"]["type"], "server_error");
    assert_eq!(error["error"]["code"], "invalid_request");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"["text"]"#) && message.contains(r#"["audio"]"#),
        "{message}"
    );
    // The session ends as sglang-omni's server ends it after a fatal error: no grant,
    // `session.closed` with the error's code, and a normal close (1000).
    let closed = client.next_event(names::SESSION_CLOSED).await;
    assert_eq!(closed["reason"], "invalid_request");
    let next = tokio::time::timeout(STEP, client.ws.next()).await.unwrap();
    match next {
        Some(Ok(Message::Close(Some(frame)))) => assert_eq!(u16::from(frame.code), 1000),
        other => panic!("expected a 1000 close, got {other:?}"),
    }
}

#[tokio::test]
async fn minicpmo_grants_audio_and_text_with_1000ms_units() {
    let mock = Mock::start(&["--profile", "minicpmo"]);
    let mut client = Client::connect(&mock).await;
    client.next_event(names::SESSION_CREATED).await;
    client
        .send(r#"{"type":"session.update","event_id":"u1","session":{"output_modalities":["audio","text"]}}"#.to_string())
        .await;
    let updated = client.next_event(names::SESSION_UPDATED).await;
    let granted = &updated["session"]["sglang"]["granted"];
    assert_eq!(granted["native_unit_ms"], 1000);
    assert_eq!(granted["output_audio_format"]["rate"], 24_000);
    assert_eq!(
        granted["output_modalities"],
        serde_json::json!(["audio", "text"])
    );
}

/// A client of the Fun-ASR `mock` that sent START and got `started`.
async fn funasr_started(mock: &Mock) -> ws::Client {
    let (mut client, _) = ws::connect(&format!("ws://{}/", mock.addr), &[]).await;
    ws::send(&mut client, Message::Text("START".into())).await;
    assert_eq!(
        ws::next_json(&mut client).await,
        serde_json::json!({"event":"started"})
    );
    client
}

/// `realtime_ws.py` takes messages up to its `--ws-max-size` (10 MiB) and closes with 1009 on a
/// larger one; the mock refused 4 MiB and dropped the connection without a close frame.
#[tokio::test]
async fn the_funasr_mock_takes_10_mib_messages_and_closes_with_1009_past_them() {
    let mock = Mock::start(&["--protocol", "funasr"]);
    let mut client = funasr_started(&mock).await;
    ws::send(&mut client, Message::Binary(vec![0; 5 << 20].into())).await;
    ws::send(&mut client, Message::Binary(vec![0; 11 << 20].into())).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let next = tokio::time::timeout_at(deadline, client.next())
            .await
            .expect("an answer in time");
        match next {
            // The 5 MiB of silence may be answered first.
            Some(Ok(Message::Text(_))) => continue,
            Some(Ok(Message::Close(Some(frame)))) => {
                assert_eq!(u16::from(frame.code), 1009);
                break;
            }
            other => panic!("expected a 1009 close, got {other:?}"),
        }
    }
}

/// Fun-ASR's handler ends on the error `np.frombuffer(…, dtype=np.int16)` raises for an odd
/// number of PCM bytes, and the connection closes normally; the mock does the same, on a real
/// socket.
#[tokio::test]
async fn the_funasr_mock_closes_on_an_odd_length_audio_frame_as_the_server() {
    let mock = Mock::start(&["--protocol", "funasr"]);
    let mut client = funasr_started(&mock).await;
    ws::send(&mut client, Message::Binary(vec![0; 3200].into())).await;
    ws::send(&mut client, Message::Binary(vec![0; 3].into())).await;
    ws::send(&mut client, Message::Text("STOP".into())).await;
    let closed = tokio::time::timeout(STEP, client.next())
        .await
        .expect("an answer in time");
    match closed {
        Some(Ok(Message::Close(Some(frame)))) => assert_eq!(u16::from(frame.code), 1000),
        other => panic!("expected the close frame (1000), got {other:?}"),
    }
}
