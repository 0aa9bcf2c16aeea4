//! The vllm mock session on hand-made client frames.

use super::*;
use crate::cli::{Cli, Command};
use base64::Engine as _;
use clap::Parser;

fn behaviour(extra: &[&str]) -> Rc<Behaviour> {
    let mut argv = vec!["duplexbench-tui", "mock", "--protocol", "vllm"];
    argv.extend_from_slice(extra);
    let Some(Command::Mock(args)) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    Rc::new(Behaviour::new(&args.behaviour, 24_000))
}

fn kinds(out: &mut Vec<Utf8Bytes>) -> Vec<String> {
    out.drain(..)
        .map(|f| {
            let v: serde_json::Value = serde_json::from_str(f.as_str()).unwrap();
            match v.get("code") {
                Some(code) => format!("error {}", code.as_str().unwrap()),
                None => v["type"].as_str().unwrap().to_string(),
            }
        })
        .collect()
}

const PACKET: &str = r#"{"type":"input_audio_buffer.append","audio":"AAAAAAAAAAAAAAAA"}"#;

#[test]
fn the_vllm_mock_transcribes_between_the_commits_issue_12() {
    let mut s = Session::new(
        behaviour(&["--first-delta-ms", "100", "--delta-interval-ms", "1"]),
        0,
    );
    let c = Counters::new();
    let mut out = Vec::new();
    s.greet(0.0, &mut out);
    assert_eq!(kinds(&mut out), ["session.created"]);
    s.on_text(
        r#"{"type":"session.update","model":"duplexbench-mock"}"#,
        0.0,
        &c,
        &mut out,
    );
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    let b64 = base64::engine::general_purpose::STANDARD.encode([0u8; 3200]);
    let packet = format!(r#"{{"type":"input_audio_buffer.append","audio":"{b64}"}}"#);
    s.on_text(&packet, 0.0, &c, &mut out);
    assert!(out.is_empty(), "neither is answered");
    assert_eq!(s.next_wake_s(), Some(0.1));
    s.on_timer(0.1, &mut out);
    assert_eq!(kinds(&mut out), ["transcription.delta"]);
    s.on_text(
        r#"{"type":"input_audio_buffer.commit","final":true}"#,
        0.2,
        &c,
        &mut out,
    );
    s.on_timer(0.31, &mut out);
    let done: serde_json::Value = serde_json::from_str(out.last().unwrap().as_str()).unwrap();
    assert_eq!(done["type"], "transcription.done");
    // vLLM's UsageInfo, not OpenAI's input/output names.
    let usage = done["usage"].as_object().unwrap();
    let keys: Vec<&str> = usage.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "completion_tokens",
            "prompt_tokens",
            "prompt_tokens_details",
            "total_tokens"
        ]
    );
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(
            usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
        )
    );
}

