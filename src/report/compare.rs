//! `report --vs`: two runs side by side, figure by figure — both values and their ratio — the
//! way hyperfine compares commands. Runs whose loads differ are refused unless `--force`, with
//! the settings that differ named: a ratio of two different loads measures nothing.

use crate::stats::Spread;
use crate::summary::serving::ServingSection;
use crate::summary::Summary;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One compared figure: its name and unit, and its value in each run (None: no sample).
struct Figure {
    name: &'static str,
    unit: &'static str,
    a: Option<f64>,
    b: Option<f64>,
}

/// The settings that must be equal for two runs to compare (or two shards to be one run's),
/// with their values in each run.
pub fn differing_settings(a: &Summary, b: &Summary) -> Vec<String> {
    let (x, y) = (&a.settings, &b.settings);
    let mut out = Vec::new();
    let mut check = |name: &str, u: String, v: String| {
        if u != v {
            out.push(format!("{name}: {u} vs {v}"));
        }
    };
    check(
        "processes",
        x.processes.to_string(),
        y.processes.to_string(),
    );
    check(
        "sessions per process",
        x.sessions_per_process.to_string(),
        y.sessions_per_process.to_string(),
    );
    check(
        "duration",
        format!("{} s", x.duration_s),
        format!("{} s", y.duration_s),
    );
    check(
        "packet",
        format!("{} ms", x.packet_ms),
        format!("{} ms", y.packet_ms),
    );
    check(
        "protocol",
        x.protocol.as_str().to_string(),
        y.protocol.as_str().to_string(),
    );
    check(
        "late threshold",
        format!("{} ms", x.late_threshold_ms),
        format!("{} ms", y.late_threshold_ms),
    );
    check("stagger", x.stagger.to_string(), y.stagger.to_string());
    // What was streamed, not how it was asked for: the same file by another path, or the
    // same samples through other --loops, is the same input.
    let (u, v) = if x.audio.streams_as(&y.audio) {
        Default::default()
    } else {
        (x.audio.to_string(), y.audio.to_string())
    };
    check("audio", u, v);
    check("--no-pace", x.no_pace.to_string(), y.no_pace.to_string());
    // How the client speaks: the same requests, or the runs asked different things.
    let (c, d) = (&x.client, &y.client);
    check(
        "--modalities",
        x.modalities.join(","),
        y.modalities.join(","),
    );
    check(
        "--input-sample-rate",
        c.input_sample_rate.to_string(),
        d.input_sample_rate.to_string(),
    );
    check("--api-version", json(&c.api_version), json(&d.api_version));
    check("--model", json(&c.model), json(&d.model));
    check(
        "--turn-detection",
        json(&c.turn_detection),
        json(&d.turn_detection),
    );
    check(
        "--commit-every",
        json(&c.commit_every_ms),
        json(&d.commit_every_ms),
    );
    check(
        "--interrupt-response",
        json(&c.interrupt_response),
        json(&d.interrupt_response),
    );
    // An openai run of before 2026-12-07 says none: it was a conversation.
    let session_type = |s: &crate::options::Settings| {
        let t = s.client.session_type;
        json(
            &t.or((s.protocol == crate::protocol::Protocol::Openai)
                .then_some(crate::protocol::SessionType::Realtime)),
        )
    };
    check("--session-type", session_type(x), session_type(y));
    out
}

