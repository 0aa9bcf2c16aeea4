//! The vllm mock session on hand-made client frames.

use super::*;
use base64::Engine as _;

fn behaviour(extra: &[&str]) -> Rc<Behaviour> {
    Behaviour::of_mock_flags("vllm", extra)
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
            "completion_tokens_details",
            "prompt_tokens",
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
    let mut s = Session::new(behaviour(&["--served-model", "m"]), 0);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    s.on_text(
        r#"{"type":"session.update","model":"other"}"#,
        0.0,
        &c,
        &mut out,
    );
    s.on_text(r#"{"type":"session.update"}"#, 0.0, &c, &mut out);
    s.on_text(
        r#"{"type":"session.update","model":null}"#,
        0.0,
        &c,
        &mut out,
    );
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
            "error invalid_event",
            "error invalid_json",
            "error unknown_event",
            "error unknown_event",
            "error invalid_audio",
            "error invalid_audio"
        ]
    );
    // vLLM 0.34's words for an absent model (before, a `KeyError`: "'model'").
    let mut s = Session::new(behaviour(&[]), 0);
    s.on_text(r#"{"type":"session.update"}"#, 0.0, &c, &mut out);
    assert_eq!(
        out.drain(..).map(|f| f.to_string()).collect::<Vec<_>>(),
        [r#"{"type":"error","error":"Missing required field: model","code":"invalid_event"}"#]
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
    let mut s = Session::new(behaviour(&["--served-model", "m"]), 0);
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

/// An append of `bytes` bytes of PCM16 silence.
fn append_of(bytes: usize) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(vec![0u8; bytes]);
    format!(r#"{{"type":"input_audio_buffer.append","audio":"{b64}"}}"#)
}

/// 80 ms of audio at 16 kHz, as vLLM's example client and the probes send it.
const STEP_BYTES: usize = 2560;

/// Runs the session's timers that come due up to `until_s`.
fn run_timers(s: &mut Session, until_s: f64, out: &mut Vec<Utf8Bytes>) {
    while let Some(at) = s.next_wake_s().filter(|at| *at <= until_s) {
        s.on_timer(at, out);
    }
}

/// Streams `packets` 80 ms packets at real time from `start_s`, the timers run as they come
/// due; returns when the last packet's audio has played.
fn stream(
    s: &mut Session,
    c: &Counters,
    out: &mut Vec<Utf8Bytes>,
    start_s: f64,
    packets: u32,
) -> f64 {
    let packet = append_of(STEP_BYTES);
    let mut now_s = start_s;
    for _ in 0..packets {
        run_timers(s, now_s, out);
        s.on_text(&packet, now_s, c, out);
        now_s += 0.08;
    }
    run_timers(s, now_s, out);
    now_s
}

/// A whole utterance from the session's start: the update, a commit, `packets` packets at real
/// time and the final commit (its answer left to the timers); returns when the final went.
fn utterance(s: &mut Session, c: &Counters, out: &mut Vec<Utf8Bytes>, packets: u32) -> f64 {
    update(s, c, out);
    s.on_text(COMMIT, 0.0, c, out);
    let end_s = stream(s, c, out, 0.0, packets);
    s.on_text(FINAL, end_s, c, out);
    end_s
}

const COMMIT: &str = r#"{"type":"input_audio_buffer.commit"}"#;
const FINAL: &str = r#"{"type":"input_audio_buffer.commit","final":true}"#;

/// Everything sent until `transcription.done`, the done last.
fn until_done(s: &mut Session, out: &mut Vec<Utf8Bytes>) -> Vec<serde_json::Value> {
    run_timers(s, f64::MAX, out);
    let events: Vec<serde_json::Value> = out.drain(..).map(|f| json(&f)).collect();
    assert_eq!(events.last().unwrap()["type"], "transcription.done");
    events
}

fn deltas(events: &[serde_json::Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["type"] == "transcription.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

#[test]
fn done_counts_a_completion_token_for_every_delta_as_vllm_counts_one_per_model_step() {
    let mut s = Session::new(behaviour(&[]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    utterance(&mut s, &c, &mut out, 20);
    let events = until_done(&mut s, &mut out);
    let usage = &events.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], deltas(&events).len(), "{usage}");
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
}

#[test]
fn done_usage_is_vllms_usage_info_as_pydantic_dumps_it() {
    let mut s = Session::new(behaviour(&[]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    utterance(&mut s, &c, &mut out, 20);
    run_timers(&mut s, f64::MAX, &mut out);
    let done = out.pop().unwrap();
    // 1.6 s of audio at the default 240 ms a word.
    let text = WORD.repeat(7);
    // UsageInfo's field order; prompt_tokens_details is left out when None
    // (`exclude_if`), completion_tokens_details is not.
    assert_eq!(
        done.as_str(),
        format!(
            r#"{{"type":"transcription.done","text":"{text}","usage":{{"prompt_tokens":39,"total_tokens":59,"completion_tokens":20,"completion_tokens_details":null}}}}"#
        )
    );
}

#[test]
fn prompt_tokens_are_the_utterances_own_and_audio_between_the_final_commit_and_done_is_dropped() {
    let (c, mut out) = (Counters::new(), Vec::new());
    // vLLM clears its audio queue after transcription.done: 3.2 s appended between the final
    // commit and done are in neither utterance.
    let mut s = Session::new(behaviour(&[]), 0);
    let end_s = utterance(&mut s, &c, &mut out, 20);
    for _ in 0..40 {
        s.on_text(&append_of(STEP_BYTES), end_s, &c, &mut out);
    }
    let first = until_done(&mut s, &mut out);
    assert_eq!(deltas(&first).len(), 20, "1.6 s: 20 steps of 80 ms");
    assert_eq!(first.last().unwrap()["usage"]["prompt_tokens"], 39);
    s.on_text(COMMIT, end_s + 1.0, &c, &mut out);
    s.on_text(FINAL, end_s + 1.0, &c, &mut out);
    let second = until_done(&mut s, &mut out);
    let done = second.last().unwrap();
    assert_eq!(second.len(), 1, "no audio, no step: {second:?}");
    assert_eq!(done["text"], "");
    assert_eq!(done["usage"]["prompt_tokens"], 0, "no step, no prompt");
    assert_eq!(done["usage"]["total_tokens"], 0);

    // Audio appended after done and before the next commit is the next utterance's, and only
    // its own audio counts there.
    let mut s = Session::new(behaviour(&[]), 1);
    utterance(&mut s, &c, &mut out, 20);
    until_done(&mut s, &mut out);
    for _ in 0..40 {
        s.on_text(&append_of(STEP_BYTES), end_s + 1.0, &c, &mut out);
    }
    s.on_text(COMMIT, end_s + 1.0, &c, &mut out);
    s.on_text(FINAL, end_s + 1.0, &c, &mut out);
    let second = until_done(&mut s, &mut out);
    assert_eq!(deltas(&second).len(), 40, "3.2 s: 40 steps");
    let usage = &second.last().unwrap()["usage"];
    assert_eq!(
        usage["prompt_tokens"], 39,
        "the model's prompt, not the session's audio"
    );
    assert_eq!(usage["completion_tokens"], 40);
}

#[test]
fn a_delta_goes_out_for_every_80_ms_of_audio_empty_when_no_word_is_due() {
    // A word per 200 ms of audio, a model step per 80 ms.
    let mut s = Session::new(behaviour(&["--delta-interval-ms", "200"]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    update(&mut s, &c, &mut out);
    s.on_text(COMMIT, 0.0, &c, &mut out);
    let end_s = stream(&mut s, &c, &mut out, 0.0, 12);
    assert!(
        out.iter()
            .any(|f| f.as_str() == r#"{"type":"transcription.delta","delta":""}"#),
        "vLLM's empty delta, as pydantic dumps it"
    );
    s.on_text(FINAL, end_s, &c, &mut out);
    let events = until_done(&mut s, &mut out);
    assert_eq!(
        deltas(&events),
        ["la ", "", "la ", "", "", "la ", "", "la ", "", "", "la ", ""]
    );
    assert_eq!(events.last().unwrap()["text"], WORD.repeat(5));

    // The default, 240 ms of audio a word: one step in three makes text, as real vLLM's mostly
    // empty deltas.
    let mut s = Session::new(behaviour(&[]), 1);
    utterance(&mut s, &c, &mut out, 12);
    let events = until_done(&mut s, &mut out);
    assert_eq!(deltas(&events), ["la ", "", ""].repeat(4));

    // 40 ms between words: two to a step.
    let mut s = Session::new(behaviour(&["--delta-interval-ms", "40"]), 2);
    utterance(&mut s, &c, &mut out, 12);
    let events = until_done(&mut s, &mut out);
    assert_eq!(deltas(&events), ["la la "; 12]);
}

/// vLLM answers a final commit only when a start commit began a transcription
/// (`connection.py`: a final commit puts the end of the audio queue, and only a commit that is
/// not final starts the generation): a client that forgets the start hangs against vLLM, so it
/// must not pass against the mock (the protocol audit of 2026-12-06).
#[test]
fn a_final_commit_with_no_start_commit_is_answered_by_nothing() {
    let mut s = Session::new(behaviour(&[]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    update(&mut s, &c, &mut out);
    out.clear();
    stream(&mut s, &c, &mut out, 0.0, 10);
    s.on_text(FINAL, 0.8, &c, &mut out);
    run_timers(&mut s, 60.0, &mut out);
    assert!(out.is_empty(), "{:?}", kinds(&mut out));
}

/// vLLM's generation ends at the model's `realtime_max_tokens` (a completion token a step),
/// with `transcription.done`, however much audio is still coming; the final commit then
/// starts nothing and is answered by nothing.
#[test]
fn max_tokens_ends_the_transcription_before_its_audio_and_the_final_commit_gets_nothing() {
    let mut s = Session::new(behaviour(&["--max-tokens", "5"]), 0);
    let (c, mut out) = (Counters::new(), Vec::new());
    update(&mut s, &c, &mut out);
    s.on_text(COMMIT, 0.0, &c, &mut out);
    let end_s = stream(&mut s, &c, &mut out, 0.0, 20);
    let events: Vec<serde_json::Value> = out.drain(..).map(|f| json(&f)).collect();
    assert_eq!(deltas(&events).len(), 5, "{events:?}");
    let done = events.last().unwrap();
    assert_eq!(
        done["type"], "transcription.done",
        "done while audio still came"
    );
    assert_eq!(done["usage"]["completion_tokens"], 5);
    s.on_text(FINAL, end_s, &c, &mut out);
    run_timers(&mut s, 60.0, &mut out);
    assert!(out.is_empty(), "{:?}", kinds(&mut out));

    // Without the limit the same audio is transcribed to its end.
    let mut s = Session::new(behaviour(&[]), 1);
    utterance(&mut s, &c, &mut out, 20);
    assert_eq!(deltas(&until_done(&mut s, &mut out)).len(), 20);
}

/// Without `--served-model` any model name is served, as vLLM serves it with
/// `VLLM_SKIP_MODEL_NAME_VALIDATION` (vLLM's own example client sends its own, a Voxtral id);
/// with `--served-model` another name is refused, as vLLM 0.34's `session.update` refuses it
/// (`_check_model`, `model_not_found`).
#[test]
fn any_model_is_served_as_vllm_serves_it_unless_served_model_names_one() {
    let c = Counters::new();
    let mut out = Vec::new();
    let mut s = Session::new(behaviour(&[]), 0);
    let update = r#"{"type":"session.update","model":"mistralai/Voxtral-Mini-4B-Realtime-2602"}"#;
    s.on_text(update, 0.0, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    assert!(out.is_empty(), "{:?}", kinds(&mut out));
    let mut s = Session::new(behaviour(&["--served-model", "m"]), 0);
    s.on_text(update, 0.0, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error model_not_found"]);
}
