//! The protocol panel: the run's protocol's own latency figures (sglang-omni's serving metrics;
//! Fun-ASR's first update, final after STOP and response lag; the OpenAI and vLLM turn
//! latencies), live. It renders whatever figures the protocol names, without knowing which
//! protocol it is (`contract::figures`).

use super::theme::Theme;
use crate::contract::figures::{ProtocolFigures, Value};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

/// The width of a p50 or p95 column (`-1234.5`; shorter values get a space before them).
const VALUE_WIDTH: usize = 7;

/// The panel's lines at `inner_width`: a row per latency or rate (p50, p95 and the sample
/// count, the count left out when it does not fit), then the counts packed into lines.
fn lines(figures: &ProtocolFigures, inner_width: usize) -> Vec<Line<'static>> {
    let rows: Vec<_> = figures
        .figures
        .iter()
        .filter(|f| !matches!(f.value, Value::Count(_)))
        .collect();
    let name_width = rows
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0)
        + 1;
    let most = rows
        .iter()
        .filter_map(|f| match &f.value {
            Value::Latency(h) => Some(h.count()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let n_width = most.to_string().len() + 1;
    let with_n = name_width + 2 * VALUE_WIDTH + n_width <= inner_width;
    let mut lines = Vec::new();
    for f in rows {
        let values = match &f.value {
            Value::Latency(h) if h.count() == 0 => format!("{:>VALUE_WIDTH$}", "–"),
            Value::Latency(h) => {
                let n = if with_n {
                    format!("{:>n_width$}", h.count())
                } else {
                    String::new()
                };
                format!(
                    "{:>VALUE_WIDTH$.1}{:>VALUE_WIDTH$.1}{n}",
                    h.quantile_ms(0.5),
                    h.quantile_ms(0.95)
                )
            }
            Value::Rate { events, seconds } if *seconds > 0.0 => {
                format!("{:>VALUE_WIDTH$.1}", *events as f64 / seconds)
            }
            _ => format!("{:>VALUE_WIDTH$}", "–"),
        };
        lines.push(Line::from(format!("{:<name_width$}{values}", f.name)));
    }
    let mut line = String::new();
    for f in &figures.figures {
        let Value::Count(n) = f.value else { continue };
        let word = format!("{} {n}", f.name);
        if !line.is_empty() && line.chars().count() + 2 + word.chars().count() > inner_width {
            lines.push(Line::from(std::mem::take(&mut line)));
        }
        if !line.is_empty() {
            line.push_str("  ");
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(Line::from(line));
    }
    lines
}

/// The height the panel needs at `width`, borders included.
pub fn height(figures: &ProtocolFigures, width: u16) -> u16 {
    lines(figures, usize::from(width.saturating_sub(2))).len() as u16 + 2
}

pub fn draw(figures: &ProtocolFigures, theme: Theme, area: Rect, buf: &mut Buffer) {
    let lines = lines(figures, usize::from(area.width.saturating_sub(2)));
    Paragraph::new(lines)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(Line::from(vec![
                    Span::raw(format!(" {} ", figures.title)),
                    Span::styled("ms p50 / p95 · n ", theme.dim()),
                ])),
        )
        .render(area, buf);
}
