//! The two knees of a sweep (docs/sweep.md). The client's: the largest level the client carried
//! pacing-qualified (beyond it the figures measure the client). The server's: the last level
//! where throughput still rose with the load, and, with `--slo`, the last level where every
//! objective held. Only qualified levels can place the server's knee, and only levels where
//! sessions streamed place any knee: a level whose every session was refused measured nothing.

use super::record::Level;
use serde::{Deserialize, Serialize};

/// Throughput "still rises" when it grows at least this share of the load's growth: doubling
/// the sessions must bring at least 1.5 × the audio seconds per second.
pub const MIN_GAIN_SHARE: f64 = 0.5;
/// Throughput that falls by more than this share from one level to the next has collapsed.
pub const COLLAPSE_SHARE: f64 = 0.05;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Knee {
    /// The level, in total sessions (`null`: no level qualifies).
    pub sessions_total: Option<u64>,
    /// Why this level, in one sentence.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Knees {
    pub client: Knee,
    /// The last qualified level where throughput (audio s per s) still rose.
    pub server_throughput: Knee,
    /// The last qualified level where every `--slo` held (`null` without `--slo`).
    pub server_slo: Option<Knee>,
}

/// What a knee is found from, per level in rising order.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub sessions_total: u64,
    pub qualified: bool,
    /// Sessions that streamed in the repeat that streamed fewest (`None`: not recorded).
    pub sessions_streamed: Option<u64>,
    /// Why sessions did not stream or complete (the most common session error).
    pub session_error: Option<String>,
    /// Audio seconds per wall second (median).
    pub throughput: Option<f64>,
    /// The first `--slo` that did not hold, with its value.
    pub broken_slo: Option<String>,
}

impl Point {
    pub fn of(level: &Level) -> Point {
        Point {
            sessions_total: level.sessions_total,
            qualified: level.qualified,
            sessions_streamed: level.sessions_streamed.map(|s| s.min as u64),
            session_error: level.runs.iter().find_map(|r| r.session_error.clone()),
            throughput: level.audio_s_per_s.map(|s| s.median),
            broken_slo: level.slos.iter().find(|c| !c.holds).map(|c| match c.value {
                Some(v) => format!("{} ({v:.1})", c.slo),
                None => format!("{} (no sample)", c.slo),
            }),
        }
    }

    /// Whether some session streamed (in every repeat): only then did the level measure
    /// anything.
    fn streamed(&self) -> bool {
        self.sessions_streamed != Some(0)
    }

    /// `; at 32 sessions only 20 of 32 streamed (HTTP error: 503 …)`, when some did not.
    fn partial_note(&self) -> String {
        match self.sessions_streamed {
            Some(k) if k > 0 && k < self.sessions_total => format!(
                "; at {n} sessions only {k} of {n} streamed{}",
                self.error_note(),
                n = self.sessions_total
            ),
            _ => String::new(),
        }
    }

    /// ` (most common error: …)`, when there is one.
    fn error_note(&self) -> String {
        self.session_error
            .as_ref()
            .map(|e| format!(" (most common error: {e})"))
            .unwrap_or_default()
    }
}

/// `1, 2 and 4 sessions`.
fn level_list(points: &[&Point]) -> String {
    let n: Vec<String> = points
        .iter()
        .map(|p| p.sessions_total.to_string())
        .collect();
    match n.split_last() {
        Some((last, [])) => format!("{last} sessions"),
        Some((last, rest)) => format!("{} and {last} sessions", rest.join(", ")),
        None => String::new(),
    }
}

