//! Small operating-system helpers: child-process lifetime, file-descriptor limits, whether the
//! terminal is still there, and the clock's sync state.

pub mod arrival;
pub mod clock_sync;
pub mod huge_pages;
pub mod open_files;

use std::os::unix::process::CommandExt;
use std::process::Command;

/// How a child hears that the process that spawned it died.
#[derive(Debug, Clone, Copy)]
pub enum ParentDeath {
    /// SIGKILL: it ends at once (the mock: nothing of it is read after its conductor).
    Kill,
    /// SIGTERM: it ends what it was doing properly and exits within a few seconds (a worker
    /// closes its sessions' receipts and writes its result; see `worker::control`). A worker
    /// that was stopped (SIGSTOP) then gets SIGHUP and SIGCONT from the kernel, its process
    /// group being orphaned, and ends the same way.
    Term,
}

/// Makes `command`'s child get `signal` when the process that spawns it dies (even by
/// SIGKILL), and puts it in its own process group so that a terminal's Ctrl-C reaches only the
/// conductor, which then stops its children in order.
///
/// `PR_SET_PDEATHSIG` fires when the spawning *thread* exits, so children must be spawned from a
/// thread that lives as long as the run (the conductor spawns from its main thread).
pub fn die_with_parent(command: &mut Command, signal: ParentDeath) -> &mut Command {
    let parent = rustix::process::getpid();
    let signal = match signal {
        ParentDeath::Kill => rustix::process::Signal::KILL,
        ParentDeath::Term => rustix::process::Signal::TERM,
    };
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe functions.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setpgid(None, None)?;
            rustix::process::set_parent_process_death_signal(Some(signal))?;
            // The parent may have died before prctl took effect.
            // An error here makes the child exit without running the program (std reports
            // it to `spawn`, and no one is left to hear it).
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::ErrorKind::NotFound.into());
            }
            Ok(())
        })
    }
}

/// Makes a write past the file-size limit (`ulimit -f`) fail with EFBIG instead of killing the
/// process with SIGXFSZ: the trace writers then lose lines as on a full disk, and say so,
/// instead of the workers dying with half a line in a trace. Handled (a flag no one reads), not
/// ignored, so that no child inherits an ignored signal.
pub fn survive_file_size_limit() {
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Fails only for a forbidden signal, which SIGXFSZ is not.
    let _ = signal_hook::flag::register(signal_hook::consts::SIGXFSZ, seen);
}

/// The soft file-size limit (`ulimit -f`) in bytes, when there is one.
pub fn file_size_limit_bytes() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Fsize).current
}

/// Raises the soft open-file limit to the hard limit: a worker keeps three descriptors open per
/// session, the mock one. The conductor checks the whole layout first ([`open_files::ensure`]).
pub fn raise_open_file_limit() {
    open_files::raise_to_hard();
}

/// Sends `signal` to `pid`; errors (the process is already gone) are ignored.
pub fn signal(pid: u32, signal: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// What the terminal on stdin did while [`wait_for_terminal`] waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalInput {
    /// Input is waiting to be read.
    Ready,
    /// Nothing came within the time.
    Quiet,
    /// The terminal is gone (its pty was closed, e.g. a killed tmux pane).
    HungUp,
}

/// Whether stdout is a terminal this process may draw on: one whose foreground process group
/// is ours. A process in a background group of its terminal (`timeout` without
/// `--foreground` puts its command in one; `cmd &` in a shell) is stopped by SIGTTOU as soon
/// as it sets the terminal up for the dashboard, and stays stopped, deaf even to SIGTERM.
pub fn terminal_is_ours() -> Option<bool> {
    use std::io::IsTerminal as _;
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    let ours = rustix::termios::tcgetpgrp(&stdout)
        .map(|pgrp| pgrp == rustix::process::getpgrp())
        .unwrap_or(false);
    Some(ours)
}

/// Waits at most `timeout` for input on stdin, and tells a terminal that is gone apart: on a
/// hung-up tty, crossterm's own poll spins on a core forever instead of returning
/// (crossterm-rs/crossterm#793), so the dashboard asks here first.
pub fn wait_for_terminal(timeout: std::time::Duration) -> TerminalInput {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
    let timeout = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match poll(&mut fds, Some(&timeout)) {
        Ok(0) | Err(rustix::io::Errno::INTR) => TerminalInput::Quiet,
        Ok(_) => {
            let gone = PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL;
            if fds[0].revents().intersects(gone) {
                TerminalInput::HungUp
            } else {
                TerminalInput::Ready
            }
        }
        Err(_) => TerminalInput::HungUp,
    }
}
