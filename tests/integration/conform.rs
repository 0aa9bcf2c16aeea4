//! `conform` end to end: the real binary checks the mock of each profile over real sockets
//! (`--url`), then the traces that run left (`--trace`), and names the rule a trace breaks.

use crate::mock_protocol::Mock;
use crate::util::{self, describe, summary, TempDir};
use std::time::Duration;

/// 2 sessions × 5 s, plus start-up and the check.
const LIMIT: Duration = Duration::from_secs(90);

fn conform_against_the_mock(profile: &str) {
    let _serial = util::serial();
    let mock = Mock::start(&["--profile", profile]);
    let dir = TempDir::new(&format!("conform-{profile}"));
    let out = dir.join("run");
    let out_str = out.to_str().unwrap();
    let url = mock.url();
    let mut args = vec!["conform", "--url", &url, "--output", out_str];
    // PersonaPlex takes 24 kHz input: naming the profile has conform send it.
    if profile == "personaplex" {
        args.extend(["--profile", profile]);
    }
    let checked = util::run(&args, LIMIT);
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    let verdict = stdout
        .lines()
        .find(|l| l.starts_with("verdict: "))
        .unwrap_or_else(|| panic!("no verdict line\n{}", describe(&checked)));
    assert!(
        verdict.starts_with(&format!(
            "verdict: conformant: 2 sessions (profile {profile}), 0 violations"
        )),
        "{verdict}"
    );

    // The traces our client recorded pass on their own, and name the rule a wrong profile breaks.
    let again = util::run(&["conform", "--trace", out_str], LIMIT);
    assert_eq!(again.status.code(), Some(0), "{}", describe(&again));
    let other = if profile == "voicechat" {
        "minicpmo"
    } else {
        "voicechat"
    };
    let wrong = util::run(&["conform", "--trace", out_str, "--profile", other], LIMIT);
    assert_eq!(wrong.status.code(), Some(1), "{}", describe(&wrong));
    let stdout = String::from_utf8_lossy(&wrong.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("grant-profile  w0-s0000  line ")),
        "{stdout}"
    );
    assert!(stdout.contains("verdict: NOT conformant"), "{stdout}");
}

#[test]
fn the_voicechat_mock_is_conformant() {
    conform_against_the_mock("voicechat");
}

#[test]
fn the_minicpmo_mock_is_conformant() {
    conform_against_the_mock("minicpmo");
}

#[test]
fn the_personaplex_mock_is_conformant() {
    conform_against_the_mock("personaplex");
}

