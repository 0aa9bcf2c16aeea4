//! The `serving` section of a native run's summary: sglang-omni's serving metrics
//! (`benchmarks/duplex/serving_metrics.py` of sgl-project/sglang-omni), under their names and
//! in their units (seconds), pooled over the run's sessions as their `aggregate` pools them.
//! docs/metrics.md ("sglang-omni's serving metrics") defines each and says where ours differ.

use crate::contract::worker::{
    ServingHistograms, ServingOutcome, SessionOutcome, SessionStatus, WorkerResult,
    LATE_SEND_THRESHOLD_S, STARTUP_RESERVE_S,
};
use crate::profile::Profile;
use crate::stats::exact::percentile;
use crate::stats::{DurationHistogram, SignedHistogram};
use serde::{Deserialize, Serialize};

/// n, p50, p75, p95, p99 and max of a figure, in its unit (seconds, or a ratio); the
/// percentiles `null` when n is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Distribution {
    pub n: u64,
    pub p50: Option<f64>,
    pub p75: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Distribution {
    /// Of a histogram (microseconds), in seconds, each percentile interpolated between ranks
    /// as theirs ([`SignedHistogram::interpolated_ms`]).
    fn of(h: &SignedHistogram) -> Distribution {
        let n = h.count();
        // Whole microseconds, as the histogram holds them.
        let seconds = |ms: f64| (ms * 1000.0).round() / 1e6;
        let at = |q: f64| (n > 0).then(|| seconds(h.interpolated_ms(q)));
        Distribution {
            n,
            p50: at(0.5),
            p75: at(0.75),
            p95: at(0.95),
            p99: at(0.99),
            max: (n > 0).then(|| seconds(h.max_ms())),
        }
    }

    fn of_durations(h: &DurationHistogram) -> Distribution {
        Distribution::of(&SignedHistogram::of(h))
    }

    /// Of a few values (one a session), exactly as theirs: linear interpolation at
    /// `(n − 1) × q` of the sorted values.
    fn exact(values: &[f64]) -> Distribution {
        let max = values.iter().copied().reduce(f64::max);
        Distribution {
            n: values.len() as u64,
            p50: percentile(values, 50.0),
            p75: percentile(values, 75.0),
            p95: percentile(values, 95.0),
            p99: percentile(values, 99.0),
            max,
        }
    }
}

/// sglang-omni's serving metrics of the run (their `aggregate`), key for key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServingSection {
    /// The profile the server's granted unit names (`voicechat`, `minicpmo`), `null` when it
    /// names none or no session was granted.
    pub profile: Option<String>,
    /// The grant's `native_unit_ms` and output audio rate.
    pub native_unit_ms: Option<f64>,
    pub output_sample_rate: Option<f64>,
    pub attempted_sessions: u64,
    /// Sessions that completed with none of what sglang-omni's client records as an error
    /// (docs/metrics.md; before 2026-12-06: sessions that completed).
    pub successful_sessions: u64,
    /// First audio after the session's start gate, one a session (continuous-output profiles;
    /// `null` for a profile that may stay silent, as theirs).
    pub ttfa_s: Option<Distribution>,
    /// A packet's send start after `session_start_s + seq × packet`, at least 0.
    pub send_lateness_s: Distribution,
    pub late_send_threshold_s: f64,
    pub late_send_count: u64,
    pub late_send_rate: Option<f64>,
    /// Between consecutive audio deltas (continuous-output profiles).
    pub output_gap_s: Option<Distribution>,
    pub output_gap_excess_s: Option<Distribution>,
    pub output_drift_s: Option<Distribution>,
    /// One a session: its last delta's drift, and the largest (at least 0).
    pub final_output_drift_s: Option<Distribution>,
    pub required_playout_buffer_s: Option<Distribution>,
    /// Output audio over input audio, one a session.
    pub output_coverage: Option<Distribution>,
    /// A player that starts `startup_reserve_s` after the first delta and plays to the input's
    /// end plus that reserve: the sessions it ran dry in, how often, for how long.
    pub underrun_sessions: Option<u64>,
    pub underrun_count: Option<u64>,
    pub underrun_total_s: Option<f64>,
    pub underrun_worst_s: Option<f64>,
    pub underrun_ratio: Option<f64>,
    pub startup_reserve_s: f64,
    /// A unit's `sglang.unit.done` after its scheduled end (`session_start_s + (k + 1) ×
    /// unit`); the terminal unit (no whole unit of input) left out and counted.
    pub unit_lag_s: Distribution,
    pub excluded_terminal_units: u64,
    /// Responses that sent audio, and per response: its first audio after its
    /// `response.created`, the gaps between its deltas beyond their audio, its largest drift
    /// and the playout buffer that needs.
    pub responses: u64,
    pub response_ttfa_s: Distribution,
    pub response_gap_excess_s: Distribution,
    pub response_max_drift_s: Distribution,
    pub response_required_playout_buffer_s: Distribution,
    /// The first audio delta of each media time (`sglang.media_time.t_start_ms`) after the
    /// schedule, and after the send start, of the packet that starts at that media time.
    pub media_schedule_lag_s: Distribution,
    pub media_send_lag_s: Distribution,
}

