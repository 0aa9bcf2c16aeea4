//! What a sweep takes from each run: the client's verdict, the server's latency figures for
//! the protocol (named by dotted paths such as `unit_lag_ms.p99`, the names `--slo` uses), and
//! throughput (audio seconds per wall second, server events per second).

use crate::contract::worker::WorkerResult;
use crate::protocol::Protocol;
use crate::stats::ShortPercentiles;
use crate::summary::serving::{Distribution, ServingSection};
use crate::summary::{Summary, TurnSummary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One run of a level (or the warm-up), as the sweep records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunFigures {
    /// The run's folder, relative to the sweep folder.
    pub folder: String,
    pub repeat: u32,
    pub pacing_qualified: bool,
    pub complete: bool,
    pub cancelled: bool,
    /// `pacing-qualified, complete` and its negatives.
    pub verdict: String,
    pub reasons: Vec<String>,
    /// Sessions that sent audio; the others were refused or failed before their first packet
    /// (`null`: a sweep.json written before this was recorded).
    pub sessions_streamed: Option<u64>,
    /// The most common reason sessions did not complete (`null`: every one completed).
    pub session_error: Option<String>,
    pub late_packets: u64,
    pub deviation_p99_ms: f64,
    pub max_deviation_ms: f64,
    /// CPU of the worker processes together, in cores.
    pub client_cpu_cores: f64,
    /// Audio the sessions that completed sent, in seconds (a session the server dropped or
    /// failed carried none to its end).
    pub audio_s: f64,
    /// From the start gate to the last worker's end (every session drained and closed).
    pub streaming_wall_s: f64,
    /// `audio_s / streaming_wall_s`: a server that falls behind drains late, so it falls; one
    /// that fails sessions loses their audio (`audio_s` counts completed sessions only).
    pub audio_s_per_s: Option<f64>,
    /// Text and binary frames the server sent.
    pub server_events: u64,
    pub server_events_per_s: Option<f64>,
    /// The protocol's latency figures, by dotted path (`null`: no sample).
    pub latency_ms: BTreeMap<String, Option<f64>>,
}

const SHORT: [&str; 3] = ["p50", "p99", "max"];

fn short(name: &str, q: Option<&ShortPercentiles>, out: &mut Vec<(String, Option<f64>)>) {
    for (field, value) in SHORT
        .iter()
        .zip([q.map(|q| q.p50), q.map(|q| q.p99), q.map(|q| q.max)])
    {
        out.push((format!("{name}.{field}"), value));
    }
}

fn turns(t: Option<&TurnSummary>, out: &mut Vec<(String, Option<f64>)>) {
    let of = |f: fn(&TurnSummary) -> Option<&ShortPercentiles>| t.and_then(f);
    short(
        "first_text_after_end_ms",
        of(|t| t.first_text_after_end_ms.as_ref()),
        out,
    );
    short(
        "first_text_after_start_ms",
        of(|t| t.first_text_after_start_ms.as_ref()),
        out,
    );
    short(
        "first_audio_after_end_ms",
        of(|t| t.first_audio_after_end_ms.as_ref()),
        out,
    );
    short(
        "first_audio_after_start_ms",
        of(|t| t.first_audio_after_start_ms.as_ref()),
        out,
    );
    short(
        "done_after_end_ms",
        of(|t| t.done_after_end_ms.as_ref()),
        out,
    );
    short(
        "speech_stopped_after_audio_ms",
        of(|t| t.speech_stopped_after_audio_ms.as_ref()),
        out,
    );
}

/// sglang-omni's serving metrics a sweep can judge (`--slo serving.unit_lag_ms.p95<80`), in
/// milliseconds as the other figures (the summary keeps their seconds).
fn serving(v: Option<&ServingSection>, out: &mut Vec<(String, Option<f64>)>) {
    type Of = fn(&ServingSection) -> Option<&Distribution>;
    let figures: [(&str, Of, &[&str]); 4] = [
        ("ttfa", |v| v.ttfa_s.as_ref(), &["p50", "p95", "p99"]),
        ("unit_lag", |v| Some(&v.unit_lag_s), &["p50", "p95", "p99"]),
        (
            "response_ttfa",
            |v| Some(&v.response_ttfa_s),
            &["p50", "p95"],
        ),
        (
            "output_gap_excess",
            |v| v.output_gap_excess_s.as_ref(),
            &["p95", "p99"],
        ),
    ];
    for (name, of, fields) in figures {
        let d = v.and_then(of);
        for field in fields {
            let seconds = d.and_then(|d| match *field {
                "p50" => d.p50,
                "p95" => d.p95,
                _ => d.p99,
            });
            out.push((
                format!("serving.{name}_ms.{field}"),
                seconds.map(|s| (s * 1e6).round() / 1e3),
            ));
        }
    }
}

/// The protocol's latency figures of `summary` (all `None` without one: the names alone).
fn latency_of(protocol: Protocol, summary: Option<&Summary>) -> Vec<(String, Option<f64>)> {
    let mut out = Vec::new();
    match protocol {
        Protocol::Native => {
            let v = summary.map(|s| &s.server);
            short(
                "accepted_ms",
                v.and_then(|v| v.accepted_ms.as_ref()),
                &mut out,
            );
            short(
                "unit_lag_ms",
                v.and_then(|v| v.unit_lag_ms.as_ref()),
                &mut out,
            );
            short(
                "first_audio_ms",
                v.and_then(|v| v.first_audio_ms.as_ref()),
                &mut out,
            );
            serving(summary.and_then(|s| s.serving.as_ref()), &mut out);
        }
        Protocol::Openai => turns(summary.and_then(|s| s.openai.as_ref()), &mut out),
        Protocol::Vllm => turns(summary.and_then(|s| s.vllm.as_ref()), &mut out),
        Protocol::Funasr => {
            let f = summary.and_then(|s| s.funasr.as_ref());
            let b = f.map(|f| &f.summary);
            let o = f.map(|f| &f.ours);
            for (name, value) in [
                ("first_update_ms.p50", b.and_then(|b| b.first_update_ms_p50)),
                ("first_update_ms.p95", b.and_then(|b| b.first_update_ms_p95)),
                (
                    "final_after_stop_ms.p50",
                    b.and_then(|b| b.final_after_stop_ms_p50),
                ),
                (
                    "final_after_stop_ms.p95",
                    b.and_then(|b| b.final_after_stop_ms_p95),
                ),
                (
                    "client_response_lag_ms.p95_max",
                    b.and_then(|b| b.client_response_lag_ms_p95_max),
                ),
                (
                    "first_text_update_ms.p50",
                    o.and_then(|o| o.first_text_update_ms_p50),
                ),
                (
                    "first_text_update_ms.p95",
                    o.and_then(|o| o.first_text_update_ms_p95),
                ),
                (
                    "stopped_after_stop_ms.p50",
                    o.and_then(|o| o.stopped_after_stop_ms_p50),
                ),
                (
                    "stopped_after_stop_ms.p95",
                    o.and_then(|o| o.stopped_after_stop_ms_p95),
                ),
            ] {
                out.push((name.to_string(), value));
            }
        }
    }
    out
}

/// The figure paths `--slo` may name for `protocol`.
pub fn latency_paths(protocol: Protocol) -> Vec<String> {
    latency_of(protocol, None)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// The latency figures a table shows for `protocol`, the most telling first; `audio_out`:
/// the sessions asked for audio (a text-only session, an OpenAI transcription session and
/// vLLM's realtime transcription have none, and a first-audio column would be empty at every
/// level). vLLM's time to first text is from the start of the input: its transcription
/// streams while the input arrives, so its first text after the end has no sample. The native
/// unit lag is sglang-omni's own (`serving`), which leaves out the partial tail unit: ours has
/// it, and its wait for the input's end (up to a packet) decided the p99 of a short level.
pub fn headline(protocol: Protocol, audio_out: bool) -> &'static [&'static str] {
    match (protocol, audio_out) {
        (Protocol::Native, true) => &[
            "accepted_ms.p99",
            "serving.unit_lag_ms.p99",
            "first_audio_ms.p50",
        ],
        (Protocol::Native, false) => &["accepted_ms.p99", "serving.unit_lag_ms.p99"],
        (Protocol::Openai, true) => &[
            "first_text_after_end_ms.p99",
            "first_audio_after_end_ms.p99",
            "done_after_end_ms.p99",
        ],
        (Protocol::Openai, false) => &["first_text_after_end_ms.p99", "done_after_end_ms.p99"],
        (Protocol::Vllm, _) => &["first_text_after_start_ms.p99", "done_after_end_ms.p99"],
        (Protocol::Funasr, _) => &["first_update_ms.p95", "final_after_stop_ms.p95"],
    }
}

impl RunFigures {
    /// The figures of a finished run: its summary, and for the throughput the workers'
    /// results it was made of (as the conductor collected them: a result file a full disk
    /// refused came over the telemetry pipe). Sessions that streamed are unknown (`None`)
    /// when a worker left only its last progress report (killed, its file lost).
    pub fn of(
        summary: &Summary,
        results: &[WorkerResult],
        folder: &str,
        repeat: u32,
    ) -> RunFigures {
        let settings = &summary.settings;
        let per_session_known = results.len() == settings.processes as usize
            && results.iter().all(|r| !r.from_telemetry);
        let packet_s = settings.packet_s();
        let mut audio_s = 0.0;
        let mut server_events = 0;
        let mut sessions_streamed = 0;
        for s in results.iter().flat_map(|r| &r.sessions) {
            // The server's throughput is the audio it carried to the end of a session: a
            // session it dropped mid-stream ended early, so counting its audio would read a
            // server that fails every session as one that keeps up.
            if s.status == crate::contract::worker::SessionStatus::Completed {
                audio_s += (s.counts.packets as f64 * packet_s).min(settings.duration_s);
            }
            server_events += s.server_events;
            sessions_streamed += u64::from(s.counts.packets > 0);
        }
        let gate = results.iter().filter_map(|r| r.gate_s).reduce(f64::min);
        let end = results.iter().map(|r| r.ended_s).reduce(f64::max);
        let streaming_wall_s = match (gate, end) {
            (Some(g), Some(e)) if e > g => e - g,
            _ => 0.0,
        };
        let per_s = |x: f64| (streaming_wall_s > 0.0).then(|| round3(x / streaming_wall_s));
        RunFigures {
            folder: folder.to_string(),
            repeat,
            pacing_qualified: summary.verdict.pacing_qualified,
            complete: summary.verdict.complete,
            cancelled: summary.cancelled,
            verdict: verdict_words(
                summary.verdict.pacing_qualified,
                summary.verdict.unpaced,
                summary.verdict.complete,
            ),
            reasons: summary.verdict.reasons.clone(),
            sessions_streamed: per_session_known.then_some(sessions_streamed),
            session_error: summary.sessions.errors.first().map(|e| e.message.clone()),
            late_packets: summary.pacing.counts.late_packets,
            deviation_p99_ms: summary.pacing.deviation_ms.p99,
            max_deviation_ms: summary.pacing.deviation_ms.max,
            client_cpu_cores: round3(
                summary
                    .processes
                    .iter()
                    .filter(|p| p.role == crate::contract::Role::Worker)
                    .map(|p| p.cpu_cores)
                    .sum(),
            ),
            audio_s: round3(audio_s),
            streaming_wall_s: round3(streaming_wall_s),
            audio_s_per_s: per_s(audio_s),
            server_events,
            server_events_per_s: per_s(server_events as f64),
            latency_ms: latency_of(settings.protocol, Some(summary))
                .into_iter()
                .collect(),
        }
    }
}

/// `pacing-qualified, complete` and its negatives (the run report's words).
pub fn verdict_words(qualified: bool, unpaced: bool, complete: bool) -> String {
    let pacing = match (unpaced, qualified) {
        (true, _) => "unpaced",
        (false, true) => "pacing-qualified",
        (false, false) => "PACING-UNQUALIFIED",
    };
    let complete = if complete { "complete" } else { "NOT complete" };
    format!("{pacing}, {complete}")
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_names_its_figures_and_its_headline_is_among_them() {
        for p in [
            Protocol::Native,
            Protocol::Openai,
            Protocol::Vllm,
            Protocol::Funasr,
        ] {
            let paths = latency_paths(p);
            assert!(!paths.is_empty());
            for audio_out in [true, false] {
                for h in headline(p, audio_out) {
                    assert!(paths.iter().any(|x| x == h), "{p:?}: {h}");
                }
            }
        }
        assert!(latency_paths(Protocol::Native).contains(&"unit_lag_ms.p99".to_string()));
        for path in [
            "serving.unit_lag_ms.p95",
            "serving.ttfa_ms.p95",
            "serving.response_ttfa_ms.p50",
        ] {
            assert!(
                latency_paths(Protocol::Native).contains(&path.to_string()),
                "{path}"
            );
        }
        assert!(latency_paths(Protocol::Funasr).contains(&"first_update_ms.p95".to_string()));
    }

    /// A sweep of sessions without audio out had a first-audio column empty at every level
    /// (vLLM's realtime transcription always, OpenAI transcription and text sessions).
    #[test]
    fn a_headline_without_audio_out_names_no_first_audio_figure() {
        for p in [Protocol::Native, Protocol::Openai, Protocol::Vllm] {
            assert!(
                !headline(p, false).iter().any(|h| h.contains("first_audio")),
                "{p:?}"
            );
        }
        assert!(headline(Protocol::Openai, true).contains(&"first_audio_after_end_ms.p99"));
        assert!(!headline(Protocol::Vllm, true).contains(&"first_audio_after_end_ms.p99"));
        assert!(headline(Protocol::Native, true).contains(&"first_audio_ms.p50"));
    }

    /// vLLM's text streams before the input ends: its after-end column read `–` at every level
    /// (QA of 2026-12-07).
    #[test]
    fn a_vllm_headline_times_the_first_text_from_the_start_of_the_input() {
        for audio_out in [true, false] {
            let h = headline(Protocol::Vllm, audio_out);
            assert!(h.contains(&"first_text_after_start_ms.p99"), "{h:?}");
            assert!(!h.contains(&"first_text_after_end_ms.p99"), "{h:?}");
        }
    }
}
