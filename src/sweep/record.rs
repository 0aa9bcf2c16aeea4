//! `sweep.json`: the result model of a sweep, one struct that feeds sweep.json, sweep.md, the
//! plot, the per-level lines and the exit code. docs/sweep.md documents every key.

use super::figures::RunFigures;
use super::knees::Knees;
use super::plan::Slo;
use crate::host::HostFacts;
use crate::protocol::Protocol;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// 1: the first layout.
pub const SCHEMA_VERSION: u32 = 1;

/// duplexbench-tui sweep (`sweep.json`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SweepRecord {
    pub schema_version: u32,
    pub tool_version: String,
    pub command_line: String,
    pub started_at: String,
    pub protocol: Protocol,
    /// The server driven (`null`: the built-in mock, started anew for every run).
    pub url: Option<String>,
    pub processes: u32,
    /// The audio each session streamed at every level, as summary.json's `settings.audio`
    /// (absent in sweeps written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<crate::audio::AudioSource>,
    /// The output modalities the sessions asked for, as summary.json's `settings.modalities`
    /// (`["text"]` for an OpenAI transcription session); they decide whether the tables show a
    /// first-audio figure. Absent in sweeps written before it was recorded (then they do).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modalities: Vec<String>,
    pub duration_s: f64,
    pub packet_ms: u32,
    pub repeats: u32,
    pub cooldown_s: f64,
    /// The levels asked for, in total sessions.
    pub planned_sessions: Vec<u64>,
    pub slos: Vec<Slo>,
    pub host: HostFacts,
    /// The warm-up run (`--warmup`): its figures are not in any level; its pacing is checked.
    pub warmup: Option<RunFigures>,
    pub levels: Vec<Level>,
    /// Why the sweep ended before its last planned level, if it did.
    pub stopped_early: Option<String>,
    /// Ctrl-C or a signal ended it; the levels listed are those that ran, the last of them cut
    /// short when it has fewer `runs` than `repeats` (the cancel came between its repeats).
    pub cancelled: bool,
    pub knees: Knees,
}

pub use crate::stats::Spread;

/// One load level: every repeat's run, and their figures as min / median / max.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Level {
    pub sessions_total: u64,
    pub processes: u32,
    pub sessions_per_process: u32,
    pub runs: Vec<RunFigures>,
    /// Every repeat was pacing-qualified: the figures measure the server.
    pub qualified: bool,
    /// Every repeat was complete.
    pub complete: bool,
    pub late_packets: u64,
    /// Sessions that sent audio, over the repeats (`null`: not recorded). A level where no
    /// session streamed measured neither the client nor the server, and places no knee.
    pub sessions_streamed: Option<Spread>,
    pub client_cpu_cores: Option<Spread>,
    pub audio_s_per_s: Option<Spread>,
    pub server_events_per_s: Option<Spread>,
    /// The protocol's latency figures, by dotted path (`null`: no sample in any repeat).
    pub latency_ms: BTreeMap<String, Option<Spread>>,
    /// Each `--slo`, judged on the median.
    pub slos: Vec<SloCheck>,
}

/// An `--slo` at one level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SloCheck {
    pub slo: String,
    /// The figure's median (`null`: no sample, which does not hold).
    pub value: Option<f64>,
    pub holds: bool,
}

/// The start of `stopped_early` in the sweep.json written after each level but the last: a
/// sweep whose files say so did not finish (it was still running, or was killed).
pub const UNFINISHED: &str = "the sweep did not finish";

