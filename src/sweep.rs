//! `duplexbench-tui sweep`: the same run at several loads (issue 15). Each level (and each
//! repeat) is a full run made by the conductor into its own folder under the sweep's; the
//! sweep reads each run's summary, stops once the client is no longer pacing-qualified (the
//! figures would measure the client), finds the client's and the server's knees, and writes
//! `sweep.json`, `sweep.md` and `sweep.svg` after every level (docs/sweep.md).
//!
//! * `plan`: levels, `--slo` and a run plan per level, validated before anything starts.
//! * `figures`: what a run contributes (verdict, latency by dotted path, throughput).
//! * `record`: the result model (`sweep.json`); `knees`: where the knees are and why.
//! * `markdown` and `plot`: sweep.md, the text table, the per-level lines, sweep.svg.

pub mod figures;
pub mod knees;
pub mod markdown;
pub mod plan;
pub mod plot;
pub mod record;

use crate::cli::{ReportArgs, SweepArgs};
use crate::conductor::{self, Hooks};
use crate::live::SweepLive;
use crate::paths::RunPaths;
use crate::report::compare;
use crate::sampler::attribution::plural;
use crate::summary::Summary;
use anyhow::{bail, Context, Result};
use figures::RunFigures;
use plan::SweepPlan;
use record::{Level, SweepRecord};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::paths::SWEEP_JSON;
pub const SWEEP_MD: &str = "sweep.md";
pub const PLOT_FILE: &str = "sweep.svg";

/// Runs a sweep; 0 when a level that streamed was pacing-qualified, 1 when none was, 128 +
/// signal when cancelled (docs/exit-codes.md). Start-up errors are `Err`.
pub fn run(args: &SweepArgs, command_line: String) -> Result<i32> {
    let tui = !args.run.no_tui && crate::ui::dashboard_terminal();
    let plan = plan::validate(args, command_line, tui)?;
    if let Some(top) = plan.levels.last().and_then(|l| l.runs.first()) {
        crate::sys::open_files::ensure(&crate::sys::open_files::Layout::of(&top.settings))?;
    }
    // A server that cannot be reached is said before the sweep names a folder it would not
    // keep (each level's run checks again before it starts).
    if let Some(first) = plan.levels.first().and_then(|l| l.runs.first()) {
        if first.settings.mock.is_none() {
            conductor::check_reachable(&first.settings)?;
        }
    }
    // Held to the end: a sweep that could not start leaves no empty folder behind.
    let (folder, plan) = if plan.new_output {
        let folder = claim_new(&plan.output_dir)?;
        let plan = plan.moved_to(&folder.dir);
        (folder, plan)
    } else {
        (claim(&plan.output_dir, plan.force)?, plan)
    };
    // Between runs no conductor listens for signals: this flag ends the sweep there too (a
    // run's own handler still stops that run cleanly).
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register_usize(sig, signal.clone(), sig as usize)
            .context("cannot install signal handlers")?;
    }
    let mut sweep = Sweep::new(&plan);
    sweep.stale = stale_folders(&folder.previous, &plan);
    sweep.go(&signal)
}

/// Of the previous sweep's run folders, those this sweep does not run again (a run run again
/// with --force replaces its own folder).
fn stale_folders(previous: &[String], plan: &SweepPlan) -> Vec<String> {
    let planned: Vec<std::ffi::OsString> = plan
        .levels
        .iter()
        .flat_map(|l| &l.runs)
        .chain(&plan.warmup)
        .filter_map(|r| r.output_dir.file_name().map(ToOwned::to_owned))
        .collect();
    previous
        .iter()
        .filter(|f| {
            !planned
                .iter()
                .any(|p| p.as_os_str() == std::ffi::OsStr::new(f))
        })
        .cloned()
        .collect()
}

/// A sweep under way.
struct Sweep<'p> {
    plan: &'p SweepPlan,
    record: SweepRecord,
    /// Runs started so far (the first one needs no cooldown).
    started: usize,
    /// The cancelled run's exit code (128 + signal).
    cancel_code: Option<i32>,
    /// The run folders of the sweep this one replaces (--force) that it does not run again:
    /// deleted when it first writes its files, so that a sweep that cannot start leaves the
    /// previous one whole.
    stale: Vec<String>,
    /// Why the sweep's files could not be written the last time they were (a full disk): the
    /// sweep then stops, and the table on stdout is the only whole copy of what it measured.
    files_error: Option<String>,
}

