//! `report` (issue 15): a run's summary rendered again, and two runs compared figure by figure.

use crate::util::{self, describe, TempDir};
use std::time::Duration;

/// The row of figure `name` in a comparison's Markdown table.
fn row<'t>(table: &'t str, name: &str) -> &'t str {
    table
        .lines()
        .find(|l| l.starts_with(&format!("| {name} |")))
        .unwrap_or_else(|| panic!("no {name} row: {table}"))
}

fn small_run(dir: &TempDir, name: &str, sessions: &str) -> std::path::PathBuf {
    let out = dir.join(name);
    let output = util::run_to(
        &out,
        &["-s", sessions, "-d", "2s", "--trace", "off"],
        Duration::from_secs(60),
    );
    util::assert_finished(&output);
    out
}

#[test]
fn report_renders_a_run_again_and_compares_two_with_their_ratios_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("report");
    let a = small_run(&dir, "a", "2");
    let b = small_run(&dir, "b", "2");
    let again = util::run(&["report", a.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(again.status.code(), Some(0), "{}", describe(&again));
    let md = String::from_utf8_lossy(&again.stdout);
    assert!(md.starts_with("# duplexbench-tui run: "), "{md}");
    assert_eq!(
        md,
        std::fs::read_to_string(a.join("summary.md")).unwrap(),
        "today's report of the same summary is the same file"
    );
    older_summaries_are_read_or_refused_by_version(&dir, &a, &md);
    let vs = util::run(
        &["report", a.to_str().unwrap(), "--vs", b.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(vs.status.code(), Some(0), "{}", describe(&vs));
    let table = String::from_utf8_lossy(&vs.stdout);
    assert!(table.contains("| figure | A | B | B / A |"), "{table}");
    assert!(table.contains("| deviation p99 |"), "{table}");
    assert!(table.contains("×"), "ratios are printed: {table}");
    // A native run's comparison has sglang-omni's figures too (unit lag ahead of real time).
    let unit_lag = row(&table, "sglang-omni unit_lag p95");
    assert!(unit_lag.contains(" ms |"), "{unit_lag}");
    assert!(table.contains("| sglang-omni late sends |"), "{table}");
    // The CPU per session-second compared is summary.md's (while streaming), not the workers'
    // whole CPU, which read 8-16 % more beside it (the figures audit of 2026-12-05).
    let per_session_s = util::cpu_per_session_second(&md);
    let cpu = row(&table, "client CPU per session-second");
    let a_ms: f64 = cpu
        .split('|')
        .nth(2)
        .unwrap()
        .trim()
        .trim_end_matches(" ms")
        .parse()
        .unwrap();
    assert!(
        (a_ms - per_session_s * 1000.0).abs() < 0.001,
        "{cpu} vs summary.md's {per_session_s}"
    );
}

#[test]
fn report_refuses_to_compare_different_loads_naming_what_differs_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("report-differ");
    let a = small_run(&dir, "a", "2");
    let b = small_run(&dir, "b", "3");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let refused = util::run(&["report", a, "--vs", b], Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("sessions per process: 2 vs 3"), "{err}");
    assert!(err.contains("--force"), "{err}");
    let forced = util::run(
        &["report", a, "--vs", b, "--force"],
        Duration::from_secs(30),
    );
    assert_eq!(forced.status.code(), Some(0), "{}", describe(&forced));
    assert!(String::from_utf8_lossy(&forced.stdout).contains("The loads differ"));
}

#[test]
fn report_of_a_folder_without_a_summary_is_a_clear_error() {
    let dir = TempDir::new("report-empty");
    let out = util::run(
        &["report", dir.join("").to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give a run's output folder"));
    // A JSON file that is no summary is named so (it was "a summary of schema_version 0").
    let other = dir.join("other.json");
    std::fs::write(&other, r#"{"a": 1}"#).unwrap();
    let out = util::run(
        &["report", other.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a duplexbench-tui summary"), "{err}");
    // A sweep's folder whose sweep.json is gone, given to report or merge: its runs are named.
    let sweep = TempDir::new("report-sweep-without-record");
    std::fs::create_dir_all(sweep.join("level-0016")).unwrap();
    std::fs::create_dir_all(sweep.join("warmup")).unwrap();
    let folder = sweep.join("");
    let merged = sweep.join("merged");
    for command in [
        &["report"][..],
        &["merge", "--output", merged.to_str().unwrap()],
    ] {
        let out = util::run(
            &[command, &[folder.to_str().unwrap()]].concat(),
            Duration::from_secs(30),
        );
        let command = command[0];
        assert_eq!(out.status.code(), Some(2), "{command}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("is a sweep's folder (its runs: level-0016, warmup)")
                && err.contains("level-0016 (its sweep.json is missing"),
            "{command}: {err}"
        );
    }
}

/// A schema 2 summary (the loop-lag counts were `attribution.loop_stalls`) renders as its schema 3
/// self; schema 1 is refused, naming the versions this build reads.
fn older_summaries_are_read_or_refused_by_version(dir: &TempDir, run: &std::path::Path, md: &str) {
    let mut summary = util::summary(run);
    assert_eq!(summary["schema_version"], 3);
    let counts = summary["attribution"]
        .as_object_mut()
        .unwrap()
        .remove("loop_lag_windows")
        .expect("attribution.loop_lag_windows");
    summary["attribution"]["loop_stalls"] = counts;
    summary["schema_version"] = 2.into();
    let old = dir.join("schema-2.json");
    std::fs::write(&old, serde_json::to_vec(&summary).unwrap()).unwrap();
    let again = util::run(&["report", old.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(again.status.code(), Some(0), "{}", describe(&again));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        md,
        "schema 2 reads as 3"
    );
    summary["schema_version"] = 1.into();
    std::fs::write(&old, serde_json::to_vec(&summary).unwrap()).unwrap();
    let refused = util::run(&["report", old.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("schema_version 1") && err.contains("reads 2 to 3"),
        "{err}"
    );
}

/// A sweep of `--repeats 2` at 1 and 2 sessions, 1 s each, into `dir/name`.
fn small_sweep(dir: &TempDir, name: &str, extra: &[&str]) -> std::path::PathBuf {
    let out = dir.join(name);
    let mut args = vec!["sweep", "--no-tui", "--trace", "off", "--cooldown", "0s"];
    args.extend(["-s", "1,2", "-d", "1s", "--repeats", "2", "--output"]);
    args.push(out.to_str().unwrap());
    args.extend(extra);
    let ran = util::run(&args, Duration::from_secs(120));
    assert!(
        matches!(ran.status.code(), Some(0 | 1)),
        "{}",
        describe(&ran)
    );
    out
}

/// Two sweeps with repeats compare level by level: each figure's median and range on both
/// sides, their ratio, and whether the difference is beyond the run-to-run spread (issue 15's
/// "when repeats are there"). A sweep against a run, or the other way, names the level folder
/// to give; sweeps of different loads are refused unless --force.
#[test]
fn two_sweeps_with_repeats_compare_level_by_level_against_their_spread_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("report-sweeps");
    let a = small_sweep(&dir, "a", &[]);
    let b = small_sweep(&dir, "b", &[]);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let vs = util::run(&["report", a, "--vs", b], Duration::from_secs(30));
    assert_eq!(vs.status.code(), Some(0), "{}", describe(&vs));
    let md = String::from_utf8_lossy(&vs.stdout);
    for expected in [
        "## 1 session: 2 vs 2 runs",
        "## 2 sessions: 2 vs 2 runs",
        "| figure | A | B | B / A | beyond the spread |",
        "| deviation p99 | ",
    ] {
        assert!(md.contains(expected), "{expected}\n{md}");
    }
    let row = md
        .lines()
        .find(|l| l.starts_with("| deviation p99 |"))
        .unwrap();
    assert!(
        row.contains(" ms [") && (row.ends_with("| yes |") || row.ends_with("| no |")),
        "{row}"
    );

    assert!(md.contains(" — 2 levels, 4 runs  \n"), "{md}");
    // The same as plain text: the tables aligned, no Markdown marks.
    let text = util::run(&["report", a, "--vs", b, "--text"], Duration::from_secs(30));
    assert_eq!(text.status.code(), Some(0), "{}", describe(&text));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(!text.contains('|') && !text.contains("## "), "{text}");
    assert!(text.contains("1 session: 2 vs 2 runs\n"), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("deviation p99  "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        ["  yes", "  no", "  yes, under 1 %"]
            .iter()
            .any(|end| row.ends_with(end)),
        "{row}"
    );

    // A sweep that ended early says so beside its levels (it read as one that planned them).
    let record = std::path::Path::new(b).join("sweep.json");
    let mut sweep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    sweep["stopped_early"] = "cancelled after 2 of 3 levels".into();
    std::fs::write(&record, serde_json::to_vec(&sweep).unwrap()).unwrap();
    let vs = util::run(&["report", a, "--vs", b], Duration::from_secs(30));
    let md = String::from_utf8_lossy(&vs.stdout);
    assert!(
        md.contains("2 levels, 4 runs; stopped early: cancelled after 2 of 3 levels\n"),
        "{md}"
    );

    let level = format!("{a}/level-0001");
    let mixed = util::run(&["report", &level, "--vs", b], Duration::from_secs(30));
    assert_eq!(mixed.status.code(), Some(2), "{}", describe(&mixed));
    let err = String::from_utf8_lossy(&mixed.stderr);
    assert!(err.contains(&format!("--vs {b}/level-0001`")), "{err}");

    let staggered = small_sweep(&dir, "c", &["--stagger"]);
    let c = staggered.to_str().unwrap();
    let refused = util::run(&["report", a, "--vs", c], Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    // Each difference said once, with the levels it is at (it was repeated, once a level).
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("(stagger: false vs true (at 1, 2 sessions));"),
        "{err}"
    );
}

/// Two sweeps compared where B's server rejected half the sessions of a level: that level says
/// B's verdict under its heading, as a comparison of two runs does; it read as a like-for-like
/// comparison, B's latency the faster for serving fewer (QA of 2026-12-07).
#[test]
fn a_level_that_one_sweep_did_not_complete_says_that_sides_verdict() {
    let _serial = util::serial();
    let dir = TempDir::new("report-sweeps-verdict");
    let sweep = |name: &str, extra: &[&str]| {
        let out = dir.join(name);
        let mut args = vec!["sweep", "--no-tui", "--trace", "off", "--cooldown", "0s"];
        args.extend(["-s", "2,4", "-d", "2s", "--output", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let ran = util::run(&args, Duration::from_secs(120));
        assert!(
            matches!(ran.status.code(), Some(0 | 1)),
            "{}",
            describe(&ran)
        );
        out.to_str().unwrap().to_string()
    };
    let a = sweep("a", &[]);
    let b = sweep("b", &["--max-sessions", "2"]);
    let vs = util::run(&["report", &a, "--vs", &b], Duration::from_secs(30));
    assert_eq!(vs.status.code(), Some(0), "{}", describe(&vs));
    let md = String::from_utf8_lossy(&vs.stdout);
    let level = md
        .split("## 4 sessions: 1 vs 1 runs\n")
        .nth(1)
        .and_then(|rest| rest.split("| figure |").next())
        .unwrap_or_else(|| panic!("no level of 4 sessions: {md}"));
    let b_line = level
        .lines()
        .find(|l| l.starts_with("B: "))
        .unwrap_or_else(|| panic!("no verdict of B at 4 sessions: {md}"));
    assert!(
        b_line.contains("NOT complete (") && b_line.contains("2 of 4 sessions rejected"),
        "{b_line}"
    );
}

/// A run folder whose run is still going holds only the summary of its start: `report` and
/// `conform --trace` say so, naming the run's pid (exit 2), instead of rendering it as a failed
/// run whose worker "exited without a result" (the QA pass of 2026-12-06).
#[test]
fn a_run_still_going_is_not_reported_as_a_failed_one() {
    let _serial = util::serial();
    let dir = util::TempDir::new("report-live");
    let out = dir.join("out");
    let mut run = util::spawn_run(&out, &["-s", "1", "-d", "6s"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !out.join("summary.json").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = run.id();
    let report = util::run(&["report", out.to_str().unwrap()], Duration::from_secs(10));
    let conform = util::run(
        &["conform", "--trace", out.to_str().unwrap()],
        Duration::from_secs(10),
    );
    let code = util::wait_with_limit(&mut run, Duration::from_secs(60));
    assert!(matches!(code, Some(0 | 1)), "{code:?}");
    assert_eq!(report.status.code(), Some(2), "{}", util::describe(&report));
    let err = String::from_utf8_lossy(&report.stderr);
    assert!(
        err.contains("is still being written by a run") && err.contains(&format!("pid {pid}")),
        "{err}"
    );
    assert_eq!(
        conform.status.code(),
        Some(2),
        "{}",
        util::describe(&conform)
    );
    assert!(String::from_utf8_lossy(&conform.stderr).contains("is still going"));
    // Once it has ended, it reports.
    let after = util::run(&["report", out.to_str().unwrap()], Duration::from_secs(10));
    assert_eq!(after.status.code(), Some(0), "{}", util::describe(&after));
}

/// `report --vs` of two OpenAI runs compares their turns (the QA pass of 2026-12-06 found
/// none of them, and the native server rows as "no samples"), and says how their servers
/// differ — the mock queueing a busy turn's response or leaving it unanswered.
#[test]
fn two_openai_runs_compare_their_turns_and_name_how_their_servers_differ() {
    let _serial = util::serial();
    let dir = TempDir::new("report-openai");
    let (a, _) = crate::openai::busy_turns_run(&dir, "queued", &[]);
    let (b, _) = crate::openai::busy_turns_run(&dir, "skipped", &["--skip-busy-turns"]);
    assert!(a.join("summary.json").exists() && b.join("summary.json").exists());
    let vs = util::run(
        &["report", a.to_str().unwrap(), "--vs", b.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(vs.status.code(), Some(0), "{}", describe(&vs));
    let table = String::from_utf8_lossy(&vs.stdout);
    let row = |name: &str| row(&table, name);
    assert!(
        row("turns unanswered").starts_with("| turns unanswered | 0 | 2 |"),
        "{table}"
    );
    assert!(
        row("first audio after end p50").contains(" ms |"),
        "{table}"
    );
    assert!(
        !table.contains("| server unit lag p50 |"),
        "no native rows: {table}"
    );
    assert!(
        table.contains(
            "The servers differ: the built-in mock (--protocol openai) with --skip-busy-turns (not given) vs (given)."
        ),
        "only the flag that differs: {table}"
    );
}

/// Two runs that streamed the same samples compare, however they asked for them: the file by
/// another path (a copy, as on another host) and the first second of it through `--loops 2`
/// were refused as different loads (the audio was compared by its description). A different
/// length streamed still is.
#[test]
fn the_same_audio_streamed_through_another_path_or_loops_is_the_same_load() {
    let _serial = util::serial();
    let dir = TempDir::new("report-audio");
    let speech = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/speech-16k.wav");
    let copy = dir.join("copy/speech-16k.wav");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(speech, &copy).unwrap();
    let run = |name: &str, args: &[&str]| {
        let out = dir.join(name);
        let mut all = vec!["-s", "1", "-d", "1s", "--trace", "off", "--audio"];
        all.extend_from_slice(args);
        let output = util::run_to(&out, &all, Duration::from_secs(60));
        util::assert_finished(&output);
        out.to_str().unwrap().to_string()
    };
    let a = run("a", &[speech]);
    let b = run("b", &[copy.to_str().unwrap(), "--loops", "2"]);
    let vs = util::run(&["report", &a, "--vs", &b], Duration::from_secs(30));
    assert_eq!(vs.status.code(), Some(0), "{}", describe(&vs));
    let table = String::from_utf8_lossy(&vs.stdout);
    assert!(!table.contains("The loads differ"), "{table}");

    // Another recording of one name and length (an en/ and a zh/ prompt) is not the same.
    let other = dir.join("other/speech-16k.wav");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    let mut bytes = std::fs::read(speech).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&other, bytes).unwrap();
    let d = run("d", &[other.to_str().unwrap()]);
    let refused = util::run(&["report", &a, "--vs", &d], Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("audio: "));

    let c = run("c", &[speech, "--packet-ms", "100"]);
    let refused = util::run(&["report", &a, "--vs", &c], Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("packet: 80 ms vs 100 ms"), "{err}");
    assert!(!err.contains("audio:"), "the same audio: {err}");
}

/// A conversation and a transcription session are different loads, even with the same model
/// and output asked for: `report --vs` names the session type (it compared them).
#[test]
fn an_openai_conversation_and_a_transcription_session_do_not_compare_unforced() {
    let _serial = util::serial();
    let dir = TempDir::new("report-session-type");
    let run = |name: &str, extra: &[&str]| {
        let out = dir.join(name);
        let mut args = vec![
            "--protocol",
            "openai",
            "--model",
            "gpt-4o-transcribe",
            "-s",
            "1",
            "-d",
            "1s",
            "--trace",
            "off",
            "--no-sampler",
        ];
        args.extend(extra);
        let output = util::run_to(&out, &args, Duration::from_secs(60));
        util::assert_finished(&output);
        out
    };
    let a = run("conversation", &["--modalities", "text"]);
    let b = run("transcription", &["--session-type", "transcription"]);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let refused = util::run(&["report", a, "--vs", b], Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains(r#"--session-type: "realtime" vs "transcription""#),
        "{err}"
    );
    assert!(!err.contains("--modalities"), "{err}");
}

/// A run that sent no packet (the server refused every session's model) compared with one that
/// did: its pacing figures are "no samples", not zeros that read as perfect pacing beside the
/// other run's.
#[test]
fn a_run_that_sent_no_packet_compares_without_pacing_figures() {
    let _serial = util::serial();
    let dir = TempDir::new("report-nothing-sent");
    let mock =
        crate::mock_protocol::Mock::start(&["--protocol", "vllm", "--served-model", "served-one"]);
    let url = mock.url();
    let run = |name: &str, model: &str| {
        let out = dir.join(name);
        let args = [
            "--url",
            &url,
            "--protocol",
            "vllm",
            "--model",
            model,
            "-s",
            "2",
            "-d",
            "2s",
            "--trace",
            "off",
        ];
        let output = util::run_to(&out, &args, Duration::from_secs(60));
        assert!(out.join("summary.json").exists(), "{}", describe(&output));
        out
    };
    let refused = run("refused", "not-served");
    assert_eq!(util::summary(&refused)["pacing"]["packets"], 0);
    let served = run("served", "served-one");
    let vs = util::run(
        &[
            "report",
            refused.to_str().unwrap(),
            "--vs",
            served.to_str().unwrap(),
            "--force",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(vs.status.code(), Some(0), "{}", describe(&vs));
    let table = String::from_utf8_lossy(&vs.stdout);
    for name in [
        "deviation p50",
        "deviation p99",
        "deviation max",
        "start lateness p99",
    ] {
        let row = row(&table, name);
        assert!(
            row.starts_with(&format!("| {name} | no samples | ")),
            "{row}"
        );
    }
    // vLLM's time to first text: its text streams before the input ends, so first text after
    // end has no sample and was the only text figure compared (the QA pass of 2026-12-07).
    let row = row(&table, "first text after start p50");
    assert!(
        row.starts_with("| first text after start p50 | no samples | ") && row.contains(" ms |"),
        "{row}"
    );
}

/// Two Fun-ASR runs compare by the benchmark's own figures, first update and final after STOP
/// among them: `report --vs` showed none, only the pacing rows (the QA pass of 2026-12-07).
#[test]
fn two_fun_asr_runs_compare_by_the_benchmarks_figures() {
    let _serial = util::serial();
    let dir = TempDir::new("report-funasr");
    let run = |name: &str, extra: &[&str]| {
        let out = dir.join(name);
        let mut args = vec![
            "--protocol",
            "funasr",
            "-s",
            "2",
            "-d",
            "2s",
            "--trace",
            "off",
        ];
        args.extend_from_slice(extra);
        let output = util::run_to(&out, &args, Duration::from_secs(60));
        util::assert_finished(&output);
        out
    };
    let a = run("a", &[]);
    let b = run("b", &["--decode-ms", "400"]);
    let vs = util::run(
        &["report", a.to_str().unwrap(), "--vs", b.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(vs.status.code(), Some(0), "{}", describe(&vs));
    let table = String::from_utf8_lossy(&vs.stdout);
    let row = |name: &str| row(&table, name);
    for name in [
        "Fun-ASR first update p50",
        "Fun-ASR first update p95",
        "Fun-ASR final after STOP p50",
        "Fun-ASR final after STOP p95",
        "Fun-ASR max client response-lag p95",
    ] {
        let row = row(name);
        assert_eq!(row.matches(" ms |").count(), 2, "{row}");
    }
    assert!(
        row("Fun-ASR aggregate audio/wall").contains(" x |"),
        "{table}"
    );
    assert!(
        row("Fun-ASR errors").starts_with("| Fun-ASR errors | 0 | 0 |"),
        "{table}"
    );
    assert!(table.contains("--decode-ms"), "the servers differ: {table}");
}
