//! The flags of a run spread over several hosts, validated: which shard of the run this is
//! (`--shard-index`/`--shard-count`, or the job engine's variables), the run's name
//! (`--run-id`) and the wall-clock instant its start gate opens (`--start-at`). docs/multihost.md.

use crate::cli::RunArgs;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The most shards of one run: a session's event ids hold the shard in 8 bits.
pub const MAX_SHARDS: u32 = 256;

/// This run is shard `index` of `count` of the run named `run_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
    pub run_id: String,
}

impl Shard {
    /// The run-wide number of session `session` of worker `worker` in a layout of `processes`
    /// × `sessions_per_process`: shard-major, then worker-major.
    pub fn session_number(
        &self,
        processes: u32,
        sessions_per_process: u32,
        worker: u32,
        session: u32,
    ) -> u64 {
        let per_shard = u64::from(processes) * u64::from(sessions_per_process);
        u64::from(self.index) * per_shard
            + u64::from(worker) * u64::from(sessions_per_process)
            + u64::from(session)
    }
}

/// The shard of a run from its flags, else from the job engine's variables (`env` reads one):
/// Kubernetes' `JOB_COMPLETION_INDEX`, Slurm's `SLURM_PROCID` and `SLURM_NTASKS`. `None` for
/// a run on one host.
pub fn shard_of(args: &RunArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Shard>> {
    let from_env = |name: &str| -> Result<Option<u32>> {
        match env(name) {
            None => Ok(None),
            Some(text) => text.trim().parse::<u32>().map(Some).with_context(|| {
                format!("the environment variable {name}=`{text}` is not a shard number; unset it or give --shard-index and --shard-count")
            }),
        }
    };
    let index = match args.shard_index {
        Some(i) => Some(i),
        None => match from_env("JOB_COMPLETION_INDEX")? {
            Some(i) => Some(i),
            None => from_env("SLURM_PROCID")?,
        },
    };
    let count = match args.shard_count {
        Some(n) => Some(n),
        None if index.is_some() => from_env("SLURM_NTASKS")?,
        None => None,
    };
    let (index, count) = match (index, count) {
        (None, None) if args.run_id.is_none() => return Ok(None),
        (None, None) => (0, 1),
        (Some(_), None) => bail!("--shard-index (or JOB_COMPLETION_INDEX) needs --shard-count N: the number of shards of the run (a Kubernetes Indexed Job's completions)"),
        (None, Some(_)) => bail!("--shard-count needs --shard-index I (or JOB_COMPLETION_INDEX, SLURM_PROCID): which shard this host runs"),
        (Some(i), Some(n)) => (i, n),
    };
    if count == 0 || count > MAX_SHARDS {
        bail!("--shard-count {count}: give 1 to {MAX_SHARDS} shards");
    }
    if index >= count {
        bail!(
            "--shard-index {index} is not below --shard-count {count}: shards are numbered 0 to {}",
            count - 1
        );
    }
    let run_id = match (&args.run_id, env("SLURM_JOB_ID")) {
        (Some(id), _) => id.clone(),
        (None, Some(job)) => format!("slurm-{}", job.trim()),
        (None, None) if count == 1 => "run".to_string(),
        (None, None) => bail!("--run-id is needed with --shard-count {count}: give every shard the same id (e.g. the job's name), so that `merge` can tell the shards of one run"),
    };
    if run_id.is_empty()
        || run_id.len() > 128
        || !run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        bail!("--run-id `{run_id}`: give 1 to 128 letters, digits, `-`, `_`, `.` or `:`");
    }
    Ok(Some(Shard {
        index,
        count,
        run_id,
    }))
}

