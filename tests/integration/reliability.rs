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
    assert!(
        pacing["slow_sends"].as_u64() >= pacing["late_packets"].as_u64(),
        "late packets are slow ones too, sent or not: {pacing}"
    );
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
    // The late packets are those the blocked sends held back (or, on a busy box, some sent
    // late as well): the worst deviation named is that of the packets sent.
    assert!(
        reasons.contains("held them back") || reasons.contains("among those sent"),
        "{reasons}"
    );
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
    duplexbench_tui::sys::signal(child.id(), rustix::process::Signal::INT);
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
    // The sessions were stopped, not failed while streaming: only the packet each blocked
    // send held is unsent, not the 700 the 60 s had left.
    assert_eq!(s["sessions"]["stopped_early"], 2, "{}", s["sessions"]);
    assert_eq!(s["pacing"]["unsent_packets"], 2, "{}", s["pacing"]);
}

#[test]
fn a_worker_killed_by_a_signal_is_named_with_the_signal_issue_13() {
    let _serial = util::serial();
    let dir = TempDir::new("killed-by-signal");
    let out = dir.join("out");
    let mut run = util::spawn_run(&out, &["-s", "2", "-d", "8s", "--trace", "meta"]);
    let worker = first_worker(&run);
    std::thread::sleep(Duration::from_secs(3));
    duplexbench_tui::sys::signal(worker, rustix::process::Signal::KILL);
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
        "its sessions' outcomes are missing"
    );
    // What its telemetry said before it died survives, marked as such.
    assert!(
        reasons.contains("histograms come from its last telemetry"),
        "{reasons}"
    );
    let packets = s["pacing"]["packets"].as_u64().unwrap();
    assert!(packets > 0, "{}", s["pacing"]);
    assert!(s["pacing"]["deviation_ms"]["max"].as_f64().unwrap() > 0.0);
    // The receipts it left open are given their end: JSON again, with what it had sent.
    assert!(
        reasons.contains("the receipts of 2 of its sessions, left open, were given their end"),
        "{reasons}"
    );
    for session in ["w0-s0000", "w0-s0001"] {
        let path = out
            .join("sessions")
            .join(session)
            .join("input-send-receipts.json");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{session}: receipts not JSON: {e}"));
        assert!(!v["appends"].as_array().unwrap().is_empty(), "{v}");
    }
    // Its sessions are accounted for among the sessions' errors, not only counted.
    let errors = &s["sessions"]["errors"];
    assert_eq!(errors[0]["count"], 2, "{errors}");
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!(
                "its worker (pid {worker}) exited without a result"
            ))),
        "{errors}"
    );
}

/// Runs `duplexbench-tui COMMAND ARGS --output <tmpfs>/run` (`run` or `sweep`) on a tmpfs of
/// `size` mounted in a private mount namespace (root only), then copies the output folder out
/// of it; None (and a recorded skip, for `test`) where this machine cannot mount one.
fn on_a_small_tmpfs(
    (test, command): (&str, &str),
    dir: &TempDir,
    size: &str,
    args: &[&str],
) -> Option<(std::process::Output, std::path::PathBuf)> {
    let mount = dir.join("small-disk");
    let copy = dir.join("copied");
    std::fs::create_dir_all(&mount).unwrap();
    let script = r#"mount -t tmpfs -o "size=$1" tmpfs "$2" || exit 97
bin=$3; mnt=$2; copy=$4; command=$5; shift 5
"$bin" "$command" --output "$mnt/run" "$@"; code=$?
cp -r "$mnt/run" "$copy"; exit $code"#;
    let mut cmd = std::process::Command::new("unshare");
    cmd.args([
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
        size,
    ])
    .arg(&mount)
    .arg(util::bin())
    .arg(&copy)
    .arg(command)
    .args(args)
    .stdin(std::process::Stdio::null());
    let out = assert_cmd::Command::from_std(cmd)
        .timeout(Duration::from_secs(90))
        .output();
    let why = match &out {
        Err(err) => format!("unshare cannot run: {err}"),
        Ok(out) if out.status.code() == Some(97) => {
            String::from_utf8_lossy(&out.stderr).trim().to_string()
        }
        Ok(_) => String::new(),
    };
    if !why.is_empty() {
        util::skip(
            test,
            &format!("cannot mount a small tmpfs here (needs root and unshare -m): {why}"),
        );
        return None;
    }
    let out = out.ok()?;
    Some((out, copy))
}

