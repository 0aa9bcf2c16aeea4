//! The result model of a run (SPEC §9): one struct that feeds `summary.json`, `summary.md`, the
//! final table and the exit code, built from the workers' result files and the mock's stats.
//! docs/summary.md documents every key; docs/summary.schema.json is its JSON Schema.

use crate::clock::ClockAnchor;
use crate::host::HostFacts;
use crate::looplag::LoopLagStats;
use crate::mock::stats::MockStats;
use crate::options::{RunPlan, Settings};
use crate::sampler::attribution::{self, Attribution, WorkerWindows};
use crate::sampler::{Episode, SamplerSummary, STALL_MS};
use crate::stats::{FullPercentiles, ShortPercentiles};
use crate::worker::results::{SessionStatus, WorkerHistograms, WorkerResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub schema_version: u32,
    pub tool: Tool,
    pub command_line: String,
    pub cancelled: bool,
    pub started_at: String,
    pub wall_seconds: f64,
    pub clock_anchor: ClockAnchor,
    pub verdict: Verdict,
    pub layout: Layout,
    pub settings: Settings,
    pub host: HostFacts,
    pub pacing: Pacing,
    pub sessions: Sessions,
    pub peak_overlapping_streams: u64,
    pub processes: Vec<ProcessSummary>,
    pub server: ServerView,
    /// Episodes of 20 ms or more of any watched thread (at most 200, by start time).
    pub stalls: Vec<Episode>,
    /// What the late packets and loop stalls fell into.
    pub attribution: Attribution,
    pub sampler: SamplerSummary,
    /// Faults injected with `--inject-*`.
    pub injections: Vec<InjectionRecord>,
    pub output_dir: String,
}

/// A fault injected into a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InjectionRecord {
    pub worker: u32,
    pub kind: String,
    pub start_s: f64,
    pub duration_ms: f64,
    pub detail: String,
}

