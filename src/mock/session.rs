//! One mock session's state machine, free of any socket: it takes the text of each
//! client message with its arrival time and pushes the frames to send into an outbox, so every
//! transition is testable without a network.
//!
//! Phases: `AwaitingUpdate` (after `session.created`) → `Streaming` (after `session.updated`) →
//! `Ended` (after `sglang.input_audio.drained`) → `Closed` (after `session.closed`). Anything a
//! client gets wrong is answered with a non-fatal `error` event and changes nothing, so a
//! confused client can never take the mock down or poison its own session. The one fatal answer
//! is to a `session.update` asking for terms the profile cannot serve: the mock never grants
//! other terms silently.
//!
//! Input is cut into native units of the profile (80 ms or 1000 ms), whatever the packet size:
//! the accepted input is counted in bytes, and a unit is emitted as soon as a whole one has been
//! accepted; at the end of input the tail, shorter, or (input that ends on a unit boundary) an
//! empty unit, as sglang-omni's server cuts one. The response ends with that last unit.

use super::client_event::{self, ClientEvent};
use super::replies::{
    self, Drained, ErrorCode, EventIds, Grant, Refusal, ResponseFrames, Templates, UnitSpan,
};
use super::stats::Counters;
use crate::protocol::{names, BYTES_PER_SAMPLE};
use base64::Engine as _;
use std::collections::BTreeMap;
use std::rc::Rc;
use tokio_tungstenite::tungstenite::Utf8Bytes;
/// Longest piece of client text quoted back in an error message.
const QUOTE_CHARS: usize = 64;
/// Where sglang-omni's server says a field of an append is at fault (pydantic's location).
const SEQ_PARAM: &str = "input_audio_buffer.append.sglang.seq";
const AUDIO_PARAM: &str = "input_audio_buffer.append.audio";
const IMAGE_PARAM: &str = "image";
/// How far a stated `t_start_ms` may be from the input accepted, as sglang-omni's server allows.
const MEDIA_TIME_TOLERANCE_MS: f64 = 1e-7;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    AwaitingUpdate,
    Streaming,
    Ended,
    Closed,
}

/// What the connection should do after a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Continue,
    /// Send the outbox (which ends with `session.closed`), then a close frame with 1000
    /// (normal closure), then drop the connection.
    Close,
}

#[derive(Debug)]
pub struct Session {
    templates: Rc<Templates>,
    number: u64,
    id: String,
    phase: Phase,
    ids: EventIds,
    /// The output modalities granted by `session.updated`.
    grant: Option<Grant>,
    /// strict_order: the only seq the next append may carry.
    next_seq: u64,
    /// When the first accepted append arrived: the input's media time 0.
    first_arrival_s: Option<f64>,
    /// Input accepted so far, in bytes of PCM16 at the profile's input rate.
    accepted_bytes: u64,
    /// Of it, what is cut into units or was dropped (`input_audio_buffer.clear`): where the
    /// input not yet cut starts.
    consumed_bytes: u64,
    /// Of it, what was dropped.
    discarded_bytes: u64,
    /// Native units cut from the input so far (the index of the next one).
    units: u64,
    /// Frames (`sglang.input_image.append`) accepted for each unit not yet cut.
    frames: BTreeMap<u64, u32>,
    /// Units whose replies wait for a full burst.
    pending: Vec<UnitSpan>,
    /// Set once `response.created` has been sent.
    response: Option<ResponseFrames>,
}

impl Session {
    pub fn new(templates: Rc<Templates>, number: u64) -> Self {
        // A burst of up to 10 000 units grows the buffer as needed; most runs never need more.
        let burst = templates.burst_units.min(1024) as usize;
        Session {
            templates,
            number,
            id: format!("sess_{number:06}"),
            phase: Phase::AwaitingUpdate,
            ids: EventIds::new(number),
            grant: None,
            next_seq: 0,
            first_arrival_s: None,
            accepted_bytes: 0,
            consumed_bytes: 0,
            discarded_bytes: 0,
            units: 0,
            frames: BTreeMap::new(),
            pending: Vec::with_capacity(burst),
            response: None,
        }
    }

