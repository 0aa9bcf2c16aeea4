//! One Fun-ASR mock session without I/O: commands and audio in, frames and decode requests out.
//!
//! The server's cadence (`realtime_ws.py`: `handle_client` and `should_decode`): as an audio
//! frame comes in after `START`, a partial decode is asked for when both hold — at least
//! `--decode-interval` seconds of wall time since the last one was asked for, and enough new
//! audio since then: 480 ms until the first text came back, then the server's 960 ms chunk.
//! Never two at once, so a slow engine gives fewer, larger partials. A partial covers at most
//! `--partial-window-sec` of the newest audio (≤ 0: all of it); `duration_ms` is the audio
//! received when the decode was asked for. `STOP` asks for the final decode of the whole
//! segment (costlier when longer), sends it, then `stopped` (no final without audio). Commands
//! the server does not know get no answer. The session may `START` again.

use crate::cli::FunasrMockArgs;
use crate::protocol::funasr::names;
use crate::trace::format::json_string;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// New audio before the first partial decode (the server's `first_chunk_samples`).
pub const FIRST_DECODE_MS: f64 = 480.0;
/// New audio between partial decodes once text has come back (the server's `chunk_ms`, 960 by
/// default and not a flag of its).
pub const DECODE_CHUNK_MS: f64 = 960.0;
/// 16 kHz PCM16: bytes per ms.
const BYTES_PER_MS: f64 = 32.0;
/// Words of provisional text per second of audio decoded.
const WORDS_PER_S: f64 = 2.5;

/// A decode the session asks the engine for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decode {
    /// Audio the decode covers, in seconds (what it costs).
    pub audio_s: f64,
    pub is_final: bool,
}

#[derive(Debug)]
pub struct Session {
    interval_s: f64,
    window_ms: f64,
    never_stopped: bool,
    started: bool,
    stopping: bool,
    received_bytes: u64,
    /// Audio received when the last partial decode was asked for, in ms.
    decoded_ms: f64,
    /// A partial came back (with text: the mock's always has some); the chunk is 960 ms now.
    first_decode_done: bool,
    /// When the last partial decode was asked for (monotonic seconds). Kept across `START`,
    /// as the server keeps it for the connection.
    last_decode_s: Option<f64>,
    /// Audio came in since the cadence was last looked at: the server looks only then.
    fresh_audio: bool,
    /// The decode in flight, and the audio received when it was asked for.
    pending: Option<(Decode, f64)>,
    pub partials_sent: u64,
}

impl Session {
    pub fn new(model: &FunasrMockArgs) -> Session {
        Session {
            interval_s: model.decode_interval,
            window_ms: model.partial_window_sec * 1000.0,
            never_stopped: model.fault_never_stopped,
            started: false,
            stopping: false,
            received_bytes: 0,
            decoded_ms: 0.0,
            first_decode_done: false,
            last_decode_s: None,
            fresh_audio: false,
            pending: None,
            partials_sent: 0,
        }
    }

    fn received_ms(&self) -> f64 {
        self.received_bytes as f64 / BYTES_PER_MS
    }

