//! The summary's verdict and its reasons, in the order a reader needs them: the files lost
//! first (they explain what follows), then the workers', the conductor's, the shards' and the
//! start gate's, then the host's load and the server's stalls.

use super::pooled::Pooled;
use super::{multihost, FilesLost, RunRecord};
use crate::sampler::attribution::plural;
use crate::sampler::host_load::HostLoad;
use crate::sampler::server_stall::{self, Found};
use crate::verdict::{self, Facts, Verdict};

/// The verdict on the pooled results, with the reasons that come before the sampler's;
/// `counted`: the client errors in the benchmark's figures (Fun-ASR's), and the late packets
/// that fell due while a send was blocked.
pub(super) fn verdict(
    record: &RunRecord<'_>,
    pooled: &mut Pooled,
    (client_errors, late_while_send_blocked): (u64, u64),
    files_lost: Option<&FilesLost>,
    start_gate: Option<&multihost::StartGate>,
    output_dir: &str,
) -> Verdict {
    let settings = &record.plan.settings;
    let mut verdict = verdict::judge(&Facts {
        unpaced: settings.no_pace,
        client_errors,
        counts: pooled.counts,
        sessions_with_late_packets: pooled.sessions_with_late_packets,
        late_while_send_blocked,
        late_threshold_ms: settings.late_threshold_ms,
        sessions_configured: pooled.sessions.configured,
        incomplete: pooled.sessions.incomplete,
        rejected: pooled.sessions.rejected,
        stopped_early: pooled.sessions.stopped_early,
        protocol_errors: pooled.server.protocol_errors,
        most_common_error: pooled.sessions.errors.first().map(|e| e.message.as_str()),
        cancelled: record.cancelled.as_deref(),
        missing_results: pooled.missing,
        writer_errors: pooled.writer_errors,
        server_errors: pooled.server.error_events,
        server_error_code: pooled
            .server
            .error_codes
            .first()
            .map(|c| c.message.as_str()),
        // The provisional summary (written at the start, left by a killed run) knows nothing
        // of what was sent: no "nothing was sent" from it.
        finished: record.cancelled.as_deref() != Some(crate::summary::UNFINISHED),
    });
    if let Some(lost) = files_lost {
        // First: it explains the incomplete sessions and the cut files the other reasons name.
        verdict.reasons.insert(0, lost.reason(output_dir));
    }
    verdict.reasons.append(&mut pooled.reasons);
    verdict.reasons.extend(record.notes.iter().cloned());
    if settings.shard.is_some() || start_gate.is_some() {
        let who = settings.shard.as_ref().map_or("this run".to_string(), |s| {
            format!("shard {} of {}", s.index, s.count)
        });
        verdict.reasons.extend(multihost::reasons(
            &who,
            start_gate,
            record.clock_sync.as_ref(),
            settings.late_threshold_ms,
        ));
    }
    verdict
}

/// The server's errors say it speaks another protocol than the run's: which, and the flag.
pub(super) fn other_protocol(
    ours: crate::protocol::Protocol,
    instead: Option<&(crate::protocol::Protocol, String)>,
) -> Option<String> {
    use crate::protocol::Protocol;
    let (theirs, example) = instead?;
    let (what, flags) = match theirs {
        Protocol::Native => (
            "asks for sglang-omni's `sglang.seq`",
            "--protocol native (the default)",
        ),
        _ => (
            "asks for `session.type`, as OpenAI Realtime's GA API does",
            "--protocol openai",
        ),
    };
    Some(format!(
        "the server's error \"{example}\" {what}: it speaks {} rather than this run's --protocol {}; give {flags} (`duplexbench-tui conform --url URL --protocol P` checks a server against one)",
        match theirs {
            Protocol::Native => "sglang-omni's native protocol",
            _ => "the OpenAI Realtime API",
        },
        ours.as_str()
    ))
}

