//! `report --vs`: two runs side by side, figure by figure — both values and their ratio — the
//! way hyperfine compares commands. Runs whose loads differ are refused unless `--force`, with
//! the settings that differ named: a ratio of two different loads measures nothing.

use crate::summary::Summary;
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
    check("audio", x.audio.to_string(), y.audio.to_string());
    check("--no-pace", x.no_pace.to_string(), y.no_pace.to_string());
    out
}

/// Client CPU (all workers) per second of one session's streaming.
fn cpu_per_session_second(s: &Summary) -> Option<f64> {
    let cpu: f64 = s
        .processes
        .iter()
        .filter(|p| p.role == crate::contract::Role::Worker)
        .map(|p| p.cpu_seconds)
        .sum();
    let session_seconds = s.layout.sessions_total as f64 * s.settings.duration_s;
    (session_seconds > 0.0).then(|| cpu / session_seconds)
}

/// The figures compared, each taken from both summaries.
fn figures(a: &Summary, b: &Summary) -> Vec<Figure> {
    let both = |name, unit, of: &dyn Fn(&Summary) -> Option<f64>| Figure {
        name,
        unit,
        a: of(a),
        b: of(b),
    };
    vec![
        both("late packets", "", &|s| {
            Some(s.pacing.counts.late_packets as f64)
        }),
        both("deviation p50", "ms", &|s| Some(s.pacing.deviation_ms.p50)),
        both("deviation p99", "ms", &|s| Some(s.pacing.deviation_ms.p99)),
        both("deviation max", "ms", &|s| Some(s.pacing.deviation_ms.max)),
        both("start lateness p99", "ms", &|s| {
            Some(s.pacing.start_lateness_ms.p99)
        }),
        both("server accepted p50", "ms", &|s| {
            s.server.accepted_ms.as_ref().map(|q| q.p50)
        }),
        both("server accepted p99", "ms", &|s| {
            s.server.accepted_ms.as_ref().map(|q| q.p99)
        }),
        both("server unit lag p50", "ms", &|s| {
            s.server.unit_lag_ms.as_ref().map(|q| q.p50)
        }),
        both("server unit lag p99", "ms", &|s| {
            s.server.unit_lag_ms.as_ref().map(|q| q.p99)
        }),
        both("server first audio p50", "ms", &|s| {
            s.server.first_audio_ms.as_ref().map(|q| q.p50)
        }),
        both("client CPU per session-second", "ms", &|s| {
            cpu_per_session_second(s).map(|c| c * 1000.0)
        }),
    ]
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
    let differ = differing_settings(a, b);
    if !differ.is_empty() {
        let _ = writeln!(
            out,
            "The loads differ ({}): ratios compare different loads.\n",
            differ.join("; ")
        );
    }
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
