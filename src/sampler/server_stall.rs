//! Server stalls: seconds in which the server's worst reply came much later than its typical
//! worst, while the client was clean (no late packet of its own, no loop-lag window, no stall of a
//! worker's loop thread; a send the server blocked is the server's doing). A client that stalls reads its replies late too, so a latency
//! jump that the client's own stalls cover for half its size or more is the client's, not the
//! server's, and is only counted.
//! The server's own episodes (the sampled mock or `--server-pid`) that overlap a stall are named
//! beside it.

use super::{Episode, STALL_MS};
use crate::contract::worker::{ReplyKind, ReplySecond};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A second's worst reply must exceed the typical worst by this much...
pub const JUMP_MS: f64 = 100.0;
/// ...and be at least this many times the typical worst (a latency)...
pub const JUMP_FACTOR: f64 = 2.0;
/// ...or this many times (a gap between replies, which a stall lengthens by its whole length).
pub const GAP_JUMP_FACTOR: f64 = 1.5;

/// A jump is the client's when its own stalls cover at least this share of it.
pub const CLIENT_SHARE: f64 = 0.5;

/// A time the server stopped answering while the client was clean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerStall {
    /// From the send of what the worst late reply answers to that reply (monotonic seconds).
    pub start_s: f64,
    pub end_s: f64,
    /// `start_s` from the start gate of the run.
    pub run_time_s: f64,
    /// The worst reply's lag, and the median over the run of each second's worst.
    pub peak_lag_ms: f64,
    pub typical_lag_ms: f64,
    /// How long the server held its replies back: `peak_lag_ms − typical_lag_ms`.
    pub size_ms: f64,
    /// Which latency it is (`accepted`, `response`, `first reply after turn end`, `gap between
    /// replies`: `ReplyKind::as_str`).
    pub latency: String,
    /// Episodes of the watched server process that overlap it, e.g. `busy 480 ms (mock, tid 12)`.
    pub server_episodes: Vec<String>,
}

/// What the search found: the stalls, and the jumps the client explains itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    pub stalls: Vec<ServerStall>,
    pub client_explained: u64,
}

/// What the search is given.
pub struct Inputs<'a> {
    /// Every worker's reply seconds (several workers may share a second).
    pub seconds: Vec<&'a [ReplySecond]>,
    /// Windows in which the client itself was not clean.
    pub client_windows: Vec<[f64; 2]>,
    /// Episodes of the watched server process.
    pub server_episodes: Vec<&'a Episode>,
    /// The start gate, for `run_time_s`.
    pub gate_s: f64,
}

/// Pools the workers' seconds of `kind`: per second the worst reply of any worker.
fn pool(seconds: &[&[ReplySecond]], kind: ReplyKind) -> Vec<ReplySecond> {
    let mut by_second: BTreeMap<u64, ReplySecond> = BTreeMap::new();
    for s in seconds
        .iter()
        .flat_map(|w| w.iter())
        .filter(|s| s.kind == kind)
    {
        by_second
            .entry(s.second)
            .and_modify(|p| {
                p.replies += s.replies;
                if s.max_lag_ms > p.max_lag_ms {
                    p.max_lag_ms = s.max_lag_ms;
                    p.max_sent_s = s.max_sent_s;
                }
            })
            .or_insert(*s);
    }
    by_second.into_values().collect()
}

/// The `q` quantile (nearest rank below) of `v`.
fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q) as usize]
}

/// Which quantile of the seconds' worst replies is the typical one: the lower quartile for the
/// dense streams (an ack per packet, a delta every few tens of ms), whose floor a quarter of
/// the seconds still show even when a long stall fills the rest of a short run; the median
/// for first replies, which are few and vary by turn.
fn typical_quantile(kind: ReplyKind) -> f64 {
    match kind {
        ReplyKind::FirstReply => 0.5,
        ReplyKind::Accepted | ReplyKind::Response | ReplyKind::DeltaGap => 0.25,
    }
}

