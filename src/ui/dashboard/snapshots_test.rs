//! Snapshot tests of the whole screen for fixed states (ratatui's TestBackend, insta), and checks
//! that late heatmap cells are told apart by style and, without colour, by glyph.

use super::keys::ViewState;
use super::theme::Theme;
use super::view::render;
use crate::contract::figures::{ProtocolFigures, TranscriptTally};
use crate::contract::worker::{TurnCounts, WorkerHistograms};
use crate::contract::Role;
use crate::live::{Finished, LiveState, ProcessLive, RunInfo};
use crate::options::settings_of;
use crate::procstat::LiveReading;
use crate::sampler::episodes::{StallClass, WchanShare};
use crate::sampler::{Episode, ProcessView, SamplerLive};
use crate::stats::DurationHistogram;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;
use std::sync::{Arc, Mutex};

const COLOR: Theme = Theme { color: true };
const NO_COLOR: Theme = Theme { color: false };

/// A run of `processes × sessions`, `elapsed_s` into 90 s, optionally with worker `stall.0`
/// late in bucket `stall.1`.
fn fixture(
    processes: u32,
    sessions: u32,
    elapsed_s: usize,
    stall: Option<(usize, usize)>,
) -> LiveState {
    let mut s = LiveState::new(RunInfo {
        processes,
        sessions_per_process: sessions,
        duration_s: 90.0,
        url: "ws://127.0.0.1:8765/v1/realtime".to_string(),
        trace: "full/thread".to_string(),
        thresholds: crate::pacing::Thresholds::from_ms(80, 20),
        output_dir: "runs/fixture".to_string(),
        unpaced: false,
        protocol_figures: native_figures(false),
        shard: None,
        start_at_unix_s: None,
    });
    s.start_s = Some(100.0);
    s.now_s = 100.0 + elapsed_s as f64 + 0.5;
    let per_session_packets = (elapsed_s as u64 * 1000) / 80;
    for (i, w) in s.workers.iter_mut().enumerate() {
        w.ready = Some((sessions, 0, 0));
        w.process = ProcessLive::new(4000 + i as u32);
        w.process.reading = Some(LiveReading {
            state: 'S',
            cpu_seconds: 1.0,
            rss_bytes: (20 + i as u64) << 20,
            peak_rss_bytes: 24 << 20,
        });
        w.process.cpu_cores = 0.031;
        w.progress.counts.packets = per_session_packets * u64::from(sessions);
        w.progress.sessions_streaming = sessions;
        w.progress.counts.max_deviation_us = 3_900;
        w.progress.loop_lag_max_us = 2_100;
        w.progress.queue_lines = 120;
        for t in 0..60u64 {
            w.lag_history.push_back(500 + (t * 37 % 11) * 150);
            w.queue_history.push_back(t * 53 % 400);
        }
        w.queue_peak_lines = 410;
        w.queue_peak_bytes = 3 << 20;
        let mut h = DurationHistogram::new();
        for k in 0..1000 {
            h.record_us(800 + (k * 7919 % 2500));
        }
        w.deviation = Some(h);
        w.protocol = Some(native_figures(true));
    }
    let mut mock = ProcessLive::new(3999);
    mock.reading = Some(LiveReading {
        state: 'S',
        cpu_seconds: 0.5,
        rss_bytes: 9 << 20,
        peak_rss_bytes: 9 << 20,
    });
    mock.cpu_cores = 0.012;
    s.mock = Some(mock);
    let per_worker = sessions as usize;
    for (session, row) in s.heat.iter_mut().enumerate() {
        for bucket in 0..=elapsed_s {
            let us = 900 + (session * 131 + bucket * 977) % 2_800;
            let us = if (session + bucket) % 37 == 0 {
                25_000
            } else {
                us
            };
            row.push(us as u32 + 1);
        }
        if let Some((worker, bucket)) = stall {
            if session / per_worker == worker {
                row[bucket] = 200_001;
            }
        }
    }
    let mut sampler = SamplerLive::default();
    for w in &s.workers {
        sampler.processes.insert(
            w.process.pid,
            ProcessView {
                state: 'S',
                ..ProcessView::default()
            },
        );
    }
    if let Some((worker, bucket)) = stall {
        let pid = s.workers[worker].process.pid;
        sampler.processes.insert(
            pid,
            ProcessView {
                state: 'S',
                current: None,
                disk_stalls: 1,
                last_wchan: Some("folio_wait_bit_common".to_string()),
            },
        );
        sampler.stalls = 1;
        sampler.recent.push_back(Episode {
            process: format!("worker {worker}"),
            role: Role::Worker,
            index: Some(worker as u32),
            pid,
            tid: pid,
            thread: "duplexbench-tui".to_string(),
            loop_thread: true,
            class: StallClass::DiskWait,
            start_s: 100.0 + bucket as f64 + 0.2,
            end_s: 100.0 + bucket as f64 + 0.4,
            duration_ms: 200.0,
            samples: 40,
            wchan: vec![WchanShare {
                name: "folio_wait_bit_common".to_string(),
                samples: 40,
                share: 1.0,
            }],
        });
    }
    // The CPU split of the latest second (issue 15).
    sampler.cpu_split = Some(crate::sampler::host_load::CpuSplit {
        client_cores: 0.42,
        server_cores: Some(0.11),
        other_cores: 0.05,
        steal_cores: 0.0,
    });
    s.sampler = Some(Arc::new(Mutex::new(sampler)));
    if let Some((worker, _)) = stall {
        let w = &mut s.workers[worker];
        w.progress.counts.late_packets = 3 * u64::from(sessions);
        w.progress.sessions_with_late_packets = sessions;
        w.progress.counts.max_deviation_us = 199_500;
        w.progress.loop_lag_max_us = 201_000;
        w.lag_history.push_back(201_000);
    }
    s
}