/// Whether sglang-omni's serving metrics count the session successful: it completed (connected,
/// streamed, drained, closed) and had none of what their client records as an error — an
/// `error` event (fatal or not), a frame it could not read, fewer appends than the input has
/// (stopped early), a `response.done` whose status is not `completed`; and, for a
/// continuous-output profile (whose sessions their `serving_metrics.py` scores), audio with
/// no `response.done`, an audio delta that is empty or not whole samples, or no output audio
/// at all. (A unit profile's sessions their `serving_unit_metrics.py` scores, which also
/// counts the units done against the input's: not checked here.)
pub fn successful(s: &SessionOutcome, serving: &ServingOutcome) -> bool {
    let continuous = serving.continuous == Some(true);
    s.status == SessionStatus::Completed
        && !s.stopped_early
        && s.error_codes.is_empty()
        && s.protocol_errors == 0
        && serving.responses_not_completed == 0
        && !(continuous
            && ((serving.output_samples > 0 && serving.responses_done == 0)
                || serving.invalid_audio_deltas > 0
                || serving.output_samples == 0))
}

/// The section of a native run's results: the sessions' own figures and the pooled
/// histograms. `None` when no session has any (another protocol).
pub fn section<'a>(
    results: impl Iterator<Item = &'a WorkerResult>,
    h: &ServingHistograms,
    input_rate: u32,
) -> Option<ServingSection> {
    let mut sessions: Vec<(&ServingOutcome, bool)> = Vec::new();
    for r in results {
        for s in &r.sessions {
            if let Some(serving) = &s.serving {
                sessions.push((serving, successful(s, serving)));
            }
        }
    }
    of_sessions(&sessions, h, input_rate)
}