    #[cfg(test)]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The greeting sent as soon as the handshake completes.
    pub fn created(&mut self, out: &mut Vec<Utf8Bytes>) {
        let event_id = self.event_id();
        out.push(replies::session_created(&event_id, &self.id));
    }

    /// Handles one text message that arrived at `arrival_s` (monotonic seconds).
    pub fn on_text(
        &mut self,
        text: &str,
        arrival_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) -> Step {
        let event = match client_event::parse(text) {
            Ok(event) => event,
            Err(err) => {
                let message = format!("not a JSON object with a string `type`: {err}");
                let refusal = Refusal::new(ErrorCode::InvalidRequest, message);
                self.error(out, counters, &refusal, None, false);
                return Step::Continue;
            }
        };
        let client_event_id = event.event_id.as_deref();
        match event.kind.as_ref() {
            names::APPEND => {
                counters.append_received();
                self.on_append(&event, arrival_s, counters, out);
            }
            names::SESSION_UPDATE => return self.on_update(&event, counters, out),
            names::INPUT_END => self.on_end(client_event_id, counters, out),
            names::IMAGE_APPEND => match self.check_image(&event) {
                Ok(unit) => {
                    *self.frames.entry(unit).or_default() += 1;
                    let event_id = self.event_id();
                    out.push(replies::image_accepted(&event_id, unit, client_event_id));
                }
                Err(refusal) => self.error(out, counters, &refusal, client_event_id, false),
            },
            names::CLEAR => self.on_clear(client_event_id, counters, out),
            names::SESSION_CLOSE => {
                // A response still open ends first, cancelled; units not yet sent are not.
                if let Some(response) = &mut self.response {
                    response.cancel(&mut self.ids, out);
                }
                self.pending.clear();
                let event_id = self.event_id();
                out.push(replies::session_closed(
                    &event_id,
                    client_event_id,
                    "client_closed",
                ));
                self.phase = Phase::Closed;
                counters.session_closed();
                return Step::Close;
            }
            // Commands of the protocol that the grant rules out (`client_commit` false); before
            // the grant, refused as sglang-omni refuses any command then.
            names::COMMIT | names::RESPONSE_CREATE if self.phase == Phase::AwaitingUpdate => {
                let refusal = Refusal::new(ErrorCode::InvalidState, "session is not OPEN");
                self.error(out, counters, &refusal, client_event_id, false);
            }
            names::COMMIT | names::RESPONSE_CREATE => {
                let message = format!(
                    "`{}`: manual turn commands are not granted (client_commit false)",
                    event.kind
                );
                let refusal = Refusal::new(ErrorCode::NotApplicable, message);
                self.error(out, counters, &refusal, client_event_id, false);
            }
            other => {
                let message = format!("unknown event type `{}`", quote(other));
                let refusal = Refusal::new(ErrorCode::NotSupported, message);
                self.error(out, counters, &refusal, client_event_id, false);
            }
        }
        Step::Continue
    }

    /// Handles a binary message: the protocol is text only.
    pub fn on_binary(&mut self, counters: &Counters, out: &mut Vec<Utf8Bytes>) {
        let message = "binary frames are not part of the protocol; send JSON text frames";
        let refusal = Refusal::new(ErrorCode::InvalidRequest, message);
        self.error(out, counters, &refusal, None, false);
    }

    /// The fatal error sent (best effort) before a session that sent an oversized message ends.
    pub fn too_large(&mut self, counters: &Counters, out: &mut Vec<Utf8Bytes>) {
        let message = format!(
            "message larger than {} bytes; the session ends",
            replies::MAX_MESSAGE_BYTES
        );
        let refusal = Refusal::new(ErrorCode::MessageTooLarge, message);
        self.error(out, counters, &refusal, None, true);
    }

