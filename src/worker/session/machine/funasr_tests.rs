//! The client session machine on the Fun-ASR protocol, fed frames by hand on a fake clock: the
//! flow, and the benchmark's metrics it records, against hand-computed values.

use super::*;
use crate::protocol::funasr::Funasr;

fn machine(args: &[&str]) -> Machine {
    let mut argv = vec!["--protocol", "funasr", "-s", "1"];
    argv.extend_from_slice(args);
    test_machine(&argv, 0, |s| {
        Rc::new(Funasr::new(s.language.as_deref(), s.hotwords.as_deref()))
    })
}

fn hear(m: &mut Machine, text: &str, now_s: f64) -> Flow {
    m.on_frame(Incoming::Text(text), now_s).flow
}

/// Connect at 0.0 s, START at 0.001 s, `started` at 0.01 s.
fn start(m: &mut Machine) {
    m.connecting(0.0);
    assert_eq!(
        m.next_action(),
        Action::Send(Outgoing::Text("START".into()))
    );
    m.control_sending(0.001);
    assert_eq!(m.next_action(), Action::Await("started"));
    assert_eq!(hear(m, r#"{"event":"started"}"#, 0.01), Flow::Reached);
}

const PARTIAL_500: &str =
    r#"{"sentences":[],"partial":"word","partial_start_ms":0,"duration_ms":500,"is_final":false}"#;
const FINAL: &str = r#"{"sentences":[{"text":"w","start":0,"end":5900}],"partial":"","duration_ms":5900,"is_final":true}"#;

/// Connect at 0.0 s, `started` at 0.01 s, 59 packets of 100 ms from 1.0 s, a partial at
/// 1.45 s, STOP at 7.0 s, the final at 7.3 s, `stopped` at 7.31 s, the end at 7.4 s.
#[test]
fn a_full_session_records_the_benchmarks_metrics_on_a_fake_clock_issue_11() {
    let mut m = machine(&["--language", "en"]);
    start(&mut m);
    assert_eq!(
        m.next_action(),
        Action::Send(Outgoing::Text("LANGUAGE:en".into()))
    );
    assert_eq!(m.next_action(), Action::Await("language_set"));
    let ack = r#"{"event":"language_set","language":"en"}"#;
    assert_eq!(hear(&mut m, ack, 0.02), Flow::Reached);
    assert_eq!(m.next_action(), Action::Stream);
    let packets = m.settings.packets_per_session;
    assert_eq!(packets, 59, "5.83 s of the sample in 100 ms frames");
    // One frame for every packet, as a session builds them.
    let mut frame = Outgoing::default();
    for seq in 0..packets {
        let start_s = 1.0 + f64::from(seq) * 0.1;
        let due_s = m.packet(seq, start_s, 1.0, &mut frame).0;
        assert_eq!(frame, Outgoing::Binary(m.audio.packet(seq).pcm.to_vec()));
        if seq == 0 {
            assert_eq!(m.audio.packet(0).pcm.len(), 3200);
        }
        m.sent(seq, due_s, start_s, start_s + 0.0001);
        if seq == 4 {
            assert_eq!(hear(&mut m, PARTIAL_500, 1.45), Flow::Continue);
        }
    }
    m.streamed();
    assert_eq!(m.next_action(), Action::Send(Outgoing::Text("STOP".into())));
    m.control_sending(7.0);
    assert_eq!(m.next_action(), Action::Await("stopped"));
    assert_eq!(hear(&mut m, FINAL, 7.3), Flow::Continue);
    assert_eq!(hear(&mut m, r#"{"event":"stopped"}"#, 7.31), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    m.finish(7.4, None);
    let t = m.outcome.transcripts.clone().unwrap();
    let near = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-6);
    assert_eq!(
        (t.messages, t.result_messages, t.partial_messages),
        (3, 2, 1)
    );
    assert_eq!(
        t.events,
        [("stopped".to_string(), 1)],
        "set-up acks are not counted"
    );
    assert!(near(t.first_update_ms, 450.0));
    assert!(near(t.final_update_ms, 6300.0));
    assert!(near(t.final_after_stop_ms, 300.0));
    assert!(near(t.send_seconds, 6.0));
    assert!(
        near(t.response_lag_ms_p95, -50.0),
        "450 ms after the audio start, 500 ms heard"
    );
    // 7.4 s from the connection, less the gate's 0.98 s between `language_set` and packet 0.
    assert!((t.gate_wait_s - 0.98).abs() < 1e-9, "{}", t.gate_wait_s);
    assert!((t.wall_seconds - 6.42).abs() < 1e-9, "{}", t.wall_seconds);
    assert!(t.stopped && t.errors.is_empty());
    assert_eq!(m.outcome.counts.late_packets, 0);
    // The worker's live tally saw the same figures, once each.
    let stats = m.stats.borrow();
    let live = &stats.transcripts;
    assert_eq!(live.first_update.count(), 1);
    assert!((live.first_update.quantile_ms(0.5) - 450.0).abs() < 0.5);
    assert_eq!(live.final_after_stop.count(), 1);
    assert!((live.final_after_stop.quantile_ms(0.5) - 300.0).abs() < 0.5);
    assert_eq!(live.response_lag.count(), 1);
    assert!((live.response_lag.quantile_ms(0.5) + 50.0).abs() < 0.1);
    assert_eq!((live.partials, live.finals, live.errors), (1, 1, 0));
}

#[test]
fn unpaced_packets_are_due_when_sent_so_none_is_late_issue_11() {
    let mut m = machine(&["--no-pace"]);
    assert!(matches!(m.next_action(), Action::Send(_)));
    m.next_action();
    hear(&mut m, r#"{"event":"started"}"#, 0.01);
    assert_eq!(m.next_action(), Action::Stream);
    // Every packet leaves a millisecond after the previous: far ahead of the audio clock.
    for seq in 0..10 {
        let start_s = 1.0 + f64::from(seq) * 0.001;
        let due_s = m.packet(seq, start_s, 1.0, &mut Outgoing::default()).0;
        assert_eq!(due_s, start_s);
        m.sent(seq, due_s, start_s, start_s);
    }
    assert_eq!(m.count_overdue(10, 1.0, 100.0), None);
    assert_eq!(m.outcome.counts.late_packets, 0);
}

#[test]
fn a_wait_for_stopped_that_times_out_after_the_final_is_no_benchmark_error_issue_11() {
    let mut m = machine(&["--recv-timeout", "2s"]);
    m.connecting(0.0);
    m.next_action();
    m.next_action();
    hear(&mut m, r#"{"event":"started"}"#, 0.01);
    m.next_action();
    let due_s = m.packet(0, 1.0, 1.0, &mut Outgoing::default()).0;
    m.sent(0, due_s, 1.0, 1.0);
    m.streamed();
    m.next_action();
    m.control_sending(1.1);
    hear(&mut m, FINAL, 1.2);
    m.recv_timed_out();
    m.finish(
        3.2,
        Some("no stopped: no server message for --recv-timeout 2s"),
    );
    let t = m.outcome.transcripts.clone().unwrap();
    assert!(!t.stopped);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
}

/// Streams one packet of a session set up at 0.01 s and sends STOP at 1.1 s, hearing `during`
/// (at 1.05 s) on the way.
fn stream_to_stop(m: &mut Machine, during: &[&str]) {
    m.connecting(0.0);
    m.next_action();
    m.next_action();
    hear(m, r#"{"event":"started"}"#, 0.01);
    m.next_action();
    let due_s = m.packet(0, 1.0, 1.0, &mut Outgoing::default()).0;
    m.sent(0, due_s, 1.0, 1.0);
    for text in during {
        hear(m, text, 1.05);
    }
    m.streamed();
    assert_eq!(m.next_action(), Action::Send(Outgoing::Text("STOP".into())));
    m.control_sending(1.1);
    assert_eq!(m.next_action(), Action::Await("stopped"));
}

/// Fun-ASR answers STOP with the final result, then `stopped`: a `stopped` alone ends the
/// session unfinished (the run would otherwise read complete with no final figure).
#[test]
fn stopped_without_a_final_after_stop_ends_the_session_unfinished() {
    let mut m = machine(&[]);
    stream_to_stop(&mut m, &[]);
    let Flow::End(why) = hear(&mut m, r#"{"event":"stopped"}"#, 1.2) else {
        panic!("stopped without a final ends the session");
    };
    assert!(why.contains("no final result"), "{why}");
    // A final that is not exactly `true` is no final.
    let mut m = machine(&[]);
    stream_to_stop(&mut m, &[]);
    hear(
        &mut m,
        &FINAL.replace(r#""is_final":true"#, r#""is_final":"true""#),
        1.15,
    );
    assert!(matches!(
        hear(&mut m, r#"{"event":"stopped"}"#, 1.2),
        Flow::End(_)
    ));
}

/// A `stopped` before STOP (a server's slip) ends the benchmark's receive loop, not the
/// session's wait: after STOP the session waits `--recv-timeout` from then for its own
/// `stopped`, instead of timing out at once, and the final and `stopped` complete it.
#[test]
fn a_stopped_before_stop_leaves_the_wait_after_stop_its_full_time() {
    let mut m = machine(&["--recv-timeout", "2s"]);
    stream_to_stop(&mut m, &[r#"{"event":"stopped"}"#]);
    assert_eq!(
        m.receive_loop_last_s(),
        None,
        "the wait runs from its start"
    );
    assert_eq!(hear(&mut m, FINAL, 1.15), Flow::Continue);
    assert_eq!(hear(&mut m, r#"{"event":"stopped"}"#, 1.2), Flow::Reached);
}

/// The benchmark keeps a frame it cannot parse as `{"_raw": …}` or `{"_binary_bytes": n}`: one
/// more in `messages`, none in `events`, and its client goes on. So does ours, with no protocol
/// error, whether the frame comes during set-up or while streaming.
#[test]
fn text_that_is_not_json_and_binary_frames_count_as_messages_and_end_nothing() {
    let mut m = machine(&[]);
    m.connecting(0.0);
    m.next_action();
    assert_eq!(m.next_action(), Action::Await("started"));
    let odd = m.on_frame(Incoming::Text("warming up"), 0.005);
    assert_eq!(
        (odd.payload, odd.error, odd.flow),
        (Some(Payload::Text), None, Flow::Continue)
    );
    assert_eq!(hear(&mut m, r#"{"event":"started"}"#, 0.01), Flow::Reached);
    assert_eq!(m.next_action(), Action::Stream);
    let due_s = m.packet(0, 1.0, 1.0, &mut Outgoing::default()).0;
    m.sent(0, due_s, 1.0, 1.0);
    assert_eq!(hear(&mut m, "<html>busy</html>", 1.05), Flow::Continue);
    let binary = m.on_frame(Incoming::Binary(&[0u8; 7]), 1.06);
    assert_eq!(
        (binary.payload, binary.error, binary.flow),
        (
            Some(Payload::Json { audio_key: None }),
            None,
            Flow::Continue
        )
    );
    assert_eq!(hear(&mut m, PARTIAL_500, 1.45), Flow::Continue);
    m.streamed();
    m.next_action();
    m.control_sending(2.0);
    hear(&mut m, FINAL, 2.1);
    assert_eq!(hear(&mut m, r#"{"event":"stopped"}"#, 2.11), Flow::Reached);
    m.finish(2.2, None);
    let t = m.outcome.transcripts.clone().unwrap();
    assert_eq!(m.outcome.protocol_errors, 0);
    assert_eq!(
        (t.messages, t.result_messages, t.partial_messages),
        (5, 2, 1),
        "the two odd frames after the audio start count as messages"
    );
    assert_eq!(t.events, [("stopped".to_string(), 1)]);
    assert!(t.errors.is_empty(), "{:?}", t.errors);
}

/// A server that puts its last sentences in `stopped` (`{"event":"stopped","sentences":[…]}`):
/// the frame was taken as a result only, and the session waited out --recv-timeout for a
/// `stopped` that had come, then failed. It is a result (the benchmark's definition) and the
/// end.
#[test]
fn a_stopped_that_carries_sentences_is_a_result_and_the_end() {
    let mut m = machine(&[]);
    start(&mut m);
    assert_eq!(m.next_action(), Action::Stream);
    let mut frame = Outgoing::default();
    for seq in 0..m.settings.packets_per_session {
        let start_s = 1.0 + f64::from(seq) * 0.1;
        let due_s = m.packet(seq, start_s, 1.0, &mut frame).0;
        m.sent(seq, due_s, start_s, start_s + 0.0001);
    }
    m.streamed();
    assert_eq!(m.next_action(), Action::Send(Outgoing::Text("STOP".into())));
    m.control_sending(7.0);
    assert_eq!(m.next_action(), Action::Await("stopped"));
    assert_eq!(hear(&mut m, FINAL, 7.3), Flow::Continue);
    let stopped = r#"{"event":"stopped","sentences":[{"text":"w","start":0,"end":5900}]}"#;
    assert_eq!(hear(&mut m, stopped, 7.31), Flow::Reached);
    assert_eq!(m.next_action(), Action::Done);
    m.finish(7.4, None);
    let t = m.outcome.transcripts.clone().unwrap();
    assert_eq!((t.messages, t.result_messages), (2, 2));
    assert!(t.stopped);
    assert!(t
        .stopped_after_stop_ms
        .is_some_and(|ms| (ms - 310.0).abs() < 1e-6));
    assert_eq!(t.events, [("stopped".to_string(), 1)]);
    assert!(m.outcome.error.is_none(), "{:?}", m.outcome.error);
}
