//! The conductor: the process the user runs. It starts the built-in mock (unless `--url`) and
//! the worker children, holds them at a common start gate, follows their telemetry, stops them
//! on Ctrl-C or SIGTERM, and builds the summary from their result files (docs/architecture.md).

mod children;
mod follow;
mod run_folder;
pub use run_folder::{create_numbered, lock_folder};

use crate::clock::{monotonic_s, utc_rfc3339, ClockAnchor};
use crate::contract::mock::MockStats;
use crate::contract::telemetry::Telemetry;
use crate::contract::worker::WorkerConfig;
use crate::contract::worker::{WorkerHistograms, WorkerResult, RESULT_SCHEMA_VERSION};
use crate::contract::Role;
use crate::live::{Finished, LiveState, ProcessLive, RunInfo, SweepLive, WorkerLive};
use crate::options::{self, RunPlan};
use crate::paths::RunPaths;
use crate::sampler::listener::{self, Listener};
use crate::sampler::{Sampler, Target, WatchedServer};
use crate::summary::{RunRecord, Summary};
use crate::trace::files::TRACE_FILE;
use crate::ui::dashboard::Dashboard;
use crate::{host, report};
use anyhow::{anyhow, Context, Result};
use children::{MockChild, WorkerChild};
use std::net::ToSocketAddrs;
use std::path::Path;
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Everything the conductor's loop reacts to.
pub enum Event {
    Telemetry {
        worker: u32,
        msg: Telemetry,
    },
    /// A worker's stdout closed: it exited or is about to.
    WorkerGone {
        worker: u32,
    },
    Signal(i32),
    /// `q` or Ctrl-C in the dashboard.
    Quit,
}

/// How a run fits into what started it: a plain run, `conform`'s short run, or a sweep's level.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    /// Close the dashboard as soon as the run ends instead of waiting for a key.
    pub exit_on_finish: bool,
    /// Do not print the final table on stdout (a sweep prints one line per level instead).
    pub quiet: bool,
    /// The sweep this run is a level of, for the dashboard.
    pub sweep: Option<SweepLive>,
}

/// What a finished (or cancelled) run leaves its caller.
#[derive(Debug)]
pub struct Outcome {
    /// 0, 1, or 128 + signal when cancelled (docs/exit-codes.md).
    pub exit_code: i32,
    /// The summary as written to `summary.json`.
    pub summary: Summary,
    /// The workers' results the summary was made of (a sweep's level only; empty otherwise):
    /// their files, or the copies that came over the telemetry pipe when a full disk refused
    /// the files, or what a worker that left none last reported (`from_telemetry`).
    pub workers: Vec<WorkerResult>,
}

/// Runs a whole run; returns the process exit code (0, 1, or 128 + signal when cancelled).
/// Start-up errors are `Err`.
pub fn run(plan: RunPlan, exit_on_finish: bool) -> Result<i32> {
    let hooks = Hooks {
        exit_on_finish,
        ..Hooks::default()
    };
    run_with(plan, &hooks).map(|outcome| outcome.exit_code)
}

