//! Transitions, reply composition, bursts, tail padding and error codes of the session state
//! machine, driven by the client frames of `protocol` as a real client sends them.

use super::*;
use crate::cli::MockBehaviourArgs;
use base64::Engine as _;
use serde_json::Value;

struct Harness {
    session: Session,
    counters: Counters,
    out: Vec<Utf8Bytes>,
}

impl Harness {
    fn new(replies_per_append: u32, burst_units: u32) -> Self {
        let templates = Rc::new(Templates::new(&MockBehaviourArgs {
            replies_per_append,
            burst_units,
            output_sample_rate: 24_000,
            max_sessions: None,
        }));
        let mut session = Session::new(templates, 1);
        let mut out = Vec::new();
        session.created(&mut out);
        Harness {
            session,
            counters: Counters::new(),
            out,
        }
    }

    /// Sends `text` arriving at `arrival_s`; returns the step and the events sent back.
    fn send_at(&mut self, text: &str, arrival_s: f64) -> (Step, Vec<Value>) {
        self.out.clear();
        let step = self
            .session
            .on_text(text, arrival_s, &self.counters, &mut self.out);
        let events = self
            .out
            .iter()
            .map(|f| serde_json::from_str(f.as_str()).unwrap())
            .collect();
        (step, events)
    }

    fn send(&mut self, text: &str) -> Vec<Value> {
        self.send_at(text, 0.0).1
    }

    fn configured(mut self) -> Self {
        let events = self.send(&protocol::session_update(1));
        assert_eq!(kinds(&events), [names::SESSION_UPDATED]);
        self
    }

    fn append(&mut self, seq: u32, pcm_bytes: usize) -> Vec<Value> {
        self.append_at(seq, u64::from(seq) * 80, pcm_bytes, 0.0)
    }

    fn append_at(&mut self, seq: u32, t_start_ms: u64, pcm_bytes: usize, at_s: f64) -> Vec<Value> {
        let audio = base64::engine::general_purpose::STANDARD.encode(vec![0u8; pcm_bytes]);
        let frame = protocol::append_frame(100 + u64::from(seq), seq, t_start_ms, &audio);
        self.send_at(&frame, at_s).1
    }

    fn errors(&self) -> u64 {
        MockStats::build(&self.counters, "", Default::default(), Default::default()).protocol_errors
    }
}

use super::super::stats::MockStats;

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn error_code(events: &[Value]) -> &str {
    assert_eq!(kinds(events), [names::ERROR], "{events:?}");
    assert_eq!(events[0]["sglang"]["fatal"], false);
    assert_eq!(events[0]["error"]["type"], "invalid_request_error");
    events[0]["error"]["code"].as_str().unwrap()
}

const PACKET: usize = 2560;

#[test]
fn full_session_walks_every_phase() {
    let h = Harness::new(3, 1);
    let created: Value = serde_json::from_str(h.out[0].as_str()).unwrap();
    assert_eq!(created["type"], names::SESSION_CREATED);
    assert_eq!(created["session"]["sglang"]["granted"], Value::Null);
    assert_eq!(h.session.phase(), Phase::AwaitingUpdate);

    let mut h = h.configured();
    assert_eq!(h.session.phase(), Phase::Streaming);

    let first = h.append(0, PACKET);
    assert_eq!(
        kinds(&first),
        [
            names::ACCEPTED,
            names::RESPONSE_CREATED,
            names::AUDIO_DELTA,
            names::TRANSCRIPT_DELTA,
            names::UNIT_DONE
        ]
    );
    assert_eq!(first[0]["seq"], 0);
    assert_eq!(first[0]["accepted_end_ms"], 80);
    assert_eq!(first[0]["client_event_id"], format!("{:016x}", 100));
    let second = h.append(1, PACKET);
    assert_eq!(
        kinds(&second),
        [
            names::ACCEPTED,
            names::AUDIO_DELTA,
            names::TRANSCRIPT_DELTA,
            names::UNIT_DONE
        ]
    );
    assert_eq!(second[3]["sglang"]["chunk_seq"], 1);
    assert_eq!(second[3]["sglang"]["media_time"]["t_start_ms"], 80);

    let end = h.send(&protocol::input_end(9));
    assert_eq!(
        kinds(&end),
        [
            names::INPUT_ENDED,
            names::AUDIO_DONE,
            names::RESPONSE_DONE,
            names::INPUT_DRAINED
        ]
    );
    assert_eq!(end[0]["accepted_end_ms"], 160);
    assert_eq!(end[0]["tail_policy"], "pad");
    assert_eq!(end[3]["padding_ms"], 0);
    assert_eq!(end[3]["consumed_ms"], 160);
    assert_eq!(end[3]["discarded_ms"], 0);
    assert_eq!(h.session.phase(), Phase::Ended);

    let (step, closed) = h.send_at(&protocol::session_close(10), 1.0);
    assert_eq!(step, Step::Close);
    assert_eq!(kinds(&closed), [names::SESSION_CLOSED]);
    assert_eq!(closed[0]["reason"], "client_closed");
    assert_eq!(h.session.phase(), Phase::Closed);
    assert_eq!(h.errors(), 0);
}