    fn on_update(
        &mut self,
        event: &ClientEvent<'_>,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) -> Step {
        let client_event_id = event.event_id.as_deref();
        let asked = event
            .session
            .as_ref()
            .and_then(|s| s.output_modalities.as_deref());
        let grant = match self.templates.grant(asked) {
            Ok(grant) => grant,
            Err(message) => {
                let refusal = Refusal::new(ErrorCode::InvalidRequest, message)
                    .at("session.output_modalities");
                self.error(out, counters, &refusal, client_event_id, true);
                // As sglang-omni's server ends a session after a fatal error: `session.closed`
                // with the error's code as its reason, and a normal close.
                let event_id = self.event_id();
                out.push(replies::session_closed(
                    &event_id,
                    None,
                    refusal.code.as_str(),
                ));
                self.phase = Phase::Closed;
                return Step::Close;
            }
        };
        // A repeated update is answered again; a response already begun keeps its terms. After
        // the end of input too: sglang-omni's session is still open then (only a closing one
        // refuses it), and the input stays ended.
        if self.phase == Phase::AwaitingUpdate {
            self.phase = Phase::Streaming;
        }
        let event_id = self.event_id();
        out.push(replies::session_updated(
            &self.templates,
            &grant,
            &event_id,
            client_event_id,
            &self.id,
        ));
        self.grant = Some(grant);
        Step::Continue
    }

    fn on_append(
        &mut self,
        event: &ClientEvent<'_>,
        arrival_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        match self.check_append(event) {
            Ok((seq, audio_bytes)) => {
                self.accept(event, seq, audio_bytes, arrival_s, counters, out)
            }
            Err(refusal) => self.error(out, counters, &refusal, event.event_id.as_deref(), false),
        }
    }

