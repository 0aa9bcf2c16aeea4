//! Reading the shards given to `merge`, and refusing those that are not shards of one run:
//! the same `--run-id` and shard count, layout, packets and protocol, each index once.

use crate::contract::worker::{SessionStatus, WorkerResult};
use crate::contract::Role;
use crate::options::Shard;
use crate::summary::multihost::ShardRow;
use crate::summary::Summary;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// One shard's output folder: its summary and its workers' result files.
pub struct Loaded {
    pub dir: PathBuf,
    pub summary: Summary,
    shard: Shard,
    /// Per worker of the shard: its pid and its result file, if it left one.
    workers: Vec<(u32, Option<WorkerResult>)>,
    /// The workers (shard-local index, pid) whose result file is not in the folder although
    /// the shard's summary says they left a result: copied without it, or written only over the
    /// pipe when the shard's disk refused the file.
    pub results_not_in_folder: Vec<(u32, u32)>,
}

/// Reads every folder and checks that they are shards of one run.
pub fn all(dirs: &[PathBuf]) -> Result<Vec<Loaded>> {
    let mut loaded: Vec<Loaded> = Vec::new();
    for dir in dirs {
        let l = one(dir)?;
        if let Some(first) = loaded.first() {
            same_run(first, &l)?;
        }
        if let Some(twin) = loaded.iter().find(|o| o.shard.index == l.shard.index) {
            bail!(
                "{} and {} are both shard {} of run {}: give each shard's folder once",
                twin.dir.display(),
                l.dir.display(),
                l.shard.index,
                l.shard.run_id
            );
        }
        loaded.push(l);
    }
    loaded.sort_by_key(|l| l.shard.index);
    Ok(loaded)
}

fn one(given: &Path) -> Result<Loaded> {
    // A shard's summary.json stands for its folder, where its workers' results are too.
    let dir = crate::report::command::folder_of(given);
    // A shard still running has only the summary of its start: merged now, it would count as
    // killed, and its folder would then hold a merge to refuse the real one.
    if let Some(pid) = crate::paths::running_owner(dir) {
        let who = if pid == 0 {
            "a run".to_string()
        } else {
            format!("a run (pid {pid})")
        };
        bail!(
            "{} is still being written by {who}: merge the shards once every one has ended (nothing was written)",
            dir.display()
        );
    }
    let (_, summary) = crate::report::command::load_saying(
        given,
        "give each shard's output folder (the folder of a `run --shard-index I --shard-count N --run-id ID`) or its summary.json",
    )?;
    if summary.merge.is_some() {
        bail!(
            "{} is a merge already (of run {}); give the shards' own folders",
            dir.display(),
            summary.merge.as_ref().map_or("?", |m| m.run_id.as_str())
        );
    }
    let Some(shard) = summary.settings.shard.clone() else {
        bail!(
            "{} is not a shard: its run had no --shard-index/--shard-count/--run-id (run each host's share with them, see docs/multihost.md)",
            dir.display()
        );
    };
    if shard.index >= shard.count {
        bail!(
            "{} says it is shard {} of {}, which cannot be (an index is below the count): its summary.json was edited or damaged; copy the shard's folder again from its host",
            dir.display(),
            shard.index,
            shard.count
        );
    }
    let pids = summary
        .processes
        .iter()
        .filter(|p| p.role == Role::Worker)
        .map(|p| (p.index, p.pid));
    let pid_of = |k: u32| {
        pids.clone()
            .find(|(i, _)| *i == Some(k))
            .map_or(0, |(_, pid)| pid)
    };
    let left_a_result = |k: u32| {
        summary
            .processes
            .iter()
            .any(|p| p.role == Role::Worker && p.index == Some(k) && p.result_present)
    };
    // A result file that is missing is a worker that left none (the shard's summary says
    // so, else its absence is said); one that is there and does not read is an error. A shard
    // whose conductor died (its summary the provisional one) has the results its workers
    // wrote when they were told to end: they are pooled as any (their sessions stopped
    // early), not thrown away.
    let results = crate::report::rebuild::worker_results(dir, summary.settings.processes)?;
    let mut results_not_in_folder = Vec::new();
    let workers = results
        .into_iter()
        .zip(0u32..)
        .map(|(result, k)| {
            if result.is_none() && left_a_result(k) {
                results_not_in_folder.push((k, pid_of(k)));
            }
            (pid_of(k), result)
        })
        .collect();
    Ok(Loaded {
        dir: dir.to_path_buf(),
        summary,
        shard,
        workers,
        results_not_in_folder,
    })
}

