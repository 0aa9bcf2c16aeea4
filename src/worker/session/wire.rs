//! A session's WebSocket once the handshake is done (RFC 6455, client side, no extensions).
//!
//! tungstenite still makes the handshake; this takes over the stream after it (with what the
//! server sent behind its `101`). Server frames are read straight from the socket into a
//! buffer, without zero-filling it first, and handed out as slices of it; a session with
//! nothing buffered lends its buffer to the thread's sessions, and reads into the one emptied
//! last (warm in the cache). The client's frames are masked into the thread's one scratch
//! buffer and written from it in one call (the session's own buffer keeps what the socket did
//! not take). tungstenite's own path copied every frame from the socket's buffer into its frame
//! buffer, zero-filled its read room before every read, and registered two wakers on every
//! poll: about a tenth of a worker's CPU at 1 × 256 (issue 17).
//!
//! It speaks tungstenite's [`Message`] and [`WsError`], so the session reads the same items as
//! before. What it accepts: frames of any length form, fragmented messages with control frames
//! between the fragments, and (liberally) masked server frames. What it refuses, as tungstenite
//! did: reserved bits, unknown opcodes, fragmented or over-long control frames, a continuation
//! without a start, a message over the limit (before its payload is read), text that is not
//! UTF-8, and a connection that ends without a close frame.

use crate::protocol::Outgoing;
use crate::sys::arrival::TimedTcp;
use bytes::{Bytes, BytesMut};
use futures_util::{Sink, Stream};
use std::cell::RefCell;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio_tungstenite::tungstenite::error::{CapacityError, ProtocolError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};

/// The room kept free for each read: the replies to one packet (about 10 kB) come in one read.
const READ_ROOM: usize = 16 << 10;
/// The most room [`SCRATCH`] keeps between frames (a packet is a few kB).
const SCRATCH_KEPT: usize = 1 << 20;
/// A frame header's longest form: 2 bytes, 8 of length, 4 of mask.
const MAX_HEADER: usize = 14;

