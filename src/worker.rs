//! One worker process of a run: S paced sessions on a single-threaded tokio runtime (one loop,
//! as in the seed's client, so a stall of the loop shows in every session and in the loop-lag
//! monitor), one trace-writer thread, and the telemetry and command threads to the conductor.

mod control;
mod counters;
mod inject;
mod pacer;
mod scheduler;
pub mod session;
mod setup;

use crate::audio::Audio;
use crate::cli::WorkerArgs;
use crate::clock::{instant_at, monotonic_s, ClockAnchor};
use crate::contract::telemetry::{Telemetry, WorkerCommand};
use crate::contract::worker::{
    Injection, SessionOutcome, SessionStatus, WorkerConfig, WorkerResult, RESULT_SCHEMA_VERSION,
};
use crate::contract::ProcessUsage;
use crate::options::Settings;
use crate::paths::RunPaths;
use crate::protocol::native::Native;
use crate::protocol::openai::Openai;
use crate::protocol::vllm::Vllm;
use crate::protocol::{ClientProtocol, Protocol};
use crate::trace::{TraceConfig, Tracer, WriteLoss};
use crate::{looplag, procstat, sys};
use anyhow::{Context, Result};
use counters::WorkerStats;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::watch;

/// The hidden `worker` subcommand.
pub fn run(args: &WorkerArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("cannot read worker config {}", args.config.display()))?;
    let mut config: WorkerConfig =
        serde_json::from_str(&text).context("worker config is not valid")?;
    // The config file holds no secret; the conductor hands them over in the environment.
    if let Ok(secrets) = std::env::var(crate::secret::SECRETS_ENV) {
        config.settings.connection.restore_secrets(&secrets)?;
    }
    sys::raise_open_file_limit();
    let anchor = ClockAnchor::now();
    let started_s = anchor.monotonic_s;
    let telemetry = control::TelemetrySender::spawn().context("cannot start telemetry thread")?;
    let commands = control::spawn_command_reader().context("cannot start command thread")?;
    let tracer = Tracer::start(TraceConfig {
        output_dir: config.output_dir.clone(),
        worker: config.index,
        mode: config.settings.trace,
        writer: config.settings.trace_writer,
    })?;
    // The input is read and encoded once, before any session connects.
    let s = &config.settings;
    let audio = Rc::new(Audio::load(
        &s.audio,
        s.client.input_sample_rate,
        s.packet_ms,
        s.packets_per_session,
        s.input_bytes(),
    )?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build the worker's runtime")?;
    let local = tokio::task::LocalSet::new();
    // The timerfd registers with the runtime's reactor, so it is made inside the runtime.
    let pacer = runtime
        .block_on(async { pacer::Pacer::new(config.settings.sessions_per_process) })
        .context("cannot create the worker's send timer (a timerfd)")?;
    // TLS (the system's roots) and the handshake headers, once for every session.
    let protocol = client_protocol(&config.settings);
    let dialer = Rc::new(session::Dialer::new(&config.settings, protocol.as_ref())?);
    let run = local.block_on(
        &runtime,
        drive(
            &config,
            &tracer,
            &telemetry,
            commands,
            Rc::new(pacer),
            audio,
            (protocol, dialer),
        ),
    );
    let samples_loss = tracer.shutdown().err();
    let result = result_of(&config, (anchor, started_s), run, samples_loss, &telemetry);
    hand_over(result, &config, &telemetry)
}

