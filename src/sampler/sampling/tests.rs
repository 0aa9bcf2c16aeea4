//! The sampling core over a fake /proc tree: episodes, their classes, threads that come and
//! go, truncated files and what the sampler cannot see.

use super::*;
use std::path::Path;

/// A fake /proc tree in a temporary folder: the sampler's /proc root is a seam.
struct FakeProc(PathBuf);

impl FakeProc {
    fn new(name: &str) -> FakeProc {
        let root = std::env::temp_dir().join(format!(
            "duplexbench-fakeproc-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        FakeProc(root)
    }

    /// Writes a thread's stat, schedstat and wchan.
    /// `ids` is (pid, tid); `sched_ms` is (time on the CPU, time waiting in the run queue).
    fn thread(&self, ids: (u32, u32), comm: &str, state: char, sched_ms: (u64, u64), wchan: &str) {
        let ((pid, tid), (on_cpu_ms, wait_ms)) = (ids, sched_ms);
        let dir = procfs::task_dir(&self.0, pid, tid);
        std::fs::create_dir_all(&dir).unwrap();
        let mut fields: Vec<String> = (3..=41).map(|_| "0".to_string()).collect();
        fields[0] = state.to_string();
        std::fs::write(
            dir.join("stat"),
            format!("{tid} ({comm}) {}\n", fields.join(" ")),
        )
        .unwrap();
        std::fs::write(
            dir.join("schedstat"),
            format!("{} {} 7\n", on_cpu_ms * 1_000_000, wait_ms * 1_000_000),
        )
        .unwrap();
        std::fs::write(dir.join("wchan"), wchan).unwrap();
    }

    /// The thread exits: like the kernel's, its open files then read as nothing.
    fn remove(&self, pid: u32, tid: u32) {
        let dir = procfs::task_dir(&self.0, pid, tid);
        for name in ["stat", "schedstat", "wchan"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FakeProc {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn core(proc_: &FakeProc) -> SamplerCore {
    let targets = vec![Target {
        role: Role::Worker,
        index: Some(0),
        pid: 100,
    }];
    SamplerCore::new(
        proc_.path().to_path_buf(),
        targets,
        Arc::new(Mutex::new(SamplerLive::default())),
    )
}

#[test]
fn a_loop_thread_in_d_state_becomes_a_disk_wait_stall_with_its_wchan() {
    let fake = FakeProc::new("d-state");
    fake.thread((100, 100), "duplexbench-tui", 'S', (10, 0), "0");
    fake.thread((100, 101), "trace-writer", 'S', (1, 0), "0");
    let mut c = core(&fake);
    c.tick(1.000);
    for i in 1..=8 {
        // Getting into D takes a moment on the CPU: on-CPU time moves from 10 to 11 ms.
        fake.thread(
            (100, 100),
            "duplexbench-tui",
            'D',
            (11, 0),
            "folio_wait_bit_common",
        );
        c.tick(1.0 + 0.005 * f64::from(i));
    }
    fake.thread((100, 100), "duplexbench-tui", 'S', (11, 0), "0");
    c.tick(1.045);
    let live = c.live.clone();
    let report = c.finish();
    assert_eq!(report.episodes.len(), 1, "{:?}", report.episodes);
    let e = &report.episodes[0];
    assert_eq!(
        (e.class, e.tid, e.loop_thread),
        (StallClass::DiskWait, 100, true)
    );
    assert_eq!(e.thread, "duplexbench-tui");
    assert!((e.duration_ms - 40.0).abs() < 1e-6);
    assert_eq!(e.wchan[0].name, "folio_wait_bit_common");
    let live = live.lock().unwrap();
    assert_eq!(live.stalls, 1);
    assert_eq!(live.processes[&100].disk_stalls, 1);
}

#[test]
fn a_stall_that_grows_after_it_was_counted_is_shown_whole_and_kept_as_the_longest() {
    let fake = FakeProc::new("grown");
    fake.thread((100, 100), "duplexbench-tui", 'S', (10, 0), "0");
    let mut c = core(&fake);
    c.tick(1.000);
    // Two pieces of one disk wait, 5 ms apart: the first is counted as a stall when it ends,
    // the second merges into it.
    for (piece, on_cpu) in [(0u32, 11u64), (1, 12)] {
        let from = 1.0 + 0.045 * f64::from(piece);
        for i in 1..=8 {
            fake.thread(
                (100, 100),
                "duplexbench-tui",
                'D',
                (on_cpu, 0),
                "folio_wait_bit_common",
            );
            c.tick(from + 0.005 * f64::from(i));
        }
        fake.thread((100, 100), "duplexbench-tui", 'S', (on_cpu, 0), "0");
        c.tick(from + 0.045);
    }
    let live = c.live.clone();
    let report = c.finish();
    assert_eq!(report.episodes.len(), 1, "{:?}", report.episodes);
    let whole = report.episodes[0].duration_ms;
    assert!(whole > 60.0, "{whole}");
    let live = live.lock().unwrap();
    assert_eq!(live.stalls, 1, "one stall, counted once");
    assert_eq!(live.recent.len(), 1);
    assert_eq!(
        live.recent[0].duration_ms, whole,
        "shown at its whole length"
    );
    assert_eq!(live.longest.as_ref().map(|e| e.duration_ms), Some(whole));
}

#[test]
fn run_queue_wait_growth_is_cpu_starvation() {
    let fake = FakeProc::new("starved");
    fake.thread((100, 100), "duplexbench-tui", 'R', (10, 0), "0");
    let mut c = core(&fake);
    c.tick(2.000);
    for i in 1..=6u64 {
        fake.thread((100, 100), "duplexbench-tui", 'R', (10, 4 * i), "0");
        c.tick(2.0 + 0.005 * i as f64);
    }
    fake.thread((100, 100), "duplexbench-tui", 'S', (11, 24), "0");
    c.tick(2.035);
    let report = c.finish();
    assert_eq!(report.episodes.len(), 1, "{:?}", report.episodes);
    assert_eq!(report.episodes[0].class, StallClass::CpuStarvation);
}

#[test]
fn a_thread_that_disappears_ends_its_episode_and_new_threads_are_found() {
    let fake = FakeProc::new("threads");
    fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
    fake.thread((100, 105), "spinner", 'R', (0, 0), "0");
    let mut c = core(&fake);
    c.tick(3.000);
    for i in 1..=5u64 {
        fake.thread((100, 105), "spinner", 'R', (5 * i, 0), "0");
        c.tick(3.0 + 0.005 * i as f64);
    }
    fake.remove(100, 105);
    c.tick(3.030);
    // A thread that appears later is picked up at the next listing.
    fake.thread((100, 106), "late", 'S', (0, 0), "0");
    for i in 0..RELIST_TICKS {
        c.tick(3.035 + 0.005 * i as f64);
    }
    let report = c.finish();
    assert_eq!(report.threads_seen, 3);
    let spinner: Vec<_> = report.episodes.iter().filter(|e| e.tid == 105).collect();
    assert_eq!(spinner.len(), 1);
    assert_eq!(spinner[0].class, StallClass::Busy);
    assert!(!spinner[0].loop_thread);
}

#[test]
fn truncated_files_are_counted_and_skipped() {
    let fake = FakeProc::new("truncated");
    fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
    let mut c = core(&fake);
    c.tick(4.000);
    let dir = procfs::task_dir(fake.path(), 100, 100);
    std::fs::write(dir.join("stat"), "100 (dup").unwrap();
    std::fs::write(dir.join("schedstat"), "12").unwrap();
    c.tick(4.005);
    fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
    c.tick(4.010);
    let report = c.finish();
    assert_eq!(report.malformed, 1);
    assert!(report.episodes.is_empty());
}

#[test]
fn a_server_that_cannot_be_read_is_said_once_and_the_workers_are_still_sampled_issue_15() {
    let fake = FakeProc::new("server-gone");
    fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
    let targets = vec![
        Target {
            role: Role::Worker,
            index: Some(0),
            pid: 100,
        },
        Target {
            role: Role::Server,
            index: None,
            pid: 4242,
        },
    ];
    let live = Arc::new(Mutex::new(SamplerLive::default()));
    let mut c = SamplerCore::new(fake.path().to_path_buf(), targets, live);
    for i in 0..(2 * RELIST_TICKS) {
        c.tick(6.0 + 0.005 * i as f64);
    }
    let report = c.finish();
    assert_eq!(report.threads_seen, 1);
    assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
    assert!(
        report.notes[0].starts_with("the server (pid 4242) cannot be read under /proc"),
        "{:?}",
        report.notes
    );
}

#[test]
fn hidden_wchan_is_said_once_instead_of_guessed() {
    let fake = FakeProc::new("hidden");
    fake.thread((100, 100), "duplexbench-tui", 'S', (0, 0), "0");
    let mut c = core(&fake);
    c.tick(5.000);
    for i in 1..=4 {
        fake.thread((100, 100), "duplexbench-tui", 'D', (1, 0), "0");
        c.tick(5.0 + 0.005 * f64::from(i));
    }
    let report = c.finish();
    assert_eq!(report.episodes[0].wchan, Vec::new());
    assert_eq!(report.notes.len(), 1);
    assert!(
        report.notes[0].contains("wchan read as 0"),
        "{:?}",
        report.notes
    );
}