/// A setting as its JSON (`null` when absent), for naming what differs.
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// How the two runs' servers differ, as far as the summaries say: the built-in mock's flags,
/// or a URL. Not a reason to refuse a comparison — the server is what an A/B run compares.
pub fn differing_servers(a: &Summary, b: &Summary) -> Option<String> {
    let server = |s: &Summary| match &s.settings.mock {
        // The flags leave out the protocol, which the conductor gives the mock on its own.
        Some(mock) => format!(
            "the built-in mock (--protocol {} {})",
            s.settings.protocol.as_str(),
            mock.to_flags().join(" ")
        ),
        None => s.settings.url.clone(),
    };
    let (x, y) = (server(a), server(b));
    if x == y {
        return None;
    }
    // Two built-in mocks of one protocol: the flags that differ, not both lists.
    if let (Some(ma), Some(mb)) = (&a.settings.mock, &b.settings.mock) {
        if a.settings.protocol == b.settings.protocol {
            let (fa, fb) = (flag_values(&ma.to_flags()), flag_values(&mb.to_flags()));
            let mut names: Vec<&String> = fa.keys().chain(fb.keys()).collect();
            names.sort();
            names.dedup();
            let said: Vec<String> = names
                .into_iter()
                .filter(|n| fa.get(*n) != fb.get(*n))
                .map(|n| {
                    let show = |v: Option<&String>| match v {
                        None => "(not given)".to_string(),
                        Some(v) if v.is_empty() => "(given)".to_string(),
                        Some(v) => v.clone(),
                    };
                    format!("{n} {} vs {}", show(fa.get(n)), show(fb.get(n)))
                })
                .collect();
            return Some(format!(
                "the built-in mock (--protocol {}) with {}",
                a.settings.protocol.as_str(),
                said.join(", ")
            ));
        }
    }
    Some(format!("{x} vs {y}"))
}

/// How two runs differ, as a comparison says it before its table: their loads (compared
/// anyway, with --force) and their servers.
fn say_differences(out: &mut String, a: &Summary, b: &Summary) {
    let differ = differing_settings(a, b);
    if !differ.is_empty() {
        let _ = writeln!(
            out,
            "The loads differ ({}): ratios compare different loads.\n",
            differ.join("; ")
        );
    }
    if let Some(servers) = differing_servers(a, b) {
        let _ = writeln!(out, "The servers differ: {servers}.\n");
    }
}

/// `--flag value` pairs (a flag without a value has an empty one), by flag.
fn flag_values(flags: &[String]) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut i = 0;
    while i < flags.len() {
        let value = flags.get(i + 1).filter(|v| !v.starts_with("--"));
        out.insert(flags[i].clone(), value.cloned().unwrap_or_default());
        i += if value.is_some() { 2 } else { 1 };
    }
    out
}

/// Client CPU (all workers) per second of one session's streaming, as summary.md says it
/// ([`super::streaming_cpu`]). None for a summary without streaming windows (before 2026-12-03,
/// or a worker that died): the workers' whole CPU (8–16 % more, set-up and closing included)
/// beside another run's streaming figure would show a difference that is not there.
fn cpu_per_session_second(s: &Summary) -> Option<f64> {
    super::streaming_cpu(s).map(super::StreamingCpu::per_session_s)
}

/// A compared figure: its name, unit, and how to read it off a summary (None: no sample).
type FigureOf = (&'static str, &'static str, fn(&Summary) -> Option<f64>);

