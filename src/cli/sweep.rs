//! `sweep`'s own flags; the rest are the run's ([`super::RunArgs`]): a sweep is the same run at
//! several loads.

use super::{parse_duration, RunArgs};
use clap::Args;
use std::time::Duration;

#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// Levels of sessions per worker process, e.g. 16,32,64,128 or a doubling range 16..1024 (a level's total is --processes × this).
    #[arg(
        long = "sessions",
        short = 's',
        visible_alias = "clients",
        value_name = "LEVELS",
        conflicts_with = "levels_total",
        required_unless_present = "levels_total",
        help_heading = "Sweep"
    )]
    pub levels_per_process: Option<String>,
    /// Levels of total sessions, each spread evenly over --processes, e.g. 64,128,256 or 64..1024; instead of --sessions.
    #[arg(
        long = "concurrency",
        short = 'c',
        value_name = "LEVELS",
        help_heading = "Sweep"
    )]
    pub levels_total: Option<String>,
    /// Run every level this many times; its figures are then min / median / max.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20), help_heading = "Sweep")]
    pub repeats: u32,
    /// First a warm-up run at the lowest level whose figures are discarded (its pacing is still checked), as long as a level or as long as given, e.g. --warmup 5s [default: none].
    #[arg(long, num_args = 0..=1, value_name = "DURATION", value_parser = parse_duration, help_heading = "Sweep")]
    pub warmup: Option<Option<Duration>>,
    /// Pause between two runs, so the server settles and sockets close.
    #[arg(long, default_value = "2s", value_parser = parse_duration, help_heading = "Sweep")]
    pub cooldown: Duration,
    /// An objective the server's knee is judged by, repeatable: a figure of the protocol, <, <=, > or >=, and a number, e.g. serving.unit_lag_ms.p99<200 (native) or first_update_ms.p95<800 (funasr).
    #[arg(long = "slo", value_name = "EXPR", help_heading = "Sweep")]
    pub slos: Vec<String>,
    /// Give the --inject-* faults only to levels of at least this many sessions in total (a test of the sweep's early stop).
    #[arg(long, hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub inject_from_sessions: Option<u32>,
    #[command(flatten)]
    pub run: RunArgs,
}
