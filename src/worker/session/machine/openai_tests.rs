//! The client session machine on the OpenAI Realtime API, fed frames by hand on a fake clock:
//! how a client-ended turn is timed, and a refused commit.

use super::*;
use crate::protocol::openai::Openai;

fn machine(extra: &[&str]) -> Machine {
    let mut args = vec!["--protocol", "openai", "-s", "1", "-d", "0.8s"];
    args.extend(extra);
    test_machine(&args, 0, |s| {
        Rc::new(Openai::new(
            &s.client,
            &s.modalities,
            s.language.as_deref(),
            s.packet_ms,
        ))
    })
}

fn hear(m: &mut Machine, text: &str, now_s: f64) -> Flow {
    m.on_frame(Incoming::Text(text), now_s).flow
}

/// The `event_id` of a frame the client sent.
fn id_of(frame: &Outgoing) -> String {
    serde_json::from_str::<serde_json::Value>(frame.text().unwrap()).unwrap()["event_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Streams with speech open at the input's end (the VAD heard it start at 0 ms); sends the
/// final commit that ends it at 1.8 s and returns its event id.
fn final_commit_with_speech_open(m: &mut Machine) -> String {
    let speech =
        [r#"{"type":"input_audio_buffer.speech_started","event_id":"e3","audio_start_ms":0}"#];
    stream(m, &speech);
    let Action::Send(commit) = m.next_action() else {
        panic!("speech is open: the client commits")
    };
    m.control_sending(1.8);
    id_of(&commit)
}

/// Sets the session up and sends its 10 packets on time from 1.0 s; returns the final
/// commit's event id once the machine hands it out (sent at 1.8 s, when the audio has played).
fn stream_to_the_final_commit(m: &mut Machine) -> String {
    stream(m, &[]);
    let Action::Send(commit) = m.next_action() else {
        panic!("the final commit comes next")
    };
    let text = commit.text().unwrap();
    assert!(text.contains("input_audio_buffer.commit"), "{text}");
    m.control_sending(1.8);
    id_of(&commit)
}

/// [`stream_to_the_final_commit`], then the server's `committed` at 1.81 s.
fn stream_to_the_final_commit_and_its_committed(m: &mut Machine) {
    stream_to_the_final_commit(m);
    assert_eq!(
        m.next_action(),
        Action::Await("input_audio_buffer.committed")
    );
    let committed = r#"{"type":"input_audio_buffer.committed","event_id":"e3","item_id":"i1"}"#;
    assert_eq!(hear(m, committed, 1.81), Flow::Reached);
}

/// Sets the session up (returning its session.update's event id) and streams 10 packets on
/// time from 1.0 s, hearing `during` (at 1.5 s) on the way; then the input is over.
fn stream(m: &mut Machine, during: &[&str]) -> String {
    let update_id = set_up(m);
    let mut frame = Outgoing::default();
    for seq in 0..10 {
        let start_s = 1.0 + f64::from(seq) * 0.08;
        let due_s = m.packet(seq, start_s, 1.0, &mut frame).0;
        m.sent(seq, due_s, start_s, start_s + 0.0001);
        if seq == 6 {
            for event in during {
                hear(m, event, 1.5);
            }
        }
    }
    m.streamed();
    update_id
}

/// Sets the session up; returns its session.update's event id.
fn set_up(m: &mut Machine) -> String {
    m.connecting(0.0);
    assert_eq!(m.next_action(), Action::Await("session.created"));
    assert_eq!(
        hear(m, r#"{"type":"session.created","event_id":"e1"}"#, 0.01),
        Flow::Reached
    );
    let Action::Send(update) = m.next_action() else {
        panic!("session.update")
    };
    let update: serde_json::Value = serde_json::from_str(update.text().unwrap()).unwrap();
    let update_id = update["event_id"].as_str().unwrap().to_string();
    m.control_sending(0.02);
    assert_eq!(m.next_action(), Action::Await("session.updated"));
    assert_eq!(
        hear(m, r#"{"type":"session.updated","event_id":"e2"}"#, 0.03),
        Flow::Reached
    );
    assert_eq!(m.next_action(), Action::Stream);
    update_id
}

/// A turn the client ends is timed from its commit, sent when the input's audio has played
/// out — not from the last packet's send, 80 ms before it: a server that answers 200 ms after
/// the commit reads 200 ms.
#[test]
fn a_client_ended_turn_is_timed_from_its_commit_issue_12() {
    let mut m = machine(&["--turn-detection", "none"]);
    stream_to_the_final_commit_and_its_committed(&mut m);
    assert!(
        matches!(m.next_action(), Action::Send(_)),
        "response.create"
    );
    m.control_sending(1.811);
    let delta = r#"{"type":"response.output_audio_transcript.delta","event_id":"e4","delta":"hi"}"#;
    hear(&mut m, delta, 2.0);
    let done = r#"{"type":"response.done","event_id":"e5","response":{"status":"completed"}}"#;
    hear(&mut m, done, 2.3);
    let stats = m.stats.borrow();
    let turns = &stats.hist.turns;
    // Timed from the last packet's send (1.72 s) they read 280 and 580 ms.
    let near = |ms: f64, want: f64| (ms - want).abs() < 0.5;
    assert_eq!(turns.first_text_after_end.count(), 1);
    let first = turns.first_text_after_end.max_ms();
    assert!(near(first, 200.0), "{first}");
    let done = turns.done_after_end.max_ms();
    assert!(near(done, 500.0), "{done}");
}

/// A response that failed (a rate limit: `response.done` with status `failed`) is the server's
/// error, counted by its code as an `error` event is, so the run is not complete; one cut short
/// on purpose (`cancelled` by a barge-in) is not an error. Either answers its turn.
#[test]
fn a_failed_response_counts_as_a_server_error_and_a_cancelled_one_does_not() {
    for (status, details, errors) in [
        (
            "failed",
            r#"{"type":"failed","error":{"type":"requests","code":"rate_limit_exceeded","message":"Rate limit reached"}}"#,
            1,
        ),
        (
            "cancelled",
            r#"{"type":"cancelled","reason":"turn_detected"}"#,
            0,
        ),
    ] {
        let mut m = machine(&["--turn-detection", "none"]);
        stream_to_the_final_commit_and_its_committed(&mut m);
        m.control_sending(1.811);
        let done = format!(
            r#"{{"type":"response.done","event_id":"e5","response":{{"status":"{status}","status_details":{details}}}}}"#
        );
        hear(&mut m, &done, 2.3);
        assert_eq!(m.stats.borrow().error_events, errors, "{status}");
        let codes = &m.outcome.error_codes;
        assert_eq!(
            codes.get("rate_limit_exceeded").copied().unwrap_or(0),
            errors,
            "{status}"
        );
        let counts = m.turns.as_ref().unwrap().counts;
        assert_eq!((counts.answered, counts.failed), (1, 1), "{status}");
        if errors > 0 {
            assert_eq!(
                m.outcome.last_server_error.as_deref(),
                Some("rate_limit_exceeded: Rate limit reached")
            );
        }
    }
}

/// What a server puts in an error reaches the terminal and the summary escaped and bounded:
/// an escape sequence in its message, a code of 200 kB.
#[test]
fn a_servers_error_text_is_kept_printable_and_short() {
    let mut m = machine(&["--turn-detection", "none"]);
    stream(&mut m, &[]);
    let code = "c".repeat(200_000);
    let error = format!(
        r#"{{"type":"error","event_id":"e9","error":{{"type":"server_error","code":"{code}","message":"\u001b[2Jcleared\nscreen"}}}}"#
    );
    hear(&mut m, &error, 1.9);
    let last = m.outcome.last_server_error.clone().unwrap();
    assert!(
        last.ends_with("… (200000 bytes in all): \\u{1b}[2Jcleared\\nscreen"),
        "{last}"
    );
    assert!(last.len() < 200, "{}", last.len());
    assert!(m.outcome.error_codes.keys().all(|k| k.len() < 200));
}

/// The API refuses a final commit of under 100 ms of audio and names it: the session ends at
/// once with that error, not after `--recv-timeout` waiting for a `committed` that will not
/// come. An error naming another event changes nothing.
#[test]
fn a_refused_final_commit_ends_the_session_at_once_issue_12() {
    let mut m = machine(&["--turn-detection", "none"]);
    let id = stream_to_the_final_commit(&mut m);
    assert_eq!(
        m.next_action(),
        Action::Await("input_audio_buffer.committed")
    );
    let other = r#"{"type":"error","event_id":"e3","error":{"type":"invalid_request_error","code":"x","message":"y","event_id":"someone-else"}}"#;
    assert_eq!(hear(&mut m, other, 1.81), Flow::Continue);
    let refusal = format!(
        r#"{{"type":"error","event_id":"e4","error":{{"type":"invalid_request_error","code":"input_audio_buffer_commit_empty","message":"buffer too small","event_id":"{id}"}}}}"#
    );
    assert_eq!(
        hear(&mut m, &refusal, 1.82),
        Flow::End(
            "the server refused the session's ending (no input_audio_buffer.committed will come) with error input_audio_buffer_commit_empty: buffer too small"
                .to_string()
        )
    );
}

/// An error that names the session.update (sent at set-up) is no refusal of the ending: the
/// server's VAD ended the turn and the session waits for its answer, then for no command of
/// its own. It ended the session ("refused the session's ending") when the set-up's event id
/// was still taken for the last step's.
#[test]
fn an_error_naming_a_set_up_command_does_not_end_the_ending() {
    let mut m = machine(&[]);
    let vad = [
        r#"{"type":"input_audio_buffer.speech_started","event_id":"e3","audio_start_ms":0}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e4","audio_end_ms":400}"#,
    ];
    let update_id = stream(&mut m, &vad);
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let late = format!(
        r#"{{"type":"error","event_id":"e5","error":{{"type":"invalid_request_error","code":"x","message":"y","event_id":"{update_id}"}}}}"#
    );
    assert_eq!(hear(&mut m, &late, 1.9), Flow::Continue);
}

/// `--commit-every` asks for a response at each commit; the API refuses a `response.create`
/// while one is in progress (`conversation_already_has_active_response`, naming it). That turn
/// gets no answer: it must not wait for one, or the next answer would be filed under it and
/// timed from its (earlier) end — and the session would wait out `--recv-timeout` at its end
/// for an answer that never comes.
#[test]
fn a_refused_response_create_leaves_its_turn_unanswered_not_owed() {
    let mut m = machine(&["--turn-detection", "none", "--commit-every", "0.2s"]);
    set_up(&mut m);
    // Packets 0..10 from 1.0 s; commits after packets 2 (240 ms) and 4 (400 ms): turn 1 ends
    // at 1.24 s, turn 2 at 1.40 s.
    let mut frame = Outgoing::default();
    let mut turn_ends = Vec::new();
    for seq in 0..6 {
        let start_s = 1.0 + f64::from(seq) * 0.08;
        let due_s = m.packet(seq, start_s, 1.0, &mut frame).0;
        m.sent(seq, due_s, start_s, start_s + 0.0001);
        if let Some(frames) = m.turn_end(seq) {
            m.control_sending(start_s + 0.08);
            let ids: Vec<String> = frames
                .iter()
                .map(|f| {
                    serde_json::from_str::<serde_json::Value>(f.text().unwrap()).unwrap()
                        ["event_id"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            turn_ends.push((start_s + 0.08, ids));
        }
    }
    assert_eq!(turn_ends.len(), 2, "{turn_ends:?}");
    // An error naming an audio packet (here packet 2, whose id is even) refuses no turn.
    let packet_error = r#"{"type":"error","event_id":"e4","error":{"code":"invalid_audio","message":"x","event_id":"evt_0000000000000002"}}"#;
    assert_eq!(hear(&mut m, packet_error, 1.39), Flow::Continue);
    assert_eq!(m.turns.as_ref().unwrap().counts.refused, 0);
    // Turn 1's response.create is refused (a response still in progress), its error coming
    // only after turn 2 has ended: turn 1 is the one owed nothing, not the newest.
    let refusal = format!(
        r#"{{"type":"error","event_id":"e5","error":{{"type":"invalid_request_error","code":"conversation_already_has_active_response","message":"Conversation already has an active response","event_id":"{}"}}}}"#,
        turn_ends[0].1[1]
    );
    assert_eq!(hear(&mut m, &refusal, 1.401), Flow::Continue);
    let done = r#"{"type":"response.done","event_id":"e6","response":{"status":"completed"}}"#;
    hear(&mut m, done, 1.50);
    let counts = m.turns.as_ref().unwrap().counts;
    assert_eq!((counts.ended, counts.answered, counts.refused), (2, 1, 1));
    assert!(!m.turns.as_ref().unwrap().open(), "no answer is owed");
    // The answer was turn 2's: timed from its end (1.40 s), 100 ms (from turn 1's, 260).
    let done_ms = m.stats.borrow().hist.turns.done_after_end.max_ms();
    assert!((done_ms - 100.0).abs() < 0.5, "{done_ms}");
    // A refused commit (not a response.create) refuses no turn: its response may still come.
    let commit_refused = format!(
        r#"{{"type":"error","event_id":"e7","error":{{"code":"input_audio_buffer_commit_empty","message":"x","event_id":"{}"}}}}"#,
        turn_ends[1].1[0]
    );
    assert_eq!(hear(&mut m, &commit_refused, 1.6), Flow::Continue);
    assert_eq!(m.turns.as_ref().unwrap().counts.refused, 1);
}

/// The final `response.create` refused the same way (an answer still in progress when the
/// input ends) does not end the session as refused: its turn gets no answer, and the session
/// waits for the answers still owed only.
#[test]
fn a_refused_final_response_create_ends_the_session_when_nothing_more_is_owed() {
    let mut m = machine(&["--turn-detection", "none"]);
    stream_to_the_final_commit_and_its_committed(&mut m);
    let Action::Send(respond) = m.next_action() else {
        panic!("response.create")
    };
    m.control_sending(1.811);
    let id = serde_json::from_str::<serde_json::Value>(respond.text().unwrap()).unwrap()
        ["event_id"]
        .as_str()
        .unwrap()
        .to_string();
    let refusal = format!(
        r#"{{"type":"error","event_id":"e4","error":{{"type":"invalid_request_error","code":"conversation_already_has_active_response","message":"busy","event_id":"{id}"}}}}"#
    );
    assert_eq!(m.next_action(), Action::Await("response.done"));
    // The refusal ends the wait: nothing is owed any more (the session does not wait out
    // --recv-timeout for a response.done that will not come).
    assert_eq!(hear(&mut m, &refusal, 1.82), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    assert_eq!(m.turns.as_ref().unwrap().counts.refused, 1);
}

/// The end-of-input race with the server's VAD: speech is open when the input ends, so the
/// client commits; the server's VAD had just stopped the speech and committed the buffer
/// itself, so the client's commit is refused as empty and its `response.create` as one too
/// many. The server sends its own `committed` before refusing the client's commit (it handles
/// events in order), which ends the client's wait for one; the refusals then leave only the
/// VAD's turn owed, and its answer ends the session — completed, not failed. The server did as
/// it should: neither refusal is its error (they made the run incomplete), and the client's
/// final turn, whose audio the VAD's turn holds, is withdrawn (it counted one turn of speech
/// as two ended).
#[test]
fn the_vads_commit_racing_the_clients_final_one_leaves_the_session_complete() {
    let mut m = machine(&[]);
    let commit_id = final_commit_with_speech_open(&mut m);
    assert_eq!(
        m.next_action(),
        Action::Await("input_audio_buffer.committed")
    );
    let stopped =
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e4","audio_end_ms":700}"#;
    assert_eq!(hear(&mut m, stopped, 1.81), Flow::Continue);
    let committed = r#"{"type":"input_audio_buffer.committed","event_id":"e5","item_id":"i1"}"#;
    assert_eq!(hear(&mut m, committed, 1.811), Flow::Reached);
    let Action::Send(respond) = m.next_action() else {
        panic!("response.create")
    };
    m.control_sending(1.812);
    let respond_id = id_of(&respond);
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let empty = format!(
        r#"{{"type":"error","event_id":"e6","error":{{"code":"input_audio_buffer_commit_empty","message":"buffer too small","event_id":"{commit_id}"}}}}"#
    );
    assert_eq!(hear(&mut m, &empty, 1.813), Flow::Continue);
    let busy = format!(
        r#"{{"type":"error","event_id":"e7","error":{{"code":"conversation_already_has_active_response","message":"busy","event_id":"{respond_id}"}}}}"#
    );
    assert_eq!(
        hear(&mut m, &busy, 1.814),
        Flow::Continue,
        "the VAD's turn is owed"
    );
    let done = r#"{"type":"response.done","event_id":"e8","response":{"status":"completed"}}"#;
    assert_eq!(hear(&mut m, done, 2.5), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    let counts = m.turns.as_ref().unwrap().counts;
    assert_eq!((counts.ended, counts.answered, counts.refused), (1, 1, 0));
    assert!(
        m.outcome.error_codes.is_empty(),
        "{:?}",
        m.outcome.error_codes
    );
    assert_eq!(m.stats.borrow().error_events, 0);
}

/// The same race in a transcription session: the client's final commit, refused as empty
/// after the VAD committed the input itself, is no error and no turn; a commit refused so
/// while the input streamed (nothing committed after the last packet) stays one.
#[test]
fn the_vads_commit_racing_a_transcription_sessions_final_one_is_no_error() {
    let mut m = machine(&["--session-type", "transcription"]);
    let commit_id = final_commit_with_speech_open(&mut m);
    assert_eq!(
        m.next_action(),
        Action::Await("conversation.item.input_audio_transcription.completed")
    );
    let stopped =
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e4","audio_end_ms":700}"#;
    hear(&mut m, stopped, 1.81);
    let committed = r#"{"type":"input_audio_buffer.committed","event_id":"e5","item_id":"item_v"}"#;
    hear(&mut m, committed, 1.811);
    let empty = format!(
        r#"{{"type":"error","event_id":"e6","error":{{"code":"input_audio_buffer_commit_empty","message":"buffer too small","event_id":"{commit_id}"}}}}"#
    );
    assert_eq!(
        hear(&mut m, &empty, 1.813),
        Flow::Continue,
        "the VAD's turn is owed"
    );
    let done = r#"{"type":"conversation.item.input_audio_transcription.completed","event_id":"e7","item_id":"item_v","transcript":"alpha"}"#;
    assert_eq!(hear(&mut m, done, 2.1), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    let counts = m.turns.as_ref().unwrap().counts;
    assert_eq!((counts.ended, counts.answered, counts.refused), (1, 1, 0));
    assert_eq!(m.stats.borrow().error_events, 0);
    // Without a commit of the server's after the input, the refusal is the server's error.
    let mut m = machine(&[
        "--session-type",
        "transcription",
        "--turn-detection",
        "none",
    ]);
    let id = stream_to_the_final_commit(&mut m);
    m.next_action();
    let refusal = format!(
        r#"{{"type":"error","event_id":"e3","error":{{"code":"input_audio_buffer_commit_empty","message":"buffer too small","event_id":"{id}"}}}}"#
    );
    hear(&mut m, &refusal, 1.82);
    assert_eq!(m.stats.borrow().error_events, 1);
    assert_eq!(m.turns.as_ref().unwrap().counts.refused, 1);
}

/// Two VAD turns, the second ending while the first's response runs; the input then ends with
/// no speech open, so the ending waits only for answers.
fn two_vad_turns_the_second_during_the_first_answer(m: &mut Machine) {
    let during = [
        r#"{"type":"input_audio_buffer.speech_started","audio_start_ms":0}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","audio_end_ms":160}"#,
        r#"{"type":"response.created","response":{"id":"r1"}}"#,
        r#"{"type":"input_audio_buffer.speech_started","audio_start_ms":240}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","audio_end_ms":400}"#,
    ];
    stream(m, &during);
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let done = r#"{"type":"response.done","response":{"id":"r1","status":"completed"}}"#;
    assert_eq!(
        hear(m, done, 2.0),
        Flow::Continue,
        "the second turn has no answer yet"
    );
}

/// A VAD turn that ended while a response ran may get none (OpenAI with `interrupt_response:
/// false`), or one the server creates as the first is done: at the session's end the client
/// waits a grace for it, then counts the turn `unanswered` and ends — neither failing the
/// session at --recv-timeout nor closing before a response that is on its way.
#[test]
fn the_ending_waits_a_grace_for_a_turn_left_behind_then_counts_it_unanswered() {
    let mut m = machine(&[]);
    two_vad_turns_the_second_during_the_first_answer(&mut m);
    let grace = m
        .grace_deadline_s()
        .expect("a grace for the turn left behind");
    assert!(
        (grace - (2.0 + turns::BEHIND_GRACE_S)).abs() < 1e-9,
        "{grace}"
    );
    assert_eq!(m.grace_over(), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    m.settle();
    let c = m.outcome.turns;
    assert_eq!((c.ended, c.answered, c.unanswered), (2, 1, 1));

    // The server answers it in the grace: its response is waited for and timed.
    let mut m = machine(&[]);
    two_vad_turns_the_second_during_the_first_answer(&mut m);
    let created = r#"{"type":"response.created","response":{"id":"r2"}}"#;
    assert_eq!(hear(&mut m, created, 2.05), Flow::Continue);
    assert_eq!(m.grace_deadline_s(), None, "its response is under way");
    let done = r#"{"type":"response.done","response":{"id":"r2","status":"completed"}}"#;
    assert_eq!(hear(&mut m, done, 2.5), Flow::Reached);
    m.settle();
    let c = m.outcome.turns;
    assert_eq!((c.ended, c.answered, c.unanswered), (2, 2, 0));
}

/// Streams hearing `during` (which leaves speech open), then the client's final commit, sent
/// at 1.8 s, and the server's `committed`.
fn stream_with_speech_open_to_the_committed_final_turn(m: &mut Machine, during: &[&str]) {
    stream(m, during);
    let Action::Send(commit) = m.next_action() else {
        panic!("the final commit")
    };
    assert!(commit.text().unwrap().contains("input_audio_buffer.commit"));
    m.control_sending(1.8);
    let committed = r#"{"type":"input_audio_buffer.committed","item_id":"i9"}"#;
    assert_eq!(hear(m, committed, 1.81), Flow::Reached);
}

/// The input ends with speech still open while the previous turn's response runs: the client
/// commits the last turn, then asks for its response only once that one is done — the API
/// refuses a `response.create` while a response is in progress
/// (`conversation_already_has_active_response`), which made such a run NOT complete.
#[test]
fn the_final_response_create_waits_for_the_response_in_progress() {
    let mut m = machine(&[]);
    let during = [
        r#"{"type":"input_audio_buffer.speech_started","audio_start_ms":0}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","audio_end_ms":160}"#,
        r#"{"type":"response.created","response":{"id":"r1"}}"#,
        r#"{"type":"input_audio_buffer.speech_started","audio_start_ms":240}"#,
    ];
    stream_with_speech_open_to_the_committed_final_turn(&mut m, &during);
    assert_eq!(
        m.next_action(),
        Action::Await("response.done"),
        "not while r1 is in progress"
    );
    let done = r#"{"type":"response.done","response":{"id":"r1","status":"completed"}}"#;
    assert_eq!(hear(&mut m, done, 2.5), Flow::Reached);
    let Action::Send(create) = m.next_action() else {
        panic!("the final response.create once r1 is done")
    };
    assert!(create.text().unwrap().contains("response.create"));
}

/// Three VAD turns: the first answered by r1, the second ending while r1 runs, the third still
/// open when the input ends (the client commits it at 1.8 s).
fn a_turn_left_behind_and_the_final_turn_committed(m: &mut Machine) {
    let during = [
        r#"{"type":"input_audio_buffer.speech_started","audio_start_ms":0}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","audio_end_ms":160}"#,
        r#"{"type":"response.created","response":{"id":"r1"}}"#,
        r#"{"type":"input_audio_buffer.speech_started","audio_start_ms":240}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","audio_end_ms":320}"#,
        r#"{"type":"input_audio_buffer.speech_started","audio_start_ms":400}"#,
    ];
    stream_with_speech_open_to_the_committed_final_turn(m, &during);
}

/// A VAD turn left behind by the response that was in progress when the input ended (speech
/// still open): the client's last `response.create` waits the grace for a response the server
/// may create for that turn (one created meanwhile would have the client's refused), then asks.
#[test]
fn the_final_response_create_waits_the_grace_of_a_turn_left_behind() {
    let mut m = machine(&[]);
    a_turn_left_behind_and_the_final_turn_committed(&mut m);
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let done = r#"{"type":"response.done","response":{"id":"r1","status":"completed"}}"#;
    assert_eq!(
        hear(&mut m, done, 2.5),
        Flow::Continue,
        "the left-behind turn's grace"
    );
    let grace = m.grace_deadline_s().expect("a grace");
    assert!(
        (grace - (2.5 + turns::BEHIND_GRACE_S)).abs() < 1e-9,
        "{grace}"
    );
    assert_eq!(m.grace_over(), Flow::Reached);
    let Action::Send(create) = m.next_action() else {
        panic!("the final response.create after the grace")
    };
    assert!(create.text().unwrap().contains("response.create"));
    assert_eq!(m.turns.as_ref().unwrap().counts.unanswered, 1);
}

/// The server creates the response for the turn left behind while the client's final turn,
/// committed, waits to be asked for: that response is the left-behind turn's, not the final
/// one's (the client has not asked yet). Taken as the final turn's, it timed the final turn by
/// another turn's answer, the left-behind turn went `unanswered`, and the client's own
/// `response.create` then went out for an answer the session did not wait for.
#[test]
fn a_response_the_server_creates_before_the_final_turn_is_asked_for_is_not_its_answer() {
    let mut m = machine(&[]);
    a_turn_left_behind_and_the_final_turn_committed(&mut m);
    let done = r#"{"type":"response.done","response":{"id":"r1","status":"completed"}}"#;
    assert_eq!(hear(&mut m, done, 2.5), Flow::Continue);
    // In the grace, the server's queued response for the turn left behind.
    let created = r#"{"type":"response.created","response":{"id":"r2"}}"#;
    assert_eq!(hear(&mut m, created, 2.6), Flow::Continue);
    assert_eq!(m.turns.as_ref().unwrap().counts.unanswered, 0);
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let done = r#"{"type":"response.done","response":{"id":"r2","status":"completed"}}"#;
    assert_eq!(hear(&mut m, done, 3.0), Flow::Reached);
    let Action::Send(create) = m.next_action() else {
        panic!("the final turn is still owed its answer: the client asks for it")
    };
    assert!(create.text().unwrap().contains("response.create"));
    m.control_sending(3.001);
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let created = r#"{"type":"response.created","response":{"id":"r3"}}"#;
    assert_eq!(hear(&mut m, created, 3.05), Flow::Continue);
    let delta = r#"{"type":"response.output_audio_transcript.delta","delta":"hi"}"#;
    assert_eq!(hear(&mut m, delta, 3.2), Flow::Continue);
    let done = r#"{"type":"response.done","response":{"id":"r3","status":"completed"}}"#;
    assert_eq!(hear(&mut m, done, 3.5), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    m.settle();
    let c = m.outcome.turns;
    assert_eq!(
        (c.ended, c.answered, c.unanswered, c.unmatched),
        (3, 3, 0, 0)
    );
    // The final turn's answer is timed from its request (3.001 s), which the client held back
    // while the other turn's answers ran: its first (and only) text delta came at 3.2 s. From
    // its commit (1.8 s) it read 1400 ms, the client's wait taken for the server's (the QA
    // pass of 2026-12-06: a "server stall").
    let h = &m.stats.borrow().hist.turns.first_text_after_end;
    assert_eq!(h.count(), 1);
    assert!((h.max_ms() - 199.0).abs() < 1.0, "{}", h.max_ms());
}

/// A transcription session: the final commit asks for nothing more (its transcript comes
/// unasked), and an error refusing it (a buffer under 100 ms) ends the wait for that turn at
/// once — the session waited out `--recv-timeout` for a `committed` that would not come.
#[test]
fn a_transcription_sessions_refused_final_commit_is_waited_for_no_longer() {
    let mut m = machine(&[
        "--session-type",
        "transcription",
        "--turn-detection",
        "none",
    ]);
    let id = stream_to_the_final_commit(&mut m);
    assert_eq!(
        m.next_action(),
        Action::Await("conversation.item.input_audio_transcription.completed")
    );
    let refusal = format!(
        r#"{{"type":"error","event_id":"e3","error":{{"type":"invalid_request_error","code":"input_audio_buffer_commit_empty","message":"buffer too small","event_id":"{id}"}}}}"#
    );
    assert_eq!(hear(&mut m, &refusal, 1.82), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    let counts = m.turns.as_ref().unwrap().counts;
    assert_eq!((counts.ended, counts.refused, counts.answered), (1, 1, 0));
}

/// OpenAI does not promise the order of transcripts across items: each goes to the turn whose
/// committed item it names. Here the second turn's transcript comes first, and the first
/// turn's fails: each latency is its own turn's (in order they read 840 and 940 ms, and the
/// second turn's transcript was timed from the first turn's end).
#[test]
fn a_transcription_sessions_transcripts_go_to_their_items_turns_in_any_order() {
    let mut m = machine(&["--session-type", "transcription"]);
    // Turn A ends in the packet sent at 1.16 s (200 ms of audio), turn B in the one sent at
    // 1.40 s (420 ms).
    let vad = [
        r#"{"type":"input_audio_buffer.speech_started","event_id":"e3","audio_start_ms":0,"item_id":"item_a"}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e4","audio_end_ms":200,"item_id":"item_a"}"#,
        r#"{"type":"input_audio_buffer.committed","event_id":"e5","item_id":"item_a","previous_item_id":null}"#,
        r#"{"type":"input_audio_buffer.speech_started","event_id":"e6","audio_start_ms":300,"item_id":"item_b"}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e7","audio_end_ms":420,"item_id":"item_b"}"#,
        r#"{"type":"input_audio_buffer.committed","event_id":"e8","item_id":"item_b","previous_item_id":"item_a"}"#,
    ];
    stream(&mut m, &vad);
    assert_eq!(
        m.next_action(),
        Action::Await("conversation.item.input_audio_transcription.completed")
    );
    let b_delta = r#"{"type":"conversation.item.input_audio_transcription.delta","event_id":"e9","item_id":"item_b","content_index":0,"delta":"bravo"}"#;
    let b_done = r#"{"type":"conversation.item.input_audio_transcription.completed","event_id":"e10","item_id":"item_b","content_index":0,"transcript":"bravo"}"#;
    let a_delta = r#"{"type":"conversation.item.input_audio_transcription.delta","event_id":"e11","item_id":"item_a","content_index":0,"delta":"alpha"}"#;
    let a_failed = r#"{"type":"conversation.item.input_audio_transcription.failed","event_id":"e12","item_id":"item_a","content_index":0,"error":{"type":"transcription_error","code":"audio_unintelligible","message":"no"}}"#;
    hear(&mut m, b_delta, 2.0);
    hear(&mut m, b_done, 2.1);
    hear(&mut m, a_delta, 2.2);
    assert_eq!(hear(&mut m, a_failed, 2.3), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    let near = |ms: f64, want: f64| (ms - want).abs() < 0.5;
    {
        let stats = m.stats.borrow();
        let turns = &stats.hist.turns;
        assert_eq!(turns.first_text_after_end.count(), 2);
        let (first_b, first_a) = (
            turns.first_text_after_end.quantile_ms(0.0),
            turns.first_text_after_end.max_ms(),
        );
        assert!(
            near(first_b, 600.0) && near(first_a, 1040.0),
            "{first_b} {first_a}"
        );
        // A failed transcript is no answer's length.
        assert_eq!(turns.done_after_end.count(), 1);
        let done_b = turns.done_after_end.max_ms();
        assert!(near(done_b, 700.0), "{done_b}");
    }
    let counts = m.turns.as_ref().unwrap().counts;
    assert_eq!((counts.ended, counts.answered, counts.failed), (2, 2, 1));
    assert_eq!(m.outcome.error_codes.get("audio_unintelligible"), Some(&1));
}

/// A transcript sent whole in its `.completed`, with no delta before it, is the turn's first
/// text too (it was left out of the first-text figures, where a conversation's input
/// transcript sent so counted).
#[test]
fn a_transcript_sent_whole_in_its_completed_is_its_turns_first_text() {
    let mut m = machine(&[
        "--session-type",
        "transcription",
        "--turn-detection",
        "none",
    ]);
    stream_to_the_final_commit(&mut m);
    assert_eq!(
        m.next_action(),
        Action::Await("conversation.item.input_audio_transcription.completed")
    );
    let committed = r#"{"type":"input_audio_buffer.committed","event_id":"e3","item_id":"item_a"}"#;
    hear(&mut m, committed, 1.81);
    let done = r#"{"type":"conversation.item.input_audio_transcription.completed","event_id":"e4","item_id":"item_a","content_index":0,"transcript":"alpha bravo"}"#;
    assert_eq!(hear(&mut m, done, 2.1), Flow::Reached);
    let stats = m.stats.borrow();
    let turns = &stats.hist.turns;
    let near = |ms: f64, want: f64| (ms - want).abs() < 0.5;
    assert_eq!(turns.first_text_after_end.count(), 1);
    let first = turns.first_text_after_end.max_ms();
    assert!(near(first, 300.0), "{first}");
    assert!(near(turns.done_after_end.max_ms(), 300.0));
}

/// Speech open at the input's end: the final commit goes out, the VAD stops the speech and
/// commits the input itself, and (as OpenAI does) creates its response — after the client's
/// final `response.create` went out, which took that response for its own. The race's
/// refusals then withdraw the final turn, and the response is the VAD turn's: answered, not
/// `unmatched`, and no turn left `unanswered`.
#[test]
fn the_race_hands_the_response_the_final_turn_took_to_the_vads_turn() {
    let mut m = machine(&[]);
    let commit_id = final_commit_with_speech_open(&mut m);
    let stopped =
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e4","audio_end_ms":700}"#;
    hear(&mut m, stopped, 1.81);
    let committed = r#"{"type":"input_audio_buffer.committed","event_id":"e5","item_id":"i1"}"#;
    assert_eq!(
        m.next_action(),
        Action::Await("input_audio_buffer.committed")
    );
    hear(&mut m, committed, 1.811);
    let Action::Send(respond) = m.next_action() else {
        panic!("response.create")
    };
    m.control_sending(1.812);
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let created = r#"{"type":"response.created","event_id":"e6","response":{"id":"r1"}}"#;
    hear(&mut m, created, 1.813);
    let empty = format!(
        r#"{{"type":"error","event_id":"e7","error":{{"code":"input_audio_buffer_commit_empty","message":"m","event_id":"{}"}}}}"#,
        commit_id
    );
    hear(&mut m, &empty, 1.814);
    let busy = format!(
        r#"{{"type":"error","event_id":"e8","error":{{"code":"conversation_already_has_active_response","message":"m","event_id":"{}"}}}}"#,
        id_of(&respond)
    );
    hear(&mut m, &busy, 1.815);
    let delta = r#"{"type":"response.output_audio_transcript.delta","event_id":"e9","response_id":"r1","delta":"hi"}"#;
    hear(&mut m, delta, 2.0);
    let done =
        r#"{"type":"response.done","event_id":"e10","response":{"id":"r1","status":"completed"}}"#;
    assert_eq!(hear(&mut m, done, 2.3), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    let counts = m.turns.as_ref().unwrap().counts;
    assert_eq!(
        (
            counts.ended,
            counts.answered,
            counts.unmatched,
            counts.unanswered
        ),
        (1, 1, 0, 0)
    );
    assert_eq!(m.stats.borrow().error_events, 0);
    assert_eq!(m.stats.borrow().hist.turns.first_text_after_end.count(), 1);
}

/// The same race found while the final `response.create` still waits for the VAD turn's
/// response to end: it is not sent (a server gone idle would start a response of its own, and
/// the client would close on it).
#[test]
fn a_withdrawn_final_turn_asks_for_no_answer() {
    let mut m = machine(&[]);
    let commit_id = final_commit_with_speech_open(&mut m);
    hear(
        &mut m,
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e4","audio_end_ms":700}"#,
        1.81,
    );
    hear(
        &mut m,
        r#"{"type":"input_audio_buffer.committed","event_id":"e5","item_id":"i1"}"#,
        1.811,
    );
    hear(
        &mut m,
        r#"{"type":"response.created","event_id":"e6","response":{"id":"r1"}}"#,
        1.812,
    );
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let empty = format!(
        r#"{{"type":"error","event_id":"e7","error":{{"code":"input_audio_buffer_commit_empty","message":"m","event_id":"{commit_id}"}}}}"#
    );
    hear(&mut m, &empty, 1.813);
    // No response.create: the ending waits for the VAD turn's answer alone.
    assert_eq!(m.next_action(), Action::Await("response.done"));
    let done =
        r#"{"type":"response.done","event_id":"e8","response":{"id":"r1","status":"completed"}}"#;
    assert_eq!(hear(&mut m, done, 2.3), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    let counts = m.turns.as_ref().unwrap().counts;
    assert_eq!((counts.ended, counts.answered), (1, 1));
}

/// The race in a transcription session while an earlier item's transcript is still owed:
/// the VAD's item (named by its `speech_stopped`) stays its turn's, and each transcript is
/// timed against its own turn whatever their order; a transcript of an item already answered,
/// or of one no turn is, is `unmatched`, and takes no turn's figures.
#[test]
fn items_keep_their_turns_through_the_race_and_strangers_are_unmatched() {
    let mut m = machine(&["--session-type", "transcription"]);
    // Turn a ends in the packet sent at 1.16 s; speech starts again and is open at the end.
    let vad = [
        r#"{"type":"input_audio_buffer.speech_started","event_id":"e3","audio_start_ms":0,"item_id":"item_a"}"#,
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e4","audio_end_ms":200,"item_id":"item_a"}"#,
        r#"{"type":"input_audio_buffer.committed","event_id":"e5","item_id":"item_a"}"#,
        r#"{"type":"input_audio_buffer.speech_started","event_id":"e6","audio_start_ms":300,"item_id":"item_v"}"#,
    ];
    stream(&mut m, &vad);
    let Action::Send(commit) = m.next_action() else {
        panic!("speech is open: the final commit")
    };
    m.control_sending(1.8);
    let commit_id = id_of(&commit);
    m.next_action();
    // The VAD turn ends in the packet sent at 1.64 s (the one holding 700 ms of audio).
    hear(
        &mut m,
        r#"{"type":"input_audio_buffer.speech_stopped","event_id":"e7","audio_end_ms":700,"item_id":"item_v"}"#,
        1.81,
    );
    hear(
        &mut m,
        r#"{"type":"input_audio_buffer.committed","event_id":"e8","item_id":"item_v"}"#,
        1.811,
    );
    let empty = format!(
        r#"{{"type":"error","event_id":"e9","error":{{"code":"input_audio_buffer_commit_empty","message":"m","event_id":"{commit_id}"}}}}"#
    );
    hear(&mut m, &empty, 1.812);
    let transcript = |item: &str, kind: &str| {
        format!(
            r#"{{"type":"conversation.item.input_audio_transcription.{kind}","event_id":"x","item_id":"{item}","delta":"w","transcript":"w"}}"#
        )
    };
    hear(&mut m, &transcript("item_ghost", "delta"), 1.9);
    hear(&mut m, &transcript("item_v", "delta"), 2.0);
    hear(&mut m, &transcript("item_v", "completed"), 2.02);
    hear(&mut m, &transcript("item_v", "completed"), 2.03);
    hear(&mut m, &transcript("item_a", "delta"), 2.5);
    assert_eq!(
        hear(&mut m, &transcript("item_a", "completed"), 2.6),
        Flow::Reached
    );
    assert_eq!(m.next_action(), Action::Done);
    let counts = m.turns.as_ref().unwrap().counts;
    assert_eq!((counts.ended, counts.answered, counts.unmatched), (2, 2, 1));
    let stats = m.stats.borrow();
    let first = &stats.hist.turns.first_text_after_end;
    let near = |ms: f64, want: f64| (ms - want).abs() < 0.5;
    assert_eq!(first.count(), 2);
    // v: 2.0 − 1.64; a: 2.5 − 1.16.
    assert!(
        near(first.quantile_ms(0.0), 360.0),
        "{}",
        first.quantile_ms(0.0)
    );
    assert!(near(first.max_ms(), 1340.0), "{}", first.max_ms());
    assert_eq!(stats.error_events, 0);
}
