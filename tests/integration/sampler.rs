//! The procfs sampler on real processes: each injected fault is found and named in the summary.
//! (Parsing and classification on a fake /proc tree are unit tests under src/sampler/.)

use crate::util::{self, summary, TempDir};
use serde_json::Value;
use std::time::Duration;

fn run_with(extra: &[&str], name: &str) -> (Value, TempDir) {
    let _serial = util::serial();
    run_holding_the_lock(extra, name)
}

/// [`run_with`] for a caller that holds the serial lock already.
fn run_holding_the_lock(extra: &[&str], name: &str) -> (Value, TempDir) {
    let dir = TempDir::new(name);
    let out = dir.join("out");
    let mut args = vec!["-p", "2", "-s", "4", "-d", "6s", "--trace", "meta"];
    args.extend_from_slice(extra);
    let output = util::run_to(&out, &args, Duration::from_secs(90));
    util::assert_finished(&output);
    (summary(&out), dir)
}

/// Stalls of worker 0's loop thread of `class`.
fn loop_stalls<'a>(s: &'a Value, class: &str) -> Vec<&'a Value> {
    s["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["index"] == 0 && e["loop_thread"] == true && e["class"] == class)
        .collect()
}

#[test]
fn an_injected_busy_stall_is_attributed_busy() {
    let (s, _dir) = run_with(&["--inject-stall-ms", "300"], "busy");
    let late = s["pacing"]["late_packets"].as_u64().unwrap();
    assert!(late > 0, "a 300 ms stall makes packets late");
    // On a quiet machine the spinning loop thread is on the CPU (busy); on a crowded one it
    // also waits for a CPU, and that share is starvation. Either way the loop thread's own
    // episode explains every late packet: none is unknown or a disk wait.
    let a = &s["attribution"]["late_packets"];
    assert_eq!(
        a["busy"].as_u64().unwrap() + a["cpu_starvation"].as_u64().unwrap(),
        late,
        "{}",
        s["attribution"]
    );
    // The stall shows as episodes of the loop thread covering most of the injection (a crowded
    // machine splits it between busy and starvation pieces).
    let injection = &s["injections"][0];
    let from_s = injection["start_s"].as_f64().unwrap();
    let to_s = from_s + injection["duration_ms"].as_f64().unwrap() / 1000.0;
    let covered_s: f64 = ["busy", "cpu_starvation"]
        .iter()
        .flat_map(|class| loop_stalls(&s, class))
        .map(|e| {
            let (a, b) = (e["start_s"].as_f64().unwrap(), e["end_s"].as_f64().unwrap());
            (b.min(to_s) - a.max(from_s)).max(0.0)
        })
        .sum();
    assert!(
        covered_s >= 0.5 * (to_s - from_s),
        "episodes cover {covered_s:.3} s of the {:.3} s stall: {}",
        to_s - from_s,
        s["stalls"]
    );
    assert!(s["sampler"]["ticks"].as_u64().unwrap() > 500);
}

