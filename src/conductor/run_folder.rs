//! The output folder of a run, claimed for the run's whole life (issue #13): an advisory lock
//! (`flock` on `<output>/.lock`, which holds the owner's pid) refuses a second run into the same
//! folder, and a folder that already holds a finished run is refused unless `--force` clears
//! that run's own files. The kernel drops the lock when the conductor exits in any way, so a
//! run killed with SIGKILL does not block the next one.

use crate::paths::RunPaths;
use anyhow::{bail, Context, Result};
use rustix::fs::{flock, FlockOperation};
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The files a run writes at the top of its folder.
const RUN_FILES: &[&str] = &[
    "summary.json",
    "summary.json.partial",
    "summary.md",
    "summary.md.partial",
    "mock-stats.json",
    "mock-stats.json.partial",
    "mock.log",
];

/// The folders a run writes into; see [`is_run_entry`] for which of their entries are its own.
const RUN_FOLDERS: &[&str] = &["workers", "samples", "sessions"];

/// A claimed output folder. Dropped before the run has started (a start-up failure: an
/// unreachable `--url`, a full disk), it removes what the run made — its files, the lock file,
/// `workers/`, and the folders the claim created — so that nothing half-made is left, and the
/// same command can be run again without `--force`.
#[derive(Debug)]
pub struct RunFolder {
    dir: PathBuf,
    /// The folders the claim created (the output folder and missing parents), deepest first.
    created: Vec<PathBuf>,
    /// The locked lock file; closing it releases the lock.
    lock: Option<File>,
    /// Whether the run files in the folder are this run's: false until the claim has found
    /// none of another run's there (or cleared them with `--force`), and false again once the
    /// run has started (its provisional summary is written) and its files are to stay.
    clear_on_drop: bool,
}

impl RunFolder {
    /// Creates `dir` if needed and locks it. Refuses a folder another run is writing to, and
    /// one that holds a finished run unless `force`, in which case that run's files go first.
    pub fn claim(dir: &Path, force: bool) -> Result<RunFolder> {
        if dir.is_file() {
            bail!(
                "--output {} is a file, not a folder; give a folder (it is created if missing)",
                dir.display()
            );
        }
        // A sweep's folder holds its levels' runs in folders of their own: a run written into
        // it would hide behind the sweep (`report` shows the sweep), and --force would not
        // make it a run's folder.
        if crate::paths::is_sweep(dir) {
            bail!(
                "{} holds a sweep (sweep.json); choose another --output for the run",
                dir.display()
            );
        }
        let created = missing_folders(dir);
        fs::create_dir_all(dir).with_context(|| cannot_create(dir))?;
        let mut folder = RunFolder {
            dir: dir.to_path_buf(),
            created,
            lock: None,
            clear_on_drop: false,
        };
        folder.lock = Some(lock(dir)?);
        let found = run_entries(dir);
        if !found.is_empty() {
            if !force {
                bail!(
                    "{} already holds the files of a run ({}); choose another --output, or give --force to delete that run's files first",
                    dir.display(),
                    found.join(", ")
                );
            }
            let kept = clear_run(dir)?;
            let kept = match kept {
                0 => String::new(),
                n => format!("; kept {n} files that a run does not write"),
            };
            super::follow::note(&format!(
                "--force: deleted the files of the previous run in {}{kept}",
                dir.display()
            ));
        }
        fs::create_dir_all(RunPaths::new(dir).workers_dir()).with_context(|| cannot_create(dir))?;
        folder.clear_on_drop = true;
        Ok(folder)
    }

    /// Creates a new folder for a run without `--output`: `base`, or the first of `base-2`,
    /// `base-3`, … that does not exist. Creating it (`mkdir`, which fails when the folder exists)
    /// is the claim, so two runs started in the same second each get a folder of their own.
    pub fn claim_new(base: &Path) -> Result<RunFolder> {
        let (dir, created) = create_numbered(base)?;
        let mut folder = RunFolder {
            dir,
            created,
            lock: None,
            clear_on_drop: false,
        };
        folder.lock = Some(lock(&folder.dir)?);
        fs::create_dir_all(RunPaths::new(&folder.dir).workers_dir())
            .with_context(|| cannot_create(&folder.dir))?;
        folder.clear_on_drop = true;
        Ok(folder)
    }

