//! The verdict of a run, decided in one place for the live view, the headless lines and the
//! summary: is it a valid server measurement (pacing-qualified), and did every session go
//! through the protocol (complete)? The reasons say why not, the most important first.

use crate::pacing::PacketCounts;
use serde::{Deserialize, Serialize};

/// Why a run's unsent packets were never sent, as far as the count of those sent tells: with
/// none sent, every session failed before streaming (a refused set-up), not while. In a
/// `cancelled` run, sessions the cancel aborted (a worker told to end by a second signal, or by
/// the kernel when its conductor was killed) count their packets left as unsent too: those
/// sessions did not fail.
pub fn unsent_why(packets_sent: u64, cancelled: bool) -> &'static str {
    match (packets_sent, cancelled) {
        (_, true) => "their sessions ended before their input's end, aborted by the cancel or failed; the sessions' errors say which",
        (0, _) => "their sessions failed before they streamed",
        _ => "their sessions failed while streaming",
    }
}

/// The words of a late-packet reason whose packets a blocked send held back (the server or
/// the network stopped taking data), not the client's own schedule: [`late_was_held_back`].
const NONE_SENT: &str = "none of them sent: a send blocked and held them back";
const ALL_BLOCKED: &str = "all of them due while a send of their own session was blocked";

/// Whether `reason` (a verdict's) says the late packets were all held back by blocked sends.
pub fn late_was_held_back(reason: &str) -> bool {
    reason.contains(NONE_SENT) || reason.contains(ALL_BLOCKED)
}

/// What a verdict is decided from; live views fill in what they know so far.
#[derive(Debug, Clone, Default)]
pub struct Facts<'a> {
    pub counts: PacketCounts,
    pub sessions_with_late_packets: u64,
    /// Late packets that fell due while a send was blocked (the attribution's
    /// `send_backpressure`): the server stopped reading, the socket held them back. Live views
    /// do not know it (0).
    pub late_while_send_blocked: u64,
    pub late_threshold_ms: u32,
    pub sessions_configured: u64,
    pub incomplete: u64,
    pub rejected: u64,
    /// Sessions stopped before their last packet.
    pub stopped_early: u64,
    pub protocol_errors: u64,
    /// Why most incomplete sessions did not complete.
    pub most_common_error: Option<&'a str>,
    /// Why the run was cancelled (a signal, `q`), if it was.
    pub cancelled: Option<&'a str>,
    /// Workers whose figures are missing: nothing about their packets is known.
    pub missing_results: u64,
    /// Workers whose samples or traces could not all be written.
    pub writer_errors: u64,
    /// `--no-pace`: packets left as fast as the socket took them; pacing is not judged.
    pub unpaced: bool,
    /// Errors in the protocol's benchmark's own client error lists (Fun-ASR's `errors`).
    pub client_errors: u64,
    /// `error` events the server sent, fatal or not, and the most frequent code among them.
    pub server_errors: u64,
    pub server_error_code: Option<&'a str>,
    /// The run is over (the summary); a live view judges a run still going, in which no
    /// packet may have been sent yet.
    pub finished: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Verdict {
    /// Packets were sent, none was late, and every worker's figures are present; false when
    /// unpaced.
    pub pacing_qualified: bool,
    /// `--no-pace`: there was no schedule, so pacing was not judged.
    #[serde(default)]
    pub unpaced: bool,
    /// Every session completed by the protocol, none was rejected, the server sent nothing
    /// malformed and no error event, nothing was lost, and the run was not cancelled.
    pub complete: bool,
    pub reasons: Vec<String>,
}

