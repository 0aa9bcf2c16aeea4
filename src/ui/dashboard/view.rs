//! The whole screen: which panels fit and where they go.

use super::keys::ViewState;
use super::theme::Theme;
use super::{header, heatmap, panels, protocol, sweep};
use crate::live::LiveState;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::Frame;

/// The Processes panel's width for its D-stalls column (44 inside), taken on screens narrower
/// than 100 where 45 % would leave the column out.
const PROCESSES_WIDE: u16 = 46;
/// The least the Loop lag panel keeps beside it: a worker's label, a short sparkline, its
/// maximum and the writer queue.
const LOOP_LAG_LEAST: u16 = 34;
/// The narrowest protocol panel shown: its names and two numbers (`accepted   0.5   0.6`).
const PROTOCOL_LEAST_WIDTH: u16 = 26;

/// The left column's width with a protocol panel, on a screen at least 100 wide (4 less on
/// smaller ones: the sample counts are left out first).
const PROTOCOL_WIDTH: u16 = 38;

/// Draws the dashboard for `state` into the frame.
pub fn render(frame: &mut Frame<'_>, state: &LiveState, view: &ViewState, theme: Theme) {
    let area = frame.area();
    let buf = frame.buffer_mut();
    if area.width < 40 || area.height < 10 {
        panels::too_small(area, buf, theme);
        return;
    }
    let processes = state.workers.len() as u16
        + u16::from(state.mock.is_some())
        + u16::from(state.server.is_some());
    // The per-worker panels need a line per process plus borders, a header and the stall log:
    // a line, or on a tall screen up to three when there are stalls to list. Dropped on small
    // screens.
    let stalls = state
        .sampler
        .as_ref()
        .and_then(|s| s.lock().ok().map(|s| s.recent.len()))
        .unwrap_or(0);
    let stall_lines = if area.height >= 40 {
        (stalls as u16).clamp(1, 3)
    } else {
        1
    };
    let bottom = if area.height >= 22 {
        (processes + 3 + stall_lines).clamp(5, area.height / 3)
    } else {
        0
    };
    // A sweep's table of levels, under the header, when there is room for it besides the rest.
    let sweep_height = match &state.sweep {
        Some(s) if area.height >= 24 => sweep::height(s, (area.height / 6).max(1)),
        _ => 0,
    };
    let [header, sweep_area, middle, lower, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(sweep_height),
        Constraint::Min(5),
        Constraint::Length(bottom),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(state, theme, header, buf);
    if let (Some(s), true) = (&state.sweep, sweep_height > 0) {
        sweep::draw(s, theme, sweep_area, buf);
    }
    // The server's latency as the protocol names it; the column is wider when the screen has
    // room for the numbers.
    let figures = state.pooled_protocol();
    let counters_width = if area.width >= 100 {
        PROTOCOL_WIDTH
    } else {
        PROTOCOL_WIDTH - 4
    };
    let [counters, heat] =
        Layout::horizontal([Constraint::Length(counters_width), Constraint::Min(20)]).areas(middle);
    // The server's figures under the pacing ones, as far as the pacing panel keeps room for its
    // verdict, its first reason, the late count and the packets (it leaves its least important
    // lines out first): on an 80 × 24 terminal the protocol's latencies are worth more than the
    // pacing panel's percentiles, which the heatmap and the header's verdict stand in for. A
    // short panel leaves its last lines out (the counts, then the latencies last named).
    // At the width the column got (a narrow screen gives it less than it asked for): a panel
    // too narrow for the numbers showed names and `…` alone, and took the pacing panel's rows.
    let server_height = protocol::height(&figures, counters.width).min(
        counters
            .height
            .saturating_sub(panels::counters_least_height(state, theme, counters.width)),
    );
    let server_height = if server_height >= 3 && counters.width >= PROTOCOL_LEAST_WIDTH {
        server_height
    } else {
        0
    };
    let [counters, server_area] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(server_height)]).areas(counters);
    panels::counters(state, theme, counters, buf);
    if server_height > 0 {
        protocol::draw(&figures, theme, server_area, buf);
    }
    heatmap::draw(state, view, theme, heat, buf);
    if bottom > 0 {
        let split = if area.width * 45 / 100 < PROCESSES_WIDE
            && area.width >= PROCESSES_WIDE + LOOP_LAG_LEAST
        {
            [Constraint::Min(0), Constraint::Length(PROCESSES_WIDE)]
        } else {
            [Constraint::Percentage(55), Constraint::Percentage(45)]
        };
        let [workers_area, processes_area] = Layout::horizontal(split).areas(lower);
        panels::workers(state, theme, workers_area, buf);
        panels::processes(state, theme, processes_area, buf);
    }
    // Named in the footer: a panel left out without a word looked like one the run lacked.
    let mut hidden = Vec::new();
    if server_height == 0 && !figures.figures.is_empty() {
        hidden.push(figures.title.as_str());
    }
    if bottom == 0 {
        hidden.extend(["Loop lag", "Processes"]);
    }
    panels::footer(state, theme, &hidden, footer, buf);
    if view.help {
        let width = 64.max(area.width.min(80));
        panels::help(
            theme,
            &state.info.thresholds,
            state.finished.is_some(),
            centered(area, width, 19),
            buf,
        );
    }
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height - height) / 2,
        width,
        height,
    )
}
