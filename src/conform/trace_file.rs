//! Reading a recorded `trace.jsonl` (docs/files.md) into the records the rules check. A line
//! that is not a record is kept as an unreadable one, so that the rules report it and every
//! record's position stays its line number.

use super::{Direction, Record};
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The records of the trace file at `path`, then the server's close frame as the receipts
/// beside it keep it (docs/files.md), unless the trace has it as a line (older traces).
pub fn read_trace(path: &Path) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the trace {}", path.display()))?;
    let mut records = parse_trace(&text);
    // A file none of whose lines is a trace record is not a trace (a summary.json, a log):
    // judged, its lines would read as the server's violations.
    if let Some(Direction::Unreadable(why)) = records.first().map(|r| &r.direction) {
        if records
            .iter()
            .all(|r| matches!(r.direction, Direction::Unreadable(_)))
        {
            anyhow::bail!(
                "{} is not a trace.jsonl: none of its {} lines is a trace record (the first: {why}); give a session's trace.jsonl, its session folder or a run's output folder (run with --keep-traces to keep a clean run's traces)",
                path.display(),
                records.len()
            );
        }
    }
    if !records.iter().any(|r| r.direction == Direction::Close) {
        records.extend(read_receipts(path).and_then(close_of_receipts));
    }
    Ok(records)
}

/// The `input-send-receipts.json` beside the trace at `path`, if it is there and JSON.
pub fn read_receipts(path: &Path) -> Option<Value> {
    let receipts = path.parent()?.join(crate::trace::files::RECEIPTS_FILE);
    serde_json::from_str(&std::fs::read_to_string(receipts).ok()?).ok()
}

/// The `close` of a receipts file: the server's close frame, if one came.
fn close_of_receipts(mut receipts: Value) -> Option<Record> {
    let close = receipts.get_mut("close").filter(|c| c.is_object())?.take();
    let time_s = close.get("time_s").and_then(Value::as_f64)?;
    Some(Record::new(Direction::Close, time_s, close))
}

/// The records of a trace's text, one per line.
pub fn parse_trace(text: &str) -> Vec<Record> {
    text.lines().map(parse_line).collect()
}

fn parse_line(line: &str) -> Record {
    let unreadable = |why: String| Record::new(Direction::Unreadable(why), f64::NAN, Value::Null);
    let mut value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(err) => return unreadable(format!("not JSON ({err})")),
    };
    let direction = match value.get("direction").and_then(Value::as_str) {
        Some("send") => Direction::Send,
        Some("receive") => Direction::Receive,
        Some("error") => Direction::Error,
        Some("admission") => Direction::Admission,
        Some("close") => Direction::Close,
        Some(other) => return unreadable(format!("unknown direction {other:?}")),
        None => return unreadable("no string direction".to_string()),
    };
    let Some(time_s) = value.get("time_s").and_then(Value::as_f64) else {
        return unreadable("no numeric time_s".to_string());
    };
    let Some(event) = value.get_mut("event").map(Value::take) else {
        return unreadable("no event".to_string());
    };
    Record::new(direction, time_s, event)
}

/// How a trace is named in violations: its session folder (`w0-s0001`) for a `trace.jsonl`,
/// the path otherwise.
pub fn session_name(path: &Path) -> String {
    let folder = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str());
    match (path.file_name().and_then(|n| n.to_str()), folder) {
        (Some(crate::trace::files::TRACE_FILE), Some(folder)) => folder.to_string(),
        _ => path.display().to_string(),
    }
}

/// The trace files `path` names: itself if a file; in a folder, its `trace.jsonl` or those of
/// its session folders (a run's output folder, or its `sessions/`), sorted.
pub fn trace_files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let own = path.join(crate::trace::files::TRACE_FILE);
    if own.is_file() {
        return Ok(vec![own]);
    }
    let sessions = if path.join("sessions").is_dir() {
        path.join("sessions")
    } else {
        path.to_path_buf()
    };
    let entries = std::fs::read_dir(&sessions)
        .with_context(|| format!("cannot list {}", sessions.display()))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path().join(crate::trace::files::TRACE_FILE))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_records_and_bad_lines_stay_in_place() {
        let text = concat!(
            r#"{"direction":"receive","time_s":1.5,"event":{"type":"session.created"}}"#,
            "\n",
            "not json\n",
            r#"{"direction":"close","time_s":2,"event":{"code":1000,"reason":""}}"#,
            "\n",
            r#"{"direction":"sideways","time_s":2,"event":{}}"#,
            "\n"
        );
        let records = parse_trace(text);
        assert_eq!(records.len(), 4);
        assert_eq!(records[0].direction, Direction::Receive);
        assert_eq!(records[0].event["type"], "session.created");
        assert!(matches!(records[1].direction, Direction::Unreadable(_)));
        assert_eq!(records[2].direction, Direction::Close);
        assert_eq!(records[2].event["code"], 1000);
        assert!(
            matches!(&records[3].direction, Direction::Unreadable(w) if w.contains("sideways"))
        );
    }

    #[test]
    fn the_close_frame_is_read_from_the_receipts() {
        let receipts = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        let close = close_of_receipts(receipts(
            r#"{"session_start_s":1.0,"appends":[],"admitted":true,"close":{"time_s":1.6,"code":1000,"reason":""}}"#,
        ))
        .unwrap();
        assert_eq!(close.direction, Direction::Close);
        assert_eq!(close.time_s, 1.6);
        assert_eq!(close.event["code"], 1000);
        // No close frame came, or the receipts are older than `close`: none.
        for text in [
            r#"{"session_start_s":1.0,"appends":[],"admitted":true,"close":null}"#,
            r#"{"session_start_s":1.0,"appends":[],"admitted":true}"#,
        ] {
            assert_eq!(close_of_receipts(receipts(text)), None, "{text}");
        }
    }

    #[test]
    fn a_session_is_named_by_its_folder() {
        assert_eq!(
            session_name(Path::new("runs/x/sessions/w0-s0003/trace.jsonl")),
            "w0-s0003"
        );
        assert_eq!(session_name(Path::new("/tmp/a.jsonl")), "/tmp/a.jsonl");
    }
}
