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
        let listed = !view.violations_only
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

fn row_value(state: &LiveState, row: &HeatRow, bucket: usize) -> u32 {
    row.sessions
        .iter()
        .filter_map(|&s| state.heat.get(s).and_then(|r| r.get(bucket)))
        .copied()
        .max()
        .unwrap_or(0)
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
    let first_line = if view.grouped {
        0
    } else {
        view.scroll.min(lines.len().saturating_sub(height))
    };
    let shown = &lines[first_line..lines.len().min(first_line + height)];
    let rows: usize = lines.iter().map(Vec::len).sum();
    let title = format!(
        " Deviation heatmap: {rows} rows{}{}{} ",
        if group > 1 {
            format!(", {group} sessions per row")
        } else {
            String::new()
        },
        if lines.len() > shown.len() {
            format!(
                ", lines {}-{} of {}",
                first_line + 1,
                first_line + shown.len(),
                lines.len()
            )
        } else {
            String::new()
        },
        if view.violations_only {
            ", violations only"
        } else {
            ""
        }
    );
    block.title(title).render(area, buf);

    let grid_width = (inner.width - LABEL_WIDTH) as usize;
    let now_s = if state.finished.is_some() {
        state.now_s
    } else {
        state.now_s.max(state.start_s.unwrap_or(0.0))
    };
    let current = (state.elapsed_s(now_s) / BUCKET_S).floor() as usize;
    let first_bucket = (current + 1).saturating_sub(grid_width);
    let per_worker = state.info.sessions_per_process.max(1) as usize;
    let thresholds = &state.info.thresholds;

    for (line, pair) in shown.iter().enumerate() {
        let y = inner.y + line as u16;
        let text = label(pair, per_worker);
        buf.set_stringn(inner.x, y, &text, LABEL_WIDTH as usize - 1, theme.dim());
        for col in 0..grid_width {
            let bucket = first_bucket + col;
            let x = inner.x + LABEL_WIDTH + col as u16;
            let heats: Vec<Heat> = pair
                .iter()
                .map(|row| Heat::of(row_value(state, row, bucket), thresholds))
                .collect();
            let Some(cell) = buf.cell_mut((x, y)) else {
                continue;
            };
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
    }
    let legend_y = inner.y + inner.height - 1;
    Paragraph::new(legend(theme, thresholds))
        .render(Rect::new(inner.x, legend_y, inner.width, 1), buf);
}

/// The colour (or glyph) scale, shared by the heatmap and the help.
pub fn legend(theme: Theme, thresholds: &Thresholds) -> Line<'static> {
    let late_ms = thresholds.late_us / 1000;
    let slow_ms = thresholds.slow_us / 1000;
    let mut spans = vec![Span::styled(
        format!("1 col = {BUCKET_S:.0} s  "),
        theme.dim(),
    )];
    for (heat, text) in [
        (Heat::Ok, format!(" ≤{slow_ms} ms  ")),
        (Heat::Slow, format!(" >{slow_ms} ms  ")),
        (Heat::Late, format!(" late >{late_ms} ms  ")),
    ] {
        let glyph = if theme.color {
            "█"
        } else {
            theme.heat_glyph(heat)
        };
        spans.push(Span::styled(glyph, theme.heat_style(heat)));
        spans.push(Span::raw(text));
    }
    spans.push(Span::styled("blank = no packet", theme.dim()));
    Line::from(spans)
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
    fn the_violation_filter_keeps_only_late_sessions() {
        let mut s = state(1, 4);
        s.heat[2] = vec![1_000, 150_001];
        let view = ViewState {
            violations_only: true,
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