impl<'p> Sweep<'p> {
    fn new(plan: &'p SweepPlan) -> Sweep<'p> {
        let first = plan.levels.first().and_then(|l| l.runs.first());
        let settings = first.map(|p| &p.settings);
        let record = SweepRecord {
            schema_version: record::SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: plan.command_line.clone(),
            started_at: crate::clock::utc_rfc3339(),
            protocol: settings.map(|s| s.protocol).unwrap_or_default(),
            url: settings.filter(|s| !s.builtin_mock).map(|s| s.url.clone()),
            processes: settings.map_or(1, |s| s.processes),
            audio: settings.map(|s| s.audio.clone()),
            modalities: settings.map(|s| s.modalities.clone()).unwrap_or_default(),
            duration_s: settings.map_or(0.0, |s| s.duration_s),
            packet_ms: settings.map_or(0, |s| s.packet_ms),
            repeats: plan.repeats,
            cooldown_s: plan.cooldown.as_secs_f64(),
            planned_sessions: plan.levels.iter().map(|l| l.sessions_total).collect(),
            slos: plan.slos.clone(),
            host: crate::host::collect(&plan.output_dir),
            warmup: None,
            levels: Vec::new(),
            stopped_early: None,
            cancelled: false,
            knees: knees::find(&[], !plan.slos.is_empty()),
        };
        Sweep {
            plan,
            record,
            started: 0,
            cancel_code: None,
            stale: Vec::new(),
            files_error: None,
        }
    }

    /// The files are first written once a level is done (or the sweep is cancelled), so a
    /// sweep that cannot start writes nothing.
    fn go(mut self, signal: &AtomicUsize) -> Result<i32> {
        let n = self.plan.levels.len();
        self.warm_up(n, signal)?;
        let plan = self.plan;
        for (i, level) in plan.levels.iter().enumerate() {
            if self.cancel_code.is_some() {
                break;
            }
            let runs = self.level_runs(level, (i + 1, n), signal)?;
            if runs.is_empty() {
                break;
            }
            if self.record_level(level.sessions_total, runs, n - i - 1)? {
                break;
            }
        }
        self.finish(n)
    }

    /// The warm-up run, when asked for: its figures are noted, kept apart and discarded.
    fn warm_up(&mut self, n: usize, signal: &AtomicUsize) -> Result<()> {
        let Some(warmup) = &self.plan.warmup else {
            return Ok(());
        };
        let label = format!(
            "warm-up, {}",
            plural(warmup.settings.total_sessions(), "session")
        );
        if let Some(figures) = self.one_run(warmup, "warmup", 1, (0, n), label, signal)? {
            note(&format!(
                "sweep: warm-up (figures discarded): {}; {} late packets → warmup",
                figures.verdict, figures.late_packets
            ));
            self.record.warmup = Some(figures);
        }
        Ok(())
    }

    /// Level `at` (from 1, of n)'s repeats, each noted in one line; fewer when cancelled.
    fn level_runs(
        &mut self,
        level: &plan::LevelPlan,
        at: (usize, usize),
        signal: &AtomicUsize,
    ) -> Result<Vec<RunFigures>> {
        let mut runs = Vec::new();
        for (r, run) in level.runs.iter().enumerate() {
            let repeat = r as u32 + 1;
            let folder = plan::level_folder(level.sessions_total, repeat);
            let label = if self.plan.repeats > 1 {
                format!(
                    "{}, repeat {repeat} of {}",
                    plural(level.sessions_total, "session"),
                    self.plan.repeats
                )
            } else {
                plural(level.sessions_total, "session")
            };
            match self.one_run(run, &folder, repeat, at, label, signal)? {
                Some(figures) => {
                    note(&markdown::run_line(
                        self.record.headline(),
                        at,
                        level.sessions_total,
                        &figures,
                    ));
                    runs.push(figures);
                }
                None => break,
            }
        }
        Ok(runs)
    }

    /// Records a level's runs and writes the sweep's files; returns whether the sweep stops
    /// here, with `rest` levels above not run, because the client was pacing-unqualified.
    fn record_level(
        &mut self,
        sessions_total: u64,
        runs: Vec<RunFigures>,
        rest: usize,
    ) -> Result<bool> {
        let level = Level::of(sessions_total, self.record.processes, runs, &self.plan.slos);
        // A level where no session streamed (the server refused them all) is not qualified —
        // it measured nothing — but the client was not behind either: the sweep goes on, and
        // its knees say no level streamed.
        let nothing_streamed = level
            .sessions_streamed
            .as_ref()
            .is_some_and(|s| s.max == 0.0);
        let unqualified = !level.qualified && !nothing_streamed;
        let sessions = level.sessions_total;
        let why = level
            .runs
            .iter()
            .find(|r| !r.pacing_qualified)
            .and_then(|r| r.reasons.first().cloned());
        // Every unqualified repeat's packets held back by blocked sends: the server's doing.
        let held_back = level.runs.iter().filter(|r| !r.pacing_qualified).all(|r| {
            r.reasons
                .first()
                .is_some_and(|w| crate::verdict::late_was_held_back(w))
        });
        self.record.levels.push(level);
        let stop = unqualified && self.cancel_code.is_none();
        if stop {
            self.record.stopped_early = (rest > 0).then(|| {
                let why = why.unwrap_or_else(|| "late packets".to_string());
                // Packets a blocked send held back: the server stopped reading at this load,
                // and above it would too (the client kept its schedule).
                if held_back {
                    format!(
                        "the server stopped taking the input at {sessions} sessions ({why}): the runs were pacing-unqualified, and higher levels would load it more, so {} not run",
                        levels_above(rest)
                    )
                } else {
                    format!(
                        "the client was pacing-unqualified at {sessions} sessions ({why}): higher levels would measure the client, not the server, so {} not run",
                        levels_above(rest)
                    )
                }
            });
        }
        self.finish_level(false)?;
        // A sweep that cannot write its files (a full disk) stops: the levels above could not
        // write theirs either, and what it measured must reach stdout while it can.
        if let Some(err) = self.files_error.clone().filter(|_| !stop) {
            if rest > 0 {
                self.record.stopped_early = Some(format!("{err}: {} not run", levels_above(rest)));
            }
            return Ok(true);
        }
        Ok(stop)
    }

    /// The end of the sweep (of `n` levels): its files, sweep.md on stdout, the exit code.
    fn finish(mut self, n: usize) -> Result<i32> {
        if self.cancel_code.is_some() {
            self.record.cancelled = true;
            let done = self.record.levels.len();
            let repeats = self.record.repeats;
            self.record.stopped_early = Some(match self.record.cut_short() {
                // Its repeats are not the level's: a level of 1 of 2 repeats is half measured.
                Some(cut) => format!(
                    "cancelled during the level of {} sessions after {} of {repeats} repeats ({} of {n} levels whole)",
                    cut.sessions_total,
                    cut.runs.len(),
                    done - 1
                ),
                None => format!("cancelled after {done} of {n} levels"),
            });
        }
        self.finish_level(true)?;
        self.print_results();
        if let Some(err) = &self.files_error {
            note(&format!(
                "sweep: {err}; the table above is the only whole copy of this sweep's results (each level's run folder keeps what its run could write): free some space and keep it"
            ));
            return Ok(self.cancel_code.unwrap_or(1));
        }
        // Measured: the client carried a level qualified, and the server carried a session of
        // it to its end (a server that drops every session has no throughput knee).
        let knees = &self.record.knees;
        let measured = knees.client.sessions_total.is_some()
            && knees.server_throughput.sessions_total.is_some();
        Ok(match self.cancel_code {
            Some(code) => code,
            None if measured => 0,
            None => 1,
        })
    }

    /// sweep.md's text on stdout (the table and knees), and where the files are.
    fn print_results(&self) {
        let _ = std::io::stdout().write_all(markdown::text(&self.record).as_bytes());
        if self.files_error.is_none() {
            note(&format!(
                "sweep: results in {}",
                self.plan.output_dir.join(SWEEP_MD).display()
            ));
        }
    }

    /// Runs one level's repeat (or the warm-up) after the cooldown; `None` when the sweep
    /// was cancelled before or during it.
    fn one_run(
        &mut self,
        run: &crate::options::RunPlan,
        folder: &str,
        repeat: u32,
        level: (usize, usize),
        label: String,
        signal: &AtomicUsize,
    ) -> Result<Option<RunFigures>> {
        if self.started > 0 {
            cool_down(self.plan.cooldown, signal);
        }
        if let Some(code) = cancelled(signal) {
            self.cancel_code = Some(code);
            return Ok(None);
        }
        self.started += 1;
        let lines = markdown::table_lines(&self.record);
        let hooks = Hooks {
            exit_on_finish: true,
            quiet: true,
            sweep: Some(SweepLive {
                level: level.0.max(1),
                levels: level.1,
                label,
                header: lines.first().cloned().unwrap_or_default(),
                rows: lines.into_iter().skip(1).collect(),
            }),
        };
        let outcome = match conductor::run_with(run.clone(), &hooks) {
            Ok(outcome) => outcome,
            // A signal while the level's run checked --url: a cancel like any other (the run
            // opened nothing and left no folder).
            Err(err) if err.is::<conductor::CancelledAtStart>() => {
                let signal = err
                    .downcast_ref::<conductor::CancelledAtStart>()
                    .map_or(libc::SIGINT, |c| c.signal);
                self.cancel_code = Some(128 + signal);
                note(&format!("sweep: {folder} was cancelled before its sessions started; the sweep keeps the levels before it"));
                return Ok(None);
            }
            Err(err) => {
                self.could_not_start(folder, repeat, &err)?;
                return Err(err.context(format!("sweep {folder}")));
            }
        };
        let figures = RunFigures::of(&outcome.summary, &outcome.workers, folder, repeat);
        if outcome.summary.cancelled {
            let code = cancelled(signal).unwrap_or(outcome.exit_code.max(128 + libc::SIGINT));
            self.cancel_code = Some(code);
            note(&format!("sweep: {folder} was cancelled; its folder holds what it did, the sweep keeps the levels before it"));
            return Ok(None);
        }
        Ok(Some(figures))
    }

    /// A run that could not start ends the sweep with a start-up error. Before any level was
    /// done that writes nothing and removes the warm-up's folder and those of the first
    /// level's repeats before `repeat`, so the same command can be run again as it is
    /// (docs/exit-codes.md); after, the files keep the levels done and say why the sweep ended.
    fn could_not_start(&mut self, folder: &str, repeat: u32, err: &anyhow::Error) -> Result<()> {
        if !self.record.levels.is_empty() {
            // The levels done are results: printed as a sweep that ends otherwise prints them.
            self.record.stopped_early = Some(format!("{folder} could not start: {err:#}"));
            self.finish_level(true)?;
            self.print_results();
            return Ok(());
        }
        let mut done: Vec<&Path> = Vec::new();
        if let (Some(_), Some(warmup)) = (&self.record.warmup, &self.plan.warmup) {
            done.push(&warmup.output_dir);
        }
        if folder != "warmup" {
            let first = self.plan.levels.first().map_or(&[][..], |l| &l.runs[..]);
            let before = first.iter().take(repeat.saturating_sub(1) as usize);
            done.extend(before.map(|run| run.output_dir.as_path()));
        }
        for dir in done {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot remove the run {}", dir.display()))?;
        }
        Ok(())
    }

    /// Knees anew, then the files: after every level, so a sweep that dies keeps what it did;
    /// the sweep's `last` write is its record as it ended, every one before says it did not
    /// finish (as a run's provisional summary.json), so that the files of a sweep killed
    /// (SIGKILL) between levels do not pass for a finished one.
    fn finish_level(&mut self, last: bool) -> Result<()> {
        self.record.knees = knees::of_levels(
            &self.record.levels,
            self.record.repeats,
            !self.plan.slos.is_empty(),
        );
        // This sweep's files replace the previous one's: its other folders go with them.
        for folder in std::mem::take(&mut self.stale) {
            let path = self.plan.output_dir.join(&folder);
            if path.is_dir() && !path.is_symlink() {
                std::fs::remove_dir_all(&path).with_context(|| {
                    format!(
                        "cannot delete {} of the previous sweep (--force)",
                        path.display()
                    )
                })?;
            }
        }
        self.write(last);
        Ok(())
    }

    /// The sweep's files, each whole or (a full disk) as it was before; a failure is kept in
    /// `files_error` and said once on stderr, a later success clears it.
    fn write(&mut self, last: bool) {
        let provisional;
        let record = if last {
            &self.record
        } else {
            provisional = self.record.unfinished(self.plan.levels.len());
            &provisional
        };
        match write_files(&self.plan.output_dir, record) {
            Ok(()) => self.files_error = None,
            Err(err) => {
                let err = format!("{err:#}");
                if self.files_error.is_none() {
                    note(&format!("sweep: {err}"));
                }
                self.files_error = Some(err);
            }
        }
    }
}

/// `the level above was`, `the 3 levels above were`: the levels a sweep that stops leaves.
fn levels_above(rest: usize) -> String {
    if rest == 1 {
        "the level above was".to_string()
    } else {
        format!("the {rest} levels above were")
    }
}

/// The exit code a signal asks for, once one came.
fn cancelled(signal: &AtomicUsize) -> Option<i32> {
    match signal.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(128 + sig as i32),
    }
}

