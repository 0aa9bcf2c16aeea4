//! The summary's verdict and its reasons, in the order a reader needs them: the files lost
//! first (they explain what follows), then the workers', the conductor's, the shards' and the
//! start gate's, then the host's load and the server's stalls.

use super::pooled::Pooled;
use super::{multihost, FilesLost, RunRecord};
use crate::sampler::attribution::plural;
use crate::sampler::host_load::HostLoad;
use crate::sampler::server_stall::{self, Found};
use crate::verdict::{self, Facts, Verdict};

/// The verdict on the pooled results, with the reasons that come before the sampler's.
pub(super) fn verdict(
    record: &RunRecord<'_>,
    pooled: &mut Pooled,
    client_errors: u64,
    files_lost: Option<&FilesLost>,
    start_gate: Option<&multihost::StartGate>,
    output_dir: &str,
) -> Verdict {
    let settings = &record.plan.settings;
    let mut verdict = verdict::judge(&Facts {
        unpaced: settings.no_pace,
        client_errors,
        counts: pooled.counts,
        sessions_with_late_packets: pooled.sessions_with_late_packets,
        late_threshold_ms: settings.late_threshold_ms,
        sessions_configured: pooled.sessions.configured,
        incomplete: pooled.sessions.incomplete,
        rejected: pooled.sessions.rejected,
        stopped_early: pooled.sessions.stopped_early,
        protocol_errors: pooled.server.protocol_errors,
        most_common_error: pooled.sessions.errors.first().map(|e| e.message.as_str()),
        cancelled: record.cancelled.as_deref(),
        missing_results: pooled.missing,
        writer_errors: pooled.writer_errors,
    });
    if let Some(lost) = files_lost {
        // First: it explains the incomplete sessions and the cut files the other reasons name.
        verdict.reasons.insert(0, lost.reason(output_dir));
    }
    verdict.reasons.append(&mut pooled.reasons);
    verdict.reasons.extend(record.notes.iter().cloned());
    if settings.shard.is_some() || start_gate.is_some() {
        let who = settings.shard.as_ref().map_or("this run".to_string(), |s| {
            format!("shard {} of {}", s.index, s.count)
        });
        verdict.reasons.extend(multihost::reasons(
            &who,
            start_gate,
            record.clock_sync.as_ref(),
            settings.late_threshold_ms,
        ));
    }
    verdict
}

/// Other processes' load, when it went over the threshold.
pub(super) fn host_load(load: &HostLoad) -> Option<String> {
    (load.seconds_over_threshold > 0).then(|| {
        format!(
            "other processes used up to {:.1} cores during {} s of the run (over {} cores): figures may be perturbed; don't build or benchmark beside a run",
            load.foreign_cores_max, load.seconds_over_threshold, load.threshold_cores
        )
    })
}

/// The first five server stalls, and the latency jumps the client's own stalls explain.
pub(super) fn server_stalls(server: &Found) -> Vec<String> {
    let mut reasons: Vec<String> = server
        .stalls
        .iter()
        .take(5)
        .map(server_stall::describe)
        .collect();
    if server.client_explained > 0 {
        reasons.push(format!(
            "the server's reply latency jumped {} while the client itself stalled: the client's doing, not called a server stall",
            match server.client_explained {
                1 => "once".to_string(),
                n => format!("{n} times"),
            }
        ));
    }
    reasons
}

impl FilesLost {
    /// The verdict's reason: what was lost, that the figures are whole, what to do.
    pub(super) fn reason(&self, output_dir: &str) -> String {
        let what = if self.disk_full {
            format!("the disk holding {output_dir} is full (No space left on device)")
        } else {
            format!("files under {output_dir} could not be written")
        };
        format!(
            "{what}: {} trace/receipt lines of {} and {} sample lines of {} were not written; the counts and percentiles here come from the workers' counters and are whole; free space, or trace less (--trace meta or off)",
            self.trace_lines,
            plural(self.sessions, "session"),
            self.sample_lines,
            plural(self.workers, "worker")
        )
    }
}
