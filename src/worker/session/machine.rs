//! The client session as a state machine without I/O: fed server frames and the clock, it
//! returns the frames to send and decides what every packet and every event counts for.
//!
//! The I/O around it (`worker::session`) connects, waits, sends and reads; this part is the same
//! for every protocol, because it sees a server frame only through the protocol's
//! [`Meaning`], and it is tested without sockets.

use super::super::counters::WorkerStats;
use super::transcripts::{self, Recorder};
use crate::audio::Audio;
use crate::contract::worker::{ReplyKind, SessionOutcome, MAX_WINDOWS};
use crate::options::Settings;
use crate::pacing::{self, PacketClass, Thresholds};
use crate::protocol::{
    AudioSpan, ClientProtocol, Ending, EventIds, Meaning, Milestone, Outgoing, Protocol, Received,
    Step, TurnDetection, TurnMark,
};
use crate::trace::format::Payload;
use serving::Serving;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use turns::{Sample, Turns};

mod serving;
mod turns;

/// Send start times of recent packets, for the server-side latencies (20 s at 80 ms).
const SEND_RING: usize = 256;

/// What the I/O around the machine does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this frame (and trace it), then ask again.
    Send(Outgoing),
    /// Read frames into [`Machine::on_frame`] until it says [`Flow::Reached`]; the name is the
    /// awaited event, for messages.
    Await(&'static str),
    /// Wait for the start gate, then stream every packet ([`Machine::packet`]), then call
    /// [`Machine::streamed`].
    Stream,
    /// The session is over by the protocol; close the socket.
    Done,
}

/// What a received frame did to the session.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Nothing the session waits for.
    Continue,
    /// The awaited milestone arrived.
    Reached,
    /// The session cannot go on: why.
    End(String),
}

/// A received frame, as the I/O should record it.
#[derive(Debug, PartialEq, Eq)]
pub struct Heard {
    /// How the frame goes into the trace (`None`: it is not traced as a frame, e.g. a close); a
    /// binary frame goes in as its length.
    pub payload: Option<Payload>,
    /// A protocol error to trace beside it.
    pub error: Option<String>,
    pub flow: Flow,
}

