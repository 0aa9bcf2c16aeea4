//! The command line as parsed (stage one of two, as in ripgrep): clap derive types only.
//! [`crate::options`] validates them into the settings the rest of the program uses.

pub use crate::profile::Profile;
pub use crate::protocol::{ApiVersion, Protocol, SessionType, TurnDetection};
pub use crate::trace::{TraceMode, TraceWriterMode};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

mod sweep;
pub use sweep::SweepArgs;

#[derive(Debug, Parser)]
#[command(
    name = "duplexbench-tui",
    version,
    about = "Paced load generator for full-duplex realtime speech WebSocket servers that proves its own pacing.",
    long_about = "Paced load generator for full-duplex realtime speech WebSocket servers that proves its own pacing.\n\nWith no subcommand it runs the built-in default: the built-in mock on loopback and 1 x 32 sessions for 30 s.",
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of the default run (the same as `run`).
    #[command(flatten)]
    pub run: RunArgs,
}

impl Cli {
    /// Parses the process's arguments, noting which of the built-in mock's flags a run (or a
    /// sweep's runs) was given, which the parsed values alone cannot tell from their defaults.
    pub fn parse_args() -> Result<Cli, clap::Error> {
        Cli::parse_from_matches(<Cli as clap::CommandFactory>::command().try_get_matches()?)
    }

    /// The same from a list of arguments (tests).
    pub fn parse_args_from<I, T>(argv: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Cli::parse_from_matches(
            <Cli as clap::CommandFactory>::command().try_get_matches_from(argv)?,
        )
    }

    fn parse_from_matches(matches: clap::ArgMatches) -> Result<Cli, clap::Error> {
        let mut cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches)?;
        let mock_flags = MockBehaviourArgs::augment_args(clap::Command::new("mock"));
        let given = |m: &clap::ArgMatches| -> Vec<String> {
            mock_flags
                .get_arguments()
                .filter(|a| {
                    m.value_source(a.get_id().as_str())
                        == Some(clap::parser::ValueSource::CommandLine)
                })
                .filter_map(|a| a.get_long().map(|long| format!("--{long}")))
                .collect()
        };
        match (&mut cli.command, matches.subcommand()) {
            (None, _) => cli.run.mock_flags_given = given(&matches),
            (Some(Command::Run(run)), Some((_, m))) => run.mock_flags_given = given(m),
            (Some(Command::Sweep(sweep)), Some((_, m))) => sweep.run.mock_flags_given = given(m),
            _ => {}
        }
        Ok(cli)
    }
}

/// Where the words used in the help and on the dashboard are explained.
pub const AFTER_HELP: &str = "Words such as pacing-qualified, late packet, deviation, unit lag and D-state stall are explained in docs/glossary.md.";

