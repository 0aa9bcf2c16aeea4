//! Headless output: a progress line on stderr every few seconds while a run goes on.

use crate::live::LiveState;

/// How often a progress line is printed.
pub const PROGRESS_INTERVAL_S: f64 = 5.0;

/// `[  10.0 s / 30 s] packets 4000  late 0  worst dev 1.2 ms  loop lag 0.9 ms (max 1.5)  queue 130 lines`
pub fn progress_line(live: &mut LiveState, now_s: f64) -> String {
    let t = live.totals();
    let window_lag_us = std::mem::take(&mut live.loop_lag_window_max_us);
    let stalls: Vec<String> = live
        .take_new_stalls()
        .iter()
        .map(crate::live::describe_stall)
        .collect();
    format!(
        "[{:>6.1} s / {:.0} s] packets {}  late {}  sessions with late packets {}  worst deviation {:.1} ms  loop lag {:.1} ms (max {:.1})  writer queue {} lines{}",
        live.elapsed_s(now_s),
        live.info.duration_s,
        t.counts.packets,
        t.counts.late_packets,
        t.sessions_with_late_packets,
        t.counts.max_deviation_us as f64 / 1000.0,
        window_lag_us as f64 / 1000.0,
        t.loop_lag_max_us as f64 / 1000.0,
        t.queue_lines,
        if t.protocol_errors > 0 {
            format!("  protocol errors {}", t.protocol_errors)
        } else {
            String::new()
        }
    ) + &match stalls.as_slice() {
        [] => String::new(),
        [one] => format!("  stall: {one}"),
        [.., last] => format!("  {} stalls, latest: {last}", stalls.len()),
    }
}
