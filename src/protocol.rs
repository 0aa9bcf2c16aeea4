//! The seam between the tool and a wire protocol.
//!
//! A protocol says, once, how a client session speaks it: the steps that set a session up and
//! end it (a frame to send, then a milestone to wait for), the frame for one packet of audio,
//! and what each server frame means. The client session ([`crate::worker::session`]) knows only
//! these meanings — never event names — so pacing, tracing and the measurements stay the same
//! for every protocol, and metrics that only some protocols have hang off the meanings.
//!
//! [`native`] is the first protocol: the full-duplex `/v1/realtime` protocol of sglang-omni;
//! [`openai`] the OpenAI Realtime API (GA and beta names), [`vllm`] vLLM's transcription
//! `/v1/realtime` (docs/openai-realtime.md); [`funasr`] Fun-ASR-Nano's realtime recognition
//! server (`serve_realtime_ws.py`, docs/funasr.md). No event name of theirs appears outside
//! their files.

pub mod funasr;
pub mod keepalive;
pub mod native;
pub mod openai;
pub mod vllm;

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
    /// The OpenAI Realtime API, GA or beta event names (a client's `--api-version`; the mock
    /// reads both).
    Openai,
    /// vLLM's transcription `/v1/realtime`.
    Vllm,
    /// Fun-ASR-Nano's realtime recognition server, `serve_realtime_ws.py` (docs/funasr.md).
    Funasr,
}

/// Which event names of the OpenAI Realtime API a client speaks (`--api-version`).
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
pub enum ApiVersion {
    /// The GA names (`response.output_audio.delta`, `session.type`).
    #[default]
    Ga,
    /// The beta names (`response.audio.delta`), with the header `OpenAI-Beta: realtime=v1`.
    Beta,
}

/// Who ends a turn of input (`--turn-detection`).
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
pub enum TurnDetection {
    /// The server's voice activity detection: the client just streams.
    #[default]
    ServerVad,
    /// The client: a commit at the end of its input (and every `--commit-every`).
    None,
}

/// The first non-empty value of `key` in a query string, percent-decoded (`+` is a space).
pub fn query_value(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, v)| *k == key && !v.is_empty())
        .map(|(_, v)| percent_decoded(v))
}

/// `text` with its `%XX` escapes decoded and `+` as a space (invalid UTF-8 replaced).
pub fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match bytes[i] {
            b'%' => match (hex(i + 1), hex(i + 2)) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What an OpenAI Realtime session is (`--session-type`; GA's `session.type`).
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
pub enum SessionType {
    /// A conversation: the model answers each turn (`response.*`).
    #[default]
    Realtime,
    /// Transcription only (`?intent=transcription`): each committed turn of input gets its
    /// transcript (`conversation.item.input_audio_transcription.*`), and no response.
    Transcription,
}

impl Protocol {
    /// The path the protocol's servers (and its mock) serve it on.
    pub fn path(self) -> &'static str {
        match self {
            Protocol::Native => native::PATH,
            Protocol::Openai => openai::PATH,
            Protocol::Vllm => vllm::PATH,
            Protocol::Funasr => funasr::PATH,
        }
    }

    /// Whether its servers (and its mock) serve it on `path`: their own path, or for Fun-ASR
    /// any path at all (its server's handler never looks at the path).
    pub fn serves_path(self, path: &str) -> bool {
        self == Protocol::Funasr || path == self.path()
    }

    /// The protocol a server's error text says it speaks, when that is not this one: what
    /// only one protocol's server would say. sglang-omni's native server asks for the append's
    /// `sglang.seq` ("append needs sglang.seq"), which every other protocol's append lacks (not
    /// any "sglang": an OpenAI-compatible server built on SGLang may name its modules);
    /// OpenAI's GA API asks for `session.type`, which no other protocol has.
    pub fn speaks_instead(self, server_error: &str) -> Option<Protocol> {
        if self != Protocol::Native && server_error.contains("sglang.seq") {
            return Some(Protocol::Native);
        }
        if self != Protocol::Openai && server_error.contains("session.type") {
            return Some(Protocol::Openai);
        }
        None
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Native => "native",
            Protocol::Openai => "openai",
            Protocol::Vllm => "vllm",
            Protocol::Funasr => "funasr",
        }
    }

    /// The input sample rate the protocol's servers expect when none is given.
    pub fn default_input_sample_rate(self) -> u32 {
        match self {
            Protocol::Native | Protocol::Vllm | Protocol::Funasr => INPUT_SAMPLE_RATE,
            Protocol::Openai => openai::DEFAULT_SAMPLE_RATE,
        }
    }

    /// The input sample rates the protocol's servers take: sglang-omni's native models 16 kHz
    /// (VoiceChat, MiniCPM-o) or 24 kHz (PersonaPlex); the others one rate each.
    pub fn input_sample_rates(self) -> &'static [u32] {
        match self {
            Protocol::Native => &[INPUT_SAMPLE_RATE, 24_000],
            Protocol::Vllm | Protocol::Funasr => &[INPUT_SAMPLE_RATE],
            Protocol::Openai => &[openai::DEFAULT_SAMPLE_RATE],
        }
    }

    /// The rate the built-in mock streams audio back at without `--output-sample-rate`: the
    /// profile's, 24 kHz for openai (the API's only rate).
    pub fn mock_output_sample_rate(self, profile: crate::profile::Profile) -> u32 {
        match self {
            Protocol::Native | Protocol::Vllm | Protocol::Funasr => profile.output_sample_rate(),
            Protocol::Openai => openai::DEFAULT_SAMPLE_RATE,
        }
    }

    /// The packet length its clients send by default, in ms (the benchmark's 100 for Fun-ASR).
    pub fn default_packet_ms(self) -> u32 {
        match self {
            Protocol::Native | Protocol::Openai | Protocol::Vllm => 80,
            Protocol::Funasr => funasr::DEFAULT_CHUNK_MS,
        }
    }
}