// `RunArgs` is parsed once per process: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run paced sessions against the built-in mock or a server given with --url.
    #[command(after_help = AFTER_HELP)]
    Run(RunArgs),
    /// Serve a protocol (--protocol) with no model, on loopback by default.
    Mock(MockArgs),
    /// Check that a server speaks its protocol (--protocol): run 2 short sessions against --url, or read recorded --trace files.
    Conform(ConformArgs),
    /// Pool the shards of one run (run with --shard-index/--shard-count on several hosts) into one summary, exactly.
    Merge(MergeArgs),
    /// Run the same run at several loads (--sessions 16..1024): a verdict per level, the client's and the server's knee.
    // The levels take the run's --sessions and -c (lists here); the run's own are hidden.
    #[command(after_help = AFTER_HELP)]
    #[command(mut_arg("sessions", |a| a.hide(true).long("run-sessions").short(None).visible_alias(None)))]
    #[command(mut_arg("concurrency", |a| a.hide(true).long("run-concurrency").short(None)))]
    Sweep(SweepArgs),
    /// Render a run's summary again (Markdown, or text with --text), or compare two runs with --vs; a sweep's folder renders its sweep.md.
    Report(ReportArgs),
    /// Print a shell completion script, e.g. `duplexbench-tui completions bash > ~/.local/share/bash-completion/completions/duplexbench-tui`.
    Completions(CompletionsArgs),
    /// Print a man page (roff): the top-level one, or a subcommand's (`man sweep`); --dir DIR writes them all, e.g. `duplexbench-tui man --dir ~/.local/share/man/man1`.
    Man(ManArgs),
    /// One worker process of a run (started by `run`; not for direct use).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Worker processes to spread the sessions over.
    #[arg(long, short = 'p', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256), help_heading = "Load")]
    pub processes: u32,
    /// Concurrent sessions per worker process (S); the run has total = P × S sessions.
    #[arg(long, short = 's', visible_alias = "clients", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=65535), help_heading = "Load")]
    pub sessions: u32,
    /// Total concurrent sessions (total = P × S), spread evenly over --processes; instead of --sessions.
    #[arg(long, short = 'c', conflicts_with = "sessions", value_parser = clap::value_parser!(u32).range(1..=65535), help_heading = "Load")]
    pub concurrency: Option<u32>,
    /// Audio each session streams, e.g. 30s, 90s, 2m [default: 30s]; with --audio (or Fun-ASR's built-in speech) the file × --loops sets it, and --duration cuts it shorter.
    #[arg(long, short = 'd', allow_hyphen_values = true, value_parser = parse_duration, help_heading = "Load")]
    pub duration: Option<Duration>,
    /// Stream this WAV (mono PCM16 at the input rate: --input-sample-rate, or the protocol's: 24 kHz for openai, 16 kHz otherwise) instead of silence; its length times --loops is each session's audio (cut at --duration if given).
    #[arg(long, value_name = "FILE.wav", help_heading = "Load")]
    pub audio: Option<PathBuf>,
    /// With --audio, how many times each session plays the file before it ends its input.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000), help_heading = "Load")]
    pub loops: u32,
    /// Packet length in milliseconds [default: 80; 100 with --protocol funasr, as its benchmark].
    #[arg(long, visible_alias = "chunk-ms", value_parser = clap::value_parser!(u32).range(10..=1000), help_heading = "Load")]
    pub packet_ms: Option<u32>,
    /// Send every packet as soon as the socket takes it, not on the realtime schedule (a throughput stress test; the pacing verdict then says "unpaced").
    #[arg(long, help_heading = "Load")]
    pub no_pace: bool,
    /// A packet further than this from its schedule is late, in ms [default: one packet].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Load")]
    pub late_threshold_ms: Option<u32>,
    /// Spread the sessions' first packets evenly over one packet interval after the start gate, instead of starting every session at the gate.
    #[arg(long, help_heading = "Load")]
    pub stagger: bool,
    /// Block one worker's runtime once, halfway through the run, for this many ms (busy loop).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=60_000), help_heading = "Load")]
    pub inject_stall_ms: Option<u32>,
    /// Halfway through, this many MiB are dirtied and one worker's runtime fsyncs them (a disk wait).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096), help_heading = "Load")]
    pub inject_disk_stall_mb: Option<u32>,
    /// Halfway through, a spinning thread pinned to one worker's CPU starves its runtime for this many ms.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=900), help_heading = "Load")]
    pub inject_cpu_starvation_ms: Option<u32>,

    /// Server to drive, ws:// or wss://, e.g. ws://127.0.0.1:8765/v1/realtime [default: start the built-in mock].
    #[arg(long, help_heading = "Server")]
    pub url: Option<String>,
    #[command(flatten)]
    pub speak: ProtocolArgs,
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(flatten)]
    pub limits: ServerLimitArgs,
    /// Time one send may block before the session ends as "the server stopped reading" [default: 4 packets].
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration, help_heading = "Server")]
    pub send_timeout: Option<Duration>,
    /// Kernel send buffer of each connection (SO_SNDBUF), in bytes [default: the OS's, autotuned up to megabytes]; the smaller, the sooner a server that stops reading blocks a send (on loopback the server's own receive buffer still takes seconds of audio first).
    #[arg(long, value_parser = clap::value_parser!(u32).range(4096..), help_heading = "Server")]
    pub send_buffer_bytes: Option<u32>,
    /// With --protocol funasr, the language the client sets after START (a LANGUAGE:<name> line): the name goes into the model's prompt as it is, e.g. 中文, English, 日本語 (not a code such as zh); in an openai transcription session, the transcription's language as an ISO-639-1 code, e.g. en (audio.input.transcription.language) [default: none].
    #[arg(long, help_heading = "Server")]
    pub language: Option<String>,
    /// With --protocol funasr, the hotwords the client sets after START, comma-separated (HOTWORDS:w1,w2) [default: none].
    #[arg(long, help_heading = "Server")]
    pub hotwords: Option<String>,
    /// Send a WebSocket ping this often, in seconds; 0 or less disables (the default: off).
    #[arg(
        long,
        default_value_t = 0.0,
        hide_default_value = true,
        allow_negative_numbers = true,
        help_heading = "Server"
    )]
    pub client_ping_interval: f64,
    /// With pings on, end the session when one is not answered within this many seconds; 0 or less waits for ever [default: 20, the benchmark's].
    #[arg(
        long,
        default_value_t = 20.0,
        hide_default_value = true,
        allow_negative_numbers = true,
        help_heading = "Server"
    )]
    pub client_ping_timeout: f64,
    #[command(flatten)]
    pub mock: MockBehaviourArgs,
    /// The built-in mock's flags given on the command line ([`Cli::parse_args`]): with --url
    /// they would change nothing, so they are refused.
    #[arg(skip)]
    pub mock_flags_given: Vec<String>,

    /// Output folder [default: a new time-stamped folder under runs/].
    #[arg(long, short = 'o', help_heading = "Output")]
    pub output: Option<PathBuf>,
    /// Reuse an --output folder that holds a finished run, deleting that run's files (and no others) first.
    #[arg(long, help_heading = "Output")]
    pub force: bool,
    /// What session traces record.
    #[arg(long, value_enum, default_value_t = TraceMode::Full, help_heading = "Output")]
    pub trace: TraceMode,
    /// Who writes traces: one writer thread per worker, or the session loop itself (inline: each write can block every session of the worker while the disk catches up, the bug of the study this tool came from).
    #[arg(long, value_enum, default_value_t = TraceWriterMode::Thread, help_heading = "Output")]
    pub trace_writer: TraceWriterMode,
    /// Not a flag: every run writes summary.json into its --output folder.
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "", value_name = "FILE")]
    pub json: Option<String>,
    /// Keep the session traces (deleted at the end otherwise; about 10 MB per 90 s session in full mode).
    #[arg(long, help_heading = "Output")]
    pub keep_traces: bool,
    /// With --protocol funasr, also write the Fun-ASR benchmark's JSONL here: one {"type":"client",…} line per session, then {"type":"summary",…}.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub output_jsonl: Option<PathBuf>,

    /// How often the procfs sampler reads every client thread, in ms.
    #[arg(long, default_value_t = 5.0, value_parser = parse_interval_ms, help_heading = "Sampling")]
    pub sample_interval_ms: f64,
    /// Do not run the procfs sampler (stalls are then not classified).
    #[arg(long, help_heading = "Sampling")]
    pub no_sampler: bool,
    /// Sample this local server process like the workers (CPU, threads, stalls) [default: the built-in mock, or the process listening on a loopback --url's port].
    #[arg(long, value_name = "PID", help_heading = "Sampling")]
    pub server_pid: Option<u32>,

    /// This host's shard of a run spread over several hosts, 0 to --shard-count − 1 [default: $JOB_COMPLETION_INDEX, else $SLURM_PROCID].
    #[arg(long, value_name = "I", help_heading = "Shards")]
    pub shard_index: Option<u32>,
    /// How many shards (hosts) the run has [default: $SLURM_NTASKS with --shard-index].
    #[arg(long, value_name = "N", help_heading = "Shards")]
    pub shard_count: Option<u32>,
    /// The name of the whole run, the same for every shard; `merge` refuses shards of different runs [default: slurm-$SLURM_JOB_ID].
    #[arg(long, value_name = "ID", help_heading = "Shards")]
    pub run_id: Option<String>,
    /// Hold every session at the start gate until this wall-clock time: RFC 3339 (2026-12-01T12:00:00Z, or with an offset: +01:00) or +30s from now [default: as soon as all are set up].
    #[arg(long, value_name = "TIME", help_heading = "Shards")]
    pub start_at: Option<String>,

    /// Run without the dashboard: progress lines on stderr, the summary on stdout (the default when stdout is not a terminal).
    #[arg(long, help_heading = "Dashboard")]
    pub no_tui: bool,
    /// Close the dashboard as soon as the run ends instead of waiting for a key.
    #[arg(long, help_heading = "Dashboard")]
    pub exit_on_finish: bool,
}

