//! The client session machine on the native protocol, fed frames by hand: no sockets, and the
//! clock is whatever the test says it is.

use super::*;
use crate::protocol::native::{names, Native};

struct Harness {
    m: Machine,
    stats: Rc<RefCell<WorkerStats>>,
    settings: Rc<Settings>,
}

/// A machine for session 1 of worker 0 with `args` as `run` flags (1 s of 80 ms packets).
fn harness(args: &[&str]) -> Harness {
    let mut argv = vec!["-d", "1s", "-s", "2"];
    argv.extend_from_slice(args);
    harness_of(&argv, 1)
}

/// A native machine for session `session` of worker 0 of a `run` with `argv` alone.
fn harness_of(argv: &[&str], session: u32) -> Harness {
    let m = test_machine(argv, session, |_| Rc::new(Native::default()));
    let (stats, settings) = (m.stats.clone(), m.settings.clone());
    Harness { m, stats, settings }
}

fn event(kind: &str) -> String {
    format!(r#"{{"type":"{kind}","event_id":"e1"}}"#)
}

fn text_type(frame: &Outgoing) -> String {
    let Outgoing::Text(text) = frame else {
        panic!("the native protocol sends text frames")
    };
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    v["type"].as_str().unwrap().to_string()
}

impl Harness {
    fn hear(&mut self, text: &str, now_s: f64) -> Flow {
        self.m.on_frame(Incoming::Text(text), now_s).flow
    }

    /// Drives set-up to the point where streaming starts.
    fn set_up(&mut self) {
        assert_eq!(self.m.next_action(), Action::Await(names::SESSION_CREATED));
        assert_eq!(
            self.hear(&event(names::SESSION_CREATED), 0.0),
            Flow::Reached
        );
        let Action::Send(update) = self.m.next_action() else {
            panic!("session.update comes next")
        };
        assert_eq!(text_type(&update), names::SESSION_UPDATE);
        assert_eq!(self.m.next_action(), Action::Await(names::SESSION_UPDATED));
        assert_eq!(
            self.hear(&event(names::SESSION_UPDATED), 0.0),
            Flow::Reached
        );
        assert_eq!(self.m.next_action(), Action::Stream);
    }

    /// Sends packets `from..to` exactly on time from a gate at 10 s.
    fn send_on_time(&mut self, from: u32, to: u32) {
        for seq in from..to {
            let due_s = self.m.due_s(seq, 10.0);
            let mut frame = Outgoing::default();
            let scheduled_s = self.m.packet(seq, due_s, 10.0, &mut frame).0;
            assert_eq!(text_type(&frame), names::APPEND);
            self.m.sent(seq, scheduled_s, due_s, due_s + 0.0001);
        }
    }
}

#[test]
fn the_whole_native_sequence_completes_and_measures_the_server() {
    let mut h = harness(&[]);
    h.set_up();
    let packets = h.settings.packets_per_session;
    assert_eq!(packets, 13, "1 s of 80 ms packets, the last one short");
    h.send_on_time(0, packets);
    let accepted =
        r#"{"type":"sglang.input_audio.accepted","event_id":"e","seq":2,"accepted_end_ms":240.0}"#;
    assert_eq!(h.hear(accepted, 10.16 + 0.005), Flow::Continue);
    let delta = r#"{"type":"response.output_audio.delta","event_id":"e","delta":"AAAA"}"#;
    assert_eq!(h.hear(delta, 10.05), Flow::Continue);
    let unit = r#"{"type":"sglang.unit.done","event_id":"e","sglang":{"media_time":{"t_start_ms":80.0,"duration_ms":80.0}}}"#;
    assert_eq!(h.hear(unit, 10.09), Flow::Continue);
    h.m.streamed();
    let Action::Send(end) = h.m.next_action() else {
        panic!("input end comes after the last packet")
    };
    assert_eq!(text_type(&end), names::INPUT_END);
    assert_eq!(h.m.next_action(), Action::Await(names::INPUT_DRAINED));
    // Events on the way that are not the awaited one do not end the wait.
    assert_eq!(h.hear(&event(names::RESPONSE_DONE), 11.0), Flow::Continue);
    assert_eq!(h.hear(&event(names::INPUT_DRAINED), 11.1), Flow::Reached);
    let Action::Send(close) = h.m.next_action() else {
        panic!("session.close follows drained")
    };
    assert_eq!(text_type(&close), names::SESSION_CLOSE);
    assert_eq!(h.m.next_action(), Action::Await(names::SESSION_CLOSED));
    assert_eq!(h.hear(&event(names::SESSION_CLOSED), 11.2), Flow::Reached);
    assert_eq!(h.m.next_action(), Action::Done);

    let o = &h.m.outcome;
    assert_eq!(
        (o.counts.packets, o.counts.late_packets, o.protocol_errors),
        (13, 0, 0)
    );
    let stats = h.stats.borrow();
    assert_eq!(stats.counts.packets, 13);
    assert_eq!(stats.hist.accepted.count(), 1);
    assert!((stats.hist.accepted.max_ms() - 5.0).abs() < 0.1);
    // Unit 1 ends at 160 ms: it completes packet 1, whose send started at 10.08 and completed
    // 0.1 ms later; the unit lag runs from the completion, as sglang-omni's serving metrics do.
    assert_eq!(stats.hist.unit_lag.count(), 1);
    let unit_lag_ms = stats.hist.unit_lag.max_ms();
    assert!((unit_lag_ms - 9.9).abs() < 0.02, "{unit_lag_ms}");
    assert_eq!(stats.hist.first_audio.count(), 1);
}

#[test]
fn a_late_send_is_late_and_a_lost_one_is_not_moved_later() {
    let mut h = harness(&[]);
    h.set_up();
    h.send_on_time(0, 3);
    // Packet 3 leaves 150 ms late; packet 4 is still due on the original schedule.
    let scheduled_s =
        h.m.packet(3, 10.24 + 0.15, 10.0, &mut Outgoing::default())
            .0;
    assert!((scheduled_s - 10.24).abs() < 1e-9);
    h.m.sent(3, scheduled_s, 10.39, 10.3901);
    assert!((h.m.due_s(4, 10.0) - 10.32).abs() < 1e-9);
    assert_eq!(h.m.outcome.counts.late_packets, 1);
    assert_eq!(h.stats.borrow().sessions_with_late_packets, 1);
}

#[test]
fn the_heat_window_is_placed_when_its_packets_were_due_not_when_they_left() {
    let mut h = harness(&[]);
    h.set_up();
    h.send_on_time(0, 3);
    assert_eq!(h.stats.borrow_mut().take_heat().1, Some(10.16));
    // A stall: packets 3 and 4 leave 300 ms late, together; the heatmap must draw them in
    // the second they were due (10.24, 10.32 from a gate at 10 s), not when they were sent.
    h.m.sent(3, 10.24, 10.62, 10.6201);
    h.m.sent(4, 10.32, 10.62, 10.6202);
    let (cells, due_s) = h.stats.borrow_mut().take_heat();
    assert_eq!(due_s, Some(10.32));
    assert!(
        cells[1].abs_diff(380_001) <= 1,
        "the window's worst, packet 3's: {cells:?}"
    );
    assert_eq!(
        h.stats.borrow_mut().take_heat().1,
        None,
        "nothing sent since"
    );
}

#[test]
fn unsent_packets_are_late_when_due_and_not_counted_twice_when_sent() {
    let mut h = harness(&[]);
    h.set_up();
    h.send_on_time(0, 2);
    // Packet 2 (due 10.16) is still unsent at 10.25: not yet past 80 ms.
    let next = h.m.count_overdue(2, 10.0, 10.23);
    assert_eq!(h.m.outcome.counts.late_packets, 0);
    assert!((next.unwrap() - 10.24).abs() < 1e-9);
    // At 10.39 packets 2 (due 10.16) and 3 (due 10.24) are over the threshold, 4 (due 10.32)
    // not yet.
    h.m.count_overdue(2, 10.0, 10.39);
    assert_eq!(h.m.outcome.counts.late_packets, 2);
    assert_eq!(h.stats.borrow().late_windows.len(), 2);
    // Each window with its session, for matching it to that session's blocked sends.
    let session = h.m.outcome.index;
    assert_eq!(h.stats.borrow().late_sessions, [session, session]);
    // Late ones are slow ones too, sent or not (slow sends counted none of them when their
    // sessions then failed: "6 late, 0 slow").
    assert_eq!(h.m.outcome.counts.slow_sends, 2);
    assert_eq!(h.stats.borrow().counts.slow_sends, 2);
    // When packet 2 finally leaves, it is not counted again.
    let scheduled_s = h.m.packet(2, 10.42, 10.0, &mut Outgoing::default()).0;
    h.m.sent(2, scheduled_s, 10.42, 10.43);
    assert_eq!(h.m.outcome.counts.late_packets, 2);
    assert_eq!(h.m.outcome.counts.slow_sends, 2);
    assert_eq!(h.stats.borrow().sessions_with_late_packets, 1);
    // A session that fails at packet 4 never sends 4..13.
    h.m.abandon(4);
    assert_eq!(h.m.outcome.counts.unsent_packets, 9);
    assert_eq!(h.stats.borrow().counts.unsent_packets, 9);
}

#[test]
fn a_fatal_error_ends_the_session_with_its_code_and_message() {
    let mut h = harness(&[]);
    h.set_up();
    h.send_on_time(0, 2);
    let warning =
        r#"{"type":"error","sglang":{"fatal":false},"error":{"code":"slow","message":"x"}}"#;
    assert_eq!(h.hear(warning, 10.1), Flow::Continue);
    let fatal = r#"{"type":"error","event_id":"e","sglang":{"fatal":true},"error":{"type":"server_error","code":"overloaded","message":"too many sessions"}}"#;
    assert_eq!(
        h.hear(fatal, 10.2),
        Flow::End("the server ended the session with error overloaded: too many sessions".into())
    );
    assert_eq!(h.stats.borrow().error_events, 2);
}

/// sglang-omni answers a `session.update` it cannot serve with a non-fatal error naming the
/// update's `event_id`, and sends no `session.updated`: the session ends at once with the
/// server's reason instead of waiting out `--recv-timeout`. An error that names another
/// event, or none, is only counted.
#[test]
fn an_error_that_refuses_the_set_up_command_ends_the_session_at_once() {
    let mut h = harness(&[]);
    assert_eq!(h.m.next_action(), Action::Await(names::SESSION_CREATED));
    assert_eq!(h.hear(&event(names::SESSION_CREATED), 0.0), Flow::Reached);
    let Action::Send(update) = h.m.next_action() else {
        panic!("session.update comes next")
    };
    let Outgoing::Text(text) = &update else {
        panic!("a text frame")
    };
    let id = serde_json::from_str::<serde_json::Value>(text).unwrap()["event_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(h.m.next_action(), Action::Await(names::SESSION_UPDATED));
    let other = r#"{"type":"error","event_id":"e2","sglang":{"fatal":false},"error":{"type":"invalid_request_error","code":"x","message":"y","event_id":"someone-else"}}"#;
    assert_eq!(h.hear(other, 0.1), Flow::Continue);
    let unnamed = r#"{"type":"error","event_id":"e3","sglang":{"fatal":false},"error":{"code":"x","message":"y"}}"#;
    assert_eq!(h.hear(unnamed, 0.1), Flow::Continue);
    let refusal = format!(
        r#"{{"type":"error","event_id":"e4","sglang":{{"fatal":false}},"error":{{"type":"invalid_request_error","code":"invalid_request","message":"no supported output combination","param":null,"event_id":"{id}"}}}}"#
    );
    assert_eq!(
        h.hear(&refusal, 0.2),
        Flow::End(format!(
            "the server refused the session's set-up (no {} will come) with error invalid_request: no supported output combination",
            names::SESSION_UPDATED
        ))
    );
    assert_eq!(h.stats.borrow().error_events, 3);
    // The refusal left the session open: it is closed as sglang-omni's client closes it.
    let (close, answer) = h.m.goodbye().expect("a polite close");
    assert!(close.contains(r#""type":"session.close""#), "{close}");
    assert_eq!(answer, Milestone::Closed);
}

#[test]
fn a_fatal_error_is_owed_no_polite_close() {
    let mut h = harness(&[]);
    let fatal = r#"{"type":"error","sglang":{"fatal":true},"error":{"code":"internal_error","message":"boom"}}"#;
    assert!(matches!(h.hear(fatal, 0.1), Flow::End(_)));
    assert_eq!(h.m.goodbye(), None);
}

#[test]
fn an_unexpected_close_ends_the_session_naming_its_code() {
    let mut h = harness(&[]);
    h.set_up();
    let heard =
        h.m.on_frame(Incoming::Close(Some((1011, "restarting"))), 10.0);
    assert_eq!(
        heard.flow,
        Flow::End(
            "the server closed the connection mid-session (code 1011, \"restarting\")".into()
        )
    );
    assert_eq!(heard.payload, None);
}

#[test]
fn an_oversized_frame_is_a_protocol_error_that_ends_the_session() {
    let mut h = harness(&[]);
    h.set_up();
    let why = "the server sent a message over --max-message-bytes 1024".to_string();
    let heard = h.m.on_frame(Incoming::TooLarge(why.clone()), 10.0);
    assert_eq!(heard.flow, Flow::End(why.clone()));
    assert_eq!(heard.error, Some(why));
    assert_eq!(h.m.outcome.protocol_errors, 1);
}

#[test]
fn a_frame_that_does_not_fit_ends_set_up_at_once_with_the_reason_issue_14() {
    let mut h = harness(&[]);
    assert_eq!(h.m.next_action(), Action::Await(names::SESSION_CREATED));
    let heard = h.m.on_frame(Incoming::Text(r#"{"hello":"world"}"#), 0.1);
    let Flow::End(why) = heard.flow else {
        panic!("set-up must end at once")
    };
    assert!(why.contains("missing field `type`"), "{why}");
    assert_eq!(heard.payload, Some(Payload::Text), "traced as it came");
    assert_eq!(h.m.outcome.protocol_errors, 1);
}

#[test]
fn while_streaming_a_garbage_frame_is_counted_and_traced_but_not_fatal() {
    let mut h = harness(&[]);
    h.set_up();
    let heard = h.m.on_frame(Incoming::Text("not json"), 10.0);
    assert_eq!(heard.flow, Flow::Continue);
    assert!(heard.error.is_some());
    let heard = h.m.on_frame(Incoming::Binary(&[1, 2, 3]), 10.2);
    assert_eq!(
        heard.error.as_deref(),
        Some("unexpected binary frame of 3 bytes")
    );
    assert_eq!(h.m.outcome.protocol_errors, 2);
    assert_eq!(h.stats.borrow().protocol_errors, 2);
}

#[test]
fn text_that_is_not_utf8_ends_the_session_saying_the_client_closed_it() {
    let mut h = harness(&[]);
    h.set_up();
    let heard = h.m.on_frame(
        Incoming::InvalidUtf8("a text frame that is not valid UTF-8 (at byte 1)"),
        10.1,
    );
    let why = "the server sent a text frame that is not valid UTF-8 (at byte 1): the client closed the connection (code 1007, RFC 6455 §8.1)";
    assert_eq!(heard.error.as_deref(), Some(why));
    assert_eq!(heard.flow, Flow::End(why.to_string()));
    assert_eq!(h.m.outcome.protocol_errors, 1);
}

#[test]
fn a_session_stopped_at_the_gate_sends_no_end_but_closes() {
    let mut h = harness(&[]);
    h.set_up();
    h.m.streamed();
    let Action::Send(close) = h.m.next_action() else {
        panic!("close comes next")
    };
    assert_eq!(text_type(&close), names::SESSION_CLOSE);
}

#[test]
fn packet_0s_lateness_after_the_gate_is_the_sessions_start_lateness_issue_10() {
    let mut h = harness(&[]);
    h.set_up();
    // The gate opened at 10.0; packet 0 left 12 ms later (the last of a one-gate burst).
    let due_s = h.m.packet(0, 10.012, 10.0, &mut Outgoing::default()).0;
    assert!(
        (due_s - 10.012).abs() < 1e-9,
        "deviation is measured from packet 0's send"
    );
    h.m.sent(0, due_s, 10.012, 10.0121);
    let due_s = h.m.packet(1, 10.092, 10.0, &mut Outgoing::default()).0;
    h.m.sent(1, due_s, 10.092, 10.0921);
    let stats = h.stats.borrow();
    assert_eq!(stats.hist.start_lateness.count(), 1, "once per session");
    assert!((stats.hist.start_lateness.max_ms() - 12.0).abs() < 0.1);
    assert_eq!(stats.counts.late_packets, 0);
}

/// sglang-omni refuses an append it cannot take (`buffer_overflow`, …) without advancing its
/// `seq` or media time, so every later packet would be refused as out of order: the session
/// stops streaming at the first refusal with the server's reason (its own client aborts at
/// any error), rather than sending the rest to be refused and burying the cause under them.
#[test]
fn a_refused_packet_ends_the_native_stream_with_the_servers_reason() {
    let mut h = harness(&[]);
    h.set_up();
    let mut id = String::new();
    for seq in 0..4 {
        let due_s = h.m.due_s(seq, 10.0);
        let mut frame = Outgoing::default();
        let scheduled_s = h.m.packet(seq, due_s, 10.0, &mut frame).0;
        h.m.sent(seq, scheduled_s, due_s, due_s + 0.0001);
        let Outgoing::Text(text) = frame else {
            panic!("a text frame")
        };
        id = serde_json::from_str::<serde_json::Value>(&text).unwrap()["event_id"]
            .as_str()
            .unwrap()
            .to_string();
    }
    // An error naming no packet (or another client's event) is counted and streaming goes on.
    let other = r#"{"type":"error","sglang":{"fatal":false},"error":{"code":"slow","message":"x","event_id":"ffffffffffffffff"}}"#;
    assert_eq!(h.hear(other, 10.3), Flow::Continue);
    let refusal = format!(
        r#"{{"type":"error","event_id":"e","sglang":{{"fatal":false}},"error":{{"type":"invalid_request_error","code":"buffer_overflow","message":"input budget exhausted; retry this seq","param":null,"event_id":"{id}"}}}}"#
    );
    assert_eq!(
        h.hear(&refusal, 10.31),
        Flow::End(
            "the server refused packet 3 with error buffer_overflow: input budget exhausted; retry this seq; the session stopped streaming there (the server would refuse every later packet as out of order)".into()
        )
    );
    assert!(
        h.m.goodbye().is_some(),
        "a refused packet leaves the session open"
    );
}

/// A `session.closed` while the client is still streaming, before its `session.close`: a
/// server that goes on serving after it broke the protocol, which the run read as clean (the QA
/// pass of 2026-12-07); a protocol error now.
#[test]
fn a_session_closed_the_client_did_not_ask_for_is_a_protocol_error() {
    let mut h = harness_of(&["-d", "30s", "-s", "1"], 0);
    h.set_up();
    h.send_on_time(0, 10);
    let closed = r#"{"type":"session.closed","event_id":"e","client_event_id":null,"reason":"client_closed"}"#;
    let heard = h.m.on_frame(Incoming::Text(closed), 1.0);
    assert_eq!(heard.flow, Flow::Continue);
    assert!(
        heard
            .error
            .as_deref()
            .is_some_and(|e| e.contains("session.closed while the client was still streaming")),
        "{:?}",
        heard.error
    );
    assert_eq!(h.m.outcome.protocol_errors, 1);
}

/// A server more than the ring of exact send times (256 packets, 20.5 s) behind: its answer
/// to an old packet is timed from that packet's scheduled send, not dropped (dropping the
/// slowest answers made the lag read low).
#[test]
fn an_answer_to_a_packet_older_than_the_send_ring_is_timed_from_its_schedule() {
    let mut h = harness_of(&["-d", "30s", "-s", "1"], 0);
    h.set_up();
    h.send_on_time(0, 300);
    let accepted =
        r#"{"type":"sglang.input_audio.accepted","event_id":"e","seq":5,"accepted_end_ms":480.0}"#;
    // Packet 5 was due at 10.4 s; answered at 34.4 s: 24 s behind.
    assert_eq!(h.hear(accepted, 34.4), Flow::Continue);
    let recent = r#"{"type":"sglang.input_audio.accepted","event_id":"e","seq":299,"accepted_end_ms":24000.0}"#;
    assert_eq!(h.hear(recent, 33.93 + 0.01), Flow::Continue);
    // A seq no packet had (here near u64::MAX) is no sample, and no overflow.
    let absurd = r#"{"type":"sglang.input_audio.accepted","event_id":"e","seq":1e30}"#;
    assert_eq!(h.hear(absurd, 34.5), Flow::Continue);
    // The next packet may be on the wire (its send not yet returned): taken, no sample. One
    // after it was never sent: a protocol error, no sample (the QA pass of 2026-12-07: an
    // accepted of seq 99999 left the run complete, which the README says it is not).
    let errors = h.m.outcome.protocol_errors;
    let in_flight = r#"{"type":"sglang.input_audio.accepted","event_id":"e","seq":300}"#;
    assert_eq!(h.hear(in_flight, 34.5), Flow::Continue);
    assert_eq!(h.m.outcome.protocol_errors, errors);
    let unsent = r#"{"type":"sglang.input_audio.accepted","event_id":"e","seq":99999}"#;
    let heard = h.m.on_frame(Incoming::Text(unsent), 34.6);
    assert_eq!(heard.flow, Flow::Continue);
    assert!(
        heard.error.as_deref().is_some_and(|e| e.contains(
            "accepted packet 99999, which the client has not sent (it has sent packets 0 to 299)"
        )),
        "{:?}",
        heard.error
    );
    assert_eq!(h.m.outcome.protocol_errors, errors + 1);
    let stats = h.stats.borrow();
    assert_eq!(stats.hist.accepted.count(), 2, "neither answer dropped");
    let max_ms = stats.hist.accepted.max_ms();
    assert!((max_ms - 24_000.0).abs() < 24_000.0 * 0.01, "{max_ms}");
}