pub use native::{
    append_frame, input_end, input_packet_bytes, names, session_close, session_update,
    BYTES_PER_SAMPLE, INPUT_SAMPLE_RATE, PATH,
};

/// A server frame's JSON as the event `T`, which must be an object: serde reads a struct from a
/// JSON array too (its fields by position), and `["session.created"]` is no event of any
/// protocol here. An array that is not JSON at all keeps its syntax error.
pub(crate) fn json_object<'a, T: serde::Deserialize<'a>>(
    text: &'a str,
) -> Result<T, serde_json::Error> {
    if text.trim_start().starts_with('[') {
        serde_json::from_str::<serde::de::IgnoredAny>(text)?;
        return Err(serde::de::Error::invalid_type(
            serde::de::Unexpected::Seq,
            &"a JSON object",
        ));
    }
    serde_json::from_str(text)
}

/// A string the server chose (an error's code or message), fit for a terminal, a log line and
/// a summary: its control characters written escaped (`\u{1b}`, `\n`: an escape sequence
/// would otherwise reach the user's terminal and recolour or clear it), and cut after
/// `max_chars` characters, saying how long it was.
pub fn server_text(s: &str, max_chars: usize) -> Cow<'_, str> {
    let long = s.chars().nth(max_chars).is_some();
    if !long && !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::new();
    for c in s.chars().take(max_chars) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if long {
        out.push_str(&format!("… ({} bytes in all)", s.len()));
    }
    Cow::Owned(out)
}

/// The most of a server error's code and message that the client repeats.
pub const ERROR_CODE_CHARS: usize = 100;
pub const ERROR_MESSAGE_CHARS: usize = 500;

/// The code reported for a server error whose code is null (or absent): what came, not a guess.
pub const NULL_CODE: &str = "null";

/// Server error codes that refuse a setting of the client's (`--api-version`, `--model`), not
/// something the server got wrong; each has [`error_advice`].
pub const CLIENT_SETTING_CODES: [&str; 2] = ["beta_api_shape_disabled", "model_not_found"];