/// Which protocol the client speaks, and how (given to `run` and `conform`).
#[derive(Debug, Clone, Args)]
pub struct ProtocolArgs {
    /// Wire protocol of the server (and of the built-in mock).
    #[arg(long, value_enum, default_value_t = Protocol::Native, help_heading = "Server")]
    pub protocol: Protocol,
    /// Output modalities the client asks for in its session.update, comma-separated: audio, text [default: audio; against the built-in mock with --profile minicpmo, or conform --profile minicpmo, that profile's audio,text].
    #[arg(long, value_delimiter = ',', help_heading = "Server")]
    pub modalities: Option<Vec<String>>,
    /// With --protocol openai: the event names and session shape to send (ga or beta; beta adds the header OpenAI-Beta: realtime=v1).
    #[arg(long, value_enum, default_value_t = ApiVersion::Ga, help_heading = "Server")]
    pub api_version: ApiVersion,
    /// With --protocol openai or vllm: the model named in session.update [vllm: required with --url]; in an openai transcription session, the transcription model (audio.input.transcription.model, e.g. gpt-4o-transcribe) [required with --url; against the built-in mock: gpt-4o-transcribe].
    #[arg(long, help_heading = "Server")]
    pub model: Option<String>,
    /// With --protocol openai: a conversation (realtime: the model answers each turn) or transcription only (transcription: GA names; each committed turn gets its transcript and no response; a --url without an intent gets intent=transcription; a model without VAD, such as gpt-realtime-whisper, needs --turn-detection none) [default: transcription when --url has intent=transcription, else realtime].
    #[arg(long, value_enum, help_heading = "Server")]
    pub session_type: Option<SessionType>,
    /// Sample rate of the PCM16 input, in Hz: 24000 for openai; 16000 for vllm and funasr; for native 16000 (VoiceChat, MiniCPM-o) or 24000 (PersonaPlex), as the server's session.updated grants [default: the protocol's; against the built-in mock, its --profile's]. The --audio file must have it (nothing is resampled).
    #[arg(long, value_parser = clap::value_parser!(u32).range(8_000..=48_000), help_heading = "Server")]
    pub input_sample_rate: Option<u32>,
    /// With --protocol openai: who ends a turn, the server's VAD or the client (a commit at the end of input and every --commit-every).
    #[arg(long, value_enum, default_value_t = TurnDetection::ServerVad, help_heading = "Server")]
    pub turn_detection: TurnDetection,
    /// With --protocol openai and --turn-detection none: also commit the input and ask for a response (a transcription session: its transcript comes unasked) every this much audio, e.g. 5s [default: only at the end].
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration, help_heading = "Server")]
    pub commit_every: Option<Duration>,
    /// With --protocol openai and the server's VAD: speech that starts cancels the response in progress (the API's default). Without it the session asks for interrupt_response false, so each response runs to its end and is timed.
    #[arg(long, help_heading = "Server")]
    pub interrupt_response: bool,
}