fn draw(state: &LiveState, view: &ViewState, theme: Theme, width: u16, height: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| render(f, state, view, theme)).unwrap();
    terminal.backend().buffer().clone()
}

/// The screen's symbols, a line per row.
fn text(buf: &Buffer) -> String {
    let area = buf.area;
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Screen positions of heatmap cells that hold a late value (the legend line left out).
fn late_cells(buf: &Buffer, theme: Theme) -> Vec<(u16, u16)> {
    let area = buf.area;
    let mut cells = Vec::new();
    let screen: Vec<String> = text(buf).lines().map(str::to_string).collect();
    for y in 0..area.height {
        if screen
            .get(y as usize)
            .is_some_and(|l| l.contains("1 col ="))
        {
            continue;
        }
        for x in 0..area.width {
            let cell = &buf[(x, y)];
            let late = if theme.color {
                matches!(cell.symbol(), "▀" | "▄")
                    && (cell.fg == Color::Red || cell.bg == Color::Red)
            } else {
                cell.symbol() == "X" && cell.modifier.contains(Modifier::BOLD)
            };
            if late {
                cells.push((x, y));
            }
        }
    }
    cells
}

#[test]
fn clean_run_120x40() {
    let state = fixture(2, 16, 45, None);
    let buf = draw(&state, &ViewState::default(), COLOR, 120, 40);
    insta::assert_snapshot!(text(&buf));
    assert!(late_cells(&buf, COLOR).is_empty());
}

#[test]
fn worker_wide_stall_is_a_vertical_red_band_120x40() {
    let state = fixture(4, 16, 45, Some((2, 30)));
    let buf = draw(&state, &ViewState::default(), COLOR, 120, 40);
    insta::assert_snapshot!(text(&buf));
    let late = late_cells(&buf, COLOR);
    // 64 sessions in 25 lines: 2 sessions per row, 2 rows per line, so worker 2 has 4 lines,
    // every one late in the same column.
    assert_eq!(late.len(), 4, "{late:?}");
    assert!(
        late.iter().all(|&(x, _)| x == late[0].0),
        "one column: {late:?}"
    );
    let screen = text(&buf);
    assert!(screen.contains("UNQUALIFIED"), "{screen}");
    assert!(screen.contains("1 folio_wait"), "{screen}");
    // A stall whose wchan was never read (0: the thread left the wait first) says so.
    for view in state
        .sampler
        .as_ref()
        .unwrap()
        .lock()
        .unwrap()
        .processes
        .values_mut()
    {
        view.last_wchan = None;
    }
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    assert!(screen.contains("1 (wchan"), "{screen}");
}

#[test]
fn the_longest_stall_stays_on_screen_when_newer_short_ones_would_push_it_off() {
    let state = fixture(4, 16, 45, Some((2, 30)));
    {
        let mut sampler = state.sampler.as_ref().unwrap().lock().unwrap();
        let long = sampler.recent[0].clone();
        sampler.longest = Some(long.clone());
        for k in 0..6 {
            sampler.recent.push_back(Episode {
                process: "worker 1".to_string(),
                index: Some(1),
                class: StallClass::CpuStarvation,
                start_s: long.end_s + 1.0 + f64::from(k),
                end_s: long.end_s + 1.025 + f64::from(k),
                duration_ms: 25.0,
                wchan: Vec::new(),
                ..long.clone()
            });
        }
        sampler.stalls = 7;
    }
    // Room for one stall line: the longest, not the newest.
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 39));
    assert!(
        screen.contains("longest: worker 2 loop thread: disk_wait 20"),
        "{screen}"
    );
    assert!(!screen.contains("cpu_starvation 25 ms"), "{screen}");
    // With more room the newest follow it, as far as they fit.
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    assert!(
        screen.contains("longest: worker 2 loop thread: disk_wait 20"),
        "{screen}"
    );
    assert!(screen.contains("cpu_starvation 25 ms"), "{screen}");
    // A stall before the start gate happened during the set-up, not at a negative time.
    {
        let mut sampler = state.sampler.as_ref().unwrap().lock().unwrap();
        let before = Episode {
            start_s: 99.7,
            end_s: 99.72,
            duration_ms: 20.0,
            ..sampler.recent[1].clone()
        };
        sampler.recent.push_back(before);
    }
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    assert!(screen.contains("set-up  worker 1 loop thread"), "{screen}");
    assert!(!screen.contains("-0.3s"), "{screen}");
}

#[test]
fn without_colour_late_cells_are_a_bold_x() {
    let state = fixture(2, 8, 45, Some((1, 40)));
    let buf = draw(&state, &ViewState::default(), NO_COLOR, 120, 40);
    insta::assert_snapshot!(text(&buf));
    let late = late_cells(&buf, NO_COLOR);
    assert_eq!(late.len(), 8, "one row per session of worker 1: {late:?}");
    assert!(text(&buf).contains("X late >80 ms"));
}

#[test]
fn more_sessions_than_rows_are_grouped_within_each_worker() {
    let state = fixture(4, 256, 20, Some((3, 12)));
    let buf = draw(&state, &ViewState::default(), COLOR, 120, 40);
    let screen = text(&buf);
    insta::assert_snapshot!(screen);
    assert!(screen.contains(" per line"), "{screen}");
    assert!(screen.contains("w3 s"), "{screen}");
    assert!(!late_cells(&buf, COLOR).is_empty());
}