    /// An append's seq and audio size, or what is wrong with it, checked in sglang-omni's
    /// server's order: the fields (a seq that is a JSON integer, the audio), the audio's size
    /// and base64 form, then against the session: its phase, the seq's order, whole samples,
    /// and `t_start_ms` where the input stands.
    fn check_append(&self, event: &ClientEvent<'_>) -> Result<(u64, usize), Refusal> {
        let seq = match event.sglang.as_ref().and_then(|s| s.seq()) {
            Some(Ok(seq)) => seq,
            Some(Err(number)) => {
                return Err(Refusal::new(
                    ErrorCode::InvalidRequest,
                    format!("sglang.seq must be a JSON integer from 0, got {number}"),
                )
                .at(SEQ_PARAM))
            }
            None => {
                return Err(
                    Refusal::new(ErrorCode::InvalidRequest, "append needs sglang.seq")
                        .at(SEQ_PARAM),
                )
            }
        };
        let Some(audio) = event.audio.as_deref() else {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                "append needs `audio` (base64 PCM16)",
            )
            .at(AUDIO_PARAM));
        };
        // sglang-omni's protocol layer refuses base64 longer than the input budget could hold
        // before decoding it or looking at the session.
        if audio.len() > self.templates.max_input_bytes.div_ceil(3) * 4 {
            return Err(Refusal::new(
                ErrorCode::BufferOverflow,
                "encoded audio exceeds input budget",
            ));
        }
        let audio_bytes = decoded_len(audio, "audio")?;
        self.check_streaming()?;
        if seq != self.next_seq {
            return Err(Refusal::new(
                ErrorCode::InvalidState,
                format!("expected seq {}, got {seq}; packet dropped", self.next_seq),
            ));
        }
        if audio_bytes == 0 || audio_bytes % BYTES_PER_SAMPLE != 0 {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                format!("`audio` decodes to {audio_bytes} bytes, not whole PCM16 samples"),
            ));
        }
        // Optional; any JSON number (`80` or `80.0`), to the server's tolerance.
        let t_start_ms = event.sglang.as_ref().and_then(|s| s.t_start_ms);
        if let Some(t_start_ms) = t_start_ms {
            let input_ms = self.accepted_end_ms();
            if (t_start_ms - input_ms).abs() > MEDIA_TIME_TOLERANCE_MS {
                return Err(Refusal::new(
                    ErrorCode::InvalidState,
                    format!(
                        "sglang.t_start_ms {t_start_ms} is not where the input stands, \
                         {input_ms} ms: input media time must be sample-contiguous"
                    ),
                ));
            }
        }
        // Last, the budget of input not yet processed (`runtime.append`): here the part of a
        // unit not yet cut, since the mock processes each unit as it completes.
        let backlog = self.accepted_bytes - self.consumed_bytes;
        if backlog as usize + audio_bytes > self.templates.max_input_bytes {
            return Err(Refusal::new(
                ErrorCode::BufferOverflow,
                "input budget exhausted; retry this seq",
            ));
        }
        Ok((seq, audio_bytes))
    }

    /// A valid append: its arrival against the session's timeline, `accepted`, and the units
    /// it completes (sent once a burst of them is ready).
    fn accept(
        &mut self,
        event: &ClientEvent<'_>,
        seq: u64,
        audio_bytes: usize,
        arrival_s: f64,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        // Due when the input accepted before it would have taken to arrive in real time;
        // a stated `t_start_ms` was checked against that same point.
        let due_s = self.accepted_end_ms() / 1000.0;
        let first_s = *self.first_arrival_s.get_or_insert(arrival_s);
        counters.record_arrival_deviation_s(((arrival_s - first_s) - due_s).abs());

        self.next_seq += 1;
        self.accepted_bytes += audio_bytes as u64;
        let event_id = self.event_id();
        out.push(replies::accepted(
            &event_id,
            seq,
            self.accepted_end_ms(),
            event.event_id.as_deref(),
        ));
        let unit_bytes = self.templates.unit_input_bytes;
        while self.accepted_bytes - self.consumed_bytes >= unit_bytes {
            self.cut_unit(unit_bytes);
        }
        if self.pending.len() >= self.templates.burst_units as usize {
            self.flush_units(false, out);
        }
    }

    /// Milliseconds of input accepted so far.
    fn accepted_end_ms(&self) -> f64 {
        self.accepted_bytes as f64 / self.templates.input_bytes_per_ms as f64
    }

    /// Queues the next native unit, covering `bytes` of input from where the input not yet
    /// cut starts; the frames for it go with it.
    fn cut_unit(&mut self, bytes: u64) {
        let per_ms = self.templates.input_bytes_per_ms as f64;
        self.pending.push(UnitSpan {
            index: self.units,
            t_start_ms: self.consumed_bytes as f64 / per_ms,
            duration_ms: bytes as f64 / per_ms,
        });
        self.consumed_bytes += bytes;
        self.frames.remove(&self.units);
        self.units += 1;
    }

    /// The unit a frame joins, or why it is refused, checked in sglang-omni's server's order
    /// (`runtime.append_image`): the event's fields, the session open, image input granted,
    /// the input not ended, the frame's size and kind, then its unit: not already cut, not
    /// holding the most frames a unit takes, not too far past the input.
    fn check_image(&self, event: &ClientEvent<'_>) -> Result<u64, Refusal> {
        let invalid = |message: &str| Refusal::new(ErrorCode::InvalidRequest, message);
        let t_ms = event.sglang.as_ref().and_then(|s| s.t_ms);
        let Some(t_ms) = t_ms.filter(|t| t.is_finite()) else {
            return Err(invalid(
                "sglang.input_image.append needs sglang.t_ms, the frame's media time in ms",
            )
            .at("sglang.t_ms"));
        };
        let Some(image) = event.image.as_deref() else {
            return Err(
                invalid("sglang.input_image.append needs `image` (base64 JPEG or PNG)")
                    .at(IMAGE_PARAM),
            );
        };
        if matches!(self.phase, Phase::AwaitingUpdate | Phase::Closed) {
            return Err(Refusal::new(ErrorCode::InvalidState, "session is not OPEN"));
        }
        if !self.templates.profile.takes_images() {
            return Err(Refusal::new(
                ErrorCode::NotSupported,
                "image input is not granted",
            ));
        }
        if self.phase == Phase::Ended {
            return Err(Refusal::new(ErrorCode::InvalidState, "input has ended"));
        }
        let bytes = decoded_len(image, IMAGE_PARAM)?;
        if bytes > replies::MAX_IMAGE_BYTES {
            return Err(
                Refusal::new(ErrorCode::BufferOverflow, "image exceeds input budget")
                    .at(IMAGE_PARAM),
            );
        }
        // Bytes, not a `str` slice: text that is not ASCII must not split a character.
        let head = base64::engine::general_purpose::STANDARD
            .decode(&image.as_bytes()[..image.len().min(8)])
            .unwrap_or_default();
        if !(head.starts_with(b"\xff\xd8") || head.starts_with(b"\x89PNG")) {
            return Err(invalid("image must be JPEG or PNG").at(IMAGE_PARAM));
        }
        let per_ms = self.templates.input_bytes_per_ms as f64;
        let unit_ms = f64::from(self.templates.unit_ms);
        let offset = ((t_ms - self.consumed_bytes as f64 / per_ms) / unit_ms).floor() as i64;
        let unit = self.units as i64 + offset;
        let pending = self.accepted_bytes - self.consumed_bytes;
        let pending_units = pending.div_ceil(self.templates.unit_input_bytes) as i64;
        if unit < self.units as i64 {
            return Err(Refusal::new(
                ErrorCode::InvalidState,
                "frame unit already cut",
            ));
        }
        let unit = unit as u64;
        if self.frames.get(&unit).copied().unwrap_or(0) >= replies::MAX_FRAMES_PER_UNIT {
            return Err(Refusal::new(
                ErrorCode::BufferOverflow,
                "unit frame count exceeds limit",
            ));
        }
        if offset > pending_units + replies::FRAME_LOOKAHEAD_UNITS as i64 {
            return Err(Refusal::new(
                ErrorCode::BufferOverflow,
                "frame exceeds lookahead budget",
            ));
        }
        Ok(unit)
    }

    /// `input_audio_buffer.clear`: the input not yet cut into a unit is dropped, with the
    /// frames waiting for it (`runtime.clear`).
    fn on_clear(
        &mut self,
        client_event_id: Option<&str>,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        if matches!(self.phase, Phase::AwaitingUpdate | Phase::Closed) {
            let refusal = Refusal::new(ErrorCode::InvalidState, "session is not OPEN");
            self.error(out, counters, &refusal, client_event_id, false);
            return;
        }
        let dropped = self.accepted_bytes - self.consumed_bytes;
        self.discarded_bytes += dropped;
        self.consumed_bytes = self.accepted_bytes;
        self.frames.clear();
        let event_id = self.event_id();
        let discarded_ms = dropped as f64 / self.templates.input_bytes_per_ms as f64;
        out.push(replies::cleared(&event_id, client_event_id, discarded_ms));
    }

    fn on_end(
        &mut self,
        client_event_id: Option<&str>,
        counters: &Counters,
        out: &mut Vec<Utf8Bytes>,
    ) {
        if let Err(refusal) = self.check_streaming() {
            self.error(out, counters, &refusal, client_event_id, false);
            return;
        }
        self.phase = Phase::Ended;
        let event_id = self.event_id();
        let accepted_end_ms = self.accepted_end_ms();
        out.push(replies::input_ended(
            &event_id,
            client_event_id,
            accepted_end_ms,
        ));
        // The last unit: the tail, the input after the last whole unit, padded with silence to
        // a whole unit; or, when the input ends on a unit boundary (or there was none), an
        // empty unit of duration 0, as sglang-omni's server cuts one to carry the end of input.
        let unit_bytes = self.templates.unit_input_bytes;
        let tail_bytes = self.accepted_bytes - self.consumed_bytes;
        let padding_ms = if tail_bytes > 0 {
            (unit_bytes - tail_bytes) as f64 / self.templates.input_bytes_per_ms as f64
        } else {
            0.0
        };
        self.cut_unit(tail_bytes);
        // The response ends with that unit, before its `sglang.unit.done`.
        self.flush_units(true, out);
        let event_id = self.event_id();
        let discarded_ms = self.discarded_bytes as f64 / self.templates.input_bytes_per_ms as f64;
        out.push(replies::input_drained(
            &event_id,
            client_event_id,
            &Drained {
                accepted_end_ms,
                // The accepted input not dropped, all consumed; the padding is reported apart.
                consumed_ms: accepted_end_ms - discarded_ms,
                discarded_ms,
                padding_ms,
            },
        ));
    }

    /// Appends and the end of input are valid only between `session.updated` and the end.
    fn check_streaming(&self) -> Result<(), Refusal> {
        match self.phase {
            Phase::Streaming => Ok(()),
            Phase::AwaitingUpdate => Err(Refusal::new(
                ErrorCode::InvalidState,
                "send session.update and wait for session.updated first",
            )),
            Phase::Ended | Phase::Closed => Err(Refusal::new(
                ErrorCode::InvalidState,
                "input has ended; only session.close is valid now",
            )),
        }
    }

    /// Sends the replies of every pending unit, opening the response with the first of them;
    /// the response ends with the `last` unit of the input, when it is the last pending.
    fn flush_units(&mut self, last: bool, out: &mut Vec<Utf8Bytes>) {
        let Some(first) = self.pending.first().copied() else {
            return;
        };
        if self.templates.replies_per_unit == 0 {
            self.pending.clear();
            return;
        }
        if self.response.is_none() {
            // Streaming is only reached through a grant, so there is one.
            let Some(grant) = &self.grant else {
                self.pending.clear();
                return;
            };
            let mut frames = ResponseFrames::new(self.number, grant);
            let event_id = self.ids.next();
            out.push(frames.created(&event_id, &first));
            self.response = Some(frames);
        }
        if let Some(response) = &mut self.response {
            let count = self.pending.len();
            for (i, unit) in self.pending.iter().enumerate() {
                let ends = last && i + 1 == count;
                response.push_unit(&self.templates, unit, ends, &mut self.ids, out);
            }
        }
        self.pending.clear();
    }

    /// An `error`. Non-fatal, the session goes on as if the message had not come; fatal, the
    /// caller ends the session after it.
    fn error(
        &mut self,
        out: &mut Vec<Utf8Bytes>,
        counters: &Counters,
        refusal: &Refusal,
        client_event_id: Option<&str>,
        fatal: bool,
    ) {
        counters.protocol_error();
        let event_id = self.event_id();
        out.push(replies::error(&event_id, refusal, client_event_id, fatal));
    }

    fn event_id(&mut self) -> String {
        self.ids.next()
    }
}

/// Decoded length of standard padded base64, from its length alone: the mock never looks at the
/// audio, so decoding it would be wasted work. What is not base64 is refused as sglang-omni's
/// server refuses it (`param` `audio`).
fn decoded_len(b64: &str, field: &'static str) -> Result<usize, Refusal> {
    let not_base64 = |message: String| Refusal::new(ErrorCode::InvalidRequest, message).at(field);
    let len = b64.len();
    if len % 4 != 0 {
        return Err(not_base64(format!(
            "`{field}` is {len} characters, not a multiple of 4: not padded base64"
        )));
    }
    let padding = b64.bytes().rev().take_while(|&b| b == b'=').count();
    if padding > 2 {
        return Err(not_base64(format!(
            "`{field}` ends in more than two `=`: not base64"
        )));
    }
    Ok(len / 4 * 3 - padding)
}

/// At most [`QUOTE_CHARS`] characters of client text, for error messages.
fn quote(text: &str) -> &str {
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[cfg(test)]
mod tests;