/// What to do about a server error whose code says more than its message: said in the reason
/// of a session it ended before its first packet, in place of asking whether the server speaks
/// another protocol.
pub fn error_advice(code: &str) -> Option<&'static str> {
    match code {
        // OpenAI's answer to a beta handshake since the beta's retirement (May 2026), before
        // it closes the connection with 4000.
        "beta_api_shape_disabled" => Some(
            "OpenAI no longer serves the Realtime API's beta (OpenAI-Beta: realtime=v1): run with --api-version ga (the default) and no OpenAI-Beta header",
        ),
        // vLLM's (and OpenAI's) answer to a session.update naming a model it does not serve.
        "model_not_found" => Some(
            "the server does not serve the model the session named (--model, or the client's default): give --model with one it serves (`GET /v1/models` on the server lists them)",
        ),
        _ => None,
    }
}

/// How the client speaks its protocol (`--api-version`, `--model`, …).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ClientSettings {
    /// openai: the event names and session shape sent; `None` for the other protocols, which
    /// have no such choice (the summary says null rather than a default that was never used).
    pub api_version: Option<ApiVersion>,
    /// openai, vllm: the model named in `session.update`.
    pub model: Option<String>,
    /// The PCM16 input's sample rate, in Hz (the --audio file's).
    pub input_sample_rate: u32,
    /// openai: who ends a turn; `None` for the other protocols.
    pub turn_detection: Option<TurnDetection>,
    /// openai: the client commits every this many ms of input.
    pub commit_every_ms: Option<u64>,
    /// openai: a conversation or a transcription session; `None` for the other protocols
    /// (and in summaries from before 2026-12-07, all of them realtime).
    #[serde(default)]
    pub session_type: Option<SessionType>,
    /// openai with the server's VAD: whether speech that starts cancels the response in
    /// progress (`--interrupt-response`; the session says so either way). `None` otherwise.
    #[serde(default)]
    pub interrupt_response: Option<bool>,
    /// native: a grant that leaves out the audio asked for is streamed on instead of failing
    /// the set-up — for `conform`, which judges the grant itself (a grant in part, with its
    /// `rejections`, conforms). Left out of the summary when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub audio_grant_optional: bool,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            api_version: None,
            model: None,
            input_sample_rate: INPUT_SAMPLE_RATE,
            turn_detection: None,
            commit_every_ms: None,
            session_type: None,
            interrupt_response: None,
            audio_grant_optional: false,
        }
    }
}

pub use crate::frame::{AudioSpan, Outgoing};

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
    /// The server committed the input buffer into a turn.
    Committed,
    /// The server finished its answer to a turn (a response or a transcription is done).
    Answered,
    /// Every turn the server started has been answered: reached at once when none is open
    /// (the machine decides it, from the turns it has seen).
    Idle,
    /// No response is under way (none created and not yet done): reached at once when none
    /// is. The API refuses a `response.create` while one is.
    Quiet,
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
    /// The transcript of the client's own input (OpenAI's
    /// `conversation.item.input_audio_transcription.delta`, or `.completed` when `done`),
    /// holding text. It is not the answer's text and usually comes before it: a turn's text
    /// only while the server sends none of its answers' own.
    InputText {
        done: bool,
    },
    /// The server granted the session (sglang-omni's `session.updated`): the set-up's `Ready`
    /// milestone, with the native unit and the output rate it granted, as far as it said.
    Granted {
        native_unit_ms: Option<f64>,
        output_rate: Option<f64>,
    },
    /// The server created a response (sglang-omni's `response.created`).
    ResponseCreated,
    /// A response finished (sglang-omni's `response.done`): `completed` when its status says
    /// `completed` (sglang-omni's serving metrics count a session with any other as failed).
    ResponseDone {
        completed: bool,
    },
    /// A unit of output finished: `unit_<index>` (as its `unit_id` says), answering the input
    /// up to `input_end_ms` (as its media time says; `None` for an empty unit).
    UnitDone {
        index: Option<u64>,
        input_end_ms: Option<f64>,
    },
    /// The server's voice activity detection heard speech start, `audio_ms` into the input.
    SpeechStarted {
        audio_ms: Option<f64>,
    },
    /// ... and stop, `audio_ms` into the input: the turn's input ends there.
    SpeechStopped {
        audio_ms: Option<f64>,
    },
    /// The answer to a turn is finished; `completed` is false when it failed or was cut short.
    /// `failure` is the server's error when the answer failed (OpenAI's `response.done` with
    /// status `failed`: a rate limit, a quota, a server error), its code and message: counted
    /// as an error event. An answer cut short on purpose (`cancelled` by a barge-in,
    /// `incomplete` at a token limit) has none.
    TurnDone {
        completed: bool,
        failure: Option<(Cow<'a, str>, Cow<'a, str>)>,
    },
    /// The answer to a turn is finished, complete, with its whole text in it (OpenAI's
    /// transcript `.completed` in a transcription session): the turn's first text too when no
    /// delta brought any (a server may send the transcript in one piece).
    DoneWithText,
    /// A recognition result: provisional, or the final one of the input.
    Transcript {
        is_final: bool,
        /// Its provisional text is not empty.
        partial_text: bool,
        /// It holds any text at all (provisional text, or at least one finished sentence).
        any_text: bool,
        /// The input the server had received when it made the result, if it says.
        duration_ms: Option<f64>,
        /// The frame is also the `stopped` event (a server that puts its last sentences in
        /// it): a result, and the end of the session's recognition.
        stopped: bool,
    },
    /// The server reports an error; a fatal one ends the session.
    Error {
        fatal: bool,
        code: Cow<'a, str>,
        message: Cow<'a, str>,
        /// The `event_id` of the client event it answers, when the server names it.
        answers: Option<Cow<'a, str>>,
    },
    /// A reply of a stream that carries nothing to count: vLLM's empty delta of a model step
    /// that made no text. It shows the server answering (no gap between replies), no more.
    Progress,
    /// Anything else the protocol allows.
    Other,
    /// Well-formed terms this client cannot work with (a granted input rate other than the
    /// run's, no audio granted): the set-up ends with this reason, no protocol error.
    Unusable(String),
}