/// The worker's result: its run's figures, its process's usage and what was lost on the way.
fn result_of(
    config: &WorkerConfig,
    (anchor, started_s): (ClockAnchor, f64),
    run: RunOutput,
    samples_loss: Option<WriteLoss>,
    telemetry: &control::TelemetrySender,
) -> WorkerResult {
    let ended_s = monotonic_s();
    WorkerResult {
        schema_version: RESULT_SCHEMA_VERSION,
        index: config.index,
        pid: std::process::id(),
        anchor,
        started_s,
        gate_s: run.gate_s,
        ended_s,
        usage: ProcessUsage {
            streaming: run.stats.streaming_usage(),
            ..procstat::self_usage(ended_s - started_s)
        },
        loop_lag: run.loop_lag.stats(),
        writer_queue_peak_lines: run.stats.queue_peak_lines,
        writer_queue_peak_bytes: run.stats.queue_peak_bytes,
        counts: run.stats.counts,
        sessions_with_late_packets: run.stats.sessions_with_late_packets,
        protocol_errors: run.stats.protocol_errors,
        error_events: run.stats.error_events,
        histograms: run.stats.hist,
        first_injection_s: run.injections.first().map(|i| i.start_s),
        late_packet_windows: run.stats.late_windows.clone(),
        send_blocked_windows: run.stats.send_blocked_windows.clone(),
        late_packet_sessions: run.stats.late_sessions.clone(),
        send_blocked_sessions: run.stats.send_blocked_sessions.clone(),
        reply_seconds: run.stats.reply_seconds.clone(),
        loop_lag_windows: run.loop_lag.lag_windows(),
        injections: run.injections,
        telemetry_dropped: telemetry.dropped(),
        writer_error: samples_loss.as_ref().map(WriteLoss::describe),
        sample_lines_not_written: samples_loss.as_ref().map_or(0, |l| l.lines),
        disk_full: samples_loss.as_ref().is_some_and(|l| l.disk_full)
            || run.outcomes.iter().any(|o| o.disk_full),
        sessions: run.outcomes,
        from_telemetry: false,
    }
}

/// Writes the result file and tells the conductor where it is: a full disk must not cost the
/// figures, so when the file cannot be written they go over the pipe instead.
fn hand_over(
    result: WorkerResult,
    config: &WorkerConfig,
    telemetry: &control::TelemetrySender,
) -> Result<()> {
    let path = RunPaths::new(&config.output_dir).worker_result(config.index);
    let json = serde_json::to_vec(&result).context("cannot encode the worker result")?;
    // Whole or not at all: written beside it and renamed, so that a worker ended mid-write (its
    // conductor died, and it exits 3 s after the SIGTERM) leaves no cut file to read as damage.
    let written = crate::paths::write_whole(&path, &json);
    let done = match written {
        Ok(()) => Telemetry::Done {
            result_path: path.display().to_string(),
            write_error: None,
            result: None,
        },
        // A full disk must not cost the figures: they go to the conductor over the pipe.
        Err(err) => Telemetry::Done {
            result_path: path.display().to_string(),
            write_error: Some(format!("cannot write {}: {err}", path.display())),
            result: Some(Box::new(result)),
        },
    };
    telemetry.send_and_flush(done, Duration::from_secs(5));
    Ok(())
}

struct RunOutput {
    stats: WorkerStats,
    loop_lag: std::sync::Arc<looplag::LoopLag>,
    outcomes: Vec<SessionOutcome>,
    gate_s: Option<f64>,
    injections: Vec<Injection>,
}

async fn drive(
    config: &WorkerConfig,
    tracer: &Tracer,
    telemetry: &control::TelemetrySender,
    commands: tokio::sync::mpsc::UnboundedReceiver<WorkerCommand>,
    pacer: Rc<pacer::Pacer>,
    audio: Rc<Audio>,
    (protocol, dialer): (Rc<dyn crate::protocol::ClientProtocol>, Rc<session::Dialer>),
) -> RunOutput {
    let settings = Rc::new(config.settings.clone());
    let stats = Rc::new(RefCell::new(WorkerStats::new(
        settings.sessions_per_process,
    )));
    let tally = Rc::new(setup::SetupTally::new(settings.sessions_per_process));
    let (gate_tx, gate_rx) = watch::channel(None::<f64>);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (abort_tx, abort_rx) = watch::channel(false);

    let monitors = Monitors::spawn(&stats, &settings, tracer, telemetry);
    let pacer_task = tokio::task::spawn_local({
        let pacer = pacer.clone();
        async move { pacer.run().await }
    });
    let sessions = scheduler::Scheduler::new(
        session_futures(
            session::SessionCtx {
                worker: config.index,
                index: 0,
                settings: settings.clone(),
                protocol,
                url: Rc::from(settings.url.as_str()),
                dialer,
                audio,
                stats: stats.clone(),
                tally: tally.clone(),
                pacer: pacer.clone(),
                gate: gate_rx.clone(),
                stop: stop_rx,
            },
            tracer,
        ),
        pacer,
    );
    let injections = Rc::new(RefCell::new(Vec::new()));
    let control = spawn_control(
        config,
        commands,
        report_ready(tally, telemetry.clone()),
        Switches {
            gate: gate_tx,
            stop: stop_tx,
            abort: abort_tx,
        },
        injections.clone(),
    );

    let outcomes = collect_outcomes(sessions, abort_rx, &stats).await;
    // Every session is done: this worker's run is over, whatever the conductor says next.
    control.abort();
    let gate_s = *gate_rx.borrow();
    let loop_lag = monitors.finish(&stats, &settings, tracer, telemetry).await;
    pacer_task.abort();
    let stats = Rc::try_unwrap(stats)
        .map(RefCell::into_inner)
        .unwrap_or_else(|rc| std::mem::take(&mut *rc.borrow_mut()));
    RunOutput {
        stats,
        loop_lag,
        outcomes,
        gate_s,
        injections: injections.take(),
    }
}

