//! The turns of a session, for the dialects that have them (openai, vllm): when each turn's
//! input ended on the client's audio clock (the send start of the packet that completes it, as
//! the native unit lag is anchored), and how long the server then took to its first transcript
//! delta, its first audio delta and its `done`. Without I/O or a clock of its own: every event
//! comes with its time, so it is tested with made-up times.
//!
//! A turn's input ends when the client commits (`--commit-every`, the end of input) or when the
//! server's VAD says speech stopped. Deltas belong to the oldest turn not yet answered, or,
//! while none is waiting, to the turn whose input is still arriving (a streaming transcription
//! answers before its input ends: those latencies are counted from the turn's first packet).
//!
//! A server that names the input item of each answer (OpenAI's transcription sessions: the
//! `item_id` of each committed item and of its transcript's events) has its answers go to that
//! item's turn, whatever order it answers items in ([`Turns::committed_item`],
//! [`Turns::item_first`]).
//!
//! A `response.created` says which turn the answer is for. The client's own `response.create`s
//! are answered in the order sent (one response at a time; the API refuses a create while one
//! is in progress), so a turn the client ended takes the next response. The server's VAD turns
//! get their response from the server, which builds it from the conversation so far and, with
//! `interrupt_response: false`, "may fail to create a response if the model is already
//! responding" (openai-python's `create_response`): no event names the input item a response
//! answers, so a response created while several VAD turns wait answers the newest of them, and
//! the older ones, which got no response of their own, are `unanswered` and not timed. So are
//! VAD turns that ended while a response was under way and are still waiting when the session
//! has nothing else to wait for: they hold its end [`BEHIND_GRACE_S`] at most.

use crate::contract::worker::TurnCounts;
use std::collections::VecDeque;

/// How long a session whose only waiting turns were left behind by a finished response waits,
/// at its end, for the server to create one for them (a server that queues a turn's response
/// creates it as the previous one is done), in seconds.
pub const BEHIND_GRACE_S: f64 = 1.0;

/// A latency the turns produced, for the worker's histograms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sample {
    /// From the end of the turn's input to its first transcript or text delta, and from the
    /// turn's first packet (when known) to it: a turn's time to first text is timed from its
    /// start whether the text came before its input ended or after (vLLM's headline: a level
    /// whose first texts came after the input's end left them out, and its p99 read low).
    FirstTextAfterEnd(f64, Option<f64>),
    /// From the turn's first packet to its first text delta, which came before its input ended.
    FirstTextAfterStart(f64),
    FirstAudioAfterEnd(f64),
    FirstAudioAfterStart(f64),
    /// From the end of the turn's input to its `done`.
    DoneAfterEnd(f64),
    /// From the send of the packet holding the audio where the server's VAD says speech
    /// stopped to its `speech_stopped`.
    SpeechStopped(f64),
}

/// What a response answers, as known when it was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// A waiting turn (the first one marked `responded`).
    Turn,
    /// No turn waited, and input was arriving: the input it answers has not ended (`early`).
    Input,
    /// No turn waited and no input arrived: nothing the client sent (a greeting of the
    /// server's own), `unmatched`; its deltas time no turn.
    Nothing,
}

#[derive(Debug, Default, Clone, Copy)]
struct Turn {
    /// The packet after which the client ended it ([`crate::protocol::FINAL_TURN`] for the
    /// input's end); `None` for a turn the server's VAD ended.
    tag: Option<u32>,
    /// The input item the server committed it as, when the server names items.
    item: Option<u64>,
    start_s: Option<f64>,
    end_s: Option<f64>,
    first_text_s: Option<f64>,
    last_text_s: Option<f64>,
    text_deltas: u64,
    first_audio_s: Option<f64>,
    /// The transcript of the turn's input ([`Turns::input_text`]): its first and last events
    /// with text, their count, and whether it was completed.
    first_input_text_s: Option<f64>,
    last_input_text_s: Option<f64>,
    input_text_deltas: u64,
    input_text_done: bool,
    /// The client asked for this turn's answer (its `response.create` went out): only such a
    /// turn takes a response as the client's own. A turn the client ended and has not asked
    /// for yet (OpenAI's final turn, asked for once no response is in progress) takes none.
    asked: bool,
    /// A `response.created` was taken as this turn's answer.
    responded: bool,
    /// A response was under way while the client held this turn's `response.create` back.
    held: bool,
    /// A VAD turn still waiting, without a response, when the response under way at its end
    /// finished: the server may create none for it.
    behind: bool,
}

/// The turns of one session.
#[derive(Debug, Default)]
pub struct Turns {
    /// Turns whose input ended, not yet answered, oldest first.
    waiting: VecDeque<Turn>,
    /// The turn whose input is arriving.
    current: Turn,
    /// The server's VAD heard speech start and not yet stop.
    pub speech_open: bool,
    /// The server says when it creates a response (`response.created`): without that, a VAD
    /// turn left behind may still be answered next, and is waited for.
    announces_responses: bool,
    /// Responses under way (created, not yet done), each with what it answers, oldest first.
    /// A server may create one while another is in progress, queued behind it (as the built-in
    /// mock does), and streams them one after another: the deltas are the oldest one's.
    responses: VecDeque<Answer>,
    /// When the last response that left turns behind was done.
    behind_since_s: Option<f64>,
    /// The server sent text of an answer: the input's transcript is then never the text.
    answer_text_seen: bool,
    /// The first text of the turn [`Turns::done`] answered, when only its input's transcript
    /// had any (see [`Turns::take_input_text`]).
    input_text_sample: Option<Sample>,
    /// The items of the last turns answered, newest last (a few: a server that answers an
    /// item twice does so soon after).
    answered_items: VecDeque<u64>,
    pub counts: TurnCounts,
}

