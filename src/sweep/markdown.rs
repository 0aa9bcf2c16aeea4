//! Renderings of a [`SweepRecord`]: `sweep.md` (the table, the knees, the plot, every
//! level's latency figures), the text table printed at the end, and the one line per level
//! that headless sweeps print and the dashboard's Sweep panel lists.

use super::figures::{self, RunFigures};
use super::record::{Level, Spread, SweepRecord};
use super::PLOT_FILE;
use std::fmt::Write as _;

/// `12.3`, or with repeats `12.3 (11.9–13.0)`; `–` without a sample. Repeats that agree at
/// the shown precision give one figure: `12.3 (12.3–12.3)` says nothing more.
fn cell(s: Option<Spread>, decimals: usize) -> String {
    let Some(s) = s else {
        return "–".to_string();
    };
    // A value that rounds to zero reads `0.0`, not `-0.0`.
    let shown = |v: f64| {
        let text = format!("{v:.decimals$}");
        match text.strip_prefix('-') {
            Some(digits) if digits.chars().all(|c| c == '0' || c == '.') => digits.to_string(),
            _ => text,
        }
    };
    let (min, max) = (shown(s.min), shown(s.max));
    if min == max {
        shown(s.median)
    } else {
        format!("{} ({min}–{max})", shown(s.median))
    }
}

fn client(level: &Level) -> &'static str {
    if !level.streamed() {
        return "–";
    }
    match (
        level.qualified,
        level.runs.iter().any(|r| r.verdict.starts_with("unpaced")),
    ) {
        (_, true) => "unpaced",
        (true, false) => "qualified",
        (false, false) => "UNQUALIFIED",
    }
}

/// `yes`, `NO`, or `NO (0 of 2 streamed)` when sessions were refused or failed before
/// streaming.
fn complete(level: &Level) -> String {
    match level.sessions_streamed {
        _ if level.complete => "yes".to_string(),
        Some(s) if s.min < level.sessions_total as f64 => {
            format!(
                "NO ({} of {} streamed)",
                cell(Some(s), 0),
                level.sessions_total
            )
        }
        _ => "NO".to_string(),
    }
}

/// The table's columns: the fixed ones, then the protocol's headline latencies.
fn header(record: &SweepRecord) -> Vec<String> {
    let mut h: Vec<String> = [
        "sessions",
        "P × S",
        "client",
        "complete",
        "late",
        "client CPU",
        "audio s/s",
        "events/s",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    h.extend(record.headline().iter().map(|f| f.to_string()));
    if !record.slos.is_empty() {
        h.push("SLOs".to_string());
    }
    h
}

fn row(record: &SweepRecord, level: &Level) -> Vec<String> {
    // A level a cancel cut short between its repeats says so where its figures are.
    let sessions = if level.cut_short(record.repeats) {
        format!(
            "{} ({} of {} repeats)",
            level.sessions_total,
            level.runs.len(),
            record.repeats
        )
    } else {
        level.sessions_total.to_string()
    };
    let mut r = vec![
        sessions,
        format!("{} × {}", level.processes, level.sessions_per_process),
        client(level).to_string(),
        complete(level),
        level.late_packets.to_string(),
        cell(level.client_cpu_cores, 2),
        cell(level.audio_s_per_s, 1),
        cell(level.server_events_per_s, 0),
    ];
    r.extend(record.headline().iter().map(|f| cell(level.latency(f), 1)));
    if !record.slos.is_empty() {
        let broken: Vec<&str> = level
            .slos
            .iter()
            .filter(|c| !c.holds)
            .map(|c| c.slo.as_str())
            .collect();
        r.push(if broken.is_empty() {
            "held".to_string()
        } else {
            format!("broken: {}", broken.join(", "))
        });
    }
    r
}

fn markdown_table(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let _ = writeln!(out, "| {} |", r.join(" | "));
        if i == 0 {
            let _ = writeln!(out, "|{}", "---|".repeat(r.len()));
        }
    }
    out
}

/// The per-level table as text lines: the header, then a line per level.
pub fn table_lines(record: &SweepRecord) -> Vec<String> {
    let mut rows = vec![header(record)];
    rows.extend(record.levels.iter().map(|l| row(record, l)));
    crate::report::plain::aligned(&rows, crate::report::plain::Align::Right)
}

fn knee_text(k: &super::knees::Knee) -> String {
    match k.sessions_total {
        Some(n) => format!("**{n} sessions**: {}", k.reason),
        None => format!("**none**: {}", k.reason),
    }
}