/// A session the server ends with a fatal error (VoiceChat asked for text): the client traces
/// what the server sends after it — its `session.closed` came after the client had already
/// failed the session, and was dropped — and conform names the error alone, not the ending
/// sglang-omni's server gives such a session.
#[test]
fn a_session_ended_by_a_fatal_error_is_traced_to_its_close_and_only_the_error_is_named() {
    let _serial = util::serial();
    let mock = Mock::start(&["--profile", "voicechat"]);
    let dir = TempDir::new("conform-fatal");
    let out = dir.join("run");
    let out_str = out.to_str().unwrap();
    let url = mock.url();
    let args = ["conform", "--url", &url, "--modalities", "audio,text"];
    let checked = util::run(&[&args[..], &["--output", out_str]].concat(), LIMIT);
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(1), "{}", describe(&checked));
    assert!(
        stdout.contains("2 violations of server-error"),
        "{}",
        describe(&checked)
    );
    let trace = std::fs::read_to_string(out.join("sessions/w0-s0000/trace.jsonl"))
        .unwrap_or_else(|e| panic!("{e}: {}", describe(&checked)));
    let kinds: Vec<&str> = trace
        .lines()
        .filter_map(|l| l.split(r#""type":""#).nth(1))
        .filter_map(|rest| rest.split('"').next())
        .collect();
    let error = kinds.iter().position(|k| *k == "error");
    let closed = kinds.iter().position(|k| *k == "session.closed");
    assert!(error.is_some() && closed > error, "{kinds:?}\n{trace}");
}

/// Without --output a conformant server's run is deleted: conform says so, since the run
/// itself printed where its summary was.
#[test]
fn a_conformant_servers_run_is_not_kept_and_conform_says_where_it_was() {
    let _serial = util::serial();
    let mock = Mock::start(&["--profile", "voicechat"]);
    let checked = util::run(
        &["conform", "--url", &mock.url(), "--duration", "2s"],
        LIMIT,
    );
    assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    let stdout = String::from_utf8_lossy(&checked.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("traces: not kept ("))
        .unwrap_or_else(|| panic!("{}", describe(&checked)));
    assert!(
        line.ends_with("give --output DIR to keep the run"),
        "{line}"
    );
    let dir = line["traces: not kept (".len()..]
        .split(" deleted")
        .next()
        .unwrap();
    assert!(!std::path::Path::new(dir).exists(), "{dir} is still there");
}

/// A mistyped --trace path, of a file or a folder, is said to be missing (the README
/// walkthrough of 2026-12-07: a folder read "no trace.jsonl found in the --trace paths").
#[test]
fn a_trace_that_cannot_be_read_exits_2() {
    let dir = TempDir::new("conform-missing");
    for name in ["nope.jsonl", "runs-typo"] {
        let missing = dir.join(name);
        let out = util::run(&["conform", "--trace", missing.to_str().unwrap()], LIMIT);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{name}: no such file or folder")),
            "{stderr}"
        );
    }
}

/// A file none of whose lines is a trace record (a run's summary.json given by mistake) is not
/// a trace: exit 2, saying so, not 474 "violations" blamed on the server (the QA pass of
/// 2026-12-06).
#[test]
fn a_file_that_is_not_a_trace_exits_2_saying_so() {
    let dir = TempDir::new("conform-not-a-trace");
    let summary = dir.join("summary.json");
    std::fs::write(
        &summary,
        "{\n  \"schema_version\": 9,\n  \"verdict\": {}\n}\n",
    )
    .unwrap();
    let out = util::run(&["conform", "--trace", summary.to_str().unwrap()], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not a trace.jsonl: none of its 4 lines is a trace record"),
        "{stderr}"
    );
}