#[test]
fn no_replies_means_no_response_at_all() {
    let mut h = Harness::new(0, 1).configured();
    assert_eq!(kinds(&h.append(0, PACKET)), [names::ACCEPTED]);
    let end = h.send(&protocol::input_end(2));
    assert_eq!(kinds(&end), [names::INPUT_ENDED, names::INPUT_DRAINED]);
}

#[test]
fn one_reply_is_the_unit_done_alone() {
    let mut h = Harness::new(1, 1).configured();
    assert_eq!(
        kinds(&h.append(0, PACKET)),
        [names::ACCEPTED, names::RESPONSE_CREATED, names::UNIT_DONE]
    );
}

#[test]
fn bursts_hold_units_until_full_and_flush_the_rest_at_end() {
    let mut h = Harness::new(2, 3).configured();
    assert_eq!(kinds(&h.append(0, PACKET)), [names::ACCEPTED]);
    assert_eq!(kinds(&h.append(1, PACKET)), [names::ACCEPTED]);
    let third = h.append(2, PACKET);
    assert_eq!(third.len(), 1 + 1 + 3 * 2, "{:?}", kinds(&third));
    assert_eq!(
        kinds(&third)[..2],
        [names::ACCEPTED, names::RESPONSE_CREATED]
    );
    let chunk_seqs: Vec<_> = third
        .iter()
        .filter(|e| e["type"] == names::UNIT_DONE)
        .map(|e| e["sglang"]["chunk_seq"].as_u64().unwrap())
        .collect();
    assert_eq!(chunk_seqs, [0, 1, 2]);

    assert_eq!(kinds(&h.append(3, PACKET)), [names::ACCEPTED]);
    let end = h.send(&protocol::input_end(5));
    assert_eq!(
        kinds(&end),
        [
            names::INPUT_ENDED,
            names::AUDIO_DELTA,
            names::UNIT_DONE,
            names::AUDIO_DONE,
            names::RESPONSE_DONE,
            names::INPUT_DRAINED
        ]
    );
    assert_eq!(end[2]["sglang"]["chunk_seq"], 3);
}

#[test]
fn short_last_packet_is_padded_to_the_unit_boundary() {
    let mut h = Harness::new(3, 1).configured();
    h.append(0, PACKET);
    // 1000 bytes = 31.25 ms of 16 kHz PCM16.
    let last = h.append(1, 1000);
    assert_eq!(last[0]["accepted_end_ms"], 111.25);
    assert_eq!(last[3]["sglang"]["media_time"]["duration_ms"], 31.25);
    let end = h.send(&protocol::input_end(3));
    let drained = &end[3];
    assert_eq!(drained["type"], names::INPUT_DRAINED);
    assert_eq!(drained["accepted_end_ms"], 111.25);
    assert_eq!(drained["padding_ms"], 48.75);
    assert_eq!(drained["consumed_ms"], 160);
}

#[test]
fn tail_padding_is_zero_on_a_boundary() {
    assert_eq!(tail_padding_ms(0.0), 0.0);
    assert_eq!(tail_padding_ms(160.0), 0.0);
    assert_eq!(tail_padding_ms(360.0), 40.0);
    assert_eq!(tail_padding_ms(79.5), 0.5);
}

#[test]
fn append_before_update_is_refused_and_changes_nothing() {
    let mut h = Harness::new(3, 1);
    assert_eq!(error_code(&h.append(0, PACKET)), "session_not_configured");
    let mut h = h.configured();
    assert_eq!(h.append(0, PACKET)[0]["seq"], 0);
    assert_eq!(h.errors(), 1);
}

