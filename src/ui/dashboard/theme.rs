//! Colours and glyphs. `NO_COLOR` (any non-empty value, see no-color.org), or a terminal that
//! has no colours (`TERM` `…-mono`, `…-m`, `vt100`), switches to a scheme where glyphs alone
//! tell the heatmap's classes apart.

use crate::pacing::{PacketClass, Thresholds};
use ratatui::style::{Color, Modifier, Style};

/// How one heatmap cell is classed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heat {
    /// No packet in this bucket.
    Empty,
    /// Every packet within the slow-send threshold of its schedule.
    Ok,
    /// A packet beyond the slow-send threshold.
    Slow,
    /// A late packet (beyond the late threshold).
    Late,
}

impl Heat {
    /// Classes a heat cell (deviation µs + 1; 0 = no packet) as its worst packet is classed.
    pub fn of(value: u32, thresholds: &Thresholds) -> Heat {
        match value.checked_sub(1) {
            None => Heat::Empty,
            Some(deviation_us) => match thresholds.classify(u64::from(deviation_us)) {
                PacketClass::OnTime => Heat::Ok,
                PacketClass::Slow => Heat::Slow,
                PacketClass::Late => Heat::Late,
            },
        }
    }
}

/// Whether `TERM` names a terminal without colours, where the heatmap's green, yellow and red
/// cells (and its legend's three `█`) would look alike: terminfo's monochrome variants
/// (`xterm-mono`, `linux-m`, …), the DEC VTs, `dumb`.
pub fn monochrome(term: Option<&str>) -> bool {
    let Some(term) = term else {
        return false;
    };
    term == "dumb"
        || term.ends_with("-mono")
        || term.ends_with("-m")
        || matches!(term, "vt52" | "vt100" | "vt102" | "vt220" | "vt320")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to a non-empty value or `TERM` names a terminal without
    /// colours.
    pub fn from_env() -> Theme {
        let term = std::env::var("TERM").ok();
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && !monochrome(term.as_deref()),
        }
    }

    pub fn heat_color(self, heat: Heat) -> Color {
        match heat {
            Heat::Empty => Color::Reset,
            Heat::Ok => Color::Green,
            Heat::Slow => Color::Yellow,
            Heat::Late => Color::Red,
        }
    }

    /// The glyph of a cell when a terminal line holds one session row (no colour).
    pub fn heat_glyph(self, heat: Heat) -> &'static str {
        match heat {
            Heat::Empty => " ",
            Heat::Ok => "·",
            Heat::Slow => "+",
            Heat::Late => "X",
        }
    }

    pub fn heat_style(self, heat: Heat) -> Style {
        let style = if self.color {
            Style::default().fg(self.heat_color(heat))
        } else {
            Style::default()
        };
        if heat == Heat::Late {
            style.add_modifier(Modifier::BOLD)
        } else {
            style
        }
    }

    /// Session rows per terminal line: two (half blocks) in colour, one with glyphs.
    pub fn rows_per_line(self) -> usize {
        if self.color {
            2
        } else {
            1
        }
    }

    pub fn good(self) -> Style {
        self.fg(Color::Green).add_modifier(Modifier::BOLD)
    }

    pub fn bad(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    pub fn warn(self) -> Style {
        self.fg(Color::Yellow)
    }

    pub fn dim(self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }

    pub fn title(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    fn fg(self, color: Color) -> Style {
        if self.color {
            Style::default().fg(color)
        } else {
            Style::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_classed_by_threshold() {
        assert_eq!(Heat::of(0, &Thresholds::from_ms(80, 20)), Heat::Empty);
        assert_eq!(Heat::of(1_001, &Thresholds::from_ms(80, 20)), Heat::Ok);
        assert_eq!(Heat::of(20_002, &Thresholds::from_ms(80, 20)), Heat::Slow);
        assert_eq!(Heat::of(80_002, &Thresholds::from_ms(80, 20)), Heat::Late);
    }

    /// A terminal without colours gets the glyphs (its green, yellow and red cells looked
    /// alike); a colour one, or none named, keeps the colours.
    #[test]
    fn a_monochrome_term_is_told_from_its_name() {
        for term in ["xterm-mono", "linux-m", "vt100", "dumb"] {
            assert!(monochrome(Some(term)), "{term}");
        }
        for term in [
            "xterm-256color",
            "screen",
            "tmux-256color",
            "linux",
            "xterm",
        ] {
            assert!(!monochrome(Some(term)), "{term}");
        }
        assert!(!monochrome(None));
    }
}
