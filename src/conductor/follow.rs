//! The conductor's control loop: gate the workers, follow their telemetry, react to signals,
//! keys and deadlines, and stop (or, as a last resort, abort and kill) the workers.

use super::children::WorkerChild;
use super::Event;
use crate::clock::{monotonic_s, ClockAnchor};
use crate::contract::telemetry::{Command as WorkerCommand, Telemetry};
use crate::live::LiveState;
use crate::options::RunPlan;
use crate::ui::headless::{self, Phase};
use std::io::{IsTerminal as _, Write as _};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How far ahead of "now" the start gate is set, so every worker has the command in time.
const GATE_LEAD_S: f64 = 0.25;
/// How long aborted workers get to write their results before they are killed.
const ABORT_GRACE_S: f64 = 5.0;

/// How the run ended, beyond what the workers' results say.
#[derive(Debug, Default)]
pub struct Ending {
    /// Why the user cancelled it (a signal or `q`), if they did.
    pub cancelled: Option<String>,
    /// The exit code the cancel asks for (128 + signal number).
    pub cancel_exit_code: Option<i32>,
    /// What else the conductor had to do (a deadline, an abort, a kill).
    pub notes: Vec<String>,
}

/// Writes a line to stderr; a closed stderr is not an error (the files are what matter).
pub fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "SIGTERM",
    }
}

/// Shows a message: in the dashboard's header, or (headless) on stderr once the lock is released.
fn say(tui: bool, live: &mut LiveState, notes: &mut Vec<String>, text: String) {
    if tui {
        live.cancelled = Some(text);
    } else {
        notes.push(text);
    }
}

