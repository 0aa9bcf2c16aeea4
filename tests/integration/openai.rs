//! The OpenAI Realtime and vLLM dialects end to end (issue 12): against their mocks over ws://
//! and over wss:// with a certificate made here, the headers reaching the server, the key
//! kept out of every file of the run, and each error code surfacing as the reason.
//! Everything stays on loopback; no run is asked to be clean.

use crate::mock_protocol::Mock;
use crate::util::{self, describe, summary, ws, TempDir};
use std::path::Path;
use std::time::Duration;

const SPEECH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/speech-16k.wav");
/// The same speech at 24 kHz, the one rate the OpenAI Realtime API takes.
const SPEECH_24K: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/speech-24k.wav");
const LIMIT: Duration = Duration::from_secs(60);
const KEY: &str = "sk-test-never-written-4242";
const HEADER_VALUE: &str = "hush-header-9191";

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn ran(output: &std::process::Output) {
    util::assert_finished(output);
}

#[test]
fn the_openai_mock_cuts_the_speech_sample_into_timed_turns_issue_12() {
    let _serial = util::serial();
    let dir = TempDir::new("openai-ws");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--protocol",
            "openai",
            "--audio",
            SPEECH_24K,
            "-s",
            "1",
            "--no-sampler",
            "--trace",
            "off",
        ],
        LIMIT,
    );
    ran(&output);
    let s = summary(&out);
    let t = &s["openai"];
    assert!(t["ended"].as_u64().unwrap() >= 2, "{t}");
    assert!(t["speech_started"].as_u64().unwrap() >= 1, "{t}");
    assert!(t["answered"].as_u64().unwrap() >= 1, "{t}");
    for key in [
        "first_text_after_end_ms",
        "first_audio_after_end_ms",
        "done_after_end_ms",
        "speech_stopped_after_audio_ms",
    ] {
        assert!(t[key]["p50"].as_f64().is_some(), "{key}: {t}");
    }
    assert!(s.get("vllm").is_none());
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("| openai first text after end p50"), "{md}");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("openai turns"), "{table}");
    // The native protocol's rows have no place in another protocol's table.
    assert!(!table.contains("server accepted"), "{table}");
    assert!(!table.contains("server first audio"), "{table}");
    // The progress line shows the turn latencies live in place of the native server's.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OpenAI turns p50/p95: first text ") && !stderr.contains("sglang-omni"),
        "{}",
        describe(&output)
    );
}

#[test]
fn the_vllm_mock_streams_a_transcript_between_the_commits_issue_12() {
    let _serial = util::serial();
    let dir = TempDir::new("vllm-ws");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--protocol",
            "vllm",
            "-d",
            "1s",
            "-s",
            "1",
            "--no-sampler",
            "--trace",
            "off",
        ],
        LIMIT,
    );
    ran(&output);
    let s = summary(&out);
    let t = &s["vllm"];
    assert_eq!(t["answered"], 1, "{t}");
    assert!(t["text_deltas"].as_u64().unwrap() > 1, "{t}");
    assert!(t["done_after_end_ms"]["p50"].as_f64().is_some(), "{t}");
    assert_eq!(s["sessions"]["completed"], 1, "{}", describe(&output));
}

/// A vLLM mock run of one short session with `flags`: its exit code and summary.
fn vllm_run(name: &str, flags: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let dir = TempDir::new(name);
    let out = dir.join("out");
    let mut args = vec![
        "--protocol",
        "vllm",
        "-d",
        "0.5s",
        "-s",
        "1",
        "--no-sampler",
        "--trace",
        "off",
    ];
    args.extend(flags);
    let output = util::run_to(&out, &args, LIMIT);
    (output.status.code(), summary(&out), describe(&output))
}

#[test]
fn each_fatal_vllm_error_code_is_the_reason_in_the_summary_issue_12() {
    let _serial = util::serial();
    // After these vLLM sends no transcription.done: the session ends with the code as reason.
    for (code, flags) in [
        ("processing_error", vec!["--mock-error", "processing_error"]),
        ("model_not_found", vec!["--served-model", "another-model"]),
    ] {
        let (exit, s, output) = vllm_run(&format!("vllm-{code}"), &flags);
        assert_eq!(exit, Some(1), "{code}: {output}");
        let reason = s["sessions"]["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            reason.contains(&format!("the server ended the session with error {code}")),
            "{code}: {reason}"
        );
        assert_eq!(s["server"]["error_codes"][0]["message"], code, "{code}");
        // A model the server does not serve is the client's to change: said so.
        if code == "model_not_found" {
            assert!(
                reason.contains("give --model with one it serves"),
                "{reason}"
            );
        }
    }
}

