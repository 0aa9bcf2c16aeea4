//! The recognition metrics of one session, as Fun-ASR's `realtime_ws_benchmark.py` would have
//! measured the same session: fed the session's meanings and the clock, without I/O.
//!
//! The benchmark's receive loop starts with the audio and ends at `stopped`, at a gap between
//! server messages longer than `--recv-timeout`, or at a close; only what it would have seen is
//! counted, and its errors are written in its wording. Our own figures ride beside.

use crate::contract::worker::TranscriptClient;
use crate::protocol::{Meaning, Milestone};
use crate::stats::exact::{percentile, python_float};

/// Room for the lags of a session's partials before the vector grows (a minute at 0.8 s).
const LAGS_RESERVED: usize = 80;

/// What one message added to the benchmark's figures, for the worker's live tally.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counted {
    /// The client's first result came: audio start → it, in ms.
    pub first_update_ms: Option<f64>,
    /// A non-final result's response lag, in ms.
    pub lag_ms: Option<f64>,
    /// A result with a non-empty partial.
    pub partial: bool,
    pub is_final: bool,
}

pub struct Recorder {
    c: TranscriptClient,
    recv_timeout_s: f64,
    stop_sent_s: Option<f64>,
    /// The last message before the audio started: the set-up's last ack.
    set_up_done_s: Option<f64>,
    last_message_s: f64,
    /// The benchmark's receive loop is running.
    listening: bool,
    /// Why the receive loop ended early, as websockets words a close (for the error a later
    /// send would raise).
    close_detail: Option<String>,
    lags_ms: Vec<f64>,
}

impl Recorder {
    pub fn new(recv_timeout_s: f64) -> Recorder {
        Recorder {
            c: TranscriptClient::default(),
            recv_timeout_s,
            stop_sent_s: None,
            set_up_done_s: None,
            last_message_s: 0.0,
            listening: false,
            close_detail: None,
            lags_ms: Vec::with_capacity(LAGS_RESERVED),
        }
    }

    /// The connection attempt starts (the client's wall clock).
    pub fn connecting(&mut self, now_s: f64) {
        self.c.started_s = now_s;
    }

    /// The first audio frame is about to be sent: the receive loop starts.
    pub fn audio_started(&mut self, now_s: f64) {
        if self.c.audio_start_s.is_none() {
            self.c.audio_start_s = Some(now_s);
            self.c.gate_wait_s = self
                .set_up_done_s
                .map_or(0.0, |done_s| (now_s - done_s).max(0.0));
            self.last_message_s = now_s;
            self.listening = true;
        }
    }

    /// When the receive loop last heard the server (or the audio started), once it has
    /// started: its wait for the next message runs from there. A loop that already ended (a
    /// gap over `--recv-timeout`) keeps the time it last heard, so no further wait is left. A
    /// loop a `stopped` ended (one that came before STOP: a server's error, not the
    /// benchmark's wait) leaves the session's own wait to run from its start.
    pub fn last_heard_s(&self) -> Option<f64> {
        self.c
            .audio_start_s
            .filter(|_| !self.c.stopped)
            .map(|_| self.last_message_s)
    }

    /// STOP is about to be sent.
    pub fn stop_sending(&mut self, now_s: f64) {
        if self.stop_sent_s.is_none() {
            self.stop_sent_s = Some(now_s);
            self.c.send_seconds = self.c.audio_start_s.map(|a| now_s - a);
        }
    }

    /// A server message arrived at `now_s`, with its event name and meaning (`Other` for a
    /// frame the protocol could not read: the benchmark counts it all the same). Returns what
    /// it added to the live figures.
    pub fn message(&mut self, now_s: f64, event: Option<&str>, meaning: &Meaning<'_>) -> Counted {
        let mut counted = Counted::default();
        if !self.listening {
            if self.c.audio_start_s.is_none() {
                self.set_up_done_s = Some(now_s);
            }
            return counted;
        }
        if now_s - self.last_message_s > self.recv_timeout_s {
            // The benchmark's wait would have given up before this message came.
            self.timed_out();
            return counted;
        }
        self.last_message_s = now_s;
        let c = &mut self.c;
        c.messages += 1;
        if let Some(event) = event {
            match c.events.iter_mut().find(|(name, _)| name == event) {
                Some((_, n)) => *n += 1,
                None => c.events.push((event.to_string(), 1)),
            }
        }
        let at_ms = (now_s - c.audio_start_s.unwrap_or(now_s)) * 1000.0;
        match *meaning {
            Meaning::Transcript {
                is_final,
                partial_text,
                any_text,
                duration_ms,
                stopped,
            } => {
                c.result_messages += 1;
                if c.first_update_ms.is_none() {
                    c.first_update_ms = Some(at_ms);
                    counted.first_update_ms = Some(at_ms);
                }
                if any_text {
                    c.first_text_update_ms.get_or_insert(at_ms);
                }
                c.partial_messages += u64::from(partial_text);
                counted.partial = partial_text;
                counted.is_final = is_final;
                if let (false, Some(duration_ms)) = (is_final, duration_ms) {
                    self.lags_ms.push(at_ms - duration_ms);
                    counted.lag_ms = Some(at_ms - duration_ms);
                }
                if is_final {
                    c.final_messages += 1;
                    c.final_update_ms = Some(at_ms);
                    match self.stop_sent_s {
                        Some(stop_s) => c.final_after_stop_ms = Some((now_s - stop_s) * 1000.0),
                        None => c.finals_before_stop += 1,
                    }
                }
                // A `stopped` that carries sentences is a result and the loop's end.
                if stopped {
                    self.stopped(now_s);
                }
            }
            Meaning::Milestone(Milestone::Closed) => self.stopped(now_s),
            _ => {}
        }
        counted
    }

