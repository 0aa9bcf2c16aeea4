//! A run over several hosts, played on this one (issue 16): three conductors as three shards
//! of one run against one external mock, held at one `--start-at`, then `merge`d; a merge
//! with a shard missing, and shards that are not of one run.

use crate::mock_protocol::Mock;
use crate::util::{self, describe, TempDir};
use duplexbench_tui::stats::DurationHistogram;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Three shards of 1 × 4 sessions, 2 s each.
const SHARDS: u32 = 3;
const SESSIONS: u64 = 4;

/// One run over `count` shards against a mock at `url`, held to `start_at`; 1 process of
/// `load` (`-s N -d D`) a shard.
struct Shards {
    url: String,
    count: u32,
    run_id: &'static str,
    start_at: String,
    load: [&'static str; 4],
}

impl Shards {
    /// Starts shard `index` with its output in `dir`, its stderr to `stderr`.
    fn spawn(&self, index: usize, dir: &Path, stderr: Stdio) -> std::process::Child {
        Command::new(util::bin())
            .args(["run", "--no-tui", "--trace", "off", "--no-sampler"])
            .args(["--url", &self.url, "-p", "1"])
            .args(self.load)
            .args(["--shard-index", &index.to_string()])
            .args(["--shard-count", &self.count.to_string()])
            .args([
                "--run-id",
                self.run_id,
                "--start-at",
                &self.start_at,
                "--output",
            ])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap()
    }
}

fn merge(dirs: &[&Path], out: &Path) -> std::process::Output {
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["--output", out.to_str().unwrap()]);
    util::run(&args, Duration::from_secs(30))
}

/// Waits for the shards (each ends with 0 or 1) and merges their folders into `tmp/merged`.
fn wait_and_merge(
    children: &mut [std::process::Child],
    dirs: &[PathBuf],
    tmp: &TempDir,
) -> (std::process::Output, PathBuf) {
    for child in children {
        let code = util::wait_with_limit(child, Duration::from_secs(60));
        assert!(matches!(code, Some(0 | 1)), "a shard ended with {code:?}");
    }
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let merged_dir = tmp.join("merged");
    (merge(&refs, &merged_dir), merged_dir)
}

/// The deviation of every packet in a shard's samples files.
fn sampled_deviations_us(shard: &Path) -> Vec<i64> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(shard.join("samples")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines().skip(1) {
            let deviation: i64 = line.split(',').nth(6).unwrap().parse().unwrap();
            all.push(deviation);
        }
    }
    all
}

