//! A newcomer's first hour (issue 14): pointing the tool at a server that speaks something
//! else, headless phase lines, the flags people expect, completions and the man page, and the
//! finished dashboard that stays explorable.

use crate::util::{self, describe, TempDir};
use futures_util::SinkExt;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// A WebSocket server on 127.0.0.1 that greets every connection with `{"hello":1}` (not a
/// native event) and then only listens; it stops when dropped.
fn hello_server() -> util::LoopbackServer {
    util::LoopbackServer::start(|stream| async move {
        let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
            return;
        };
        let _ = ws.send(Message::Text(r#"{"hello":1}"#.into())).await;
        // Listen (bounded) so the client, not the server, ends the session.
        let _ = tokio::time::timeout(Duration::from_secs(60), async {
            use futures_util::StreamExt;
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
    })
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_server_speaking_something_else_fails_fast_and_stderr_quotes_why_issue_14() {
    let server = hello_server();
    let url = format!("ws://{}/v1/realtime", server.addr);
    let dir = TempDir::new("hello");
    let out = dir.join("out");
    let started = std::time::Instant::now();
    let run = util::run_to(
        &out,
        &["--url", &url, "-s", "2", "-d", "2s"],
        Duration::from_secs(60),
    );
    eprintln!("{}", describe(&run));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "set-up ends at the first frame, not after --recv-timeout: {}",
        describe(&run)
    );
    assert_eq!(run.status.code(), Some(1), "{}", describe(&run));
    let summary = util::summary(&out);
    let first_reason = summary["verdict"]["reasons"][0]
        .as_str()
        .unwrap_or_default();
    assert!(first_reason.contains("type"), "{first_reason}");
    let err = stderr(&run);
    assert!(err.contains("missing field `type`"), "{err}");
}

#[test]
fn a_headless_run_says_each_phase_and_never_goes_quiet_issue_14() {
    let _serial = util::serial();
    let dir = TempDir::new("phases");
    let out = dir.join("out");
    let run = util::run_to(
        &out,
        &["-p", "2", "-s", "2", "-d", "7s"],
        Duration::from_secs(90),
    );
    let err = stderr(&run);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.first().is_some_and(|l| l.starts_with("output folder /")
            && l.ends_with(out.to_str().unwrap())),
        "the first line says where the results go: {err}"
    );
    let mut last = 0;
    for phase in [
        "mock up at 127.0.0.1:",
        "setting up 4 sessions (2 × 2)",
        "of 4 sessions connected",
        "streaming: 7 s of audio",
        "draining: the audio is sent",
        "writing results to",
    ] {
        let at = lines
            .iter()
            .position(|l| l.contains(phase))
            .unwrap_or_else(|| panic!("no `{phase}` line: {}", describe(&run)));
        assert!(at >= last, "`{phase}` out of order: {err}");
        last = at;
    }
    // stderr is a pipe here: a progress line every 5 s, so a 7 s run has at least one, with
    // the server's figures as sglang-omni names them, live: the sessions have had their first
    // audio, and the mock finishes each unit as its packet lands (ahead of real time).
    let progress = lines
        .iter()
        .find(|l| l.starts_with("[") && l.contains("sglang-omni p50/p95: accepted"))
        .unwrap_or_else(|| panic!("no progress line with the server's figures: {err}"));
    assert!(
        !progress.contains("ttfa –") && progress.contains(", unit_lag -"),
        "{progress}"
    );
    assert!(
        stdout_of(&run).contains("/summary.md (figures: summary.json)"),
        "{}",
        describe(&run)
    );
}

#[test]
fn completions_and_a_man_page_are_printed_for_installing_issue_14() {
    for shell in ["bash", "zsh", "fish"] {
        let out = util::run(&["completions", shell], Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(stdout_of(&out).contains("duplexbench-tui"), "{shell}");
        assert!(
            !stdout_of(&out).contains("worker)") && !stdout_of(&out).contains("'worker:"),
            "the hidden worker subcommand is not offered: {shell}"
        );
    }
    let out = util::run(&["man"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let page = stdout_of(&out);
    assert!(page.contains(".TH duplexbench-tui 1"), "{page}");
    assert!(page.contains("concurrency"), "{page}");
    // The pages the top-level one refers to exist: printed one by one, or all written to a folder.
    assert!(page.contains(r"duplexbench\-tui\-sweep(1)"), "{page}");
    let out = util::run(&["man", "sweep"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let page = stdout_of(&out);
    assert!(page.contains(".TH duplexbench-tui-sweep 1"), "{page}");
    assert!(page.contains(r"\-\-slo"), "sweep's own options: {page}");
    let out = util::run(&["man", "nope"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("report, completions"),
        "{}",
        describe(&out)
    );
    let dir = util::TempDir::new("man");
    let folder = dir.join("man1");
    let out = util::run(
        &["man", "--dir", folder.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    for name in [
        "duplexbench-tui",
        "duplexbench-tui-report",
        "duplexbench-tui-conform",
    ] {
        let page = std::fs::read_to_string(folder.join(format!("{name}.1"))).unwrap();
        assert!(page.contains(&format!(".TH {name} 1")), "{page}");
    }
    assert!(
        !folder.join("duplexbench-tui-worker.1").exists(),
        "not for users"
    );
}

/// The bash script completes a subcommand's options, not only the subcommands: run in bash,
/// as a shell calls it on a tab after `duplexbench-tui run --tr`.
#[test]
fn bash_completes_the_options_of_a_subcommand() {
    let out = util::run(&["completions", "bash"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let dir = util::TempDir::new("completions");
    let script = dir.join("duplexbench-tui.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let complete = |words: &str| {
        let probe = format!(
            r#"source "$1"; f=$(complete -p duplexbench-tui | sed -E 's/.*-F ([^ ]+).*/\1/'); COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); "$f" duplexbench-tui "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"; echo "${{COMPREPLY[*]}}""#
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &probe, "bash"])
            .arg(&script)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(complete("duplexbench-tui sw"), "sweep");
    assert_eq!(
        complete("duplexbench-tui run --tr"),
        "--trace --trace-writer"
    );
    assert!(complete("duplexbench-tui sweep --s").contains("--slo"));
    assert_eq!(
        complete("duplexbench-tui run --protocol o"),
        "openai",
        "a value of a subcommand's option"
    );
}

#[test]
fn help_points_at_the_glossary_and_explains_the_trace_writer_issue_14() {
    let out = util::run(&["run", "--help"], Duration::from_secs(10));
    let help = stdout_of(&out);
    assert!(help.contains("docs/glossary.md"), "{help}");
    assert!(!help.contains("seed's bug"), "{help}");
    assert!(help.contains("total = P × S"), "{help}");
    assert!(help.contains("[default: 16 MiB]"), "{help}");
}

#[test]
fn json_is_refused_with_a_pointer_to_output_and_sizes_take_units_issue_14() {
    let out = util::run(&["run", "--json"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("--output"), "{}", describe(&out));
    let out = util::run(
        &["run", "--max-message-bytes", "12"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("--max-message-bytes") && stderr(&out).contains("1 KiB"),
        "{}",
        describe(&out)
    );
    let out = util::run(
        &["run", "-p", "3", "-c", "10", "--no-tui"],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("--concurrency 10"),
        "{}",
        describe(&out)
    );
}

#[test]
fn the_finished_dashboard_stays_explorable_and_leaves_the_table_behind_issue_14() {
    use crate::dashboard::{assert_dashboard_left, recording_exit, tmux_available, wait_for, Tmux};
    if !tmux_available() {
        return;
    }
    let _serial = util::serial();
    let dir = TempDir::new("tmux-explore");
    let out = dir.join("out");
    let exit_file = dir.join("exit");
    let run = format!(
        "{} run -p 2 -s 2 -d 3s --output {}",
        util::bin(),
        out.display()
    );
    let command = recording_exit(&run, &exit_file);
    let tmux = Tmux::start(&command, 120, 40).expect("tmux starts");
    wait_for(
        "the finished dashboard",
        Duration::from_secs(60),
        || tmux.screen().contains("q, Enter or Esc: exit"),
        || tmux.screen(),
    );
    let screen = tmux.screen();
    assert!(screen.contains("2 × 2 = 4 sessions"), "{screen}");
    assert!(screen.contains("exited"), "workers are gone: {screen}");
    let accepted = screen
        .lines()
        .find(|l| l.contains("│accepted"))
        .unwrap_or_default()
        .to_string();
    // The server's figures as sglang-omni names them, with samples (p50 and p95 in ms).
    assert!(
        screen.contains("sglang-omni ms p50 / p95") && accepted.contains('.'),
        "the server's figures: {screen}"
    );
    // Keys that explore do not leave.
    for key in ["v", "Down", "PageDown", "g", "v"] {
        tmux.keys(key);
        std::thread::sleep(Duration::from_millis(300));
        assert!(!exit_file.exists(), "`{key}` left the finished dashboard");
        assert!(tmux.screen().contains("Deviation heatmap"), "after `{key}`");
    }
    tmux.keys("?");
    wait_for(
        "the help with the glossary",
        Duration::from_secs(5),
        || tmux.screen().contains("docs/glossary.md"),
        || tmux.screen(),
    );
    tmux.keys("Escape");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!exit_file.exists(), "Esc first closes the help");
    tmux.keys("Enter");
    wait_for(
        "exit",
        Duration::from_secs(20),
        || exit_file.exists(),
        || tmux.screen(),
    );
    let screen = tmux.screen();
    assert_dashboard_left(&screen);
    assert!(screen.starts_with("output folder /"), "{screen}");
    assert!(
        screen.contains("server accepted"),
        "the headless table: {screen}"
    );
    assert!(
        screen.contains("/summary.md (figures: summary.json)"),
        "{screen}"
    );
}