/// The tasks that watch the run rather than stream: the loop-lag ticker (which also samples the
/// writer queue) and the progress reports to the conductor.
struct Monitors {
    loop_lag: std::sync::Arc<looplag::LoopLag>,
    lag_task: tokio::task::JoinHandle<()>,
    progress_task: tokio::task::JoinHandle<()>,
    stop: watch::Sender<bool>,
}

impl Monitors {
    fn spawn(
        stats: &Rc<RefCell<WorkerStats>>,
        settings: &Rc<Settings>,
        tracer: &Tracer,
        telemetry: &control::TelemetrySender,
    ) -> Monitors {
        let (stop, stop_rx) = watch::channel(false);
        // The loop-lag ticker also samples the writer queue every 10 ms.
        let loop_lag = looplag::LoopLag::new();
        let depth = tracer.depth();
        let tick_stats = stats.clone();
        let lag_task = tokio::task::spawn_local(looplag::run(
            loop_lag.clone(),
            move || {
                let (lines, bytes) = depth.get();
                let mut s = tick_stats.borrow_mut();
                s.queue_peak_lines = s.queue_peak_lines.max(lines);
                s.queue_peak_bytes = s.queue_peak_bytes.max(bytes);
            },
            stop_rx.clone(),
        ));
        let progress_task = tokio::task::spawn_local(report_progress(
            stats.clone(),
            settings.clone(),
            loop_lag.clone(),
            tracer.depth(),
            telemetry.clone(),
            stop_rx,
        ));
        Monitors {
            loop_lag,
            lag_task,
            progress_task,
            stop,
        }
    }

    /// Sends the last progress message and the histograms, so live views end on the final
    /// counters, then stops the monitors; returns the loop-lag record.
    async fn finish(
        self,
        stats: &RefCell<WorkerStats>,
        settings: &Settings,
        tracer: &Tracer,
        telemetry: &control::TelemetrySender,
    ) -> std::sync::Arc<looplag::LoopLag> {
        let mut last = stats.borrow().progress(monotonic_s());
        last.loop_lag_max_us = self.loop_lag.max_us();
        (last.lines_not_written, last.disk_full) = tracer.depth().losses();
        telemetry.send(Telemetry::Progress(last));
        telemetry.send(histogram_telemetry(&stats.borrow(), settings));
        let _ = self.stop.send(true);
        let _ = self.lag_task.await;
        let _ = self.progress_task.await;
        self.loop_lag
    }
}

/// One session per index, each from `template` with its own index and trace.
fn session_futures(
    template: session::SessionCtx,
    tracer: &Tracer,
) -> Vec<std::pin::Pin<Box<dyn std::future::Future<Output = SessionOutcome>>>> {
    (0..template.settings.sessions_per_process)
        .map(|index| {
            let ctx = session::SessionCtx {
                index,
                ..template.clone()
            };
            Box::pin(session::run(ctx, tracer.open_session(index))) as _
        })
        .collect()
}

/// How often a worker says how many of its sessions have set up, until all have.
const SETUP_PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Reports how far the sessions' set-up has got once a second, and readiness once every
/// session has set up (or given up).
async fn report_ready(tally: Rc<setup::SetupTally>, telemetry: control::TelemetrySender) {
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + SETUP_PROGRESS_INTERVAL,
        SETUP_PROGRESS_INTERVAL,
    );
    loop {
        tokio::select! {
            () = tally.all_settled() => break,
            _ = tick.tick() => {
                let (connected, rejected, failed, _) = tally.counts();
                telemetry.send(Telemetry::SetupProgress {
                    connected,
                    rejected,
                    failed,
                });
            }
        }
    }
    // The sessions' state is all there now: onto huge pages with it, before the gate (a few
    // milliseconds of the kernel's copying, which would delay packets once they are paced).
    // The worker's log stays empty when all went as it should (the conductor reads an empty
    // log as "nothing to say").
    let started_s = monotonic_s();
    let outcome = crate::sys::huge_pages::heap_on_huge_pages();
    let took_ms = (monotonic_s() - started_s) * 1e3;
    if matches!(outcome, crate::sys::huge_pages::Outcome::Failed(_)) || took_ms >= 20.0 {
        eprintln!("the sessions' heap before the gate: {outcome} ({took_ms:.1} ms)");
    }
    let (connected, rejected, failed, first_error) = tally.counts();
    telemetry
        .send_eventually(Telemetry::Ready {
            pid: std::process::id(),
            connected,
            rejected,
            failed,
            first_error,
        })
        .await;
}

