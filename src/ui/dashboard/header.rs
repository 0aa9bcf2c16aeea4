//! The dashboard's two header lines: the verdict and the layout, then the run's progress (or
//! the way out once it has finished). What does not fit is left out whole, never cut mid-word.

use super::panels::{clipped, mmss, verdict};
use super::theme::Theme;
use crate::live::LiveState;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

/// The spans that fit in `width` columns, in their order: those ranked `None` always, then
/// the others by rank (0 most important) each only if it fits whole; never cut mid-word.
fn fit_segments(items: Vec<(Option<usize>, Span<'static>)>, width: usize) -> Line<'static> {
    let mut used: usize = items
        .iter()
        .filter(|(rank, _)| rank.is_none())
        .map(|(_, span)| span.width())
        .sum();
    let mut by_importance: Vec<usize> =
        (0..items.len()).filter(|&i| items[i].0.is_some()).collect();
    by_importance.sort_by_key(|&i| items[i].0);
    let mut keep: Vec<bool> = items.iter().map(|(rank, _)| rank.is_none()).collect();
    for i in by_importance {
        let w = items[i].1.width();
        if used + w <= width {
            used += w;
            keep[i] = true;
        }
    }
    Line::from(
        items
            .into_iter()
            .zip(keep)
            .filter_map(|((_, span), kept)| kept.then_some(span))
            .collect::<Vec<_>>(),
    )
}

/// `2 × 32 = 64 sessions`: the layout, with the total (P × S) spelled out.
pub fn layout_text(processes: u32, sessions_per_process: u32) -> String {
    format!(
        "{processes} × {sessions_per_process} = {} sessions",
        u64::from(processes) * u64::from(sessions_per_process)
    )
}

/// Title line and progress line. What does not fit is left out whole, the least important
/// first: the output folder, the trace mode, the URL, the layout; the verdict always stays.
pub fn draw(state: &LiveState, theme: Theme, area: Rect, buf: &mut Buffer) {
    let width = area.width as usize;
    let title = fit_segments(title_segments(state, theme), width);
    let output = (
        Some(1),
        Span::styled(format!(" │ output {}", state.info.output_dir), theme.dim()),
    );
    let progress = if let Some(f) = &state.finished {
        fit_segments(
            vec![
                (None, Span::styled(" finished ", theme.title())),
                (None, Span::styled("│ q, Enter or Esc: exit ", theme.warn())),
                (
                    Some(0),
                    Span::raw(format!("│ summary: {} ", f.summary_path)),
                ),
            ],
            width,
        )
    } else if let Some(left_s) = state.countdown_s(state.now_s) {
        fit_segments(countdown_segments(state, left_s, output, theme), width)
    } else if state.start_s.is_none() {
        fit_segments(setting_up_segments(state, output), width)
    } else {
        fit_segments(progress_segments(state, output, theme, width), width)
    };
    // What is always shown may still not fit (`setting up: 40 of 64 sessions connected, 2
    // failed` at 40 columns): it ends in `…` where it is cut.
    Paragraph::new(vec![clipped(title, width), clipped(progress, width)]).render(area, buf);
}

/// Before the gate: ` setting up: 40 of 64 sessions connected, 2 failed`.
fn setting_up_segments(state: &LiveState, output: Segment) -> Vec<Segment> {
    let text = format!(
        " setting up: {}",
        crate::ui::headless::set_up_so_far_text(state)
    );
    vec![(None, Span::raw(text)), output]
}

/// A header segment: its rank (`None` always shown, else 0 most important) and its span.
type Segment = (Option<usize>, Span<'static>);

/// The title line: the name, the verdict, the sweep level, the layout, the shard, the trace
/// mode and the URL.
fn title_segments(state: &LiveState, theme: Theme) -> Vec<Segment> {
    let info = &state.info;
    let (verdict, _) = verdict(state, theme);
    let mut segments = vec![
        (Some(3), Span::styled(" duplexbench-tui │", theme.title())),
        (None, Span::raw(" ")),
        (None, verdict),
    ];
    if let Some(s) = &state.sweep {
        segments.push((
            Some(0),
            Span::styled(
                format!(" │ sweep level {}/{}", s.level, s.levels),
                theme.title(),
            ),
        ));
    }
    segments.extend([
        (
            Some(0),
            Span::raw(format!(
                " │ {}",
                layout_text(info.processes, info.sessions_per_process)
            )),
        ),
        (
            Some(0),
            Span::raw(
                info.shard
                    .map_or(String::new(), |(i, n)| format!(" │ shard {i} of {n}")),
            ),
        ),
        (Some(2), Span::raw(format!(" │ trace {}", info.trace))),
        (Some(1), Span::raw(format!(" │ {}", info.url))),
    ]);
    segments
}

/// Before the start gate: the countdown, `left_s` to go, and when it opens.
fn countdown_segments(
    state: &LiveState,
    left_s: f64,
    output: Segment,
    theme: Theme,
) -> Vec<Segment> {
    let at = state.info.start_at_unix_s.map_or(String::new(), |t| {
        format!(" at {}", crate::options::shard::rfc3339(t))
    });
    vec![
        (
            None,
            Span::styled(format!(" start in {}", mmss(left_s.ceil())), theme.warn()),
        ),
        (
            Some(0),
            Span::raw(format!(
                "{at}: every session is set up and waits at the gate"
            )),
        ),
        output,
    ]
}

/// While streaming: elapsed and remaining time, a bar, then any warnings.
fn progress_segments(
    state: &LiveState,
    output: Segment,
    theme: Theme,
    width: usize,
) -> Vec<Segment> {
    let info = &state.info;
    let elapsed = state.elapsed_s(state.now_s).min(info.duration_s);
    let fraction = if info.duration_s > 0.0 {
        elapsed / info.duration_s
    } else {
        1.0
    };
    let bar_width = 30usize;
    let filled = ((fraction * bar_width as f64).round() as usize).min(bar_width);
    let mut items = vec![(
        None,
        Span::raw(format!(
            " elapsed {} / {}  remaining {}  ",
            mmss(elapsed),
            mmss(info.duration_s),
            mmss(info.duration_s - elapsed)
        )),
    )];
    // Left out whole where it does not fit: a bar cut at the edge reads fuller than it is.
    if items[0].1.width() + bar_width <= width {
        items.push((None, Span::styled("█".repeat(filled), theme.title())));
        items.push((
            None,
            Span::styled("░".repeat(bar_width - filled), theme.dim()),
        ));
    }
    let totals = state.totals();
    let sessions = u64::from(info.processes) * u64::from(info.sessions_per_process);
    // The audio is sent and the sessions wait for the server: the clock stands still, and
    // without a word the screen would look hung for up to --recv-timeout.
    if state.elapsed_s(state.now_s) >= info.duration_s
        && u64::from(totals.sessions_done) < sessions
        && state.cancelled.is_none()
    {
        items.push((
            Some(0),
            Span::styled(
                format!(" │ {}", crate::ui::headless::draining_line(state, true)),
                theme.warn(),
            ),
        ));
    }
    for warning in [
        crate::ui::headless::files_lost_text(&totals),
        state.silent_text(state.now_s),
    ]
    .into_iter()
    .flatten()
    {
        items.push((Some(0), Span::styled(format!(" │ {warning}"), theme.bad())));
    }
    if let Some(c) = &state.cancelled {
        items.push((
            Some(0),
            Span::styled(format!(" │ stopping: {c}"), theme.warn()),
        ));
    }
    items.push(output);
    items
}
