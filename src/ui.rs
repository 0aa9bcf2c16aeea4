//! What a person sees of a run while it goes on: the [`dashboard`] in a terminal, or the
//! [`headless`] progress lines. Both only read the [`crate::live`] state.

pub mod dashboard;
pub mod headless;