impl SweepRecord {
    /// The latency figures its tables, lines and plot show (figures::headline).
    pub fn headline(&self) -> &'static [&'static str] {
        let audio_out = self.modalities.is_empty() || self.modalities.iter().any(|m| m == "audio");
        super::figures::headline(self.protocol, audio_out)
    }

    /// The level a cancel cut short between its repeats (fewer runs than `repeats`): it can
    /// only be the last.
    pub fn cut_short(&self) -> Option<&Level> {
        self.levels.last().filter(|l| l.cut_short(self.repeats))
    }

    /// This record as the files written between levels say it: cancelled, and stopped early
    /// because it did not finish (of `planned` levels), unless it already says why it stops.
    pub fn unfinished(&self, planned: usize) -> SweepRecord {
        let mut r = self.clone();
        r.cancelled = true;
        if r.stopped_early.is_none() {
            r.stopped_early = Some(format!(
                "{UNFINISHED}: these files were written after level {} of {planned} (the sweep was still running, or was killed there); the levels listed are those that finished",
                r.levels.len()
            ));
        }
        r
    }
}

impl Level {
    /// A level of `sessions_total` sessions over `processes` from its runs, its `--slo`s
    /// judged on the medians.
    pub fn of(sessions_total: u64, processes: u32, runs: Vec<RunFigures>, slos: &[Slo]) -> Level {
        let mut latency_ms: BTreeMap<String, Option<Spread>> = BTreeMap::new();
        for name in runs.iter().flat_map(|r| r.latency_ms.keys()) {
            if !latency_ms.contains_key(name) {
                let values = runs
                    .iter()
                    .filter_map(|r| r.latency_ms.get(name).copied().flatten());
                latency_ms.insert(name.clone(), Spread::of(values));
            }
        }
        let slos = slos
            .iter()
            .map(|slo| {
                let value = latency_ms
                    .get(&slo.figure)
                    .copied()
                    .flatten()
                    .map(|s| s.median);
                SloCheck {
                    slo: slo.text(),
                    value,
                    holds: value.is_some_and(|v| slo.holds(v)),
                }
            })
            .collect();
        Level {
            sessions_total,
            processes,
            sessions_per_process: (sessions_total / u64::from(processes.max(1))) as u32,
            qualified: !runs.is_empty() && runs.iter().all(|r| r.pacing_qualified),
            complete: !runs.is_empty() && runs.iter().all(|r| r.complete),
            late_packets: runs.iter().map(|r| r.late_packets).sum(),
            sessions_streamed: Spread::of(
                runs.iter()
                    .filter_map(|r| r.sessions_streamed.map(|n| n as f64)),
            ),
            client_cpu_cores: Spread::of(runs.iter().map(|r| r.client_cpu_cores)),
            audio_s_per_s: Spread::of(runs.iter().filter_map(|r| r.audio_s_per_s)),
            server_events_per_s: Spread::of(runs.iter().filter_map(|r| r.server_events_per_s)),
            latency_ms,
            slos,
            runs,
        }
    }

    /// Whether a cancel cut the level short between its repeats: it ran fewer than `repeats`.
    pub fn cut_short(&self, repeats: u32) -> bool {
        self.runs.len() < repeats as usize
    }

    /// Whether every repeat streamed: at least one session sent audio (a level recorded
    /// before this was known counts as streamed).
    pub fn streamed(&self) -> bool {
        self.sessions_streamed.is_none_or(|s| s.min > 0.0)
    }

    /// The median of a latency figure, if any repeat had a sample.
    pub fn latency(&self, name: &str) -> Option<Spread> {
        self.latency_ms.get(name).copied().flatten()
    }
}

/// The JSON Schema of `sweep.json` (docs/sweep.schema.json).
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(SweepRecord);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_is_min_median_max() {
        let s = Spread::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        assert_eq!(Spread::of([1.0, 4.0]).unwrap().median, 2.5);
        assert!(Spread::of([]).is_none());
    }

    /// `UPDATE_SCHEMA=1 cargo test --lib committed_sweep_schema` writes it anew.
    #[test]
    fn the_committed_sweep_schema_is_the_one_the_types_generate() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/sweep.schema.json");
        let generated = schema_json();
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/sweep.schema.json is not what the sweep's types generate: run UPDATE_SCHEMA=1 cargo test --lib committed_sweep_schema"
        );
    }
}
