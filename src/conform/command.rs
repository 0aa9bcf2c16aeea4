//! `duplexbench-tui conform`: checks traces already recorded (`--trace`), or runs a few short
//! sessions against a server (`--url`) and checks the traces they leave. One line per
//! violation, then a verdict line; exit 0 when conformant, 1 when not, 2 when it could not run
//! (docs/exit-codes.md).

use super::{
    check_session, read_trace, refused_admission, session_name, trace_files, SessionReport,
};
use crate::cli::{Cli, Command, ConformArgs};
use crate::paths::RunPaths;
use crate::profile::Profile;
use crate::protocol::Protocol;
use crate::{conductor, options};
use anyhow::{bail, Context, Result};
use clap::Parser as _;
use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Whether `path` is a run folder whose sessions are there without their traces: a run that
/// completed cleanly without `--keep-traces`.
fn traces_deleted(path: &Path) -> bool {
    let paths = RunPaths::new(path);
    paths.summary_json().is_file() && paths.sessions_dir().is_dir()
}

/// The run folder that holds the traces at `given`: the folder itself, or, for its `sessions`
/// folder, a session's folder or a trace file in one, the run folder above (never a folder
/// above one that is not a run's part, which may be another run's).
fn run_folder_of(given: &Path) -> PathBuf {
    // Absolute, so that `.` or `trace.jsonl` given inside a session's folder has parents.
    let given = std::path::absolute(given).unwrap_or_else(|_| given.to_path_buf());
    let dir = crate::report::command::folder_of(&given);
    let named = |p: &Path, name: &str| p.file_name().is_some_and(|n| n == name);
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    let found = if RunPaths::new(dir).summary_json().exists() {
        dir
    } else if named(dir, "sessions") {
        parent.unwrap_or(dir)
    } else if let Some(sessions) = parent.filter(|p| named(p, "sessions")) {
        sessions.parent().unwrap_or(dir)
    } else {
        dir
    };
    found.to_path_buf()
}

/// Why the traces at `given` (a run folder, its `sessions` folder, a session's folder or a
/// trace file) cannot be judged, if they cannot: lines the disk (or a refused write) lost, or
/// a run whose summary is still the provisional one (killed, or its final summary did not fit
/// on a full disk) or was rebuilt after its conductor was killed. A check would blame the
/// server for frames the client recorded and lost, or that the kill cut.
fn traces_incomplete(given: &Path) -> Option<String> {
    let folder = run_folder_of(given);
    let path = folder.as_path();
    if let Some(pid) = crate::paths::running_owner(path) {
        return Some(format!(
            "the run in {} is still going{}: its traces are not whole yet; check them once it ends",
            path.display(),
            if pid == 0 {
                String::new()
            } else {
                format!(" (pid {pid})")
            }
        ));
    }
    let text = std::fs::read_to_string(RunPaths::new(path).summary_json()).ok()?;
    let summary: serde_json::Value = serde_json::from_str(&text).ok()?;
    let lost = &summary["files_lost"];
    if lost.is_object() {
        return Some(format!(
            "the traces of {} are incomplete: {} trace/receipt lines of {} sessions were not written ({}), so a check would blame the server for frames the client lost; run it again with room for its traces",
            path.display(),
            lost["trace_lines"],
            lost["sessions"],
            if lost["disk_full"] == true {
                "the disk was full"
            } else {
                "the writes were refused"
            }
        ));
    }
    let says = |what: &str| {
        summary["verdict"]["reasons"].as_array().is_some_and(|r| {
            r.iter()
                .any(|r| r.as_str().is_some_and(|r| r.contains(what)))
        })
    };
    if says(crate::summary::UNFINISHED) {
        return Some(format!(
            "the run in {} did not finish (its summary.json is the one written when it started: it was killed, or its final summary did not fit on a full disk), so its traces may be cut; conform checks a finished run's traces",
            path.display()
        ));
    }
    // Rebuilt, its summary is whole; its traces still end where the kill cut them (the
    // sessions aborted, and the built-in mock, told to end too, closed them without a frame).
    says(crate::summary::REBUILT).then(|| {
        format!(
            "the run in {} did not finish (its conductor was killed; its summary was rebuilt from its workers' results), so its sessions' traces end where the kill cut them, which would read as the server's violations; conform checks a finished run's traces",
            path.display()
        )
    })
}

