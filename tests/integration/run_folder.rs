//! The output folder belongs to one run (issue #13): a second run into a folder a run is
//! writing to is refused naming that run's pid, a finished run's folder is reused only with
//! `--force`, which clears that run's files first, and a start-up error leaves no empty folder.

use crate::util::{self, describe, summary, TempDir};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A run in the background, killed however the test ends.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a long run into `out` and waits until its lock file holds its pid.
fn start_holding(out: &Path) -> Background {
    let child = Background(util::spawn_run(out, &["-s", "2", "-d", "30s"]));
    let pid = child.0.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(out.join(".lock")).map_or(true, |text| text.trim() != pid) {
        assert!(
            Instant::now() < deadline,
            "the first run wrote no lock file with its pid within 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn second_run_into_the_same_output_is_refused_naming_the_first_runs_pid_issue_13() {
    let _serial = util::serial();
    let dir = TempDir::new("locked");
    let out = dir.join("out");
    let mut first = start_holding(&out);
    let pid = first.0.id();

    for force in [false, true] {
        let mut args = vec!["-s", "2", "-d", "1s"];
        if force {
            args.push("--force");
        }
        let second = util::run_to(&out, &args, LIMIT);
        assert_eq!(second.status.code(), Some(2), "{}", describe(&second));
        let err = stderr(&second);
        assert!(
            err.contains(&format!("another run (pid {pid}) is writing to")),
            "the message names the other run (--force {force}): {err}"
        );
        assert!(err.contains("--output"), "and says what to do: {err}");
    }
    assert!(
        first.0.try_wait().unwrap().is_none(),
        "the refused runs did not disturb the first one"
    );
    // Stopped as Ctrl-C stops it, so that its workers are gone before the folder is removed
    // (killed with SIGKILL, a worker still wrote session files after it: every `cargo test`
    // left the folder behind in /tmp).
    let _ = util::signal(pid, rustix::process::Signal::INT);
    let _ = util::wait_with_limit(&mut first.0, LIMIT);
}

#[test]
fn a_run_killed_with_sigkill_does_not_block_the_next_run_issue_13() {
    let _serial = util::serial();
    let dir = TempDir::new("killed");
    let out = dir.join("out");
    let mut first = start_holding(&out);
    first.0.kill().unwrap(); // SIGKILL: no cleanup runs, the kernel drops the lock.
    first.0.wait().unwrap();

    let next = util::run_to(&out, &["-s", "2", "-d", "1s", "--force"], LIMIT);
    let err = stderr(&next);
    assert!(!err.contains("another run"), "{}", describe(&next));
    assert_ne!(next.status.code(), Some(2), "{}", describe(&next));
    let s = summary(&out);
    assert_eq!(s["cancelled"], false, "the next run finished");
    assert_eq!(s["sessions"]["configured"], 2);
}

#[test]
fn reusing_a_finished_run_folder_is_refused_offering_force_and_leaves_its_summary_untouched_issue_13(
) {
    let _serial = util::serial();
    let dir = TempDir::new("reuse");
    let out = dir.join("out");
    let first = util::run_to(&out, &["-s", "2", "-d", "1s"], LIMIT);
    assert!(out.join("summary.json").exists(), "{}", describe(&first));
    let before = std::fs::read(out.join("summary.json")).unwrap();

    let second = util::run_to(&out, &["-s", "1", "-d", "1s"], LIMIT);
    assert_eq!(second.status.code(), Some(2), "{}", describe(&second));
    let err = stderr(&second);
    assert!(
        err.contains("already holds the files of a run") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(out.join("summary.json")).unwrap(),
        before,
        "a refused run changes nothing"
    );
}

#[test]
fn force_clears_the_old_run_so_the_new_summary_describes_only_the_new_run_issue_13() {
    let _serial = util::serial();
    let dir = TempDir::new("force");
    let out = dir.join("out");
    let first = util::run_to(&out, &["-p", "2", "-s", "2", "-d", "1s"], LIMIT);
    assert!(
        out.join("workers/worker-1.json").exists(),
        "{}",
        describe(&first)
    );
    std::fs::write(out.join("notes.txt"), "mine").unwrap();

    let second = util::run_to(&out, &["-p", "1", "-s", "1", "-d", "1s", "--force"], LIMIT);
    assert_ne!(second.status.code(), Some(2), "{}", describe(&second));
    assert!(stderr(&second).contains("--force: deleted the files of the previous run"));
    let s = summary(&out);
    assert_eq!(s["layout"]["processes"], 1);
    assert_eq!(s["sessions"]["configured"], 1);
    assert_eq!(util::workers(&s).len(), 1);
    for gone in [
        "workers/worker-1.json",
        "workers/worker-1.config.json",
        "workers/worker-1.log",
        "samples/worker-1.csv",
        "sessions/w0-s0001",
        "sessions/w1-s0000",
    ] {
        assert!(!out.join(gone).exists(), "{gone} of the old run is left");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine",
        "a file no run writes is kept"
    );
}

#[test]
fn an_unreachable_url_leaves_no_output_folder_behind_issue_13() {
    let dir = TempDir::new("no-folder");
    let url = util::unreachable_url();
    let args = |out: &Path| {
        vec![
            "run".to_string(),
            "--no-tui".to_string(),
            "--url".to_string(),
            url.clone(),
            "-s".to_string(),
            "1".to_string(),
            "-d".to_string(),
            "1s".to_string(),
            "--output".to_string(),
            out.to_str().unwrap().to_string(),
        ]
    };
    let run = |out: &Path| {
        let args = args(out);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        util::run(&args, LIMIT)
    };

    // A new folder (and its new parent) is removed again.
    let out = dir.join("new").join("out");
    let failed = run(&out);
    assert_eq!(failed.status.code(), Some(2), "{}", describe(&failed));
    assert!(stderr(&failed).contains("cannot reach the server"));
    assert!(!dir.join("new").exists(), "an empty folder was left behind");

    // A folder that existed keeps what it held, and nothing else.
    let out = dir.join("mine");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let failed = run(&out);
    assert_eq!(failed.status.code(), Some(2), "{}", describe(&failed));
    assert!(stderr(&failed).contains("cannot reach the server"));
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["notes.txt"]);
}

#[test]
fn two_runs_without_output_started_together_each_get_a_folder_of_their_own() {
    let _serial = util::serial();
    let dir = TempDir::new("default-folders");
    let cwd = dir.join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    // Started in the same second, both want runs/<that second>.
    let start = || {
        util::spawn_in(
            &cwd,
            &["run", "--no-tui", "-s", "1", "-d", "1s", "--no-sampler"],
        )
    };
    let runs = [start(), start()].map(|child| child.wait_with_output().unwrap());
    for output in &runs {
        util::assert_finished(output);
    }
    let folders = util::entry_names(&cwd.join("runs"));
    assert_eq!(folders.len(), 2, "{folders:?}");
    for folder in &folders {
        assert!(
            cwd.join("runs").join(folder).join("summary.json").is_file(),
            "{folder}"
        );
    }
    if folders[0].len() == 15 && folders[1] == format!("{}-2", folders[0]) {
        // The same second: the second run numbered its folder.
    } else {
        assert!(
            folders.iter().all(|f| f.len() == 15),
            "two seconds, two plain stamps: {folders:?}"
        );
    }
}

/// `--output` naming a file, or a sweep's folder, is refused at start-up (exit 2) and left as
/// it was: a run written into a sweep's folder hid behind the sweep (the QA pass of
/// 2026-12-06), and a file gave "File exists".
#[test]
fn an_output_that_is_a_file_or_a_sweeps_folder_is_refused() {
    let dir = TempDir::new("output-kinds");
    let file = dir.join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let sweep = dir.join("a-sweep");
    std::fs::create_dir_all(&sweep).unwrap();
    std::fs::write(sweep.join("sweep.json"), "{}").unwrap();
    for (out, expect) in [
        (&file, "is a file, not a folder"),
        (&sweep, "holds a sweep (sweep.json)"),
    ] {
        let output = util::run_to(out, &["-s", "1", "-d", "1s"], Duration::from_secs(30));
        assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.contains(expect), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    assert_eq!(util::entry_names(&sweep), ["sweep.json"]);
}
