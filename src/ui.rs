//! What a person sees of a run while it goes on: the [`dashboard`] in a terminal, or the
//! [`headless`] progress lines. Both only read the [`crate::live`] state.

pub mod dashboard;
pub mod headless;

/// Whether the dashboard can be drawn. It needs a terminal; anything else (a pipe, a file, CI)
/// runs headless. So does a run in a background process group of its terminal, which would be
/// stopped by the terminal at its first drawing and hang: it is said why, once.
pub fn dashboard_terminal() -> bool {
    // A dumb terminal (an editor's shell buffer) cannot draw a full screen.
    if std::env::var("TERM").is_ok_and(|t| t == "dumb") {
        if crate::sys::terminal_is_ours().is_some() {
            eprintln!("note: running headless: TERM=dumb cannot show the dashboard");
        }
        return false;
    }
    match crate::sys::terminal_is_ours() {
        None => false,
        Some(true) => true,
        Some(false) => {
            eprintln!(
                "note: running headless: this process is in a background process group of its terminal (under `timeout`, give `timeout --foreground`; or not `&`), and the dashboard would stop it there"
            );
            false
        }
    }
}
