//! Shared helpers of the integration tests: the binary, temporary folders, bounded runs.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_duplexbench-tui")
}

/// Runs that stream packets take this lock, so two of them never compete for the 2 cores of a
/// CI machine and perturb each other's pacing.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A folder under the system temp dir, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "duplexbench-test-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the binary with `args` and a time limit; never waits for input. Its temporary folders
/// (`conform --url` keeps the run of a server that is not conformant in one, by design) go
/// under Cargo's scratch folder for the tests, not the system's.
pub fn run(args: &[&str], limit: Duration) -> Output {
    let mut cmd = assert_cmd::Command::new(bin());
    cmd.args(args)
        .env("TMPDIR", env!("CARGO_TARGET_TMPDIR"))
        .timeout(limit)
        .write_stdin("");
    cmd.output().unwrap()
}

/// `summary.json` of an output folder.
pub fn summary(output: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(output.join("summary.json"))
        .unwrap_or_else(|e| panic!("no summary.json in {}: {e}", output.display()));
    serde_json::from_str(&text).unwrap()
}

/// Stdout and stderr, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A run that finished as a run can on a shared machine: exit 0, or 1 when the busy box made a
/// packet late; never an error exit or a signal.
pub fn assert_finished(output: &Output) {
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        describe(output)
    );
}