/// Waits `cooldown` between runs, ending early on a signal.
fn cool_down(cooldown: Duration, signal: &AtomicUsize) {
    let until = Instant::now() + cooldown;
    while cancelled(signal).is_none() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// The sweep folder's lock, and the folders [`claim`] created, deepest first; dropped, it
/// removes the lock file of a folder left empty, then those folders still empty.
struct Claimed {
    dir: PathBuf,
    lock: Option<std::fs::File>,
    created: Vec<PathBuf>,
    /// The run folders of the sweep already there (--force), by name.
    previous: Vec<String>,
}

impl Drop for Claimed {
    fn drop(&mut self) {
        let lock_file = RunPaths::new(&self.dir).lock();
        let only_the_lock = std::fs::read_dir(&self.dir)
            .is_ok_and(|entries| entries.flatten().all(|e| e.path() == lock_file));
        if self.lock.take().is_some() && only_the_lock {
            let _ = std::fs::remove_file(&lock_file);
        }
        for dir in &self.created {
            // `remove_dir` removes only empty folders: anything written stays.
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
}

/// Creates a new folder for a sweep without `--output`: `base` or the first free one of
/// `base-2`, `base-3`, … (two sweeps started in the same second), and locks it.
fn claim_new(base: &Path) -> Result<Claimed> {
    let (dir, created) = conductor::create_numbered(base)?;
    let mut claimed = Claimed {
        dir,
        lock: None,
        created,
        previous: Vec::new(),
    };
    claimed.lock = Some(conductor::lock_folder(&claimed.dir, "sweep")?);
    note_folder(&claimed.dir);
    Ok(claimed)
}

/// Creates the sweep folder (`--output`) and locks it; refuses one another sweep (or run) is
/// writing to, one that holds a run, or a sweep unless `--force`.
fn claim(dir: &Path, force: bool) -> Result<Claimed> {
    let created = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "cannot create the sweep folder {}; choose another with --output",
            dir.display()
        )
    })?;
    let mut claimed = Claimed {
        dir: dir.to_path_buf(),
        lock: None,
        created,
        previous: Vec::new(),
    };
    claimed.lock = Some(conductor::lock_folder(dir, "sweep")?);
    if dir.join("summary.json").exists() {
        bail!(
            "{} holds a run (summary.json), not a sweep; choose another --output",
            dir.display()
        );
    }
    if dir.join(SWEEP_JSON).exists() {
        if !force {
            bail!("{} already holds a sweep ({SWEEP_JSON}); choose another --output, or give --force to run it again (the previous sweep's files are replaced once its first level is done)", dir.display());
        }
        claimed.previous = previous_runs(dir);
    }
    note_folder(dir);
    Ok(claimed)
}