#[test]
fn a_full_disk_is_named_and_the_figures_survive_issue_13() {
    let _serial = util::serial();
    let dir = TempDir::new("full-disk");
    let args = [
        "--no-tui",
        "-s",
        "2",
        "-d",
        "12s",
        "--trace",
        "full",
        "--keep-traces",
    ];
    let test = "a_full_disk_is_named_and_the_figures_survive_issue_13";
    let Some((out, copy)) = on_a_small_tmpfs((test, "run"), &dir, "1m", &args) else {
        return;
    };
    let text = util::describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Named in the verdict, with what was lost and what to do.
    assert!(
        stdout.contains("is full (No space left on device)")
            && stdout.contains("lines of 2 sessions")
            && stdout.contains("free space"),
        "{text}"
    );
    // The figures survive: every packet counted, from the worker's counters.
    let sent: u64 = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("packets")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no packets line: {text}"));
    assert_eq!(sent, 2 * 150, "{text}");
    // The headless progress said so while it happened.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DISK FULL"),
        "{text}"
    );
    // The final summary still reached the disk, in the room the provisional files kept for
    // it: a CI reading summary.json gets the run's figures and the full disk as the first
    // reason, not the provisional "did not finish" (it had been so before the room was kept).
    assert!(
        stdout.contains("(figures: summary.json)") && !stdout.contains("NOT written"),
        "{text}"
    );
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(copy.join("summary.json")).unwrap()).unwrap();
    assert_eq!(on_disk["cancelled"], false, "{on_disk}");
    assert_eq!(on_disk["pacing"]["packets"], 2 * 150, "{on_disk}");
    assert!(
        on_disk["verdict"]["reasons"][0]
            .as_str()
            .is_some_and(|r| r.contains("is full")),
        "{on_disk}"
    );
    let md = std::fs::read_to_string(copy.join("summary.md")).unwrap();
    assert!(
        md.contains("is full") && !md.contains("did not finish"),
        "{md}"
    );
    // No torn or half-written files: JSON on disk parses, no `.partial` is left.
    for entry in std::fs::read_dir(&copy).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        assert!(!name.ends_with(".partial"), "{name} left behind");
        if name.ends_with(".json") {
            let body = std::fs::read_to_string(entry.path()).unwrap();
            serde_json::from_str::<serde_json::Value>(&body)
                .unwrap_or_else(|e| panic!("{name} is torn: {e}"));
        }
    }
    // Nor cut lines in the files the disk filled: a write that failed part way is cut back
    // to its start (the receipts then get their end alone, and stay JSON).
    for session in std::fs::read_dir(copy.join("sessions")).unwrap().flatten() {
        let path = session.path();
        let receipts = std::fs::read_to_string(path.join("input-send-receipts.json")).unwrap();
        if !receipts.is_empty() {
            let v: serde_json::Value = serde_json::from_str(&receipts)
                .unwrap_or_else(|e| panic!("{} receipts torn: {e}", path.display()));
            assert!(v["appends"].is_array(), "{v}");
        }
        let trace = std::fs::read_to_string(path.join("trace.jsonl")).unwrap();
        assert!(
            trace.is_empty() || trace.ends_with('\n'),
            "{}",
            path.display()
        );
        for line in trace.lines() {
            serde_json::from_str::<serde_json::Value>(line)
                .unwrap_or_else(|e| panic!("{}: a cut trace line: {e}", path.display()));
        }
    }
    for samples in std::fs::read_dir(copy.join("samples")).unwrap().flatten() {
        let body = std::fs::read_to_string(samples.path()).unwrap();
        assert!(body.is_empty() || body.ends_with('\n'), "a cut samples row");
        let columns = body.lines().next().map_or(0, |h| h.split(',').count());
        assert!(
            body.lines().all(|l| l.split(',').count() == columns),
            "a samples row of another width"
        );
    }
}

