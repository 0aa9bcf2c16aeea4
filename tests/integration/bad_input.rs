//! Bad input gets a clear error and loses nothing: wrong flags, an unreachable server, a server
//! that closes mid-session or sends garbage, a full server.

use crate::fake_server::{self, Misbehaviour};
use crate::util::{self, describe, summary, TempDir};
use std::time::Duration;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_bad_flag_value_names_the_flag_and_exits_2() {
    for (args, flag) in [
        (&["run", "--sessions", "0"][..], "--sessions"),
        (&["run", "--duration", "soon"][..], "--duration"),
        (&["run", "--trace", "everything"][..], "--trace"),
        (&["run", "--url", "http://127.0.0.1:9/"][..], "--url"),
        (&["run", "--duration", "10ms"][..], "--duration"),
    ] {
        let out = util::run(args, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        assert!(
            stderr(&out).contains(flag),
            "{args:?} should name {flag}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn an_unreachable_url_is_a_clear_start_up_error() {
    // A port that was free a moment ago: nothing listens there.
    let dir = TempDir::new("unreachable");
    let url = util::unreachable_url();
    let out = util::run(
        &[
            "run",
            "--no-tui",
            "--url",
            &url,
            "-s",
            "2",
            "-d",
            "1s",
            "--output",
            dir.join("out").to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot reach the server") && err.contains(&url),
        "{err}"
    );
    assert!(err.contains("--url"), "the message says what to do: {err}");
    // No folder is named for a run that records nothing (and none is left).
    assert!(!err.contains("output folder"), "{err}");
    assert!(!dir.join("out").exists());
}

#[test]
fn a_server_that_closes_mid_session_leaves_incomplete_sessions_and_a_summary() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::CloseAfterAppends(5));
    let dir = TempDir::new("closes");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["--url", &server.url, "-s", "2", "-d", "3s"],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    assert_eq!(s["sessions"]["incomplete"], 2);
    assert_eq!(s["sessions"]["completed"], 0);
    assert_eq!(s["verdict"]["complete"], false);
    let errors = s["sessions"]["errors"].to_string();
    assert!(errors.contains("closed the connection"), "{errors}");
    // What was sent before the server left is kept.
    assert_eq!(s["pacing"]["packets"], 10);
    let receipts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("sessions/w0-s0000/input-send-receipts.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(receipts["appends"].as_array().unwrap().len(), 5);
    // The trace says what the client saw go wrong (it had no `error` line, and conform read
    // the session as one the client stopped on its own: the QA pass of 2026-12-07).
    let trace = std::fs::read_to_string(out.join("sessions/w0-s0000/trace.jsonl")).unwrap();
    let last = trace.lines().last().unwrap_or_default();
    assert!(
        last.contains(r#""direction":"error""#) && last.contains("closed the connection"),
        "{last}"
    );
    // Sessions the server ended 0.4 s into 3 s of audio are no drain (the QA pass of
    // 2026-12-06: the line said "the audio is sent").
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("sessions ending early: ")
            && err.contains(" of 2 ended before the end of their audio")
            && !err.contains("draining: the audio is sent"),
        "{err}"
    );
}

/// A set-up that takes its time shows how far it has got: the sessions that have set up,
/// counted while their worker still waits for the others (the line said "0 sessions
/// connected" until every session of the worker had set up).
#[test]
fn a_slow_set_up_counts_the_sessions_set_up_so_far() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::SlowUpdateAfterFirst(Duration::from_millis(
        6500,
    )));
    let dir = TempDir::new("slow-setup");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["--url", &server.url, "-s", "2", "-d", "1s"],
        Duration::from_secs(60),
    );
    util::assert_finished(&output);
    let err = String::from_utf8_lossy(&output.stderr);
    // Headless progress comes every 5 s into a pipe: the first one falls inside the wait.
    assert!(
        err.contains("] 1 of 2 sessions connected, 0 of 1 workers set up; waiting for the rest"),
        "{}",
        describe(&output)
    );
    assert!(err.contains("2 of 2 sessions connected"), "{err}");
}

