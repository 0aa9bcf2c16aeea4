//! The summary's stalls: the sampler's episodes worth listing, the faults injected, and what
//! the late packets and loop-lag windows fell into.

use super::{results, InjectionRecord, RunRecord};
use crate::sampler::attribution::{self, Attribution, WorkerWindows};
use crate::sampler::{Episode, STALL_MS};

/// At most this many stalls are listed in the summary.
const MAX_STALLS_LISTED: usize = 200;

/// The episodes that are stalls, by start time, at most [`MAX_STALLS_LISTED`].
pub(super) fn listed(episodes: Vec<Episode>) -> Vec<Episode> {
    episodes
        .into_iter()
        .filter(|e| e.duration_ms >= STALL_MS)
        .take(MAX_STALLS_LISTED)
        .collect()
}

/// What the late packets, loop-lag windows and blocked sends of every worker fell into.
pub(super) fn attribution_of(
    record: &RunRecord<'_>,
    episodes: &[Episode],
    foreign: &[[f64; 2]],
    sampled: bool,
) -> Attribution {
    let windows: Vec<WorkerWindows<'_>> = results(record).map(WorkerWindows::of).collect();
    attribution::attribute(sampled.then_some(episodes), foreign, &windows)
}

/// The faults injected with `--inject-*`, worker by worker.
pub(super) fn injections_of(record: &RunRecord<'_>) -> Vec<InjectionRecord> {
    results(record)
        .flat_map(|r| {
            r.injections.iter().map(|i| InjectionRecord {
                worker: r.index,
                kind: i.kind.clone(),
                start_s: i.start_s,
                duration_ms: ((i.end_s - i.start_s) * 1e6).round() / 1000.0,
                detail: i.detail.clone(),
            })
        })
        .collect()
}
