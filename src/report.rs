//! Renderings of a [`Summary`]: `summary.md` for issues ([`markdown`]), and the short table
//! printed at the end of a headless run ([`table`]).

pub mod command;
mod compare;
pub mod jsonl;
mod markdown;
mod table;

use crate::stats::ShortPercentiles;
use crate::summary::Summary;

pub use markdown::markdown;
pub use table::table;

/// "pacing-qualified, complete" and its negatives.
pub fn verdict_line(s: &Summary) -> String {
    let pacing = if s.verdict.unpaced {
        "unpaced"
    } else if s.verdict.pacing_qualified {
        "pacing-qualified"
    } else {
        "PACING-UNQUALIFIED"
    };
    let complete = if s.verdict.complete {
        "complete"
    } else {
        "NOT complete"
    };
    format!("{pacing}, {complete}")
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `p50 / p99 / max` in ms, or `no samples`.
fn percentiles(q: Option<&ShortPercentiles>) -> String {
    match q {
        Some(q) => format!("{:.2} / {:.2} / {:.2}", q.p50, q.p99, q.max),
        None => "no samples".to_string(),
    }
}

/// The server's figures as the client saw them: (name, percentiles). `accepted`: a packet's
/// send to its acceptance; `unit lag`: the send of the packet that completes a unit to the
/// unit's end; `first audio`: packet 0's send to the first audio delta.
fn server_figures(s: &Summary) -> [(&'static str, Option<&ShortPercentiles>); 3] {
    let v = &s.server;
    [
        ("accepted", v.accepted_ms.as_ref()),
        ("unit lag", v.unit_lag_ms.as_ref()),
        ("first audio", v.first_audio_ms.as_ref()),
    ]
}
