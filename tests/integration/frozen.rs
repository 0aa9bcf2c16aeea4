//! A frozen telemetry consumer cannot stall a worker: the test plays the conductor, starts a
//! worker on a 4 KiB stdout pipe, and stops reading it for 3 s while the sessions stream.

use crate::util::{self, TempDir};
use clap::Parser as _;
use duplexbench_tui::cli::{Cli, Command as CliCommand};
use duplexbench_tui::contract::worker::WorkerConfig;
use duplexbench_tui::contract::worker::WorkerResult;
use duplexbench_tui::paths::RunPaths;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_mock() -> (Killed, String) {
    let mut mock = Killed(
        Command::new(util::bin())
            .args(["mock", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(mock.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    (mock, format!("ws://{addr}/v1/realtime"))
}

#[test]
fn a_worker_keeps_its_pace_while_nobody_reads_its_telemetry() {
    let _serial = util::serial();
    let dir = TempDir::new("frozen");
    let (_mock, url) = start_mock();
    let cli = Cli::try_parse_from([
        "duplexbench-tui",
        "run",
        "-s",
        "8",
        "-d",
        "6s",
        "--trace",
        "meta",
        "--url",
        &url,
    ])
    .unwrap();
    let Some(CliCommand::Run(args)) = cli.command else {
        unreachable!()
    };
    let plan = duplexbench_tui::options::validate(&args, "test".to_string(), false).unwrap();
    let output_dir = dir.join("out");
    std::fs::create_dir_all(output_dir.join("workers")).unwrap();
    let config = WorkerConfig {
        index: 0,
        settings: plan.settings,
        output_dir: output_dir.clone(),
        inject_faults: false,
    };
    let paths = RunPaths::new(&output_dir);
    let config_path = paths.worker_config(0);
    std::fs::write(&config_path, serde_json::to_vec(&config).unwrap()).unwrap();

    let mut worker = Killed(
        Command::new(util::bin())
            .args(["worker", "--config"])
            .arg(&config_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdout = worker.0.stdout.take().unwrap();
    // The smallest pipe the kernel allows, so a few telemetry messages fill it.
    let capacity = rustix::pipe::fcntl_setpipe_size(&stdout, 4096).expect("F_SETPIPE_SZ");
    assert!(capacity >= 4096, "F_SETPIPE_SZ gave {capacity}");
    let mut stdin = worker.0.stdin.take().unwrap();

    // Read until the worker is ready, then open the gate.
    let mut reader = BufReader::new(&mut stdout);
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !line.contains(r#""type":"ready""#) {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "worker ended before ready"
        );
        assert!(Instant::now() < deadline, "no ready within 30 s");
    }
    drop(reader);
    let start_s = duplexbench_tui::clock::monotonic_s() + 0.2;
    stdin
        .write_all(format!("go {start_s:.6}\n").as_bytes())
        .unwrap();

    // Freeze: read nothing for 3 s while the sessions stream.
    std::thread::sleep(Duration::from_secs(3));
    let pending = rustix::io::ioctl_fionread(&stdout).expect("FIONREAD");

    // Thaw: read everything to the end and let the worker finish.
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    // The pipe was full: a line of the size of the longest the worker sent did not fit in
    // what was left (a write of a line up to the pipe's size waits for room for all of it).
    let longest = rest
        .split(|&b| b == b'\n')
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0);
    assert!(
        pending as usize + longest.min(capacity as usize) > capacity as usize,
        "the pipe should be full while nobody reads it: {pending} of {capacity} bytes, lines up to {longest}"
    );
    let status = worker.0.wait().unwrap();
    assert!(status.success(), "worker exited with {status}");
    let result: WorkerResult =
        serde_json::from_slice(&std::fs::read(paths.worker_result(0)).unwrap()).unwrap();
    assert_eq!(result.sessions.len(), 8);
    assert_eq!(result.counts.packets, 8 * 75, "every packet sent");
    // A worker that waited for its telemetry reader would have stood still for the whole 3 s
    // freeze; a busy machine perturbs it by milliseconds, not by seconds.
    assert!(
        result.counts.max_deviation_us < 1_500_000,
        "the worker waited for its telemetry: {:?}",
        result.counts
    );
    assert!(result.loop_lag.max < 1_500.0, "{:?}", result.loop_lag);
    assert!(String::from_utf8_lossy(&rest).contains(r#""type":"done""#));
}