#[test]
fn the_built_in_vllm_mock_serves_the_model_named_by_model_as_the_readme_runs_it() {
    let _serial = util::serial();
    let model = "mistralai/Voxtral-Mini-3B-Realtime";
    let (exit, s, output) = vllm_run("vllm-model", &["--model", model]);
    assert_eq!(exit, Some(0), "{output}");
    assert_eq!(s["sessions"]["completed"], 1, "{output}");
    assert_eq!(s["settings"]["mock"]["served_model"], model);
    assert!(s["server"]["error_codes"]
        .as_array()
        .is_none_or(|codes| codes.is_empty()));
}

/// One session streaming three utterances (0.6 s each, 0.7 s pauses) against the openai mock,
/// whose answers last 4 s: the second and third turns end during the first's answer. Returns
/// the run's folder and the description of its output.
pub fn busy_turns_run(dir: &TempDir, name: &str, extra: &[&str]) -> (std::path::PathBuf, String) {
    let wav = dir.join("three-utterances.wav");
    if !wav.exists() {
        util::write_utterances_wav(&wav, 24_000, &[(600, 700), (600, 700), (600, 1200)]);
    }
    let out = dir.join(name);
    let mut args = vec![
        "--protocol",
        "openai",
        "--audio",
        wav.to_str().unwrap(),
        "-s",
        "1",
        "--response-deltas",
        "100",
        "--recv-timeout",
        "20s",
        "--no-sampler",
        "--trace",
        "off",
    ];
    args.extend(extra);
    let output = util::run_to(&out, &args, LIMIT);
    (out, describe(&output))
}

/// OpenAI with `interrupt_response: false` "may fail to create a response if the model is
/// already responding": VAD turns that end during a long answer may get none. The session must
/// not wait out --recv-timeout for them (it failed so before), and must not time the later
/// answers from the earlier turns; the summary names them. Against the mock that queues such
/// turns' responses instead, every turn is answered.
#[test]
fn vad_turns_that_end_during_an_answer_and_get_none_are_named_not_waited_for() {
    let _serial = util::serial();
    let dir = TempDir::new("openai-busy-turns");
    let run = |name: &str, extra: &[&str]| {
        let (out, report) = busy_turns_run(&dir, name, extra);
        (summary(&out), report)
    };
    let (s, report) = run("skipped", &["--skip-busy-turns"]);
    assert_eq!(s["sessions"]["completed"], 1, "{report}");
    let t = &s["openai"];
    assert_eq!(t["ended"], 3, "{t}");
    assert_eq!(
        (t["answered"].as_u64(), t["unanswered"].as_u64()),
        (Some(1), Some(2)),
        "{t}"
    );
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("2 turns the server's VAD ended got no response of their own"),
        "{reasons}"
    );

    let (s, report) = run("queued", &[]);
    assert_eq!(s["sessions"]["completed"], 1, "{report}");
    let t = &s["openai"];
    assert_eq!(
        (t["answered"].as_u64(), t["unanswered"].as_u64()),
        (Some(3), Some(0)),
        "{t}"
    );
}

/// With `--commit-every`, the final turn is committed while the previous answer still runs and
/// its `response.create` is held back until that answer is done (the API refuses a second): the
/// mock answers 200 ms after each request, and the final turn read ~480 ms, timed from its
/// commit, which the summary called a server stall (the QA pass of 2026-12-06).
#[test]
fn a_final_turn_asked_for_after_the_answer_under_way_is_timed_from_its_request() {
    let _serial = util::serial();
    let dir = TempDir::new("openai-held-final");
    let out = dir.join("run");
    let args = [
        "--protocol",
        "openai",
        "-s",
        "1",
        "-d",
        "2100ms",
        "--turn-detection",
        "none",
        "--commit-every",
        "1s",
        "--trace",
        "off",
    ];
    let output = util::run_to(&out, &args, LIMIT);
    ran(&output);
    let s = summary(&out);
    let t = &s["openai"];
    assert_eq!(
        (t["ended"].as_u64(), t["answered"].as_u64()),
        (Some(3), Some(3)),
        "{t}"
    );
    // The mock's answers last ~560 ms: the final commit (at 2.1 s) came ~460 ms into the
    // second turn's; held back ~360 ms, the final turn read that much more than 200 ms.
    let first = t["first_text_after_end_ms"]["max"].as_f64().unwrap();
    assert!(first < 400.0, "{t}");
    let stalls = s["server_stalls"].to_string();
    assert!(!stalls.contains("first reply after turn end"), "{stalls}");
}