/// How sessions connect: TLS and credentials, for every protocol.
#[derive(Debug, Clone, Args)]
pub struct ConnectionArgs {
    /// With wss://, accept any server certificate (for test servers with self-signed ones).
    #[arg(long, help_heading = "Server")]
    pub insecure: bool,
    /// With wss://, also trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE.pem", help_heading = "Server")]
    pub ca_file: Option<PathBuf>,
    /// With wss://, the client certificate (PEM, with its chain) shown to a server that asks for one (mutual TLS); with --client-key.
    #[arg(
        long,
        value_name = "FILE.pem",
        requires = "client_key",
        help_heading = "Server"
    )]
    pub client_cert: Option<PathBuf>,
    /// The PEM private key of --client-cert (not encrypted).
    #[arg(
        long,
        value_name = "FILE.pem",
        requires = "client_cert",
        help_heading = "Server"
    )]
    pub client_key: Option<PathBuf>,
    /// A header for the WebSocket handshake, 'Name: value' (repeatable); values are never written to any file.
    #[arg(long = "header", value_name = "'NAME: VALUE'", help_heading = "Server")]
    pub headers: Vec<String>,
    /// A header whose value is in an environment variable, 'NAME=VAR' (repeatable): the value stays off the command line, which other local users can read with ps.
    #[arg(long = "header-env", value_name = "NAME=VAR", help_heading = "Server")]
    pub header_envs: Vec<String>,
    /// API key sent as Authorization: Bearer KEY; never written to any file. With --protocol
    /// openai or vllm it defaults to $OPENAI_API_KEY (never sent to other servers unasked).
    #[arg(long, help_heading = "Server")]
    pub api_key: Option<String>,
}

