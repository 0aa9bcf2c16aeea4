//! One paced session: connect (with admission retries) → set up → wait at the start gate →
//! send packets on the absolute schedule of SPEC §5 while taking every server event → end →
//! drained → close → closed. All on the worker's single runtime thread.

use super::pacer::Pacer;
use super::results::{SessionOutcome, SessionStatus, WorkerStats};
use super::setup::SetupTally;
use super::Audio;
use crate::clock::{instant_at, monotonic_s};
use crate::options::Settings;
use crate::protocol::{self, names};
use crate::trace::format::json_string;
use crate::trace::format::Payload;
use crate::trace::{Receipt, SessionTrace};
use futures_util::{SinkExt, StreamExt};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

type Ws = WebSocketStream<BufReader<TcpStream>>;

/// What one read from the socket may take. The replies to one packet are about 10 kB and arrive
/// together; read straight into tungstenite's frame buffer, they took two reads a packet (it
/// reads only into what is left of that buffer), two-thirds of the receive path's system calls.
const SOCKET_READ_BYTES: usize = 64 << 10;
/// tungstenite's frame buffer. Before each read it zero-fills the room it reads into, and the
/// frames it hands out (kept by the trace writer for up to 0.5 s) pin it, so the default of
/// 128 KiB cost a large memset per read and a fresh allocation whenever it was pinned.
const FRAME_BUFFER_BYTES: usize = 16 << 10;

/// Send start times of recent packets, for the server-side latencies (20 s at 80 ms).
const SEND_RING: usize = 256;
/// Once the run is being stopped, how long a session still waits for each awaited event.
const STOP_GRACE_S: f64 = 3.0;

/// Everything a session task needs; built by the worker.
pub struct SessionCtx {
    pub worker: u32,
    pub index: u32,
    pub settings: Rc<Settings>,
    pub url: Rc<str>,
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

/// What a received frame was, as far as the session's progress goes.
enum Event {
    Created,
    Updated,
    Drained,
    Closed,
    FatalError(String),
    Other,
}

struct Session {
    ctx: SessionCtx,
    trace: SessionTrace,
    outcome: SessionOutcome,
    origin_s: Option<f64>,
    send_ring: [(u32, f64); SEND_RING],
    last_seq: Option<u32>,
    first_audio_seen: bool,
}

/// Runs one session to its end and says how it went.
pub async fn run(ctx: SessionCtx, trace: SessionTrace) -> SessionOutcome {
    let outcome = SessionOutcome::new(ctx.index);
    let mut session = Session {
        ctx,
        trace,
        outcome,
        origin_s: None,
        send_ring: [(u32::MAX, 0.0); SEND_RING],
        last_seq: None,
        first_audio_seen: false,
    };
    let result = session.drive().await;
    let Session {
        ctx,
        trace,
        mut outcome,
        ..
    } = session;
    match result {
        Ok(()) => outcome.status = SessionStatus::Completed,
        Err(End::Rejected(why)) => {
            outcome.status = SessionStatus::Rejected;
            outcome.error = Some(why);
        }
        Err(End::Failed(why)) => outcome.error = Some(why),
    }
    // A session closes only after its lines are written; a write error fails it.
    if let Err(err) = trace.finish().await {
        if outcome.status == SessionStatus::Completed {
            outcome.status = SessionStatus::Incomplete;
        }
        outcome.error.get_or_insert(err);
    }
    ctx.stats.borrow_mut().session_ended(outcome.status);
    outcome
}

impl Session {
    async fn drive(&mut self) -> Result<(), End> {
        let setup = self.connect_and_set_up().await;
        self.ctx
            .tally
            .report(&setup.as_ref().map(|_| ()).map_err(|e| match e {
                End::Rejected(_) => None,
                End::Failed(why) => Some(why.clone()),
            }));
        let mut ws = setup?;
        let result = self.stream_and_close(&mut ws).await;
        if result.is_err() {
            // Best effort: tell the server we are gone; the session is already failed.
            let _ = tokio::time::timeout(Duration::from_millis(200), ws.close(None)).await;
        }
        result
    }