/// What the conductor's commands switch for the sessions: the start gate, stop and abort.
struct Switches {
    gate: watch::Sender<Option<f64>>,
    stop: watch::Sender<bool>,
    abort: watch::Sender<bool>,
}

/// Reports `ready` and obeys the conductor's commands: `Go` opens the gate (and schedules the
/// injections half way through, when asked for), `Stop` and `Abort` end the run. The commands
/// are obeyed from the start: a stop during set-up (Ctrl-C while sessions wait for a server
/// that does not answer) must not wait until every session has set up or timed out.
fn spawn_control(
    config: &WorkerConfig,
    mut commands: tokio::sync::mpsc::UnboundedReceiver<WorkerCommand>,
    ready: impl std::future::Future<Output = ()> + 'static,
    switches: Switches,
    injected: Rc<RefCell<Vec<Injection>>>,
) -> tokio::task::JoinHandle<()> {
    let settings = &config.settings;
    let inject = config.inject_faults.then_some((
        settings.inject_stall_ms,
        settings.inject_disk_stall_mb,
        settings.inject_cpu_starvation_ms,
    ));
    let duration_s = settings.duration_s;
    let run_paths = RunPaths::new(&config.output_dir);
    let worker_index = config.index;
    let Switches { gate, stop, abort } = switches;
    tokio::task::spawn_local(async move {
        tokio::pin!(ready);
        let mut reported = false;
        loop {
            let command = tokio::select! {
                () = &mut ready, if !reported => {
                    reported = true;
                    continue;
                }
                command = commands.recv() => command,
            };
            let Some(command) = command else { break };
            match command {
                WorkerCommand::Go { start_s } if gate.borrow().is_none() => {
                    let _ = gate.send(Some(start_s));
                    if let Some(faults) = inject {
                        spawn_injections(
                            faults,
                            start_s + duration_s / 2.0,
                            injected.clone(),
                            (run_paths.clone(), worker_index),
                        );
                    }
                }
                WorkerCommand::Go { .. } => {}
                WorkerCommand::Stop => {
                    let _ = stop.send(true);
                }
                WorkerCommand::Abort => {
                    let _ = stop.send(true);
                    let _ = abort.send(true);
                }
            }
        }
        // The conductor is gone (end of input): stop.
        let _ = stop.send(true);
        // Keep the abort sender alive: dropping it must not read as an abort.
        std::future::pending::<()>().await;
    })
}

/// The faults to inject (`--inject-stall-ms`, `--inject-disk-stall-mb`,
/// `--inject-cpu-starvation-ms`), each `None` when not asked for.
type Faults = (Option<u32>, Option<u32>, Option<u32>);

/// Injects `faults` at `at_s` on the runtime thread, each in turn, recording each in `injected`.
fn spawn_injections(
    (busy_ms, disk_mb, starve_ms): Faults,
    at_s: f64,
    injected: Rc<RefCell<Vec<Injection>>>,
    (dir, worker_index): (RunPaths, u32),
) {
    tokio::task::spawn_local(async move {
        tokio::time::sleep_until(instant_at(at_s)).await;
        if let Some(ms) = busy_ms {
            injected.borrow_mut().push(inject::busy(ms));
        }
        if let Some(mb) = disk_mb {
            let injection = inject::disk(mb, &dir, worker_index).await;
            injected.borrow_mut().push(injection);
        }
        if let Some(ms) = starve_ms {
            injected.borrow_mut().push(inject::cpu_starvation(ms));
        }
    });
}

/// The error of a session an abort dropped: a second Ctrl-C, the deadline after a stop, or
/// the conductor's death (the kernel's SIGTERM).
const ABORTED: &str = "aborted: the run ended before this session did (a second signal, a stop's deadline, or the conductor's death)";