/// Runs the gate and the run itself, until every worker is gone.
pub fn follow(
    plan: &RunPlan,
    workers: &mut [WorkerChild],
    live: &Mutex<LiveState>,
    rx: &Receiver<Event>,
) -> Ending {
    let s = &plan.settings;
    let setup_budget_s = s.connect_timeout_s * f64::from(s.admission_retries + 1)
        + f64::from(s.admission_retries) * s.admission_retry_interval_ms as f64 / 1000.0
        + 2.0 * s.recv_timeout_s
        + 10.0;
    let mut deadline_s = monotonic_s() + setup_budget_s;
    let mut ending = Ending::default();
    let mut stop_sent = false;
    let mut abort_at_s: Option<f64> = None;
    let mut kill_at_s: Option<f64> = None;
    let progress_interval_s = headless::progress_interval_s(std::io::stderr().is_terminal());
    let setup_started_s = monotonic_s();
    let mut next_progress_s = setup_started_s + progress_interval_s;
    let mut next_proc_read_s = monotonic_s();
    // In the dashboard, messages go to its header instead of over the screen; headless, they
    // go to stderr after the state's lock is released (a stalled stderr must not hold the loop).
    let mut notes: Vec<String> = Vec::new();
    let mut phase = Phase::SettingUp;
    if !s.tui {
        let live = live.lock().unwrap_or_else(PoisonError::into_inner);
        note(&headless::setting_up_line(&live));
    }

    loop {
        let event = rx.recv_timeout(Duration::from_millis(100));
        let now_s = monotonic_s();
        // A panic while the dashboard drew poisons the lock; the run goes on without it.
        let mut live = live.lock().unwrap_or_else(PoisonError::into_inner);
        // The conductor's clock, not only the workers' reports: a stopped worker must not
        // stop the clock that shows it is silent.
        live.now_s = live.now_s.max(now_s);
        match event {
            Ok(Event::Telemetry { worker, mut msg }) => {
                let ready = matches!(msg, Telemetry::Ready { .. });
                if let Telemetry::Done {
                    result: result @ Some(_),
                    write_error,
                    ..
                } = &mut msg
                {
                    if let Some(w) = workers.get_mut(worker as usize) {
                        w.sent_result = result.take().zip(write_error.take());
                    }
                }
                live.apply(worker, msg);
                if ready && !s.tui {
                    notes.push(headless::connected_line(&live));
                }
            }
            Ok(Event::WorkerGone { worker }) => {
                if let Some(w) = live.workers.get_mut(worker as usize) {
                    w.gone = true;
                }
            }
            Ok(Event::Signal(signal)) => {
                let name = signal_name(signal);
                if ending.cancelled.is_none() {
                    say(s.tui, &mut live, &mut notes, format!("{name}: stopping the sessions and writing the summary (again to abort)"));
                    ending.cancelled = Some(format!("{name} received"));
                    ending.cancel_exit_code = Some(128 + signal);
                } else {
                    say(
                        s.tui,
                        &mut live,
                        &mut notes,
                        format!("{name} again: aborting the sessions"),
                    );
                    abort_at_s.get_or_insert(now_s);
                }
            }
            Ok(Event::Quit) => {
                if ending.cancelled.is_none() {
                    say(
                        s.tui,
                        &mut live,
                        &mut notes,
                        "q: stopping the sessions and writing the summary".to_string(),
                    );
                    ending.cancelled = Some("stopped from the dashboard".to_string());
                    ending.cancel_exit_code = Some(128 + libc::SIGINT);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                drop(live);
                flush(&mut notes);
                return ending;
            }
        }
        // Draining starts when the audio is sent, or when a session already ended (a fast
        // server drains before the duration has passed on the conductor's clock).
        let audio_sent = live.start_s.is_some_and(|start| {
            now_s >= start + s.duration_s - s.packet_s() || live.totals().sessions_done > 0
        });
        if phase == Phase::Streaming && (audio_sent || live.all_gone()) {
            phase = Phase::Draining;
            if !s.tui {
                notes.push(headless::draining_line(&live));
            }
        }
        if live.all_gone() {
            drop(live);
            flush(&mut notes);
            return ending;
        }
        live.cancelled = live.cancelled.take().or(ending.cancelled.clone());
        if live.start_s.is_none() && live.all_ready() && ending.cancelled.is_none() && !stop_sent {
            let start_s = gate_s(s.start_at_unix_s);
            for w in workers.iter_mut() {
                w.command(WorkerCommand::Go { start_s });
            }
            live.start_s = Some(start_s);
            // Streaming, then ending, draining and closing every session, then writing results.
            deadline_s = start_s + s.duration_s + 2.0 * s.recv_timeout_s + 30.0;
            // With --start-at far ahead, a countdown line every interval until then.
            next_progress_s = if start_s - now_s > progress_interval_s {
                now_s + progress_interval_s
            } else {
                start_s + progress_interval_s
            };
            phase = Phase::Streaming;
            if !s.tui {
                notes.push(headless::streaming_line(&live, monotonic_s()));
            }
        }
        if (ending.cancelled.is_some() || now_s > deadline_s) && !stop_sent {
            if ending.cancelled.is_none() {
                let what = if live.start_s.is_some() {
                    "the run went past its deadline: stopping the workers"
                } else {
                    "the sessions did not all set up in time: stopping the workers"
                };
                say(s.tui, &mut live, &mut notes, what.to_string());
                ending.notes.push(what.to_string());
            }
            for w in workers.iter_mut() {
                w.command(WorkerCommand::Stop);
            }
            stop_sent = true;
            // Ending a session waits at most STOP_GRACE_S per awaited event; give it room.
            abort_at_s.get_or_insert(now_s + 2.0 * s.recv_timeout_s.min(10.0) + 10.0);
        }
        if abort_at_s.is_some_and(|a| now_s >= a) && kill_at_s.is_none() {
            say(
                s.tui,
                &mut live,
                &mut notes,
                "aborting the sessions that have not ended".to_string(),
            );
            ending
                .notes
                .push("sessions that had not ended were aborted".to_string());
            for w in workers.iter_mut() {
                w.command(WorkerCommand::Abort);
            }
            kill_at_s = Some(now_s + ABORT_GRACE_S);
        }
        if kill_at_s.is_some_and(|k| now_s >= k) {
            for w in workers.iter_mut() {
                let _ = w.guard.child.kill();
            }
            ending
                .notes
                .push("workers that did not exit after the abort were killed".to_string());
            return ending;
        }
        // While the gate is ahead no telemetry moves the dashboard's clock: its countdown
        // runs on the conductor's.
        if live.countdown_s(now_s).is_some() {
            live.now_s = live.now_s.max(now_s);
        }
        if now_s >= next_proc_read_s {
            live.refresh_processes(now_s);
            next_proc_read_s = now_s + 1.0;
        }
        if !s.tui && now_s >= next_progress_s {
            let line = if let Some(left_s) = live.countdown_s(now_s) {
                headless::countdown_line(&live, left_s)
            } else if live.start_s.is_some() {
                headless::progress_line(&mut live, now_s)
            } else {
                headless::setup_progress_line(&live, now_s - setup_started_s)
            };
            notes.push(line);
            // Never behind: after a stalled stderr, the next line is one interval from now.
            next_progress_s = (next_progress_s + progress_interval_s).max(now_s);
        }
        drop(live);
        flush(&mut notes);
    }
}

/// When the start gate opens, on `CLOCK_MONOTONIC`: a moment from now, so that every worker
/// has the command in time; with `--start-at`, that instant of this host's wall clock (or now,
/// when the sessions set up too late for it: the summary then says how late).
fn gate_s(start_at_unix_s: Option<f64>) -> f64 {
    match start_at_unix_s {
        Some(at) => {
            let anchor = ClockAnchor::now();
            (anchor.monotonic_s + (at - anchor.realtime_s)).max(anchor.monotonic_s)
        }
        None => monotonic_s() + GATE_LEAD_S,
    }
}

/// Prints the messages gathered while the state was locked.
fn flush(notes: &mut Vec<String>) {
    for text in notes.drain(..) {
        note(&text);
    }
}