    async fn connect_and_set_up(&mut self) -> Result<Ws, End> {
        let mut ws = self.connect().await?;
        self.expect(&mut ws, "session.created", |e| matches!(e, Event::Created))
            .await?;
        let update = Utf8Bytes::from(protocol::session_update(self.event_id(u32::MAX)));
        self.send_control(&mut ws, update).await?;
        self.expect(&mut ws, "session.updated", |e| matches!(e, Event::Updated))
            .await?;
        Ok(ws)
    }

    async fn connect(&mut self) -> Result<Ws, End> {
        let s = &self.ctx.settings;
        let config = WebSocketConfig::default()
            .read_buffer_size(FRAME_BUFFER_BYTES)
            .max_message_size(Some(s.max_message_bytes as usize))
            .max_frame_size(Some(s.max_message_bytes as usize));
        let timeout = Duration::from_secs_f64(s.connect_timeout_s);
        let attempts = s.admission_retries + 1;
        for attempt in 1..=attempts {
            let t_s = monotonic_s();
            let connecting = connect_ws(&self.ctx.url, config);
            let outcome = match tokio::time::timeout(timeout, connecting).await {
                Ok(Ok(ws)) => Ok(ws),
                Ok(Err(WsError::Http(response))) if response.status().as_u16() == 503 => Err(None),
                Ok(Err(err)) => Err(Some(format!("cannot connect to {}: {err}", self.ctx.url))),
                Err(_) => Err(Some(format!(
                    "connecting to {} took longer than --connect-timeout {}s",
                    self.ctx.url, s.connect_timeout_s
                ))),
            };
            let label = match &outcome {
                Ok(_) => "connected".to_string(),
                Err(None) => "http_503".to_string(),
                Err(Some(why)) => why.clone(),
            };
            self.trace.admission(
                t_s,
                format!(
                    r#"{{"attempt":{attempt},"outcome":{}}}"#,
                    json_string(&label)
                ),
            );
            match outcome {
                Ok(ws) => return Ok(ws),
                Err(Some(why)) => return Err(End::Failed(why)),
                Err(None) if attempt < attempts => {
                    tokio::time::sleep(Duration::from_millis(s.admission_retry_interval_ms)).await;
                }
                Err(None) => {}
            }
        }
        Err(End::Rejected(format!(
            "the server refused the connection with HTTP 503 on all {attempts} attempts"
        )))
    }

    /// Streams every packet (or until stopped), then ends, drains and closes the session.
    async fn stream_and_close(&mut self, ws: &mut Ws) -> Result<(), End> {
        let mut gate = self.ctx.gate.clone();
        let mut stop = self.ctx.stop.clone();
        let gate_s = tokio::select! {
            g = gate.wait_for(|g| g.is_some()) => g.ok().and_then(|g| *g),
            _ = stop.wait_for(|s| *s) => None,
        };
        if let Some(gate_s) = gate_s {
            let gate_s = gate_s + self.stagger_s();
            self.ctx.stats.borrow_mut().sessions_streaming += 1;
            let streamed = self.stream(ws, gate_s).await;
            self.ctx.stats.borrow_mut().sessions_streaming -= 1;
            streamed?;
        } else {
            self.outcome.stopped_early = true;
        }
        if self.outcome.packets > 0 {
            let end = Utf8Bytes::from(protocol::input_end(self.event_id(u32::MAX - 1)));
            self.send_control(ws, end).await?;
            self.expect(ws, "sglang.input_audio.drained", |e| {
                matches!(e, Event::Drained)
            })
            .await?;
        }
        let close = Utf8Bytes::from(protocol::session_close(self.event_id(u32::MAX - 2)));
        self.send_control(ws, close).await?;
        self.expect(ws, "session.closed", |e| matches!(e, Event::Closed))
            .await?;
        // The server closes the socket after session.closed; answer its close frame.
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
        Ok(())
    }

    /// The paced send loop of SPEC §5: packet N is due at `start_s(0) + N × packet_s`, where
    /// `start_s(0)` is the actual send of packet 0; a late packet does not move later deadlines.
    async fn stream(&mut self, ws: &mut Ws, gate_s: f64) -> Result<(), End> {
        let streamed = self.stream_packets(ws, gate_s).await;
        self.ctx.pacer.forget(self.ctx.index);
        streamed
    }