#[test]
fn small_80x24_terminal_keeps_the_essentials() {
    let state = fixture(4, 64, 30, Some((0, 10)));
    let buf = draw(&state, &ViewState::default(), COLOR, 80, 24);
    let screen = text(&buf);
    insta::assert_snapshot!(screen);
    // The heatmap's title is its short form on a narrow screen.
    assert!(
        screen.contains("Pacing") && screen.to_lowercase().contains("heatmap"),
        "{screen}"
    );
    // The stall that made packets late keeps its line: the column header gives way.
    assert!(
        screen.contains("worker 0 loop thread: disk_wait") && !screen.contains("D-stalls"),
        "{screen}"
    );
    // With more processes than rows, the last rows give way too, counted.
    let state = fixture(8, 16, 30, Some((0, 10)));
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 80, 24));
    assert!(
        screen.contains("worker 0 loop thread: disk_wait")
            && screen.contains("… 5 more workers")
            && screen.contains("mock "),
        "{screen}"
    );
}

#[test]
fn tiny_terminal_says_so_instead_of_crashing() {
    let state = fixture(1, 4, 5, None);
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 30, 8));
    assert!(screen.contains("too small"), "{screen}");
}

#[test]
fn a_finished_run_shows_the_reasons_after_the_first_as_far_as_they_fit() {
    let mut state = fixture(1, 8, 90, None);
    state.finished = Some(Finished {
        verdict: "PACING-QUALIFIED, NOT complete".to_string(),
        reasons: vec![
            "1424 packets were never sent: their sessions failed while streaming".to_string(),
            "8 of 8 sessions incomplete; most common: the server closed the connection mid-session (without a close frame)".to_string(),
        ],
        summary_path: "runs/fixture/summary.md".to_string(),
        exit_code: 1,
    });
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 120, 40));
    assert!(screen.contains("1424 packets were never sent"), "{screen}");
    assert!(screen.contains("8 of 8 sessions incomplete"), "{screen}");
    // On a short screen the first reason stays and the counters are not pushed out for the
    // second.
    let small = text(&draw(&state, &ViewState::default(), NO_COLOR, 80, 24));
    assert!(small.contains("1424 packets were never"), "{small}");
}

/// A verdict too long for the narrow Pacing panel wraps onto a second row; counted as one, it
/// pushed the first reason's last words off the panel's bottom.
#[test]
fn a_wrapped_verdict_does_not_push_the_first_reasons_end_off_the_panel() {
    let mut state = fixture(1, 8, 90, None);
    state.finished = Some(Finished {
        verdict: "PACING-UNQUALIFIED, NOT complete".to_string(),
        reasons: vec![
            "1424 packets were never sent: their sessions failed while streaming".to_string(),
        ],
        summary_path: "runs/fixture/summary.md".to_string(),
        exit_code: 1,
    });
    let small = text(&draw(&state, &ViewState::default(), NO_COLOR, 80, 24));
    assert!(
        small.contains("PACING-UNQUALIFIED") && small.contains("streaming"),
        "{small}"
    );
}

/// At 40 × 12 the Pacing panel keeps what the docs say always stays — the packets and the late
/// count with their values, the verdict, its first reason — and a protocol panel too narrow for
/// its numbers gives way (it showed names and `…`, and the values went below the panel).
#[test]
fn a_40x12_terminal_keeps_the_packets_late_count_and_verdict_whole() {
    let mut state = fixture(1, 4, 5, Some((0, 3)));
    let running = text(&draw(&state, &ViewState::default(), NO_COLOR, 40, 12));
    let row_with = |screen: &str, what: &str| {
        screen
            .lines()
            .find(|l| l.contains(what))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no {what:?} row:\n{screen}"))
    };
    let packets = row_with(&running, "packets");
    assert!(packets.chars().any(|c| c.is_ascii_digit()), "{running}");
    assert!(running.contains("│late (>80 ms) 12 "), "{running}");
    assert!(
        !running.contains("sglang-omni"),
        "no room for its numbers:\n{running}"
    );
    state.finished = Some(Finished {
        verdict: "PACING-UNQUALIFIED, complete".to_string(),
        reasons: vec!["4 late packets (|deviation| > 80 ms) in 4 sessions".to_string()],
        summary_path: "runs/fixture/summary.md".to_string(),
        exit_code: 1,
    });
    let done = text(&draw(&state, &ViewState::default(), NO_COLOR, 40, 12));
    for what in [
        "packets",
        "late (>80 ms)",
        "PACING-",
        "UNQUALIFIED",
        "4 late packets",
    ] {
        row_with(&done, what);
    }
}

#[test]
fn finished_run_shows_the_verdict_and_the_summary_path() {
    let mut state = fixture(1, 8, 90, Some((0, 45)));
    state.finished = Some(Finished {
        verdict: "PACING-UNQUALIFIED, complete".to_string(),
        reasons: vec![
            "24 late packets (|deviation| > 80 ms) in 8 sessions; worst 199.5 ms".to_string(),
        ],
        summary_path: "runs/fixture/summary.md".to_string(),
        exit_code: 1,
    });
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    insta::assert_snapshot!(screen);
    assert!(
        screen.contains("runs/fixture/summary.md") && screen.contains("q, Enter or Esc: exit"),
        "{screen}"
    );
}

/// N of the heatmap title's `lines 1-N of M`.
fn first_page_end(screen: &str) -> usize {
    screen
        .split("lines 1-")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no 'lines 1-N': {screen}"))
}

