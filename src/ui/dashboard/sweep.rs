//! The Sweep panel, shown while a run is one level of `sweep`: which level this is, and the
//! per-level table of the levels already done (the latest at the bottom).

use super::theme::Theme;
use crate::live::SweepLive;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

/// The panel's height for `sweep`: borders, the table's header, and up to `max_rows` rows (at
/// least one line, saying no level is done yet).
pub fn height(sweep: &SweepLive, max_rows: u16) -> u16 {
    3 + (sweep.rows.len() as u16).clamp(1, max_rows)
}

pub fn draw(sweep: &SweepLive, theme: Theme, area: Rect, buf: &mut Buffer) {
    let room = area.height.saturating_sub(3) as usize;
    let mut lines = vec![Line::styled(sweep.header.clone(), theme.dim())];
    if sweep.rows.is_empty() {
        lines.push(Line::styled("no level finished yet", theme.dim()));
    }
    let skip = sweep.rows.len().saturating_sub(room.max(1));
    lines.extend(sweep.rows.iter().skip(skip).map(|r| Line::raw(r.clone())));
    Paragraph::new(lines)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(Line::from(vec![
                    Span::styled(
                        format!(" Sweep: level {} of {} ", sweep.level, sweep.levels),
                        theme.title(),
                    ),
                    Span::raw(format!("({}) ", sweep.label)),
                ])),
        )
        .render(area, buf);
}