#[test]
fn a_run_folder_whose_traces_were_deleted_says_to_keep_them() {
    // A run that completes cleanly deletes its traces unless --keep-traces: its folder has the
    // summary and the session folders, and no trace.jsonl.
    let dir = TempDir::new("conform-deleted");
    std::fs::create_dir_all(dir.join("sessions").join("w0-s0000")).unwrap();
    std::fs::write(dir.join("summary.json"), "{}").unwrap();
    let run_dir = dir.join("");
    let out = util::run(&["conform", "--trace", run_dir.to_str().unwrap()], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no trace.jsonl found") && stderr.contains("--keep-traces"),
        "{stderr}"
    );
    // A run with --trace off recorded none: keeping them would not have helped.
    let off = TempDir::new("conform-trace-off");
    std::fs::create_dir_all(off.join("sessions").join("w0-s0000")).unwrap();
    let summary = r#"{"settings": {"protocol": "native", "trace": "off"}}"#;
    std::fs::write(off.join("summary.json"), summary).unwrap();
    let off_dir = off.join("");
    let out = util::run(&["conform", "--trace", off_dir.to_str().unwrap()], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("recorded no traces (--trace off)")
            && stderr.contains("--trace full --keep-traces"),
        "{stderr}"
    );
    // A folder that is no run folder gets the plain message.
    let empty = TempDir::new("conform-empty");
    let other = empty.join("");
    let out = util::run(&["conform", "--trace", other.to_str().unwrap()], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nothing to check"), "{stderr}");
    assert!(!stderr.contains("--keep-traces"), "{stderr}");
}

/// A server that refuses every handshake (HTTP 403) let no session reach the protocol: conform
/// could not run (exit 2, the sessions' error), not 12 "violations" of a protocol nobody spoke
/// (the QA pass of 2026-12-06).
#[test]
fn a_server_that_refuses_every_handshake_exits_2_with_the_reason() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let server = util::LoopbackServer::start(|mut stream| async move {
        let mut request = vec![0u8; 8192];
        if stream.read(&mut request).await.is_ok_and(|n| n > 0) {
            let reply = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(reply.as_bytes()).await;
        }
    });
    let url = format!("ws://{}/v1/realtime", server.addr);
    let out = util::run(&["conform", "--url", &url, "-d", "1s"], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("none of the 2 sessions got a WebSocket") && stderr.contains("403"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_server_exits_2() {
    let url = util::unreachable_url();
    let out = util::run(&["conform", "--url", &url], LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

#[test]
fn a_meta_trace_of_a_run_is_conformant_too() {
    // `--trace meta` keeps no audio: conform counts the input from each append's
    // `audio_bytes`. Counted from its base64 length it was 2 bytes too many a packet, and every
    // input rule failed against a conformant server.
    let _serial = util::serial();
    let mock = Mock::start(&["--profile", "voicechat"]);
    let dir = TempDir::new("conform-meta");
    let out = dir.join("run");
    let out_str = out.to_str().unwrap();
    let url = mock.url();
    let args = ["run", "--no-tui", "--url", &url, "-s", "2", "-d", "3s"];
    let meta = ["--trace", "meta", "--keep-traces", "--output", out_str];
    let ran = util::run(&[&args[..], &meta[..]].concat(), LIMIT);
    // A paced run on a busy machine may end with late packets (exit 1); its traces are whole.
    util::assert_finished(&ran);
    let checked = util::run(&["conform", "--trace", out_str], LIMIT);
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    assert!(
        stdout.contains("verdict: conformant: 2 sessions (profile voicechat), 0 violations"),
        "{stdout}"
    );
    // Checked by another protocol's rules, a conformant server broke every one (exit 1, "NOT
    // conformant"): the run's own protocol is named instead (the QA pass of 2026-12-06).
    let wrong = util::run(
        &["conform", "--protocol", "funasr", "--trace", out_str],
        LIMIT,
    );
    assert_eq!(wrong.status.code(), Some(2), "{}", describe(&wrong));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        err.contains("recorded by a run with --protocol native")
            && err.contains("conform --protocol native --trace"),
        "{err}"
    );
}

/// A server that takes one session at a time (sglang-omni's VoiceChat) refuses conform's
/// second with 503 until its retries run out: that session is named, not checked, and the
/// one it took decides the verdict. Traces of refused sessions only cannot be checked at all.
#[test]
fn sessions_the_server_did_not_admit_are_named_not_checked() {
    let _serial = util::serial();
    let mock = Mock::start(&["--max-sessions", "1"]);
    let dir = TempDir::new("conform-admission");
    let out = dir.join("run");
    let out_str = out.to_str().unwrap();
    let checked = util::run(
        &["conform", "--url", &mock.url(), "--output", out_str],
        LIMIT,
    );
    assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.contains(
            "verdict: conformant: 1 sessions (profile voicechat), 0 violations; 1 more refused admission (HTTP 503), not checked"
        ),
        "{}",
        describe(&checked)
    );

    let refused = dir.join("refused");
    std::fs::create_dir_all(&refused).unwrap();
    std::fs::write(
        refused.join("trace.jsonl"),
        concat!(
            r#"{"direction":"admission","time_s":1.0,"event":{"type":"connection_denied","http_status":503,"attempt":1}}"#,
            "\n",
            r#"{"direction":"admission","time_s":1.25,"event":{"type":"connection_denied","http_status":503,"attempt":2,"exhausted":true}}"#,
            "\n"
        ),
    )
    .unwrap();
    let only = util::run(&["conform", "--trace", refused.to_str().unwrap()], LIMIT);
    assert_eq!(only.status.code(), Some(2), "{}", describe(&only));
    let stderr = String::from_utf8_lossy(&only.stderr);
    assert!(stderr.contains("--sessions 1"), "{stderr}");
}

/// Traces a full disk cut are not checked: the missing frames would be named the server's
/// violations (`got: none (the client sent no sglang.input_audio.end)`). Nor are a run's
/// whose summary is still the provisional one (killed, or its final summary did not fit).
#[test]
fn traces_the_disk_cut_are_refused_not_blamed_on_the_server() {
    let dir = TempDir::new("conform-lost");
    let run = dir.join("run");
    let session = run.join("sessions/w0-s0000");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::write(
        session.join("trace.jsonl"),
        concat!(
            r#"{"direction":"receive","time_s":1.0,"event":{"type":"session.created"}}"#,
            "\n"
        ),
    )
    .unwrap();
    let cases = [
        (
            r#"{"files_lost":{"disk_full":true,"trace_lines":12,"sessions":2,"sample_lines":0,"workers":0},"verdict":{"reasons":[]}}"#,
            "12 trace/receipt lines of 2 sessions were not written (the disk was full)",
        ),
        (
            r#"{"verdict":{"reasons":["cancelled (the run did not finish: this summary was written when it started; receipts and samples hold what was sent); figures cover the run until then"]}}"#,
            "did not finish",
        ),
    ];
    for (summary, why) in cases {
        std::fs::write(run.join("summary.json"), summary).unwrap();
        let checked = util::run(&["conform", "--trace", run.to_str().unwrap()], LIMIT);
        assert_eq!(checked.status.code(), Some(2), "{}", describe(&checked));
        let stderr = String::from_utf8_lossy(&checked.stderr);
        assert!(stderr.contains(why), "{stderr}");
    }
}

/// A server that takes the WebSocket handshake and then says nothing: conform ends at the
/// --recv-timeout it was given, naming it. conform refused the flag, so against a silent
/// server it waited out run's default 30 s.
#[test]
fn a_silent_server_fails_conform_at_its_recv_timeout() {
    let _serial = util::serial();
    let server = util::LoopbackServer::start(|stream| async move {
        if let Ok(ws) = tokio_tungstenite::accept_async(stream).await {
            tokio::time::sleep(Duration::from_secs(120)).await;
            drop(ws);
        }
    });
    let dir = TempDir::new("conform-silent");
    let out = dir.join("run");
    let url = format!("ws://{}/v1/realtime", server.addr);
    let args = ["conform", "--url", &url, "-s", "1", "-d", "1s"];
    let limits = ["--recv-timeout", "2s", "--connect-timeout", "5s"];
    let output = ["--output", out.to_str().unwrap()];
    let checked = util::run(&[&args[..], &limits[..], &output[..]].concat(), LIMIT);
    assert_eq!(checked.status.code(), Some(1), "{}", describe(&checked));
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(
        stderr.contains("no session.created within --recv-timeout 2s"),
        "{}",
        describe(&checked)
    );
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.contains("verdict: NOT conformant: 1 sessions"),
        "{}",
        describe(&checked)
    );
}

/// A PersonaPlex server (24 kHz input) checked without `--profile personaplex` or
/// `--input-sample-rate 24000`: the run's sessions cannot stream, which is the run's choice,
/// not the server's fault — nothing is checked, exit 2, and the message says which flag to
/// give (it once listed 14 "violations", among them a valid session.updated called no event).
#[test]
fn a_server_of_another_input_rate_is_not_checked_and_the_flag_is_named() {
    let _serial = util::serial();
    let mock = Mock::start(&["--profile", "personaplex"]);
    let url = mock.url();
    let checked = util::run(&["conform", "--url", &url], LIMIT);
    assert_eq!(checked.status.code(), Some(2), "{}", describe(&checked));
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(
        stderr.contains("so nothing was checked: the server takes PCM16 at 24000 Hz")
            && stderr.contains("give --input-sample-rate 24000")
            && stderr.contains("--profile personaplex"),
        "{stderr}"
    );
}

/// A server that refuses the run's model (vLLM's `model_not_found`) refused a setting of the
/// client's, not broken a rule: nothing is checked, exit 2, and the flag to give is named (it
/// read "NOT conformant", violations of server-error).
#[test]
fn a_server_that_refuses_the_runs_model_is_not_checked_and_the_flag_is_named() {
    let _serial = util::serial();
    // A server of the dialect that checks the model (vLLM itself serves any name).
    let mock = Mock::start(&["--protocol", "vllm", "--served-model", "served-one"]);
    let url = mock.url();
    let args = [
        "conform",
        "--url",
        &url,
        "--protocol",
        "vllm",
        "-s",
        "1",
        "-d",
        "1s",
    ];
    let checked = util::run(&[&args[..], &["--model", "not-served"]].concat(), LIMIT);
    assert_eq!(checked.status.code(), Some(2), "{}", describe(&checked));
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(
        stderr.contains("none of the 1 sessions could stream to")
            && stderr.contains("so nothing was checked")
            && stderr.contains("model_not_found")
            && stderr.contains("give --model"),
        "{stderr}"
    );
    assert!(!stderr.contains("PersonaPlex"), "{stderr}");
    let served = util::run(&[&args[..], &["--model", "served-one"]].concat(), LIMIT);
    assert_eq!(served.status.code(), Some(0), "{}", describe(&served));
}

/// Conform's sessions all ask the same: a server that refuses the model in one of them and
/// serves it in the other is inconsistent, and the refused session is checked (it was left out
/// as the client's setting, and the server read conformant). A proxy sends the connections in
/// turn to a vLLM mock serving another model and to one serving the run's.
#[test]
fn a_model_refused_in_one_session_and_served_in_another_is_checked() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let _serial = util::serial();
    let other = Mock::start(&["--protocol", "vllm", "--served-model", "another-model"]);
    let served = Mock::start(&["--protocol", "vllm"]);
    let targets = [other.addr.clone(), served.addr.clone()];
    let turn = Arc::new(AtomicUsize::new(0));
    let proxy = util::LoopbackServer::start(move |mut stream| {
        let target = targets[turn.fetch_add(1, Ordering::SeqCst) % 2].clone();
        async move {
            if let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await {
                let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
            }
        }
    });
    let url = format!("ws://{}/v1/realtime", proxy.addr);
    let args = [
        "conform",
        "--url",
        &url,
        "--protocol",
        "vllm",
        "-s",
        "2",
        "-d",
        "1s",
    ];
    let checked = util::run(
        &[&args[..], &["--model", "duplexbench-mock"]].concat(),
        LIMIT,
    );
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(1), "{}", describe(&checked));
    assert!(
        stdout.contains("verdict: NOT conformant") && stdout.contains("model_not_found"),
        "{stdout}"
    );
}

