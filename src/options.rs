//! The command line validated (stage two): the settings a run is made of, in the form the
//! conductor, the workers and the summary share. Every error here names the flag at fault.

use crate::audio::AudioSource;
use crate::cli::{MockBehaviourArgs, Profile, RunArgs};
use crate::protocol::Protocol;
use crate::trace::{TraceMode, TraceWriterMode};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    pub connect_timeout_s: f64,
    pub recv_timeout_s: f64,
    /// The wire protocol spoken.
    #[serde(default)]
    pub protocol: crate::protocol::Protocol,
    /// The output modalities the client asks for.
    #[serde(default = "default_modalities")]
    pub modalities: Vec<String>,
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
    /// Input audio: 16 kHz PCM16 silence or a WAV file.
    pub audio: AudioSource,
    /// How the built-in mock was told to behave (absent with `--url`).
    pub mock: Option<MockBehaviour>,
    pub tui: bool,
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
    /// The Fun-ASR mock's cadence and cost model (with `--protocol funasr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub funasr: Option<crate::cli::FunasrMockArgs>,
}

fn default_profile() -> Profile {
    Profile::Voicechat
}

impl MockBehaviour {
    pub fn from_args(args: &MockBehaviourArgs) -> Self {
        MockBehaviour {
            profile: args.profile,
            replies_per_append: args.replies_per_append,
            burst_units: args.burst_units,
            output_sample_rate: args
                .output_sample_rate
                .unwrap_or_else(|| args.profile.output_sample_rate()),
            max_sessions: args.max_sessions,
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

/// A validated run: its settings, where it writes, and how it was invoked.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub settings: Settings,
    pub output_dir: PathBuf,
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
            (self.duration_s * f64::from(crate::protocol::INPUT_SAMPLE_RATE)).round() as u64
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
    let funasr = args.protocol == Protocol::Funasr;
    let packet_ms = args
        .packet_ms
        .unwrap_or_else(|| args.protocol.default_packet_ms());
    let audio = match &args.audio {
        // Fun-ASR recognises speech: without --audio it streams the built-in sample.
        None if funasr => {
            if args.duration.is_some() {
                bail!("--duration: --protocol funasr streams speech (the built-in sample, or --audio FILE.wav), whose length sets each session's audio; repeat it with --loops N");
            }
            crate::audio::speech_sample(args.loops)?
        }
        None if args.loops != 1 => bail!("--loops repeats an --audio file; give --audio FILE.wav"),
        None => AudioSource::Silence,
        Some(path) => {
            if args.duration.is_some() {
                bail!("--duration and --audio: the file sets the length of each session's audio; repeat it with --loops N");
            }
            AudioSource::Wav {
                path: path.clone(),
                samples: crate::audio::probe(path)?,
                loops: args.loops,
            }
        }
    };
    let duration_s = match (&audio, args.duration) {
        (AudioSource::Wav { .. } | AudioSource::Sample { .. }, _) => {
            audio.total_samples().unwrap_or(0) as f64
                / f64::from(crate::protocol::INPUT_SAMPLE_RATE)
        }
        (AudioSource::Silence, duration) => duration.unwrap_or(DEFAULT_DURATION).as_secs_f64(),
    };
    if audio.total_samples().is_some() && duration_s > crate::audio::MAX_INPUT_S {
        bail!(
            "--audio × --loops is {:.0} s of audio; at most {:.0} s are held in memory, give fewer --loops",
            duration_s,
            crate::audio::MAX_INPUT_S
        );
    }
    if duration_s < f64::from(packet_ms) / 1000.0 {
        bail!(
            "--duration {} is shorter than one packet (--packet-ms {packet_ms}); give at least {packet_ms} ms",
            humantime::format_duration(std::time::Duration::from_secs_f64(duration_s)),
        );
    }
    if duration_s > 24.0 * 3600.0 {
        bail!("--duration must be at most 24h");
    }
    let packets = (duration_s * 1000.0 / f64::from(packet_ms)).ceil();
    if packets > f64::from(u32::MAX) {
        bail!("--duration gives too many packets");
    }
    if args.connect_timeout.is_zero() {
        bail!("--connect-timeout must be more than zero");
    }
    if args.recv_timeout.is_zero() {
        bail!("--recv-timeout must be more than zero");
    }
    if let Some(bad) = args
        .modalities
        .iter()
        .find(|m| !matches!(m.as_str(), "audio" | "text"))
    {
        bail!("--modalities: `{bad}` is not a modality; give audio, text or audio,text");
    }
    if !funasr {
        for (flag, given) in [
            ("--language", args.language.is_some()),
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
    let total = u64::from(args.processes) * u64::from(args.sessions);
    if total > 65_535 {
        bail!("--processes × --sessions is {total}; at most 65535 sessions per run are supported");
    }
    let url = match &args.url {
        Some(url) => {
            check_url(url)?;
            url.clone()
        }
        None => String::new(),
    };
    let output_dir = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(crate::clock::utc_stamp()));
    let settings = Settings {
        builtin_mock: args.url.is_none(),
        url,
        processes: args.processes,
        sessions_per_process: args.sessions,
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
        connect_timeout_s: args.connect_timeout.as_secs_f64(),
        recv_timeout_s: args.recv_timeout.as_secs_f64(),
        send_buffer_bytes: args.send_buffer_bytes,
        protocol: args.protocol,
        modalities: args.modalities.clone(),
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
        max_message_bytes: args.max_message_bytes,
        admission_retries: ADMISSION_RETRIES,
        admission_retry_interval_ms: ADMISSION_RETRY_INTERVAL_MS,
        trace: args.trace,
        trace_writer: args.trace_writer,
        keep_traces: args.keep_traces,
        audio,
        mock: args.url.is_none().then(|| {
            let mut behaviour = MockBehaviour::from_args(&args.mock);
            if funasr {
                behaviour.funasr = Some(args.mock.funasr.clone());
            }
            behaviour
        }),
        tui,
    };
    Ok(RunPlan {
        settings,
        output_dir,
        force: args.force,
        command_line,
        output_jsonl: args.output_jsonl.clone(),
    })
}

/// Checks that `--url` is a `ws://` URL with a host and port we can connect to.
fn check_url(url: &str) -> Result<()> {
    let uri: tokio_tungstenite::tungstenite::http::Uri = url.parse().map_err(|e| {
        anyhow::anyhow!(
            "--url `{url}` is not a URL ({e}); give e.g. ws://127.0.0.1:8765/v1/realtime"
        )
    })?;
    match uri.scheme_str() {
        Some("ws") => {}
        Some("wss") => bail!("--url `{url}`: wss:// (TLS) is not supported yet; use ws://"),
        _ => bail!("--url `{url}` must start with ws://, e.g. ws://127.0.0.1:8765/v1/realtime"),
    }
    if uri.host().is_none() {
        bail!("--url `{url}` has no host");
    }
    Ok(())
}

/// `host:port` of a ws:// URL (port 80 when absent), for the reachability check.
pub fn url_authority(url: &str) -> Option<String> {
    let uri: tokio_tungstenite::tungstenite::http::Uri = url.parse().ok()?;
    let host = uri.host()?;
    let port = uri.port_u16().unwrap_or(80);
    if host.contains(':') && !host.starts_with('[') {
        Some(format!("[{host}]:{port}"))
    } else {
        Some(format!("{host}:{port}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn plan(args: &[&str]) -> Result<RunPlan> {
        let mut argv = vec!["duplexbench-tui", "run"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv)?;
        match cli.command {
            Some(crate::cli::Command::Run(run)) => validate(&run, String::new(), false),
            _ => unreachable!(),
        }
    }

    #[test]
    fn late_threshold_defaults_to_one_packet() {
        let p = plan(&["--packet-ms", "100"]).unwrap();
        assert_eq!(p.settings.late_threshold_ms, 100);
        assert_eq!(p.settings.packets_per_session, 300);
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
        let err = plan(&["--url", "wss://x:1/"]).unwrap_err().to_string();
        assert!(err.contains("wss"), "{err}");
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
        let err = plan(&["--protocol", "funasr", "-d", "5s"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--loops"), "{err}");
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
    }
}
