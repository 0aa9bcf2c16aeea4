//! The openai mock session on hand-made client frames.

use super::*;

fn behaviour(extra: &[&str]) -> Rc<Behaviour> {
    Behaviour::of_mock_flags("openai", extra)
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

fn hello(beta: bool) -> Hello {
    Hello {
        beta,
        ..Hello::default()
    }
}

/// A connection that asked for a transcription session (`?intent=transcription`).
fn transcriber() -> Hello {
    Hello {
        transcription: true,
        ..Hello::default()
    }
}

/// The frames of `out`, drained, as JSON.
fn events(out: &mut Vec<Utf8Bytes>) -> Vec<Value> {
    out.drain(..)
        .map(|f| serde_json::from_str(f.as_str()).unwrap())
        .collect()
}

fn append(pcm: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(pcm);
    format!(r#"{{"type":"input_audio_buffer.append","audio":"{b64}"}}"#)
}

const GA_NO_VAD: &str = r#"{"type":"session.update","session":{"type":"realtime","output_modalities":["audio"],"audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"turn_detection":null}}}}"#;
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
    let (mut s, c, mut out) = (
        Session::new(b, 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.greet(0.0, &mut out);
    s.on_text(GA_NO_VAD, 0.0, &c, &mut out);
    assert_eq!(kinds(&mut out), ["session.created", "session.updated"]);
    s.on_text(&append(&[0; 4800]), 0.0, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.1, &c, &mut out);
    s.on_text(r#"{"type":"response.create"}"#, 0.1, &c, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done",
            "response.created"
        ]
    );
    assert!((s.next_wake_s().unwrap() - 0.3).abs() < 1e-9);
    s.on_timer(0.31, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
            "response.output_audio.delta",
            "response.output_audio_transcript.delta"
        ]
    );
    s.on_timer(0.35, &mut out);
    // The API's usage always has its token details (livekit-agents reads its token metrics
    // from them; they were missing).
    let done: Value = serde_json::from_str(out.last().unwrap().as_str()).unwrap();
    let usage = &done["response"]["usage"];
    assert_eq!(
        usage["output_token_details"]["audio_tokens"],
        usage["output_tokens"]
    );
    assert_eq!(usage["output_token_details"]["text_tokens"], 0);
    assert_eq!(usage["input_token_details"]["cached_tokens"], 0);
    assert_eq!(
        usage["input_token_details"]["cached_tokens_details"]["audio_tokens"],
        0
    );
    assert_eq!(
        kinds(&mut out),
        [
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
    assert_eq!(s.next_wake_s(), None);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.5, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error input_audio_buffer_commit_empty"]);
}

#[test]
fn server_vad_turns_speech_into_a_response_in_beta_names_issue_12() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&["--response-deltas", "1"]), 0, hello(true)),
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
            "response.output_item.added",
            "conversation.item.created",
            "response.content_part.added",
            "response.audio.delta",
            "response.audio_transcript.delta",
            "response.audio.done",
            "response.audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.done"
        ]
    );
}

