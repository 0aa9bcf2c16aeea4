//! The `funasr` section of the summary: Fun-ASR's `realtime_ws_benchmark.py` figures, key for
//! key and rounded as it rounds them — per client and for the run — so that they compare line
//! by line with its JSONL, and ours beside them under other names where theirs mislead
//! (docs/funasr.md says where).

use crate::contract::worker::{TranscriptClient, WorkerResult};
use crate::options::Settings;
use crate::stats::exact::{median, percentile, round_to};
use serde::{Deserialize, Serialize};

/// The benchmark's figures and ours.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FunasrSection {
    /// The benchmark's summary line.
    pub summary: BenchSummary,
    /// The benchmark's line of each client, by `client_id`.
    pub clients: Vec<BenchClient>,
    /// Our figures beside theirs.
    pub ours: OurFigures,
}

/// The benchmark's `{"type":"client",…}`, in its key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchClient {
    /// Worker-major session number: worker × sessions per process + session.
    pub client_id: u64,
    /// The client's input audio (the file × `--loops`, cut at `--duration`), seconds.
    pub audio_seconds: f64,
    pub chunk_ms: u32,
    /// `--client-ping-interval` / `--client-ping-timeout` in seconds, `null` when disabled
    /// (≤ 0), as the benchmark writes them.
    pub client_ping_interval: Option<f64>,
    pub client_ping_timeout: Option<f64>,
    pub messages: u64,
    pub result_messages: u64,
    pub partial_messages: u64,
    pub final_messages: u64,
    /// Messages per `event`, in the order first seen.
    #[schemars(with = "std::collections::BTreeMap<String, u64>")]
    pub events: EventCounts,
    pub first_update_ms: Option<f64>,
    pub final_update_ms: Option<f64>,
    pub final_after_stop_ms: Option<f64>,
    pub stopped: bool,
    pub errors: Vec<String>,
    pub send_seconds: Option<f64>,
    pub wall_seconds: f64,
    pub audio_per_wall: Option<f64>,
    pub send_audio_per_wall: Option<f64>,
    pub response_lag_ms_max: Option<f64>,
    pub response_lag_ms_p95: Option<f64>,
}

/// The benchmark's `{"type":"summary",…}`, in its key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchSummary {
    pub clients: u64,
    pub total_audio_seconds: f64,
    /// First connection start → last session end, connection set-up included.
    pub elapsed_seconds: f64,
    pub aggregate_audio_per_wall: Option<f64>,
    pub first_update_ms_p50: Option<f64>,
    pub first_update_ms_p95: Option<f64>,
    pub final_after_stop_ms_p50: Option<f64>,
    pub final_after_stop_ms_p95: Option<f64>,
    pub client_response_lag_ms_p95_max: Option<f64>,
    pub partial_messages: u64,
    pub final_messages: u64,
    /// Error strings over all clients.
    pub errors: u64,
}

/// Ours, where the benchmark's definitions mislead.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OurFigures {
    /// The first result with any text (an empty partial does not count), p50/p95 over clients.
    pub first_text_update_ms_p50: Option<f64>,
    pub first_text_update_ms_p95: Option<f64>,
    /// STOP sent → `stopped`, p50/p95 over clients.
    pub stopped_after_stop_ms_p50: Option<f64>,
    pub stopped_after_stop_ms_p95: Option<f64>,
    /// First audio frame → last session end: the wall time without connection set-up.
    pub streaming_wall_seconds: f64,
    /// The audio the clients sent (a session that ended early sent less than its audio; the
    /// benchmark's figure counts all of it) over the streaming wall time.
    pub aggregate_audio_per_streaming_wall: Option<f64>,
    /// Finals that arrived before STOP was sent (the benchmark's final figures then come
    /// from the last final, maybe one after STOP).
    pub finals_before_stop: u64,
    /// Clients with at least one error, by id.
    pub failed_clients: Vec<u64>,
}

/// Event counts in the order first seen, written as a JSON object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventCounts(pub Vec<(String, u64)>);

impl Serialize for EventCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (event, n) in &self.0 {
            map.serialize_entry(event, n)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for EventCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Counts;
        impl<'de> serde::de::Visitor<'de> for Counts {
            type Value = EventCounts;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of event counts")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<EventCounts, A::Error> {
                let mut counts = Vec::new();
                while let Some(entry) = map.next_entry::<String, u64>()? {
                    counts.push(entry);
                }
                Ok(EventCounts(counts))
            }
        }
        d.deserialize_map(Counts)
    }
}