#[test]
fn the_vllm_mock_answers_each_error_code_where_vllm_sends_it_issue_12() {
    let c = Counters::new();
    let mut out = Vec::new();
    let mut s = Session::new(behaviour(&[]), 0);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    s.on_text(
        r#"{"type":"session.update","model":"other"}"#,
        0.0,
        &c,
        &mut out,
    );
    s.on_text(r#"{"type":"session.update"}"#, 0.0, &c, &mut out);
    s.on_text("not json", 0.0, &c, &mut out);
    s.on_text(r#"{"type":"what.is.this"}"#, 0.0, &c, &mut out);
    s.on_text(r#"{"audio":"AAAA"}"#, 0.0, &c, &mut out);
    for audio in ["***", ""] {
        let append = format!(r#"{{"type":"input_audio_buffer.append","audio":"{audio}"}}"#);
        s.on_text(&append, 0.0, &c, &mut out);
    }
    assert_eq!(
        kinds(&mut out),
        [
            "error model_not_validated",
            "error model_not_found",
            "error invalid_event",
            "error invalid_json",
            "error unknown_event",
            "error unknown_event",
            "error invalid_audio",
            "error invalid_audio"
        ]
    );
    let mut s = Session::new(behaviour(&["--mock-error", "processing_error"]), 1);
    s.on_text(PACKET, 0.0, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error processing_error"]);
}

fn update(s: &mut Session, c: &Counters, out: &mut Vec<Utf8Bytes>) {
    s.on_text(
        r#"{"type":"session.update","model":"duplexbench-mock"}"#,
        0.0,
        c,
        out,
    );
}

fn json(frame: &Utf8Bytes) -> serde_json::Value {
    serde_json::from_str(frame.as_str()).unwrap()
}

#[test]
fn audio_after_done_is_not_transcribed_until_the_next_utterance_starts() {
    let mut s = Session::new(behaviour(&["--first-delta-ms", "100"]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    // 100 ms at 16 kHz: more than a delta's worth (40 ms).
    let b64 = base64::engine::general_purpose::STANDARD.encode([0u8; 3200]);
    let packet = format!(r#"{{"type":"input_audio_buffer.append","audio":"{b64}"}}"#);
    update(&mut s, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    s.on_text(&packet, 0.0, &c, &mut out);
    s.on_text(
        r#"{"type":"input_audio_buffer.commit","final":true}"#,
        0.0,
        &c,
        &mut out,
    );
    s.on_timer(1.0, &mut out);
    assert_eq!(kinds(&mut out).last().unwrap(), "transcription.done");
    for i in 0..3 {
        s.on_text(&packet, 1.0 + f64::from(i), &c, &mut out);
        while let Some(at) = s.next_wake_s() {
            s.on_timer(at, &mut out);
        }
    }
    assert!(out.is_empty(), "{:?}", kinds(&mut out));
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 5.0, &c, &mut out);
    s.on_text(&packet, 5.0, &c, &mut out);
    s.on_timer(5.2, &mut out);
    assert_eq!(kinds(&mut out), ["transcription.delta"], "a new utterance");
}

#[test]
fn the_done_text_is_the_deltas_joined_exactly() {
    let mut s = Session::new(behaviour(&["--delta-interval-ms", "1"]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    update(&mut s, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    s.on_text(PACKET, 0.0, &c, &mut out);
    s.on_text(
        r#"{"type":"input_audio_buffer.commit","final":"yes"}"#,
        0.0,
        &c,
        &mut out,
    );
    s.on_timer(1.0, &mut out);
    let events: Vec<serde_json::Value> = out.iter().map(json).collect();
    let joined: String = events.iter().filter_map(|e| e["delta"].as_str()).collect();
    let done = events.last().unwrap();
    assert_eq!(
        done["type"], "transcription.done",
        "\"yes\" is final to pydantic"
    );
    assert_eq!(done["text"], joined.as_str());
}

#[test]
fn base64_that_pybase64_takes_is_audio() {
    let mut s = Session::new(behaviour(&[]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    for audio in ["AAAA\\nAAAA\\n", "AAB=", "AAAA-AAAA"] {
        let append = format!(r#"{{"type":"input_audio_buffer.append","audio":"{audio}"}}"#);
        s.on_text(&append, 0.0, &c, &mut out);
    }
    assert!(out.is_empty(), "{:?}", kinds(&mut out));
}

#[test]
fn malformed_events_get_vllms_codes_and_an_empty_model_is_served() {
    let mut s = Session::new(behaviour(&[]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    s.on_text(r#"{"type":"session.update","model":""}"#, 0.0, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    assert!(out.is_empty(), "validated: {:?}", kinds(&mut out));
    s.on_text(r#"{"type":"input_audio_buffer.append"}"#, 0.0, &c, &mut out);
    s.on_text("[1,2]", 0.0, &c, &mut out);
    s.on_text(
        r#"{"type":"input_audio_buffer.commit","final":"maybe"}"#,
        0.0,
        &c,
        &mut out,
    );
    s.on_text(
        r#"{"type":"session.update","model":"x"}"#,
        0.0,
        &c,
        &mut out,
    );
    let last = json(out.last().unwrap());
    assert_eq!(
        last["error"], "The model `x` does not exist.",
        "as vLLM says it"
    );
    assert_eq!(
        kinds(&mut out),
        [
            "error processing_error",
            "error processing_error",
            "error processing_error",
            "error model_not_found"
        ]
    );
}

#[test]
fn session_created_says_when_in_unix_seconds() {
    let mut out = Vec::new();
    Session::new(behaviour(&[]), 0).greet(0.0, &mut out);
    let created = json(&out[0])["created"].as_u64().unwrap();
    let now = crate::clock::realtime_s() as u64;
    assert!(now.abs_diff(created) < 5, "{created} vs {now}");
}

#[test]
fn unparsable_json_is_answered_invalid_json_as_vllm_words_it() {
    let mut s = Session::new(behaviour(&[]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    s.on_text("{not json", 0.0, &c, &mut out);
    let error = json(&out[0]);
    assert_eq!(error["error"], "Invalid JSON", "no parser details: {error}");
    assert_eq!(error["code"], "invalid_json");
}

#[test]
fn a_null_final_is_refused_as_pydantic_refuses_it_not_taken_as_false() {
    let mut s = Session::new(behaviour(&[]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    update(&mut s, &c, &mut out);
    s.on_text(
        r#"{"type":"input_audio_buffer.commit","final":null}"#,
        0.0,
        &c,
        &mut out,
    );
    assert_eq!(kinds(&mut out.clone()), ["error processing_error"]);
    let error = json(&out[0]);
    assert_eq!(
        error["error"],
        "1 validation error for InputAudioBufferCommit\nfinal\n  Input should be a valid boolean [type=bool_type, input_value=None, input_type=NoneType]"
    );
    // An absent final is false, as pydantic's default: nothing to answer.
    out.clear();
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    assert!(out.is_empty(), "{:?}", kinds(&mut out));
}
