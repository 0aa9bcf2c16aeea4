//! sglang-omni's serving metrics of one native session, as its `benchmarks/duplex/serving_metrics.py`
//! defines them, taken as the session goes (that script reads them back from the trace and the
//! receipts after the run): every value it lists goes into a histogram, so that a session's
//! memory does not grow with its length. docs/metrics.md ("sglang-omni's serving metrics")
//! defines each figure and says where ours may differ from theirs.
//!
//! Times are the session's: `gate_s` is the receipts' `session_start_s` (the start gate plus the
//! session's stagger), packet `seq` is scheduled at `gate_s + seq × packet`, a unit `k` ends at
//! `gate_s + (k + 1) × unit`.

use crate::contract::worker::{
    ServingHistograms, ServingOutcome, LATE_SEND_THRESHOLD_S, STARTUP_RESERVE_S,
};
use crate::profile::Profile;
/// Their `PLAYBACK_EPSILON_S`.
const EPSILON_S: f64 = 1e-9;

/// What the server granted that the figures depend on.
#[derive(Debug, Clone, Copy)]
struct Terms {
    unit_s: f64,
    /// Units that hold a whole unit of input: the ones after are terminal.
    full_units: u64,
    /// Samples a second of output; `None` when neither the grant nor the unit says.
    output_rate: Option<f64>,
    continuous: bool,
}

/// A stream of audio deltas: the gaps between them and their drift from a player that started
/// at the first.
#[derive(Debug, Clone, Copy)]
struct Stream {
    /// The previous delta: its arrival and the audio it held.
    previous: (f64, f64),
    /// When the next delta would arrive if each came as the previous one's audio ended.
    ideal_s: f64,
    max_drift_s: f64,
    last_drift_s: f64,
}

impl Stream {
    fn new(arrival_s: f64, duration_s: f64) -> Stream {
        Stream {
            previous: (arrival_s, duration_s),
            ideal_s: arrival_s + duration_s,
            max_drift_s: 0.0,
            last_drift_s: 0.0,
        }
    }

    /// The next delta: its gap since the previous one, the part of that gap beyond the
    /// previous one's audio, and its drift.
    fn next(&mut self, arrival_s: f64, duration_s: f64) -> (f64, f64, f64) {
        let (previous_s, previous_duration_s) = self.previous;
        let gap_s = arrival_s - previous_s;
        let excess_s = (gap_s - previous_duration_s).max(0.0);
        let drift_s = arrival_s - self.ideal_s;
        self.ideal_s += duration_s;
        self.previous = (arrival_s, duration_s);
        self.max_drift_s = self.max_drift_s.max(drift_s);
        self.last_drift_s = drift_s;
        (gap_s, excess_s, drift_s)
    }
}

/// A player that starts `STARTUP_RESERVE_S` after the first delta and plays until the input's
/// end plus that reserve (their `playback_underruns`).
#[derive(Debug, Clone, Copy, Default)]
struct Playback {
    previous_s: f64,
    buffer_s: f64,
    count: u64,
    total_s: f64,
    worst_s: f64,
    /// A delta came after the end: it and the ones after are not played.
    ended: bool,
}

impl Playback {
    fn new(first_arrival_s: f64) -> Playback {
        Playback {
            previous_s: first_arrival_s + STARTUP_RESERVE_S,
            ..Playback::default()
        }
    }

    fn play(&mut self, arrival_s: f64, duration_s: f64, end_s: f64) {
        if self.ended || arrival_s > end_s {
            self.ended = true;
            return;
        }
        if arrival_s > self.previous_s {
            let waited_s = arrival_s - self.previous_s;
            let deficit_s = (waited_s - self.buffer_s).max(0.0);
            if deficit_s > EPSILON_S {
                self.count += 1;
                self.total_s += deficit_s;
                self.worst_s = self.worst_s.max(deficit_s);
            }
            self.buffer_s = (self.buffer_s - waited_s).max(0.0);
            self.previous_s = arrival_s;
        }
        self.buffer_s += duration_s;
    }
}

/// The response the deltas belong to: the one last created (a native server answers one
/// response at a time).
#[derive(Debug, Clone, Copy, Default)]
struct Response {
    created_s: Option<f64>,
    stream: Option<Stream>,
}