    async fn stream_packets(&mut self, ws: &mut Ws, gate_s: f64) -> Result<(), End> {
        let settings = self.ctx.settings.clone();
        let packet_s = settings.packet_s();
        let packets = settings.packets_per_session;
        let mut stop = self.ctx.stop.clone();
        let pacer = self.ctx.pacer.clone();
        let mut due_s = gate_s;
        let mut seq: u32 = 0;
        while seq < packets {
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => {
                    self.outcome.stopped_early = true;
                    break;
                }
                () = pacer.sleep_until(self.ctx.index, due_s) => {
                    self.send_packet(ws, seq).await?;
                    seq += 1;
                    let origin_s = self.origin_s.unwrap_or(gate_s);
                    due_s = origin_s + f64::from(seq) * packet_s;
                }
                msg = ws.next() => {
                    if let Event::FatalError(why) = self.on_message(msg)? {
                        return Err(End::Failed(why));
                    }
                }
            }
        }
        Ok(())
    }

    async fn send_packet(&mut self, ws: &mut Ws, seq: u32) -> Result<(), End> {
        let start_s = monotonic_s();
        let origin_s = *self.origin_s.get_or_insert(start_s);
        let settings = &self.ctx.settings;
        let scheduled_s = origin_s + f64::from(seq) * settings.packet_s();
        let last = seq + 1 == settings.packets_per_session;
        let audio = if last {
            &self.ctx.audio.last_b64
        } else {
            &self.ctx.audio.full_b64
        };
        let event_id = self.event_id(seq);
        let t_start_ms = u64::from(seq) * u64::from(settings.packet_ms);
        let frame = Utf8Bytes::from(protocol::append_frame(event_id, seq, t_start_ms, audio));
        if let Err(err) = ws.send(Message::Text(frame.clone())).await {
            return Err(End::Failed(format!("sending packet {seq} failed: {err}")));
        }
        let completed_s = monotonic_s();
        self.record_packet(seq, scheduled_s, start_s, completed_s);
        self.trace.append(
            Receipt {
                event_id,
                seq,
                scheduled_s,
                start_s,
                completed_s,
            },
            &frame,
        );
        Ok(())
    }

    fn record_packet(&mut self, seq: u32, scheduled_s: f64, start_s: f64, completed_s: f64) {
        let settings = &self.ctx.settings;
        let deviation_s = (start_s - scheduled_s).abs();
        let deviation_us = (deviation_s * 1e6) as u64;
        let late = deviation_s * 1000.0 > f64::from(settings.late_threshold_ms);
        let slow = deviation_s * 1000.0 > f64::from(settings.slow_send_threshold_ms);
        self.send_ring[seq as usize % SEND_RING] = (seq, start_s);
        self.last_seq = Some(seq);
        let o = &mut self.outcome;
        o.packets += 1;
        o.first_send_s.get_or_insert(start_s);
        o.last_send_s = Some(start_s);
        o.max_deviation_ms = o.max_deviation_ms.max(deviation_s * 1000.0);
        o.late_packets += u64::from(late);
        o.sends_over_20ms += u64::from(slow);
        let new_violation = late && o.late_packets == 1;
        let mut stats = self.ctx.stats.borrow_mut();
        if late && stats.late_windows.len() < super::results::MAX_WINDOWS {
            stats.late_windows.push([scheduled_s, start_s]);
        }
        stats.hist.deviation.record_us(deviation_us as i64);
        stats.hist.websocket_send.record_s(completed_s - start_s);
        stats.hist.append_span.record_s(completed_s - scheduled_s);
        stats.packets += 1;
        stats.late_packets += u64::from(late);
        stats.sends_over_20ms += u64::from(slow);
        stats.sessions_with_violation += u32::from(new_violation);
        stats.max_deviation_us = stats.max_deviation_us.max(deviation_us);
        if let Some(cell) = stats
            .window_max_deviation_us
            .get_mut(self.ctx.index as usize)
        {
            let heat = u32::try_from(deviation_us).unwrap_or(u32::MAX - 1) + 1;
            *cell = (*cell).max(heat);
        }
    }

