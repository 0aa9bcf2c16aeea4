//! The summary of a run whose conductor was killed (SIGKILL, an OOM kill), rebuilt from what
//! its children wrote after it died: the kernel sends its workers SIGTERM, and each ends its
//! sessions and writes its result file (`workers/worker-K.json`); the built-in mock writes its
//! `mock-stats.json`. Only the provisional summary of the run's start is in the folder then,
//! which knows none of it. `report` renders the rebuilt summary; `report --rebuild` writes it
//! over the provisional one. docs/exit-codes.md.

use crate::contract::mock::MockStats;
use crate::contract::worker::WorkerResult;
use crate::contract::Role;
use crate::options::RunPlan;
use crate::paths::RunPaths;
use crate::summary::{RunRecord, Summary, REBUILT};
use anyhow::{bail, Result};
use std::path::Path;

/// The result file of each of the run's `processes` workers, `None` for one that left none.
/// A file that is there and does not read is damage to say, not a worker to drop quietly.
pub fn worker_results(dir: &Path, processes: u32) -> Result<Vec<Option<WorkerResult>>> {
    (0..processes).map(|k| worker_result(dir, k)).collect()
}

/// Worker `k`'s result file, `None` when it left none; an error when it does not read.
fn worker_result(dir: &Path, k: u32) -> Result<Option<WorkerResult>> {
    let path = RunPaths::new(dir).worker_result(k);
    match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => bail!("cannot read {}: {e}", path.display()),
        Ok(text) => serde_json::from_str::<WorkerResult>(&text)
            .map(Some)
            .map_err(|e| {
                anyhow::anyhow!(
                    "{} is not a worker's result ({e}): the run's folder was damaged after its run; copy it again from where the run wrote it",
                    path.display()
                )
            }),
    }
}

/// The summary of the unfinished run in `dir` (whose summary.json is `provisional`), rebuilt
/// from its workers' results and its mock's statistics; `None` when no worker left a result
/// (there is nothing to rebuild from: the provisional summary says what is known). With `mend`
/// (a rebuild that is written), the receipts files a worker that left no result left open are
/// given their end.
pub fn rebuild(dir: &Path, provisional: &Summary, mend: bool) -> Result<Option<Summary>> {
    if !provisional.unfinished() {
        return Ok(None);
    }
    let settings = &provisional.settings;
    wait_for_workers(dir, provisional)?;
    // The only copy of a killed run's figures: a damaged file costs its worker's, not all.
    let mut notes = Vec::new();
    let results: Vec<Option<WorkerResult>> = (0..settings.processes)
        .map(|k| {
            worker_result(dir, k).unwrap_or_else(|e| {
                notes.push(format!(
                    "damaged result: {e:#}; worker {k} is counted as having left none"
                ));
                None
            })
        })
        .collect();
    if results.iter().all(Option::is_none) {
        return Ok(None);
    }
    // A worker killed with its conductor left its sessions' receipts open: `mend` (the rebuild
    // that writes) gives them their end, as the conductor does for a worker that died.
    for (k, _) in results.iter().enumerate().filter(|(_, r)| r.is_none()) {
        let k = k as u32;
        let open = if mend {
            crate::trace::files::mend_receipts_of(dir, k)
        } else {
            0
        };
        if open > 0 {
            notes.push(format!(
                "worker {k}: the receipts of {open} of its sessions, left open, were given their end (what it had written stays)"
            ));
        }
    }
    let pid_of = |role: Role, index: Option<u32>| {
        provisional
            .processes
            .iter()
            .find(|p| p.role == role && p.index == index)
            .map_or(0, |p| p.pid)
    };
    let mock = settings.builtin_mock.then(|| {
        let stats = read_mock_stats(dir, &mut notes);
        (pid_of(Role::Mock, None), stats)
    });
    let anchor = provisional.clock_anchor;
    // The workers ran on the conductor's host: their clock is the anchor's.
    let ended_s = results
        .iter()
        .flatten()
        .map(|r| r.ended_s)
        .reduce(f64::max)
        .unwrap_or(anchor.monotonic_s);
    let gate_s = results
        .iter()
        .flatten()
        .filter_map(|r| r.gate_s)
        .reduce(f64::min);
    let plan = RunPlan {
        settings: settings.clone(),
        // Where it is now (a copied folder is written where it lies).
        output_dir: dir.to_path_buf(),
        new_output: false,
        force: false,
        command_line: provisional.command_line.clone(),
        output_jsonl: None,
    };
    let workers = results
        .into_iter()
        .enumerate()
        .map(|(k, r)| (pid_of(Role::Worker, Some(k as u32)), r))
        .collect();
    let record = RunRecord {
        plan: &plan,
        host: provisional.host.clone(),
        started_at: provisional.started_at.clone(),
        anchor,
        wall_seconds: (ended_s - anchor.monotonic_s).max(0.0),
        cancelled: Some(REBUILT.to_string()),
        workers,
        mock,
        notes,
        sampler: None,
        gate_s,
        clock_sync: provisional.clock_sync.clone(),
        absent_sessions: 0,
        absent_workers: 0,
    };
    Ok(Some(Summary::build(record)))
}