/// The headline figures a comparison shows, in order.
const FIGURES: &[FigureOf] = &[
    ("late packets", "", |s| {
        Some(s.pacing.counts.late_packets as f64)
    }),
    ("deviation p50", "ms", |s| {
        sent(s).then_some(s.pacing.deviation_ms.p50)
    }),
    ("deviation p99", "ms", |s| {
        sent(s).then_some(s.pacing.deviation_ms.p99)
    }),
    ("deviation max", "ms", |s| {
        sent(s).then_some(s.pacing.deviation_ms.max)
    }),
    ("start lateness p99", "ms", |s| {
        sent(s).then_some(s.pacing.start_lateness_ms.p99)
    }),
    ("server accepted p50", "ms", |s| {
        s.server.accepted_ms.as_ref().map(|q| q.p50)
    }),
    ("server accepted p99", "ms", |s| {
        s.server.accepted_ms.as_ref().map(|q| q.p99)
    }),
    ("server unit lag p50", "ms", |s| {
        s.server.unit_lag_ms.as_ref().map(|q| q.p50)
    }),
    ("server unit lag p99", "ms", |s| {
        s.server.unit_lag_ms.as_ref().map(|q| q.p99)
    }),
    ("server first audio p50", "ms", |s| {
        s.server.first_audio_ms.as_ref().map(|q| q.p50)
    }),
    ("sglang-omni ttfa p95", "ms", |s| {
        serving_ms(s, |v| v.ttfa_s.and_then(|d| d.p95))
    }),
    ("sglang-omni unit_lag p95", "ms", |s| {
        serving_ms(s, |v| v.unit_lag_s.p95)
    }),
    ("sglang-omni late sends", "", |s| {
        s.serving.as_ref().map(|v| v.late_send_count as f64)
    }),
    ("turns ended", "", |s| {
        turns(s).map(|t| t.counts.ended as f64)
    }),
    ("turns answered", "", |s| {
        turns(s).map(|t| t.counts.answered as f64)
    }),
    ("turns unanswered", "", |s| {
        turns(s).map(|t| t.counts.unanswered as f64)
    }),
    ("turns refused", "", |s| {
        turns(s).map(|t| t.counts.refused as f64)
    }),
    ("answers early", "", |s| {
        turns(s).map(|t| t.counts.early as f64)
    }),
    ("first text after end p50", "ms", |s| {
        turns(s).and_then(|t| t.first_text_after_end_ms.as_ref().map(|q| q.p50))
    }),
    ("first text after end p99", "ms", |s| {
        turns(s).and_then(|t| t.first_text_after_end_ms.as_ref().map(|q| q.p99))
    }),
    // vLLM's time to first text: its transcription streams before the input ends, so its
    // after-end figure has no sample.
    ("first text after start p50", "ms", |s| {
        turns(s).and_then(|t| t.first_text_after_start_ms.as_ref().map(|q| q.p50))
    }),
    ("first text after start p99", "ms", |s| {
        turns(s).and_then(|t| t.first_text_after_start_ms.as_ref().map(|q| q.p99))
    }),
    ("first audio after end p50", "ms", |s| {
        turns(s).and_then(|t| t.first_audio_after_end_ms.as_ref().map(|q| q.p50))
    }),
    ("first audio after end p99", "ms", |s| {
        turns(s).and_then(|t| t.first_audio_after_end_ms.as_ref().map(|q| q.p99))
    }),
    ("done after end p50", "ms", |s| {
        turns(s).and_then(|t| t.done_after_end_ms.as_ref().map(|q| q.p50))
    }),
    // Fun-ASR's benchmark figures, named as it prints them (docs/funasr.md).
    ("Fun-ASR first update p50", "ms", |s| {
        funasr(s).and_then(|f| f.first_update_ms_p50)
    }),
    ("Fun-ASR first update p95", "ms", |s| {
        funasr(s).and_then(|f| f.first_update_ms_p95)
    }),
    ("Fun-ASR final after STOP p50", "ms", |s| {
        funasr(s).and_then(|f| f.final_after_stop_ms_p50)
    }),
    ("Fun-ASR final after STOP p95", "ms", |s| {
        funasr(s).and_then(|f| f.final_after_stop_ms_p95)
    }),
    ("Fun-ASR max client response-lag p95", "ms", |s| {
        funasr(s).and_then(|f| f.client_response_lag_ms_p95_max)
    }),
    ("Fun-ASR aggregate audio/wall", "x", |s| {
        funasr(s).and_then(|f| f.aggregate_audio_per_wall)
    }),
    ("Fun-ASR errors", "", |s| funasr(s).map(|f| f.errors as f64)),
    ("client CPU per session-second", "ms", |s| {
        cpu_per_session_second(s).map(|c| c * 1000.0)
    }),
];

/// Whether the run sent a packet: the pacing figures of one that sent none are zeros, not
/// samples (they would read as perfect pacing beside the other run's).
fn sent(s: &Summary) -> bool {
    s.pacing.counts.packets > 0
}

/// The turns of an openai or vllm run.
fn turns(s: &Summary) -> Option<&crate::summary::TurnSummary> {
    s.openai.as_ref().or(s.vllm.as_ref())
}