/// How long a session waits for the server, and the largest message it takes from it (given to
/// `run` and `conform`): conform's sessions meet the same servers as a run's, so a user who
/// needs another limit for one needs it for the other.
#[derive(Debug, Clone, Args)]
pub struct ServerLimitArgs {
    /// Time allowed for a WebSocket connection and handshake.
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_parser = parse_duration, help_heading = "Server")]
    pub connect_timeout: Duration,
    /// Time allowed for an awaited server event (setup, drained, closed).
    #[arg(long, default_value = "30s", allow_hyphen_values = true, value_parser = parse_duration, help_heading = "Server")]
    pub recv_timeout: Duration,
    /// Largest server message accepted, e.g. 16MiB, 512KiB or a number of bytes (at least 1 KiB); a larger one is a protocol error [default: 16 MiB].
    #[arg(long, visible_alias = "max-message-size", value_name = "SIZE", default_value = "16MiB", hide_default_value = true, value_parser = parse_size, help_heading = "Server")]
    pub max_message_bytes: u64,
}

/// How the mock behaves; given to `mock`, and passed through to the built-in mock by `run`.
#[derive(Debug, Clone, Args)]
pub struct MockBehaviourArgs {
    /// The model the mock plays: voicechat (80 ms units, 22050 Hz, audio), minicpmo (1000 ms units, 24000 Hz, audio and text) or personaplex (80 ms units, 24000 Hz in and out, audio).
    #[arg(long, value_enum, default_value_t = Profile::Voicechat, help_heading = "Mock")]
    pub profile: Profile,
    /// Server events per native unit: audio delta, text deltas, sglang.unit.done (one unit per append with 80 ms units and packets).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=64), help_heading = "Mock")]
    pub replies_per_append: u32,
    /// Group the replies of this many units into one burst.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000), help_heading = "Mock")]
    pub burst_units: u32,
    /// Sample rate of the audio the mock streams back, in Hz [default: the profile's; openai: 24000, its only rate].
    #[arg(long, value_parser = clap::value_parser!(u32).range(8_000..=192_000), help_heading = "Mock")]
    pub output_sample_rate: Option<u32>,
    /// Refuse connections beyond this many open sessions with HTTP 503 [default: no limit].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Mock")]
    pub max_sessions: Option<u32>,
    /// openai and vllm mocks: from the end of a turn (or, for vllm, the first audio) to the first delta, in ms.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(0..=60_000), help_heading = "Mock")]
    pub first_delta_ms: u32,
    /// openai mock: time between two deltas of an answer, in ms [default: 40]; vllm mock: the audio each word of the transcript stands for, in ms [default: 240] (its deltas go out one per 80 ms model step, empty when no word is due, as most of real vLLM's are).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000), help_heading = "Mock")]
    pub delta_interval_ms: Option<u32>,
    /// openai mock: audio deltas in each response (each one delta interval of audio at --output-sample-rate, with a transcript delta).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000), help_heading = "Mock")]
    pub response_deltas: u32,
    /// openai and vllm mocks: the model served (in `run` without --url, --model when given). Given, the vllm mock refuses another with model_not_found, as vLLM does; without it, it serves any name, as vLLM does with VLLM_SKIP_MODEL_NAME_VALIDATION set.
    #[arg(long, default_value = crate::protocol::vllm::MOCK_MODEL, help_heading = "Mock")]
    pub served_model: String,
    /// openai and vllm mocks: answer the first append with an error event of this code (invalid_audio, processing_error, …).
    #[arg(long, value_name = "CODE", help_heading = "Mock")]
    pub mock_error: Option<String>,
    /// openai mock, server VAD without --interrupt-response: a turn that ends while a response is in progress gets no response (the API "may fail to create a response if the model is already responding"); without it the mock queues one behind.
    #[arg(long, help_heading = "Mock")]
    pub skip_busy_turns: bool,
    /// vllm mock: end a transcription after this many model steps (a completion token each) with transcription.done, before its audio does, as vLLM does at the model's realtime_max_tokens; audio after it waits for the next start commit [default: no limit].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Mock")]
    pub max_tokens: Option<u32>,
    /// Stop the whole mock (no reads, no replies, every protocol) once for --stall-ms, this long after its first session connected, e.g. 3s.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_duration, requires = "stall_ms", help_heading = "Mock")]
    pub stall_at: Option<Duration>,
    /// How long the --stall-at stall lasts, in ms.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=60_000), requires = "stall_at", help_heading = "Mock")]
    pub stall_ms: Option<u32>,
    #[command(flatten)]
    pub funasr: FunasrMockArgs,
}

