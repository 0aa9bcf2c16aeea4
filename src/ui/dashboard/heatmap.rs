//! The deviation heatmap: one row per session (or per group of sessions of one worker when they
//! outnumber the rows), one column per time bucket, each cell the worst |deviation| in it.

use super::keys::ViewState;
use super::theme::{Heat, Theme};
use crate::live::{LiveState, BUCKET_S};
use crate::pacing::Thresholds;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

/// Columns taken by a row's label (`w12 s1000-1023` is cut, not wrapped).
const LABEL_WIDTH: u16 = 12;

/// One heatmap row: sessions of one worker (global indices, worker-major).
#[derive(Debug, Clone, PartialEq)]
pub struct HeatRow {
    pub worker: usize,
    pub sessions: Vec<usize>,
}

impl HeatRow {
    fn first(&self) -> usize {
        self.sessions.first().copied().unwrap_or(0)
    }

    fn last(&self) -> usize {
        self.sessions.last().copied().unwrap_or(0)
    }
}

/// The heatmap's lines: each holds `per_line` rows of one worker (a line never mixes workers),
/// with as few sessions per row as lets everything fit in `lines` lines when `view.grouped`.
/// Returns the lines and the sessions per row.
pub fn layout_lines(
    state: &LiveState,
    view: &ViewState,
    lines: usize,
    per_line: usize,
) -> (Vec<Vec<HeatRow>>, usize) {
    let per_worker = state.info.sessions_per_process.max(1) as usize;
    let thresholds = &state.info.thresholds;
    let mut by_worker: Vec<Vec<usize>> = vec![Vec::new(); state.workers.len().max(1)];
    for s in 0..state.heat.len() {
        let listed = !view.late_only
            || state.heat[s]
                .iter()
                .any(|&v| Heat::of(v, thresholds) == Heat::Late);
        if let (true, Some(w)) = (listed, by_worker.get_mut(s / per_worker)) {
            w.push(s);
        }
    }
    let lines_for = |group: usize| -> usize {
        by_worker
            .iter()
            .map(|w| w.len().div_ceil(group).div_ceil(per_line))
            .sum()
    };
    let group = if view.grouped {
        (1..=per_worker.max(1))
            .find(|&g| lines_for(g) <= lines.max(1))
            .unwrap_or(per_worker)
    } else {
        1
    };
    let out = by_worker
        .iter()
        .enumerate()
        .flat_map(|(worker, sessions)| {
            let rows: Vec<HeatRow> = sessions
                .chunks(group)
                .map(|chunk| HeatRow {
                    worker,
                    sessions: chunk.to_vec(),
                })
                .collect();
            rows.chunks(per_line)
                .map(<[HeatRow]>::to_vec)
                .collect::<Vec<_>>()
        })
        .collect();
    (out, group)
}

fn label(rows: &[HeatRow], per_worker: usize) -> String {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return String::new();
    };
    let local = |s: usize| s % per_worker;
    let (a, b) = (local(first.first()), local(last.last()));
    if a == b {
        format!("w{} s{a}", first.worker)
    } else {
        format!("w{} s{a}-{b}", first.worker)
    }
}

/// The worst value of a row's sessions over `buckets`.
fn row_value(state: &LiveState, row: &HeatRow, buckets: std::ops::Range<usize>) -> u32 {
    row.sessions
        .iter()
        .filter_map(|&s| state.heat.get(s))
        .flat_map(|r| r.get(buckets.clone()).unwrap_or(&[]))
        .copied()
        .max()
        .unwrap_or(0)
}

/// How the run's time maps onto the grid: the whole run (and a bucket of tail) fills the width,
/// with several columns per bucket for a short run or several buckets per column for a long one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeAxis {
    pub cols_per_bucket: usize,
    pub buckets_per_col: usize,
}

impl TimeAxis {
    pub fn fit(duration_s: f64, grid_width: usize) -> TimeAxis {
        let buckets = (duration_s / BUCKET_S).ceil().max(1.0) as usize + 1;
        let grid_width = grid_width.max(1);
        if grid_width >= buckets {
            TimeAxis {
                cols_per_bucket: grid_width / buckets,
                buckets_per_col: 1,
            }
        } else {
            TimeAxis {
                cols_per_bucket: 1,
                buckets_per_col: buckets.div_ceil(grid_width),
            }
        }
    }