thread_local! {
    /// Where a frame is masked and written from when nothing waits before it: one buffer for
    /// all the sessions of the thread, warm in the cache, where each session's own output
    /// buffer was cold whenever its next packet came (256 sessions' buffers are 1.3 MB).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The read buffers of the thread's sessions that have nothing buffered, the one emptied
    /// last on top: a session reads into that one, warm, where its own was cold (the replies
    /// to a packet are about 10 kB). Never more than the thread's sessions.
    static IDLE_INPUT: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// The bytes under a session's WebSocket: TCP, or TLS over buffered TCP (rustls reads a record
/// at a time; the buffer keeps that to one system call for a packet's replies).
pub enum Conn {
    Plain(TimedTcp),
    Tls(Box<tokio_rustls::client::TlsStream<BufReader<TimedTcp>>>),
}

impl Conn {
    /// When the bytes of the last read from the socket arrived (the kernel's stamp), on the
    /// monotonic scale; `None` where the kernel gave none. Under TLS, a read served from
    /// records already buffered has the stamp of the socket read that brought them.
    pub fn arrival_s(&self) -> Option<f64> {
        match self {
            Conn::Plain(s) => s.arrival_s(),
            Conn::Tls(s) => s.get_ref().0.get_ref().arrival_s(),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A stream that keeps a copy of everything read through it: the handshake runs over it, and
/// what the server sent after its response's headers is the start of the frames.
pub struct Recording<S> {
    pub inner: S,
    pub seen: Vec<u8>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Recording<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        this.seen.extend_from_slice(&buf.filled()[before..]);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Recording<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// As many response headers as tungstenite's handshake takes.
const MAX_RESPONSE_HEADERS: usize = 124;

/// What the server sent after the end of its handshake response's headers, given everything
/// read during the handshake (which tungstenite has already parsed as a complete response, with
/// the same parser and as many headers).
pub fn after_response(seen: &[u8]) -> Result<&[u8], WsError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(seen) {
        Ok(httparse::Status::Complete(len)) => Ok(&seen[len..]),
        Ok(httparse::Status::Partial) => Err(WsError::Protocol(ProtocolError::HandshakeIncomplete)),
        Err(err) => Err(WsError::Protocol(ProtocolError::HttparseError(err))),
    }
}

/// A frame's header, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    fin: bool,
    opcode: u8,
    mask: Option<[u8; 4]>,
    /// The header's own length in bytes.
    len: usize,
    payload: u64,
}

/// Reads a frame header from the start of `buf`; `None` while it is incomplete.
fn header(buf: &[u8]) -> Result<Option<Header>, WsError> {
    let [first, second, ..] = *buf else {
        return Ok(None);
    };
    if first & 0x70 != 0 {
        return Err(WsError::Protocol(ProtocolError::NonZeroReservedBits));
    }
    let masked = second & 0x80 != 0;
    let (payload, mut len) = match second & 0x7f {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match buf.get(2..10) {
            Some(b) => {
                let mut n = [0; 8];
                n.copy_from_slice(b);
                (u64::from_be_bytes(n), 10)
            }
            None => return Ok(None),
        },
        n => (u64::from(n), 2),
    };
    let mask = if masked {
        let Some(b) = buf.get(len..len + 4) else {
            return Ok(None);
        };
        len += 4;
        Some([b[0], b[1], b[2], b[3]])
    } else {
        None
    };
    Ok(Some(Header {
        fin: first & 0x80 != 0,
        opcode: first & 0x0f,
        mask,
        len,
        payload,
    }))
}

/// XORs `data` with the 4-byte `key`, starting at the key's first byte; eight bytes at a time.
pub fn apply_mask(data: &mut [u8], key: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= key[i % 4];
    }
}

/// The server's frames, turned into messages: fragments joined, sizes and UTF-8 checked.
/// Without I/O (the fuzz target drives it with arbitrary bytes).
pub struct Decoder {
    max_message: usize,
    /// A fragmented message being joined: text or not, and its payload so far.
    fragments: Option<(bool, BytesMut)>,
    /// Bytes still missing of a frame whose header has arrived (room for them is reserved);
    /// 0 while a header is awaited.
    missing: usize,
}

impl Decoder {
    /// `max_message` is clamped to what one allocation can hold.
    pub fn new(max_message: usize) -> Decoder {
        Decoder {
            max_message: max_message.min(isize::MAX as usize - MAX_HEADER),
            fragments: None,
            missing: 0,
        }
    }

    /// Bytes still missing of the frame being read (0 when none is).
    pub fn missing(&self) -> usize {
        self.missing
    }

    /// The next message whose frames are all in `buf` (they are taken out of it); `Ok(None)`
    /// when more bytes are needed. `Message::Close(None)` is a close frame without a code.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, WsError> {
        loop {
            let Some(h) = header(buf)? else {
                self.missing = 0;
                buf.reserve(MAX_HEADER);
                return Ok(None);
            };
            let control = h.opcode & 0x08 != 0;
            if control {
                if !h.fin {
                    return Err(WsError::Protocol(ProtocolError::FragmentedControlFrame));
                }
                if h.payload > 125 {
                    return Err(WsError::Protocol(ProtocolError::ControlFrameTooBig));
                }
            }
            // Control frames between fragments are not part of the message.
            let joined = match &self.fragments {
                Some((_, f)) if !control => f.len() as u64,
                _ => 0,
            };
            let size = joined.saturating_add(h.payload);
            if size > self.max_message as u64 {
                return Err(WsError::Capacity(CapacityError::MessageTooLong {
                    size: usize::try_from(size).unwrap_or(usize::MAX),
                    max_size: self.max_message,
                }));
            }
            // Within the limit, so within memory (the limit is clamped).
            let whole = h.len + h.payload as usize;
            if buf.len() < whole {
                self.missing = whole - buf.len();
                buf.reserve(self.missing);
                return Ok(None);
            }
            self.missing = 0;
            // The header is skipped, the payload taken: one split a frame.
            bytes::Buf::advance(buf, h.len);
            let mut payload = buf.split_to(whole - h.len);
            if let Some(key) = h.mask {
                apply_mask(&mut payload, key);
            }
            if let Some(message) = self.frame(h, payload)? {
                return Ok(Some(message));
            }
        }
    }

    /// One whole frame; `None` for a fragment that does not end its message.
    fn frame(&mut self, h: Header, payload: BytesMut) -> Result<Option<Message>, WsError> {
        let message = match h.opcode {
            0x0 => {
                let Some((_, joined)) = &mut self.fragments else {
                    return Err(WsError::Protocol(ProtocolError::UnexpectedContinueFrame));
                };
                joined.extend_from_slice(&payload);
                if !h.fin {
                    return Ok(None);
                }
                let Some((text, joined)) = self.fragments.take() else {
                    return Ok(None);
                };
                data(text, joined)?
            }
            0x1 | 0x2 => {
                let text = h.opcode == 0x1;
                if self.fragments.is_some() {
                    // Named by the frame that came instead of the fragment, as tungstenite does.
                    let kind = if text { Data::Text } else { Data::Binary };
                    return Err(WsError::Protocol(ProtocolError::ExpectedFragment(kind)));
                }
                if !h.fin {
                    self.fragments = Some((text, payload));
                    return Ok(None);
                }
                data(text, payload)?
            }
            0x8 => Message::Close(close_frame(payload.freeze())?),
            0x9 => Message::Ping(payload.freeze()),
            0xa => Message::Pong(payload.freeze()),
            op if op & 0x08 != 0 => {
                return Err(WsError::Protocol(ProtocolError::UnknownControlFrameType(
                    op,
                )))
            }
            op => return Err(WsError::Protocol(ProtocolError::UnknownDataFrameType(op))),
        };
        Ok(Some(message))
    }
}

fn data(text: bool, payload: BytesMut) -> Result<Message, WsError> {
    if text {
        Utf8Bytes::try_from(payload.freeze())
            .map(Message::Text)
            .map_err(|err| WsError::Utf8(format!("a text frame that is not valid UTF-8 ({err})")))
    } else {
        Ok(Message::Binary(payload.freeze()))
    }
}

/// A close frame's payload: nothing, or a code and a UTF-8 reason. Any code is taken as sent
/// (the trace records it; conformance judges it).
fn close_frame(payload: Bytes) -> Result<Option<CloseFrame>, WsError> {
    match payload.len() {
        0 => Ok(None),
        1 => Err(WsError::Protocol(ProtocolError::InvalidCloseSequence)),
        _ => {
            let code = u16::from_be_bytes([payload[0], payload[1]]);
            let reason = Utf8Bytes::try_from(payload.slice(2..)).map_err(|err| {
                WsError::Utf8(format!(
                    "a close frame whose reason is not valid UTF-8 ({err})"
                ))
            })?;
            Ok(Some(CloseFrame {
                code: CloseCode::from(code),
                reason,
            }))
        }
    }
}

/// Appends one masked client frame to `out`.
pub fn encode(out: &mut Vec<u8>, opcode: u8, payload: &[u8], key: [u8; 4]) {
    out.reserve(MAX_HEADER + payload.len());
    out.push(0x80 | opcode);
    match payload.len() {
        n @ 0..=125 => out.push(0x80 | n as u8),
        n @ 126..=0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&key);
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], key);
}