/// How the Fun-ASR mock decodes: the server's cadence and a cost model (docs/funasr.md).
#[derive(
    Debug, Clone, PartialEq, Args, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct FunasrMockArgs {
    /// Least wall time between two partial decodes of a session, in seconds; a decode also needs 480 ms of new audio (960 ms once text came back), as the server's.
    #[arg(
        long,
        default_value_t = 0.48,
        allow_negative_numbers = true,
        help_heading = "Fun-ASR mock"
    )]
    pub decode_interval: f64,
    /// The longest audio window a partial decode covers, in seconds, of the open speech segment (the mock cuts segments at pauses as the server's VAD); 0 or less: the whole segment.
    #[arg(
        long,
        default_value_t = 15.0,
        allow_negative_numbers = true,
        help_heading = "Fun-ASR mock"
    )]
    pub partial_window_sec: f64,
    /// Fixed cost of one engine call, in ms.
    #[arg(long, default_value_t = 20.0, help_heading = "Fun-ASR mock")]
    pub decode_ms: f64,
    /// Cost per second of audio decoded, in ms: a partial's window, a closed segment's or the final's whole segment (a batch costs as its longest).
    #[arg(long, default_value_t = 10.0, help_heading = "Fun-ASR mock")]
    pub decode_ms_per_audio_sec: f64,
    /// Decodes of several sessions arriving within this many ms go to the engine as one batch; 0 turns batching off (one decode a call), as on the real server.
    #[arg(long, default_value_t = 10.0, help_heading = "Fun-ASR mock")]
    pub decode_batch_wait_ms: f64,
    /// The most decodes in one engine call; 1 turns batching off.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096), help_heading = "Fun-ASR mock")]
    pub decode_max_batch_size: u32,
    /// Engine calls that may run at once (GPUs).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64), help_heading = "Fun-ASR mock")]
    pub decode_slots: u32,
    /// Run each decode on the WebSocket event loop itself, blocking every session meanwhile (the seed's warning).
    #[arg(long, help_heading = "Fun-ASR mock")]
    pub blocking_decode: bool,
    /// Log one line per engine call on stderr: requests, samples, audio range, queue wait p50/max, engine ms.
    #[arg(long, help_heading = "Fun-ASR mock")]
    pub log_decode_profile: bool,
    /// WebSocket keepalive: a ping every this many seconds, as the server's `--ws-ping-interval` (websockets' keepalive); 0 or less: none.
    #[arg(
        long,
        default_value_t = 20.0,
        allow_negative_numbers = true,
        help_heading = "Fun-ASR mock"
    )]
    // A summary of before the flag reads 0: those mocks never pinged.
    #[serde(default)]
    pub ws_ping_interval: f64,
    /// A ping not answered within this many seconds closes the connection with 1011 (keepalive ping timeout), as the server's `--ws-ping-timeout`; 0 or less (the server's default): never.
    #[arg(
        long,
        default_value_t = 0.0,
        allow_negative_numbers = true,
        help_heading = "Fun-ASR mock"
    )]
    #[serde(default)]
    pub ws_ping_timeout: f64,
    /// Test fault: never send the `stopped` event.
    #[arg(long, hide = true)]
    pub fault_never_stopped: bool,
}

impl MockBehaviourArgs {
    /// The defaults, as if no flag were given.
    pub fn defaults() -> MockBehaviourArgs {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            behaviour: MockBehaviourArgs,
        }
        match Only::try_parse_from(["mock"]) {
            Ok(only) => only.behaviour,
            // The defaults parse, or `cli_definition_is_consistent` fails.
            Err(err) => unreachable!("{err}"),
        }
    }

    /// `--delta-interval-ms`, or the protocol's default: the openai mock's time between two
    /// deltas, the vllm mock's audio a word stands for.
    pub fn delta_interval_ms(&self, protocol: Protocol) -> u32 {
        self.delta_interval_ms.unwrap_or(match protocol {
            Protocol::Vllm => crate::protocol::vllm::MOCK_WORD_MS,
            _ => crate::protocol::openai::MOCK_DELTA_INTERVAL_MS,
        })
    }
}

impl MockArgs {
    /// `--port`, or the protocol's own default.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(match self.protocol {
            Protocol::Funasr => 10095,
            _ => 8765,
        })
    }
}