/// The knees of a sweep's levels of `repeats` repeats each; `has_slos` as for [`find`]. A
/// level a cancel cut short between its repeats counts only when a repeat it ran was already
/// unqualified: one that did not run might not have held, so its qualified repeats are no
/// evidence that the load was fine. Left out, every reason says so.
pub fn of_levels(levels: &[Level], repeats: u32, has_slos: bool) -> Knees {
    let counts = |l: &Level| !l.cut_short(repeats) || (l.streamed() && !l.qualified);
    let points: Vec<Point> = levels.iter().filter(|l| counts(l)).map(Point::of).collect();
    let mut knees = find(&points, has_slos);
    if let Some(cut) = levels.iter().find(|l| !counts(l)) {
        let note = format!(
            "; the level of {} sessions was cut short by the cancel ({} of {repeats} repeats run), so it places no knee",
            cut.sessions_total,
            cut.runs.len()
        );
        let all = [&mut knees.client, &mut knees.server_throughput];
        for knee in all.into_iter().chain(knees.server_slo.as_mut()) {
            knee.reason.push_str(&note);
        }
    }
    knees
}

/// Both knees of `points`; `has_slos` says whether `--slo` was given. Levels where no session
/// streamed measured nothing: they place no knee, and every reason says they were left out.
pub fn find(points: &[Point], has_slos: bool) -> Knees {
    let silent: Vec<&Point> = points.iter().filter(|p| !p.streamed()).collect();
    let measured: Vec<&Point> = points.iter().filter(|p| p.streamed()).collect();
    if measured.is_empty() && !silent.is_empty() {
        return nothing_streamed(&silent, has_slos);
    }
    // ` that streamed` where levels were left out.
    let that_streamed = if silent.is_empty() {
        ""
    } else {
        " that streamed"
    };
    let left_out = match silent.first() {
        None => String::new(),
        Some(first) => format!(
            "; no session streamed at {}{}, so {} no knee",
            level_list(&silent),
            first.error_note(),
            if silent.len() == 1 {
                "that level places"
            } else {
                "those levels place"
            }
        ),
    };
    let qualified: Vec<&Point> = measured
        .iter()
        .copied()
        .take_while(|p| p.qualified)
        .collect();
    let first_unqualified = measured.iter().copied().find(|p| !p.qualified);
    let client = match (qualified.last(), first_unqualified) {
        (None, Some(u)) => Knee {
            sessions_total: None,
            reason: format!("the client was pacing-unqualified already at {} sessions, the lowest level{that_streamed}: no figure of this sweep measures the server", u.sessions_total),
        },
        (None, None) => Knee {
            sessions_total: None,
            reason: "no level finished".to_string(),
        },
        (Some(q), Some(u)) => Knee {
            sessions_total: Some(q.sessions_total),
            reason: format!("the client was pacing-qualified up to {} sessions and not at {}: the sweep stopped there, since higher levels would measure the client{}", q.sessions_total, u.sessions_total, q.partial_note()),
        },
        (Some(q), None) => Knee {
            sessions_total: Some(q.sessions_total),
            reason: format!("the client was pacing-qualified at every level{that_streamed}, up to {}: its knee is at or above it{}", q.sessions_total, q.partial_note()),
        },
    };
    let limited = first_unqualified
        .map(|u| {
            format!(
                "; the client's limit came first (unqualified at {} sessions)",
                u.sessions_total
            )
        })
        .unwrap_or_default();
    let with_left_out = |mut knee: Knee| {
        knee.reason.push_str(&left_out);
        knee
    };
    Knees {
        client: with_left_out(client),
        server_throughput: with_left_out(throughput_knee(&qualified, &limited)),
        server_slo: has_slos.then(|| with_left_out(slo_knee(&qualified, &limited))),
    }
}

/// The knees of a sweep where no session streamed at any level (`silent`): none, and what to
/// check.
fn nothing_streamed(silent: &[&Point], has_slos: bool) -> Knees {
    let error = silent
        .iter()
        .find_map(|p| p.session_error.as_ref())
        .map(|e| format!("; most common error: {e}"))
        .unwrap_or_default();
    let none = |reason: String| Knee {
        sessions_total: None,
        reason,
    };
    Knees {
        client: none(format!("no session streamed at any level ({}{error}): the server refused or failed every session, so this sweep measured neither the client nor the server; check that the server at --url is up and accepts sessions (its path, the credentials it wants, its session limit), then sweep again", level_list(silent))),
        server_throughput: none("no session streamed at any level: no throughput was measured, so the server's knee cannot be told".to_string()),
        server_slo: has_slos.then(|| none("no session streamed at any level: the objectives cannot be judged".to_string())),
    }
}