/// A server that refuses the upgrade with 404 (a wrong path in --url): the sessions fail with
/// what to check, and a run that sent no packet is not called pacing-qualified (it was, with
/// "nothing late" among nothing sent).
#[test]
fn a_refused_upgrade_says_to_check_the_path_and_nothing_sent_is_not_qualified() {
    let _serial = util::serial();
    let server = util::LoopbackServer::start(|mut stream| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(n) if n > 0 => request.extend_from_slice(&buf[..n]),
                _ => return,
            }
        }
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            .await;
    });
    let dir = TempDir::new("refused-upgrade");
    let out = dir.join("out");
    let url = format!("ws://{}/wrong/path", server.addr);
    let output = util::run_to(
        &out,
        &["--url", &url, "-s", "2", "-d", "1s"],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    assert_eq!(s["pacing"]["packets"], 0);
    assert_eq!(s["verdict"]["pacing_qualified"], false);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(reasons.contains("no packet was sent"), "{reasons}");
    assert!(reasons.contains("check --url's path"), "{reasons}");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("PACING-UNQUALIFIED"), "{table}");
    assert!(
        table.contains("deviation (ms)     no samples (no packet was sent)"),
        "{table}"
    );
}

#[test]
fn non_json_and_binary_frames_are_counted_as_protocol_errors() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::JunkAfterFirstAppend);
    let dir = TempDir::new("junk");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["--url", &server.url, "-s", "2", "-d", "2s"],
        Duration::from_secs(60),
    );
    let s = summary(&out);
    assert_eq!(s["server"]["protocol_errors"], 4, "{}", describe(&output));
    // Garbage is reported, not fatal: the sessions still go through the protocol, but a run
    // whose server sent garbage is not complete (issue 13, item 6), and the table says why.
    assert_eq!(s["sessions"]["completed"], 2, "{}", describe(&output));
    assert_eq!(s["verdict"]["complete"], false);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("4 protocol errors"), "{table}");
}

/// Frames of one read are taken in one turn, but a ping among them is left to the stream
/// (which answers it at once): the frames after it must still come, and in time order.
#[test]
fn a_ping_among_the_replies_of_one_read_loses_no_frame_and_no_order_issue_17() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::PingAmongReplies);
    let dir = TempDir::new("ping-among");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--url",
            &server.url,
            "-s",
            "2",
            "-d",
            "2s",
            "--trace",
            "meta",
            "--keep-traces",
        ],
        Duration::from_secs(60),
    );
    let s = summary(&out);
    assert_eq!(s["sessions"]["completed"], 2, "{}", describe(&output));
    assert_eq!(s["server"]["protocol_errors"], 0, "{}", describe(&output));
    for k in 0..2 {
        let trace =
            std::fs::read_to_string(out.join(format!("sessions/w0-s{k:04}/trace.jsonl"))).unwrap();
        let lines: Vec<serde_json::Value> = trace
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let sent = lines
            .iter()
            .filter(|l| l["event"]["type"] == "input_audio_buffer.append")
            .count();
        let deltas: Vec<String> = lines
            .iter()
            .filter(|l| l["event"]["type"] == "response.output_audio_transcript.delta")
            .map(|l| l["event"]["delta"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(sent, 25, "2 s of 80 ms packets");
        let expected: Vec<String> = (0..sent).map(|seq| seq.to_string()).collect();
        assert_eq!(deltas, expected, "every delta after a ping, in order");
        let times: Vec<f64> = lines
            .iter()
            .map(|l| l["time_s"].as_f64().unwrap())
            .collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "the trace never goes back in time: {times:?}"
        );
    }
}