#[test]
fn the_openai_mock_answers_its_error_cases_issue_12() {
    let (mut s, c, mut out) = (
        Session::new(
            behaviour(&["--mock-error", "server_error"]),
            0,
            hello(false),
        ),
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

/// The session of the first `session.*` event in `out`, which is drained.
fn first_session(out: &mut Vec<Utf8Bytes>) -> Value {
    let v: Value = serde_json::from_str(out.drain(..).next().unwrap().as_str()).unwrap();
    v["session"].clone()
}

#[test]
fn the_naming_is_the_connections_header_not_the_updates_shape_issue_12() {
    let c = Counters::new();
    let mut out = Vec::new();
    // A beta connection whose update names nothing of either shape stays beta: its deltas
    // are beta's, and a top-level `turn_detection: null` turns its VAD off.
    let mut s = Session::new(behaviour(&["--response-deltas", "1"]), 0, hello(true));
    s.greet(0.0, &mut out);
    assert!(first_session(&mut out).get("type").is_none());
    s.on_text(
        r#"{"type":"session.update","session":{"voice":"alloy","turn_detection":null}}"#,
        0.0,
        &c,
        &mut out,
    );
    let granted = first_session(&mut out);
    assert_eq!(granted["turn_detection"], Value::Null, "{granted}");
    let loud: Vec<u8> = (0..24_000)
        .flat_map(|i| if i % 2 == 0 { 3000i16 } else { -3000 }.to_le_bytes())
        .collect();
    s.on_text(&append(&loud), 0.0, &c, &mut out);
    s.on_text(&append(&vec![0; 48_000]), 1.0, &c, &mut out);
    assert!(out.is_empty(), "no VAD, no turn: {:?}", kinds(&mut out));
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 2.0, &c, &mut out);
    s.on_text(r#"{"type":"response.create"}"#, 2.0, &c, &mut out);
    out.clear();
    s.on_timer(10.0, &mut out);
    assert_eq!(kinds(&mut out)[3], "response.audio.delta");
    // A GA connection (no header) refuses a beta-shaped update as the API does, and its
    // session.created says `type: realtime`.
    let mut s = Session::new(behaviour(&[]), 1, hello(false));
    s.greet(0.0, &mut out);
    assert_eq!(first_session(&mut out)["type"], "realtime");
    s.on_text(BETA_VAD, 0.0, &c, &mut out);
    let v: Value = serde_json::from_str(out[0].as_str()).unwrap();
    assert_eq!(v["error"]["code"], "unknown_parameter", "{v}");
    assert_eq!(v["error"]["param"], "session.input_audio_format", "{v}");
}

#[test]
fn a_ga_update_at_16_khz_is_refused_with_the_apis_error_issue_12() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&[]), 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(
        &GA_NO_VAD.replace("24000", "16000").replace(
            r#""type":"session.update""#,
            r#""type":"session.update","event_id":"evt_1""#,
        ),
        0.0,
        &c,
        &mut out,
    );
    let v: Value = serde_json::from_str(out[0].as_str()).unwrap();
    assert_eq!(
        v["error"],
        serde_json::json!({"type": "invalid_request_error", "code": "invalid_value",
            "message": "Invalid value: 16000. Supported values are: 24000.",
            "param": "session.audio.input.format.rate", "event_id": "evt_1"})
    );
    assert_eq!(out.len(), 1, "no session.updated");
}