/// Where the closing handshake is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// We sent a close frame; the server's is awaited.
    CloseSent,
    /// The server sent one; ours (the echo) is queued.
    CloseReceived,
    /// Both sides have sent theirs; what is left is the server closing the connection.
    Closed,
}

/// A client WebSocket over [`Conn`]: a `Stream` of the server's messages and a `Sink` of the
/// client's, as tungstenite's `WebSocketStream` was.
pub struct Ws {
    io: Conn,
    input: BytesMut,
    decoder: Decoder,
    /// Frames encoded and not yet written, from `written`.
    output: Vec<u8>,
    written: usize,
    /// Written to the stream but not yet flushed through it (TLS holds records until then).
    unflushed: bool,
    /// A pong is in `output`: a ping that comes before it is written is not answered again
    /// (RFC 6455 allows answering only the latest; a flood cannot grow `output`).
    pong_queued: bool,
    /// A write failed while reading: reported once the frames already received are handed out.
    write_error: Option<WsError>,
    state: State,
    /// An error or the end has been returned: the stream yields nothing more.
    ended: bool,
    /// When the bytes of the last read arrived: the kernel's stamp of its last segment, or
    /// where there is none, when the read returned ([`crate::clock::monotonic_s`]).
    read_s: f64,
}

/// The time of a read that returned bytes, given the last read's: the kernel's stamp of its
/// bytes where there is one, the clock's now where there is none; never before the last read's.
/// A connection's bytes arrive in order, but two stamps close together can swap on the
/// monotonic scale: each is moved there from the realtime clock by the two clocks' difference
/// read afresh at its read, which moves between reads (the two readings are not simultaneous,
/// and the realtime clock may be slewed); a trace must never go back in time.
fn next_read_s(last_s: f64, arrival_s: Option<f64>) -> f64 {
    arrival_s
        .unwrap_or_else(crate::clock::monotonic_s)
        .max(last_s)
}