/// vLLM ends a transcription at the model's token limit with `transcription.done` while the
/// audio still comes, and answers the final commit with nothing: the session must end when its
/// audio does, not wait out --recv-timeout for a second done and fail, and the summary must say
/// that the rest of the audio was not answered.
#[test]
fn a_vllm_transcription_that_ends_before_the_audio_is_named_and_the_session_completes() {
    let _serial = util::serial();
    // 0.5 s of audio; the first model step 200 ms in ends the transcription.
    let (exit, s, report) = vllm_run("vllm-max-tokens", &["--max-tokens", "1"]);
    assert_eq!(s["sessions"]["completed"], 1, "{report}");
    assert!(matches!(exit, Some(0 | 1)), "{report}");
    let t = &s["vllm"];
    assert_eq!(
        (t["answered"].as_u64(), t["early"].as_u64()),
        (Some(1), Some(1)),
        "{t}"
    );
    assert_eq!(t["ended"], 0, "the final commit ended no turn: {t}");
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("came before the client's final commit"),
        "{reasons}"
    );
    assert!(
        !reasons.contains("no turn ended"),
        "a vLLM session has no VAD to blame: {reasons}"
    );
}

#[test]
fn a_vllm_error_that_refuses_one_event_is_counted_and_the_transcription_goes_on_issue_12() {
    let _serial = util::serial();
    // vLLM answers these and goes on transcribing: the session completes, the code counted.
    for code in ["invalid_audio", "invalid_json", "unknown_event"] {
        let (exit, s, output) = vllm_run(&format!("vllm-{code}"), &["--mock-error", code]);
        assert!(matches!(exit, Some(0 | 1)), "{code}: {output}");
        assert_eq!(s["sessions"]["completed"], 1, "{code}: {output}");
        assert_eq!(s["vllm"]["answered"], 1, "{code}");
        assert_eq!(s["server"]["error_codes"][0]["message"], code, "{code}");
    }
}

#[test]
fn an_openai_error_code_is_named_in_the_summary_and_md_issue_12() {
    let _serial = util::serial();
    let dir = TempDir::new("openai-error");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--protocol",
            "openai",
            "--turn-detection",
            "none",
            "-d",
            "0.5s",
            "-s",
            "1",
            "--mock-error",
            "server_error",
            "--no-sampler",
            "--trace",
            "off",
        ],
        LIMIT,
    );
    ran(&output);
    let s = summary(&out);
    assert_eq!(s["server"]["error_codes"][0]["message"], "server_error");
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        md.contains("| server error codes | server_error × 1 |"),
        "{md}"
    );
}

/// A certificate for 127.0.0.1, made here: (cert.pem, key.pem).
pub fn self_signed(dir: &TempDir) -> (String, String) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    (
        cert_path.to_str().unwrap().to_string(),
        key_path.to_str().unwrap().to_string(),
    )
}

