//! The dashboard's panels other than the heatmap, a draw function each.

use super::theme::Theme;
use crate::live::{LiveState, ProcessLive};
use crate::pacing::Thresholds;
use crate::sampler::SamplerLive;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

pub(super) fn mmss(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{:02}:{:02}", s / 60, s % 60)
}

/// The first of `titles` that fits on the top border of a panel `width` columns wide (both
/// corners and a character of border left), or else the last ending in `…` where it is cut: a
/// title cut by the border loses its end mid-word, which reads as another figure.
pub(super) fn first_fitting(width: u16, titles: impl IntoIterator<Item = String>) -> String {
    let room = usize::from(width).saturating_sub(3);
    let mut last = String::new();
    for title in titles {
        if title.chars().count() <= room {
            return title;
        }
        last = title;
    }
    clipped(Line::from(last.trim_end().to_string()), room).to_string()
}

/// `line` cut to `width` columns, its last column an ellipsis when anything was cut: a row cut
/// mid-word (`2 __lru_add_drai`) reads as a name the kernel does not have. Spaces at its end
/// are no text: a line that fits without them is returned as it is, unmarked.
/// (The panels' text is of one-column characters: counted as characters.)
pub(super) fn clipped(line: Line<'static>, width: usize) -> Line<'static> {
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    if text.trim_end().chars().count() <= width {
        return line;
    }
    let mut room = width.saturating_sub(1);
    let mut spans = Vec::new();
    // The style of the span the cut falls in (or the next one, when it falls between two).
    let mut cut_style = None;
    for span in line.spans {
        let len = span.content.chars().count();
        if len <= room {
            room -= len;
            spans.push(span);
            continue;
        }
        if room > 0 {
            spans.push(Span::styled(
                span.content.chars().take(room).collect::<String>(),
                span.style,
            ));
        }
        cut_style = Some(span.style);
        break;
    }
    if width > 0 {
        spans.push(Span::styled("…", cut_style.unwrap_or_default()));
    }
    let mut cut = Line::from(spans).style(line.style);
    cut.alignment = line.alignment;
    cut
}

fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The live verdict as a styled span and its reasons, the most important first.
pub(super) fn verdict(state: &LiveState, theme: Theme) -> (Span<'static>, Vec<String>) {
    if let Some(f) = &state.finished {
        let style = if f.exit_code == 0 {
            theme.good()
        } else {
            theme.bad()
        };
        return (
            Span::styled(f.verdict.to_uppercase(), style),
            f.reasons.clone(),
        );
    }
    let v = state.verdict();
    let reasons = v.reasons;
    if v.unpaced {
        (Span::styled("UNPACED", theme.warn()), reasons)
    } else if v.pacing_qualified {
        (Span::styled("QUALIFIED so far", theme.good()), reasons)
    } else {
        (Span::styled("UNQUALIFIED", theme.bad()), reasons)
    }
}

/// Counters, pooled percentiles and the live verdict, with the verdict's first reason always
/// and the others as far as the rows the counters leave allow (the cause of a failed run is
/// often the second: "packets never sent" comes before why the sessions failed).
pub fn counters(state: &LiveState, theme: Theme, area: Rect, buf: &mut Buffer) {
    let (verdict, reasons) = verdict(state, theme);
    let block = Block::default().borders(Borders::ALL).title(" Pacing ");
    let inner = block.inner(area);
    let width = inner.width as usize;
    let height = inner.height as usize;
    let mut ranked = packet_lines(state, theme);
    ranked.extend(session_lines(state, theme));
    let mut ranked: Vec<(u8, Line<'static>)> = ranked
        .into_iter()
        .map(|(rank, line)| (rank, compact(line, width)))
        .collect();
    ranked.push((7, Line::from("")));
    ranked.push((0, Line::from(verdict)));
    let first_lines = reasons.first().map_or(0, |r| wrapped_height(r, width));
    let mut lines = fit_ranked(ranked, (height, width), first_lines);
    let used: usize = lines.iter().map(|l| line_rows(l, width)).sum();
    let mut left = height.saturating_sub(used);
    for (i, reason) in reasons.into_iter().enumerate() {
        let needs = wrapped_height(&reason, width);
        if i > 0 && needs > left {
            break;
        }
        left = left.saturating_sub(needs);
        lines.push(Line::from(Span::styled(reason, theme.dim())));
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .block(block)
        .render(area, buf);
}

/// The least height the Pacing panel keeps at `width` beside the protocol's panel: borders,
/// the verdict, the late count, the packets, and the verdict's first reason whole, each as
/// many rows as it wraps to (a narrow panel wraps the verdict).
pub fn counters_least_height(state: &LiveState, theme: Theme, width: u16) -> u16 {
    let (verdict, reasons) = verdict(state, theme);
    let inner = usize::from(width.saturating_sub(2));
    let reason = reasons.first().map_or(0, |r| wrapped_height(r, inner));
    // The late count and the packets: a name and a number, compacted to one row.
    let counts = 2 * line_rows(
        &compact(
            counter_row("late (>80 ms)", "0".into(), Style::default()),
            inner,
        ),
        inner,
    );
    let rows = 2 + line_rows(&Line::from(verdict), inner) + counts + reason;
    u16::try_from(rows).unwrap_or(u16::MAX)
}

/// A counter's line fitted to a panel `width` columns wide: on a narrow one, its name's column
/// gives way to one space, so that the value stays on the name's row (it wrapped below it,
/// and the rows the panel had went to names without their values).
fn compact(line: Line<'static>, width: usize) -> Line<'static> {
    let text_width: usize = line.spans.iter().map(|s| s.content.chars().count()).sum();
    if text_width <= width || line.spans.len() != 2 {
        return line;
    }
    let mut spans = line.spans;
    let name = spans[0].content.trim_end().to_string();
    spans[0].content = format!("{name} ").into();
    Line::from(spans)
}

/// A counter's line: its name in a column, then its value.
fn counter_row(name: &str, value: String, style: Style) -> Line<'static> {
    Line::from(vec![
        Span::raw(format!("{name:<18}")),
        Span::styled(value, style),
    ])
}

/// The packets' lines, each with how readily it is left out when the panel is short (higher
/// goes first): the late count stays longest.
fn packet_lines(state: &LiveState, theme: Theme) -> Vec<(u8, Line<'static>)> {
    let t = state.totals();
    let pooled = state.pooled_deviation();
    // Packet 0 after its gate: the one delay deviation (measured from packet 0) cannot show.
    let start = state.pooled_start_lateness();
    let start_late = if start.count() == 0 {
        "–".to_string()
    } else {
        format!("{:.2} ms", start.quantile_ms(0.99))
    };
    let c = &t.counts;
    // A percentile reads the top of its histogram bucket; none is shown above the exact max.
    let max_ms = c.max_deviation_us as f64 / 1000.0;
    let late_style = if c.late_packets > 0 {
        theme.bad()
    } else {
        Style::default()
    };
    let plain = Style::default();
    let thresholds = &state.info.thresholds;
    vec![
        (1, counter_row("packets", c.packets.to_string(), plain)),
        (
            0,
            counter_row(
                &format!("late (>{} ms)", thresholds.late_us / 1000),
                c.late_packets.to_string(),
                late_style,
            ),
        ),
        (
            3,
            counter_row(
                "late sessions",
                t.sessions_with_late_packets.to_string(),
                late_style,
            ),
        ),
        (
            5,
            counter_row(
                &format!("slow (>{} ms)", thresholds.slow_us / 1000),
                c.slow_sends.to_string(),
                plain,
            ),
        ),
        (
            2,
            counter_row(
                "deviation p50",
                format!("{:.2} ms", pooled.quantile_ms(0.5).min(max_ms)),
                plain,
            ),
        ),
        (
            2,
            counter_row(
                "deviation p99",
                format!("{:.2} ms", pooled.quantile_ms(0.99).min(max_ms)),
                plain,
            ),
        ),
        (
            4,
            // As many decimals as the percentiles above it, which it never reads below.
            counter_row("deviation max", format!("{max_ms:.2} ms"), late_style),
        ),
        (3, counter_row("start late p99", start_late, plain)),
    ]
}

/// The sessions' lines, ranked as the packets' are; a non-zero problem count is kept like the
/// late count.
fn session_lines(state: &LiveState, theme: Theme) -> Vec<(u8, Line<'static>)> {
    let t = state.totals();
    let rejected = state.rejected();
    let total = state.info.processes * state.info.sessions_per_process;
    let plain = Style::default();
    let keep_if = |n: u64, rank: u8| if n > 0 { 1 } else { rank };
    let warn_if = |n: u64| if n > 0 { theme.warn() } else { plain };
    let incomplete = u64::from(t.sessions_incomplete);
    vec![
        (
            5,
            counter_row(
                "streaming",
                format!("{}/{total}", t.sessions_streaming),
                plain,
            ),
        ),
        (
            6,
            counter_row("completed", t.sessions_completed.to_string(), plain),
        ),
        (
            keep_if(incomplete, 6),
            counter_row(
                "incomplete",
                t.sessions_incomplete.to_string(),
                warn_if(incomplete),
            ),
        ),
        (
            keep_if(u64::from(rejected), 6),
            counter_row(
                "rejected",
                rejected.to_string(),
                warn_if(u64::from(rejected)),
            ),
        ),
        (
            keep_if(t.protocol_errors, 6),
            counter_row(
                "protocol errors",
                t.protocol_errors.to_string(),
                warn_if(t.protocol_errors),
            ),
        ),
    ]
}

/// Leaves out the least important lines (the highest rank, the last of equals first; rank 0
/// never) until the rest, as wrapped to `width`, and `reserved` more rows fit in `height`.
fn fit_ranked(
    mut ranked: Vec<(u8, Line<'static>)>,
    (height, width): (usize, usize),
    reserved: usize,
) -> Vec<Line<'static>> {
    let rows = |ranked: &[(u8, Line<'static>)]| -> usize {
        ranked.iter().map(|(_, l)| line_rows(l, width)).sum()
    };
    while rows(&ranked) + reserved > height {
        let Some(drop) = ranked
            .iter()
            .enumerate()
            .filter(|(_, (rank, _))| *rank > 0)
            .max_by_key(|(i, (rank, _))| (*rank, *i))
            .map(|(i, _)| i)
        else {
            break;
        };
        ranked.remove(drop);
    }
    ranked.into_iter().map(|(_, line)| line).collect()
}

/// Rows a line takes in the panel (wrapped to `width`; an empty line takes one).
fn line_rows(line: &Line<'_>, width: usize) -> usize {
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    wrapped_height(&text, width).max(1)
}

/// Lines `text` takes when word-wrapped to `width` columns (a word longer than a line is cut).
fn wrapped_height(text: &str, width: usize) -> usize {
    if width == 0 {
        return 0;
    }
    let mut lines = 1;
    let mut used = 0;
    for word in text.split_whitespace() {
        let w = word.chars().count().min(width);
        if used == 0 {
            used = w;
        } else if used + 1 + w <= width {
            used += 1 + w;
        } else {
            lines += 1;
            used = w;
        }
    }
    lines
}

/// A sparkline of the whole of `values` in `width` characters: each character is the maximum
/// of its share of the samples (so a short spike stays visible), scaled to `floor` or the
/// largest value, whichever is larger (so noise on a quiet line stays low).
pub fn sparkline(values: &std::collections::VecDeque<u64>, width: usize, floor: u64) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if width == 0 {
        return String::new();
    }
    let per_char = values.len().div_ceil(width).max(1);
    let samples: Vec<u64> = values.iter().copied().collect();
    let maxima: Vec<u64> = samples
        .rchunks(per_char)
        .map(|chunk| chunk.iter().copied().max().unwrap_or(0))
        .take(width)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let scale = maxima.iter().copied().max().unwrap_or(0).max(floor).max(1);
    let line: String = maxima
        .iter()
        .map(|&v| BARS[((v as f64 / scale as f64) * 7.0).round() as usize])
        .collect();
    format!("{line:>width$}")
}

/// Per worker: loop lag and writer queue over time.
pub fn workers(state: &LiveState, theme: Theme, area: Rect, buf: &mut Buffer) {
    let peak_bytes = state
        .workers
        .iter()
        .map(|w| w.queue_peak_bytes)
        .max()
        .unwrap_or(0);
    let peak = mib(peak_bytes);
    let block = Block::default().borders(Borders::ALL).title(first_fitting(
        area.width,
        [
            format!(" Loop lag (max) │ writer queue, lines now/peak (peak {peak}) "),
            format!(" Loop lag (max) │ writer queue now/peak ({peak}) "),
            " Loop lag │ writer queue ".to_string(),
            " Loop lag ".to_string(),
        ],
    ));
    let inner = block.inner(area);
    block.render(area, buf);
    // "w12 " + sparkline + " 201.0 ms" + " │ " + sparkline + " 12345/12345"
    let fixed = 4 + 9 + 3 + 12;
    let spark = (inner.width as usize).saturating_sub(fixed) / 2;
    for (i, w) in state.workers.iter().enumerate().take(inner.height as usize) {
        let lag_max = w.progress.loop_lag_max_us;
        let lag_style = if lag_max > 80_000 {
            theme.bad()
        } else if lag_max > 20_000 {
            theme.warn()
        } else {
            Style::default()
        };
        let line = Line::from(vec![
            Span::raw(format!("w{i:<3}")),
            // Lag is scaled to at least 20 ms, the diagnostic threshold: quiet workers stay low.
            Span::styled(sparkline(&w.lag_history, spark, 20_000), lag_style),
            Span::styled(format!("{:>9}", ms(lag_max)), lag_style),
            Span::raw(" │ "),
            Span::raw(sparkline(&w.queue_history, spark, 1)),
            Span::raw(format!(
                " {:>5}/{:<5}",
                w.progress.queue_lines, w.queue_peak_lines
            )),
        ]);
        let line = clipped(line, usize::from(inner.width));
        buf.set_line(inner.x, inner.y + i as u16, &line, inner.width);
    }
}

/// Per process: state, CPU, RSS, disk stalls and the latest wchan; then the latest stalls.
pub fn processes(state: &LiveState, theme: Theme, area: Rect, buf: &mut Buffer) {
    // Read in place, not copied: this runs ten times a second.
    let guard = state.sampler.as_ref().and_then(|s| s.lock().ok());
    let sampler = guard.as_deref();
    let block = Block::default().borders(Borders::ALL).title(clipped(
        processes_title(sampler, theme, area.width),
        usize::from(area.width).saturating_sub(3),
    ));
    let inner = block.inner(area);
    block.render(area, buf);
    let wide = inner.width >= 44;
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "{:<6}{:>8} {:>2} {:>6} {:>9}{}",
            "proc",
            "pid",
            "st",
            "cores",
            "RSS",
            if wide { "  D-stalls" } else { "" }
        ),
        theme.dim(),
    ))];
    let finished = state.finished.is_some();
    let row = |name: String, p: &ProcessLive, exited: bool| {
        process_row(&name, p, exited, (sampler, wide), theme)
    };
    let mut rows = Vec::new();
    for (i, w) in state.workers.iter().enumerate() {
        rows.push(row(format!("w{i}"), &w.process, w.gone || finished));
    }
    let mut servers = Vec::new();
    if let Some(mock) = &state.mock {
        servers.push(row("mock".to_string(), mock, finished));
    }
    if let Some(server) = &state.server {
        // Not ours: a server outlives the run unless someone stopped it.
        let gone = finished && !std::path::Path::new(&format!("/proc/{}", server.pid)).exists();
        servers.push(row("server".to_string(), server, gone));
    }
    // A stall's line names the cause of late packets: on a short panel it keeps its line, and
    // the column header, then the last workers' rows, give way (the server's row stays: with
    // the title it is the CPU split client / server / other).
    let height = inner.height as usize;
    let all = rows.len() + servers.len();
    if sampler.is_some_and(|s| !s.recent.is_empty()) && all + 2 > height {
        lines.clear();
        if all + 1 > height {
            let keep = height.saturating_sub(2 + servers.len()).min(rows.len());
            let more = rows.len() - keep;
            rows.truncate(keep);
            if height >= 2 + servers.len() {
                rows.push(Line::from(Span::styled(
                    format!("… {more} more workers (a taller window shows them)"),
                    theme.dim(),
                )));
            }
        }
    }
    lines.extend(rows);
    lines.extend(servers);
    let room = height.saturating_sub(lines.len());
    lines.extend(stall_lines(state, sampler, room, theme));
    if let Some(note) = sampler.and_then(|s| s.notes.iter().next()) {
        lines.push(Line::from(Span::styled(note.clone(), theme.warn())));
    }
    let width = usize::from(inner.width);
    let lines: Vec<_> = lines.into_iter().map(|l| clipped(l, width)).collect();
    Paragraph::new(lines).render(inner, buf);
}

