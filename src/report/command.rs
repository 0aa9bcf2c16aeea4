//! `duplexbench-tui report RUN [--vs OTHER]`: renders a run's summary again with today's report
//! (Markdown, or the text table with `--text`), or compares two runs.

use super::{compare, markdown, rebuild, table};
use crate::cli::ReportArgs;
use crate::summary::{Summary, OLDEST_READ_SCHEMA_VERSION, SCHEMA_VERSION};
use anyhow::{bail, Context, Result};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Runs the command; 0 when it printed the report.
pub fn run(args: &ReportArgs) -> Result<i32> {
    // (A summary.json given for its folder: the folder's lock is what says the run goes on.)
    for given in std::iter::once(&args.run).chain(&args.vs) {
        refuse_in_progress(folder_of(given))?;
    }
    let (a_path, a) = load(&args.run)?;
    if args.rebuild {
        return rebuild_in_place(&a_path, &a);
    }
    let a = rebuilt_or(&a_path, a)?;
    let out = match &args.vs {
        None if args.text => table(&a),
        None => markdown(&a),
        Some(other) => {
            let (b_path, b) = load(other)?;
            let b = rebuilt_or(&b_path, b)?;
            let differ = compare::differing_settings(&a, &b);
            if !differ.is_empty() && !args.force {
                bail!(
                    "the two runs ran different loads ({}); compare runs of the same load, or give --force",
                    differ.join("; ")
                );
            }
            let md = compare::markdown(&a, &b, (&label(&a_path), &label(&b_path)));
            if args.text {
                super::plain::from_markdown(&md)
            } else {
                md
            }
        }
    };
    // A closed stdout (`| head`) is not an error worth a message.
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(0)
}

/// The folder a run's summary stands for: the one given, or the one a summary.json is in.
pub fn folder_of(given: &Path) -> &Path {
    match given.parent() {
        // `summary.json` alone: the folder is the current one.
        Some(parent) if given.is_file() && parent.as_os_str().is_empty() => Path::new("."),
        Some(parent) if given.is_file() => parent,
        _ => given,
    }
}

/// `summary`, or, when it is the provisional one of a run whose conductor was killed and its
/// workers left results, the summary rebuilt from them (said on stderr: nothing is written).
fn rebuilt_or(path: &Path, summary: Summary) -> Result<Summary> {
    let dir = folder_of(path);
    Ok(match rebuild::rebuild(dir, &summary, false)? {
        Some(rebuilt) => {
            eprintln!(
                "{}: the run's conductor was killed, and its summary.json is the one written when it started; shown here is the summary rebuilt from its workers' results (`report --rebuild {}` writes it there)",
                path.display(),
                path.display()
            );
            rebuilt
        }
        None => summary,
    })
}

/// `report --rebuild`: the rebuilt summary written over the provisional one (summary.json and
/// summary.md), and its table printed; refused for a run that finished or left no result.
fn rebuild_in_place(path: &Path, summary: &Summary) -> Result<i32> {
    let dir = folder_of(path);
    if !summary.unfinished() {
        bail!(
            "{}'s summary.json is its run's final one (the run ended, or was rebuilt already): there is nothing to rebuild; --rebuild is for a run whose conductor was killed, whose summary.json is the provisional one written when it started",
            dir.display()
        );
    }
    let Some(rebuilt) = rebuild::rebuild(dir, summary, true)? else {
        bail!(
            "none of {}'s workers left a result file ({}): there is nothing to rebuild from (nothing was written); its receipts (sessions/*/input-send-receipts.json) and samples (samples/worker-K.csv) hold what was sent",
            dir.display(),
            crate::paths::RunPaths::new(dir).worker_result(0).display()
        );
    };
    // A run that took the folder again meanwhile (`--force`) is not written over.
    refuse_in_progress(dir)?;
    super::write_files(dir, &rebuilt)?;
    let _ = std::io::stdout().write_all(table(&rebuilt).as_bytes());
    Ok(0)
}