#[test]
fn every_client_event_of_the_api_is_taken_none_is_unknown_issue_12() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&["--response-deltas", "1"]), 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(GA_NO_VAD, 0.0, &c, &mut out);
    s.on_text(&append(&[0; 4800]), 0.0, &c, &mut out);
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.1, &c, &mut out);
    s.on_text(r#"{"type":"response.create"}"#, 0.1, &c, &mut out);
    out.clear();
    for event in [
        r#"{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
        r#"{"type":"conversation.item.truncate","item_id":"item_9","content_index":0,"audio_end_ms":150}"#,
        r#"{"type":"conversation.item.delete","item_id":"item_9"}"#,
        r#"{"type":"conversation.item.retrieve","item_id":"item_9"}"#,
        r#"{"type":"output_audio_buffer.clear"}"#,
        r#"{"type":"input_audio_buffer.clear"}"#,
        r#"{"type":"response.cancel"}"#,
    ] {
        s.on_text(event, 0.2, &c, &mut out);
    }
    assert_eq!(
        kinds(&mut out),
        [
            "conversation.item.added",
            "conversation.item.done",
            "conversation.item.truncated",
            "conversation.item.deleted",
            "conversation.item.retrieved",
            "output_audio_buffer.cleared",
            "input_audio_buffer.cleared",
            "response.done"
        ]
    );
    s.on_text(r#"{"type":"conversation.item.delete"}"#, 0.3, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error missing_required_parameter"]);
}

#[test]
fn only_the_realtime_subprotocol_is_echoed_never_the_key_issue_12() {
    use handshake::asks_for_beta;
    use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;
    use tokio_tungstenite::tungstenite::http::{HeaderMap, HeaderValue};
    let mut headers = HeaderMap::new();
    headers.insert(
        SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static("realtime, openai-insecure-api-key.sk-123"),
    );
    assert_eq!(subprotocol(&headers).unwrap(), "realtime");
    headers.insert(
        SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static("openai-insecure-api-key.sk-123"),
    );
    assert_eq!(subprotocol(&headers), None);
    assert!(!asks_for_beta(&headers));
    headers.insert("openai-beta", HeaderValue::from_static("realtime=v1"));
    assert!(asks_for_beta(&headers));
}

mod responses;

/// A GA session without turn detection, set up and its replies taken, whose responses are
/// `deltas` deltas, the first 100 ms after their creation.
fn ga_session_without_vad(deltas: u32) -> (Session, Counters, Vec<Utf8Bytes>) {
    let deltas = deltas.to_string();
    let b = behaviour(&["--response-deltas", &deltas, "--first-delta-ms", "100"]);
    let (mut s, c, mut out) = (
        Session::new(b, 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(GA_NO_VAD, 0.0, &c, &mut out);
    out.clear();
    (s, c, out)
}

/// An out-of-band response (`conversation: "none"`) is taken beside the conversation's (the
/// API allows several), joins no conversation (no `conversation.item.*`, `conversation_id`
/// null), echoes its `metadata`, and a turn's barge-in leaves it alone.
#[test]
fn an_out_of_band_response_stays_out_of_the_conversation() {
    let (mut s, c, mut out) = ga_session_without_vad(1);
    s.on_text(r#"{"type":"response.create"}"#, 0.0, &c, &mut out);
    let oob = r#"{"type":"response.create","response":{"conversation":"none","metadata":{"topic":"classify"},"output_modalities":["text"]}}"#;
    s.on_text(oob, 0.0, &c, &mut out);
    let created = events(&mut out);
    assert_eq!(created.len(), 2, "{created:?}");
    assert_eq!(created[0]["response"].get("conversation_id"), None);
    let r = &created[1]["response"];
    assert_eq!(r["conversation_id"], Value::Null);
    assert_eq!(r["metadata"], serde_json::json!({"topic": "classify"}));
    // A second response of the conversation is still refused while its first is under way.
    s.on_text(r#"{"type":"response.create"}"#, 0.0, &c, &mut out);
    assert_eq!(
        kinds(&mut out),
        ["error conversation_already_has_active_response"]
    );
    s.on_timer(10.0, &mut out);
    let streamed = events(&mut out);
    let of = |id: &Value| {
        streamed
            .iter()
            .filter(|e| e["response_id"] == *id || e["response"]["id"] == *id)
            .map(|e| e["type"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let oob_events = of(&r["id"]);
    assert_eq!(
        oob_events,
        [
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.done"
        ]
    );
    let items: Vec<&Value> = streamed
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("conversation.item"))
        .collect();
    assert_eq!(
        items.len(),
        2,
        "the conversation's response only: {items:?}"
    );
    let oob_item = streamed
        .iter()
        .find(|e| e["type"] == "response.output_item.added" && e["response_id"] == r["id"])
        .map(|e| e["item"]["id"].clone())
        .unwrap();
    assert!(
        items.iter().all(|e| e["item"]["id"] != oob_item),
        "{items:?}"
    );
    let done = streamed
        .iter()
        .rfind(|e| e["type"] == "response.done")
        .unwrap();
    assert_eq!(done["response"]["metadata"]["topic"], "classify");
    assert_eq!(done["response"]["conversation_id"], Value::Null);
    // With only an out-of-band response under way, the conversation's may start.
    s.on_text(oob, 20.0, &c, &mut out);
    s.on_text(r#"{"type":"response.create"}"#, 20.0, &c, &mut out);
    assert_eq!(kinds(&mut out), ["response.created", "response.created"]);
}

/// `response.cancel` without an id cancels the conversation's response, never an out-of-band
/// one (those by their id), as the API.
#[test]
fn a_cancel_without_an_id_leaves_out_of_band_responses_alone() {
    let (mut s, c, mut out) = ga_session_without_vad(3);
    let oob = r#"{"type":"response.create","response":{"conversation":"none"}}"#;
    s.on_text(oob, 0.0, &c, &mut out);
    s.on_text(r#"{"type":"response.create"}"#, 0.0, &c, &mut out);
    let created = events(&mut out);
    let (oob_id, conv_id) = (
        created[0]["response"]["id"].clone(),
        created[1]["response"]["id"].clone(),
    );
    // The out-of-band one is under way; the cancel ends the conversation's, queued behind it.
    s.on_timer(0.15, &mut out);
    out.clear();
    s.on_text(r#"{"type":"response.cancel"}"#, 0.2, &c, &mut out);
    let done = events(&mut out);
    let done = done.iter().find(|e| e["type"] == "response.done").unwrap();
    assert_eq!(done["response"]["id"], conv_id);
    assert_eq!(done["response"]["status"], "cancelled");
    // With only the out-of-band one left, a cancel without an id has nothing to cancel...
    s.on_text(r#"{"type":"response.cancel"}"#, 0.2, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error response_cancel_not_active"]);
    // ...and one naming it cancels it.
    let by_id = format!(r#"{{"type":"response.cancel","response_id":{oob_id}}}"#);
    s.on_text(&by_id, 0.2, &c, &mut out);
    let done = events(&mut out);
    let done = done.iter().find(|e| e["type"] == "response.done").unwrap();
    assert_eq!(done["response"]["id"], oob_id);
}

/// A session that asks for input transcription gets it for each committed item, as the API
/// sends it (openai-python's `ConversationItemInputAudioTranscription{Delta,Completed}Event`):
/// deltas, then `completed` with the whole transcript and a `usage` of the model's billing
/// (GA's default model by tokens, beta's whisper-1 by duration); without one asked, none.
#[test]
fn a_committed_item_is_transcribed_when_the_session_asked_for_it() {
    // A session of that naming after `update`, given `bytes` of audio and committed: its events.
    let commit_after = |is_beta: bool, update: &str, bytes: usize| {
        let (mut s, c, mut out) = (
            Session::new(behaviour(&[]), 0, hello(is_beta)),
            Counters::new(),
            Vec::new(),
        );
        s.greet(0.0, &mut out);
        s.on_text(update, 0.0, &c, &mut out);
        out.clear();
        s.on_text(&append(&vec![0; bytes]), 0.0, &c, &mut out);
        s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.1, &c, &mut out);
        events(&mut out)
    };
    let ga = r#"{"type":"session.update","session":{"type":"realtime","audio":{"input":{"turn_detection":null,"transcription":{"language":"en"}}}}}"#;
    let beta = r#"{"type":"session.update","session":{"turn_detection":null,"input_audio_transcription":{"model":"whisper-1"}}}"#;
    for (is_beta, update, usage) in [(false, ga, "tokens"), (true, beta, "duration")] {
        // 2.5 s of audio: 2 words (halves to even, as Fun-ASR's stand-in).
        let got = commit_after(is_beta, update, 120_000);
        let item = got[0]["item_id"].as_str().unwrap();
        let transcribed: Vec<&Value> = got
            .iter()
            .filter(|e| {
                e["type"]
                    .as_str()
                    .unwrap()
                    .starts_with("conversation.item.input_audio_transcription.")
            })
            .collect();
        let [d0, d1, done] = transcribed.as_slice() else {
            panic!("{got:?}")
        };
        assert_eq!(d0["delta"], "alpha");
        assert_eq!(d1["delta"], " bravo");
        assert!(transcribed.iter().all(|e| e["item_id"] == item));
        assert!(transcribed.iter().all(|e| e["content_index"] == 0));
        assert_eq!(
            done["type"],
            "conversation.item.input_audio_transcription.completed"
        );
        assert_eq!(done["transcript"], "alpha bravo");
        assert_eq!(done["usage"]["type"], usage, "beta {is_beta}");
    }
    // Not asked: no transcription.
    let got = commit_after(false, GA_NO_VAD, 48_000);
    assert!(!got
        .iter()
        .any(|e| e["type"].as_str().unwrap().contains("transcription")));
}

/// A transcription session (`?intent=transcription`) as openai-python types it: its
/// `session.created` of type `transcription`, no response for a commit but the item's
/// transcript on the deltas' clock, a `response.create` refused.
#[test]
fn a_transcription_session_transcribes_each_commit_on_the_clock_and_creates_no_response() {
    let b = behaviour(&["--first-delta-ms", "200", "--delta-interval-ms", "40"]);
    let (mut s, c, mut out) = (
        Session::new(b, 0, transcriber()),
        Counters::new(),
        Vec::new(),
    );
    s.greet(0.0, &mut out);
    let created = events(&mut out);
    assert_eq!(created[0]["type"], "session.created");
    let session = &created[0]["session"];
    assert_eq!(session["type"], "transcription");
    assert_eq!(session["object"], "realtime.transcription_session");
    // Off until asked for, as the API's.
    assert_eq!(session["audio"]["input"]["transcription"], Value::Null);
    assert!(session.get("output_modalities").is_none());
    // A conversation's key is unknown in it.
    let refused = r#"{"type":"session.update","session":{"type":"transcription","output_modalities":["text"]}}"#;
    s.on_text(refused, 0.0, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error unknown_parameter"]);
    let update = r#"{"type":"session.update","session":{"type":"transcription","audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"transcription":{"model":"whisper-1","language":"en"},"turn_detection":null}}}}"#;
    s.on_text(update, 0.0, &c, &mut out);
    let updated = events(&mut out);
    let input = &updated[0]["session"]["audio"]["input"];
    assert_eq!(updated[0]["type"], "session.updated");
    assert_eq!(input["transcription"]["model"], "whisper-1");
    assert_eq!(input["transcription"]["language"], "en");
    assert_eq!(input["turn_detection"], Value::Null);
    // 2.4 s of audio, committed at 2.4 s: two words, the first 200 ms later.
    for k in 0..30 {
        s.on_text(&append(&[0u8; 3840]), f64::from(k) * 0.08, &c, &mut out);
    }
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 2.4, &c, &mut out);
    assert_eq!(
        kinds(&mut out),
        [
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done"
        ]
    );
    let first_s = s.next_wake_s().unwrap();
    assert!((first_s - 2.6).abs() < 1e-9, "{first_s}");
    s.on_timer(first_s, &mut out);
    let first = events(&mut out);
    assert_eq!(first.len(), 1);
    assert_eq!(
        first[0]["type"],
        "conversation.item.input_audio_transcription.delta"
    );
    assert_eq!(first[0]["item_id"], "item_0");
    let second_s = s.next_wake_s().unwrap();
    assert!((second_s - 2.64).abs() < 1e-9, "{second_s}");
    s.on_timer(second_s, &mut out);
    let rest = events(&mut out);
    let rest_kinds: Vec<&str> = rest.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        rest_kinds,
        [
            "conversation.item.input_audio_transcription.delta",
            "conversation.item.input_audio_transcription.completed"
        ]
    );
    let completed = &rest[1];
    assert_eq!(completed["item_id"], "item_0");
    assert_eq!(
        completed["transcript"].as_str().unwrap().split(' ').count(),
        2
    );
    assert_eq!(completed["usage"]["type"], "duration");
    assert_eq!(s.next_wake_s(), None);
    s.on_text(
        r#"{"type":"response.create","event_id":"e1"}"#,
        3.0,
        &c,
        &mut out,
    );
    let refused = events(&mut out);
    assert_eq!(refused[0]["error"]["code"], "invalid_value");
    assert_eq!(refused[0]["error"]["event_id"], "e1");
}

/// A realtime connection may become a transcription session by its `session.update`
/// (openai-python's `SessionUpdateEvent`: "Choose either a realtime session or a transcription
/// session") before it has sent audio; after, its type stays.
#[test]
fn a_session_changes_its_type_only_before_audio_arrives() {
    let to_transcription = r#"{"type":"session.update","session":{"type":"transcription"}}"#;
    let (mut s, c, mut out) = (
        Session::new(behaviour(&[]), 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(to_transcription, 0.0, &c, &mut out);
    let updated = events(&mut out);
    assert_eq!(updated[0]["session"]["type"], "transcription");
    let (mut s, c, mut out) = (
        Session::new(behaviour(&[]), 0, hello(false)),
        Counters::new(),
        Vec::new(),
    );
    s.on_text(&append(&[0u8; 3840]), 0.0, &c, &mut out);
    out.clear();
    s.on_text(to_transcription, 0.1, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error invalid_value"]);
}

/// A transcription session that named no transcription gets none, as the API's (its
/// `audio.input.transcription` "defaults to off"): a client that forgot the model must not
/// pass against the mock and fail against the API.
#[test]
fn a_transcription_session_without_a_transcription_asked_for_transcribes_nothing() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&[]), 0, transcriber()),
        Counters::new(),
        Vec::new(),
    );
    let update = r#"{"type":"session.update","session":{"type":"transcription","audio":{"input":{"turn_detection":null}}}}"#;
    s.on_text(update, 0.0, &c, &mut out);
    for k in 0..5 {
        s.on_text(&append(&[0u8; 3840]), f64::from(k) * 0.08, &c, &mut out);
    }
    out.clear();
    s.on_text(r#"{"type":"input_audio_buffer.commit"}"#, 0.4, &c, &mut out);
    assert_eq!(kinds(&mut out)[0], "input_audio_buffer.committed");
    assert_eq!(s.next_wake_s(), None);
}

/// What a transcription session's update may say, as openai-python types it: `include` lists
/// logprobs only (and then every transcript event carries them), `audio.input` its four keys;
/// a VAD of another type replaces the one before it, and a transcription session's VAD shows no
/// response flags.
#[test]
fn a_transcription_sessions_update_is_checked_and_shown_as_the_sdk_types_it() {
    let b = behaviour(&["--first-delta-ms", "10", "--delta-interval-ms", "10"]);
    let (mut s, c, mut out) = (
        Session::new(b, 0, transcriber()),
        Counters::new(),
        Vec::new(),
    );
    for (update, code) in [
        (
            r#"{"type":"session.update","session":{"type":"transcription","include":["bogus"]}}"#,
            "error invalid_value",
        ),
        (
            r#"{"type":"session.update","session":{"type":"transcription","audio":{"input":{"foo":1}}}}"#,
            "error unknown_parameter",
        ),
    ] {
        s.on_text(update, 0.0, &c, &mut out);
        assert_eq!(kinds(&mut out), [code], "{update}");
    }
    let server_vad = r#"{"type":"session.update","session":{"type":"transcription","audio":{"input":{"turn_detection":{"type":"server_vad","idle_timeout_ms":5000,"create_response":true}}}}}"#;
    s.on_text(server_vad, 0.0, &c, &mut out);
    let shown = events(&mut out)[0]["session"]["audio"]["input"]["turn_detection"].clone();
    assert_eq!(shown["idle_timeout_ms"], 5000);
    assert!(shown.get("create_response").is_none(), "{shown}");
    let semantic = r#"{"type":"session.update","session":{"type":"transcription","include":["item.input_audio_transcription.logprobs"],"audio":{"input":{"transcription":{"model":"gpt-4o-transcribe"},"turn_detection":{"type":"semantic_vad"}}}}}"#;
    s.on_text(semantic, 0.0, &c, &mut out);
    let shown = events(&mut out)[0]["session"]["audio"]["input"]["turn_detection"].clone();
    assert_eq!(shown["type"], "semantic_vad");
    assert!(shown.get("idle_timeout_ms").is_none(), "{shown}");
    let manual = r#"{"type":"session.update","session":{"type":"transcription","audio":{"input":{"turn_detection":null}}}}"#;
    s.on_text(manual, 0.0, &c, &mut out);
    out.clear();
    for k in 0..13 {
        s.on_text(&append(&[0u8; 3840]), f64::from(k) * 0.08, &c, &mut out);
    }
    s.on_text(
        r#"{"type":"input_audio_buffer.commit"}"#,
        1.04,
        &c,
        &mut out,
    );
    out.clear();
    s.on_timer(2.0, &mut out);
    let transcript = events(&mut out);
    let delta = &transcript[0];
    assert_eq!(delta["logprobs"][0]["token"], delta["delta"]);
    assert!(delta["logprobs"][0]["bytes"].is_array());
    let completed = transcript.last().unwrap();
    assert_eq!(
        completed["type"],
        "conversation.item.input_audio_transcription.completed"
    );
    assert_eq!(completed["logprobs"].as_array().unwrap().len(), 1);
}

/// gpt-realtime-whisper takes no VAD (openai-python: "turn detection must be set to null"):
/// a transcription session of it that says nothing of turn detection has none (livekit's
/// client sends none for it: the mock's VAD committed beside its client's commits), and one
/// that asks for a VAD is refused.
#[test]
fn a_gpt_realtime_whisper_transcription_session_has_no_vad() {
    let (mut s, c, mut out) = (
        Session::new(behaviour(&[]), 0, transcriber()),
        Counters::new(),
        Vec::new(),
    );
    let vad = r#"{"type":"session.update","session":{"type":"transcription","audio":{"input":{"transcription":{"model":"gpt-realtime-whisper"},"turn_detection":{"type":"server_vad"}}}}}"#;
    s.on_text(vad, 0.0, &c, &mut out);
    assert_eq!(kinds(&mut out), ["error invalid_value"]);
    let silent = r#"{"type":"session.update","session":{"type":"transcription","audio":{"input":{"transcription":{"model":"gpt-realtime-whisper"}}}}}"#;
    s.on_text(silent, 0.0, &c, &mut out);
    let updated = events(&mut out);
    assert_eq!(
        updated[0]["session"]["audio"]["input"]["turn_detection"],
        Value::Null
    );
    // Speech makes no turn of its own.
    let tone: Vec<u8> = (0..1920)
        .flat_map(|k: i32| (((k % 48) - 24) * 1000).to_le_bytes()[..2].to_vec())
        .collect();
    for k in 0..25 {
        s.on_text(&append(&tone), f64::from(k) * 0.08, &c, &mut out);
    }
    assert!(kinds(&mut out).is_empty());
    // Another model's session hears it.
    let mut s = Session::new(behaviour(&[]), 0, transcriber());
    for k in 0..25 {
        s.on_text(&append(&tone), f64::from(k) * 0.08, &c, &mut out);
    }
    assert!(kinds(&mut out).contains(&"input_audio_buffer.speech_started".to_string()));
}
