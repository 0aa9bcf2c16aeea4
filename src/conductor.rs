//! The conductor: the process the user runs. It starts the built-in mock (unless `--url`) and
//! the worker children, holds them at a common start gate, follows their telemetry, stops them
//! on Ctrl-C or SIGTERM, and builds the summary from their result files (SPEC §3).

mod children;
pub mod live;

use crate::clock::{monotonic_s, utc_rfc3339, ClockAnchor};
use crate::dashboard::Dashboard;
use crate::options::{self, RunPlan};
use crate::summary::{RunRecord, Summary};
use crate::telemetry::{Command as WorkerCommand, Telemetry};
use crate::trace::files::TRACE_FILE;
use crate::worker::results::WorkerResult;
use crate::worker::WorkerConfig;
use crate::{headless, host, report};
use anyhow::{anyhow, Context, Result};
use children::{MockChild, WorkerChild};
use live::{Finished, LiveState, ProcessLive, RunInfo};
use std::net::ToSocketAddrs;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
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

/// How far ahead of "now" the start gate is set, so every worker has the command in time.
const GATE_LEAD_S: f64 = 0.25;

/// Runs a whole run; returns the process exit code (0, 1 or 130). Start-up errors are `Err`.
pub fn run(plan: RunPlan, exit_on_finish: bool) -> Result<i32> {
    let (tx, rx) = mpsc::channel();
    install_signal_thread(tx.clone())?;
    let output_dir = plan.output_dir.clone();
    prepare_output(&output_dir)?;
    let started_at = utc_rfc3339();
    let anchor = ClockAnchor::now();
    let host = host::collect(&output_dir);
    let mut plan = plan;

    let mock = match &plan.settings.mock {
        Some(behaviour) => {
            let mock = MockChild::start(&output_dir, behaviour)?;
            plan.settings.url = format!("ws://{}{}", mock.addr, crate::protocol::PATH);
            Some(mock)
        }
        None => {
            check_reachable(&plan.settings.url, plan.settings.connect_timeout_s)?;
            None
        }
    };

    let mut workers = Vec::new();
    for index in 0..plan.settings.processes {
        let config = WorkerConfig {
            index,
            settings: plan.settings.clone(),
            output_dir: output_dir.clone(),
            inject_stall: index == 0 && plan.settings.inject_stall_ms.is_some(),
        };
        workers.push(WorkerChild::start(&config, tx.clone())?);
    }

    let live = Arc::new(Mutex::new(LiveState::new(run_info(&plan))));
    if let Ok(mut state) = live.lock() {
        state.mock = mock.as_ref().map(|m| ProcessLive::new(m.guard.pid()));
        for (w, child) in state.workers.iter_mut().zip(&workers) {
            w.process = ProcessLive::new(child.guard.pid());
        }
    }
    let dashboard = if plan.settings.tui {
        Some(Dashboard::start(live.clone(), tx.clone(), exit_on_finish)?)
    } else {
        None
    };
    drop(tx);
    let cancelled = follow(&plan, &mut workers, &live, &rx);

    // Every worker has exited or is killed now; collect what they wrote.
    let mut results = Vec::new();
    let mut notes = Vec::new();
    for w in &mut workers {
        if !w.guard.wait_or_kill(Duration::from_secs(5)) {
            notes.push(format!("worker {} did not exit and was killed", w.index));
        }
        results.push((w.guard.pid(), read_result(&output_dir, w.index)));
    }
    let mock = mock.map(|m| {
        let pid = m.guard.pid();
        match m.stop() {
            Ok(stats) => (pid, Some(stats)),
            Err(err) => {
                notes.push(format!("mock: {err:#}"));
                (pid, None)
            }
        }
    });
    let summary = Summary::build(RunRecord {
        plan: &plan,
        host,
        started_at,
        anchor,
        wall_seconds: monotonic_s() - anchor.monotonic_s,
        cancelled,
        workers: results,
        mock,
        notes,
    });
    write_summary(&output_dir, &summary)?;
    if !plan.settings.keep_traces {
        delete_traces(&output_dir);
    }
    let summary_path = output_dir.join("summary.json").display().to_string();
    if let Some(dashboard) = dashboard {
        if let Ok(mut state) = live.lock() {
            state.finished = Some(Finished {
                verdict: report::verdict_line(&summary),
                reasons: summary.verdict.reasons.clone(),
                summary_path: summary_path.clone(),
                exit_code: summary.exit_code(),
            });
        }
        let shown = dashboard.wait();
        // The terminal is restored: say where the results are.
        println!("{}: {summary_path}", report::verdict_line(&summary));
        shown?;
    } else {
        // A closed stdout (e.g. piped into `head`) is not an error: the files are written.
        let _ =
            std::io::Write::write_all(&mut std::io::stdout(), report::table(&summary).as_bytes());
    }
    Ok(summary.exit_code())
}

fn run_info(plan: &RunPlan) -> RunInfo {
    let s = &plan.settings;
    RunInfo {
        processes: s.processes,
        sessions_per_process: s.sessions_per_process,
        duration_s: s.duration_s,
        url: s.url.clone(),
        trace: format!("{}/{}", enum_name(&s.trace), enum_name(&s.trace_writer)),
        late_threshold_us: s.late_threshold_ms.saturating_mul(1000),
        output_dir: plan.output_dir.display().to_string(),
    }
}

