//! The built-in mock server: serves the native full-duplex protocol with no model, so
//! anyone can reproduce and study the client's pacing on one machine.
//!
//! It runs on one current-thread runtime: one event loop whose lag is meaningful and whose CPU
//! stays low. It records when each packet arrives (its own arrival deviation) and its own loop
//! lag, and writes them to `--stats-output` on SIGINT or SIGTERM.
//!
//! * `server`: accept loop, admission (HTTP 404/503 at the handshake), one task per connection;
//! * `session`: the per-session state machine, free of sockets;
//! * `client_event`: the parts of a client event it reads, parsed liberally;
//! * `replies`: the frames it sends, built without a JSON serialiser;
//! * `stats`: the counters and the statistics file;
//! * `openai`, `vllm`: the sessions of those protocols, answering on a clock (`timed`), the
//!   openai one with an energy VAD (`vad`).

pub mod client_event;
mod funasr;
mod openai;
mod replies;
mod server;
mod session;
pub mod stats;
mod timed;
mod vad;
mod vllm;

pub use crate::contract::mock::MockStats;

use crate::cli::MockArgs;
use crate::protocol::Protocol;
use crate::{clock, looplag, procstat, sys};
use anyhow::{Context, Result};
use replies::Templates;
use server::Shared;
use stats::Counters;
use std::io::Write as _;
use std::rc::Rc;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

/// Serves until SIGINT or SIGTERM, then writes the statistics file (if asked) and returns.
pub fn run(args: &MockArgs) -> Result<()> {
    crate::options::check_output_rate(args.protocol, &args.behaviour)?;
    let started_s = clock::monotonic_s();
    // Each session is a socket; the default soft limit (often 1024) would cap the sessions.
    sys::raise_open_file_limit();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the mock's async runtime")?;
    let local = tokio::task::LocalSet::new();
    let stats = local.block_on(&runtime, serve_until_signal(args, started_s))?;
    if let Some(path) = &args.stats_output {
        stats.write(path)?;
    }
    Ok(())
}

/// How long a mock whose parent died (the conductor, killed) keeps serving its open sessions
/// for the workers to end them: they abort within 3 s of the same SIGTERM.
const ORPHAN_DRAIN: std::time::Duration = std::time::Duration::from_secs(4);

