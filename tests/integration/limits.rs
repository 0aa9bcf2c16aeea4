//! Limits a run is checked against before it starts (issue 13, items 5 and 11): the open-file
//! limit, a late threshold longer than the run, and one style for the errors that refuse it.

use crate::util::{self, describe, summary, TempDir};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `run --no-tui --output OUT ARGS…` under `ulimit -n LIMIT` (soft and hard), with a time limit.
fn run_under_ulimit(limit: u32, out: &Path, args: &[&str]) -> Output {
    let mut cmd = assert_cmd::Command::new("sh");
    cmd.arg("-c")
        .arg(format!(r#"ulimit -n {limit} && exec "$0" "$@""#))
        .arg(util::bin())
        .args(["run", "--no-tui", "--output"])
        .arg(out)
        .args(args)
        .timeout(Duration::from_secs(60))
        .write_stdin("");
    cmd.output().unwrap()
}

/// A file-size limit (`ulimit -f`, 1024-byte blocks) reached by the traces: the workers lived
/// (SIGXFSZ killed them, leaving a trace cut mid-line and 448 of 600 packets sent: the QA pass
/// of 2026-12-07), every packet was sent, the traces end in whole lines, and the summary says
/// which lines were lost and names the limit.
#[test]
fn a_file_size_limit_loses_trace_lines_as_a_full_disk_and_kills_nothing() {
    let _serial = util::serial();
    let dir = TempDir::new("fsize");
    let out = dir.join("run");
    let mut cmd = assert_cmd::Command::new("sh");
    cmd.arg("-c")
        .arg(r#"ulimit -f 200 && exec "$0" "$@""#)
        .arg(util::bin())
        .args(["run", "--no-tui", "--output"])
        .arg(&out)
        .args(["-p", "2", "-s", "2", "-d", "6s", "--no-sampler"])
        .timeout(Duration::from_secs(60))
        .write_stdin("");
    let ran = cmd.output().unwrap();
    assert_eq!(ran.status.code(), Some(1), "{}", describe(&ran));
    let s = summary(&out);
    assert_eq!(s["pacing"]["packets"], 4 * 75, "{}", describe(&ran));
    assert_eq!(s["files_lost"]["disk_full"], true, "{s}");
    assert!(s["files_lost"]["trace_lines"].as_u64().unwrap() > 0);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(reasons.contains("ulimit -f"), "{reasons}");
    assert!(!reasons.contains("signal"), "{reasons}");
    for entry in std::fs::read_dir(out.join("sessions")).unwrap() {
        let trace = std::fs::read_to_string(entry.unwrap().path().join("trace.jsonl")).unwrap();
        assert!(trace.ends_with('\n'), "a trace cut mid-line");
        let last = trace.lines().last().unwrap();
        serde_json::from_str::<serde_json::Value>(last).unwrap();
    }
}

/// The number in "`ulimit -n N`" of a message.
fn ulimit_named(message: &str) -> Option<u64> {
    let rest = &message[message.find("`ulimit -n ")? + "`ulimit -n ".len()..];
    rest.split('`').next()?.parse().ok()
}

/// A start-up error is one line `Error: …` (as src/app.rs prints it), never `error: …`.
fn assert_one_error_line(out: &Output) {
    let err = stderr(out);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("Error: ")).collect();
    assert_eq!(
        errors.len(),
        1,
        "one `Error:` line expected: {}",
        describe(out)
    );
    assert!(
        !err.lines()
            .any(|l| l.to_lowercase().starts_with("error:") && !l.starts_with("Error: ")),
        "an error in another style: {}",
        describe(out)
    );
}

#[test]
fn too_few_file_descriptors_refuse_the_run_with_the_ulimit_to_use_issue_13() {
    let dir = TempDir::new("ulimit-low");
    let out_dir = dir.join("out");
    let out = run_under_ulimit(64, &out_dir, &["-p", "2", "-s", "64", "-d", "2s"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = stderr(&out);
    let needed = ulimit_named(&err).unwrap_or_else(|| panic!("no `ulimit -n N`: {err}"));
    // 64 sessions of a worker hold a socket, a receipts file and a trace file each.
    assert!(
        needed >= 3 * 64,
        "{needed} is too few for 64 traced sessions: {err}"
    );
    assert!(
        err.contains(&format!("needs up to {needed} open files")),
        "{err}"
    );
    assert!(err.contains("the limit here is 64"), "{err}");
    assert_one_error_line(&out);
    // Refused before anything started: no folder, no summary.
    assert!(
        !out_dir.exists(),
        "a refused run left {}",
        out_dir.display()
    );
}

#[test]
fn a_layout_that_fits_under_a_low_limit_still_runs_issue_13() {
    let _serial = util::serial();
    let dir = TempDir::new("ulimit-fits");
    let out_dir = dir.join("out");
    let out = run_under_ulimit(128, &out_dir, &["-p", "1", "-s", "4", "-d", "1s"]);
    // Not asserted 0: a busy machine may make the run late. Only that it was not refused and
    // that no session ran out of descriptors.
    assert_ne!(out.status.code(), Some(2), "{}", describe(&out));
    let s = summary(&out_dir);
    let errors = serde_json::to_string(&s["sessions"]["errors"]).unwrap();
    assert!(!errors.contains("Too many open files"), "{errors}");
}

#[test]
fn a_late_threshold_longer_than_the_run_is_refused_with_the_reason_issue_13() {
    let dir = TempDir::new("late-threshold");
    let out_dir = dir.join("out");
    let out = util::run_to(
        &out_dir,
        &["-d", "2s", "--late-threshold-ms", "4294967295"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("--late-threshold-ms 4294967295"), "{err}");
    assert!(
        err.contains("longer than each session's audio (2s)"),
        "{err}"
    );
    assert!(err.contains("no packet could ever be late"), "{err}");
    assert!(err.contains("give at most 2000 ms"), "{err}");
    assert_one_error_line(&out);
    assert!(
        !out_dir.exists(),
        "a refused run left {}",
        out_dir.display()
    );
}

#[test]
fn start_up_errors_all_read_error_colon_once_issue_13() {
    let unreachable = util::unreachable_url();
    let dir = TempDir::new("error-style");
    let out_dir = dir.join("out");
    let out_dir = out_dir.to_str().unwrap();
    for args in [
        &["-d", "10ms"][..],
        &["--url", "http://127.0.0.1:9/"][..],
        &["--url", &unreachable, "-d", "1s"][..],
        &["-d", "1s", "--late-threshold-ms", "5000"][..],
        &["-d", "1s", "--send-timeout", "0s"][..],
    ] {
        let mut all = vec!["run", "--no-tui", "--output", out_dir];
        all.extend_from_slice(args);
        let out = util::run(&all, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        assert_one_error_line(&out);
    }
    // clap's own usage errors keep clap's `error:`: that style is clap's, not ours.
    let out = util::run(&["run", "--no-such-flag"], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).starts_with("error: "), "{}", describe(&out));
}