/// An item of the WebSocket stream, without the socket.
#[derive(Debug)]
pub enum Incoming<'a> {
    Text(&'a str),
    Binary(&'a [u8]),
    /// A close frame, with its code and reason when it had them.
    Close(Option<(u16, &'a str)>),
    /// A frame over `--max-message-bytes`.
    TooLarge(String),
    /// Text that is not valid UTF-8, in a text frame or a close frame's reason: what it was
    /// (the WebSocket's words). The client has failed the connection (close code 1007).
    InvalidUtf8(&'a str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    SettingUp,
    Streaming,
    Finishing,
    Done,
}

pub struct Machine {
    protocol: Rc<dyn ClientProtocol>,
    ids: EventIds,
    settings: Rc<Settings>,
    thresholds: Thresholds,
    audio: Rc<Audio>,
    stats: Rc<RefCell<WorkerStats>>,
    pub outcome: SessionOutcome,
    phase: Phase,
    steps: VecDeque<Step>,
    current: Option<Step>,
    /// Send start of packet 0: the origin of the schedule.
    origin_s: Option<f64>,
    /// The last packets' sends: `(seq, start_s, completed_s)`.
    send_ring: [(u32, f64, f64); SEND_RING],
    last_seq: Option<u32>,
    first_audio_seen: bool,
    /// The previous delta of the answer under way (turn dialects), or the previous result
    /// (Fun-ASR): a server that stalls mid-stream shows as a long gap to the next.
    last_delta_s: Option<f64>,
    /// When the latest answer delta came ([`Machine::answered_to_the_end`]).
    latest_delta_s: Option<f64>,
    /// Packets below this sequence number were counted late while still unsent.
    counted_late_below: u32,
    /// The session's turns, for the dialects that have them (`None` for the native protocol).
    turns: Option<Turns>,
    /// The recognition metrics, for protocols that return transcripts.
    transcripts: Option<Recorder>,
    /// A final recognition result came while the session was ending (Fun-ASR's answer to
    /// STOP, before `stopped`).
    final_while_ending: bool,
    /// The `event_id` of the last command of a set-up or ending step sent: a server error that
    /// names it refused that command (sglang-omni answers a request it cannot serve so, and
    /// keeps the session; OpenAI refuses a commit of under 100 ms of audio so).
    step_event_id: Option<String>,
    /// A commit is on its way that ends a turn (tagged as [`Turns::ended_as`] says, and
    /// whether the same frames ask for its answer): the turn's input ends when it is sent.
    turn_ends_at_send: Option<(u32, bool)>,
    /// The turn whose `response.create`, held back while a response was under way, the next
    /// control frame asks for (OpenAI's final turn).
    turn_asked_at_send: Option<u32>,
    /// sglang-omni's serving metrics (the native protocol).
    serving: Option<Serving>,
    /// The session ends because the server refused something without ending the session
    /// itself (a non-fatal error): it is owed a polite close ([`Machine::goodbye`]).
    refused_open: bool,
    /// The event id of the commit that ends the input's last turn, once sent.
    final_commit_id: Option<String>,
    /// The server's VAD stopped speech after the last packet was sent, and then the server
    /// committed the input (the end of that turn): `.0` the first, `.1` both.
    committed_after_input: (bool, bool),
    /// The input's last turn was withdrawn: the server's VAD had committed its audio already.
    final_withdrawn: bool,
    /// The session's outcome was taken ([`Machine::take_outcome`]): a machine dropped before
    /// that was dropped by an abort, and leaves its outcome in the worker's stats.
    returned: bool,
    /// [`Machine::settle`] ran: it files the serving metrics once.
    settled: bool,
}

impl Drop for Machine {
    /// An abort drops the sessions where they stand: what this one recorded (its packets, its
    /// first and last sends, its late and unsent counts, its turns) is kept for the worker's
    /// result, not replaced by an empty outcome.
    fn drop(&mut self) {
        if self.returned {
            return;
        }
        // As a stop ends it: a session still streaming stopped early (its packets left were
        // not due any more, so none is counted unsent), and its turns and serving metrics are
        // settled as at any end. Whether a session had heard the stop before the abort dropped
        // it (a race of the two) then changes none of its figures.
        let settled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if self.settled {
                return;
            }
            if self.phase == Phase::Streaming {
                self.stop_early();
            }
            self.settle();
            // The recognition results so far (Fun-ASR), as a stopped session keeps them.
            self.finish(crate::clock::monotonic_s(), None);
        }));
        if settled.is_err() {
            if let Some(turns) = &self.turns {
                self.outcome.turns = turns.counts;
            }
        }
        let outcome = std::mem::replace(&mut self.outcome, SessionOutcome::new(self.ids.session));
        if let Ok(mut stats) = self.stats.try_borrow_mut() {
            stats.abandoned.push(outcome);
        }
    }
}

impl Machine {
    pub fn new(
        protocol: Rc<dyn ClientProtocol>,
        ids: EventIds,
        settings: Rc<Settings>,
        audio: Rc<Audio>,
        stats: Rc<RefCell<WorkerStats>>,
    ) -> Machine {
        let steps = protocol.set_up(ids).into();
        let settings_for_turns = settings.protocol;
        let transcripts = protocol
            .records_transcripts()
            .then(|| Recorder::new(settings.recv_timeout_s));
        let serving = (settings_for_turns == Protocol::Native).then(|| {
            let rate = settings.client.input_sample_rate;
            Serving::new(audio.total_bytes(), rate, settings.packet_s())
        });
        Machine {
            protocol,
            ids,
            thresholds: settings.thresholds(),
            settings,
            audio,
            stats,
            outcome: SessionOutcome::new(ids.session),
            phase: Phase::SettingUp,
            steps,
            current: None,
            origin_s: None,
            send_ring: [(u32::MAX, 0.0, 0.0); SEND_RING],
            last_seq: None,
            first_audio_seen: false,
            last_delta_s: None,
            latest_delta_s: None,
            counted_late_below: 0,
            turns: (settings_for_turns != Protocol::Native).then(Turns::default),
            transcripts,
            final_while_ending: false,
            step_event_id: None,
            turn_ends_at_send: None,
            turn_asked_at_send: None,
            serving,
            refused_open: false,
            final_commit_id: None,
            committed_after_input: (false, false),
            final_withdrawn: false,
            returned: false,
            settled: false,
        }
    }

    /// After the session failed on a refusal that left it open, the frame that closes it
    /// politely and the milestone that answers it, if the protocol has one (native:
    /// `session.close` → `session.closed`).
    pub fn goodbye(&self) -> Option<(String, Milestone)> {
        self.refused_open
            .then(|| self.protocol.goodbye(self.ids))
            .flatten()
    }

    /// The session starts connecting at `now_s`.
    pub fn connecting(&mut self, now_s: f64) {
        if let Some(r) = &mut self.transcripts {
            r.connecting(now_s);
        }
    }

    /// An audio delta of the native protocol, for sglang-omni's serving metrics: its audio by
    /// its base64's length (not decoded), and the media time it answers.
    fn serving_delta(&mut self, text: &str, now_s: f64) {
        use crate::trace::format::{number_value, string_value_bytes};
        let Some((bytes, [head, tail])) = string_value_bytes(text, "delta") else {
            return;
        };
        let media_ms =
            number_value(tail, "t_start_ms").or_else(|| number_value(head, "t_start_ms"));
        // The packet that starts at that media time (their appends keyed by it, to 3 decimals).
        let packet_ms = f64::from(self.settings.packet_ms);
        let packet = media_ms.and_then(|ms| {
            let seq = (ms / packet_ms).round();
            let starts_there = (0.0..f64::from(self.settings.packets_per_session)).contains(&seq)
                && ((seq * packet_ms * 1000.0).round() - (ms * 1000.0).round()).abs() < 0.5;
            starts_there.then(|| {
                (
                    seq as u32,
                    self.send_of(seq as u64).map(|(start_s, _)| start_s),
                )
            })
        });
        let mut stats = self.stats.borrow_mut();
        let Some(serving) = &mut self.serving else {
            return;
        };
        serving.audio(bytes, now_s, &mut stats.hist.serving);
        if let Some(ms) = media_ms {
            serving.media(ms, packet, now_s, &mut stats.hist.serving);
        }
    }

    /// A control frame (from [`Action::Send`]) is about to be sent at `now_s`; the first one
    /// after streaming ends the input.
    pub fn control_sending(&mut self, now_s: f64) {
        if let (Phase::Finishing, Some(r)) = (self.phase, &mut self.transcripts) {
            r.stop_sending(now_s);
        }
        if let Some((tag, asked)) = self.turn_ends_at_send.take() {
            // A client-ended turn is timed from its commit, as the server can only answer it
            // from there: the final one goes once the input's audio has played out, up to a
            // packet after the last packet's send (timed from that send, the mock's 200 ms
            // first delta read 270 ms).
            self.last_delta_s = None;
            self.on_turns(|t| t.ended_as(now_s, Some(tag), asked));
        }
        if let Some(tag) = self.turn_asked_at_send.take() {
            self.on_turns(|t| t.asked(tag, now_s));
        }
    }

    /// When the last server message came, while the recognition's receive loop runs (Fun-ASR:
    /// from the first audio frame until it ends).
    pub fn receive_loop_last_s(&self) -> Option<f64> {
        self.transcripts.as_ref().and_then(Recorder::last_heard_s)
    }

    /// No server message came within `--recv-timeout` of the previous one.
    pub fn recv_timed_out(&mut self) {
        if let Some(r) = &mut self.transcripts {
            r.timed_out();
        }
    }

    /// The connection ended without a close frame (`detail` as the benchmark's library words
    /// it), or a keepalive ping went unanswered.
    pub fn connection_lost(&mut self, detail: String) {
        if let Some(r) = &mut self.transcripts {
            r.closed(detail);
        }
    }

    /// The session is over at `ended_s`, failed with `failure` if it did: the outcome gets
    /// its recognition metrics.
    pub fn finish(&mut self, ended_s: f64, failure: Option<&str>) {
        if let Some(mut r) = self.transcripts.take() {
            if let Some(why) = failure {
                r.failed(why, matches!(self.phase, Phase::Finishing | Phase::Done));
            }
            let client = r.finish(ended_s);
            let mut stats = self.stats.borrow_mut();
            let live = &mut stats.transcripts;
            if let Some(ms) = client.final_after_stop_ms {
                live.final_after_stop.record_s(ms / 1000.0);
            }
            live.errors += client.errors.len() as u64;
            drop(stats);
            self.outcome.transcripts = Some(client);
        }
    }

    /// Files what a message added to the benchmark's figures in the worker's live tally.
    fn tally(&self, counted: transcripts::Counted) {
        if counted == transcripts::Counted::default() {
            return;
        }
        let mut stats = self.stats.borrow_mut();
        let live = &mut stats.transcripts;
        if let Some(ms) = counted.first_update_ms {
            live.first_update.record_s(ms / 1000.0);
        }
        if let Some(ms) = counted.lag_ms {
            live.response_lag.record_s(ms / 1000.0);
        }
        live.partials += u64::from(counted.partial);
        live.finals += u64::from(counted.is_final);
    }

    /// Runs `f` on the session's turns, if it has them, adding what it counted to the
    /// worker's live tally.
    fn on_turns<R>(&mut self, f: impl FnOnce(&mut Turns) -> R) -> Option<R> {
        let turns = self.turns.as_mut()?;
        let before = turns.counts;
        let result = f(turns);
        self.stats
            .borrow_mut()
            .turn_counts
            .add_change(&before, &turns.counts);
        Some(result)
    }

    /// Whether packets go out as fast as the socket takes them (`--no-pace`).
    fn unpaced(&self) -> bool {
        self.settings.no_pace
    }

    /// What to do next.
    pub fn next_action(&mut self) -> Action {
        loop {
            if let Some(step) = &mut self.current {
                if let Some(frame) = step.send.take() {
                    let last = crate::protocol::FINAL_TURN;
                    match step.turn {
                        Some(TurnMark::Asks) => {
                            self.turn_asked_at_send = Some(last);
                        }
                        Some(ends) => {
                            self.turn_ends_at_send = Some((last, ends == TurnMark::EndsAsking));
                        }
                        None => {}
                    }
                    self.step_event_id = frame.text().and_then(event_id_of);
                    if matches!(step.turn, Some(TurnMark::Ends | TurnMark::EndsAsking)) {
                        self.final_commit_id = self.step_event_id.clone();
                    }
                    return Action::Send(frame);
                }
                let idle = self.turns.as_ref().is_none_or(Turns::idle);
                let quiet = self.turns.as_ref().is_none_or(Turns::quiet);
                match step.until {
                    // Nothing to wait for (a command the server does not answer), or idle
                    // (quiet) already.
                    None => self.current = None,
                    Some(Milestone::Idle) if idle => self.current = None,
                    Some(Milestone::Quiet) if quiet => self.current = None,
                    Some(_) => return Action::Await(step.awaiting),
                }
                continue;
            }
            if let Some(step) = self.steps.pop_front() {
                self.current = Some(step);
                continue;
            }
            return match self.phase {
                Phase::SettingUp => {
                    self.phase = Phase::Streaming;
                    Action::Stream
                }
                // The I/O streams until it calls `streamed`.
                Phase::Streaming => Action::Stream,
                Phase::Finishing | Phase::Done => {
                    self.phase = Phase::Done;
                    Action::Done
                }
            };
        }
    }

    /// Streaming is over (every packet sent, or the run stopped): the ending steps follow.
    pub fn streamed(&mut self) {
        self.phase = Phase::Finishing;
        // An error naming a set-up command now refuses no step of the ending.
        self.step_event_id = None;
        let ending = Ending {
            streamed: self.outcome.counts.packets > 0,
            speech_open: self.turns.as_ref().is_some_and(|t| t.speech_open),
            answered_early: self.turns.as_ref().is_some_and(|t| t.answered_early()),
        };
        self.steps = self.protocol.finish(self.ids, ending).into();
    }

    /// The frames that end a turn after packet `seq` (just sent), if the client ends one there:
    /// the turn's input ends when the first of them (the commit) is sent.
    pub fn turn_end(&mut self, seq: u32) -> Option<Vec<Outgoing>> {
        let packets = self.settings.packets_per_session;
        if seq + 1 >= packets {
            return None;
        }
        let packet_ms = u64::from(self.settings.packet_ms);
        let t_end_ms = u64::from(seq + 1) * packet_ms;
        let rest_ms = u64::from(packets - seq - 1) * packet_ms;
        let frames = self.protocol.turn_end(self.ids, seq, t_end_ms, rest_ms)?;
        // A turn the client ends mid-stream is asked for with its commit (`--commit-every`).
        self.turn_ends_at_send = Some((seq, true));
        Some(frames)
    }

    /// Files a turn latency in the worker's histograms.
    fn record(&self, sample: Option<Sample>, now_s: f64) {
        let Some(sample) = sample else { return };
        // A turn's first reply after its input ended is the server's reply lag.
        if let Sample::FirstTextAfterEnd(s, _) | Sample::FirstAudioAfterEnd(s) = sample {
            self.stats
                .borrow_mut()
                .reply(ReplyKind::FirstReply, now_s - s, now_s);
        }
        self.record_turn(sample);
    }

    /// A turn latency into its histogram alone: one known only later (the input's transcript
    /// taken as a turn's text at its done) is no reply of now, and the replies per second are
    /// filed in arrival order.
    fn record_turn(&self, sample: Sample) {
        let mut stats = self.stats.borrow_mut();
        let h = &mut stats.hist.turns;
        match sample {
            Sample::FirstTextAfterEnd(s, since_start) => {
                h.first_text_after_end.record_s(s);
                if let Some(since_start) = since_start {
                    h.first_text_after_start.record_s(since_start);
                }
            }
            Sample::FirstTextAfterStart(s) => h.first_text_after_start.record_s(s),
            Sample::FirstAudioAfterEnd(s) => h.first_audio_after_end.record_s(s),
            Sample::FirstAudioAfterStart(s) => h.first_audio_after_start.record_s(s),
            Sample::DoneAfterEnd(s) => h.done_after_end.record_s(s),
            Sample::SpeechStopped(s) => h.speech_stopped.record_s(s),
        }
    }

    /// A delta of an answer arrived at `now_s`: the gap since the previous one is a reply lag,
    /// while the client streams. Once the input has ended, the server finishes its answer to
    /// it (the turns time that, `done_after_end`): a delta still in flight for the last packet
    /// followed by the final answer 200 ms later is no stall (the vLLM mock read as one in most
    /// runs), as Fun-ASR's results after STOP are not.
    fn delta_gap(&mut self, now_s: f64) {
        if self.turns.is_some() && self.phase == Phase::Streaming {
            self.reply_gap(now_s);
        }
        self.latest_delta_s = Some(now_s);
    }

    /// A reply of a stream of them (deltas of an answer, Fun-ASR's results) arrived at `now_s`.
    fn reply_gap(&mut self, now_s: f64) {
        if let Some(previous_s) = self.last_delta_s.replace(now_s) {
            self.stats
                .borrow_mut()
                .reply(ReplyKind::DeltaGap, previous_s, now_s);
        }
    }

    /// The send (start and completion) of the packet that holds `audio_ms` of the input, if
    /// still remembered.
    fn send_of_audio_ms(&self, audio_ms: f64) -> Option<(f64, f64)> {
        let last_seq = self.last_seq?;
        let packet_ms = f64::from(self.settings.packet_ms);
        let seq = ((audio_ms / packet_ms).ceil() as i64 - 1).clamp(0, i64::from(last_seq));
        self.send_of(seq as u64)
    }

    /// Whether the server was still sending deltas when the input ended (its last delta at
    /// most a second before the last packet's send, or after it): it was answering, and then
    /// never ended its answer — unlike a server that went silent mid-stream. (An input that
    /// ends in more than a second of silence, which such a server may answer with nothing,
    /// misses the hint: it is a hint, not the verdict.)
    pub fn answered_to_the_end(&self) -> bool {
        match (self.latest_delta_s, self.outcome.last_send_s) {
            (Some(delta_s), Some(last_send_s)) => delta_s >= last_send_s - 1.0,
            _ => false,
        }
    }

    /// The session's outcome, at its end (the machine is done with it).
    pub fn take_outcome(&mut self) -> SessionOutcome {
        self.returned = true;
        std::mem::replace(&mut self.outcome, SessionOutcome::new(self.ids.session))
    }

    /// The session's turn counts, into its outcome (at its end).
    pub fn settle(&mut self) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        self.on_turns(|t| t.settle());
        if let Some(turns) = &self.turns {
            self.outcome.turns = turns.counts;
        }
        if let Some(serving) = &mut self.serving {
            self.outcome.serving = Some(serving.finish(&mut self.stats.borrow_mut().hist.serving));
        }
    }

    /// When packet `seq` is due: the gate for packet 0, then packet 0's actual send plus `seq`
    /// packet intervals (a late packet does not move later deadlines).
    pub fn due_s(&self, seq: u32, gate_s: f64) -> f64 {
        self.origin_s.unwrap_or(gate_s) + f64::from(seq) * self.settings.packet_s()
    }

    /// Builds the frame of packet `seq` into `frame` (the session's reused frame), whose send
    /// starts at `start_s` for a session whose gate opened at `gate_s`, and says when it was due
    /// (packet 0's send plus `seq` packets) and where the frame holds its audio. Packet 0's
    /// lateness after the gate is the session's start lateness.
    pub fn packet(
        &mut self,
        seq: u32,
        start_s: f64,
        gate_s: f64,
        frame: &mut Outgoing,
    ) -> (f64, Option<AudioSpan>) {
        if self.origin_s.is_none() {
            self.origin_s = Some(start_s);
            if let Some(serving) = &mut self.serving {
                serving.started(gate_s);
            }
            let lateness_s = (start_s - gate_s).max(0.0);
            self.stats
                .borrow_mut()
                .hist
                .start_lateness
                .record_s(lateness_s);
            if let Some(r) = &mut self.transcripts {
                r.audio_started(start_s);
            }
        }
        let origin_s = self.origin_s.unwrap_or(start_s);
        // Unpaced, a packet is due when it is sent: there is no schedule to judge.
        let scheduled_s = if self.unpaced() {
            start_s
        } else {
            origin_s + f64::from(seq) * self.settings.packet_s()
        };
        let audio = self.audio.packet(seq);
        let t_start_ms = u64::from(seq) * u64::from(self.settings.packet_ms);
        let audio = self
            .protocol
            .packet(frame, self.ids, seq, t_start_ms, audio);
        (scheduled_s, audio)
    }

    /// Packet `seq` was sent: its send started at `start_s` and returned at `completed_s`.
    pub fn sent(&mut self, seq: u32, scheduled_s: f64, start_s: f64, completed_s: f64) {
        let deviation_us = pacing::deviation_us(start_s, scheduled_s);
        let class = self.thresholds.classify(deviation_us);
        // A packet already counted late while it waited to be sent is not counted twice.
        let late_counted = seq < self.counted_late_below;
        self.counted_late_below = self.counted_late_below.max(seq + 1);
        self.send_ring[seq as usize % SEND_RING] = (seq, start_s, completed_s);
        self.last_seq = Some(seq);
        if let Some(turns) = &mut self.turns {
            turns.input_sent(start_s);
        }
        let o = &mut self.outcome;
        o.counts.sent(deviation_us, &self.thresholds, late_counted);
        o.first_send_s.get_or_insert(start_s);
        o.last_send_s = Some(start_s);
        let mut stats = self.stats.borrow_mut();
        if let Some(serving) = &mut self.serving {
            serving.sent(seq, start_s, &mut stats.hist.serving);
        }
        stats
            .counts
            .sent(deviation_us, &self.thresholds, late_counted);
        stats.hist.deviation.record_us(deviation_us as i64);
        stats.hist.websocket_send.record_s(completed_s - start_s);
        stats.hist.append_span.record_s(completed_s - scheduled_s);
        if let Some(cell) = stats.heat.get_mut(self.ids.session as usize) {
            let heat = u32::try_from(deviation_us).unwrap_or(u32::MAX - 1) + 1;
            *cell = (*cell).max(heat);
            stats.heat_due_s = Some(stats.heat_due_s.map_or(scheduled_s, |d| d.max(scheduled_s)));
        }
        if class == PacketClass::Late && !late_counted {
            self.late_window(&mut stats, scheduled_s, start_s);
        }
    }

    /// Counts as late every packet from `next_seq` on that is still unsent one late threshold
    /// after its due time: a packet is late when it is due, not when (or if) it is sent, so a
    /// server that stops reading cannot hide late packets behind a send that never returns.
    /// Returns when the next unsent packet becomes late, if it is due at all.
    pub fn count_overdue(&mut self, next_seq: u32, gate_s: f64, now_s: f64) -> Option<f64> {
        if self.unpaced() {
            return None;
        }
        let threshold_s = self.thresholds.late_us as f64 / 1e6;
        let packets = self.settings.packets_per_session;
        let mut seq = next_seq.max(self.counted_late_below);
        while seq < packets {
            let due_s = self.due_s(seq, gate_s);
            if now_s <= due_s + threshold_s {
                return Some(due_s + threshold_s);
            }
            self.outcome.counts.overdue(&self.thresholds);
            let mut stats = self.stats.borrow_mut();
            stats.counts.overdue(&self.thresholds);
            self.late_window(&mut stats, due_s, now_s);
            drop(stats);
            seq += 1;
            self.counted_late_below = seq;
        }
        None
    }

    /// The session stopped streaming at `next_seq` through a failure: the packets it never
    /// sent are counted.
    pub fn abandon(&mut self, next_seq: u32) {
        self.count_unsent(self.settings.packets_per_session.saturating_sub(next_seq));
    }

    /// The run was stopped while the send of a packet was blocked: that packet never left,
    /// and the session stopped early; the packets after it were not due to be sent any more
    /// (as in a stop between two sends).
    pub fn stopped_in_send(&mut self) {
        self.stop_early();
        self.count_unsent(1);
    }

    /// The run stopped the session before its input's end: its input ends here.
    pub fn stop_early(&mut self) {
        self.outcome.stopped_early = true;
        if let Some(serving) = &mut self.serving {
            serving.stopped();
        }
    }

    fn count_unsent(&mut self, packets: u32) {
        let unsent = u64::from(packets);
        self.outcome.counts.unsent_packets += unsent;
        self.stats.borrow_mut().counts.unsent_packets += unsent;
    }

    /// A packet just counted late, due at `due_s` and sent (or counted) at `at_s`: its window
    /// for the attribution, and the session's first late packet counts the session.
    fn late_window(&self, stats: &mut WorkerStats, due_s: f64, at_s: f64) {
        stats.sessions_with_late_packets += u32::from(self.outcome.counts.late_packets == 1);
        if stats.late_windows.len() < MAX_WINDOWS {
            stats.late_windows.push([due_s, at_s]);
            stats.late_sessions.push(self.outcome.index);
        }
    }

    /// Takes one item of the WebSocket stream, received at `now_s`.
    pub fn on_frame(&mut self, frame: Incoming<'_>, now_s: f64) -> Heard {
        if matches!(frame, Incoming::Text(_) | Incoming::Binary(_)) {
            self.outcome.server_events += 1;
        }
        match frame {
            Incoming::Text(text) => match self.protocol.classify(text) {
                Ok(Received {
                    meaning,
                    payload,
                    event,
                    item,
                }) => {
                    if let Some(r) = &mut self.transcripts {
                        let counted = r.message(now_s, event.as_deref(), &meaning);
                        self.tally(counted);
                    }
                    if meaning == Meaning::AudioDelta && self.serving.is_some() {
                        self.serving_delta(text, now_s);
                    }
                    // Terms the client cannot use: traced as the event and an error line (the
                    // client's, not counted as the server's protocol error), and the set-up ends.
                    if let Meaning::Unusable(why) = meaning {
                        return Heard {
                            payload: Some(payload),
                            flow: Flow::End(format!("set-up failed: {why}")),
                            error: Some(why),
                        };
                    }
                    if let Meaning::Accepted { seq } = meaning {
                        if let Some(why) = self.never_sent(seq) {
                            return self.protocol_error(why, Some(payload));
                        }
                    }
                    if let Some(why) = self.closed_unasked(&meaning) {
                        return self.protocol_error(why, Some(payload));
                    }
                    // An event that names its input item: the item's turn is the one it is
                    // about (a VAD's end of speech and a commit name the turn's item; an answer
                    // goes to that turn).
                    let stopped = matches!(meaning, Meaning::SpeechStopped { .. });
                    if let Some(item) = item.filter(|_| !stopped) {
                        if meaning == Meaning::Milestone(Milestone::Committed) {
                            self.on_turns(|t| t.committed_item(item));
                        } else if self.on_turns(|t| t.item_first(item)) == Some(false) {
                            return Heard {
                                payload: Some(payload),
                                error: None,
                                flow: self.of_no_turn(meaning, now_s),
                            };
                        }
                    }
                    let flow = self.on_meaning(meaning, now_s);
                    if let Some(item) = item.filter(|_| stopped) {
                        self.on_turns(|t| t.vad_item(item));
                    }
                    Heard {
                        payload: Some(payload),
                        error: None,
                        flow,
                    }
                }
                Err(why) => {
                    if let Some(r) = &mut self.transcripts {
                        let counted = r.message(now_s, None, &Meaning::Other);
                        self.tally(counted);
                    }
                    let prefix: String = text.chars().take(80).collect();
                    self.protocol_error(format!("{why}: {prefix:?}"), Some(Payload::Text))
                }
            },
            Incoming::Binary(bytes) => {
                if let Some(r) = &mut self.transcripts {
                    let counted = r.message(now_s, None, &Meaning::Other);
                    self.tally(counted);
                }
                match self.protocol.classify_binary(bytes) {
                    // Traced as its length (`{"_binary_bytes":n}`).
                    Ok(meaning) => Heard {
                        payload: Some(Payload::Json { audio_key: None }),
                        error: None,
                        flow: self.on_meaning(meaning, now_s),
                    },
                    Err(why) => self.protocol_error(why, None),
                }
            }
            // The WebSocket failed the connection: nothing more can come.
            Incoming::InvalidUtf8(what) => {
                let why = format!("the server sent {what}: the client closed the connection (code 1007, RFC 6455 §8.1)");
                let mut heard = self.protocol_error(why.clone(), None);
                heard.flow = Flow::End(why);
                heard
            }
            Incoming::TooLarge(why) => {
                let mut heard = self.protocol_error(why.clone(), None);
                heard.flow = Flow::End(why);
                heard
            }
            Incoming::Close(frame) => {
                if let Some(r) = &mut self.transcripts {
                    r.closed(transcripts::close_detail(frame));
                }
                Heard {
                    payload: None,
                    error: None,
                    flow: Flow::End(format!(
                        "the server closed the connection mid-session{}",
                        frame
                            .map(|(code, reason)| format!(" (code {code}, {reason:?})"))
                            .unwrap_or_default()
                    )),
                }
            }
        }
    }

    /// A frame that does not fit the protocol: counted and traced; while the session is being
    /// set up it ends the set-up at once with that reason (waiting on would only hide it).
    fn protocol_error(&mut self, why: String, payload: Option<Payload>) -> Heard {
        self.outcome.protocol_errors += 1;
        self.stats.borrow_mut().protocol_errors += 1;
        let flow = if self.phase == Phase::SettingUp {
            Flow::End(format!("set-up failed: {why}"))
        } else {
            Flow::Continue
        };
        Heard {
            payload,
            error: Some(why),
            flow,
        }
    }

    /// Until when an ending that waits only for turns a finished response left behind waits
    /// for the server to answer them (then [`Machine::grace_over`]).
    pub fn grace_deadline_s(&self) -> Option<f64> {
        let step = self.current.as_ref().filter(|s| s.send.is_none())?;
        match step.until {
            Some(Milestone::Idle) => self.turns.as_ref()?.grace_until_s(),
            // The client's last response.create waits too: one the server creates for a turn
            // left behind would have it refused.
            Some(Milestone::Quiet) => self.turns.as_ref()?.behind_grace_until_s(),
            _ => None,
        }
    }

    /// No response came for the turns left behind within the grace: they are `unanswered`,
    /// and the ending is idle.
    pub fn grace_over(&mut self) -> Flow {
        if self.grace_deadline_s().is_none() {
            return Flow::Continue;
        }
        self.on_turns(Turns::settle);
        self.arrived(None)
    }

    /// `reached` arrived: the awaited milestone, or (with no turn left open) idle.
    fn arrived(&mut self, reached: Option<Milestone>) -> Flow {
        let Some(step) = self.current.as_ref().filter(|s| s.send.is_none()) else {
            return Flow::Continue;
        };
        let idle =
            step.until == Some(Milestone::Idle) && self.turns.as_ref().is_none_or(Turns::idle);
        let quiet =
            step.until == Some(Milestone::Quiet) && self.turns.as_ref().is_none_or(Turns::quiet);
        if (reached.is_some() && step.until == reached) || idle || quiet {
            self.current = None;
            return Flow::Reached;
        }
        Flow::Continue
    }

    /// What the server said, as the protocol classified it, at `now_s`.
    fn on_meaning(&mut self, meaning: Meaning<'_>, now_s: f64) -> Flow {
        match meaning {
            Meaning::Milestone(reached) => {
                // Fun-ASR answers STOP with the final result, then `stopped`: a `stopped`
                // without it leaves the session's recognition unfinished, and the run without
                // its final-after-STOP figure.
                let unfinished = self.phase == Phase::Finishing
                    && reached == Milestone::Closed
                    && self.transcripts.is_some()
                    && !self.final_while_ending;
                if unfinished {
                    return Flow::End(
                        "the server answered STOP with stopped and no final result (is_final: true) before it: Fun-ASR sends the final result of the audio first".to_string(),
                    );
                }
                if reached == Milestone::Committed && self.phase == Phase::Finishing {
                    self.committed_after_input.1 |= self.committed_after_input.0;
                }
                return self.arrived(Some(reached));
            }
            Meaning::Accepted { seq } => {
                if let Some(start_s) = self.sent_at(seq) {
                    let mut stats = self.stats.borrow_mut();
                    stats.hist.accepted.record_s(now_s - start_s);
                    stats.reply(ReplyKind::Accepted, start_s, now_s);
                }
            }
            Meaning::AudioDelta => self.on_audio_delta(now_s),
            Meaning::Granted {
                native_unit_ms,
                output_rate,
            } => {
                if let Some(serving) = &mut self.serving {
                    serving.granted(native_unit_ms, output_rate);
                }
                return self.arrived(Some(Milestone::Ready));
            }
            Meaning::ResponseCreated => {
                self.on_turns(|t| t.response_created());
                if let Some(serving) = &mut self.serving {
                    serving.response_created(now_s, &mut self.stats.borrow_mut().hist.serving);
                }
            }
            Meaning::ResponseDone { completed } => {
                if let Some(serving) = &mut self.serving {
                    serving.response_done(completed);
                }
            }
            Meaning::UnitDone {
                index,
                input_end_ms,
            } => {
                let mut stats = self.stats.borrow_mut();
                // From the completed send of the packet that completes the unit, as
                // sglang-omni's older serving metrics take their `unit_lag`.
                if let Some((_, completed_s)) =
                    input_end_ms.and_then(|ms| self.send_of_audio_ms(ms))
                {
                    stats.hist.unit_lag.record_s(now_s - completed_s);
                }
                // Against the unit's scheduled end, as their newer ones do.
                if let (Some(serving), Some(index)) = (&mut self.serving, index) {
                    serving.unit_done(index, now_s, &mut stats.hist.serving);
                }
            }
            Meaning::Error {
                fatal,
                code,
                message,
                answers,
            } => return self.on_error(fatal, &code, &message, answers.as_deref()),
            Meaning::TextDelta => {
                self.delta_gap(now_s);
                let sample = self.on_turns(|t| t.text_delta(now_s)).flatten();
                self.record(sample, now_s);
            }
            Meaning::InputText { done } => {
                self.on_turns(|t| t.input_text(now_s, done));
            }
            Meaning::SpeechStarted { .. } => {
                self.on_turns(|t| t.speech_started());
            }
            Meaning::SpeechStopped { audio_ms } => {
                self.committed_after_input.0 |= self.phase == Phase::Finishing;
                let anchor_s = audio_ms.and_then(|ms| self.send_of_audio_ms(ms).map(|(s, _)| s));
                let sample = self
                    .on_turns(|t| t.speech_stopped(now_s, anchor_s))
                    .flatten();
                self.record(sample, now_s);
            }
            Meaning::DoneWithText => {
                let sample = self.on_turns(|t| t.text_in_done(now_s)).flatten();
                self.record(sample, now_s);
                return self.on_meaning(
                    Meaning::TurnDone {
                        completed: true,
                        failure: None,
                    },
                    now_s,
                );
            }
            Meaning::TurnDone { completed, failure } => {
                if let Some((code, message)) = failure {
                    let (code, message) = printable_error(&code, &message);
                    self.count_error(&code, &message);
                }
                self.last_delta_s = None;
                let sample = self.on_turns(|t| t.done(now_s, completed)).flatten();
                self.record(sample, now_s);
                if let Some(sample) = self.on_turns(Turns::take_input_text).flatten() {
                    self.record_turn(sample);
                }
                return self.arrived(Some(Milestone::Answered));
            }
            Meaning::Transcript {
                is_final,
                duration_ms,
                stopped,
                ..
            } => {
                self.on_transcript(is_final, duration_ms, now_s);
                // A `stopped` that carries sentences: the result, then the end it says.
                if stopped {
                    return self.on_meaning(Meaning::Milestone(Milestone::Closed), now_s);
                }
            }
            Meaning::Progress => self.delta_gap(now_s),
            Meaning::Other => {}
            // Handled in `on_frame`, which also traces it.
            Meaning::Unusable(why) => return Flow::End(format!("set-up failed: {why}")),
        }
        Flow::Continue
    }

    /// An answer event about an item no turn is (one answered already, or none the client
    /// ended): counted, its error too, and timed for no turn.
    fn of_no_turn(&mut self, meaning: Meaning<'_>, now_s: f64) -> Flow {
        let done = match meaning {
            Meaning::TurnDone { failure, .. } => {
                if let Some((code, message)) = failure {
                    let (code, message) = printable_error(&code, &message);
                    self.count_error(&code, &message);
                }
                true
            }
            Meaning::DoneWithText => true,
            Meaning::TextDelta => {
                self.delta_gap(now_s);
                false
            }
            Meaning::Progress => {
                self.delta_gap(now_s);
                return Flow::Continue;
            }
            _ => return Flow::Continue,
        };
        self.on_turns(|t| t.unmatched_item(done));
        Flow::Continue
    }

    /// A delta of audio: its gap, its turn's figures, and the session's first audio.
    fn on_audio_delta(&mut self, now_s: f64) {
        self.delta_gap(now_s);
        let sample = self.on_turns(|t| t.audio_delta(now_s)).flatten();
        self.record(sample, now_s);
        if let (false, Some(origin_s)) = (self.first_audio_seen, self.origin_s) {
            self.first_audio_seen = true;
            self.stats
                .borrow_mut()
                .hist
                .first_audio
                .record_s(now_s - origin_s);
        }
    }

    /// A server error (an `error` event, a failed answer): counted by its code, both as
    /// [`printable_error`] made them.
    fn count_error(&mut self, code: &str, message: &str) {
        self.stats.borrow_mut().error_events += 1;
        *self
            .outcome
            .error_codes
            .entry(code.to_string())
            .or_default() += 1;
        let error = format!("{code}: {message}");
        if self.outcome.foreign_server_error.is_none()
            && self.settings.protocol.speaks_instead(&error).is_some()
        {
            self.outcome.foreign_server_error = Some(error.clone());
        }
        self.outcome.last_server_error = Some(error);
    }

    /// An error event: counted; the session ends when it is fatal, or when it refuses the
    /// set-up command the session waits on (no answer to that will come: waiting out
    /// `--recv-timeout` would only hide the refusal).
    fn on_error(&mut self, fatal: bool, code: &str, message: &str, answers: Option<&str>) -> Flow {
        if let Some(flow) = self.end_of_input_race(code, answers) {
            return flow;
        }
        let (code, message) = printable_error(code, message);
        self.count_error(&code, &message);
        // What to do about it, where the code says (a model the server does not serve).
        let advice = crate::protocol::error_advice(&code)
            .map(|a| format!("; {a}"))
            .unwrap_or_default();
        if fatal {
            return Flow::End(format!(
                "the server ended the session with error {code}: {message}{advice}"
            ));
        }
        if let Some(tag) = answers.and_then(|id| self.protocol.refuses_turn(self.ids, id)) {
            self.on_turns(|t| t.refused(tag));
            // Nothing more may be owed: an ending step waiting for idle is over.
            return self.arrived(None);
        }
        if let Some(seq) = answers
            .filter(|_| self.phase == Phase::Streaming)
            .and_then(|id| self.protocol.refused_packet_ends_input(self.ids, id))
            .filter(|&seq| seq < self.settings.packets_per_session)
        {
            self.refused_open = true;
            return Flow::End(format!(
                "the server refused packet {seq} with error {code}: {message}; the session stopped streaming there (the server would refuse every later packet as out of order)"
            ));
        }
        let refused = answers.is_some() && answers == self.step_event_id.as_deref();
        // The step waiting for the answer to the refused command, if one is.
        let awaiting = self
            .current
            .as_ref()
            .filter(|s| s.until.is_some())
            .map(|s| s.awaiting);
        let flow = match (self.phase, refused, awaiting) {
            (Phase::SettingUp, true, awaiting) => Flow::End(format!(
                "the server refused the session's set-up (no {} will come) with error {code}: {message}{advice}",
                awaiting.unwrap_or("the set-up")
            )),
            // An ending command refused (a final commit of under 100 ms of audio): its answer
            // will not come either, so the session ends now, not after --recv-timeout.
            (Phase::Finishing, true, Some(awaited)) => Flow::End(format!(
                "the server refused the session's ending (no {awaited} will come) with error {code}: {message}"
            )),
            _ => Flow::Continue,
        };
        // A refused close is not asked for again.
        let closing = self
            .current
            .as_ref()
            .is_some_and(|s| s.until == Some(Milestone::Closed));
        self.refused_open = matches!(flow, Flow::End(_)) && !closing;
        flow
    }

    /// The end-of-input race with the server's VAD: speech was open when the input ended, so
    /// the client committed its last turn; but the VAD had stopped the speech and committed
    /// the input itself after the last packet, so the client's commit finds an empty buffer
    /// and is refused (OpenAI's `input_audio_buffer_commit_empty`), and so is the
    /// `response.create` that asks for that turn's answer (the VAD turn's is under way). The
    /// server did as it should: no server error, and no turn of the client's (its audio is the
    /// VAD turn's, which is answered and timed). Any other refusal goes on as one.
    fn end_of_input_race(&mut self, code: &str, answers: Option<&str>) -> Option<Flow> {
        let answers = answers?;
        let final_turn = crate::protocol::FINAL_TURN;
        let by_vad = self.settings.client.turn_detection == Some(TurnDetection::ServerVad);
        let raced = by_vad
            && self.committed_after_input.1
            && Some(answers) == self.final_commit_id.as_deref()
            && self.protocol.refuses_an_empty_commit(code);
        if raced {
            self.final_withdrawn = true;
            self.on_turns(|t| t.withdraw(final_turn));
            // Its answer is not to be asked for: the request would start a response of its own
            // at a server gone idle, which the client would then close on.
            let asks =
                |s: &Step| s.turn == Some(TurnMark::Asks) || s.until == Some(Milestone::Quiet);
            self.steps.retain(|s| !asks(s));
            if self.current.as_ref().is_some_and(asks) {
                self.current = None;
            }
            return Some(self.arrived(None));
        }
        let asks_for_it = self.protocol.refuses_turn(self.ids, answers) == Some(final_turn);
        (self.final_withdrawn && asks_for_it).then(|| self.arrived(None))
    }

    /// A transcription result (Fun-ASR): a partial's lateness behind its audio, and the gap
    /// between results while streaming.
    fn on_transcript(&mut self, is_final: bool, duration_ms: Option<f64>, now_s: f64) {
        self.final_while_ending |= is_final && self.phase == Phase::Finishing;
        // A partial result is late by how long after its audio's end it came; but a
        // server that stalls reads the backlog at once and reports it as received, so
        // the stall shows in the gap between results.
        if let (false, Some(duration_ms), Some(origin_s)) = (is_final, duration_ms, self.origin_s) {
            let audio_end_s = origin_s + duration_ms / 1000.0;
            self.stats
                .borrow_mut()
                .reply(ReplyKind::Response, audio_end_s, now_s);
        }
        if self.phase != Phase::Finishing && self.origin_s.is_some() {
            self.reply_gap(now_s);
        }
    }

    /// Why an `accepted` of packet `seq` answers no packet: the client has not sent it. The
    /// packet after the last one recorded sent may be on the wire already (its send's end is
    /// recorded when the send call returns), so only a later one is a server's error.
    fn never_sent(&self, seq: u64) -> Option<String> {
        let next = self.last_seq.map_or(0, |last| u64::from(last) + 1);
        (seq > next).then(|| match self.last_seq {
            Some(last) => format!(
                "the server accepted packet {seq}, which the client has not sent (it has sent packets 0 to {last}): the server acknowledged audio it never got"
            ),
            None => format!(
                "the server accepted packet {seq} before the client sent any: the server acknowledged audio it never got"
            ),
        })
    }

    /// Why a `session.closed` (the native protocol's) is one the client did not ask for: it
    /// came while the client was streaming, before its `session.close` (a server that closes
    /// the session itself ends the connection with it, and the session fails there; one that
    /// goes on serving after it breaks the protocol, which the run would not see). Fun-ASR's
    /// `stopped`, the same milestone, is a result's end the client may meet early.
    fn closed_unasked(&self, meaning: &Meaning<'_>) -> Option<String> {
        let unasked = *meaning == Meaning::Milestone(Milestone::Closed)
            && self.phase == Phase::Streaming
            && !self.refused_open
            && !self.protocol.records_transcripts();
        unasked.then(|| {
            "the server sent session.closed while the client was still streaming (it had not sent session.close)".to_string()
        })
    }

    fn sent_at(&self, seq: u64) -> Option<f64> {
        self.send_of(seq).map(|(start_s, _)| start_s)
    }

    /// Packet `seq`'s send start and completion: as measured while the ring remembers it (the
    /// last [`SEND_RING`] packets), else, for a packet sent before those, its scheduled send.
    /// A server more than 20 s behind answers packets the ring no longer holds, and dropping
    /// those samples made its lag read as low as the ones it answered in time; the schedule is
    /// off by the packet's send deviation only (milliseconds, against a lag of 20 s or more).
    /// Unpaced, there is no schedule: such a packet has no sample.
    fn send_of(&self, seq: u64) -> Option<(f64, f64)> {
        let (ring_seq, start_s, completed_s) = self.send_ring[seq as usize % SEND_RING];
        if u64::from(ring_seq) == seq {
            return Some((start_s, completed_s));
        }
        let sent_before_the_ring =
            seq.saturating_add(SEND_RING as u64) <= u64::from(self.last_seq?) && !self.unpaced();
        let scheduled_s = self.origin_s? + seq as f64 * self.settings.packet_s();
        sent_before_the_ring.then_some((scheduled_s, scheduled_s))
    }
}