#[test]
fn a_stopped_worker_is_shown_silent_live_not_healthy_issue_13() {
    let _serial = util::serial();
    let dir = TempDir::new("silent");
    let out = dir.join("out");
    let stderr = std::fs::File::create(dir.join("stderr")).unwrap();
    let mut run = std::process::Command::new(util::bin())
        .args([
            "run", "--no-tui", "-s", "2", "-d", "14s", "--trace", "off", "--output",
        ])
        .arg(&out)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let worker = first_worker(&run);
    std::thread::sleep(Duration::from_secs(3));
    // Stopped across at least one headless progress line (every 5 s on a pipe).
    duplexbench_tui::sys::signal(worker, rustix::process::Signal::STOP);
    std::thread::sleep(Duration::from_secs(6));
    duplexbench_tui::sys::signal(worker, rustix::process::Signal::CONT);
    util::wait_with_limit(&mut run, Duration::from_secs(60));
    let text = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert!(text.contains("worker 0 silent"), "{text}");
}

/// The built-in mock killed mid-run: the reason says how it ended, not that a file is missing.
#[test]
fn a_built_in_mock_killed_mid_run_is_named_with_the_signal() {
    let _serial = util::serial();
    let dir = TempDir::new("mock-killed");
    // SIGKILL leaves no statistics; SIGTERM, on which the mock writes them as it ends, hid that
    // it ended early: the sessions it dropped read as a server's failure (QA of 2026-12-07).
    for (signal, said) in [
        (
            rustix::process::Signal::KILL,
            &["the built-in mock was killed by signal 9 (SIGKILL) before the run ended"][..],
        ),
        (
            rustix::process::Signal::TERM,
            &[
                "the built-in mock exited with code 0 before the run ended (see mock.log)",
                "the tool's own server went away",
            ][..],
        ),
    ] {
        let out = dir.join(&format!("out-{signal:?}"));
        let mut run = util::spawn_run(&out, &["-s", "2", "-d", "8s", "--trace", "off"]);
        first_worker(&run);
        let mock = *crate::sampler::children_with(run.id(), "\0mock\0")
            .first()
            .expect("the built-in mock runs beside the worker");
        std::thread::sleep(Duration::from_secs(3));
        duplexbench_tui::sys::signal(mock, signal);
        let code = util::wait_with_limit(&mut run, Duration::from_secs(60));
        assert_eq!(code, Some(1), "a run whose server went away is not clean");
        let reasons = summary(&out)["verdict"]["reasons"].to_string();
        for words in said {
            assert!(reasons.contains(words), "{signal:?}: {reasons}");
        }
        assert!(!reasons.contains("No such file"), "{reasons}");
    }
}

/// The pid of the first worker the conductor `run` starts (waits up to 30 s).
fn first_worker(run: &std::process::Child) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(&w) = crate::sampler::children_with(run.id(), "\0worker\0").first() {
            return w;
        }
        assert!(Instant::now() < deadline, "no worker started");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A sweep whose disk fills: its files stay whole (the last ones written, not cut ones), it
/// stops, and the table on stdout holds every level it ran, with the figures the workers sent
/// over their pipes when the disk refused their result files (not "no session streamed").
#[test]
fn a_sweep_on_a_full_disk_keeps_its_files_whole_and_prints_what_it_measured() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-full-disk");
    let args = [
        "--no-tui",
        "-s",
        "4,8,16,32",
        "-d",
        "4s",
        "--cooldown",
        "1s",
    ];
    let test = "a_sweep_on_a_full_disk_keeps_its_files_whole_and_prints_what_it_measured";
    let Some((out, copy)) = on_a_small_tmpfs((test, "sweep"), &dir, "2m", &args) else {
        return;
    };
    let text = util::describe(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("No space left on device")
            && stderr.contains("the table above is the only whole copy"),
        "{text}"
    );
    // The table of the levels run, each with what its sessions streamed.
    let rows: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("sessions"))
        .skip(1)
        .take_while(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert!(!rows.is_empty(), "no level in the table: {text}");
    assert!(
        !stdout.contains(" streamed)") && !stdout.contains("no session streamed"),
        "{text}"
    );
    // Whatever the disk took is whole: sweep.json parses, no partial file is left.
    for entry in std::fs::read_dir(&copy).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        assert!(!name.ends_with(".partial"), "{name} left behind: {text}");
    }
    if let Ok(json) = std::fs::read_to_string(copy.join("sweep.json")) {
        let v: serde_json::Value =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("sweep.json is cut: {e}"));
        assert!(v["levels"].as_array().is_some_and(|l| !l.is_empty()), "{v}");
    }
}