/// The summary of the run that recorded the traces at `path`: a folder's own, or, for a trace
/// file, that of the run folder it lies in (`sessions/w0-s0000/trace.jsonl`); never one above a
/// folder given, which may be another run's.
fn recorded_summary(path: &Path) -> Option<serde_json::Value> {
    let places = if path.is_dir() { 1 } else { 4 };
    path.ancestors().take(places).find_map(|dir| {
        let text = std::fs::read_to_string(RunPaths::new(dir).summary_json()).ok()?;
        serde_json::from_str(&text).ok()
    })
}

/// The protocol the run that recorded the traces at `path` spoke, when its summary says.
fn recorded_protocol(path: &Path) -> Option<String> {
    let summary = recorded_summary(path)?;
    summary["settings"]["protocol"].as_str().map(str::to_string)
}

/// Why the run that recorded the traces at `path` ended no turn, when its summary's verdict
/// says so (`no turn ended, so none of the server's latencies was measured: WHY`): its traces
/// hold no answer, so none of the rules about answers was checked.
fn no_turn_ended(path: &Path) -> Option<String> {
    let summary = recorded_summary(path)?;
    let reasons = summary["verdict"]["reasons"].as_array()?;
    reasons.iter().filter_map(|r| r.as_str()).find_map(|r| {
        r.strip_prefix("no turn ended, so none of the server's latencies was measured: ")
            .map(str::to_string)
    })
}

