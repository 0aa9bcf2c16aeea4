//! One Fun-ASR mock session without I/O: commands and audio in, frames and decode requests out.
//!
//! The server's cadence: after `START`, the first partial decode once 480 ms of audio have
//! arrived, then one each `--decode-interval` of new audio — never two at once, so a slow
//! engine gives fewer, larger partials. A partial covers at most `--partial-window-sec` of the
//! newest audio; `duration_ms` is the audio received when the decode was asked for. `STOP`
//! asks for the final decode of the whole segment (costlier when longer), sends it, then
//! `stopped` (no final without audio). The session may `START` again.

use crate::cli::FunasrMockArgs;
use crate::protocol::funasr::names;
use crate::trace::format::json_string;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// Audio before the first partial decode.
pub const FIRST_DECODE_MS: f64 = 480.0;
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
    interval_ms: f64,
    window_ms: f64,
    never_stopped: bool,
    started: bool,
    stopping: bool,
    received_bytes: u64,
    /// Audio received when the last partial decode was asked for, in ms.
    decoded_ms: f64,
    /// The decode in flight, and the audio received when it was asked for.
    pending: Option<(Decode, f64)>,
    pub partials_sent: u64,
}

impl Session {
    pub fn new(model: &FunasrMockArgs) -> Session {
        Session {
            interval_ms: model.decode_interval * 1000.0,
            window_ms: model.partial_window_sec * 1000.0,
            never_stopped: model.fault_never_stopped,
            started: false,
            stopping: false,
            received_bytes: 0,
            decoded_ms: 0.0,
            pending: None,
            partials_sent: 0,
        }
    }

    fn received_ms(&self) -> f64 {
        self.received_bytes as f64 / BYTES_PER_MS
    }

    /// A text command, compared after trimming and upper-casing as the server does.
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
        } else if let Some(value) = strip_prefix_ci(trimmed, &upper, names::LANGUAGE) {
            let extra = format!(r#","language":{}"#, json_string(value.trim()));
            out.push(event(names::LANGUAGE_SET, &extra));
        } else if let Some(value) = strip_prefix_ci(trimmed, &upper, names::HOTWORDS) {
            let words: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(json_string)
                .collect();
            let extra = format!(r#","hotwords":[{}]"#, words.join(","));
            out.push(event(names::HOTWORDS_SET, &extra));
        } else if upper == names::STOP {
            if self.started && !self.stopping {
                self.stopping = true;
                if self.received_bytes == 0 {
                    self.stopped(out);
                }
            } else if !self.started {
                self.stopped(out);
            }
        } else if upper == names::COMMIT {
            out.push(error("COMMIT needs --endpoint-mode client"));
        } else {
            let quoted: String = trimmed.chars().take(40).collect();
            out.push(error(&format!("unknown command: {quoted}")));
        }
    }

    fn fresh(&self) -> Session {
        Session {
            interval_ms: self.interval_ms,
            window_ms: self.window_ms,
            never_stopped: self.never_stopped,
            started: false,
            stopping: false,
            received_bytes: 0,
            decoded_ms: 0.0,
            pending: None,
            partials_sent: 0,
        }
    }

    /// Audio: counted after `START` and before `STOP`, ignored otherwise.
    pub fn on_audio(&mut self, bytes: usize) {
        if self.started && !self.stopping {
            self.received_bytes += bytes as u64;
        }
    }

    /// The decode to ask for now, if any (one at a time): the final after `STOP`, a partial
    /// once enough new audio has arrived.
    pub fn poll_decode(&mut self) -> Option<Decode> {
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
            let due_ms = if self.decoded_ms == 0.0 {
                FIRST_DECODE_MS
            } else {
                self.decoded_ms + self.interval_ms
            };
            if received_ms < due_ms {
                return None;
            }
            self.decoded_ms = received_ms;
            Decode {
                audio_s: received_ms.min(self.window_ms) / 1000.0,
                is_final: false,
            }
        };
        self.pending = Some((decode, received_ms));
        Some(decode)
    }

    /// The decode in flight is done: its result (and after the final, `stopped`).
    pub fn decoded(&mut self, out: &mut Vec<Utf8Bytes>) {
        let Some((decode, duration_ms)) = self.pending.take() else {
            return;
        };
        let duration_ms = duration_ms.round() as u64;
        if decode.is_final {
            let text = words(self.received_ms() / 1000.0);
            out.push(Utf8Bytes::from(format!(
                r#"{{"sentences":[{{"text":{},"start":0,"end":{duration_ms}}}],"partial":"","partial_start_ms":{duration_ms},"duration_ms":{duration_ms},"is_final":true}}"#,
                json_string(&text)
            )));
            self.stopped(out);
        } else {
            let text = words(decode.audio_s);
            let start_ms = (duration_ms as f64 - decode.audio_s * 1000.0)
                .max(0.0)
                .round() as u64;
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
        s.on_text("COMMIT", &mut out);
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
        assert_eq!(v[3]["event"], "error");
    }

    #[test]
    fn partials_come_after_480_ms_then_each_interval_one_at_a_time_issue_11() {
        let mut s = Session::new(&FunasrMockArgs::default());
        let mut out = Vec::new();
        s.on_audio(FRAME);
        assert_eq!(s.poll_decode(), None, "audio before START is ignored");
        s.on_text("START", &mut out);
        out.clear();
        let mut asked = Vec::new();
        for k in 1..=20 {
            s.on_audio(FRAME);
            if let Some(d) = s.poll_decode() {
                asked.push(k * 100);
                assert!(!d.is_final);
                s.decoded(&mut out);
            }
        }
        // 500 ms (the first frame past 480 ms), then every 800 ms of new audio.
        assert_eq!(asked, [500, 1300]);
        let v = texts(&out);
        assert_eq!(v[0]["duration_ms"], 500);
        assert_eq!(v[0]["is_final"], false);
        assert_eq!(v[1]["duration_ms"], 1300);
        // 1 s more (3 s in all): one decode of the whole window, and while it is in flight
        // no other.
        for _ in 0..10 {
            s.on_audio(FRAME);
        }
        let d = s.poll_decode().unwrap();
        assert!((d.audio_s - 3.0).abs() < 1e-9, "{d:?}");
        for _ in 0..10 {
            s.on_audio(FRAME);
        }
        assert_eq!(s.poll_decode(), None);
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
        let d = s.poll_decode().unwrap();
        assert!(d.is_final && (d.audio_s - 3.0).abs() < 1e-9);
        s.decoded(&mut out);
        let v = texts(&out);
        assert_eq!(v[0]["is_final"], true);
        assert_eq!(v[0]["partial"], "");
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
        s.poll_decode();
        out.clear();
        s.decoded(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(texts(&out)[0]["is_final"], true);
    }
}