#[test]
fn an_injected_disk_stall_shows_a_d_episode_with_a_writeback_wchan() {
    let (s, _dir) = run_with(&["--inject-disk-stall-mb", "256"], "disk");
    // The injection is an fsync of 256 MiB just dirtied; a disk (or a host cache) that takes it
    // in a few ms gives no stall to find, which says nothing about the sampler.
    let fsync_ms = s["injections"][0]["duration_ms"].as_f64().unwrap();
    let detail = s["injections"][0]["detail"].as_str().unwrap_or_default();
    if fsync_ms < 60.0 {
        util::skip(
            "an_injected_disk_stall_shows_a_d_episode_with_a_writeback_wchan",
            &format!("the 256 MiB fsync took {fsync_ms:.0} ms ({detail}): no stall to classify"),
        );
        return;
    }
    let disk = loop_stalls(&s, "disk_wait");
    assert!(
        !disk.is_empty(),
        "a D-state stall of the loop thread: {}",
        s["stalls"]
    );
    let wchans: Vec<&str> = disk
        .iter()
        .flat_map(|e| e["wchan"].as_array().unwrap())
        .filter_map(|w| w["name"].as_str())
        .collect();
    let notes = s["sampler"]["notes"].to_string();
    assert!(
        !wchans.is_empty() || notes.contains("wchan"),
        "a wchan, or a note that it is hidden"
    );
    let a = &s["attribution"];
    let explained = a["late_packets"]["disk_wait"].as_u64().unwrap()
        + a["loop_lag_windows"]["disk_wait"].as_u64().unwrap();
    // Writing the data costs CPU too, so some late packets may fall into `busy`, and on a busy
    // box a short D episode may sit inside a longer wait for a CPU; a D episode long enough to
    // be the stall must explain some of it.
    let longest_ms = disk
        .iter()
        .filter_map(|e| e["duration_ms"].as_f64())
        .fold(0.0, f64::max);
    if longest_ms >= 100.0 {
        assert!(explained > 0, "{a}");
    }
}

#[test]
fn an_injected_cpu_starvation_is_attributed_cpu_starvation() {
    let (s, _dir) = run_with(&["--inject-cpu-starvation-ms", "300"], "starve");
    let detail = s["injections"][0]["detail"].as_str().unwrap().to_string();
    if !detail.contains("SCHED_FIFO") {
        crate::util::skip(
            "an_injected_cpu_starvation_is_attributed_cpu_starvation",
            &format!("no real-time priority here ({detail}); the starvation is not strong enough to assert on"),
        );
        return;
    }
    let late = s["pacing"]["late_packets"].as_u64().unwrap();
    assert!(late > 0);
    assert_eq!(
        s["attribution"]["late_packets"]["cpu_starvation"], late,
        "{}",
        s["attribution"]
    );
    assert!(
        !loop_stalls(&s, "cpu_starvation").is_empty(),
        "{}",
        s["stalls"]
    );
}

#[test]
fn a_clean_run_attributes_nothing() {
    let (s, _dir) = run_with(&[], "clean");
    // Nothing was injected, so nothing is attributed to an injection; a busy machine may still
    // make a packet late, and then every late packet is given exactly one cause.
    assert_eq!(s["injections"], serde_json::json!([]));
    let a = &s["attribution"]["late_packets"];
    let attributed: u64 = [
        "disk_wait",
        "cpu_starvation",
        "busy",
        "send_backpressure",
        "unknown",
    ]
    .iter()
    .map(|class| a[class].as_u64().unwrap())
    .sum();
    assert_eq!(
        attributed,
        s["pacing"]["late_packets"].as_u64().unwrap(),
        "{a}"
    );
    assert_eq!(a["send_backpressure"], 0, "the mock reads everything: {a}");
    assert_eq!(s["sampler"]["enabled"], true);
    assert!(
        s["sampler"]["threads_seen"].as_u64().unwrap() >= 3,
        "two workers and the mock"
    );
}

#[test]
fn no_sampler_turns_it_off() {
    let (s, _dir) = run_with(&["--no-sampler"], "no-sampler");
    assert_eq!(s["sampler"]["enabled"], false);
    assert_eq!(s["stalls"], serde_json::json!([]));
}

/// The children of `pid` whose command line holds `word`.
pub fn children_with(pid: u32, word: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            ppid == Some(pid) && String::from_utf8_lossy(&cmdline).contains(word)
        })
        .collect()
}