    /// The folder claimed.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run has started: from here on, whatever happens, its files are kept.
    pub fn started(&mut self) {
        self.clear_on_drop = false;
    }

    /// The run's files are all written (its final summary too): the lock goes, so that `report`
    /// and `conform` read the folder as a finished run while the finished dashboard is still
    /// open; the files stay.
    pub fn finished(&mut self) {
        self.clear_on_drop = false;
        self.lock = None;
    }
}

/// How many folders [`create_numbered`] tries: `base`, `base-2`, … `base-1000`.
const MAX_SUFFIX: u32 = 1000;

/// Creates `base`, or the first of `base-2`, `base-3`, … that does not exist, with its missing
/// parents; returns it and the folders created (it and those parents, deepest first). Creating
/// it (`mkdir`, which fails when the folder exists) is the claim: two runs, or two sweeps,
/// started in the same second each get a folder of their own.
pub fn create_numbered(base: &Path) -> Result<(PathBuf, Vec<PathBuf>)> {
    let mut created = match base.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            let created = missing_folders(parent);
            fs::create_dir_all(parent).with_context(|| cannot_create(parent))?;
            created
        }
        _ => Vec::new(),
    };
    for n in 1..=MAX_SUFFIX {
        let dir = match n {
            1 => base.to_path_buf(),
            n => {
                let mut name = base.as_os_str().to_os_string();
                name.push(format!("-{n}"));
                PathBuf::from(name)
            }
        };
        match fs::create_dir(&dir) {
            Ok(()) => {
                created.insert(0, dir.clone());
                return Ok((dir, created));
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err).with_context(|| cannot_create(&dir)),
        }
    }
    bail!(
        "{} and {MAX_SUFFIX} numbered folders after it exist already; choose a folder with --output",
        base.display()
    )
}

/// `dir` and those of its parents that do not exist yet, deepest first.
fn missing_folders(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect()
}

fn cannot_create(dir: &Path) -> String {
    format!(
        "cannot create the output folder {}; choose another with --output",
        dir.display()
    )
}

impl Drop for RunFolder {
    fn drop(&mut self) {
        // A run that never started: its files describe nothing (and would make the folder
        // refuse the next run). The claim found no other run's files there, or cleared them.
        if self.lock.is_some() && self.clear_on_drop {
            let _ = clear_run(&self.dir);
        }
        // Only a folder this run holds, and only when the run wrote nothing in it.
        if self.lock.is_some() && run_entries(&self.dir).is_empty() {
            let paths = RunPaths::new(&self.dir);
            let _ = fs::remove_dir(paths.workers_dir());
            let _ = fs::remove_file(paths.lock());
        }
        for dir in &self.created {
            // `remove_dir` removes only empty folders: anything written stays.
            if fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
}

/// Opens and locks `dir/.lock`, then writes this process's pid into it.
fn lock(dir: &Path) -> Result<File> {
    lock_folder(dir, "run")
}

/// Opens and locks `dir/.lock` for a `what` (a run, a sweep), then writes this process's pid
/// into it; refuses a folder another one holds. The kernel drops the lock when the process
/// exits in any way.
pub fn lock_folder(dir: &Path, what: &str) -> Result<File> {
    let path = RunPaths::new(dir).lock();
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| {
            format!(
                "cannot open the lock file {}; choose another --output",
                path.display()
            )
        })?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let owner = match crate::paths::lock_owner_pid(&mut file) {
                Some(pid) => format!("another {what} (pid {pid})"),
                None => format!("another {what}"),
            };
            bail!(
                "{owner} is writing to {}; wait for it or choose another --output",
                dir.display()
            );
        }
        Err(err) => {
            return Err(std::io::Error::from(err))
                .with_context(|| format!("cannot lock {}", path.display()))
        }
    }
    let written = file
        .set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()));
    if let Err(err) = written {
        // Locked, so the file is this run's: it goes, and the claim's folders with it.
        let _ = fs::remove_file(&path);
        return Err(err).with_context(|| {
            format!(
                "cannot write {}; free space on that disk or choose another --output",
                path.display()
            )
        });
    }
    Ok(file)
}