/// A session of conform's run that never opened its WebSocket: its receipts say it was not
/// admitted and its trace holds only errors (the first is returned); `None` for any other.
fn never_connected(file: &Path, records: &[super::Record]) -> Option<String> {
    let receipts = super::trace_file::read_receipts(file)?;
    if receipts
        .get("admitted")
        .and_then(serde_json::Value::as_bool)
        != Some(false)
    {
        return None;
    }
    if !records
        .iter()
        .all(|r| r.direction == super::Direction::Error)
    {
        return None;
    }
    Some(
        records
            .first()
            .and_then(|r| r.event.get("message"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("the connection failed")
            .to_string(),
    )
}

/// The error of a session of conform's own run that could not stream because the server
/// refused a setting of the run's (another input rate than the run sends, a model it does not
/// serve, the OpenAI beta it no longer serves): the run's choice, not the server's fault, so
/// nothing of it is checked.
fn refused_setting(records: &[super::Record]) -> Option<String> {
    records.iter().find_map(|r| match r.direction {
        super::Direction::Error => r
            .event
            .get("message")
            .and_then(serde_json::Value::as_str)
            .filter(|m| m.contains(OTHER_RATE))
            .map(str::to_string),
        super::Direction::Receive => {
            let (code, message) = error_code(&r.event)?;
            let advice = crate::protocol::CLIENT_SETTING_CODES
                .contains(&code)
                .then(|| crate::protocol::error_advice(code))??;
            Some(format!("the server answered {code} ({message}): {advice}"))
        }
        _ => None,
    })
}

/// An `error` event's code and message: OpenAI's (`error: {code, message}`) or vLLM's
/// (`error: "message", code`).
fn error_code(event: &serde_json::Value) -> Option<(&str, &str)> {
    if event.get("type")?.as_str()? != "error" {
        return None;
    }
    let text = serde_json::Value::as_str;
    match event.get("error")? {
        serde_json::Value::Object(error) => Some((
            error.get("code").and_then(text)?,
            error.get("message").and_then(text).unwrap_or(""),
        )),
        serde_json::Value::String(message) => Some((event.get("code").and_then(text)?, message)),
        _ => None,
    }
}

/// How the native client's set-up error names a grant of another input rate than the run's.
const OTHER_RATE: &str = "the server takes PCM16 at";

/// Runs `conform` and returns its exit code.
pub fn run(args: &ConformArgs) -> Result<i32> {
    if let Some(why) = args.trace.iter().find_map(|path| traces_incomplete(path)) {
        bail!(why);
    }
    let (files, run_dir) = match &args.url {
        Some(url) => {
            let dir = args.output.clone().unwrap_or_else(temporary_dir);
            record_run(url, args, &dir)?;
            if let Some(why) = traces_incomplete(&dir) {
                bail!(why);
            }
            let files = trace_files(&dir)?;
            (files, Some(dir))
        }
        None => {
            let mut files = Vec::new();
            for path in &args.trace {
                // A mistyped path is said as such, not as a folder without traces.
                if !path.exists() {
                    bail!(
                        "--trace {}: no such file or folder; give a run's output folder, a session's trace.jsonl, or a folder of them",
                        path.display()
                    );
                }
                // Checked by another protocol's rules, every frame of a conformant server breaks
                // one: refused, saying which protocol the run spoke.
                if let Some(theirs) =
                    recorded_protocol(path).filter(|p| p != args.speak.protocol.as_str())
                {
                    bail!(
                        "{} was recorded by a run with --protocol {theirs}; check it with `conform --protocol {theirs} --trace {}` (this check speaks --protocol {})",
                        path.display(),
                        path.display(),
                        args.speak.protocol.as_str()
                    );
                }
                files.extend(trace_files(path)?);
            }
            (files, None)
        }
    };
    if files.is_empty() {
        let place = run_dir.as_deref().map_or_else(
            || "the --trace paths".to_string(),
            |d| d.display().to_string(),
        );
        // A run with --trace off recorded none: keeping them would not have helped.
        if let Some(path) = args
            .trace
            .iter()
            .find(|path| recorded_summary(path).is_some_and(|s| s["settings"]["trace"] == "off"))
        {
            bail!(
                "no trace.jsonl found in {place}: the run in {} recorded no traces (--trace off). Run it again with --trace full --keep-traces (or let `conform --url URL --output DIR` record a run: it keeps its traces)",
                path.display()
            );
        }
        if args.trace.iter().any(|path| traces_deleted(path)) {
            bail!(
                "no trace.jsonl found in {place}: a run that completes cleanly deletes its \
                 traces unless it runs with --keep-traces. Run it again with --keep-traces \
                 (or let `conform --url URL --output DIR` record a run: it keeps its traces)"
            );
        }
        bail!("no trace.jsonl found in {place}; nothing to check");
    }
    let protocol = args.speak.protocol;
    let mut reports = Vec::with_capacity(files.len());
    let mut refused = 0;
    // Sessions of conform's own run that never opened a WebSocket (a refused handshake, a
    // TLS failure) or could not stream (a setting of the run's refused): the first one's error.
    let mut not_connected: Option<String> = None;
    let mut unconnected = 0;
    let mut could_not_stream = false;
    let check = |file: &Path, records: &[super::Record]| {
        let name = session_name(file);
        match protocol {
            Protocol::Native => check_session(&name, records, args.profile),
            Protocol::Funasr => {
                super::funasr::check_session(&name, records, &super::funasr::audio_sends(file))
            }
            other => super::dialects::check(other, &name, records),
        }
    };
    // Every session of conform's run asks the same: a setting refused in some of them and not
    // in others is the server's inconsistency, checked as such.
    let mut setting_refused = Vec::new();
    for file in &files {
        let records = read_trace(file)?;
        if refused_admission(&records) {
            refused += 1;
            continue;
        }
        if let (Some(_), Some(why)) = (&run_dir, never_connected(file, &records)) {
            unconnected += 1;
            not_connected.get_or_insert(why);
            continue;
        }
        if let (Some(_), Some(why)) = (&run_dir, refused_setting(&records)) {
            setting_refused.push((file, records, why));
            continue;
        }
        reports.push(check(file, &records));
    }
    if reports.is_empty() {
        for (_, _, why) in setting_refused {
            unconnected += 1;
            could_not_stream |= not_connected.is_none();
            not_connected.get_or_insert(why);
        }
    } else {
        reports.extend(
            setting_refused
                .iter()
                .map(|(file, records, _)| check(file, records)),
        );
    }
    if let (true, Some(why)) = (reports.is_empty(), &not_connected) {
        // Nothing was checked: a run folder of conform's own making is not kept (the run's
        // table above named its summary: said so).
        let dropped = match (&run_dir, &args.output) {
            (Some(dir), None) => {
                let _ = std::fs::remove_dir_all(dir);
                format!(" (the run's folder {} is not kept)", dir.display())
            }
            _ => String::new(),
        };
        if could_not_stream {
            let personaplex = if why.contains(OTHER_RATE) {
                "; for sglang-omni's PersonaPlex, --profile personaplex does it"
            } else {
                ""
            };
            bail!(
                "none of the {unconnected} sessions could stream to {}, so nothing was checked: {why}{personaplex}{dropped}",
                args.url.as_deref().unwrap_or("the server")
            );
        }
        bail!(
            "none of the {unconnected} sessions got a WebSocket from {}, so nothing was checked: {why}{dropped}",
            args.url.as_deref().unwrap_or("the server")
        );
    }
    if reports.is_empty() {
        bail!(
            "each of the {refused} sessions was refused admission (HTTP 503 until its retries \
             ran out), so there is nothing to check: the server takes fewer sessions at once \
             (sglang-omni's VoiceChat serves one); run conform again with --sessions 1"
        );
    }
    let conformant = reports.iter().all(|r| r.violations.is_empty());
    let mut out = String::new();
    for violation in reports.iter().flat_map(|r| &r.violations) {
        out.push_str(&violation.to_string());
        out.push('\n');
    }
    // Sessions that got no WebSocket while others did are not checked: said, not dropped.
    if let Some(why) = &not_connected {
        out.push_str(&format!(
            "not checked: {unconnected} of {} sessions got no WebSocket or could not stream: {why}\n",
            files.len()
        ));
    }
    let mut verdict = verdict_line(&reports, refused);
    // Silence under the server's VAD ends no turn: what was checked is the set-up and the
    // appends, and the verdict says so rather than pass the answers it never saw. The run's own
    // verdict says when no turn ended (summary::reasons::no_turns); noted when it is so of
    // every run checked, not of one of several.
    let checked: Vec<&Path> = match &run_dir {
        Some(dir) => vec![dir.as_path()],
        None => args.trace.iter().map(PathBuf::as_path).collect(),
    };
    let unanswered: Vec<(&Path, String)> = checked
        .iter()
        .filter_map(|&p| Some((p, no_turn_ended(p)?)))
        .collect();
    match unanswered.first() {
        Some((_, why)) if unanswered.len() == checked.len() => {
            verdict.push_str(&format!("; no turn ended, so no answer was checked: {why}"));
        }
        Some((path, why)) => verdict.push_str(&format!(
            "; in {} of the {} runs checked no turn ended, so their answers were not checked ({}: {why})",
            unanswered.len(),
            checked.len(),
            path.display()
        )),
        None => {}
    }
    if protocol == Protocol::Native {
        out.push_str(&verdict);
    } else {
        out.push_str(&verdict.replace(
            "(profile unknown)",
            &format!("(protocol {})", protocol.as_str()),
        ));
    }
    out.push('\n');
    // A server of another protocol breaks every rule: say which, from what its errors name.
    let instead = reports
        .iter()
        .flat_map(|r| &r.violations)
        .find_map(|v| protocol.speaks_instead(&v.got));
    if let Some(theirs) = instead {
        out.push_str(&format!(
            "hint: the server's errors say what only {} servers say: check it with --protocol {} (this check spoke --protocol {})\n",
            theirs.as_str(),
            theirs.as_str(),
            protocol.as_str()
        ));
    }
    if let Some(dir) = &run_dir {
        if conformant && args.output.is_none() {
            // The run above printed where its summary is: say it is not kept.
            let _ = std::fs::remove_dir_all(dir);
            out.push_str(&format!(
                "traces: not kept ({} deleted: the server is conformant); give --output DIR to keep the run\n",
                dir.display()
            ));
        } else {
            out.push_str(&format!("traces: {}\n", dir.display()));
        }
    }
    // A closed stdout is not an error: the exit code still gives the verdict.
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(if conformant { 0 } else { 1 })
}

/// `verdict: conformant: 2 sessions (profile voicechat), 0 violations`, or `verdict: NOT
/// conformant: …` with the rules broken; `refused` sessions the server did not admit are
/// named, not checked.
pub fn verdict_line(reports: &[SessionReport], refused: usize) -> String {
    let violations: usize = reports.iter().map(|r| r.violations.len()).sum();
    let rules: BTreeSet<&str> = reports
        .iter()
        .flat_map(|r| r.violations.iter().map(|v| v.rule))
        .collect();
    let profiles: BTreeSet<&str> = reports
        .iter()
        .map(|r| r.profile.map_or("unknown", |p| p.name()))
        .collect();
    let profiles = profiles.into_iter().collect::<Vec<_>>().join(", ");
    let sessions = reports.len();
    let unrecorded = reports.iter().filter(|r| !r.close_recorded).count();
    let mut notes = if unrecorded > 0 {
        format!("; close code not recorded in {unrecorded} of {sessions} sessions")
    } else {
        String::new()
    };
    if refused > 0 {
        notes.push_str(&format!(
            "; {refused} more refused admission (HTTP 503), not checked"
        ));
    }
    if violations == 0 {
        format!(
            "verdict: conformant: {sessions} sessions (profile {profiles}), 0 violations{notes}"
        )
    } else {
        let rules = rules.into_iter().collect::<Vec<_>>().join(", ");
        format!("verdict: NOT conformant: {sessions} sessions (profile {profiles}), {violations} violations of {rules}{notes}")
    }
}

/// A short real run against `url` that keeps full traces in `dir`.
fn record_run(url: &str, args: &ConformArgs, dir: &Path) -> Result<()> {
    let sessions = args.sessions.to_string();
    // With --audio (or Fun-ASR's built-in speech) the file's length unless --duration cuts it.
    let whole_file = args.audio.is_some() || args.speak.protocol == Protocol::Funasr;
    let duration = match args.duration {
        Some(duration) => Some(duration),
        None if whole_file => None,
        None => Some(Duration::from_secs(5)),
    };
    let output = dir.to_str().context("the --output path is not UTF-8")?;
    let mut argv: Vec<String> = [
        "duplexbench-tui",
        "run",
        "--url",
        url,
        "--processes",
        "1",
        "--sessions",
        &sessions,
        "--trace",
        "full",
        "--keep-traces",
        "--no-sampler",
        "--no-tui",
        "--exit-on-finish",
        "--output",
        output,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    if let Some(wav) = &args.audio {
        argv.extend(["--audio".to_string(), wav.display().to_string()]);
    }
    if args.loops != 1 {
        argv.extend(["--loops".to_string(), args.loops.to_string()]);
    }
    if let Some(duration) = duration {
        argv.extend(["--duration".to_string(), duration.as_secs_f64().to_string()]);
    }
    argv.extend(protocol_flags(args));
    let cli = Cli::try_parse_from(&argv).context("cannot plan the conformance run")?;
    let Some(Command::Run(run)) = cli.command else {
        bail!("cannot plan the conformance run");
    };
    // The command as typed (summary.md's `command_line`), not the run conform plans for it.
    let mut plan = options::validate(&run, crate::secret::command_line(), false)?;
    // A grant that leaves out audio is a finding of conform's (`grant-request`), not a reason
    // for the sessions to stop before the rest can be checked.
    plan.settings.client.audio_grant_optional = true;
    // The run's own verdict is about pacing; conformance is about the traces it leaves. Only a
    // cancelled run (128 + signal) means there is nothing complete to check.
    let code = conductor::run(plan, true)?;
    if code >= 128 {
        let by = match code - 128 {
            libc::SIGINT => "Ctrl-C or SIGINT",
            libc::SIGTERM => "SIGTERM",
            libc::SIGHUP => "SIGHUP",
            _ => "a signal",
        };
        bail!("the conformance run was cancelled by {by}: nothing was checked");
    }
    Ok(())
}

/// The protocol, connection and limit flags of `conform`, for its run.
fn protocol_flags(args: &ConformArgs) -> Vec<String> {
    let p = &args.speak;
    let mut flags = vec!["--protocol".to_string(), p.protocol.as_str().to_string()];
    // A server said to play a profile is asked for what that profile serves (MiniCPM-o: audio
    // and text); else the run's default, audio.
    let profile = args.profile.filter(|_| p.protocol == Protocol::Native);
    let modalities = p.modalities.clone().or_else(|| {
        profile.map(|profile| {
            let m = profile.output_modalities().iter();
            m.map(ToString::to_string).collect()
        })
    });
    if let Some(modalities) = modalities {
        flags.extend(["--modalities".to_string(), modalities.join(",")]);
    }
    if p.protocol == Protocol::Openai {
        let version = match p.api_version {
            crate::protocol::ApiVersion::Ga => "ga",
            crate::protocol::ApiVersion::Beta => "beta",
        };
        let turns = match p.turn_detection {
            crate::protocol::TurnDetection::ServerVad => "server-vad",
            crate::protocol::TurnDetection::None => "none",
        };
        flags.extend([
            "--api-version".into(),
            version.into(),
            "--turn-detection".into(),
            turns.into(),
        ]);
        if let Some(every) = p.commit_every {
            flags.extend(["--commit-every".into(), format!("{}ms", every.as_millis())]);
        }
        if p.interrupt_response {
            flags.push("--interrupt-response".into());
        }
        if let Some(session_type) = p.session_type {
            let session_type = match session_type {
                crate::protocol::SessionType::Realtime => "realtime",
                crate::protocol::SessionType::Transcription => "transcription",
            };
            flags.extend(["--session-type".into(), session_type.into()]);
        }
    }
    if let Some(model) = &p.model {
        flags.extend(["--model".into(), model.clone()]);
    }
    if let Some(language) = &args.language {
        flags.extend(["--language".into(), language.clone()]);
    }
    if let Some(hotwords) = &args.hotwords {
        flags.extend(["--hotwords".into(), hotwords.clone()]);
    }
    // A server said to play a profile is sent audio at that profile's rate (PersonaPlex:
    // 24 kHz) unless told otherwise.
    let rate = p
        .input_sample_rate
        .or_else(|| profile.map(Profile::input_sample_rate));
    if let Some(rate) = rate {
        flags.extend(["--input-sample-rate".into(), rate.to_string()]);
    }
    let c = &args.connection;
    if c.insecure {
        flags.push("--insecure".into());
    }
    if let Some(ca) = &c.ca_file {
        flags.extend(["--ca-file".into(), ca.display().to_string()]);
    }
    if let (Some(cert), Some(key)) = (&c.client_cert, &c.client_key) {
        flags.extend([
            "--client-cert".into(),
            cert.display().to_string(),
            "--client-key".into(),
            key.display().to_string(),
        ]);
    }
    for header in &c.headers {
        flags.extend(["--header".into(), header.clone()]);
    }
    // By name: the run reads the value from the environment it inherits.
    for header in &c.header_envs {
        flags.extend(["--header-env".into(), header.clone()]);
    }
    if let Some(key) = &c.api_key {
        flags.extend(["--api-key".into(), key.clone()]);
    }
    let l = &args.limits;
    flags.extend([
        "--connect-timeout".into(),
        l.connect_timeout.as_secs_f64().to_string(),
        "--recv-timeout".into(),
        l.recv_timeout.as_secs_f64().to_string(),
        "--max-message-bytes".into(),
        l.max_message_bytes.to_string(),
    ]);
    flags
}

fn temporary_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "duplexbench-conform-{}-{}",
        std::process::id(),
        crate::clock::utc_stamp()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The limits `conform` was given reach its run unchanged, fractions of a second too.
    #[test]
    fn the_run_gets_conforms_timeouts_and_message_limit() {
        let conform = ["duplexbench-tui", "conform", "--url", "ws://h/"];
        let limits = [
            "--connect-timeout",
            "1.5s",
            "--recv-timeout",
            "250ms",
            "--max-message-bytes",
            "64MiB",
        ];
        let Some(Command::Conform(args)) = Cli::try_parse_from([&conform[..], &limits].concat())
            .unwrap()
            .command
        else {
            panic!("a conform command")
        };
        let mut argv = vec!["duplexbench-tui".to_string(), "run".into()];
        argv.extend(protocol_flags(&args));
        let Some(Command::Run(run)) = Cli::try_parse_from(&argv).unwrap().command else {
            panic!("a run command: {argv:?}")
        };
        let l = &run.limits;
        assert_eq!(l.connect_timeout, std::time::Duration::from_millis(1500));
        assert_eq!(l.recv_timeout, std::time::Duration::from_millis(250));
        assert_eq!(l.max_message_bytes, 64 << 20);
    }

    /// A header from the environment, OpenAI's interrupt_response and the client certificate
    /// reach the run too (the first two were accepted and then dropped: an authenticated
    /// server answered conform with 401).
    #[test]
    fn the_run_gets_conforms_header_env_and_interrupt_response() {
        let conform = [
            "duplexbench-tui",
            "conform",
            "--url",
            "ws://h/v1/realtime",
            "--protocol",
            "openai",
            "--header-env",
            "api-key=AZURE_KEY",
            "--interrupt-response",
            "--client-cert",
            "c.pem",
            "--client-key",
            "k.pem",
        ];
        let Some(Command::Conform(args)) = Cli::try_parse_from(conform).unwrap().command else {
            panic!("a conform command")
        };
        let mut argv = vec!["duplexbench-tui".to_string(), "run".into()];
        argv.extend(protocol_flags(&args));
        let Some(Command::Run(run)) = Cli::try_parse_from(&argv).unwrap().command else {
            panic!("a run command: {argv:?}")
        };
        assert_eq!(run.connection.header_envs, ["api-key=AZURE_KEY"]);
        assert!(run.speak.interrupt_response, "{argv:?}");
        let c = &run.connection;
        assert_eq!(
            c.client_cert.as_deref(),
            Some(std::path::Path::new("c.pem"))
        );
        assert_eq!(c.client_key.as_deref(), Some(std::path::Path::new("k.pem")));
    }
}