/// Refuses `b` unless it is a shard of `a`'s run, naming every difference.
fn same_run(a: &Loaded, b: &Loaded) -> Result<()> {
    let mut differ = Vec::new();
    let mut check = |what: &str, x: String, y: String| {
        if x != y {
            differ.push(format!("{what}: {x} vs {y}"));
        }
    };
    check("--run-id", a.shard.run_id.clone(), b.shard.run_id.clone());
    check(
        "--shard-count",
        a.shard.count.to_string(),
        b.shard.count.to_string(),
    );
    // The load itself: the same settings `report --vs` requires of two runs it compares.
    differ.extend(crate::report::compare::differing_settings(
        &a.summary, &b.summary,
    ));
    if !differ.is_empty() {
        bail!(
            "{} (shard {}) and {} (shard {}) are not shards of one run: {}; merge pools the shards of one run only",
            a.dir.display(),
            a.shard.index,
            b.dir.display(),
            b.shard.index,
            differ.join("; ")
        );
    }
    Ok(())
}

impl Loaded {
    pub fn shard(&self) -> &Shard {
        &self.shard
    }

    /// How many of the shard's workers left a result file here.
    pub fn results_present(&self) -> usize {
        self.workers.iter().filter(|(_, r)| r.is_some()).count()
    }

    /// The shard's workers, numbered run-wide (shard × workers per shard + K), their times
    /// moved from the host's `CLOCK_MONOTONIC` to Unix seconds through each one's anchor.
    pub fn workers_on_wall_clock(&self, per_shard: u32) -> Vec<(u32, Option<WorkerResult>)> {
        let base = self.shard.index * per_shard;
        self.workers
            .iter()
            .map(|(pid, result)| {
                let result = result.clone().map(|mut r| {
                    let d = r.anchor.realtime_s - r.anchor.monotonic_s;
                    r.index += base;
                    r.started_s += d;
                    r.ended_s += d;
                    r.gate_s = r.gate_s.map(|g| g + d);
                    r.first_injection_s = r.first_injection_s.map(|t| t + d);
                    for s in &mut r.sessions {
                        s.first_send_s = s.first_send_s.map(|t| t + d);
                        s.last_send_s = s.last_send_s.map(|t| t + d);
                    }
                    for w in r
                        .late_packet_windows
                        .iter_mut()
                        .chain(&mut r.send_blocked_windows)
                        .chain(&mut r.loop_lag_windows)
                    {
                        w[0] += d;
                        w[1] += d;
                    }
                    for i in &mut r.injections {
                        i.start_s += d;
                        i.end_s += d;
                    }
                    r.anchor.monotonic_s = r.anchor.realtime_s;
                    r
                });
                (*pid, result)
            })
            .collect()
    }

    pub fn worker_cpu_seconds(&self) -> f64 {
        self.summary
            .processes
            .iter()
            .filter(|p| p.role == Role::Worker)
            .map(|p| p.cpu_seconds)
            .sum()
    }

    /// The shard's row in the merged summary: a shard whose run did not finish has its
    /// figures from the results its workers left (its summary has none).
    pub fn row(&self) -> ShardRow {
        let s = &self.summary;
        let results = || self.workers.iter().filter_map(|(_, r)| r.as_ref());
        let (completed, packets, late_packets, deviation_p99_ms) = if s.unfinished() {
            let completed = results()
                .flat_map(|r| &r.sessions)
                .filter(|o| o.status == SessionStatus::Completed)
                .count() as u64;
            let packets = results().map(|r| r.counts.packets).sum();
            let late = results().map(|r| r.counts.late_packets).sum();
            (completed, packets, late, None)
        } else {
            (
                s.sessions.completed,
                s.pacing.counts.packets,
                s.pacing.counts.late_packets,
                Some(s.pacing.deviation_ms.p99),
            )
        };
        ShardRow {
            index: self.shard.index,
            dir: Some(self.dir.display().to_string()),
            present: true,
            hostname: Some(s.host.hostname.clone()),
            cpu_model: Some(s.host.cpu_model.clone()),
            sessions: s.layout.sessions_total,
            completed,
            packets,
            late_packets,
            deviation_p99_ms,
            // Not known for a shard whose conductor died (its summary has none).
            worker_cpu_seconds: (!s.unfinished())
                .then(|| (self.worker_cpu_seconds() * 1000.0).round() / 1000.0),
            window: s.streaming_window,
            // A shard whose conductor died recorded neither: its provisional summary's gate
            // ("never opened") and verdict (unqualified) are no finding (`null`, said so).
            start_gate: (!s.unfinished()).then(|| s.start_gate.clone()).flatten(),
            clock_sync: s.clock_sync.clone(),
            verdict: (!s.unfinished()).then(|| s.verdict.clone()),
        }
    }
}