/// The processes panel's title: the rows give the client's and the server's cores, the title
/// the rest of the box's.
fn processes_title(sampler: Option<&SamplerLive>, theme: Theme, width: u16) -> Line<'static> {
    match sampler.and_then(|s| s.cpu_split) {
        Some(split) => Line::from(vec![
            Span::raw(if width >= 44 {
                " Processes │ stalls │ "
            } else {
                " Processes │ "
            }),
            Span::styled(
                format!(
                    "other {:.2}{} cores ",
                    split.other_cores,
                    split.steal_note()
                ),
                if split.foreign_cores() > crate::sampler::host_load::DEFAULT_THRESHOLD_CORES {
                    theme.warn()
                } else {
                    Style::default()
                },
            ),
        ]),
        None => Line::from(" Processes │ stalls "),
    }
}

/// One process's row: pid, state, cores, RSS and (when `wide`) its disk stalls.
fn process_row(
    name: &str,
    p: &ProcessLive,
    exited: bool,
    (sampler, wide): (Option<&SamplerLive>, bool),
    theme: Theme,
) -> Line<'static> {
    let view = sampler.and_then(|s| s.processes.get(&p.pid));
    let st = view
        .map(|v| v.state)
        .filter(|c| *c != '\0')
        .or(p.reading.map(|r| r.state))
        .unwrap_or('-');
    let rss = p.reading.map_or(0, |r| r.rss_bytes);
    let st_style = if st == 'D' {
        theme.bad()
    } else {
        Style::default()
    };
    let disk = match (view, sampler) {
        (_, None) => "off".to_string(),
        // The wchan reads 0 when the thread has left the wait before it is read (or the kernel
        // hides it): said so, not left blank, as the stall lines say it.
        (Some(v), Some(_)) if v.disk_stalls > 0 => format!(
            "{} {}",
            v.disk_stalls,
            v.last_wchan.as_deref().unwrap_or("(wchan hidden)")
        ),
        _ => "0".to_string(),
    };
    let (st_text, cores) = if exited {
        // A zombie's state (Z) and its last CPU reading say nothing after the run.
        ("exited".to_string(), String::new())
    } else {
        (format!("{st:>2}"), format!(" {:>6.3}", p.cpu_cores))
    };
    Line::from(vec![
        Span::raw(format!("{name:<6}{:>8} ", p.pid)),
        Span::styled(format!("{st_text:<2}"), st_style),
        Span::raw(format!("{cores} {:>9}", mib(rss))),
        Span::styled(
            if wide {
                format!("  {disk}")
            } else {
                String::new()
            },
            if disk.starts_with(|c: char| c.is_ascii_digit() && c != '0') {
                theme.bad()
            } else {
                Style::default()
            },
        ),
    ])
}

