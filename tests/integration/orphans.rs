//! No orphans: when the conductor dies, even by SIGKILL, its workers and the mock die too.

use crate::util::{self, TempDir};
use std::time::{Duration, Instant};

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Gone, or a zombie waiting for whoever adopted it to reap it.
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// Whether worker `k` of the run in `out` has sent packets: a sample row past the header
/// (written every 100 ms).
fn has_sent(out: &std::path::Path, k: u32) -> bool {
    std::fs::read_to_string(out.join(format!("samples/worker-{k}.csv")))
        .is_ok_and(|csv| csv.lines().count() > 2)
}

#[test]
fn sigkill_of_the_conductor_leaves_no_worker_or_mock_behind() {
    let _serial = util::serial();
    let dir = TempDir::new("orphans");
    let mut conductor = util::spawn_run(&dir.join("out"), &["-p", "2", "-s", "2", "-d", "60s"]);
    let pid = conductor.id();
    // The mock and two workers.
    let deadline = Instant::now() + Duration::from_secs(30);
    let children = loop {
        let children = children_of(pid);
        // With the summary written at the start (the workers are up by then), and packets
        // sent (a sample row past the header, written every 100 ms) for the rebuild below.
        let sampled = has_sent(&dir.join("out"), 0);
        if children.len() == 3 && dir.join("out").join("summary.md").exists() && sampled {
            break children;
        }
        assert!(
            Instant::now() < deadline,
            "children never appeared: {children:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // While it runs, its summary.json given for the folder is refused too: a rebuild of it
    // was written over the run's final summary.
    let summary_file = dir.join("out/summary.json");
    util::assert_refused(
        &util::run(
            &["report", summary_file.to_str().unwrap(), "--rebuild"],
            Duration::from_secs(60),
        ),
        "is still being written by a run",
    );
    conductor.kill().unwrap(); // SIGKILL
    conductor.wait().unwrap();
    // Reported at once, while the workers still end their sessions: it waits for their
    // results (it said they left none, and `--rebuild` wrote that for good).
    let at_once = util::run(
        &["report", dir.join("out").to_str().unwrap(), "--text"],
        Duration::from_secs(60),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !children.iter().all(|&c| is_dead(c)) {
        if Instant::now() > deadline {
            for &c in &children {
                let _ = util::signal(c, rustix::process::Signal::KILL);
            }
            panic!("children outlived the conductor: {children:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // What is left is the summary written at the start (once the workers were up): it does
    // not pass its zeros off as a count of the packets sent.
    let out = dir.join("out");
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        md.contains("| packets | not known: the run did not finish"),
        "{md}"
    );
    let json = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert!(json.contains("the run did not finish"), "{json}");
    assert!(!json.contains("no packet was sent"), "{json}");
    // It blames no worker for the results it never waited for, and is no qualified run.
    assert!(!json.contains("exited without a result"), "{json}");
    assert!(md.contains("PACING-UNQUALIFIED"), "{md}");
    // The workers heard of their conductor's death (SIGTERM) and ended their sessions as on
    // an abort: every receipts file is whole JSON, and each worker wrote its result.
    for entry in std::fs::read_dir(out.join("sessions")).unwrap() {
        let receipts = entry.unwrap().path().join("input-send-receipts.json");
        let text = std::fs::read_to_string(&receipts).unwrap();
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_ok(),
            "{}: {text}",
            receipts.display()
        );
    }
    for k in 0..2 {
        assert!(out.join(format!("workers/worker-{k}.json")).exists());
    }
    // The mock heard it too (SIGTERM) and wrote what it served (sessions may still have been
    // connecting when the conductor died).
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("mock-stats.json")).unwrap())
            .unwrap();
    assert!(stats["sessions_served"].as_u64().unwrap() <= 4, "{stats}");
    the_killed_run_is_rebuilt_from_its_workers_results(&out, &json, &at_once);
}

/// `report` of the folder a killed conductor left renders the summary rebuilt from its
/// workers' results and writes nothing; `report --rebuild` writes it, once.
fn the_killed_run_is_rebuilt_from_its_workers_results(
    out: &std::path::Path,
    provisional: &str,
    at_once: &std::process::Output,
) {
    let folder = out.to_str().unwrap();
    let report = |args: &[&str]| {
        let mut all = vec!["report", folder];
        all.extend(args);
        util::run(&all, Duration::from_secs(60))
    };
    let summary_json = || std::fs::read_to_string(out.join("summary.json")).unwrap();
    let sent: u64 = (0..2)
        .map(|k| {
            let path = out.join(format!("workers/worker-{k}.json"));
            let result: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            // The sessions the abort dropped keep what they recorded: their packets add up to
            // the worker's, and each one that sent knows when (they were empty outcomes, so
            // the rebuilt run had no streaming window and "never opened its gate").
            let sessions = result["sessions"].as_array().unwrap();
            // Aborted by the kill, every one, and stopped early where they stood: none cut
            // by the built-in mock, which the same kill told to end (it waits for the
            // workers to close their sessions).
            for s in sessions {
                assert!(
                    s["error"].as_str().unwrap().starts_with("aborted: ")
                        && s["stopped_early"] == true,
                    "{s}"
                );
            }
            let packets = |s: &serde_json::Value| s["packets"].as_u64().unwrap();
            assert_eq!(
                sessions.iter().map(packets).sum::<u64>(),
                result["packets"].as_u64().unwrap(),
                "{result}"
            );
            assert!(
                sessions
                    .iter()
                    .filter(|s| packets(s) > 0)
                    .all(|s| s["first_send_s"].is_number() && s["last_send_s"].is_number()),
                "{result}"
            );
            result["packets"].as_u64().unwrap()
        })
        .sum();
    assert!(sent > 0, "the workers sent nothing before the kill");

    // With no result to rebuild from, --rebuild refuses and writes nothing.
    std::fs::rename(out.join("workers"), out.join("workers.aside")).unwrap();
    let refused = report(&["--rebuild"]);
    util::assert_refused(&refused, "none of");
    assert_eq!(summary_json(), provisional);
    std::fs::rename(out.join("workers.aside"), out.join("workers")).unwrap();

    // `report` shows the rebuilt figures, says where they come from, and writes nothing;
    // the same at once after the kill.
    let shown = report(&["--text"]);
    assert_eq!(shown.stdout, at_once.stdout, "{}", util::describe(at_once));
    assert_eq!(shown.status.code(), Some(0), "{}", util::describe(&shown));
    let table = String::from_utf8_lossy(&shown.stdout);
    assert!(
        table.contains(&format!("packets            {sent} sent")),
        "{table}"
    );
    assert!(
        String::from_utf8_lossy(&shown.stderr).contains("report --rebuild"),
        "{}",
        util::describe(&shown)
    );
    assert_eq!(summary_json(), provisional);

    // --rebuild writes it over the provisional summary, summary.md too.
    let rebuilt = report(&["--rebuild"]);
    assert_eq!(
        rebuilt.status.code(),
        Some(0),
        "{}",
        util::describe(&rebuilt)
    );
    let summary = util::summary(out);
    assert_eq!(summary["pacing"]["packets"].as_u64(), Some(sent));
    assert_eq!(summary["cancelled"], true);
    assert!(summary["streaming_window"].is_object(), "{summary}");
    let reasons = summary["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("rebuilt by `report --rebuild`"),
        "{reasons}"
    );
    assert!(!reasons.contains("the run did not finish"), "{reasons}");
    let workers = util::workers(&summary);
    assert!(
        workers
            .iter()
            .all(|w| w["cpu_seconds"].as_f64() > Some(0.0)),
        "{workers:?}"
    );
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(!md.contains("not known: the run did not finish"), "{md}");

    // Its traces still end where the kill cut them: conform does not judge them.
    let session = out.join("sessions/w0-s0000");
    for traces in [
        out,
        &out.join("sessions"),
        &session,
        &session.join("trace.jsonl"),
    ] {
        let conform = util::run(
            &["conform", "--trace", traces.to_str().unwrap()],
            Duration::from_secs(60),
        );
        util::assert_refused(&conform, "summary was rebuilt");
    }

    // A trace given by a relative path inside its session's folder too.
    let mut inside = assert_cmd::Command::new(util::bin());
    inside
        .current_dir(&session)
        .args(["conform", "--trace", "trace.jsonl"])
        .timeout(Duration::from_secs(60));
    util::assert_refused(&inside.output().unwrap(), "summary was rebuilt");

    // Once rebuilt, there is nothing left to rebuild.
    util::assert_refused(&report(&["--rebuild"]), "nothing to rebuild");
}

/// A worker killed with its conductor (SIGKILL, both) leaves its sessions' receipts open and no
/// result: the written rebuild gives the receipts their end, as the conductor does for a worker
/// that died while it ran, and says so.
#[test]
fn a_rebuild_mends_the_receipts_of_a_worker_killed_with_its_conductor() {
    let _serial = util::serial();
    let dir = TempDir::new("orphans-worker");
    let out = dir.join("out");
    let mut conductor = util::spawn_run(&out, &["-p", "2", "-s", "1", "-d", "30s"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(has_sent(&out, 0) && has_sent(&out, 1)) {
        assert!(Instant::now() < deadline, "the workers sent nothing");
        std::thread::sleep(Duration::from_millis(50));
    }
    let provisional = util::summary(&out);
    let worker_1 = util::workers(&provisional)[1]["pid"].as_u64().unwrap() as u32;
    util::signal(worker_1, rustix::process::Signal::KILL).unwrap();
    conductor.kill().unwrap();
    conductor.wait().unwrap();
    let receipts = out.join("sessions/w1-s0000/input-send-receipts.json");
    let whole = || {
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&receipts).unwrap())
            .is_ok()
    };
    assert!(!whole(), "worker 1 was killed: its receipts are cut");

    let rebuilt = util::run(
        &["report", out.to_str().unwrap(), "--rebuild"],
        Duration::from_secs(60),
    );
    assert_eq!(
        rebuilt.status.code(),
        Some(0),
        "{}",
        util::describe(&rebuilt)
    );
    assert!(whole(), "{}", receipts.display());
    let reasons = util::summary(&out)["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains(
            "worker 1: the receipts of 1 of its sessions, left open, were given their end"
        ),
        "{reasons}"
    );
    assert!(reasons.contains("worker 1 (pid "), "{reasons}");
}