/// The entries of `dir` that show a run was there: its files, and its folders when they hold
/// one of its files.
fn run_entries(dir: &Path) -> Vec<String> {
    let mut found: Vec<String> = RUN_FILES
        .iter()
        .filter(|name| dir.join(name).exists())
        .map(|name| name.to_string())
        .collect();
    for folder in RUN_FOLDERS {
        let Ok(mut entries) = fs::read_dir(dir.join(folder)) else {
            continue;
        };
        if entries.any(|entry| {
            entry.is_ok_and(|entry| {
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                is_run_entry(folder, &entry.file_name().to_string_lossy(), is_dir)
            })
        }) {
            found.push(format!("{folder}/"));
        }
    }
    found
}

/// Deletes the files a run writes, and its folders once empty; returns how many other entries
/// were kept in those folders.
fn clear_run(dir: &Path) -> Result<usize> {
    let context = |path: &Path| format!("--force: cannot delete {}", path.display());
    for name in RUN_FILES {
        let path = dir.join(name);
        if path.exists() {
            fs::remove_file(&path).with_context(|| context(&path))?;
        }
    }
    let mut kept = 0;
    for folder in RUN_FOLDERS {
        let Ok(entries) = fs::read_dir(dir.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if !is_run_entry(folder, &name, is_dir) {
                kept += 1;
            } else if is_dir {
                // A session folder: its two files, then the folder if nothing else is in it.
                for file in [
                    crate::trace::files::TRACE_FILE,
                    crate::trace::files::RECEIPTS_FILE,
                ] {
                    let file = path.join(file);
                    if file.exists() {
                        fs::remove_file(&file).with_context(|| context(&file))?;
                    }
                }
                if fs::remove_dir(&path).is_err() {
                    kept += 1;
                }
            } else {
                fs::remove_file(&path).with_context(|| context(&path))?;
            }
        }
        let _ = fs::remove_dir(dir.join(folder));
    }
    Ok(kept)
}

/// Whether `name` in the run folder `folder` is one a run writes (see docs/files.md).
fn is_run_entry(folder: &str, name: &str, is_dir: bool) -> bool {
    match (folder, is_dir) {
        ("workers", false) => {
            ["worker-{}.config.json", "worker-{}.json", "worker-{}.log"]
                .iter()
                .any(|pattern| numbered(name, pattern))
                || numbered(name, "disk-stall-w{}.bin")
        }
        ("samples", false) => numbered(name, "worker-{}.csv"),
        ("sessions", true) => name
            .strip_prefix('w')
            .and_then(|rest| rest.split_once("-s"))
            .is_some_and(|(worker, session)| is_number(worker) && is_number(session)),
        _ => false,
    }
}