/// One session's serving metrics, fed by the session machine.
#[derive(Debug)]
pub struct Serving {
    input_s: f64,
    packet_s: f64,
    terms: Option<Terms>,
    /// The input's PCM16 rate, in Hz.
    input_rate: u32,
    gate_s: Option<f64>,
    sends: u64,
    late_sends: u64,
    excluded_terminal_units: u64,
    last_unit: Option<u64>,
    output_samples: u64,
    first_audio_s: Option<f64>,
    stream: Option<Stream>,
    playback: Option<Playback>,
    response: Response,
    responses: u64,
    responses_done: u64,
    responses_not_completed: u64,
    invalid_audio_deltas: u64,
    native_unit_ms: Option<f64>,
    output_rate: Option<f64>,
    /// The last media time whose first delta was timed.
    last_media_ms: Option<f64>,
}

impl Serving {
    /// A session whose input is `input_bytes` of PCM16 at `input_rate` Hz, sent in packets of
    /// `packet_s`.
    pub fn new(input_bytes: u64, input_rate: u32, packet_s: f64) -> Serving {
        Serving {
            input_rate,
            input_s: input_bytes as f64 / (2.0 * f64::from(input_rate)),
            packet_s,
            terms: None,
            gate_s: None,
            sends: 0,
            late_sends: 0,
            excluded_terminal_units: 0,
            last_unit: None,
            output_samples: 0,
            first_audio_s: None,
            stream: None,
            playback: None,
            response: Response::default(),
            responses: 0,
            responses_done: 0,
            responses_not_completed: 0,
            invalid_audio_deltas: 0,
            native_unit_ms: None,
            output_rate: None,
            last_media_ms: None,
        }
    }

    /// The server granted the session: its native unit and output rate, as far as it said.
    /// A unit of a known profile gives the output rate the grant left out, and whether the
    /// output is continuous (VoiceChat's).
    pub fn granted(&mut self, native_unit_ms: Option<f64>, output_rate: Option<f64>) {
        self.native_unit_ms = native_unit_ms;
        self.output_rate = output_rate;
        let Some(unit_ms) = native_unit_ms.filter(|ms| *ms > 0.0) else {
            return;
        };
        // The unit and the input rate name the model (VoiceChat and PersonaPlex share 80 ms).
        let profile = Profile::from_grant(unit_ms, Some(f64::from(self.input_rate)))
            .or_else(|| Profile::from_unit_ms(unit_ms));
        let unit_s = unit_ms / 1000.0;
        self.terms = Some(Terms {
            unit_s,
            full_units: ((self.input_s + EPSILON_S) / unit_s).floor() as u64,
            output_rate: output_rate
                .filter(|r| *r > 0.0)
                .or_else(|| profile.map(|p| f64::from(p.output_sample_rate()))),
            continuous: profile.is_some_and(Profile::continuous_output),
        });
    }

    /// The session's packet 0 is about to go; its start gate opened at `gate_s`.
    pub fn started(&mut self, gate_s: f64) {
        self.gate_s.get_or_insert(gate_s);
    }

    /// Packet `seq`'s send started at `start_s`.
    pub fn sent(&mut self, seq: u32, start_s: f64, h: &mut ServingHistograms) {
        let Some(gate_s) = self.gate_s else { return };
        let lateness_s = (start_s - (gate_s + f64::from(seq) * self.packet_s)).max(0.0);
        h.send_lateness.record_s(lateness_s);
        self.sends += 1;
        let late = u64::from(lateness_s > LATE_SEND_THRESHOLD_S);
        self.late_sends += late;
        h.late_sends += late;
    }

