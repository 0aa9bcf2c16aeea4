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
        // With the summary written at the start (the workers are up by then).
        if children.len() == 3 && dir.join("out").join("summary.md").exists() {
            break children;
        }
        assert!(
            Instant::now() < deadline,
            "children never appeared: {children:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    conductor.kill().unwrap(); // SIGKILL
    conductor.wait().unwrap();
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
}