    async fn send_control(&mut self, ws: &mut Ws, frame: Utf8Bytes) -> Result<(), End> {
        self.trace.send(monotonic_s(), &frame);
        ws.send(Message::Text(frame))
            .await
            .map_err(|err| End::Failed(format!("sending to the server failed: {err}")))
    }

    /// Takes server events until one satisfies `wanted`. The whole wait is bounded by
    /// `--recv-timeout` (a server that keeps talking without ever sending it does not extend it),
    /// and by [`STOP_GRACE_S`] once the run is being stopped.
    async fn expect(
        &mut self,
        ws: &mut Ws,
        what: &str,
        wanted: impl Fn(&Event) -> bool,
    ) -> Result<(), End> {
        let recv_timeout_s = self.ctx.settings.recv_timeout_s;
        let mut deadline_s = monotonic_s() + recv_timeout_s;
        let mut stop = self.ctx.stop.clone();
        let mut stopping = *stop.borrow();
        if stopping {
            deadline_s = deadline_s.min(monotonic_s() + STOP_GRACE_S);
        }
        loop {
            let msg = tokio::select! {
                msg = ws.next() => msg,
                _ = tokio::time::sleep_until(instant_at(deadline_s)) => {
                    return Err(End::Failed(if stopping {
                        format!("no {what} within {STOP_GRACE_S} s of the stop")
                    } else {
                        format!("no {what} within --recv-timeout {recv_timeout_s}s")
                    }));
                }
                _ = stop.wait_for(|s| *s), if !stopping => {
                    stopping = true;
                    deadline_s = deadline_s.min(monotonic_s() + STOP_GRACE_S);
                    continue;
                }
            };
            let event = self.on_message(msg)?;
            if wanted(&event) {
                return Ok(());
            }
            if let Event::FatalError(why) = event {
                return Err(End::Failed(why));
            }
        }
    }