/// The `event_id` of a JSON command, if it has one.
fn event_id_of(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Command {
        event_id: Option<String>,
    }
    serde_json::from_str::<Command>(text).ok()?.event_id
}

/// A machine for the tests: session `session` of worker 0 of a `run` with `argv` (after
/// `duplexbench-tui run`), speaking the protocol `protocol` makes of its settings, with the
/// worker's statistics (`m.stats`) to itself.
#[cfg(test)]
fn test_machine(
    argv: &[&str],
    session: u32,
    protocol: impl FnOnce(&Settings) -> Rc<dyn ClientProtocol>,
) -> Machine {
    use crate::cli::{Cli, Command};
    use clap::Parser;
    let argv = ["duplexbench-tui", "run"].iter().chain(argv);
    let Some(Command::Run(run)) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!()
    };
    let settings = Rc::new(
        crate::options::validate(&run, String::new(), false)
            .unwrap()
            .settings,
    );
    let audio = Rc::new(
        Audio::load(
            &settings.audio,
            settings.client.input_sample_rate,
            settings.packet_ms,
            settings.packets_per_session,
            settings.input_bytes(),
        )
        .unwrap(),
    );
    let stats = Rc::new(RefCell::new(WorkerStats::new(
        settings.sessions_per_process,
    )));
    let ids = EventIds {
        shard: 0,
        worker: 0,
        session,
    };
    Machine::new(protocol(&settings), ids, settings, audio, stats)
}

/// A server error's code and message as the client repeats them: escaped and bounded
/// ([`crate::protocol::server_text`]), once, wherever they are counted or named.
fn printable_error<'a>(
    code: &'a str,
    message: &'a str,
) -> (std::borrow::Cow<'a, str>, std::borrow::Cow<'a, str>) {
    use crate::protocol::{server_text, ERROR_CODE_CHARS, ERROR_MESSAGE_CHARS};
    (
        server_text(code, ERROR_CODE_CHARS),
        server_text(message, ERROR_MESSAGE_CHARS),
    )
}

#[cfg(test)]
mod vllm_tests;

#[cfg(test)]
mod funasr_tests;
#[cfg(test)]
mod openai_tests;
#[cfg(test)]
mod tests;
