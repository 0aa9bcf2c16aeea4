//! Transitions, reply composition, bursts, tail padding and error codes of the session state
//! machine, driven by the client frames of `protocol` as our client sends them and by frames
//! shaped as the real sglang-omni client sends them (float milliseconds, uuid4 hex ids). Every
//! fact of issue #10 the mock must get right has a test here.

use super::*;
use crate::cli::MockBehaviourArgs;
use crate::profile::Profile;
use crate::protocol;
use serde_json::Value;

struct Harness {
    session: Session,
    counters: Counters,
    out: Vec<Utf8Bytes>,
}

impl Harness {
    fn new(replies_per_append: u32, burst_units: u32) -> Self {
        Harness::with(Profile::Voicechat, replies_per_append, burst_units)
    }

    fn with(profile: Profile, replies_per_append: u32, burst_units: u32) -> Self {
        let templates = Rc::new(Templates::new(&MockBehaviourArgs {
            profile,
            replies_per_append,
            burst_units,
            output_sample_rate: None,
            max_sessions: None,
            ..MockBehaviourArgs::defaults()
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

use crate::contract::mock::MockStats;

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn error_code(events: &[Value]) -> &str {
    assert_eq!(kinds(events), [names::ERROR], "{events:?}");
    assert_eq!(events[0]["sglang"]["fatal"], false);
    assert_eq!(events[0]["error"]["type"], "invalid_request_error");
    events[0]["error"]["code"].as_str().unwrap()
}

/// The code and `param` of a non-fatal error.
fn error_at(events: &[Value]) -> (&str, &Value) {
    (error_code(events), &events[0]["error"]["param"])
}

/// A `session.update` as the real client sends it, asking for `modalities`.
fn real_update(modalities: &[&str]) -> String {
    serde_json::json!({
        "type": "session.update",
        "event_id": "5f0c6b3e9d2a4e7f8a1b2c3d4e5f6a7b",
        "session": {"output_modalities": modalities},
    })
    .to_string()
}

/// An append of 16 kHz audio as the real client sends it: uuid4 hex id, `t_start_ms` as a float
/// (`80.0`).
fn real_append(seq: u64, offset_bytes: usize, pcm_bytes: usize) -> String {
    real_append_at(16_000, seq, offset_bytes, pcm_bytes)
}

/// The same at `rate` Hz.
fn real_append_at(rate: u32, seq: u64, offset_bytes: usize, pcm_bytes: usize) -> String {
    let audio = base64::engine::general_purpose::STANDARD.encode(vec![0u8; pcm_bytes]);
    let t_start_ms = offset_bytes as f64 / 2.0 / f64::from(rate) * 1000.0;
    format!(
        r#"{{"type":"input_audio_buffer.append","event_id":"{:032x}","audio":"{audio}","sglang":{{"seq":{seq},"t_start_ms":{t_start_ms:?}}}}}"#,
        0xa11ce_u128 + u128::from(seq)
    )
}

/// Every event of a whole session as the real client runs it: update, `input_ms` of input in
/// 80 ms packets (the last one short), end, close. Returns the events and the last step.
fn real_session(profile: Profile, modalities: &[&str], input_ms: usize) -> (Vec<Value>, Step) {
    let mut h = Harness::with(profile, 3, 1);
    let mut events: Vec<Value> = h
        .out
        .iter()
        .map(|f| serde_json::from_str(f.as_str()).unwrap())
        .collect();
    events.extend(h.send(&real_update(modalities)));
    // 80 ms packets at the profile's input rate.
    let rate = profile.input_sample_rate();
    let per_ms = rate as usize * 2 / 1000;
    let (total, packet) = (input_ms * per_ms, 80 * per_ms);
    let mut offset = 0;
    let mut seq = 0;
    while offset < total {
        let bytes = packet.min(total - offset);
        events.extend(h.send(&real_append_at(rate, seq, offset, bytes)));
        offset += bytes;
        seq += 1;
    }
    events.extend(h.send(r#"{"type":"sglang.input_audio.end","event_id":"e0f"}"#));
    let (step, closed) = h.send_at(r#"{"type":"session.close","event_id":"c10"}"#, 9.0);
    events.extend(closed);
    assert_eq!(h.errors(), 0, "{events:?}");
    (events, step)
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn position(events: &[Value], kind: &str) -> usize {
    events.iter().position(|e| e["type"] == kind).unwrap()
}

fn audio_bytes(events: &[Value]) -> usize {
    of_type(events, names::AUDIO_DELTA)
        .iter()
        .map(|e| {
            base64::engine::general_purpose::STANDARD
                .decode(e["delta"].as_str().unwrap())
                .unwrap()
                .len()
        })
        .sum()
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
    assert_eq!(first[0]["accepted_end_ms"], 80.0);
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
    assert_eq!(second[3]["sglang"]["unit_id"], "unit_1");
    assert_eq!(second[3]["sglang"]["media_time"]["t_start_ms"], 80.0);

    // 160 ms end on a unit boundary: the response ends with an empty unit_2.
    let end = h.send(&protocol::input_end(9));
    assert_eq!(
        kinds(&end),
        [
            names::INPUT_ENDED,
            names::TRANSCRIPT_DONE,
            names::AUDIO_DONE,
            names::RESPONSE_DONE,
            names::UNIT_DONE,
            names::INPUT_DRAINED
        ]
    );
    assert_eq!(end[0]["accepted_end_ms"], 160.0);
    assert_eq!(end[0]["tail_policy"], "pad");
    assert_eq!(end[4]["unit_id"], "unit_2");
    assert_eq!(
        end[4]["sglang"]["media_time"],
        serde_json::json!({"t_start_ms": 160.0, "duration_ms": 0.0})
    );
    assert_eq!(end[5]["padding_ms"], 0.0);
    assert_eq!(end[5]["consumed_ms"], 160.0);
    assert_eq!(end[5]["discarded_ms"], 0.0);
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
    let units: Vec<_> = third
        .iter()
        .filter(|e| e["type"] == names::UNIT_DONE)
        .map(|e| e["unit_id"].as_str().unwrap())
        .collect();
    assert_eq!(units, ["unit_0", "unit_1", "unit_2"]);

    assert_eq!(kinds(&h.append(3, PACKET)), [names::ACCEPTED]);
    let end = h.send(&protocol::input_end(5));
    assert_eq!(
        kinds(&end),
        [
            names::INPUT_ENDED,
            names::AUDIO_DELTA,
            names::UNIT_DONE,
            names::TRANSCRIPT_DONE,
            names::AUDIO_DONE,
            names::RESPONSE_DONE,
            names::UNIT_DONE,
            names::INPUT_DRAINED
        ]
    );
    assert_eq!(end[2]["unit_id"], "unit_3");
    assert_eq!(end[6]["unit_id"], "unit_4");
}

#[test]
fn short_last_packet_becomes_the_tail_unit_at_the_end_of_input() {
    let mut h = Harness::new(3, 1).configured();
    h.append(0, PACKET);
    // 1000 bytes = 31.25 ms of 16 kHz PCM16: not a whole unit, so no unit yet.
    let last = h.append(1, 1000);
    assert_eq!(kinds(&last), [names::ACCEPTED]);
    assert_eq!(last[0]["accepted_end_ms"], 111.25);
    let end = h.send(&protocol::input_end(3));
    assert_eq!(
        kinds(&end),
        [
            names::INPUT_ENDED,
            names::AUDIO_DELTA,
            names::TRANSCRIPT_DELTA,
            names::TRANSCRIPT_DONE,
            names::AUDIO_DONE,
            names::RESPONSE_DONE,
            names::UNIT_DONE,
            names::INPUT_DRAINED
        ]
    );
    // The tail's events all carry its block, its unpadded duration.
    for event in &end[1..7] {
        let tail = &event["sglang"];
        assert_eq!(tail["unit_id"], "unit_1");
        assert_eq!(tail["media_time"]["t_start_ms"], 80.0);
        assert_eq!(tail["media_time"]["duration_ms"], 31.25);
    }
    let drained = &end[7];
    assert_eq!(drained["accepted_end_ms"], 111.25);
    assert_eq!(drained["consumed_ms"], 111.25);
    assert_eq!(drained["padding_ms"], 48.75);
}

#[test]
fn append_before_update_is_refused_and_changes_nothing() {
    let mut h = Harness::new(3, 1);
    assert_eq!(error_code(&h.append(0, PACKET)), "invalid_state");
    let mut h = h.configured();
    assert_eq!(h.append(0, PACKET)[0]["seq"], 0);
    assert_eq!(h.errors(), 1);
}

#[test]
fn out_of_order_seq_is_refused_and_not_accepted() {
    let mut h = Harness::new(3, 1).configured();
    let refused = h.append(1, PACKET);
    assert_eq!(error_code(&refused), "invalid_state");
    assert_eq!(refused[0]["error"]["event_id"], format!("{:016x}", 101));
    assert_eq!(h.append(0, PACKET)[0]["seq"], 0);
    assert_eq!(error_code(&h.append(0, PACKET)), "invalid_state");
    assert_eq!(h.append(1, PACKET)[0]["seq"], 1);
    assert_eq!(h.errors(), 2);
}

#[test]
fn malformed_messages_get_sglang_omnis_codes() {
    let mut h = Harness::new(3, 1).configured();
    let null = &Value::Null;
    assert_eq!(error_at(&h.send("not json")), ("invalid_request", null));
    assert_eq!(
        error_at(&h.send(r#"{"no":"type"}"#)),
        ("invalid_request", null)
    );
    assert_eq!(
        error_at(&h.send(r#"{"type":"x.y"}"#)),
        ("not_supported", null)
    );
    assert_eq!(
        error_code(&h.send(r#"{"type":"input_audio_buffer.commit","event_id":"m"}"#)),
        "not_applicable"
    );
    assert_eq!(
        error_at(&h.send(r#"{"type":"input_audio_buffer.append","audio":"AAAA"}"#)),
        ("invalid_request", &serde_json::json!(SEQ_PARAM))
    );
    assert_eq!(
        error_at(&h.send(
            r#"{"type":"input_audio_buffer.append","audio":"AAA","sglang":{"seq":0,"t_start_ms":0}}"#
        )),
        ("invalid_request", &serde_json::json!("audio"))
    );
    // 3 bytes: not whole samples.
    assert_eq!(
        error_at(&h.send(
            r#"{"type":"input_audio_buffer.append","audio":"AAAA","sglang":{"seq":0,"t_start_ms":0}}"#
        )),
        ("invalid_request", null)
    );
    h.out.clear();
    h.session.on_binary(&h.counters, &mut h.out);
    let v: Value = serde_json::from_str(h.out[0].as_str()).unwrap();
    assert_eq!(v["error"]["code"], "invalid_request");
    let huge = h.append(0, h.session.templates.max_input_bytes + 2);
    assert_eq!(error_code(&huge), "buffer_overflow");
    assert_eq!(h.errors(), 9);
    // None of it disturbed the session.
    assert_eq!(h.append(0, PACKET)[0]["seq"], 0);
}

#[test]
fn input_after_end_is_refused_an_update_answered_and_close_still_works() {
    let mut h = Harness::new(3, 1).configured();
    h.append(0, PACKET);
    h.send(&protocol::input_end(2));
    assert_eq!(error_code(&h.append(1, PACKET)), "invalid_state");
    assert_eq!(
        error_code(&h.send(&protocol::input_end(3))),
        "invalid_state"
    );
    // sglang-omni's session is still open after the end of input: an update is answered, and
    // the input stays ended.
    assert_eq!(
        kinds(&h.send(&protocol::session_update(4))),
        [names::SESSION_UPDATED]
    );
    assert_eq!(error_code(&h.append(1, PACKET)), "invalid_state");
    let (step, closed) = h.send_at(&protocol::session_close(5), 0.0);
    assert_eq!(
        (step, kinds(&closed)),
        (Step::Close, vec![names::SESSION_CLOSED])
    );
}

#[test]
fn end_before_any_audio_drains_nothing_with_one_empty_unit() {
    let mut h = Harness::new(3, 1).configured();
    let end = h.send(&protocol::input_end(2));
    assert_eq!(
        kinds(&end),
        [
            names::INPUT_ENDED,
            names::RESPONSE_CREATED,
            names::TRANSCRIPT_DONE,
            names::AUDIO_DONE,
            names::RESPONSE_DONE,
            names::UNIT_DONE,
            names::INPUT_DRAINED
        ]
    );
    assert_eq!(end[5]["unit_id"], "unit_0");
    assert_eq!(end[5]["sglang"]["media_time"]["duration_ms"], 0.0);
    assert_eq!(end[6]["consumed_ms"], 0.0);
    assert_eq!(end[6]["padding_ms"], 0.0);
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
    assert_eq!(decoded_len("AAAA", "audio"), Ok(3));
    assert_eq!(decoded_len("AAA=", "audio"), Ok(2));
    assert_eq!(decoded_len("AAAAAA==", "audio"), Ok(4));
    assert_eq!(decoded_len("", "audio"), Ok(0));
    assert_eq!(
        decoded_len("A===", "audio").map_err(|r| r.param),
        Err(Some("audio"))
    );
    assert_eq!(
        decoded_len("AAAAA", "audio").map_err(|r| r.param),
        Err(Some("audio"))
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(vec![0u8; PACKET]);
    assert_eq!(decoded_len(&b64, "audio"), Ok(PACKET));
}

#[test]
fn long_client_text_is_quoted_short() {
    let long = "é".repeat(200);
    assert_eq!(quote(&long).chars().count(), QUOTE_CHARS);
    assert_eq!(quote("abc"), "abc");
}

// Issue #10, fact by fact, on sessions run as the real sglang-omni client runs them.

#[test]
fn float_milliseconds_and_unknown_fields_are_accepted() {
    let mut h = Harness::new(3, 1);
    let updated = h.send(r#"{"type":"session.update","event_id":"u-1","session":{"output_modalities":["audio"],"instructions":"x"},"extra":1}"#);
    assert_eq!(kinds(&updated), [names::SESSION_UPDATED]);
    let audio = base64::engine::general_purpose::STANDARD.encode(vec![0u8; PACKET]);
    let first = h.send(&format!(
        r#"{{"type":"input_audio_buffer.append","event_id":"a","audio":"{audio}","sglang":{{"seq":0,"t_start_ms":0.0,"note":"x"}},"more":[1,2]}}"#
    ));
    assert_eq!(first[0]["type"], names::ACCEPTED);
    assert_eq!(first[0]["seq"], 0);
    let second = h.send(&real_append(1, PACKET, PACKET));
    assert_eq!(second[0]["accepted_end_ms"], 160.0);
    // t_start_ms is optional: the mock counts the input itself.
    let third = h.send(&format!(
        r#"{{"type":"input_audio_buffer.append","event_id":"c","audio":"{audio}","sglang":{{"seq":2}}}}"#
    ));
    assert_eq!(third[0]["accepted_end_ms"], 240.0);
    assert_eq!(h.errors(), 0);
}

/// sglang-omni's server takes `seq` as a strict integer and `t_start_ms` as where the input
/// stands (to 1e-7 ms): a client the mock accepts must be one the server accepts.
#[test]
fn a_float_seq_or_a_t_start_ms_off_the_input_is_refused_as_the_server_refuses_it() {
    let mut h = Harness::new(3, 1).configured();
    let audio = base64::engine::general_purpose::STANDARD.encode(vec![0u8; PACKET]);
    let append = |seq: &str, t_start_ms: &str| {
        format!(
            r#"{{"type":"input_audio_buffer.append","event_id":"a{seq}","audio":"{audio}","sglang":{{"seq":{seq},"t_start_ms":{t_start_ms}}}}}"#
        )
    };
    for seq in ["0.0", "0.5", "-1", "1e0"] {
        assert_eq!(
            error_at(&h.send(&append(seq, "0"))),
            ("invalid_request", &serde_json::json!(SEQ_PARAM)),
            "seq {seq}"
        );
    }
    assert_eq!(h.send(&append("0", "0.0"))[0]["type"], names::ACCEPTED);
    // 80 ms accepted: 80.0 and 80 are where the input stands, 79.9 and 160 are not.
    for t_start_ms in ["79.9", "160", "0"] {
        assert_eq!(
            error_at(&h.send(&append("1", t_start_ms))),
            ("invalid_state", &Value::Null),
            "t_start_ms {t_start_ms}"
        );
    }
    assert_eq!(h.send(&append("1", "80.0"))[0]["seq"], 1);
    assert_eq!(h.send(&append("2", "160"))[0]["seq"], 2);
    assert_eq!(h.errors(), 7);
}

#[test]
fn session_updated_grants_every_capability_of_the_profile() {
    for (profile, asked, unit_ms, rate) in [
        (Profile::Voicechat, vec!["audio"], 80, 22_050),
        (Profile::Minicpmo, vec!["audio", "text"], 1000, 24_000),
        (Profile::Personaplex, vec!["audio"], 80, 24_000),
    ] {
        let mut h = Harness::with(profile, 3, 1);
        let updated = &h.send(&real_update(&asked))[0];
        assert_eq!(
            updated["client_event_id"],
            "5f0c6b3e9d2a4e7f8a1b2c3d4e5f6a7b"
        );
        assert_eq!(
            updated["session"]["output_modalities"],
            serde_json::json!(asked)
        );
        // MiniCPM-o's deployment states its sampling and takes a reference voice.
        let (sampling, reference) = if profile.takes_images() {
            (
                serde_json::json!([
                    "greedy",
                    "temperature",
                    "top_k",
                    "top_p",
                    "repetition_penalty",
                    "listen_prob_scale",
                    "force_listen_count",
                    "max_new_tokens_per_unit",
                    "repetition_window_size",
                    "talker_temperature",
                    "talker_repetition_penalty"
                ]),
                true,
            )
        } else {
            (serde_json::json!([]), false)
        };
        let g = &updated["session"]["sglang"]["granted"];
        let expected = serde_json::json!({
            "interaction": "native",
            "native_full_duplex": true,
            "input_audio_format": {"type": "audio/pcm", "rate": profile.input_sample_rate()},
            "output_audio_format": {"type": "audio/pcm", "rate": rate},
            "output_modalities": asked,
            "native_unit_ms": unit_ms,
            "microturn_ms": null,
            "tail_policy": "pad",
            "client_commit": false,
            "pressure_policy": "reject",
            "strict_order": true,
            "proactive_output": false,
            "supports_server_interrupt": false,
            "supports_resume": false,
            "supports_truncate": false,
            // The rest of what sglang-omni's server grants (types.py, negotiation.py).
            "turn_control": [null],
            // MiniCPM-o takes video frames too.
            "input_modalities": if profile.takes_images() { serde_json::json!(["audio", "image"]) } else { serde_json::json!(["audio"]) },
            "first_unit_ms": unit_ms,
            "partial_style": "append_only",
            "sampling_parameters": sampling,
            "supports_reference_audio": reference,
            "rejections": [],
        });
        for (key, value) in expected.as_object().unwrap() {
            assert_eq!(&g[key], value, "{profile:?} granted.{key}");
        }
        // sglang-omni's RuntimeLimits defaults, the input budget 60 s at 16 kHz whatever the
        // profile's rate (PersonaPlex passes none of its own).
        assert_eq!(
            g["limits"],
            serde_json::json!({"max_input_bytes": 60 * 16_000 * 2, "max_output_bytes": 4_194_304,
                "max_output_events": 256, "max_history_chars": 65_536, "cleanup_timeout_s": 30})
        );
        // The session as configured: its type and the audio formats, beside the grant.
        let session = &updated["session"];
        assert_eq!(session["type"], "realtime");
        assert_eq!(
            session["audio"],
            serde_json::json!({
                "input": {"format": {"type": "audio/pcm", "rate": profile.input_sample_rate()}},
                "output": {"format": {"type": "audio/pcm", "rate": rate}},
            })
        );
    }
}

#[test]
fn session_created_is_a_realtime_session_with_nothing_granted_yet() {
    let h = Harness::new(3, 1);
    let created: Value = serde_json::from_str(h.out[0].as_str()).unwrap();
    let session = &created["session"];
    assert_eq!(session["object"], "realtime.session");
    assert_eq!(session["type"], "realtime");
    assert_eq!(session["sglang"]["granted"], Value::Null);
}

#[test]
fn a_profile_grants_fewer_modalities_when_fewer_are_asked_for() {
    let mut h = Harness::with(Profile::Minicpmo, 3, 1);
    let updated = &h.send(&real_update(&["audio"]))[0];
    assert_eq!(
        updated["session"]["sglang"]["granted"]["output_modalities"],
        serde_json::json!(["audio"])
    );
    // Nothing asked: everything the profile serves.
    let mut h = Harness::with(Profile::Minicpmo, 3, 1);
    let updated = &h.send(r#"{"type":"session.update","event_id":"x"}"#)[0];
    assert_eq!(
        updated["session"]["sglang"]["granted"]["output_modalities"],
        serde_json::json!(["audio", "text"])
    );
}

#[test]
fn asking_voicechat_for_text_is_refused_with_a_fatal_error_naming_what_it_serves() {
    let mut h = Harness::new(3, 1);
    let (step, events) = h.send_at(&real_update(&["audio", "text"]), 0.0);
    assert_eq!(step, Step::Close);
    // Then `session.closed` with the error's code, as sglang-omni's server ends the session.
    assert_eq!(kinds(&events), [names::ERROR, names::SESSION_CLOSED]);
    assert_eq!(events[1]["reason"], "invalid_request");
    let error = &events[0];
    assert_eq!(error["sglang"]["fatal"], true);
    // sglang-omni's code for modalities it cannot serve; `server_error` as the error is fatal.
    assert_eq!(error["error"]["code"], "invalid_request");
    assert_eq!(error["error"]["type"], "server_error");
    assert_eq!(error["error"]["param"], "session.output_modalities");
    assert_eq!(
        error["error"]["event_id"],
        "5f0c6b3e9d2a4e7f8a1b2c3d4e5f6a7b"
    );
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"["text"]"#)
            && message.contains(r#"serves output_modalities ["audio"]"#),
        "{message}"
    );
    assert_eq!(h.session.phase(), Phase::Closed);
}

#[test]
fn every_server_event_carries_its_own_event_id() {
    for profile in Profile::ALL {
        let (events, _) = real_session(profile, profile.output_modalities(), 5000);
        let mut ids = std::collections::HashSet::new();
        for event in &events {
            let id = event["event_id"].as_str();
            assert!(id.is_some_and(|id| !id.is_empty()), "{event}");
            assert!(
                ids.insert(id.unwrap().to_string()),
                "repeated id in {event}"
            );
        }
        for kind in [
            names::SESSION_CREATED,
            names::SESSION_UPDATED,
            names::ACCEPTED,
            names::RESPONSE_CREATED,
            names::AUDIO_DELTA,
            names::UNIT_DONE,
            names::AUDIO_DONE,
            names::RESPONSE_DONE,
            names::INPUT_ENDED,
            names::INPUT_DRAINED,
            names::SESSION_CLOSED,
        ] {
            assert!(
                !of_type(&events, kind).is_empty(),
                "{profile:?} sent no {kind}"
            );
        }
    }
}

#[test]
fn response_done_is_completed_with_reason_stop() {
    let (events, _) = real_session(Profile::Voicechat, &["audio"], 400);
    let done = of_type(&events, names::RESPONSE_DONE);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["response"]["status"], "completed");
    assert_eq!(done[0]["response"]["status_details"]["reason"], "stop");
}

#[test]
fn acknowledgements_carry_the_client_event_id_they_answer() {
    let (events, step) = real_session(Profile::Voicechat, &["audio"], 400);
    let accepted = of_type(&events, names::ACCEPTED);
    for (seq, a) in accepted.iter().enumerate() {
        assert_eq!(a["seq"], seq);
        assert_eq!(
            a["client_event_id"],
            format!("{:032x}", 0xa11ce_u128 + seq as u128)
        );
    }
    assert_eq!(
        of_type(&events, names::INPUT_ENDED)[0]["client_event_id"],
        "e0f"
    );
    assert_eq!(
        of_type(&events, names::INPUT_DRAINED)[0]["client_event_id"],
        "e0f"
    );
    assert_eq!(
        of_type(&events, names::SESSION_CLOSED)[0]["client_event_id"],
        "c10"
    );
    // After session.closed the connection closes with 1000.
    assert_eq!(step, Step::Close);
}

#[test]
fn drained_reports_the_accepted_input_with_the_padding_apart() {
    for (profile, input_ms, padding_ms) in [
        (Profile::Voicechat, 5000, 40.0),
        (Profile::Voicechat, 4960, 0.0),
        (Profile::Minicpmo, 5000, 0.0),
        (Profile::Minicpmo, 4200, 800.0),
    ] {
        let (events, _) = real_session(profile, &["audio"], input_ms);
        let drained = of_type(&events, names::INPUT_DRAINED)[0];
        // Floats, as the real server's (its times are `samples_to_ms`).
        let input = input_ms as f64;
        assert_eq!(drained["accepted_end_ms"], input, "{profile:?} {input_ms}");
        assert_eq!(drained["consumed_ms"], input, "{profile:?} {input_ms}");
        assert_eq!(drained["padding_ms"], padding_ms, "{profile:?} {input_ms}");
        assert_eq!(drained["discarded_ms"], 0.0);
        let ended = of_type(&events, names::INPUT_ENDED)[0];
        assert_eq!(ended["accepted_end_ms"], input);
    }
}

/// The unit rules of issue #10 item 7 for one session of `input_ms`, with the empty unit
/// sglang-omni's server adds at the end of unit-aligned input.
fn assert_unit_rules(profile: Profile, modalities: &[&str], input_ms: u64) {
    let (events, _) = real_session(profile, modalities, input_ms as usize);
    let unit_ms = u64::from(profile.unit_ms());
    let units = of_type(&events, names::UNIT_DONE);
    let with_input = input_ms.div_ceil(unit_ms) as usize;
    let aligned = input_ms % unit_ms == 0;
    assert_eq!(
        units.len(),
        with_input + usize::from(aligned),
        "{profile:?}"
    );
    let mut total_ms = 0.0;
    for (n, unit) in units.iter().enumerate() {
        assert_eq!(unit["unit_id"], format!("unit_{n}"));
        assert_eq!(unit["sglang"]["unit_id"], format!("unit_{n}"));
        let media = &unit["sglang"]["media_time"];
        assert_eq!(media["t_start_ms"], (n as u64 * unit_ms) as f64);
        let duration_ms = media["duration_ms"].as_f64().unwrap();
        if n + 1 < with_input {
            assert_eq!(duration_ms, unit_ms as f64);
        }
        total_ms += duration_ms;
    }
    assert_eq!(total_ms, input_ms as f64, "durations add up to the input");
    let last = units[with_input - 1]["sglang"]["media_time"]["duration_ms"].as_f64();
    let tail_ms = input_ms % unit_ms;
    assert_eq!(
        last,
        Some(if tail_ms == 0 { unit_ms } else { tail_ms } as f64)
    );
    if aligned {
        let empty = &units[with_input]["sglang"]["media_time"];
        assert_eq!(empty["duration_ms"], 0.0, "the empty unit at the end");
    }
    // One unit of audio per unit with input, the padded tail included.
    let per_unit =
        crate::profile::unit_output_bytes(profile.unit_ms(), profile.output_sample_rate());
    assert_eq!(audio_bytes(&events), with_input * per_unit, "{profile:?}");
    // The response ends after the client's end, with the last unit (before its unit.done),
    // before drained; nothing of it after drained.
    let ended = position(&events, names::INPUT_ENDED);
    let done = position(&events, names::RESPONSE_DONE);
    let last_unit = events.iter().rposition(|e| e["type"] == names::UNIT_DONE);
    let drained = position(&events, names::INPUT_DRAINED);
    assert!(ended < done && Some(done + 1) == last_unit && done < drained);
    assert!(events[drained + 1..]
        .iter()
        .all(|e| !e["type"].as_str().unwrap().starts_with("response.")));
}

#[test]
fn voicechat_units_are_80ms_with_1764_samples_each() {
    assert_eq!(
        crate::profile::unit_output_bytes(80, 22_050),
        1764 * 2,
        "3528 bytes per unit at 22050 Hz"
    );
    assert_unit_rules(Profile::Voicechat, &["audio"], 5000);
    assert_unit_rules(Profile::Voicechat, &["audio"], 4960);
}

#[test]
fn minicpmo_buffers_80ms_packets_into_1000ms_units() {
    assert_unit_rules(Profile::Minicpmo, &["audio", "text"], 5000);
    assert_unit_rules(Profile::Minicpmo, &["audio"], 4200);
    // A whole unit is accepted with packet 13 (1040 ms): its replies follow that append.
    let mut h = Harness::with(Profile::Minicpmo, 3, 1);
    h.send(&real_update(&["audio", "text"]));
    for seq in 0..12 {
        let events = h.send(&real_append(seq, seq as usize * PACKET, PACKET));
        assert_eq!(kinds(&events), [names::ACCEPTED], "packet {seq}");
    }
    let thirteenth = h.send(&real_append(12, 12 * PACKET, PACKET));
    assert_eq!(
        kinds(&thirteenth),
        [
            names::ACCEPTED,
            names::RESPONSE_CREATED,
            names::AUDIO_DELTA,
            names::TEXT_DELTA,
            names::UNIT_DONE
        ]
    );
    assert_eq!(thirteenth[4]["sglang"]["media_time"]["duration_ms"], 1000.0);
}

#[test]
fn text_deltas_are_transcripts_unless_text_is_granted() {
    let (events, _) = real_session(Profile::Minicpmo, &["audio"], 1000);
    assert_eq!(of_type(&events, names::TRANSCRIPT_DELTA).len(), 1);
    assert!(of_type(&events, names::TEXT_DELTA).is_empty());
    let (events, _) = real_session(Profile::Minicpmo, &["text"], 1000);
    assert_eq!(
        of_type(&events, names::TEXT_DELTA).len(),
        2,
        "the audio's place too"
    );
    assert!(of_type(&events, names::AUDIO_DELTA).is_empty());
    assert!(of_type(&events, names::AUDIO_DONE).is_empty());
}

#[test]
fn an_output_rate_flag_overrides_the_profile_and_bursts_count_native_units() {
    let templates = Rc::new(Templates::new(&MockBehaviourArgs {
        profile: Profile::Minicpmo,
        replies_per_append: 2,
        burst_units: 2,
        output_sample_rate: Some(16_000),
        max_sessions: None,
        ..MockBehaviourArgs::defaults()
    }));
    let mut h = Harness {
        session: Session::new(templates, 2),
        counters: Counters::new(),
        out: Vec::new(),
    };
    h.send(&real_update(&["audio"]));
    let mut units = Vec::new();
    for seq in 0..26 {
        units.extend(h.send(&real_append(seq, seq as usize * PACKET, PACKET)));
    }
    // 26 packets = 2080 ms: two whole units, sent together as one burst with packet 25.
    let deltas = of_type(&units, names::AUDIO_DELTA);
    assert_eq!(deltas.len(), 2);
    assert_eq!(audio_bytes(&units), 2 * 16_000 * 2);
    assert_eq!(of_type(&units, names::UNIT_DONE).len(), 2);
}

/// The response as sglang-omni's server projects it (projection.py, protocol.py): created with
/// an empty `output`, every event of a unit carrying that unit's `sglang` block with
/// `chunk_seq` counting the session's output events from 0, the text's done event with the
/// whole text, `response.done` with the message item and no usage; `sglang.unit.done`'s own
/// `chunk_seq` 0.
#[test]
fn the_response_is_shaped_as_sglang_omni_projects_it() {
    for (profile, modalities, text_done, key) in [
        (
            Profile::Voicechat,
            &["audio"][..],
            names::TRANSCRIPT_DONE,
            "transcript",
        ),
        (
            Profile::Minicpmo,
            &["audio", "text"][..],
            names::TEXT_DONE,
            "text",
        ),
    ] {
        let (events, _) = real_session(profile, modalities, 2040);
        let created = of_type(&events, names::RESPONSE_CREATED)[0];
        assert_eq!(
            created["response"],
            serde_json::json!({"id": "resp_000001", "object": "realtime.response",
                "status": "in_progress", "output": []})
        );
        let output: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"].as_str().unwrap().starts_with("response."))
            .collect();
        for (chunk_seq, event) in output.iter().enumerate() {
            assert_eq!(event["sglang"]["chunk_seq"], chunk_seq, "{event}");
            let unit_id = event["sglang"]["unit_id"].as_str().unwrap();
            let n: u64 = unit_id.strip_prefix("unit_").unwrap().parse().unwrap();
            let media = &event["sglang"]["media_time"];
            assert_eq!(
                media["t_start_ms"],
                (n * u64::from(profile.unit_ms())) as f64
            );
        }
        assert!(of_type(&events, names::UNIT_DONE)
            .iter()
            .all(|u| u["sglang"]["chunk_seq"] == 0));
        let deltas: String = events
            .iter()
            .filter(|e| e["type"] == names::TRANSCRIPT_DELTA || e["type"] == names::TEXT_DELTA)
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        let done = of_type(&events, text_done);
        assert_eq!(done.len(), 1, "{profile:?}");
        assert_eq!(done[0][key], deltas.as_str());
        let response = &of_type(&events, names::RESPONSE_DONE)[0]["response"];
        assert_eq!(
            response["status_details"],
            serde_json::json!({"reason": "stop"})
        );
        assert_eq!(response["usage"], Value::Null);
        let item = &response["output"][0];
        assert_eq!(item["object"], "realtime.item");
        assert_eq!(
            (&item["type"], &item["role"]),
            (&"message".into(), &"assistant".into())
        );
        assert_eq!(item["id"], done[0]["item_id"]);
        let mut content = Vec::new();
        if modalities.contains(&"text") {
            content.push(serde_json::json!({"type": "output_text", "text": deltas}));
        }
        content.push(serde_json::json!({"type": "output_audio", "transcript": deltas}));
        assert_eq!(item["content"], Value::Array(content), "{profile:?}");
    }
}

/// Every key of `value` with the kind of its value (`response.output[].content[].type: string`),
/// the items of an array merged.
fn shape(value: &Value, path: &str, out: &mut std::collections::BTreeSet<String>) {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(items) => {
            for item in items {
                shape(item, &format!("{path}[]"), out);
            }
            "array"
        }
        Value::Object(map) => {
            for (key, item) in map {
                shape(item, &format!("{path}.{key}"), out);
            }
            "object"
        }
    };
    out.insert(format!("{path}: {kind}"));
}

/// docs/protocol-native.md shows server owners what the mock sends: each server event of its
/// examples has the keys (and kinds of values) of an event the mock sends.
#[test]
fn the_protocol_docs_examples_are_shaped_as_the_mock_sends() {
    let docs = include_str!("../../../docs/protocol-native.md");
    let mut sent: Vec<Value> = Vec::new();
    for (profile, modalities, input_ms) in [
        (Profile::Voicechat, &["audio"][..], 5000),
        (Profile::Minicpmo, &["audio", "text"][..], 5000),
    ] {
        sent.extend(real_session(profile, modalities, input_ms).0);
    }
    let mut h = Harness::new(3, 1);
    sent.extend(h.send(&real_update(&["audio", "text"])));
    let mut h = Harness::new(3, 1).configured();
    sent.extend(h.send(r#"{"type":"input_audio_buffer.append","event_id":"a","audio":"AAAA","sglang":{"seq":0.0}}"#));
    let mut h = Harness::with(Profile::Minicpmo, 3, 1).configured();
    sent.extend(h.send(&image_event(1001.0, JPEG)));
    let client = [
        names::SESSION_UPDATE,
        names::APPEND,
        names::IMAGE_APPEND,
        names::INPUT_END,
        names::SESSION_CLOSE,
    ];
    let mut checked = 0;
    for line in docs.lines().filter(|l| l.starts_with(r#"{"type":"#)) {
        let example: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if client.iter().any(|c| example["type"] == *c) {
            continue;
        }
        let mut want = std::collections::BTreeSet::new();
        shape(&example, "", &mut want);
        let same = sent.iter().any(|event| {
            let mut got = std::collections::BTreeSet::new();
            shape(event, "", &mut got);
            got == want
        });
        assert!(same, "no event the mock sends is shaped as\n{line}");
        checked += 1;
    }
    assert!(checked >= 17, "{checked} examples");
}

/// sglang-omni's server, on a `session.close` with the response open, ends the response first
/// (`run_close` → `finish_responses("cancelled", "client_closed")`): the transcript's done, the
/// audio's (audio went out), `response.done` cancelled for `client_closed`, none with an
/// `sglang` key; then `session.closed`. Units not yet sent are not.
#[test]
fn an_early_close_cancels_the_open_response_before_session_closed() {
    let mut h = Harness::with(Profile::Voicechat, 3, 1);
    h.send(&real_update(&["audio"]));
    for seq in 0..3u64 {
        h.send(&real_append(seq, seq as usize * PACKET, PACKET));
    }
    let (step, closed) = h.send_at(r#"{"type":"session.close","event_id":"c10"}"#, 1.0);
    assert_eq!(step, Step::Close);
    assert_eq!(
        kinds(&closed),
        [
            names::TRANSCRIPT_DONE,
            names::AUDIO_DONE,
            names::RESPONSE_DONE,
            names::SESSION_CLOSED
        ]
    );
    for event in &closed {
        assert!(event.get("sglang").is_none(), "{event}");
    }
    let response = &closed[2]["response"];
    assert_eq!(response["status"], "cancelled");
    assert_eq!(response["status_details"]["reason"], "client_closed");
    assert_eq!(response["output"][0]["content"][0]["type"], "output_audio");
    assert_eq!(closed[3]["reason"], "client_closed");
    assert_eq!(closed[3]["client_event_id"], "c10");
    assert_eq!(h.errors(), 0);

    // Closed after its response was done: session.closed alone, the response done once.
    let (events, step) = real_session(Profile::Voicechat, &["audio"], 400);
    assert_eq!(step, Step::Close);
    let dones: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == names::RESPONSE_DONE)
        .collect();
    assert_eq!(dones.len(), 1, "{events:?}");
    assert_eq!(dones[0]["response"]["status"], "completed");
    assert_eq!(events.last().unwrap()["type"], names::SESSION_CLOSED);
}

/// Before the grant, sglang-omni refuses a command with `invalid_state` ("session is not
/// OPEN"); after it, manual turns are not applicable (`client_commit` false).
#[test]
fn a_commit_before_the_grant_is_invalid_state_and_after_it_not_applicable() {
    let mut h = Harness::new(3, 1);
    let commit = r#"{"type":"input_audio_buffer.commit","event_id":"c1"}"#;
    assert_eq!(error_code(&h.send(commit)), "invalid_state");
    h.send(&real_update(&["audio"]));
    assert_eq!(error_code(&h.send(commit)), "not_applicable");
}

/// A frame as sglang-omni's duplex recorder sends one (its video probe, before the first
/// append of each 1 s unit, without looking at the grant): `t_ms` one ms into the unit.
fn image_event(t_ms: f64, image: &[u8]) -> String {
    let image = base64::engine::general_purpose::STANDARD.encode(image);
    format!(
        r#"{{"type":"sglang.input_image.append","event_id":"0f1e2d3c","image":"{image}","sglang":{{"t_ms":{t_ms:?}}}}}"#
    )
}

const JPEG: &[u8] = b"\xff\xd8\xff\xe0frame";

/// MiniCPM-o takes video frames: its grant lists `image` input with sglang-omni's
/// `input_image_format`, and a frame is answered with the unit it joins. The mock answered
/// `not_supported`, and sglang-omni's client, which aborts on any error, stopped after one
/// packet. Refused as the server refuses them: a unit already cut, more than 4 frames a unit,
/// not JPEG or PNG, too far past the input; and by a profile without image input.
#[test]
fn minicpmo_takes_video_frames_as_sglang_omnis_server_does() {
    let mut h = Harness::with(Profile::Minicpmo, 1, 1);
    let updated = h.send(&protocol::session_update(1));
    let granted = &updated[0]["session"]["sglang"]["granted"];
    assert_eq!(
        granted["input_modalities"],
        serde_json::json!(["audio", "image"])
    );
    assert_eq!(granted["input_image_format"]["max_frames_per_unit"], 4);
    assert_eq!(granted["input_image_format"]["max_bytes"], 524288);
    let accepted = h.send(&image_event(1.0, JPEG));
    assert_eq!(
        accepted[0]["type"], "sglang.input_image.accepted",
        "{accepted:?}"
    );
    assert_eq!(accepted[0]["unit_id"], "unit_0");
    assert_eq!(accepted[0]["client_event_id"], "0f1e2d3c");
    assert!(accepted[0]["event_id"].is_string());
    // A PNG for the next unit, 1 s in.
    let png = h.send(&image_event(1001.0, b"\x89PNG\r\n"));
    assert_eq!(png[0]["unit_id"], "unit_1", "{png:?}");
    // Three more for unit 0 fill it; a fifth is one too many.
    for _ in 0..3 {
        assert_eq!(h.send(&image_event(2.0, JPEG))[0]["unit_id"], "unit_0");
    }
    let full = h.send(&image_event(3.0, JPEG));
    assert_eq!(full[0]["error"]["code"], "buffer_overflow", "{full:?}");
    // Not base64 at all, with a character that a byte slice at 8 would split: refused.
    let odd = h.send(r#"{"type":"sglang.input_image.append","event_id":"x","image":"AAAAAAAéAAA","sglang":{"t_ms":1.0}}"#);
    assert_eq!(odd[0]["error"]["code"], "invalid_request", "{odd:?}");
    let gif = h.send(&image_event(4.0, b"GIF89a"));
    assert_eq!(gif[0]["error"]["code"], "invalid_request", "{gif:?}");
    assert_eq!(gif[0]["error"]["param"], "image");
    let ahead = h.send(&image_event(3500.0, JPEG));
    assert_eq!(
        ahead[0]["error"]["message"],
        "frame exceeds lookahead budget"
    );
    // 1 s of audio cuts unit 0: a frame for it now is late.
    let audio = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 32_000]);
    h.send(&protocol::append_frame(1, 0, 0, &audio));
    let late = h.send(&image_event(999.0, JPEG));
    assert_eq!(late[0]["error"]["code"], "invalid_state", "{late:?}");
    assert_eq!(late[0]["error"]["message"], "frame unit already cut");
    // VoiceChat's grant has no image input.
    let mut v = Harness::new(1, 1).configured();
    let refused = v.send(&image_event(1.0, JPEG));
    assert_eq!(refused[0]["error"]["code"], "not_supported", "{refused:?}");
    assert_eq!(refused[0]["error"]["message"], "image input is not granted");
    let granted =
        &Harness::new(1, 1).send(&protocol::session_update(1))[0]["session"]["sglang"]["granted"];
    assert_eq!(granted["input_modalities"], serde_json::json!(["audio"]));
    assert!(granted.get("input_image_format").is_none());
}

/// `input_audio_buffer.clear` drops the input not yet cut into a unit, as sglang-omni's
/// server does (`input_audio_buffer.cleared` with `sglang.discarded_ms`); the mock answered
/// `not_supported`. The units after it start where the input then stood, and `drained`
/// counts the dropped input as discarded.
#[test]
fn clear_drops_the_input_not_yet_in_a_unit() {
    let mut h = Harness::new(1, 1).configured();
    h.append(0, 2560);
    h.append(1, 1280); // 40 ms into unit 1
    let cleared = h.send(r#"{"type":"input_audio_buffer.clear","event_id":"c1"}"#);
    assert_eq!(cleared.len(), 1, "{cleared:?}");
    assert_eq!(cleared[0]["type"], "input_audio_buffer.cleared");
    assert_eq!(cleared[0]["client_event_id"], "c1");
    assert_eq!(cleared[0]["sglang"]["discarded_ms"], 40.0);
    let events = h.append_at(2, 120, 2560, 0.0);
    let done = events
        .iter()
        .find(|e| e["type"] == names::UNIT_DONE)
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(done["unit_id"], "unit_1");
    let media = events
        .iter()
        .find(|e| e["sglang"]["media_time"].is_object())
        .map(|e| e["sglang"]["media_time"]["t_start_ms"].clone());
    assert_eq!(media, Some(serde_json::json!(120.0)), "{events:?}");
    let end = h.send(&protocol::input_end(9));
    let drained = end
        .iter()
        .find(|e| e["type"] == names::INPUT_DRAINED)
        .unwrap();
    assert_eq!(drained["accepted_end_ms"], 200.0);
    assert_eq!(drained["discarded_ms"], 40.0);
    assert_eq!(drained["consumed_ms"], 160.0);
    // Before the grant, not open.
    let mut early = Harness::new(1, 1);
    let refused = early.send(r#"{"type":"input_audio_buffer.clear","event_id":"c0"}"#);
    assert_eq!(refused[0]["error"]["code"], "invalid_state");
}