    /// Unit `index` (of `unit_<index>`) was done at `now_s`. A unit at or below the last one
    /// timed is a repeat, not timed again. A unit the input did not fill is terminal: past the
    /// input's whole units, or past what was sent (a session stopped early ends its input
    /// there, and the server flushes the unit it was in).
    pub fn unit_done(&mut self, index: u64, now_s: f64, h: &mut ServingHistograms) {
        let (Some(terms), Some(gate_s)) = (self.terms, self.gate_s) else {
            return;
        };
        let sent_s = self.sends as f64 * self.packet_s;
        if index >= terms.full_units || (index + 1) as f64 * terms.unit_s > sent_s + EPSILON_S {
            self.excluded_terminal_units += 1;
            return;
        }
        if self.last_unit.is_some_and(|last| index <= last) {
            return;
        }
        self.last_unit = Some(index);
        let scheduled_end_s = gate_s + (index + 1) as f64 * terms.unit_s;
        h.unit_lag.record_s(now_s - scheduled_end_s);
    }

    /// The server created a response at `now_s`: the deltas after are its.
    pub fn response_created(&mut self, now_s: f64, h: &mut ServingHistograms) {
        self.close_response(h);
        self.response = Response {
            created_s: Some(now_s),
            stream: None,
        };
    }

    /// A `response.done`, with the status `completed` or another.
    pub fn response_done(&mut self, completed: bool) {
        self.responses_done += 1;
        self.responses_not_completed += u64::from(!completed);
    }

    /// An audio delta of `bytes` of PCM16 arrived at `now_s`. One that is empty or not whole
    /// samples is not audio they count (and fails their session: "invalid output audio").
    pub fn audio(&mut self, bytes: usize, now_s: f64, h: &mut ServingHistograms) {
        if bytes == 0 || bytes % 2 != 0 {
            self.invalid_audio_deltas += 1;
            return;
        }
        let samples = (bytes / 2) as u64;
        self.output_samples += samples;
        let Some(terms) = self.terms else { return };
        let Some(rate) = terms.output_rate else {
            return;
        };
        let duration_s = samples as f64 / rate;
        if terms.continuous {
            if self.first_audio_s.is_none() {
                self.first_audio_s = Some(now_s);
                if let Some(gate_s) = self.gate_s {
                    h.ttfa.record_s(now_s - gate_s);
                }
            }
            match &mut self.stream {
                None => {
                    // The first delta's drift is 0 by definition, and counts.
                    self.stream = Some(Stream::new(now_s, duration_s));
                    h.output_drift.record_s(0.0);
                }
                Some(stream) => {
                    let (gap_s, excess_s, drift_s) = stream.next(now_s, duration_s);
                    h.output_gap.record_s(gap_s);
                    h.output_gap_excess.record_s(excess_s);
                    h.output_drift.record_s(drift_s);
                }
            }
            if let Some(gate_s) = self.gate_s {
                let end_s = gate_s + self.input_s + STARTUP_RESERVE_S;
                self.playback
                    .get_or_insert_with(|| Playback::new(now_s))
                    .play(now_s, duration_s, end_s);
            }
        }
        match &mut self.response.stream {
            None => {
                self.responses += 1;
                h.responses += 1;
                if let Some(created_s) = self.response.created_s {
                    h.response_ttfa.record_s(now_s - created_s);
                }
                self.response.stream = Some(Stream::new(now_s, duration_s));
            }
            Some(stream) => {
                let (_, excess_s, _) = stream.next(now_s, duration_s);
                h.response_gap_excess.record_s(excess_s);
            }
        }
    }

    /// A delta of output for the input from `t_start_ms` arrived at `now_s`: the packet that
    /// starts there, if one does, is `Some(seq)`, sent at `start_s` (if still known). Only the
    /// first delta of each media time is timed.
    pub fn media(
        &mut self,
        t_start_ms: f64,
        packet: Option<(u32, Option<f64>)>,
        now_s: f64,
        h: &mut ServingHistograms,
    ) {
        let (Some(gate_s), Some((seq, start_s))) = (self.gate_s, packet) else {
            return;
        };
        if self.last_media_ms.is_some_and(|last| t_start_ms <= last) {
            return;
        }
        self.last_media_ms = Some(t_start_ms);
        h.media_schedule_lag
            .record_s(now_s - (gate_s + f64::from(seq) * self.packet_s));
        if let Some(start_s) = start_s {
            h.media_send_lag.record_s(now_s - start_s);
        }
    }