#[test]
fn keys_toggle_the_filter_and_scroll_ungrouped_rows() {
    let mut state = fixture(2, 64, 45, Some((1, 20)));
    state.heat[5][21] = 150_001; // one more late session, in worker 0
    let mut view = ViewState::default();
    super::keys::on_key(&mut view, crossterm::event::KeyCode::Char('v'));
    let screen = text(&draw(&state, &view, NO_COLOR, 120, 40));
    assert!(screen.contains("late only"), "{screen}");
    assert!(
        screen.contains("w0 s5 "),
        "the late session of worker 0 is listed: {screen}"
    );
    assert!(!screen.contains("w0 s4 "), "{screen}");
    super::keys::on_key(&mut view, crossterm::event::KeyCode::Char('v'));
    // PgDn moves by the lines on screen: none skipped, none shown twice.
    super::keys::on_key(&mut view, crossterm::event::KeyCode::Char('g'));
    let screen = text(&draw(&state, &view, NO_COLOR, 120, 40));
    let shown = first_page_end(&screen);
    super::keys::on_key(&mut view, crossterm::event::KeyCode::PageDown);
    let screen = text(&draw(&state, &view, NO_COLOR, 120, 40));
    assert!(
        screen.contains(&format!("lines {}-", shown + 1)),
        "{screen}"
    );
    for (width, height) in [(160, 24), (120, 30)] {
        let mut view = ViewState::default();
        super::keys::on_key(&mut view, crossterm::event::KeyCode::Char('g'));
        let first = text(&draw(&state, &view, NO_COLOR, width, height));
        let shown = first_page_end(&first);
        super::keys::on_key(&mut view, crossterm::event::KeyCode::PageDown);
        let next = text(&draw(&state, &view, NO_COLOR, width, height));
        assert!(next.contains(&format!("lines {}-", shown + 1)), "{next}");
    }
    // End goes to the last page, and Up moves from there at once.
    let _ = draw(&state, &view, NO_COLOR, 120, 40); // a frame tells how far one can scroll
    super::keys::on_key(&mut view, crossterm::event::KeyCode::End);
    let last = view.scroll;
    let screen = text(&draw(&state, &view, NO_COLOR, 120, 40));
    assert!(screen.contains("of 128"), "{screen}");
    super::keys::on_key(&mut view, crossterm::event::KeyCode::Up);
    assert_eq!(view.scroll, last - 1);
}

#[test]
fn native_runs_show_sglang_omnis_serving_metrics_live_or_a_dash() {
    let mut state = fixture(2, 8, 20, None);
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    assert!(screen.contains("sglang-omni ms p50 / p95"), "{screen}");
    let line = |screen: &str, name: &str| {
        screen
            .lines()
            .find(|l| l.contains(name))
            .map(|l| l.split('│').nth(1).unwrap_or("").trim().to_string())
            .unwrap_or_default()
    };
    // Pooled over the two workers: 8 sessions' ttfa, 400 units ahead of real time.
    let ttfa = line(&screen, "ttfa ");
    assert!(ttfa.starts_with("ttfa") && ttfa.ends_with(" 8"), "{screen}");
    assert!(ttfa.contains("96."), "p50 of 95..98 ms: {ttfa}");
    let lag = line(&screen, "unit_lag");
    assert!(lag.contains("-7") && lag.ends_with("400"), "{lag}");
    assert!(screen.contains("late sends 0  responses 8"), "{screen}");
    for w in &mut state.workers {
        w.protocol = None;
    }
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    let accepted = line(&screen, "accepted");
    assert!(
        accepted.starts_with("accepted") && accepted.ends_with('–'),
        "{screen}"
    );
}

#[test]
fn at_80x24_what_does_not_fit_is_left_out_whole_issue_14() {
    let state = fixture(4, 64, 30, Some((0, 10)));
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 80, 24));
    let title = screen.lines().next().unwrap_or_default();
    assert!(
        title.contains("UNQUALIFIED") && title.contains("4 × 64 = 256 sessions"),
        "{title}"
    );
    assert!(
        title.contains("ws://127.0.0.1:8765/v1/realtime") || !title.contains("ws:"),
        "the URL whole or not at all: {title}"
    );
    let legend = screen
        .lines()
        .find(|l| l.contains("late >80 ms"))
        .unwrap_or_default();
    assert!(
        legend.contains("blank = no packet") || !legend.contains("bl"),
        "{legend}"
    );
    // The left column's lines joined: the reason may wrap anywhere.
    let left = screen
        .lines()
        .filter_map(|l| l.split('│').nth(1))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        left.contains("worst 199.5 ms"),
        "the verdict's reason stays: {screen}"
    );
    assert!(screen.contains("sglang-omni"), "{screen}");
}

#[test]
fn heatmap_title_counts_per_line_as_the_labels_do_issue_14() {
    // 64 sessions of one worker in colour: 2 rows of half blocks a line.
    let state = fixture(1, 64, 20, None);
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    let title = screen
        .lines()
        .find(|l| l.contains("Deviation heatmap"))
        .unwrap_or_default();
    let per_line: usize = title
        .split(" per line")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{title}"));
    assert!(title.contains("64 sessions"), "{title}");
    let label = format!("w0 s0-{} ", per_line - 1);
    assert!(
        screen.contains(&label),
        "labels span {per_line} sessions: {screen}"
    );
}