/// The Fun-ASR benchmark's summary line of a funasr run.
fn funasr(s: &Summary) -> Option<&crate::summary::funasr::BenchSummary> {
    s.funasr.as_ref().map(|f| &f.summary)
}

/// A figure of sglang-omni's serving metrics (seconds) in ms; None for another protocol.
fn serving_ms(s: &Summary, of: fn(&ServingSection) -> Option<f64>) -> Option<f64> {
    s.serving.as_ref().and_then(of).map(|v| v * 1000.0)
}

/// The figures compared, each taken from both summaries; one that neither run has (another
/// protocol's: the native server figures of two openai runs) is left out.
fn figures(a: &Summary, b: &Summary) -> Vec<Figure> {
    FIGURES
        .iter()
        .map(|&(name, unit, of)| Figure {
            name,
            unit,
            a: of(a),
            b: of(b),
        })
        .filter(|f| f.a.is_some() || f.b.is_some())
        .collect()
}

fn value(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if unit.is_empty() => format!("{v:.0}"),
        Some(v) => format!("{v:.3} {unit}"),
        None => "no samples".to_string(),
    }
}

/// The A/B table as Markdown. `labels` name the two runs.
pub fn markdown(a: &Summary, b: &Summary, labels: (&str, &str)) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# duplexbench-tui: {} vs {}\n", labels.0, labels.1);
    let _ = writeln!(
        out,
        "A: {} — {}  \nB: {} — {}\n",
        labels.0,
        super::verdict_line(a),
        labels.1,
        super::verdict_line(b)
    );
    say_differences(&mut out, a, b);
    let _ = writeln!(out, "| figure | A | B | B / A |\n|---|---|---|---|");
    for f in figures(a, b) {
        let ratio = match (f.a, f.b) {
            (Some(x), Some(y)) if x > 0.0 => format!("{:.2}×", y / x),
            (Some(x), Some(y)) if x == 0.0 && y == 0.0 => "=".to_string(),
            _ => "–".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {ratio} |",
            f.name,
            value(f.a, f.unit),
            value(f.b, f.unit)
        );
    }
    let _ = writeln!(
        out,
        "\nOne run each: whether a difference is larger than the run-to-run spread needs repeats \
         (run each side several times and compare the spread)."
    );
    out
}

/// One side of a comparison of sweeps: its label, each level's repeats (by total sessions),
/// and why it stopped before its last planned level, if it did (sweep.json's `stopped_early`).
pub type SweepSide<'a> = (&'a str, &'a BTreeMap<u64, Vec<Summary>>, Option<&'a str>);

/// A figure over a level's repeats: `1.234 ms [1.100–1.400]`, or the one value of one run.
fn spread_value(spread: Option<Spread>, runs: usize, unit: &str) -> String {
    // The range in the figure's precision, without its unit.
    let bare = |v: f64| {
        if unit.is_empty() {
            format!("{v:.0}")
        } else {
            format!("{v:.3}")
        }
    };
    match spread {
        Some(s) if runs > 1 => format!(
            "{} [{}–{}]",
            value(Some(s.median), unit),
            bare(s.min),
            bare(s.max)
        ),
        Some(s) => value(Some(s.median), unit),
        None => value(None, unit),
    }
}

/// A side's verdict at a level whose runs were not all pacing-qualified and complete, each
/// verdict with why (`pacing-qualified, NOT complete (8 of 16 sessions rejected)`, and `in 1 of
/// 2 runs` with repeats); None when they all were, and the level compares like for like.
fn level_verdict(runs: &[Summary]) -> Option<String> {
    let mut said: Vec<(String, usize)> = Vec::new();
    for s in runs {
        if s.verdict.pacing_qualified && s.verdict.complete {
            continue;
        }
        let verdict = format!("{} ({})", super::verdict_line(s), verdict_why(s));
        match said.iter_mut().find(|(v, _)| *v == verdict) {
            Some((_, n)) => *n += 1,
            None => said.push((verdict, 1)),
        }
    }
    if said.is_empty() {
        return None;
    }
    let each: Vec<String> = said
        .into_iter()
        .map(|(verdict, n)| match runs.len() {
            1 => verdict,
            all => format!("{verdict} in {n} of {all} runs"),
        })
        .collect();
    Some(each.join("; "))
}

