//! The command line validated (stage two): the settings a run is made of, in the form the
//! conductor, the workers and the summary share. Every error here names the flag at fault.

use crate::audio::AudioSource;
use crate::cli::{ConnectionArgs, MockBehaviourArgs, Profile, ProtocolArgs, RunArgs};
pub use crate::protocol::ClientSettings;
use crate::protocol::{ApiVersion, Protocol, SessionType, TurnDetection};
use crate::secret::Secret;
use crate::trace::{TraceMode, TraceWriterMode};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub mod shard;
pub use shard::Shard;

/// Connection attempts refused with HTTP 503 are retried this many times...
pub const ADMISSION_RETRIES: u32 = 3;
/// ...this far apart.
pub const ADMISSION_RETRY_INTERVAL_MS: u64 = 250;

/// Each session's audio without `--duration` or `--audio`.
pub const DEFAULT_DURATION: std::time::Duration = std::time::Duration::from_secs(30);

/// A send blocked this many packet intervals means the server stopped reading.
pub const SEND_TIMEOUT_PACKETS: u32 = 4;

/// Every setting that shapes the load, as validated. Serialised as `settings` in the summary
/// and handed to each worker.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settings {
    /// The server driven; for the built-in mock, the address it was given at start-up.
    pub url: String,
    pub builtin_mock: bool,
    pub processes: u32,
    pub sessions_per_process: u32,
    pub duration_s: f64,
    pub packet_ms: u32,
    /// Packets each session sends: `ceil(duration / packet)`; the last one may be short.
    pub packets_per_session: u32,
    pub late_threshold_ms: u32,
    /// Packet 0 of session k (of all N, worker-major) is due at the gate plus k/N of a packet.
    pub stagger: bool,
    /// Sends more than this far behind are counted as slow (the serving benchmark's diagnostic).
    pub slow_send_threshold_ms: u32,
    pub inject_stall_ms: Option<u32>,
    pub inject_disk_stall_mb: Option<u32>,
    pub inject_cpu_starvation_ms: Option<u32>,
    /// The procfs sampler's interval, or `None` with `--no-sampler`.
    pub sample_interval_ms: Option<f64>,
    /// `--server-pid`: the local server to sample beside the workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_pid: Option<u32>,
    pub connect_timeout_s: f64,
    pub recv_timeout_s: f64,
    /// The wire protocol spoken.
    #[serde(default)]
    pub protocol: crate::protocol::Protocol,
    /// The output modalities the client asks for.
    #[serde(default = "default_modalities")]
    pub modalities: Vec<String>,
    /// How the client speaks its protocol.
    pub client: ClientSettings,
    /// TLS and credentials; the credentials are written as `<redacted>`.
    pub connection: ConnectionSettings,
    /// Fun-ASR: the language and hotwords set after START.
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub hotwords: Option<String>,
    /// `--no-pace`: packets go out as fast as the socket takes them; pacing is not judged.
    #[serde(default)]
    pub no_pace: bool,
    /// WebSocket keepalive pings: every `client_ping_interval_s` (≤ 0: none), ending the
    /// session when one is not answered within `client_ping_timeout_s` (≤ 0: never).
    #[serde(default)]
    pub client_ping_interval_s: f64,
    #[serde(default)]
    pub client_ping_timeout_s: f64,
    /// How long one send may block before the session ends: the server stopped reading.
    pub send_timeout_s: f64,
    /// SO_SNDBUF of each connection, or the OS's default.
    #[serde(default)]
    pub send_buffer_bytes: Option<u32>,
    pub max_message_bytes: u64,
    pub admission_retries: u32,
    pub admission_retry_interval_ms: u64,
    pub trace: TraceMode,
    pub trace_writer: TraceWriterMode,
    pub keep_traces: bool,
    /// Input audio, PCM16 at the protocol's input rate: silence, a WAV file or the built-in
    /// speech sample.
    pub audio: AudioSource,
    /// How the built-in mock was told to behave (null with `--url`).
    pub mock: Option<MockBehaviour>,
    pub tui: bool,
    /// `--shard-index`/`--shard-count`/`--run-id`: this run is one shard of a run over several
    /// hosts (absent on one host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// `--start-at`: the wall-clock instant (Unix seconds) the start gate opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_s: Option<f64>,
}

/// How sessions connect. The secrets serialise as `<redacted>`; a worker gets them from the
/// conductor through [`crate::secret::SECRETS_ENV`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConnectionSettings {
    /// wss:// without verifying the server's certificate.
    pub insecure: bool,
    /// CA certificates trusted besides the system's.
    pub ca_file: Option<PathBuf>,
    /// `--client-cert`: the certificate shown to a server that asks for one (mutual TLS), the
    /// path only; null without.
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    /// `--client-key`: the file of that certificate's private key, the path only (never its
    /// contents); null without.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// `--header` values, by name.
    pub headers: Vec<Header>,
    /// `--api-key` / `OPENAI_API_KEY`, sent as `Authorization: Bearer …`.
    pub api_key: Option<Secret>,
    /// The values of `--url`'s credential query parameters (`api-key=`, `token=`, …), in
    /// order; the URL is kept and written with `<redacted>` in their place.
    #[serde(default)]
    pub url_secrets: Vec<Secret>,
}

impl ConnectionSettings {
    /// The URL to connect to: `url` (as written) with its credential parameters put back.
    pub fn connect_url(&self, url: &str) -> String {
        crate::secret::restore_url(url, &self.url_secrets)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Header {
    pub name: String,
    pub value: Secret,
}

/// The secrets of a [`ConnectionSettings`], as they travel to a worker.
#[derive(Serialize, Deserialize)]
struct Secrets {
    api_key: Option<String>,
    headers: Vec<String>,
    #[serde(default)]
    url: Vec<String>,
}

impl ConnectionSettings {
    /// The secrets, for the worker's environment; `None` when there are none.
    pub fn secrets_env(&self) -> Option<String> {
        if self.api_key.is_none() && self.headers.is_empty() && self.url_secrets.is_empty() {
            return None;
        }
        let secrets = Secrets {
            api_key: self.api_key.as_ref().map(|k| k.expose().to_string()),
            headers: self
                .headers
                .iter()
                .map(|h| h.value.expose().to_string())
                .collect(),
            url: self
                .url_secrets
                .iter()
                .map(|s| s.expose().to_string())
                .collect(),
        };
        serde_json::to_string(&secrets).ok()
    }

    /// Puts back the secrets a worker config was written without.
    pub fn restore_secrets(&mut self, env: &str) -> Result<()> {
        let secrets: Secrets = serde_json::from_str(env)
            .map_err(|e| anyhow::anyhow!("the secrets handed to the worker are unreadable: {e}"))?;
        if let (Some(key), Some(value)) = (&mut self.api_key, secrets.api_key) {
            *key = Secret::new(value);
        }
        for (header, value) in self.headers.iter_mut().zip(secrets.headers) {
            header.value = Secret::new(value);
        }
        for (secret, value) in self.url_secrets.iter_mut().zip(secrets.url) {
            *secret = Secret::new(value);
        }
        Ok(())
    }

    /// The handshake headers: `--header`s, then the key.
    pub fn handshake_headers(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|h| (h.name.clone(), h.value.expose().to_string()))
            .collect();
        if let Some(key) = &self.api_key {
            out.push((
                "Authorization".to_string(),
                format!("Bearer {}", key.expose()),
            ));
        }
        out
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MockBehaviour {
    /// The model the mock plays; absent in summaries written before profiles existed.
    #[serde(default = "default_profile")]
    pub profile: Profile,
    pub replies_per_append: u32,
    pub burst_units: u32,
    pub output_sample_rate: u32,
    pub max_sessions: Option<u32>,
    /// openai and vllm mocks: the answer's timing and the model served.
    #[serde(default)]
    pub first_delta_ms: u32,
    #[serde(default)]
    pub delta_interval_ms: u32,
    #[serde(default)]
    pub response_deltas: u32,
    #[serde(default)]
    pub served_model: String,
    #[serde(default)]
    pub mock_error: Option<String>,
    /// openai mock: a VAD turn ending while a response is in progress gets none
    /// (`--skip-busy-turns`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_busy_turns: bool,
    /// vllm mock: the model steps after which a transcription ends (`--max-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// `--stall-at` (seconds after the first session) and `--stall-ms`: the mock stops once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<MockStall>,
    /// The Fun-ASR mock's cadence and cost model (with `--protocol funasr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub funasr: Option<crate::cli::FunasrMockArgs>,
}

/// A stall of the whole mock: it stops reading and replying for `ms`, once, `at_s` seconds
/// after its first session connected.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MockStall {
    pub at_s: f64,
    pub ms: u32,
}

impl MockStall {
    pub fn from_args(args: &MockBehaviourArgs) -> Option<MockStall> {
        Some(MockStall {
            at_s: args.stall_at?.as_secs_f64(),
            ms: args.stall_ms?,
        })
    }
}

fn default_profile() -> Profile {
    Profile::Voicechat
}

impl MockBehaviour {
    pub fn from_args(args: &MockBehaviourArgs, protocol: Protocol) -> Self {
        MockBehaviour {
            profile: args.profile,
            replies_per_append: args.replies_per_append,
            burst_units: args.burst_units,
            output_sample_rate: args
                .output_sample_rate
                .unwrap_or_else(|| protocol.mock_output_sample_rate(args.profile)),
            max_sessions: args.max_sessions,
            first_delta_ms: args.first_delta_ms,
            delta_interval_ms: args.delta_interval_ms(protocol),
            response_deltas: args.response_deltas,
            served_model: args.served_model.clone(),
            mock_error: args.mock_error.clone(),
            max_tokens: args.max_tokens,
            skip_busy_turns: args.skip_busy_turns,
            stall: MockStall::from_args(args),
            funasr: None,
        }
    }

    /// The same behaviour as `mock` command-line flags.
    pub fn to_flags(&self) -> Vec<String> {
        let mut flags = vec![
            "--profile".to_string(),
            self.profile.name().to_string(),
            "--replies-per-append".to_string(),
            self.replies_per_append.to_string(),
            "--burst-units".to_string(),
            self.burst_units.to_string(),
            "--output-sample-rate".to_string(),
            self.output_sample_rate.to_string(),
        ];
        if let Some(max) = self.max_sessions {
            flags.push("--max-sessions".to_string());
            flags.push(max.to_string());
        }
        for (flag, value) in [
            ("--first-delta-ms", self.first_delta_ms),
            ("--delta-interval-ms", self.delta_interval_ms),
            ("--response-deltas", self.response_deltas),
        ] {
            if value > 0 {
                flags.extend([flag.to_string(), value.to_string()]);
            }
        }
        if !self.served_model.is_empty() {
            flags.extend(["--served-model".to_string(), self.served_model.clone()]);
        }
        if let Some(code) = &self.mock_error {
            flags.extend(["--mock-error".to_string(), code.clone()]);
        }
        if self.skip_busy_turns {
            flags.push("--skip-busy-turns".to_string());
        }
        if let Some(max) = self.max_tokens {
            flags.extend(["--max-tokens".to_string(), max.to_string()]);
        }
        if let Some(stall) = &self.stall {
            flags.extend([
                "--stall-at".to_string(),
                format!("{}s", stall.at_s),
                "--stall-ms".to_string(),
                stall.ms.to_string(),
            ]);
        }
        if let Some(f) = &self.funasr {
            for (flag, value) in [
                ("--decode-interval", f.decode_interval.to_string()),
                ("--partial-window-sec", f.partial_window_sec.to_string()),
                ("--decode-ms", f.decode_ms.to_string()),
                (
                    "--decode-ms-per-audio-sec",
                    f.decode_ms_per_audio_sec.to_string(),
                ),
                ("--decode-batch-wait-ms", f.decode_batch_wait_ms.to_string()),
                (
                    "--decode-max-batch-size",
                    f.decode_max_batch_size.to_string(),
                ),
                ("--decode-slots", f.decode_slots.to_string()),
                ("--ws-ping-interval", f.ws_ping_interval.to_string()),
                ("--ws-ping-timeout", f.ws_ping_timeout.to_string()),
            ] {
                flags.push(flag.to_string());
                flags.push(value);
            }
            for (flag, on) in [
                ("--blocking-decode", f.blocking_decode),
                ("--log-decode-profile", f.log_decode_profile),
                ("--fault-never-stopped", f.fault_never_stopped),
            ] {
                if on {
                    flags.push(flag.to_string());
                }
            }
        }
        flags
    }
}

fn default_modalities() -> Vec<String> {
    vec!["audio".to_string()]
}

/// The modalities the client asks for: `--modalities`, or what the built-in mock's profile
/// serves (MiniCPM-o: audio and text), or audio against a server whose profile is unknown. An
/// OpenAI beta session asks for `["audio","text"]` or `["text"]` (audio comes with its
/// transcript there): recorded as sent, so that two runs that sent the same compare alike.
fn modalities(args: &RunArgs) -> Vec<String> {
    let asked = asked_modalities(args);
    if args.speak.protocol == Protocol::Openai
        && args.speak.api_version == crate::protocol::ApiVersion::Beta
    {
        let audio = asked.iter().any(|m| m == "audio");
        let sent: &[&str] = if audio { &["audio", "text"] } else { &["text"] };
        return sent.iter().map(ToString::to_string).collect();
    }
    asked
}

fn asked_modalities(args: &RunArgs) -> Vec<String> {
    match &args.speak.modalities {
        Some(given) => given.clone(),
        None if args.url.is_none() && args.speak.protocol == Protocol::Native => args
            .mock
            .profile
            .output_modalities()
            .iter()
            .map(ToString::to_string)
            .collect(),
        None => default_modalities(),
    }
}

/// A validated run: its settings, where it writes, and how it was invoked.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub settings: Settings,
    pub output_dir: PathBuf,
    /// No `--output`: the run takes a folder of its own, `output_dir` (`runs/<time stamp>`) or,
    /// when that exists, the first free one of `output_dir-2`, `-3`, …
    pub new_output: bool,
    /// `--force`: an output folder that holds a finished run is cleared of its files, not refused.
    pub force: bool,
    pub command_line: String,
    /// `--output-jsonl`: where the Fun-ASR benchmark's JSONL goes.
    pub output_jsonl: Option<PathBuf>,
}

impl Settings {
    /// Bytes of PCM16 input each session sends in all.
    pub fn input_bytes(&self) -> usize {
        let samples = self.audio.total_samples().unwrap_or_else(|| {
            (self.duration_s * f64::from(self.client.input_sample_rate)).round() as u64
        });
        samples as usize * crate::protocol::BYTES_PER_SAMPLE
    }