/// Runs a whole run as `hooks` say and returns its exit code and summary.
pub fn run_with(plan: RunPlan, hooks: &Hooks) -> Result<Outcome> {
    let (tx, rx) = mpsc::channel();
    START_SIGNAL.store(0, std::sync::atomic::Ordering::Relaxed);
    let _signals = install_signal_thread(tx.clone())?;
    let mut plan = plan;
    // Held until the run ends; dropped after a start-up error, it removes what the run made:
    // no half-made run folder is left behind to refuse the next attempt.
    let mut folder = if plan.new_output {
        run_folder::RunFolder::claim_new(&plan.output_dir)?
    } else {
        run_folder::RunFolder::claim(&plan.output_dir, plan.force)?
    };
    plan.output_dir = folder.dir().to_path_buf();
    // Checked once the output folder exists (the JSONL may go inside it).
    if let Some(path) = &plan.output_jsonl {
        report::jsonl::check_writable(path)?;
    }
    let output_dir = plan.output_dir.clone();
    // A server that cannot be reached is said before any folder is named: the run records
    // nothing, and the folder is not kept.
    if plan.settings.mock.is_none() {
        check_reachable(&plan.settings)?;
    }
    // The first line of every run that starts, before the dashboard takes the screen (it
    // stays on the normal screen behind it): where the results go.
    follow::note(&format!(
        "output folder {}",
        std::path::absolute(&output_dir)
            .unwrap_or_else(|_| output_dir.clone())
            .display()
    ));
    // A shard of several without --start-at starts when its own sessions are set up: the
    // merge would say so only at the end.
    if let Some(shard) = plan.settings.shard.as_ref().filter(|s| s.count > 1) {
        if plan.settings.start_at_unix_s.is_none() {
            follow::note(&format!(
                "shard {} of {} has no --start-at: it streams as soon as its own sessions are set up, not with the other shards; give every shard one --start-at (docs/multihost.md)",
                shard.index, shard.count
            ));
        }
    }
    let start = RunStart::now(&output_dir);

    let mock = start_mock(&mut plan)?;
    // A Ctrl-C while `--url` was checked: no session is opened.
    check_start_signal()?;
    let mut workers = start_workers(&plan, &tx)?;
    let sampler = start_sampler(&plan, mock.as_ref(), &workers);
    let live = Arc::new(Mutex::new(live_state(
        &plan,
        hooks,
        mock.as_ref(),
        sampler.as_ref(),
        &workers,
    )));
    let dashboard = start_dashboard(&plan, &live, &tx, hooks.exit_on_finish)?;
    drop(tx);
    // A summary from the start, replaced at the end: a conductor that dies still leaves one.
    let provisional = start.record(&plan, &live, Left::provisional(&workers));
    write_summary(&output_dir, &Summary::build(provisional)).map_err(|err| {
        anyhow!(
            "{err:#}; the run did not start and left nothing: free space on that disk or choose another --output"
        )
    })?;
    let _ = report::keep_room_for_final(&output_dir);
    folder.started();
    let ending = follow::follow(&plan, &mut workers, &live, &rx);
    if !plan.settings.tui {
        follow::note(&format!("writing results to {}", output_dir.display()));
    }
    let sampled = sampler.map(Sampler::stop);

    // Every worker has exited or is killed now; collect what they wrote.
    let mut notes = ending.notes;
    let by_signal = ending.by_signal;
    let results = collect_results(&mut workers, &output_dir, (&live, start.anchor), &mut notes);
    let worker_results = match hooks.sweep {
        Some(_) => results.iter().filter_map(|(_, r)| r.clone()).collect(),
        None => Vec::new(),
    };
    let cancelled = ending.cancelled.is_some();
    let mock = mock.map(|m| stop_mock(m, cancelled, &mut notes));
    let left = Left {
        workers: results,
        mock,
        cancelled: ending.cancelled,
        notes,
        sampler: sampled,
    };
    let (summary, unwritten) = write_final_summary(&output_dir, start.record(&plan, &live, left));
    if let (Some(path), Some(section)) = (&plan.output_jsonl, &summary.funasr) {
        report::jsonl::write(path, section)?;
    }
    let exit_code = ending
        .cancel_exit_code
        .unwrap_or_else(|| summary.exit_code())
        .max(i32::from(unwritten));
    // Traces of a clean run are deleted unless kept; those of any other run are what to read.
    if !plan.settings.keep_traces && exit_code == 0 {
        delete_traces(&output_dir);
    }
    folder.finished();
    match dashboard {
        // Whoever sent the signal (a service manager, `timeout`, a shell's `kill`) waits for
        // the process to exit: the table below is what stays on the screen.
        Some(dashboard) if by_signal => drop(dashboard),
        Some(dashboard) => show_finished(dashboard, rx, &live, &summary, exit_code, &output_dir),
        None => {}
    }
    // The same table either way: after the dashboard, the terminal is restored and this is
    // what stays on the screen. A closed stdout (e.g. piped into `head`) is not an error.
    if !hooks.quiet {
        let table = if unwritten {
            report::table_unwritten(&summary)
        } else {
            report::table(&summary)
        };
        let _ = std::io::Write::write_all(&mut std::io::stdout(), table.as_bytes());
    }
    Ok(Outcome {
        exit_code,
        summary,
        workers: worker_results,
    })
}

/// What is known of a run from its start, in every summary written of it.
struct RunStart {
    started_at: String,
    anchor: ClockAnchor,
    clock_sync: Option<crate::sys::clock_sync::ClockSync>,
    host: host::HostFacts,
}