/// Checked with the wrong `--protocol`, a server breaks every rule: conform says which
/// protocol its errors name.
#[test]
fn checked_as_another_protocol_the_server_is_named_by_its_errors() {
    let _serial = util::serial();
    let mock = Mock::start(&[]);
    let dir = TempDir::new("conform-other-protocol");
    let out = dir.join("run");
    let url = mock.url();
    let args = [
        "conform",
        "--url",
        &url,
        "--protocol",
        "openai",
        "--duration",
        "2s",
        "--output",
        out.to_str().unwrap(),
    ];
    let checked = util::run(&args, LIMIT);
    assert_eq!(checked.status.code(), Some(1), "{}", describe(&checked));
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.contains("hint: the server's errors say what only native servers say: check it with --protocol native"),
        "{}",
        describe(&checked)
    );
}

/// A transcription session, asked for by the URL's intent: each committed item's transcript
/// is checked by its item_id, and the built-in mock's conform.
#[test]
fn an_openai_transcription_session_is_checked_item_by_item() {
    let _serial = util::serial();
    let mock = Mock::start(&["--protocol", "openai"]);
    let url = format!("{}?intent=transcription", mock.url());
    let dir = TempDir::new("conform-transcription");
    let out = dir.join("run");
    let args = [
        "conform",
        "--url",
        &url,
        "--protocol",
        "openai",
        "--model",
        "whisper-1",
        "--turn-detection",
        "none",
        "--commit-every",
        "1s",
        "-d",
        "3s",
        "--output",
        out.to_str().unwrap(),
    ];
    let checked = util::run(&args, LIMIT);
    assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.contains("verdict: conformant") && !stdout.contains("no turn ended"),
        "{stdout}"
    );
    let s = summary(&out);
    assert_eq!(s["settings"]["client"]["session_type"], "transcription");
    assert!(
        s["openai"]["answered"].as_u64().unwrap() >= 2,
        "{}",
        s["openai"]
    );
}

