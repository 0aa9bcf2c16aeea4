//! The openai mock's responses, items and turns as the API makes them: the envelope of a
//! response, one response at a time, cancels, per-response modalities, the items' order, the
//! commits it refuses, the server VAD's `create_response` and `interrupt_response`, and what
//! the session echoes.

use super::*;
use serde_json::json;

/// A GA session without VAD, `deltas` per response, with `ms` of audio appended.
fn ga_session(deltas: &str, ms: usize) -> (Session, Counters, Vec<Utf8Bytes>) {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&["--response-deltas", deltas]), 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(GA_NO_VAD, 0.0, &c, &mut out);
    s.on_text(&append(&vec![0; ms * 48]), 0.0, &c, &mut out);
    out.clear();
    (s, c, out)
}

#[test]
fn a_response_streams_one_item_whose_ids_and_text_agree_from_start_to_done() {
    let (mut s, c, mut out) = ga_session("3", 200);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    let user_item = events(&mut out)[0]["item_id"].clone();
    s.on_text(r#"{"type":"response.create"}"#, 0.0, &c, &mut out);
    s.on_timer(10.0, &mut out);
    let all = events(&mut out);
    let id = all[0]["response"]["id"].clone();
    let item = all[1]["item"]["id"].clone();
    assert_eq!(all[1]["type"], "response.output_item.added");
    assert_eq!(
        all[2]["previous_item_id"], user_item,
        "the assistant item follows the user's"
    );
    let mut transcript = String::new();
    for e in &all[1..] {
        if e.get("response_id").is_some() {
            assert_eq!(e["response_id"], id, "{e}");
        }
        if e.get("item_id").is_some() {
            assert_eq!(e["item_id"], item, "{e}");
            assert_eq!(
                (e["output_index"].as_u64(), e["content_index"].as_u64()),
                (Some(0), Some(0))
            );
        }
        if e["type"] == "response.output_audio_transcript.delta" {
            transcript.push_str(e["delta"].as_str().unwrap());
        }
    }
    let done = |kind: &str| all.iter().find(|e| e["type"] == kind).unwrap().clone();
    assert_eq!(
        done("response.output_audio_transcript.done")["transcript"],
        transcript.as_str()
    );
    assert_eq!(
        done("response.content_part.done")["part"]["transcript"],
        transcript.as_str()
    );
    let finished = done("response.output_item.done")["item"].clone();
    assert_eq!(finished["status"], "completed");
    assert_eq!(finished["content"][0]["type"], "output_audio");
    assert_eq!(done("conversation.item.done")["item"], finished);
    let response = done("response.done")["response"].clone();
    assert_eq!(
        (response["status"].clone(), response["output"][0].clone()),
        (json!("completed"), finished)
    );
    assert_eq!(response["output_modalities"], json!(["audio"]));
}

#[test]
fn a_second_response_create_while_one_is_in_progress_is_refused() {
    let (mut s, c, mut out) = ga_session("2", 0);
    s.on_text(r#"{"type":"response.create"}"#, 0.0, &c, &mut out);
    s.on_text(
        r#"{"type":"response.create","event_id":"evt_2"}"#,
        0.0,
        &c,
        &mut out,
    );
    let all = events(&mut out);
    assert_eq!(
        all[1]["error"]["code"],
        "conversation_already_has_active_response"
    );
    assert_eq!(all[1]["error"]["event_id"], "evt_2");
    s.on_timer(10.0, &mut out);
    s.on_text(r#"{"type":"response.create"}"#, 10.0, &c, &mut out);
    assert_eq!(
        kinds(&mut out).last().unwrap(),
        "response.created",
        "once it is done"
    );
}

#[test]
fn a_cancel_ends_the_response_cancelled_by_the_client_and_a_cancel_of_none_is_refused() {
    let (mut s, c, mut out) = ga_session("3", 0);
    s.on_text(r#"{"type":"response.create"}"#, 0.0, &c, &mut out);
    s.on_timer(0.21, &mut out);
    out.clear();
    s.on_text(r#"{"type":"response.cancel"}"#, 0.22, &c, &mut out);
    let all = events(&mut out);
    let types: Vec<&str> = all.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done"
        ]
    );
    let response = &all[5]["response"];
    assert_eq!(response["status"], "cancelled");
    assert_eq!(
        response["status_details"],
        json!({"type": "cancelled", "reason": "client_cancelled"})
    );
    assert_eq!(response["output"][0]["status"], "incomplete");
    assert_eq!(s.next_wake_s(), None, "nothing more of it");
    s.on_text(r#"{"type":"response.cancel"}"#, 0.3, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error response_cancel_not_active"]);
}

#[test]
fn a_response_create_may_ask_for_other_modalities_than_the_session() {
    let (mut s, c, mut out) = ga_session("1", 0);
    s.on_text(
        r#"{"type":"response.create","response":{"output_modalities":["text"]}}"#,
        0.0,
        &c,
        &mut out,
    );
    s.on_timer(10.0, &mut out);
    let all = kinds(&mut out);
    assert!(
        all.contains(&"response.output_text.delta".to_string()),
        "{all:?}"
    );
    assert!(
        all.contains(&"response.output_text.done".to_string()),
        "{all:?}"
    );
    assert!(!all.iter().any(|k| k.contains("audio")), "{all:?}");
    // Beta's key is `modalities`.
    let mut s = Session::new(behaviour(&["--response-deltas", "1"]), 1, hello(true));
    s.on_text(
        r#"{"type":"response.create","response":{"modalities":["text"]}}"#,
        0.0,
        &c,
        &mut out,
    );
    s.on_timer(10.0, &mut out);
    assert!(kinds(&mut out).contains(&"response.text.done".to_string()));
}

#[test]
fn a_ga_item_create_is_added_then_done_and_a_beta_one_created() {
    let item = r#"{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#;
    let (mut s, c, mut out) = ga_session("1", 0);
    s.on_text(item, 0.0, &c, &mut out);
    assert_eq!(
        kinds(&mut out),
        ["conversation.item.added", "conversation.item.done"]
    );
    let mut s = Session::new(behaviour(&[]), 1, hello(true));
    s.on_text(item, 0.0, &c, &mut out);
    assert_eq!(kinds(&mut out), ["conversation.item.created"]);
}

#[test]
fn each_item_names_the_one_before_it_only_the_first_none() {
    let (mut s, c, mut out) = ga_session("1", 300);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    s.on_text(&append(&[0; 9600]), 0.0, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    let commits: Vec<Value> = events(&mut out)
        .into_iter()
        .filter(|e| e["type"] == "input_audio_buffer.committed")
        .collect();
    assert_eq!(commits[0]["previous_item_id"], Value::Null);
    assert_eq!(commits[1]["previous_item_id"], commits[0]["item_id"]);
}

#[test]
fn a_commit_of_less_than_100_ms_is_refused_as_too_small() {
    let (mut s, c, mut out) = ga_session("1", 50);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    let all = events(&mut out);
    assert_eq!(all[0]["error"]["code"], "input_audio_buffer_commit_empty");
    assert!(
        all[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("50.00ms"),
        "{}",
        all[0]
    );
    s.on_text(&append(&[0; 2400]), 0.0, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    assert_eq!(
        kinds(&mut out)[0],
        "input_audio_buffer.committed",
        "100 ms is enough"
    );
}

/// 24 kHz: 0.5 s loud, then 0.6 s quiet: one turn of the server's VAD.
fn one_turn(s: &mut Session, at_s: f64, c: &Counters, out: &mut Vec<Utf8Bytes>) {
    let loud: Vec<u8> = (0..12_000)
        .flat_map(|i| if i % 2 == 0 { 3000i16 } else { -3000 }.to_le_bytes())
        .collect();
    s.on_text(&append(&loud), at_s, c, out);
    s.on_text(&append(&vec![0; 28_800]), at_s, c, out);
}

fn ga_vad(turn_detection: &str) -> String {
    format!(
        r#"{{"type":"session.update","session":{{"type":"realtime","audio":{{"input":{{"turn_detection":{turn_detection}}}}}}}}}"#
    )
}

#[test]
fn a_turn_is_committed_but_not_answered_when_create_response_is_false() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&[]), 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(
        &ga_vad(r#"{"type":"server_vad","create_response":false}"#),
        0.0,
        &c,
        &mut out,
    );
    out.clear();
    one_turn(&mut s, 0.0, &c, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "input_audio_buffer.speech_started",
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done"
        ]
    );
    assert_eq!(s.next_wake_s(), None);
}

#[test]
fn a_new_turn_cancels_the_response_in_progress_when_interrupt_response_is_asked() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&[]), 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(
        &ga_vad(r#"{"type":"server_vad","interrupt_response":true}"#),
        0.0,
        &c,
        &mut out,
    );
    one_turn(&mut s, 0.0, &c, &mut out);
    out.clear();
    one_turn(&mut s, 0.05, &c, &mut out);
    let all = events(&mut out);
    assert_eq!(all[0]["type"], "input_audio_buffer.speech_started");
    assert_eq!(
        all[1]["type"], "response.done",
        "not opened yet: no item to end"
    );
    assert_eq!(
        all[1]["response"]["status_details"]["reason"],
        "turn_detected"
    );
    // Without it (the mock's default), the turns queue and every one is answered.
    let mut s = Session::new(behaviour(&[]), 1, hello(false));
    one_turn(&mut s, 0.0, &c, &mut out);
    one_turn(&mut s, 0.05, &c, &mut out);
    s.on_timer(100.0, &mut out);
    let done = kinds(&mut out)
        .iter()
        .filter(|k| *k == "response.done")
        .count();
    assert_eq!(done, 2);
}

#[test]
fn session_model_is_the_one_the_client_connected_with() {
    let c = Counters::new();
    let mut out = Vec::new();
    let model = Some("gpt-realtime".to_string());
    let mut s = Session::new(
        behaviour(&[]),
        0,
        Hello {
            model,
            ..Hello::default()
        },
    );
    s.greet(0.0, &mut out);
    assert_eq!(first_session(&mut out)["model"], "gpt-realtime");
    let mut s = Session::new(behaviour(&[]), 1, hello(true));
    s.greet(0.0, &mut out);
    assert_eq!(first_session(&mut out)["model"], "duplexbench-mock");
    s.on_text(
        r#"{"type":"session.update","session":{"instructions":"Be brief.","voice":"alloy","turn_detection":null}}"#,
        0.0,
        &c,
        &mut out,
    );
    let echoed = first_session(&mut out);
    assert_eq!(
        (echoed["instructions"].clone(), echoed["voice"].clone()),
        (json!("Be brief."), json!("alloy"))
    );
}

#[test]
fn a_beta_transcription_session_update_is_answered_with_a_whole_session() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&[]), 0, hello(true)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(
        r#"{"type":"transcription_session.update","session":{"input_audio_transcription":{"model":"whisper-1"}}}"#,
        0.0,
        &c,
        &mut out,
    );
    let session = first_session(&mut out);
    assert!(session["client_secret"]["value"].is_string(), "{session}");
    assert_eq!(session["input_audio_transcription"]["model"], "whisper-1");
    assert_eq!(session["input_audio_format"], "pcm16");
}

#[test]
fn fields_openai_node_types_without_null_are_left_out_rather_than_null() {
    let (mut s, c, mut out) = ga_session("1", 200);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.0, &c, &mut out);
    s.on_text(r#"{"type":"response.create"}"#, 0.0, &c, &mut out);
    s.on_timer(10.0, &mut out);
    // committed's previous_item_id is `string | null` to openai-node too, and null here.
    for e in events(&mut out).iter().skip(1) {
        assert!(!e.to_string().contains("null"), "{e}");
    }
}

/// A response queued behind the one in progress (two VAD turns close together) starts when
/// that one is done: its first delta `first_delta_s` after it, the rest at the delta interval,
/// as the first's. Timed from their creation, the queued response's deltas came in a burst to
/// catch up (39.8 a second where the mock streams 25).
#[test]
fn a_queued_response_streams_at_the_pace_of_the_first_from_when_the_first_is_done() {
    let c = Counters::new();
    let mut out = Vec::new();
    let mut s = Session::new(behaviour(&["--response-deltas", "5"]), 0, hello(false));
    // Queued, not cancelled: the API's default interrupts.
    let update = ga_vad(r#"{"type":"server_vad","interrupt_response":false}"#);
    s.on_text(&update, 0.0, &c, &mut out);
    one_turn(&mut s, 0.0, &c, &mut out);
    one_turn(&mut s, 0.05, &c, &mut out);
    out.clear();
    let (first_delta_s, interval_s) = (s.behaviour.first_delta_s, s.behaviour.delta_interval_s);
    // Every event with the time it was sent, as the server's clock runs.
    let mut timed = Vec::new();
    while let Some(at_s) = s.next_wake_s() {
        s.on_timer(at_s, &mut out);
        timed.extend(events(&mut out).into_iter().map(|e| (at_s, e)));
    }
    let at = |kind: &str| -> Vec<f64> {
        timed
            .iter()
            .filter(|(_, e)| e["type"] == kind)
            .map(|(t, _)| *t)
            .collect()
    };
    let done = at("response.done");
    let deltas = at("response.output_audio_transcript.delta");
    assert_eq!((done.len(), deltas.len()), (2, 10));
    let second = &deltas[5..];
    assert!(
        (second[0] - (done[0] + first_delta_s)).abs() < 1e-9,
        "first delta {} after the first response's done {}",
        second[0],
        done[0]
    );
    for pair in second.windows(2) {
        assert!((pair[1] - pair[0] - interval_s).abs() < 1e-9, "{second:?}");
    }
}

/// openai-python's push-to-talk example asks for `server_vad` alone: the API's default
/// `interrupt_response` is true, so a new turn cancels the response in progress. The mock took
/// it as false and queued.
#[test]
fn server_vad_alone_interrupts_as_the_apis_default() {
    let c = Counters::new();
    let mut out = Vec::new();
    let mut s = Session::new(behaviour(&["--response-deltas", "5"]), 0, hello(false));
    s.on_text(&ga_vad(r#"{"type":"server_vad"}"#), 0.0, &c, &mut out);
    let updated = events(&mut out);
    let shown = updated
        .iter()
        .find(|e| e["type"] == "session.updated")
        .map(|e| e["session"]["audio"]["input"]["turn_detection"]["interrupt_response"].clone());
    assert_eq!(shown, Some(serde_json::json!(true)), "{updated:?}");
    one_turn(&mut s, 0.0, &c, &mut out);
    one_turn(&mut s, 0.05, &c, &mut out);
    let cancelled = events(&mut out).into_iter().any(|e| {
        e["type"] == "response.done" && e["response"]["status_details"]["reason"] == "turn_detected"
    });
    assert!(cancelled);
}
