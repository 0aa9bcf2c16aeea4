//! The live dashboard: a thread of the conductor that owns the terminal, reads keys,
//! and draws [`LiveState`] about ten times a second.
//!
//! It runs beside the conductor's control loop, never inside it: a slow or frozen terminal only
//! freezes the picture, while the run, its telemetry and its summary go on. The state lock is held
//! while a frame is rendered into memory, never while it is written to the terminal. The terminal
//! is restored on every way out: the end of the run, `q`, an error, a panic.

pub mod header;
pub mod heatmap;
pub mod keys;
pub mod panels;
pub mod protocol;
pub mod sweep;
pub mod theme;
pub mod view;

#[cfg(test)]
mod snapshots_test;

use crate::live::LiveState;
use anyhow::{Context, Result};
use crossterm::event::{self, Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{cursor, execute};
use keys::{on_key, ViewState};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use theme::Theme;

/// Time between frames.
const FRAME: Duration = Duration::from_millis(100);

/// The running dashboard; dropping it closes it and restores the terminal.
pub struct Dashboard {
    thread: Option<JoinHandle<Result<()>>>,
    shutdown: Arc<AtomicBool>,
}

impl Dashboard {
    /// Takes over the terminal and starts drawing `state`. `q` and Ctrl-C call `on_quit` (once).
    pub fn start(
        state: Arc<Mutex<LiveState>>,
        on_quit: Box<dyn Fn() + Send>,
        exit_on_finish: bool,
    ) -> Result<Dashboard> {
        install_panic_hook();
        enter_terminal()?;
        let shutdown = Arc::new(AtomicBool::new(false));
        let stop = shutdown.clone();
        let thread = std::thread::Builder::new()
            .name("dashboard".to_string())
            .spawn(move || {
                let result = ui_loop(&state, &*on_quit, exit_on_finish, &stop);
                restore_terminal();
                result
            })
            .context("cannot start the dashboard thread")?;
        Ok(Dashboard {
            thread: Some(thread),
            shutdown,
        })
    }

    /// A flag that closes the dashboard when set, from any thread (a signal on the finished
    /// screen).
    pub fn closer(&self) -> Arc<AtomicBool> {
        self.shutdown.clone()
    }

    /// Waits until the user leaves the finished dashboard (or at once with `--exit-on-finish`).
    pub fn wait(mut self) -> Result<()> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => anyhow::bail!("the dashboard thread panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn enter_terminal() -> Result<()> {
    terminal::enable_raw_mode().context("cannot put the terminal in raw mode")?;
    execute!(std::io::stdout(), EnterAlternateScreen, cursor::Hide)
        .context("cannot switch to the alternate screen")?;
    Ok(())
}

/// Leaves raw mode and the alternate screen; safe to call more than once.
pub fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(std::io::stdout(), LeaveAlternateScreen, cursor::Show);
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
    });
}

fn ui_loop(
    state: &Mutex<LiveState>,
    on_quit: &dyn Fn(),
    exit_on_finish: bool,
    shutdown: &AtomicBool,
) -> Result<()> {
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .context("cannot open the terminal")?;
    let theme = Theme::from_env();
    let mut view = ViewState::default();
    let mut quit_sent = false;
    let mut next_frame = Instant::now();
    // crossterm reads keys from stdin when it is the terminal: then it is watched for a hang-up.
    let watch_stdin = std::io::stdin().is_terminal();
    loop {
        if shutdown.load(Ordering::Relaxed) {
            return Ok(());
        }
        let finished = state.lock().map(|s| s.finished.is_some()).unwrap_or(true);
        if finished && (exit_on_finish || quit_sent) {
            return Ok(());
        }
        let wait = next_frame.saturating_duration_since(Instant::now());
        if next_event(wait, watch_stdin)? {
            match event::read().context("cannot read the terminal")? {
                TermEvent::Key(key) if key.kind != KeyEventKind::Release => {
                    // The finished run stays explorable: only the keys that say "leave" leave.
                    if finished && leaves_finished(&key, &view) {
                        return Ok(());
                    }
                    if !finished && is_quit(&key) {
                        if !quit_sent {
                            on_quit();
                            quit_sent = true;
                        }
                    } else {
                        on_key(&mut view, key.code);
                    }
                    next_frame = Instant::now();
                }
                TermEvent::Resize(..) => next_frame = Instant::now(),
                _ => {}
            }
        }
        if Instant::now() >= next_frame {
            terminal
                .draw(|frame| {
                    // The lock is released before ratatui writes the frame to the terminal.
                    if let Ok(state) = state.lock() {
                        view::render(frame, &state, &view, theme);
                    }
                })
                .context("cannot draw the dashboard")?;
            next_frame = Instant::now() + FRAME;
        }
    }
}

/// Whether a terminal event is waiting, after at most `wait`. A terminal that hung up ends the
/// dashboard (the run goes on headless to its summary) instead of leaving crossterm to spin.
fn next_event(wait: Duration, watch_stdin: bool) -> Result<bool> {
    if watch_stdin {
        if crate::sys::wait_for_terminal(wait) == crate::sys::TerminalInput::HungUp {
            anyhow::bail!("the terminal hung up");
        }
        // Ready or not, crossterm may hold events it has already read.
        return event::poll(Duration::ZERO).context("cannot read the terminal");
    }
    event::poll(wait).context("cannot read the terminal")
}

/// At "press q, Enter or Esc": those keys (and Ctrl-C) leave; Esc first closes the help.
fn leaves_finished(key: &KeyEvent, view: &ViewState) -> bool {
    is_quit(key) || key.code == KeyCode::Enter || (key.code == KeyCode::Esc && !view.help)
}

fn is_quit(key: &KeyEvent) -> bool {
    matches!(key.code, KeyCode::Char('q') | KeyCode::Char('Q'))
        || (key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL))
}