#[test]
fn a_short_run_fills_the_width_of_a_wide_terminal_issue_14() {
    let mut state = fixture(1, 4, 10, None);
    state.info.duration_s = 10.0;
    let buf = draw(&state, &ViewState::default(), NO_COLOR, 250, 60);
    let screen = text(&buf);
    let row = screen
        .lines()
        .find(|l| l.contains("w0 s0 "))
        .unwrap_or_default();
    let cells = row.chars().filter(|&c| c == '·' || c == '+').count();
    assert!(
        cells > 150,
        "10 s of data over most of ~200 columns, got {cells}: {row}"
    );
    assert!(screen.contains("1 s = "), "{screen}");
}

#[test]
fn late_only_with_nothing_late_says_so_issue_14() {
    let state = fixture(2, 8, 20, None);
    let mut view = ViewState::default();
    super::keys::on_key(&mut view, crossterm::event::KeyCode::Char('v'));
    let screen = text(&draw(&state, &view, NO_COLOR, 120, 40));
    assert!(
        screen.contains("no session has had a late packet so far"),
        "{screen}"
    );
}

#[test]
fn after_the_run_workers_show_exited_and_the_stall_line_says_in_the_run_issue_14() {
    let mut state = fixture(2, 8, 90, None);
    state.workers[0].gone = true;
    state.finished = Some(Finished {
        verdict: "pacing-qualified, complete".to_string(),
        reasons: Vec::new(),
        summary_path: "runs/fixture/summary.md".to_string(),
        exit_code: 0,
    });
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    assert!(screen.contains("4000 exited"), "{screen}");
    assert!(
        screen.contains("no stall over 20 ms in the run"),
        "{screen}"
    );
    assert!(!screen.contains("so far"), "{screen}");
}

/// A server given with --url is not ours: it stays up after the run, and reads `exited` only
/// once its process is gone.
#[test]
fn after_the_run_a_server_that_still_runs_is_not_shown_exited() {
    let mut state = fixture(1, 8, 90, None);
    state.mock = None;
    state.finished = Some(Finished {
        verdict: "pacing-qualified, complete".to_string(),
        reasons: Vec::new(),
        summary_path: "runs/fixture/summary.md".to_string(),
        exit_code: 0,
    });
    let alive = std::process::id();
    state.server = Some(ProcessLive::new(alive));
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 120, 40));
    assert!(!screen.contains(&format!("{alive} exited")), "{screen}");
    // Above the kernel's largest pid (2^22): no such process.
    let gone = 4_194_305;
    state.server = Some(ProcessLive::new(gone));
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 120, 40));
    assert!(screen.contains(&format!("{gone} exited")), "{screen}");
}

#[test]
fn a_sweep_level_shows_its_place_and_the_levels_done_issue_15() {
    let mut state = fixture(1, 64, 20, None);
    state.sweep = Some(crate::live::SweepLive {
        level: 3,
        levels: 4,
        label: "64 sessions".to_string(),
        header: "sessions  P × S     client  audio s/s".to_string(),
        rows: vec![
            "      16  1 × 16  qualified       15.9".to_string(),
            "      32  1 × 32  qualified       31.7".to_string(),
        ],
    });
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    insta::assert_snapshot!(screen);
    assert!(screen.contains("sweep level 3/4"), "{screen}");
    assert!(screen.contains("Sweep: level 3 of 4"), "{screen}");
    assert!(screen.contains("1 × 32  qualified"), "{screen}");
    // A table wider than the screen leaves out its last columns whole, not cut through.
    state
        .sweep
        .as_mut()
        .unwrap()
        .header
        .push_str("  accepted_ms.p99  unit_lag_ms.p99  first_audio_ms.p50");
    let narrow = text(&draw(&state, &ViewState::default(), COLOR, 80, 24));
    assert!(narrow.contains("Sweep: level 3 of 4"), "{narrow}");
    assert!(narrow.contains("P × S     client  audio s/s"), "{narrow}");
    assert!(!narrow.contains("first_"), "{narrow}");
    // On a small screen the table gives way; the header still says where the sweep is.
    let small = text(&draw(&state, &ViewState::default(), COLOR, 80, 22));
    assert!(!small.contains("Sweep: level"), "{small}");
}

/// One worker's figures of the native protocol: sglang-omni's serving metrics of 4 VoiceChat
/// sessions 20 s in (or none yet), with the client's `accepted`.
fn native_figures(with_samples: bool) -> ProtocolFigures {
    let mut hist = WorkerHistograms::default();
    if with_samples {
        for k in 0..200i64 {
            hist.accepted.record_us(1_200 + (k * 31 % 900));
            hist.serving.unit_lag.record_us(-79_000 + (k * 53 % 6_000));
            hist.serving.output_gap_excess.record_us(k * 7 % 400);
        }
        for k in 0..4i64 {
            hist.serving.ttfa.record_us(95_000 + k * 1_000);
            hist.serving.response_ttfa.record_us(12_000 + k * 500);
        }
        hist.serving.responses = 4;
    }
    ProtocolFigures::of(
        &settings_of("native", &[]),
        &hist,
        &TranscriptTally::default(),
        &TurnCounts::default(),
    )
}