/// Why a run was not pacing-qualified or not complete, in counts: its late packets, the
/// sessions the server rejected or did not complete; else the verdict's first reason (a run
/// that sent nothing, the server's error events, …).
fn verdict_why(s: &Summary) -> String {
    let n = s.sessions.configured;
    let late = s.pacing.counts.late_packets;
    let mut why = Vec::new();
    if late > 0 {
        why.push(crate::sampler::attribution::plural(late, "late packet"));
    }
    if s.sessions.rejected > 0 {
        why.push(format!("{} of {n} sessions rejected", s.sessions.rejected));
    }
    if s.sessions.incomplete > 0 {
        why.push(format!(
            "{} of {n} sessions incomplete",
            s.sessions.incomplete
        ));
    }
    match s.verdict.reasons.first() {
        Some(reason) if why.is_empty() => reason.clone(),
        _ => why.join(", "),
    }
}

/// Whether B differs from A by more than the run-to-run spread: their ranges over the repeats
/// do not overlap. Judged only with repeats on both sides. Ranges apart by a hair (medians
/// within 1 % of each other, e.g. 40.175 vs 40.111 ms) say so: a difference beyond a spread
/// that narrow is real and still too small to matter.
fn beyond_spread(a: Option<Spread>, b: Option<Spread>, runs: (usize, usize)) -> &'static str {
    match (a, b) {
        (Some(a), Some(b)) if runs.0 > 1 && runs.1 > 1 => {
            if b.min > a.max || b.max < a.min {
                let scale = a.median.abs().max(b.median.abs());
                if (b.median - a.median).abs() < 0.01 * scale {
                    "yes, under 1 %"
                } else {
                    "yes"
                }
            } else {
                "no"
            }
        }
        (Some(_), Some(_)) => "– (needs repeats)",
        _ => "–",
    }
}

