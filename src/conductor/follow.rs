//! The conductor's control loop: gate the workers, follow their telemetry, react to signals,
//! keys and deadlines, and stop (or, as a last resort, abort and kill) the workers.

use super::children::WorkerChild;
use super::Event;
use crate::clock::{monotonic_s, ClockAnchor};
use crate::contract::telemetry::{Telemetry, WorkerCommand};
use crate::live::LiveState;
use crate::options::{RunPlan, Settings};
use crate::ui::headless::{self, Phase};
use std::io::{IsTerminal as _, Write as _};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How far ahead of "now" the start gate is set, so every worker has the command in time.
const GATE_LEAD_S: f64 = 0.25;
/// How long aborted workers get to write their results before they are killed.
const ABORT_GRACE_S: f64 = 5.0;
/// From a stop to the abort of the sessions that have not ended: a session waits at most 3 s
/// for each awaited event once the run is stopped (the worker's `STOP_GRACE_S`), and ends with
/// two at most (drained, closed), then writes its lines.
const STOP_TO_ABORT_S: f64 = 10.0;
/// A worker the kernel shows stopped (state `T`: SIGSTOP, a debugger) that has sent nothing
/// for this long, while the conductor itself kept running, holds the run until its deadline
/// (it hears neither a stop nor an abort): the run is stopped, and it is killed.
const STOPPED_S: f64 = 3.0;
/// A worker in any other state that has sent nothing for this long (a frozen cgroup, hung
/// storage): its progress comes from its runtime thread five times a second, which a long
/// block (a fault injected on purpose, a final flush to slow storage) also silences, so this
/// is far longer than any of those, and not applied while faults are injected or once a
/// worker's sessions have all ended (it is writing its files).
const STUCK_S: f64 = 60.0;
/// A pause in the conductor's own loop (it ticks every 100 ms) longer than this means the
/// conductor was not running either: the workers' silence is counted from when it ran again.
const CONDUCTOR_PAUSE_S: f64 = 1.0;

/// How the run ended, beyond what the workers' results say.
#[derive(Debug, Default)]
pub struct Ending {
    /// Why the user cancelled it (a signal or `q`), if they did.
    pub cancelled: Option<String>,
    /// The exit code the cancel asks for (128 + signal number).
    pub cancel_exit_code: Option<i32>,
    /// A signal stopped the run (not a key in the dashboard): whoever sent it waits for the
    /// process to exit, not for a key press on a finished dashboard.
    pub by_signal: bool,
    /// What else the conductor had to do (a deadline, an abort, a kill).
    pub notes: Vec<String>,
}

/// Writes a line to stderr; a closed stderr is not an error (the files are what matter).
pub fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

pub(super) fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "SIGTERM",
    }
}

/// What the loop does after one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Go on following.
    Go,
    /// Every worker is gone (or the channel closed): flush the notes and end.
    Done,
    /// The workers were killed: end now.
    Killed,
}

/// Runs the gate and the run itself, until every worker is gone.
pub fn follow(
    plan: &RunPlan,
    workers: &mut [WorkerChild],
    live: &Mutex<LiveState>,
    rx: &Receiver<Event>,
) -> Ending {
    let mut run = Follower::new(&plan.settings, workers);
    if !run.s.tui {
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
        let next = match run.on_event(&mut live, event, now_s) {
            Next::Go => run.step(&mut live, now_s),
            other => other,
        };
        if next == Next::Killed {
            return run.ending;
        }
        drop(live);
        run.flush();
        if next == Next::Done {
            return run.ending;
        }
    }
}

/// The control loop's state: where the run is, what was asked of the workers and when the
/// next thing is due.
struct Follower<'a> {
    s: &'a Settings,
    workers: &'a mut [WorkerChild],
    ending: Ending,
    /// In the dashboard, messages go to its header instead of over the screen; headless, they
    /// go to stderr after the state's lock is released (a stalled stderr must not hold the loop).
    notes: Vec<String>,
    phase: Phase,
    /// When the workers are stopped unless they are done: the set-up's budget, then the run's.
    deadline_s: f64,
    stop_sent: bool,
    abort_at_s: Option<f64>,
    kill_at_s: Option<f64>,
    progress_interval_s: f64,
    setup_started_s: f64,
    next_progress_s: f64,
    next_proc_read_s: f64,
    /// The loop's previous turn, and since when it has turned without a pause: a worker's
    /// silence counts only from then.
    last_turn_s: f64,
    awake_since_s: f64,
}