/// [`section`] of the sessions' own figures, each with whether their client calls it
/// successful.
fn of_sessions(
    sessions: &[(&ServingOutcome, bool)],
    h: &ServingHistograms,
    input_rate: u32,
) -> Option<ServingSection> {
    if sessions.is_empty() {
        return None;
    }
    let granted = sessions.iter().find(|(s, _)| s.native_unit_ms.is_some());
    let unit_ms = granted.and_then(|(s, _)| s.native_unit_ms);
    let continuous = sessions
        .iter()
        .find_map(|(s, _)| s.continuous)
        .unwrap_or(false);
    let sends: u64 = sessions.iter().map(|(s, _)| s.sends).sum();
    let late_sends: u64 = sessions.iter().map(|(s, _)| s.late_sends).sum();
    let each = |f: fn(&ServingOutcome) -> Option<f64>| {
        let values: Vec<f64> = sessions.iter().filter_map(|(s, _)| f(s)).collect();
        continuous.then(|| Distribution::exact(&values))
    };
    // A session that never got its grant (refused, failed at set-up) played nothing: all of
    // its input is an underrun, and it covered none of it. One the run stopped before its first
    // send has no input to play against: in neither figure.
    let played: Vec<&ServingOutcome> = sessions
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| s.input_duration_s > 0.0)
        .collect();
    let underrun = |s: &ServingOutcome| {
        (
            s.underrun_count.unwrap_or(1),
            s.underrun_total_s.unwrap_or(s.input_duration_s),
            s.underrun_worst_s.unwrap_or(s.input_duration_s),
        )
    };
    let underrun_total_s: f64 = played.iter().map(|s| underrun(s).1).sum();
    let input_s: f64 = played.iter().map(|s| s.input_duration_s).sum();
    let out = |d: Distribution| continuous.then_some(d);
    Some(ServingSection {
        profile: unit_ms
            .and_then(|ms| {
                Profile::from_grant(ms, Some(f64::from(input_rate)))
                    .or_else(|| Profile::from_unit_ms(ms))
            })
            .map(|p| p.name().to_string()),
        native_unit_ms: unit_ms,
        output_sample_rate: granted.and_then(|(s, _)| s.output_sample_rate),
        attempted_sessions: sessions.len() as u64,
        successful_sessions: sessions.iter().filter(|(_, done)| *done).count() as u64,
        ttfa_s: each(|s| s.ttfa_s),
        send_lateness_s: Distribution::of_durations(&h.send_lateness),
        late_send_threshold_s: LATE_SEND_THRESHOLD_S,
        late_send_count: late_sends,
        late_send_rate: (sends > 0).then(|| late_sends as f64 / sends as f64),
        output_gap_s: out(Distribution::of_durations(&h.output_gap)),
        output_gap_excess_s: out(Distribution::of_durations(&h.output_gap_excess)),
        output_drift_s: out(Distribution::of(&h.output_drift)),
        final_output_drift_s: each(|s| s.final_output_drift_s),
        required_playout_buffer_s: each(|s| s.required_playout_buffer_s),
        output_coverage: continuous.then(|| {
            let values: Vec<f64> = played
                .iter()
                .map(|s| s.output_coverage.unwrap_or(0.0))
                .collect();
            Distribution::exact(&values)
        }),
        underrun_sessions: continuous
            .then(|| played.iter().filter(|s| underrun(s).0 > 0).count() as u64),
        underrun_count: continuous.then(|| played.iter().map(|s| underrun(s).0).sum()),
        underrun_total_s: continuous.then_some(underrun_total_s),
        underrun_worst_s: continuous
            .then(|| played.iter().map(|s| underrun(s).2).fold(0.0, f64::max)),
        underrun_ratio: continuous
            .then(|| (input_s > 0.0).then(|| underrun_total_s / input_s))
            .flatten(),
        startup_reserve_s: STARTUP_RESERVE_S,
        unit_lag_s: Distribution::of(&h.unit_lag),
        excluded_terminal_units: sessions
            .iter()
            .map(|(s, _)| s.excluded_terminal_units)
            .sum(),
        responses: sessions.iter().map(|(s, _)| s.responses).sum(),
        response_ttfa_s: Distribution::of(&h.response_ttfa),
        response_gap_excess_s: Distribution::of_durations(&h.response_gap_excess),
        response_max_drift_s: Distribution::of(&h.response_max_drift),
        response_required_playout_buffer_s: Distribution::of_durations(
            &h.response_required_playout_buffer,
        ),
        media_schedule_lag_s: Distribution::of(&h.media_schedule_lag),
        media_send_lag_s: Distribution::of(&h.media_send_lag),
    })
}

/// `12.3` (ms) of a time in seconds, or `-`; never `-0.0`.
fn ms(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |s| {
        let tenths = (s * 1e4).round();
        format!("{:.1}", if tenths == 0.0 { 0.0 } else { tenths / 10.0 })
    })
}

