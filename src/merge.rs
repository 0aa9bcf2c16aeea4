//! `duplexbench-tui merge SHARD_DIR… --output DIR`: the shards of one run over several hosts
//! (`run --shard-index I --shard-count N --run-id ID`) pooled into one summary, exactly: the
//! workers' HdrHistograms are added (never percentiles averaged), their sessions' send
//! intervals are put on the shared wall clock through each worker's clock anchor, so that the
//! peak of simultaneous sessions is the real one across hosts. docs/multihost.md.

mod load;

use crate::cli::MergeArgs;
use crate::clock::ClockAnchor;
use crate::host::HostFacts;
use crate::options::{RunPlan, Settings, Shard};
use crate::paths::RunPaths;
use crate::report;
use crate::summary::multihost::{self, MergeSection, ShardRow, StreamingWindow};
use crate::summary::{RunRecord, Summary};
use anyhow::{bail, Result};
use load::Loaded;
use std::io::Write as _;

/// Shards whose streaming windows overlap less than this share of the shortest one did not
/// stream together for most of the run.
const MIN_OVERLAP_FRACTION: f64 = 0.9;

/// Runs the command: 0 or 1 as the merged verdict says (as `run`); refusals are `Err` (exit 2).
pub fn run(args: &MergeArgs) -> Result<i32> {
    let shards = load::all(&args.shards)?;
    let out = &args.output;
    if out.join("summary.json").exists() {
        bail!(
            "--output {} holds a summary already; give a new folder for the merge",
            out.display()
        );
    }
    let summary = merge(&shards, out, &crate::secret::command_line())?;
    std::fs::create_dir_all(out)
        .map_err(|e| anyhow::anyhow!("cannot create --output {}: {e}", out.display()))?;
    report::write_files(out, &summary)?;
    let _ = std::io::stdout().write_all(report::table(&summary).as_bytes());
    Ok(summary.exit_code())
}

/// The merged summary of `shards` (checked to be of one run), written to `output`.
pub fn merge(shards: &[Loaded], output: &std::path::Path, command_line: &str) -> Result<Summary> {
    let Some(first) = shards.first() else {
        bail!("give the output folder of at least one shard");
    };
    let shard = first.shard();
    let s0 = &first.summary.settings;
    let layout = ShardLayout {
        workers: s0.processes,
        sessions: u64::from(s0.processes) * u64::from(s0.sessions_per_process),
    };
    let present: Vec<u32> = shards.iter().map(|l| l.shard().index).collect();
    let missing: Vec<u32> = (0..shard.count).filter(|i| !present.contains(i)).collect();
    let plan = merged_plan(s0, shard.count, output, command_line);
    let mut notes = shard_notes(shards, shard, &missing, layout, s0.late_threshold_ms);
    let together = Together::of(shards, one_start_at(shards).is_none(), &mut notes);
    let host = first.summary.host.clone();
    let record = merged_record(&plan, shards, host, notes, missing.len() as u64, layout);
    let mut summary = Summary::build(record);
    // Shards that did not stream together for most of the run are not one load: the run is
    // not complete (a script reading the exit code took a half-overlapping run for a clean one).
    if together.windows.len() > 1 && together.fraction < MIN_OVERLAP_FRACTION {
        summary.verdict.complete = false;
    }
    summary.merge = Some(merge_section(shards, shard, missing, &together, layout));
    Ok(summary)
}

/// What one shard runs: every shard runs the same layout.
#[derive(Debug, Clone, Copy)]
struct ShardLayout {
    workers: u32,
    sessions: u64,
}

/// The first shard's settings with every shard's workers, run as one plan.
fn merged_plan(
    s0: &Settings,
    shard_count: u32,
    output: &std::path::Path,
    command_line: &str,
) -> RunPlan {
    let mut settings = s0.clone();
    settings.processes = s0.processes * shard_count;
    settings.shard = None;
    settings.start_at_unix_s = None;
    settings.tui = false;
    RunPlan {
        settings,
        output_dir: output.to_path_buf(),
        new_output: false,
        force: false,
        command_line: command_line.to_string(),
        output_jsonl: None,
    }
}

