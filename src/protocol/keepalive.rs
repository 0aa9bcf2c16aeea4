//! WebSocket keepalive pings, as Python's websockets library sends them: a ping every
//! interval, and the connection ends when one goes unanswered for the timeout — the client's
//! (`--client-ping-interval`, `--client-ping-timeout`, the Fun-ASR benchmark's) and the Fun-ASR
//! mock's (`--ws-ping-interval`, `--ws-ping-timeout`, the server's). Without I/O: the
//! connection asks when to wake next and what to do then.

/// What to do when the keepalive's deadline passes.
#[derive(Debug, PartialEq, Eq)]
pub enum Tick {
    Nothing,
    SendPing,
    /// A ping went unanswered for the timeout.
    TimedOut,
}

/// The wording the benchmark's library gives a keepalive timeout.
pub const TIMEOUT_DETAIL: &str =
    "sent 1011 (internal error) keepalive ping timeout; no close frame received";

#[derive(Debug, Clone)]
pub struct Keepalive {
    interval_s: f64,
    /// `None`: an unanswered ping never ends the connection.
    timeout_s: Option<f64>,
    next_ping_s: f64,
    /// When the oldest unanswered ping was sent.
    unanswered_since_s: Option<f64>,
}

impl Keepalive {
    /// Pings from `now_s` on, or `None` when the interval disables them (≤ 0).
    pub fn new(interval_s: f64, timeout_s: f64, now_s: f64) -> Option<Keepalive> {
        (interval_s > 0.0).then(|| Keepalive {
            interval_s,
            timeout_s: (timeout_s > 0.0).then_some(timeout_s),
            next_ping_s: now_s + interval_s,
            unanswered_since_s: None,
        })
    }

    /// When [`Keepalive::tick`] has something to do.
    pub fn deadline_s(&self) -> f64 {
        match (self.unanswered_since_s, self.timeout_s) {
            (Some(since), Some(timeout)) => self.next_ping_s.min(since + timeout),
            _ => self.next_ping_s,
        }
    }

    pub fn tick(&mut self, now_s: f64) -> Tick {
        if let (Some(since), Some(timeout)) = (self.unanswered_since_s, self.timeout_s) {
            if now_s >= since + timeout {
                return Tick::TimedOut;
            }
        }
        if now_s >= self.next_ping_s {
            self.next_ping_s = now_s + self.interval_s;
            self.unanswered_since_s.get_or_insert(now_s);
            return Tick::SendPing;
        }
        Tick::Nothing
    }

    /// A pong arrived: every ping so far is answered.
    pub fn pong(&mut self) {
        self.unanswered_since_s = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_or_less_disables_pings_issue_11() {
        assert!(Keepalive::new(0.0, 5.0, 0.0).is_none());
        assert!(Keepalive::new(-1.0, 5.0, 0.0).is_none());
    }

    #[test]
    fn a_ping_unanswered_for_the_timeout_ends_the_connection_issue_11() {
        let mut k = Keepalive::new(20.0, 5.0, 0.0).unwrap();
        assert_eq!(k.deadline_s(), 20.0);
        assert_eq!(k.tick(20.0), Tick::SendPing);
        assert_eq!(k.deadline_s(), 25.0);
        assert_eq!(k.tick(24.0), Tick::Nothing);
        assert_eq!(k.tick(25.0), Tick::TimedOut);
        let mut k = Keepalive::new(20.0, 5.0, 0.0).unwrap();
        k.tick(20.0);
        k.pong();
        assert_eq!(k.deadline_s(), 40.0);
        // No timeout: pings go on unanswered.
        let mut k = Keepalive::new(20.0, 0.0, 0.0).unwrap();
        assert_eq!(k.tick(20.0), Tick::SendPing);
        assert_eq!(k.deadline_s(), 40.0);
        assert_eq!(k.tick(40.0), Tick::SendPing);
    }
}