/// How many answered items [`Turns::item_first`] remembers.
const ANSWERED_ITEMS: usize = 16;

impl Turns {
    /// A packet was sent at `start_s`: the current turn's input starts with its first.
    pub fn input_sent(&mut self, start_s: f64) {
        self.current.start_s.get_or_insert(start_s);
    }

    /// The current turn's input ended with the packet sent at `end_s`.
    pub fn ended(&mut self, end_s: f64) {
        self.ended_as(end_s, None, false);
    }

    /// The current turn's input ended at `end_s`, the client ending it as turn `tag` and,
    /// if `asked`, asking for its answer with the same frames.
    pub fn ended_as(&mut self, end_s: f64, tag: Option<u32>, asked: bool) {
        let mut turn = std::mem::take(&mut self.current);
        turn.end_s = Some(end_s);
        turn.tag = tag;
        turn.asked = asked && tag.is_some();
        // Not quiet: a response is under way, or the grace for a turn left behind runs; either
        // way the client waits before it asks.
        turn.held = tag.is_some() && !turn.asked && !self.quiet();
        self.waiting.push_back(turn);
        self.counts.ended += 1;
    }

    /// The client asked at `now_s` for the answer to turn `tag`, which it ended before. When
    /// it held the request back while a response was under way (the API refuses a second),
    /// the turn's latencies are from this request: the wait was the client's, not the server's
    /// (timed from the commit, it read as a server that held its replies back).
    pub fn asked(&mut self, tag: u32, now_s: f64) {
        if let Some(turn) = self.waiting.iter_mut().find(|t| t.tag == Some(tag)) {
            turn.asked = true;
            if turn.held {
                turn.end_s = turn.end_s.map(|end_s| end_s.max(now_s));
            }
        }
    }

    /// Whether a turn waits for an answer that will come: not counting, while no response is
    /// under way, VAD turns left behind by the last one.
    pub fn open(&self) -> bool {
        let may_wait_for_none = self.announces_responses && self.responses.is_empty();
        self.waiting
            .iter()
            .any(|t| !(t.behind && may_wait_for_none))
    }

    /// No response is under way (as far as the server said: `response.created` not yet done),
    /// and none may be about to be for a turn left behind (its grace not over).
    pub fn quiet(&self) -> bool {
        self.responses.is_empty() && self.behind_grace_until_s().is_none()
    }

    /// Until when a response the server may still create for a turn left behind is waited for
    /// before the client asks for one of its own ([`BEHIND_GRACE_S`] after the response that
    /// left it was done; [`Turns::settle`] ends it).
    pub fn behind_grace_until_s(&self) -> Option<f64> {
        let behind = self.announces_responses && self.waiting.iter().any(|t| t.behind);
        if !behind || !self.responses.is_empty() {
            return None;
        }
        self.behind_since_s.map(|s| s + BEHIND_GRACE_S)
    }

