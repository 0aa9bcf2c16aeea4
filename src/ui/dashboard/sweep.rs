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
    // The columns that fit whole; the rest are left out, not cut through.
    let fits = fitting_width(&sweep.header, usize::from(area.width.saturating_sub(2)));
    let cut = |line: &str| line.chars().take(fits).collect::<String>();
    let mut lines = vec![Line::styled(cut(&sweep.header), theme.dim())];
    if sweep.rows.is_empty() {
        lines.push(Line::styled("no level finished yet", theme.dim()));
    }
    let skip = sweep.rows.len().saturating_sub(room.max(1));
    lines.extend(sweep.rows.iter().skip(skip).map(|r| Line::raw(cut(r))));
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

/// How many characters of the table's lines to show in `width`: up to the end of the last
/// column that fits whole. The table's cells are right-aligned and set two spaces apart (a
/// heading may hold single spaces, `P × S`), so a column ends where its heading does.
fn fitting_width(header: &str, width: usize) -> usize {
    let chars: Vec<char> = header.chars().collect();
    if chars.len() <= width {
        return width;
    }
    let ends = (0..chars.len()).filter(|&i| {
        chars[i] != ' '
            && chars
                .get(i + 1..i + 3)
                .is_none_or(|next| next == [' ', ' '])
    });
    ends.map(|i| i + 1)
        .take_while(|&end| end <= width)
        .last()
        .unwrap_or(width)
}

#[cfg(test)]
mod tests {
    use super::fitting_width;

    #[test]
    fn a_table_too_wide_loses_whole_columns_not_half_of_one() {
        let header = "sessions  P × S     client  complete  late  client CPU";
        assert_eq!(fitting_width(header, 80), 80, "all of it fits: nothing cut");
        // "late" ends at 42 characters; "client CPU" does not fit in 45.
        let shown: String = header.chars().take(fitting_width(header, 45)).collect();
        assert_eq!(shown, "sessions  P × S     client  complete  late");
        assert_eq!(
            fitting_width(header, 5),
            5,
            "no column fits: the width, cut"
        );
    }
}
