//! A sweep's command line validated: the levels (`--sessions 16,32,64`, `--sessions 16..1024`,
//! or totals with `-c`), the `--slo` objectives, and one run plan per level, made by the run's
//! own validation so a sweep level is exactly the run its options describe.

use super::figures;
use crate::cli::{RunArgs, SweepArgs};
use crate::options::{self, RunPlan};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most levels one sweep runs.
pub const MAX_LEVELS: usize = 32;

/// A validated sweep.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    pub output_dir: PathBuf,
    /// No `--output`: the sweep takes a folder of its own, `output_dir` (`runs/sweep-<time
    /// stamp>`) or, when that exists, the first free one of `output_dir-2`, `-3`, … (see
    /// [`SweepPlan::moved_to`]).
    pub new_output: bool,
    pub levels: Vec<LevelPlan>,
    pub repeats: u32,
    pub cooldown: Duration,
    pub slos: Vec<Slo>,
    /// The warm-up run (`--warmup`), at the first level's load, into `warmup/`.
    pub warmup: Option<RunPlan>,
    pub force: bool,
    pub command_line: String,
}

impl SweepPlan {
    /// The same sweep in `dir` instead of `output_dir`: every level's and the warm-up's folder
    /// moves with it (a folder of their own for two sweeps started in the same second).
    pub fn moved_to(mut self, dir: &Path) -> SweepPlan {
        let from = std::mem::replace(&mut self.output_dir, dir.to_path_buf());
        let runs = self
            .levels
            .iter_mut()
            .flat_map(|level| level.runs.iter_mut());
        for run in runs.chain(self.warmup.as_mut()) {
            if let Ok(folder) = run.output_dir.strip_prefix(&from) {
                run.output_dir = dir.join(folder);
            }
        }
        self
    }
}

/// One level: its load and a run plan per repeat (folders `level-0064`, `level-0064-r2`, …).
#[derive(Debug, Clone)]
pub struct LevelPlan {
    pub sessions_total: u64,
    pub runs: Vec<RunPlan>,
}

/// The folder of a level's `repeat` (from 1).
pub fn level_folder(sessions_total: u64, repeat: u32) -> String {
    match repeat {
        1 => format!("level-{sessions_total:04}"),
        r => format!("level-{sessions_total:04}-r{r}"),
    }
}

/// Parses levels: numbers and doubling ranges, comma-separated, e.g. `16,32,64`, `16..1024`
/// (16, 32, …, 1024) or `8,16..64`. A range doubles from its start while it stays at or below
/// its end, and ends with its end. The levels must rise strictly. `flag` names the option in
/// errors.
pub fn parse_levels(text: &str, flag: &str) -> Result<Vec<u32>> {
    let usage = "give e.g. 16,32,64 or a doubling range 16..1024";
    let number = |word: &str| -> Result<u32> {
        match word.trim().parse::<u32>() {
            Ok(n) if (1..=65_535).contains(&n) => Ok(n),
            _ => bail!(
                "{flag} `{text}`: `{}` is not a number of sessions from 1 to 65535; {usage}",
                word.trim()
            ),
        }
    };
    let mut levels: Vec<u32> = Vec::new();
    for item in text.split(',') {
        if item.trim().is_empty() {
            bail!("{flag} `{text}` has an empty level; {usage}");
        }
        match item.split_once("..") {
            Some((from, to)) => {
                let (from, to) = (number(from)?, number(to)?);
                if to <= from {
                    bail!("{flag} `{text}`: the range {from}..{to} does not rise; {usage}");
                }
                let mut n = from;
                while n < to {
                    levels.push(n);
                    n = n.saturating_mul(2);
                }
                levels.push(to);
            }
            None => levels.push(number(item)?),
        }
        if levels.len() > MAX_LEVELS {
            bail!("{flag} `{text}` gives more than {MAX_LEVELS} levels; give fewer");
        }
    }
    if let Some(w) = levels.windows(2).find(|w| w[1] <= w[0]) {
        bail!(
            "{flag} `{text}`: the levels must rise ({} then {}); {usage}",
            w[0],
            w[1]
        );
    }
    Ok(levels)
}

/// A comparison of an `--slo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Comparison {
    #[serde(rename = "<")]
    Below,
    #[serde(rename = "<=")]
    AtMost,
    #[serde(rename = ">")]
    Above,
    #[serde(rename = ">=")]
    AtLeast,
}

impl Comparison {
    fn symbol(self) -> &'static str {
        match self {
            Comparison::Below => "<",
            Comparison::AtMost => "<=",
            Comparison::Above => ">",
            Comparison::AtLeast => ">=",
        }
    }
}