    /// `stopped` came at `now_s`: the receive loop's end.
    fn stopped(&mut self, now_s: f64) {
        self.c.stopped = true;
        self.c.stopped_after_stop_ms = self.stop_sent_s.map(|s| (now_s - s) * 1000.0);
        self.listening = false;
    }

    /// No server message came within `--recv-timeout` of the previous one.
    pub fn timed_out(&mut self) {
        if self.listening {
            self.listening = false;
            if self.c.final_messages == 0 && !self.c.stopped {
                self.c.errors.push(format!(
                    "timed out waiting for server message after {}s",
                    python_float(self.recv_timeout_s)
                ));
            }
        }
    }

    /// The connection closed while the receive loop ran; `detail` as websockets words it
    /// (`received 1000 (OK) bye; then sent 1000 (OK) bye`).
    pub fn closed(&mut self, detail: String) {
        if self.listening {
            self.listening = false;
            if self.c.final_messages == 0 && !self.c.stopped {
                self.c
                    .errors
                    .push(format!("connection closed while receiving: {detail}"));
            }
            self.close_detail = Some(detail);
        }
    }

    /// The session failed with `why`. After STOP, a wait that already ended (timed out or
    /// closed) adds nothing, as the benchmark only awaits its receive loop then; before, the
    /// failure is what its next send would raise.
    pub fn failed(&mut self, why: &str, finishing: bool) {
        if finishing && !self.listening && self.c.audio_start_s.is_some() {
            return;
        }
        let error = self.close_detail.take().unwrap_or_else(|| why.to_string());
        self.c.errors.push(error);
        self.listening = false;
    }

    /// The session is over at `ended_s`: the record, with its lag figures.
    pub fn finish(mut self, ended_s: f64) -> TranscriptClient {
        self.c.ended_s = ended_s;
        self.c.wall_seconds = ended_s - self.c.started_s - self.c.gate_wait_s;
        self.c.response_lag_ms_max = self.lags_ms.iter().copied().reduce(f64::max);
        self.c.response_lag_ms_p95 = percentile(&self.lags_ms, 95.0);
        self.c
    }
}