/// The run folders of the sweep in `dir`: those its sweep.json lists (levels and warm-up), or,
/// if it cannot be read, those named as a sweep names them.
fn previous_runs(dir: &Path) -> Vec<String> {
    if let Ok((_, record)) = load_record(dir) {
        let levels = record.levels.iter().flat_map(|l| &l.runs);
        return levels
            .chain(&record.warmup)
            .map(|r| r.folder.clone())
            .filter(|f| crate::paths::is_sweep_run_folder(f))
            .collect();
    }
    crate::paths::sweep_run_folders(dir)
}

fn note_folder(dir: &Path) {
    note(&format!(
        "sweep folder {}",
        std::path::absolute(dir)
            .unwrap_or_else(|_| dir.to_path_buf())
            .display()
    ));
}

fn write_files(dir: &Path, record: &SweepRecord) -> Result<()> {
    let json = serde_json::to_string_pretty(record).context("cannot encode the sweep")?;
    // Each whole or not at all: a full disk leaves the previous level's file readable.
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        crate::paths::write_whole(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))
    };
    write(SWEEP_JSON, json + "\n")?;
    write(SWEEP_MD, markdown::markdown(record))?;
    write(PLOT_FILE, plot::svg(record)?)
}

/// Writes a line to stderr; a closed stderr is not an error.
fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Whether `path` is a sweep folder or its sweep.json (for `report`).
pub use crate::paths::is_sweep;