/// What a run has left when a summary is written: the workers' results, the mock's stats,
/// why it was cancelled, notes and the sampler's findings.
struct Left {
    workers: Vec<(u32, Option<WorkerResult>)>,
    mock: Option<(u32, Option<MockStats>)>,
    cancelled: Option<String>,
    notes: Vec<String>,
    sampler: Option<(Vec<crate::sampler::Episode>, crate::sampler::SamplerSummary)>,
}

impl Left {
    /// Nothing yet: the workers are running.
    fn provisional(workers: &[WorkerChild]) -> Left {
        Left {
            workers: workers.iter().map(|w| (w.guard.pid(), None)).collect(),
            mock: None,
            cancelled: Some(crate::summary::UNFINISHED.to_string()),
            notes: Vec::new(),
            sampler: None,
        }
    }
}

impl RunStart {
    fn now(output_dir: &Path) -> RunStart {
        let started_at = utc_rfc3339();
        let anchor = ClockAnchor::now();
        let clock_sync = crate::sys::clock_sync::read();
        let host = host::collect(output_dir);
        RunStart {
            started_at,
            anchor,
            clock_sync,
            host,
        }
    }

    /// The record a summary is built from, as of now.
    fn record<'a>(&self, plan: &'a RunPlan, live: &Mutex<LiveState>, left: Left) -> RunRecord<'a> {
        RunRecord {
            plan,
            host: self.host.clone(),
            started_at: self.started_at.clone(),
            anchor: self.anchor,
            wall_seconds: monotonic_s() - self.anchor.monotonic_s,
            cancelled: left.cancelled,
            workers: left.workers,
            mock: left.mock,
            notes: left.notes,
            sampler: left.sampler,
            gate_s: live.lock().unwrap_or_else(PoisonError::into_inner).start_s,
            clock_sync: self.clock_sync.clone(),
            absent_sessions: 0,
            absent_workers: 0,
        }
    }
}

/// Spawns the worker children; the first injects the faults asked for.
fn start_workers(plan: &RunPlan, tx: &Sender<Event>) -> Result<Vec<WorkerChild>> {
    let mut workers = Vec::new();
    for index in 0..plan.settings.processes {
        let config = WorkerConfig {
            index,
            settings: plan.settings.clone(),
            output_dir: plan.output_dir.clone(),
            inject_faults: index == 0 && plan.settings.injects(),
        };
        workers.push(WorkerChild::start(&config, tx.clone())?);
    }
    Ok(workers)
}

/// The live state at the start: the run's facts and the processes it watches.
fn live_state(
    plan: &RunPlan,
    hooks: &Hooks,
    mock: Option<&MockChild>,
    sampler: Option<&Sampler>,
    workers: &[WorkerChild],
) -> LiveState {
    let mut state = LiveState::new(run_info(plan));
    state.mock = mock.map(|m| ProcessLive::new(m.guard.pid()));
    state.sampler = sampler.map(|s| s.live.clone());
    state.sweep = hooks.sweep.clone();
    state.server = sampler
        .and_then(|s| s.server_pid())
        .filter(|_| mock.is_none())
        .map(ProcessLive::new);
    for (w, child) in state.workers.iter_mut().zip(workers) {
        w.process = ProcessLive::new(child.guard.pid());
    }
    state
}

/// Starts the dashboard when `--tui` asks for it; `q` or Ctrl-C in it sends `Event::Quit`.
fn start_dashboard(
    plan: &RunPlan,
    live: &Arc<Mutex<LiveState>>,
    tx: &Sender<Event>,
    exit_on_finish: bool,
) -> Result<Option<Dashboard>> {
    if !plan.settings.tui {
        return Ok(None);
    }
    let quit = tx.clone();
    let on_quit = move || {
        let _ = quit.send(Event::Quit);
    };
    Ok(Some(Dashboard::start(
        live.clone(),
        Box::new(on_quit),
        exit_on_finish,
    )?))
}

/// Builds the final summary and writes it; returns it and whether writing failed. A summary
/// that cannot be written (a full disk) is still shown, with why it is not on disk.
fn write_final_summary(output_dir: &Path, record: RunRecord<'_>) -> (Summary, bool) {
    let mut summary = Summary::build(record);
    let unwritten = write_summary(output_dir, &summary).err();
    if let Some(err) = &unwritten {
        summary
            .verdict
            .reasons
            .insert(0, format!("{err:#}: {}", unwritten_advice(err)));
        follow::note(&format!("Error: {err:#}"));
    }
    (summary, unwritten.is_some())
}