/// A service-level objective: a protocol figure (a dotted path such as `unit_lag_ms.p99`), a
/// comparison and a bound, judged on a level's median.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Slo {
    pub figure: String,
    pub comparison: Comparison,
    pub bound: f64,
}

impl Slo {
    /// Parses `figure<bound` (or `<=`, `>`, `>=`); the figure is checked by [`check_slos`].
    pub fn parse(text: &str) -> Result<Slo> {
        let usage = "give a figure, a comparison and a number, e.g. serving.unit_lag_ms.p99<200";
        let Some(at) = text.find(['<', '>']) else {
            bail!("--slo `{text}` has no comparison (<, <=, > or >=); {usage}");
        };
        let (figure, rest) = text.split_at(at);
        let (comparison, bound) = match rest.as_bytes() {
            [b'<', b'=', ..] => (Comparison::AtMost, &rest[2..]),
            [b'>', b'=', ..] => (Comparison::AtLeast, &rest[2..]),
            [b'<', ..] => (Comparison::Below, &rest[1..]),
            _ => (Comparison::Above, &rest[1..]),
        };
        let figure = figure.trim();
        if figure.is_empty() {
            bail!("--slo `{text}` names no figure; {usage}");
        }
        let bound = match bound.trim().parse::<f64>() {
            Ok(b) if b.is_finite() => b,
            _ => bail!(
                "--slo `{text}`: `{}` is not a number; {usage}",
                bound.trim()
            ),
        };
        Ok(Slo {
            figure: figure.to_string(),
            comparison,
            bound,
        })
    }

    /// Whether `value` meets the objective.
    pub fn holds(&self, value: f64) -> bool {
        match self.comparison {
            Comparison::Below => value < self.bound,
            Comparison::AtMost => value <= self.bound,
            Comparison::Above => value > self.bound,
            Comparison::AtLeast => value >= self.bound,
        }
    }

    /// `unit_lag_ms.p99<200`.
    pub fn text(&self) -> String {
        format!("{}{}{}", self.figure, self.comparison.symbol(), self.bound)
    }
}

/// Refuses an `--slo` whose figure the protocol's summary does not have, listing those it has,
/// or one that has no sample at a level that went well, naming the figure to give instead.
pub fn check_slos(slos: &[Slo], protocol: crate::protocol::Protocol) -> Result<()> {
    let paths = figures::latency_paths(protocol);
    for slo in slos {
        if !paths.contains(&slo.figure) {
            bail!(
                "--slo `{}`: `{}` is not a figure of the {} protocol's summary; the figures are {}",
                slo.text(),
                slo.figure,
                protocol.as_str(),
                paths.join(", ")
            );
        }
        // A figure without a sample does not hold: the server's knee would be below the
        // first level however fast the server was.
        if protocol == crate::protocol::Protocol::Vllm {
            if slo.figure.starts_with("first_text_after_end_ms.") {
                bail!(
                    "--slo `{}`: vLLM's transcription streams while the input arrives, so its first text comes before the input ends and `first_text_after_end_ms` has no sample; give its time to first text from the start of the input, `{}`",
                    slo.text(),
                    slo.figure
                        .replace("first_text_after_end_ms", "first_text_after_start_ms")
                );
            }
            if slo.figure.starts_with("first_audio_") {
                bail!(
                    "--slo `{}`: vLLM's realtime API transcribes and sends no audio, so `{}` has no sample; give first_text_after_start_ms or done_after_end_ms",
                    slo.text(),
                    slo.figure
                );
            }
        }
    }
    Ok(())
}