    /// A text command, compared after trimming and upper-casing as the server does; one it
    /// does not know is not answered.
    pub fn on_text(&mut self, text: &str, out: &mut Vec<Utf8Bytes>) {
        let trimmed = text.trim();
        let upper = trimmed.to_uppercase();
        if upper == names::START {
            let partials_sent = self.partials_sent;
            *self = Session {
                started: true,
                partials_sent,
                ..self.fresh()
            };
            out.push(event(names::STARTED, ""));
        } else if let Some(value) = strip_prefix_ci(trimmed, &upper, names::HOTWORDS) {
            let words: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(json_string)
                .collect();
            let extra = format!(r#","hotwords":[{}]"#, words.join(","));
            out.push(event(names::HOTWORDS_SET, &extra));
        } else if let Some(value) = strip_prefix_ci(trimmed, &upper, names::POSTPROCESS_HOTWORDS) {
            let pairs: Vec<String> = postprocess_pairs(value)
                .iter()
                .map(|(wrong, right)| format!("{}:{}", json_string(wrong), json_string(right)))
                .collect();
            let extra = format!(r#","postprocess_hotwords":{{{}}}"#, pairs.join(","));
            out.push(event(names::POSTPROCESS_HOTWORDS_SET, &extra));
        } else if let Some(value) = strip_prefix_ci(trimmed, &upper, names::LANGUAGE) {
            let extra = format!(r#","language":{}"#, json_string(value.trim()));
            out.push(event(names::LANGUAGE_SET, &extra));
        } else if upper == names::COMMIT {
            // The mock endpoints as the server does by default (`--endpoint-mode server`).
            out.push(error("COMMIT requires --endpoint-mode client"));
        } else if upper == names::STOP {
            if self.started && !self.stopping {
                self.stopping = true;
                if self.received_bytes == 0 {
                    self.stopped(out);
                }
            } else if !self.started {
                self.stopped(out);
            }
        }
    }

    fn fresh(&self) -> Session {
        Session {
            interval_s: self.interval_s,
            window_ms: self.window_ms,
            never_stopped: self.never_stopped,
            started: false,
            stopping: false,
            received_bytes: 0,
            decoded_ms: 0.0,
            first_decode_done: false,
            last_decode_s: self.last_decode_s,
            fresh_audio: false,
            pending: None,
            partials_sent: 0,
        }
    }

    /// Audio: counted after `START` and before `STOP`, ignored otherwise.
    pub fn on_audio(&mut self, bytes: usize) {
        if self.started && !self.stopping {
            self.received_bytes += bytes as u64;
            self.fresh_audio = true;
        }
    }

    /// The decode to ask for at `now_s` (monotonic seconds), if any (one at a time): the final
    /// after `STOP`; a partial when audio has come in since the last look, the wall-time gap
    /// since the last partial is at least `--decode-interval` and the new audio at least the
    /// chunk.
    pub fn poll_decode(&mut self, now_s: f64) -> Option<Decode> {
        if !self.started || self.pending.is_some() {
            return None;
        }
        let received_ms = self.received_ms();
        let decode = if self.stopping {
            if received_ms == 0.0 {
                return None;
            }
            Decode {
                audio_s: received_ms / 1000.0,
                is_final: true,
            }
        } else {
            if !std::mem::take(&mut self.fresh_audio) {
                return None;
            }
            let gap_passed = self
                .last_decode_s
                .is_none_or(|last_s| now_s - last_s >= self.interval_s);
            let chunk_ms = if self.first_decode_done {
                DECODE_CHUNK_MS
            } else {
                FIRST_DECODE_MS
            };
            if !gap_passed || received_ms - self.decoded_ms < chunk_ms {
                return None;
            }
            self.decoded_ms = received_ms;
            self.last_decode_s = Some(now_s);
            let window_ms = if self.window_ms > 0.0 {
                received_ms.min(self.window_ms)
            } else {
                received_ms
            };
            Decode {
                audio_s: window_ms / 1000.0,
                is_final: false,
            }
        };
        self.pending = Some((decode, received_ms));
        Some(decode)
    }

    /// The decode in flight is done: its result (and after the final, `stopped`).
    pub fn decoded(&mut self, out: &mut Vec<Utf8Bytes>) {
        let Some((decode, received_ms)) = self.pending.take() else {
            return;
        };
        // The server's `int(total_samples * 1000 / sample_rate)`.
        let duration_ms = received_ms.floor() as u64;
        if decode.is_final {
            let text = words(self.received_ms() / 1000.0);
            out.push(Utf8Bytes::from(format!(
                r#"{{"sentences":[{{"text":{},"start":0,"end":{duration_ms}}}],"partial":"","partial_start_ms":0,"duration_ms":{duration_ms},"is_final":true}}"#,
                json_string(&text)
            )));
            self.stopped(out);
        } else {
            self.first_decode_done = true;
            let text = words(decode.audio_s);
            let start_ms = (received_ms - decode.audio_s * 1000.0).max(0.0).floor() as u64;
            self.partials_sent += 1;
            out.push(Utf8Bytes::from(format!(
                r#"{{"sentences":[],"partial":{},"partial_start_ms":{start_ms},"duration_ms":{duration_ms},"is_final":false}}"#,
                json_string(&text)
            )));
        }
    }

    fn stopped(&mut self, out: &mut Vec<Utf8Bytes>) {
        self.started = false;
        self.stopping = false;
        if !self.never_stopped {
            out.push(event(names::STOPPED, ""));
        }
    }
}

/// `value` after `prefix` when `upper` (the upper-cased text) starts with it.
fn strip_prefix_ci<'a>(text: &'a str, upper: &str, prefix: &str) -> Option<&'a str> {
    upper
        .starts_with(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

/// The pairs of a `POSTPROCESS_HOTWORDS:` payload as the server reads them
/// (`_parse_postprocess_hotwords_command`): commas and line breaks separate entries; blank ones
/// and `#` comments are skipped; `wrong=>right` (or `->`, `→`, tried in that order, split at
/// the first) maps when both sides are non-empty and is dropped otherwise; a bare word maps to
/// itself, after every mapping. A key given again keeps its first place and takes the last
/// value, as a Python dict does.
fn postprocess_pairs(payload: &str) -> Vec<(String, String)> {
    const SEPARATORS: [&str; 3] = ["=>", "->", "→"];
    // `str.splitlines`' line boundaries.
    let breaks = |c: char| {
        matches!(
            c,
            ',' | '\n'
                | '\r'
                | '\u{0b}'
                | '\u{0c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    };
    let mut explicit: Vec<(String, String)> = Vec::new();
    let mut bare: Vec<&str> = Vec::new();
    for entry in payload.split(breaks).map(str::trim) {
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        match SEPARATORS.iter().find_map(|sep| entry.split_once(sep)) {
            Some((wrong, right)) => {
                let (wrong, right) = (wrong.trim(), right.trim());
                if !wrong.is_empty() && !right.is_empty() {
                    insert(&mut explicit, wrong, right);
                }
            }
            None => bare.push(entry),
        }
    }
    for word in bare {
        insert(&mut explicit, word, word);
    }
    explicit
}

fn insert(pairs: &mut Vec<(String, String)>, key: &str, value: &str) {
    match pairs.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value.to_string(),
        None => pairs.push((key.to_string(), value.to_string())),
    }
}

fn event(name: &str, extra: &str) -> Utf8Bytes {
    Utf8Bytes::from(format!(r#"{{"event":"{name}"{extra}}}"#))
}

fn error(message: &str) -> Utf8Bytes {
    event(
        names::ERROR,
        &format!(r#","error":{}"#, json_string(message)),
    )
}

/// Stand-in text for `audio_s` of speech.
fn words(audio_s: f64) -> String {
    let n = ((audio_s * WORDS_PER_S).round() as usize).max(1);
    let mut text = String::with_capacity(n * 5);
    for k in 0..n {
        if k > 0 {
            text.push(' ');
        }
        text.push_str("word");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(out: &[Utf8Bytes]) -> Vec<serde_json::Value> {
        out.iter()
            .map(|f| serde_json::from_str(f.as_str()).unwrap())
            .collect()
    }

    /// 100 ms of audio.
    const FRAME: usize = 3200;

    #[test]
    fn start_language_hotwords_are_acknowledged_in_any_case_issue_11() {
        let mut s = Session::new(&FunasrMockArgs::default());
        let mut out = Vec::new();
        s.on_text(" start ", &mut out);
        s.on_text("language:中文", &mut out);
        s.on_text("HOTWORDS:a, b,", &mut out);
        let v = texts(&out);
        assert_eq!(v[0], serde_json::json!({"event":"started"}));
        assert_eq!(
            v[1],
            serde_json::json!({"event":"language_set","language":"中文"})
        );
        assert_eq!(
            v[2],
            serde_json::json!({"event":"hotwords_set","hotwords":["a","b"]})
        );
    }

    /// `realtime_ws.py`'s `handle_client`: no branch for an unknown command, COMMIT's error
    /// without `--endpoint-mode client`, and `postprocess_hotwords_set` with the pairs read.
    #[test]
    fn other_commands_are_answered_as_the_real_server_answers_them() {
        let mut s = Session::new(&FunasrMockArgs::default());
        let mut out = Vec::new();
        s.on_text("HELLO", &mut out);
        s.on_text("FLUSH", &mut out);
        assert!(out.is_empty(), "an unknown command gets no answer");
        s.on_text("commit", &mut out);
        s.on_text(
            "postprocess_hotwords: Fun ASR=>FunASR, a->b\nc→d, x=>, #note, word, a=>B, word",
            &mut out,
        );
        let v = texts(&out);
        assert_eq!(
            v[0],
            serde_json::json!({"event":"error","error":"COMMIT requires --endpoint-mode client"})
        );
        assert_eq!(v[1]["event"], "postprocess_hotwords_set");
        // In order: the mappings (a later `a` changes the value, not the place), then the
        // bare words mapped to themselves; `x=>` and the comment are dropped.
        let text = out[1].as_str();
        let pairs = &text[text.find(r#""postprocess_hotwords":"#).unwrap()..];
        assert_eq!(
            pairs,
            r#""postprocess_hotwords":{"Fun ASR":"FunASR","a":"B","c":"d","word":"word"}}"#
        );
    }

    /// Frames of 100 ms of audio every `frame_s` of wall time, asking after each, decodes
    /// taking `decode_ms`; the ms of audio at each decode asked for.
    fn paced(s: &mut Session, frames: u32, frame_s: f64, decode_ms: f64) -> Vec<u32> {
        let mut asked = Vec::new();
        let mut done_s = f64::INFINITY;
        for k in 1..=frames {
            let now_s = f64::from(k) * frame_s;
            s.on_audio(FRAME);
            if now_s >= done_s {
                s.decoded(&mut Vec::new());
                done_s = f64::INFINITY;
            }
            if let Some(d) = s.poll_decode(now_s) {
                assert!(!d.is_final);
                asked.push(k * 100);
                done_s = now_s + decode_ms / 1000.0;
            }
        }
        asked
    }

    #[test]
    fn partials_come_after_480_ms_then_each_960_ms_of_new_audio_when_paced() {
        let mut s = Session::new(&FunasrMockArgs::default());
        let mut out = Vec::new();
        s.on_audio(FRAME);
        assert_eq!(s.poll_decode(0.0), None, "audio before START is ignored");
        s.on_text("START", &mut out);
        // 500 ms (the first frame past 480 ms), then the first frame past 960 ms more.
        assert_eq!(paced(&mut s, 40, 0.1, 20.0), [500, 1500, 2500, 3500]);
    }

    #[test]
    fn audio_sent_faster_than_real_time_waits_for_the_decode_interval_of_wall_time() {
        let mut s = Session::new(&FunasrMockArgs::default());
        s.on_text("START", &mut Vec::new());
        // 100 ms of audio every 31.25 ms: 960 ms of audio come in 0.3 s, the gap needs 0.48 s
        // (16 frames), so each decode waits for the first frame past it.
        let asked = paced(&mut s, 100, 0.03125, 20.0);
        assert_eq!(asked, [500, 2100, 3700, 5300, 6900, 8500]);
        // With no interval, the audio alone paces the decodes.
        let mut s = Session::new(&FunasrMockArgs {
            decode_interval: 0.0,
            ..FunasrMockArgs::default()
        });
        s.on_text("START", &mut Vec::new());
        assert_eq!(
            paced(&mut s, 40, 0.02, 10.0),
            [500, 1500, 2500, 3500],
            "one frame past each 960 ms"
        );
    }

    #[test]
    fn one_decode_at_a_time_and_the_window_caps_what_a_partial_covers() {
        let mut s = Session::new(&FunasrMockArgs {
            partial_window_sec: 2.0,
            ..FunasrMockArgs::default()
        });
        s.on_text("START", &mut Vec::new());
        for _ in 0..30 {
            s.on_audio(FRAME);
        }
        let d = s.poll_decode(1.0).unwrap();
        assert!((d.audio_s - 2.0).abs() < 1e-9, "the newest 2 s: {d:?}");
        for _ in 0..20 {
            s.on_audio(FRAME);
        }
        assert_eq!(s.poll_decode(9.0), None, "one in flight");
        let mut out = Vec::new();
        s.decoded(&mut out);
        let v = texts(&out);
        assert_eq!(v[0]["partial_start_ms"], 1000);
        assert_eq!(v[0]["duration_ms"], 3000);
        // Audio that came during the decode is looked at once it is done.
        assert!(s.poll_decode(9.0).is_some());
        // ≤ 0: no cap.
        let mut s = Session::new(&FunasrMockArgs {
            partial_window_sec: 0.0,
            ..FunasrMockArgs::default()
        });
        s.on_text("START", &mut Vec::new());
        for _ in 0..30 {
            s.on_audio(FRAME);
        }
        assert!((s.poll_decode(1.0).unwrap().audio_s - 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_command_is_not_audio_so_it_does_not_trigger_a_partial() {
        let mut s = Session::new(&FunasrMockArgs::default());
        s.on_text("START", &mut Vec::new());
        for _ in 0..5 {
            s.on_audio(FRAME);
        }
        assert!(s.poll_decode(0.0).is_some());
        s.decoded(&mut Vec::new());
        for _ in 0..10 {
            s.on_audio(FRAME);
        }
        assert_eq!(s.poll_decode(0.1), None, "0.1 s after the last: too soon");
        s.on_text("LANGUAGE:en", &mut Vec::new());
        assert_eq!(
            s.poll_decode(5.0),
            None,
            "the server looks only as audio comes in"
        );
        s.on_audio(FRAME);
        assert!(s.poll_decode(5.0).is_some());
    }

    #[test]
    fn stop_gives_one_final_covering_all_audio_then_stopped_issue_11() {
        let mut s = Session::new(&FunasrMockArgs::default());
        let mut out = Vec::new();
        s.on_text("START", &mut out);
        for _ in 0..30 {
            s.on_audio(FRAME);
        }
        out.clear();
        s.on_text("STOP", &mut out);
        assert!(out.is_empty());
        let d = s.poll_decode(1.0).unwrap();
        assert!(d.is_final && (d.audio_s - 3.0).abs() < 1e-9);
        s.decoded(&mut out);
        let v = texts(&out);
        assert_eq!(v[0]["is_final"], true);
        assert_eq!(v[0]["partial"], "");
        assert_eq!(v[0]["partial_start_ms"], 0, "as the server's final");
        assert_eq!(v[0]["duration_ms"], 3000);
        assert_eq!(v[1], serde_json::json!({"event":"stopped"}));
        // Without audio, STOP is answered by stopped alone.
        let mut out = Vec::new();
        s.on_text("START", &mut out);
        s.on_text("STOP", &mut out);
        assert_eq!(texts(&out)[1], serde_json::json!({"event":"stopped"}));
    }

    #[test]
    fn the_never_stopped_fault_sends_the_final_but_not_stopped_issue_11() {
        let mut s = Session::new(&FunasrMockArgs {
            fault_never_stopped: true,
            ..FunasrMockArgs::default()
        });
        let mut out = Vec::new();
        s.on_text("START", &mut out);
        s.on_audio(FRAME);
        s.on_text("STOP", &mut out);
        s.poll_decode(1.0);
        out.clear();
        s.decoded(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(texts(&out)[0]["is_final"], true);
    }
}