/// The latest stalls, newest first, as many as there is `room` for (or why there are none).
/// When they leave out the longest stall of a loop thread (the kind that holds packets back),
/// it takes the first line, marked `longest`.
fn stall_lines(
    state: &LiveState,
    sampler: Option<&SamplerLive>,
    room: usize,
    theme: Theme,
) -> Vec<Line<'static>> {
    match sampler {
        None => vec![Line::from(Span::styled(
            "procfs sampler off (--no-sampler)",
            theme.dim(),
        ))],
        Some(s) if s.recent.is_empty() => vec![Line::from(Span::styled(
            if state.finished.is_some() {
                "no stall over 20 ms in the run"
            } else {
                "no stall over 20 ms so far"
            },
            theme.dim(),
        ))],
        Some(s) => {
            let line = |e: &crate::sampler::Episode, mark: &'static str| {
                let when = state.start_s.map_or(0.0, |start| e.start_s - start);
                // Before the start gate the sessions were being set up: no time of the run.
                let when = if when < 0.0 {
                    "set-up  ".to_string()
                } else {
                    format!("{when:>6.1}s ")
                };
                Line::from(vec![
                    Span::styled(when, theme.dim()),
                    Span::styled(mark, theme.bad()),
                    Span::styled(crate::live::describe_stall(e), theme.warn()),
                ])
            };
            let room = room.max(1);
            let longest = s
                .longest
                .as_ref()
                .filter(|l| !s.recent.iter().rev().take(room).any(|e| e.is_same(l)));
            let newest = room - usize::from(longest.is_some());
            longest
                .map(|l| line(l, "longest: "))
                .into_iter()
                .chain(s.recent.iter().rev().take(newest).map(|e| line(e, "")))
                .collect()
        }
    }
}