/// Silence under the server's VAD ends no turn, so no answer is checked: the verdict says so
/// (it passed the server as if its answers had been seen: the QA pass of 2026-12-06); with
/// `--turn-detection none` the client commits the input and the answers are checked.
#[test]
fn an_openai_check_in_which_no_turn_ended_says_no_answer_was_checked() {
    let _serial = util::serial();
    let mock = Mock::start(&["--protocol", "openai"]);
    let url = mock.url();
    let check = |extra: &[&str]| {
        let mut args = vec!["conform", "--url", &url, "--protocol", "openai", "-d", "2s"];
        args.extend(extra);
        let checked = util::run(&args, LIMIT);
        assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
        String::from_utf8_lossy(&checked.stdout).to_string()
    };
    let dir = TempDir::new("conform-no-turn");
    let (a, b) = (dir.join("silent"), dir.join("committed"));
    let silent = check(&["--output", a.to_str().unwrap()]);
    assert!(
        silent.contains("verdict: conformant")
            && silent.contains("no turn ended, so no answer was checked"),
        "{silent}"
    );
    let committed = check(&["--turn-detection", "none", "--output", b.to_str().unwrap()]);
    assert!(
        committed.contains("verdict: conformant") && !committed.contains("no turn ended"),
        "{committed}"
    );
    // Both folders checked at once: the one whose answers were not checked is named (the
    // note was left out unless none had been).
    let both = ["conform", "--protocol", "openai", "--trace"];
    let checked = util::run(
        &[&both[..], &[a.to_str().unwrap(), b.to_str().unwrap()]].concat(),
        LIMIT,
    );
    assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.contains(
            "in 1 of the 2 runs checked no turn ended, so their answers were not checked"
        ) && stdout.contains(a.to_str().unwrap()),
        "{stdout}"
    );
}