#[test]
fn wss_with_a_self_signed_certificate_carries_the_headers_and_writes_no_secret_issue_12() {
    let _serial = util::serial();
    let dir = TempDir::new("openai-wss");
    let (cert, key) = self_signed(&dir);
    let mut mock = Mock::start(&[
        "--protocol",
        "openai",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ]);
    let url = format!("wss://{}/v1/realtime", mock.addr);
    let header = format!("X-Test: {HEADER_VALUE}");
    let mut runs = Vec::new();
    for (name, trust) in [
        ("insecure", ["--insecure", ""]),
        ("ca", ["--ca-file", cert.as_str()]),
    ] {
        let out = dir.join(name);
        let mut args = vec![
            "--url",
            &url,
            "--protocol",
            "openai",
            "--api-version",
            "beta",
            "--turn-detection",
            "none",
            "-d",
            "0.5s",
            "-s",
            "1",
            "--no-sampler",
            "--keep-traces",
            "--header",
            &header,
        ];
        args.extend(trust.iter().filter(|a| !a.is_empty()));
        let mut cmd = assert_cmd::Command::new(util::bin());
        cmd.args(["run", "--no-tui", "--output", out.to_str().unwrap()])
            .args(&args)
            .env("OPENAI_API_KEY", KEY)
            .timeout(LIMIT)
            .write_stdin("");
        let output = cmd.output().unwrap();
        ran(&output);
        let s = summary(&out);
        assert_eq!(
            s["sessions"]["completed"],
            1,
            "{name}: {}",
            describe(&output)
        );
        assert_eq!(s["openai"]["answered"], 1, "{name}");
        for text in [
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        ] {
            assert!(
                !text.contains(KEY) && !text.contains(HEADER_VALUE),
                "{name}: {text}"
            );
        }
        runs.push(out);
    }
    let stats = mock.terminate();
    // Each run's probe makes the sessions' handshake, headers and all, before its session.
    for header in ["authorization", "x-test", "openai-beta"] {
        assert_eq!(
            stats.request_headers.get(header),
            Some(&4),
            "{header}: {:?}",
            stats.request_headers
        );
    }
    // Every file of both runs: summary.json, summary.md, traces, worker configs and logs.
    for out in runs {
        let all = files(&out);
        assert!(
            all.iter().any(|p| p.ends_with("trace.jsonl")),
            "traces kept: {all:?}"
        );
        assert!(
            all.iter()
                .any(|p| p.to_string_lossy().ends_with(".config.json")),
            "{all:?}"
        );
        for path in all {
            let bytes = std::fs::read(&path).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(KEY),
                "the key leaked into {}",
                path.display()
            );
            assert!(
                !text.contains(HEADER_VALUE),
                "the header leaked into {}",
                path.display()
            );
        }
    }
}

#[test]
fn the_key_given_on_the_command_line_is_redacted_from_the_recorded_command_issue_12() {
    let _serial = util::serial();
    let dir = TempDir::new("openai-argv-key");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--protocol",
            "openai",
            "-d",
            "0.3s",
            "-s",
            "1",
            "--api-key",
            KEY,
            "--no-sampler",
        ],
        LIMIT,
    );
    ran(&output);
    let s = summary(&out);
    let command = s["command_line"].as_str().unwrap();
    assert!(command.contains("--api-key '<redacted>'"), "{command}");
    for path in files(&out) {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).to_string();
        assert!(
            !text.contains(KEY),
            "the key leaked into {}",
            path.display()
        );
    }
}

#[test]
fn a_wav_at_another_rate_than_the_openai_default_is_refused_issue_12() {
    let dir = TempDir::new("openai-rate");
    let out = dir.join("out");
    let output = util::run_to(&out, &["--protocol", "openai", "--audio", SPEECH], LIMIT);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("must be 24 kHz mono PCM16 WAV; got 16000 Hz"),
        "{err}"
    );
    assert!(err.contains("sox"), "{err}");
    assert!(!err.contains("give --input-sample-rate"), "{err}");
}

#[tokio::test]
async fn the_openai_mock_answers_the_realtime_subprotocol_never_the_key_issue_12() {
    // openai-node's browser client offers ['realtime', 'openai-insecure-api-key.<key>'], and
    // a WebSocket client fails a handshake whose answer names none of what it offered.
    let mock = Mock::start(&["--protocol", "openai"]);
    let url = format!("ws://{}/v1/realtime", mock.addr);
    let offer = format!("realtime, openai-insecure-api-key.{KEY}");
    let (mut ws, response) = ws::connect(&url, &[("sec-websocket-protocol", &offer)]).await;
    assert_eq!(
        response.headers()["sec-websocket-protocol"],
        "realtime",
        "{:?}",
        response.headers()
    );
    let created = ws::next_json(&mut ws).await;
    assert_eq!(created["type"], "session.created");
    assert_eq!(created["session"]["type"], "realtime", "GA: {created}");
}