/// The shards' reasons: the missing ones, each one's start gate, clocks not synchronised,
/// different `--start-at` instants.
fn shard_notes(
    shards: &[Loaded],
    shard: &Shard,
    missing: &[u32],
    layout: ShardLayout,
    late_threshold_ms: u32,
) -> Vec<String> {
    let mut notes = Vec::new();
    for &index in missing {
        notes.push(format!(
            "missing shard: shard {index} of {} was not given to merge (no folder of run {} with --shard-index {index}); its {} sessions are counted incomplete, and its packets are unknown, so the run is not pacing-qualified",
            shard.count, shard.run_id, layout.sessions
        ));
    }
    for l in shards {
        let who = format!("shard {}", l.shard().index);
        let s = &l.summary;
        if s.unfinished() {
            // Its gate and window were never recorded: saying it never opened its gate, or
            // never streamed with the others, would be guesses.
            let present = l.results_present();
            let pooled = match present {
                0 => "none of its workers left a result, so none of its packets are in these figures and its sessions are counted incomplete".to_string(),
                n => format!(
                    "the results {n} of its {} workers wrote when their conductor died are pooled here (their packets count; their sessions, aborted, are incomplete; its CPU is not known)",
                    layout.workers
                ),
            };
            let rebuild = match present {
                0 => String::new(),
                _ => format!(
                    "; `report --rebuild {}` before the merge rebuilds its summary from its workers' results, with its CPU and its window",
                    l.dir.display()
                ),
            };
            notes.push(format!(
                "unfinished shard: {who}'s run did not finish (its conductor was killed?): its summary.json is the provisional one written when it started; {pooled}; its receipts and samples hold what it sent{rebuild}"
            ));
            continue;
        }
        for &(k, pid) in &l.results_not_in_folder {
            notes.push(format!(
                "result not in the folder: {who}'s summary says its worker {k} (pid {pid}; worker {} of the merged run) left a result, but {} is not there (the folder was copied without it, or that host's disk refused the file and the result reached only its summary.json); its {} sessions are counted incomplete here: copy the shard's folder again from its host, workers/ included",
                l.shard().index * layout.workers + k,
                RunPaths::new(&l.dir).worker_result(k).display(),
                l.summary.settings.sessions_per_process
            ));
        }
        notes.extend(multihost::reasons(
            &who,
            s.start_gate.as_ref(),
            None,
            late_threshold_ms,
        ));
        if s.settings.start_at_unix_s.is_none() {
            notes.push(format!(
                "{who} had no --start-at: the shards did not start at one instant, so their windows may not overlap"
            ));
        }
    }
    let unsynced: Vec<String> = shards
        .iter()
        .filter(|l| {
            l.summary
                .clock_sync
                .as_ref()
                .is_some_and(|c| !c.synchronised)
        })
        .map(|l| l.shard().index.to_string())
        .collect();
    if !unsynced.is_empty() {
        let whose = match unsynced.as_slice() {
            [one] => format!("the kernel of shard {one} says its clock is"),
            many => format!(
                "the kernels of shards {} say their clocks are",
                many.join(", ")
            ),
        };
        notes.push(format!(
            "unsynchronised clock: {whose} not synchronised (adjtimex), so the shards' start gates and windows may not line up; run chrony or ntpd (or PTP) on every host"
        ));
    }
    notes.extend(one_start_at(shards));
    notes.extend(different_servers(shards));
    notes
}

/// The servers of shards given different `--url`s: their server figures are pooled as one
/// server's (the merged summary names the first shard's), which a reader must be told — a
/// fleet behind several addresses is a load merge takes, two servers compared is not. Shards
/// that each ran their built-in mock are left out: each host serves itself by design.
fn different_servers(shards: &[Loaded]) -> Option<String> {
    let urls: Vec<(u32, &str)> = shards
        .iter()
        .filter(|l| !l.summary.settings.builtin_mock)
        .map(|l| (l.shard().index, l.summary.settings.url.as_str()))
        .collect();
    let first = urls.first()?.1;
    urls.iter().any(|(_, url)| *url != first).then(|| {
        let list: Vec<String> = urls
            .iter()
            .map(|(i, url)| format!("shard {i} {url}"))
            .collect();
        format!(
            "different servers: {}; the server figures pool them as one (the summary's settings name shard {}'s): merge the shards of one server's load, or compare two servers with report --vs",
            list.join(", "),
            urls[0].0
        )
    })
}