/// `--start-at`: an RFC 3339 time (`2026-12-01T12:00:00Z`, fractions allowed, or with an offset) or `+30s`
/// from `now_unix_s`; the Unix time it names. A time in the past is refused.
pub fn start_at(text: &str, now_unix_s: f64) -> Result<f64> {
    let text = text.trim();
    let at = if let Some(offset) = text.strip_prefix('+') {
        let d = crate::cli::parse_duration(offset).map_err(|e| {
            anyhow::anyhow!("--start-at `{text}`: {e}; give +30s or an RFC 3339 UTC time such as 2026-12-01T12:00:00Z")
        })?;
        now_unix_s + d.as_secs_f64()
    } else {
        // RFC 3339 allows an offset (`+01:00`, what `date -Iseconds` writes) and a space for
        // the `T` (`date --rfc-3339=seconds`); humantime reads UTC (`Z`) with a `T` alone:
        // the local time is read as UTC, then moved by the offset.
        let spaced = text.len() > 10 && text.as_bytes()[10] == b' ' && text.is_char_boundary(10);
        let text_t = if spaced {
            format!("{}T{}", &text[..10], &text[11..])
        } else {
            text.to_string()
        };
        let (utc_text, offset_s) = split_offset(&text_t);
        let t = humantime::parse_rfc3339(&utc_text).map_err(|e| {
            anyhow::anyhow!("--start-at `{text}` is not a time ({e}); give an RFC 3339 time such as 2026-12-01T12:00:00Z (or with an offset, +01:00), or +30s from now")
        })?;
        t.duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| anyhow::anyhow!("--start-at `{text}` is before 1970"))?
            .as_secs_f64()
            - offset_s
    };
    if at < now_unix_s {
        bail!(
            "--start-at `{text}` is {:.1} s in the past; give a later time (every shard must be set up by then)",
            now_unix_s - at
        );
    }
    if at > now_unix_s + 7.0 * 86_400.0 {
        bail!("--start-at `{text}` is more than 7 days away; give a time within a week");
    }
    Ok(at)
}

/// An RFC 3339 time with a numeric offset (`…T12:00:00+01:00`) as the same wall time in UTC
/// (`…T12:00:00Z`) and the offset in seconds (+3600); any other text as it is, with 0.
fn split_offset(text: &str) -> (String, f64) {
    let b = text.as_bytes();
    let n = b.len();
    if n > 6 && text.contains('T') && (b[n - 6] == b'+' || b[n - 6] == b'-') && b[n - 3] == b':' {
        let digits = |s: &str| s.len() == 2 && s.bytes().all(|c| c.is_ascii_digit());
        let (hh, mm) = (&text[n - 5..n - 3], &text[n - 2..]);
        let hours: f64 = hh.parse().unwrap_or(f64::MAX);
        let minutes: f64 = mm.parse().unwrap_or(f64::MAX);
        // An offset of 24 h or more, or of 60 minutes, is no offset: the text is refused.
        if digits(hh) && digits(mm) && hours < 24.0 && minutes < 60.0 {
            let sign = if b[n - 6] == b'+' { 1.0 } else { -1.0 };
            return (
                format!("{}Z", &text[..n - 6]),
                sign * (hours * 3600.0 + minutes * 60.0),
            );
        }
    }
    (text.to_string(), 0.0)
}