#[derive(Debug, Clone, Args)]
pub struct MockArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on; 0 picks a free one [default: 8765; 10095 with --protocol funasr, the
    /// port of Fun-ASR's server and its benchmark client's default --server].
    #[arg(long)]
    pub port: Option<u16>,
    /// Write the mock's statistics to this file on SIGINT or SIGTERM.
    #[arg(long)]
    pub stats_output: Option<PathBuf>,
    /// Wire protocol to serve.
    #[arg(long, value_enum, default_value_t = Protocol::Native)]
    pub protocol: Protocol,
    /// Serve wss:// with this PEM certificate chain (with --tls-key).
    #[arg(long, value_name = "FILE.pem", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE.pem", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With --tls-cert, ask every client for a certificate signed by a CA in this PEM file and refuse the handshake without one (mutual TLS, as a gateway that checks client certificates).
    #[arg(long, value_name = "FILE.pem", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    #[command(flatten)]
    pub behaviour: MockBehaviourArgs,
}

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// The shards' output folders, one per shard (each holds summary.json and workers/).
    #[arg(required = true, num_args = 1.., value_name = "SHARD_DIR")]
    pub shards: Vec<PathBuf>,
    /// Folder for the merged summary.json and summary.md (created; must not hold a summary).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A run's output folder, or its summary.json; or a sweep's folder, or its sweep.json.
    pub run: PathBuf,
    /// Another run to compare it with: both values of every headline figure and their ratio; with two sweeps, level by level over their repeats, and whether each difference is beyond the run-to-run spread.
    #[arg(long, value_name = "OTHER")]
    pub vs: Option<PathBuf>,
    /// Plain text instead of Markdown: the text table of a run or sweep; with --vs, the comparison's tables aligned.
    #[arg(long)]
    pub text: bool,
    /// Compare runs of different loads anyway (the differing settings are still named).
    #[arg(long, requires = "vs")]
    pub force: bool,
    /// For a run whose conductor was killed (its summary.json the provisional one of its start): write the summary rebuilt from its workers' results (workers/worker-K.json) and the mock's statistics over the provisional one, and print its table. `report` without it renders the rebuilt summary and writes nothing.
    #[arg(long, conflicts_with_all = ["vs", "text"])]
    pub rebuild: bool,
}

#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("what").args(["url", "trace"]).required(true)))]
pub struct ConformArgs {
    /// Server to check, e.g. ws://127.0.0.1:8765/v1/realtime: runs --sessions sessions of --duration and checks their traces.
    #[arg(long, conflicts_with = "trace")]
    pub url: Option<String>,
    /// Recorded trace.jsonl files to check, or folders holding them (a run's output folder).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub trace: Vec<PathBuf>,
    /// The model the server must serve [default: the profile its grant names by native_unit_ms].
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// Sessions of the run with --url.
    #[arg(long, short = 's', default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub sessions: u32,
    /// Audio each session streams with --url [default: 5s; with --audio or --protocol funasr the whole file or built-in speech sample, and --duration cuts it shorter].
    #[arg(long, short = 'd', allow_hyphen_values = true, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Output folder of the run with --url [default: a temporary folder, kept only when the server is not conformant].
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// With --url, stream this WAV (mono PCM16 at the input rate: --input-sample-rate, or the protocol's: 24 kHz for openai, 16 kHz otherwise).
    #[arg(long, value_name = "FILE.wav")]
    pub audio: Option<PathBuf>,
    /// With --audio (or --protocol funasr's built-in speech), how many times each session plays it, as `run --loops`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub loops: u32,
    /// With --url and --protocol funasr, the LANGUAGE:<name> the sessions set after START, as `run --language`; in an openai transcription session, the transcription's language (ISO-639-1).
    #[arg(long)]
    pub language: Option<String>,
    /// With --url and --protocol funasr, the HOTWORDS:w1,w2 the sessions set after START, as `run --hotwords`.
    #[arg(long)]
    pub hotwords: Option<String>,
    #[command(flatten)]
    pub speak: ProtocolArgs,
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(flatten)]
    pub limits: ServerLimitArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (run, mock, conform, merge, sweep, report, completions, man); without it, the top-level page.
    pub subcommand: Option<String>,
    /// Write every page into DIR (duplexbench-tui.1, duplexbench-tui-sweep.1, …) instead of printing one.
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// The worker's configuration, written by the conductor.
    #[arg(long)]
    pub config: PathBuf,
}

impl Default for FunasrMockArgs {
    /// The flags' defaults.
    fn default() -> FunasrMockArgs {
        FunasrMockArgs {
            decode_interval: 0.48,
            partial_window_sec: 15.0,
            decode_ms: 20.0,
            decode_ms_per_audio_sec: 10.0,
            decode_batch_wait_ms: 10.0,
            decode_max_batch_size: 16,
            decode_slots: 1,
            blocking_decode: false,
            log_decode_profile: false,
            ws_ping_interval: 20.0,
            ws_ping_timeout: 0.0,
            fault_never_stopped: false,
        }
    }
}