#[test]
fn an_oversized_server_message_fails_the_session_without_a_panic() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::OversizedAfterFirstAppend(64 * 1024));
    let dir = TempDir::new("oversized");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--url",
            &server.url,
            "-s",
            "1",
            "-d",
            "2s",
            "--max-message-bytes",
            "16384",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert!(
        !stderr(&output).contains("panicked"),
        "{}",
        describe(&output)
    );
    let s = summary(&out);
    assert_eq!(s["server"]["protocol_errors"], 1);
    assert_eq!(s["sessions"]["incomplete"], 1);
    let errors = s["sessions"]["errors"].to_string();
    assert!(errors.contains("--max-message-bytes"), "{errors}");
}

#[test]
fn text_that_is_not_utf8_fails_the_session_as_the_client_closing_it() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::InvalidUtf8AfterFirstAppend);
    let dir = TempDir::new("not-utf8");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["--url", &server.url, "-s", "1", "-d", "2s"],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    assert_eq!(s["server"]["protocol_errors"], 1);
    assert_eq!(s["sessions"]["incomplete"], 1);
    let errors = s["sessions"]["errors"].to_string();
    assert!(
        errors.contains("not valid UTF-8") && errors.contains("code 1007"),
        "{errors}"
    );
    assert!(!errors.contains("the server closed"), "{errors}");
}

#[test]
fn a_full_mock_rejects_sessions_and_the_run_counts_them() {
    let _serial = util::serial();
    let dir = TempDir::new("full");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "-s",
            "4",
            "-d",
            "2s",
            "--max-sessions",
            "2",
            "--keep-traces",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    assert_eq!(s["sessions"]["rejected"], 2);
    // The refusals are traced in sglang-omni's client's shape, the last one marked exhausted.
    let mut refused = 0;
    for k in 0..4 {
        let path = out.join(format!("sessions/w0-s{k:04}/trace.jsonl"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let admissions: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| l["direction"] == "admission")
            .map(|l| l["event"].clone())
            .collect();
        if admissions.is_empty() {
            continue;
        }
        refused += 1;
        assert_eq!(admissions.len(), 4, "{admissions:?}");
        for (n, a) in admissions.iter().enumerate() {
            assert_eq!(a["type"], "connection_denied");
            assert_eq!(a["http_status"], 503);
            assert_eq!(a["attempt"], n + 1);
            assert_eq!(a.get("exhausted").is_some(), n == 3, "{a}");
        }
    }
    assert_eq!(refused, 2);
    assert_eq!(s["sessions"]["completed"], 2);
    assert_eq!(s["sessions"]["incomplete"], 0);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(reasons.contains("rejected"), "{reasons}");
    let mock = s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["role"] == "mock")
        .unwrap()
        .clone();
    // Each rejected session tried 4 times (1 + 3 retries).
    assert_eq!(mock["mock"]["sessions_rejected"], 8, "{mock}");
    // CPU per session-second counts the seconds the sessions streamed: the refused ones
    // streamed none (a level with half its sessions refused read as a client half as costly,
    // the QA pass of 2026-12-07).
    let packets = s["pacing"]["packets"].as_f64().unwrap();
    assert_eq!(packets, 2.0 * 25.0, "two sessions of 2 s streamed");
    let cpu_s: f64 = s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["streaming"]["cpu_seconds"].as_f64())
        .sum();
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let per_session_s = util::cpu_per_session_second(&md);
    let expected = cpu_s / (packets * 0.08);
    assert!(
        (per_session_s - expected).abs() <= 1e-6 + expected * 1e-3,
        "summary.md {per_session_s} vs CPU {cpu_s} s over {packets} packets ({expected})"
    );
}

