//! The Server panel: the server's latency as the client sees it, live.

use super::theme::Theme;
use crate::live::LiveState;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

/// The server's latency as the client sees it, pooled over every worker: p50 / p99 of each
/// figure, "–" before the first sample.
pub fn draw(state: &LiveState, theme: Theme, area: Rect, buf: &mut Buffer) {
    let pooled = state.pooled_server();
    let mut lines = Vec::new();
    for (name, h) in pooled.figures() {
        lines.push(Line::from(format!("{name:<12}{}", crate::live::p50_p99(h))));
    }
    Paragraph::new(lines)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(Line::from(vec![
                    Span::raw(" Server "),
                    Span::styled("p50 / p99 ", theme.dim()),
                ])),
        )
        .render(area, buf);
}
