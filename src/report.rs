//! Renderings of a [`Summary`]: `summary.md` for issues ([`markdown`]), and the short table
//! printed at the end of a headless run ([`table`]).

pub mod command;
pub mod compare;
pub mod jsonl;
mod markdown;
mod multihost;
pub mod plain;
pub mod rebuild;
mod table;

use crate::stats::ShortPercentiles;
use crate::summary::{Summary, TurnSummary};

pub use markdown::markdown;
pub use table::{table, table_unwritten};

/// Writes `summary.json` and `summary.md` into a run's (or a merge's) output folder.
pub fn write_files(output_dir: &std::path::Path, summary: &Summary) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let json = serde_json::to_string_pretty(summary).context("cannot encode the summary")?;
    let paths = crate::paths::RunPaths::new(output_dir);
    write_whole(&paths.summary_json(), &(json + "\n"))?;
    write_whole(&paths.summary_md(), &markdown(summary))
}

/// Room kept on disk for the final `summary.json` and `summary.md`, beyond the provisional
/// ones' ends: far more than a summary takes (about 8 KB and 3 KB at 64 sessions; the lists
/// in it are bounded, e.g. at most 200 stalls).
const ROOM_JSON: u64 = 256 * 1024;
const ROOM_MD: u64 = 64 * 1024;

/// Keeps room on disk for the final summary in the provisional files written at the start
/// (allocated past their ends, so their size and text do not change): a disk the run fills
/// still takes the final summary ([`write_whole`]'s fallback). Best effort: a file system
/// without `fallocate`, or a disk already too full, keeps no room, and a final summary the
/// disk refuses is then printed only (the provisional one stays).
pub fn keep_room_for_final(output_dir: &std::path::Path) -> std::io::Result<()> {
    let paths = crate::paths::RunPaths::new(output_dir);
    for (path, bytes) in [
        (paths.summary_json(), ROOM_JSON),
        (paths.summary_md(), ROOM_MD),
    ] {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, bytes)?;
    }
    Ok(())
}

/// Writes beside `path` and renames: the file is whole or (a full disk) the previous one stays.
/// When the disk refuses the new file, the text goes over the old one in place if the room
/// kept in it ([`keep_room_for_final`]) holds all of it, so no write can run out of space.
fn write_whole(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let written = crate::paths::write_whole(path, text.as_bytes());
    if written.is_err() && overwrite_in_kept_room(path, text).is_ok() {
        return Ok(());
    }
    written.with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `text` over `path` in place, only if the blocks already allocated to it hold it all.
/// A write refused even so (a copy-on-write file system allocates anew) puts the old text
/// back, as far as the disk lets it.
fn overwrite_in_kept_room(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::{FileExt as _, MetadataExt as _};
    let old = std::fs::read(path)?;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    let allocated = file.metadata()?.blocks().saturating_mul(512);
    let len = text.len() as u64;
    if allocated < len {
        return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
    }
    let written = file
        .write_all_at(text.as_bytes(), 0)
        .and_then(|()| file.set_len(len));
    if written.is_err() {
        let _ = file
            .write_all_at(&old, 0)
            .and_then(|()| file.set_len(old.len() as u64));
    }
    written
}

/// The workers' CPU while they streamed (start gate to last packet; set-up and closing left
/// out): the one definition of client CPU per session-second (docs/metrics.md), in summary.md,
/// comparisons and merges.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamingCpu {
    /// The workers' cores while streaming, added up.
    pub cores: f64,
    pub cpu_s: f64,
    /// Session-seconds streamed: the packets sent × the packet's length.
    pub session_s: f64,
}

impl StreamingCpu {
    pub fn per_session_s(self) -> f64 {
        self.cpu_s / self.session_s
    }
}

/// [`StreamingCpu`] of a run, when every worker measured its streaming window.
pub(crate) fn streaming_cpu(s: &Summary) -> Option<StreamingCpu> {
    let windows: Vec<_> = s
        .processes
        .iter()
        .filter(|p| p.role == crate::contract::Role::Worker)
        .map(|p| p.streaming)
        .collect::<Option<_>>()?;
    let seconds: f64 = windows.iter().map(|w| w.seconds).sum();
    if seconds <= 0.0 {
        return None;
    }
    let cpu: f64 = windows.iter().map(|w| w.cpu_seconds).sum();
    let cores: f64 = windows
        .iter()
        .map(|w| w.cpu_seconds / w.seconds.max(1e-9))
        .sum();
    // The seconds of audio the sessions sent: sessions the server refused, or that failed
    // before streaming, streamed none (counting them as the workers' sessions × window read a
    // level with half its sessions refused as a client half as costly), and with `--stagger`
    // no session streams for the whole window.
    let session_s = s.pacing.counts.packets as f64 * s.settings.packet_s();
    (session_s > 0.0).then_some(StreamingCpu {
        cores,
        cpu_s: cpu,
        session_s,
    })
}

