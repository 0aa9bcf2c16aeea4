//! Receipts and traces on disk match SPEC §6: every append present, in order, and `time_s` never
//! going backwards within a trace.

use crate::util::{self, TempDir};
use std::path::Path;
use std::time::Duration;

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad trace line {l:?}: {e}")))
        .collect()
}

fn run_two_sessions(trace: &str, out: &Path) {
    run_two_sessions_with(&["--trace", trace], out);
}

fn run_two_sessions_with(extra: &[&str], out: &Path) {
    let mut args = vec!["-s", "2", "-d", "2s", "--keep-traces"];
    args.extend_from_slice(extra);
    let output = util::run_to(out, &args, Duration::from_secs(60));
    // The files are what these tests are about; a late packet on a busy machine (exit 1) is not.
    util::assert_finished(&output);
    assert_eq!(util::summary(out)["verdict"]["complete"], true);
}

#[test]
fn receipts_and_full_traces_hold_every_append_in_order() {
    let _serial = util::serial();
    let dir = TempDir::new("traces");
    let out = dir.join("out");
    run_two_sessions("full", &out);
    for session in ["w0-s0000", "w0-s0001"] {
        let folder = out.join("sessions").join(session);
        let receipts: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(folder.join("input-send-receipts.json")).unwrap(),
        )
        .unwrap();
        let appends = receipts["appends"].as_array().unwrap();
        assert_eq!(appends.len(), 25, "2 s in 80 ms packets");
        let start = receipts["session_start_s"].as_f64().unwrap();
        for (n, a) in appends.iter().enumerate() {
            assert_eq!(a["seq"], n);
            let scheduled = a["scheduled_s"].as_f64().unwrap();
            assert!((scheduled - (start + n as f64 * 0.08)).abs() < 1e-5, "{a}");
            assert!(a["completed_s"].as_f64().unwrap() >= a["start_s"].as_f64().unwrap());
        }

        let trace = lines(&folder.join("trace.jsonl"));
        let mut last = f64::MIN;
        for line in &trace {
            let t = line["time_s"].as_f64().unwrap();
            assert!(t >= last, "time_s went backwards: {last} then {line}");
            last = t;
        }
        let sent: Vec<&serde_json::Value> = trace
            .iter()
            .filter(|l| {
                l["direction"] == "send" && l["event"]["type"] == "input_audio_buffer.append"
            })
            .collect();
        assert_eq!(sent.len(), 25);
        for (line, receipt) in sent.iter().zip(appends) {
            assert_eq!(line["event"]["event_id"], receipt["event_id"]);
            assert_eq!(
                line["event"]["audio"].as_str().unwrap().len(),
                3416,
                "base64 of 2560 bytes"
            );
        }
        let received: Vec<&str> = trace
            .iter()
            .filter(|l| l["direction"] == "receive")
            .filter_map(|l| l["event"]["type"].as_str())
            .collect();
        assert_eq!(received.first(), Some(&"session.created"));
        assert_eq!(received.last(), Some(&"session.closed"));
        assert!(received.contains(&"sglang.input_audio.drained"));
        assert_eq!(
            received
                .iter()
                .filter(|t| **t == "sglang.input_audio.accepted")
                .count(),
            25
        );
        // sglang-omni's shape: an admitted session has no admission record, only refusals do.
        assert!(!trace.iter().any(|l| l["direction"] == "admission"));
        // The input ends when its audio has played out (2 s after the gate, and the last
        // packet's 80 ms after its send), not when its last packet is sent: so does
        // sglang-omni's client send its end.
        let end_s = trace
            .iter()
            .find(|l| l["direction"] == "send" && l["event"]["type"] == "sglang.input_audio.end")
            .and_then(|l| l["time_s"].as_f64())
            .unwrap();
        let last_start = appends[24]["start_s"].as_f64().unwrap();
        assert!(end_s >= start + 2.0 - 1e-6, "end at {end_s}, gate {start}");
        assert!(
            end_s >= last_start + 0.08 - 1e-6,
            "end at {end_s}, last packet {last_start}"
        );
        // Only the directions sglang-omni's trace checker allows (it refuses any other line);
        // the server's close frame is kept in the receipts, so conformance can check its code.
        for line in &trace {
            let direction = line["direction"].as_str().unwrap();
            assert!(
                ["send", "receive", "error", "admission"].contains(&direction),
                "{line}"
            );
        }
        assert_eq!(receipts["close"]["code"], 1000, "{receipts}");
        assert!(receipts["close"]["time_s"].as_f64().unwrap() >= last);
    }
    let samples = std::fs::read_to_string(out.join("samples/worker-0.csv")).unwrap();
    assert_eq!(
        samples.lines().count(),
        1 + 2 * 25,
        "a header and one line per packet"
    );
}

