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

/// A narrowed column's width when it fits: room for `99.9`, so that a value that gains its
/// second digit from one second to the next does not shift the columns.
const STEADY_WIDTH: usize = 5;

/// A sample count in 4 characters below a thousand million: exact below 1000, then `6.4k`,
/// `64k`, `640k`, `6.4M`, `64M` (cut, not rounded: the panel never claims more samples than it
/// has).
fn short_count(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=9_999 => format!("{}.{}k", n / 1_000, n / 100 % 10),
        10_000..=999_999 => format!("{}k", n / 1_000),
        1_000_000..=9_999_999 => format!("{}.{}M", n / 1_000_000, n / 100_000 % 10),
        _ => format!("{}M", n / 1_000_000),
    }
}

/// The panel's lines at `inner_width`: a row per latency or rate (p50, p95 and the sample
/// count, the count left out when it does not fit), then the counts packed into lines; and
/// whether the count is shown, which the title says.
fn lines(figures: &ProtocolFigures, inner_width: usize) -> (Vec<Line<'static>>, bool) {
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
    let n_width = rows
        .iter()
        .filter_map(|f| match &f.value {
            Value::Latency(h) => Some(short_count(h.count()).len() + 1),
            _ => None,
        })
        .max()
        .unwrap_or(1);
    // The values' own width, for a panel too narrow for the n column at `VALUE_WIDTH`: one space
    // before the widest value (`-79.5` needs 6), never more than `VALUE_WIDTH`.
    let tight = rows
        .iter()
        .map(|f| match &f.value {
            Value::Latency(h) if h.count() > 0 => format!("{:.1}", h.quantile_ms(0.5))
                .len()
                .max(format!("{:.1}", h.quantile_ms(0.95)).len()),
            Value::Rate { events, seconds } if *seconds > 0.0 => {
                format!("{:.1}", *events as f64 / seconds).len()
            }
            _ => 1,
        })
        .max()
        .unwrap_or(1)
        .min(VALUE_WIDTH - 1)
        + 1;
    let fits = |value_width: usize| name_width + 2 * value_width + n_width <= inner_width;
    let fits_without_n = |value_width: usize| name_width + 2 * value_width <= inner_width;
    let steady = tight.max(STEADY_WIDTH);
    let (value_width, with_n) = if fits(VALUE_WIDTH) {
        (VALUE_WIDTH, true)
    } else if fits(steady) {
        (steady, true)
    } else if fits(tight) {
        (tight, true)
    } else if fits_without_n(VALUE_WIDTH) {
        (VALUE_WIDTH, false)
    } else {
        (tight, false)
    };
    let mut lines = Vec::new();
    for f in rows {
        let values = match &f.value {
            Value::Latency(h) if h.count() == 0 => format!("{:>value_width$}", "–"),
            Value::Latency(h) => {
                let n = if with_n {
                    format!("{:>n_width$}", short_count(h.count()))
                } else {
                    String::new()
                };
                format!(
                    "{:>value_width$.1}{:>value_width$.1}{n}",
                    h.quantile_ms(0.5),
                    h.quantile_ms(0.95)
                )
            }
            Value::Rate { events, seconds } if *seconds > 0.0 => {
                format!("{:>value_width$.1}", *events as f64 / seconds)
            }
            _ => format!("{:>value_width$}", "–"),
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
    (lines, with_n)
}

/// The height the panel needs at `width`, borders included.
pub fn height(figures: &ProtocolFigures, width: u16) -> u16 {
    lines(figures, usize::from(width.saturating_sub(2))).0.len() as u16 + 2
}

/// The panel, its title naming the columns shown: `· n` only with the sample count (at 80
/// columns it gives way, and the title said it was there).
pub fn draw(figures: &ProtocolFigures, theme: Theme, area: Rect, buf: &mut Buffer) {
    let inner_width = usize::from(area.width.saturating_sub(2));
    let (lines, with_n) = lines(figures, inner_width);
    // Narrower than its values (a 50-column screen): `1.7   2` read as a p95 of 2.
    let lines: Vec<_> = lines
        .into_iter()
        .map(|l| super::panels::clipped(l, inner_width))
        .collect();
    let columns = if with_n {
        "ms p50 / p95 · n "
    } else {
        "ms p50 / p95 "
    };
    let title = Line::from(vec![
        Span::raw(format!(" {} ", figures.title)),
        Span::styled(columns, theme.dim()),
    ]);
    let title = super::panels::clipped(title, usize::from(area.width).saturating_sub(3));
    Paragraph::new(lines)
        .block(Block::default().borders(Borders::ALL).title(title))
        .render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::figures::Figure;
    use crate::stats::SignedHistogram;

    fn latency(name: &str, samples: i64, base_us: i64) -> Figure {
        let mut h = SignedHistogram::default();
        for k in 0..samples {
            h.record_us(base_us + k % 900);
        }
        Figure {
            name: name.to_string(),
            value: Value::Latency(h),
        }
    }

    fn text(figures: &ProtocolFigures, width: usize) -> Vec<String> {
        lines(figures, width)
            .0
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    #[test]
    fn counts_are_short_and_never_more_than_counted() {
        let cases = [
            (0, "0"),
            (999, "999"),
            (1_000, "1.0k"),
            (6_460, "6.4k"),
            (9_999, "9.9k"),
            (10_000, "10k"),
            (999_999, "999k"),
            (1_250_000, "1.2M"),
            (64_000_000, "64M"),
        ];
        for (n, shown) in cases {
            assert_eq!(short_count(n), shown, "{n}");
        }
    }

    /// The dashboard's 38-column panel (36 inside) with sglang-omni's longest name
    /// (`output_gap_excess`) kept the n column only while every count had 3 digits.
    #[test]
    fn the_sample_count_stays_in_a_38_column_panel_past_a_thousand_samples() {
        let figures = ProtocolFigures {
            title: "sglang-omni".to_string(),
            figures: vec![
                latency("accepted", 6_460, 200),
                latency("unit_lag", 6_400, -79_500),
                latency("output_gap_excess", 6_300, 0),
            ],
        };
        let shown = text(&figures, 36);
        for line in &shown {
            assert!(line.chars().count() <= 36, "{line:?}");
        }
        assert!(
            shown[0].starts_with("accepted") && shown[0].ends_with(" 6.4k"),
            "{shown:?}"
        );
        assert!(
            shown[1].contains("-79.") && shown[1].ends_with(" 6.4k"),
            "{shown:?}"
        );
        assert!(shown[2].ends_with(" 6.3k"), "{shown:?}");
        // Where the wide columns fit, they stay as they were.
        let wide = text(&figures, 60);
        assert!(wide[1].starts_with("unit_lag            -79."), "{wide:?}");
    }

    /// Narrowed to fit the count, the columns kept the widest value's width: a p95 that went
    /// from 9.9 to 10.1 ms moved them from one second to the next.
    #[test]
    fn narrowed_columns_do_not_move_when_a_value_gains_a_digit() {
        let at = |base_us: i64| {
            let figures = ProtocolFigures {
                title: "sglang-omni".to_string(),
                figures: vec![
                    latency("output_gap_excess", 6_300, base_us),
                    latency("accepted", 6_460, 200),
                ],
            };
            text(&figures, 36)
        };
        let (one, two) = (at(200), at(12_000));
        assert!(
            one[0].contains(" 0.") && two[0].contains(" 12."),
            "{one:?} {two:?}"
        );
        assert_eq!(
            one[0].chars().count(),
            two[0].chars().count(),
            "{one:?} {two:?}"
        );
        assert_eq!(one[1], two[1], "the other row stays where it was");
    }

    #[test]
    fn a_panel_too_narrow_for_the_count_leaves_it_out_and_keeps_the_values() {
        let figures = ProtocolFigures {
            title: "sglang-omni".to_string(),
            figures: vec![latency("output_gap_excess", 6_300, 0)],
        };
        for width in [30, 28] {
            let shown = text(&figures, width);
            assert_eq!(shown.len(), 1);
            assert!(!shown[0].contains('k'), "{shown:?}");
            assert!(shown[0].starts_with("output_gap_excess "), "{shown:?}");
            assert!(shown[0].chars().count() <= width, "{width}: {shown:?}");
            // Both values, whole.
            assert_eq!(shown[0].split_whitespace().count(), 3, "{shown:?}");
        }
    }
}