    /// The thresholds every packet is judged by.
    pub fn thresholds(&self) -> crate::pacing::Thresholds {
        crate::pacing::Thresholds::from_ms(self.late_threshold_ms, self.slow_send_threshold_ms)
    }

    pub fn packet_s(&self) -> f64 {
        f64::from(self.packet_ms) / 1000.0
    }

    /// Whether any fault is injected (into worker 0, halfway through).
    pub fn injects(&self) -> bool {
        self.inject_stall_ms.is_some()
            || self.inject_disk_stall_mb.is_some()
            || self.inject_cpu_starvation_ms.is_some()
    }

    pub fn total_sessions(&self) -> u64 {
        u64::from(self.processes) * u64::from(self.sessions_per_process)
    }
}

/// Validates parsed arguments into a plan. `tui` says whether the dashboard will run.
pub fn validate(args: &RunArgs, command_line: String, tui: bool) -> Result<RunPlan> {
    if args.json.is_some() {
        bail!(
            "--json is not a flag: every run writes summary.json (and summary.md) into its output folder; give --output DIR and read DIR/summary.json"
        );
    }
    let sessions = sessions_per_process(args)?;
    let shard = shard::shard_of(args, &|name| std::env::var(name).ok())?;
    let start_at_unix_s = args
        .start_at
        .as_deref()
        .map(|text| shard::start_at(text, crate::clock::realtime_s()))
        .transpose()?;
    let packet_ms = args
        .packet_ms
        .unwrap_or_else(|| args.speak.protocol.default_packet_ms());
    // The built-in native mock takes its profile's input rate.
    let mock_profile = (args.url.is_none() && args.speak.protocol == Protocol::Native)
        .then_some(args.mock.profile);
    let client = client_settings(&args.speak, args.url.as_deref(), mock_profile, packet_ms)?;
    if args.url.is_none() {
        check_output_rate(args.speak.protocol, &args.mock)?;
    }
    let audio = audio_of(args, client.input_sample_rate, mock_profile)?;
    let (duration_s, packets) = duration_of(args, &audio, client.input_sample_rate, packet_ms)?;
    check_limits(args, duration_s, sessions, &client)?;
    let url = match &args.url {
        Some(url) => {
            check_url(url)?;
            check_no_mock_flags(&args.mock_flags_given)?;
            match client.session_type {
                Some(SessionType::Transcription) => with_transcription_intent(url),
                _ => url.clone(),
            }
        }
        None => String::new(),
    };
    if let Some(pid) = args.server_pid {
        check_server_pid(pid, args.url.is_some())?;
    }
    let mut connection =
        connection_settings(&args.connection, &url, args.speak.protocol, &|name| {
            std::env::var(name).ok()
        })?;
    // The URL as written everywhere (summary, configs, logs, the dashboard) keeps its
    // credential parameters out; the workers put them back to connect.
    let (url, url_secrets) = crate::secret::split_url_secrets(&url);
    connection.url_secrets = url_secrets;
    let output_dir = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(crate::clock::utc_stamp()));
    let checked = Checked {
        url,
        sessions,
        duration_s,
        packet_ms,
        packets,
        client,
        connection,
        audio,
        tui,
        shard,
        start_at_unix_s,
    };
    Ok(RunPlan {
        settings: checked.settings(args),
        output_dir,
        new_output: args.output.is_none(),
        force: args.force,
        command_line,
        output_jsonl: args.output_jsonl.clone(),
    })
}

/// The input audio: silence, an `--audio` file (looped), or Fun-ASR's built-in speech sample;
/// `--duration` cuts a file or the sample shorter. `mock_profile`: the built-in native mock's.
fn audio_of(args: &RunArgs, rate: u32, mock_profile: Option<Profile>) -> Result<AudioSource> {
    let funasr = args.speak.protocol == Protocol::Funasr;
    let whole = match &args.audio {
        // Fun-ASR recognises speech: without --audio it streams the built-in sample.
        None if funasr => crate::audio::speech_sample(args.loops)?,
        None if args.loops != 1 => bail!("--loops repeats an --audio file; give --audio FILE.wav"),
        None => return Ok(AudioSource::Silence),
        Some(path) => AudioSource::Wav {
            path: path.clone(),
            samples: crate::audio::probe_for(path, rate, Some(args.speak.protocol), mock_profile)?,
            loops: args.loops,
            cut: None,
            sha256: Some(crate::audio::file_sha256(path)?),
        },
    };
    match args.duration {
        Some(duration) => cut_to(whole, duration, rate),
        None => Ok(whole),
    }
}

/// `--duration` with a file (or Fun-ASR's sample): each session's input ends there. A file
/// shorter than that is refused with the `--loops` that would make it long enough: nothing is
/// repeated that was not asked for.
fn cut_to(whole: AudioSource, duration: std::time::Duration, rate: u32) -> Result<AudioSource> {
    let (name, samples, loops) = match &whole {
        AudioSource::Wav {
            path,
            samples,
            loops,
            ..
        } => (format!("--audio {}", path.display()), *samples, *loops),
        AudioSource::Sample { samples, loops, .. } => (
            "the built-in speech sample (--protocol funasr's input without --audio)".to_string(),
            *samples,
            *loops,
        ),
        AudioSource::Silence => return Ok(whole),
    };
    // The limits first: no --loops would make a longer input.
    check_duration_limit(duration.as_secs_f64())?;
    if duration.as_secs_f64() > crate::audio::MAX_INPUT_S {
        bail!(
            "--duration {} of {name}: at most {} of audio are held in memory; give a --duration of at most that",
            humantime::format_duration(duration),
            audio_length(crate::audio::MAX_INPUT_S),
        );
    }
    let at = (duration.as_secs_f64() * f64::from(rate)).round() as u64;
    let have = whole.total_samples().unwrap_or(0);
    if at > have {
        let length = audio_length(have as f64 / f64::from(rate));
        bail!(
            "--duration {} is longer than {name}: {length} of audio{}; give --loops {} to repeat it that often (the last play is cut at --duration), or a --duration of at most {length}",
            humantime::format_duration(duration),
            if loops > 1 { format!(" with --loops {loops}") } else { String::new() },
            at.div_ceil(samples.max(1)),
        );
    }
    Ok(whole.cut_at(at))
}

/// A length of audio as the messages say it: to the millisecond (`5s 828ms`, not `5s 828ms
/// 62us`), rounded down, so that an "at most" it names is never refused itself.
pub fn audio_length(seconds: f64) -> humantime::FormattedDuration {
    humantime::format_duration(std::time::Duration::from_millis(
        (seconds * 1000.0).floor() as u64
    ))
}

/// A session's audio is at most a day.
fn check_duration_limit(duration_s: f64) -> Result<()> {
    if duration_s > 24.0 * 3600.0 {
        bail!("--duration must be at most 24h");
    }
    Ok(())
}