/// Parses a sampling interval in milliseconds (1 to 1000).
fn parse_interval_ms(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(ms) if (1.0..=1000.0).contains(&ms) => Ok(ms),
        _ => Err(format!("`{text}` is not an interval between 1 and 1000 ms")),
    }
}

/// Parses a size in bytes: `16MiB`, `16 MiB`, `512KiB`, `1GiB`, `2MB` (10^6) or a plain number,
/// at least 1 KiB.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => {
            return Err(format!(
                "`{text}` is not a size like 16MiB, 512KiB or 65536 (bytes)"
            ))
        }
    };
    let bytes = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("`{text}` is not a size like 16MiB, 512KiB or 65536 (bytes)"))?;
    if bytes < 1024 {
        return Err(format!("`{text}` is less than 1 KiB"));
    }
    Ok(bytes)
}

/// Parses `30s`, `1m30s`, `250ms` or a plain number of seconds.
///
/// Duration flags take values that start with `-`, so that `-d -5s` is refused here, as
/// negative, rather than by clap as an unknown flag `-5`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('-') {
        return Err(
            if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                format!("`{text}` is negative; give a duration like 30s or 250ms")
            } else {
                format!("`{text}` is not a duration: give one after the flag, like 30s or 250ms")
            },
        );
    }
    if let Ok(seconds) = text.parse::<f64>() {
        if seconds.is_finite() && seconds >= 0.0 {
            return Ok(Duration::from_secs_f64(seconds));
        }
        return Err(format!(
            "`{text}` is not a duration of zero or more seconds"
        ));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration like 30s, 2m or 250ms ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_accept_units_and_plain_seconds() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn a_negative_duration_is_refused_as_negative_not_as_an_unknown_flag() {
        for argv in [
            ["duplexbench-tui", "run", "-d", "-5s"],
            ["duplexbench-tui", "run", "--recv-timeout", "-5s"],
            ["duplexbench-tui", "conform", "--duration", "-1"],
        ] {
            let err = Cli::try_parse_from(argv).unwrap_err().to_string();
            assert!(err.contains("is negative"), "{argv:?}: {err}");
        }
        // A flag where the value should be is named as such, not as a negative duration.
        let err = Cli::try_parse_from(["duplexbench-tui", "run", "-d", "--no-tui"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`--no-tui` is not a duration"), "{err}");
    }

    #[test]
    fn conform_takes_run_s_short_flags_for_its_sessions_and_duration() {
        let argv = [
            "duplexbench-tui",
            "conform",
            "--url",
            "ws://h/",
            "-s",
            "1",
            "-d",
            "2s",
        ];
        let Some(Command::Conform(c)) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("a conform command")
        };
        assert_eq!((c.sessions, c.duration), (1, Some(Duration::from_secs(2))));
    }

    #[test]
    fn sizes_accept_binary_and_decimal_units_issue_14() {
        assert_eq!(parse_size("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("16 MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("512KiB").unwrap(), 512 << 10);
        assert_eq!(parse_size("2MB").unwrap(), 2_000_000);
        assert_eq!(parse_size("16384").unwrap(), 16384);
        assert!(parse_size("12").is_err(), "under 1 KiB");
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999GiB").is_err(), "overflow");
    }

    #[test]
    fn c_is_the_total_and_conflicts_with_sessions_issue_14() {
        let cli = Cli::try_parse_from(["duplexbench-tui", "run", "-p", "2", "-c", "64"]).unwrap();
        let Some(Command::Run(run)) = cli.command else {
            unreachable!()
        };
        assert_eq!(run.concurrency, Some(64));
        assert!(Cli::try_parse_from(["duplexbench-tui", "-c", "4", "-s", "4"]).is_err());
    }

    #[test]
    fn the_fun_asr_mock_defaults_are_the_flags_defaults_issue_11() {
        let cli = Cli::try_parse_from(["duplexbench-tui", "mock"]).unwrap();
        let Some(Command::Mock(mock)) = cli.command else {
            panic!("mock")
        };
        assert_eq!(mock.behaviour.funasr, FunasrMockArgs::default());
    }

    #[test]
    fn no_subcommand_means_the_default_run() {
        let cli = Cli::try_parse_from(["duplexbench-tui"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!((cli.run.processes, cli.run.sessions), (1, 32));
        assert_eq!(cli.run.duration, None);
    }
}