/// The text printed at the end of a sweep: the table and the knees.
pub fn text(record: &SweepRecord) -> String {
    let mut out = table_lines(record).join("\n");
    out.push('\n');
    let k = &record.knees;
    let plain = |k: &super::knees::Knee| knee_text(k).replace("**", "");
    let _ = writeln!(out, "client's knee: {}", plain(&k.client));
    let _ = writeln!(
        out,
        "server's knee (throughput): {}",
        plain(&k.server_throughput)
    );
    if let Some(slo) = &k.server_slo {
        let _ = writeln!(out, "server's knee (--slo): {}", plain(slo));
    }
    if let Some(why) = &record.stopped_early {
        let _ = writeln!(out, "stopped early: {why}");
    }
    out
}

/// One line for a finished run of a level (headless progress, the dashboard's Sweep panel).
pub fn run_line(
    headline: &[&str],
    level: (usize, usize),
    sessions: u64,
    run: &RunFigures,
) -> String {
    let figures = headline
        .iter()
        .map(|f| match run.latency_ms.get(*f).copied().flatten() {
            Some(v) => format!("{f} {v:.1}"),
            None => format!("{f} –"),
        })
        .collect::<Vec<_>>()
        .join("  ");
    format!(
        "sweep: level {}/{} {sessions} sessions{}: {}; late {}; client {:.2} cores; audio {} s/s; events {}/s; {figures} → {}",
        level.0,
        level.1,
        if run.repeat > 1 { format!(" (repeat {})", run.repeat) } else { String::new() },
        run.verdict,
        run.late_packets,
        run.client_cpu_cores,
        run.audio_s_per_s.map_or("–".to_string(), |v| format!("{v:.1}")),
        run.server_events_per_s.map_or("–".to_string(), |v| format!("{v:.0}")),
        run.folder
    )
}

/// `sweep.md`.
pub fn markdown(record: &SweepRecord) -> String {
    let mut out = String::new();
    intro(&mut out, record);
    knee_section(&mut out, record);
    levels(&mut out, record);
    plot(&mut out);
    latency_figures(&mut out, record);
    verdict_reasons(&mut out, record);
    out
}

/// The title, the command line, what was run against what, and whether it ended early.
fn intro(out: &mut String, record: &SweepRecord) {
    let _ = writeln!(
        out,
        "# duplexbench-tui sweep: {} level{} of {} protocol\n",
        record.levels.len(),
        if record.levels.len() == 1 { "" } else { "s" },
        record.protocol.as_str()
    );
    let _ = writeln!(out, "`{}`\n", record.command_line);
    let target = record
        .url
        .clone()
        .unwrap_or_else(|| "the built-in mock".to_string());
    let _ = writeln!(
        out,
        "Started {} against {target}; {} per level, {} repeat{}, {} s cooldown; host: {} ({} logical CPUs), kernel {}.\n",
        record.started_at,
        match (&record.audio, record.duration_s > 0.0) {
            (Some(audio), true) => format!("{:.0} s of audio ({audio})", record.duration_s),
            (None, true) => format!("{:.0} s of audio", record.duration_s),
            (_, false) => "the audio".to_string(),
        },
        record.repeats,
        if record.repeats == 1 { "" } else { "s (figures: median (min–max), one figure where the repeats agree to the digits shown)" },
        record.cooldown_s,
        record.host.cpu_model,
        record.host.logical_cpus,
        record.host.kernel
    );
    if record.cancelled {
        let _ = match record.cut_short() {
            Some(cut) => writeln!(
                out,
                "**Cancelled**: the levels below are those that ran; the level of {} sessions was cut short after {} of {} repeats.\n",
                cut.sessions_total,
                cut.runs.len(),
                record.repeats
            ),
            None => writeln!(
                out,
                "**Cancelled**: the levels below are those that finished.\n"
            ),
        };
    }
    if let Some(why) = &record.stopped_early {
        let _ = writeln!(out, "**Stopped early**: {why}\n");
    }
}

/// `## Knees`: the client's, the server's by throughput and by `--slo`.
fn knee_section(out: &mut String, record: &SweepRecord) {
    let _ = writeln!(out, "## Knees\n");
    let k = &record.knees;
    let _ = writeln!(out, "- The client's knee: {}", knee_text(&k.client));
    let _ = writeln!(
        out,
        "- The server's knee by throughput: {}",
        knee_text(&k.server_throughput)
    );
    if let Some(slo) = &k.server_slo {
        let slos: Vec<String> = record
            .slos
            .iter()
            .map(|s| format!("`{}`", s.text()))
            .collect();
        let _ = writeln!(
            out,
            "- The server's knee by {}: {}",
            slos.join(", "),
            knee_text(slo)
        );
    }
}