/// Each session's audio in seconds (the file's, or `--duration`), and its packets.
fn duration_of(
    args: &RunArgs,
    audio: &AudioSource,
    rate: u32,
    packet_ms: u32,
) -> Result<(f64, f64)> {
    let duration_s = match (audio, args.duration) {
        (AudioSource::Wav { .. } | AudioSource::Sample { .. }, _) => {
            audio.total_samples().unwrap_or(0) as f64 / f64::from(rate)
        }
        (AudioSource::Silence, duration) => duration.unwrap_or(DEFAULT_DURATION).as_secs_f64(),
    };
    if audio.total_samples().is_some() && duration_s > crate::audio::MAX_INPUT_S {
        bail!(
            "--audio × --loops is {:.0} s of audio; at most {:.0} s are held in memory: give fewer --loops, or a --duration of at most {} to cut it there",
            duration_s,
            crate::audio::MAX_INPUT_S,
            audio_length(crate::audio::MAX_INPUT_S),
        );
    }
    if duration_s < f64::from(packet_ms) / 1000.0 {
        let length = humantime::format_duration(std::time::Duration::from_secs_f64(duration_s));
        match audio {
            AudioSource::Wav {
                path,
                loops,
                cut: None,
                ..
            } => bail!(
                "--audio {} is {length} of audio{}, shorter than one packet (--packet-ms {packet_ms}); give a file of at least {packet_ms} ms (or more --loops)",
                path.display(),
                if *loops > 1 { format!(" with --loops {loops}") } else { String::new() },
            ),
            _ => bail!(
                "--duration {length} is shorter than one packet (--packet-ms {packet_ms}); give at least {packet_ms} ms",
            ),
        }
    }
    check_duration_limit(duration_s)?;
    // Counted in samples: `ceil(32.24 s / 80 ms)` in floating point is 404, one packet of no
    // audio past the input's end.
    let samples = audio
        .total_samples()
        .unwrap_or_else(|| (duration_s * f64::from(rate)).round() as u64);
    let packet_samples = (u64::from(rate) * u64::from(packet_ms) / 1000).max(1);
    let packets = samples.div_ceil(packet_samples);
    if packets > u64::from(u32::MAX) {
        bail!("--duration gives too many packets");
    }
    Ok((duration_s, packets as f64))
}

/// The timeouts, modalities, protocol-only flags, pings, the late threshold against the run's
/// length, and the run's size.
fn check_limits(
    args: &RunArgs,
    duration_s: f64,
    sessions: u32,
    client: &ClientSettings,
) -> Result<()> {
    let funasr = args.speak.protocol == Protocol::Funasr;
    if args.limits.connect_timeout.is_zero() {
        bail!("--connect-timeout must be more than zero");
    }
    if args.limits.recv_timeout.is_zero() {
        bail!("--recv-timeout must be more than zero");
    }
    if let Some(bad) = args
        .speak
        .modalities
        .iter()
        .flatten()
        .find(|m| !matches!(m.as_str(), "audio" | "text"))
    {
        bail!("--modalities: `{bad}` is not a modality; give audio, text or audio,text");
    }
    // An OpenAI transcription session takes a language too (its transcription's, ISO-639-1).
    let transcribes = client.session_type == Some(SessionType::Transcription);
    if args.language.is_some() && args.speak.protocol == Protocol::Openai && !transcribes {
        bail!("--language applies to --protocol funasr, or to an openai transcription session (--session-type transcription), whose transcription it sets (an ISO-639-1 code such as en)");
    }
    if !funasr {
        for (flag, given) in [
            ("--language", args.language.is_some() && !transcribes),
            ("--hotwords", args.hotwords.is_some()),
            ("--output-jsonl", args.output_jsonl.is_some()),
        ] {
            if given {
                bail!("{flag} is a Fun-ASR setting; give --protocol funasr");
            }
        }
    }
    for (flag, value) in [
        ("--client-ping-interval", args.client_ping_interval),
        ("--client-ping-timeout", args.client_ping_timeout),
    ] {
        if !value.is_finite() || value > 86_400.0 {
            bail!("{flag} must be a number of seconds up to 86400 (0 or less disables)");
        }
    }
    if args.send_timeout.is_some_and(|t| t.is_zero()) {
        bail!("--send-timeout must be more than zero");
    }
    if let Some(late_ms) = args.late_threshold_ms {
        // A packet is late when it is sent this far past its schedule; no packet of a run can be
        // later than the run is long, so a larger threshold would qualify any run, however late.
        if f64::from(late_ms) > duration_s * 1000.0 {
            bail!(
                "--late-threshold-ms {late_ms} is longer than each session's audio ({}): no packet could ever be late; give at most {} ms",
                audio_length(duration_s),
                (duration_s * 1000.0).floor()
            );
        }
    }
    let total = u64::from(args.processes) * u64::from(sessions);
    if total > 65_535 {
        bail!("--processes × --sessions is {total}; at most 65535 sessions per run are supported");
    }
    Ok(())
}

/// What `validate` checked, before it is laid out as [`Settings`].
struct Checked {
    url: String,
    sessions: u32,
    duration_s: f64,
    packet_ms: u32,
    packets: f64,
    client: ClientSettings,
    connection: ConnectionSettings,
    audio: AudioSource,
    tui: bool,
    shard: Option<Shard>,
    start_at_unix_s: Option<f64>,
}

impl Checked {
    /// The settings: what was checked, and the flags taken as they are.
    fn settings(self, args: &RunArgs) -> Settings {
        let Checked {
            url,
            sessions,
            duration_s,
            packet_ms,
            packets,
            client,
            connection,
            audio,
            tui,
            shard,
            start_at_unix_s,
        } = self;
        let funasr = args.speak.protocol == Protocol::Funasr;
        // A transcription session asks for no output: what it gets is its input's transcript.
        let modalities = match client.session_type {
            Some(SessionType::Transcription) => vec!["text".to_string()],
            _ => modalities(args),
        };
        Settings {
            builtin_mock: args.url.is_none(),
            url,
            processes: args.processes,
            sessions_per_process: sessions,
            duration_s,
            packet_ms,
            packets_per_session: packets as u32,
            late_threshold_ms: args.late_threshold_ms.unwrap_or(packet_ms),
            stagger: args.stagger,
            slow_send_threshold_ms: crate::pacing::DEFAULT_SLOW_SEND_THRESHOLD_MS,
            inject_stall_ms: args.inject_stall_ms,
            inject_disk_stall_mb: args.inject_disk_stall_mb,
            inject_cpu_starvation_ms: args.inject_cpu_starvation_ms,
            sample_interval_ms: (!args.no_sampler).then_some(args.sample_interval_ms),
            server_pid: args.server_pid,
            connect_timeout_s: args.limits.connect_timeout.as_secs_f64(),
            recv_timeout_s: args.limits.recv_timeout.as_secs_f64(),
            send_buffer_bytes: args.send_buffer_bytes,
            protocol: args.speak.protocol,
            modalities,
            client,
            connection,
            language: args.language.clone(),
            hotwords: args.hotwords.clone(),
            no_pace: args.no_pace,
            client_ping_interval_s: args.client_ping_interval,
            client_ping_timeout_s: args.client_ping_timeout,
            send_timeout_s: args
                .send_timeout
                .map_or(f64::from(SEND_TIMEOUT_PACKETS * packet_ms) / 1000.0, |t| {
                    t.as_secs_f64()
                }),
            max_message_bytes: args.limits.max_message_bytes,
            admission_retries: ADMISSION_RETRIES,
            admission_retry_interval_ms: ADMISSION_RETRY_INTERVAL_MS,
            trace: args.trace,
            trace_writer: args.trace_writer,
            keep_traces: args.keep_traces,
            audio,
            mock: args.url.is_none().then(|| {
                let mut behaviour = MockBehaviour::from_args(&args.mock, args.speak.protocol);
                // The built-in mock serves the model the client names, unless --served-model
                // names another (to see how a client takes a model the server does not serve).
                let served_given = args.mock_flags_given.iter().any(|f| f == "--served-model");
                if let (Some(model), false) = (&args.speak.model, served_given) {
                    behaviour.served_model.clone_from(model);
                }
                if funasr {
                    behaviour.funasr = Some(args.mock.funasr.clone());
                }
                behaviour
            }),
            tui,
            shard,
            start_at_unix_s,
        }
    }
}

/// The built-in mock's flags change nothing with `--url`: given anyway, they would look as if
/// the server had been told to behave so (`--stall-at`, `--max-sessions`, …).
fn check_no_mock_flags(given: &[String]) -> Result<()> {
    // The model a server plays is its own; what the client must match is its input rate.
    let profile = if given.iter().any(|f| f == "--profile") {
        " (a server's model is its own: for a PersonaPlex server, give --input-sample-rate 24000)"
    } else {
        ""
    };
    match given {
        [] => Ok(()),
        [flag] => bail!(
            "{flag} applies to the built-in mock only, and with --url it changes nothing; drop it, or drop --url to run against the mock{profile}"
        ),
        flags => bail!(
            "{} apply to the built-in mock only, and with --url they change nothing; drop them, or drop --url to run against the mock{profile}",
            flags.join(", ")
        ),
    }
}

/// `--server-pid` names a process that exists, of a server given with `--url`.
fn check_server_pid(pid: u32, has_url: bool) -> Result<()> {
    if !has_url {
        bail!("--server-pid {pid} needs --url: without it the built-in mock is the server, and it is sampled already");
    }
    if !std::path::Path::new("/proc").join(pid.to_string()).exists() {
        bail!("--server-pid {pid}: no such process; give the pid of the running server (e.g. from `ss -ltnp`), or leave it out to find the process listening on a loopback --url");
    }
    Ok(())
}

/// Sessions per worker: `--sessions`, or `--concurrency` (the total) spread over `--processes`.
fn sessions_per_process(args: &RunArgs) -> Result<u32> {
    let Some(total) = args.concurrency else {
        return Ok(args.sessions);
    };
    if total % args.processes != 0 || total < args.processes {
        bail!(
            "--concurrency {total} does not spread evenly over --processes {p}; give a multiple of {p}, or --sessions for the sessions of each process",
            p = args.processes
        );
    }
    Ok(total / args.processes)
}

