//! One paced session's I/O: connect (with admission retries), then do what the session's
//! [`machine`] says — send a frame, wait for a milestone, stream packets on the absolute
//! schedule — and close. All on the worker's single runtime thread. What each frame means and
//! what each packet counts for is decided by the machine, without I/O.

mod connect;
pub mod machine;
mod transcripts;
pub mod wire;

pub use connect::{probe, Dialer, Unreachable};

use super::counters::WorkerStats;
use super::pacer::Pacer;
use super::setup::SetupTally;
use crate::audio::Audio;
use crate::clock::{instant_at, monotonic_s};
use crate::contract::worker::{SessionOutcome, SessionStatus, MAX_WINDOWS};
use crate::options::Settings;
use crate::procstat;
use crate::protocol::keepalive::{self, Keepalive, Tick};
use crate::protocol::{ClientProtocol, EventIds, Milestone, Outgoing};
use crate::trace::format::{json_string, Payload};
use crate::trace::{Receipt, SessionTrace};
use futures_util::{FutureExt as _, SinkExt, StreamExt};
use machine::{Action, Flow, Heard, Incoming, Machine};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Bytes, Error as WsError, Message, Utf8Bytes};
use wire::Ws;

/// Once the run is being stopped, how long a session still waits for each awaited event.
const STOP_GRACE_S: f64 = 3.0;

/// Everything a session task needs; built by the worker.
#[derive(Clone)]
pub struct SessionCtx {
    pub worker: u32,
    pub index: u32,
    pub settings: Rc<Settings>,
    pub protocol: Rc<dyn ClientProtocol>,
    pub url: Rc<str>,
    /// TLS and handshake headers, shared by the worker's sessions.
    pub dialer: Rc<Dialer>,
    pub audio: Rc<Audio>,
    pub stats: Rc<RefCell<WorkerStats>>,
    pub tally: Rc<SetupTally>,
    /// The worker's send timer.
    pub pacer: Rc<Pacer>,
    pub gate: watch::Receiver<Option<f64>>,
    pub stop: watch::Receiver<bool>,
}

/// Why a session did not complete.
enum End {
    Rejected(String),
    Failed(String),
}

struct Session {
    ctx: SessionCtx,
    trace: SessionTrace,
    machine: Machine,
    /// The server let the session in (the WebSocket handshake succeeded).
    admitted: bool,
    /// `--client-ping-interval`: pings once connected.
    keepalive: Option<Keepalive>,
    /// When the session last began to send a frame: a frame handed out later is stamped no
    /// earlier, so the trace never goes back in time (see `on_message`).
    last_send_s: f64,
}

/// What [`Session::send_bounded`] sends.
enum Sending<'a> {
    /// A frame the session built (a packet, a command).
    Frame(&'a Outgoing),
    /// A ping.
    Message(Message),
}

/// Sleeps until `at_s` ([`monotonic_s`] scale), or for ever without one. A `select!` builds
/// every branch's future each turn, disabled or not: a tokio `Sleep` built there for the
/// keepalive that is off by default cost two clock reads and a timer entry every turn.
async fn sleep_until_s(at_s: Option<f64>) {
    match at_s {
        Some(at_s) => tokio::time::sleep_until(instant_at(at_s)).await,
        None => std::future::pending().await,
    }
}

/// The question a session's failure asks when the server answered as if it spoke another
/// protocol, and how to find out.
fn another_protocol(settings: &Settings) -> String {
    // FunASR's 2pass runtime servers listen on Fun-ASR-Nano's port (10095) but take a JSON
    // first message: the C++ one drops START and every message after it without a word, the
    // Python one closes the connection. FunASR's own docs warn the Nano client off them.
    let funasr = if settings.protocol == crate::protocol::Protocol::Funasr {
        "; --protocol funasr speaks Fun-ASR-Nano's serve_realtime_ws.py (START/STOP), not FunASR's 2pass runtime servers (funasr_wss_server.py, websocket-server-2pass, also on port 10095), which take a JSON first message and ignore START"
    } else {
        ""
    };
    format!(
        "is it a server of another protocol? (this run speaks --protocol {}; `duplexbench-tui conform --url URL --protocol P` checks one){funasr}",
        settings.protocol.as_str()
    )
}