pub fn judge(f: &Facts<'_>) -> Verdict {
    let c = &f.counts;
    let mut reasons = Vec::new();
    if f.unpaced {
        reasons.push(
            "unpaced (--no-pace): packets left as fast as the socket took them, so pacing is not judged; a throughput stress signal, not realtime latency"
                .to_string(),
        );
    } else if c.late_packets > 0 {
        // Packets counted late while a send blocked may never have been sent: the deviation
        // known is that of the packets sent. When those were all on time, every late packet
        // was one a blocked send held back: the client kept its schedule, the socket did not
        // take the packets (a server that stopped reading), and the reason says so rather
        // than read as the client's own lateness.
        let worst_ms = c.max_deviation_us as f64 / 1000.0;
        let held_back = c.unsent_packets > 0 && worst_ms <= f64::from(f.late_threshold_ms);
        let (late, threshold, sessions) = (
            c.late_packets,
            f.late_threshold_ms,
            f.sessions_with_late_packets,
        );
        let blocked = f.late_while_send_blocked.min(late);
        reasons.push(if held_back {
            format!(
                "{late} late packets (deviation > {threshold} ms) in {sessions} sessions, {NONE_SENT} (the server or the network stopped taking data; see the stall cause); the packets sent were at most {worst_ms:.1} ms off"
            )
        } else if blocked == late {
            // A send that blocked and then went through (a --send-timeout longer than the
            // server's pause) sent them late: the socket's doing, not the client's schedule.
            format!(
                "{late} late packets (deviation > {threshold} ms) in {sessions} sessions, {ALL_BLOCKED}: the server (or the network) stopped taking data and the socket held them back (see the stall cause); worst {worst_ms:.1} ms{}",
                if c.unsent_packets > 0 { " among those sent" } else { "" }
            )
        } else if blocked > 0 {
            format!(
                "{late} late packets (deviation > {threshold} ms) in {sessions} sessions; worst {worst_ms:.1} ms{}; {blocked} of them due while a send of their own session was blocked (the server stopped taking data)",
                if c.unsent_packets > 0 { " among those sent" } else { "" }
            )
        } else if c.unsent_packets > 0 {
            format!(
                "{late} late packets (deviation > {threshold} ms) in {sessions} sessions; worst {worst_ms:.1} ms among those sent"
            )
        } else {
            format!(
                "{late} late packets (deviation > {threshold} ms) in {sessions} sessions; worst {worst_ms:.1} ms"
            )
        });
    }
    if c.unsent_packets > 0 {
        reasons.push(format!(
            "{} packets were never sent: {}",
            c.unsent_packets,
            unsent_why(c.packets, f.cancelled.is_some())
        ));
    }
    if f.incomplete > 0 {
        let first = f
            .most_common_error
            .map(|e| format!("; most common: {e}"))
            .unwrap_or_default();
        reasons.push(format!(
            "{} of {} sessions incomplete{first}",
            f.incomplete, f.sessions_configured
        ));
    }
    if f.rejected > 0 {
        reasons.push(format!(
            "{} sessions rejected by the server (HTTP 503 on every attempt)",
            f.rejected
        ));
    }
    // Nothing late among nothing sent is no measurement: a run that never streamed (the
    // server refused every session, a signal during set-up) must not read qualified.
    let nothing_sent = f.finished && !f.unpaced && c.packets == 0;
    if nothing_sent {
        reasons
            .push("no packet was sent, so nothing was measured: not pacing-qualified".to_string());
    }
    if f.protocol_errors > 0 {
        reasons.push(format!(
            "{} protocol errors: the server sent frames that do not fit its protocol (see the traces' error lines)",
            f.protocol_errors
        ));
    }
    if f.server_errors > 0 {
        let code = f
            .server_error_code
            .map(|c| match c {
                // The client asked for a response while one was in progress: its own pace.
                "conversation_already_has_active_response" => format!("; most frequent code: {c} (a response.create while an answer was still in progress: with --commit-every, give one longer than the answers)"),
                c => format!("; most frequent code: {c}"),
            })
            .unwrap_or_default();
        reasons.push(format!(
            "{} error events from the server: it refused or failed part of what the sessions sent{code}",
            f.server_errors
        ));
    }
    if f.client_errors > 0 {
        reasons.push(format!(
            "{} client errors in the benchmark's figures (see its errors lists)",
            f.client_errors
        ));
    }
    if f.stopped_early > 0 && f.cancelled.is_none() {
        reasons.push(format!(
            "{} sessions were stopped before their last packet",
            f.stopped_early
        ));
    }
    if let Some(why) = f.cancelled {
        reasons.push(format!(
            "cancelled ({why}); figures cover the run until then"
        ));
    }
    Verdict {
        pacing_qualified: !f.unpaced
            && !nothing_sent
            && c.late_packets == 0
            && f.missing_results == 0,
        unpaced: f.unpaced,
        complete: f.incomplete == 0
            && f.client_errors == 0
            && f.server_errors == 0
            && f.rejected == 0
            && f.protocol_errors == 0
            && f.stopped_early == 0
            && f.cancelled.is_none()
            && f.missing_results == 0
            && f.writer_errors == 0,
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_run_is_qualified_and_complete_with_no_reasons() {
        let v = judge(&Facts {
            sessions_configured: 4,
            late_threshold_ms: 80,
            ..Facts::default()
        });
        assert!(v.pacing_qualified && v.complete);
        assert!(v.reasons.is_empty());
    }

    #[test]
    fn a_finished_run_that_sent_nothing_is_not_qualified_though_nothing_was_late() {
        // Every session refused at set-up (HTTP 404 on the upgrade): no packet left.
        let facts = Facts {
            sessions_configured: 4,
            late_threshold_ms: 80,
            incomplete: 4,
            most_common_error: Some("cannot connect: HTTP error: 404 Not Found"),
            finished: true,
            counts: PacketCounts {
                unsent_packets: 100,
                ..PacketCounts::default()
            },
            ..Facts::default()
        };
        let v = judge(&facts);
        assert!(!v.pacing_qualified && !v.complete);
        // Not "failed while streaming" beside "no packet was sent" (the QA pass of 2026-12-07).
        assert_eq!(
            v.reasons,
            [
                "100 packets were never sent: their sessions failed before they streamed",
                "4 of 4 sessions incomplete; most common: cannot connect: HTTP error: 404 Not Found",
                "no packet was sent, so nothing was measured: not pacing-qualified"
            ]
        );
        // While the run goes on, no packet yet is no verdict yet.
        assert!(
            judge(&Facts {
                finished: false,
                ..facts.clone()
            })
            .pacing_qualified
        );
        // Unpaced runs are not judged on pacing at all.
        let unpaced = judge(&Facts {
            unpaced: true,
            ..facts
        });
        assert!(!unpaced
            .reasons
            .iter()
            .any(|r| r.starts_with("no packet was sent")));
    }

    #[test]
    fn a_cancelled_runs_unsent_packets_are_not_called_failed_sessions() {
        let facts = Facts {
            finished: true,
            sessions_configured: 4,
            counts: PacketCounts {
                packets: 50,
                unsent_packets: 150,
                ..PacketCounts::default()
            },
            ..Facts::default()
        };
        let said = |f: &Facts<'_>| judge(f).reasons[0].clone();
        assert_eq!(
            said(&facts),
            "150 packets were never sent: their sessions failed while streaming"
        );
        let cancelled = Facts {
            cancelled: Some("SIGINT received"),
            ..facts
        };
        assert!(
            said(&cancelled)
                .ends_with("aborted by the cancel or failed; the sessions' errors say which"),
            "{}",
            said(&cancelled)
        );
    }

    #[test]
    fn server_error_events_make_a_run_incomplete_but_leave_its_pacing_alone() {
        // sglang-omni's client stops at any `error` and its checker fails the session: a server
        // that refused appends (`buffer_overflow`) did not serve what was measured.
        let v = judge(&Facts {
            sessions_configured: 4,
            late_threshold_ms: 80,
            server_errors: 3,
            server_error_code: Some("buffer_overflow"),
            ..Facts::default()
        });
        assert!(v.pacing_qualified);
        assert!(!v.complete);
        assert_eq!(
            v.reasons,
            ["3 error events from the server: it refused or failed part of what the sessions sent; most frequent code: buffer_overflow"]
        );
    }

    #[test]
    fn late_packets_unqualify_and_come_first() {
        let v = judge(&Facts {
            counts: PacketCounts {
                packets: 100,
                late_packets: 3,
                max_deviation_us: 151_000,
                ..PacketCounts::default()
            },
            sessions_with_late_packets: 2,
            late_threshold_ms: 80,
            rejected: 1,
            ..Facts::default()
        });
        assert!(!v.pacing_qualified && !v.complete);
        assert_eq!(
            v.reasons[0],
            "3 late packets (deviation > 80 ms) in 2 sessions; worst 151.0 ms"
        );
    }

    /// A server that stopped reading for longer than a packet, with a --send-timeout longer
    /// still: the blocked send went through, so the packets were sent late, and the reason
    /// read as the client's own lateness (the README walkthrough of 2026-12-07).
    #[test]
    fn packets_late_while_a_send_was_blocked_are_said_to_be_the_sockets_doing() {
        let facts = |blocked| Facts {
            counts: PacketCounts {
                packets: 600,
                late_packets: 135,
                max_deviation_us: 2_870_500,
                ..PacketCounts::default()
            },
            sessions_with_late_packets: 4,
            late_while_send_blocked: blocked,
            late_threshold_ms: 80,
            ..Facts::default()
        };
        let v = judge(&facts(135));
        assert!(!v.pacing_qualified);
        assert!(late_was_held_back(&v.reasons[0]));
        assert!(!late_was_held_back(&judge(&facts(35)).reasons[0]));
        assert_eq!(
            v.reasons[0],
            "135 late packets (deviation > 80 ms) in 4 sessions, all of them due while a send of their own session was blocked: the server (or the network) stopped taking data and the socket held them back (see the stall cause); worst 2870.5 ms"
        );
        assert_eq!(
            judge(&facts(35)).reasons[0],
            "135 late packets (deviation > 80 ms) in 4 sessions; worst 2870.5 ms; 35 of them due while a send of their own session was blocked (the server stopped taking data)"
        );
        assert_eq!(
            judge(&facts(0)).reasons[0],
            "135 late packets (deviation > 80 ms) in 4 sessions; worst 2870.5 ms"
        );
    }

    #[test]
    fn with_packets_never_sent_the_worst_deviation_is_that_of_the_packets_sent() {
        // A server that stopped reading: packets late while a send blocked, then never sent.
        let v = judge(&Facts {
            counts: PacketCounts {
                packets: 12,
                late_packets: 6,
                slow_sends: 6,
                unsent_packets: 60,
                max_deviation_us: 100,
            },
            sessions_with_late_packets: 2,
            late_threshold_ms: 80,
            ..Facts::default()
        });
        assert_eq!(
            v.reasons[0],
            "6 late packets (deviation > 80 ms) in 2 sessions, none of them sent: a send blocked and held them back (the server or the network stopped taking data; see the stall cause); the packets sent were at most 0.1 ms off"
        );
        // Some sent late too: the client's lateness is part of it.
        let v = judge(&Facts {
            counts: PacketCounts {
                packets: 12,
                late_packets: 6,
                unsent_packets: 60,
                max_deviation_us: 95_000,
                ..PacketCounts::default()
            },
            sessions_with_late_packets: 2,
            late_threshold_ms: 80,
            ..Facts::default()
        });
        assert_eq!(
            v.reasons[0],
            "6 late packets (deviation > 80 ms) in 2 sessions; worst 95.0 ms among those sent"
        );
    }

    #[test]
    fn protocol_errors_make_a_run_incomplete_issue_13() {
        let v = judge(&Facts {
            protocol_errors: 2,
            ..Facts::default()
        });
        assert!(v.pacing_qualified);
        assert!(!v.complete);
        assert!(
            v.reasons[0].starts_with("2 protocol errors"),
            "{:?}",
            v.reasons
        );
    }

    #[test]
    fn an_unpaced_run_says_unpaced_instead_of_judging_its_pacing_issue_11() {
        let v = judge(&Facts {
            counts: PacketCounts {
                late_packets: 7,
                ..PacketCounts::default()
            },
            unpaced: true,
            ..Facts::default()
        });
        assert!(v.unpaced && !v.pacing_qualified && v.complete);
        assert!(v.reasons[0].starts_with("unpaced"), "{:?}", v.reasons);
        assert!(!v.reasons.iter().any(|r| r.contains("late packets")));
    }

    #[test]
    fn benchmark_client_errors_make_a_run_incomplete_issue_11() {
        let v = judge(&Facts {
            client_errors: 1,
            ..Facts::default()
        });
        assert!(!v.complete);
    }

    #[test]
    fn a_missing_worker_result_unqualifies_the_run() {
        let v = judge(&Facts {
            missing_results: 1,
            ..Facts::default()
        });
        assert!(!v.pacing_qualified && !v.complete);
    }
}