#[test]
fn a_worker_stopped_for_500ms_gives_a_stopped_episode_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("sigstop");
    let out = dir.join("out");
    let mut run = util::spawn_run(&out, &["-s", "4", "-d", "8s", "--trace", "off"]);
    // Wait for the worker to stream, then stop it for half a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let worker = loop {
        if let Some(&w) = children_with(run.id(), "worker").first() {
            break w;
        }
        assert!(std::time::Instant::now() < deadline, "no worker started");
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_secs(4));
    duplexbench_tui::sys::signal(worker, rustix::process::Signal::STOP);
    std::thread::sleep(Duration::from_millis(500));
    duplexbench_tui::sys::signal(worker, rustix::process::Signal::CONT);
    let code = util::wait_with_limit(&mut run, Duration::from_secs(60));
    assert!(matches!(code, Some(0 | 1)), "exit {code:?}");
    let s = summary(&out);
    let stopped = loop_stalls(&s, "stopped");
    assert!(
        stopped
            .iter()
            .any(|e| e["duration_ms"].as_f64().unwrap() >= 300.0),
        "{}",
        s["stalls"]
    );
    let late = s["pacing"]["late_packets"].as_u64().unwrap();
    assert!(late > 0, "half a second stopped makes packets late");
    assert!(
        s["attribution"]["late_packets"]["stopped"]
            .as_u64()
            .unwrap()
            > 0,
        "{}",
        s["attribution"]
    );
}

#[test]
fn a_cpu_hog_beside_the_run_is_reported_as_foreign_load_issue_15() {
    // The lock first: the busy loop is bounded (20 s), and started before a wait for the lock
    // behind other tests it could end before the run began (a run with no foreign load).
    let _serial = util::serial();
    // A bounded busy loop in this test process, which is not part of the run.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinning = stop.clone();
    let hog = std::thread::spawn(move || {
        let until = std::time::Instant::now() + Duration::from_secs(20);
        let mut x = 0u64;
        while !spinning.load(std::sync::atomic::Ordering::Relaxed)
            && std::time::Instant::now() < until
        {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    });
    let (s, _dir) = run_holding_the_lock(&[], "foreign");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    hog.join().unwrap();
    let load = &s["sampler"]["host_load"];
    assert!(
        load["seconds_over_threshold"].as_u64().unwrap() >= 2,
        "{load}"
    );
    assert!(load["foreign_cores_max"].as_f64().unwrap() > 0.5, "{load}");
    let reasons = s["verdict"]["reasons"].to_string();
    // On a VM whose host took CPU at the time, the reason names the steal time apart.
    let stolen = load["steal_cores_max"].as_f64().unwrap() >= 0.05;
    assert!(
        if stolen {
            reasons.contains("load that was not the run's went over 0.5 cores")
                && reasons.contains("steal time")
        } else {
            reasons.contains("other processes used")
        },
        "{reasons}"
    );
}

#[test]
fn the_hand_parsers_of_proc_agree_with_the_procfs_crate_on_real_files_issue_9() {
    use duplexbench_tui::sampler::procfs::{parse_schedstat, parse_stat};
    use procfs_core::FromRead as _;
    // Every thread of this test process, as the sampler reads a worker's.
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let dir = entry.path();
        let (Ok(stat), Ok(schedstat)) = (
            std::fs::read_to_string(dir.join("stat")),
            std::fs::read_to_string(dir.join("schedstat")),
        ) else {
            continue; // the thread ended meanwhile
        };
        let ours = parse_stat(&stat).unwrap();
        let theirs = procfs_core::process::Stat::from_read(stat.as_bytes()).unwrap();
        assert_eq!(ours.comm, theirs.comm);
        assert_eq!(ours.state, theirs.state);
        assert_eq!((ours.utime, ours.stime), (theirs.utime, theirs.stime));
        assert_eq!(ours.processor, theirs.processor.map(|p| p as u32));
        let ours = parse_schedstat(&schedstat).unwrap();
        let theirs = procfs_core::process::Schedstat::from_read(schedstat.as_bytes()).unwrap();
        assert_eq!(
            (ours.on_cpu_ns, ours.wait_ns, ours.timeslices),
            (theirs.sum_exec_runtime, theirs.run_delay, theirs.pcount)
        );
    }
}