#[test]
fn out_of_order_seq_is_refused_and_not_accepted() {
    let mut h = Harness::new(3, 1).configured();
    let refused = h.append(1, PACKET);
    assert_eq!(error_code(&refused), "seq_out_of_order");
    assert_eq!(refused[0]["error"]["event_id"], format!("{:016x}", 101));
    assert_eq!(h.append(0, PACKET)[0]["seq"], 0);
    assert_eq!(error_code(&h.append(0, PACKET)), "seq_out_of_order");
    assert_eq!(h.append(1, PACKET)[0]["seq"], 1);
    assert_eq!(h.errors(), 2);
}

#[test]
fn malformed_messages_get_specific_codes() {
    let mut h = Harness::new(3, 1).configured();
    assert_eq!(error_code(&h.send("not json")), "invalid_json");
    assert_eq!(error_code(&h.send(r#"{"no":"type"}"#)), "invalid_json");
    assert_eq!(error_code(&h.send(r#"{"type":"x.y"}"#)), "unknown_event");
    assert_eq!(
        error_code(&h.send(r#"{"type":"input_audio_buffer.append","audio":"AAAA"}"#)),
        "missing_field"
    );
    assert_eq!(
        error_code(&h.send(
            r#"{"type":"input_audio_buffer.append","audio":"AAA","sglang":{"seq":0,"t_start_ms":0}}"#
        )),
        "invalid_audio"
    );
    // 3 bytes: not whole samples.
    assert_eq!(
        error_code(&h.send(
            r#"{"type":"input_audio_buffer.append","audio":"AAAA","sglang":{"seq":0,"t_start_ms":0}}"#
        )),
        "invalid_audio"
    );
    h.out.clear();
    h.session.on_binary(&h.counters, &mut h.out);
    let v: Value = serde_json::from_str(h.out[0].as_str()).unwrap();
    assert_eq!(v["error"]["code"], "binary_not_supported");
    let huge = h.append(0, replies::MAX_APPEND_BYTES + 2);
    assert_eq!(error_code(&huge), "append_too_large");
    assert_eq!(h.errors(), 8);
    // None of it disturbed the session.
    assert_eq!(h.append(0, PACKET)[0]["seq"], 0);
}

#[test]
fn input_after_end_is_refused_but_close_still_works() {
    let mut h = Harness::new(3, 1).configured();
    h.append(0, PACKET);
    h.send(&protocol::input_end(2));
    assert_eq!(error_code(&h.append(1, PACKET)), "input_ended");
    assert_eq!(error_code(&h.send(&protocol::input_end(3))), "input_ended");
    assert_eq!(
        error_code(&h.send(&protocol::session_update(4))),
        "input_ended"
    );
    let (step, closed) = h.send_at(&protocol::session_close(5), 0.0);
    assert_eq!(
        (step, kinds(&closed)),
        (Step::Close, vec![names::SESSION_CLOSED])
    );
}

#[test]
fn end_before_any_audio_drains_nothing() {
    let mut h = Harness::new(3, 1).configured();
    let end = h.send(&protocol::input_end(2));
    assert_eq!(kinds(&end), [names::INPUT_ENDED, names::INPUT_DRAINED]);
    assert_eq!(end[1]["consumed_ms"], 0);
    assert_eq!(end[1]["padding_ms"], 0);
}

#[test]
fn arrival_deviation_is_measured_from_seq_0() {
    let mut h = Harness::new(0, 1).configured();
    h.append_at(0, 0, PACKET, 100.0);
    h.append_at(1, 80, PACKET, 100.080);
    h.append_at(2, 160, PACKET, 100.200);
    let stats = MockStats::build(&h.counters, "", Default::default(), Default::default());
    assert!(
        (stats.arrival_deviation_ms.max - 40.0).abs() < 0.1,
        "{stats:?}"
    );
    assert!(stats.arrival_deviation_ms.p50 < 0.1, "{stats:?}");
    assert_eq!(stats.appends_received, 3);
}

#[test]
fn decoded_length_comes_from_the_base64_length() {
    assert_eq!(
        decoded_len("AAAA"),
        Err("`audio` decodes to 3 bytes, not whole PCM16 samples".into())
    );
    assert_eq!(decoded_len("AAA="), Ok(2));
    assert_eq!(decoded_len("AAAAAA=="), Ok(4));
    assert!(decoded_len("").is_err());
    assert!(decoded_len("A===").is_err());
    let b64 = base64::engine::general_purpose::STANDARD.encode(vec![0u8; PACKET]);
    assert_eq!(decoded_len(&b64), Ok(PACKET));
}

#[test]
fn long_client_text_is_quoted_short() {
    let long = "é".repeat(200);
    assert_eq!(quote(&long).chars().count(), QUOTE_CHARS);
    assert_eq!(quote("abc"), "abc");
}