#[tokio::test]
async fn the_openai_mock_speaks_beta_when_the_header_asks_and_a_null_turn_detection_stops_its_vad_issue_12(
) {
    let mock = Mock::start(&["--protocol", "openai", "--response-deltas", "1"]);
    let url = format!("ws://{}/v1/realtime", mock.addr);
    let (mut ws, _) = ws::connect(&url, &[("openai-beta", "realtime=v1")]).await;
    let created = ws::next_json(&mut ws).await;
    assert!(created["session"].get("type").is_none(), "beta: {created}");
    // Nothing in this update says which naming it is: openai-python's beta client sends
    // such partial updates, and only the header tells.
    ws::send_json(
        &mut ws,
        serde_json::json!({"type": "session.update",
            "session": {"voice": "alloy", "turn_detection": null}}),
    )
    .await;
    let updated = ws::next_json(&mut ws).await;
    assert_eq!(updated["type"], "session.updated", "{updated}");
    assert_eq!(
        updated["session"]["turn_detection"],
        serde_json::Value::Null
    );
    // One second of loud audio, then one of silence: no VAD, so no turn until the commit.
    let loud: Vec<u8> = (0..24_000)
        .flat_map(|i| if i % 2 == 0 { 3000i16 } else { -3000 }.to_le_bytes())
        .chain(std::iter::repeat_n(0, 48_000))
        .collect();
    use base64::Engine as _;
    let audio = base64::engine::general_purpose::STANDARD.encode(loud);
    ws::send_json(
        &mut ws,
        serde_json::json!({"type": "input_audio_buffer.append", "audio": audio}),
    )
    .await;
    ws::send_json(
        &mut ws,
        serde_json::json!({"type": "input_audio_buffer.commit"}),
    )
    .await;
    assert_eq!(
        ws::next_json(&mut ws).await["type"],
        "input_audio_buffer.committed",
        "no speech_started: the VAD is off"
    );
    ws::send_json(&mut ws, serde_json::json!({"type": "response.create"})).await;
    let mut kinds = Vec::new();
    for _ in 0..8 {
        let event = ws::next_json(&mut ws).await;
        let kind = event["type"].as_str().unwrap().to_string();
        kinds.push(kind.clone());
        if kind == "response.done" {
            break;
        }
    }
    assert!(
        kinds.contains(&"response.audio.delta".to_string()),
        "beta names: {kinds:?}"
    );
}

/// The next events of `ws` up to and including one of type `last`.
async fn events_until(ws: &mut ws::Client, last: &str) -> Vec<serde_json::Value> {
    let mut events = Vec::new();
    for _ in 0..64 {
        let event = ws::next_json(ws).await;
        let done = event["type"] == last;
        events.push(event);
        if done {
            return events;
        }
    }
    panic!("no {last} in {events:?}");
}

#[tokio::test]
async fn the_openai_mock_streams_a_response_as_the_api_does_and_names_the_model_asked_for() {
    let mock = Mock::start(&["--protocol", "openai", "--response-deltas", "2"]);
    let url = format!("ws://{}/v1/realtime?model=gpt-realtime", mock.addr);
    let (mut ws, _) = ws::connect(&url, &[]).await;
    let created = ws::next_json(&mut ws).await;
    assert_eq!(created["session"]["model"], "gpt-realtime", "{created}");
    ws::send_json(
        &mut ws,
        serde_json::json!({"type": "session.update", "session": {"type": "realtime",
            "instructions": "Be brief.",
            "audio": {"input": {"format": {"type": "audio/pcm"}, "turn_detection": null}}}}),
    )
    .await;
    let updated = ws::next_json(&mut ws).await;
    assert_eq!(
        updated["type"], "session.updated",
        "a rate-less PCM is 24 kHz: {updated}"
    );
    assert_eq!(updated["session"]["instructions"], "Be brief.");
    assert_eq!(
        updated["session"]["audio"]["input"]["format"]["rate"],
        24_000
    );
    ws::send_json(&mut ws, serde_json::json!({"type": "response.cancel"})).await;
    assert_eq!(
        ws::next_json(&mut ws).await["error"]["code"],
        "response_cancel_not_active"
    );
    ws::send_json(&mut ws, serde_json::json!({"type": "response.create"})).await;
    ws::send_json(&mut ws, serde_json::json!({"type": "response.create"})).await;
    let events = events_until(&mut ws, "response.done").await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "error",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
            "response.output_audio.delta",
            "response.output_audio_transcript.delta",
            "response.output_audio.delta",
            "response.output_audio_transcript.delta",
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done"
        ]
    );
    assert_eq!(
        events[1]["error"]["code"],
        "conversation_already_has_active_response"
    );
    assert_eq!(events[10]["transcript"], "……");
    assert_eq!(
        events[14]["response"]["output"][0]["id"],
        events[2]["item"]["id"]
    );
}