/// The protocol flags validated: each applies to its protocols only, and the input rate is one
/// the protocol's servers take (none of them is told another: nothing is resampled); against
/// the built-in native mock, `mock_profile`'s.
fn client_settings(
    args: &ProtocolArgs,
    url: Option<&str>,
    mock_profile: Option<Profile>,
    packet_ms: u32,
) -> Result<ClientSettings> {
    let has_url = url.is_some();
    let protocol = args.protocol;
    let name = protocol.as_str();
    let default_rate = mock_profile.map_or_else(
        || protocol.default_input_sample_rate(),
        |p| p.input_sample_rate(),
    );
    let rate = args.input_sample_rate.unwrap_or(default_rate);
    if !protocol.input_sample_rates().contains(&rate) {
        bail!("{}", rate_refusal(protocol, rate));
    }
    if let Some(p) = mock_profile.filter(|p| p.input_sample_rate() != rate) {
        bail!(
            "--input-sample-rate {rate}: the built-in mock plays {} (--profile), which takes PCM16 at {} Hz; leave the flag out{}",
            p.name(),
            p.input_sample_rate(),
            Profile::offered_for(rate)
                .map(|flags| format!(", or give {flags} for {rate} Hz"))
                .unwrap_or_default()
        );
    }
    // The built-in mock grants what its profile serves, the first asked for: none of it, and
    // every session would fail its set-up.
    if let (Some(p), Some(asked)) = (mock_profile, &args.modalities) {
        if !asked
            .iter()
            .any(|m| p.output_modalities().contains(&m.as_str()))
        {
            bail!(
                "--modalities {}: the built-in mock plays {} (--profile), which serves {} only, so no session would be granted what it asks; give --modalities {}, or --profile minicpmo for text",
                asked.join(","),
                p.name(),
                p.output_modalities().join(","),
                p.output_modalities().join(",")
            );
        }
    }
    match protocol {
        Protocol::Native | Protocol::Funasr => {
            if args.model.is_some() {
                bail!("--model applies to --protocol openai or vllm");
            }
        }
        Protocol::Vllm => {
            if has_url && args.model.is_none() {
                bail!(
                    "--protocol vllm needs --model: the model the server serves (vLLM refuses a commit before it with model_not_validated; `GET /v1/models` on the server lists it; duplexbench-tui's own mock takes any name unless started with --served-model)"
                );
            }
        }
        Protocol::Openai => {
            if let (Some(every), TurnDetection::ServerVad) =
                (args.commit_every, args.turn_detection)
            {
                bail!(
                    "--commit-every needs --turn-detection none: with the server's VAD the server commits each turn itself, and a client commit on top of its own collides with it (input_audio_buffer_commit_empty, conversation_already_has_active_response); give --turn-detection none --commit-every {}",
                    humantime::format_duration(every)
                );
            }
            if args.api_version == ApiVersion::Ga
                && ["audio", "text"]
                    .iter()
                    .all(|m| args.modalities.iter().flatten().any(|given| given == m))
            {
                bail!("--modalities audio,text: a GA session asks for audio or text, not both (its output_modalities; audio comes with its transcript); give --modalities audio (or text), or --api-version beta, whose [\"audio\",\"text\"] is one choice");
            }
        }
    }
    let session_type = session_type(args, url)?;
    if protocol != Protocol::Openai {
        if args.commit_every.is_some() {
            bail!("--commit-every applies to --protocol openai (here: {name})");
        }
        if args.api_version != ApiVersion::Ga {
            bail!("--api-version applies to --protocol openai (here: {name})");
        }
        if args.turn_detection != TurnDetection::ServerVad {
            bail!("--turn-detection applies to --protocol openai (here: {name})");
        }
    }
    if args.interrupt_response
        && (protocol != Protocol::Openai || args.turn_detection != TurnDetection::ServerVad)
    {
        bail!("--interrupt-response applies to --protocol openai with the server's VAD (--turn-detection server-vad): it is what the VAD does when speech starts during a response");
    }
    // Commits fall on packet ends, so two can be a packet less than --commit-every apart;
    // the API refuses a commit of under 100 ms of audio (input_audio_buffer_commit_empty).
    let least_ms = crate::protocol::openai::MIN_COMMIT_MS + u64::from(packet_ms);
    let commit_every_ms = match args.commit_every {
        Some(every) if (every.as_millis() as u64) < least_ms => {
            bail!("--commit-every must be at least {least_ms}ms with {packet_ms} ms packets: commits fall on packet ends, so two may be a packet less than --commit-every apart, and the API refuses a commit of under 100 ms of audio")
        }
        Some(every) => Some(every.as_millis() as u64),
        None => None,
    };
    // Against the built-in mock a transcription session names the model it transcribes with,
    // as one against a server must (the session's transcription is off without one).
    let model = match (session_type, &args.model) {
        (Some(SessionType::Transcription), None) => {
            Some(crate::protocol::openai::MOCK_TRANSCRIPTION_MODEL.to_string())
        }
        (_, model) => model.clone(),
    };
    Ok(ClientSettings {
        api_version: (protocol == Protocol::Openai).then_some(args.api_version),
        model,
        input_sample_rate: rate,
        turn_detection: (protocol == Protocol::Openai).then_some(args.turn_detection),
        commit_every_ms,
        session_type,
        interrupt_response: (protocol == Protocol::Openai
            && session_type != Some(SessionType::Transcription)
            && args.turn_detection == TurnDetection::ServerVad)
            .then_some(args.interrupt_response),
        // Only `conform` sets it, on the plan it makes.
        audio_grant_optional: false,
    })
}

/// The OpenAI session's type: `--session-type`, or the one `url`'s `intent` asks for; `None`
/// for the other protocols. A transcription session is checked against the flags that have no
/// meaning in it.
fn session_type(args: &ProtocolArgs, url: Option<&str>) -> Result<Option<SessionType>> {
    if args.protocol != Protocol::Openai {
        if args.session_type.is_some() {
            bail!(
                "--session-type applies to --protocol openai (here: {})",
                args.protocol.as_str()
            );
        }
        return Ok(None);
    }
    let intent = url.and_then(url_intent);
    let by_url = intent.as_deref() == Some("transcription");
    let session_type = match (args.session_type, intent.as_deref()) {
        (Some(SessionType::Realtime), Some("transcription")) => bail!(
            "--session-type realtime, but --url asks for a transcription session (intent=transcription), which the server opens whatever the client says; drop intent=transcription from the URL, or give --session-type transcription"
        ),
        (Some(SessionType::Transcription), Some(other)) if other != "transcription" => bail!(
            "--session-type transcription, but --url asks for intent={other}: the server opens the session the connection asks for; give intent=transcription in the URL, or leave the intent out (the client adds it)"
        ),
        (Some(given), _) => given,
        (None, _) if by_url => SessionType::Transcription,
        (None, _) => SessionType::Realtime,
    };
    if session_type == SessionType::Transcription {
        // Said as the user asked for it: by the flag, or by the URL alone.
        let what = if args.session_type.is_some() {
            "--session-type transcription"
        } else {
            "a transcription session (--url has intent=transcription)"
        };
        if args.api_version == ApiVersion::Beta {
            bail!("{what} speaks the GA names only (session.type \"transcription\"); beta's transcription_session.update is not supported: give --api-version ga, against a server that speaks GA names");
        }
        if args.modalities.is_some() {
            bail!("--modalities: {what} has no output but the transcript of its input; drop --modalities");
        }
        if args.interrupt_response {
            bail!("--interrupt-response: {what} has no response to interrupt; drop it");
        }
        if url.is_some() && args.model.is_none() {
            bail!(
                "{what} needs --model: the transcription model (the session's audio.input.transcription.model, e.g. gpt-4o-transcribe or whisper-1); without one the server transcribes nothing"
            );
        }
    }
    Ok(Some(session_type))
}

/// The `intent` of `url`'s query, percent-decoded (an empty one too: it is there).
fn url_intent(url: &str) -> Option<String> {
    let query = url.split('#').next()?.split_once('?')?.1;
    query
        .split('&')
        .find_map(|pair| match pair.split_once('=') {
            Some(("intent", value)) => Some(crate::protocol::percent_decoded(value)),
            _ => (pair == "intent").then(String::new),
        })
}

/// `url` with `intent=transcription` in its query, unless it has an intent already: OpenAI
/// opens a transcription session for a connection that asks for one so.
fn with_transcription_intent(url: &str) -> String {
    if url_intent(url).is_some() {
        return url.to_string();
    }
    let (head, fragment) = match url.split_once('#') {
        Some((head, fragment)) => (head, Some(fragment)),
        None => (url, None),
    };
    let joiner = match head.split_once('?') {
        Some((_, query)) if query.is_empty() || query.ends_with('&') => "",
        Some(_) => "&",
        None => "?",
    };
    let mut out = format!("{head}{joiner}intent=transcription");
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// Why `rate` is refused for `protocol`, and what to do.
fn rate_refusal(protocol: Protocol, rate: u32) -> String {
    let want = protocol.default_input_sample_rate();
    let why = match protocol {
        // openai-python's AudioPCM: `rate: Literal[24000]`; beta's pcm16 is 24 kHz too.
        Protocol::Openai => "the OpenAI Realtime API takes PCM16 at 24000 Hz only (GA's audio.input.format.rate is always 24000, beta's pcm16 is 24 kHz)",
        // vLLM's input_audio_buffer.append: "base64-encoded PCM16 @ 16kHz", and no field for a rate.
        Protocol::Vllm => "vLLM's /v1/realtime carries no rate and its models take PCM16 at 16000 Hz",
        Protocol::Native => "sglang-omni's models take PCM16 at 16000 Hz (VoiceChat, MiniCPM-o) or 24000 Hz (PersonaPlex) only",
        Protocol::Funasr => "its servers take PCM16 at 16000 Hz only",
    };
    let name = protocol.as_str();
    format!(
        "--input-sample-rate {rate}: with --protocol {name}, {why}; resample the audio to {want} Hz (e.g. `sox in.wav -r {want} -c 1 -b 16 out.wav`) and give that file to --audio{}",
        if protocol == Protocol::Openai {
            " (assets/speech-24k.wav is the speech sample at 24 kHz)"
        } else {
            ""
        }
    )
}

/// TLS and credential flags validated against the URL (`url` empty: the built-in mock).
/// The connection's settings from its flags. `env` reads the environment: `OPENAI_API_KEY` is
/// the key of the protocols that speak OpenAI's API only, so that a key set for OpenAI's clients
/// never goes to another server unless given with `--api-key`.
pub fn connection_settings(
    args: &ConnectionArgs,
    url: &str,
    protocol: Protocol,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ConnectionSettings> {
    let tls = url.starts_with("wss://");
    if !tls && args.insecure {
        bail!("--insecure applies to wss:// URLs only");
    }
    if let Some(path) = &args.ca_file {
        if !tls {
            bail!("--ca-file applies to wss:// URLs only");
        }
        if !path.exists() {
            bail!("--ca-file {}: no such file", path.display());
        }
        if path.is_dir() {
            bail!(
                "--ca-file {} is a folder; give the PEM file of the certificate that signed the server's",
                path.display()
            );
        }
    }
    let identity = match (&args.client_cert, &args.client_key) {
        (Some(cert), Some(key)) => {
            if !tls {
                bail!("--client-cert and --client-key apply to wss:// URLs only");
            }
            for (flag, path) in [("--client-cert", cert), ("--client-key", key)] {
                if !path.is_file() {
                    bail!("{flag} {}: no such file", path.display());
                }
            }
            Some(crate::tls::Identity::client(cert, key))
        }
        _ => None,
    };
    if tls {
        // Each worker makes this configuration when it starts: a --ca-file without a usable
        // certificate (a key, say), a client key that is not the certificate's, or a system
        // without roots is refused here instead.
        crate::tls::client_config(args.insecure, args.ca_file.as_deref(), identity)?;
    }
    // (name, value) of `--header 'Name: value'` and of `--header-env Name=VAR`.
    let mut given = Vec::with_capacity(args.headers.len() + args.header_envs.len());
    for (k, header) in args.headers.iter().enumerate() {
        let Some((name, value)) = header.split_once(':') else {
            // Its text may be a bare secret: not shown, but which one it is, and how long.
            bail!(
                "--header number {} of {} ({} characters, not shown: it may hold a secret) has no ':'; give it as 'Name: value', e.g. --header 'Authorization: Bearer …'",
                k + 1,
                args.headers.len(),
                header.chars().count()
            );
        };
        given.push((name.trim().to_string(), value.trim().to_string()));
    }
    for header in &args.header_envs {
        let Some((name, var)) = header.split_once('=') else {
            bail!("--header-env `{header}` is not 'NAME=VAR' (a header name, then the environment variable holding its value)");
        };
        let (name, var) = (name.trim(), var.trim());
        let Some(value) = env(var).filter(|v| !v.trim().is_empty()) else {
            bail!("--header-env {name}={var}: ${var} is not set (or empty) in this environment; export it, or give the header with --header");
        };
        given.push((name.to_string(), value.trim().to_string()));
    }
    let mut headers = Vec::with_capacity(given.len());
    for (name, value) in &given {
        let (name, value) = (name.as_str(), value.as_str());
        use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            bail!("--header: `{name}` is not a header name");
        }
        if HeaderValue::from_str(value).is_err() {
            bail!("--header {name}: the value holds characters a header cannot carry");
        }
        // The handshake's own headers: one given here would be dropped (Host) or break the
        // upgrade. `Sec-WebSocket-Protocol` is the client's to offer (some servers take a
        // credential there), and goes as given.
        const HANDSHAKE: &[&str] = &[
            "host",
            "connection",
            "upgrade",
            "sec-websocket-key",
            "sec-websocket-version",
            "sec-websocket-accept",
            "sec-websocket-extensions",
        ];
        if HANDSHAKE.contains(&name.to_ascii_lowercase().as_str()) {
            bail!("--header {name}: the WebSocket handshake sets this header itself (Host from --url; no extension is offered); leave it out");
        }
        headers.push(Header {
            name: name.to_string(),
            value: Secret::new(value),
        });
    }
    let from_env = || match protocol {
        Protocol::Openai | Protocol::Vllm => env("OPENAI_API_KEY"),
        Protocol::Native | Protocol::Funasr => None,
    };
    if args.api_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        bail!("--api-key is empty: give the key (or leave the flag out; openai and vllm also read $OPENAI_API_KEY)");
    }
    let authorization_header = headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("authorization"));
    if authorization_header && args.api_key.is_some() {
        bail!("--header Authorization and --api-key both set Authorization, and a server would take either; give one (for a scheme other than Bearer, the header)");
    }
    // An Authorization header given outright wins over the key in the environment.
    let from_env = || (!authorization_header).then(from_env).flatten();
    let api_key = args
        .api_key
        .clone()
        .or_else(from_env)
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(Secret::new);
    Ok(ConnectionSettings {
        insecure: args.insecure,
        ca_file: args.ca_file.clone(),
        client_cert: args.client_cert.clone(),
        client_key: args.client_key.clone(),
        headers,
        api_key,
        url_secrets: Vec::new(),
    })
}