async fn serve_until_signal(args: &MockArgs, started_s: f64) -> Result<MockStats> {
    // Handlers first: a signal sent the moment the listening line is read must not kill the
    // process before it writes its statistics.
    let mut sigterm = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let parent = rustix::process::getppid();
    // Started by a conductor, which asks for a signal when it dies (`sys::die_with_parent`).
    let built_in = matches!(rustix::process::parent_process_death_signal(), Ok(Some(_)));

    let listener = bind(&args.host, args.port()).await?;
    let listen_addr = listener
        .local_addr()
        .context("cannot read the address the mock listens on")?
        .to_string();

    let counters = Rc::new(Counters::new());
    let mut shared = Shared::new(
        args.protocol,
        Templates::new(&args.behaviour),
        Rc::clone(&counters),
        args.behaviour.max_sessions,
    )
    .with_timed(timed::Behaviour::new(&args.behaviour, args.protocol));
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        shared = shared.with_tls(crate::tls::server_config(
            cert,
            key,
            args.tls_client_ca.as_deref(),
        )?);
    }
    if args.protocol == Protocol::Funasr {
        shared.funasr = Some(funasr::Engine::start(args.behaviour.funasr.clone()));
    }
    let shared = Rc::new(shared);
    let lag = looplag::LoopLag::new();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let ticker = tokio::task::spawn_local(looplag::run(lag.clone(), || {}, stop_rx));

    if let Some(stall) = crate::options::MockStall::from_args(&args.behaviour) {
        tokio::task::spawn_local(stall_once(stall, Rc::clone(&shared.first_session)));
    }
    announce(&listen_addr);
    if let Some(cert) = &args.tls_cert {
        // The first line stays as scripts read it; this one says how to reach it.
        eprintln!(
            "mock: TLS (--tls-cert {}): connect with wss://{listen_addr}/…, and --ca-file with the certificate that signed it (or --insecure)",
            cert.display()
        );
        if let Some(ca) = &args.tls_client_ca {
            eprintln!(
                "mock: mutual TLS (--tls-client-ca {}): a client must show a certificate signed by it (run's --client-cert and --client-key)",
                ca.display()
            );
        }
        if let Some(warning) = crate::tls::server_certificate_warning(cert) {
            eprintln!("{warning}");
        }
    }
    let serving = server::serve(listener, Rc::clone(&shared));
    tokio::pin!(serving);
    let terminated = tokio::select! {
        _ = sigterm.recv() => true,
        _ = sigint.recv() => false,
        () = &mut serving => false,
    };
    // The built-in mock of a conductor that was killed: the kernel sent SIGTERM to it and to
    // the workers at once. Its sessions are left to the workers to end (they abort and close
    // them within 3 s), so that the kill does not read, in the rebuilt run, as a server that
    // closed every session mid-stream. Only a mock told to end with its parent (the built-in
    // one: `PR_SET_PDEATHSIG`) waits: a standalone one whose launcher exited has another parent
    // too. The signal comes as the conductor's threads exit, a moment before the mock is given
    // another parent: a SIGTERM whose sender is still the parent 200 ms later is an ordinary
    // one. Another signal ends the wait.
    if terminated && built_in {
        let since = std::time::Instant::now();
        let mut said = false;
        while shared.open_sessions() > 0 && since.elapsed() < ORPHAN_DRAIN {
            let orphaned = rustix::process::getppid() != parent;
            if !orphaned && since.elapsed() > std::time::Duration::from_millis(200) {
                break;
            }
            if orphaned && !std::mem::replace(&mut said, true) {
                eprintln!(
                    "mock: the conductor is gone; its {} open sessions are left to its workers to end (at most {} s)",
                    shared.open_sessions(),
                    ORPHAN_DRAIN.as_secs()
                );
            }
            tokio::select! {
                () = &mut serving => break,
                _ = sigterm.recv() => break,
                _ = sigint.recv() => break,
                () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
            }
        }
    }
    let _ = stop_tx.send(true);
    let _ = ticker.await;
    if let Some(engine) = &shared.funasr {
        let _ = std::io::stderr().write_all(engine.totals_line().as_bytes());
    }

    let usage = procstat::self_usage(clock::monotonic_s() - started_s);
    Ok(MockStats::build(
        &counters,
        &listen_addr,
        lag.stats(),
        usage,
    ))
}

/// `--stall-at`, `--stall-ms`: a server stall on purpose. The mock runs on one thread, so
/// blocking it stops everything at once — reads, replies, timers of every protocol — as a
/// server whose process froze would (a GC pause, a swapped-out page, a stuck GPU call).
async fn stall_once(stall: crate::options::MockStall, first_session: Rc<tokio::sync::Notify>) {
    first_session.notified().await;
    tokio::time::sleep(std::time::Duration::from_secs_f64(stall.at_s)).await;
    let _ = writeln!(
        std::io::stderr(),
        "mock: stalling for {} ms (--stall-at {} s after the first session)",
        stall.ms,
        stall.at_s
    );
    std::thread::sleep(std::time::Duration::from_millis(u64::from(stall.ms)));
}

/// Binds `host:port`, with a message that says what to do when the port is taken.
async fn bind(host: &str, port: u16) -> Result<TcpListener> {
    let shown = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    TcpListener::bind((host, port)).await.map_err(|err| {
        let hint = match err.kind() {
            std::io::ErrorKind::AddrInUse => "pick another --port or use --port 0",
            std::io::ErrorKind::PermissionDenied => {
                "ports below 1024 need privileges; pick another --port or use --port 0"
            }
            _ => "check --host and --port",
        };
        anyhow::anyhow!("cannot listen on {shown}: {err}; {hint}")
    })
}

/// Prints the one line whoever started the mock waits for.
fn announce(listen_addr: &str) {
    let mut stdout = std::io::stdout().lock();
    // If nobody reads stdout any more, the mock still serves; there is no one to tell.
    let _ = writeln!(stdout, "listening on {listen_addr}");
    let _ = stdout.flush();
}