#[test]
fn meta_traces_leave_out_audio_and_off_writes_no_trace() {
    let _serial = util::serial();
    let dir = TempDir::new("meta");
    let out = dir.join("meta");
    run_two_sessions("meta", &out);
    let trace = lines(&out.join("sessions/w0-s0000/trace.jsonl"));
    let append = trace
        .iter()
        .find(|l| l["event"]["type"] == "input_audio_buffer.append")
        .unwrap();
    assert!(append["event"]["audio"].is_null());
    assert_eq!(append["event"]["audio_b64_chars"], 3416);
    let delta = trace
        .iter()
        .find(|l| l["event"]["type"] == "response.output_audio.delta")
        .unwrap();
    assert!(delta["event"]["delta"].is_null());
    // The same events as a full trace of the same load, in the same order per direction, with
    // time never going back: leaving the audio out loses no line.
    let full_out = dir.join("full");
    run_two_sessions("full", &full_out);
    for session in ["w0-s0000", "w0-s0001"] {
        let path = |out: &Path| out.join("sessions").join(session).join("trace.jsonl");
        let (meta, full) = (lines(&path(&out)), lines(&path(&full_out)));
        for direction in ["send", "receive"] {
            let types = |trace: &[serde_json::Value]| -> Vec<String> {
                trace
                    .iter()
                    .filter(|l| l["direction"] == direction)
                    .map(|l| l["event"]["type"].to_string())
                    .collect()
            };
            assert_eq!(types(&meta), types(&full), "{session} {direction}");
        }
        let times: Vec<f64> = meta.iter().map(|l| l["time_s"].as_f64().unwrap()).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "{session}: {times:?}"
        );
    }

    let out = dir.join("off");
    run_two_sessions("off", &out);
    assert!(!out.join("sessions/w0-s0000/trace.jsonl").exists());
    assert!(out
        .join("sessions/w0-s0000/input-send-receipts.json")
        .exists());
}

#[test]
fn the_inline_writer_writes_the_same_files_from_the_runtime() {
    let _serial = util::serial();
    let dir = TempDir::new("inline");
    let out = dir.join("out");
    run_two_sessions_with(&["--trace-writer", "inline"], &out);
    let folder = out.join("sessions/w0-s0001");
    let receipts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(folder.join("input-send-receipts.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(receipts["appends"].as_array().unwrap().len(), 25);
    let trace = lines(&folder.join("trace.jsonl"));
    let last_received = trace.iter().rev().find(|l| l["direction"] == "receive");
    assert_eq!(last_received.unwrap()["event"]["type"], "session.closed");
    let samples = std::fs::read_to_string(out.join("samples/worker-0.csv")).unwrap();
    assert_eq!(samples.lines().count(), 1 + 2 * 25);
}

#[test]
fn stagger_spreads_the_first_packets_over_one_interval() {
    let _serial = util::serial();
    let dir = TempDir::new("stagger");
    let out = dir.join("out");
    run_two_sessions_with(&["--stagger", "-p", "2"], &out);
    // 2 workers x 2 sessions: session k of 4 starts k/4 of 80 ms after the gate.
    let start = |name: &str| -> f64 {
        let text = std::fs::read_to_string(
            out.join("sessions")
                .join(name)
                .join("input-send-receipts.json"),
        )
        .unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["session_start_s"]
            .as_f64()
            .unwrap()
    };
    let first = start("w0-s0000");
    for (name, k) in [("w0-s0001", 1.0), ("w1-s0000", 2.0), ("w1-s0001", 3.0)] {
        let offset_ms = (start(name) - first) * 1000.0;
        // The offsets are scheduled exactly; a loaded machine can only delay a start a little
        // (and it would show as that session's own packet 0, not as a deviation).
        assert!(
            (offset_ms - k * 20.0).abs() < 15.0,
            "{name}: {offset_ms:.1} ms after the first"
        );
    }
}

/// `--no-pace` sends back to back, but from the gate like a paced run: every session's first
/// packet leaves at or after the gate, its receipts' `scheduled_s` (it left up to the gate's lead of
/// 0.25 s before it, the schedule's origin after its sends).
#[test]
fn unpaced_sessions_start_at_the_gate_too() {
    let _serial = util::serial();
    let dir = TempDir::new("no-pace");
    let out = dir.join("out");
    run_two_sessions_with(&["--no-pace"], &out);
    for name in ["w0-s0000", "w0-s0001"] {
        let text = std::fs::read_to_string(
            out.join("sessions")
                .join(name)
                .join("input-send-receipts.json"),
        )
        .unwrap();
        let receipts: serde_json::Value = serde_json::from_str(&text).unwrap();
        let first = &receipts["appends"][0];
        let (gate_s, start_s) = (
            first["scheduled_s"].as_f64().unwrap(),
            first["start_s"].as_f64().unwrap(),
        );
        assert!(
            start_s >= gate_s,
            "{name}: packet 0 at {start_s}, gate {gate_s}"
        );
    }
}