/// Checks that `--url` is a `ws://` or `wss://` URL with a host we can connect to.
fn check_url(url: &str) -> Result<()> {
    // What the messages show of it: no credential of its query.
    let shown = crate::secret::split_url_secrets(url).0;
    let uri: tokio_tungstenite::tungstenite::http::Uri = url.parse().map_err(|e| {
        anyhow::anyhow!(
            "--url `{shown}` is not a URL ({e}); give e.g. ws://127.0.0.1:8765/v1/realtime"
        )
    })?;
    match uri.scheme_str() {
        Some("ws" | "wss") => {}
        _ => bail!(
            "--url `{shown}` must start with ws:// or wss://, e.g. ws://127.0.0.1:8765/v1/realtime"
        ),
    }
    if uri.host().is_none() {
        bail!("--url `{shown}` has no host");
    }
    // A port that does not fit 16 bits parses, and would read as none: the scheme's default.
    let authority = uri.authority().map_or("", |a| a.as_str());
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let port = match host_port.rfind(']') {
        Some(end) => host_port[end + 1..].strip_prefix(':'),
        None => host_port.rsplit_once(':').map(|(_, port)| port),
    };
    if let Some(port) = port.filter(|p| !p.is_empty() && p.parse::<u16>().map_or(true, |p| p == 0))
    {
        bail!("--url `{shown}` has port {port}, out of range: give a port from 1 to 65535");
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        bail!("--url carries credentials (user:password@host): a WebSocket handshake does not send them, and they would be written into the summary; give them as a header, e.g. --header 'Authorization: Basic BASE64(user:password)', or --api-key");
    }
    Ok(())
}

/// `host:port` of a ws:// or wss:// URL (port 80 or 443 when absent), for the reachability
/// check and the TCP connection.
pub fn url_authority(url: &str) -> Option<String> {
    // The query is not needed, and a written URL holds `<redacted>` there (not URI text).
    let without_query = url.split(['?', '#']).next().unwrap_or(url);
    let uri: tokio_tungstenite::tungstenite::http::Uri = without_query.parse().ok()?;
    let host = uri.host()?;
    let default_port = if uri.scheme_str() == Some("wss") {
        443
    } else {
        80
    };
    let port = uri.port_u16().unwrap_or(default_port);
    if host.contains(':') && !host.starts_with('[') {
        Some(format!("[{host}]:{port}"))
    } else {
        Some(format!("{host}:{port}"))
    }
}

/// `--output-sample-rate` is the profile's rate to change for the native mock; the OpenAI
/// Realtime API's output is PCM16 at 24 kHz only (openai-python's GA `AudioPCM.rate:
/// Literal[24000]`, beta's `pcm16`), so the openai mock streams no other.
///
/// The flags of one mock only are refused with another protocol, rather than ignored.
pub fn check_output_rate(protocol: Protocol, args: &MockBehaviourArgs) -> Result<()> {
    let name = protocol.as_str();
    // A flag counts as given when it differs from its default (the conductor hands its mock
    // every value it resolved, defaults too).
    let defaults = MockBehaviourArgs::defaults();
    let given: [(&str, bool, &[Protocol]); 10] = [
        (
            "--output-sample-rate",
            args.output_sample_rate
                .is_some_and(|rate| rate != protocol.mock_output_sample_rate(args.profile)),
            &[Protocol::Native, Protocol::Openai],
        ),
        (
            "--profile",
            args.profile != defaults.profile,
            &[Protocol::Native],
        ),
        (
            "--replies-per-append",
            args.replies_per_append != defaults.replies_per_append,
            &[Protocol::Native],
        ),
        (
            "--burst-units",
            args.burst_units != defaults.burst_units,
            &[Protocol::Native],
        ),
        (
            "--first-delta-ms",
            args.first_delta_ms != defaults.first_delta_ms,
            &[Protocol::Openai, Protocol::Vllm],
        ),
        (
            "--delta-interval-ms",
            args.delta_interval_ms
                .is_some_and(|ms| ms != defaults.delta_interval_ms(protocol)),
            &[Protocol::Openai, Protocol::Vllm],
        ),
        (
            "--response-deltas",
            args.response_deltas != defaults.response_deltas,
            &[Protocol::Openai],
        ),
        (
            "--served-model",
            args.served_model != defaults.served_model,
            &[Protocol::Openai, Protocol::Vllm],
        ),
        (
            "--mock-error",
            args.mock_error.is_some(),
            &[Protocol::Openai, Protocol::Vllm],
        ),
        (
            "the Fun-ASR mock's flags (--decode-ms and the rest)",
            args.funasr != defaults.funasr,
            &[Protocol::Funasr],
        ),
    ];
    if let Some((flag, _, mocks)) = given
        .iter()
        .find(|(_, given, mocks)| *given && !mocks.contains(&protocol))
    {
        let mocks: Vec<&str> = mocks.iter().map(|p| p.as_str()).collect();
        // One flag applies; "the Fun-ASR mock's flags" apply.
        let (applies, it, them) = if flag.starts_with("the ") {
            ("apply", "they", "them")
        } else {
            ("applies", "it", "it")
        };
        bail!(
            "{flag} {applies} to the {} mock{} (--protocol {}), not {name}'s, whose behaviour {it} would not change; drop {}",
            mocks.join(" and "),
            if mocks.len() > 1 { "s" } else { "" },
            mocks.join("|"),
            them
        );
    }
    if args.max_tokens.is_some() && protocol != Protocol::Vllm {
        bail!("--max-tokens applies to the vllm mock (--protocol vllm), not {name}'s: it ends a vLLM transcription after that many model steps");
    }
    if args.skip_busy_turns && protocol != Protocol::Openai {
        bail!("--skip-busy-turns applies to the openai mock (--protocol openai), not {name}'s: it leaves the server-VAD turns that end during a response without one");
    }
    let want = crate::protocol::openai::DEFAULT_SAMPLE_RATE;
    match args.output_sample_rate {
        Some(rate) if protocol == Protocol::Openai && rate != want => bail!(
            "--output-sample-rate {rate}: with --protocol openai the output is PCM16 at {want} Hz only (GA's audio.output.format.rate is always {want}, beta's pcm16 is 24 kHz), as the API's; leave the flag out"
        ),
        _ => Ok(()),
    }
}