/// Validates a sweep: every level's run plan is made (and checked) before anything starts.
pub fn validate(args: &SweepArgs, command_line: String, tui: bool) -> Result<SweepPlan> {
    let base = &args.run;
    let totals = level_totals(args)?;
    if base.output_jsonl.is_some() {
        bail!("--output-jsonl is not written by a sweep: each level's summary.json holds its Fun-ASR section (report LEVEL_FOLDER renders it)");
    }
    // A sweep judges each level by whether the client kept its pace, and stops at the first it
    // did not: unpaced, every level would be called the client's fault.
    if base.no_pace {
        bail!("--no-pace: a sweep finds its knees from paced levels (it stops where the client falls behind its schedule, which --no-pace leaves unjudged); run an unpaced load with `run --no-pace` at each size instead");
    }
    let slos = args
        .slos
        .iter()
        .map(|t| Slo::parse(t))
        .collect::<Result<Vec<_>>>()?;
    check_slos(&slos, base.speak.protocol)?;
    let output_dir = base.output.clone().unwrap_or_else(|| {
        PathBuf::from("runs").join(format!("sweep-{}", crate::clock::utc_stamp()))
    });
    let mut levels = Vec::with_capacity(totals.len());
    for &total in &totals {
        let mut runs = Vec::new();
        for repeat in 1..=args.repeats {
            let folder = level_folder(total, repeat);
            let line = format!("{command_line}  # {folder}");
            let plan = options::validate(&level_args(args, &output_dir, total, &folder), line, tui)
                .with_context(|| format!("the level of {total} sessions"))?;
            runs.push(plan);
        }
        levels.push(LevelPlan {
            sessions_total: total,
            runs,
        });
    }
    let warmup = match &args.warmup {
        None => None,
        Some(length) => {
            // A warm-up longer than the level's audio file: said of --warmup, not of a
            // --duration the user never gave.
            let level = &levels[0].runs[0].settings;
            let rate = f64::from(level.client.input_sample_rate);
            if let (Some(length), Some(samples)) = (length, level.audio.total_samples()) {
                if length.as_secs_f64() * rate > samples as f64 + 0.5 {
                    bail!(
                        "--warmup {} is longer than the levels' audio ({}); give a --warmup of at most that, or --warmup without a length (as long as a level)",
                        humantime::format_duration(*length),
                        options::audio_length(samples as f64 / rate),
                    );
                }
            }
            let run = warmup_args(level_args(args, &output_dir, totals[0], "warmup"), *length)?;
            let line = format!("{command_line}  # warmup");
            Some(options::validate(&run, line, tui).context("--warmup")?)
        }
    };
    Ok(SweepPlan {
        new_output: base.output.is_none(),
        output_dir,
        levels,
        repeats: args.repeats,
        cooldown: args.cooldown,
        slos,
        warmup,
        force: base.force,
        command_line,
    })
}

/// The levels' total sessions, from `--sessions` (per process) or `--concurrency` (in total).
fn level_totals(args: &SweepArgs) -> Result<Vec<u64>> {
    let processes = args.run.processes;
    Ok(match (&args.levels_per_process, &args.levels_total) {
        (Some(text), _) => parse_levels(text, "--sessions")?
            .into_iter()
            .map(|s| u64::from(s) * u64::from(processes))
            .collect(),
        (None, Some(text)) => {
            let levels = parse_levels(text, "--concurrency")?;
            if let Some(bad) = levels.iter().find(|&&n| n % processes != 0) {
                bail!("--concurrency level {bad} does not spread evenly over --processes {processes}; give multiples of {processes}, or --sessions for the sessions of each process");
            }
            levels.into_iter().map(u64::from).collect()
        }
        (None, None) => {
            bail!(
                "sweep needs its levels: --sessions 16,32,64 (per process) or -c 64,128 (in total)"
            )
        }
    })
}

/// The run's arguments of a level of `total` sessions, into `folder` of the sweep's
/// `output_dir`; no injections below `--inject-from-sessions`.
fn level_args(args: &SweepArgs, output_dir: &Path, total: u64, folder: &str) -> RunArgs {
    let mut run = args.run.clone();
    run.sessions = (total / u64::from(args.run.processes)) as u32;
    run.concurrency = None;
    run.output = Some(output_dir.join(folder));
    if args
        .inject_from_sessions
        .is_some_and(|from| total < u64::from(from))
    {
        run.inject_stall_ms = None;
        run.inject_disk_stall_mb = None;
        run.inject_cpu_starvation_ms = None;
    }
    run
}