impl Meaning<'_> {
    /// The milestone this frame reaches, if any: a grant is the set-up's `Ready`.
    pub fn milestone(&self) -> Option<Milestone> {
        match self {
            Meaning::Milestone(m) => Some(*m),
            Meaning::Granted { .. } => Some(Milestone::Ready),
            Meaning::Transcript { stopped: true, .. } => Some(Milestone::Closed),
            _ => None,
        }
    }
}

/// A classified server frame: its meaning, and how its trace line carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received<'a> {
    pub meaning: Meaning<'a>,
    pub payload: Payload,
    /// The frame's event name as the server spelled it, for protocols whose metrics count
    /// events by name (`None` otherwise).
    pub event: Option<Cow<'a, str>>,
    /// The input item the event is about, for protocols whose answers name it (OpenAI's
    /// transcription sessions: its `item_id`, hashed), so that an answer goes to its own turn
    /// whatever order the server answers items in; `None` otherwise.
    pub item: Option<u64>,
}

/// One step of setting a session up or ending it: send `send` (if any), then wait for `until`
/// (if any: a protocol whose server does not answer a command just sends it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub send: Option<Outgoing>,
    pub until: Option<Milestone>,
    /// The awaited event as people know it, for messages ("no session.created within …").
    pub awaiting: &'static str,
    /// What sending this frame does to the session's turns (`None`: nothing).
    pub turn: Option<TurnMark>,
}

/// What sending a step's frame does to the session's turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnMark {
    /// It ends a turn of input and asks for its answer (vLLM's final commit): the turn's
    /// latencies start here.
    EndsAsking,
    /// It ends a turn of input (a commit) whose answer a later step asks for: the turn's
    /// latencies start here, and no response is taken as its answer until it is asked for.
    Ends,
    /// It asks for the answer to the turn a previous step ended (OpenAI's final
    /// `response.create`).
    Asks,
}

/// Makes the client's event ids: run-unique, from the worker, the session and a number.
#[derive(Debug, Clone, Copy)]
pub struct EventIds {
    /// The shard of a run over several hosts (0 on one host; at most 256 shards).
    pub shard: u32,
    pub worker: u32,
    pub session: u32,
}

impl EventIds {
    /// A run-unique id: shard (8 bits), worker (8), session (16) and sequence number (32)
    /// packed in 64 bits; on one host (shard 0) the shard's bits are zero.
    pub fn id(self, seq: u32) -> u64 {
        (u64::from(self.shard & 0xff) << 56)
            | (u64::from(self.worker & 0xff) << 48)
            | (u64::from(self.session & 0xffff) << 32)
            | u64::from(seq)
    }

