//! The server as a suspect (issue 15, item 3): a local server is sampled like the workers (the
//! built-in mock, `--server-pid`, or the process found listening on a loopback `--url`), the
//! summary splits the CPU into client / server / other, and a stall of the server while the
//! client is clean is reported as a server stall.

use crate::util::{self, describe, summary, TempDir};
use serde_json::Value;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

fn run_with(extra: &[&str], name: &str) -> (Value, TempDir) {
    let _serial = util::serial();
    run_unlocked(extra, name)
}

/// The run, for a caller that holds the serial lock already.
fn run_unlocked(extra: &[&str], name: &str) -> (Value, TempDir) {
    let dir = TempDir::new(name);
    let out = dir.join("out");
    let mut args = vec!["-p", "1", "-s", "4", "-d", "6s", "--trace", "meta"];
    args.extend_from_slice(extra);
    let output = util::run_to(&out, &args, Duration::from_secs(90));
    util::assert_finished(&output);
    (summary(&out), dir)
}

/// A `mock` process on a free loopback port, killed when dropped.
struct ExternalMock {
    child: std::process::Child,
    url: String,
}

impl ExternalMock {
    fn start() -> ExternalMock {
        let mut child = Command::new(util::bin())
            .args(["mock", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_string();
        ExternalMock {
            child,
            url: format!("ws://{addr}/v1/realtime"),
        }
    }
}

impl Drop for ExternalMock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_mock_stall_is_a_server_stall_and_no_client_class_is_blamed_issue_15() {
    let (s, _dir) = run_with(&["--stall-at", "2s", "--stall-ms", "600"], "server-stall");
    let stalls = s["server_stalls"].as_array().unwrap();
    assert_eq!(stalls.len(), 1, "{}", s["server_stalls"]);
    let st = &stalls[0];
    assert_eq!(st["latency"], "accepted");
    // The mock held its replies for 600 ms: the worst reply waited most of that.
    assert!(st["size_ms"].as_f64().unwrap() >= 300.0, "{st}");
    let (from_s, to_s) = (
        st["start_s"].as_f64().unwrap(),
        st["end_s"].as_f64().unwrap(),
    );
    // No stall of a worker's loop thread that could explain it overlaps it: no client-side
    // class is blamed. (A busy box gives the loop thread short run-queue waits anywhere; one of
    // 20 ms beside a 600 ms server stall explains nothing.)
    let client_stalls: Vec<&Value> = s["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["role"] == "worker" && e["loop_thread"] == true)
        .filter(|e| e["duration_ms"].as_f64().unwrap() >= 150.0)
        .filter(|e| {
            e["start_s"].as_f64().unwrap() <= to_s && e["end_s"].as_f64().unwrap() >= from_s
        })
        .collect();
    assert!(client_stalls.is_empty(), "{client_stalls:?}");
    assert_eq!(s["attribution"]["late_packets"]["send_backpressure"], 0);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(reasons.contains("server stall at"), "{reasons}");
}

#[test]
fn a_clean_run_has_no_server_stall_and_the_mock_in_the_cpu_split_issue_15() {
    let (s, _dir) = run_with(&[], "no-server-stall");
    assert_eq!(
        s["server_stalls"],
        serde_json::json!([]),
        "{}",
        s["verdict"]
    );
    let load = &s["sampler"]["host_load"];
    assert!(load["server_cores_mean"].as_f64().unwrap() > 0.0, "{load}");
    assert!(load["client_cores_mean"].as_f64().unwrap() > 0.0, "{load}");
    assert_eq!(s["sampler"]["server"]["found_by"], "built-in mock");
}

#[test]
fn the_process_listening_on_a_loopback_url_is_found_and_sampled_issue_15() {
    let _serial = util::serial();
    let mock = ExternalMock::start();
    let (s, _dir) = run_unlocked(&["--url", &mock.url], "found-server");
    let server = &s["sampler"]["server"];
    assert_eq!(server["pid"], mock.child.id(), "{server}");
    assert!(
        server["found_by"]
            .as_str()
            .unwrap()
            .starts_with("listening on port "),
        "{server}"
    );
    assert!(
        s["sampler"]["host_load"]["server_cores_mean"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // Its threads are watched like the workers'.
    assert!(s["sampler"]["threads_seen"].as_u64().unwrap() >= 2);
}

#[test]
fn server_pid_names_the_server_and_its_cpu_is_split_out_issue_15() {
    let _serial = util::serial();
    let mock = ExternalMock::start();
    let pid = mock.child.id().to_string();
    let (s, _dir) = run_unlocked(&["--url", &mock.url, "--server-pid", &pid], "server-pid");
    assert_eq!(s["sampler"]["server"]["found_by"], "--server-pid");
    assert_eq!(s["settings"]["server_pid"], mock.child.id());
    assert!(
        s["sampler"]["host_load"]["server_cores_mean"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn a_server_pid_that_does_not_exist_is_a_usage_error_naming_the_flag_issue_15() {
    let dir = TempDir::new("no-such-server");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--url",
            "ws://127.0.0.1:9/v1/realtime",
            "--server-pid",
            "99999999",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--server-pid 99999999: no such process"),
        "{stderr}"
    );
    let output = util::run_to(&out, &["--server-pid", "1"], Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--server-pid 1 needs --url"),
        "{}",
        describe(&output)
    );
}

#[test]
fn a_fun_asr_mock_stall_shows_as_a_long_gap_between_results_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("funasr-stall");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--protocol",
            "funasr",
            "-s",
            "4",
            "--trace",
            "meta",
            "--stall-at",
            "2s",
            // The mock's results come about 1 s apart (the server's 960 ms chunk in 100 ms
            // frames); a gap is a jump past 1.5 × that, which a 2 s stall makes whenever it
            // starts, where a 1 s one only does when it starts late in a gap.
            "--stall-ms",
            "2000",
        ],
        Duration::from_secs(90),
    );
    util::assert_finished(&output);
    let s = summary(&out);
    let stalls = s["server_stalls"].as_array().unwrap();
    assert!(
        stalls
            .iter()
            .any(|st| st["latency"] == "gap between replies"),
        "{}",
        s["server_stalls"]
    );
}