/// The close frame the client sends when it closes the socket: 1000 (normal closure), as the
/// clients of every protocol here close (Python's `websockets` on leaving its `async with`
/// block, whether the session ended well or not; the OpenAI SDKs), never one without a code.
fn goodbye() -> Option<CloseFrame> {
    Some(CloseFrame {
        code: CloseCode::Normal,
        reason: Utf8Bytes::default(),
    })
}

/// Runs one session to its end and says how it went.
pub async fn run(ctx: SessionCtx, trace: SessionTrace) -> SessionOutcome {
    let ids = EventIds {
        shard: ctx.settings.shard.as_ref().map_or(0, |s| s.index),
        worker: ctx.worker,
        session: ctx.index,
    };
    let machine = Machine::new(
        ctx.protocol.clone(),
        ids,
        ctx.settings.clone(),
        ctx.audio.clone(),
        ctx.stats.clone(),
    );
    let mut session = Session {
        ctx,
        trace,
        machine,
        admitted: false,
        keepalive: None,
        last_send_s: 0.0,
    };
    session.machine.connecting(monotonic_s());
    let result = session.drive().await;
    let Session {
        ctx,
        trace,
        mut machine,
        admitted,
        ..
    } = session;
    machine.settle();
    let failure = match &result {
        Ok(()) => None,
        Err(End::Rejected(why) | End::Failed(why)) => Some(why.as_str()),
    };
    machine.finish(monotonic_s(), failure);
    // Edited in place until the session returns it: dropped by an abort meanwhile (its trace
    // still being written), the machine leaves it to the worker's result.
    let outcome = &mut machine.outcome;
    match result {
        Ok(()) => outcome.status = SessionStatus::Completed,
        Err(End::Rejected(why)) => {
            outcome.status = SessionStatus::Rejected;
            outcome.error = Some(why);
        }
        Err(End::Failed(why)) => {
            // A session that timed out after a server error failed because of it: say so.
            // Refused before its first packet, the likeliest cause is a server of another
            // protocol (vLLM answers sglang-omni's `session.update` with an error), unless the
            // error's code says what it is.
            let why = match &outcome.last_server_error {
                Some(error) if !why.contains(error.as_str()) => {
                    let code = error.split(": ").next().unwrap_or_default();
                    let advice = match crate::protocol::error_advice(code) {
                        _ if outcome.first_send_s.is_some() => String::new(),
                        Some(advice) => format!("; {advice}"),
                        None => format!("; {}", another_protocol(&ctx.settings)),
                    };
                    format!("{why} (after the server's error {error}){advice}")
                }
                // Timed out before its first packet while the server said things this
                // protocol does not read (a Fun-ASR client facing a Realtime API server).
                _ if outcome.first_send_s.is_none()
                    && why.contains("(the server sent ")
                    && !why.contains("of the stop") =>
                {
                    format!("{why}; {}", another_protocol(&ctx.settings))
                }
                _ => why,
            };
            outcome.error = Some(why);
        }
    }
    // A session closes only after its lines are written; a write error fails it.
    if let Err(loss) = trace.finish(admitted).await {
        if outcome.status == SessionStatus::Completed {
            outcome.status = SessionStatus::Incomplete;
        }
        outcome.error.get_or_insert(loss.describe());
        outcome.lines_not_written = loss.lines;
        outcome.disk_full = loss.disk_full;
    }
    ctx.stats.borrow_mut().session_ended(outcome.status);
    machine.take_outcome()
}