/// A refusal: exit 2, and stderr says `words`.
pub fn assert_refused(output: &Output, words: &str) {
    assert_eq!(output.status.code(), Some(2), "{}", describe(output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(words),
        "{}",
        describe(output)
    );
}

/// The worker entries of `processes`.
pub fn workers(summary: &serde_json::Value) -> Vec<serde_json::Value> {
    summary["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "worker")
        .cloned()
        .collect()
}

/// `run --no-tui --output OUT ARGS…` with a time limit.
pub fn run_to(out: &Path, args: &[&str], limit: Duration) -> Output {
    let out = out.to_str().unwrap();
    let mut all = vec!["run", "--no-tui", "--output", out];
    all.extend_from_slice(args);
    run(&all, limit)
}

/// The same, in the background, for tests that signal or kill the conductor.
pub fn spawn_run(out: &Path, args: &[&str]) -> std::process::Child {
    spawn_quiet(&["run", "--no-tui"], out, args)
}

/// `duplexbench-tui COMMAND… --output OUT ARGS…` in the background, its output discarded.
pub fn spawn_quiet(command: &[&str], out: &Path, args: &[&str]) -> std::process::Child {
    spawn_to(command, out, args, std::process::Stdio::null())
}

/// The same with its stderr piped, for tests that read what it says (or close the pipe).
pub fn spawn_with_stderr(command: &[&str], out: &Path, args: &[&str]) -> std::process::Child {
    spawn_to(command, out, args, std::process::Stdio::piped())
}

fn spawn_to(
    command: &[&str],
    out: &Path,
    args: &[&str],
    stderr: std::process::Stdio,
) -> std::process::Child {
    std::process::Command::new(bin())
        .args(command)
        .arg("--output")
        .arg(out)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Waits for `child` at most `limit` and returns its exit code; kills it and fails after that.
/// Starts the binary with `args` in the folder `cwd` (where its default `runs/` goes), with
/// its output piped.
pub fn spawn_in(cwd: &Path, args: &[&str]) -> std::process::Child {
    std::process::Command::new(bin())
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The names of the entries of `dir`, sorted.
pub fn entry_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn wait_with_limit(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Says that a test did not run its assertions and why, on stderr and in
/// `target/tmp/skipped-tests.txt`, which `.ci/run` prints at its end: a skip is never silent.
pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests.txt");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = std::io::Write::write_all(&mut file, format!("{test}: {why}\n").as_bytes());
    }
}

/// A scripted WebSocket server of a test on 127.0.0.1: its own thread and runtime, each
/// connection `listener` accepts handed to `session`. It stops when dropped, and never outlives
/// 5 minutes even if a test forgets it.
pub struct LoopbackServer {
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LoopbackServer {
    /// Serves on `listener` (bound to 127.0.0.1, non-blocking).
    pub fn serve<S, F>(listener: std::net::TcpListener, session: S) -> LoopbackServer
    where
        S: Fn(tokio::net::TcpStream) -> F + Send + 'static,
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let serve = async {
                    loop {
                        if let Ok((stream, _)) = listener.accept().await {
                            tokio::spawn(session(stream));
                        }
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = stop_rx => {}
                    _ = tokio::time::sleep(Duration::from_secs(300)) => {}
                }
            });
        });
        LoopbackServer {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Serves on a new listener on 127.0.0.1.
    pub fn start<S, F>(session: S) -> LoopbackServer
    where
        S: Fn(tokio::net::TcpStream) -> F + Send + 'static,
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        LoopbackServer::serve(listener, session)
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A mono or multi-channel PCM16 WAV of `ms` of a quiet saw tooth at `rate`.
pub fn write_wav(path: &Path, rate: u32, channels: u16, ms: u32) {
    let spec = hound::WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    let samples = u64::from(rate) * u64::from(ms) / 1000 * u64::from(channels);
    for i in 0..samples {
        w.write_sample((i % 200) as i16 * 10).unwrap();
    }
    w.finalize().unwrap();
}

/// A mono PCM16 WAV at `rate` of utterances: for each `(speech_ms, pause_ms)`, that much of a
/// loud saw tooth (speech to an energy VAD), then that much silence.
pub fn write_utterances_wav(path: &Path, rate: u32, utterances: &[(u32, u32)]) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    for &(speech_ms, pause_ms) in utterances {
        for i in 0..u64::from(rate) * u64::from(speech_ms) / 1000 {
            w.write_sample((i % 200) as i16 * 10).unwrap();
        }
        for _ in 0..u64::from(rate) * u64::from(pause_ms) / 1000 {
            w.write_sample(0i16).unwrap();
        }
    }
    w.finalize().unwrap();
}

/// A scripted WebSocket client of the tests, every await bounded by [`STEP`].
pub mod ws {
    use futures_util::{SinkExt as _, StreamExt as _};
    use std::time::Duration;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    use tokio_tungstenite::tungstenite::handshake::client::Response;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

    /// Bound on every await: the mocks answer in milliseconds.
    pub const STEP: Duration = Duration::from_secs(5);

    pub type Client = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

    /// A WebSocket to `url` whose handshake carries `headers`, with the server's answer to it.
    pub async fn connect(url: &str, headers: &[(&'static str, &str)]) -> (Client, Response) {
        let mut request = url.into_client_request().unwrap();
        for (name, value) in headers {
            request.headers_mut().insert(*name, value.parse().unwrap());
        }
        tokio::time::timeout(STEP, tokio_tungstenite::connect_async(request))
            .await
            .expect("the handshake in time")
            .expect("the handshake accepted")
    }

    pub async fn send(ws: &mut Client, message: Message) {
        tokio::time::timeout(STEP, ws.send(message))
            .await
            .expect("sent in time")
            .expect("the send succeeds");
    }

    /// Sends one text event.
    pub async fn send_json(ws: &mut Client, event: serde_json::Value) {
        send(ws, Message::Text(event.to_string().into())).await;
    }

    /// The next frame, which must be text holding JSON.
    pub async fn next_json(ws: &mut Client) -> serde_json::Value {
        let message = tokio::time::timeout(STEP, ws.next())
            .await
            .expect("an event in time")
            .expect("the connection is open")
            .expect("the read succeeds");
        match message {
            Message::Text(text) => serde_json::from_str(text.as_str()).expect("events are JSON"),
            other => panic!("expected a text frame, got {other:?}"),
        }
    }
}

/// A WebSocket URL nothing listens on: a loopback port that was free a moment ago.
pub fn unreachable_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("ws://127.0.0.1:{port}/v1/realtime")
}

/// Sends `signal` to process `pid` (a child of the test), through rustix's safe wrapper.
pub fn signal(pid: u32, signal: rustix::process::Signal) -> rustix::io::Result<()> {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a child's pid is positive");
    rustix::process::kill_process(pid, signal)
}

/// summary.md's client CPU per session-second while streaming ("…, 0.000714 CPU-s per
/// session-second.").
pub fn cpu_per_session_second(md: &str) -> f64 {
    md.split(" CPU-s per session-second")
        .next()
        .and_then(|before| before.rsplit(", ").next())
        .and_then(|n| n.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no streaming CPU line: {md}"))
}