    /// Ids for the control commands, counted down from the top so they never meet a packet's.
    pub fn control(self, n: u32) -> u64 {
        self.id(u32::MAX - n)
    }

    /// The sequence number in `id` when it is one of this session's (`None`: another's).
    fn sequence_of(self, id: u64) -> Option<u32> {
        (id & !u64::from(u32::MAX) == self.id(0)).then_some(id as u32)
    }

    /// The packet whose id `id` is, if it is one of this session's packets' (the lower half
    /// of the sequence numbers; control commands take the upper).
    pub fn packet_of(self, id: u64) -> Option<u32> {
        self.sequence_of(id).filter(|&seq| seq < u32::MAX / 2)
    }

    /// `n` of [`EventIds::control`] whose id `id` is, if it is one of this session's.
    pub fn control_of(self, id: u64) -> Option<u32> {
        self.sequence_of(id)
            .filter(|&seq| seq >= u32::MAX / 2)
            .map(|seq| u32::MAX - seq)
    }
}

/// The tag of the turn the end of the input ends (a mid-stream turn's is the packet after
/// which it ended).
pub const FINAL_TURN: u32 = u32::MAX;

/// Where a session stands when its input ends, for the protocol's ending steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ending {
    /// Any packet was sent.
    pub streamed: bool,
    /// The server's VAD heard speech start and not stop: the last turn's input is still open.
    pub speech_open: bool,
    /// The server already ended its answer while the input was arriving, and no turn waits
    /// (vLLM's `transcription.done` when the model stops before the audio does): the input's
    /// end gets no answer of its own.
    pub answered_early: bool,
}

/// The client side of a protocol.
pub trait ClientProtocol {
    /// The steps after connecting and before streaming.
    fn set_up(&self, ids: EventIds) -> Vec<Step>;

    /// Builds the frame that sends packet `seq`, which starts `t_start_ms` into the input, into
    /// `frame` (through [`Outgoing::text_buffer`] or [`Outgoing::binary_buffer`], so that its
    /// buffer is reused from packet to packet). Returns where its audio is in a text frame
    /// (`None` for a binary frame).
    fn packet(
        &self,
        frame: &mut Outgoing,
        ids: EventIds,
        seq: u32,
        t_start_ms: u64,
        audio: AudioPacket<'_>,
    ) -> Option<AudioSpan>;

    /// The steps after the last packet.
    fn finish(&self, ids: EventIds, ending: Ending) -> Vec<Step>;

    /// The frames that end a turn right after packet `seq`, whose audio ends `t_end_ms` into
    /// the input with `rest_ms` of input after it, if the client ends one there
    /// (`--commit-every`). Called for every packet but the last (whose turn
    /// [`ClientProtocol::finish`] ends): a packet that ends no turn costs a comparison.
    fn turn_end(
        &self,
        _ids: EventIds,
        _seq: u32,
        _t_end_ms: u64,
        _rest_ms: u64,
    ) -> Option<Vec<Outgoing>> {
        None
    }

    /// Whether an error of `code` refuses a commit for an empty buffer (OpenAI's
    /// `input_audio_buffer_commit_empty`): after the server's VAD committed the input itself
    /// at its end, the client's final commit finds nothing left (the end-of-input race).
    fn refuses_an_empty_commit(&self, _code: &str) -> bool {
        false
    }

    /// The packet a server error names (its `event_id` is `answers`), when the server's
    /// refusal of that packet ends the input: every later packet would be refused too.
    /// `None` for protocols whose refused packet leaves the stream going.
    fn refused_packet_ends_input(&self, _ids: EventIds, _answers: &str) -> Option<u32> {
        None
    }

    /// The turn whose answer a server error naming `answers` refuses (its `response.create`),
    /// if it is one: the packet after which the client ended it, or [`FINAL_TURN`] for the
    /// one the input's end ends. No answer will come to that turn.
    fn refuses_turn(&self, _ids: EventIds, _answers: &str) -> Option<u32> {
        None
    }