fn r1(v: Option<f64>) -> Option<f64> {
    v.map(|v| round_to(v, 1))
}

fn r3(v: Option<f64>) -> Option<f64> {
    v.map(|v| round_to(v, 3))
}

/// A ping setting as the benchmark keeps it: `None` (JSON `null`) when ≤ 0 disables it.
fn enabled(seconds: f64) -> Option<f64> {
    (seconds > 0.0).then_some(seconds)
}

/// The benchmark's line of one client.
/// `cut_s`: the audio a session stopped early by a cancel sent (its input ended there, as one cut
/// at `--duration`; counting the whole file read a cancelled run's clients as several times
/// faster than real time).
pub fn bench_client(
    client_id: u64,
    c: &TranscriptClient,
    settings: &Settings,
    cut_s: Option<f64>,
) -> BenchClient {
    let samples = settings.audio.total_samples().unwrap_or(0);
    let rate = f64::from(crate::protocol::INPUT_SAMPLE_RATE);
    let audio_seconds = match &settings.audio {
        // As the benchmark: one play's seconds times the loops.
        crate::audio::AudioSource::Wav {
            loops, cut: None, ..
        }
        | crate::audio::AudioSource::Sample {
            loops, cut: None, ..
        } => (samples / u64::from((*loops).max(1))) as f64 / rate * f64::from(*loops),
        // Cut at --duration: what was sent.
        _ => samples as f64 / rate,
    };
    // Rounded as the benchmark's totals are: 38 packets of 0.1 s are 3.8, not 3.8000000000000003.
    let audio_seconds = cut_s.map_or(audio_seconds, |cut| round_to(cut, 3).min(audio_seconds));
    let per = |s: Option<f64>| s.filter(|s| *s != 0.0).map(|s| audio_seconds / s);
    BenchClient {
        client_id,
        audio_seconds,
        chunk_ms: settings.packet_ms,
        client_ping_interval: enabled(settings.client_ping_interval_s),
        client_ping_timeout: enabled(settings.client_ping_timeout_s),
        messages: c.messages,
        result_messages: c.result_messages,
        partial_messages: c.partial_messages,
        final_messages: c.final_messages,
        events: EventCounts(c.events.clone()),
        first_update_ms: r1(c.first_update_ms),
        final_update_ms: r1(c.final_update_ms),
        final_after_stop_ms: r1(c.final_after_stop_ms),
        stopped: c.stopped,
        errors: c.errors.clone(),
        send_seconds: r3(c.send_seconds),
        wall_seconds: round_to(c.wall_seconds, 3),
        audio_per_wall: r3(per(Some(c.wall_seconds))),
        send_audio_per_wall: r3(per(c.send_seconds)),
        response_lag_ms_max: r1(c.response_lag_ms_max),
        response_lag_ms_p95: r1(c.response_lag_ms_p95),
    }
}

/// The benchmark's summary of its client lines, over `elapsed_s` of wall time.
pub fn bench_summary(clients: &[BenchClient], elapsed_s: f64) -> BenchSummary {
    let total_audio: f64 = clients.iter().map(|c| c.audio_seconds).sum();
    let values =
        |f: fn(&BenchClient) -> Option<f64>| -> Vec<f64> { clients.iter().filter_map(f).collect() };
    let first = values(|c| c.first_update_ms);
    let after_stop = values(|c| c.final_after_stop_ms);
    let lag_p95 = values(|c| c.response_lag_ms_p95);
    BenchSummary {
        clients: clients.len() as u64,
        total_audio_seconds: round_to(total_audio, 3),
        elapsed_seconds: round_to(elapsed_s, 3),
        aggregate_audio_per_wall: r3((elapsed_s != 0.0).then(|| total_audio / elapsed_s)),
        first_update_ms_p50: r1(median(&first)),
        first_update_ms_p95: r1(percentile(&first, 95.0)),
        final_after_stop_ms_p50: r1(median(&after_stop)),
        final_after_stop_ms_p95: r1(percentile(&after_stop, 95.0)),
        client_response_lag_ms_p95_max: r1(lag_p95.iter().copied().reduce(f64::max)),
        partial_messages: clients.iter().map(|c| c.partial_messages).sum(),
        final_messages: clients.iter().map(|c| c.final_messages).sum(),
        errors: clients.iter().map(|c| c.errors.len() as u64).sum(),
    }
}