#[test]
fn the_openai_mock_refuses_an_output_rate_the_api_never_streams() {
    for command in [
        &["mock", "--protocol", "openai", "--port", "0"][..],
        &["run", "--protocol", "openai", "--no-tui", "-d", "1s"][..],
    ] {
        let output = assert_cmd::Command::new(util::bin())
            .args(command)
            .args(["--output-sample-rate", "22050"])
            .timeout(LIMIT)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--output-sample-rate 22050"), "{stderr}");
    }
}

/// The native client against a vLLM server: vLLM (0.34) answers sglang-omni's `session.update`
/// (no `model`) with `{"type":"error","error":"Missing required field: model","code":
/// "invalid_event"}`. The session's reason quotes the server's message (it named a serde type:
/// the string did not fit the native error object) and asks whether the server speaks another
/// protocol.
#[test]
fn the_native_client_against_a_vllm_server_quotes_its_error_and_asks_for_the_protocol() {
    let _serial = util::serial();
    let mock = Mock::start(&["--protocol", "vllm"]);
    let dir = TempDir::new("native-vs-vllm");
    let out = dir.join("out");
    let url = format!("ws://{}/v1/realtime", mock.addr);
    let output = util::run_to(
        &out,
        &["--url", &url, "-s", "1", "-d", "1s", "--recv-timeout", "2s"],
        Duration::from_secs(60),
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    assert_eq!(s["server"]["protocol_errors"], 0, "{s}");
    let errors = s["sessions"]["errors"].to_string();
    assert!(
        errors.contains("invalid_event: Missing required field: model"),
        "{errors}"
    );
    assert!(
        errors.contains("is it a server of another protocol?"),
        "{errors}"
    );
}

/// A vLLM client facing sglang-omni's native server: its appends are refused ("append needs
/// sglang.seq"), then its commit; the hint named vLLM's first builds ("upgrade vLLM") from the
/// last error, and not the protocol (the QA pass of 2026-12-06). A Fun-ASR client facing a
/// Realtime API server, which answers its START with JSON errors, timed out with no hint.
#[test]
fn clients_facing_a_server_of_another_protocol_are_told_which_to_speak() {
    let _serial = util::serial();
    let native = Mock::start(&[]);
    let dir = TempDir::new("other-protocol");
    let out = dir.join("vllm");
    let url = format!("ws://{}/v1/realtime", native.addr);
    let flags = ["--protocol", "vllm", "--model", "m", "-s", "1", "-d", "1s"];
    let output = util::run_to(
        &out,
        &[&["--url", &url, "--recv-timeout", "2s"][..], &flags[..]].concat(),
        LIMIT,
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(reasons.contains("--protocol native"), "{reasons}");
    let errors = s["sessions"]["errors"].to_string();
    assert!(!errors.contains("upgrade vLLM"), "{errors}");
    drop(native);

    let openai = Mock::start(&["--protocol", "openai"]);
    let out = dir.join("funasr");
    let url = format!("ws://{}/v1/realtime", openai.addr);
    let output = util::run_to(
        &out,
        &[
            "--url",
            &url,
            "--protocol",
            "funasr",
            "-s",
            "1",
            "--recv-timeout",
            "2s",
        ],
        LIMIT,
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let errors = summary(&out)["sessions"]["errors"].to_string();
    assert!(
        errors.contains("no started") && errors.contains("is it a server of another protocol?"),
        "{errors}"
    );
}

/// A credential in `--url`'s query (Azure's `api-key=`, a `token=`) reaches the server, and
/// no file, log or line of output of the run holds it: it is written as `<redacted>`.
#[test]
fn a_credential_in_the_urls_query_is_sent_and_written_nowhere() {
    const QUERY_KEY: &str = "SEKRIT-URL-7731";
    let _serial = util::serial();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let server = util::LoopbackServer::start(move |stream| {
        let record = record.clone();
        async move {
            // The error type is tungstenite's `Callback` signature, not ours to shrink.
            #[allow(clippy::result_large_err)]
            let callback =
                |request: &tokio_tungstenite::tungstenite::handshake::server::Request, response| {
                    record.lock().unwrap().push(request.uri().to_string());
                    Ok(response)
                };
            // Takes the handshake, then closes: the session fails, which is not the point.
            let _ = tokio_tungstenite::accept_hdr_async(stream, callback).await;
        }
    });
    let dir = TempDir::new("url-key");
    let out = dir.join("out");
    let url = format!(
        "ws://{}/v1/realtime?api-version=1&api-key={QUERY_KEY}",
        server.addr
    );
    let output = util::run_to(
        &out,
        &["--url", &url, "-s", "1", "-d", "0.5s", "--keep-traces"],
        LIMIT,
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert_eq!(
        seen.lock().unwrap().first().map(String::as_str),
        Some(&*format!("/v1/realtime?api-version=1&api-key={QUERY_KEY}")),
        "the server got the key"
    );
    let s = summary(&out);
    assert!(
        s["settings"]["url"]
            .as_str()
            .is_some_and(|u| u.ends_with("?api-version=1&api-key=<redacted>")),
        "{}",
        s["settings"]["url"]
    );
    for text in [
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    ] {
        assert!(!text.contains(QUERY_KEY), "{text}");
    }
    for path in files(&out) {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).to_string();
        assert!(
            !text.contains(QUERY_KEY),
            "the key leaked into {}",
            path.display()
        );
    }
}

/// vLLM's first realtime builds read no `"final": true`: the last commit starts nothing and
/// `transcription.done` never comes. The timeout's reason says what that may be.
#[test]
fn a_vllm_server_that_never_ends_the_transcription_is_named_as_perhaps_an_early_build() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    let _serial = util::serial();
    let server = util::LoopbackServer::start(|stream| async move {
        let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
            return;
        };
        let created = r#"{"type":"session.created","id":"sess_1","created":1}"#;
        if ws.send(Message::text(created)).await.is_err() {
            return;
        }
        // A delta per append, and nothing at the commit that should end it.
        while let Some(Ok(msg)) = ws.next().await {
            if msg
                .to_text()
                .is_ok_and(|t| t.contains("input_audio_buffer.append"))
            {
                let delta = r#"{"type":"transcription.delta","delta":"a"}"#;
                if ws.send(Message::text(delta)).await.is_err() {
                    return;
                }
            }
        }
    });
    let dir = TempDir::new("vllm-early");
    let out = dir.join("out");
    let url = format!("ws://{}/v1/realtime", server.addr);
    let args = [
        "--url",
        &url,
        "--protocol",
        "vllm",
        "--model",
        "m",
        "-s",
        "1",
        "-d",
        "0.5s",
        "--recv-timeout",
        "1s",
    ];
    let output = util::run_to(&out, &args, LIMIT);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let errors = summary(&out)["sessions"]["errors"].to_string();
    assert!(
        errors.contains("no transcription.done within --recv-timeout 1s")
            && errors.contains("vLLM's first realtime builds"),
        "{errors}"
    );
}

/// OpenAI retired the Realtime beta (May 2026): a handshake with `OpenAI-Beta: realtime=v1`
/// gets an `error` with code `beta_api_shape_disabled` in place of `session.created`, then a
/// close with 4000 (as reported by its users). The reason says to use the GA names.
#[test]
fn openais_retired_beta_is_named_with_what_to_use_instead() {
    use futures_util::SinkExt as _;
    use tokio_tungstenite::tungstenite::protocol::{frame::coding::CloseCode, CloseFrame};
    use tokio_tungstenite::tungstenite::Message;
    let _serial = util::serial();
    let server = util::LoopbackServer::start(|stream| async move {
        let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
            return;
        };
        let error = r#"{"type":"error","event_id":"event_Bx1","error":{"type":"invalid_request_error","code":"beta_api_shape_disabled","message":"The Realtime Beta API is no longer supported. Please use /v1/realtime for the GA API.","param":null}}"#;
        let _ = ws.send(Message::text(error)).await;
        let _ = ws
            .close(Some(CloseFrame {
                code: CloseCode::Library(4000),
                reason: "invalid_request_error.beta_api_shape_disabled".into(),
            }))
            .await;
    });
    let dir = TempDir::new("openai-beta-retired");
    let out = dir.join("out");
    let url = format!("ws://{}/v1/realtime?model=gpt-realtime", server.addr);
    let args = [
        "--url",
        &url,
        "--protocol",
        "openai",
        "--api-version",
        "beta",
        "-s",
        "1",
        "--audio",
        SPEECH_24K,
    ];
    let output = util::run_to(&out, &args, LIMIT);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    let reason = s["sessions"]["errors"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("(code 4000, \"invalid_request_error.beta_api_shape_disabled\")")
            && reason.contains("OpenAI no longer serves the Realtime API's beta")
            && reason.contains("--api-version ga (the default)"),
        "{reason}"
    );
    assert!(!reason.contains("another protocol"), "{reason}");
}

