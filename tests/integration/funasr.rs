//! Fun-ASR end to end (issue 11): the real binary drives the Fun-ASR mock over real sockets
//! with the built-in speech sample (5.83 s, 59 frames of 100 ms), and writes the benchmark's
//! figures. Runs are a few clients × one play of the sample.

use crate::fake_funasr;
use crate::mock_protocol::Mock;
use crate::util::{self, describe, run_to, summary, ws, TempDir};
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

const LIMIT: Duration = Duration::from_secs(60);

/// The keys of the benchmark's lines, in its order.
const CLIENT_KEYS: &[&str] = &[
    "type",
    "client_id",
    "audio_seconds",
    "chunk_ms",
    "client_ping_interval",
    "client_ping_timeout",
    "messages",
    "result_messages",
    "partial_messages",
    "final_messages",
    "events",
    "first_update_ms",
    "final_update_ms",
    "final_after_stop_ms",
    "stopped",
    "errors",
    "send_seconds",
    "wall_seconds",
    "audio_per_wall",
    "send_audio_per_wall",
    "response_lag_ms_max",
    "response_lag_ms_p95",
];
const SUMMARY_KEYS: &[&str] = &[
    "type",
    "clients",
    "total_audio_seconds",
    "elapsed_seconds",
    "aggregate_audio_per_wall",
    "first_update_ms_p50",
    "first_update_ms_p95",
    "final_after_stop_ms_p50",
    "final_after_stop_ms_p95",
    "client_response_lag_ms_p95_max",
    "partial_messages",
    "final_messages",
    "errors",
];

/// The keys of a JSON object line, in the order written.
fn keys_in_order(line: &str) -> Vec<String> {
    // serde_json's Map sorts its keys; read them off the text instead, depth 1 only.
    let mut keys = Vec::new();
    let (mut depth, mut in_str, mut escaped, mut start) = (0, false, false, None);
    for (i, ch) in line.char_indices() {
        if in_str {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    in_str = false;
                    if let Some(s) = start.take() {
                        if line[i + 1..].trim_start().starts_with(':') {
                            keys.push(line[s..i].to_string());
                        }
                    }
                }
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => {
                in_str = true;
                start = (depth == 1).then_some(i + 1);
            }
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
    }
    keys
}

fn received(trace: &str) -> Vec<Value> {
    trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["direction"] == "receive")
        .map(|r| r["event"].clone())
        .collect()
}

