//! The dashboard in a real terminal: tmux runs the binary, `capture-pane` reads the screen,
//! `send-keys` presses `q`.

use crate::util::{self, TempDir};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A tmux server on a private socket, killed when dropped.
pub struct Tmux {
    socket: String,
    /// The socket's file, which tmux leaves behind when its server is killed.
    socket_path: Option<String>,
}

impl Tmux {
    /// Each call gets a socket of its own: the previous test's `kill-server` returns before that
    /// server has gone, and a new session on the same socket could reach the dying server ("server
    /// exited unexpectedly").
    pub fn start(command: &str, width: u16, height: u16) -> Option<Tmux> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let socket = format!("duplexbench-test-{}-{n}", std::process::id());
        let ok = Command::new("tmux")
            .args(["-L", &socket, "new-session", "-d", "-s", "dash"])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(command)
            .env_remove("TMUX")
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        let socket_path = Command::new("tmux")
            .args(["-L", &socket, "display-message", "-p", "#{socket_path}"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|path| !path.is_empty());
        Some(Tmux {
            socket,
            socket_path,
        })
    }

    pub fn screen(&self) -> String {
        Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", "dash"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    pub fn keys(&self, keys: &str) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "dash", keys])
            .status();
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
        if let Some(path) = &self.socket_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The dashboard's alternate screen is gone from the terminal.
pub fn assert_dashboard_left(screen: &str) {
    assert!(
        !screen.contains("Deviation heatmap"),
        "alternate screen left: {screen}"
    );
}

pub fn wait_for(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> bool,
    screen: impl Fn() -> String,
) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "no {what} within {limit:?}; screen:\n{}",
            screen()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A shell command that runs `run`, then records its exit code in `exit_file` atomically (written
/// beside it and renamed, so a reader never sees the file created but still empty), then keeps the
/// pane open for `capture-pane`.
pub fn recording_exit(run: &str, exit_file: &Path) -> String {
    let file = exit_file.display();
    format!("{run}; echo $? > {file}.part; mv {file}.part {file}; sleep 30")
}

/// The exit code recorded by [`recording_exit`].
pub fn recorded_exit(exit_file: &Path) -> String {
    std::fs::read_to_string(exit_file)
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub fn tmux_available() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        crate::util::skip(
            "dashboard (tmux)",
            "tmux is not installed here, so the dashboard cannot be driven in a real terminal (.ci/run installs it)",
        );
    }
    ok
}

#[test]
fn the_dashboard_runs_in_a_real_terminal_and_q_ends_the_run_with_a_summary() {
    if !tmux_available() {
        return;
    }
    let _serial = util::serial();
    let dir = TempDir::new("tmux");
    let out = dir.join("out");
    let exit_file = dir.join("exit");
    let run = format!(
        "{} run -p 2 -s 4 -d 60s --output {}",
        util::bin(),
        out.display()
    );
    let command = recording_exit(&run, &exit_file);
    let tmux = Tmux::start(&command, 120, 40).expect("tmux starts");
    wait_for(
        "dashboard with packets flowing",
        Duration::from_secs(30),
        || {
            let s = tmux.screen();
            s.contains("Deviation heatmap")
                && s.contains("elapsed 00:0")
                && !s.contains("packets           0 ")
        },
        || tmux.screen(),
    );
    let screen = tmux.screen();
    assert!(screen.contains("QUALIFIED so far"), "{screen}");
    assert!(screen.contains("2 × 4 = 8 sessions"), "{screen}");
    tmux.keys("q");
    wait_for(
        "exit",
        Duration::from_secs(60),
        || exit_file.exists(),
        || tmux.screen(),
    );
    assert_eq!(recorded_exit(&exit_file), "130", "q cancels the run");
    let summary = util::summary(&out);
    assert_eq!(summary["cancelled"], true);
    assert_eq!(summary["sessions"]["stopped_early"], 8);
    // The terminal is restored and the headless table printed on the normal screen.
    let screen = tmux.screen();
    assert_dashboard_left(&screen);
    assert!(
        screen.contains(&format!("{}", Path::new(&out).join("summary.md").display())),
        "{screen}"
    );
}

#[test]
fn a_finished_run_waits_for_a_key_then_restores_the_terminal() {
    if !tmux_available() {
        return;
    }
    let _serial = util::serial();
    let dir = TempDir::new("tmux-finish");
    let out = dir.join("out");
    let exit_file = dir.join("exit");
    let run = format!("{} run -s 2 -d 2s --output {}", util::bin(), out.display());
    let command = recording_exit(&run, &exit_file);
    // A small terminal: panels shrink or drop, nothing crashes.
    let tmux = Tmux::start(&command, 80, 24).expect("tmux starts");
    wait_for(
        "the final verdict",
        Duration::from_secs(60),
        || tmux.screen().contains("q, Enter or Esc: exit"),
        || tmux.screen(),
    );
    assert!(out.join("summary.json").exists(), "written before the key");
    assert!(!exit_file.exists(), "the dashboard waits for a key");
    tmux.keys("Enter");
    wait_for(
        "exit",
        Duration::from_secs(20),
        || exit_file.exists(),
        || tmux.screen(),
    );
    // The run finished (0, or 1 if this busy machine made a packet late), it was not cancelled.
    let code = recorded_exit(&exit_file);
    assert!(code == "0" || code == "1", "exit code {code:?}");
}

/// Under `timeout` (which puts its command in a background process group of the terminal) the
/// dashboard would be stopped by SIGTTOU at its first drawing and hang, deaf to SIGTERM: the
/// run goes headless instead, says why, and ends on its own.
#[test]
fn a_run_in_a_background_process_group_of_its_terminal_goes_headless_instead_of_hanging() {
    if !tmux_available() {
        return;
    }
    let _serial = util::serial();
    let dir = TempDir::new("tmux-background");
    let out = dir.join("out");
    let exit_file = dir.join("exit");
    let run = format!(
        "timeout 60 {} run -s 2 -d 1s --output {}",
        util::bin(),
        out.display()
    );
    let tmux = Tmux::start(&recording_exit(&run, &exit_file), 160, 50).expect("tmux starts");
    wait_for(
        "exit",
        Duration::from_secs(60),
        || exit_file.exists(),
        || tmux.screen(),
    );
    // 124 would be `timeout` killing a run that hung.
    let code = recorded_exit(&exit_file);
    assert!(code == "0" || code == "1", "exit code {code:?}");
    let screen = tmux.screen();
    assert!(
        screen.contains("running headless") && screen.contains("timeout --foreground"),
        "{screen}"
    );
    assert!(out.join("summary.json").exists());
}

/// Whether process `pid` is gone (or a zombie nobody has reaped yet).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

/// A dashboard run of 2 sessions for 60 s into `out`, in tmux, once its packets flow, and the
/// conductor's pid; with `exit_file`, the shell records the run's exit code there.
fn streaming_dashboard(dir: &TempDir, out: &Path, exit_file: Option<&Path>) -> (Tmux, u32) {
    let pid_file = dir.join("pid");
    let run = format!(
        "sh -c 'echo $$ > {}; exec {} run -s 2 -d 60s --output {}'",
        pid_file.display(),
        util::bin(),
        out.display()
    );
    let command = match exit_file {
        Some(file) => recording_exit(&run, file),
        None => run,
    };
    let tmux = Tmux::start(&command, 120, 40).expect("tmux starts");
    wait_for(
        "dashboard with packets flowing",
        Duration::from_secs(30),
        || {
            let s = tmux.screen();
            s.contains("Deviation heatmap") && !s.contains("packets           0 ")
        },
        || tmux.screen(),
    );
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (tmux, pid)
}

#[test]
fn a_terminal_that_goes_away_ends_the_run_with_a_summary_instead_of_a_spinning_dashboard() {
    if !tmux_available() {
        return;
    }
    let _serial = util::serial();
    let dir = TempDir::new("tmux-hangup");
    let out = dir.join("out");
    let (tmux, pid) = streaming_dashboard(&dir, &out, None);
    // The pane and its pty go away, as when a terminal window is closed.
    drop(tmux);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !exited(pid) {
        if Instant::now() >= deadline {
            // Left running, it would spin on a core: stop it before failing.
            duplexbench_tui::sys::signal(pid, rustix::process::Signal::KILL);
            panic!("the conductor {pid} did not end after its terminal hung up");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let summary = util::summary(&out);
    assert_eq!(summary["cancelled"], true, "{summary}");
}

/// A SIGTERM (a service manager, `timeout`, `kill`) ends a dashboard run like Ctrl-C does: the
/// process exits with 143 once the summary is written, without waiting on its finished screen
/// for a key nobody will press.
#[test]
fn sigterm_ends_a_dashboard_run_without_waiting_for_a_key() {
    if !tmux_available() {
        return;
    }
    let _serial = util::serial();
    let dir = TempDir::new("tmux-sigterm");
    let out = dir.join("out");
    let exit_file = dir.join("exit");
    let (tmux, pid) = streaming_dashboard(&dir, &out, Some(&exit_file));
    duplexbench_tui::sys::signal(pid, rustix::process::Signal::TERM);
    wait_for(
        "exit without a key",
        Duration::from_secs(30),
        || exit_file.exists(),
        || tmux.screen(),
    );
    assert_eq!(recorded_exit(&exit_file), "143");
    let summary = util::summary(&out);
    assert_eq!(summary["cancelled"], true, "{summary}");
    let screen = tmux.screen();
    assert_dashboard_left(&screen);
}

/// A signal on the finished screen closes it too: the run had finished, so its exit code stays
/// the run's (the screen used to take the signal and wait for a key all the same).
#[test]
fn a_signal_on_the_finished_screen_closes_it_with_the_runs_exit_code() {
    if !tmux_available() {
        return;
    }
    let _serial = util::serial();
    let dir = TempDir::new("tmux-finished-sigterm");
    let out = dir.join("out");
    let exit_file = dir.join("exit");
    let pid_file = dir.join("pid");
    let run = format!(
        "sh -c 'echo $$ > {}; exec {} run -s 2 -d 2s --output {}'",
        pid_file.display(),
        util::bin(),
        out.display()
    );
    let tmux = Tmux::start(&recording_exit(&run, &exit_file), 100, 30).expect("tmux starts");
    wait_for(
        "the final verdict",
        Duration::from_secs(60),
        || tmux.screen().contains("q, Enter or Esc: exit"),
        || tmux.screen(),
    );
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    duplexbench_tui::sys::signal(pid, rustix::process::Signal::TERM);
    wait_for(
        "exit without a key",
        Duration::from_secs(20),
        || exit_file.exists(),
        || tmux.screen(),
    );
    // The run finished (0, or 1 if this busy machine made a packet late); not cancelled.
    let code = recorded_exit(&exit_file);
    assert!(code == "0" || code == "1", "exit code {code:?}");
    assert_eq!(util::summary(&out)["cancelled"], false);
}