/// Whether `name` is `pattern` with a number in place of its `{}`.
fn numbered(name: &str, pattern: &str) -> bool {
    let Some((prefix, suffix)) = pattern.split_once("{}") else {
        return false;
    };
    name.strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(suffix))
        .is_some_and(is_number)
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "duplexbench-run-folder-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn touch(path: PathBuf) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "x").unwrap();
    }

    #[test]
    fn only_the_names_a_run_writes_are_its_own() {
        assert!(is_run_entry("workers", "worker-12.config.json", false));
        assert!(is_run_entry("workers", "worker-0.json", false));
        assert!(is_run_entry("workers", "disk-stall-w3.bin", false));
        assert!(is_run_entry("samples", "worker-1.csv", false));
        assert!(is_run_entry("sessions", "w0-s0003", true));
        assert!(!is_run_entry("workers", "worker-.json", false));
        assert!(!is_run_entry("workers", "notes.txt", false));
        assert!(!is_run_entry("sessions", "w0-s0003", false));
        assert!(!is_run_entry("sessions", "wx-s1", true));
    }

    #[test]
    fn a_second_claim_is_refused_and_a_dropped_claim_that_wrote_nothing_leaves_no_folder() {
        let dir = temp_dir("claim").join("out");
        let first = RunFolder::claim(&dir, false).unwrap();
        let lock_text = fs::read_to_string(RunPaths::new(&dir).lock()).unwrap();
        assert_eq!(lock_text.trim(), std::process::id().to_string());
        // A second open file description of the same file conflicts, as another process would.
        let err = RunFolder::claim(&dir, true).unwrap_err().to_string();
        assert!(
            err.contains(&format!("another run (pid {})", std::process::id())),
            "{err}"
        );
        assert!(
            RunPaths::new(&dir).lock().exists(),
            "a refused claim keeps the lock"
        );
        drop(first);
        assert!(!dir.exists(), "nothing was written, so nothing is left");
        assert!(!dir.parent().unwrap().exists(), "nor the parent it created");
    }

    /// A start-up that failed after the run wrote files (the mock's log, the workers'
    /// configs, the samples files; then a full disk refused the provisional summary) leaves
    /// nothing: the files were kept, and the same command was then refused for them.
    #[test]
    fn a_run_that_never_started_leaves_none_of_its_files_and_one_that_did_keeps_them() {
        let dir = temp_dir("never-started").join("out");
        let written = [
            "mock.log",
            "workers/worker-0.config.json",
            "workers/worker-0.log",
            "samples/worker-0.csv",
            "summary.json.partial",
        ];
        let folder = RunFolder::claim(&dir, false).unwrap();
        for name in written {
            touch(dir.join(name));
        }
        drop(folder);
        assert!(!dir.exists(), "the folder it created goes too");
        // The same command again: not refused.
        let mut folder = RunFolder::claim(&dir, false).unwrap();
        for name in written {
            touch(dir.join(name));
        }
        folder.started();
        drop(folder);
        for name in written {
            assert!(
                dir.join(name).exists(),
                "{name} of a run that started stays"
            );
        }
        // A folder the user made, with a file of their own, keeps both.
        let own = temp_dir("never-started-own");
        touch(own.join("notes.txt"));
        let folder = RunFolder::claim(&own, false).unwrap();
        touch(own.join("mock.log"));
        drop(folder);
        assert!(own.join("notes.txt").exists() && !own.join("mock.log").exists());
        let _ = fs::remove_dir_all(dir.parent().unwrap());
        let _ = fs::remove_dir_all(&own);
    }

    #[test]
    fn runs_without_output_in_the_same_second_each_get_a_new_folder() {
        let runs = temp_dir("new");
        let base = runs.join("20261204-235959");
        let first = RunFolder::claim_new(&base).unwrap();
        let second = RunFolder::claim_new(&base).unwrap();
        let third = RunFolder::claim_new(&base).unwrap();
        assert_eq!(first.dir(), base);
        assert_eq!(second.dir(), runs.join("20261204-235959-2"));
        assert_eq!(third.dir(), runs.join("20261204-235959-3"));
        assert!(RunPaths::new(second.dir()).workers_dir().is_dir());
        // A folder that exists is never taken, even one that holds no run.
        drop(second);
        fs::create_dir_all(runs.join("20261204-235959-2")).unwrap();
        let fourth = RunFolder::claim_new(&base).unwrap();
        assert_eq!(fourth.dir(), runs.join("20261204-235959-4"));
        drop((first, third, fourth));
        assert!(
            !base.exists(),
            "a claim that wrote nothing leaves no folder"
        );
        let _ = fs::remove_dir_all(&runs);
    }

    #[test]
    fn force_deletes_a_runs_files_and_keeps_everything_else() {
        let dir = temp_dir("force");
        for name in [
            "summary.json",
            "mock.log",
            "workers/worker-0.json",
            "samples/worker-0.csv",
            "sessions/w0-s0000/trace.jsonl",
            "sessions/w0-s0000/input-send-receipts.json",
            "sessions/w0-s0001/input-send-receipts.json",
            "sessions/w0-s0001/my-notes.txt",
            "workers/README",
            "results.ods",
        ] {
            touch(dir.join(name));
        }
        let err = RunFolder::claim(&dir, false).unwrap_err().to_string();
        assert!(err.contains("--force"), "{err}");
        assert!(err.contains("summary.json"), "{err}");
        assert!(
            dir.join("summary.json").exists(),
            "a refusal deletes nothing"
        );

        let folder = RunFolder::claim(&dir, true).unwrap();
        for gone in ["summary.json", "mock.log", "samples", "sessions/w0-s0000"] {
            assert!(!dir.join(gone).exists(), "{gone} is a run's");
        }
        for kept in [
            "results.ods",
            "workers/README",
            "sessions/w0-s0001/my-notes.txt",
        ] {
            assert!(dir.join(kept).exists(), "{kept} is not a run's");
        }
        assert!(!dir
            .join("sessions/w0-s0001/input-send-receipts.json")
            .exists());
        drop(folder);
        assert!(
            dir.join("results.ods").exists(),
            "a folder that existed stays"
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