/// `report SWEEP`: sweep.md again (or the text table with `--text`), from sweep.json; with
/// `--vs OTHER_SWEEP`, the two sweeps level by level, each figure over its repeats.
pub fn report(args: &ReportArgs) -> Result<i32> {
    if args.rebuild {
        let runs = crate::paths::sweep_run_folders(&args.run);
        let level = runs
            .iter()
            .rfind(|r| *r != "warmup")
            .map_or_else(|| plan::level_folder(16, 1), Clone::clone);
        bail!(
            "--rebuild takes a run's folder, not a sweep's: give the folder of the level whose conductor was killed, e.g. {}",
            args.run.join(level).display()
        );
    }
    if let Some(other) = args.vs.as_deref().filter(|_| !is_sweep(&args.run)) {
        // A run against a sweep: name one of its levels to give instead.
        let run_sessions = sessions_of(&args.run);
        let level = match load_record(other) {
            Ok((dir, record)) => dir.join(level_folder_for(&record, run_sessions)),
            Err(_) => other.join(plan::level_folder(16, 1)),
        };
        bail!(
            "{} is a sweep and {} is a run: compare a run with a run, e.g. `report {} --vs {}`, or a sweep with a sweep",
            other.display(),
            args.run.display(),
            args.run.display(),
            level.display()
        );
    }
    let (a_dir, a) = load_record(&args.run)?;
    let out = match &args.vs {
        None if args.text => markdown::text(&a),
        None => markdown::markdown(&a),
        Some(other) if is_sweep(other) => {
            let (b_dir, b) = load_record(other)?;
            let md = compare_sweeps(args, (&a_dir, &a), (&b_dir, &b))?;
            if args.text {
                crate::report::plain::from_markdown(&md)
            } else {
                md
            }
        }
        Some(other) => bail!(
            "{} is a sweep and {} is not: compare a sweep with a sweep, or a run with a run, e.g. `report {} --vs {}`",
            args.run.display(),
            other.display(),
            a_dir.join(level_folder_for(&a, sessions_of(other))).display(),
            other.display()
        ),
    };
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(0)
}