    /// The buckets column `col` shows.
    pub fn buckets(self, col: usize) -> std::ops::Range<usize> {
        let first = col / self.cols_per_bucket * self.buckets_per_col;
        first..first + self.buckets_per_col
    }

    /// `1 col = 1 s`, `1 s = 4 cols`, `1 col = 3 s`.
    pub fn scale(self) -> String {
        let seconds = self.buckets_per_col as f64 * BUCKET_S;
        if self.cols_per_bucket > 1 {
            format!("1 s = {} cols", self.cols_per_bucket)
        } else {
            format!("1 col = {seconds:.0} s")
        }
    }
}

/// Draws the heatmap panel into `area`.
pub fn draw(state: &LiveState, view: &ViewState, theme: Theme, area: Rect, buf: &mut Buffer) {
    let block = Block::default().borders(Borders::ALL);
    let inner = block.inner(area);
    if inner.height < 2 || inner.width <= LABEL_WIDTH + 2 {
        block.title(" Heatmap ").render(area, buf);
        return;
    }
    let per_line = theme.rows_per_line();
    let height = (inner.height - 1) as usize; // the last line is the legend
    let (lines, group) = layout_lines(state, view, height, per_line);
    view.max_scroll.set(lines.len().saturating_sub(height));
    view.page.set(height);
    let first_line = if view.grouped {
        0
    } else {
        view.scroll.min(lines.len().saturating_sub(height))
    };
    let shown = &lines[first_line..lines.len().min(first_line + height)];
    let title = title(
        &lines,
        group * per_line,
        (first_line, shown.len()),
        view,
        area.width,
    );
    block.title(title).render(area, buf);

    let grid_width = (inner.width - LABEL_WIDTH) as usize;
    let axis = TimeAxis::fit(state.info.duration_s, grid_width);
    let per_worker = state.info.sessions_per_process.max(1) as usize;
    let thresholds = &state.info.thresholds;

    for (line, pair) in shown.iter().enumerate() {
        let y = inner.y + line as u16;
        let text = label(pair, per_worker);
        buf.set_stringn(inner.x, y, &text, LABEL_WIDTH as usize - 1, theme.dim());
        for col in 0..grid_width {
            let x = inner.x + LABEL_WIDTH + col as u16;
            let heats: Vec<Heat> = pair
                .iter()
                .map(|row| Heat::of(row_value(state, row, axis.buckets(col)), thresholds))
                .collect();
            if let Some(cell) = buf.cell_mut((x, y)) {
                paint_cell(cell, &heats, theme);
            }
        }
    }
    if shown.is_empty() && view.late_only {
        let text = if state.finished.is_some() {
            "no session had a late packet in the run (v: show all sessions)"
        } else {
            "no session has had a late packet so far (v: show all sessions)"
        };
        Paragraph::new(Line::from(Span::styled(text, theme.good())))
            .wrap(ratatui::widgets::Wrap { trim: true })
            .render(Rect::new(inner.x, inner.y, inner.width, height as u16), buf);
    }
    let legend_y = inner.y + inner.height - 1;
    Paragraph::new(legend(
        theme,
        thresholds,
        &axis.scale(),
        inner.width as usize,
    ))
    .render(Rect::new(inner.x, legend_y, inner.width, 1), buf);
}

/// The panel's title, told in what the eye sees: sessions and terminal lines (a line holds two
/// rows of half blocks in colour), so that "N per line" matches the labels' ranges; then which
/// of the `lines` are shown (from `first_line`, `shown` of them) and the filter; shorter
/// words where the panel (`width` columns) is narrow, never a cut.
fn title(
    lines: &[Vec<HeatRow>],
    per_line: usize,
    (first_line, shown): (usize, usize),
    view: &ViewState,
    width: u16,
) -> String {
    let sessions: usize = lines.iter().flatten().map(|r| r.sessions.len()).sum();
    let late = if view.late_only { ", late only" } else { "" };
    let scrolled = lines.len() > shown;
    let (first, last, of) = (first_line + 1, first_line + shown, lines.len());
    // The same parts in longer or shorter words: (name, "N per line", "lines a-b of n").
    let worded = |name: &str, per: &str, showing: &str| {
        let per = if per_line > 1 {
            format!(", {per_line}{per}")
        } else {
            String::new()
        };
        let showing = if scrolled {
            format!(", {showing}{first}-{last} of {of}")
        } else {
            String::new()
        };
        format!(" {name}{sessions} sessions{per}{showing}{late} ")
    };
    let long = worded("Deviation heatmap: ", " per line", "lines ");
    let short = |name: &str| worded(name, "/line", "");
    super::panels::first_fitting(width, [long, short("Heatmap: "), short("")])
}