/// What to do about a summary that could not be written, by its cause: a full disk is the
/// common one, but a folder removed during the run was told to free space too (the QA pass of
/// 2026-12-07).
fn unwritten_advice(err: &anyhow::Error) -> &'static str {
    let io = err.chain().find_map(|e| e.downcast_ref::<std::io::Error>());
    match io.map(std::io::Error::kind) {
        Some(std::io::ErrorKind::NotFound) => {
            "this table is the only copy of the summary; the output folder is gone (removed during the run?): keep this table"
        }
        Some(std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem) => {
            "this table is the only copy of the summary; the output folder cannot be written any more (its permissions or its file system changed during the run): keep this table"
        }
        _ => "this table is the only copy of the summary; free space and keep it",
    }
}

/// The final screen's reasons: the verdict's, with the stall causes (what the summary's table
/// prints as `stall cause`) after the first, which is the late packets' when there are any.
fn finished_reasons(summary: &Summary) -> Vec<String> {
    let mut reasons = summary.verdict.reasons.clone();
    let at = reasons.len().min(1);
    let causes = summary
        .attribution
        .explanations
        .iter()
        .map(|e| format!("stall cause: {e}"));
    reasons.splice(at..at, causes);
    reasons
}

/// Shows the verdict on the dashboard and waits until it is closed: by a key, or by a signal
/// (a service manager or `timeout` waits for the process to exit, not for a key; the exit code
/// stays the run's, which had finished).
fn show_finished(
    dashboard: Dashboard,
    events: mpsc::Receiver<Event>,
    live: &Mutex<LiveState>,
    summary: &Summary,
    exit_code: i32,
    output_dir: &Path,
) {
    let summary_path = RunPaths::new(output_dir).summary_md().display().to_string();
    {
        let mut state = live.lock().unwrap_or_else(PoisonError::into_inner);
        state.finished = Some(Finished {
            verdict: report::verdict_line(summary),
            reasons: finished_reasons(summary),
            summary_path,
            exit_code,
        });
    }
    let close = dashboard.closer();
    let shown = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let shown_flag = shown.clone();
    // The signal handler's thread still forwards SIGTERM, SIGINT and SIGHUP here.
    let watcher = std::thread::spawn(move || {
        while !shown_flag.load(std::sync::atomic::Ordering::Relaxed) {
            match events.recv_timeout(std::time::Duration::from_millis(100)) {
                Ok(Event::Signal(_)) => {
                    close.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    });
    let closed = dashboard.wait();
    shown.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    if let Err(err) = closed {
        // The run and its files are fine; the exit code stays the run's.
        follow::note(&format!("the dashboard failed: {err:#}"));
    }
}

/// Starts the built-in mock and points the run at it, or (with `--url`) checks that the server
/// can be reached at all.
/// Starts the built-in mock when the run has one (`None` for a run against `--url`, whose
/// server was checked before).
fn start_mock(plan: &mut RunPlan) -> Result<Option<MockChild>> {
    let Some(behaviour) = &plan.settings.mock else {
        return Ok(None);
    };
    let mock = MockChild::start(&plan.output_dir, plan.settings.protocol, behaviour)?;
    if !plan.settings.tui {
        // A profile is the native mock's model; the other protocols' mocks have none.
        let what = match plan.settings.protocol {
            crate::protocol::Protocol::Native => format!("profile {}", behaviour.profile.name()),
            other => format!("protocol {}", other.as_str()),
        };
        follow::note(&format!("mock up at {} ({what})", mock.addr));
    }
    // A transcription session is asked for as OpenAI's endpoint takes it, by the connection.
    let intent = match plan.settings.client.session_type {
        Some(crate::protocol::SessionType::Transcription) => "?intent=transcription",
        _ => "",
    };
    plan.settings.url = format!(
        "ws://{}{}{intent}",
        mock.addr,
        plan.settings.protocol.path()
    );
    Ok(Some(mock))
}

/// Each worker's result once it has exited (killed after 5 s): its file, else the copy it sent
/// in its last telemetry (a full disk), else what its telemetry last said (marked as such).
fn collect_results(
    workers: &mut [WorkerChild],
    output_dir: &Path,
    (live, anchor): (&Mutex<LiveState>, ClockAnchor),
    notes: &mut Vec<String>,
) -> Vec<(u32, Option<WorkerResult>)> {
    let mut results = Vec::with_capacity(workers.len());
    for w in workers {
        if !w.guard.wait_or_kill(Duration::from_secs(5)) {
            notes.push(format!("worker {} did not exit and was killed", w.index));
        }
        let result = match (read_result(output_dir, w.index), w.sent_result.take()) {
            (Some(result), _) => Some(result),
            (None, Some((result, write_error))) => {
                notes.push(format!(
                    "worker {}: {write_error}; its figures came over its telemetry pipe instead",
                    w.index
                ));
                Some(*result)
            }
            (None, None) => {
                let mut note = missing_result_note(w, output_dir);
                let mended = crate::trace::files::mend_receipts_of(output_dir, w.index);
                if mended > 0 {
                    note.push_str(&format!(
                        "; the receipts of {mended} of its sessions, left open, were given their end (what it had written stays)"
                    ));
                }
                notes.push(note);
                let live = live.lock().unwrap_or_else(PoisonError::into_inner);
                live.workers
                    .get(w.index as usize)
                    .and_then(|l| result_from_telemetry(l, w.index, w.guard.pid(), anchor))
            }
        };
        results.push((w.guard.pid(), result));
    }
    results
}

/// Stops the built-in mock and takes its statistics (a failure is a note, not an error). A
/// mock that ended before it was told to, in a run that was not `cancelled` (a Ctrl-C reaches
/// the mock too), is a note: sessions it dropped are the tool's own server's, not a server's.
fn stop_mock(
    mut mock: MockChild,
    cancelled: bool,
    notes: &mut Vec<String>,
) -> (u32, Option<MockStats>) {
    let pid = mock.guard.pid();
    // (One that left no statistics is said by `stop`.)
    let early = mock.guard.exit_status().filter(|_| !cancelled);
    if let Some(status) = early.filter(|_| mock.stats_path.exists()) {
        notes.push(format!(
            "the built-in mock {} before the run ended (see mock.log): the sessions still streaming to it failed because the tool's own server went away, not because of a server under test",
            children::describe_exit(status)
        ));
    }
    match mock.stop() {
        Ok((stats, note)) => {
            notes.extend(note);
            (pid, Some(stats))
        }
        Err(err) => {
            notes.push(format!("mock: {err:#}"));
            (pid, None)
        }
    }
}

/// Starts the procfs sampler on the workers and the built-in mock, unless `--no-sampler`.
fn start_sampler(
    plan: &RunPlan,
    mock: Option<&MockChild>,
    workers: &[WorkerChild],
) -> Option<Sampler> {
    let interval_ms = plan.settings.sample_interval_ms?;
    let mut targets: Vec<Target> = workers
        .iter()
        .map(|w| Target {
            role: Role::Worker,
            index: Some(w.index),
            pid: w.guard.pid(),
        })
        .collect();
    let (server, note) = server_target(plan, mock);
    let watched = server.as_ref().map(|(t, found_by)| WatchedServer {
        pid: t.pid,
        found_by: found_by.clone(),
    });
    targets.extend(server.map(|(t, _)| t));
    let interval = Duration::from_secs_f64(interval_ms / 1000.0);
    match Sampler::start(PathBuf::from("/proc"), targets, interval) {
        Ok(mut sampler) => {
            sampler.server = watched;
            if let (Some(note), Ok(mut live)) = (note, sampler.live.lock()) {
                live.notes.insert(note);
            }
            Some(sampler)
        }
        Err(err) => {
            follow::note(&format!(
                "the procfs sampler could not start ({err}); stalls will not be classified"
            ));
            None
        }
    }
}

/// The server process to sample beside the workers: the built-in mock, `--server-pid`, or the
/// process listening on a loopback `--url`'s port; and what to say when it cannot be found.
fn server_target(
    plan: &RunPlan,
    mock: Option<&MockChild>,
) -> (Option<(Target, String)>, Option<String>) {
    let server = |pid| Target {
        role: Role::Server,
        index: None,
        pid,
    };
    if let Some(mock) = mock {
        let target = Target {
            role: Role::Mock,
            index: None,
            pid: mock.guard.pid(),
        };
        return (Some((target, "built-in mock".to_string())), None);
    }
    if let Some(pid) = plan.settings.server_pid {
        return (Some((server(pid), "--server-pid".to_string())), None);
    }
    let Some(port) = listener::loopback_port(&plan.settings.url) else {
        return (None, None);
    };
    match listener::find(Path::new("/proc"), port) {
        Listener::Found(pid) if pid != std::process::id() => {
            follow::note(&format!(
                "sampling the server: pid {pid}, listening on port {port}"
            ));
            (Some((server(pid), format!("listening on port {port}"))), None)
        }
        Listener::Found(_) | Listener::NotListening => (None, None),
        Listener::NotVisible => (
            None,
            Some(format!(
                "the process listening on port {port} is not one this user may inspect (another user's or another container's): the server is not sampled and its CPU counts as other; pass --server-pid, or run as its user"
            )),
        ),
    }
}

fn run_info(plan: &RunPlan) -> RunInfo {
    let s = &plan.settings;
    RunInfo {
        processes: s.processes,
        sessions_per_process: s.sessions_per_process,
        duration_s: s.duration_s,
        url: s.url.clone(),
        trace: format!("{}/{}", enum_name(&s.trace), enum_name(&s.trace_writer)),
        thresholds: s.thresholds(),
        output_dir: plan.output_dir.display().to_string(),
        unpaced: s.no_pace,
        protocol_figures: crate::contract::figures::ProtocolFigures::template(s),
        shard: s.shard.as_ref().map(|sh| (sh.index, sh.count)),
        start_at_unix_s: s.start_at_unix_s,
    }
}

fn enum_name(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The first signal of the run being started, for the start-up steps that come before the
/// control loop reads its events (the check that `--url` answers, which may wait for
/// `--connect-timeout`): 0 while none came.
static START_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// A signal came before the sessions started: nothing was run (the run folder is removed);
/// the process exits with 128 + the signal, as a cancelled run does.
#[derive(Debug)]
pub struct CancelledAtStart {
    pub signal: i32,
}

impl std::fmt::Display for CancelledAtStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} before the sessions started: nothing was run",
            follow::signal_name(self.signal)
        )
    }
}