/// `## Levels`: one row per level, and links to their runs' summaries.
fn levels(out: &mut String, record: &SweepRecord) {
    let _ = writeln!(out, "\n## Levels\n");
    let mut rows = vec![header(record)];
    rows.extend(record.levels.iter().map(|l| row(record, l)));
    out.push_str(&markdown_table(&rows));
    let _ = writeln!(
        out,
        "\nEach level's run folder holds its own summary.md: {}.\n",
        record
            .levels
            .iter()
            .flat_map(|l| &l.runs)
            .map(|r| format!("[{0}]({0}/summary.md)", r.folder))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(w) = &record.warmup {
        let _ = writeln!(
            out,
            "Warm-up ([{0}]({0}/summary.md), figures discarded): {1}; {2} late packets.\n",
            w.folder, w.verdict, w.late_packets
        );
    }
}

/// `## Plot`: sweep.svg and how to read it.
fn plot(out: &mut String) {
    let _ = writeln!(out, "## Plot\n");
    let _ = writeln!(out, "![latency and throughput against load]({PLOT_FILE})\n");
    let _ = writeln!(out, "Top: throughput (audio seconds per wall second) against total sessions, with the line a server that keeps up would follow; bottom: the headline latencies. Unqualified levels are drawn hollow, a level a cancel cut short between its repeats is crossed; the vertical lines are the client's knee (grey), the server's by throughput (orange) and by `--slo` (brown). docs/sweep.md says how to read it.\n");
}

/// `## Latency figures (ms)`: each latency path against the levels.
fn latency_figures(out: &mut String, record: &SweepRecord) {
    let _ = writeln!(out, "## Latency figures (ms)\n");
    let names = figures::latency_paths(record.protocol);
    let mut rows = vec![std::iter::once("figure".to_string())
        .chain(record.levels.iter().map(|l| l.sessions_total.to_string()))
        .collect::<Vec<_>>()];
    for name in &names {
        rows.push(
            std::iter::once(format!("`{name}`"))
                .chain(record.levels.iter().map(|l| cell(l.latency(name), 1)))
                .collect(),
        );
    }
    out.push_str(&markdown_table(&rows));
}

/// `## Verdict reasons`, when any run had one.
fn verdict_reasons(out: &mut String, record: &SweepRecord) {
    let reasons: Vec<String> = record
        .levels
        .iter()
        .flat_map(|l| &l.runs)
        .filter(|r| !r.reasons.is_empty())
        .map(|r| format!("- {}: {}", r.folder, r.reasons.join("; ")))
        .collect();
    if !reasons.is_empty() {
        let _ = writeln!(out, "\n## Verdict reasons\n\n{}", reasons.join("\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::knees::{self, Point};
    use crate::sweep::plan::Slo;
    use std::collections::BTreeMap;

    fn run(
        folder: &str,
        sessions: u64,
        qualified: bool,
        throughput: f64,
        unit_lag_p99: f64,
    ) -> RunFigures {
        let latency_ms: BTreeMap<String, Option<f64>> =
            figures::latency_paths(crate::protocol::Protocol::Native)
                .into_iter()
                .map(|name| {
                    // Ours has the tail unit in: the table must show sglang-omni's.
                    let v = match name.as_str() {
                        "serving.unit_lag_ms.p99" => unit_lag_p99,
                        "unit_lag_ms.p99" => 41.0,
                        _ => 1.0,
                    };
                    (name, Some(v))
                })
                .collect();
        RunFigures {
            folder: folder.to_string(),
            repeat: 1,
            pacing_qualified: qualified,
            complete: true,
            cancelled: false,
            verdict: figures::verdict_words(qualified, false, true),
            reasons: if qualified {
                vec![]
            } else {
                vec!["12 late packets".to_string()]
            },
            sessions_streamed: Some(sessions),
            session_error: None,
            late_packets: if qualified { 0 } else { 12 },
            deviation_p99_ms: 2.0,
            max_deviation_ms: 4.0,
            client_cpu_cores: 0.1,
            audio_s: throughput * 10.0,
            streaming_wall_s: 10.0,
            audio_s_per_s: Some(throughput),
            server_events: 1000,
            server_events_per_s: Some(100.0),
            latency_ms,
        }
    }

    /// Three levels: 8 and 16 qualified, 32 not; the objective breaks at 16.
    fn record() -> SweepRecord {
        let slos = vec![Slo::parse("serving.unit_lag_ms.p99<10").unwrap()];
        let levels: Vec<Level> = [
            (8, true, 8.0, 5.0),
            (16, true, 15.9, 12.0),
            (32, false, 20.0, 90.0),
        ]
        .into_iter()
        .map(|(n, q, t, lag)| {
            Level::of(
                n,
                1,
                vec![run(&format!("level-{n:04}"), n, q, t, lag)],
                &slos,
            )
        })
        .collect();
        let points: Vec<Point> = levels.iter().map(Point::of).collect();
        SweepRecord {
            schema_version: crate::sweep::record::SCHEMA_VERSION,
            tool_version: "0.1.0".to_string(),
            command_line: "duplexbench-tui sweep -s 8,16,32".to_string(),
            started_at: "2026-12-02T00:00:00Z".to_string(),
            protocol: crate::protocol::Protocol::Native,
            url: None,
            processes: 1,
            audio: Some(crate::audio::AudioSource::Silence),
            modalities: vec!["audio".to_string()],
            duration_s: 10.0,
            packet_ms: 80,
            repeats: 1,
            cooldown_s: 2.0,
            planned_sessions: vec![8, 16, 32, 64],
            knees: knees::find(&points, true),
            slos,
            host: crate::host::HostFacts {
                cpu_model: "AMD EPYC".to_string(),
                logical_cpus: 2,
                kernel: "6.18".to_string(),
                ..Default::default()
            },
            warmup: None,
            levels,
            stopped_early: Some("the client was pacing-unqualified at 32 sessions".to_string()),
            cancelled: false,
        }
    }

    /// A run compared with a sweep is pointed at the sweep's level of its own size (it was
    /// pointed at the first level, which the comparison then refused as another load).
    #[test]
    fn a_run_is_pointed_at_the_sweep_level_of_its_size() {
        let r = record();
        assert_eq!(crate::sweep::level_folder_for(&r, Some(16)), "level-0016");
        assert_eq!(crate::sweep::level_folder_for(&r, Some(12)), "level-0008");
        assert_eq!(crate::sweep::level_folder_for(&r, None), "level-0008");
    }

    /// The files a sweep writes between levels say that it did not finish (a sweep killed
    /// there read as a finished one); a reason it stops already is kept.
    #[test]
    fn the_files_between_levels_say_the_sweep_did_not_finish() {
        let mut r = record();
        r.stopped_early = None;
        let between = r.unfinished(4);
        assert!(between.cancelled);
        assert_eq!(
            between.stopped_early.as_deref(),
            Some("the sweep did not finish: these files were written after level 3 of 4 (the sweep was still running, or was killed there); the levels listed are those that finished")
        );
        let stopping = record().unfinished(4);
        assert_eq!(
            stopping.stopped_early.as_deref(),
            Some("the client was pacing-unqualified at 32 sessions")
        );
    }

    #[test]
    fn the_sweep_report_shows_the_knees_the_table_and_the_plot() {
        let r = record();
        let md = markdown(&r);
        insta::assert_snapshot!(md);
        assert!(md.contains("- The client's knee: **16 sessions**"), "{md}");
        assert!(
            md.contains("by `serving.unit_lag_ms.p99<10`: **8 sessions**"),
            "{md}"
        );
        assert!(
            md.contains("| 32 | 1 × 32 | UNQUALIFIED | yes | 12 |"),
            "{md}"
        );
        assert!(md.contains("![latency and throughput against load](sweep.svg)"));
        let text = text(&r);
        insta::assert_snapshot!(text);
        assert!(
            text.contains("broken: serving.unit_lag_ms.p99<10"),
            "{text}"
        );
        let svg = crate::sweep::plot::svg(&r).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("server knee (--slo)"),
            "{svg}"
        );
    }

    #[test]
    fn repeats_show_their_range_unless_they_agree_to_the_digits_shown() {
        let spread = |min, median, max| Some(Spread { min, median, max });
        assert_eq!(cell(None, 1), "–");
        assert_eq!(cell(spread(12.0, 12.0, 12.0), 1), "12.0");
        assert_eq!(cell(spread(12.31, 12.32, 12.34), 1), "12.3");
        assert_eq!(cell(spread(11.9, 12.3, 13.0), 1), "12.3 (11.9–13.0)");
        assert_eq!(cell(spread(0.104, 0.11, 0.116), 2), "0.11 (0.10–0.12)");
        assert_eq!(cell(spread(-0.04, 0.01, 0.04), 1), "0.0");
        assert_eq!(cell(spread(-0.4, -0.04, 0.3), 1), "0.0 (-0.4–0.3)");
    }

    /// An OpenAI transcription sweep's table had a first-audio column, empty at every level.
    #[test]
    fn the_table_shows_a_first_audio_column_only_for_sessions_that_asked_for_audio() {
        let mut r = record();
        r.protocol = crate::protocol::Protocol::Openai;
        for (modalities, first_audio) in
            [(vec!["text"], false), (vec!["audio"], true), (vec![], true)]
        {
            r.modalities = modalities.iter().map(|m| m.to_string()).collect();
            let h = header(&r);
            assert_eq!(
                h.iter().any(|c| c.contains("first_audio")),
                first_audio,
                "{modalities:?}: {h:?}"
            );
            assert!(h.contains(&"done_after_end_ms.p99".to_string()), "{h:?}");
        }
        r.protocol = crate::protocol::Protocol::Vllm;
        r.modalities = vec!["audio".to_string()];
        assert!(!header(&r).iter().any(|c| c.contains("first_audio")));
    }

    /// A sweep of 2 repeats cancelled after the first repeat of its level of 16: that level is
    /// marked, and places no knee while its repeat was qualified; it set the knees at 16 as
    /// though it were whole (QA of 2026-12-07). An unqualified repeat still counts.
    #[test]
    fn a_level_cut_short_by_a_cancel_is_marked_and_places_no_knee_unless_it_failed() {
        let slos = vec![Slo::parse("serving.unit_lag_ms.p99<100").unwrap()];
        let sweep = |last_qualified: bool| {
            let mut r = record();
            r.repeats = 2;
            r.slos = slos.clone();
            r.cancelled = true;
            r.stopped_early = None;
            r.levels = vec![
                Level::of(
                    8,
                    1,
                    vec![
                        run("level-0008", 8, true, 8.0, 5.0),
                        run("level-0008-r2", 8, true, 8.0, 5.0),
                    ],
                    &slos,
                ),
                Level::of(
                    16,
                    1,
                    vec![run("level-0016", 16, last_qualified, 16.0, 5.0)],
                    &slos,
                ),
            ];
            r.knees = knees::of_levels(&r.levels, r.repeats, true);
            r
        };
        let r = sweep(true);
        assert_eq!(r.cut_short().map(|l| l.sessions_total), Some(16));
        for knee in [
            &r.knees.client,
            &r.knees.server_throughput,
            r.knees.server_slo.as_ref().unwrap(),
        ] {
            assert_eq!(knee.sessions_total, Some(8), "{knee:?}");
            assert!(
                knee.reason.ends_with(
                    "; the level of 16 sessions was cut short by the cancel (1 of 2 repeats run), so it places no knee"
                ),
                "{knee:?}"
            );
        }
        let md = markdown(&r);
        assert!(md.contains("| 16 (1 of 2 repeats) | 1 × 16 |"), "{md}");
        assert!(
            md.contains("the level of 16 sessions was cut short after 1 of 2 repeats"),
            "{md}"
        );
        assert!(text(&r).contains("16 (1 of 2 repeats)"));
        // The plot marks it too (its points looked like a whole level's).
        let svg = crate::sweep::plot::svg(&r).unwrap();
        assert!(
            svg.contains("16 sessions: cut short (1 of 2 repeats)"),
            "{svg}"
        );
        assert!(!crate::sweep::plot::svg(&record())
            .unwrap()
            .contains("cut short"));

        let r = sweep(false);
        assert_eq!(r.knees.client.sessions_total, Some(8));
        assert!(
            r.knees.client.reason.contains("not at 16"),
            "{:?}",
            r.knees.client
        );
        assert!(!r.knees.client.reason.contains("cut short"));
    }

    #[test]
    fn a_finished_run_is_one_line_naming_its_level_and_folder() {
        let line = run_line(
            crate::sweep::figures::headline(crate::protocol::Protocol::Native, true),
            (2, 4),
            16,
            &run("level-0016", 16, true, 15.9, 12.0),
        );
        assert!(
            line.starts_with("sweep: level 2/4 16 sessions: pacing-qualified, complete;"),
            "{line}"
        );
        assert!(
            line.contains("serving.unit_lag_ms.p99 12.0") && line.ends_with("→ level-0016"),
            "{line}"
        );
    }
}