/// A fixture of 2 × 4 sessions on `settings`' protocol, each worker with the same made-up
/// tallies: Fun-ASR results, or turns with deltas.
fn protocol_fixture(settings: &crate::options::Settings) -> LiveState {
    let mut state = fixture(2, 4, 20, None);
    state.info.url = format!("ws://127.0.0.1:8765{}", settings.protocol.path());
    state.info.protocol_figures = ProtocolFigures::template(settings);
    let mut transcripts = TranscriptTally::default();
    let mut hist = WorkerHistograms::default();
    let turns = &mut hist.turns;
    for k in 0..4i64 {
        transcripts.first_update.record_us(480_000 + k * 21_000);
        transcripts.final_after_stop.record_us(300_000 + k * 45_000);
        turns.first_text_after_end.record_us(150_000 + k * 9_000);
        turns.first_text_after_start.record_us(520_000 + k * 12_000);
        turns.first_audio_after_end.record_us(180_000 + k * 11_000);
        turns.done_after_end.record_us(410_000 + k * 30_000);
        turns.speech_stopped.record_us(240_000 + k * 5_000);
    }
    for k in 0..150i64 {
        transcripts
            .response_lag
            .record_us(-60_000 + k * 571 % 80_000);
    }
    transcripts.partials = 150;
    transcripts.finals = 4;
    let counts = TurnCounts {
        ended: 4,
        answered: 4,
        text_deltas: 96,
        audio_deltas: 40,
        text_intervals: 92,
        text_span_s: 7.4,
        ..TurnCounts::default()
    };
    for w in &mut state.workers {
        w.protocol = Some(ProtocolFigures::of(settings, &hist, &transcripts, &counts));
    }
    state
}

#[test]
fn funasr_runs_show_first_update_final_after_stop_and_response_lag_live_issue_11() {
    let state = protocol_fixture(&settings_of("funasr", &[]));
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    insta::assert_snapshot!(screen);
    assert!(screen.contains("Fun-ASR"), "{screen}");
    assert!(!screen.contains("sglang-omni"), "{screen}");
    let row = screen
        .lines()
        .find(|l| l.contains("first update"))
        .unwrap_or_default();
    // 8 clients over two workers; p50 of 480, 501, 522, 543 ms, twice.
    assert!(row.contains("501.") && row.contains("   8"), "{row}");
    assert!(
        screen.contains("partials 300  finals 8  errors 0"),
        "{screen}"
    );
}

#[test]
fn openai_runs_show_the_turn_latencies_live_issue_12() {
    let settings = settings_of("openai", &["--audio", "assets/speech-24k.wav"]);
    let state = protocol_fixture(&settings);
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    insta::assert_snapshot!(screen);
    for name in [
        "OpenAI turns",
        "first text",
        "first audio",
        "done",
        "speech stopped",
    ] {
        assert!(screen.contains(name), "{name}: {screen}");
    }
    assert!(screen.contains("text deltas/s"), "{screen}");
    // On an 80 × 24 terminal the turns keep their panel (the pacing panel gives up its
    // percentiles for it), and the Processes panel its D-stalls column.
    let small = text(&draw(&state, &ViewState::default(), COLOR, 80, 24));
    for name in ["OpenAI turns", "first text", "late (>80 ms)", "D-stalls"] {
        assert!(small.contains(name), "{name}: {small}");
    }
}

/// An OpenAI transcription session's panel names it, and has no audio to time.
#[test]
fn openai_transcription_runs_show_the_transcript_latencies_live() {
    let settings = settings_of(
        "openai",
        &[
            "--session-type",
            "transcription",
            "--audio",
            "assets/speech-24k.wav",
        ],
    );
    let state = protocol_fixture(&settings);
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    for name in [
        "OpenAI transcription turns",
        "first text",
        "done",
        "speech stopped",
    ] {
        assert!(screen.contains(name), "{name}: {screen}");
    }
    assert!(!screen.contains("first audio"), "{screen}");
}

#[test]
fn vllm_runs_show_the_transcription_latencies_live_issue_12() {
    let state = protocol_fixture(&settings_of("vllm", &[]));
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 120, 40));
    insta::assert_snapshot!(screen);
    assert!(screen.contains("vLLM turns") && screen.contains("text from start"));
    assert!(!screen.contains("first audio"), "{screen}");
    // 92 intervals over 7.4 s in each worker: 12.4 deltas a second.
    assert!(screen.contains("12.4"), "{screen}");
}

#[test]
fn a_protocol_panel_before_any_sample_shows_dashes_issue_11() {
    let mut state = protocol_fixture(&settings_of("funasr", &[]));
    for w in &mut state.workers {
        w.protocol = None;
    }
    let screen = text(&draw(&state, &ViewState::default(), COLOR, 100, 30));
    let row = screen
        .lines()
        .find(|l| l.contains("final after STOP"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(row.contains('–'), "{row}");
    assert!(screen.contains("partials 0"), "{screen}");
}
#[test]
fn a_shard_waiting_for_start_at_shows_shard_i_of_n_and_the_countdown_issue_16() {
    let mut state = fixture(2, 4, 0, None);
    state.info.shard = Some((1, 3));
    // 2030-01-01T00:00:00Z; the gate is 2.4 s ahead of the dashboard's clock.
    state.info.start_at_unix_s = Some(1_893_456_000.0);
    state.now_s = 97.6;
    let buf = draw(&state, &ViewState::default(), COLOR, 120, 40);
    let screen = text(&buf);
    let header: Vec<&str> = screen.lines().take(2).collect();
    assert!(header[0].contains("shard 1 of 3"), "{header:?}");
    assert!(
        header[1].contains("start in 00:03") && header[1].contains("2030-01-01T00:00:00.000Z"),
        "{header:?}"
    );
}

#[test]
fn the_processes_title_names_the_hypervisors_steal_apart_and_warns_on_both() {
    let state = fixture(4, 256, 20, None);
    let sampler = state.sampler.clone().unwrap();
    sampler.lock().unwrap().cpu_split = Some(crate::sampler::host_load::CpuSplit {
        client_cores: 0.42,
        server_cores: Some(0.11),
        other_cores: 0.05,
        steal_cores: 0.60,
    });
    let buf = draw(&state, &ViewState::default(), COLOR, 120, 40);
    let screen = text(&buf);
    let y = screen
        .lines()
        .position(|l| l.contains("other 0.05, steal 0.60 cores"))
        .unwrap_or_else(|| panic!("{screen}"));
    // Neither alone is over 0.5 cores; together, the load that is not the run's, they are.
    let line: Vec<&str> = (0..buf.area.width)
        .map(|x| buf[(x, y as u16)].symbol())
        .collect();
    let at = line.windows(5).position(|w| w.concat() == "other").unwrap() as u16;
    assert_eq!(buf[(at, y as u16)].style().fg, COLOR.warn().fg);
}

#[test]
fn before_the_gate_the_header_counts_the_sessions_set_up_so_far() {
    let mut state = LiveState::new(RunInfo {
        processes: 2,
        sessions_per_process: 32,
        duration_s: 30.0,
        url: "ws://127.0.0.1:9/v1/realtime".to_string(),
        ..RunInfo::default()
    });
    state.apply(
        0,
        crate::contract::telemetry::Telemetry::SetupProgress {
            connected: 20,
            rejected: 0,
            failed: 2,
        },
    );
    state.apply(
        1,
        crate::contract::telemetry::Telemetry::SetupProgress {
            connected: 20,
            rejected: 0,
            failed: 0,
        },
    );
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 120, 40));
    assert!(
        screen.contains("setting up: 40 of 64 sessions connected, 2 failed"),
        "{screen}"
    );
}

