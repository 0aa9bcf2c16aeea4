//! Nothing hidden, nothing lost (issue 13): a broken server must never give a clean-looking
//! result.

use crate::fake_server::{self, Misbehaviour};
use crate::util::{self, describe, summary, TempDir};
use std::time::{Duration, Instant};

#[test]
fn a_server_that_stops_reading_makes_late_and_unsent_packets_and_an_incomplete_run_issue_13() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::StopsReadingAfterSetup);
    let dir = TempDir::new("stops-reading");
    let out = dir.join("out");
    let started = Instant::now();
    let output = util::run_to(
        &out,
        &[
            "--url",
            &server.url,
            "-s",
            "4",
            "-d",
            "8s",
            "--recv-timeout",
            "2s",
            // The kernel would otherwise queue megabytes before a send blocks.
            "--send-buffer-bytes",
            "16384",
        ],
        Duration::from_secs(120),
    );
    let took = started.elapsed();
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    let pacing = &s["pacing"];
    assert!(
        pacing["late_packets"].as_u64().unwrap() > 0,
        "unsent packets past their due time are late: {pacing}"
    );
    assert!(pacing["unsent_packets"].as_u64().unwrap() > 0, "{pacing}");
    assert_eq!(s["verdict"]["pacing_qualified"], false);
    assert_eq!(s["verdict"]["complete"], false);
    assert_eq!(s["sessions"]["incomplete"], 4);
    let errors = s["sessions"]["errors"].to_string();
    assert!(errors.contains("the server stopped reading"), "{errors}");
    assert_eq!(
        s["sessions"]["errors"].as_array().unwrap().len(),
        1,
        "one kind of failure is one error line: {errors}"
    );
    assert!(
        s["attribution"]["late_packets"]["send_backpressure"]
            .as_u64()
            .unwrap()
            > 0,
        "{}",
        s["attribution"]
    );
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(reasons.contains("never sent"), "{reasons}");
    // Bounded by the send timeout and the stop grace, not by the kernel: far below the
    // 51 s of the report, whatever the machine's load.
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

#[test]
fn ctrl_c_ends_a_run_whose_sends_are_blocked_at_once_issue_13() {
    let _serial = util::serial();
    let server = fake_server::start(Misbehaviour::StopsReadingAfterSetup);
    let dir = TempDir::new("stops-reading-ctrl-c");
    let out = dir.join("out");
    // The send timeout is far away: only the stop can end the blocked sends.
    let mut child = util::spawn_run(
        &out,
        &[
            "--url",
            &server.url,
            "-s",
            "2",
            "-d",
            "60s",
            "--send-timeout",
            "50s",
            "--send-buffer-bytes",
            "16384",
        ],
    );
    std::thread::sleep(Duration::from_secs(4));
    duplexbench_tui::sys::signal(child.id(), libc::SIGINT);
    let stopped = Instant::now();
    let code = util::wait_with_limit(&mut child, Duration::from_secs(40));
    assert_eq!(code, Some(130), "a Ctrl-C'd run exits 130");
    // One Ctrl-C, no abort: the blocked sends themselves give way to the stop.
    assert!(
        stopped.elapsed() < Duration::from_secs(20),
        "took {:?}",
        stopped.elapsed()
    );
    let s = summary(&out);
    assert_eq!(s["cancelled"], true);
    assert!(
        s["pacing"]["late_packets"].as_u64().unwrap() > 0,
        "{}",
        s["pacing"]
    );
}

#[test]
fn a_worker_killed_by_a_signal_is_named_with_the_signal_issue_13() {
    let _serial = util::serial();
    let dir = TempDir::new("killed-by-signal");
    let out = dir.join("out");
    let mut run = util::spawn_run(&out, &["-s", "2", "-d", "8s", "--trace", "off"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let worker = loop {
        if let Some(&w) = crate::sampler::children_with(run.id(), "\0worker\0").first() {
            break w;
        }
        assert!(Instant::now() < deadline, "no worker started");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_secs(3));
    duplexbench_tui::sys::signal(worker, libc::SIGKILL);
    let code = util::wait_with_limit(&mut run, Duration::from_secs(60));
    assert_eq!(code, Some(1), "a run that lost a worker is not clean");
    let s = summary(&out);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains(&format!(
            "worker 0 (pid {worker}) was killed by signal 9 (SIGKILL) before it wrote its result"
        )),
        "{reasons}"
    );
    assert!(reasons.contains("its log is empty"), "{reasons}");
    assert_eq!(
        s["verdict"]["pacing_qualified"], false,
        "its figures are missing"
    );
}