fn enum_name(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Runs the gate and the run itself; returns why the run was cancelled, if it was.
fn follow(
    plan: &RunPlan,
    workers: &mut [WorkerChild],
    live: &Mutex<LiveState>,
    rx: &Receiver<Event>,
) -> Option<String> {
    let s = &plan.settings;
    let setup_budget_s = s.connect_timeout_s * f64::from(s.admission_retries + 1)
        + f64::from(s.admission_retries) * s.admission_retry_interval_ms as f64 / 1000.0
        + 2.0 * s.recv_timeout_s
        + 10.0;
    let mut deadline_s = monotonic_s() + setup_budget_s;
    let mut cancelled: Option<String> = None;
    let mut stop_sent = false;
    let mut kill_at_s: Option<f64> = None;
    let mut next_progress_s = f64::INFINITY;
    let mut next_proc_read_s = monotonic_s();
    // In the dashboard, messages go to its header instead of over the screen.
    let say = |live: &mut LiveState, text: String| {
        if s.tui {
            live.cancelled = Some(text);
        } else {
            eprintln!("{text}");
        }
    };

    loop {
        let event = rx.recv_timeout(Duration::from_millis(100));
        let now_s = monotonic_s();
        let Ok(mut live) = live.lock() else {
            return cancelled;
        };
        match event {
            Ok(Event::Telemetry { worker, msg }) => live.apply(worker, msg),
            Ok(Event::WorkerGone { worker }) => {
                if let Some(w) = live.workers.get_mut(worker as usize) {
                    w.gone = true;
                }
            }
            Ok(Event::Signal(signal)) => {
                let name = if signal == libc::SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                if cancelled.is_none() {
                    say(&mut live, format!("{name}: stopping the sessions and writing the summary (again to kill at once)"));
                    cancelled = Some(format!("{name} received"));
                } else {
                    say(&mut live, format!("{name} again: killing the workers"));
                    kill_at_s = Some(now_s);
                }
            }
            Ok(Event::Quit) => {
                if cancelled.is_none() {
                    say(
                        &mut live,
                        "q: stopping the sessions and writing the summary".to_string(),
                    );
                    cancelled = Some("stopped from the dashboard".to_string());
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return cancelled,
        }
        if live.all_gone() {
            return cancelled;
        }
        if live.start_s.is_none() && live.all_ready() && cancelled.is_none() {
            let start_s = monotonic_s() + GATE_LEAD_S;
            for w in workers.iter_mut() {
                w.command(WorkerCommand::Go { start_s });
            }
            live.start_s = Some(start_s);
            // Streaming, then ending, draining and closing every session, then writing results.
            deadline_s = start_s + s.duration_s + 2.0 * s.recv_timeout_s + 30.0;
            next_progress_s = start_s + headless::PROGRESS_INTERVAL_S;
        }
        if (cancelled.is_some() || now_s > deadline_s) && !stop_sent {
            if cancelled.is_none() {
                say(
                    &mut live,
                    "the run is past its deadline: stopping the workers".to_string(),
                );
            }
            for w in workers.iter_mut() {
                w.command(WorkerCommand::Stop);
            }
            stop_sent = true;
            kill_at_s.get_or_insert(now_s + 2.0 * s.recv_timeout_s + 10.0);
        }
        if kill_at_s.is_some_and(|k| now_s >= k) {
            for w in workers.iter_mut() {
                let _ = w.guard.child.kill();
            }
            return cancelled.or(Some("workers killed".to_string()));
        }
        if now_s >= next_proc_read_s {
            live.refresh_processes(now_s);
            next_proc_read_s = now_s + 1.0;
        }
        if !s.tui && now_s >= next_progress_s {
            eprintln!("{}", headless::progress_line(&mut live, now_s));
            next_progress_s += headless::PROGRESS_INTERVAL_S;
        }
    }
}

fn install_signal_thread(tx: Sender<Event>) -> Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])
        .context("cannot install signal handlers")?;
    std::thread::Builder::new()
        .name("signals".to_string())
        .spawn(move || {
            for signal in signals.forever() {
                if tx.send(Event::Signal(signal)).is_err() {
                    return;
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

fn prepare_output(output_dir: &Path) -> Result<()> {
    std::fs::create_dir_all(output_dir.join("workers")).with_context(|| {
        format!(
            "cannot create the output folder {}; choose another with --output",
            output_dir.display()
        )
    })
}

/// Fails early, with a message that says what to do, when `--url` cannot be reached at all.
fn check_reachable(url: &str, timeout_s: f64) -> Result<()> {
    let authority =
        options::url_authority(url).ok_or_else(|| anyhow!("--url `{url}` has no host"))?;
    let addrs: Vec<_> = authority
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve the host of --url `{url}`"))?
        .collect();
    let timeout = Duration::from_secs_f64(timeout_s);
    let mut last_err = None;
    for addr in &addrs {
        match std::net::TcpStream::connect_timeout(addr, timeout) {
            Ok(_) => return Ok(()),
            Err(err) => last_err = Some(err),
        }
    }
    Err(anyhow!(
        "cannot reach the server at {url} ({}); start the server or check --url",
        last_err.map_or("no address".to_string(), |e| e.to_string())
    ))
}

fn read_result(output_dir: &Path, index: u32) -> Option<WorkerResult> {
    let text = std::fs::read_to_string(WorkerConfig::result_path(output_dir, index)).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_summary(output_dir: &Path, summary: &Summary) -> Result<()> {
    let json = serde_json::to_string_pretty(summary).context("cannot encode the summary")?;
    let path = output_dir.join("summary.json");
    std::fs::write(&path, json + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    let path = output_dir.join("summary.md");
    std::fs::write(&path, report::markdown(summary))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Deletes the session traces (about 10 MB per 90 s session in full mode); receipts stay.
fn delete_traces(output_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(output_dir.join("sessions")) else {
        return;
    };
    for entry in entries.flatten() {
        let _ = std::fs::remove_file(entry.path().join(TRACE_FILE));
    }
}