impl Session {
    async fn drive(&mut self) -> Result<(), End> {
        // A stop (Ctrl-C, the set-up deadline) ends a connection still being made: a server
        // that never answers the upgrade would hold it for all of --connect-timeout.
        let mut stop = self.ctx.stop.clone();
        let connected = tokio::select! {
            connected = connect::connect(&self.ctx, &mut self.trace) => connected,
            _ = stop.wait_for(|s| *s) => {
                let why = format!("the run was stopped while connecting to {}", self.ctx.url);
                self.trace.error(monotonic_s(), &format!(r#"{{"message":{}}}"#, json_string(&why)));
                Err(End::Failed(why))
            }
        };
        let mut ws = match connected {
            Ok(ws) => {
                self.admitted = true;
                let s = &self.ctx.settings;
                self.keepalive = Keepalive::new(
                    s.client_ping_interval_s,
                    s.client_ping_timeout_s,
                    monotonic_s(),
                );
                ws
            }
            Err(end) => {
                self.ctx.tally.report(&Err(match &end {
                    End::Rejected(_) => None,
                    End::Failed(why) => Some(why.clone()),
                }));
                return Err(end);
            }
        };
        let mut reported = false;
        let result = self.follow_machine(&mut ws, &mut reported).await;
        if !reported {
            // Set-up failed before streaming was reached.
            let why = match &result {
                Err(End::Failed(why) | End::Rejected(why)) => why.clone(),
                Ok(()) => "the session ended during set-up".to_string(),
            };
            self.ctx.tally.report(&Err(Some(why)));
        }
        if result.is_err() {
            // A refusal that left the session open is answered as the protocol's own client
            // does (sglang-omni's: `session.close`, then its `session.closed`), for at most a
            // second; the session is already failed.
            if let Some((close, answer)) = self.machine.goodbye() {
                let sent = tokio::time::timeout(
                    Duration::from_millis(200),
                    self.send_control(&mut ws, Outgoing::Text(close)),
                )
                .await;
                if matches!(sent, Ok(Ok(()))) {
                    self.read_to_close(&mut ws, Some(answer)).await;
                }
            }
            // Best effort: tell the server we are gone, and keep its answer for the receipts
            // (as websockets' client, which awaits the closing handshake).
            let _ = tokio::time::timeout(Duration::from_millis(200), ws.close(goodbye())).await;
            self.read_to_close(&mut ws, None).await;
        }
        result
    }

    /// Reads what the server still sends until its close frame (traced for the receipts),
    /// the end of the connection or, if given, the milestone `until`, for at most a second.
    /// Its events are traced as received — the `session.closed` after a fatal error, or
    /// anything a server sends after its `session.closed` — so that the trace holds every
    /// frame the server sent (as sglang-omni's own client records them) and `conform` judges
    /// the order it really sent them in; the session is over, so they no longer count in its
    /// figures.
    async fn read_to_close(&mut self, ws: &mut Ws, until: Option<Milestone>) {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while let Some(Ok(msg)) = ws.next().await {
                let now_s = ws.read_s().max(self.last_send_s);
                match msg {
                    Message::Close(frame) => self.trace_close(
                        frame
                            .as_ref()
                            .map(|f| (u16::from(f.code), f.reason.as_str())),
                    ),
                    Message::Text(ref text) => {
                        let (kind, milestone) = self
                            .ctx
                            .protocol
                            .classify(text)
                            .map_or((Payload::Text, None), |r| {
                                (r.payload, r.meaning.milestone())
                            });
                        self.trace_received(&msg, kind, now_s);
                        if until.is_some() && milestone == until {
                            return;
                        }
                    }
                    Message::Binary(_) => {
                        self.trace_received(&msg, Payload::Json { audio_key: None }, now_s);
                    }
                    _ => {}
                }
            }
        })
        .await;
    }

