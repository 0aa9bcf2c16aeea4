//! The rules about a session as a whole, checked after its last record: one of each lifecycle
//! event, every append accepted, every response done, and the unit and audio totals.

use super::{same, Check, Terms, TOLERANCE};
use crate::conform::SessionReport;
use crate::profile::{self, Profile};
use crate::protocol::names;

impl Check<'_> {
    pub(super) fn finish(mut self) -> SessionReport {
        self.whole_session();
        if let Some(terms) = self.terms {
            if self.drained {
                self.unit_totals(terms);
            }
        }
        SessionReport {
            session: self.session.to_string(),
            profile: self.profile(),
            violations: self.violations,
            close_recorded: self.close_recorded,
        }
    }

    fn whole_session(&mut self) {
        // After a fatal error the server ends the session at once: what it had not answered
        // yet (the update, the end, appends, responses) is not owed, its session.closed is.
        let fatal = self.fatal.is_some();
        let lifecycle = [
            (names::SESSION_CREATED, None),
            (
                names::SESSION_UPDATED,
                Some((self.update_sent, names::SESSION_UPDATE)),
            ),
            (names::INPUT_ENDED, Some((self.end_sent, names::INPUT_END))),
            (
                names::INPUT_DRAINED,
                Some((self.end_sent, names::INPUT_END)),
            ),
            (
                names::SESSION_CLOSED,
                (!fatal).then_some((self.close_sent, names::SESSION_CLOSE)),
            ),
        ];
        let owed = [names::SESSION_CREATED, names::SESSION_CLOSED];
        for (kind, command) in lifecycle {
            if fatal && !owed.contains(&kind) {
                continue;
            }
            let count = self.received.get(kind).copied().unwrap_or(0);
            // The client never sent the command, after it saw the session fail (a dropped
            // connection): not owed, and the client error already says why (conform added "the
            // client sent no sglang.input_audio.end", read as the client stopping on its own).
            let not_reached = matches!(command, Some((false, _))) && self.client_failed;
            if count != 1 && !(count == 0 && not_reached) {
                let got = match command {
                    Some((false, command)) if count == 0 => {
                        format!("none (the client sent no {command})")
                    }
                    _ => count.to_string(),
                };
                self.flag_session("session-complete", format!("one {kind}"), got);
            }
        }
        // A connection that failed cut the appends' and responses' answers short: the client
        // error says why.
        if fatal || self.client_failed {
            return;
        }
        let unanswered: Vec<Option<f64>> = self
            .appends
            .iter()
            .filter_map(|id| self.sent.get(id))
            .filter(|s| {
                !s.answered.contains(names::ACCEPTED) && !s.answered.contains(super::REFUSED)
            })
            .map(|s| s.seq)
            .collect();
        if let Some(first) = unanswered.first() {
            let first = first.map_or_else(|| "?".to_string(), |s| s.to_string());
            self.flag_session(
                "accepted-input",
                "an accepted for every append",
                format!("none for {} appends (first: seq {first})", unanswered.len()),
            );
        }
        let open: Vec<String> = self
            .responses
            .iter()
            .filter(|(_, r)| !r.done)
            .map(|(id, _)| id.clone())
            .collect();
        for id in open {
            self.flag_session("response-done", format!("response.done for {id}"), "none");
        }
    }

    /// The unit and audio totals, once the input is drained.
    fn unit_totals(&mut self, terms: Terms) {
        let Some(unit_ms) = terms.unit_ms else {
            return;
        };
        let input_ms = self.input_ms();
        let expected_units = (input_ms / unit_ms - TOLERANCE).ceil().max(0.0) as usize;
        let nonempty = self.units.iter().filter(|(_, d)| *d > 0.0).count();
        if nonempty != expected_units {
            self.flag_session(
                "unit-duration",
                format!("{expected_units} units for {input_ms} ms of input"),
                format!("{nonempty} units with input"),
            );
        }
        let aligned = same((input_ms / unit_ms).round() * unit_ms, input_ms);
        let extra = self.units.len() - nonempty;
        let empty_is_last = self.units.last().is_some_and(|(_, d)| *d == 0.0);
        if extra > 1 || (extra == 1 && !(aligned && empty_is_last)) {
            self.flag_session(
                "unit-duration",
                "no empty unit, but one at the end of unit-aligned input",
                format!("{extra} empty units"),
            );
        }
        let short = self
            .units
            .iter()
            .take(self.units.len().saturating_sub(1))
            .find(|(_, d)| *d > 0.0 && !same(*d, unit_ms))
            .copied();
        if let Some((n, duration_ms)) = short {
            self.flag_session(
                "unit-duration",
                format!("unit_{n} of {unit_ms} ms (only the tail is shorter)"),
                format!("{duration_ms} ms"),
            );
        }
        let total_ms: f64 = self.units.iter().map(|(_, d)| d).sum();
        if !same(total_ms, input_ms) {
            self.flag_session(
                "unit-duration",
                format!("unit durations adding up to the input, {input_ms} ms"),
                format!("{total_ms} ms"),
            );
        }
        let continuous = terms.profile.is_some_and(Profile::continuous_output);
        if let (true, Some(rate)) = (continuous, terms.output_rate_hz) {
            let per_unit = profile::unit_output_bytes(unit_ms as u32, rate as u32) as u64;
            let expected = expected_units as u64 * per_unit;
            if self.output_bytes.abs_diff(expected) > self.output_slack {
                self.flag_session(
                    "audio-conserved",
                    format!("{expected} bytes of audio ({expected_units} units × {per_unit})"),
                    format!("{} bytes", self.output_bytes),
                );
            }
        }
    }
}
