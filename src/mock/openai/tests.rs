//! The openai mock session on hand-made client frames.

use super::*;
use crate::cli::{Cli, Command};
use clap::Parser;

fn behaviour(extra: &[&str]) -> Rc<Behaviour> {
    let mut argv = vec!["duplexbench-tui", "mock", "--protocol", "openai"];
    argv.extend_from_slice(extra);
    let Some(Command::Mock(args)) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    Rc::new(Behaviour::new(&args.behaviour, 24_000))
}

fn kinds(out: &mut Vec<Utf8Bytes>) -> Vec<String> {
    out.drain(..)
        .map(|f| {
            let v: Value = serde_json::from_str(f.as_str()).unwrap();
            match v["type"].as_str().unwrap() {
                "error" => format!("error {}", v["error"]["code"].as_str().unwrap()),
                kind => kind.to_string(),
            }
        })
        .collect()
}

fn append(pcm: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(pcm);
    format!(r#"{{"type":"input_audio_buffer.append","audio":"{b64}"}}"#)
}

const GA_NO_VAD: &str = r#"{"type":"session.update","session":{"type":"realtime","output_modalities":["audio"],"audio":{"input":{"format":{"type":"audio/pcm","rate":16000},"turn_detection":null}}}}"#;
const BETA_VAD: &str = r#"{"type":"session.update","session":{"modalities":["audio","text"],"input_audio_format":"pcm16","turn_detection":{"type":"server_vad"}}}"#;

#[test]
fn a_committed_turn_gets_a_response_on_the_clock_in_ga_names_issue_12() {
    let b = behaviour(&[
        "--first-delta-ms",
        "200",
        "--delta-interval-ms",
        "40",
        "--response-deltas",
        "2",
    ]);
    let (mut s, c, mut out) = (Session::new(b, 0), Counters::new(), Vec::new());
    s.greet(0.0, &mut out);
    s.on_text(GA_NO_VAD, 0.0, &c, &mut out);
    assert_eq!(kinds(&mut out), ["session.created", "session.updated"]);
    s.on_text(&append(&[0; 2560]), 0.0, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.1, &c, &mut out);
    s.on_text(r#"{"type":"response.create"}"#, 0.1, &c, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "input_audio_buffer.committed",
            "conversation.item.created",
            "response.created"
        ]
    );
    assert!((s.next_wake_s().unwrap() - 0.3).abs() < 1e-9);
    s.on_timer(0.31, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "response.output_audio.delta",
            "response.output_audio_transcript.delta"
        ]
    );
    s.on_timer(0.35, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "response.output_audio.delta",
            "response.output_audio_transcript.delta",
            "response.output_audio.done",
            "response.done"
        ]
    );
    assert_eq!(s.next_wake_s(), None);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.5, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error input_audio_buffer_commit_empty"]);
}

#[test]
fn server_vad_turns_speech_into_a_response_in_beta_names_issue_12() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&["--response-deltas", "1"]), 0),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(BETA_VAD, 0.0, &c, &mut out);
    out.clear();
    // 24 kHz: 0.5 s loud, then 0.6 s quiet.
    let loud: Vec<u8> = (0..12_000)
        .flat_map(|i| if i % 2 == 0 { 3000i16 } else { -3000 }.to_le_bytes())
        .collect();
    s.on_text(&append(&loud), 0.0, &c, &mut out);
    s.on_text(&append(&vec![0; 28_800]), 0.6, &c, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "input_audio_buffer.speech_started",
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
            "conversation.item.created",
            "response.created"
        ]
    );
    s.on_timer(10.0, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "response.audio.delta",
            "response.audio_transcript.delta",
            "response.audio.done",
            "response.done"
        ]
    );
}

#[test]
fn the_openai_mock_answers_its_error_cases_issue_12() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&["--mock-error", "server_error"]), 0),
        Counters::new(),
        Vec::new(),
    );
    s.on_text("{", 0.0, &c, &mut out);
    s.on_text(r#"{"type":"nope"}"#, 0.0, &c, &mut out);
    s.on_text(&append(&[0; 4]), 0.0, &c, &mut out);
    s.on_text(
        r#"{"type":"input_audio_buffer.append","audio":"!!"}"#,
        0.0,
        &c,
        &mut out,
    );
    assert_eq!(
        kinds(&mut out),
        [
            "error invalid_json",
            "error unknown_event",
            "error server_error",
            "error invalid_audio"
        ]
    );
}