/// A run still writing to `dir` has only the summary of its start there: it is reported once
/// it ends, not rendered as a failed run.
pub fn refuse_in_progress(dir: &Path) -> Result<()> {
    if let Some(pid) = crate::paths::running_owner(dir) {
        // The same lock guards a sweep's folder, which has no summary of its own.
        let sweep = crate::paths::is_sweep(dir) || !crate::paths::sweep_run_folders(dir).is_empty();
        // (Once a level is done, `report` renders its sweep.json: it says the sweep has not
        // finished.)
        let (what, files) = if sweep {
            ("sweep", "no level of it has finished yet")
        } else {
            ("run", "its summary.json is the one written when it started")
        };
        let who = if pid == 0 {
            format!("a {what}")
        } else {
            format!("a {what} (pid {pid})")
        };
        bail!(
            "{} is still being written by {who}: {files}; report it once it ends (its progress is on that {what}'s dashboard or stderr)",
            dir.display()
        );
    }
    Ok(())
}

fn label(path: &Path) -> String {
    path.display().to_string()
}

/// What `report` reads, said when it was given something else.
const REPORT_TAKES: &str = "give a run's output folder or its summary.json; a sweep's folder has sweep.json, read by `report` on the folder";

/// Reads `summary.json` from a run folder, or the file given.
pub fn load(path: &Path) -> Result<(PathBuf, Summary)> {
    load_saying(path, REPORT_TAKES)
}

/// [`load`], saying `takes` (what the command reads) when `path` is not a summary.
pub fn load_saying(path: &Path, takes: &str) -> Result<(PathBuf, Summary)> {
    let file = if path.is_dir() {
        path.join("summary.json")
    } else {
        path.to_path_buf()
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) => {
            // A sweep's folder holds run folders, not a summary: name one to give.
            let runs = crate::paths::sweep_run_folders(path);
            if let (true, Some(run)) = (path.is_dir(), runs.iter().find(|r| *r != "warmup")) {
                let record = if path.join("sweep.json").is_file() {
                    "its sweep.json is read by `report` on the folder"
                } else {
                    "its sweep.json is missing, so it cannot be read as a sweep"
                };
                bail!(
                    "{} is a sweep's folder (its runs: {}), not a run's: give one of its runs, e.g. {} ({record})",
                    path.display(),
                    runs.join(", "),
                    path.join(run).display()
                );
            }
            // A run killed in its first moments (before its provisional summary) left its
            // folder and perhaps its workers' files, but no summary.
            let paths = crate::paths::RunPaths::new(path);
            if path.is_dir() && (paths.lock().exists() || paths.workers_dir().is_dir()) {
                bail!(
                    "{} has no summary.json: its run was killed as it started, before it wrote its first summary (its workers' files, receipts and samples, if any, hold what was sent); run it again",
                    path.display()
                );
            }
            return Err(
                anyhow::anyhow!(e).context(format!("cannot read {}; {takes}", file.display()))
            );
        }
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        if e.is_eof() && !text.trim().is_empty() {
            anyhow::anyhow!(
                "{} is cut short ({e}): it was damaged, or copied before its run finished writing it; copy it again from where the run wrote it",
                file.display()
            )
        } else {
            anyhow::anyhow!("{} is not JSON ({e}); {takes}", file.display())
        }
    })?;
    let is_summary = value["tool"]["name"] == "duplexbench-tui" && value.get("verdict").is_some();
    let Some(version) = value["schema_version"].as_u64().filter(|_| is_summary) else {
        bail!(
            "{} is not a duplexbench-tui summary ({takes})",
            file.display()
        );
    };
    if !(u64::from(OLDEST_READ_SCHEMA_VERSION)..=u64::from(SCHEMA_VERSION)).contains(&version) {
        bail!(
            "{} is a summary of schema_version {version}; this duplexbench-tui reads {OLDEST_READ_SCHEMA_VERSION} to {SCHEMA_VERSION} (re-run with this version, or use the version that wrote it)",
            file.display()
        );
    }
    let summary = serde_json::from_value(value)
        .with_context(|| format!("{} is not a duplexbench-tui summary", file.display()))?;
    Ok((path.to_path_buf(), summary))
}