/// An RFC 3339 UTC time with milliseconds, for Unix seconds `unix_s`.
pub fn rfc3339(unix_s: f64) -> String {
    // Rounded to the millisecond: 1796169829.705 is 1796169829.70499… as a float.
    let ms = (unix_s.max(0.0) * 1000.0).round() as u64;
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use std::collections::HashMap;

    fn args(flags: &[&str]) -> RunArgs {
        let mut argv = vec!["duplexbench-tui", "run"];
        argv.extend_from_slice(flags);
        match Cli::try_parse_from(argv).unwrap().command {
            Some(Command::Run(run)) => run,
            _ => unreachable!(),
        }
    }

    fn with_env(flags: &[&str], vars: &[(&str, &str)]) -> Result<Option<Shard>> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        shard_of(&args(flags), &|name| vars.get(name).cloned())
    }

    #[test]
    fn no_shard_flags_and_no_job_variables_mean_one_host() {
        assert_eq!(with_env(&[], &[]).unwrap(), None);
    }

    #[test]
    fn flags_name_the_shard_and_the_run_issue_16() {
        let s = with_env(
            &["--shard-index", "2", "--shard-count", "3", "--run-id", "r1"],
            &[],
        )
        .unwrap()
        .unwrap();
        assert_eq!((s.index, s.count, s.run_id.as_str()), (2, 3, "r1"));
        assert_eq!(s.session_number(2, 4, 1, 3), 2 * 8 + 4 + 3);
    }

    #[test]
    fn kubernetes_gives_the_index_and_the_flag_the_count_issue_16() {
        let s = with_env(
            &["--shard-count", "4", "--run-id", "job"],
            &[("JOB_COMPLETION_INDEX", "3")],
        )
        .unwrap()
        .unwrap();
        assert_eq!((s.index, s.count), (3, 4));
    }

    #[test]
    fn slurm_gives_index_count_and_run_id_issue_16() {
        let s = with_env(
            &[],
            &[
                ("SLURM_PROCID", "1"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_JOB_ID", "77"),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!((s.index, s.count, s.run_id.as_str()), (1, 2, "slurm-77"));
    }

    #[test]
    fn bad_shards_are_refused_with_the_flag_to_give() {
        let err = |flags: &[&str], vars: &[(&str, &str)]| {
            format!("{:#}", with_env(flags, vars).unwrap_err())
        };
        assert!(err(&["--shard-index", "0"], &[]).contains("--shard-count"));
        assert!(err(
            &["--shard-index", "3", "--shard-count", "3", "--run-id", "r"],
            &[]
        )
        .contains("not below"));
        assert!(err(&["--shard-index", "0", "--shard-count", "2"], &[]).contains("--run-id"));
        assert!(
            err(&["--shard-count", "2"], &[("JOB_COMPLETION_INDEX", "x")])
                .contains("JOB_COMPLETION_INDEX")
        );
        assert!(err(&["--run-id", "a b"], &[]).contains("--run-id"));
    }

    #[test]
    fn start_at_takes_an_offset_or_a_utc_time_and_refuses_the_past() {
        assert_eq!(start_at("+30s", 1000.0).unwrap(), 1030.0);
        let t = start_at("2030-01-01T00:00:00.5Z", 1_893_456_000.0 - 10.0).unwrap();
        assert_eq!(t, 1_893_456_000.5);
        assert!(
            format!("{:#}", start_at("2001-01-01T00:00:00Z", 1.9e9).unwrap_err())
                .contains("in the past")
        );
        assert!(format!("{:#}", start_at("soon", 0.0).unwrap_err()).contains("RFC 3339"));
        assert_eq!(rfc3339(1_893_456_000.5), "2030-01-01T00:00:00.500Z");
        // With an offset, as `date -Iseconds` writes it (it was refused as not a time).
        let now = 1_893_456_000.0 - 7200.0;
        assert_eq!(
            start_at("2030-01-01T01:00:00+01:00", now).unwrap(),
            1_893_456_000.0
        );
        assert_eq!(
            start_at("2029-12-31T23:30:00.25-00:30", now).unwrap(),
            1_893_456_000.25
        );
        assert_eq!(
            start_at("2030-01-01T00:00:00+00:00", now).unwrap(),
            1_893_456_000.0
        );
        // `date --rfc-3339=seconds` writes a space for the `T`.
        assert_eq!(
            start_at("2030-01-01 01:00:00+01:00", now).unwrap(),
            1_893_456_000.0
        );
        // No such offsets: refused, not read as days away.
        for bad in ["2030-01-01T00:00:00+99:59", "2030-01-01T00:00:00+01:60"] {
            let err = format!("{:#}", start_at(bad, now).unwrap_err());
            assert!(err.contains("is not a time"), "{bad}: {err}");
        }
    }
}