fn throughput_knee(points: &[&Point], limited: &str) -> Knee {
    let Some(first) = points.first() else {
        return Knee {
            sessions_total: None,
            reason: "no qualified level: the server's knee cannot be told".to_string(),
        };
    };
    // Levels at the bottom where no session completed (a cold start, a server that failed
    // them) carried nothing: the knee is looked for above them, or is below every level when
    // no level completed a session.
    let Some(start) = points.iter().position(|p| p.throughput != Some(0.0)) else {
        return Knee {
            sessions_total: None,
            reason: format!(
                "no session completed at any qualified level, {}{}: the server carried no session to its end, so its knee is below every level swept",
                level_list(points),
                first.error_note()
            ),
        };
    };
    let skipped = match &points[..start] {
        [] => String::new(),
        none => format!(
            "; no session completed at {}{}, left out",
            level_list(none),
            none[0].error_note()
        ),
    };
    let points = &points[start..];
    let limited = format!("{skipped}{limited}");
    let limited = limited.as_str();
    let first = &points[0];
    let mut knee = *first;
    for pair in points.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let (Some(ta), Some(tb)) = (a.throughput, b.throughput) else {
            return Knee {
                sessions_total: Some(knee.sessions_total),
                reason: format!("no throughput figure at {} sessions", b.sessions_total),
            };
        };
        let load_gain = b.sessions_total as f64 / a.sessions_total as f64 - 1.0;
        let gain = if ta > 0.0 { tb / ta - 1.0 } else { 0.0 };
        if gain >= MIN_GAIN_SHARE * load_gain {
            knee = b;
            continue;
        }
        let reason = if tb == 0.0 {
            format!("no session completed at {} sessions{}: throughput fell from {ta:.1} to 0 audio s/s", b.sessions_total, b.error_note())
        } else if gain < -COLLAPSE_SHARE {
            format!("throughput fell from {ta:.1} to {tb:.1} audio s/s from {} to {} sessions: more load gave less (congestion collapse)", a.sessions_total, b.sessions_total)
        } else {
            format!("throughput rose only {:.0}% (from {ta:.1} to {tb:.1} audio s/s) while the load rose {:.0}% (from {} to {} sessions): the server stopped keeping up", gain * 100.0, load_gain * 100.0, a.sessions_total, b.sessions_total)
        };
        return Knee {
            sessions_total: Some(a.sessions_total),
            reason: format!("{reason}{}{}{skipped}", a.partial_note(), b.partial_note()),
        };
    }
    let reason = if points.len() == 1 {
        format!("one qualified level alone ({} sessions) shows no bend: the server's knee is at or above it", knee.sessions_total)
    } else {
        format!("throughput still rose at the largest qualified level ({} sessions): the server's knee is at or above it", knee.sessions_total)
    };
    Knee {
        sessions_total: Some(knee.sessions_total),
        reason: format!("{reason}{}{limited}", knee.partial_note()),
    }
}

