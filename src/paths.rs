//! Every path of a run folder, named once (docs/files.md describes each file).

use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` whole or not at all: beside it (`<path>.partial`), then renamed
/// over it. A full disk, or a process ended mid-write, leaves the previous file as it was and
/// no cut file to read as damage; the partial file is removed on failure.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let written = std::fs::write(&partial, bytes).and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

/// The files of one run folder.
#[derive(Debug, Clone)]
pub struct RunPaths {
    pub dir: PathBuf,
}

impl RunPaths {
    pub fn new(dir: impl Into<PathBuf>) -> RunPaths {
        RunPaths { dir: dir.into() }
    }

    pub fn summary_json(&self) -> PathBuf {
        self.dir.join("summary.json")
    }

    pub fn summary_md(&self) -> PathBuf {
        self.dir.join("summary.md")
    }

    /// The advisory lock a run holds on its folder.
    pub fn lock(&self) -> PathBuf {
        self.dir.join(".lock")
    }

    pub fn mock_stats(&self) -> PathBuf {
        self.dir.join("mock-stats.json")
    }

    pub fn mock_log(&self) -> PathBuf {
        self.dir.join("mock.log")
    }

    /// `workers/`: each worker's configuration, result and log.
    pub fn workers_dir(&self) -> PathBuf {
        self.dir.join("workers")
    }

    pub fn worker_config(&self, worker: u32) -> PathBuf {
        self.workers_dir()
            .join(format!("worker-{worker}.config.json"))
    }

    pub fn worker_result(&self, worker: u32) -> PathBuf {
        self.workers_dir().join(format!("worker-{worker}.json"))
    }

    pub fn worker_log(&self, worker: u32) -> PathBuf {
        self.workers_dir().join(format!("worker-{worker}.log"))
    }

    /// The scratch file of `--inject-disk-stall-mb`.
    pub fn disk_stall(&self, worker: u32) -> PathBuf {
        self.workers_dir().join(format!("disk-stall-w{worker}.bin"))
    }

    /// `samples/`: one CSV of per-packet samples per worker.
    pub fn samples_dir(&self) -> PathBuf {
        self.dir.join("samples")
    }

    pub fn samples(&self, worker: u32) -> PathBuf {
        self.samples_dir().join(format!("worker-{worker}.csv"))
    }

    /// `sessions/`: one folder per session with its trace and receipts.
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }

    pub fn session_dir(&self, worker: u32, session: u32) -> PathBuf {
        self.sessions_dir().join(format!("w{worker}-s{session:04}"))
    }
}

impl AsRef<Path> for RunPaths {
    fn as_ref(&self) -> &Path {
        &self.dir
    }
}

/// The file that makes a folder a sweep's.
pub const SWEEP_JSON: &str = "sweep.json";

/// Whether `path` is a sweep's folder (or its sweep.json).
pub fn is_sweep(path: &Path) -> bool {
    path.join(SWEEP_JSON).is_file() || path.file_name().is_some_and(|n| n == SWEEP_JSON)
}

/// The folders in `dir` named as a sweep names its runs (`warmup`, `level-0016`, …), sorted.
pub fn sweep_run_folders(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| is_sweep_run_folder(name))
        .collect();
    names.sort();
    names
}

/// `warmup`, `level-0016`, `level-0016-r2`: the names of a sweep's run folders.
pub fn is_sweep_run_folder(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("level-") else {
        return name == "warmup";
    };
    let (sessions, repeat) = rest.split_once("-r").unwrap_or((rest, "1"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    sessions.len() >= 4 && digits(sessions) && digits(repeat)
}

/// The pid of the run (or sweep) still writing to `dir`, if one is: its lock is held (the
/// kernel drops it when that process exits in any way). `Some(0)` when the pid cannot be read.
pub fn running_owner(dir: &Path) -> Option<u32> {
    use rustix::fs::{flock, FlockOperation};
    let mut file = std::fs::File::open(RunPaths::new(dir).lock()).ok()?;
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        // Nobody holds it: closing the file releases the shared lock just taken.
        Ok(()) => None,
        Err(rustix::io::Errno::WOULDBLOCK) => Some(lock_owner_pid(&mut file).unwrap_or(0)),
        Err(_) => None,
    }
}

/// The pid in a lock file another run holds. It writes it just after locking, so an empty file
/// is read again for a moment.
pub fn lock_owner_pid(file: &mut std::fs::File) -> Option<u32> {
    use std::io::Read as _;
    for _ in 0..20 {
        let mut text = String::new();
        let read = std::io::Seek::rewind(file).and_then(|()| file.read_to_string(&mut text));
        if let Ok(pid) = text.trim().parse() {
            return Some(pid);
        }
        if read.is_err() {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    None
}