/// A run of a dialect with turns (openai, vllm) whose sessions completed without the server
/// ending a single turn measured none of the server's latencies, though its verdict may read
/// qualified and complete: say so and why. With server VAD (OpenAI's default) that is audio
/// in which the VAD heard no speech — the default `--audio` is silence.
pub(super) fn no_turns(
    settings: &crate::options::Settings,
    turns: crate::contract::worker::TurnCounts,
    completed: u64,
) -> Option<String> {
    use crate::protocol::Protocol;
    // A transcription that ended before its input (vLLM's token limit) ended no turn of the
    // client's, yet was answered: said apart (`early_answers`).
    if !matches!(settings.protocol, Protocol::Openai | Protocol::Vllm)
        || completed == 0
        || turns.ended > 0
        || turns.answered > 0
    {
        return None;
    }
    let audio = if matches!(settings.audio, crate::audio::AudioSource::Silence) {
        "the audio is silence (the default --audio), in which the server's VAD hears no speech"
    } else {
        "the server's VAD heard no speech in the audio"
    };
    Some(format!(
        "no turn ended, so none of the server's latencies was measured: {audio}; give speech (--audio assets/speech-24k.wav) or --turn-detection none (a turn per session, ended by the client's commit)"
    ))
}

/// Answers the server sent for no turn the client had (a `response.done` of a response it never
/// asked for): their latencies are not timed, and a server that sends them is worth a look.
pub(super) fn unmatched_answers(turns: crate::contract::worker::TurnCounts) -> Option<String> {
    (turns.unmatched > 0).then(|| {
        format!(
            "{} answers (response.done / transcription.done / a transcript's .completed) came for no turn: the server made them while no turn waited and no input arrived (a response of its own, such as a greeting, or a second done for one turn); they are counted apart (turns' `unmatched`), not timed — see the traces",
            turns.unmatched
        )
    })
}

/// Answers that ended before the input they answer did (vLLM's `transcription.done` when the
/// model stops early): the rest of that input went unanswered, and unmeasured.
pub(super) fn early_answers(
    protocol: crate::protocol::Protocol,
    session_type: Option<crate::protocol::SessionType>,
    turns: crate::contract::worker::TurnCounts,
) -> Option<String> {
    (turns.early > 0).then(|| {
        let answers = plural(turns.early, "answer");
        if session_type == Some(crate::protocol::SessionType::Transcription) {
            format!(
                "{answers} (a transcript's .completed) came while no turn the client or the server's VAD had ended waited for one: transcripts of input not yet committed (a transcription that streams as the audio comes), timed from the first packet of the input then arriving, not from an end — turns' `early`; see the traces"
            )
        } else if protocol == crate::protocol::Protocol::Vllm {
            format!(
                "{answers} (transcription.done) came before the client's final commit: the server transcribed no more of that session's audio, so the rest of its latencies were not measured (vLLM ends a transcription when the model reaches its token limit: give shorter audio per session) — turns' `early`"
            )
        } else {
            format!(
                "{answers} (response.done) came while no turn the client or the server's VAD had ended waited for one: timed from the first packet of the input then arriving, not from an end — turns' `early`; see the traces"
            )
        }
    })
}

/// VAD turns that got no response of their own (OpenAI with `interrupt_response: false` may
/// create none while it is responding): not timed, and not waited for.
pub(super) fn unanswered_turns(turns: crate::contract::worker::TurnCounts) -> Option<String> {
    (turns.unanswered > 0).then(|| {
        format!(
            "{} the server's VAD ended got no response of their own: each ended while a response was in progress, and a later response was taken as a newer turn's or none came; they are not timed — turns' `unanswered`. With interrupt_response false the API may create no response while it is responding: give audio whose pauses outlast the answers, or --interrupt-response",
            plural(turns.unanswered, "turn"),
        )
    })
}

/// Steal at most this high in a second is left out of the foreign load's reason.
const STEAL_NAMED_CORES: f64 = 0.05;

/// Other processes' load, when it went over the threshold; the hypervisor's steal named apart
/// when it was part of it, since no process on the box is to blame for that.
pub(super) fn host_load(load: &HostLoad) -> Option<String> {
    (load.seconds_over_threshold > 0).then(|| {
        if load.steal_cores_max < STEAL_NAMED_CORES {
            return format!(
                "other processes used up to {:.1} cores during {} s of the run (over {} cores): figures may be perturbed; don't build or benchmark beside a run",
                load.foreign_cores_max, load.seconds_over_threshold, load.threshold_cores
            );
        }
        format!(
            "load that was not the run's went over {} cores during {} s of the run (at most {:.1} cores), of it up to {:.1} cores of steal time (the hypervisor ran something else on this VM's CPUs; {:.2} cores on average over the run): figures may be perturbed; don't build or benchmark beside a run, and repeat it when the host is quieter or on dedicated CPUs",
            load.threshold_cores,
            load.seconds_over_threshold,
            load.foreign_cores_max,
            load.steal_cores_max,
            load.steal_cores_mean
        )
    })
}

