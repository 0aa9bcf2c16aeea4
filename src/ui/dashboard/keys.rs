//! The dashboard's own view state (scrolling, filters, help) and the keys that change it.

use crossterm::event::KeyCode;

/// What the keys change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewState {
    /// First session row shown when rows are not grouped.
    pub scroll: usize,
    /// Show only sessions with a late packet.
    pub late_only: bool,
    /// Group sessions so every one fits (default), or one row per session with scrolling.
    pub grouped: bool,
    pub help: bool,
    /// The largest useful `scroll`, as the last frame found it (the keys do not know the rows).
    pub max_scroll: std::cell::Cell<usize>,
    /// Session lines the last frame showed: what PgUp and PgDn move by.
    pub page: std::cell::Cell<usize>,
}

impl Default for ViewState {
    fn default() -> Self {
        ViewState {
            scroll: 0,
            late_only: false,
            grouped: true,
            help: false,
            max_scroll: std::cell::Cell::new(usize::MAX),
            page: std::cell::Cell::new(DEFAULT_PAGE),
        }
    }
}

/// PgUp and PgDn's step before a frame has said how many lines it shows.
const DEFAULT_PAGE: usize = 20;

/// What every other key does to the view.
pub fn on_key(view: &mut ViewState, code: KeyCode) {
    // A page is the lines on screen: a fixed 20 skipped lines on a short screen.
    let page = view.page.get().max(1);
    // Rows change with these toggles: how far one can scroll is known again after the next frame.
    let relayout = |view: &mut ViewState| view.max_scroll.set(usize::MAX);
    let ungroup = |view: &mut ViewState| {
        if view.grouped {
            view.grouped = false;
            view.max_scroll.set(usize::MAX);
        }
    };
    match code {
        KeyCode::Char('?') | KeyCode::Char('h') => view.help = !view.help,
        KeyCode::Esc => view.help = false,
        KeyCode::Char('v') => {
            view.late_only = !view.late_only;
            view.scroll = 0;
            relayout(view);
        }
        KeyCode::Char('g') => {
            view.grouped = !view.grouped;
            view.scroll = 0;
            relayout(view);
        }
        KeyCode::Down | KeyCode::Char('j') => {
            ungroup(view);
            view.scroll = (view.scroll + 1).min(view.max_scroll.get());
        }
        KeyCode::Up | KeyCode::Char('k') => {
            ungroup(view);
            view.scroll = view.scroll.min(view.max_scroll.get()).saturating_sub(1);
        }
        KeyCode::PageDown => {
            ungroup(view);
            view.scroll = (view.scroll + page).min(view.max_scroll.get());
        }
        KeyCode::PageUp => {
            ungroup(view);
            view.scroll = view.scroll.min(view.max_scroll.get()).saturating_sub(page);
        }
        KeyCode::Home => view.scroll = 0,
        KeyCode::End => {
            ungroup(view);
            view.scroll = view.max_scroll.get().min(usize::MAX / 2);
        }
        _ => {}
    }
}