/// Runs the sessions to their ends, or until the run is aborted: then a session that had not
/// ended is dropped where it stood and reported aborted.
async fn collect_outcomes(
    mut sessions: scheduler::Scheduler,
    mut abort_rx: watch::Receiver<bool>,
    stats: &RefCell<WorkerStats>,
) -> Vec<SessionOutcome> {
    tokio::select! {
        () = sessions.run() => {}
        _ = abort_rx.wait_for(|a| *a) => {}
    }
    // The sessions that had not ended are dropped here, and leave what they recorded.
    let outcomes = sessions.into_outcomes();
    let mut abandoned = std::mem::take(&mut stats.borrow_mut().abandoned);
    outcomes
        .into_iter()
        .enumerate()
        .map(|(index, outcome)| {
            outcome.unwrap_or_else(|| {
                let kept = abandoned.iter().position(|o| o.index == index as u32);
                let mut o = kept.map_or_else(
                    || SessionOutcome::new(index as u32),
                    |k| abandoned.swap_remove(k),
                );
                // One dropped while its trace was being written had ended already (completed,
                // rejected, failed with its own error): that stays.
                let decided = o.status != SessionStatus::Incomplete || o.error.is_some();
                if !decided {
                    o.error = Some(ABORTED.to_string());
                }
                stats.borrow_mut().session_ended(o.status);
                o
            })
        })
        .collect()
}

/// The client side of the run's protocol, configured from its settings.
pub(crate) fn client_protocol(settings: &Settings) -> Rc<dyn ClientProtocol> {
    match settings.protocol {
        Protocol::Native => Rc::new(Native::new(
            &settings.modalities,
            settings.client.audio_grant_optional,
            settings.client.input_sample_rate,
        )),
        Protocol::Openai => Rc::new(Openai::new(
            &settings.client,
            &settings.modalities,
            settings.language.as_deref(),
            settings.packet_ms,
        )),
        Protocol::Vllm => Rc::new(Vllm::new(&settings.client)),
        Protocol::Funasr => Rc::new(crate::protocol::funasr::Funasr::new(
            settings.language.as_deref(),
            settings.hotwords.as_deref(),
        )),
    }
}

/// Live counters and heat for the conductor, five times a second; the histogram once a second.
/// The histograms live views show: the client's deviation and start lateness, and the
/// protocol's own figures (the server's latency as the protocol names it).
fn histogram_telemetry(stats: &WorkerStats, settings: &Settings) -> Telemetry {
    let hist = &stats.hist;
    Telemetry::Histogram(Box::new(crate::contract::telemetry::LiveHistograms {
        deviation: hist.deviation.clone(),
        accepted: hist.accepted.clone(),
        unit_lag: hist.unit_lag.clone(),
        first_audio: hist.first_audio.clone(),
        start_lateness: hist.start_lateness.clone(),
        protocol: Some(crate::contract::figures::ProtocolFigures::of(
            settings,
            hist,
            &stats.transcripts,
            &stats.turn_counts,
        )),
    }))
}

async fn report_progress(
    stats: Rc<RefCell<WorkerStats>>,
    settings: Rc<Settings>,
    loop_lag: std::sync::Arc<looplag::LoopLag>,
    depth: std::sync::Arc<crate::trace::QueueDepth>,
    telemetry: control::TelemetrySender,
    mut stop: watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(Duration::from_millis(200));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for tick in 0u64.. {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.changed() => return,
        }
        let time_s = monotonic_s();
        let (mut progress, (heat, heat_due_s), histogram) = {
            let mut s = stats.borrow_mut();
            // Cloned once a second, not on every tick: four histograms of a few KiB each.
            let histogram = (tick % 5 == 0).then(|| histogram_telemetry(&s, &settings));
            (s.progress(time_s), s.take_heat(), histogram)
        };
        progress.loop_lag_window_max_us = loop_lag.take_window_max_us();
        progress.loop_lag_max_us = loop_lag.max_us();
        (progress.queue_lines, progress.queue_bytes) = depth.get();
        (progress.lines_not_written, progress.disk_full) = depth.losses();
        progress.telemetry_dropped = telemetry.dropped();
        telemetry.send(Telemetry::Progress(progress));
        telemetry.send(Telemetry::Heat {
            time_s: heat_due_s.unwrap_or(time_s),
            cells: heat,
        });
        if let Some(histogram) = histogram {
            telemetry.send(histogram);
        }
    }
}
