//! Every path of a run folder, named once (docs/files.md describes each file).

use std::path::{Path, PathBuf};

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