/// Fun-ASR streams the speech sample, whose length sets the audio: `-d` was ignored without a
/// word (the QA pass of 2026-12-06), then refused; it cuts the sample now, as `run`'s does.
#[test]
fn a_duration_for_a_funasr_check_cuts_the_speech_it_streams() {
    let _serial = util::serial();
    let mock = Mock::start(&["--protocol", "funasr"]);
    let dir = TempDir::new("conform-funasr-cut");
    let out = dir.join("run");
    let url = format!("ws://{}/", mock.addr);
    let args = [
        "conform",
        "--url",
        &url,
        "--protocol",
        "funasr",
        "-s",
        "1",
        "--loops",
        "2",
        "-d",
        "7s",
        "--output",
        out.to_str().unwrap(),
    ];
    let checked = util::run(&args, LIMIT);
    assert_eq!(checked.status.code(), Some(0), "{}", describe(&checked));
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(stdout.contains("verdict: conformant"), "{stdout}");
    // The sample (5.83 s) twice, cut in its second play.
    let s = util::summary(&out);
    assert_eq!(s["settings"]["duration_s"], 7.0, "{}", s["settings"]);
    assert_eq!(s["settings"]["audio"]["kind"], "sample");
    assert_eq!(s["settings"]["audio"]["loops"], 2);
    assert_eq!(s["settings"]["audio"]["cut"], 112_000);
    assert_eq!(s["settings"]["packets_per_session"], 70);
}