fn slo_knee(points: &[&Point], limited: &str) -> Knee {
    let mut knee: Option<&Point> = None;
    for p in points {
        if let Some(broken) = &p.broken_slo {
            return match knee {
                Some(k) => Knee {
                    sessions_total: Some(k.sessions_total),
                    reason: format!(
                        "every --slo held up to {} sessions; at {} {broken} did not{}",
                        k.sessions_total,
                        p.sessions_total,
                        k.partial_note()
                    ),
                },
                None => Knee {
                    sessions_total: None,
                    reason: format!(
                        "{broken} did not hold already at {} sessions, the lowest qualified level",
                        p.sessions_total
                    ),
                },
            };
        }
        knee = Some(p);
    }
    match knee {
        Some(k) => Knee {
            sessions_total: Some(k.sessions_total),
            reason: format!("every --slo held at every qualified level, up to {} sessions: the server's knee is at or above it{}{limited}", k.sessions_total, k.partial_note()),
        },
        None => Knee {
            sessions_total: None,
            reason: "no qualified level: the objectives cannot be judged".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(levels: &[(u64, bool, f64)]) -> Vec<Point> {
        levels
            .iter()
            .map(|&(n, qualified, t)| Point {
                sessions_total: n,
                qualified,
                sessions_streamed: Some(n),
                session_error: None,
                throughput: Some(t),
                broken_slo: None,
            })
            .collect()
    }

    #[test]
    fn rising_throughput_puts_the_knee_at_the_top_and_says_it_is_above() {
        let k = find(
            &points(&[(8, true, 7.9), (16, true, 15.8), (32, true, 31.0)]),
            false,
        );
        assert_eq!(k.server_throughput.sessions_total, Some(32));
        assert!(
            k.server_throughput.reason.contains("at or above"),
            "{}",
            k.server_throughput.reason
        );
        assert_eq!(k.client.sessions_total, Some(32));
        assert!(k.server_slo.is_none());
    }

    /// A server that drops every session from some level on (the sessions streamed, and
    /// ended early): no audio carried to an end there, so the knee is below it, not "at or
    /// above" the top (the QA finding of 2026-12-06: audio sent over a short wall time read as
    /// perfect scaling).
    #[test]
    fn levels_where_no_session_completed_carry_no_throughput_and_bound_the_knee() {
        let mut p = points(&[(1, true, 0.9), (2, true, 0.0), (4, true, 0.0)]);
        p[1].session_error = Some("connection reset".to_string());
        let k = find(&p, false);
        assert_eq!(k.server_throughput.sessions_total, Some(1));
        assert!(
            k.server_throughput.reason.starts_with(
                "no session completed at 2 sessions (most common error: connection reset)"
            ),
            "{}",
            k.server_throughput.reason
        );
        let k = find(&points(&[(1, true, 0.0), (2, true, 0.0)]), false);
        assert_eq!(k.server_throughput.sessions_total, None);
        assert!(
            k.server_throughput
                .reason
                .starts_with("no session completed at any qualified level, 1 and 2 sessions"),
            "{}",
            k.server_throughput.reason
        );
        // A bottom level that completed nothing (a cold start) is left out, not the sweep.
        let k = find(
            &points(&[(1, true, 0.0), (2, true, 1.9), (4, true, 3.8)]),
            false,
        );
        assert_eq!(k.server_throughput.sessions_total, Some(4));
        assert!(
            k.server_throughput
                .reason
                .contains("; no session completed at 1 sessions, left out"),
            "{}",
            k.server_throughput.reason
        );
    }

    #[test]
    fn flat_throughput_puts_the_knee_at_the_last_level_that_rose() {
        let k = find(
            &points(&[
                (8, true, 8.0),
                (16, true, 16.0),
                (32, true, 18.0),
                (64, true, 18.5),
            ]),
            false,
        );
        assert_eq!(k.server_throughput.sessions_total, Some(16));
        assert!(
            k.server_throughput.reason.contains("rose only 12%"),
            "{}",
            k.server_throughput.reason
        );
    }

    #[test]
    fn collapsing_throughput_is_called_congestion_collapse() {
        let k = find(
            &points(&[(8, true, 8.0), (16, true, 16.0), (32, true, 9.0)]),
            false,
        );
        assert_eq!(k.server_throughput.sessions_total, Some(16));
        assert!(
            k.server_throughput.reason.contains("congestion collapse"),
            "{}",
            k.server_throughput.reason
        );
    }

    #[test]
    fn a_broken_slo_puts_the_server_knee_below_it() {
        let mut p = points(&[(8, true, 8.0), (16, true, 16.0), (32, true, 32.0)]);
        p[2].broken_slo = Some("unit_lag_ms.p99<200 (312.0)".to_string());
        let k = find(&p, true);
        let slo = k.server_slo.unwrap();
        assert_eq!(slo.sessions_total, Some(16));
        assert!(
            slo.reason
                .contains("at 32 unit_lag_ms.p99<200 (312.0) did not"),
            "{}",
            slo.reason
        );
        p[0].broken_slo = p[2].broken_slo.clone();
        let slo = find(&p, true).server_slo.unwrap();
        assert_eq!(slo.sessions_total, None);
        assert!(slo.reason.contains("already at 8"), "{}", slo.reason);
    }

    #[test]
    fn the_client_knee_is_the_largest_qualified_level_and_unqualified_levels_do_not_count() {
        let k = find(
            &points(&[(8, true, 8.0), (16, true, 16.0), (32, false, 2.0)]),
            false,
        );
        assert_eq!(k.client.sessions_total, Some(16));
        assert!(k.client.reason.contains("not at 32"), "{}", k.client.reason);
        assert_eq!(
            k.server_throughput.sessions_total,
            Some(16),
            "the collapse at 32 measures the client"
        );
        assert!(
            k.server_throughput
                .reason
                .contains("client's limit came first"),
            "{}",
            k.server_throughput.reason
        );
        let k = find(&points(&[(8, false, 8.0)]), true);
        assert_eq!(k.client.sessions_total, None);
        assert_eq!(k.server_throughput.sessions_total, None);
        assert_eq!(k.server_slo.unwrap().sessions_total, None);
    }

    /// Levels as (sessions, sessions streamed, throughput), all qualified; a level that
    /// streamed nothing has no throughput.
    fn streamed(levels: &[(u64, u64, f64)]) -> Vec<Point> {
        levels
            .iter()
            .map(|&(n, k, t)| Point {
                sessions_total: n,
                qualified: true,
                sessions_streamed: Some(k),
                session_error: (k < n).then(|| "HTTP error: 403 Forbidden".to_string()),
                throughput: (k > 0).then_some(t),
                broken_slo: None,
            })
            .collect()
    }

    #[test]
    fn no_knee_is_named_when_no_session_streamed_at_any_level() {
        let k = find(&streamed(&[(1, 0, 0.0), (2, 0, 0.0)]), true);
        for knee in [
            &k.client,
            &k.server_throughput,
            k.server_slo.as_ref().unwrap(),
        ] {
            assert_eq!(knee.sessions_total, None, "{knee:?}");
            assert!(
                knee.reason.contains("no session streamed at any level"),
                "{knee:?}"
            );
        }
        let why = &k.client.reason;
        assert!(why.contains("1 and 2 sessions"), "{why}");
        assert!(why.contains("HTTP error: 403 Forbidden"), "{why}");
        assert!(why.contains("check that the server at --url"), "{why}");
        assert!(!why.contains("at or above"), "{why}");
    }

    #[test]
    fn levels_that_streamed_nothing_above_the_first_place_no_knee_and_are_named() {
        let k = find(&streamed(&[(1, 1, 1.0), (2, 0, 0.0), (4, 0, 0.0)]), false);
        assert_eq!(k.client.sessions_total, Some(1));
        assert_eq!(k.server_throughput.sessions_total, Some(1));
        for why in [&k.client.reason, &k.server_throughput.reason] {
            assert!(
                why.contains("no session streamed at 2 and 4 sessions (most common error: HTTP error: 403 Forbidden), so those levels place no knee"),
                "{why}"
            );
            assert!(
                !why.contains("up to 4") && !why.contains("(4 sessions)"),
                "{why}"
            );
        }
        assert!(
            k.server_throughput
                .reason
                .contains("one qualified level alone (1 sessions) shows no bend"),
            "{}",
            k.server_throughput.reason
        );
    }

    #[test]
    fn a_level_where_some_sessions_did_not_stream_says_so_where_it_is_the_knee() {
        let k = find(
            &streamed(&[(8, 8, 8.0), (16, 16, 16.0), (32, 20, 18.0)]),
            false,
        );
        assert_eq!(k.client.sessions_total, Some(32));
        assert!(
            k.client.reason.contains("at 32 sessions only 20 of 32 streamed (most common error: HTTP error: 403 Forbidden)"),
            "{}",
            k.client.reason
        );
        assert_eq!(k.server_throughput.sessions_total, Some(16));
        assert!(
            k.server_throughput.reason.contains("rose only 12%")
                && k.server_throughput
                    .reason
                    .contains("only 20 of 32 streamed"),
            "{}",
            k.server_throughput.reason
        );
    }
}