    /// No turn waits at all: the ending has nothing left to wait for.
    pub fn idle(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Until when the ending waits for a response to the turns left behind, when they are all
    /// it would wait for ([`BEHIND_GRACE_S`] after the response that left them was done).
    pub fn grace_until_s(&self) -> Option<f64> {
        if self.open() || self.waiting.is_empty() {
            return None;
        }
        self.behind_since_s.map(|s| s + BEHIND_GRACE_S)
    }

    /// The server created a response. Of the waiting turns without one, it answers the first
    /// the client asked for (its own `response.create`, answered in order), or, when the client
    /// asked for none, the newest VAD turn (the server's own response); the VAD turns before
    /// the one it answers are `unanswered`. A turn the client ended and has not asked for yet
    /// takes none. With no such turn waiting it answers none the client has ended (its `done`
    /// then goes to the input still arriving, or to nothing).
    pub fn response_created(&mut self) {
        self.announces_responses = true;
        for t in self.waiting.iter_mut() {
            t.held |= t.tag.is_some() && !t.asked;
        }
        let open = |t: &Turn| !t.responded;
        let answers = self
            .waiting
            .iter()
            .position(|t| open(t) && t.asked)
            .or_else(|| {
                self.waiting
                    .iter()
                    .rposition(|t| open(t) && t.tag.is_none())
            });
        let Some(answers) = answers else {
            self.responses.push_back(if self.current.start_s.is_some() {
                Answer::Input
            } else {
                Answer::Nothing
            });
            return;
        };
        self.responses.push_back(Answer::Turn);
        self.waiting[answers].responded = true;
        self.waiting[answers].behind = false;
        // The VAD turns before it that got no response of their own never will.
        let mut k = 0;
        let before = self.waiting.len();
        self.waiting.retain(|t| {
            k += 1;
            !(k <= answers && open(t) && t.tag.is_none())
        });
        self.counts.unanswered += (before - self.waiting.len()) as u64;
    }

    /// The server ended an answer before the input it answers ended, and no turn waits.
    pub fn answered_early(&self) -> bool {
        self.counts.early > 0 && !self.open()
    }

    /// The waiting turn the next answer's events go to: the oldest one a `response.created`
    /// was taken for (not always the oldest waiting: a turn the client ended and has not
    /// asked for yet may come before it), or, from a server that never says it created a
    /// response, the oldest; `None` while only a response created with no turn waiting is
    /// under way.
    fn answered_at(&self) -> Option<usize> {
        if self.announces_responses {
            return self.waiting.iter().position(|t| t.responded);
        }
        (!self.waiting.is_empty()).then_some(0)
    }

    /// The turn the answer under way is for: that of the oldest response not yet done; `None`
    /// while that one was created with no turn waiting and no input arriving (a greeting the
    /// server made on its own), which answers nothing the client sent: its deltas time no turn
    /// (they marked the input that began streaming meanwhile, as an answer 40 ms after its
    /// start, or the turn whose response was queued behind it).
    fn answering(&mut self) -> Option<&mut Turn> {
        if self.announces_responses {
            match self.responses.front() {
                Some(Answer::Nothing) => return None,
                Some(Answer::Input) => return Some(&mut self.current),
                Some(Answer::Turn) | None => {}
            }
        }
        match self.answered_at() {
            Some(at) => Some(&mut self.waiting[at]),
            None => Some(&mut self.current),
        }
    }

    pub fn text_delta(&mut self, now_s: f64) -> Option<Sample> {
        self.counts.text_deltas += 1;
        self.answer_text_seen = true;
        let turn = self.answering()?;
        turn.text_deltas += 1;
        turn.last_text_s = Some(now_s);
        if turn.first_text_s.is_some() {
            return None;
        }
        turn.first_text_s = Some(now_s);
        first_text(turn, now_s)
    }

    pub fn audio_delta(&mut self, now_s: f64) -> Option<Sample> {
        self.counts.audio_deltas += 1;
        let turn = self.answering()?;
        if turn.first_audio_s.is_some() {
            return None;
        }
        turn.first_audio_s = Some(now_s);
        match (turn.end_s, turn.start_s) {
            (Some(end_s), _) => Some(Sample::FirstAudioAfterEnd(now_s - end_s)),
            (None, Some(start_s)) => Some(Sample::FirstAudioAfterStart(now_s - start_s)),
            (None, None) => None,
        }
    }

    /// The answer under way is done at `now_s` with its whole text in it: when no delta
    /// brought any, that is its first text, timed as a delta's would be (taken with
    /// [`Turns::take_input_text`] once it is done).
    pub fn text_in_done(&mut self, now_s: f64) -> Option<Sample> {
        self.answer_text_seen = true;
        let turn = self.answering()?;
        if turn.first_text_s.is_some() {
            return None;
        }
        turn.first_text_s = Some(now_s);
        turn.last_text_s = Some(now_s);
        first_text(turn, now_s)
    }

    /// The server sent the transcript of the input at `now_s` (a delta, or the completed one
    /// when `done`). It goes to the oldest waiting turn whose transcript is not complete (the
    /// server transcribes committed input in order), or to none. It times nothing now: it is
    /// not the answer's text and usually comes before it. While the server has sent no text of
    /// its answers in the session, a turn takes it as its text when it is done.
    pub fn input_text(&mut self, now_s: f64, done: bool) {
        // A transcript with no ended turn left to take it (it came after its turn's answer was
        // done) is no later turn's: dropped.
        let Some(turn) = self.waiting.iter_mut().find(|t| !t.input_text_done) else {
            return;
        };
        // A completed transcript after deltas is their end, not more text.
        if !(done && turn.input_text_deltas > 0) {
            turn.input_text_deltas += 1;
            turn.last_input_text_s = Some(now_s);
        }
        turn.first_input_text_s.get_or_insert(now_s);
        turn.input_text_done |= done;
    }

    /// The first text of the turn the last [`Turns::done`] answered, when only its input's
    /// transcript had any (timed from when it came).
    pub fn take_input_text(&mut self) -> Option<Sample> {
        self.input_text_sample.take()
    }

    /// The answer to the oldest waiting turn is done (or, none waiting, to the current one:
    /// a server that answered input the client never saw end, counted `early`). With none waiting and nothing
    /// sent or answered in the current one, it answers nothing the client did: counted apart
    /// (`unmatched`), so that more answers than turns cannot read as a server that answered all.
    pub fn done(&mut self, now_s: f64, completed: bool) -> Option<Sample> {
        // Empty from a server that never says it created a response.
        let answer = self.responses.pop_front();
        let at = match answer {
            Some(Answer::Input | Answer::Nothing) => None,
            Some(Answer::Turn) | None => self.answered_at(),
        };
        let next = at.and_then(|at| self.waiting.remove(at));
        if let Some(item) = next.as_ref().and_then(|t| t.item) {
            if self.answered_items.len() == ANSWERED_ITEMS {
                self.answered_items.pop_front();
            }
            self.answered_items.push_back(item);
        }
        // VAD turns that ended while this response was under way and still have none.
        for t in self.waiting.iter_mut() {
            if t.tag.is_none() && !t.responded && !t.behind {
                t.behind = true;
                self.behind_since_s = Some(now_s);
            }
        }
        // An answer no waiting turn had is one to the input still arriving (`early`), or to
        // nothing the client sent: a response created with no turn waiting is the first if it
        // was created while input arrived; from a server that does not say, it is whatever
        // the current input has.
        let to_input = if self.announces_responses && at.is_none() {
            answer == Some(Answer::Input)
        } else {
            self.current.start_s.is_some()
                || self.current.first_text_s.is_some()
                || self.current.first_audio_s.is_some()
        };
        let turn = match next {
            Some(turn) => turn,
            None if !to_input => {
                // Its deltas, if any, marked the current turn: not that input's.
                self.current.first_text_s = None;
                self.current.last_text_s = None;
                self.current.text_deltas = 0;
                self.current.first_audio_s = None;
                self.counts.unmatched += 1;
                return None;
            }
            None => {
                self.counts.early += 1;
                std::mem::take(&mut self.current)
            }
        };
        self.counts.answered += 1;
        self.counts.failed += u64::from(!completed);
        let mut turn = turn;
        if !self.answer_text_seen && turn.first_input_text_s.is_some() {
            // The server sends no text of its answers: the input's transcript is the text.
            turn.first_text_s = turn.first_input_text_s;
            turn.last_text_s = turn.last_input_text_s;
            turn.text_deltas = turn.input_text_deltas;
            self.counts.text_deltas += turn.input_text_deltas;
            self.input_text_sample = turn.first_input_text_s.and_then(|at_s| {
                // Before its turn ended it is not this turn's transcript.
                match turn.end_s {
                    Some(end_s) if at_s < end_s => None,
                    _ => first_text(&turn, at_s),
                }
            });
        }
        if let (Some(first), Some(last)) = (turn.first_text_s, turn.last_text_s) {
            if turn.text_deltas > 1 && last > first {
                self.counts.text_intervals += turn.text_deltas - 1;
                self.counts.text_span_s += last - first;
            }
        }
        // A response cut short (cancelled by a barge-in, incomplete) is no answer's length.
        turn.end_s
            .filter(|_| completed)
            .map(|end_s| Sample::DoneAfterEnd(now_s - end_s))
    }

    /// The server committed the input item `item`: unless a turn is that item's already (a
    /// VAD turn its `speech_stopped` named), the oldest ended turn without an item is its input
    /// (the server commits turns in the order they end).
    pub fn committed_item(&mut self, item: u64) {
        if self.waiting.iter().any(|t| t.item == Some(item)) {
            return;
        }
        if let Some(turn) = self.waiting.iter_mut().find(|t| t.item.is_none()) {
            turn.item = Some(item);
        }
    }

    /// The server's VAD ended a turn of item `item` (OpenAI names it in `speech_stopped`): the
    /// VAD turn that just ended is that item's.
    pub fn vad_item(&mut self, item: u64) {
        if self.waiting.iter().any(|t| t.item == Some(item)) {
            return;
        }
        if let Some(turn) = self.waiting.iter_mut().rev().find(|t| t.tag.is_none()) {
            turn.item.get_or_insert(item);
        }
    }

    /// The next answer event is about item `item`: its turn goes to the front of the waiting
    /// ones, so that the event is its own. An item no waiting turn has is the oldest one's
    /// whose item is not known (then known); with none waiting, it goes where it would (the
    /// input still arriving: a transcript that streams before its commit). `false`: no turn
    /// is the item's — it was answered already, or every waiting turn is another item's.
    pub fn item_first(&mut self, item: u64) -> bool {
        let at = match self.waiting.iter().position(|t| t.item == Some(item)) {
            Some(at) => at,
            None if self.answered_items.contains(&item) => return false,
            None if self.waiting.is_empty() => return true,
            None => match self.waiting.iter().position(|t| t.item.is_none()) {
                Some(at) => {
                    self.waiting[at].item = Some(item);
                    at
                }
                None => return false,
            },
        };
        if let Some(turn) = (at > 0).then(|| self.waiting.remove(at)).flatten() {
            self.waiting.push_front(turn);
        }
        true
    }

    /// An answer event about an item no turn is (see [`Turns::item_first`]): text of no turn,
    /// or an answer to none (`unmatched`).
    pub fn unmatched_item(&mut self, done: bool) {
        if done {
            self.counts.unmatched += 1;
        } else {
            self.counts.text_deltas += 1;
        }
    }

    /// The server refused to answer turn `tag` (its `response.create` got an error): it waits
    /// for no answer, so the next one goes to the turn it is for, not to this one (which would
    /// time a later turn's answer from this turn's end).
    pub fn refused(&mut self, tag: u32) {
        if self.remove_tagged(tag) {
            self.counts.refused += 1;
        }
    }

    /// Turn `tag` never was one: the server had taken its input into another turn already
    /// (its VAD committed it before the client's commit came, which it then refused as empty).
    /// Not ended, not refused: gone.
    pub fn withdraw(&mut self, tag: u32) {
        if self.remove_tagged(tag) {
            self.counts.ended = self.counts.ended.saturating_sub(1);
        }
    }

    /// Removes turn `tag`, which will get no answer of its own. What was taken as its own
    /// goes to the VAD turn that ended after it and has none: the response created for it (a
    /// response the client took for its own request, created by the server for its VAD's turn
    /// while that request was refused), and the input item committed for it (the VAD's
    /// `committed`, taken for the client's commit that came first).
    fn remove_tagged(&mut self, tag: u32) -> bool {
        let Some(at) = self.waiting.iter().position(|t| t.tag == Some(tag)) else {
            return false;
        };
        let Some(gone) = self.waiting.remove(at) else {
            return false;
        };
        let heir = |t: &&mut Turn| t.tag.is_none();
        if gone.responded {
            if let Some(t) = self
                .waiting
                .iter_mut()
                .rev()
                .find(|t| heir(t) && !t.responded)
            {
                t.responded = true;
                t.behind = false;
            }
        }
        if let Some(item) = gone.item {
            let taken = self.waiting.iter().any(|t| t.item == Some(item));
            if let Some(t) = self
                .waiting
                .iter_mut()
                .find(|t| heir(t) && t.item.is_none())
            {
                t.item = (!taken).then_some(item);
            }
        }
        true
    }

    /// The session is over: turns left behind that no response came for are `unanswered`.
    pub fn settle(&mut self) {
        let before = self.waiting.len();
        let announced = self.announces_responses;
        self.waiting.retain(|t| !(t.behind && announced));
        self.counts.unanswered += (before - self.waiting.len()) as u64;
    }

    pub fn speech_started(&mut self) {
        self.speech_open = true;
        self.counts.speech_started += 1;
    }

    /// The server's VAD says speech stopped; `anchor_s` is the send start of the packet that
    /// holds that moment of the audio (`None`: the server did not say where, or it is not a
    /// packet still remembered). The turn's input ends there.
    pub fn speech_stopped(&mut self, now_s: f64, anchor_s: Option<f64>) -> Option<Sample> {
        self.speech_open = false;
        self.ended(anchor_s.unwrap_or(now_s));
        anchor_s.map(|a| Sample::SpeechStopped(now_s - a))
    }
}

/// The latency of `turn`'s first text, at `at_s`: from its input's end (and its start), or,
/// before its input ended, from its start.
fn first_text(turn: &Turn, at_s: f64) -> Option<Sample> {
    let since_start = turn.start_s.map(|start_s| at_s - start_s);
    match turn.end_s {
        Some(end_s) => Some(Sample::FirstTextAfterEnd(at_s - end_s, since_start)),
        None => since_start.map(Sample::FirstTextAfterStart),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(sample: Option<Sample>, want: Sample) {
        let got = sample.unwrap_or_else(|| panic!("no sample, want {want:?}"));
        let ((Sample::FirstTextAfterEnd(a, _), Sample::FirstTextAfterEnd(b, _))
        | (Sample::FirstTextAfterStart(a), Sample::FirstTextAfterStart(b))
        | (Sample::FirstAudioAfterEnd(a), Sample::FirstAudioAfterEnd(b))
        | (Sample::FirstAudioAfterStart(a), Sample::FirstAudioAfterStart(b))
        | (Sample::DoneAfterEnd(a), Sample::DoneAfterEnd(b))
        | (Sample::SpeechStopped(a), Sample::SpeechStopped(b))) = (got, want)
        else {
            panic!("got {got:?}, want {want:?}")
        };
        assert!((a - b).abs() < 1e-9, "got {got:?}, want {want:?}");
    }

    #[test]
    fn a_committed_turn_is_timed_from_its_last_packet_on_a_fake_clock_issue_12() {
        let mut t = Turns::default();
        t.input_sent(10.0);
        t.input_sent(10.08);
        t.ended(10.08);
        assert!(t.open());
        let first = t.text_delta(10.33);
        close(first, Sample::FirstTextAfterEnd(0.25, None));
        let Some(Sample::FirstTextAfterEnd(_, Some(since_start))) = first else {
            panic!("{first:?}")
        };
        assert!(
            (since_start - 0.33).abs() < 1e-9,
            "and from its first packet"
        );
        assert_eq!(t.text_delta(10.37), None, "only the first is a latency");
        t.text_delta(10.41);
        close(t.audio_delta(10.38), Sample::FirstAudioAfterEnd(0.30));
        close(t.done(11.08, true), Sample::DoneAfterEnd(1.0));
        assert!(!t.open());
        let c = t.counts;
        assert_eq!(
            (c.ended, c.answered, c.failed, c.text_deltas, c.audio_deltas),
            (1, 1, 0, 3, 1)
        );
        // Three deltas over 80 ms: two intervals, 25 per second.
        assert_eq!(c.text_intervals, 2);
        assert!((c.text_span_s - 0.08).abs() < 1e-9);
    }

    #[test]
    fn a_streaming_transcript_before_the_end_is_timed_from_the_first_packet_issue_12() {
        let mut t = Turns::default();
        t.input_sent(5.0);
        close(t.text_delta(5.6), Sample::FirstTextAfterStart(0.6));
        t.input_sent(9.0);
        t.ended(9.0);
        assert_eq!(
            t.text_delta(9.1),
            None,
            "the turn already had its first delta"
        );
        close(t.done(9.5, true), Sample::DoneAfterEnd(0.5));
    }

    #[test]
    fn server_vad_ends_a_turn_where_speech_stopped_issue_12() {
        let mut t = Turns::default();
        t.input_sent(1.0);
        t.speech_started();
        assert!(t.speech_open);
        close(
            t.speech_stopped(3.7, Some(3.12)),
            Sample::SpeechStopped(0.58),
        );
        assert!(!t.speech_open && t.open());
        close(t.audio_delta(3.9), Sample::FirstAudioAfterEnd(0.78));
        assert_eq!(
            t.done(4.5, false),
            None,
            "a response cut short (a barge-in) is no answer's length"
        );
        assert_eq!(t.counts.failed, 1, "a response that did not complete");
    }

    #[test]
    fn an_answer_to_nothing_the_client_sent_is_counted_apart() {
        let mut t = Turns::default();
        assert_eq!(t.done(9.0, true), None, "before any audio");
        t.input_sent(10.0);
        t.ended(10.08);
        close(t.done(10.5, true), Sample::DoneAfterEnd(0.42));
        assert_eq!(t.done(10.6, true), None, "a second done for the same turn");
        // An answer to input the client has not ended yet is still an answer.
        t.input_sent(11.0);
        assert_eq!(t.done(11.2, true), None);
        let c = t.counts;
        assert_eq!((c.ended, c.answered, c.unmatched), (1, 2, 2));
        assert_eq!(c.early, 1, "the answer to input not yet ended");
    }

    #[test]
    fn a_done_before_the_input_ends_is_early_and_leaves_nothing_to_wait_for() {
        // vLLM's transcription ends at the model's token limit while audio still arrives.
        let mut t = Turns::default();
        t.input_sent(1.0);
        close(t.text_delta(1.5), Sample::FirstTextAfterStart(0.5));
        assert!(!t.answered_early());
        assert_eq!(t.done(2.0, true), None, "no end to time it from");
        t.input_sent(2.08);
        assert!(t.answered_early(), "the input's end gets no answer");
        assert_eq!((t.counts.answered, t.counts.early), (1, 1));
        // A turn that then ends and waits is no longer answered.
        t.ended(3.0);
        assert!(!t.answered_early());
    }

    /// A VAD turn: speech from `start_s`, stopped (the server says) at `end_s`.
    fn vad_turn(t: &mut Turns, start_s: f64, end_s: f64) {
        t.input_sent(start_s);
        t.speech_started();
        t.speech_stopped(end_s + 0.5, Some(end_s));
    }

    #[test]
    fn a_vad_turn_that_ends_while_a_response_is_under_way_and_gets_none_holds_nothing_open() {
        // OpenAI with interrupt_response false "may fail to create a response if the model is
        // already responding".
        let mut t = Turns::default();
        vad_turn(&mut t, 0.0, 1.0);
        t.response_created();
        close(t.audio_delta(1.8), Sample::FirstAudioAfterEnd(0.8));
        vad_turn(&mut t, 2.0, 3.0);
        assert!(t.open(), "a response is under way");
        close(t.done(4.0, true), Sample::DoneAfterEnd(3.0));
        assert!(
            !t.open(),
            "nothing announced for the second turn: nothing to wait for"
        );
        t.settle();
        let c = t.counts;
        assert_eq!((c.ended, c.answered, c.unanswered), (2, 1, 1));
    }

    #[test]
    fn a_response_created_while_vad_turns_wait_answers_the_newest_and_is_timed_from_its_end() {
        let mut t = Turns::default();
        vad_turn(&mut t, 0.0, 1.0);
        t.response_created();
        vad_turn(&mut t, 2.0, 3.0);
        t.done(4.0, true);
        // The server created none for the second; the third's response answers both.
        vad_turn(&mut t, 5.0, 6.0);
        assert!(t.open(), "the third turn waits");
        t.response_created();
        close(t.text_delta(6.3), Sample::FirstTextAfterEnd(0.3, None));
        close(t.done(7.0, true), Sample::DoneAfterEnd(1.0));
        assert!(!t.open());
        t.settle();
        let c = t.counts;
        assert_eq!((c.ended, c.answered, c.unanswered), (3, 2, 1));
    }

    #[test]
    fn a_server_that_answers_the_turn_left_behind_next_has_it_timed_from_its_own_end() {
        let mut t = Turns::default();
        vad_turn(&mut t, 0.0, 1.0);
        t.response_created();
        vad_turn(&mut t, 2.0, 3.0);
        t.done(4.0, true);
        t.response_created();
        assert!(t.open(), "its response is under way");
        close(t.audio_delta(4.2), Sample::FirstAudioAfterEnd(1.2));
        close(t.done(5.0, true), Sample::DoneAfterEnd(2.0));
        t.settle();
        assert_eq!((t.counts.answered, t.counts.unanswered), (2, 0));
    }

    #[test]
    fn a_response_created_while_another_is_under_way_is_the_next_turns() {
        // The built-in mock queues a VAD turn's response behind the one in progress.
        let mut t = Turns::default();
        vad_turn(&mut t, 0.0, 1.0);
        t.response_created();
        vad_turn(&mut t, 2.0, 3.0);
        t.response_created();
        close(t.done(4.0, true), Sample::DoneAfterEnd(3.0));
        assert!(t.open(), "the second response is under way");
        close(t.audio_delta(4.5), Sample::FirstAudioAfterEnd(1.5));
        close(t.done(5.0, true), Sample::DoneAfterEnd(2.0));
        t.settle();
        assert_eq!((t.counts.answered, t.counts.unanswered), (2, 0));
    }

    #[test]
    fn a_response_created_while_no_turn_waited_is_not_a_later_turns() {
        // A response the server made of its own while the input streams: a VAD turn that ends
        // while it runs is not answered by it, and is timed by its own.
        let mut t = Turns::default();
        t.input_sent(0.0);
        t.response_created();
        vad_turn(&mut t, 0.5, 1.0);
        assert_eq!(t.audio_delta(1.2), None, "not the turn's first audio");
        assert_eq!(t.done(1.5, true), None, "timed from no end");
        assert!(
            !t.open(),
            "left behind, as any VAD turn a finished response leaves"
        );
        t.response_created();
        assert!(t.open(), "its own response is under way");
        close(t.audio_delta(2.0), Sample::FirstAudioAfterEnd(1.0));
        close(t.done(2.5, true), Sample::DoneAfterEnd(1.5));
        assert!(!t.open());
        t.settle();
        assert_eq!((t.counts.answered, t.counts.unanswered), (2, 0));
    }

    #[test]
    fn the_clients_own_requests_are_answered_in_order_even_when_a_response_is_created_late() {
        // --commit-every: each turn's response.create is answered in order; a slow server's
        // response.created for the first may come after the second turn ended.
        let mut t = Turns::default();
        t.input_sent(0.0);
        t.ended_as(1.0, Some(11), true);
        t.input_sent(1.0);
        t.ended_as(2.0, Some(23), true);
        t.response_created();
        close(t.done(2.5, true), Sample::DoneAfterEnd(1.5));
        t.response_created();
        close(t.done(3.0, true), Sample::DoneAfterEnd(1.0));
        t.settle();
        assert_eq!((t.counts.answered, t.counts.unanswered), (2, 0));
    }

    #[test]
    fn a_turn_the_client_ended_takes_no_response_until_it_asks_for_it() {
        // OpenAI's final turn: committed at 4.0, its response.create sent only once no
        // response is in progress. The server's response for the VAD turn left behind is the
        // VAD turn's, though the final turn is the newest waiting.
        let mut t = Turns::default();
        vad_turn(&mut t, 0.0, 1.0);
        t.response_created();
        vad_turn(&mut t, 2.0, 3.0);
        t.input_sent(3.5);
        t.ended_as(4.0, Some(crate::protocol::FINAL_TURN), false);
        close(t.done(4.2, true), Sample::DoneAfterEnd(3.2));
        t.response_created();
        close(t.audio_delta(4.5), Sample::FirstAudioAfterEnd(1.5));
        close(t.done(5.0, true), Sample::DoneAfterEnd(2.0));
        assert!(t.open(), "the final turn still waits");
        // Asked for once that response is done: timed from the request, not the commit (the
        // wait was the client's; the QA pass of 2026-12-06 saw it read as a server stall).
        t.asked(crate::protocol::FINAL_TURN, 5.0);
        t.response_created();
        close(t.audio_delta(5.3), Sample::FirstAudioAfterEnd(0.3));
        close(t.done(5.5, true), Sample::DoneAfterEnd(0.5));
        assert!(!t.open());
        t.settle();
        let c = t.counts;
        assert_eq!(
            (c.ended, c.answered, c.unanswered, c.unmatched),
            (3, 3, 0, 0)
        );
    }

    /// The final turn committed while the grace for a VAD turn left behind runs: the client
    /// waits out the grace before it asks, and that wait is not the server's (the review of
    /// 2026-12-06: only a response under way marked a turn held).
    #[test]
    fn a_final_turn_asked_after_the_grace_for_a_turn_left_behind_is_timed_from_its_request() {
        let mut t = Turns::default();
        vad_turn(&mut t, 0.0, 1.0);
        t.response_created();
        vad_turn(&mut t, 1.5, 2.0);
        close(t.done(2.6, true), Sample::DoneAfterEnd(1.6));
        t.input_sent(2.7);
        t.ended_as(2.8, Some(crate::protocol::FINAL_TURN), false);
        assert!(!t.quiet(), "the grace for the turn left behind runs");
        t.asked(crate::protocol::FINAL_TURN, 3.6);
        t.response_created();
        close(t.audio_delta(3.8), Sample::FirstAudioAfterEnd(0.2));
    }

    #[test]
    fn a_response_created_with_only_a_turn_not_yet_asked_for_waiting_answers_none() {
        let mut t = Turns::default();
        t.input_sent(0.0);
        t.ended_as(1.0, Some(crate::protocol::FINAL_TURN), false);
        t.response_created();
        assert_eq!(t.audio_delta(1.2), None, "not the final turn's answer");
        assert_eq!(t.done(1.5, true), None);
        assert!(t.open(), "the final turn still waits");
        t.asked(crate::protocol::FINAL_TURN, 1.5);
        t.response_created();
        close(t.audio_delta(1.8), Sample::FirstAudioAfterEnd(0.3));
        close(t.done(2.0, true), Sample::DoneAfterEnd(0.5));
        assert!(!t.open());
        let c = t.counts;
        assert_eq!(
            (c.ended, c.answered, c.unmatched, c.early),
            (1, 1, 1, 0),
            "the response made after the input ended answers nothing the client sent"
        );
    }

    #[test]
    fn a_vad_turn_that_ends_after_the_final_commit_takes_the_servers_response_with_its_events() {
        // Speech still open at the input's end: the client commits the final turn, then the
        // server's VAD stops the speech too. Its response is the VAD turn's, and so are its
        // deltas and done, though the final turn waits before it.
        let mut t = Turns::default();
        t.input_sent(0.0);
        t.ended_as(1.0, Some(crate::protocol::FINAL_TURN), false);
        t.speech_stopped(1.05, Some(0.9));
        t.response_created();
        close(t.audio_delta(1.3), Sample::FirstAudioAfterEnd(0.4));
        close(t.done(1.5, true), Sample::DoneAfterEnd(0.6));
        assert!(t.open(), "the final turn still waits");
        t.asked(crate::protocol::FINAL_TURN, 1.5);
        t.response_created();
        close(t.audio_delta(1.8), Sample::FirstAudioAfterEnd(0.3));
        close(t.done(2.0, true), Sample::DoneAfterEnd(0.5));
        assert!(!t.open());
        let c = t.counts;
        assert_eq!((c.ended, c.answered, c.unmatched, c.early), (2, 2, 0, 0));
    }

    #[test]
    fn without_response_created_a_turn_left_behind_is_still_waited_for() {
        // A server that never says it created a response (FIFO, as before).
        let mut t = Turns::default();
        vad_turn(&mut t, 0.0, 1.0);
        vad_turn(&mut t, 2.0, 3.0);
        close(t.done(4.0, true), Sample::DoneAfterEnd(3.0));
        assert!(t.open());
        close(t.done(5.0, true), Sample::DoneAfterEnd(2.0));
        t.settle();
        assert_eq!((t.counts.answered, t.counts.unanswered), (2, 0));
    }

    #[test]
    fn two_turns_in_flight_are_answered_in_order_issue_12() {
        let mut t = Turns::default();
        t.input_sent(0.0);
        t.ended(1.0);
        t.input_sent(1.1);
        t.ended(2.0);
        close(t.text_delta(2.1), Sample::FirstTextAfterEnd(1.1, None));
        close(t.done(2.2, true), Sample::DoneAfterEnd(1.2));
        close(t.text_delta(2.3), Sample::FirstTextAfterEnd(0.3, None));
        close(t.done(2.4, true), Sample::DoneAfterEnd(0.4));
        assert!(!t.open());
    }

    /// The input's transcript came 50 ms after the end, the answer's text 350 ms after: the
    /// first text was timed at 50 ms, and the transcript counted among the answer's deltas.
    #[test]
    fn the_inputs_transcript_is_not_the_answers_text() {
        let mut t = Turns::default();
        t.input_sent(0.0);
        t.ended_as(1.0, Some(crate::protocol::FINAL_TURN), true);
        t.response_created();
        t.input_text(1.05, false);
        t.input_text(1.06, true);
        close(t.text_delta(1.35), Sample::FirstTextAfterEnd(0.35, None));
        t.text_delta(1.45);
        close(t.done(1.5, true), Sample::DoneAfterEnd(0.5));
        assert_eq!(t.take_input_text(), None);
        assert_eq!(t.counts.text_deltas, 2);
        // A transcript after the answer's done (it goes to the next turn) is no text either.
        t.input_sent(2.0);
        t.ended_as(3.0, Some(0), true);
        t.response_created();
        t.input_text(3.01, true);
        close(t.done(3.4, true), Sample::DoneAfterEnd(0.4));
        assert_eq!(t.take_input_text(), None);
    }

    /// A server that sends no text of its answers (only the input's transcript): that is the
    /// turn's text, timed when it came, given when the turn is done.
    #[test]
    fn from_a_server_with_no_answer_text_the_inputs_transcript_is_the_text() {
        let mut t = Turns::default();
        t.input_sent(0.0);
        t.ended_as(1.0, Some(crate::protocol::FINAL_TURN), true);
        t.response_created();
        t.input_text(1.2, false);
        t.input_text(1.3, false);
        t.input_text(1.4, true);
        close(t.audio_delta(1.25), Sample::FirstAudioAfterEnd(0.25));
        close(t.done(1.5, true), Sample::DoneAfterEnd(0.5));
        close(t.take_input_text(), Sample::FirstTextAfterEnd(0.2, None));
        assert_eq!(t.take_input_text(), None, "taken once");
        // Two deltas and their completion: two texts, one interval of 100 ms.
        let c = t.counts;
        assert_eq!((c.text_deltas, c.text_intervals), (2, 1));
        assert!((c.text_span_s - 0.1).abs() < 1e-9);
    }

    /// A response the server made on its own before any turn (a greeting) marked the input
    /// that began streaming meanwhile: its deltas read as that turn's first text and audio
    /// 42 ms after its start, samples its `done` could not take back.
    #[test]
    fn a_greetings_deltas_time_no_turn() {
        let mut t = Turns::default();
        t.response_created();
        t.input_sent(0.0);
        assert_eq!(t.text_delta(0.04), None);
        assert_eq!(t.audio_delta(0.04), None);
        assert_eq!(t.done(0.5, true), None);
        assert_eq!(t.counts.unmatched, 1);
        // The turn the client then ends is timed from its own end.
        t.ended_as(2.0, Some(crate::protocol::FINAL_TURN), true);
        t.response_created();
        close(t.text_delta(2.3), Sample::FirstTextAfterEnd(0.3, None));
        close(t.audio_delta(2.2), Sample::FirstAudioAfterEnd(0.2));
        close(t.done(2.5, true), Sample::DoneAfterEnd(0.5));
        assert_eq!((t.counts.answered, t.counts.early), (1, 0));
    }

    /// A response created while the greeting still streamed (queued behind it): the
    /// greeting's deltas and `done` were the queued turn's (first text 50 ms after its end).
    /// Responses stream in the order created, so they go to the oldest one under way.
    #[test]
    fn a_response_queued_behind_a_greeting_is_timed_from_its_own_deltas() {
        let mut t = Turns::default();
        t.response_created();
        t.input_sent(0.0);
        t.ended_as(1.0, Some(crate::protocol::FINAL_TURN), true);
        t.response_created();
        assert_eq!(t.text_delta(1.05), None, "the greeting's");
        assert_eq!(t.done(1.1, true), None);
        assert_eq!((t.counts.unmatched, t.counts.answered), (1, 0));
        close(t.text_delta(1.4), Sample::FirstTextAfterEnd(0.4, None));
        close(t.done(1.6, true), Sample::DoneAfterEnd(0.6));
        assert_eq!((t.counts.unmatched, t.counts.answered), (1, 1));
        assert!(!t.open());
    }

    /// From a server with no answer text, a turn's transcript that came after its answer was
    /// done went to the next turn, timed from that turn's end: -2 s.
    #[test]
    fn a_transcript_after_its_turns_answer_is_no_later_turns() {
        let mut t = Turns::default();
        t.input_sent(0.0);
        t.ended_as(3.0, Some(0), true);
        t.response_created();
        assert!(t.done(3.8, true).is_some());
        assert_eq!(t.take_input_text(), None);
        t.input_text(4.0, true);
        t.input_sent(4.1);
        t.ended_as(6.0, Some(1), true);
        t.response_created();
        t.input_text(6.3, true);
        close(t.done(6.8, true), Sample::DoneAfterEnd(0.8));
        close(t.take_input_text(), Sample::FirstTextAfterEnd(0.3, None));
    }
}