/// The section, from every worker's sessions; `None` when no session recorded transcripts.
pub fn section<'r>(
    results: impl Iterator<Item = &'r WorkerResult>,
    settings: &Settings,
) -> Option<FunasrSection> {
    let mut raw: Vec<(u64, &TranscriptClient, Option<f64>)> = Vec::new();
    // The packets each session sent: a session that ended early sent less than its audio.
    let mut packets_sent: Vec<(u64, u64)> = Vec::new();
    for r in results {
        for s in &r.sessions {
            if let Some(t) = &s.transcripts {
                let id = u64::from(r.index) * u64::from(settings.sessions_per_process)
                    + u64::from(s.index);
                let cut_s = s
                    .stopped_early
                    .then(|| s.counts.packets as f64 * settings.packet_s());
                raw.push((id, t, cut_s));
                packets_sent.push((id, s.counts.packets));
            }
        }
    }
    if raw.is_empty() {
        return None;
    }
    raw.sort_by_key(|(id, _, _)| *id);
    let clients: Vec<BenchClient> = raw
        .iter()
        .map(|(id, t, cut_s)| bench_client(*id, t, settings, *cut_s))
        .collect();
    let first_s = raw
        .iter()
        .map(|(_, t, _)| t.started_s)
        .fold(f64::INFINITY, f64::min);
    let audio_s = raw
        .iter()
        .filter_map(|(_, t, _)| t.audio_start_s)
        .fold(f64::INFINITY, f64::min);
    let last_s = raw
        .iter()
        .map(|(_, t, _)| t.ended_s)
        .fold(f64::NEG_INFINITY, f64::max);
    // The benchmark's clients stream as soon as their own set-up is done: each session's end
    // as it would have been without its wait at the start gate.
    let last_ungated_s = raw
        .iter()
        .map(|(_, t, _)| t.ended_s - t.gate_wait_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let summary = bench_summary(&clients, last_ungated_s - first_s);
    let ours_values = |f: fn(&TranscriptClient) -> Option<f64>| -> Vec<f64> {
        raw.iter()
            .filter_map(|(_, t, _)| f(t).map(|v| round_to(v, 1)))
            .collect()
    };
    let text = ours_values(|t| t.first_text_update_ms);
    let stopped = ours_values(|t| t.stopped_after_stop_ms);
    let streaming_s = if audio_s.is_finite() {
        last_s - audio_s
    } else {
        0.0
    };
    let sent_audio = sent_audio_s(&clients, &packets_sent, settings.packet_ms);
    let ours = OurFigures {
        first_text_update_ms_p50: r1(median(&text)),
        first_text_update_ms_p95: r1(percentile(&text, 95.0)),
        stopped_after_stop_ms_p50: r1(median(&stopped)),
        stopped_after_stop_ms_p95: r1(percentile(&stopped, 95.0)),
        streaming_wall_seconds: round_to(streaming_s, 3),
        aggregate_audio_per_streaming_wall: r3(
            (streaming_s > 0.0).then(|| sent_audio / streaming_s)
        ),
        finals_before_stop: raw.iter().map(|(_, t, _)| t.finals_before_stop).sum(),
        failed_clients: clients
            .iter()
            .filter(|c| !c.errors.is_empty())
            .map(|c| c.client_id)
            .collect(),
    };
    Some(FunasrSection {
        summary,
        clients,
        ours,
    })
}

/// The audio the clients sent, in seconds: each one's packets (by client id) of `packet_ms`,
/// at most its audio — not the audio each had to send (the benchmark's figure counts a session
/// the server closed after 2 s of 6 as 6 s streamed).
fn sent_audio_s(clients: &[BenchClient], packets_sent: &[(u64, u64)], packet_ms: u32) -> f64 {
    let packet_s = f64::from(packet_ms) / 1000.0;
    clients
        .iter()
        .map(|c| {
            let packets = packets_sent
                .iter()
                .find(|(id, _)| *id == c.client_id)
                .map_or(0, |(_, n)| *n);
            (packets as f64 * packet_s).min(c.audio_seconds)
        })
        .sum()
}

/// The benchmark's printed summary, line for line (`print_summary`).
pub fn summary_lines(section: &FunasrSection) -> Vec<String> {
    let s = &section.summary;
    let show = |v: Option<f64>| v.map_or("None".to_string(), crate::stats::exact::python_float);
    let mut lines = vec![
        "FunASR realtime WebSocket benchmark".to_string(),
        format!("clients: {}", s.clients),
        format!(
            "total audio seconds: {}",
            crate::stats::exact::python_float(s.total_audio_seconds)
        ),
        format!(
            "elapsed seconds: {}",
            crate::stats::exact::python_float(s.elapsed_seconds)
        ),
        format!(
            "aggregate audio/wall: {}x",
            show(s.aggregate_audio_per_wall)
        ),
        format!(
            "first update p50/p95 ms: {} / {}",
            show(s.first_update_ms_p50),
            show(s.first_update_ms_p95)
        ),
        format!(
            "final after STOP p50/p95 ms: {} / {}",
            show(s.final_after_stop_ms_p50),
            show(s.final_after_stop_ms_p95)
        ),
        format!(
            "max client response-lag p95 ms: {}",
            show(s.client_response_lag_ms_p95_max)
        ),
        format!(
            "partial/final messages: {} / {}",
            s.partial_messages, s.final_messages
        ),
        format!("errors: {}", s.errors),
    ];
    if s.errors > 0 {
        for c in &section.clients {
            for e in &c.errors {
                lines.push(format!("client {} error: {e}", c.client_id));
            }
        }
    }
    lines
}

/// Our figures beside the benchmark's, named so they are not mistaken for them.
pub fn our_lines(section: &FunasrSection) -> Vec<String> {
    let o = &section.ours;
    let ms = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.1}"));
    vec![
        format!(
            "ours: first text update p50/p95 ms: {} / {} (an empty partial does not count)",
            ms(o.first_text_update_ms_p50),
            ms(o.first_text_update_ms_p95)
        ),
        format!(
            "ours: stopped after STOP p50/p95 ms: {} / {}",
            ms(o.stopped_after_stop_ms_p50),
            ms(o.stopped_after_stop_ms_p95)
        ),
        format!(
            "ours: streaming wall {:.3} s, audio/streaming wall {} (connection set-up excluded); finals before STOP {}",
            o.streaming_wall_seconds,
            o.aggregate_audio_per_streaming_wall
                .map_or("none".to_string(), |v| format!("{v:.3}x")),
            o.finals_before_stop
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: u64, first: f64, after_stop: Option<f64>, lag_p95: f64) -> BenchClient {
        BenchClient {
            client_id: id,
            audio_seconds: 5.8,
            chunk_ms: 100,
            client_ping_interval: None,
            client_ping_timeout: Some(20.0),
            messages: 9,
            result_messages: 8,
            partial_messages: 7,
            final_messages: 1,
            events: EventCounts(vec![("stopped".into(), 1)]),
            first_update_ms: Some(first),
            final_update_ms: None,
            final_after_stop_ms: after_stop,
            stopped: true,
            errors: if id == 2 {
                vec!["x".into(), "y".into()]
            } else {
                vec![]
            },
            send_seconds: None,
            wall_seconds: 6.0,
            audio_per_wall: None,
            send_audio_per_wall: None,
            response_lag_ms_max: None,
            response_lag_ms_p95: Some(lag_p95),
        }
    }

    /// Per-client values 500.1, 500.3, 510.0, 700.0: median (500.3 + 510.0) / 2 = 505.15 →
    /// 505.1 or 505.2 as Python rounds the double; p95 at index 2.85 → 510 × 0.15 + 700 × 0.85.
    #[test]
    fn the_summary_takes_percentiles_over_per_client_values_as_the_benchmark_issue_11() {
        let clients = [
            client(0, 510.0, Some(90.0), -60.0),
            client(1, 500.1, None, -40.5),
            client(2, 700.0, Some(110.0), -70.0),
            client(3, 500.3, Some(100.0), -55.0),
        ];
        let s = bench_summary(&clients, 7.25);
        assert_eq!(s.clients, 4);
        assert_eq!(s.total_audio_seconds, 23.2);
        assert_eq!(s.aggregate_audio_per_wall, Some(3.2));
        assert_eq!(
            s.first_update_ms_p50,
            Some(round_to((500.3 + 510.0) / 2.0, 1))
        );
        assert_eq!(s.first_update_ms_p95, Some(671.5));
        // Finals after STOP of 3 clients: 90, 100, 110 → median 100, p95 at 1.9 → 109.
        assert_eq!(s.final_after_stop_ms_p50, Some(100.0));
        assert_eq!(s.final_after_stop_ms_p95, Some(109.0));
        assert_eq!(s.client_response_lag_ms_p95_max, Some(-40.5));
        assert_eq!((s.partial_messages, s.final_messages, s.errors), (28, 4, 2));
    }

    fn settings(args: &[&str]) -> Settings {
        use clap::Parser as _;
        let mut argv = vec!["duplexbench-tui", "run", "--protocol", "funasr", "-s", "1"];
        argv.extend_from_slice(args);
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        let Some(crate::cli::Command::Run(run)) = cli.command else {
            unreachable!()
        };
        crate::options::validate(&run, String::new(), false)
            .unwrap()
            .settings
    }

    /// The benchmark turns a ping setting ≤ 0 into `None` before it writes it, and its
    /// `--client-ping-timeout` is 20 s unless given (it only matters once pings are on).
    #[test]
    fn disabled_ping_settings_are_null_and_the_timeout_is_20_s_by_default_as_the_benchmarks() {
        let client = TranscriptClient::default();
        let line = bench_client(0, &client, &settings(&[]), None);
        assert_eq!(
            (line.client_ping_interval, line.client_ping_timeout),
            (None, Some(20.0))
        );
        let given = settings(&["--client-ping-interval", "5", "--client-ping-timeout", "-1"]);
        let line = bench_client(0, &client, &given, None);
        assert_eq!(
            (line.client_ping_interval, line.client_ping_timeout),
            (Some(5.0), None)
        );
    }

    /// A client a cancel stopped early streamed the audio it sent: 30 packets of 100 ms are
    /// 3 s, not the file's length (its line read 2.7 × real time), and never more than the file.
    #[test]
    fn a_cancelled_clients_audio_is_what_it_sent() {
        let client = TranscriptClient {
            wall_seconds: 3.0,
            ..TranscriptClient::default()
        };
        let whole = bench_client(0, &client, &settings(&[]), None);
        let cut = bench_client(0, &client, &settings(&[]), Some(3.0));
        assert!(whole.audio_seconds > 3.0, "{}", whole.audio_seconds);
        assert_eq!(cut.audio_seconds, 3.0);
        assert_eq!(cut.audio_per_wall, Some(1.0));
        let sent = bench_client(0, &client, &settings(&[]), Some(38.0 * 0.1));
        assert_eq!(sent.audio_seconds.to_string(), "3.8");
        let past = bench_client(0, &client, &settings(&[]), Some(1e6));
        assert_eq!(past.audio_seconds, whole.audio_seconds);
    }

    /// Ours counts the audio sent: a client the server closed after 2 s of its 6 s sent 2 s.
    #[test]
    fn our_audio_per_streaming_wall_counts_the_audio_sent() {
        let client = TranscriptClient::default();
        let mut clients = vec![
            bench_client(0, &client, &settings(&[]), None),
            bench_client(1, &client, &settings(&[]), None),
        ];
        for c in &mut clients {
            c.audio_seconds = 6.0;
        }
        // 100 ms chunks: client 0 sent 20 (2 s), client 1 all 60 and one more (its last short).
        let sent = sent_audio_s(&clients, &[(0, 20), (1, 61)], 100);
        assert!((sent - 8.0).abs() < 1e-9, "{sent}");
    }

    #[test]
    fn the_printed_summary_is_the_benchmarks_issue_11() {
        let section = FunasrSection {
            summary: bench_summary(&[client(2, 462.0, Some(414.4), -58.0)], 48.765),
            clients: vec![client(2, 462.0, Some(414.4), -58.0)],
            ours: OurFigures::default(),
        };
        let lines = summary_lines(&section);
        assert_eq!(lines[0], "FunASR realtime WebSocket benchmark");
        assert_eq!(lines[3], "elapsed seconds: 48.765");
        assert_eq!(lines[5], "first update p50/p95 ms: 462.0 / 462.0");
        assert_eq!(lines[6], "final after STOP p50/p95 ms: 414.4 / 414.4");
        assert_eq!(lines[9], "errors: 2");
        assert_eq!(lines[10], "client 2 error: x");
    }
}