    /// The frame that closes the session politely after the server refused something without
    /// ending it (a non-fatal error that ends the session: a refused set-up, packet or ending
    /// command), and the milestone that answers it, for a protocol whose own client sends one
    /// (sglang-omni's sends `session.close` and waits for `session.closed`). `None`: the socket
    /// is closed at once.
    fn goodbye(&self, _ids: EventIds) -> Option<(String, Milestone)> {
        None
    }

    /// What may explain a wait for `awaiting` that ran out of `--recv-timeout`, beyond a slow
    /// server, when the protocol knows of one.
    fn timeout_hint(&self, _awaiting: &str) -> Option<&'static str> {
        None
    }

    /// Headers the protocol adds to the WebSocket handshake (besides `--header`, `--api-key`).
    fn headers(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Whether the client ends the session by closing the socket (the protocol has no goodbye
    /// of its own), rather than waiting for the server's close.
    fn client_closes(&self) -> bool {
        false
    }

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
}

/// The value of `type` when it is a JSON object's first key, read without parsing the rest.
///
/// Most of what a server sends is deltas whose meaning is their type alone; parsing them skipped
/// every byte of their audio once more on the runtime. Whitespace is allowed where JSON allows
/// it (Python servers write `{"type": "…"}`). `None` when `type` is not first, is escaped, or
/// the frame does not end with `}` (cut off): the caller parses those in full.
pub fn leading_type(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let ws = |mut i: usize| {
        while b
            .get(i)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            i += 1;
        }
        i
    };
    let mut i = ws(0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(i + 1);
    if !b.get(i..)?.starts_with(br#""type""#) {
        return None;
    }
    i = ws(i + 6);
    if b.get(i) != Some(&b':') {
        return None;
    }
    i = ws(i + 1);
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let len = memchr::memchr2(b'"', b'\\', b.get(start..)?)?;
    if b[start + len] != b'"' || text.trim_end().as_bytes().last() != Some(&b'}') {
        return None;
    }
    text.get(start..start + len)
}

/// Whether `text` has `"key"` followed by a colon and a string value (whitespace allowed), read
/// without parsing: where a delta read by its [`leading_type`] keeps its audio.
pub fn has_string_key(text: &str, key: &str) -> bool {
    crate::trace::format::string_value(text, key).is_some()
}

#[cfg(test)]
mod tests {
    use super::{has_string_key, leading_type, Protocol};

    #[test]
    fn every_code_that_refuses_a_client_setting_says_which_flag_to_give() {
        // conform tells a refused setting from a server's fault by this advice.
        for code in super::CLIENT_SETTING_CODES {
            let advice = super::error_advice(code).unwrap();
            assert!(advice.contains(" --"), "{code}: {advice}");
        }
    }

    #[test]
    fn a_servers_error_names_the_protocol_it_speaks_only_when_only_one_would_say_it() {
        let sglang = "invalid_request: append needs sglang.seq";
        let openai = "missing_required_parameter: Missing required parameter: 'session.type'.";
        assert_eq!(
            Protocol::Openai.speaks_instead(sglang),
            Some(Protocol::Native)
        );
        assert_eq!(
            Protocol::Vllm.speaks_instead(sglang),
            Some(Protocol::Native)
        );
        assert_eq!(Protocol::Native.speaks_instead(sglang), None, "ours");
        assert_eq!(
            Protocol::Native.speaks_instead(openai),
            Some(Protocol::Openai)
        );
        assert_eq!(Protocol::Openai.speaks_instead(openai), None, "ours");
        assert_eq!(Protocol::Native.speaks_instead("invalid_audio: bad"), None);
        let module = "server_error: sglang.srt.entrypoints failed";
        assert_eq!(Protocol::Openai.speaks_instead(module), None);
    }

    #[test]
    fn server_text_escapes_control_characters_and_cuts_what_is_long() {
        use super::server_text;
        assert!(matches!(
            server_text("rate_limit_exceeded", 100),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            server_text("\u{1b}[2Jgone\nline", 100),
            "\\u{1b}[2Jgone\\nline"
        );
        assert_eq!(server_text("très long", 4), "très… (10 bytes in all)");
        assert_eq!(
            server_text(&"x".repeat(200_000), 3),
            "xxx… (200000 bytes in all)"
        );
    }

    /// A JSON array is no event of any protocol (serde would read a struct from it by
    /// position): it is refused, not taken for `session.created` or Fun-ASR's `stopped`; a
    /// frame that is not JSON at all stays Fun-ASR's kept-and-counted text.
    #[test]
    fn a_json_array_is_refused_as_an_event_by_every_protocol() {
        use super::{funasr::Funasr, native::Native, openai::Openai, vllm::Vllm};
        use super::{ClientProtocol, ClientSettings, Meaning};
        let c = ClientSettings::default();
        let protocols: [Box<dyn ClientProtocol>; 4] = [
            Box::new(Native::default()),
            Box::new(Openai::new(&c, &["audio".to_string()], None, 80)),
            Box::new(Vllm::new(&c)),
            Box::new(Funasr::new(None, None)),
        ];
        for p in &protocols {
            for array in [
                r#"["session.created",{"id":"s"}]"#,
                r#" ["response.done"]"#,
                r#"["stopped"]"#,
                "[1,2]",
            ] {
                let err = p.classify(array).map(|r| r.meaning).unwrap_err();
                assert!(err.contains("a JSON object"), "{array}: {err}");
            }
        }
        let kept = Funasr::new(None, None).classify("[not json").unwrap();
        assert_eq!(kept.meaning, Meaning::Other);
    }

    #[test]
    fn fun_asr_is_served_on_any_path_and_the_others_on_their_own() {
        assert!(Protocol::Funasr.serves_path("/"));
        assert!(Protocol::Funasr.serves_path("/asr/realtime"));
        assert!(Protocol::Native.serves_path("/v1/realtime"));
        assert!(!Protocol::Native.serves_path("/"));
        assert!(!Protocol::Openai.serves_path("/elsewhere"));
    }

    #[test]
    fn a_string_key_is_found_spaced_or_not_and_null_or_nested_text_is_no_string_key() {
        assert!(has_string_key(r#"{"type":"t","delta":"AAAA"}"#, "delta"));
        assert!(has_string_key(
            r#"{"type": "t", "delta" : "AAAA"}"#,
            "delta"
        ));
        assert!(!has_string_key(
            r#"{"type":"t","delta":null,"audio":"AA"}"#,
            "delta"
        ));
        assert!(has_string_key(
            r#"{"type":"t","delta":null,"audio":"AA"}"#,
            "audio"
        ));
        assert!(!has_string_key(r#"{"type":"t","text":"delta"}"#, "delta"));
        assert!(!has_string_key(
            r#"{"type":"t","d":"x"}"#,
            "a_key_longer_than_the_buffer"
        ));
        assert!(has_string_key(
            r#"{"type":"t","a_key_longer_than_the_buffer":"x"}"#,
            "a_key_longer_than_the_buffer"
        ));
        // The key as a value, then as a key: the key is found, where it is.
        let text = r#"{"text":"delta","delta":"AAAA"}"#;
        assert_eq!(
            crate::trace::format::string_value(text, "delta"),
            Some((16, 25))
        );
        assert_eq!(&text[25..29], "AAAA");
        assert!(!has_string_key(r#"{"delta"}"#, "delta"), "no colon");
        assert!(!has_string_key(r#"{"delta":"#, "delta"), "cut off");
    }

    #[test]
    fn leading_type_reads_the_first_key_compact_or_spaced() {
        assert_eq!(
            leading_type(r#"{"type":"a.b","delta":"QUFB"}"#),
            Some("a.b")
        );
        assert_eq!(
            leading_type(" {\n \"type\" : \"a.b\", \"delta\": \"QUFB\"}\n"),
            Some("a.b")
        );
    }

    #[test]
    fn leading_type_leaves_everything_else_to_the_parser() {
        for text in [
            r#"{"event_id":"x","type":"a.b"}"#, // not first
            r#"{"type":"a\"b","x":1}"#,         // escaped
            r#"{"type":"a.b","delta":"QUF"#,    // cut off
            r#"{"type":1}"#,                    // not a string
            r#"{"types":"a.b"}"#,               // another key
            r#"["type","a.b"]"#,
            "",
            "{",
            r#"{"type":""#,
        ] {
            assert_eq!(leading_type(text), None, "{text:?}");
        }
    }
}