impl std::error::Error for CancelledAtStart {}

/// `Err(CancelledAtStart)` once a signal came while the run was starting.
fn check_start_signal() -> Result<()> {
    match START_SIGNAL.load(std::sync::atomic::Ordering::Relaxed) {
        0 => Ok(()),
        signal => Err(CancelledAtStart { signal }.into()),
    }
}

/// Resolves once a signal has come while the run was starting.
async fn start_signal() -> i32 {
    loop {
        match START_SIGNAL.load(std::sync::atomic::Ordering::Relaxed) {
            0 => tokio::time::sleep(Duration::from_millis(20)).await,
            signal => return signal,
        }
    }
}

/// The signal thread of one run; dropped at the run's end, it ends the thread (a sweep runs
/// many runs in one process).
struct SignalThread(signal_hook::iterator::Handle);

impl Drop for SignalThread {
    fn drop(&mut self) {
        self.0.close();
    }
}

fn install_signal_thread(tx: Sender<Event>) -> Result<SignalThread> {
    let mut signals =
        signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
            .context("cannot install signal handlers")?;
    let handle = SignalThread(signals.handle());
    std::thread::Builder::new()
        .name("signals".to_string())
        .spawn(move || {
            for signal in signals.forever() {
                let _ = START_SIGNAL.compare_exchange(
                    0,
                    signal,
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                );
                if tx.send(Event::Signal(signal)).is_err() {
                    return;
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(handle)
}

/// Fails early, with a message that says what to do, when `--url` cannot be reached at all
/// (see [`crate::worker::session::probe`]).
pub(crate) fn check_reachable(settings: &options::Settings) -> Result<()> {
    let url = &settings.url;
    let authority =
        options::url_authority(url).ok_or_else(|| anyhow!("--url `{url}` has no host"))?;
    authority
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve the host of --url `{url}`"))?;
    let protocol = crate::worker::client_protocol(settings);
    let dialer = crate::worker::session::Dialer::new(settings, protocol.as_ref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build the runtime that checks --url")?;
    let timeout = Duration::from_secs_f64(settings.connect_timeout_s);
    let probed = runtime.block_on(async {
        tokio::select! {
            probed = crate::worker::session::probe(&dialer, timeout) => Ok(probed),
            signal = start_signal() => Err(CancelledAtStart { signal }),
        }
    })?;
    probed.map_err(|unreachable| match unreachable {
        crate::worker::session::Unreachable::Reset(why) => {
            anyhow!("cannot talk to the server at {url} ({why})")
        }
        crate::worker::session::Unreachable::NoConnection(why) => {
            anyhow!("cannot reach the server at {url} ({why}); start the server or check --url")
        }
    })
}

/// Why a worker left no result file, as far as the conductor can tell: how it ended, and
/// whether its log has anything to say.
fn missing_result_note(w: &mut WorkerChild, output_dir: &Path) -> String {
    let how = w
        .guard
        .exit_status()
        .map_or("did not end".to_string(), children::describe_exit);
    let log = RunPaths::new(output_dir).worker_log(w.index);
    let log = match std::fs::metadata(&log) {
        Ok(meta) if meta.len() > 0 => format!("see workers/worker-{}.log", w.index),
        _ => "its log is empty".to_string(),
    };
    format!(
        "worker {} (pid {}) {how} before it wrote its result; {log}",
        w.index,
        w.guard.pid()
    )
}

/// What a worker's last telemetry said, as a result marked `from_telemetry`, for a worker that
/// left no result: its packet counts and cumulative histograms (at most a second old) survive,
/// its sessions' outcomes do not. None when it never reported progress.
fn result_from_telemetry(
    live: &WorkerLive,
    index: u32,
    pid: u32,
    anchor: ClockAnchor,
) -> Option<WorkerResult> {
    let p = &live.progress;
    if p.time_s == 0.0 {
        return None;
    }
    let mut histograms = WorkerHistograms::default();
    if let Some(h) = &live.deviation {
        histograms.deviation = h.clone();
    }
    if let Some(h) = &live.start_lateness {
        histograms.start_lateness = h.clone();
    }
    if let Some(s) = &live.server {
        histograms.accepted = s.accepted.clone();
        histograms.unit_lag = s.unit_lag.clone();
        histograms.first_audio = s.first_audio.clone();
    }
    Some(WorkerResult {
        schema_version: RESULT_SCHEMA_VERSION,
        index,
        pid,
        anchor,
        started_s: anchor.monotonic_s,
        gate_s: None,
        ended_s: p.time_s,
        usage: Default::default(),
        loop_lag: Default::default(),
        writer_queue_peak_lines: live.queue_peak_lines,
        writer_queue_peak_bytes: live.queue_peak_bytes,
        counts: p.counts,
        sessions_with_late_packets: p.sessions_with_late_packets,
        protocol_errors: p.protocol_errors,
        error_events: 0,
        histograms,
        first_injection_s: None,
        injections: Vec::new(),
        late_packet_windows: Vec::new(),
        send_blocked_windows: Vec::new(),
        late_packet_sessions: Vec::new(),
        send_blocked_sessions: Vec::new(),
        loop_lag_windows: Vec::new(),
        telemetry_dropped: p.telemetry_dropped,
        reply_seconds: Vec::new(),
        writer_error: None,
        sample_lines_not_written: 0,
        disk_full: false,
        sessions: Vec::new(),
        from_telemetry: true,
    })
}

fn read_result(output_dir: &Path, index: u32) -> Option<WorkerResult> {
    let text = std::fs::read_to_string(RunPaths::new(output_dir).worker_result(index)).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_summary(output_dir: &Path, summary: &Summary) -> Result<()> {
    report::write_files(output_dir, summary)
}

/// Deletes the session traces (about 10 MB per 90 s session in full mode); receipts stay.
fn delete_traces(output_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(RunPaths::new(output_dir).sessions_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let _ = std::fs::remove_file(entry.path().join(TRACE_FILE));
    }
}

#[cfg(test)]
mod tests {
    use super::unwritten_advice;
    use std::io::{Error, ErrorKind};

    #[test]
    fn an_unwritten_summary_is_told_what_to_do_by_its_cause() {
        let of = |kind: ErrorKind| {
            unwritten_advice(&anyhow::Error::new(Error::from(kind)).context("cannot write x"))
        };
        assert!(of(ErrorKind::StorageFull).ends_with("free space and keep it"));
        assert!(of(ErrorKind::NotFound).contains("the output folder is gone"));
        assert!(of(ErrorKind::PermissionDenied).contains("cannot be written any more"));
    }
}