/// Once the audio is sent, the sessions wait for the server: the header says so (the clock
/// stands still, and the screen looked hung for up to --recv-timeout).
#[test]
fn after_the_audio_the_header_says_the_run_is_draining() {
    let mut state = fixture(1, 8, 90, None);
    state.now_s = state.start_s.unwrap_or(0.0) + 91.0;
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 160, 40));
    assert!(
        screen.contains(
            "draining: the audio is sent; waiting for the server to finish 8 of 8 sessions"
        ),
        "{screen}"
    );
}

/// On a narrow terminal the progress bar is left out whole: cut at the edge it read fuller
/// than the run was.
#[test]
fn a_progress_bar_that_does_not_fit_is_left_out_whole() {
    let state = fixture(1, 8, 45, None);
    let wide = text(&draw(&state, &ViewState::default(), NO_COLOR, 120, 40));
    assert!(wide.contains(&"░".repeat(15)), "{wide}");
    let narrow = text(&draw(&state, &ViewState::default(), NO_COLOR, 60, 15));
    let progress_line = narrow.lines().nth(1).unwrap_or("");
    assert!(progress_line.contains(" / 01:30  remaining"), "{narrow}");
    assert!(
        !progress_line.contains('█') && !progress_line.contains('░'),
        "{narrow}"
    );
}

/// At 80 columns the protocol panel leaves out its sample counts; its title still said `· n`.
#[test]
fn the_protocol_title_says_n_only_while_the_sample_counts_are_shown() {
    let state = fixture(1, 16, 30, None);
    let title = |screen: &str| {
        screen
            .lines()
            .find(|l| l.contains("sglang-omni"))
            .unwrap_or_else(|| panic!("{screen}"))
            .to_string()
    };
    let wide = text(&draw(&state, &ViewState::default(), NO_COLOR, 120, 40));
    assert!(title(&wide).contains("ms p50 / p95 · n "), "{wide}");
    // The unit_lag row inside the panel: 200 samples.
    let row = |screen: &str| {
        screen
            .lines()
            .find(|l| l.contains("unit_lag"))
            .and_then(|l| l.split('│').nth(1))
            .unwrap_or_default()
            .trim_end()
            .to_string()
    };
    assert!(row(&wide).ends_with(" 200"), "the count is shown: {wide}");
    let small = text(&draw(&state, &ViewState::default(), NO_COLOR, 80, 24));
    assert!(
        !row(&small).ends_with(" 200"),
        "the count gives way at 80 columns: {small}"
    );
    assert!(
        title(&small).contains("ms p50 / p95 ─") && !title(&small).contains("· n"),
        "{small}"
    );
}

/// On the finished screen the help said `q, Ctrl-C  end the run gracefully`: the run had ended,
/// and Enter and Esc, which leave that screen, went unmentioned.
#[test]
fn the_help_on_the_finished_screen_says_how_to_leave_it() {
    let mut state = fixture(1, 8, 90, None);
    let view = ViewState {
        help: true,
        ..ViewState::default()
    };
    let live = text(&draw(&state, &view, NO_COLOR, 120, 40));
    assert!(
        live.contains("q, Ctrl-C    end the run gracefully"),
        "{live}"
    );
    state.finished = Some(Finished {
        verdict: "pacing-qualified, complete".to_string(),
        reasons: Vec::new(),
        summary_path: "runs/fixture/summary.md".to_string(),
        exit_code: 0,
    });
    let finished = text(&draw(&state, &view, NO_COLOR, 120, 40));
    assert!(!finished.contains("end the run"), "{finished}");
    assert!(
        finished.contains("q, Enter     leave")
            && finished.contains("Esc          close this help; with it closed, leave"),
        "{finished}"
    );
    // The rest of the help stays as it is during the run.
    assert!(finished.contains("v            only sessions with a late packet"));
    assert!(finished.contains("docs/glossary.md"), "{finished}");
}