/// The keys, and the panels `hidden` for lack of room: a panel left out without a word looked
/// like one the run did not have. What does not fit ends in `…`.
pub fn footer(state: &LiveState, theme: Theme, hidden: &[&str], area: Rect, buf: &mut Buffer) {
    let way_out = if state.finished.is_some() {
        " q Enter Esc exit  ? help"
    } else {
        " q quit  ? help"
    };
    let width = usize::from(area.width);
    let mut spans = vec![Span::styled(way_out, theme.dim())];
    if !hidden.is_empty() {
        let named = format!("  no room for {}", hidden.join(", "));
        let room = width.saturating_sub(way_out.chars().count());
        spans.push(Span::raw(if named.chars().count() <= room {
            named
        } else {
            format!("  no room for {} panels", hidden.len())
        }));
    }
    spans.push(Span::styled(
        "  ↑↓ PgUp PgDn scroll  v late only  g group rows",
        theme.dim(),
    ));
    Paragraph::new(clipped(Line::from(spans), width)).render(area, buf);
}

/// The keys and the heatmap's scale. The way out is the screen's own: during the run `q` ends
/// it; once it has `finished`, `q`, Enter and Esc leave the dashboard (the help said `q` ended
/// the run, which had ended, and left Enter and Esc out).
pub fn help(theme: Theme, thresholds: &Thresholds, finished: bool, area: Rect, buf: &mut Buffer) {
    let mut lines = if finished {
        vec![
            Line::from("q, Enter     leave: the run has ended and its summary is"),
            Line::from("             written; the final table is printed on leaving"),
            Line::from("Esc          close this help; with it closed, leave"),
        ]
    } else {
        vec![
            Line::from("q, Ctrl-C    end the run gracefully: sessions stop and end,"),
            Line::from("             the summary is written, its path printed"),
        ]
    };
    lines.extend([
        Line::from("?, h         this help"),
        Line::from("↑ ↓, k j     scroll the heatmap by a row (ungrouped)"),
        Line::from("PgUp PgDn    scroll by a page; Home End: top, bottom"),
        Line::from("v            only sessions with a late packet / all"),
        Line::from("g            group sessions to fit / one row per session"),
        Line::from(""),
        Line::from("Heatmap: a row per session (or group), the run's time across"),
        Line::from("the width, each cell the worst |deviation| from schedule in it:"),
        super::heatmap::legend(theme, thresholds, "", 60),
        Line::from("A stall of a whole worker shows as a vertical band."),
        Line::from(""),
        Line::from("Words (pacing-qualified, late, slow send, deviation, unit lag,"),
        Line::from("D-state stall, loop lag, writer queue…): docs/glossary.md"),
    ]);
    // A terminal too small for all of it says so on the last line it has, and each line cut
    // for width ends in `…`.
    let inner_width = usize::from(area.width.saturating_sub(2));
    let inner_height = usize::from(area.height.saturating_sub(2));
    if lines.len() > inner_height && inner_height > 0 {
        lines.truncate(inner_height - 1);
        lines.push(Line::styled(
            "… (a taller terminal shows the rest)",
            theme.dim(),
        ));
    }
    let lines: Vec<Line<'static>> = lines
        .into_iter()
        .map(|line| clipped(line, inner_width))
        .collect();
    Clear.render(area, buf);
    Paragraph::new(lines)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(" Help (? to close) "),
        )
        .render(area, buf);
}