/// How much of `[from_s, to_s]` the client's windows cover, in seconds (overlaps counted once).
fn covered_s(windows: &[[f64; 2]], from_s: f64, to_s: f64) -> f64 {
    let mut pieces: Vec<[f64; 2]> = windows
        .iter()
        .filter(|w| w[0] <= to_s && w[1] >= from_s)
        .map(|w| [w[0].max(from_s), w[1].min(to_s)])
        .collect();
    pieces.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let (mut total, mut reach) = (0.0, f64::NEG_INFINITY);
    for [a, b] in pieces {
        let a = a.max(reach);
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Finds the server stalls in `inputs`, each kind of reply against its own typical value.
pub fn find(inputs: &Inputs<'_>) -> Found {
    let mut kinds: Vec<ReplyKind> = inputs
        .seconds
        .iter()
        .flat_map(|w| w.iter().map(|s| s.kind))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut found = Found::default();
    for kind in kinds {
        find_kind(inputs, kind, &mut found);
    }
    found.stalls.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    found
}

fn find_kind(inputs: &Inputs<'_>, kind: ReplyKind, found: &mut Found) {
    let seconds = pool(&inputs.seconds, kind);
    let typical_ms = quantile(
        seconds.iter().map(|s| s.max_lag_ms).collect(),
        typical_quantile(kind),
    );
    let factor = if kind == ReplyKind::DeltaGap {
        GAP_JUMP_FACTOR
    } else {
        JUMP_FACTOR
    };
    let threshold_ms = (typical_ms + JUMP_MS).max(typical_ms * factor);
    // Each jumping second's worst reply as a window, merged where they overlap.
    let mut windows: Vec<([f64; 2], f64)> = Vec::new();
    for s in seconds.iter().filter(|s| s.max_lag_ms > threshold_ms) {
        let w = [s.max_sent_s, s.max_sent_s + s.max_lag_ms / 1000.0];
        match windows.last_mut() {
            Some((last, peak)) if w[0] <= last[1] => {
                last[1] = last[1].max(w[1]);
                *peak = peak.max(s.max_lag_ms);
            }
            _ => windows.push((w, s.max_lag_ms)),
        }
    }
    for ([start_s, end_s], peak_ms) in windows {
        // A client that itself stalled for a good part of the jump read its replies late: a
        // few ms of client hiccup inside a 500 ms jump do not explain it.
        let jump_s = (peak_ms - typical_ms) / 1000.0;
        if covered_s(&inputs.client_windows, start_s, end_s) >= CLIENT_SHARE * jump_s {
            found.client_explained += 1;
            continue;
        }
        let server_episodes = inputs
            .server_episodes
            .iter()
            .filter(|e| e.duration_ms >= STALL_MS && e.start_s <= end_s && e.end_s >= start_s)
            .map(|e| {
                format!(
                    "{} {:.0} ms ({}, {} tid {})",
                    e.class.as_str(),
                    e.duration_ms,
                    e.process,
                    if e.loop_thread {
                        "loop thread"
                    } else {
                        e.thread.as_str()
                    },
                    e.tid
                )
            })
            .collect();
        found.stalls.push(ServerStall {
            start_s: round3(start_s),
            end_s: round3(end_s),
            run_time_s: round3(start_s - inputs.gate_s),
            peak_lag_ms: round3(peak_ms),
            typical_lag_ms: round3(typical_ms),
            size_ms: round3(peak_ms - typical_ms),
            latency: kind.as_str().to_string(),
            server_episodes,
        });
    }
}

/// `server stall at 3.1 s: accepted lag 512 ms (typical 4 ms), the server held replies back for about 508 ms while the client was clean`
pub fn describe(s: &ServerStall) -> String {
    let mut line = format!(
        "server stall at {:.1} s: {} lag {:.0} ms (typical {:.0} ms), the server held replies back for about {:.0} ms while the client was clean",
        s.run_time_s, s.latency, s.peak_lag_ms, s.typical_lag_ms, s.size_ms
    );
    if !s.server_episodes.is_empty() {
        line += &format!("; the server then: {}", s.server_episodes.join(", "));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(second: u64, max_lag_ms: f64) -> ReplySecond {
        ReplySecond {
            kind: ReplyKind::Accepted,
            second,
            replies: 100,
            max_lag_ms,
            max_sent_s: second as f64 + 0.5 - max_lag_ms / 1000.0,
        }
    }

    fn inputs<'a>(seconds: &'a [ReplySecond], client: Vec<[f64; 2]>) -> Inputs<'a> {
        Inputs {
            seconds: vec![seconds],
            client_windows: client,
            server_episodes: Vec::new(),
            gate_s: 100.0,
        }
    }

    #[test]
    fn a_jump_of_the_worst_reply_with_a_clean_client_is_a_server_stall_issue_15() {
        let seconds: Vec<ReplySecond> = (100..110)
            .map(|s| second(s, if s == 104 { 505.0 } else { 5.0 }))
            .collect();
        let found = find(&inputs(&seconds, Vec::new()));
        assert_eq!(found.stalls.len(), 1, "{found:?}");
        let s = &found.stalls[0];
        assert_eq!(
            (s.peak_lag_ms, s.typical_lag_ms, s.size_ms),
            (505.0, 5.0, 500.0)
        );
        assert!((s.run_time_s - 3.995).abs() < 1e-9, "{s:?}");
        assert!(describe(s).starts_with("server stall at 4.0 s: accepted lag 505 ms"));
    }

    #[test]
    fn a_stall_that_fills_most_of_a_short_run_is_still_a_jump() {
        // 5 s of an 8 s run without a reply: only 4 seconds have replies, 2 of them stalled.
        let seconds = [
            second(100, 17.0),
            second(101, 4.0),
            second(106, 5273.0),
            second(107, 5477.0),
        ];
        let found = find(&inputs(&seconds, Vec::new()));
        assert_eq!(found.stalls.len(), 1, "{found:?}");
        assert_eq!(found.stalls[0].typical_lag_ms, 4.0);
    }

    #[test]
    fn each_kind_of_reply_has_its_own_typical_latency() {
        // First replies take 200 ms, delta gaps 40 ms: neither jumps against its own kind.
        let mut seconds: Vec<ReplySecond> = (100..110).map(|s| second(s, 40.0)).collect();
        for s in &mut seconds {
            s.kind = ReplyKind::DeltaGap;
        }
        seconds.extend((100..110).step_by(3).map(|s| second(s, 200.0)));
        seconds.sort_by_key(|s| s.second);
        assert_eq!(find(&inputs(&seconds, Vec::new())), Found::default());
        // A 1 s gap between deltas is a stall, named by its kind.
        seconds[4].max_lag_ms = 1000.0;
        let found = find(&inputs(&seconds, Vec::new()));
        assert_eq!(found.stalls.len(), 1, "{found:?}");
        assert_eq!(found.stalls[0].latency, "gap between replies");
    }

    #[test]
    fn a_jump_while_the_client_stalled_is_the_clients_and_steady_latency_is_none() {
        let seconds: Vec<ReplySecond> = (100..110)
            .map(|s| second(s, if s == 104 { 505.0 } else { 5.0 }))
            .collect();
        let found = find(&inputs(&seconds, vec![[104.1, 104.4]]));
        assert_eq!((found.stalls.len(), found.client_explained), (0, 1));
        // A 30 ms client hiccup inside the 500 ms jump does not explain it.
        let found = find(&inputs(&seconds, vec![[104.1, 104.13]]));
        assert_eq!((found.stalls.len(), found.client_explained), (1, 0));
        // A slow but steady server, and jitter under the floor, are no stall.
        let steady: Vec<ReplySecond> = (100..110)
            .map(|s| second(s, 300.0 + (s % 3) as f64 * 30.0))
            .collect();
        assert_eq!(find(&inputs(&steady, Vec::new())), Found::default());
    }
}
