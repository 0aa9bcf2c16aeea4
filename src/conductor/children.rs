//! The conductor's child processes: the built-in mock and the workers. Each is spawned from the
//! conductor's main thread with `PR_SET_PDEATHSIG` (see [`crate::sys::die_with_parent`]), and
//! killed when its guard drops, so no path leaves one behind.

use super::Event;
use crate::clock::monotonic_s;
use crate::contract::mock::{MockStats, STATS_LINE_PREFIX};
use crate::contract::telemetry::{Telemetry, WorkerCommand};
use crate::contract::worker::{WorkerConfig, WorkerResult};
use crate::options::MockBehaviour;
use crate::paths::RunPaths;
use crate::protocol::Protocol;
use crate::sys;
use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

/// A child that is killed (and reaped) when dropped, unless it has already exited.
pub struct Guarded {
    pub child: Child,
}

impl Guarded {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `timeout` for the child to exit; kills it after that.
    pub fn wait_or_kill(&mut self, timeout: Duration) -> bool {
        let deadline_s = monotonic_s() + timeout.as_secs_f64();
        while monotonic_s() < deadline_s {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Guarded {
    /// How the child ended, once it has (`None` while it runs).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// How a process ended, in words: `exited with code 3`, `was killed by signal 9 (SIGKILL)`.
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => {
            let name = match signal {
                1 => " (SIGHUP)",
                2 => " (SIGINT)",
                6 => " (SIGABRT)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            format!("was killed by signal {signal}{name}")
        }
        (None, None) => "ended".to_string(),
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn own_binary() -> Result<PathBuf> {
    std::env::current_exe().context("cannot find the duplexbench-tui binary to start children")
}

fn log_file(path: &Path) -> Result<File> {
    File::create(path).with_context(|| format!("cannot create {}", path.display()))
}

/// The built-in mock, started on a free loopback port.
pub struct MockChild {
    pub guard: Guarded,
    pub addr: String,
    pub stats_path: PathBuf,
    /// The statistics the mock printed on stdout because it could not write its file.
    printed_stats: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl MockChild {
    pub fn start(
        output_dir: &Path,
        protocol: Protocol,
        behaviour: &MockBehaviour,
    ) -> Result<MockChild> {
        let paths = RunPaths::new(output_dir);
        let stats_path = paths.mock_stats();
        let mut command = Command::new(own_binary()?);
        command
            .args([
                "mock",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--stats-output",
            ])
            .arg(&stats_path)
            .args(["--protocol", protocol.as_str()])
            .args(behaviour.to_flags())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file(&paths.mock_log())?);
        sys::die_with_parent(&mut command, sys::ParentDeath::Term);
        let mut child = command.spawn().context("cannot start the built-in mock")?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("the mock's stdout is not piped"))?;
        let guard = Guarded { child };
        let (tx, rx) = mpsc::channel();
        let printed_stats = std::sync::Arc::new(std::sync::Mutex::new(None));
        let printed = printed_stats.clone();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep draining so the mock never blocks on a full pipe.
            for line in lines.map_while(Result::ok) {
                if let Some(json) = line.strip_prefix(STATS_LINE_PREFIX) {
                    if let Ok(mut slot) = printed.lock() {
                        *slot = Some(json.to_string());
                    }
                }
            }
        });
        let line = rx.recv_timeout(Duration::from_secs(10)).map_err(|_| {
            anyhow!(
                "the built-in mock did not start within 10 s; see {}",
                paths.mock_log().display()
            )
        })?;
        let addr = line
            .strip_prefix("listening on ")
            .ok_or_else(|| anyhow!("unexpected first line from the built-in mock: {line:?}"))?
            .trim()
            .to_string();
        Ok(MockChild {
            guard,
            addr,
            stats_path,
            printed_stats,
        })
    }

    /// Stops the mock with SIGTERM (it writes its stats then) and reads the stats.
    /// A note comes with the stats when they did not come from the file.
    pub fn stop(mut self) -> Result<(MockStats, Option<String>)> {
        // One that ended before it was told to (killed, crashed) wrote no stats: say how it
        // ended rather than that its file is missing.
        match self.guard.exit_status() {
            Some(status) if !self.stats_path.exists() => bail!(
                "the built-in mock {} before the run ended (see mock.log): its statistics are lost, and the sessions still streaming to it failed",
                describe_exit(status)
            ),
            // Ended already (and reaped: its pid may be another process's now): nothing to stop.
            Some(_) => {}
            None => {
                sys::signal(self.guard.pid(), rustix::process::Signal::TERM);
                if !self.guard.wait_or_kill(Duration::from_secs(5)) {
                    bail!("the built-in mock did not exit within 5 s of SIGTERM and was killed");
                }
            }
        }
        let printed = self.printed_stats.lock().ok().and_then(|mut p| p.take());
        let text = match (std::fs::read_to_string(&self.stats_path), printed) {
            (Ok(text), _) => text,
            (Err(_), Some(json)) => {
                // The file the mock could not write, or the folder it was to go in removed.
                let gone = self.stats_path.parent().is_some_and(|dir| !dir.exists());
                let why = if gone {
                    "its folder is gone"
                } else {
                    "a full disk?"
                };
                return serde_json::from_str(&json)
                    .map(|stats| (stats, Some(format!(
                        "mock: cannot write {} ({}; see mock.log); its statistics came over its stdout instead",
                        self.stats_path.display(), why
                    ))))
                    .context("the statistics the mock printed are not valid");
            }
            (Err(err), None) => {
                return Err(err).with_context(|| {
                    format!("the mock left no stats in {}", self.stats_path.display())
                })
            }
        };
        let stats = serde_json::from_str(&text).context("the mock's stats file is not valid")?;
        Ok((stats, None))
    }
}

/// One worker process and its command pipe.
pub struct WorkerChild {
    pub index: u32,
    pub guard: Guarded,
    stdin: Option<ChildStdin>,
    /// The result the worker sent in its `done` because it could not write its file, with
    /// the write error.
    pub sent_result: Option<(Box<WorkerResult>, String)>,
}

impl WorkerChild {
    /// Starts worker `config.index`; its telemetry lines arrive on `events`.
    pub fn start(config: &WorkerConfig, events: Sender<Event>) -> Result<WorkerChild> {
        let paths = RunPaths::new(&config.output_dir);
        let config_path = paths.worker_config(config.index);
        let json = serde_json::to_vec_pretty(config).context("cannot encode a worker config")?;
        std::fs::write(&config_path, json).with_context(|| {
            format!(
                "cannot write {}; free space on that disk or choose another --output",
                config_path.display()
            )
        })?;
        let log = paths.worker_log(config.index);
        let mut command = Command::new(own_binary()?);
        command
            .arg("worker")
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file(&log)?);
        // Secrets go in the environment, never in the config file of the run folder.
        match config.settings.connection.secrets_env() {
            Some(secrets) => command.env(crate::secret::SECRETS_ENV, secrets),
            None => command.env_remove(crate::secret::SECRETS_ENV),
        };
        // A conductor killed outright leaves the workers to end their sessions themselves:
        // their receipts are closed and their results written, as on an abort.
        sys::die_with_parent(&mut command, sys::ParentDeath::Term);
        sys::huge_pages::advise_growth(&mut command);
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start worker {}", config.index))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("worker stdout is not piped"))?;
        let stdin = child.stdin.take();
        let index = config.index;
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(msg) = serde_json::from_str::<Telemetry>(&line) {
                    if events
                        .send(Event::Telemetry { worker: index, msg })
                        .is_err()
                    {
                        return;
                    }
                }
            }
            let _ = events.send(Event::WorkerGone { worker: index });
        });
        Ok(WorkerChild {
            index,
            guard: Guarded { child },
            stdin,
            sent_result: None,
        })
    }

    /// Sends a command; a worker that is gone is not an error here (its result tells).
    pub fn command(&mut self, command: WorkerCommand) {
        if let Some(stdin) = &mut self.stdin {
            if stdin
                .write_all(command.to_line().as_bytes())
                .and_then(|()| stdin.flush())
                .is_err()
            {
                self.stdin = None;
            }
        }
    }
}