pub fn too_small(area: Rect, buf: &mut Buffer, theme: Theme) {
    Paragraph::new(Line::from(Span::styled(
        "terminal too small for the dashboard (needs 40 × 10)",
        theme.warn(),
    )))
    .wrap(Wrap { trim: true })
    .render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_line_ends_in_an_ellipsis_in_the_style_of_what_it_cut() {
        let bad = Style::default().fg(ratatui::style::Color::Red);
        let line = Line::from(vec![
            Span::raw("w0  4012 D "),
            Span::styled("2 __lru_add_drain_all", bad),
        ]);
        // Spaces past the width are not text cut off.
        let padded = Line::from(vec![Span::raw("w0  4012 D "), Span::raw("0     ")]);
        assert_eq!(clipped(padded.clone(), 12), padded);
        let cut = clipped(line.clone(), 24);
        assert_eq!(cut.to_string(), "w0  4012 D 2 __lru_add_…");
        assert_eq!(cut.width(), 24);
        assert_eq!(cut.spans.last().unwrap().style, bad);
        assert_eq!(clipped(line.clone(), 32), line);
        assert_eq!(clipped(line.clone(), 0).width(), 0);
        // A cut between two spans takes the style of the one it cut off.
        let cut = clipped(line, 12);
        assert_eq!(cut.to_string(), "w0  4012 D …");
        assert_eq!(cut.spans.last().unwrap().style, bad);
    }

    #[test]
    fn sparklines_scale_pad_and_keep_spikes() {
        let values: std::collections::VecDeque<u64> = [0u64, 7, 14].into_iter().collect();
        assert_eq!(sparkline(&values, 5, 1), "  ▁▅█");
        assert_eq!(sparkline(&values, 5, 28), "  ▁▃▅", "scaled to the floor");
        assert_eq!(sparkline(&std::collections::VecDeque::new(), 3, 1), "   ");
        // 100 samples in 10 characters: a single spike survives as a full bar.
        let mut long: std::collections::VecDeque<u64> = std::iter::repeat_n(1, 100).collect();
        long[42] = 1000;
        let line = sparkline(&long, 10, 1);
        assert_eq!(line.chars().count(), 10);
        assert_eq!(line.chars().filter(|&c| c == '█').count(), 1, "{line}");
    }
}