/// OpenAI's default server VAD hears no speech in the default silence: the sessions complete
/// without a single turn, and the summary says that nothing of the server was measured and
/// what to give instead, where the verdict alone read "complete".
#[test]
fn a_run_in_which_no_turn_ended_says_nothing_of_the_server_was_measured() {
    let _serial = util::serial();
    let dir = TempDir::new("openai-no-turns");
    let out = dir.join("out");
    let args = [
        "--protocol",
        "openai",
        "-s",
        "1",
        "-d",
        "1s",
        "--trace",
        "off",
    ];
    let output = util::run_to(&out, &args, LIMIT);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        describe(&output)
    );
    let s = summary(&out);
    assert_eq!(s["openai"]["ended"], 0, "{}", s["openai"]);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("no turn ended") && reasons.contains("the audio is silence"),
        "{reasons}"
    );
    // With a turn the client ends, there is one, and no such line.
    let out = dir.join("out-commit");
    let args = [&args[..], &["--turn-detection", "none"]].concat();
    let output = util::run_to(&out, &args, LIMIT);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        describe(&output)
    );
    let s = summary(&out);
    assert_eq!(s["openai"]["ended"], 1, "{}", s["openai"]);
    assert!(!s["verdict"]["reasons"]
        .to_string()
        .contains("no turn ended"));
}