    /// The response under way is over: its largest drift, and the buffer that needs.
    fn close_response(&mut self, h: &mut ServingHistograms) {
        if let Some(stream) = self.response.stream.take() {
            h.response_max_drift.record_s(stream.max_drift_s);
            h.response_required_playout_buffer
                .record_s(stream.max_drift_s.max(0.0));
        }
    }

    /// The run stopped the session early (cancelled, or past its deadline): its input ended
    /// where its sends ended. From here its output is measured against the input it sent, as
    /// its units are (`unit_done`), not against audio it never sent (which read as the
    /// server's underrun); output that comes after that input's end is not played.
    pub fn stopped(&mut self) {
        self.input_s = self.input_s.min(self.sends as f64 * self.packet_s);
    }

    /// The session is over: the figures it has once. A session stopped before its first send
    /// has no input to measure output against: no coverage and no underrun (the summary leaves
    /// it out of both).
    pub fn finish(&mut self, h: &mut ServingHistograms) -> ServingOutcome {
        self.close_response(h);
        let continuous = self.terms.map(|t| t.continuous);
        let rate = self.terms.and_then(|t| t.output_rate);
        let mut outcome = ServingOutcome {
            input_duration_s: self.input_s,
            native_unit_ms: self.native_unit_ms,
            output_sample_rate: self.output_rate,
            continuous,
            output_samples: self.output_samples,
            sends: self.sends,
            late_sends: self.late_sends,
            excluded_terminal_units: self.excluded_terminal_units,
            responses: self.responses,
            responses_done: self.responses_done,
            responses_not_completed: self.responses_not_completed,
            invalid_audio_deltas: self.invalid_audio_deltas,
            ..ServingOutcome::default()
        };
        if continuous != Some(true) || self.input_s <= 0.0 {
            return outcome;
        }
        outcome.ttfa_s = self.first_audio_s.zip(self.gate_s).map(|(a, g)| a - g);
        outcome.final_output_drift_s = self.stream.map(|s| s.last_drift_s);
        outcome.required_playout_buffer_s = self.stream.map(|s| s.max_drift_s.max(0.0));
        outcome.output_coverage = rate
            .filter(|_| self.input_s > 0.0)
            .map(|rate| self.output_samples as f64 / rate / self.input_s);
        let played = match (self.playback, self.gate_s, self.first_audio_s) {
            (Some(mut playback), Some(gate_s), Some(first_s))
                if first_s < gate_s + self.input_s =>
            {
                let end_s = gate_s + self.input_s + STARTUP_RESERVE_S;
                playback.play(end_s, 0.0, end_s);
                (playback.count, playback.total_s, playback.worst_s)
            }
            // No audio before the input's end: all of it is an underrun.
            _ => (1, self.input_s, self.input_s),
        };
        outcome.underrun_count = Some(played.0);
        outcome.underrun_total_s = Some(played.1);
        outcome.underrun_worst_s = Some(played.2);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VoiceChat: 80 ms units, 22050 Hz; one unit of output is 1764 samples (3528 bytes).
    const UNIT_BYTES: usize = 3528;

    fn voicechat(input_ms: u64) -> Serving {
        let mut s = Serving::new(input_ms * 32, 16_000, 0.08);
        s.granted(Some(80.0), Some(22_050.0));
        s.started(100.0);
        s
    }

    fn ms(h: &crate::stats::SignedHistogram, q: f64) -> f64 {
        h.quantile_ms(q)
    }

    #[test]
    fn send_lateness_is_after_the_gate_schedule_and_late_beyond_20_ms() {
        let mut h = ServingHistograms::default();
        let mut s = voicechat(400);
        s.sent(0, 100.001, &mut h);
        s.sent(1, 100.080, &mut h);
        // 30 ms behind its schedule: a late send; one sent early counts 0.
        s.sent(2, 100.190, &mut h);
        s.sent(3, 100.230, &mut h);
        let o = s.finish(&mut h);
        assert_eq!((o.sends, o.late_sends), (4, 1));
        assert_eq!(
            h.late_sends, 1,
            "the live tally counts what the outcome does"
        );
        assert_eq!(h.send_lateness.count(), 4);
        assert!((h.send_lateness.max_ms() - 30.0).abs() < 0.1);
    }

    #[test]
    fn unit_lag_is_against_the_units_scheduled_end_and_leaves_the_terminal_unit_out() {
        let mut h = ServingHistograms::default();
        // 200 ms of input: 2 full units and a terminal one.
        let mut s = voicechat(200);
        s.sent(0, 100.0, &mut h);
        s.unit_done(0, 100.090, &mut h); // ends at 100.080: +10 ms
        s.unit_done(0, 100.095, &mut h); // a repeat: not timed again
        s.sent(1, 100.08, &mut h);
        s.unit_done(1, 100.150, &mut h); // ends at 100.160: −10 ms
        s.sent(2, 100.16, &mut h);
        s.unit_done(2, 100.300, &mut h); // terminal
        let o = s.finish(&mut h);
        assert_eq!(h.unit_lag.count(), 2);
        assert!((ms(&h.unit_lag, 1.0) - 10.0).abs() < 0.05);
        assert!((ms(&h.unit_lag, 0.0) + 10.0).abs() < 0.05);
        assert_eq!(o.excluded_terminal_units, 1);
    }

    #[test]
    fn a_unit_aligned_input_has_only_the_empty_unit_terminal() {
        let mut s = voicechat(160);
        let mut h = ServingHistograms::default();
        s.sent(0, 100.0, &mut h);
        s.sent(1, 100.08, &mut h);
        s.unit_done(1, 100.2, &mut h);
        s.unit_done(2, 100.3, &mut h);
        assert_eq!(h.unit_lag.count(), 1);
        assert_eq!(s.finish(&mut h).excluded_terminal_units, 1);
    }

    #[test]
    fn a_steady_stream_has_no_gap_excess_no_drift_and_no_underrun() {
        let mut h = ServingHistograms::default();
        let mut s = voicechat(320);
        s.response_created(100.05, &mut h);
        for k in 0..4 {
            s.audio(UNIT_BYTES, 100.1 + 0.08 * k as f64, &mut h);
        }
        s.response_done(true);
        let o = s.finish(&mut h);
        assert_eq!(
            (
                o.responses_done,
                o.responses_not_completed,
                o.invalid_audio_deltas
            ),
            (1, 0, 0)
        );
        assert!((o.ttfa_s.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(h.output_gap.count(), 3);
        assert!((h.output_gap.max_ms() - 80.0).abs() < 0.1);
        assert!(h.output_gap_excess.max_ms() < 0.01);
        assert_eq!(
            h.output_drift.count(),
            4,
            "the first delta's drift (0) counts"
        );
        assert!(o.final_output_drift_s.unwrap().abs() < 1e-9);
        assert_eq!(o.required_playout_buffer_s, Some(0.0));
        assert!((o.output_coverage.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(o.underrun_count, Some(0));
        assert_eq!((o.responses, h.responses), (1, 1));
        assert_eq!(h.ttfa.count(), 1, "the live ttfa, as the first delta comes");
        assert!((ms(&h.ttfa, 0.5) - 100.0).abs() < 0.1);
        assert!((ms(&h.response_ttfa, 0.5) - 50.0).abs() < 0.05);
        assert_eq!(h.response_max_drift.count(), 1);
    }

    #[test]
    fn responses_not_completed_and_deltas_that_are_no_audio_are_counted() {
        let mut h = ServingHistograms::default();
        let mut s = voicechat(320);
        s.response_created(100.05, &mut h);
        s.audio(0, 100.1, &mut h);
        s.audio(UNIT_BYTES - 1, 100.18, &mut h);
        s.response_done(false);
        let o = s.finish(&mut h);
        assert_eq!(
            (
                o.responses_done,
                o.responses_not_completed,
                o.invalid_audio_deltas
            ),
            (1, 1, 2)
        );
        assert_eq!(o.output_samples, 0, "neither is audio they count");
    }

    #[test]
    fn a_stalled_delta_drifts_leaves_a_gap_excess_and_underruns_the_player() {
        let mut h = ServingHistograms::default();
        let mut s = voicechat(800);
        s.audio(UNIT_BYTES, 100.10, &mut h); // the player starts at 100.18 with 80 ms
        s.audio(UNIT_BYTES, 100.18, &mut h);
        // 200 ms late: the buffer (160 ms at 100.18) runs dry at 100.34; it comes at 100.46:
        // a 120 ms underrun. The player then keeps 40 ms ahead to the end (100.88).
        for at in [100.46, 100.50, 100.58, 100.66, 100.74, 100.82] {
            s.audio(UNIT_BYTES, at, &mut h);
        }
        let o = s.finish(&mut h);
        assert!((o.output_coverage.unwrap() - 0.8).abs() < 1e-9);
        assert!((h.output_gap_excess.max_ms() - 200.0).abs() < 0.2);
        assert!((o.final_output_drift_s.unwrap() - 0.16).abs() < 1e-9);
        assert!((o.required_playout_buffer_s.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(o.underrun_count, Some(1));
        assert!((o.underrun_total_s.unwrap() - 0.12).abs() < 1e-9);
        assert!((o.underrun_worst_s.unwrap() - 0.12).abs() < 1e-9);
    }

    /// A run cancelled 320 ms into a 2 s input: the server answered every packet sent, so the
    /// player never ran dry; it was counted dry for the 1.68 s never sent (the QA pass of
    /// 2026-12-06), and covering a sixth of the input.
    #[test]
    fn a_session_stopped_early_is_measured_against_the_input_it_sent() {
        let run = |stopped_early: bool| {
            let mut h = ServingHistograms::default();
            let mut s = voicechat(2_000);
            for k in 0..4u32 {
                s.sent(k, 100.0 + 0.08 * f64::from(k), &mut h);
                s.audio(UNIT_BYTES, 100.1 + 0.08 * f64::from(k), &mut h);
            }
            if stopped_early {
                s.stopped();
            }
            // The server's last words come in the stop's grace, after a gap: past the input
            // sent (and its startup reserve), they are not played, so no underrun.
            s.audio(UNIT_BYTES, 100.9, &mut h);
            s.audio(UNIT_BYTES, 101.2, &mut h);
            s.finish(&mut h)
        };
        let o = run(true);
        assert!((o.input_duration_s - 0.32).abs() < 1e-9);
        assert_eq!(o.underrun_count, Some(0));
        assert_eq!(o.underrun_total_s, Some(0.0));
        assert!(o.output_coverage.unwrap() >= 1.0);
        // A session that was not stopped and sent 4 packets of its 25 (the server closed it)
        // is still measured against all of its input.
        let o = run(false);
        assert!((o.input_duration_s - 2.0).abs() < 1e-9);
        assert!(o.underrun_count.unwrap() >= 1, "{o:?}");
        assert!(o.underrun_total_s.unwrap() > 1.0, "{o:?}");
    }

    #[test]
    fn a_session_stopped_before_its_first_send_has_no_output_figures() {
        let mut h = ServingHistograms::default();
        let mut s = voicechat(2_000);
        s.stopped();
        let o = s.finish(&mut h);
        assert_eq!(o.input_duration_s, 0.0);
        assert_eq!((o.underrun_count, o.output_coverage), (None, None));
    }

    #[test]
    fn no_audio_before_the_inputs_end_is_all_underrun() {
        let mut h = ServingHistograms::default();
        let mut s = voicechat(320);
        s.audio(UNIT_BYTES, 100.5, &mut h);
        let o = s.finish(&mut h);
        assert_eq!(o.underrun_count, Some(1));
        assert!((o.underrun_total_s.unwrap() - 0.32).abs() < 1e-9);
        let o = voicechat(320).finish(&mut h);
        assert_eq!((o.underrun_count, o.ttfa_s), (Some(1), None));
    }

    #[test]
    fn a_unit_profile_has_no_continuous_output_figures_but_its_responses() {
        let mut h = ServingHistograms::default();
        let mut s = Serving::new(3 * 32_000, 16_000, 0.08);
        // MiniCPM-o's grant without an output rate: the unit names the profile's.
        s.granted(Some(1000.0), None);
        s.started(50.0);
        s.response_created(51.2, &mut h);
        s.audio(48_000, 51.5, &mut h);
        s.audio(48_000, 52.6, &mut h); // 1 s of audio, 1.1 s later: 100 ms excess
        s.response_created(53.0, &mut h);
        s.audio(3, 53.1, &mut h); // not whole samples: not counted
        let o = s.finish(&mut h);
        assert_eq!(o.continuous, Some(false));
        assert_eq!(
            (o.ttfa_s, o.underrun_count, o.output_coverage),
            (None, None, None)
        );
        assert_eq!((h.output_gap.count(), h.ttfa.count()), (0, 0));
        assert_eq!((o.responses, h.responses), (1, 1));
        assert_eq!(o.output_samples, 48_000);
        assert!((ms(&h.response_ttfa, 0.5) - 300.0).abs() < 0.5);
        assert!((h.response_gap_excess.max_ms() - 100.0).abs() < 0.1);
        assert!((ms(&h.response_max_drift, 1.0) - 100.0).abs() < 0.1);
    }

    #[test]
    fn the_first_delta_of_each_media_time_is_timed_against_its_packet() {
        let mut h = ServingHistograms::default();
        let mut s = voicechat(400);
        // Packet 1 (80 ms of media) was due at 100.08, sent at 100.081.
        s.media(80.0, Some((1, Some(100.081))), 100.1, &mut h);
        s.media(80.0, Some((1, Some(100.081))), 100.2, &mut h); // a second delta of it
        s.media(40.0, None, 100.3, &mut h); // no packet starts at 40 ms
        s.media(160.0, Some((2, None)), 100.19, &mut h); // its send no longer remembered
        assert_eq!(h.media_schedule_lag.count(), 2);
        assert_eq!(h.media_send_lag.count(), 1);
        assert!((ms(&h.media_schedule_lag, 0.0) - 20.0).abs() < 0.05);
        assert!((ms(&h.media_schedule_lag, 1.0) - 30.0).abs() < 0.05);
        assert!((ms(&h.media_send_lag, 1.0) - 19.0).abs() < 0.05);
    }

    #[test]
    fn a_session_stopped_early_leaves_out_the_unit_its_input_never_filled() {
        // 1 s of input planned, stopped after 3 packets: the server flushes unit 3, which
        // holds no audio of ours; it is terminal, not 160 ms of negative lag.
        let mut h = ServingHistograms::default();
        let mut s = voicechat(1000);
        for seq in 0..3 {
            s.sent(seq, 100.0 + 0.08 * f64::from(seq), &mut h);
            s.unit_done(u64::from(seq), 100.09 + 0.08 * f64::from(seq), &mut h);
        }
        s.unit_done(3, 100.25, &mut h);
        assert_eq!(h.unit_lag.count(), 3);
        assert_eq!(s.finish(&mut h).excluded_terminal_units, 1);
        // A MiniCPM-o unit (1 s) is done only once its 13th packet has gone.
        let minicpmo = || {
            let mut s = Serving::new(64_000, 16_000, 0.08);
            s.granted(Some(1000.0), Some(24_000.0));
            s.started(100.0);
            s
        };
        let mut h = ServingHistograms::default();
        let mut s = minicpmo();
        for seq in 0..12 {
            s.sent(seq, 100.0 + 0.08 * f64::from(seq), &mut h);
        }
        s.unit_done(0, 100.95, &mut h);
        assert_eq!(
            h.unit_lag.count(),
            0,
            "12 packets hold 0.96 s: unit 0 is not full"
        );
        let mut s2 = minicpmo();
        for seq in 0..13 {
            s2.sent(seq, 100.0 + 0.08 * f64::from(seq), &mut h);
        }
        s2.unit_done(0, 101.05, &mut h);
        assert_eq!(h.unit_lag.count(), 1);
    }

    #[test]
    fn without_a_grant_nothing_but_the_sends_is_timed() {
        let mut h = ServingHistograms::default();
        let mut s = Serving::new(32_000, 16_000, 0.08);
        s.started(10.0);
        s.sent(0, 10.0, &mut h);
        s.unit_done(0, 10.1, &mut h);
        s.audio(100, 10.2, &mut h);
        let o = s.finish(&mut h);
        assert_eq!((o.sends, o.continuous, o.output_samples), (1, None, 50));
        assert_eq!(h.unit_lag.count(), 0);
    }
}