    /// Traces and interprets one item of the WebSocket stream.
    fn on_message(&mut self, msg: Option<Result<Message, WsError>>) -> Result<Event, End> {
        let now_s = monotonic_s();
        match msg {
            Some(Ok(Message::Text(text))) => Ok(self.on_text(&text, now_s)),
            Some(Ok(Message::Binary(bytes))) => {
                self.protocol_error(
                    now_s,
                    &format!("unexpected binary frame of {} bytes", bytes.len()),
                );
                Ok(Event::Other)
            }
            Some(Ok(Message::Close(frame))) => Err(End::Failed(format!(
                "the server closed the connection mid-session{}",
                frame
                    .map(|f| format!(" (code {}, {:?})", u16::from(f.code), f.reason.as_str()))
                    .unwrap_or_default()
            ))),
            Some(Ok(_)) => Ok(Event::Other), // ping/pong: tungstenite answers pings itself
            Some(Err(WsError::Capacity(err))) => {
                let why = format!(
                    "the server sent a message over --max-message-bytes {} ({err})",
                    self.ctx.settings.max_message_bytes
                );
                self.protocol_error(now_s, &why);
                Err(End::Failed(why))
            }
            Some(Err(
                WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake)
                | WsError::ConnectionClosed
                | WsError::AlreadyClosed,
            )) => Err(End::Failed(
                "the server closed the connection mid-session (without a close frame)".to_string(),
            )),
            Some(Err(err)) => Err(End::Failed(format!(
                "connection to the server failed: {err}"
            ))),
            None => Err(End::Failed(
                "the server closed the connection mid-session".to_string(),
            )),
        }
    }

    fn on_text(&mut self, frame: &Utf8Bytes, now_s: f64) -> Event {
        let text = frame.as_str();
        let event = match protocol::parse_server_event(text) {
            Ok(event) => {
                let payload = if event.kind == names::AUDIO_DELTA {
                    Payload::Json {
                        audio_key: Some("delta"),
                    }
                } else {
                    Payload::Json { audio_key: None }
                };
                self.trace.receive(now_s, frame, payload);
                event
            }
            Err(err) => {
                self.trace.receive(now_s, frame, Payload::Text);
                let prefix: String = text.chars().take(80).collect();
                self.protocol_error(
                    now_s,
                    &format!("server frame is not a JSON event ({err}): {prefix:?}"),
                );
                return Event::Other;
            }
        };
        match &*event.kind {
            names::ACCEPTED => {
                if let Some(start_s) = event.seq.and_then(|seq| self.sent_at(seq)) {
                    self.ctx
                        .stats
                        .borrow_mut()
                        .hist
                        .accepted
                        .record_s(now_s - start_s);
                }
                Event::Other
            }
            names::AUDIO_DELTA => {
                if !self.first_audio_seen {
                    if let Some(origin_s) = self.origin_s {
                        self.first_audio_seen = true;
                        self.ctx
                            .stats
                            .borrow_mut()
                            .hist
                            .first_audio
                            .record_s(now_s - origin_s);
                    }
                }
                Event::Other
            }
            names::UNIT_DONE => {
                let media = event.sglang.as_ref().and_then(|s| s.media_time);
                if let (Some(media), Some(last_seq)) = (media, self.last_seq) {
                    let end_ms = media.t_start_ms + media.duration_ms;
                    let packet_ms = f64::from(self.ctx.settings.packet_ms);
                    let seq =
                        ((end_ms / packet_ms).ceil() as i64 - 1).clamp(0, i64::from(last_seq));
                    if let Some(start_s) = self.sent_at(seq as u64) {
                        self.ctx
                            .stats
                            .borrow_mut()
                            .hist
                            .unit_lag
                            .record_s(now_s - start_s);
                    }
                }
                Event::Other
            }
            names::SESSION_CREATED => Event::Created,
            names::SESSION_UPDATED => Event::Updated,
            names::INPUT_DRAINED => Event::Drained,
            names::SESSION_CLOSED => Event::Closed,
            names::ERROR => {
                self.ctx.stats.borrow_mut().error_events += 1;
                let fatal = event.sglang.as_ref().and_then(|s| s.fatal).unwrap_or(false);
                let (code, message) = event
                    .error
                    .as_ref()
                    .map(|e| {
                        (
                            e.code.as_deref().unwrap_or("?"),
                            e.message.as_deref().unwrap_or(""),
                        )
                    })
                    .unwrap_or(("?", ""));
                if fatal {
                    Event::FatalError(format!(
                        "the server ended the session with error {code}: {message}"
                    ))
                } else {
                    Event::Other
                }
            }
            _ => Event::Other,
        }
    }

    fn sent_at(&self, seq: u64) -> Option<f64> {
        let (ring_seq, start_s) = self.send_ring[seq as usize % SEND_RING];
        (u64::from(ring_seq) == seq).then_some(start_s)
    }

    fn protocol_error(&mut self, now_s: f64, why: &str) {
        self.outcome.protocol_errors += 1;
        self.ctx.stats.borrow_mut().protocol_errors += 1;
        self.trace
            .error(now_s, format!(r#"{{"message":{}}}"#, json_string(why)));
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

    fn event_id(&self, seq: u32) -> u64 {
        protocol::event_id(self.ctx.worker, self.ctx.index, seq)
    }
}

/// Opens the TCP connection (without Nagle's delay: every packet leaves when it is due) and
/// makes the WebSocket handshake over a read buffer of [`SOCKET_READ_BYTES`].
async fn connect_ws(url: &str, config: WebSocketConfig) -> Result<Ws, WsError> {
    let addr = crate::options::url_authority(url).ok_or(WsError::Url(
        tokio_tungstenite::tungstenite::error::UrlError::NoHostName,
    ))?;
    let socket = TcpStream::connect(addr).await.map_err(WsError::Io)?;
    socket.set_nodelay(true).map_err(WsError::Io)?;
    let stream = BufReader::with_capacity(SOCKET_READ_BYTES, socket);
    let (ws, _response) =
        tokio_tungstenite::client_async_with_config(url, stream, Some(config)).await?;
    Ok(ws)
}
