//! `--output-jsonl`: the Fun-ASR benchmark's JSONL, byte for byte in its layout — one
//! `{"type": "client", …}` line per client, then one `{"type": "summary", …}` — written as
//! Python's `json.dumps(…, ensure_ascii=False)` writes it (`", "` and `": "` separators), so
//! that a run of this tool and one of `realtime_ws_benchmark.py` diff line by line.

use crate::summary::funasr::FunasrSection;
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;

/// A line: its `type`, then the record's own keys.
#[derive(Serialize)]
struct Line<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    record: &'a T,
}

/// The separators of Python's `json.dumps` defaults.
struct PythonStyle;

impl serde_json::ser::Formatter for PythonStyle {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

fn push_line<T: Serialize>(out: &mut Vec<u8>, kind: &'static str, record: &T) -> Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, PythonStyle);
    Line { kind, record }
        .serialize(&mut ser)
        .context("cannot encode a JSONL line")?;
    out.push(b'\n');
    Ok(())
}

/// Checks at start-up that `path` can be written at the end (its folder exists and takes a
/// file), so that a long run does not end in an error that loses the JSONL asked for: the
/// file is opened for appending (created when absent, and then removed again).
pub fn check_writable(path: &Path) -> Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| {
            format!(
                "cannot write --output-jsonl {}: give a path in a folder that exists and that you can write to",
                path.display()
            )
        })?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// The file's text.
pub fn render(section: &FunasrSection) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for client in &section.clients {
        let start = out.len();
        push_line(&mut out, "client", client)?;
        if client.send_seconds.is_none() {
            stop_never_sent(&mut out[start..]);
        }
    }
    push_line(&mut out, "summary", &section.summary)?;
    Ok(out)
}

/// The benchmark adds `send_seconds` to a client's metrics when it sends STOP, and its last
/// update adds `wall_seconds`, then sets `send_seconds`: a client that never sent STOP (it
/// failed before) has `wall_seconds` first. `line` is laid out so. Neither key can appear
/// inside a string of the line (its quotes would be escaped there).
fn stop_never_sent(line: &mut [u8]) {
    const SEND: &[u8] = br#", "send_seconds": null"#;
    const AFTER_WALL: &[u8] = br#", "audio_per_wall": "#;
    let find = |needle: &[u8]| line.windows(needle.len()).position(|w| w == needle);
    let (Some(send), Some(after_wall)) = (find(SEND), find(AFTER_WALL)) else {
        return;
    };
    if send > after_wall {
        return;
    }
    // `, "send_seconds": null, "wall_seconds": X` becomes `, "wall_seconds": X, "send_seconds": null`.
    line[send..after_wall].rotate_left(SEND.len());
}

/// Writes the file (`-` is stdout).
pub fn write(path: &Path, section: &FunasrSection) -> Result<()> {
    let text = render(section)?;
    if path == Path::new("-") {
        let _ = io::stdout().write_all(&text);
        return Ok(());
    }
    std::fs::write(path, text)
        .with_context(|| format!("cannot write --output-jsonl {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::funasr::{bench_summary, BenchClient, EventCounts, OurFigures};

    #[test]
    fn lines_are_laid_out_as_pythons_json_dumps_issue_11() {
        let client = BenchClient {
            client_id: 0,
            audio_seconds: 5.8,
            chunk_ms: 100,
            client_ping_interval: Some(20.0),
            client_ping_timeout: None,
            messages: 3,
            result_messages: 2,
            partial_messages: 1,
            final_messages: 1,
            events: EventCounts(vec![("stopped".into(), 1)]),
            first_update_ms: Some(462.0),
            final_update_ms: Some(6100.5),
            final_after_stop_ms: Some(300.1),
            stopped: true,
            errors: vec![],
            send_seconds: Some(5.8),
            wall_seconds: 6.2,
            audio_per_wall: Some(0.935),
            send_audio_per_wall: Some(1.0),
            response_lag_ms_max: Some(-58.2),
            response_lag_ms_p95: None,
        };
        let section = FunasrSection {
            summary: bench_summary(std::slice::from_ref(&client), 6.25),
            clients: vec![client],
            ours: OurFigures::default(),
        };
        let text = String::from_utf8(render(&section).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"type": "client", "client_id": 0, "audio_seconds": 5.8, "chunk_ms": 100, "client_ping_interval": 20.0, "client_ping_timeout": null, "messages": 3, "result_messages": 2, "partial_messages": 1, "final_messages": 1, "events": {"stopped": 1}, "first_update_ms": 462.0, "final_update_ms": 6100.5, "final_after_stop_ms": 300.1, "stopped": true, "errors": [], "send_seconds": 5.8, "wall_seconds": 6.2, "audio_per_wall": 0.935, "send_audio_per_wall": 1.0, "response_lag_ms_max": -58.2, "response_lag_ms_p95": null}"#
        );
        assert!(
            lines[1].starts_with(r#"{"type": "summary", "clients": 1, "total_audio_seconds": 5.8, "elapsed_seconds": 6.25, "aggregate_audio_per_wall": 0.928,"#),
            "{}",
            lines[1]
        );

        // A client that failed before it sent STOP: the benchmark never set its send_seconds,
        // so its last update appended wall_seconds before it.
        let mut failed = section.clients[0].clone();
        failed.send_seconds = None;
        failed.send_audio_per_wall = None;
        failed.errors = vec![r#"a "send_seconds": null, "wall_seconds": 1 in an error"#.into()];
        let section = FunasrSection {
            clients: vec![failed],
            ..section
        };
        let text = String::from_utf8(render(&section).unwrap()).unwrap();
        assert!(
            text.lines().next().unwrap().ends_with(r#"in an error"], "wall_seconds": 6.2, "send_seconds": null, "audio_per_wall": 0.935, "send_audio_per_wall": null, "response_lag_ms_max": -58.2, "response_lag_ms_p95": null}"#),
            "{text}"
        );
    }
}