#[test]
fn three_shards_open_their_gates_together_and_merge_exactly_issue_16() {
    let _serial = util::serial();
    let mock = Mock::start(&[]);
    let tmp = TempDir::new("shards");
    // One absolute instant for every shard (`+3s` would count from each conductor's start).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start_at = duplexbench_tui::options::shard::rfc3339(now + 3.0);
    let dirs: Vec<PathBuf> = (0..SHARDS)
        .map(|i| tmp.join(&format!("shard-{i}")))
        .collect();
    let run = Shards {
        url: mock.url(),
        count: SHARDS,
        run_id: "it-16",
        start_at,
        load: ["-s", "4", "-d", "2s"],
    };
    let mut children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let stderr = std::fs::File::create(tmp.join(&format!("stderr-{i}"))).unwrap();
            run.spawn(i, dir, stderr.into())
        })
        .collect();
    for child in &mut children {
        let code = util::wait_with_limit(child, Duration::from_secs(90));
        assert!(matches!(code, Some(0 | 1)), "a shard ended with {code:?}");
    }
    let headless = std::fs::read_to_string(tmp.join("stderr-1")).unwrap();
    assert!(headless.contains("shard 1 of 3: setting up"), "{headless}");
    assert!(headless.contains("waiting for the start at"), "{headless}");

    // Every gate opened at the same instant of the (shared) wall clock.
    let summaries: Vec<Value> = dirs.iter().map(|d| util::summary(d)).collect();
    let firsts: Vec<f64> = summaries
        .iter()
        .map(|s| {
            let gate = &s["start_gate"];
            assert_eq!(gate["start_at"], run.start_at.as_str(), "{gate}");
            gate["first_packet_unix_s"].as_f64().unwrap()
        })
        .collect();
    let spread_ms = (firsts.iter().copied().fold(f64::MIN, f64::max)
        - firsts.iter().copied().fold(f64::MAX, f64::min))
        * 1000.0;
    eprintln!("gate spread of the three shards: {spread_ms:.3} ms");
    // Generous: this box is busy; the real spread goes into the report.
    assert!(spread_ms < 500.0, "first packets {spread_ms:.1} ms apart");
    for s in &summaries {
        assert!(s["clock_sync"]["state"].is_string(), "{}", s["clock_sync"]);
        assert!(s["streaming_window"]["start_unix_s"].as_f64().is_some());
    }

    // The merge pools them exactly.
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let merged_dir = tmp.join("merged");
    let out = merge(&refs, &merged_dir);
    util::assert_finished(&out);
    let merged = util::summary(&merged_dir);
    let packets: u64 = summaries
        .iter()
        .map(|s| s["pacing"]["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(merged["pacing"]["packets"].as_u64(), Some(packets));
    assert_eq!(
        merged["layout"]["sessions_total"].as_u64(),
        Some(u64::from(SHARDS) * SESSIONS)
    );
    let mut pooled = DurationHistogram::new();
    let mut samples = Vec::new();
    for dir in &dirs {
        for us in sampled_deviations_us(dir) {
            pooled.record_us(us);
            samples.push(us);
        }
    }
    assert_eq!(samples.len() as u64, packets, "one sample per packet");
    let p99 = merged["pacing"]["deviation_ms"]["p99"].as_f64().unwrap();
    assert_eq!(
        p99,
        pooled.quantile_ms(0.99),
        "the p99 of the samples pooled"
    );
    // ...which is the exact p99 of the concatenated samples within the histogram's 0.1 %.
    samples.sort_unstable();
    let rank = ((0.99 * samples.len() as f64).ceil() as usize).max(1) - 1;
    let exact_ms = samples[rank] as f64 / 1000.0;
    assert!(
        (p99 - exact_ms).abs() <= exact_ms * 0.001 + 0.001,
        "{p99} vs {exact_ms}"
    );
    // Every session of every shard streamed at once.
    assert_eq!(
        merged["peak_overlapping_streams"].as_u64(),
        Some(u64::from(SHARDS) * SESSIONS)
    );
    let m = &merged["merge"];
    assert_eq!(m["run_id"], "it-16");
    assert_eq!(m["shards"].as_array().unwrap().len(), 3);
    assert!(m["overlap"]["start_unix_s"].as_f64().is_some(), "{m}");
    assert_eq!(m["missing_shards"], serde_json::json!([]));
    // `report` renders the merged folder like any run.
    let report = util::run(
        &["report", merged_dir.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(report.status.code(), Some(0), "{}", describe(&report));
    assert!(String::from_utf8_lossy(&report.stdout).contains("## Shards"));

    // Without shard 1's folder, the verdict names it.
    let partial = tmp.join("partial");
    let out = merge(&[&dirs[0], &dirs[2]], &partial);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let s = util::summary(&partial);
    assert_eq!(s["verdict"]["complete"], false);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(reasons.contains("missing shard: shard 1 of 3"), "{reasons}");
    // The verdict's pacing is unqualified, and the reason says why (it said nothing of pacing).
    assert_eq!(s["verdict"]["pacing_qualified"], false);
    assert!(
        reasons.contains("its packets are unknown, so the run is not pacing-qualified"),
        "{reasons}"
    );
    assert_eq!(s["merge"]["missing_shards"], serde_json::json!([1]));

    // A shard of another layout is refused, and the refusal says what differs.
    let other = tmp.join("other-layout");
    copy_dir(&dirs[1], &other);
    let path = other.join("summary.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["settings"]["sessions_per_process"] = 8.into();
    std::fs::write(&path, v.to_string()).unwrap();
    let out = merge(&[&dirs[0], &other], &tmp.join("refused"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not shards of one run") && err.contains("sessions per process: 4 vs 8"),
        "{err}"
    );
    assert!(!tmp.join("refused").join("summary.json").exists());

    // The same shard twice is refused too.
    let out = merge(&[&dirs[0], &dirs[0]], &tmp.join("twice"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));

    // A worker's result damaged after the run is named, not taken for a worker that left none
    // (which dropped its packets quietly: the QA pass of 2026-12-06).
    let damaged = tmp.join("damaged");
    copy_dir(&dirs[1], &damaged);
    std::fs::write(damaged.join("workers").join("worker-0.json"), "{bad").unwrap();
    let out = merge(&[&dirs[0], &damaged, &dirs[2]], &tmp.join("damaged-merge"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker-0.json is not a worker's result"),
        "{err}"
    );

    // A shard copied without its worker's file (its summary says the worker left a result) is
    // named so, with what to do, not passed off as a worker that exited without one.
    let thin = tmp.join("thin");
    copy_dir(&dirs[1], &thin);
    std::fs::remove_file(thin.join("workers").join("worker-0.json")).unwrap();
    let thin_merge = tmp.join("thin-merge");
    let out = merge(&[&dirs[0], &thin, &dirs[2]], &thin_merge);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let reasons = util::summary(&thin_merge)["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("result not in the folder: shard 1's summary says its worker 0 (pid ")
            && reasons.contains("; worker 1 of the merged run)")
            && reasons.contains("copy the shard's folder again from its host"),
        "{reasons}"
    );

    // A folder that is not a summary at all is refused with what merge reads (not `report`'s
    // sweep folder).
    let junk = tmp.join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("summary.json"), "{bad").unwrap();
    let out = merge(&[&dirs[0], &junk], &tmp.join("junk-merge"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not JSON")
            && err.contains("give each shard's output folder")
            && !err.contains("sweep"),
        "{err}"
    );

    // Each shard's summary.json stands for its folder, as the refusals offer (merge looked for
    // the workers' results under the file).
    let files: Vec<PathBuf> = dirs.iter().map(|d| d.join("summary.json")).collect();
    let by_file = tmp.join("by-file");
    let file_refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let out = merge(&file_refs, &by_file);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        describe(&out)
    );
    assert_eq!(
        util::summary(&by_file)["pacing"]["packets"],
        merged["pacing"]["packets"]
    );

    // A merge given as a shard is named as one, not as a run without --shard-index.
    let out = merge(&[&dirs[0], &merged_dir], &tmp.join("merge-of-merge"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is a merge already (of run it-16)"), "{err}");

    // A shard index at or past the count (an edited summary) is refused, not counted.
    let edited = tmp.join("edited");
    copy_dir(&dirs[2], &edited);
    let path = edited.join("summary.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["settings"]["shard"]["index"] = 5.into();
    std::fs::write(&path, v.to_string()).unwrap();
    let out = merge(&[&dirs[0], &dirs[1], &edited], &tmp.join("edited-merge"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("says it is shard 5 of 3, which cannot be"),
        "{err}"
    );

    // A summary cut short (copied while being written, a full disk) says so.
    let cut = tmp.join("cut");
    copy_dir(&dirs[2], &cut);
    let text = std::fs::read_to_string(cut.join("summary.json")).unwrap();
    std::fs::write(cut.join("summary.json"), &text[..text.len() / 2]).unwrap();
    let out = merge(&[&dirs[0], &dirs[1], &cut], &tmp.join("cut-merge"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is cut short"), "{err}");
    drop(mock);
}

/// A shard killed while streaming leaves the summary written when it started: merge says it
/// did not finish, and neither that it never opened its gate nor that the shards never
/// streamed together (its gate and window were never recorded), which it said before.
#[test]
fn a_shard_killed_while_streaming_is_named_unfinished_not_late_or_apart() {
    let _serial = util::serial();
    let mock = Mock::start(&[]);
    let tmp = TempDir::new("shard-killed");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start_at = duplexbench_tui::options::shard::rfc3339(now + 2.0);
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.join(&format!("shard-{i}"))).collect();
    let run = Shards {
        url: mock.url(),
        count: 2,
        run_id: "killed",
        start_at,
        load: ["-s", "2", "-d", "4s"],
    };
    let mut children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| run.spawn(i, dir, Stdio::null()))
        .collect();
    // Shard 1 is killed once it has sent a few packets.
    let samples = dirs[1].join("samples").join("worker-0.csv");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&samples).map_or(0, |t| t.lines().count()) < 6 {
        assert!(std::time::Instant::now() < deadline, "shard 1 sent nothing");
        std::thread::sleep(Duration::from_millis(50));
    }
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let merged_dir = tmp.join("merged");
    // While they run, merge refuses them (it took them for killed runs, and its summary then
    // refused the real merge into the same folder).
    let early = merge(&refs, &merged_dir);
    assert_eq!(early.status.code(), Some(2), "{}", describe(&early));
    let stderr = String::from_utf8_lossy(&early.stderr);
    assert!(
        stderr.contains("is still being written by a run (pid "),
        "{stderr}"
    );
    assert!(!merged_dir.exists(), "a refused merge writes nothing");
    children[1].kill().unwrap();
    let _ = children[1].wait();
    // Its worker, told to end when its conductor died, writes what it measured.
    let result = dirs[1].join("workers").join("worker-0.json");
    while !result.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "shard 1's worker left no result"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let code = util::wait_with_limit(&mut children[0], Duration::from_secs(60));
    assert!(matches!(code, Some(0 | 1)), "shard 0 ended with {code:?}");

    let out = merge(&refs, &merged_dir);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let s = util::summary(&merged_dir);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("unfinished shard: shard 1's run did not finish")
            && reasons.contains(
                "the results 1 of its 1 workers wrote when their conductor died are pooled"
            ),
        "{reasons}"
    );
    // Its CPU is not known: null, not 0 (and the merge's CPU figure with it).
    assert_eq!(
        s["merge"]["cpu_per_session_second"],
        Value::Null,
        "{}",
        s["merge"]
    );
    assert_eq!(s["merge"]["shards"][1]["worker_cpu_seconds"], Value::Null);
    // Nor its gate and verdict: its provisional summary's ("never opened", unqualified) are
    // no finding; and it was killed, not cancelled.
    assert_eq!(s["merge"]["shards"][1]["start_gate"], Value::Null);
    assert_eq!(s["merge"]["shards"][1]["verdict"], Value::Null);
    assert!(!reasons.contains("shard 1 cancelled"), "{reasons}");
    let md = std::fs::read_to_string(merged_dir.join("summary.md")).unwrap();
    assert!(
        md.contains("| not known |") && md.contains("| UNFINISHED |"),
        "{md}"
    );
    assert!(s["merge"]["shards"][0]["worker_cpu_seconds"]
        .as_f64()
        .is_some());
    // Its packets are in the figures (they were dropped, and its worker said to have left no
    // result), beside shard 0's 2 × 50.
    assert!(!reasons.contains("left no result file"), "{reasons}");
    let killed = &s["merge"]["shards"][1];
    let packets = killed["packets"].as_u64().unwrap();
    assert!(packets >= 6, "{killed}");
    assert_eq!(
        s["pacing"]["packets"].as_u64(),
        Some(100 + packets),
        "{}",
        s["pacing"]
    );
    assert!(!reasons.contains("late gate"), "{reasons}");
    assert!(!reasons.contains("non-overlapping windows"), "{reasons}");
    assert_eq!(
        s["sessions"]["completed"].as_u64(),
        Some(2),
        "{}",
        s["sessions"]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("(of the 1 shard that recorded a window)"),
        "{stdout}"
    );
    // The reason names the command that rebuilds the shard's summary; rebuilt, its CPU and
    // window count in a new merge, and it is no longer unfinished.
    assert!(reasons.contains("`report --rebuild "), "{reasons}");
    let shard_1 = dirs[1].to_str().unwrap();
    let rebuilt = util::run(&["report", shard_1, "--rebuild"], Duration::from_secs(60));
    assert_eq!(rebuilt.status.code(), Some(0), "{}", describe(&rebuilt));
    let again_dir = tmp.join("merged-again");
    let again = merge(&refs, &again_dir);
    assert_eq!(again.status.code(), Some(1), "{}", describe(&again));
    let s = util::summary(&again_dir);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(!reasons.contains("unfinished shard"), "{reasons}");
    assert!(reasons.contains("shard 1 cancelled"), "{reasons}");
    assert!(s["merge"]["shards"][1]["worker_cpu_seconds"]
        .as_f64()
        .is_some());
    assert!(
        s["merge"]["shards"][1]["window"].is_object(),
        "{}",
        s["merge"]
    );
    assert_eq!(s["pacing"]["packets"].as_u64(), Some(100 + packets));
    drop(mock);
}

/// Shards given different `--start-at` instants that streamed together for half their windows
/// are not one load: the merge is not complete and exits 1 (it exited 0, QA of 2026-12-07).
#[test]
fn shards_that_streamed_together_for_half_their_windows_are_not_complete() {
    let _serial = util::serial();
    let mock = Mock::start(&[]);
    let tmp = TempDir::new("shard-half");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.join(&format!("shard-{i}"))).collect();
    let mut children: Vec<_> = (0..2)
        .map(|i| {
            let run = Shards {
                url: mock.url(),
                count: 2,
                run_id: "half",
                // 2 s windows, 1 s apart.
                start_at: duplexbench_tui::options::shard::rfc3339(now + 2.0 + i as f64),
                load: ["-s", "2", "-d", "2s"],
            };
            run.spawn(i, &dirs[i], Stdio::null())
        })
        .collect();
    let (out, merged_dir) = wait_and_merge(&mut children, &dirs, &tmp);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let s = util::summary(&merged_dir);
    assert_eq!(s["verdict"]["complete"], false, "{}", s["verdict"]);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("streamed together for only")
            && reasons.contains("start them with one --start-at"),
        "{reasons}"
    );
    drop(mock);
}

/// Shards given different `--url`s (two servers) merge, and the merged summary says their server
/// figures pool two servers (merge said nothing, and its settings named shard 0's alone: the QA
/// pass of 2026-12-07).
#[test]
fn shards_that_drove_different_servers_say_so_in_the_merge() {
    let _serial = util::serial();
    let mocks = [Mock::start(&[]), Mock::start(&[])];
    let tmp = TempDir::new("shard-servers");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start_at = duplexbench_tui::options::shard::rfc3339(now + 3.0);
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.join(&format!("shard-{i}"))).collect();
    let mut children: Vec<_> = (0..2)
        .map(|i| {
            let run = Shards {
                url: mocks[i].url(),
                count: 2,
                run_id: "servers",
                start_at: start_at.clone(),
                load: ["-s", "1", "-d", "1s"],
            };
            run.spawn(i, &dirs[i], Stdio::null())
        })
        .collect();
    let (out, merged_dir) = wait_and_merge(&mut children, &dirs, &tmp);
    let s = util::summary(&merged_dir);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains(&format!(
            "different servers: shard 0 {}, shard 1 {}",
            mocks[0].url(),
            mocks[1].url()
        )),
        "{reasons} {}",
        describe(&out)
    );
}

/// A shard of several without `--start-at` says at once that it will not start with the others
/// (only the merge said so, at the end).
#[test]
fn a_shard_without_start_at_says_so_when_it_starts() {
    let tmp = TempDir::new("shard-no-start");
    let out = util::run(
        &[
            "run",
            "--no-tui",
            "--trace",
            "off",
            "-s",
            "1",
            "-d",
            "1s",
            "--shard-index",
            "0",
            "--shard-count",
            "2",
            "--run-id",
            "nostart",
            "--output",
            tmp.join("shard-0").to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        describe(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "shard 0 of 2 has no --start-at: it streams as soon as its own sessions are set up"
        ),
        "{stderr}"
    );
}

#[test]
fn a_run_that_is_not_a_shard_is_refused_by_merge_issue_16() {
    let tmp = TempDir::new("not-a-shard");
    let run = tmp.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let out = merge(&[&run], &tmp.join("merged"));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("summary.json"));
}

#[test]
fn a_start_at_in_the_past_or_a_shard_without_its_count_is_a_usage_error_issue_16() {
    for (args, expect) in [
        (
            vec!["run", "--start-at", "2001-01-01T00:00:00Z"],
            "in the past",
        ),
        (vec!["run", "--shard-index", "1"], "--shard-count"),
        (
            vec!["run", "--shard-index", "0", "--shard-count", "2"],
            "--run-id",
        ),
    ] {
        let out = util::run(&args, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A stand-in for `srun` on one box: runs the command once per task (`--ntasks=N`), each with
/// its own SLURM_PROCID and SLURM_NTASKS, as srun does on N nodes, and fails when any task does.
const FAKE_SRUN: &str = r#"#!/usr/bin/env bash
n=1
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in --ntasks=*) n=${1#--ntasks=} ;; esac
  shift
done
pids=()
for ((i = 0; i < n; i++)); do
  SLURM_PROCID=$i SLURM_NTASKS=$n "$@" &
  pids+=($!)
done
code=0
for p in "${pids[@]}"; do wait "$p" || code=$?; done
exit $code
"#;

#[test]
fn the_slurm_recipe_runs_as_written_with_a_stand_in_srun_issue_16() {
    let _serial = util::serial();
    let mock = Mock::start(&[]);
    let tmp = TempDir::new("slurm");
    let bin_dir = tmp.join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let srun = bin_dir.join("srun");
    std::fs::write(&srun, FAKE_SRUN).unwrap();
    std::fs::set_permissions(&srun, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/deploy/slurm/duplexbench.sbatch"
    );
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let results = tmp.join("results");
    let mut child = Command::new("bash")
        .arg(script)
        .current_dir(tmp.join(""))
        .env("PATH", path)
        .env("SLURM_JOB_ID", "4242")
        .env("SLURM_NNODES", "2")
        .env("URL", mock.url())
        .env("BIN", util::bin())
        .env(
            "LAYOUT",
            "--processes 1 --sessions 2 --trace off --no-sampler",
        )
        .env("DURATION", "1s")
        .env("LEAD_S", "3")
        .env("RESULTS", &results)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(tmp.join("out")).unwrap())
        .stderr(std::fs::File::create(tmp.join("err")).unwrap())
        .spawn()
        .unwrap();
    let code = util::wait_with_limit(&mut child, Duration::from_secs(90));
    let log = std::fs::read_to_string(tmp.join("out")).unwrap()
        + &std::fs::read_to_string(tmp.join("err")).unwrap();
    assert!(matches!(code, Some(0 | 1)), "exit {code:?}\n{log}");
    let merged = util::summary(&results.join("4242").join("merged"));
    assert_eq!(merged["merge"]["run_id"], "slurm-4242", "{log}");
    assert_eq!(merged["merge"]["shard_count"], 2);
    assert_eq!(merged["merge"]["missing_shards"], serde_json::json!([]));
    assert_eq!(merged["layout"]["sessions_total"], 4);
    drop(mock);
}
