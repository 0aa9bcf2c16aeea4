//! WAV input (issue 11): the wrong formats are refused before any connection, and `--loops`
//! replays the file exactly.

use crate::util::{self, describe, summary, TempDir};
use std::time::Duration;

const SPEECH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/speech-16k.wav");

#[test]
fn a_wav_in_the_wrong_format_is_refused_before_any_connection_issue_11() {
    let dir = TempDir::new("wrong-wav");
    let wav = dir.join("cd.wav");
    util::write_wav(&wav, 44_100, 2, 100);
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["--audio", wav.to_str().unwrap(), "-s", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("must be 16 kHz mono PCM16 WAV; got 44100 Hz, 2 channel(s), 16-bit samples"),
        "{err}"
    );
    assert!(
        !out.exists(),
        "refused before anything was started or written"
    );
}

#[test]
fn loops_send_exactly_that_many_times_the_files_samples_issue_11() {
    let _serial = util::serial();
    let dir = TempDir::new("loops");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--audio", SPEECH, "--loops", "3", "-s", "2", "--trace", "off",
        ],
        Duration::from_secs(90),
    );
    util::assert_finished(&output);
    let samples = u64::from(hound::WavReader::open(SPEECH).unwrap().duration());
    let s = summary(&out);
    assert_eq!(s["settings"]["audio"]["kind"], "wav");
    assert_eq!(s["settings"]["audio"]["samples"], samples);
    let total_ms = 3 * samples * 1000 / 16_000;
    let packets = total_ms.div_ceil(80);
    assert_eq!(s["pacing"]["packets"], 2 * packets, "{}", s["pacing"]);
    // The mock counts what arrived: 3 × the file per session, to the sample.
    let mock = s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["role"] == "mock")
        .unwrap()
        .clone();
    assert_eq!(mock["mock"]["appends_received"], 2 * packets, "{mock}");
    let csv = std::fs::read_to_string(out.join("samples/worker-0.csv")).unwrap();
    assert_eq!(csv.lines().count() as u64, 1 + 2 * packets);
}

/// `--duration` with `--audio` cuts each session's input there (it was refused: users expect
/// `-d` to trim a long file); past the file's end it names the `--loops` that would fill it.
#[test]
fn duration_cuts_an_audio_file_and_past_its_end_names_the_loops() {
    let _serial = util::serial();
    let dir = TempDir::new("cut");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &[
            "--audio", SPEECH, "-d", "1500ms", "-s", "2", "--trace", "off",
        ],
        Duration::from_secs(60),
    );
    util::assert_finished(&output);
    let s = summary(&out);
    assert_eq!(s["settings"]["audio"]["cut"], 24_000, "{}", s["settings"]);
    assert_eq!(s["settings"]["duration_s"], 1.5);
    // 1.5 s of 80 ms packets: 18 whole and a last one of 60 ms, in each of the two sessions.
    assert_eq!(s["settings"]["packets_per_session"], 19);
    assert_eq!(s["pacing"]["packets"], 38, "{}", s["pacing"]);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("cut at 24000 samples"), "{md}");

    let output = util::run(
        &["run", "--no-tui", "--audio", SPEECH, "-d", "10s"],
        Duration::from_secs(30),
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("--duration 10s is longer than --audio") && err.contains("give --loops 2"),
        "{err}"
    );
}

#[test]
fn a_truncated_wav_is_refused_at_start_up_not_reported_as_a_pacing_failure() {
    let dir = TempDir::new("truncated-wav");
    let whole = std::fs::read(SPEECH).unwrap();
    for (name, len) in [("cut", 1000), ("header-only", 44)] {
        let wav = dir.join(&format!("{name}.wav"));
        std::fs::write(&wav, &whole[..len]).unwrap();
        let wav = wav.to_str().unwrap();
        let out = dir.join(&format!("{name}-out"));
        let sweep_out = dir.join(&format!("{name}-sweep"));
        for args in [
            vec![
                "run",
                "--no-tui",
                "-s",
                "1",
                "--audio",
                wav,
                "--output",
                out.to_str().unwrap(),
            ],
            vec![
                "sweep",
                "--no-tui",
                "--sessions",
                "1,2",
                "--audio",
                wav,
                "--output",
                sweep_out.to_str().unwrap(),
            ],
            vec![
                "conform",
                "--url",
                "ws://127.0.0.1:9/v1/realtime",
                "--audio",
                wav,
            ],
        ] {
            let output = util::run(&args, Duration::from_secs(30));
            assert_eq!(
                output.status.code(),
                Some(2),
                "{args:?}: {}",
                describe(&output)
            );
            let err = String::from_utf8_lossy(&output.stderr);
            let said = format!("--audio {wav} is truncated");
            assert!(
                err.lines()
                    .any(|line| line.starts_with("Error:") && line.contains(&said)),
                "{args:?}: {err}"
            );
        }
        assert!(!out.exists() && !sweep_out.exists(), "nothing left behind");
    }
}