/// The first five server stalls, and the latency jumps the client's own stalls explain.
pub(super) fn server_stalls(server: &Found) -> Vec<String> {
    let mut reasons: Vec<String> = server
        .stalls
        .iter()
        .take(5)
        .map(server_stall::describe)
        .collect();
    if server.client_explained > 0 {
        reasons.push(format!(
            "the server's reply latency jumped {} while the client itself stalled: the client's doing, not called a server stall",
            match server.client_explained {
                1 => "once".to_string(),
                n => format!("{n} times"),
            }
        ));
    }
    reasons
}

impl FilesLost {
    /// The verdict's reason: what was lost, that the figures are whole, what to do.
    pub(super) fn reason(&self, output_dir: &str) -> String {
        let (what, to_do) = if self.disk_full {
            match crate::sys::file_size_limit_bytes() {
                // Under a file-size limit a write past it fails as one on a full disk does.
                Some(limit) => (
                    format!("the disk holding {output_dir} is full (No space left on device), or a file reached the file-size limit of {:.1} MiB (ulimit -f; File too large)", limit as f64 / 1_048_576.0),
                    "free space or raise the limit (ulimit -f unlimited), or trace less (--trace meta or off)",
                ),
                None => (
                    format!("the disk holding {output_dir} is full (No space left on device)"),
                    "free space, or trace less (--trace meta or off)",
                ),
            }
        } else {
            (
                format!("files under {output_dir} could not be written"),
                "the write error is quoted below (e.g. Permission denied): make the folder writable, or choose another --output",
            )
        };
        format!(
            "{what}: {} trace/receipt lines of {} and {} sample lines of {} were not written; the counts and percentiles here come from the workers' counters and are whole; {to_do}",
            self.trace_lines,
            plural(self.sessions, "session"),
            self.sample_lines,
            plural(self.workers, "worker")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(foreign_max: f64, steal_max: f64, steal_mean: f64) -> HostLoad {
        HostLoad {
            threshold_cores: 0.5,
            seconds: 20,
            seconds_over_threshold: 4,
            foreign_cores_max: foreign_max,
            steal_cores_max: steal_max,
            steal_cores_mean: steal_mean,
            ..HostLoad::default()
        }
    }

    #[test]
    fn files_lost_to_a_refused_write_are_not_advised_as_a_full_disk() {
        let lost = FilesLost {
            disk_full: false,
            trace_lines: 10,
            sessions: 2,
            ..FilesLost::default()
        };
        let reason = lost.reason("runs/x");
        assert!(reason.contains("make the folder writable"), "{reason}");
        assert!(!reason.contains("free space"), "{reason}");
        let full = FilesLost {
            disk_full: true,
            ..lost
        }
        .reason("runs/x");
        assert!(
            full.contains("is full") && full.contains("free space"),
            "{full}"
        );
    }

    #[test]
    fn foreign_load_names_the_hypervisors_steal_apart_from_other_processes() {
        assert_eq!(host_load(&HostLoad::default()), None);
        let processes = host_load(&load(0.8, 0.01, 0.0)).unwrap();
        assert!(
            processes.starts_with(
                "other processes used up to 0.8 cores during 4 s of the run (over 0.5 cores)"
            ),
            "{processes}"
        );
        assert!(!processes.contains("steal"), "{processes}");
        let stolen = host_load(&load(0.8, 0.6, 0.11)).unwrap();
        assert!(
            stolen.starts_with("load that was not the run's went over 0.5 cores during 4 s of the run (at most 0.8 cores), of it up to 0.6 cores of steal time (the hypervisor ran something else on this VM's CPUs; 0.11 cores on average over the run)"),
            "{stolen}"
        );
        assert!(!stolen.contains("other processes used"), "{stolen}");
    }
}