impl Ws {
    /// Takes over after the handshake; `tail` is what the server sent after its response.
    pub fn new(io: Conn, tail: &[u8], max_message: usize) -> Ws {
        let mut input = BytesMut::with_capacity(READ_ROOM.max(tail.len()));
        input.extend_from_slice(tail);
        // The tail came in the handshake's last read.
        let read_s = next_read_s(f64::NEG_INFINITY, io.arrival_s());
        Ws {
            io,
            input,
            decoder: Decoder::new(max_message),
            output: Vec::new(),
            written: 0,
            unflushed: false,
            pong_queued: false,
            write_error: None,
            state: State::Open,
            ended: false,
            read_s,
        }
    }

    /// When the message just handed out arrived: the time the bytes of the read that completed
    /// it reached the socket (the kernel's stamp of the read's last segment; the time the read
    /// returned where the kernel gave none). Every frame buffered is handed out before the next
    /// read, so that is the last read (for what came behind the handshake's response, the
    /// handshake's last read). Frames that came in one read share one time.
    pub fn read_s(&self) -> f64 {
        self.read_s
    }

    /// The next data message whose frames are all buffered already, without reading: the
    /// frames that came in the same read as the last one, for the session to take in one turn.
    /// `None` when more bytes are needed, or when a control frame is next: `poll_next` takes
    /// that, and writes its answer at once. (A control frame between the fragments of a
    /// buffered message comes out here; its answer is queued and written by the next poll or
    /// send.)
    pub fn next_buffered(&mut self) -> Option<Result<Message, WsError>> {
        if self.ended || self.input.first().is_none_or(|b| b & 0x08 != 0) {
            return None;
        }
        match self.decoder.decode(&mut self.input) {
            Ok(Some(message)) => self.on_message(message).map(Ok),
            Ok(None) => None,
            Err(err) => {
                self.fail(&err);
                Some(Err(err))
            }
        }
    }

    /// The server's frames broke the protocol (`err`, from the decoder): the connection is
    /// failed (RFC 6455 §7.1.7). The close frame that says why is queued — 1007 for text that
    /// is not UTF-8 (§8.1), 1009 for a message over the limit, 1002 for the rest — and the
    /// stream yields nothing more. The session's own close after that adds no second frame.
    fn fail(&mut self, err: &WsError) {
        self.ended = true;
        if self.state != State::Open {
            return;
        }
        let (code, reason) = match err {
            WsError::Utf8(_) => (CloseCode::Invalid, "invalid UTF-8"),
            WsError::Capacity(_) => (CloseCode::Size, "message too big"),
            _ => (CloseCode::Protocol, "protocol error"),
        };
        self.queue_close(Some(&CloseFrame {
            code,
            reason: Utf8Bytes::from_static(reason),
        }));
        self.state = State::CloseSent;
    }

    /// Whether the read buffer holds nothing: no frame, nor part of one.
    fn idle_input(&self) -> bool {
        self.input.is_empty() && self.decoder.missing() == 0
    }

    /// Starts the closing handshake (or answers the server's) and writes the close frame.
    pub async fn close(&mut self, frame: Option<CloseFrame>) -> Result<(), WsError> {
        futures_util::SinkExt::send(self, Message::Close(frame)).await
    }