    /// Does what the machine says until it says the session is over.
    async fn follow_machine(&mut self, ws: &mut Ws, reported: &mut bool) -> Result<(), End> {
        loop {
            match self.machine.next_action() {
                Action::Send(frame) => self.send_control(ws, frame).await?,
                Action::Await(what) => self.await_milestone(ws, what).await?,
                Action::Stream => {
                    self.ctx.tally.report(&Ok(()));
                    *reported = true;
                    self.stream_at_gate(ws).await?;
                    self.machine.streamed();
                }
                Action::Done => break,
            }
        }
        if self.ctx.protocol.client_closes() {
            // The protocol has no goodbye: the client closes, and reads the server's answer.
            let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(goodbye())).await;
        }
        // The server closes the socket after the session ends; answer its close frame.
        self.read_to_close(ws, None).await;
        // A server that left it open gets the client's close frame, not a dropped connection
        // (which it logs as 1006); after its own close, or the client's, this sends nothing.
        let _ = tokio::time::timeout(Duration::from_millis(200), ws.close(goodbye())).await;
        Ok(())
    }

    /// Waits at the start gate, then streams (unless the run stops first).
    async fn stream_at_gate(&mut self, ws: &mut Ws) -> Result<(), End> {
        self.trace.hand_over();
        let mut gate = self.ctx.gate.clone();
        let mut stop = self.ctx.stop.clone();
        let gate_s = tokio::select! {
            g = gate.wait_for(|g| g.is_some()) => g.ok().and_then(|g| *g),
            _ = stop.wait_for(|s| *s) => None,
        };
        let Some(gate_s) = gate_s else {
            self.machine.stop_early();
            return Ok(());
        };
        self.ctx
            .stats
            .borrow_mut()
            .stream_started(gate_s, procstat::mark);
        let gate_s = gate_s + self.stagger_s();
        let streamed = self.stream(ws, gate_s).await;
        self.ctx
            .stats
            .borrow_mut()
            .stream_ended(|| (monotonic_s(), procstat::end_mark()));
        self.ctx.pacer.forget(self.ctx.index);
        streamed
    }

    /// The paced send loop: packet N is due at packet 0's actual send plus N packet intervals,
    /// and is late once it is a late threshold past that, sent or not.
    /// A send of packet `seq` failed: it never finished, so it is unsent, and so are the packets
    /// after it — unless the run was being stopped (the send blocked until the stop ended it),
    /// when the session stopped early and those were no longer due.
    fn abandon(&mut self, seq: u32) {
        if *self.ctx.stop.borrow() {
            self.machine.stopped_in_send();
        } else {
            self.machine.abandon(seq);
        }
    }

    async fn stream(&mut self, ws: &mut Ws, gate_s: f64) -> Result<(), End> {
        let packets = self.ctx.settings.packets_per_session;
        let mut stop = self.ctx.stop.clone();
        let pacer = self.ctx.pacer.clone();
        let paced = !self.ctx.settings.no_pace;
        // One wait for the stop for the whole loop: made afresh each packet, it registered with
        // and left the channel's waiter list every time.
        let stopped = stop.wait_for(|s| *s);
        tokio::pin!(stopped);
        if !paced {
            // Unpaced, the packets leave back to back, but from the gate, as the paced ones:
            // all sessions start together, and no packet leaves before the schedule's origin.
            tokio::select! {
                biased;
                _ = &mut stopped => {
                    self.machine.stop_early();
                    return Ok(());
                }
                () = pacer.sleep_until(self.ctx.index, gate_s) => {}
            }
        }
        let mut seq: u32 = 0;
        // Paced, one more wake-up after the last packet: the input ends when its audio has
        // played out, and the ending (sglang's `input_audio.end`, Fun-ASR's STOP) waits for it.
        let wakes = if paced { packets + 1 } else { packets };
        while seq < wakes {
            let due_s = if seq < packets {
                self.machine.due_s(seq, gate_s)
            } else {
                self.input_end_s(gate_s)
            };
            if !paced {
                // Unpaced, the next send is always ready: take what has arrived first.
                while let Some(msg) = ws.next().now_or_never() {
                    if let Err(end) = self.on_message(msg, ws.read_s()) {
                        self.machine.abandon(seq);
                        return Err(end);
                    }
                }
            }
            let ping_s = self.keepalive.as_ref().map(Keepalive::deadline_s);
            tokio::select! {
                biased;
                _ = &mut stopped => {
                    self.machine.stop_early();
                    break;
                }
                () = sleep_until_s(ping_s), if ping_s.is_some() => {
                    if let Err(end) = self.keep_alive(ws).await {
                        self.machine.abandon(seq);
                        return Err(end);
                    }
                }
                () = pacer.sleep_until(self.ctx.index, due_s), if paced => {
                    if seq == packets {
                        break;
                    }
                    if let Err(end) = self.send_packet(ws, seq, gate_s).await {
                        self.abandon(seq);
                        return Err(end);
                    }
                    seq += 1;
                }
                () = std::future::ready(()), if !paced => {
                    if let Err(end) = self.send_packet(ws, seq, gate_s).await {
                        self.abandon(seq);
                        return Err(end);
                    }
                    seq += 1;
                }
                msg = ws.next() => {
                    // The frames that came in the same read are taken too, before the next
                    // turn of the loop: one turn a read, not one a frame.
                    let mut msg = Some(msg);
                    while let Some(item) = msg {
                        if let Err(end) = self.on_message(item, ws.read_s()) {
                            self.machine.count_overdue(seq, gate_s, monotonic_s());
                            self.machine.abandon(seq);
                            return Err(end);
                        }
                        msg = ws.next_buffered().map(Some);
                    }
                }
            }
        }
        Ok(())
    }

    async fn send_packet(&mut self, ws: &mut Ws, seq: u32, gate_s: f64) -> Result<(), End> {
        let start_s = monotonic_s();
        self.last_send_s = start_s;
        // Built into the buffer of a packet already traced: a packet allocates nothing.
        let mut frame = self.trace.frame_buffer();
        let (due_s, audio) = self.machine.packet(seq, start_s, gate_s, &mut frame);
        let completed_s = self
            .send_bounded(ws, Sending::Frame(&frame), Some((seq + 1, gate_s)), start_s)
            .await
            .map_err(End::Failed)?;
        self.machine.sent(seq, due_s, start_s, completed_s);
        if seq + 1 == self.ctx.settings.packets_per_session {
            self.ctx
                .stats
                .borrow_mut()
                .last_packet_sent(completed_s, procstat::end_mark);
        }
        let receipt = Receipt {
            event_id: EventIds {
                shard: self.ctx.settings.shard.as_ref().map_or(0, |s| s.index),
                worker: self.ctx.worker,
                session: self.ctx.index,
            }
            .id(seq),
            seq,
            gate_s,
            scheduled_s: gate_s + f64::from(seq) * self.ctx.settings.packet_s(),
            due_s,
            start_s,
            completed_s,
        };
        self.trace.append(receipt, frame, audio);
        if let Some(frames) = self.machine.turn_end(seq) {
            for frame in frames {
                self.send_control(ws, frame).await?;
            }
        }
        Ok(())
    }

    /// Sends a ping when one is due; fails the session when one went unanswered too long.
    async fn keep_alive(&mut self, ws: &mut Ws) -> Result<(), End> {
        let Some(keepalive) = &mut self.keepalive else {
            return Ok(());
        };
        match keepalive.tick(monotonic_s()) {
            Tick::Nothing => Ok(()),
            Tick::SendPing => self
                .send_bounded(
                    ws,
                    Sending::Message(Message::Ping(Bytes::new())),
                    None,
                    monotonic_s(),
                )
                .await
                .map(drop)
                .map_err(End::Failed),
            Tick::TimedOut => {
                self.machine
                    .connection_lost(keepalive::TIMEOUT_DETAIL.to_string());
                Err(End::Failed(format!(
                    "a keepalive ping was not answered within --client-ping-timeout {}s",
                    self.ctx.settings.client_ping_timeout_s
                )))
            }
        }
    }

    async fn send_control(&mut self, ws: &mut Ws, frame: Outgoing) -> Result<(), End> {
        let now_s = monotonic_s();
        self.last_send_s = now_s;
        self.machine.control_sending(now_s);
        if let Some(text) = frame.text() {
            // Fun-ASR's commands are plain words, not JSON.
            if text.starts_with('{') {
                self.trace.send(now_s, text);
            } else {
                self.trace.send_text(now_s, text);
            }
        }
        self.send_bounded(ws, Sending::Frame(&frame), None, now_s)
            .await
            .map(drop)
            .map_err(End::Failed)
    }

    /// Sends one frame, bounded by `--send-timeout`: a server that stops reading fills the
    /// socket's buffers and would block the send for ever. While it is blocked, the packets
    /// that fall due (`overdue`: the next packet and the gate) are counted late as they pass
    /// their threshold, and a stop of the run ends the wait at once. `started_s`: when the
    /// caller began sending (its clock read serves both); returns when the send returned.
    async fn send_bounded(
        &mut self,
        ws: &mut Ws,
        frame: Sending<'_>,
        overdue: Option<(u32, f64)>,
        started_s: f64,
    ) -> Result<f64, String> {
        // A frame may be written in part already here; the flush writes the rest.
        let started = match frame {
            Sending::Frame(frame) => ws.send_frame(frame),
            Sending::Message(message) => ws.queue_message(message),
        };
        let result = match started {
            Ok(()) => self.flush_bounded(ws, overdue, started_s).await,
            Err(err) => Err(err.to_string()),
        };
        let ended_s = monotonic_s();
        if let Some((seq, gate_s)) = overdue {
            if result.is_err() {
                self.machine.count_overdue(seq, gate_s, ended_s);
            }
        }
        // A send that blocked for more than a threshold is the server's backpressure: its
        // window lets the attribution name the late packets it caused.
        if (ended_s - started_s) * 1000.0 > f64::from(self.ctx.settings.late_threshold_ms) {
            let mut stats = self.ctx.stats.borrow_mut();
            if stats.send_blocked_windows.len() < MAX_WINDOWS {
                stats.send_blocked_windows.push([started_s, ended_s]);
                stats.send_blocked_sessions.push(self.ctx.index);
            }
        }
        result.map(|()| ended_s)
    }

    /// Writes what is queued, bounded as [`Session::send_bounded`] says.
    async fn flush_bounded(
        &mut self,
        ws: &mut Ws,
        overdue: Option<(u32, f64)>,
        started_s: f64,
    ) -> Result<(), String> {
        let sending = ws.flush();
        tokio::pin!(sending);
        // Nearly every send finishes at once (the socket has room): no timers for those.
        if let Some(sent) = (&mut sending).now_or_never() {
            return sent.map_err(|err| err.to_string());
        }
        let timeout_s = self.ctx.settings.send_timeout_s;
        let mut stop = self.ctx.stop.clone();
        let stopped_before = *stop.borrow();
        let mut next_late_s =
            overdue.and_then(|(seq, gate_s)| self.machine.count_overdue(seq, gate_s, started_s));
        loop {
            let late_at = instant_at(next_late_s.unwrap_or(started_s + timeout_s));
            tokio::select! {
                biased;
                sent = &mut sending => break sent.map_err(|err| err.to_string()),
                () = tokio::time::sleep_until(instant_at(started_s + timeout_s)) => {
                    break Err(format!(
                        "the server stopped reading: a send blocked for more than --send-timeout {:.0} ms",
                        timeout_s * 1000.0
                    ));
                }
                _ = stop.wait_for(|s| *s), if !stopped_before => {
                    break Err("the run was stopped while a send was blocked".to_string());
                }
                () = tokio::time::sleep_until(late_at), if next_late_s.is_some() => {
                    let (seq, gate_s) = overdue.unwrap_or_default();
                    next_late_s = self.machine.count_overdue(seq, gate_s, monotonic_s());
                }
            }
        }
    }

    /// Takes server frames until the awaited milestone arrives. The whole wait is bounded by
    /// `--recv-timeout` (a server that keeps talking without ever sending it does not extend
    /// it), and by [`STOP_GRACE_S`] once the run is being stopped.
    async fn await_milestone(&mut self, ws: &mut Ws, what: &str) -> Result<(), End> {
        let recv_timeout_s = self.ctx.settings.recv_timeout_s;
        // Fun-ASR's benchmark bounds each gap between server messages instead.
        let per_gap = self.ctx.protocol.recv_timeout_per_gap();
        // Its receive loop runs from the first audio frame, each wait from the last message:
        // after STOP the wait goes on from there (a server silent since mid-stream has timed
        // out already, and the benchmark then waits no more).
        let from_s = match self.machine.receive_loop_last_s() {
            Some(last_s) if per_gap => last_s,
            _ => monotonic_s(),
        };
        let mut deadline_s = from_s + recv_timeout_s;
        let mut stop = self.ctx.stop.clone();
        let mut stopping = *stop.borrow();
        if stopping {
            deadline_s = deadline_s.min(monotonic_s() + STOP_GRACE_S);
        }
        // The server may take its time: what the session has traced so far goes to the files.
        self.trace.hand_over();
        // The messages the wait took that were not the milestone, and the start of the last
        // (one buffer, reused): a timeout names what the server said instead.
        let mut others = 0u64;
        let mut last_other = String::new();
        loop {
            let ping_s = self.keepalive.as_ref().map(Keepalive::deadline_s);
            let grace_s = self.machine.grace_deadline_s();
            let msg = tokio::select! {
                msg = ws.next() => msg,
                // The ending waits only for turns a finished response left behind: no response
                // for them came in the grace, and none is waited for.
                () = sleep_until_s(grace_s), if grace_s.is_some() => {
                    if self.machine.grace_over() == Flow::Reached {
                        return Ok(());
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(instant_at(deadline_s)) => {
                    if !stopping {
                        self.machine.recv_timed_out();
                    }
                    let instead = match others {
                        0 => String::new(),
                        1 => format!(" (the server sent one other message: {last_other:?})"),
                        n => format!(" (the server sent {n} other messages, the last {last_other:?})"),
                    };
                    let why = if stopping {
                        format!("no {what} within {STOP_GRACE_S} s of the stop{instead}")
                    } else if per_gap && others > 0 {
                        format!("no {what}: no server message for --recv-timeout {recv_timeout_s}s after its last{instead}")
                    } else if per_gap {
                        format!("no {what}: no server message for --recv-timeout {recv_timeout_s}s")
                    } else {
                        format!("no {what} within --recv-timeout {recv_timeout_s}s{instead}")
                    };
                    // The protocol's hint is about a server that answered to the input's end
                    // and never ended (vLLM's first realtime builds): not one that sent no delta,
                    // nor one that went silent mid-stream (it stopped; it did not forget to end).
                    let protocol_hint = match self.ctx.protocol.timeout_hint(what) {
                        Some(hint) if !stopping && self.machine.answered_to_the_end() => {
                            format!("; {hint}")
                        }
                        _ => String::new(),
                    };
                    return Err(End::Failed(
                        why + &self.silent_server_hint(stopping) + &protocol_hint,
                    ));
                }
                () = sleep_until_s(ping_s), if ping_s.is_some() => {
                    self.keep_alive(ws).await?;
                    continue;
                }
                _ = stop.wait_for(|s| *s), if !stopping => {
                    stopping = true;
                    deadline_s = deadline_s.min(monotonic_s() + STOP_GRACE_S);
                    continue;
                }
            };
            let heard = !matches!(msg, Some(Ok(Message::Ping(_) | Message::Pong(_))));
            let said = match &msg {
                Some(Ok(Message::Text(text))) => Some(text.as_str()),
                Some(Ok(Message::Binary(_))) => Some("a binary frame"),
                _ => None,
            };
            if let Some(said) = said {
                others += 1;
                last_other.clear();
                last_other.extend(said.chars().take(80));
            }
            if self.on_message(msg, ws.read_s())? {
                return Ok(());
            }
            if per_gap && heard && !stopping {
                deadline_s = monotonic_s() + recv_timeout_s;
            }
        }
    }

    /// Traces one item of the WebSocket stream and hands it to the machine; `Ok(true)` when it
    /// was the awaited milestone. `read_s`: the time of the read that completed it
    /// ([`Ws::read_s`]: one clock read a read, not one a frame). A frame can be handed out
    /// after the session sent something, although it was read before: one left in the buffer
    /// when a milestone ended a wait, or behind a control frame (which waits a turn). It is
    /// stamped no earlier than the session's last send, so a trace never goes back in time.
    fn on_message(
        &mut self,
        msg: Option<Result<Message, WsError>>,
        read_s: f64,
    ) -> Result<bool, End> {
        let now_s = read_s.max(self.last_send_s);
        let heard = match &msg {
            Some(Ok(Message::Text(text))) => self.machine.on_frame(Incoming::Text(text), now_s),
            Some(Ok(Message::Binary(bytes))) => {
                self.machine.on_frame(Incoming::Binary(bytes), now_s)
            }
            Some(Ok(Message::Close(frame))) => {
                let frame = frame
                    .as_ref()
                    .map(|f| (u16::from(f.code), f.reason.as_str()));
                self.trace_close(frame);
                self.machine.on_frame(Incoming::Close(frame), now_s)
            }
            Some(Ok(Message::Pong(_))) => {
                if let Some(keepalive) = &mut self.keepalive {
                    keepalive.pong();
                }
                return Ok(false);
            }
            // Pings: the WebSocket (wire.rs) answers them itself.
            Some(Ok(_)) => return Ok(false),
            Some(Err(WsError::Capacity(err))) => self.machine.on_frame(
                Incoming::TooLarge(format!(
                    "the server sent a message over --max-message-bytes {} ({err}): the client closed the connection (code 1009)",
                    self.ctx.settings.max_message_bytes
                )),
                now_s,
            ),
            Some(Err(WsError::Utf8(what))) => {
                self.machine.on_frame(Incoming::InvalidUtf8(what), now_s)
            }
            Some(Err(
                WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake)
                | WsError::ConnectionClosed
                | WsError::AlreadyClosed,
            )) => {
                return Err(self.lost(
                    now_s,
                    "no close frame received or sent",
                    "the server closed the connection mid-session (without a close frame)"
                        .to_string(),
                ));
            }
            // The WebSocket failed the connection and sent the close frame that says why.
            Some(Err(WsError::Protocol(err))) => {
                let why = format!(
                    "the server broke the WebSocket protocol ({err}): the client closed the connection (code 1002)"
                );
                return Err(self.lost(
                    now_s,
                    "sent 1002 (protocol error) protocol error; no close frame received",
                    why,
                ));
            }
            Some(Err(err)) => {
                let why = match &err {
                    WsError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionReset => {
                        "; the server (or a proxy in front of it) reset it mid-session: its log says why"
                    }
                    _ => "",
                };
                let why = format!("connection to the server failed: {err}{why}");
                return Err(self.lost(now_s, "no close frame received or sent", why));
            }
            None => {
                return Err(self.lost(
                    now_s,
                    "no close frame received or sent",
                    "the server closed the connection mid-session".to_string(),
                ));
            }
        };
        self.record(&msg, heard, now_s)
    }

    /// The end of a connection that failed without a close frame: the machine's account of the
    /// close (`detail`), and the failure in the trace, whose `error` lines are what the client
    /// saw go wrong (conform read a trace without one as a client that stopped on its own).
    fn lost(&mut self, now_s: f64, detail: &str, why: String) -> End {
        self.machine.connection_lost(detail.to_string());
        self.trace
            .error(now_s, &format!(r#"{{"message":{}}}"#, json_string(&why)));
        End::Failed(why)
    }

    fn record(
        &mut self,
        msg: &Option<Result<Message, WsError>>,
        heard: Heard,
        now_s: f64,
    ) -> Result<bool, End> {
        if let (Some(payload), Some(Ok(msg))) = (heard.payload, msg) {
            self.trace_received(msg, payload, now_s);
        }
        if let Some(why) = &heard.error {
            self.trace
                .error(now_s, &format!(r#"{{"message":{}}}"#, json_string(why)));
        }
        match heard.flow {
            Flow::Continue => Ok(false),
            Flow::Reached => Ok(true),
            Flow::End(why) => Err(End::Failed(why)),
        }
    }

    /// A received data frame's trace line: a text frame as it came, a binary one as its
    /// length (`{"_binary_bytes":n}`).
    fn trace_received(&mut self, msg: &Message, payload: Payload, now_s: f64) {
        match msg {
            Message::Text(text) => self.trace.receive(now_s, text, payload),
            Message::Binary(bytes) => {
                let event = format!(r#"{{"_binary_bytes":{}}}"#, bytes.len());
                self.trace.receive(now_s, &event, payload);
            }
            _ => {}
        }
    }

    /// After a wait that timed out: when the server has sent nothing at all since the
    /// handshake, the likeliest cause — a server of another protocol waits for its own first
    /// message (Fun-ASR's `START`) — and what to do.
    fn silent_server_hint(&self, stopping: bool) -> String {
        if stopping || self.machine.outcome.server_events > 0 {
            return String::new();
        }
        format!(
            "; the server sent nothing after the WebSocket handshake: {}",
            another_protocol(&self.ctx.settings)
        )
    }

    /// The server's close frame, for the receipts (conformance checks its code).
    fn trace_close(&mut self, frame: Option<(u16, &str)>) {
        self.trace.close(monotonic_s(), frame);
    }

    /// When the input's audio has played out: its duration after the session's gate, and at
    /// least the last packet's audio after that packet's send, as sglang-omni's client sends
    /// its end (Fun-ASR's benchmark, pacing with a sleep after every frame, does the same).
    fn input_end_s(&self, gate_s: f64) -> f64 {
        let s = &self.ctx.settings;
        let input_s = s.duration_s;
        let last_packet_s =
            input_s - f64::from(s.packets_per_session.saturating_sub(1)) * s.packet_s();
        (gate_s + input_s).max(self.last_send_s + last_packet_s)
    }

    /// With `--stagger`, this session's share of one packet interval after the gate.
    fn stagger_s(&self) -> f64 {
        let s = &self.ctx.settings;
        if !s.stagger {
            return 0.0;
        }
        let k = u64::from(self.ctx.worker) * u64::from(s.sessions_per_process)
            + u64::from(self.ctx.index);
        k as f64 / s.total_sessions().max(1) as f64 * s.packet_s()
    }
}