/// "pacing-qualified, complete" and its negatives.
pub fn verdict_line(s: &Summary) -> String {
    let pacing = if s.verdict.unpaced {
        "unpaced"
    } else if s.verdict.pacing_qualified {
        "pacing-qualified"
    } else {
        "PACING-UNQUALIFIED"
    };
    let complete = if s.verdict.complete {
        "complete"
    } else {
        "NOT complete"
    };
    format!("{pacing}, {complete}")
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// " (61 % in the kernel)" when the process's kernel share is known.
fn kernel_share(proc: &crate::summary::ProcessSummary) -> String {
    proc.kernel_share_pct()
        .map_or_else(String::new, |pct| format!(" ({pct:.0} % in the kernel)"))
}

/// `p50 / p99 / max ms`, or `no samples` (no unit after it).
fn percentiles(q: Option<&ShortPercentiles>) -> String {
    match q {
        Some(q) => format!("{:.2} / {:.2} / {:.2} ms", q.p50, q.p99, q.max),
        None => "no samples".to_string(),
    }
}

/// The server's figures as the client saw them: (name, percentiles). `accepted`: a packet's
/// send to its acceptance; `unit lag`: the send of the packet that completes a unit to the
/// unit's end; `first audio`: packet 0's send to the first audio delta.
fn server_figures(s: &Summary) -> Vec<(&'static str, Option<&ShortPercentiles>)> {
    let v = &s.server;
    // The native protocol's figures. Another protocol's run has its own under their own names
    // (the live dashboard shows those in place of these too): `accepted` and `unit lag` are
    // events its server never sends, and `first audio` from packet 0 would mostly measure how
    // long the first turn's speech was.
    if s.openai.is_some() || s.vllm.is_some() || s.funasr.is_some() {
        return Vec::new();
    }
    vec![
        ("accepted", v.accepted_ms.as_ref()),
        ("unit lag", v.unit_lag_ms.as_ref()),
        ("first audio", v.first_audio_ms.as_ref()),
    ]
}

type TurnFigures<'s> = (
    &'static str,
    Vec<(&'static str, &'s ShortPercentiles)>,
    &'s TurnSummary,
);

/// The turn section of a dialect that has one: its name, its latencies (name, percentiles)
/// with a sample, and the section itself.
fn turn_figures(s: &Summary) -> Option<TurnFigures<'_>> {
    let (name, t) = match (&s.openai, &s.vllm) {
        // A transcription session's text is its input's transcript.
        (Some(t), _)
            if s.settings.client.session_type
                == Some(crate::protocol::SessionType::Transcription) =>
        {
            ("openai transcription", t)
        }
        (Some(t), _) => ("openai", t),
        (None, Some(t)) => ("vllm", t),
        (None, None) => return None,
    };
    let figures = [
        ("first text after end", t.first_text_after_end_ms.as_ref()),
        (
            "first text after start",
            t.first_text_after_start_ms.as_ref(),
        ),
        ("first audio after end", t.first_audio_after_end_ms.as_ref()),
        (
            "first audio after start",
            t.first_audio_after_start_ms.as_ref(),
        ),
        ("done after end", t.done_after_end_ms.as_ref()),
        (
            "speech_stopped after audio",
            t.speech_stopped_after_audio_ms.as_ref(),
        ),
    ]
    .into_iter()
    .filter_map(|(n, q)| Some((n, q?)))
    .collect();
    Some((name, figures, t))
}

/// `12 turns ended, 12 answered (0 not completed), 340 text deltas at 25.0/s, 120 audio deltas`
/// (summary.json's `failed`: cancelled by a barge-in, incomplete at a token limit, or failed;
/// "failed" read as the server's fault for a barge-in asked for); turns whose answer the
/// server refused, when there were any: `, 3 refused` after it;
/// answers to no turn, when there were any: `, 2 to no turn`; VAD turns without an answer of
/// their own and answers before their input ended likewise (`, 1 unanswered`, `, 1 early`).
fn turn_counts(t: &TurnSummary) -> String {
    let c = &t.counts;
    let when = |n: u64, what: &str| {
        if n > 0 {
            format!(", {n} {what}")
        } else {
            String::new()
        }
    };
    format!(
        "{} turns ended, {} answered ({} not completed{}{}{}{}), {} text deltas{}, {} audio deltas",
        c.ended,
        c.answered,
        c.failed,
        when(c.refused, "refused"),
        when(c.unmatched, "to no turn"),
        when(c.unanswered, "unanswered"),
        when(c.early, "early"),
        c.text_deltas,
        t.text_deltas_per_s
            .map(|r| format!(" at {r:.1}/s"))
            .unwrap_or_default(),
        c.audio_deltas
    )
}

/// `invalid_audio × 2, processing_error × 1`.
fn error_codes(s: &Summary) -> Option<String> {
    (!s.server.error_codes.is_empty()).then(|| {
        s.server
            .error_codes
            .iter()
            .map(|e| format!("{} × {}", e.message, e.count))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run folder holding provisional summaries, whose `.partial` names are taken by
    /// folders, so that the disk "refuses" every new file as a full one would.
    fn folder_refusing_new_files(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("duplexbench-report-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let paths = crate::paths::RunPaths::new(&dir);
        for path in [paths.summary_json(), paths.summary_md()] {
            let mut partial = path.as_os_str().to_owned();
            partial.push(".partial");
            std::fs::create_dir_all(std::path::PathBuf::from(partial)).unwrap();
            std::fs::write(&path, "provisional\n").unwrap();
        }
        dir
    }

    #[test]
    fn a_refused_final_summary_goes_into_the_room_the_provisional_one_kept() {
        let dir = folder_refusing_new_files("room");
        if let Err(err) = keep_room_for_final(&dir) {
            // A temp folder on a file system without fallocate: nothing to check here.
            assert_eq!(err.kind(), std::io::ErrorKind::Unsupported, "{err}");
            return;
        }
        let path = crate::paths::RunPaths::new(&dir).summary_json();
        let final_text = "final ".repeat(5000) + "\n";
        write_whole(&path, &final_text).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), final_text);
        // A shorter text than the file holds leaves nothing of the longer one behind.
        write_whole(&path, "short\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "short\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn without_room_a_refused_summary_is_an_error_and_the_provisional_one_stays_whole() {
        let dir = folder_refusing_new_files("no-room");
        let path = crate::paths::RunPaths::new(&dir).summary_json();
        let err = write_whole(&path, &("final ".repeat(5000) + "\n")).unwrap_err();
        assert!(format!("{err:#}").contains("cannot write"), "{err:#}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "provisional\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
