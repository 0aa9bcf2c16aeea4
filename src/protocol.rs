//! The seam between the tool and a wire protocol.
//!
//! A protocol says, once, how a client session speaks it: the steps that set a session up and
//! end it (a frame to send, then a milestone to wait for), the frame for one packet of audio,
//! and what each server frame means. The client session ([`crate::worker::session`]) knows only
//! these meanings — never event names — so pacing, tracing and the measurements stay the same
//! for every protocol, and metrics that only some protocols have hang off the meanings.
//!
//! [`native`] is the first protocol: the full-duplex `/v1/realtime` protocol of sglang-omni;
//! [`funasr`] is Fun-ASR-Nano's realtime recognition server (`serve_realtime_ws.py`).

pub mod funasr;
pub mod native;

use crate::trace::format::Payload;
use std::borrow::Cow;

/// The wire protocols the tool speaks, as client and as mock (`--protocol`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// sglang-omni's native full-duplex `/v1/realtime` (docs/protocol-native.md).
    #[default]
    Native,
    /// Fun-ASR-Nano's realtime recognition server, `serve_realtime_ws.py` (docs/funasr.md).
    Funasr,
}

impl Protocol {
    /// The path the protocol's servers (and its mock) serve it on.
    pub fn path(self) -> &'static str {
        match self {
            Protocol::Native => native::PATH,
            Protocol::Funasr => funasr::PATH,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Native => "native",
            Protocol::Funasr => "funasr",
        }
    }

    /// The packet length its clients send by default, in ms (the benchmark's 100 for Fun-ASR).
    pub fn default_packet_ms(self) -> u32 {
        match self {
            Protocol::Native => 80,
            Protocol::Funasr => funasr::DEFAULT_CHUNK_MS,
        }
    }
}

pub use native::{
    append_frame, input_end, input_packet_bytes, names, session_close, session_update,
    BYTES_PER_SAMPLE, INPUT_SAMPLE_RATE, PATH,
};

/// A frame for the server, encoded once: the trace line is built from the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    Text(String),
    Binary(Vec<u8>),
}

/// One packet of input audio, in the forms a protocol may send it in.
#[derive(Debug, Clone, Copy)]
pub struct AudioPacket<'a> {
    /// PCM16 little-endian samples.
    pub pcm: &'a [u8],
    /// The same samples in base64.
    pub b64: &'a str,
}

/// The points of a session's life that its set-up and ending wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Milestone {
    /// The server opened the session (`session.created`).
    Created,
    /// The server accepted the session's terms; streaming may start (`session.updated`).
    Ready,
    /// The server has taken and answered all the input (`sglang.input_audio.drained`).
    Drained,
    /// The server took a setting asked for during set-up (a language, hotwords).
    Configured,
    /// The server ended the session (`session.closed`).
    Closed,
}

/// What a server frame means to the client session.
#[derive(Debug, Clone, PartialEq)]
pub enum Meaning<'a> {
    Milestone(Milestone),
    /// The server took the packet with this sequence number.
    Accepted {
        seq: u64,
    },
    /// Output audio.
    AudioDelta,
    /// Output text (a transcript or a text delta).
    TextDelta,
    /// A unit of output finished; it answers the input up to `input_end_ms`.
    UnitDone {
        input_end_ms: f64,
    },
    /// A recognition result: provisional, or the final one of the input.
    Transcript {
        is_final: bool,
        /// Its provisional text is not empty.
        partial_text: bool,
        /// It holds any text at all (provisional text, or at least one finished sentence).
        any_text: bool,
        /// The input the server had received when it made the result, if it says.
        duration_ms: Option<f64>,
    },
    /// The server reports an error; a fatal one ends the session.
    Error {
        fatal: bool,
        code: Cow<'a, str>,
        message: Cow<'a, str>,
    },
    /// Anything else the protocol allows.
    Other,
}

/// A classified server frame: its meaning, and how its trace line carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received<'a> {
    pub meaning: Meaning<'a>,
    pub payload: Payload,
    /// The frame's event name as the server spelled it, for protocols whose metrics count
    /// events by name (`None` otherwise).
    pub event: Option<Cow<'a, str>>,
}

/// One step of setting a session up or ending it: send `send` (if any), then wait for `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub send: Option<Outgoing>,
    pub until: Milestone,
    /// The awaited event as people know it, for messages ("no session.created within …").
    pub awaiting: &'static str,
}

/// Makes the client's event ids: run-unique, from the worker, the session and a number.
#[derive(Debug, Clone, Copy)]
pub struct EventIds {
    pub worker: u32,
    pub session: u32,
}

impl EventIds {
    /// A run-unique id: worker, session and sequence number packed in 64 bits.
    pub fn id(self, seq: u32) -> u64 {
        (u64::from(self.worker & 0xffff) << 48)
            | (u64::from(self.session & 0xffff) << 32)
            | u64::from(seq)
    }

    /// Ids for the control commands, counted down from the top so they never meet a packet's.
    pub fn control(self, n: u32) -> u64 {
        self.id(u32::MAX - n)
    }
}

/// The client side of a protocol.
pub trait ClientProtocol {
    /// The steps after connecting and before streaming.
    fn set_up(&self, ids: EventIds) -> Vec<Step>;

    /// The frame that sends packet `seq`, which starts `t_start_ms` into the input.
    fn packet(&self, ids: EventIds, seq: u32, t_start_ms: u64, audio: AudioPacket<'_>) -> Outgoing;

    /// The steps after the last packet; `streamed` says whether any packet was sent.
    fn finish(&self, ids: EventIds, streamed: bool) -> Vec<Step>;

    /// What a text frame from the server means, or why it is not a frame of this protocol.
    fn classify<'a>(&self, text: &'a str) -> Result<Received<'a>, String>;

    /// What a binary frame from the server means, or why it is not a frame of this protocol.
    fn classify_binary(&self, bytes: &[u8]) -> Result<Meaning<'static>, String> {
        Err(format!("unexpected binary frame of {} bytes", bytes.len()))
    }

    /// Whether sessions record the recognition metrics of a transcript benchmark
    /// ([`crate::contract::worker::TranscriptClient`]).
    fn records_transcripts(&self) -> bool {
        false
    }

    /// Whether `--recv-timeout` bounds each gap between server messages (rather than each
    /// awaited event as a whole).
    fn recv_timeout_per_gap(&self) -> bool {
        false
    }

    /// Whether the client, not the server, closes the WebSocket once the session is over.
    fn client_closes(&self) -> bool {
        false
    }
}