/// A transcription session (`--session-type transcription`) against the built-in mock: the
/// connection asks for it with `intent=transcription`, each turn the server's VAD ends is
/// answered by its transcript, timed as an answer (the mock's first delta comes 200 ms after
/// the commit), and the summary names the session type.
#[test]
fn an_openai_transcription_session_times_each_turns_transcript() {
    let _serial = util::serial();
    let dir = TempDir::new("openai-transcription");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--protocol",
            "openai",
            "--session-type",
            "transcription",
            "--audio",
            SPEECH_24K,
            "-s",
            "1",
            "--no-sampler",
            "--trace",
            "off",
        ],
        LIMIT,
    );
    ran(&output);
    let s = summary(&out);
    assert_eq!(s["settings"]["client"]["session_type"], "transcription");
    assert_eq!(s["settings"]["client"]["model"], "gpt-4o-transcribe");
    assert_eq!(
        s["settings"]["client"]["interrupt_response"],
        serde_json::Value::Null
    );
    let url = s["settings"]["url"].as_str().unwrap();
    assert!(url.ends_with("/v1/realtime?intent=transcription"), "{url}");
    let t = &s["openai"];
    assert!(t["ended"].as_u64().unwrap() >= 2, "{t}");
    assert!(t["answered"].as_u64().unwrap() >= 1, "{t}");
    assert_eq!(t["audio_deltas"], 0, "{t}");
    assert!(t["text_deltas"].as_u64().unwrap() >= 1, "{t}");
    // Not before the mock's first delta: the transcript is timed from the turn's end.
    let first = t["first_text_after_end_ms"]["p50"].as_f64().unwrap();
    assert!(first >= 150.0, "{t}");
    assert!(
        t["done_after_end_ms"]["p50"].as_f64().unwrap() >= first,
        "{t}"
    );
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        md.contains("| openai transcription first text after end p50"),
        "{md}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OpenAI transcription turns"),
        "{}",
        describe(&output)
    );
}