/// The settings of `run --protocol <protocol> ARGS…`, for tests.
#[cfg(test)]
pub fn settings_of(protocol: &str, args: &[&str]) -> Settings {
    use clap::Parser as _;
    let mut argv = vec!["duplexbench-tui", "run", "--protocol", protocol];
    argv.extend_from_slice(args);
    let Some(crate::cli::Command::Run(run)) =
        crate::cli::Cli::try_parse_from(argv).unwrap().command
    else {
        unreachable!()
    };
    validate(&run, String::new(), false).unwrap().settings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn plan(args: &[&str]) -> Result<RunPlan> {
        let mut argv = vec!["duplexbench-tui", "run"];
        argv.extend_from_slice(args);
        let cli = Cli::parse_args_from(argv)?;
        match cli.command {
            Some(crate::cli::Command::Run(run)) => validate(&run, String::new(), false),
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_mocks_flags_with_url_are_refused_as_changing_nothing() {
        let url = ["--url", "ws://127.0.0.1:9/v1/realtime"];
        let refused = |flags: &[&str]| {
            let mut args = url.to_vec();
            args.extend_from_slice(flags);
            plan(&args).unwrap_err().to_string()
        };
        let err = refused(&["--replies-per-append", "5"]);
        assert!(
            err.starts_with("--replies-per-append applies to the built-in mock only"),
            "{err}"
        );
        let err = refused(&[
            "--stall-at",
            "1s",
            "--stall-ms",
            "100",
            "--profile",
            "minicpmo",
        ]);
        assert!(
            err.contains("--profile, --stall-at, --stall-ms apply to"),
            "{err}"
        );
        assert!(refused(&["--decode-ms", "5"]).starts_with("--decode-ms applies"));
        // Their defaults are no flags given; without --url they steer the mock.
        assert!(plan(&url).is_ok());
        assert!(plan(&["--replies-per-append", "5"]).is_ok());
    }

    /// `--modalities text` against the built-in VoiceChat mock failed every session at its
    /// grant (the QA pass of 2026-12-06): refused before the run, as a rate it cannot take is.
    #[test]
    fn modalities_the_built_in_mock_cannot_grant_are_refused() {
        let err = plan(&["--modalities", "text"]).unwrap_err().to_string();
        assert!(
            err.starts_with("--modalities text: the built-in mock plays voicechat"),
            "{err}"
        );
        assert!(plan(&["--modalities", "text,audio"]).is_ok());
        assert!(plan(&["--profile", "minicpmo", "--modalities", "text"]).is_ok());
        let url = [
            "--url",
            "ws://127.0.0.1:9/v1/realtime",
            "--modalities",
            "text",
        ];
        assert!(plan(&url).is_ok(), "a real server decides for itself");
    }

    /// A header without ':' may be a bare secret: the error says which it is, never its text
    /// (it said only `<redacted>`, leaving the user to guess which: the QA pass of 2026-12-06).
    #[test]
    fn a_header_without_a_colon_is_named_by_its_place_not_its_text() {
        let url = "ws://127.0.0.1:9/v1/realtime";
        let err = plan(&[
            "--url",
            url,
            "--header",
            "X-A: 1",
            "--header",
            "sk-secret-123",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("--header number 2 of 2 (13 characters") && !err.contains("sk-secret"),
            "{err}"
        );
    }

    /// A flag of one mock given to another's changed nothing and was recorded in the summary as
    /// if it had (the QA pass of 2026-12-06); refused now, as --max-tokens already was.
    #[test]
    fn a_mock_flag_of_another_protocols_mock_is_refused() {
        for (flags, flag) in [
            (
                &["--protocol", "native", "--mock-error", "invalid_audio"][..],
                "--mock-error",
            ),
            (
                &["--protocol", "openai", "--profile", "minicpmo"],
                "--profile",
            ),
            (
                &["--protocol", "funasr", "--mock-error", "x"],
                "--mock-error",
            ),
            (
                &["--protocol", "native", "--first-delta-ms", "5"],
                "--first-delta-ms",
            ),
            (
                &["--protocol", "native", "--served-model", "m"],
                "--served-model",
            ),
            (
                &["--protocol", "vllm", "--response-deltas", "2"],
                "--response-deltas",
            ),
            (
                &["--protocol", "openai", "--decode-ms", "500"],
                "the Fun-ASR mock's flags",
            ),
            (
                &["--protocol", "funasr", "--replies-per-append", "5"],
                "--replies-per-append",
            ),
            (
                &["--protocol", "vllm", "--output-sample-rate", "16000"],
                "--output-sample-rate",
            ),
        ] {
            let err = plan(flags).unwrap_err().to_string();
            assert!(
                err.starts_with(flag) && (err.ends_with("drop it") || err.ends_with("drop them")),
                "{flags:?}: {err}"
            );
        }
        // Each where it belongs, and every default that the conductor hands its mock.
        for flags in [
            &["--protocol", "native", "--profile", "minicpmo"][..],
            &[
                "--protocol",
                "openai",
                "--mock-error",
                "invalid_audio",
                "--response-deltas",
                "2",
            ],
            &[
                "--protocol",
                "vllm",
                "--first-delta-ms",
                "5",
                "--delta-interval-ms",
                "80",
            ],
            &["--protocol", "funasr", "--decode-ms", "500"],
        ] {
            let plan = plan(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
            let protocol = plan.settings.protocol;
            let mock = plan.settings.mock.unwrap();
            let mut argv = vec!["duplexbench-tui".to_string(), "mock".to_string()];
            argv.extend(["--protocol".to_string(), protocol.as_str().to_string()]);
            argv.extend(mock.to_flags());
            let Some(crate::cli::Command::Mock(m)) = Cli::try_parse_from(&argv).unwrap().command
            else {
                unreachable!()
            };
            check_output_rate(m.protocol, &m.behaviour).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        }
    }

    #[test]
    fn openai_api_key_from_the_environment_goes_to_openai_dialects_only() {
        let connection = |flags: &[&str], protocol| {
            let mut argv = vec!["duplexbench-tui", "run"];
            argv.extend_from_slice(flags);
            let Some(crate::cli::Command::Run(run)) = Cli::try_parse_from(argv).unwrap().command
            else {
                unreachable!()
            };
            let env = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-env".to_string());
            connection_settings(&run.connection, "ws://127.0.0.1:1/", protocol, &env)
                .unwrap()
                .api_key
                .map(|k| k.expose().to_string())
        };
        assert_eq!(connection(&[], Protocol::Openai).as_deref(), Some("sk-env"));
        assert_eq!(connection(&[], Protocol::Vllm).as_deref(), Some("sk-env"));
        // A key set for OpenAI's clients is not sent to a native or Fun-ASR server ...
        assert_eq!(connection(&[], Protocol::Native), None);
        assert_eq!(connection(&[], Protocol::Funasr), None);
        // ... unless it is given for it.
        let given = ["--api-key", "sk-flag"];
        assert_eq!(
            connection(&given, Protocol::Native).as_deref(),
            Some("sk-flag")
        );
        assert_eq!(
            connection(&given, Protocol::Openai).as_deref(),
            Some("sk-flag")
        );
        // An Authorization header given outright wins over the key in the environment (two
        // Authorization headers went out, a server taking either).
        let header = ["--header", "Authorization: Basic dTpw"];
        assert_eq!(connection(&header, Protocol::Openai), None);
    }

    /// `--header-env api-key=VAR`: the value comes from the environment, so `ps` does not show
    /// it (the conductor's command line holds what was typed); it is a secret as `--header`'s.
    #[test]
    fn a_header_value_can_come_from_the_environment_and_is_kept_secret() {
        let connection = |flags: &[&str]| {
            let mut argv = vec!["duplexbench-tui", "run"];
            argv.extend_from_slice(flags);
            let Some(crate::cli::Command::Run(run)) = Cli::try_parse_from(argv).unwrap().command
            else {
                unreachable!()
            };
            let env = |name: &str| (name == "AZ_KEY").then(|| "azure-9".to_string());
            connection_settings(&run.connection, "wss://h/", Protocol::Openai, &env)
        };
        let c = connection(&["--header-env", "api-key=AZ_KEY"]).unwrap();
        assert_eq!(
            c.handshake_headers(),
            [("api-key".to_string(), "azure-9".to_string())]
        );
        assert!(!serde_json::to_string(&c).unwrap().contains("azure-9"));
        let unset = connection(&["--header-env", "api-key=NOPE"])
            .unwrap_err()
            .to_string();
        assert!(unset.contains("$NOPE is not set"), "{unset}");
        let odd = connection(&["--header-env", "api-key"])
            .unwrap_err()
            .to_string();
        assert!(odd.contains("is not 'NAME=VAR'"), "{odd}");
        let host = connection(&["--header-env", "Host=AZ_KEY"])
            .unwrap_err()
            .to_string();
        assert!(
            host.contains("the WebSocket handshake sets this header"),
            "{host}"
        );
    }

    #[test]
    fn credentials_the_handshake_would_drop_or_double_are_refused_with_what_to_do() {
        let refused = |args: &[&str]| plan(args).unwrap_err().to_string();
        let both = refused(&[
            "--url",
            "ws://h/v1/realtime",
            "--api-key",
            "k",
            "--header",
            "authorization: Bearer x",
        ]);
        assert!(both.contains("both set Authorization"), "{both}");
        let empty = refused(&["--url", "ws://h/v1/realtime", "--api-key", " "]);
        assert!(empty.contains("--api-key is empty"), "{empty}");
        for header in [
            "Host: other.example",
            "Sec-WebSocket-Key: x",
            "upgrade: h2c",
        ] {
            let err = refused(&["--url", "ws://h/v1/realtime", "--header", header]);
            assert!(
                err.contains("the WebSocket handshake sets this header"),
                "{err}"
            );
        }
        // The subprotocol is the client's to offer (a credential may go there).
        plan(&[
            "--url",
            "ws://h/v1/realtime",
            "--header",
            "Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.k",
        ])
        .unwrap();
        // user:password@ is not sent by a WebSocket handshake (it was silently dropped).
        let userinfo = refused(&["--url", "wss://bob:pw@h/v1/realtime"]);
        assert!(
            userinfo.contains("carries credentials") && !userinfo.contains("pw@"),
            "{userinfo}"
        );
        // A port that does not fit 16 bits read as none, and the run went to port 80.
        for port in ["99999", "0"] {
            let err = refused(&["--url", &format!("ws://127.0.0.1:{port}/v1/realtime")]);
            assert!(
                err.contains(&format!("has port {port}, out of range")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_credential_in_the_url_is_written_redacted_and_restored_for_the_connection() {
        let p = plan(&["--url", "wss://h/openai/realtime?deployment=d&api-key=AK-1"]).unwrap();
        assert_eq!(
            p.settings.url,
            "wss://h/openai/realtime?deployment=d&api-key=<redacted>"
        );
        let c = &p.settings.connection;
        assert_eq!(
            c.connect_url(&p.settings.url),
            "wss://h/openai/realtime?deployment=d&api-key=AK-1"
        );
        let json = serde_json::to_string(&p.settings).unwrap();
        assert!(!json.contains("AK-1"), "{json}");
        let mut back: Settings = serde_json::from_str(&json).unwrap();
        back.connection
            .restore_secrets(&c.secrets_env().unwrap())
            .unwrap();
        assert_eq!(
            back.connection.connect_url(&back.url),
            "wss://h/openai/realtime?deployment=d&api-key=AK-1"
        );
    }

    #[test]
    fn late_threshold_defaults_to_one_packet() {
        let p = plan(&["--packet-ms", "100"]).unwrap();
        assert_eq!(p.settings.late_threshold_ms, 100);
        assert_eq!(p.settings.packets_per_session, 300);
    }

    #[test]
    fn late_threshold_longer_than_the_run_is_refused_with_the_reason_issue_13() {
        let err = plan(&["--duration", "2s", "--late-threshold-ms", "4294967295"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--late-threshold-ms 4294967295"), "{err}");
        assert!(err.contains("no packet could ever be late"), "{err}");
        assert!(err.contains("at most 2000 ms"), "{err}");
        let p = plan(&["--duration", "2s", "--late-threshold-ms", "2000"]).unwrap();
        assert_eq!(p.settings.late_threshold_ms, 2000);
    }

    #[test]
    fn a_short_last_packet_still_counts() {
        let p = plan(&["--duration", "1s", "--packet-ms", "300"]).unwrap();
        assert_eq!(p.settings.packets_per_session, 4);
    }

    #[test]
    fn bad_urls_name_the_flag() {
        let err = plan(&["--url", "http://x:1/"]).unwrap_err().to_string();
        assert!(err.contains("--url"), "{err}");
        assert!(plan(&["--url", "wss://x:1/"]).is_ok(), "wss:// is taken");
        let err = plan(&["--insecure"]).unwrap_err().to_string();
        assert!(err.contains("--insecure applies to wss://"), "{err}");
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused_before_any_worker_starts() {
        let dir = std::env::temp_dir().join(format!("duplexbench-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key.pem");
        let cert = dir.join("cert.pem");
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        std::fs::write(&cert, made.cert.pem()).unwrap();
        let err = plan(&[
            "--url",
            "wss://127.0.0.1:1/",
            "--ca-file",
            key.to_str().unwrap(),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&format!(
                "--ca-file {}: no PEM certificate in it",
                key.display()
            )),
            "{err}"
        );
        assert!(plan(&[
            "--url",
            "wss://127.0.0.1:1/",
            "--ca-file",
            cert.to_str().unwrap()
        ])
        .is_ok());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_built_in_mock_serves_the_model_the_client_names_unless_told_another() {
        let served = |flags: &[&str]| {
            let mut args = vec!["--protocol", "vllm"];
            args.extend_from_slice(flags);
            plan(&args).unwrap().settings.mock.unwrap().served_model
        };
        assert_eq!(served(&[]), crate::protocol::vllm::MOCK_MODEL);
        assert_eq!(served(&["--model", "org/m"]), "org/m");
        assert_eq!(
            served(&["--model", "org/m", "--served-model", "other"]),
            "other",
            "--served-model still makes a mock that refuses the client's model"
        );
        assert_eq!(
            served(&[
                "--model",
                "org/m",
                "--served-model",
                crate::protocol::vllm::MOCK_MODEL
            ]),
            crate::protocol::vllm::MOCK_MODEL,
            "given, even as the default name"
        );
    }

    /// A 16 kHz mono PCM16 WAV of `samples` samples in the temporary folder.
    fn wav_16k(name: &str, samples: u32) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "duplexbench-options-{}-{name}.wav",
            std::process::id()
        ));
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 16_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::create(&path, spec).unwrap();
        for i in 0..samples {
            w.write_sample((i % 1000) as i16).unwrap();
        }
        w.finalize().unwrap();
        path
    }

    #[test]
    fn duration_cuts_an_audio_file_and_asks_for_loops_past_its_end() {
        // 2 s of audio.
        let path = wav_16k("cut", 32_000);
        let file = path.to_str().unwrap();
        let p = plan(&["--audio", file, "-d", "1250ms"]).unwrap().settings;
        assert_eq!(p.audio.total_samples(), Some(20_000));
        assert_eq!((p.duration_s, p.packets_per_session), (1.25, 16));
        assert_eq!(p.input_bytes(), 40_000);
        assert!(p.audio.to_string().ends_with(", cut at 20000 samples"));
        // With --loops the cut falls in a later play; the whole input cuts nothing.
        let p = plan(&["--audio", file, "--loops", "3", "-d", "5s"])
            .unwrap()
            .settings;
        assert_eq!(p.audio.total_samples(), Some(80_000));
        let p = plan(&["--audio", file, "-d", "2s"]).unwrap().settings;
        assert!(matches!(p.audio, AudioSource::Wav { cut: None, .. }));
        let err = plan(&["--audio", file, "-d", "5s"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "--duration 5s is longer than --audio {file}: 2s of audio; give --loops 3"
            )),
            "{err}"
        );
        // Past the limits, no --loops would do: said before any is offered.
        let err = plan(&["--audio", file, "-d", "3h"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "--duration 3h of --audio {file}: at most 2h of audio are held in memory"
            )),
            "{err}"
        );
        let err = plan(&["--audio", file, "-d", "25h"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--duration must be at most 24h"), "{err}");
        let err = plan(&["--audio", file, "--loops", "4000"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("or a --duration of at most 2h to cut it there"),
            "{err}"
        );
        assert!(plan(&["--audio", file, "--loops", "4000", "-d", "2h"]).is_ok());
        // Without --duration, the audio's own length is named, not a --duration never given.
        let err = plan(&["--audio", file, "--late-threshold-ms", "3000"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("longer than each session's audio (2s)"),
            "{err}"
        );
        let err = plan(&["--audio", file, "-d", "50ms"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--duration 50ms is shorter than one packet"),
            "{err}"
        );
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn the_longest_duration_a_refusal_offers_is_taken() {
        // 31995 samples: 1999.69 ms, which rounded to the millisecond offered a --duration 2s
        // that was refused in turn.
        let path = wav_16k("odd", 31_995);
        let file = path.to_str().unwrap();
        let err = plan(&["--audio", file, "-d", "2100ms"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("or a --duration of at most 1s 999ms"), "{err}");
        assert!(plan(&["--audio", file, "-d", "1999ms"]).is_ok());
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn an_audio_file_shorter_than_a_packet_is_named_not_duration() {
        let path = wav_16k("short", 96);
        let err = plan(&["--audio", path.to_str().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "--audio {} is 6ms of audio, shorter than one packet (--packet-ms 80)",
                path.display()
            )),
            "{err}"
        );
        assert!(!err.contains("--duration"), "{err}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn the_mock_profile_passes_through_with_its_output_rate() {
        let p = plan(&["--profile", "minicpmo"]).unwrap();
        let flags = p.settings.mock.unwrap().to_flags().join(" ");
        assert!(flags.contains("--profile minicpmo"), "{flags}");
        assert!(flags.contains("--output-sample-rate 24000"), "{flags}");
        let p = plan(&["--output-sample-rate", "16000"]).unwrap();
        let flags = p.settings.mock.unwrap().to_flags().join(" ");
        assert!(
            flags.contains("--profile voicechat --replies-per-append 3"),
            "{flags}"
        );
        assert!(flags.contains("--output-sample-rate 16000"), "{flags}");
    }

    #[test]
    fn the_client_asks_the_built_in_minicpmo_for_its_audio_and_text() {
        let asked = |args: &[&str]| plan(args).unwrap().settings.modalities;
        // An OpenAI beta session sends ["audio","text"] for audio: recorded as sent.
        let beta = ["--protocol", "openai", "--api-version", "beta"];
        assert_eq!(asked(&beta), ["audio", "text"]);
        let beta_audio = [&beta[..], &["--modalities", "audio"]].concat();
        assert_eq!(asked(&beta_audio), ["audio", "text"]);
        let beta_text = [&beta[..], &["--modalities", "text"]].concat();
        assert_eq!(asked(&beta_text), ["text"]);
        assert_eq!(asked(&["--profile", "minicpmo"]), ["audio", "text"]);
        assert_eq!(asked(&[]), ["audio"], "VoiceChat serves audio");
        let given = ["--profile", "minicpmo", "--modalities", "audio"];
        assert_eq!(asked(&given), ["audio"], "--modalities stands");
        let url = ["--url", "ws://127.0.0.1:9/v1/realtime"];
        assert_eq!(asked(&url), ["audio"], "a server's profile is not known");
    }

    #[test]
    fn concurrency_is_the_total_over_the_processes_issue_14() {
        let p = plan(&["-p", "4", "-c", "64"]).unwrap();
        assert_eq!(p.settings.sessions_per_process, 16);
        assert_eq!(p.settings.total_sessions(), 64);
        let err = plan(&["-p", "3", "-c", "64"]).unwrap_err().to_string();
        assert!(
            err.contains("--concurrency") && err.contains("--processes"),
            "{err}"
        );
    }

    #[test]
    fn json_is_an_error_that_points_to_output_issue_14() {
        for args in [&["--json"][..], &["--json", "out.json"][..]] {
            let err = plan(args).unwrap_err().to_string();
            assert!(
                err.contains("--output") && err.contains("summary.json"),
                "{err}"
            );
        }
    }

    #[test]
    fn fun_asr_defaults_to_100_ms_frames_of_the_built_in_speech_issue_11() {
        let p = plan(&["--protocol", "funasr", "--clients", "8", "--loops", "5"]).unwrap();
        let s = p.settings;
        assert_eq!((s.packet_ms, s.sessions_per_process), (100, 8));
        assert!(matches!(s.audio, AudioSource::Sample { loops: 5, .. }));
        assert!(s.mock.unwrap().funasr.is_some());
        assert_eq!(plan(&[]).unwrap().settings.packet_ms, 80);
        let p = plan(&["--protocol", "funasr", "--chunk-ms", "40"]).unwrap();
        assert_eq!(p.settings.packet_ms, 40);
    }

    #[test]
    fn fun_asr_settings_need_the_fun_asr_protocol_issue_11() {
        let err = plan(&["--language", "en"]).unwrap_err().to_string();
        assert!(err.contains("--protocol funasr"), "{err}");
        // The built-in sample is 5.83 s: --duration cuts it, and asks for --loops past it.
        let p = plan(&["--protocol", "funasr", "-d", "5s"]).unwrap();
        assert_eq!(p.settings.audio.total_samples(), Some(80_000));
        assert_eq!(p.settings.packets_per_session, 50);
        // A whole number of packets is that many, not one more of no audio (16.1 s of 100 ms
        // packets read 162 in floating point; so did 32.24 s of silence in 80 ms ones).
        let p = plan(&["--protocol", "funasr", "--loops", "3", "-d", "16100ms"]).unwrap();
        assert_eq!(p.settings.packets_per_session, 161);
        assert_eq!(
            plan(&["-d", "32240ms"])
                .unwrap()
                .settings
                .packets_per_session,
            403
        );
        let err = plan(&["--protocol", "funasr", "-d", "12s"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--duration 12s is longer than the built-in speech sample (--protocol funasr's input without --audio): 5s 828ms of audio;")
                && err.contains("give --loops 3"),
            "{err}"
        );
    }

    #[test]
    fn authority_has_a_default_port() {
        assert_eq!(
            url_authority("ws://127.0.0.1/v1/realtime").as_deref(),
            Some("127.0.0.1:80")
        );
        assert_eq!(
            url_authority("ws://[::1]:9/v1/realtime").as_deref(),
            Some("[::1]:9")
        );
        assert_eq!(
            url_authority("wss://api.openai.com/v1/realtime?model=m").as_deref(),
            Some("api.openai.com:443")
        );
    }

    /// A transcription session: asked for by --session-type or by the URL's intent, which the
    /// URL then carries (OpenAI opens the session type the connection asks for); the flags
    /// that mean nothing in it are refused, and against a server the model must be named.
    #[test]
    fn a_transcription_session_is_asked_for_by_flag_or_url_and_checked() {
        use crate::protocol::SessionType;
        let err = |args: &[&str]| plan(args).unwrap_err().to_string();
        let url = "ws://127.0.0.1:9/v1/realtime?model=gpt-realtime";
        let p = plan(&[
            "--protocol",
            "openai",
            "--session-type",
            "transcription",
            "--url",
            url,
            "--model",
            "whisper-1",
        ])
        .unwrap();
        assert_eq!(
            p.settings.client.session_type,
            Some(SessionType::Transcription)
        );
        assert_eq!(p.settings.url, format!("{url}&intent=transcription"));
        assert_eq!(p.settings.client.interrupt_response, None);
        // The URL's intent alone asks for it, and stays as written.
        let by_url = "ws://127.0.0.1:9/v1/realtime?intent=transcription";
        let p = plan(&["--protocol", "openai", "--url", by_url, "--model", "m"]).unwrap();
        assert_eq!(
            p.settings.client.session_type,
            Some(SessionType::Transcription)
        );
        assert_eq!(p.settings.url, by_url);
        // A URL without a query gets one, its fragment kept after it; an encoded intent is
        // read as the server reads it.
        for (given, sent) in [
            (
                "wss://h/v1/realtime",
                "wss://h/v1/realtime?intent=transcription",
            ),
            (
                "wss://h/v1/realtime?",
                "wss://h/v1/realtime?intent=transcription",
            ),
            (
                "wss://h/v1/realtime?a=1&",
                "wss://h/v1/realtime?a=1&intent=transcription",
            ),
            (
                "wss://h/v1/realtime?a=1#f",
                "wss://h/v1/realtime?a=1&intent=transcription#f",
            ),
            (
                "wss://h/v1/realtime?intent=transcri%70tion",
                "wss://h/v1/realtime?intent=transcri%70tion",
            ),
        ] {
            assert_eq!(with_transcription_intent(given), sent);
        }
        let encoded = "ws://127.0.0.1:9/v1/realtime?intent=transcri%70tion";
        let p = plan(&["--protocol", "openai", "--url", encoded, "--model", "m"]).unwrap();
        assert_eq!(
            p.settings.client.session_type,
            Some(SessionType::Transcription)
        );
        assert_eq!(p.settings.modalities, ["text"]);
        // A credential in the query stays out of what is written, and is put back to connect.
        let keyed = "ws://127.0.0.1:9/v1/realtime?api-key=sekrit";
        let p = plan(&[
            "--protocol",
            "openai",
            "--session-type",
            "transcription",
            "--url",
            keyed,
            "--model",
            "m",
        ])
        .unwrap();
        assert_eq!(
            p.settings.url,
            "ws://127.0.0.1:9/v1/realtime?api-key=<redacted>&intent=transcription"
        );
        assert_eq!(
            p.settings.connection.connect_url(&p.settings.url),
            format!("{keyed}&intent=transcription")
        );
        // The built-in mock is asked with the model named.
        let p = plan(&["--protocol", "openai", "--session-type", "transcription"]).unwrap();
        assert_eq!(
            p.settings.client.model.as_deref(),
            Some("gpt-4o-transcribe")
        );
        // Its transcription's language; a conversation has none to set.
        let p = plan(&[
            "--protocol",
            "openai",
            "--session-type",
            "transcription",
            "--language",
            "en",
        ])
        .unwrap();
        assert_eq!(p.settings.language.as_deref(), Some("en"));
        assert!(err(&["--protocol", "openai", "--language", "en"]).contains(
            "--language applies to --protocol funasr, or to an openai transcription session"
        ));
        assert!(err(&["--protocol", "vllm", "--language", "en"]).contains("is a Fun-ASR setting"));
        // A conversation by default, and with no session type for the other protocols.
        let p = plan(&["--protocol", "openai"]).unwrap();
        assert_eq!(p.settings.client.session_type, Some(SessionType::Realtime));
        assert_eq!(plan(&[]).unwrap().settings.client.session_type, None);
        for (args, says) in [
            (
                vec!["--protocol", "openai", "--url", by_url],
                "a transcription session (--url has intent=transcription) needs --model",
            ),
            (
                vec![
                    "--protocol",
                    "openai",
                    "--session-type",
                    "transcription",
                    "--url",
                    "ws://h/v1/realtime?intent=realtime",
                    "--model",
                    "m",
                ],
                "--session-type transcription, but --url asks for intent=realtime",
            ),
            (
                vec![
                    "--protocol",
                    "openai",
                    "--session-type",
                    "transcription",
                    "--url",
                    "ws://h/v1/realtime?intent=",
                    "--model",
                    "m",
                ],
                "but --url asks for intent=:",
            ),
            (
                vec![
                    "--protocol",
                    "openai",
                    "--url",
                    by_url,
                    "--model",
                    "m",
                    "--session-type",
                    "realtime",
                ],
                "--session-type realtime, but --url asks for a transcription session",
            ),
            (
                vec![
                    "--protocol",
                    "openai",
                    "--session-type",
                    "transcription",
                    "--api-version",
                    "beta",
                ],
                "speaks the GA names only",
            ),
            (
                vec![
                    "--protocol",
                    "openai",
                    "--session-type",
                    "transcription",
                    "--modalities",
                    "text",
                ],
                "has no output but the transcript of its input",
            ),
            (
                vec![
                    "--protocol",
                    "openai",
                    "--session-type",
                    "transcription",
                    "--interrupt-response",
                ],
                "no response to interrupt",
            ),
            (
                vec!["--protocol", "vllm", "--session-type", "transcription"],
                "--session-type applies to --protocol openai",
            ),
        ] {
            let e = err(&args);
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }

    #[test]
    fn dialect_flags_are_checked_against_their_protocol_issue_12() {
        let err = |args: &[&str]| plan(args).unwrap_err().to_string();
        // With the server's VAD (the default) the server commits each turn: a client commit
        // on top collides with it, so --commit-every needs --turn-detection none.
        // Commits fall on packet ends: 150 ms could commit 80 ms of audio, which the API refuses.
        let short = err(&[
            "--protocol",
            "openai",
            "--turn-detection",
            "none",
            "--commit-every",
            "150ms",
        ]);
        assert!(
            short.contains("--commit-every must be at least 180ms with 80 ms packets"),
            "{short}"
        );
        let vad = err(&["--protocol", "openai", "--commit-every", "2s"]);
        assert!(
            vad.contains("--commit-every needs --turn-detection none")
                && vad.contains("give --turn-detection none --commit-every 2s"),
            "{vad}"
        );
        assert!(
            err(&["--commit-every", "5s"]).contains("--commit-every applies to --protocol openai")
        );
        assert!(err(&["--max-tokens", "3"]).contains("--max-tokens applies to the vllm mock"));
        assert!(err(&["--protocol", "vllm", "--skip-busy-turns"])
            .contains("--skip-busy-turns applies to the openai mock"));
        assert!(err(&["--input-sample-rate", "48000"])
            .contains("--protocol native, sglang-omni's models take PCM16 at 16000 Hz"));
        // 24 kHz is PersonaPlex's: taken with a URL, and against the built-in mock only when
        // it plays PersonaPlex (whose rate is then the default).
        assert!(err(&["--input-sample-rate", "24000"]).contains(
            "the built-in mock plays voicechat (--profile), which takes PCM16 at 16000 Hz"
        ));
        let with_url = [
            "--url",
            "ws://127.0.0.1:9/v1/realtime",
            "--input-sample-rate",
            "24000",
        ];
        assert_eq!(
            plan(&with_url).unwrap().settings.client.input_sample_rate,
            24_000
        );
        let p = plan(&["--profile", "personaplex"]).unwrap();
        assert_eq!(p.settings.client.input_sample_rate, 24_000);
        // ... and the other way, the profiles that take 16 kHz (it offered PersonaPlex itself).
        let sixteen = err(&["--profile", "personaplex", "--input-sample-rate", "16000"]);
        assert!(
            sixteen.contains("leave the flag out, or give --profile voicechat or --profile minicpmo for 16000 Hz"),
            "{sixteen}"
        );
        assert!(
            err(&["--protocol", "vllm", "--url", "ws://h:1/v1/realtime"]).contains("needs --model")
                && err(&["--protocol", "vllm", "--url", "ws://h:1/v1/realtime"])
                    .contains("own mock takes any name unless started with --served-model")
        );
        assert!(err(&[
            "--protocol",
            "openai",
            "--api-version",
            "beta",
            "--input-sample-rate",
            "16000"
        ])
        .contains("24000 Hz only"));
        let p = plan(&["--protocol", "openai"]).unwrap();
        assert_eq!(p.settings.client.input_sample_rate, 24_000);
        let p = plan(&[
            "--protocol",
            "openai",
            "--commit-every",
            "2s",
            "--turn-detection",
            "none",
        ])
        .unwrap();
        assert_eq!(p.settings.client.commit_every_ms, Some(2000));
        assert_eq!(p.settings.client.turn_detection, Some(TurnDetection::None));
        assert_eq!(p.settings.client.api_version, Some(ApiVersion::Ga));
    }

    #[test]
    fn openai_only_client_settings_are_none_for_the_other_protocols() {
        // A Fun-ASR or vLLM summary says null, not an OpenAI default that was never sent.
        for protocol in ["native", "funasr", "vllm"] {
            let p = plan(&["--protocol", protocol]).unwrap();
            let c = &p.settings.client;
            assert_eq!(
                (c.api_version, c.turn_detection),
                (None, None),
                "{protocol}"
            );
        }
        let p = plan(&["--protocol", "openai", "--api-version", "beta"]).unwrap();
        let c = &p.settings.client;
        assert_eq!(c.api_version, Some(ApiVersion::Beta));
        assert_eq!(c.turn_detection, Some(TurnDetection::ServerVad));
        assert_eq!(
            c.interrupt_response,
            Some(false),
            "said, not left to the server"
        );
    }

    #[test]
    fn interrupt_response_is_the_server_vads_and_openais_only() {
        let p = plan(&["--protocol", "openai", "--interrupt-response"]).unwrap();
        assert_eq!(p.settings.client.interrupt_response, Some(true));
        for args in [
            &["--protocol", "native", "--interrupt-response"][..],
            &[
                "--protocol",
                "openai",
                "--turn-detection",
                "none",
                "--interrupt-response",
            ],
        ] {
            let err = plan(args).unwrap_err().to_string();
            assert!(err.contains("--interrupt-response applies to"), "{err}");
        }
        let p = plan(&["--protocol", "openai", "--turn-detection", "none"]).unwrap();
        assert_eq!(p.settings.client.interrupt_response, None);
    }

    #[test]
    fn a_ga_input_rate_other_than_24000_is_refused_with_what_to_do_issue_12() {
        // openai-python's AudioPCM: `rate: Literal[24000]` ("Only a 24kHz sample rate is
        // supported"); sending 16000 would be refused by the API after the connection.
        let err = plan(&["--protocol", "openai", "--input-sample-rate", "16000"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("takes PCM16 at 24000 Hz only"), "{err}");
        assert!(err.contains("sox in.wav -r 24000"), "{err}");
        assert!(err.contains("assets/speech-24k.wav"), "{err}");
        let p = plan(&["--protocol", "openai", "--input-sample-rate", "24000"]).unwrap();
        assert_eq!(p.settings.client.input_sample_rate, 24_000);
    }

    #[test]
    fn a_vllm_input_rate_other_than_16000_is_refused_the_wire_has_no_rate_issue_12() {
        let err = plan(&["--protocol", "vllm", "--input-sample-rate", "24000"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("carries no rate and its models take PCM16 at 16000 Hz"),
            "{err}"
        );
        assert!(err.contains("sox in.wav -r 16000"), "{err}");
    }

    #[test]
    fn a_ga_session_cannot_ask_for_audio_and_text_at_once_issue_12() {
        for both in ["audio,text", "text,audio"] {
            let err = plan(&["--protocol", "openai", "--modalities", both])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("a GA session asks for audio or text, not both"),
                "{err}"
            );
        }
        // Beta's ["audio","text"] is one choice; GA takes either one alone.
        plan(&[
            "--protocol",
            "openai",
            "--api-version",
            "beta",
            "--modalities",
            "audio,text",
        ])
        .unwrap();
        plan(&["--protocol", "openai", "--modalities", "text"]).unwrap();
    }

    #[test]
    fn headers_and_the_key_are_kept_but_written_redacted_issue_12() {
        let p = plan(&[
            "--url",
            "wss://h/v1/realtime",
            "--header",
            "api-key: azure-1",
            "--api-key",
            "sk-2",
        ])
        .unwrap();
        let c = &p.settings.connection;
        assert_eq!(
            c.handshake_headers(),
            [
                ("api-key".to_string(), "azure-1".to_string()),
                ("Authorization".to_string(), "Bearer sk-2".to_string())
            ]
        );
        let json = serde_json::to_string(&p.settings).unwrap();
        assert!(
            !json.contains("azure-1") && !json.contains("sk-2"),
            "{json}"
        );
        let mut back: Settings = serde_json::from_str(&json).unwrap();
        back.connection
            .restore_secrets(&c.secrets_env().unwrap())
            .unwrap();
        assert_eq!(back.connection.handshake_headers(), c.handshake_headers());
        assert!(plan(&["--header", "no colon"]).is_err());
    }
}