/// On a 40 × 10 terminal the help showed its first 8 lines cut at the width, unmarked: the
/// rest read as missing. `h`, `j` and `k`, which work, were not in it.
#[test]
fn the_help_on_a_small_terminal_says_it_is_cut() {
    let state = fixture(1, 8, 90, None);
    let view = ViewState {
        help: true,
        ..ViewState::default()
    };
    let screen = text(&draw(&state, &view, NO_COLOR, 40, 10));
    assert!(
        screen.contains("│… (a taller terminal shows the rest)"),
        "{screen}"
    );
    assert!(
        screen.contains("│q, Ctrl-C    end the run gracefully: …│"),
        "{screen}"
    );
    let tall = text(&draw(&state, &view, NO_COLOR, 120, 40));
    assert!(!tall.contains("a taller terminal"), "{tall}");
    assert!(tall.contains("?, h         this help"), "{tall}");
    assert!(tall.contains("↑ ↓, k j     scroll the heatmap"), "{tall}");
}

/// At 60 × 15 and 40 × 10 the legend read `X la`, the footer `g group r` and the heatmap's title
/// `16 sessions, 4/li`: cut mid-word with no sign, each read as whole.
#[test]
fn on_a_small_terminal_cut_lines_end_in_an_ellipsis() {
    let state = fixture(1, 16, 12, None);
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 60, 15));
    let lines: Vec<&str> = screen.lines().collect();
    // The legend's classes give way to their short words, so the late one stays whole.
    let legend = lines.iter().find(|l| l.contains("≤20")).unwrap_or(&"");
    assert!(legend.contains("X late>80"), "{screen}");
    assert!(lines.last().unwrap_or(&"").ends_with('…'), "{screen}");

    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 40, 10));
    let lines: Vec<&str> = screen.lines().collect();
    let title = lines
        .iter()
        .find(|l| l.contains("16 sessions,"))
        .unwrap_or(&"");
    assert!(title.contains("…"), "{screen}");
    let legend = lines.iter().find(|l| l.contains("≤20")).unwrap_or(&"");
    assert!(legend.contains("X >80"), "{screen}");
    assert!(lines.last().unwrap_or(&"").ends_with('…'), "{screen}");
    // The progress line fits but for its trailing gap: not cut, not marked.
    assert!(
        lines[1].ends_with("remaining 01:18") && !lines[1].contains('…'),
        "{screen}"
    );
    // At 50 columns the protocol panel is narrower than its values: `1.7   2` read as a p95 of 2.
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 50, 24));
    let accepted = screen
        .lines()
        .find(|l| l.contains("accepted"))
        .unwrap_or_default();
    assert!(accepted.contains("1.7   …│"), "{screen}");
    // The Processes title and, narrower, the Loop lag rows and the protocol panel's title are
    // cut as the Processes rows are.
    assert!(screen.contains("Processes │ other…"), "{screen}");
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 46, 24));
    let lag = screen
        .lines()
        .find(|l| l.contains("2.1 ms"))
        .unwrap_or_default();
    assert!(lag.contains("120…│"), "{screen}");
    assert!(screen.contains("sglang-omni ms p50 / …"), "{screen}");
    // Where everything fits, nothing is marked.
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 120, 40));
    assert!(!screen.contains('…'), "{screen}");
}

/// Always-shown header text ends in `…` where a narrow screen cuts it.
#[test]
fn a_header_line_too_long_for_the_screen_ends_in_an_ellipsis() {
    let mut state = LiveState::new(RunInfo {
        processes: 2,
        sessions_per_process: 32,
        duration_s: 30.0,
        url: "ws://127.0.0.1:9/v1/realtime".to_string(),
        ..RunInfo::default()
    });
    state.apply(
        0,
        crate::contract::telemetry::Telemetry::SetupProgress {
            connected: 40,
            rejected: 0,
            failed: 2,
        },
    );
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 40, 10));
    let progress = screen.lines().nth(1).unwrap_or("");
    assert!(
        progress.starts_with(" setting up: 40 of 64") && progress.ends_with('…'),
        "{screen}"
    );
}

/// Under 22 lines the Loop lag and Processes panels, and on a yet shorter screen the protocol
/// panel, were left out without a word: they looked like panels the run did not have.
#[test]
fn panels_left_out_for_lack_of_room_are_named_in_the_footer() {
    let state = fixture(1, 16, 12, None);
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 60, 15));
    let footer = screen.lines().last().unwrap_or_default();
    assert!(
        footer.contains(" q quit  ? help  no room for Loop lag, Processes "),
        "{screen}"
    );
    assert!(
        screen.contains("sglang-omni"),
        "the panel that fits stays: {screen}"
    );
    // Where the names do not fit, their number does.
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 40, 10));
    let footer = screen.lines().last().unwrap_or_default();
    assert!(footer.contains("no room for 3 panels"), "{screen}");
    // Where everything fits, nothing is said.
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 120, 40));
    assert!(!screen.contains("no room"), "{screen}");
}

/// At 100 × 30 the Pacing panel, with the protocol panel under it, leaves out its zero problem
/// counts first (docs/dashboard.md); one that is not zero stays.
#[test]
fn a_short_pacing_panel_leaves_out_problem_counts_only_while_they_are_zero() {
    let mut state = fixture(1, 16, 12, None);
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 100, 30));
    assert!(screen.contains("completed         0"), "{screen}");
    for row in ["incomplete", "rejected", "protocol errors"] {
        assert!(!screen.contains(row), "{row}: {screen}");
    }
    state.workers[0].progress.protocol_errors = 2;
    let screen = text(&draw(&state, &ViewState::default(), NO_COLOR, 100, 30));
    assert!(screen.contains("protocol errors   2"), "{screen}");
}
