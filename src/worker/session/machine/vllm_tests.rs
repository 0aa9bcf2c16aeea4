//! The client session machine on vLLM's realtime protocol, fed frames by hand on a fake clock.

use super::*;
use crate::contract::worker::ReplyKind;
use crate::protocol::vllm::Vllm;

fn machine() -> Machine {
    let args = ["--protocol", "vllm", "--model", "m", "-s", "1"];
    test_machine(&args, 0, |s| Rc::new(Vllm::new(&s.client)))
}

/// A machine set up (created, its `session.update` and first commit sent) and streaming.
fn streaming_machine() -> Machine {
    let mut m = machine();
    m.connecting(0.0);
    assert_eq!(m.next_action(), Action::Await("session.created"));
    let created = r#"{"type":"session.created","id":"sess-1","created":1}"#;
    assert_eq!(hear(&mut m, created, 0.01), Flow::Reached);
    for (k, what) in ["session.update", "the first commit"].iter().enumerate() {
        assert!(matches!(m.next_action(), Action::Send(_)), "{what}");
        m.control_sending(0.02 + k as f64 * 0.001);
    }
    assert_eq!(m.next_action(), Action::Stream);
    m
}

fn hear(m: &mut Machine, text: &str, now_s: f64) -> Flow {
    m.on_frame(Incoming::Text(text), now_s).flow
}

/// The longest gap between replies the worker filed, in ms.
fn longest_reply_gap_ms(m: &Machine) -> f64 {
    let stats = m.stats.borrow();
    let gaps = stats
        .reply_seconds
        .iter()
        .filter(|s| s.kind == ReplyKind::DeltaGap);
    gaps.map(|s| s.max_lag_ms).fold(0.0, f64::max)
}

/// vLLM sends a delta for every 80 ms step of its model, with text or empty: a pause in speech
/// is a run of empty deltas, not the server holding its replies back (real vLLM 0.34.0 gave a
/// 1.36 s run of them at a pause of the speech sample, which the client took for a stall).
#[test]
fn empty_deltas_are_replies_so_a_pause_in_speech_is_no_reply_gap() {
    let mut m = streaming_machine();
    let mut frame = Outgoing::default();
    for seq in 0..20 {
        let start_s = 1.0 + f64::from(seq) * 0.08;
        let due_s = m.packet(seq, start_s, 1.0, &mut frame).0;
        m.sent(seq, due_s, start_s, start_s + 0.0001);
    }
    let text = r#"{"type":"transcription.delta","delta":" alpha"}"#;
    let empty = r#"{"type":"transcription.delta","delta":""}"#;
    hear(&mut m, text, 1.5);
    for k in 1..=17 {
        hear(&mut m, empty, 1.5 + f64::from(k) * 0.08);
    }
    hear(
        &mut m,
        r#"{"type":"transcription.delta","delta":" bravo"}"#,
        2.94,
    );
    let gap = longest_reply_gap_ms(&m);
    assert!(
        gap > 70.0 && gap < 90.0,
        "one model step between replies, not {gap} ms"
    );
    m.settle();
    assert_eq!(m.outcome.turns.text_deltas, 2, "empty deltas are no text");
}

/// The last packet's delta, in flight when the client commits the end of its input, then the
/// final answer the server took 200 ms to finish: that wait is the turn's `done_after_end`, not
/// a gap between replies (the QA pass of 2026-12-07: "server stall at 3.0 s" in most vLLM mock
/// runs).
#[test]
fn the_wait_for_the_final_answer_after_the_input_ends_is_no_reply_gap() {
    let mut m = streaming_machine();
    let empty = r#"{"type":"transcription.delta","delta":""}"#;
    let mut frame = Outgoing::default();
    let last = m.settings.packets_per_session - 1;
    for seq in 0..=last {
        let start_s = 1.0 + f64::from(seq) * 0.08;
        let due_s = m.packet(seq, start_s, 1.0, &mut frame).0;
        m.sent(seq, due_s, start_s, start_s + 0.0001);
        if seq < last {
            hear(&mut m, empty, start_s + 0.04);
        }
    }
    m.streamed();
    let end_s = 1.0 + f64::from(last + 1) * 0.08;
    assert!(
        matches!(m.next_action(), Action::Send(_)),
        "the final commit"
    );
    m.control_sending(end_s);
    hear(&mut m, empty, end_s + 0.0001);
    for text in [
        r#"{"type":"transcription.delta","delta":" la"}"#,
        r#"{"type":"transcription.done","text":" la"}"#,
    ] {
        hear(&mut m, text, end_s + 0.2);
    }
    let gap = longest_reply_gap_ms(&m);
    assert!(gap < 90.0, "one model step between replies, not {gap} ms");
}

/// vLLM's first realtime builds answer the input to its end and never send `done`. A server
/// that went silent mid-stream stopped answering long before the end: the timeout hint about
/// those builds is not for it (the QA pass of 2026-12-07: a server that stopped reading and
/// replying was told to upgrade vLLM).
#[test]
fn only_a_server_that_answered_to_the_inputs_end_gets_the_old_build_hint() {
    for answered_to_the_end in [true, false] {
        let mut m = streaming_machine();
        let text = r#"{"type":"transcription.delta","delta":" alpha"}"#;
        let mut frame = Outgoing::default();
        let last = m.settings.packets_per_session - 1;
        // Replies up to the end, or for the first 5 packets only (0.4 s of the input).
        let answered = if answered_to_the_end { last } else { 5 };
        for seq in 0..=last {
            let start_s = 1.0 + f64::from(seq) * 0.08;
            let due_s = m.packet(seq, start_s, 1.0, &mut frame).0;
            m.sent(seq, due_s, start_s, start_s + 0.0001);
            if seq <= answered {
                hear(&mut m, text, start_s + 0.001);
            }
        }
        m.streamed();
        assert_eq!(m.answered_to_the_end(), answered_to_the_end);
    }
}
