//! The OpenAI dialect on hand-made frames: both namings read, the asked one sent exactly.

use super::*;

fn meaning(text: &str) -> Meaning<'_> {
    classify(text).unwrap().meaning
}

fn client(version: ApiVersion, turn_detection: TurnDetection, every: Option<u64>) -> Openai {
    Openai {
        version,
        transcription: false,
        turn_detection,
        commit_every_ms: every,
        packet_ms: 80,
        session: session_object(
            version,
            Some("m"),
            &["audio".to_string()],
            16_000,
            turn_detection,
            false,
        ),
    }
}

const IDS: EventIds = EventIds {
    shard: 0,
    worker: 0,
    session: 1,
};

#[test]
fn deltas_are_read_in_ga_and_beta_names_issue_12() {
    for kind in ["response.output_audio.delta", "response.audio.delta"] {
        let text = format!(r#"{{"type":"{kind}","delta":"AAAA"}}"#);
        let r = classify(&text).unwrap();
        assert_eq!(r.meaning, Meaning::AudioDelta, "{kind}");
        assert_eq!(
            r.payload,
            Payload::Json {
                audio_key: Some("delta")
            }
        );
    }
    for kind in [
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",
        "response.output_text.delta",
        "response.text.delta",
    ] {
        let text = format!(r#"{{"type":"{kind}","delta":"hi"}}"#);
        assert_eq!(meaning(&text), Meaning::TextDelta, "{kind}");
    }
    for kind in ["response.output_audio.done", "response.audio.done"] {
        assert_eq!(meaning(&format!(r#"{{"type":"{kind}"}}"#)), Meaning::Other);
    }
}

#[test]
fn vllm_omni_audio_is_in_audio_beside_sample_rate_hz_issue_12() {
    let r = classify(r#"{"type":"response.audio.delta","audio":"AAAA","sample_rate_hz":24000}"#)
        .unwrap();
    assert_eq!(r.meaning, Meaning::AudioDelta);
    assert_eq!(
        r.payload,
        Payload::Json {
            audio_key: Some("audio")
        }
    );
}

#[test]
fn vad_commit_and_response_events_have_their_meanings_issue_12() {
    assert_eq!(
        meaning(
            r#"{"type":"input_audio_buffer.speech_started","audio_start_ms":1200,"item_id":"i"}"#
        ),
        Meaning::SpeechStarted {
            audio_ms: Some(1200.0)
        }
    );
    assert_eq!(
        meaning(r#"{"type":"input_audio_buffer.speech_stopped","audio_end_ms":2480.0}"#),
        Meaning::SpeechStopped {
            audio_ms: Some(2480.0)
        }
    );
    assert_eq!(
        meaning(r#"{"type":"input_audio_buffer.committed","item_id":"i"}"#),
        Meaning::Milestone(Milestone::Committed)
    );
    assert_eq!(
        meaning(r#"{"type":"response.done","response":{"status":"completed"}}"#),
        Meaning::TurnDone {
            completed: true,
            failure: None
        }
    );
    assert_eq!(
        meaning(r#"{"type":"response.done","response":{"status":"failed","status_details":{}}}"#),
        Meaning::TurnDone {
            completed: false,
            failure: Some(("null".into(), "response.done with status failed".into()))
        }
    );
    // A rate limit ends a response so (status_details.error's code and message).
    assert_eq!(
        meaning(
            r#"{"type":"response.done","response":{"status":"failed","status_details":{"type":"failed","error":{"type":"requests","code":"rate_limit_exceeded","message":"Rate limit reached"}}}}"#
        ),
        Meaning::TurnDone {
            completed: false,
            failure: Some(("rate_limit_exceeded".into(), "Rate limit reached".into()))
        }
    );
    // Cut short on purpose: not completed, not a failure.
    for status in ["cancelled", "incomplete"] {
        let done = format!(
            r#"{{"type":"response.done","response":{{"status":"{status}","status_details":{{"type":"{status}","reason":"turn_detected"}}}}}}"#
        );
        assert_eq!(
            meaning(&done),
            Meaning::TurnDone {
                completed: false,
                failure: None
            },
            "{status}"
        );
    }
    assert_eq!(
        meaning(r#"{"type":"session.updated","session":{}}"#),
        Meaning::Milestone(Milestone::Ready)
    );
    assert_eq!(meaning(r#"{"type":"rate_limits.updated"}"#), Meaning::Other);
}

#[test]
fn errors_keep_type_code_message_and_leave_the_session_open_issue_12() {
    let text = r#"{"type":"error","event_id":"e","error":{"type":"invalid_request_error","code":"input_audio_buffer_commit_empty","message":"buffer too small","event_id":"evt_1"}}"#;
    assert_eq!(
        meaning(text),
        Meaning::Error {
            fatal: false,
            code: "input_audio_buffer_commit_empty".into(),
            message: "buffer too small".into(),
            answers: Some("evt_1".into())
        }
    );
}

#[test]
fn a_null_error_code_is_reported_as_null_not_the_type_in_its_place_issue_12() {
    // openai-python's RealtimeError: `code: Optional[str]`, and the API sends null codes.
    for text in [
        r#"{"type":"error","error":{"type":"invalid_request_error","code":null,"message":"boom","param":null}}"#,
        r#"{"type":"error","error":{"type":"server_error","message":"boom"}}"#,
    ] {
        assert_eq!(
            meaning(text),
            Meaning::Error {
                fatal: false,
                code: "null".into(),
                message: "boom".into(),
                answers: None
            },
            "{text}"
        );
    }
}

/// An error whose `error` is a bare message, its code beside it (vLLM's shape, an
/// OpenAI-compatible server's): an error event all the same, not a frame the client cannot read
/// (which ended the set-up as "server frame is not a JSON event").
#[test]
fn an_error_with_a_bare_message_and_the_code_beside_it_is_an_error() {
    let text = r#"{"type":"error","error":"Missing required field: model","code":"invalid_event"}"#;
    assert_eq!(
        meaning(text),
        Meaning::Error {
            fatal: false,
            code: "invalid_event".into(),
            message: "Missing required field: model".into(),
            answers: None
        }
    );
    // Anything else in `error` is no body: still an error, with a null code.
    assert_eq!(
        meaning(r#"{"type":"error","error":[1]}"#),
        Meaning::Error {
            fatal: false,
            code: "null".into(),
            message: "".into(),
            answers: None
        }
    );
}

#[test]
fn the_input_transcription_is_the_inputs_text_when_it_holds_any_issue_12() {
    // Not the answer's text (it timed the first text 50 ms after the end, the answer's came
    // 350 ms after): the turns take it as text only from a server that sends no answer text.
    let delta = r#"{"type":"conversation.item.input_audio_transcription.delta","event_id":"e","item_id":"i","content_index":0,"delta":"Hel"}"#;
    assert_eq!(meaning(delta), Meaning::InputText { done: false });
    let done = r#"{"type":"conversation.item.input_audio_transcription.completed","event_id":"e","item_id":"i","content_index":0,"transcript":"Hello"}"#;
    assert_eq!(meaning(done), Meaning::InputText { done: true });
    for text in [
        r#"{"type":"conversation.item.input_audio_transcription.delta","delta":""}"#,
        r#"{"type":"conversation.item.input_audio_transcription.completed","transcript":""}"#,
    ] {
        assert_eq!(meaning(text), Meaning::Other, "{text}");
    }
}

#[test]
fn ga_session_update_has_type_formats_and_turn_detection_issue_12() {
    let c = client(ApiVersion::Ga, TurnDetection::ServerVad, None);
    let Some(Outgoing::Text(update)) = c.set_up(IDS).remove(1).send else {
        panic!("a text frame")
    };
    let v: serde_json::Value = serde_json::from_str(&update).unwrap();
    assert_eq!(v["type"], "session.update");
    let s = &v["session"];
    assert_eq!(s["type"], "realtime");
    assert_eq!(s["model"], "m");
    assert_eq!(s["output_modalities"], serde_json::json!(["audio"]));
    assert_eq!(
        s["audio"]["input"]["format"],
        serde_json::json!({"type":"audio/pcm","rate":16000})
    );
    assert_eq!(
        s["audio"]["input"]["turn_detection"],
        serde_json::json!({"type":"server_vad","create_response":true,"interrupt_response":false}),
        "both VAD flags said: the API's interrupt_response default (true) is not the mock's"
    );
    assert!(c.headers().is_empty(), "GA sends no beta header");
    let beta = session_object(
        ApiVersion::Beta,
        None,
        &["audio".to_string()],
        24_000,
        TurnDetection::ServerVad,
        true,
    );
    let beta: serde_json::Value = serde_json::from_str(&beta).unwrap();
    assert_eq!(beta["turn_detection"]["interrupt_response"], true);
}

#[test]
fn beta_session_update_uses_beta_names_and_sends_the_beta_header_issue_12() {
    let c = client(ApiVersion::Beta, TurnDetection::None, None);
    let Some(Outgoing::Text(update)) = c.set_up(IDS).remove(1).send else {
        panic!("a text frame")
    };
    let v: serde_json::Value = serde_json::from_str(&update).unwrap();
    let s = &v["session"];
    assert_eq!(s["modalities"], serde_json::json!(["audio", "text"]));
    assert_eq!(s["input_audio_format"], "pcm16");
    assert_eq!(s["turn_detection"], serde_json::Value::Null);
    assert!(s.get("type").is_none());
    assert_eq!(c.headers(), [("OpenAI-Beta", "realtime=v1".to_string())]);
}

#[test]
fn append_is_sized_exactly_and_valid_json_issue_12() {
    let mut out = String::new();
    push_append_frame(&mut out, IDS.id(3), "AAAA");
    assert_eq!(out.capacity(), out.len());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["type"], "input_audio_buffer.append");
    assert_eq!(v["audio"], "AAAA");
    assert_eq!(v["event_id"], "evt_0000000100000003");
}

#[test]
fn commit_every_commits_and_asks_for_a_response_when_a_boundary_is_crossed_issue_12() {
    let c = client(ApiVersion::Ga, TurnDetection::None, Some(1000));
    // The turns a client of `packets` packets ends before its last.
    let turns = |packets: u32| -> Vec<u32> {
        (0..packets - 1)
            .filter(|&seq| {
                let rest_ms = u64::from(packets - seq - 1) * 80;
                c.turn_end(IDS, seq, (u64::from(seq) + 1) * 80, rest_ms)
                    .is_some()
            })
            .collect()
    };
    // 1000 ms at 80 ms packets: packets ending at 1040, 2000, 3040 ms.
    assert_eq!(turns(40), [12, 24, 37]);
    // With 3120 ms of input the boundary at 3040 would leave the final commit 80 ms, which the
    // API refuses (input_audio_buffer_commit_empty): the final commit takes that turn.
    assert_eq!(turns(39), [12, 24]);
    let frames = c.turn_end(IDS, 12, 1040, 2000).unwrap();
    let kinds: Vec<String> = frames
        .iter()
        .map(|f| match f {
            Outgoing::Text(t) => serde_json::from_str::<serde_json::Value>(t).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string(),
            Outgoing::Binary(_) => String::new(),
        })
        .collect();
    assert_eq!(kinds, ["input_audio_buffer.commit", "response.create"]);
    assert!(client(ApiVersion::Ga, TurnDetection::None, None)
        .turn_end(IDS, 12, 1040, 2000)
        .is_none());
}

#[test]
fn the_client_ends_the_last_turn_unless_server_vad_already_did_issue_12() {
    let until = |c: &Openai, ending| -> Vec<Option<Milestone>> {
        c.finish(IDS, ending).iter().map(|s| s.until).collect()
    };
    let none = client(ApiVersion::Ga, TurnDetection::None, None);
    let streamed = Ending {
        streamed: true,
        ..Ending::default()
    };
    // The final response.create waits until no response is under way (Quiet).
    assert_eq!(
        until(&none, streamed),
        [
            Some(Milestone::Committed),
            Some(Milestone::Quiet),
            None,
            Some(Milestone::Idle)
        ]
    );
    let vad = client(ApiVersion::Ga, TurnDetection::ServerVad, None);
    assert_eq!(until(&vad, streamed), [Some(Milestone::Idle)]);
    let open = Ending {
        streamed: true,
        speech_open: true,
        ..Ending::default()
    };
    assert_eq!(
        until(&vad, open),
        [
            Some(Milestone::Committed),
            Some(Milestone::Quiet),
            None,
            Some(Milestone::Idle)
        ]
    );
    assert!(vad.client_closes());
}

#[test]
fn deltas_read_by_their_leading_type_mean_what_the_full_parse_says_issue_17() {
    let full = |text: &str| {
        // The same frame with `type` not first takes the full parse.
        let moved = text.replacen(r#"{"type""#, r#"{"x":0,"type""#, 1);
        assert!(super::super::leading_type(&moved).is_none(), "{moved}");
        let r = classify(&moved).unwrap();
        format!("{:?}", (r.meaning, r.payload))
    };
    for text in [
        r#"{"type":"response.output_audio.delta","delta":"AAAA"}"#,
        r#"{"type": "response.audio.delta", "item_id": "i", "delta": "AAAA"}"#,
        r#"{"type":"response.audio.delta","audio":"AAAA","sample_rate_hz":24000}"#,
        r#"{"type":"response.audio.delta","delta":null,"audio":"AAAA"}"#,
        r#"{"type":"response.output_audio_transcript.delta","delta":"hi"}"#,
        r#"{"type":"response.text.delta","delta":"hi"}"#,
    ] {
        assert!(super::super::leading_type(text).is_some(), "{text}");
        let fast = classify(text).unwrap();
        assert_eq!(
            format!("{:?}", (fast.meaning, fast.payload)),
            full(text),
            "{text}"
        );
    }
}

/// An empty transcript or text delta started the first-text clock 200 ms before the first
/// text (a server that sends one as the answer begins): it shows the server answering, as
/// vLLM's empty deltas do, and is no text. Whatever the key order.
#[test]
fn an_empty_text_delta_is_no_text() {
    for kind in [
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",
        "response.output_text.delta",
        "response.text.delta",
    ] {
        let empty = format!(r#"{{"type":"{kind}","event_id":"e","response_id":"r","delta":""}}"#);
        assert_eq!(meaning(&empty), Meaning::Progress, "{empty}");
        let last = format!(r#"{{"delta":"","type":"{kind}"}}"#);
        assert_eq!(meaning(&last), Meaning::Progress, "{last}");
        let text = format!(r#"{{"type":"{kind}","event_id":"e","delta":"Hi"}}"#);
        assert_eq!(meaning(&text), Meaning::TextDelta, "{text}");
    }
}

/// A transcription client as `--session-type transcription` makes it.
fn transcriber(turn_detection: TurnDetection, every: Option<u64>) -> Openai {
    let settings = ClientSettings {
        api_version: Some(ApiVersion::Ga),
        model: Some("gpt-4o-transcribe".into()),
        input_sample_rate: 24_000,
        turn_detection: Some(turn_detection),
        commit_every_ms: every,
        session_type: Some(SessionType::Transcription),
        ..ClientSettings::default()
    };
    Openai::new(&settings, &["audio".to_string()], None, 80)
}

/// The transcription session's update is openai-python's
/// `RealtimeTranscriptionSessionCreateRequest`: its type, the input's format, the
/// transcription model and the turn detection, nothing of a conversation's.
#[test]
fn a_transcription_session_update_asks_for_the_model_and_no_response() {
    let vad = transcriber(TurnDetection::ServerVad, None);
    let update: serde_json::Value = serde_json::from_str(&vad.update(7)).unwrap();
    assert_eq!(
        update,
        serde_json::json!({"type": "session.update", "event_id": "evt_0000000000000007",
            "session": {"type": "transcription", "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": "gpt-4o-transcribe"},
                "turn_detection": {"type": "server_vad"}}}}})
    );
    // A language, when given, goes with the model.
    let settings = ClientSettings {
        model: Some("whisper-1".into()),
        session_type: Some(SessionType::Transcription),
        ..ClientSettings::default()
    };
    let english = Openai::new(&settings, &[], Some("en"), 80);
    let update: serde_json::Value = serde_json::from_str(&english.update(7)).unwrap();
    assert_eq!(
        update.pointer("/session/audio/input/transcription"),
        Some(&serde_json::json!({"model": "whisper-1", "language": "en"}))
    );
    let manual = transcriber(TurnDetection::None, Some(2000));
    let update: serde_json::Value = serde_json::from_str(&manual.update(7)).unwrap();
    assert_eq!(
        update.pointer("/session/audio/input/turn_detection"),
        Some(&serde_json::Value::Null)
    );
    // A turn the client ends mid-stream is a commit alone: the transcript comes unasked.
    let frames = manual.turn_end(IDS, 24, 2000, 4000).unwrap();
    let kinds: Vec<String> = frames
        .iter()
        .map(|f| match f {
            Outgoing::Text(t) => serde_json::from_str::<serde_json::Value>(t).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["input_audio_buffer.commit"]);
    // The ending: the final commit (it ends the last turn and asks nothing more), then the
    // transcripts of every turn.
    let ending = Ending {
        streamed: true,
        speech_open: false,
        answered_early: false,
    };
    let steps = manual.finish(IDS, ending);
    let shape: Vec<_> = steps
        .iter()
        .map(|s| (s.send.is_some(), s.until, s.turn))
        .collect();
    assert_eq!(
        shape,
        [
            (true, None, Some(TurnMark::EndsAsking)),
            (false, Some(Milestone::Idle), None)
        ]
    );
    // With the server's VAD and no speech open, nothing is sent: the server committed it all.
    let steps = vad.finish(IDS, ending);
    assert_eq!(steps.len(), 1);
    assert!(steps[0].send.is_none());
}

/// In a transcription session the input's transcript is the answer: its deltas are the text,
/// `.completed` the turn's end, `.failed` an end in failure with its code; in a conversation
/// they stay the input's text.
#[test]
fn a_transcription_sessions_transcripts_are_its_answers() {
    let c = transcriber(TurnDetection::ServerVad, None);
    let m = |text: &'static str| c.classify(text).unwrap().meaning;
    let delta = r#"{"type":"conversation.item.input_audio_transcription.delta","event_id":"e","item_id":"i","content_index":0,"delta":"Hel"}"#;
    assert_eq!(m(delta), Meaning::TextDelta);
    assert_eq!(meaning(delta), Meaning::InputText { done: false });
    assert_eq!(
        m(
            r#"{"type":"conversation.item.input_audio_transcription.delta","item_id":"i","delta":""}"#
        ),
        Meaning::Progress
    );
    let segment = r#"{"type":"conversation.item.input_audio_transcription.segment","item_id":"i","id":"seg_1","text":"Hello","speaker":"A","start":0.0,"end":0.4}"#;
    assert_eq!(m(segment), Meaning::TextDelta);
    // Its whole text in it: the turn's first text too when no delta brought any.
    let done = r#"{"type":"conversation.item.input_audio_transcription.completed","item_id":"i","content_index":0,"transcript":"Hello"}"#;
    assert_eq!(m(done), Meaning::DoneWithText);
    // An empty transcript (silence) is a transcript all the same.
    assert_eq!(
        m(
            r#"{"type":"conversation.item.input_audio_transcription.completed","item_id":"i","transcript":""}"#
        ),
        Meaning::TurnDone {
            completed: true,
            failure: None
        }
    );
    let failed = r#"{"type":"conversation.item.input_audio_transcription.failed","item_id":"i","content_index":0,"error":{"type":"transcription_error","code":"audio_unintelligible","message":"Audio could not be transcribed."}}"#;
    assert_eq!(
        m(failed),
        Meaning::TurnDone {
            completed: false,
            failure: Some((
                "audio_unintelligible".into(),
                "Audio could not be transcribed.".into()
            ))
        }
    );
    // A refused commit is a refused turn (its transcript is what it asked for); a
    // `response.create` id is none of its.
    let final_commit = format!("evt_{:016x}", IDS.control(FINAL_COMMIT_ID));
    assert_eq!(
        c.refuses_turn(IDS, &final_commit),
        Some(crate::protocol::FINAL_TURN)
    );
    let commit_after_24 = format!("evt_{:016x}", IDS.control(TURN_IDS_FROM + 48));
    assert_eq!(c.refuses_turn(IDS, &commit_after_24), Some(24));
    let response_after_24 = format!("evt_{:016x}", IDS.control(TURN_IDS_FROM + 49));
    assert_eq!(c.refuses_turn(IDS, &response_after_24), None);
}