/// How far the shards' streaming windows overlap, by their wall clocks.
struct Together {
    windows: Vec<StreamingWindow>,
    overlap: Option<StreamingWindow>,
    /// The overlap's share of the shortest window.
    fraction: f64,
}

impl Together {
    /// The overlap, with a reason in `notes` when the shards did not stream together;
    /// `same_start` when every shard was given the same `--start-at` (the advice is then not to
    /// give one).
    fn of(shards: &[Loaded], same_start: bool, notes: &mut Vec<String>) -> Together {
        // An unfinished shard recorded no window (it has its own note).
        let finished = shards.iter().filter(|l| !l.summary.unfinished()).count();
        let windows: Vec<StreamingWindow> = shards
            .iter()
            .filter_map(|l| l.summary.streaming_window)
            .collect();
        let overlap = (windows.len() == finished)
            .then(|| multihost::overlap(&windows))
            .flatten();
        let shortest_s = windows
            .iter()
            .map(StreamingWindow::seconds)
            .reduce(f64::min)
            .unwrap_or(0.0);
        let overlap_fraction = match overlap {
            Some(o) if shortest_s > 0.0 => (o.seconds() / shortest_s).min(1.0),
            Some(_) => 1.0,
            None => 0.0,
        };
        let all_given = shards
            .iter()
            .all(|l| l.summary.settings.start_at_unix_s.is_some());
        let advice = if same_start && all_given {
            "they were given one --start-at, so a shard opened its gate late or stopped early (see its row and its reasons)"
        } else {
            "start them with one --start-at"
        };
        if overlap.is_none() && finished > 1 {
            notes.push(format!(
                "non-overlapping windows: the {finished} shards never all streamed at the same time (by their wall clocks), so this is not one load; {advice}"
            ));
        } else if overlap.is_some() && overlap_fraction < MIN_OVERLAP_FRACTION && finished > 1 {
            notes.push(format!(
                "non-overlapping windows: the shards streamed together for only {:.0} % of the shortest one's window; {advice}",
                overlap_fraction * 100.0
            ));
        }
        Together {
            windows,
            overlap,
            fraction: overlap_fraction,
        }
    }
}

/// Every worker of every shard as one run's record, numbered run-wide and with its times on
/// the wall clock; the missing shards' sessions and workers are absent.
fn merged_record<'a>(
    plan: &'a RunPlan,
    shards: &[Loaded],
    host: HostFacts,
    notes: Vec<String>,
    missing_shards: u64,
    layout: ShardLayout,
) -> RunRecord<'a> {
    // A shard whose conductor was killed has its own reason (`unfinished shard`).
    let cancelled: Vec<String> = shards
        .iter()
        .filter(|l| l.summary.cancelled && !l.summary.unfinished())
        .map(|l| format!("shard {}", l.shard().index))
        .collect();
    let workers = shards
        .iter()
        .flat_map(|l| l.workers_on_wall_clock(layout.workers))
        .collect();
    RunRecord {
        plan,
        host,
        started_at: shards
            .iter()
            .map(|l| l.summary.started_at.clone())
            .min()
            .unwrap_or_default(),
        // The merged times are Unix seconds already.
        anchor: ClockAnchor {
            realtime_s: 0.0,
            monotonic_s: 0.0,
        },
        wall_seconds: wall_seconds(shards),
        cancelled: (!cancelled.is_empty()).then(|| format!("{} cancelled", cancelled.join(", "))),
        workers,
        mock: None,
        notes,
        sampler: None,
        gate_s: None,
        clock_sync: None,
        absent_sessions: missing_shards * layout.sessions,
        absent_workers: missing_shards * u64::from(layout.workers),
    }
}