/// Feeds `texts`, one client text frame each, 10 ms apart, to a session of each mock that
/// parses JSON (the native one as MiniCPM-o, which also takes images; vllm; openai GA and beta),
/// letting each one's clock run between them: the fuzz target `mock_sessions` (tests/fuzz). No
/// client frame may panic a session, since a panic would take every other one down with it.
#[doc(hidden)]
pub fn feed_every_mock(texts: &[&str]) {
    use crate::cli::MockBehaviourArgs;
    let counters = Counters::new();
    let mut out = Vec::new();
    let native = MockBehaviourArgs {
        profile: crate::profile::Profile::Minicpmo,
        ..MockBehaviourArgs::defaults()
    };
    let mut session = session::Session::new(Rc::new(Templates::new(&native)), 1);
    session.created(&mut out);
    for (i, text) in texts.iter().enumerate() {
        if session.on_text(text, i as f64 * 0.01, &counters, &mut out) == session::Step::Close {
            break;
        }
    }
    let defaults = MockBehaviourArgs::defaults();
    let vllm = Rc::new(timed::Behaviour::new(&defaults, Protocol::Vllm));
    let openai = Rc::new(timed::Behaviour::new(&defaults, Protocol::Openai));
    let mut timed: [Box<dyn timed::TimedSession>; 4] = [
        Box::new(vllm::Session::new(vllm, 1)),
        Box::new(openai::Session::new(
            openai.clone(),
            2,
            openai::Hello::default(),
        )),
        Box::new(openai::Session::new(
            openai.clone(),
            3,
            openai::Hello {
                beta: true,
                ..openai::Hello::default()
            },
        )),
        Box::new(openai::Session::new(
            openai,
            4,
            openai::Hello {
                transcription: true,
                ..openai::Hello::default()
            },
        )),
    ];
    for session in &mut timed {
        session.greet(0.0, &mut out);
        for (i, text) in texts.iter().enumerate() {
            let now_s = i as f64 * 0.01;
            // Bounded: a session whose wake time did not move on would be a finding, not a hang.
            for _ in 0..10_000 {
                let Some(at_s) = session.next_wake_s().filter(|&at_s| at_s <= now_s) else {
                    break;
                };
                session.on_timer(at_s, &mut out);
                out.clear();
            }
            if session.on_text(text, now_s, &counters, &mut out) != timed::Flow::Continue {
                break;
            }
            out.clear();
        }
    }
}

#[cfg(test)]
mod fuzz_entry_tests {
    /// The fuzz target's entry runs whole sessions of each mock from their own clients' frames.
    #[test]
    fn every_mock_takes_a_whole_session_and_odd_frames() {
        let audio = "AAAA".repeat(640);
        let frames = [
            r#"{"type":"session.update","event_id":"u","model":"m","session":{"type":"realtime","output_modalities":["audio"]}}"#.to_string(),
            r#"{"type":"sglang.input_image.append","event_id":"i","image":"/9j/4AAQ","sglang":{"t_ms":1.0}}"#.to_string(),
            format!(r#"{{"type":"input_audio_buffer.append","event_id":"a","audio":"{audio}","sglang":{{"seq":0}}}}"#),
            r#"{"type":"input_audio_buffer.commit"}"#.to_string(),
            r#"{"type":"input_audio_buffer.clear","event_id":"c"}"#.to_string(),
            r#"{"type":"sglang.input_image.append","image":"AAAAAAAéAAA","sglang":{"t_ms":1e308}}"#.to_string(),
            "not json".to_string(),
            r#"{"type":"response.create"}"#.to_string(),
            r#"{"type":"sglang.input_audio.end","event_id":"e"}"#.to_string(),
            r#"{"type":"input_audio_buffer.commit","final":true}"#.to_string(),
            r#"{"type":"session.close","event_id":"x"}"#.to_string(),
        ];
        let texts: Vec<&str> = frames.iter().map(String::as_str).collect();
        super::feed_every_mock(&texts);
    }
}