    /// Sends one of the session's frames from where it was built (a packet is built into a
    /// buffer the worker reuses, so sending it takes no copy into a `Message` of its own).
    /// Over TCP with nothing waiting before it, it is masked into the thread's [`SCRATCH`] and
    /// written at once, as far as the socket takes it; what is left (all of it, over TLS or
    /// behind other frames) waits in the session's buffer for [`futures_util::SinkExt::flush`],
    /// which must follow either way. A write error is returned here.
    pub fn send_frame(&mut self, frame: &Outgoing) -> Result<(), WsError> {
        if self.state != State::Open {
            return Err(WsError::Protocol(ProtocolError::SendAfterClosing));
        }
        let (opcode, payload) = match frame {
            Outgoing::Text(text) => (0x1, text.as_bytes()),
            Outgoing::Binary(bytes) => (0x2, bytes.as_slice()),
        };
        let stream = match &self.io {
            Conn::Plain(stream) if !self.pending_output() => stream.get_ref(),
            _ => {
                self.queue(opcode, payload);
                return Ok(());
            }
        };
        SCRATCH.with_borrow_mut(|scratch| {
            scratch.clear();
            encode(scratch, opcode, payload, rand::random());
            let written = match stream.try_write(scratch) {
                Ok(n) => n,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => 0,
                Err(err) => return Err(WsError::Io(err)),
            };
            self.output.extend_from_slice(&scratch[written..]);
            if scratch.capacity() > SCRATCH_KEPT {
                // An unusually large frame: its room is not kept for the packets after it.
                *scratch = Vec::new();
            }
            Ok(())
        })
    }

    /// Queues a message, as the `Sink` does (`ws.send` is this and a flush).
    pub fn queue_message(&mut self, message: Message) -> Result<(), WsError> {
        match (message, self.state) {
            (Message::Close(frame), State::Open) => {
                self.queue_close(frame.as_ref());
                self.state = State::CloseSent;
            }
            // The server's close is already answered.
            (Message::Close(_), State::CloseReceived) => self.state = State::Closed,
            (Message::Close(_), State::CloseSent | State::Closed) => {}
            (_, State::CloseSent | State::CloseReceived | State::Closed) => {
                return Err(WsError::Protocol(ProtocolError::SendAfterClosing));
            }
            (Message::Text(text), State::Open) => self.queue(0x1, text.as_bytes()),
            (Message::Binary(bytes), State::Open) => self.queue(0x2, &bytes),
            (Message::Ping(bytes), State::Open) => self.queue(0x9, &bytes),
            (Message::Pong(bytes), State::Open) => self.queue(0xa, &bytes),
            (Message::Frame(_), State::Open) => {
                return Err(WsError::Io(std::io::Error::other(
                    "raw frames are not sent by this client",
                )));
            }
        }
        Ok(())
    }

    fn queue(&mut self, opcode: u8, payload: &[u8]) {
        encode(&mut self.output, opcode, payload, rand::random());
    }

    fn queue_close(&mut self, frame: Option<&CloseFrame>) {
        match frame {
            None => self.queue(0x8, &[]),
            Some(f) => {
                let mut payload = Vec::with_capacity(2 + f.reason.len());
                payload.extend_from_slice(&u16::from(f.code).to_be_bytes());
                payload.extend_from_slice(f.reason.as_bytes());
                self.queue(0x8, &payload);
            }
        }
    }

    /// Something queued is not yet out of the stream.
    fn pending_output(&self) -> bool {
        self.written < self.output.len() || self.unflushed
    }

    /// Writes what is queued, then flushes the stream (TLS writes its records there).
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        while self.written < self.output.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.output[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(WsError::Io(std::io::ErrorKind::WriteZero.into())));
            }
            self.written += n;
            self.unflushed = true;
        }
        self.output.clear();
        self.written = 0;
        self.pong_queued = false;
        ready!(Pin::new(&mut self.io).poll_flush(cx))?;
        self.unflushed = false;
        Poll::Ready(Ok(()))
    }

    /// Writes what the reader queued (pongs, the close echo) as far as the socket takes it.
    /// A failure is kept for after the frames already received (the server's close frame may
    /// be among them); once the server has closed, it changes nothing.
    fn poll_reply_out(&mut self, cx: &mut Context<'_>) {
        if !self.pending_output() {
            return;
        }
        if let Poll::Ready(Err(err)) = self.poll_write_out(cx) {
            self.output.clear();
            self.written = 0;
            self.unflushed = false;
            self.pong_queued = false;
            if self.state == State::Open && self.write_error.is_none() {
                self.write_error = Some(err);
            }
        }
    }

    /// What a message received means for the closing handshake; `None` to skip it.
    fn on_message(&mut self, message: Message) -> Option<Message> {
        match (&message, self.state) {
            (Message::Ping(payload), State::Open) if !self.pong_queued => {
                let payload = payload.clone();
                self.queue(0xa, &payload);
                self.pong_queued = true;
            }
            (Message::Close(frame), State::Open) => {
                // The echo repeats the code, unless it is one no endpoint may send (1005, 1006,
                // 1015, unassigned): then 1002, as tungstenite answered. The message keeps the
                // server's own code either way (the trace records it; tungstenite changed it).
                let echo = frame.as_ref().map(|f| {
                    if f.code.is_allowed() {
                        f.clone()
                    } else {
                        CloseFrame {
                            code: CloseCode::Protocol,
                            reason: Utf8Bytes::from_static("Protocol violation"),
                        }
                    }
                });
                self.queue_close(echo.as_ref());
                self.state = State::CloseReceived;
            }
            (Message::Close(_), State::CloseSent) => self.state = State::Closed,
            // After the server's close, nothing it sends means anything.
            (_, State::CloseReceived | State::Closed) => return None,
            _ => {}
        }
        Some(message)
    }
}