/// The A/B of two sweeps as Markdown: each level both have, every figure as the median of
/// its repeats with their range, the ratio of the medians, and whether the difference is
/// beyond the run-to-run spread (the ranges do not overlap), as hyperfine compares.
pub fn sweeps_markdown(a: SweepSide<'_>, b: SweepSide<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# duplexbench-tui: {} vs {}\n", a.0, b.0);
    let count = |side: SweepSide<'_>| -> String {
        let runs: usize = side.1.values().map(Vec::len).sum();
        // A sweep cancelled or stopped early says so: its missing levels are not the plan's.
        let ended = side
            .2
            .map(|why| format!("; stopped early: {why}"))
            .unwrap_or_default();
        let levels = side.1.len();
        format!(
            "{levels} level{}, {runs} run{}{ended}",
            if levels == 1 { "" } else { "s" },
            if runs == 1 { "" } else { "s" }
        )
    };
    let _ = writeln!(
        out,
        "A: {} — {}  \nB: {} — {}\n",
        a.0,
        count(a),
        b.0,
        count(b)
    );
    // What differs between the two, as a run's comparison says it (with --force the loads may
    // differ; the servers may always): from the first level both ran, every level being the
    // same load but for its sessions.
    let first_common =
        a.1.iter()
            .find_map(|(k, xs)| Some((xs.first()?, b.1.get(k)?.first()?)));
    if let Some((x, y)) = first_common {
        say_differences(&mut out, x, y);
    }
    let _ = writeln!(
        out,
        "Each figure is the median of a level's repeats with their range [min–max]; B / A is \
         the ratio of the medians. A difference is beyond the run-to-run spread when the two \
         ranges do not overlap (judged only with repeats on both sides: `sweep --repeats N`); \
         `yes, under 1 %` when the medians are within 1 % of each other all the same. A level \
         where a side's runs were not all pacing-qualified and complete gives that side's \
         verdict under its heading: its figures are not like for like (a server that rejected \
         sessions served fewer; a client that fell behind sent late).\n"
    );
    let only = |x: SweepSide<'_>, y: SweepSide<'_>| -> Vec<String> {
        x.1.keys()
            .filter(|k| !y.1.contains_key(k))
            .map(u64::to_string)
            .collect()
    };
    for (sessions, a_runs) in a.1 {
        let Some(b_runs) = b.1.get(sessions) else {
            continue;
        };
        let _ = writeln!(
            out,
            "## {}: {} vs {} runs\n",
            crate::sampler::attribution::plural(*sessions, "session"),
            a_runs.len(),
            b_runs.len()
        );
        let verdicts: Vec<String> = [("A", a_runs), ("B", b_runs)]
            .into_iter()
            .filter_map(|(side, runs)| Some(format!("{side}: {}", level_verdict(runs)?)))
            .collect();
        if !verdicts.is_empty() {
            let _ = writeln!(out, "{}\n", verdicts.join("  \n"));
        }
        let _ = writeln!(
            out,
            "| figure | A | B | B / A | beyond the spread |\n|---|---|---|---|---|"
        );
        for &(name, unit, of) in FIGURES {
            // Over the runs that have the figure (a run without samples has none); one no run
            // of either side has (another protocol's) is left out.
            let values = |runs: &[Summary]| runs.iter().filter_map(of).collect::<Vec<f64>>();
            let (xs, ys) = (values(a_runs), values(b_runs));
            if xs.is_empty() && ys.is_empty() {
                continue;
            }
            let (x, y) = (
                Spread::of(xs.iter().copied()),
                Spread::of(ys.iter().copied()),
            );
            let ratio = match (x, y) {
                (Some(x), Some(y)) if x.median > 0.0 => format!("{:.2}×", y.median / x.median),
                (Some(x), Some(y)) if x.median == 0.0 && y.median == 0.0 => "=".to_string(),
                _ => "–".to_string(),
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {ratio} | {} |",
                spread_value(x, xs.len(), unit),
                spread_value(y, ys.len(), unit),
                beyond_spread(x, y, (xs.len(), ys.len()))
            );
        }
        out.push('\n');
    }
    for (side, levels) in [("A", only(a, b)), ("B", only(b, a))] {
        if !levels.is_empty() {
            let _ = writeln!(
                out,
                "Levels only {side} ran (not compared): {} sessions.",
                levels.join(", ")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(min: f64, median: f64, max: f64) -> Option<Spread> {
        Some(Spread { min, median, max })
    }

    #[test]
    fn a_difference_is_beyond_the_spread_only_when_the_ranges_do_not_overlap() {
        let a = spread(1.0, 1.5, 2.0);
        assert_eq!(beyond_spread(a, spread(2.1, 2.5, 3.0), (3, 3)), "yes");
        assert_eq!(beyond_spread(a, spread(0.1, 0.5, 0.9), (3, 3)), "yes");
        assert_eq!(beyond_spread(a, spread(1.9, 2.5, 3.0), (3, 3)), "no");
        // Apart, by less than 1 % of the medians.
        let narrow = spread(40.1, 40.111, 40.12);
        assert_eq!(
            beyond_spread(narrow, spread(40.15, 40.175, 40.2), (3, 3)),
            "yes, under 1 %"
        );
        assert_eq!(
            beyond_spread(a, spread(2.1, 2.5, 3.0), (1, 3)),
            "– (needs repeats)"
        );
        assert_eq!(beyond_spread(a, None, (3, 3)), "–");
    }

    #[test]
    fn a_spread_shows_its_median_and_range_in_the_figures_precision() {
        let s = spread(1.0, 1.25, 2.0);
        assert_eq!(spread_value(s, 3, "ms"), "1.250 ms [1.000–2.000]");
        assert_eq!(spread_value(spread(0.0, 1.0, 3.0), 3, ""), "1 [0–3]");
        assert_eq!(spread_value(s, 1, "ms"), "1.250 ms", "one run: its value");
        assert_eq!(spread_value(None, 3, "ms"), "no samples");
    }
}