/// One cell of the grid: in colour, two rows as half blocks (top in the foreground); without,
/// the first row's glyph.
fn paint_cell(cell: &mut ratatui::buffer::Cell, heats: &[Heat], theme: Theme) {
    if theme.color {
        let top = heats.first().copied().unwrap_or(Heat::Empty);
        let bottom = heats.get(1).copied().unwrap_or(Heat::Empty);
        match (top, bottom) {
            (Heat::Empty, Heat::Empty) => {
                cell.set_symbol(" ");
            }
            (Heat::Empty, b) => {
                cell.set_symbol("▄").set_fg(theme.heat_color(b));
            }
            (t, b) => {
                cell.set_symbol("▀")
                    .set_fg(theme.heat_color(t))
                    .set_bg(theme.heat_color(b));
            }
        }
    } else {
        let heat = heats.first().copied().unwrap_or(Heat::Empty);
        cell.set_symbol(theme.heat_glyph(heat))
            .set_style(theme.heat_style(heat));
    }
}

/// The colour (or glyph) scale, shared by the heatmap and the help, in `width` columns: the
/// classes, the time scale and "blank = no packet", as much of it as fits, in this order of
/// giving way: "blank = no packet", then the classes' words (`≤20 ms` → `≤20`, which keeps
/// the scale: columns without a unit read as seconds), then the scale, then the word `late`
/// (its glyph, `X` or red, says it); what still does not fit ends in `…`.
pub fn legend(theme: Theme, thresholds: &Thresholds, scale: &str, width: usize) -> Line<'static> {
    let late_ms = thresholds.late_us / 1000;
    let slow_ms = thresholds.slow_us / 1000;
    // 2: the words; 1: short; 0: the thresholds alone (the late glyph, `X` or red, says late).
    let classes = |words: u8| -> Vec<Span<'static>> {
        let texts = match words {
            2 => [
                format!(" ≤{slow_ms} ms  "),
                format!(" >{slow_ms} ms  "),
                format!(" late >{late_ms} ms  "),
            ],
            1 => [
                format!(" ≤{slow_ms} "),
                format!(" >{slow_ms} "),
                format!(" late>{late_ms} "),
            ],
            _ => [
                format!(" ≤{slow_ms} "),
                format!(" >{slow_ms} "),
                format!(" >{late_ms}"),
            ],
        };
        let mut spans = Vec::new();
        for (heat, text) in [Heat::Ok, Heat::Slow, Heat::Late].into_iter().zip(texts) {
            let glyph = if theme.color {
                "█"
            } else {
                theme.heat_glyph(heat)
            };
            spans.push(Span::styled(glyph, theme.heat_style(heat)));
            spans.push(Span::raw(text));
        }
        spans
    };
    let scale = Span::styled(format!("{scale}  "), theme.dim());
    let blank = Span::styled("blank = no packet", theme.dim());
    let has_scale = scale.width() > 2;
    let width_of = |spans: &[Span<'_>]| spans.iter().map(Span::width).sum::<usize>();
    let build = |words: u8, with_scale: bool, with_blank: bool| -> Vec<Span<'static>> {
        let mut spans = Vec::new();
        if with_scale && has_scale {
            spans.push(scale.clone());
        }
        spans.extend(classes(words));
        if with_blank {
            spans.push(blank.clone());
        }
        spans
    };
    let tries = [
        (2, true, true),
        (2, true, false),
        (1, true, false),
        (2, false, false),
        (1, false, false),
        (0, false, false),
    ];
    let spans = tries
        .iter()
        .map(|&(words, with_scale, with_blank)| build(words, with_scale, with_blank))
        .find(|spans| width_of(spans) <= width)
        .unwrap_or_else(|| build(0, false, false));
    // A panel too narrow for the classes: cut, marked (`X la` read as a class of its own).
    super::panels::clipped(Line::from(spans), width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::RunInfo;

    fn state(processes: u32, sessions: u32) -> LiveState {
        LiveState::new(RunInfo {
            processes,
            sessions_per_process: sessions,
            thresholds: crate::pacing::Thresholds::from_ms(80, 20),
            ..RunInfo::default()
        })
    }

    #[test]
    fn sessions_are_grouped_within_a_worker_to_fit() {
        let s = state(2, 10);
        // 4 lines of 2 rows: 10 sessions per worker need groups of 3 (4 rows = 2 lines each).
        let (lines, group) = layout_lines(&s, &ViewState::default(), 4, 2);
        assert_eq!((lines.len(), group), (4, 3));
        for line in &lines {
            assert!(line.iter().all(|r| r.worker == line[0].worker), "{line:?}");
            assert!(line
                .iter()
                .all(|r| r.sessions.iter().all(|&x| x / 10 == r.worker)));
        }
        let (lines, group) = layout_lines(&s, &ViewState::default(), 40, 1);
        assert_eq!((lines.len(), group), (20, 1));
    }

    #[test]
    fn the_time_axis_stretches_a_short_run_and_folds_a_long_one_issue_14() {
        // 10 s (11 buckets with the tail) in 215 columns: 19 columns a second.
        let axis = TimeAxis::fit(10.0, 215);
        assert_eq!(axis.cols_per_bucket, 19);
        assert_eq!(axis.buckets(0), 0..1);
        assert_eq!(axis.buckets(19), 1..2);
        assert_eq!(axis.scale(), "1 s = 19 cols");
        // An hour in 100 columns: 37 s a column.
        let axis = TimeAxis::fit(3600.0, 100);
        assert_eq!(axis.buckets_per_col, 37);
        assert_eq!(axis.buckets(1), 37..74);
        assert_eq!(axis.scale(), "1 col = 37 s");
    }

    /// The title says less on a narrow panel, in whole words: a title cut by the border read
    /// `lines 1-10 of 4` for "of 43" (seen at 80 columns). Where even the shortest does not
    /// fit, it ends in `…` where it is cut (`16 sessions, 4/li` at 40 columns read as whole).
    #[test]
    fn the_title_shortens_to_fit_a_narrow_panel_and_is_cut_only_with_a_mark() {
        let s = state(1, 256);
        let view = ViewState {
            grouped: false,
            late_only: true,
            ..ViewState::default()
        };
        let (lines, _) = layout_lines(&s, &view, 10, 2);
        assert!(lines.is_empty(), "no late session yet");
        let view = ViewState {
            grouped: false,
            ..ViewState::default()
        };
        let (lines, group) = layout_lines(&s, &view, 10, 2);
        let at = |width| title(&lines, group * 2, (0, 10), &view, width);
        assert_eq!(
            at(120),
            " Deviation heatmap: 256 sessions, 2 per line, lines 1-10 of 128 "
        );
        assert_eq!(at(52), " Heatmap: 256 sessions, 2/line, 1-10 of 128 ");
        assert_eq!(at(44), " 256 sessions, 2/line, 1-10 of 128 ");
        for width in 4..140 {
            let t = at(width);
            assert!(t.chars().count() + 3 <= usize::from(width), "{width}: {t}");
            let whole = [at(140), at(52), at(44)].contains(&t) || t == at(44).trim_end();
            assert!(whole || t.ends_with('…'), "{width}: {t}");
        }
        assert_eq!(at(20), " 256 sessions, 2…");
    }

    #[test]
    fn the_late_filter_keeps_only_late_sessions() {
        let mut s = state(1, 4);
        s.heat[2] = vec![1_000, 150_001];
        let view = ViewState {
            late_only: true,
            ..ViewState::default()
        };
        let (lines, _) = layout_lines(&s, &view, 10, 2);
        assert_eq!(
            lines,
            vec![vec![HeatRow {
                worker: 0,
                sessions: vec![2]
            }]]
        );
    }
}