impl Stream for Ws {
    type Item = Result<Message, WsError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        // Pongs and the close echo go out as soon as they can; a full socket is not the
        // reader's concern (the next send or read tries again).
        this.poll_reply_out(cx);
        if this.input.capacity() == 0 && this.idle_input() {
            // The buffer went to the others when the last read found nothing: take the warmest.
            this.input = IDLE_INPUT
                .with_borrow_mut(Vec::pop)
                .unwrap_or_else(|| BytesMut::with_capacity(READ_ROOM));
        }
        loop {
            match this.decoder.decode(&mut this.input) {
                Ok(Some(message)) => {
                    let Some(message) = this.on_message(message) else {
                        continue;
                    };
                    // A pong or the close echo: out now, before the session looks at it.
                    this.poll_reply_out(cx);
                    return Poll::Ready(Some(Ok(message)));
                }
                Ok(None) => {}
                Err(err) => {
                    this.fail(&err);
                    this.poll_reply_out(cx);
                    return Poll::Ready(Some(Err(err)));
                }
            }
            if let Some(err) = this.write_error.take() {
                this.ended = true;
                return Poll::Ready(Some(Err(err)));
            }
            // Room for the next read, unless the frame being read has its room already (a top-up
            // then would move a large message into a buffer twice its size).
            if this.decoder.missing() == 0
                && this.input.capacity() - this.input.len() < READ_ROOM / 4
            {
                this.input.reserve(READ_ROOM);
            }
            let read = tokio_util::io::poll_read_buf(Pin::new(&mut this.io), cx, &mut this.input);
            let Poll::Ready(read) = read else {
                // Nothing to read: an empty buffer waits for whichever session reads next.
                if this.idle_input() && this.input.capacity() > 0 {
                    let idle = std::mem::take(&mut this.input);
                    IDLE_INPUT.with_borrow_mut(|pool| pool.push(idle));
                }
                return Poll::Pending;
            };
            match read {
                Ok(0) => {
                    this.ended = true;
                    return Poll::Ready(match this.state {
                        State::Open | State::CloseSent => Some(Err(WsError::Protocol(
                            ProtocolError::ResetWithoutClosingHandshake,
                        ))),
                        State::CloseReceived | State::Closed => None,
                    });
                }
                Ok(_) => this.read_s = next_read_s(this.read_s, this.io.arrival_s()),
                // A reset after the server's close frame ends the stream, as an end does
                // (tungstenite's reading).
                Err(err)
                    if matches!(this.state, State::CloseReceived | State::Closed)
                        && err.kind() == std::io::ErrorKind::ConnectionReset =>
                {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                Err(err) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(WsError::Io(err))));
                }
            }
            // The read may have been what a blocked write waited for.
            this.poll_reply_out(cx);
        }
    }
}

impl Sink<Message> for Ws {
    type Error = WsError;

    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        // Frames queue behind a blocked write (as tungstenite's unbounded write buffer did);
        // the session bounds the wait itself (`--send-timeout`).
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, message: Message) -> Result<(), WsError> {
        self.get_mut().queue_message(message)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        self.get_mut().poll_write_out(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        let this = self.get_mut();
        match this.state {
            State::Open => {
                this.queue_close(None);
                this.state = State::CloseSent;
            }
            State::CloseReceived => this.state = State::Closed,
            State::CloseSent | State::Closed => {}
        }
        this.poll_write_out(cx)
    }
}

#[cfg(test)]
mod tests;
