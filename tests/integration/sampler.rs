//! The procfs sampler on real processes: each injected fault is found and named in the summary.
//! (Parsing and classification on a fake /proc tree are unit tests in src/sampler.rs.)

use crate::util::{self, describe, summary, TempDir};
use serde_json::Value;
use std::time::Duration;

fn run_with(extra: &[&str], name: &str) -> (Value, TempDir) {
    let _serial = util::serial();
    let dir = TempDir::new(name);
    let out = dir.join("out");
    let mut args = vec!["-p", "2", "-s", "4", "-d", "6s", "--trace", "meta"];
    args.extend_from_slice(extra);
    let output = util::run_to(&out, &args, Duration::from_secs(90));
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        describe(&output)
    );
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
    // The stall shows as one long episode of the loop thread (a crowded machine may split it
    // between the two classes).
    let longest: f64 = ["busy", "cpu_starvation"]
        .iter()
        .flat_map(|class| loop_stalls(&s, class))
        .map(|e| e["duration_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(longest >= 150.0, "{}", s["stalls"]);
    assert!(s["sampler"]["ticks"].as_u64().unwrap() > 500);
}

#[test]
fn an_injected_disk_stall_shows_a_d_episode_with_a_writeback_wchan() {
    let (s, _dir) = run_with(&["--inject-disk-stall-mb", "256"], "disk");
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
        + a["loop_stalls"]["disk_wait"].as_u64().unwrap();
    // Writing the data costs CPU too, so some late packets may fall into `busy`; the D-state
    // part must be there.
    assert!(explained > 0, "{a}");
}

#[test]
fn an_injected_cpu_starvation_is_attributed_cpu_starvation() {
    let (s, _dir) = run_with(&["--inject-cpu-starvation-ms", "300"], "starve");
    let detail = s["injections"][0]["detail"].as_str().unwrap().to_string();
    if !detail.contains("SCHED_FIFO") {
        eprintln!("SKIPPED: no real-time priority here ({detail}); the starvation is not strong enough to assert on");
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