/// How long a rebuild waits for the workers of a conductor killed a moment ago to write their
/// results and exit (they end their sessions within 3 s of the kernel's SIGTERM).
const WORKERS_ENDING_S: u64 = 10;

/// Waits until none of the run's workers is running: a conductor killed a moment ago leaves
/// them ending their sessions and writing their results, and a summary rebuilt before would
/// say they left none. Refused when they still run after [`WORKERS_ENDING_S`].
fn wait_for_workers(dir: &Path, provisional: &Summary) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(WORKERS_ENDING_S);
    loop {
        let mut running = workers_running(dir, provisional);
        if provisional.settings.builtin_mock {
            running.extend(mock_running(dir));
        }
        if running.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            let pids: Vec<String> = running.iter().map(u32::to_string).collect();
            bail!(
                "{}'s conductor is gone, but its workers or its mock (pid {}) still run after {WORKERS_ENDING_S} s: their results are not written yet, so nothing was rebuilt; report it once they have exited (a process stopped with SIGSTOP or in a frozen cgroup ends only once it runs again)",
                dir.display(),
                pids.join(", ")
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The pids of the run's workers still running: a process of that pid whose command line is
/// this run's worker (`worker --config …/worker-K.config.json`; a zombie has none, and a pid
/// reused by another process is not taken for it).
fn workers_running(dir: &Path, provisional: &Summary) -> Vec<u32> {
    let paths = RunPaths::new(dir);
    provisional
        .processes
        .iter()
        .filter(|p| p.role == Role::Worker && p.pid > 0)
        .filter(|p| {
            let config = p.index.and_then(|k| in_place(&paths.worker_config(k)));
            config.is_some() && file_argument(p.pid, "worker", "--config") == config
        })
        .map(|p| p.pid)
        .collect()
}

/// The pid of the run's built-in mock while it runs: the process whose command line is
/// `mock … --stats-output FILE` with FILE this run's `mock-stats.json`. The provisional summary
/// does not name it; it writes its statistics once the workers have ended their sessions.
fn mock_running(dir: &Path) -> Option<u32> {
    let stats = in_place(&RunPaths::new(dir).mock_stats())?;
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            (file_argument(pid, "mock", "--stats-output").as_ref() == Some(&stats)).then_some(pid)
        })
}

/// The file process `pid` of this tool's `subcommand` was given with `flag`, resolved from its
/// working folder ([`in_place`]); `None` for any other process, or one gone.
fn file_argument(pid: u32, subcommand: &str, flag: &str) -> Option<std::path::PathBuf> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    if args.get(1) != Some(&subcommand.as_bytes()) {
        return None;
    }
    let at = args.iter().position(|a| *a == flag.as_bytes())?;
    let file = Path::new(std::str::from_utf8(args.get(at + 1)?).ok()?);
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
    in_place(&cwd.join(file))
}

/// `file` with its folder made canonical (the file itself may not exist yet).
fn in_place(file: &Path) -> Option<std::path::PathBuf> {
    Some(
        std::fs::canonicalize(file.parent()?)
            .ok()?
            .join(file.file_name()?),
    )
}

/// The built-in mock's statistics, which it writes when the kernel tells it its conductor died;
/// a note when it left none (killed itself) or they do not read.
fn read_mock_stats(dir: &Path, notes: &mut Vec<String>) -> Option<MockStats> {
    let path = RunPaths::new(dir).mock_stats();
    let read = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str::<MockStats>(&text).map_err(|e| e.to_string()));
    match read {
        Ok(stats) => Some(stats),
        Err(e) => {
            notes.push(format!(
                "mock: {} does not read ({e}): the built-in mock's figures are not known",
                path.display()
            ));
            None
        }
    }
}