/// A close as websockets' `ConnectionClosed` words it.
pub fn close_detail(frame: Option<(u16, &str)>) -> String {
    match frame {
        Some((code, reason)) => {
            let name = match code {
                1000 => "OK",
                1001 => "going away",
                1002 => "protocol error",
                1003 => "unsupported data",
                1007 => "invalid frame payload data",
                1008 => "policy violation",
                1009 => "message too big",
                1011 => "internal error",
                _ => "unknown",
            };
            let reason = if reason.is_empty() {
                String::new()
            } else {
                format!(" {reason}")
            };
            format!("received {code} ({name}){reason}; then sent {code} ({name}){reason}")
        }
        None => "no close frame received or sent".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The receive loop's wait runs from when it last heard the server, also once it ended on
    /// a gap over --recv-timeout (a late message is not heard): after STOP nothing is left to
    /// wait for then.
    #[test]
    fn the_loop_keeps_when_it_last_heard_after_a_timeout() {
        let mut r = Recorder::new(2.0);
        assert_eq!(r.last_heard_s(), None, "before the audio");
        r.audio_started(10.0);
        r.message(10.5, None, &Meaning::Other);
        assert_eq!(r.last_heard_s(), Some(10.5));
        r.message(13.0, None, &Meaning::Other);
        assert_eq!(r.last_heard_s(), Some(10.5), "came after the loop gave up");
    }

    fn result(is_final: bool, partial: bool, duration_ms: f64) -> Meaning<'static> {
        Meaning::Transcript {
            is_final,
            partial_text: partial,
            any_text: partial || is_final,
            duration_ms: Some(duration_ms),
            stopped: false,
        }
    }

    /// A hand-made session on a fake clock: connect at 10.0 s, audio from 10.5 s, an empty
    /// partial at +0.40 s, partials at +0.58 s (480 ms of audio) and +1.39 s (1280 ms),
    /// STOP at +2.0 s, the final at +2.3 s, `stopped` at +2.31 s, the end at +2.35 s.
    #[test]
    fn metrics_of_a_hand_made_session_match_hand_computed_values_issue_11() {
        let mut r = Recorder::new(30.0);
        r.connecting(10.0);
        // Set-up messages come before the audio: the benchmark's receive loop does not see them.
        r.message(10.2, Some("started"), &Meaning::Milestone(Milestone::Ready));
        r.audio_started(10.5);
        r.message(10.9, None, &result(false, false, 380.0));
        r.message(11.08, None, &result(false, true, 480.0));
        r.message(11.89, None, &result(false, true, 1280.0));
        r.stop_sending(12.5);
        r.message(12.8, None, &result(true, false, 2000.0));
        r.message(
            12.81,
            Some("stopped"),
            &Meaning::Milestone(Milestone::Closed),
        );
        r.message(12.82, Some("late"), &Meaning::Other);
        let c = r.finish(12.85);
        assert_eq!(c.messages, 5);
        assert_eq!(
            (c.result_messages, c.partial_messages, c.final_messages),
            (4, 2, 1)
        );
        assert_eq!(c.events, [("stopped".to_string(), 1)]);
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-6;
        assert!(close(c.first_update_ms, 400.0), "{:?}", c.first_update_ms);
        assert!(close(c.first_text_update_ms, 580.0));
        assert!(close(c.final_update_ms, 2300.0));
        assert!(close(c.final_after_stop_ms, 300.0));
        assert!(close(c.stopped_after_stop_ms, 310.0));
        assert!(close(c.send_seconds, 2.0));
        // Connection start → end is 2.85 s, of which 0.3 s was the wait at the gate after
        // `started`: the benchmark's client would have streamed at once.
        assert!((c.gate_wait_s - 0.3).abs() < 1e-9, "{}", c.gate_wait_s);
        assert!((c.wall_seconds - 2.55).abs() < 1e-9, "{}", c.wall_seconds);
        // Lags: 400 − 380 = 20, 580 − 480 = 100, 1390 − 1280 = 110; p95 at index 1.9 → 109.
        assert!(close(c.response_lag_ms_max, 110.0));
        assert!(close(c.response_lag_ms_p95, 109.0));
        assert!(c.stopped && c.errors.is_empty());
    }

    #[test]
    fn a_final_before_stop_still_sets_the_final_figures_from_the_last_final_issue_11() {
        let mut r = Recorder::new(30.0);
        r.audio_started(0.0);
        r.message(1.0, None, &result(true, false, 1000.0));
        assert_eq!(r.c.finals_before_stop, 1);
        assert_eq!(r.c.final_after_stop_ms, None);
        r.stop_sending(2.0);
        r.message(2.5, None, &result(true, false, 2000.0));
        let c = r.finish(3.0);
        assert_eq!(c.final_messages, 2);
        assert!((c.final_after_stop_ms.unwrap() - 500.0).abs() < 1e-6);
        assert!((c.final_update_ms.unwrap() - 2500.0).abs() < 1e-6);
    }

    #[test]
    fn a_gap_longer_than_recv_timeout_ends_the_count_with_the_benchmarks_error_issue_11() {
        let mut r = Recorder::new(2.0);
        r.audio_started(0.0);
        r.message(1.0, None, &result(false, true, 480.0));
        r.message(3.5, None, &result(false, true, 1280.0));
        let c = r.finish(4.0);
        assert_eq!(c.messages, 1, "the message after the gap is not seen");
        assert_eq!(
            c.errors,
            ["timed out waiting for server message after 2.0s"]
        );
    }

    #[test]
    fn a_timeout_after_a_final_is_not_an_error_as_in_the_benchmark_issue_11() {
        let mut r = Recorder::new(2.0);
        r.audio_started(0.0);
        r.stop_sending(1.0);
        r.message(1.2, None, &result(true, false, 1000.0));
        r.timed_out();
        r.failed("no stopped within --recv-timeout 2s", true);
        let c = r.finish(3.2);
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert!(!c.stopped);
    }

    #[test]
    fn a_close_while_streaming_is_two_errors_as_the_benchmarks_send_fails_too_issue_11() {
        let mut r = Recorder::new(30.0);
        r.audio_started(0.0);
        r.closed(close_detail(Some((1011, "boom"))));
        r.failed("the server closed the connection mid-session", false);
        let c = r.finish(1.0);
        assert_eq!(
            c.errors,
            [
                "connection closed while receiving: received 1011 (internal error) boom; then sent 1011 (internal error) boom",
                "received 1011 (internal error) boom; then sent 1011 (internal error) boom"
            ]
        );
    }
}