/// A sweep's run folder to name in a message (`level-0016`): the first of the level of
/// `sessions` (a run's, to compare it with), else of its first level.
pub fn level_folder_for(record: &SweepRecord, sessions: Option<u64>) -> String {
    let same = sessions.and_then(|n| record.levels.iter().find(|l| l.sessions_total == n));
    same.or(record.levels.first())
        .and_then(|l| l.runs.first())
        .map_or_else(|| plan::level_folder(16, 1), |r| r.folder.clone())
}

/// A run folder's total sessions, when its summary reads.
fn sessions_of(run: &Path) -> Option<u64> {
    let (_, summary) = crate::report::command::load(run).ok()?;
    Some(summary.layout.sessions_total)
}

/// The folder of a sweep given as its folder or its sweep.json, and its record.
pub fn load_record(path: &Path) -> Result<(PathBuf, SweepRecord)> {
    let (dir, file) = if path.is_dir() {
        (path.to_path_buf(), path.join(SWEEP_JSON))
    } else {
        let dir = path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
        (dir, path.to_path_buf())
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    let version = value["schema_version"].as_u64().unwrap_or(0);
    if version != u64::from(record::SCHEMA_VERSION) {
        bail!("{} is a sweep of schema_version {version}; this duplexbench-tui reads {} (use the version that wrote it)", file.display(), record::SCHEMA_VERSION);
    }
    let record: SweepRecord = serde_json::from_value(value)
        .with_context(|| format!("{} is not a duplexbench-tui sweep", file.display()))?;
    Ok((dir, record))
}

/// `report SWEEP --vs SWEEP`: the summaries of every repeat of every level, side by side.
fn compare_sweeps(
    args: &ReportArgs,
    (a_dir, a): (&Path, &SweepRecord),
    (b_dir, b): (&Path, &SweepRecord),
) -> Result<String> {
    // A repeat whose summary cannot be read (its folder damaged or not copied) is left out and
    // named: the rest of the sweep still compares.
    let mut left_out: Vec<String> = Vec::new();
    let mut runs = |dir: &Path, record: &SweepRecord| -> BTreeMap<u64, Vec<Summary>> {
        let mut levels = BTreeMap::new();
        for level in &record.levels {
            let mut summaries = Vec::with_capacity(level.runs.len());
            for run in &level.runs {
                match crate::report::command::load(&dir.join(&run.folder)) {
                    Ok((_, summary)) => summaries.push(summary),
                    Err(err) => {
                        left_out.push(format!("{}: {err:#}", dir.join(&run.folder).display()))
                    }
                }
            }
            if !summaries.is_empty() {
                levels.insert(level.sessions_total, summaries);
            }
        }
        levels
    };
    let (a_runs, b_runs) = (runs(a_dir, a), runs(b_dir, b));
    if !a_runs.keys().any(|k| b_runs.contains_key(k)) {
        bail!(
            "the two sweeps have no level in common (A: {:?} sessions, B: {:?}); compare sweeps of the same levels",
            a_runs.keys().collect::<Vec<_>>(),
            b_runs.keys().collect::<Vec<_>>()
        );
    }
    // Every level both ran must be the same load (processes, sessions and the rest); each
    // difference is said once, with the levels it is at.
    let mut differ: Vec<(String, Vec<u64>)> = Vec::new();
    for (&sessions, xs) in &a_runs {
        let Some(ys) = b_runs.get(&sessions) else {
            continue;
        };
        for (x, y) in xs.iter().zip(ys) {
            for d in compare::differing_settings(x, y) {
                match differ.iter_mut().find(|(seen, _)| *seen == d) {
                    Some((_, levels)) if levels.contains(&sessions) => {}
                    Some((_, levels)) => levels.push(sessions),
                    None => differ.push((d, vec![sessions])),
                }
            }
        }
    }
    if !differ.is_empty() && !args.force {
        let said: Vec<String> = differ
            .iter()
            .map(|(d, levels)| {
                let levels: Vec<String> = levels.iter().map(u64::to_string).collect();
                format!("{d} (at {} sessions)", levels.join(", "))
            })
            .collect();
        bail!(
            "the two sweeps ran different loads ({}); compare sweeps of the same load, or give --force",
            said.join("; ")
        );
    }
    let label = |p: &Path| p.display().to_string();
    let mut out = compare::sweeps_markdown(
        (&label(&args.run), &a_runs, a.stopped_early.as_deref()),
        (
            &label(args.vs.as_deref().unwrap_or(b_dir)),
            &b_runs,
            b.stopped_early.as_deref(),
        ),
    );
    if !left_out.is_empty() {
        out.push_str(
            "\n**Left out** (a repeat whose summary cannot be read; the rest compares):\n\n",
        );
        for why in &left_out {
            out.push_str(&format!("- {why}\n"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sweeps_own_run_folders_are_its_own() {
        for own in ["warmup", "level-0016", "level-1024-r2", "level-10000"] {
            assert!(crate::paths::is_sweep_run_folder(own), "{own}");
        }
        for other in [
            "level-16",
            "level-",
            "level-0016-r",
            "level-00x6",
            "notes",
            "warmup2",
        ] {
            assert!(!crate::paths::is_sweep_run_folder(other), "{other}");
        }
    }

    #[test]
    fn the_previous_sweeps_runs_are_named_by_its_record_or_else_by_their_names() {
        let dir =
            std::env::temp_dir().join(format!("duplexbench-sweep-force-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for folder in ["level-0002", "level-0004-r2", "warmup", "mine"] {
            std::fs::create_dir_all(dir.join(folder)).unwrap();
        }
        std::fs::write(dir.join(SWEEP_JSON), "not a sweep record").unwrap();
        let mut found = previous_runs(&dir);
        found.sort();
        assert_eq!(found, ["level-0002", "level-0004-r2", "warmup"], "by name");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