/// The warm-up's arguments from the first level's: `length` of its audio if given (silence of
/// that length, or the first `length` of an `--audio` file or Fun-ASR's speech), and no
/// injections.
fn warmup_args(mut run: RunArgs, length: Option<Duration>) -> Result<RunArgs> {
    if let Some(length) = length {
        run.duration = Some(length);
    }
    run.inject_stall_ms = None;
    run.inject_disk_stall_mb = None;
    run.inject_cpu_starvation_ms = None;
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_up_of_a_given_length_cuts_the_levels_audio() {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let argv = [
            "duplexbench-tui",
            "sweep",
            "--protocol",
            "funasr",
            "--clients",
            "2,4",
            "--warmup",
            "2s",
        ];
        let Some(Command::Sweep(args)) = Cli::try_parse_from(argv).unwrap().command else {
            unreachable!()
        };
        let plan = validate(&args, String::new(), false).unwrap();
        let warmup = plan.warmup.unwrap().settings;
        assert_eq!(warmup.duration_s, 2.0, "the first 2 s of the speech sample");
        assert_eq!(
            plan.levels[0].runs[0].settings.audio.total_samples(),
            Some(93_249)
        );
        // Longer than the levels' audio: said of --warmup (it read "--duration 10s is longer").
        let mut longer = args.clone();
        longer.warmup = Some(Some(Duration::from_secs(10)));
        let err = validate(&longer, String::new(), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--warmup 10s is longer than the levels' audio (5s 828ms)"),
            "{err}"
        );
    }

    #[test]
    fn a_list_of_levels_is_taken_as_given() {
        assert_eq!(
            parse_levels("16,32,64,128", "--sessions").unwrap(),
            [16, 32, 64, 128]
        );
        assert_eq!(parse_levels(" 8 ", "--sessions").unwrap(), [8]);
    }

    #[test]
    fn a_range_doubles_and_ends_with_its_end() {
        assert_eq!(
            parse_levels("16..1024", "--sessions").unwrap(),
            [16, 32, 64, 128, 256, 512, 1024]
        );
        assert_eq!(
            parse_levels("10..100", "--sessions").unwrap(),
            [10, 20, 40, 80, 100]
        );
        assert_eq!(
            parse_levels("4,8..32", "--sessions").unwrap(),
            [4, 8, 16, 32]
        );
    }

    #[test]
    fn bad_levels_name_the_flag_and_what_to_give() {
        for (text, says) in [
            ("64,32", "must rise"),
            ("16,16", "must rise"),
            ("64..16", "does not rise"),
            ("0,8", "not a number of sessions"),
            ("lots", "not a number of sessions"),
            ("8,,16", "empty level"),
        ] {
            let err = parse_levels(text, "-c").unwrap_err().to_string();
            assert!(err.starts_with("-c `"), "{err}");
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn more_than_32_levels_are_refused() {
        let many: Vec<String> = (1..=33).map(|n| n.to_string()).collect();
        let err = parse_levels(&many.join(","), "--sessions")
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 32 levels"), "{err}");
        assert_eq!(parse_levels("1..65535", "--sessions").unwrap().len(), 17);
    }

    #[test]
    fn an_slo_is_a_figure_a_comparison_and_a_number() {
        let slo = Slo::parse("first_update_ms.p95<800").unwrap();
        assert_eq!(
            (slo.figure.as_str(), slo.comparison, slo.bound),
            ("first_update_ms.p95", Comparison::Below, 800.0)
        );
        assert!(slo.holds(799.9) && !slo.holds(800.0));
        let slo = Slo::parse("unit_lag_ms.p99 <= 200").unwrap();
        assert_eq!(slo.comparison, Comparison::AtMost);
        assert!(slo.holds(200.0));
        assert_eq!(slo.text(), "unit_lag_ms.p99<=200");
        assert_eq!(
            Slo::parse("x>=1.5").unwrap().comparison,
            Comparison::AtLeast
        );
        assert!(Slo::parse("x>2").unwrap().holds(3.0));
        for bad in ["unit_lag_ms.p99", "<200", "unit_lag_ms.p99<fast", "a<inf"] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_slo_on_a_figure_the_protocol_lacks_lists_the_figures_it_has() {
        use crate::protocol::Protocol;
        let slo = [Slo::parse("first_update_ms.p95<800").unwrap()];
        let err = check_slos(&slo, Protocol::Native).unwrap_err().to_string();
        assert!(err.contains("not a figure of the native protocol"), "{err}");
        assert!(err.contains("unit_lag_ms.p99"), "{err}");
        assert!(check_slos(&slo, Protocol::Funasr).is_ok());
        let slo = [Slo::parse("unit_lag_ms.p99<200").unwrap()];
        assert!(check_slos(&slo, Protocol::Native).is_ok());
    }

    /// vLLM's text comes before the input ends: an objective on its first text after the end
    /// could never hold (QA of 2026-12-07), so it is refused with the figure to give.
    #[test]
    fn a_vllm_slo_on_first_text_after_end_is_refused_naming_first_text_after_start() {
        use crate::protocol::Protocol;
        let slo = [Slo::parse("first_text_after_end_ms.p99<1000").unwrap()];
        let err = check_slos(&slo, Protocol::Vllm).unwrap_err().to_string();
        assert!(err.contains("`first_text_after_start_ms.p99`"), "{err}");
        assert!(check_slos(&slo, Protocol::Openai).is_ok());
        let slo = [Slo::parse("first_audio_after_end_ms.p99<1000").unwrap()];
        assert!(check_slos(&slo, Protocol::Vllm).is_err());
        let slo = [Slo::parse("first_text_after_start_ms.p99<1000").unwrap()];
        assert!(check_slos(&slo, Protocol::Vllm).is_ok());
    }
}