/// At most this many stalls are listed in the summary.
const MAX_STALLS_LISTED: usize = 200;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    /// No packet was late (and every worker's figures are present).
    pub pacing_qualified: bool,
    /// Every session completed, none was rejected, and the run was not cancelled.
    pub complete: bool,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Layout {
    pub processes: u32,
    pub sessions_per_process: u32,
    pub sessions_total: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Pacing {
    pub packets: u64,
    pub late_packets: u64,
    /// Packets never sent because their session failed while streaming (e.g. the server
    /// stopped reading); those that fell due while the session still waited are also late.
    pub unsent_packets: u64,
    pub late_threshold_ms: u32,
    pub sends_over_20ms: u64,
    pub sessions_with_violation: u64,
    /// |deviation| of every packet from its schedule.
    pub deviation_ms: FullPercentiles,
    pub websocket_send_ms: ShortPercentiles,
    pub append_span_ms: ShortPercentiles,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sessions {
    pub configured: u64,
    pub completed: u64,
    pub incomplete: u64,
    pub rejected: u64,
    /// Sessions stopped before their last packet because the run was cancelled.
    pub stopped_early: u64,
    /// Why sessions did not complete, most frequent first (at most 10 distinct messages).
    pub errors: Vec<ErrorCount>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorCount {
    pub message: String,
    pub count: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Worker,
    Mock,
}

/// `worker 3` or `mock`: how every output names a process.
pub fn process_name(role: Role, index: Option<u32>) -> String {
    match (role, index) {
        (Role::Worker, Some(i)) => format!("worker {i}"),
        (Role::Worker, None) => "worker".to_string(),
        (Role::Mock, _) => "mock".to_string(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessSummary {
    pub role: Role,
    /// The worker's index (absent for the mock).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub index: Option<u32>,
    pub pid: u32,
    pub cpu_cores: f64,
    pub cpu_seconds: f64,
    pub peak_rss_bytes: u64,
    pub loop_lag_ms: LoopLagStats,
    /// False when the process left no result file; its figures are then zero.
    pub result_present: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub writer_queue_peak_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub writer_queue_peak_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pacing: Option<Pacing>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stall_injected_at_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub telemetry_dropped: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mock: Option<MockFigures>,
}

/// What the built-in mock saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MockFigures {
    pub sessions_served: u64,
    pub sessions_rejected: u64,
    pub appends_received: u64,
    pub protocol_errors: u64,
    /// Arrival of every packet against its session's first arrival.
    pub arrival_deviation_ms: ShortPercentiles,
}

/// The server as the client saw it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerView {
    /// From a packet's send start to its `sglang.input_audio.accepted`.
    pub accepted_ms: ShortPercentiles,
    /// From the send start of the packet completing a unit to its `sglang.unit.done`.
    pub unit_lag_ms: ShortPercentiles,
    /// From packet 0's send start to the first audio delta.
    pub first_audio_ms: ShortPercentiles,
    /// Frames that were not JSON events, binary frames, oversized messages.
    pub protocol_errors: u64,
    /// `error` events the server sent.
    pub error_events: u64,
}

/// Everything the conductor knows at the end of a run.
pub struct RunRecord<'a> {
    pub plan: &'a RunPlan,
    pub host: HostFacts,
    pub started_at: String,
    pub anchor: ClockAnchor,
    pub wall_seconds: f64,
    pub cancelled: Option<String>,
    /// Per worker: its pid and result file, if it wrote one.
    pub workers: Vec<(u32, Option<WorkerResult>)>,
    pub mock: Option<(u32, Option<MockStats>)>,
    /// Problems the conductor saw itself (a worker that died, a mock without stats...).
    pub notes: Vec<String>,
    /// The sampler's episodes and figures (`None` with `--no-sampler`).
    pub sampler: Option<(Vec<Episode>, SamplerSummary)>,
}

fn pacing_of(
    h: &WorkerHistograms,
    counts: (u64, u64, u64, u64, u64),
    late_threshold_ms: u32,
    max_deviation_us: u64,
) -> Pacing {
    let (packets, late_packets, sends_over_20ms, sessions_with_violation, unsent_packets) = counts;
    let mut deviation_ms = h.deviation.full();
    // The exact maximum, not the top of its histogram bucket.
    deviation_ms.max = max_deviation_us as f64 / 1000.0;
    Pacing {
        packets,
        late_packets,
        unsent_packets,
        late_threshold_ms,
        sends_over_20ms,
        sessions_with_violation,
        deviation_ms,
        websocket_send_ms: h.websocket_send.short(),
        append_span_ms: h.append_span.short(),
    }
}

fn pool(into: &mut WorkerHistograms, from: &WorkerHistograms) {
    into.deviation.add(&from.deviation);
    into.websocket_send.add(&from.websocket_send);
    into.append_span.add(&from.append_span);
    into.accepted.add(&from.accepted);
    into.unit_lag.add(&from.unit_lag);
    into.first_audio.add(&from.first_audio);
}

/// The largest number of sessions streaming at once, over every worker (SPEC §5).
pub fn peak_overlap(intervals: impl Iterator<Item = (f64, f64)>) -> u64 {
    let mut edges: Vec<(f64, i64)> = intervals.flat_map(|(a, b)| [(a, 1), (b, -1)]).collect();
    // At equal times, a start counts before an end: touching streams overlap.
    edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(y.1.cmp(&x.1)));
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, step) in edges {
        now += step;
        peak = peak.max(now);
    }
    peak as u64
}

impl Summary {
    pub fn build(record: RunRecord<'_>) -> Summary {
        let settings = &record.plan.settings;
        let threshold = settings.late_threshold_ms;
        let mut pooled = WorkerHistograms::default();
        let mut totals = (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut sessions = Sessions {
            configured: settings.total_sessions(),
            ..Sessions::default()
        };
        let mut errors: BTreeMap<String, u64> = BTreeMap::new();
        let mut processes = Vec::new();
        let mut server = ServerView::default();
        let mut reasons = Vec::new();
        let mut missing = 0u64;
        let mut writer_errors = 0u64;

        for (index, (pid, result)) in record.workers.iter().enumerate() {
            let Some(r) = result else {
                missing += 1;
                sessions.incomplete += u64::from(settings.sessions_per_process);
                reasons.push(format!(
                    "worker {index} (pid {pid}) left no result file; see workers/worker-{index}.log"
                ));
                processes.push(ProcessSummary::without_result(
                    Role::Worker,
                    Some(index as u32),
                    *pid,
                ));
                continue;
            };
            let counts = (
                r.packets,
                r.late_packets,
                r.sends_over_20ms,
                u64::from(r.sessions_with_violation),
                r.unsent_packets,
            );
            pool(&mut pooled, &r.histograms);
            totals.0 += counts.0;
            totals.1 += counts.1;
            totals.2 += counts.2;
            totals.3 += counts.3;
            totals.4 += counts.4;
            server.protocol_errors += r.protocol_errors;
            server.error_events += r.error_events;
            for s in &r.sessions {
                match s.status {
                    SessionStatus::Completed => sessions.completed += 1,
                    SessionStatus::Incomplete => sessions.incomplete += 1,
                    SessionStatus::Rejected => sessions.rejected += 1,
                }
                sessions.stopped_early += u64::from(s.stopped_early);
                if let Some(err) = &s.error {
                    *errors.entry(err.clone()).or_default() += 1;
                }
            }
            if let Some(err) = &r.writer_error {
                writer_errors += 1;
                reasons.push(format!("worker {index}: {err}; its samples are incomplete"));
            }
            processes.push(ProcessSummary {
                role: Role::Worker,
                index: Some(r.index),
                pid: r.pid,
                cpu_cores: r.usage.cpu_cores,
                cpu_seconds: r.usage.cpu_seconds,
                peak_rss_bytes: r.usage.peak_rss_bytes,
                loop_lag_ms: r.loop_lag,
                result_present: true,
                writer_queue_peak_lines: Some(r.writer_queue_peak_lines),
                writer_queue_peak_bytes: Some(r.writer_queue_peak_bytes),
                pacing: Some(pacing_of(
                    &r.histograms,
                    counts,
                    threshold,
                    r.max_deviation_us,
                )),
                stall_injected_at_s: r.stall_injected_at_s,
                telemetry_dropped: Some(r.telemetry_dropped),
                mock: None,
            });
        }
        if let Some((pid, stats)) = &record.mock {
            processes.push(mock_process(*pid, stats.as_ref()));
        }

        let peak = peak_overlap(
            record
                .workers
                .iter()
                .filter_map(|(_, r)| r.as_ref())
                .flat_map(|r| {
                    r.sessions
                        .iter()
                        .filter_map(|s| Some((s.first_send_s?, s.last_send_s?)))
                }),
        );
        let max_deviation_us = record
            .workers
            .iter()
            .filter_map(|(_, r)| r.as_ref().map(|r| r.max_deviation_us))
            .max()
            .unwrap_or(0);
        let pacing = pacing_of(&pooled, totals, threshold, max_deviation_us);
        server.accepted_ms = pooled.accepted.short();
        server.unit_lag_ms = pooled.unit_lag.short();
        server.first_audio_ms = pooled.first_audio.short();

        let mut errors: Vec<ErrorCount> = errors
            .into_iter()
            .map(|(message, count)| ErrorCount { message, count })
            .collect();
        errors.sort_by(|a, b| b.count.cmp(&a.count).then(a.message.cmp(&b.message)));
        errors.truncate(10);
        sessions.errors = errors;

        if pacing.late_packets > 0 {
            reasons.insert(
                0,
                format!(
                    "{} late packets (|deviation| > {} ms) in {} sessions; worst {:.1} ms",
                    pacing.late_packets,
                    threshold,
                    pacing.sessions_with_violation,
                    pacing.deviation_ms.max
                ),
            );
        }
        if pacing.unsent_packets > 0 {
            reasons.push(format!(
                "{} packets were never sent: their sessions failed while streaming",
                pacing.unsent_packets
            ));
        }
        if sessions.incomplete > 0 {
            let first = sessions
                .errors
                .first()
                .map(|e| format!("; most common: {}", e.message))
                .unwrap_or_default();
            reasons.push(format!(
                "{} of {} sessions incomplete{first}",
                sessions.incomplete, sessions.configured
            ));
        }
        if sessions.rejected > 0 {
            reasons.push(format!(
                "{} sessions rejected by the server (HTTP 503 on every attempt)",
                sessions.rejected
            ));
        }
        if sessions.stopped_early > 0 && record.cancelled.is_none() {
            reasons.push(format!(
                "{} sessions were stopped before their last packet",
                sessions.stopped_early
            ));
        }
        if let Some(why) = &record.cancelled {
            reasons.push(format!(
                "cancelled ({why}); figures cover the run until then"
            ));
        }
        reasons.extend(record.notes.iter().cloned());
        let (episodes, sampler) = record.sampler.unwrap_or_default();
        let windows: Vec<WorkerWindows<'_>> = record
            .workers
            .iter()
            .filter_map(|(_, r)| r.as_ref())
            .map(|r| WorkerWindows {
                index: r.index,
                pid: r.pid,
                late_packets: &r.late_packet_windows,
                loop_stalls: &r.loop_stall_windows,
                send_blocked: &r.send_blocked_windows,
            })
            .collect();
        let attribution =
            attribution::attribute(sampler.enabled.then_some(&episodes[..]), &windows);
        let stalls: Vec<Episode> = episodes
            .into_iter()
            .filter(|e| e.duration_ms >= STALL_MS)
            .take(MAX_STALLS_LISTED)
            .collect();
        let injections = record
            .workers
            .iter()
            .filter_map(|(_, r)| r.as_ref())
            .flat_map(|r| {
                r.injections.iter().map(|i| InjectionRecord {
                    worker: r.index,
                    kind: i.kind.clone(),
                    start_s: i.start_s,
                    duration_ms: ((i.end_s - i.start_s) * 1e6).round() / 1000.0,
                    detail: i.detail.clone(),
                })
            })
            .collect();
        let pacing_qualified = pacing.late_packets == 0 && missing == 0;
        let complete = sessions.incomplete == 0
            && sessions.rejected == 0
            && sessions.stopped_early == 0
            && record.cancelled.is_none()
            && missing == 0
            && writer_errors == 0;

        Summary {
            schema_version: SCHEMA_VERSION,
            tool: Tool {
                name: env!("CARGO_PKG_NAME").to_string(),
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
            command_line: record.plan.command_line.clone(),
            cancelled: record.cancelled.is_some(),
            started_at: record.started_at,
            wall_seconds: (record.wall_seconds * 1000.0).round() / 1000.0,
            clock_anchor: record.anchor,
            verdict: Verdict {
                pacing_qualified,
                complete,
                reasons,
            },
            layout: Layout {
                processes: settings.processes,
                sessions_per_process: settings.sessions_per_process,
                sessions_total: settings.total_sessions(),
            },
            settings: settings.clone(),
            host: record.host,
            pacing,
            sessions,
            peak_overlapping_streams: peak,
            processes,
            server,
            stalls,
            attribution,
            sampler,
            injections,
            output_dir: record.plan.output_dir.display().to_string(),
        }
    }

    /// 0 qualified and complete; 1 anything else (a cancelled run's code is the conductor's:
    /// 128 + the signal).
    pub fn exit_code(&self) -> i32 {
        if self.verdict.pacing_qualified && self.verdict.complete {
            0
        } else {
            1
        }
    }
}

impl ProcessSummary {
    /// A process that left no result: its figures are zero.
    fn without_result(role: Role, index: Option<u32>, pid: u32) -> Self {
        ProcessSummary {
            role,
            index,
            pid,
            cpu_cores: 0.0,
            cpu_seconds: 0.0,
            peak_rss_bytes: 0,
            loop_lag_ms: LoopLagStats::default(),
            result_present: false,
            writer_queue_peak_lines: None,
            writer_queue_peak_bytes: None,
            pacing: None,
            stall_injected_at_s: None,
            telemetry_dropped: None,
            mock: None,
        }
    }
}

fn mock_process(pid: u32, stats: Option<&MockStats>) -> ProcessSummary {
    let mut process = ProcessSummary::without_result(Role::Mock, None, pid);
    if let Some(s) = stats {
        process.cpu_cores = s.usage.cpu_cores;
        process.cpu_seconds = s.usage.cpu_seconds;
        process.peak_rss_bytes = s.usage.peak_rss_bytes;
        process.loop_lag_ms = s.loop_lag_ms;
        process.result_present = true;
        process.mock = Some(MockFigures {
            sessions_served: s.sessions_served,
            sessions_rejected: s.sessions_rejected,
            appends_received: s.appends_received,
            protocol_errors: s.protocol_errors,
            arrival_deviation_ms: s.arrival_deviation_ms,
        });
    }
    process
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_streams_are_counted_at_their_peak() {
        let intervals = [(0.0, 10.0), (5.0, 15.0), (10.0, 20.0), (30.0, 40.0)];
        assert_eq!(peak_overlap(intervals.into_iter()), 3);
        assert_eq!(peak_overlap(std::iter::empty()), 0);
    }
}