/// The section in a few lines, for summary.md and the final table: their names without the
/// unit, times in ms. `stopped_early`: the run's sessions a stop cut short, which their client
/// does not call successful (fewer appends than the input), though they completed for ours.
pub fn lines(s: &ServingSection, stopped_early: u64) -> Vec<String> {
    let profile = s.profile.as_deref().unwrap_or("profile unknown");
    let stopped = match stopped_early {
        0 => String::new(),
        n => format!(", {n} stopped early, which it does not call successful"),
    };
    let mut lines = vec![format!(
        "serving metrics    sglang-omni's ({profile}; {} of {} sessions successful{stopped}), in ms",
        s.successful_sessions, s.attempted_sessions
    )];
    let row = |name: &str, d: &Distribution| {
        // As every other figure without a sample reads (README, "Reading the figures").
        if d.n == 0 {
            return format!("  {name:<19}no samples");
        }
        format!(
            "  {name:<19}p50 {}  p95 {}  p99 {}  max {}  (n {})",
            ms(d.p50),
            ms(d.p95),
            ms(d.p99),
            ms(d.max),
            d.n
        )
    };
    if let Some(d) = &s.ttfa_s {
        lines.push(row("ttfa", d));
    }
    lines.push(row("unit_lag", &s.unit_lag_s));
    if let Some(d) = &s.output_gap_excess_s {
        lines.push(row("output_gap_excess", d));
    }
    if let Some(d) = &s.output_drift_s {
        lines.push(row("output_drift", d));
    }
    lines.push(row("response_ttfa", &s.response_ttfa_s));
    lines.push(row("send_lateness", &s.send_lateness_s));
    let rate = s.late_send_rate.map_or("no sends timed".to_string(), |r| {
        format!("{:.1} %", r * 100.0)
    });
    let mut tail = format!(
        "  late sends {} (> {:.0} ms, {rate}); terminal units {} (not in unit_lag)",
        s.late_send_count,
        s.late_send_threshold_s * 1000.0,
        s.excluded_terminal_units
    );
    if let (Some(sessions), Some(count), Some(ratio)) =
        (s.underrun_sessions, s.underrun_count, s.underrun_ratio)
    {
        tail.push_str(&format!(
            "; underruns {count} in {sessions} sessions ({:.1} % of the input)",
            ratio * 100.0
        ));
    }
    lines.push(tail);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A figure without a sample reads `no samples`, as every other figure of the table and
    /// summary.md does, not a row of dashes (the README walkthrough of 2026-12-07); a rate
    /// over no timed send says so.
    #[test]
    fn a_figure_without_samples_reads_no_samples() {
        let none = Distribution::default();
        let some = Distribution::exact(&[0.010, 0.020]);
        let section = ServingSection {
            profile: Some("personaplex".into()),
            native_unit_ms: Some(80.0),
            output_sample_rate: Some(24_000.0),
            attempted_sessions: 2,
            successful_sessions: 0,
            ttfa_s: Some(none),
            send_lateness_s: none,
            late_send_threshold_s: 0.02,
            late_send_count: 0,
            late_send_rate: None,
            output_gap_s: None,
            output_gap_excess_s: None,
            output_drift_s: None,
            final_output_drift_s: None,
            required_playout_buffer_s: None,
            output_coverage: None,
            underrun_sessions: None,
            underrun_count: None,
            underrun_total_s: None,
            underrun_worst_s: None,
            underrun_ratio: None,
            startup_reserve_s: 0.0,
            unit_lag_s: some,
            excluded_terminal_units: 0,
            responses: 0,
            response_ttfa_s: none,
            response_gap_excess_s: none,
            response_max_drift_s: none,
            response_required_playout_buffer_s: none,
            media_schedule_lag_s: none,
            media_send_lag_s: none,
        };
        let lines = lines(&section, 0);
        let of = |name: &str| {
            lines
                .iter()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap()
                .clone()
        };
        assert_eq!(of("ttfa").trim_end(), "  ttfa               no samples");
        assert!(of("unit_lag").contains("p50 15.0") && of("unit_lag").contains("(n 2)"));
        assert!(!lines.iter().any(|l| l.contains("p50 -")), "{lines:?}");
        assert!(
            of("late sends").contains("(> 20 ms, no sends timed)"),
            "{lines:?}"
        );
    }

    /// Each of what sglang-omni's client records as an error fails the session in their
    /// count, though it completed for ours.
    #[test]
    fn a_completed_session_is_successful_only_without_what_their_client_calls_an_error() {
        let mut s = SessionOutcome::new(0);
        s.status = SessionStatus::Completed;
        let serving = ServingOutcome {
            continuous: Some(true),
            output_samples: 24_000,
            responses: 1,
            responses_done: 1,
            ..ServingOutcome::default()
        };
        assert!(successful(&s, &serving));
        let mut incomplete = s.clone();
        incomplete.status = SessionStatus::Incomplete;
        let mut stopped = s.clone();
        stopped.stopped_early = true;
        let mut error_event = s.clone();
        error_event.error_codes.insert("invalid_audio".into(), 1);
        let mut unreadable = s.clone();
        unreadable.protocol_errors = 1;
        for (why, session) in [
            ("incomplete", &incomplete),
            ("stopped early", &stopped),
            ("a non-fatal error event", &error_event),
            ("a frame it could not read", &unreadable),
        ] {
            assert!(!successful(session, &serving), "{why}");
        }
        let not_completed = ServingOutcome {
            responses_not_completed: 1,
            ..serving.clone()
        };
        let no_done = ServingOutcome {
            responses_done: 0,
            ..serving.clone()
        };
        let odd_delta = ServingOutcome {
            invalid_audio_deltas: 1,
            ..serving.clone()
        };
        let silent = ServingOutcome {
            output_samples: 0,
            responses_done: 0,
            ..serving.clone()
        };
        for (why, serving) in [
            ("a response.done not completed", &not_completed),
            ("audio with no response.done", &no_done),
            ("an odd-length audio delta", &odd_delta),
            ("a continuous profile that said nothing", &silent),
        ] {
            assert!(!successful(&s, serving), "{why}");
        }
        // MiniCPM-o may stay silent, and its sessions are scored by another script.
        for serving in [silent, no_done, odd_delta] {
            let unit_profile = ServingOutcome {
                continuous: Some(false),
                ..serving
            };
            assert!(successful(&s, &unit_profile), "{unit_profile:?}");
        }
    }

    /// A session the run stopped before its first send (a cancel during a stagger) has no
    /// input to play against: it was one underrun of 0 s and a coverage of 0 in the pooled
    /// figures (the review of 2026-12-06).
    #[test]
    fn a_session_stopped_before_its_first_send_is_in_no_output_figure() {
        let streamed = ServingOutcome {
            continuous: Some(true),
            input_duration_s: 2.0,
            output_coverage: Some(1.0),
            underrun_count: Some(0),
            underrun_total_s: Some(0.0),
            underrun_worst_s: Some(0.0),
            ..ServingOutcome::default()
        };
        let never_sent = ServingOutcome {
            continuous: Some(true),
            ..ServingOutcome::default()
        };
        let h = ServingHistograms::default();
        let section = of_sessions(&[(&streamed, false), (&never_sent, false)], &h, 16_000).unwrap();
        assert_eq!(section.attempted_sessions, 2);
        assert_eq!(section.underrun_sessions, Some(0));
        assert_eq!(section.underrun_count, Some(0));
        let coverage = section.output_coverage.unwrap();
        assert_eq!((coverage.n, coverage.p50), (1, Some(1.0)));
    }

    #[test]
    fn few_values_interpolate_as_theirs() {
        let d = Distribution::exact(&[0.4, 0.1, 0.2, 0.3]);
        assert_eq!(d.n, 4);
        assert!((d.p50.unwrap() - 0.25).abs() < 1e-12);
        assert!((d.p95.unwrap() - 0.385).abs() < 1e-12);
        assert_eq!(d.max, Some(0.4));
        let none = Distribution::exact(&[]);
        assert_eq!((none.n, none.p50, none.max), (0, None, None));
    }

    #[test]
    fn a_histogram_reads_in_seconds_with_negative_values_first() {
        let mut h = SignedHistogram::default();
        h.record_s(-0.010);
        h.record_s(0.020);
        h.record_s(0.030);
        let d = Distribution::of(&h);
        assert_eq!(d.n, 3);
        assert!((d.p50.unwrap() - 0.020).abs() < 1e-4);
        assert!((d.max.unwrap() - 0.030).abs() < 1e-4);
        assert!(Distribution::of(&SignedHistogram::default()).p99.is_none());
        assert_eq!(ms(Some(-0.00004)), "0.0");
        assert_eq!(ms(Some(-0.0797)), "-79.7");
        assert_eq!(ms(None), "-");
    }
}