/// The summary's `merge`: a row per shard (the missing ones too), the overlap, the spread of
/// the first packets and the workers' CPU per session-second.
fn merge_section(
    shards: &[Loaded],
    shard: &Shard,
    missing: Vec<u32>,
    together: &Together,
    layout: ShardLayout,
) -> MergeSection {
    let starts: Vec<f64> = together.windows.iter().map(|w| w.start_unix_s).collect();
    let spread = starts
        .iter()
        .copied()
        .reduce(f64::max)
        .zip(starts.iter().copied().reduce(f64::min))
        .map(|(hi, lo)| ((hi - lo) * 1e6).round() / 1000.0);
    // While streaming, as each shard's summary.md says it, when every shard measured that;
    // else (shards of before 2026-12-03) the workers' whole CPU over the session-seconds.
    let streaming: Option<Vec<_>> = shards
        .iter()
        .map(|l| crate::report::streaming_cpu(&l.summary))
        .collect();
    // A shard whose conductor died recorded no CPU: the figure would count its sessions and
    // none of its CPU.
    let unfinished = shards.iter().any(|l| l.summary.unfinished());
    let (cpu_s, session_s) = match streaming {
        Some(per_shard) => per_shard
            .iter()
            .fold((0.0, 0.0), |(cpu, s), w| (cpu + w.cpu_s, s + w.session_s)),
        None => (
            shards.iter().map(|l| l.worker_cpu_seconds()).sum(),
            shards
                .iter()
                .map(|l| l.summary.layout.sessions_total as f64 * l.summary.settings.duration_s)
                .sum(),
        ),
    };
    let mut rows: Vec<ShardRow> = shards.iter().map(Loaded::row).collect();
    rows.extend(missing.iter().map(|&index| ShardRow {
        index,
        dir: None,
        present: false,
        hostname: None,
        cpu_model: None,
        sessions: layout.sessions,
        completed: 0,
        packets: 0,
        late_packets: 0,
        deviation_p99_ms: None,
        worker_cpu_seconds: None,
        window: None,
        start_gate: None,
        clock_sync: None,
        verdict: None,
    }));
    rows.sort_by_key(|r| r.index);
    MergeSection {
        run_id: shard.run_id.clone(),
        shard_count: shard.count,
        shards: rows,
        missing_shards: missing,
        overlap: together.overlap,
        overlap_fraction: (together.fraction * 1000.0).round() / 1000.0,
        first_packet_spread_ms: spread,
        cpu_per_session_second: (session_s > 0.0 && !unfinished)
            .then(|| ((cpu_s / session_s) * 1e6).round() / 1e6),
    }
}

/// A reason when the shards were given different `--start-at` instants (more than 1 ms apart:
/// `+30s` is from each host's own start, so shards started by hand need one absolute time).
fn one_start_at(shards: &[Loaded]) -> Option<String> {
    let ats: Vec<(u32, f64)> = shards
        .iter()
        .filter_map(|l| Some((l.shard().index, l.summary.settings.start_at_unix_s?)))
        .collect();
    let lo = ats.iter().map(|a| a.1).reduce(f64::min)?;
    let hi = ats.iter().map(|a| a.1).reduce(f64::max)?;
    (hi - lo > 0.001).then(|| {
        let list: Vec<String> = ats
            .iter()
            .map(|(i, at)| format!("shard {i} {}", crate::options::shard::rfc3339(*at)))
            .collect();
        format!(
            "different --start-at: {}; give every shard the same absolute time (+30s counts from each host's own start)",
            list.join(", ")
        )
    })
}

/// From the earliest shard's start to the latest shard's end, in seconds.
fn wall_seconds(shards: &[Loaded]) -> f64 {
    let spans = shards.iter().map(|l| {
        let start = l.summary.clock_anchor.realtime_s;
        (start, start + l.summary.wall_seconds)
    });
    let start = spans.clone().map(|s| s.0).reduce(f64::min).unwrap_or(0.0);
    let end = spans.map(|s| s.1).reduce(f64::max).unwrap_or(0.0);
    (end - start).max(0.0)
}