impl<'a> Follower<'a> {
    fn new(s: &'a Settings, workers: &'a mut [WorkerChild]) -> Self {
        let setup_budget_s = s.connect_timeout_s * f64::from(s.admission_retries + 1)
            + f64::from(s.admission_retries) * s.admission_retry_interval_ms as f64 / 1000.0
            + 2.0 * s.recv_timeout_s
            + 10.0;
        let deadline_s = monotonic_s() + setup_budget_s;
        let progress_interval_s = headless::progress_interval_s(std::io::stderr().is_terminal());
        let setup_started_s = monotonic_s();
        Follower {
            s,
            workers,
            ending: Ending::default(),
            notes: Vec::new(),
            phase: Phase::SettingUp,
            deadline_s,
            stop_sent: false,
            abort_at_s: None,
            kill_at_s: None,
            progress_interval_s,
            setup_started_s,
            next_progress_s: setup_started_s + progress_interval_s,
            next_proc_read_s: monotonic_s(),
            last_turn_s: setup_started_s,
            awake_since_s: setup_started_s,
        }
    }

    /// Folds one event (or its absence) into the live state.
    fn on_event(
        &mut self,
        live: &mut LiveState,
        event: Result<Event, RecvTimeoutError>,
        now_s: f64,
    ) -> Next {
        match event {
            Ok(Event::Telemetry { worker, msg }) => self.on_telemetry(live, worker, msg),
            Ok(Event::WorkerGone { worker }) => {
                if let Some(w) = live.workers.get_mut(worker as usize) {
                    w.gone = true;
                }
            }
            Ok(Event::Signal(signal)) => self.on_signal(live, signal, now_s),
            Ok(Event::Quit) => {
                if self.ending.cancelled.is_none() {
                    self.say(
                        live,
                        "q: stopping the sessions and writing the summary".to_string(),
                    );
                    self.ending.cancelled = Some("stopped from the dashboard".to_string());
                    self.ending.cancel_exit_code = Some(128 + libc::SIGINT);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Next::Done,
        }
        Next::Go
    }

    /// A worker's telemetry: its result (kept in case its file is never written), then the
    /// live state.
    fn on_telemetry(&mut self, live: &mut LiveState, worker: u32, mut msg: Telemetry) {
        let ready = matches!(msg, Telemetry::Ready { .. });
        if let Telemetry::Done {
            result: result @ Some(_),
            write_error,
            ..
        } = &mut msg
        {
            if let Some(w) = self.workers.get_mut(worker as usize) {
                w.sent_result = result.take().zip(write_error.take());
            }
        }
        live.apply(worker, msg);
        if ready && !self.s.tui {
            self.notes.push(headless::connected_line(live));
        }
    }

    /// The first signal stops the sessions; the second aborts them.
    fn on_signal(&mut self, live: &mut LiveState, signal: i32, now_s: f64) {
        let name = signal_name(signal);
        if self.ending.cancelled.is_none() {
            self.say(
                live,
                format!("{name}: stopping the sessions and writing the summary (again to abort)"),
            );
            self.ending.cancelled = Some(format!("{name} received"));
            self.ending.cancel_exit_code = Some(128 + signal);
        } else {
            self.say(live, format!("{name} again: aborting the sessions"));
            // At once: the stop has already set a later abort (its grace for the sessions).
            self.abort_at_s = Some(self.abort_at_s.map_or(now_s, |a| a.min(now_s)));
        }
        self.ending.by_signal = true;
    }

    /// What is due after an event: the phase, the gate, stopping, aborting or killing the
    /// workers, the processes' figures and the progress lines.
    fn step(&mut self, live: &mut LiveState, now_s: f64) -> Next {
        if now_s - self.last_turn_s > CONDUCTOR_PAUSE_S {
            self.awake_since_s = now_s;
        }
        self.last_turn_s = now_s;
        self.watch_draining(live, now_s);
        if live.all_gone() {
            return Next::Done;
        }
        self.watch_stuck(live, now_s);
        live.cancelled = live.cancelled.take().or(self.ending.cancelled.clone());
        if live.start_s.is_none()
            && live.all_ready()
            && self.ending.cancelled.is_none()
            && !self.stop_sent
        {
            self.open_gate(live, now_s);
        }
        if (self.ending.cancelled.is_some() || now_s > self.deadline_s) && !self.stop_sent {
            let what = if live.start_s.is_some() {
                "the run went past its deadline: stopping the workers"
            } else {
                "the sessions did not all set up in time: stopping the workers"
            };
            self.stop(live, now_s, what.to_string());
        }
        if self.abort_at_s.is_some_and(|a| now_s >= a) && self.kill_at_s.is_none() {
            self.abort(live, now_s);
        }
        if self.kill_at_s.is_some_and(|k| now_s >= k) {
            self.kill();
            return Next::Killed;
        }
        // While the gate is ahead no telemetry moves the dashboard's clock: its countdown
        // runs on the conductor's.
        if live.countdown_s(now_s).is_some() {
            live.now_s = live.now_s.max(now_s);
        }
        if now_s >= self.next_proc_read_s {
            live.refresh_processes(now_s);
            self.next_proc_read_s = now_s + 1.0;
        }
        if !self.s.tui && now_s >= self.next_progress_s {
            self.progress(live, now_s);
        }
        Next::Go
    }

    /// Draining starts when the audio is sent, or when a session already ended (a fast
    /// server drains before the duration has passed on the conductor's clock).
    fn watch_draining(&mut self, live: &LiveState, now_s: f64) {
        let s = self.s;
        // The last packets are due a packet before the end; a session that ended well before
        // that was ended early (the server closed or failed it), which is no drain.
        let audio_due_s = live
            .start_s
            .map(|start| start + s.duration_s - s.packet_s());
        let audio_sent = audio_due_s.is_some_and(|due| now_s >= due);
        let ended = live.start_s.is_some() && live.totals().sessions_done > 0;
        if self.phase == Phase::Streaming && (audio_sent || ended || live.all_gone()) {
            self.phase = Phase::Draining;
            let early = audio_due_s.is_some_and(|due| now_s < due - 0.5);
            // A cancelled run's sessions end early: its audio was not sent, whatever they do.
            if !s.tui && live.any_connected() && self.ending.cancelled.is_none() {
                self.notes.push(headless::draining_line(live, !early));
            }
        }
    }

    /// Every worker set up: the gate opens for all of them at once.
    fn open_gate(&mut self, live: &mut LiveState, now_s: f64) {
        let s = self.s;
        let start_s = gate_s(s.start_at_unix_s);
        for w in self.workers.iter_mut() {
            w.command(WorkerCommand::Go { start_s });
        }
        live.start_s = Some(start_s);
        // Streaming, then ending, draining and closing every session, then writing results.
        self.deadline_s = start_s + s.duration_s + 2.0 * s.recv_timeout_s + 30.0;
        // With --start-at far ahead, a countdown line every interval until then.
        self.next_progress_s = if start_s - now_s > self.progress_interval_s {
            now_s + self.progress_interval_s
        } else {
            start_s + self.progress_interval_s
        };
        self.phase = Phase::Streaming;
        // With no session set up nothing streams: the sessions' failures are the news.
        if !s.tui && live.any_connected() {
            self.notes
                .push(headless::streaming_line(live, monotonic_s()));
        }
    }

    /// A worker that stopped reporting (stopped or frozen) while the conductor kept running:
    /// before a stop, the run is stopped, saying so; after one, the sessions are aborted once
    /// only silent workers are left (a frozen worker hears neither), and it is killed after
    /// the abort's grace. Its last telemetry stands in for its result.
    fn watch_stuck(&mut self, live: &mut LiveState, now_s: f64) {
        let watched_s = now_s - self.awake_since_s;
        let per_worker = u64::from(live.info.sessions_per_process);
        let injects = self.s.injects();
        // (worker, seconds silent, stopped by the kernel) of the workers that hold the run.
        let stuck: Vec<(usize, f64, bool)> = live
            .silent_workers(now_s)
            .into_iter()
            .filter_map(|(k, silent_s)| {
                let w = &live.workers[k];
                let silent_s = silent_s.min(watched_s);
                let stopped = w
                    .process
                    .reading
                    .is_some_and(|r| matches!(r.state, 'T' | 't'));
                let ended = u64::from(w.progress.sessions_done) >= per_worker;
                let stuck = if stopped {
                    silent_s > STOPPED_S
                } else {
                    !injects && !ended && silent_s > STUCK_S
                };
                stuck.then_some((k, silent_s, stopped))
            })
            .collect();
        if let (Some(&(k, silent_s, stopped)), false) = (stuck.first(), self.stop_sent) {
            let why = if stopped {
                "stopped: state T, SIGSTOP or a debugger"
            } else {
                "frozen? see its state in the Processes panel"
            };
            self.stop(
                live,
                now_s,
                format!(
                    "worker {k} has sent nothing for {silent_s:.0} s ({why}): stopping the run"
                ),
            );
        }
        // Once only such workers are left, nothing will end their sessions: abort now.
        let unfinished = live.workers.iter().filter(|w| !w.done && !w.gone).count();
        if self.stop_sent
            && unfinished > 0
            && stuck.len() == unfinished
            && self.kill_at_s.is_none()
            && self.abort_at_s.is_some_and(|a| a > now_s)
        {
            self.abort_at_s = Some(now_s);
        }
    }

    /// Cancelled, past the deadline or stuck: the workers end their sessions. `what` says why
    /// (a cancel has said it already).
    fn stop(&mut self, live: &mut LiveState, now_s: f64, what: String) {
        if self.ending.cancelled.is_none() {
            self.say(live, what.clone());
            self.ending.notes.push(what);
        }
        for w in self.workers.iter_mut() {
            w.command(WorkerCommand::Stop);
        }
        self.stop_sent = true;
        self.abort_at_s.get_or_insert(now_s + STOP_TO_ABORT_S);
    }

    /// The sessions that have not ended are aborted; the workers get a grace to write results.
    fn abort(&mut self, live: &mut LiveState, now_s: f64) {
        self.say(
            live,
            "aborting the sessions that have not ended".to_string(),
        );
        self.ending
            .notes
            .push("sessions that had not ended were aborted".to_string());
        for w in self.workers.iter_mut() {
            w.command(WorkerCommand::Abort);
        }
        self.kill_at_s = Some(now_s + ABORT_GRACE_S);
    }

    /// The last resort: workers that did not exit after the abort.
    fn kill(&mut self) {
        for w in self.workers.iter_mut() {
            let _ = w.guard.child.kill();
        }
        self.ending
            .notes
            .push("workers that did not exit after the abort were killed".to_string());
    }

    /// A headless progress line: the countdown, the run's progress or the set-up's.
    fn progress(&mut self, live: &mut LiveState, now_s: f64) {
        let line = if let Some(left_s) = live.countdown_s(now_s) {
            headless::countdown_line(live, left_s)
        } else if live.start_s.is_some() {
            headless::progress_line(live, now_s)
        } else {
            headless::setup_progress_line(live, now_s - self.setup_started_s)
        };
        self.notes.push(line);
        // Never behind: after a stalled stderr, the next line is one interval from now.
        self.next_progress_s = (self.next_progress_s + self.progress_interval_s).max(now_s);
    }

    /// Shows a message: in the dashboard's header, or (headless) on stderr once the lock is
    /// released.
    fn say(&mut self, live: &mut LiveState, text: String) {
        if self.s.tui {
            live.cancelled = Some(text);
        } else {
            self.notes.push(text);
        }
    }

    /// Prints the messages gathered while the state was locked.
    fn flush(&mut self) {
        for text in self.notes.drain(..) {
            note(&text);
        }
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