#[test]
fn a_server_that_talks_but_never_drains_is_bounded_by_the_recv_timeout() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::NeverDrains);
    let dir = TempDir::new("never-drains");
    let out = dir.join("out");
    let started = std::time::Instant::now();
    let output = util::run_to(
        &out,
        &[
            "--url",
            &server.url,
            "-s",
            "2",
            "-d",
            "1s",
            "--recv-timeout",
            "2s",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "the chatter did not extend the wait"
    );
    let s = summary(&out);
    assert_eq!(s["sessions"]["incomplete"], 2);
    assert_eq!(s["pacing"]["packets"], 2 * 13, "what was measured is kept");
    let errors = s["sessions"]["errors"].to_string();
    assert!(
        errors.contains("no sglang.input_audio.drained within --recv-timeout"),
        "{errors}"
    );
    assert!(!errors.contains("another protocol"), "it talked: {errors}");
}

/// A server of another protocol (here the Fun-ASR mock, which waits for `START`) says nothing
/// to a native client: the reason says so and names what to check, not only the timeout.
#[test]
fn a_server_that_says_nothing_is_named_as_perhaps_of_another_protocol() {
    let _serial = util::serial();
    let mock = crate::mock_protocol::Mock::start(&["--protocol", "funasr"]);
    let dir = TempDir::new("silent-server");
    let out = dir.join("out");
    let url = format!("ws://{}/v1/realtime", mock.addr);
    let args = ["--url", &url, "-s", "1", "-d", "1s", "--recv-timeout", "1s"];
    let output = util::run_to(&out, &args, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let errors = summary(&out)["sessions"]["errors"].to_string();
    assert!(
        errors.contains("no session.created within --recv-timeout 1s; the server sent nothing after the WebSocket handshake: is it a server of another protocol? (this run speaks --protocol native"),
        "{errors}"
    );
}

/// FunASR's C++ 2pass server (on Fun-ASR-Nano's port) drops `START` and everything after it
/// without a word: a Fun-ASR session then times out, and the reason names that server.
#[test]
fn a_funasr_client_facing_a_silent_server_is_told_of_funasrs_2pass_servers() {
    let _serial = util::serial();
    let server = util::LoopbackServer::start(|stream| async move {
        // Takes the handshake and every message after it, and answers none.
        if let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await {
            use futures_util::StreamExt as _;
            while let Some(Ok(_)) = ws.next().await {}
        }
    });
    let dir = TempDir::new("silent-2pass");
    let out = dir.join("out");
    let url = format!("ws://{}/", server.addr);
    let args = [
        "--url",
        &url,
        "--protocol",
        "funasr",
        "--audio",
        "assets/speech-16k.wav",
        "-s",
        "1",
        "--recv-timeout",
        "1s",
    ];
    let output = util::run_to(&out, &args, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let errors = summary(&out)["sessions"]["errors"].to_string();
    assert!(
        errors.contains("the server sent nothing after the WebSocket handshake")
            && errors.contains("not FunASR's 2pass runtime servers"),
        "{errors}"
    );
}

#[test]
fn a_second_sigint_aborts_stuck_sessions_and_keeps_the_measured_packets() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::NeverDrains);
    let dir = TempDir::new("abort");
    let out = dir.join("out");
    let args = [
        "--url",
        &server.url,
        "-s",
        "2",
        "-d",
        "1s",
        "--recv-timeout",
        "60s",
    ];
    let mut child = util::spawn_run(&out, &args);
    // Wait until both sessions have sent everything and sit waiting for `drained`.
    let samples = out.join("samples/worker-0.csv");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&samples).map_or(0, |s| s.lines().count()) < 1 + 2 * 13 {
        assert!(
            std::time::Instant::now() < deadline,
            "packets never reached the samples file"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..2 {
        util::signal(child.id(), rustix::process::Signal::INT).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    let code = util::wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(130), "two SIGINTs end the run");
    let s = summary(&out);
    assert_eq!(s["cancelled"], true);
    let worker = &crate::util::workers(&s)[0];
    assert_eq!(
        worker["result_present"], true,
        "the aborted worker wrote its result: {worker}"
    );
    assert_eq!(s["pacing"]["packets"], 2 * 13);
    assert_eq!(s["sessions"]["incomplete"], 2);
}

#[test]
fn a_closed_stderr_does_not_cost_the_summary() {
    let _serial = util::serial();
    let dir = TempDir::new("closed-stderr");
    let out = dir.join("out");
    let mut child = util::spawn_with_stderr(&["run", "--no-tui"], &out, &["-s", "2", "-d", "6s"]);
    // Like `2>&1 | head -c 1`: the reader goes away before the first progress line.
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    // Not killed by SIGPIPE, not an error (1 only if a packet was late on a busy machine).
    assert!(matches!(status.code(), Some(0 | 1)), "{status}");
    assert_eq!(summary(&out)["sessions"]["completed"], 2);
}

/// A server that refuses the set-up without ending the session (sglang-omni's answer to
/// modalities it cannot serve) fails each session at once with its reason: no session waits
/// out `--recv-timeout` for a `session.updated` that will not come.
#[test]
fn a_refused_session_update_fails_the_session_at_once_with_the_servers_reason() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::RefusesUpdate);
    let dir = TempDir::new("refused-update");
    let out = dir.join("out");
    let started = std::time::Instant::now();
    let output = util::run_to(
        &out,
        &[
            "--url",
            &server.url,
            "-s",
            "2",
            "-d",
            "1s",
            "--recv-timeout",
            "120s",
        ],
        Duration::from_secs(100),
    );
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "the sessions waited for the recv-timeout"
    );
    assert!(
        matches!(output.status.code(), Some(1 | 2)),
        "{}",
        describe(&output)
    );
    let s = summary(&out);
    assert_eq!(s["sessions"]["completed"], 0, "{s}");
    let errors = s["sessions"]["errors"].to_string();
    assert!(
        errors.contains("refused the session's set-up")
            && errors.contains("invalid_request: no supported output combination"),
        "{errors}"
    );
    // The session closed with 1000 and the client kept the close, as on a clean end.
    let receipts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("sessions/w0-s0000/input-send-receipts.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(receipts["close"]["code"], 1000, "{receipts}");
    // Before that, as sglang-omni's own client after an error that is not fatal, it sent
    // `session.close` and read the server's `session.closed` (the run failed: traces kept).
    let trace = std::fs::read_to_string(out.join("sessions/w0-s0000/trace.jsonl")).unwrap();
    let close = trace.find(r#""type":"session.close""#);
    let closed = trace.find(r#""type":"session.closed""#);
    assert!(
        close.is_some() && closed.is_some() && close < closed,
        "{trace}"
    );
}

#[test]
fn a_ca_file_holding_no_certificate_is_refused_at_start_up() {
    let dir = TempDir::new("ca-key");
    let key = dir.join("k.pem");
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let key = key.to_str().unwrap();
    let out = dir.join("out");
    let url = "wss://127.0.0.1:9/v1/realtime";
    for args in [
        vec![
            "run",
            "--no-tui",
            "--url",
            url,
            "--ca-file",
            key,
            "--output",
            out.to_str().unwrap(),
        ],
        vec!["conform", "--url", url, "--ca-file", key],
    ] {
        let output = util::run(&args, Duration::from_secs(30));
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            describe(&output)
        );
        assert!(
            stderr(&output).contains(&format!("Error: --ca-file {key}: no PEM certificate in it: it holds a private key; give the certificate")),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    assert!(!out.exists(), "nothing left behind");
}

/// The mix-ups of TLS files each say what the file is and what to give instead (the QA pass
/// of 2026-12-06: "no items found", "KeyMismatch", and "no such file" for a folder).
#[test]
fn tls_files_given_in_the_wrong_place_say_what_they_hold() {
    let dir = TempDir::new("tls-mixups");
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = write("cert.pem", made.cert.pem());
    let other_key = write("other-key.pem", other.signing_key.serialize_pem());
    for (args, said) in [
        (
            vec!["mock", "--port", "0", "--tls-cert", &cert, "--tls-key", &cert],
            format!("Error: --tls-key {cert}: no private key in it: it holds a certificate; give the private key"),
        ),
        (
            vec!["mock", "--port", "0", "--tls-cert", &cert, "--tls-key", &other_key],
            format!("Error: --tls-key {other_key} is not the private key of the certificate in --tls-cert {cert}"),
        ),
    ] {
        let output = util::run(&args, Duration::from_secs(30));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", describe(&output));
        assert!(stderr(&output).contains(&said), "{args:?}: {}", stderr(&output));
    }
    let folder = dir.join("certs");
    std::fs::create_dir_all(&folder).unwrap();
    let folder = folder.to_str().unwrap();
    let args = [
        "conform",
        "--url",
        "wss://127.0.0.1:9/v1/realtime",
        "--ca-file",
        folder,
    ];
    let output = util::run(&args, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        stderr(&output).contains(&format!(
            "Error: --ca-file {folder} is a folder; give the PEM file"
        )),
        "{}",
        stderr(&output)
    );
}

/// `--output-jsonl` in a folder that does not exist is a start-up error (exit 2, nothing
/// run), not an error after the whole run that loses the JSONL asked for (the QA pass of
/// 2026-12-06).
#[test]
fn an_unwritable_output_jsonl_is_refused_before_the_run() {
    let dir = TempDir::new("jsonl-nodir");
    let out = dir.join("out");
    let jsonl = dir.join("no-such-folder/bench.jsonl");
    let started = std::time::Instant::now();
    let output = util::run_to(
        &out,
        &[
            "--protocol",
            "funasr",
            "-s",
            "1",
            "--output-jsonl",
            jsonl.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("cannot write --output-jsonl") && err.contains("a folder that exists"),
        "{err}"
    );
    assert!(!out.join("summary.json").exists(), "nothing ran");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run went ahead"
    );
}

/// Ctrl-C while the conductor checks that `--url` answers (a server that takes the TCP
/// connection and says nothing holds that check up to --connect-timeout): the run ends at
/// once, opens no session and leaves no folder, exit 130. Before, it went on to start a worker
/// and open every session, and stopped them 6 s later (the QA pass of 2026-12-06).
#[test]
fn ctrl_c_while_the_url_is_checked_opens_no_session() {
    let server = util::LoopbackServer::start(|stream| async move {
        // Takes the connection and says nothing, for at most 60 s.
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(stream);
    });
    let url = format!("ws://{}/v1/realtime", server.addr);
    let dir = TempDir::new("ctrl-c-probe");
    let out = dir.join("out");
    let mut child = util::spawn_with_stderr(
        &["run", "--no-tui"],
        &out,
        &["-s", "2", "-d", "3s", "--url", &url],
    );
    // The folder is claimed once the signal handlers are in, just before the check.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !out.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: a signal to the child this test started.
    util::signal(child.id(), rustix::process::Signal::INT).unwrap();
    let code = util::wait_with_limit(&mut child, Duration::from_secs(20));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains("SIGINT before the sessions started: nothing was run"),
        "{err}"
    );
    assert!(!err.contains("setting up"), "sessions were opened: {err}");
    assert!(!out.exists(), "the run folder was left behind");
}

/// A server that leaves the socket open after `session.closed`: the client waited a second for
/// its close frame, then dropped the TCP connection without one (the server saw 1006). It
/// ends the connection with a close frame of its own.
#[test]
fn a_server_that_stays_open_after_session_closed_gets_a_close_frame() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::KeepsOpenAfterClosed);
    let dir = TempDir::new("stays-open");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--url",
            &server.url,
            "-s",
            "2",
            "-d",
            "1s",
            "--trace",
            "off",
        ],
        Duration::from_secs(60),
    );
    util::assert_finished(&output);
    assert_eq!(
        summary(&out)["sessions"]["completed"],
        2,
        "{}",
        describe(&output)
    );
    // The server notes each end as it reads it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.ends.lock().unwrap().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(*server.ends.lock().unwrap(), ["close 1000", "close 1000"]);
}