#[test]
fn the_full_flow_gives_partials_at_the_cadence_one_final_then_stopped_issue_11() {
    let _serial = util::serial();
    let dir = TempDir::new("funasr-flow");
    let out = dir.join("run");
    let jsonl = dir.join("bench.jsonl");
    let ran = run_to(
        &out,
        &[
            "--protocol",
            "funasr",
            "--clients",
            "2",
            "--language",
            "en",
            "--keep-traces",
            "--no-sampler",
            "--output-jsonl",
            jsonl.to_str().unwrap(),
        ],
        LIMIT,
    );
    let s = summary(&out);
    assert_eq!(s["settings"]["packet_ms"], 100, "100 ms frames for Fun-ASR");
    let trace = std::fs::read_to_string(out.join("sessions/w0-s0000/trace.jsonl")).unwrap();
    let events = received(&trace);
    assert_eq!(events[0]["event"], "started", "{}", describe(&ran));
    assert_eq!(events[1]["event"], "language_set");
    let partials: Vec<u64> = events
        .iter()
        .filter(|e| e["is_final"] == false)
        .map(|e| e["duration_ms"].as_u64().unwrap())
        .collect();
    // The first decode once 480 ms have arrived (500 in 100 ms frames), then at the first frame
    // past each 960 ms more (the 0.48 s of wall time between decodes passes sooner).
    assert_eq!(partials, [500, 1500, 2500, 3500, 4500, 5500]);
    let finals: Vec<&Value> = events.iter().filter(|e| e["is_final"] == true).collect();
    assert_eq!(finals.len(), 1);
    assert_eq!(
        finals[0]["duration_ms"], 5828,
        "the final covers every sample"
    );
    assert_eq!(events.last().unwrap()["event"], "stopped");

    // The benchmark's figures agree with the trace they were measured on.
    let f = &s["funasr"];
    let c0 = &f["clients"][0];
    assert_eq!(c0["partial_messages"], 6);
    assert_eq!(c0["final_messages"], 1);
    assert_eq!(c0["stopped"], true);
    assert_eq!(c0["events"], serde_json::json!({"stopped": 1}));
    assert_eq!(f["summary"]["partial_messages"], 12);
    // By hand from the trace and receipts: the first result after the first frame's send, the
    // final after the STOP line (trace times are to the µs, so within a rounding step).
    let records: Vec<Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let time_of = |pred: &dyn Fn(&Value) -> bool| {
        records.iter().find(|r| pred(r)).unwrap()["time_s"]
            .as_f64()
            .unwrap()
    };
    let receipts: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("sessions/w0-s0000/input-send-receipts.json")).unwrap(),
    )
    .unwrap();
    let audio_s = receipts["appends"][0]["start_s"].as_f64().unwrap();
    let first_s = time_of(&|r| r["event"]["partial"].is_string());
    let stop_s = time_of(&|r| r["event"] == "STOP");
    let final_s = time_of(&|r| r["event"]["is_final"] == true);
    let near = |v: &Value, ms: f64| (v.as_f64().unwrap() - ms).abs() <= 0.11;
    assert!(
        near(&c0["first_update_ms"], (first_s - audio_s) * 1000.0),
        "{c0}"
    );
    assert!(
        near(&c0["final_after_stop_ms"], (final_s - stop_s) * 1000.0),
        "{c0}"
    );
    assert!(
        near(&c0["final_update_ms"], (final_s - audio_s) * 1000.0),
        "{c0}"
    );
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        stdout.contains("FunASR realtime WebSocket benchmark\nclients: 2\n"),
        "{}",
        describe(&ran)
    );
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("partial/final messages: 12 / 2"), "{md}");
    // The progress line 5 s in shows the benchmark's figures live, from the workers' telemetry.
    let stderr = String::from_utf8_lossy(&ran.stderr);
    let live = stderr
        .lines()
        .find_map(|l| {
            l.split_once("Fun-ASR p50/p95: first update ")
                .map(|(_, v)| v)
        })
        .unwrap_or_else(|| panic!("no live Fun-ASR figures\n{}", describe(&ran)));
    assert!(
        live.starts_with(|c: char| c.is_ascii_digit()),
        "a first update so far: {live}"
    );

    // The JSONL: one line per client, then the summary, with exactly the benchmark's keys.
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    for line in &lines[..2] {
        assert!(line.starts_with(r#"{"type": "client", "#), "{line}");
        assert_eq!(keys_in_order(line), CLIENT_KEYS, "{line}");
    }
    assert_eq!(keys_in_order(lines[2]), SUMMARY_KEYS, "{}", lines[2]);
    let last: Value = serde_json::from_str(lines[2]).unwrap();
    assert_eq!(last["type"], "summary");
    assert_eq!(last["clients"], 2);
}

#[test]
fn blocking_decodes_give_fewer_partials_at_the_same_load_issue_11() {
    let _serial = util::serial();
    // 3 clients, 400 ms a decode: batched they fit in one 960 ms chunk, serial (1.2 s) they do
    // not.
    let partials = |blocking: bool| {
        let dir = TempDir::new("funasr-blocking");
        let out = dir.join("run");
        let mut args = vec![
            "--protocol",
            "funasr",
            "--clients",
            "3",
            "--no-sampler",
            "--decode-ms",
            "400",
            "--decode-ms-per-audio-sec",
            "0",
        ];
        if blocking {
            args.push("--blocking-decode");
        }
        let ran = run_to(&out, &args, LIMIT);
        let s = summary(&out);
        s["funasr"]["summary"]["partial_messages"]
            .as_u64()
            .unwrap_or_else(|| panic!("no figures\n{}", describe(&ran)))
    };
    let batched = partials(false);
    let blocking = partials(true);
    assert_eq!(batched, 18, "6 partials for each of 3 clients");
    assert!(blocking < batched, "blocking {blocking}, batched {batched}");
}

#[test]
fn a_server_that_never_sends_stopped_is_bounded_by_recv_timeout_issue_11() {
    let _serial = util::serial();
    let dir = TempDir::new("funasr-never-stopped");
    let out = dir.join("run");
    let jsonl = dir.join("bench.jsonl");
    let started = std::time::Instant::now();
    let ran = run_to(
        &out,
        &[
            "--protocol",
            "funasr",
            "--clients",
            "2",
            "--no-sampler",
            // More than the 1 s between partials (960 ms of audio in 100 ms frames, and the
            // decode), or the wait for the next one would already give up.
            "--recv-timeout",
            "2s",
            "--fault-never-stopped",
            "--output-jsonl",
            jsonl.to_str().unwrap(),
        ],
        LIMIT,
    );
    // 5.8 s of audio, then at most 2 s of waiting (and the run's own start and end).
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(ran.status.code(), Some(1), "{}", describe(&ran));
    let s = summary(&out);
    let errors = s["sessions"]["errors"].to_string();
    assert!(errors.contains("no stopped"), "{errors}");
    // The benchmark records no error when a final came before the timeout, as its own code.
    let client: Value = serde_json::from_str(
        std::fs::read_to_string(&jsonl)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(client["stopped"], false);
    assert_eq!(client["final_messages"], 1);
    assert_eq!(client["errors"], serde_json::json!([]));
}

/// A server that answers START and then says nothing: the benchmark's receive loop times out
/// mid-stream (one error), it sends the rest and STOP, and waits no more — its receive loop
/// is over. The client waited a whole `--recv-timeout` after STOP too, and its `wall_seconds`
/// (and the figures from it) came out that much longer than the benchmark's.
#[test]
fn after_a_mid_stream_timeout_stop_is_not_waited_for_again_issue_11() {
    let _serial = util::serial();
    let server = util::LoopbackServer::start(|stream| async move {
        let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
            return;
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(deadline, ws.next()).await {
            if matches!(&msg, Message::Text(t) if t.as_str() == "START") {
                let started = Message::Text(r#"{"event":"started"}"#.into());
                let _ = futures_util::SinkExt::send(&mut ws, started).await;
            }
        }
    });
    let dir = TempDir::new("funasr-silent");
    let out = dir.join("run");
    let jsonl = dir.join("bench.jsonl");
    let url = format!("ws://{}", server.addr);
    let args = ["--protocol", "funasr", "--url", &url, "--no-sampler"];
    let timeout = [
        "--recv-timeout",
        "3s",
        "--output-jsonl",
        jsonl.to_str().unwrap(),
    ];
    let ran = run_to(&out, &[&args[..], &timeout[..]].concat(), LIMIT);
    assert_eq!(ran.status.code(), Some(1), "{}", describe(&ran));
    let line = std::fs::read_to_string(&jsonl).unwrap();
    let client: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert_eq!(
        client["errors"],
        serde_json::json!(["timed out waiting for server message after 3.0s"])
    );
    let waited_s =
        client["wall_seconds"].as_f64().unwrap() - client["send_seconds"].as_f64().unwrap();
    assert!(waited_s < 3.0, "waited {waited_s} s after STOP: {client}");
}

#[test]
fn the_fun_asr_mock_is_conformant_at_a_url_without_a_path_issue_11() {
    let _serial = util::serial();
    let mock = Mock::start(&["--protocol", "funasr"]);
    let url = format!("ws://{}", mock.addr);
    let dir = TempDir::new("funasr-conform");
    let out = dir.join("out");
    let checked = util::run(
        &[
            "conform",
            "--protocol",
            "funasr",
            "--url",
            &url,
            "--language",
            "中文",
            "--hotwords",
            "foo,bar",
            "--output",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.contains("verdict: conformant: 2 sessions (protocol funasr), 0 violations"),
        "{}",
        describe(&checked)
    );
    assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    // The settings went out and their acks were checked.
    let trace = std::fs::read_to_string(out.join("sessions/w0-s0000/trace.jsonl")).unwrap();
    assert!(
        trace.contains("HOTWORDS:foo,bar") && trace.contains("LANGUAGE:中文"),
        "{trace}"
    );
    // --duration has no say over a WAV's length: refused, not ignored.
    let both = util::run(
        &[
            "conform",
            "--url",
            &url,
            "--audio",
            "x.wav",
            "--duration",
            "5s",
        ],
        LIMIT,
    );
    assert_eq!(both.status.code(), Some(2), "{}", describe(&both));
}

/// Runs one client with 1 s of audio against the fake Fun-ASR server, writing the JSONL.
fn run_against_fake(server: &fake_funasr::FakeFunasr, dir: &TempDir) -> std::process::Output {
    let wav = dir.join("one-second.wav");
    util::write_wav(&wav, 16_000, 1, 1000);
    run_to(
        &dir.join("run"),
        &[
            "--protocol",
            "funasr",
            "--url",
            &server.url,
            "--audio",
            wav.to_str().unwrap(),
            "--clients",
            "1",
            "--keep-traces",
            "--no-sampler",
            "--output-jsonl",
            dir.join("bench.jsonl").to_str().unwrap(),
        ],
        LIMIT,
    )
}

/// The benchmark keeps a text frame that is not JSON as `{"_raw": …}` and a binary frame as
/// `{"_binary_bytes": n}`, counts them in `messages` (not in `events`) and goes on; ours does
/// the same and traces them, and they neither fail the session nor make the run incomplete.
#[test]
fn frames_that_are_not_json_are_counted_and_traced_and_fail_nothing() {
    let _serial = util::serial();
    let server = fake_funasr::start();
    let dir = TempDir::new("funasr-odd-frames");
    let ran = run_against_fake(&server, &dir);
    let out = dir.join("run");
    let s = summary(&out);
    assert_eq!(s["server"]["protocol_errors"], 0, "{}", describe(&ran));
    assert_eq!(s["sessions"]["completed"], 1, "{}", describe(&ran));
    assert_eq!(s["verdict"]["complete"], true, "{}", s["verdict"]);
    // Exit 1 only if the busy box made a packet late.
    assert!(
        ran.status.code() == Some(0) || s["verdict"]["pacing_qualified"] == false,
        "{}",
        describe(&ran)
    );
    let client: Value = serde_json::from_str(
        std::fs::read_to_string(dir.join("bench.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    // The two odd frames, a partial, the final and `stopped`.
    assert_eq!(client["messages"], 5, "{client}");
    assert_eq!(client["result_messages"], 2, "{client}");
    assert_eq!(client["events"], serde_json::json!({"stopped": 1}));
    assert_eq!(client["errors"], serde_json::json!([]));
    let trace = std::fs::read_to_string(out.join("sessions/w0-s0000/trace.jsonl")).unwrap();
    let events = received(&trace);
    assert!(
        events.contains(&Value::from("server busy, please hold")),
        "{trace}"
    );
    assert!(
        events.contains(&serde_json::json!({"_binary_bytes": 3})),
        "{trace}"
    );
    assert!(
        !trace.contains(r#""direction":"error""#),
        "no error line: {trace}"
    );
}

/// The benchmark's websockets library closes with 1000 (normal closure) when its `async with`
/// block ends; ours sent a close frame without a code.
#[test]
fn the_client_closes_with_1000_as_the_benchmarks_websockets_library() {
    let _serial = util::serial();
    let server = fake_funasr::start();
    let dir = TempDir::new("funasr-close");
    let ran = run_against_fake(&server, &dir);
    util::assert_finished(&ran);
    // The probe before the run (a handshake it closes at once), then the session.
    assert_eq!(
        server.closes(),
        [Some(1000), Some(1000)],
        "{}",
        describe(&ran)
    );
}

/// `realtime_ws.py`'s `handle_client`, command by command, against the mock over a socket: no
/// answer to a command it does not know, `postprocess_hotwords_set` with the pairs, COMMIT's
/// own error, a final whose `partial_start_ms` is 0, and any path (the handler never reads it).
#[tokio::test]
async fn the_mock_answers_commands_as_the_real_server_on_any_path() {
    let mock = Mock::start(&["--protocol", "funasr"]);
    let url = format!("ws://{}/any/path?x=1", mock.addr);
    let (mut ws, _) = ws::connect(&url, &[]).await;
    ws::send(&mut ws, Message::Text("HELLO".into())).await;
    ws::send(
        &mut ws,
        Message::Text("POSTPROCESS_HOTWORDS:teh=>the".into()),
    )
    .await;
    assert_eq!(
        ws::next_json(&mut ws).await,
        serde_json::json!({"event":"postprocess_hotwords_set","postprocess_hotwords":{"teh":"the"}}),
        "HELLO got no answer"
    );
    ws::send(&mut ws, Message::Text("COMMIT".into())).await;
    assert_eq!(
        ws::next_json(&mut ws).await,
        serde_json::json!({"event":"error","error":"COMMIT requires --endpoint-mode client"})
    );
    ws::send(&mut ws, Message::Text("START".into())).await;
    assert_eq!(ws::next_json(&mut ws).await["event"], "started");
    for _ in 0..10 {
        ws::send(&mut ws, Message::Binary(vec![0u8; 3200].into())).await;
    }
    ws::send(&mut ws, Message::Text("STOP".into())).await;
    // A partial or two, then the final and `stopped`; bounded.
    let mut last = Vec::new();
    for _ in 0..10 {
        let v = ws::next_json(&mut ws).await;
        let stopped = v["event"] == "stopped";
        last.push(v);
        if stopped {
            break;
        }
    }
    let [.., final_, stopped] = last.as_slice() else {
        panic!("{last:?}")
    };
    assert_eq!(stopped["event"], "stopped", "{last:?}");
    assert_eq!(final_["is_final"], true, "{last:?}");
    assert_eq!(final_["partial_start_ms"], 0);
    assert_eq!(final_["duration_ms"], 1000);
}

/// A server that answers START with an ack of another spelling (`STARTED`) and then waits: the
/// session's reason says what the server sent instead of `started`, not that it sent nothing.
#[test]
fn a_wrong_ack_is_named_in_the_reason_not_called_silence() {
    let _serial = util::serial();
    let server = util::LoopbackServer::start(|stream| async move {
        let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
            return;
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(deadline, ws.next()).await {
            if msg.to_text().is_ok_and(|t| t.contains("START")) {
                let ack = Message::Text(r#"{"event":"STARTED"}"#.into());
                let _ = futures_util::SinkExt::send(&mut ws, ack).await;
            }
        }
    });
    let dir = TempDir::new("funasr-wrong-ack");
    let ran = run_to(
        &dir.join("run"),
        &[
            "--protocol",
            "funasr",
            "--url",
            &format!("ws://{}", server.addr),
            "--clients",
            "1",
            "--recv-timeout",
            "1s",
            "--no-sampler",
        ],
        LIMIT,
    );
    assert_eq!(ran.status.code(), Some(1), "{}", describe(&ran));
    let errors = summary(&dir.join("run"))["sessions"]["errors"].to_string();
    assert!(
        errors.contains("no started") && errors.contains(r#"STARTED"#),
        "{errors}"
    );
}

/// The server's keepalive (`--ws-ping-interval`, `--ws-ping-timeout`, websockets' own): pings
/// of 4 bytes every interval, and a ping left unanswered past the timeout closes with 1011
/// `keepalive ping timeout`. A bare socket, which answers no ping, shows both.
#[tokio::test]
async fn the_mock_pings_as_the_server_and_closes_a_peer_that_never_answers() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mock = Mock::start(&[
        "--protocol",
        "funasr",
        "--ws-ping-interval",
        "0.2",
        "--ws-ping-timeout",
        "0.5",
    ]);
    let mut tcp = tokio::net::TcpStream::connect(&mock.addr).await.unwrap();
    tcp.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    // Read to the end of the connection: the mock closes it (bounded).
    loop {
        match tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => bytes.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the mock never closed a peer that answers no ping"),
        }
    }
    let head = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(bytes.starts_with(b"HTTP/1.1 101"));
    // Server frames are unmasked and short here: opcode, length, payload.
    let mut frames = Vec::new();
    let mut rest = &bytes[head..];
    while let [op, len, tail @ ..] = rest {
        let len = usize::from(len & 0x7f);
        frames.push((op & 0x0f, tail[..len].to_vec()));
        rest = &tail[len..];
    }
    let pings: Vec<&Vec<u8>> = frames
        .iter()
        .filter(|(op, _)| *op == 0x9)
        .map(|(_, p)| p)
        .collect();
    assert!(pings.len() >= 2, "{frames:?}");
    assert!(pings.iter().all(|p| p.len() == 4), "{frames:?}");
    let (op, close) = frames.last().unwrap();
    assert_eq!(*op, 0x8, "{frames:?}");
    assert_eq!(&close[..2], &1011u16.to_be_bytes());
    assert_eq!(&close[2..], b"keepalive ping timeout");
    // The first ping 0.2 s in, the close 0.5 s after it: not at once.
    assert!(started.elapsed() >= Duration::from_millis(600));
}

/// A client that answers the pings (ours: its WebSocket answers them) keeps its sessions: a
/// run of 5.8 s against the mock with a ping every 0.2 s and a timeout of 3 s completes.
#[test]
fn a_run_answers_the_mocks_keepalive_pings() {
    let _serial = util::serial();
    let dir = TempDir::new("funasr-keepalive");
    let out = dir.join("run");
    let ran = run_to(
        &out,
        &[
            "--protocol",
            "funasr",
            "--clients",
            "2",
            "--ws-ping-interval",
            "0.2",
            "--ws-ping-timeout",
            "3",
            "--no-sampler",
        ],
        LIMIT,
    );
    // Complete: no session closed by the keepalive (pacing on a busy box is not the point).
    let s = summary(&out);
    assert_eq!(s["verdict"]["complete"], true, "{}", describe(&ran));
    assert_eq!(s["settings"]["mock"]["funasr"]["ws_ping_interval"], 0.2);
}