/// A disk already full when the run starts: a start-up error (exit 2) that names the disk and
/// leaves nothing behind (the lock file it could not write its pid into, and the folders it
/// made for it, stayed).
#[test]
fn a_disk_full_from_the_start_is_a_start_up_error_that_leaves_no_folder() {
    let _serial = util::serial();
    let dir = TempDir::new("full-from-start");
    let mount = dir.join("full-disk");
    std::fs::create_dir_all(&mount).unwrap();
    let script = r#"mount -t tmpfs -o size=64k tmpfs "$1" || exit 97
dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null
"$2" run --no-tui -s 1 -d 1s --output "$1/new/run"; code=$?
if [ -e "$1/new" ]; then echo "LEFT: $(ls -aR "$1/new" | tr '\n' ' ')"; fi
exit $code"#;
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(&mount)
        .arg(util::bin())
        .stdin(std::process::Stdio::null());
    let out = match assert_cmd::Command::from_std(cmd)
        .timeout(Duration::from_secs(60))
        .output()
    {
        Ok(out) if out.status.code() != Some(97) => out,
        other => {
            let why = other.map_or_else(
                |err| err.to_string(),
                |o| String::from_utf8_lossy(&o.stderr).trim().to_string(),
            );
            util::skip(
                "a_disk_full_from_the_start_is_a_start_up_error_that_leaves_no_folder",
                &format!("cannot mount a small tmpfs here (needs root and unshare -m): {why}"),
            );
            return;
        }
    };
    let text = util::describe(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("free space"), "{text}");
    assert!(!text.contains("LEFT:"), "{text}");
}

/// A worker that is stopped (SIGSTOP: a debugger, a frozen cgroup, hung storage) sends
/// nothing: the run is stopped once it has been silent for 10 s, the frozen worker is killed
/// after the abort's grace, and what it measured comes from its last telemetry. Before, the
/// run waited for its deadline (the duration + 2 × --recv-timeout + 30 s) and a Ctrl-C for 30 s
/// more (the QA finding of 2026-12-06).
#[test]
fn a_frozen_worker_stops_the_run_and_is_killed_instead_of_holding_it() {
    let _serial = util::serial();
    let dir = TempDir::new("frozen-worker");
    let out = dir.join("out");
    let mut conductor = util::spawn_run(&out, &["-p", "2", "-s", "2", "-d", "4s"]);
    let worker = |k: u32| -> Option<i32> {
        let config = format!("workers/worker-{k}.config.json");
        std::fs::read_dir("/proc")
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .find(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    String::from_utf8_lossy(&c).contains(&*out.join(&config).to_string_lossy())
                })
            })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        // Streaming has begun once the summary of the start is there and the worker is up.
        if let (Some(pid), true) = (worker(1), out.join("summary.md").exists()) {
            break pid;
        }
        assert!(Instant::now() < deadline, "worker 1 never started");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_secs(2));
    util::signal(pid as u32, rustix::process::Signal::STOP).unwrap();
    // Bounded far above the 4 s run + 10 s of silence + 10 s to the abort + 5 s to the kill,
    // and far below the old deadline's 4 + 60 + 30 + 30 + 5 s.
    let code = util::wait_with_limit(&mut conductor, Duration::from_secs(60));
    assert_eq!(code, Some(1));
    let s = summary(&out);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("worker 1 has sent nothing for")
            && reasons.contains("stopping the run")
            && reasons.contains("were killed"),
        "{reasons}"
    );
    assert!(s["pacing"]["packets"].as_u64().unwrap() > 0, "{s}");
    assert!(
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |stat| stat.contains(") Z")),
        "the frozen worker was left behind"
    );
}
