//! Whole runs against the built-in mock: the summary, its schema, the verdict and exit codes.

use crate::util::{self, describe, summary, workers, TempDir};
use std::time::Duration;

/// Every key issue #2 asks `summary.json` to carry, as JSON pointers.
const REQUIRED_KEYS: &[&str] = &[
    "/schema_version",
    "/tool/name",
    "/tool/version",
    "/command_line",
    "/cancelled",
    "/verdict/pacing_qualified",
    "/verdict/complete",
    "/verdict/reasons",
    "/layout/processes",
    "/layout/sessions_per_process",
    "/settings",
    "/host/cpu_model",
    "/host/logical_cpus",
    "/host/kernel",
    "/host/dirty_expire_centisecs",
    "/host/dirty_ratio",
    "/host/output_filesystem",
    "/pacing/packets",
    "/pacing/late_packets",
    "/pacing/late_threshold_ms",
    "/pacing/unsent_packets",
    "/pacing/slow_sends",
    "/pacing/slow_send_threshold_ms",
    "/pacing/sessions_with_late_packets",
    "/pacing/max_deviation_us",
    "/pacing/deviation_ms/p50",
    "/pacing/deviation_ms/p90",
    "/pacing/deviation_ms/p99",
    "/pacing/deviation_ms/p999",
    "/pacing/deviation_ms/max",
    "/pacing/websocket_send_ms/p50",
    "/pacing/websocket_send_ms/p99",
    "/pacing/websocket_send_ms/max",
    "/pacing/append_span_ms/p50",
    "/pacing/append_span_ms/p99",
    "/pacing/append_span_ms/max",
    "/sessions/configured",
    "/sessions/completed",
    "/sessions/incomplete",
    "/sessions/rejected",
    "/peak_overlapping_streams",
    "/processes",
    "/server/accepted_ms/p50",
    "/server/unit_lag_ms/p99",
    "/server/first_audio_ms/max",
];

const PROCESS_KEYS: &[&str] = &[
    "/role",
    "/pid",
    "/cpu_cores",
    "/peak_rss_bytes",
    "/loop_lag_ms/p99",
    "/loop_lag_ms/max",
    "/loop_lag_ms/over_80ms",
    "/loop_lag_ms/over_20ms",
];

const WORKER_KEYS: &[&str] = &[
    "/writer_queue_peak_lines",
    "/writer_queue_peak_bytes",
    "/pacing/packets",
    "/pacing/late_packets",
    "/pacing/deviation_ms/p99",
];

fn validate_against_schema(summary: &serde_json::Value) {
    let schema_path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/summary.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(summary)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "summary.json does not match its schema:\n{}",
        errors.join("\n")
    );
}

#[test]
fn short_2x4_run_completes_with_every_summary_key_and_a_valid_schema() {
    let _serial = util::serial();
    let dir = TempDir::new("2x4");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["-p", "2", "-s", "4", "-d", "3s"],
        Duration::from_secs(90),
    );
    // 0, or 1 if the machine was busy enough to make a packet late: never an error.
    util::assert_finished(&output);
    let s = summary(&out);
    for key in REQUIRED_KEYS {
        assert!(s.pointer(key).is_some(), "summary.json lacks {key}");
    }
    let processes = s["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 3, "two workers and the mock");
    for p in processes {
        for key in PROCESS_KEYS {
            assert!(p.pointer(key).is_some(), "process lacks {key}: {p}");
        }
    }
    for w in workers(&s) {
        for key in WORKER_KEYS {
            assert!(w.pointer(key).is_some(), "worker lacks {key}: {w}");
        }
        // From the gate to the last packet's send: packet 37 is due 2.96 s after the gate.
        let streaming = &w["streaming"];
        let seconds = streaming["seconds"].as_f64().unwrap();
        let cpu = streaming["cpu_seconds"].as_f64().unwrap();
        assert!((2.9..10.0).contains(&seconds), "{w}");
        assert!(
            cpu > 0.0 && cpu <= w["cpu_seconds"].as_f64().unwrap(),
            "streaming CPU is part of the process's: {w}"
        );
        assert!(
            streaming["allocations"].as_u64().is_some(),
            "the runtime thread's allocations are counted: {w}"
        );
    }
    for p in processes {
        // The kernel's part of the CPU, from /proc/self/stat (which every Linux has).
        let system = p["system_cpu_seconds"].as_f64().unwrap();
        assert!(
            (0.0..=p["cpu_seconds"].as_f64().unwrap()).contains(&system),
            "the kernel's CPU is part of the process's: {p}"
        );
    }
    validate_against_schema(&s);

    assert_eq!(s["schema_version"], 3);
    // Pacing depends on how busy the machine is; completion does not.
    assert_eq!(s["verdict"]["complete"], true);
    assert_eq!(s["sessions"]["completed"], 8);
    // 3 s in 80 ms packets: 38 packets per session (the last one short).
    assert_eq!(s["pacing"]["packets"], 8 * 38);
    assert_eq!(s["peak_overlapping_streams"], 8);
    let mock = processes.iter().find(|p| p["role"] == "mock").unwrap();
    assert_eq!(mock["mock"]["appends_received"], 8 * 38);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        md.contains("While streaming (start gate to last packet"),
        "summary.md says what streaming cost: {md}"
    );
    serving_counts_every_packet_unit_and_session(&s, &md);
    assert!(out.join("samples/worker-0.csv").exists());
    assert!(out.join("samples/worker-1.csv").exists());
    // Traces are deleted at the end unless --keep-traces; receipts stay.
    assert!(!out.join("sessions/w0-s0000/trace.jsonl").exists());
    assert!(out
        .join("sessions/w0-s0000/input-send-receipts.json")
        .exists());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("pacing-qualified"), "{stdout}");
}

/// sglang-omni's serving metrics of the 2 × 4 run of 3 s against the VoiceChat mock: every
/// packet's send lateness, the 37 whole units of each session (the 38th, 40 ms, is terminal),
/// one response and one first audio a session, and the output that covers the padded input.
fn serving_counts_every_packet_unit_and_session(s: &serde_json::Value, md: &str) {
    let v = &s["serving"];
    assert_eq!(v["profile"], "voicechat", "{v}");
    assert_eq!(v["native_unit_ms"], 80.0);
    assert_eq!(v["output_sample_rate"], 22050.0);
    assert_eq!(v["attempted_sessions"], 8);
    assert_eq!(v["successful_sessions"], 8);
    assert_eq!(v["send_lateness_s"]["n"], 8 * 38);
    assert_eq!(v["late_send_threshold_s"], 0.02);
    assert_eq!(v["unit_lag_s"]["n"], 8 * 37);
    assert_eq!(v["excluded_terminal_units"], 8);
    assert_eq!(v["responses"], 8);
    assert_eq!(v["ttfa_s"]["n"], 8);
    assert_eq!(
        v["output_gap_s"]["n"],
        8 * 37,
        "38 units of output a session"
    );
    assert_eq!(v["output_drift_s"]["n"], 8 * 38);
    // Each unit's first delta, against the packet that starts at its media time.
    assert_eq!(v["media_schedule_lag_s"]["n"], 8 * 38);
    assert_eq!(v["media_send_lag_s"]["n"], 8 * 38);
    // 38 units of output (the tail padded) for 37.5 units of input.
    let coverage = v["output_coverage"]["p50"].as_f64().unwrap();
    assert!((coverage - 38.0 / 37.5).abs() < 1e-9, "{v}");
    assert!(v["underrun_sessions"].is_u64(), "{v}");
    assert!(
        md.contains("## sglang-omni serving metrics") && md.contains("unit lag"),
        "{md}"
    );
}

/// A profile that may stay silent (MiniCPM-o) has no continuous-output figures, as in
/// sglang-omni's serving metrics: its units and responses are timed.
#[test]
fn a_unit_profile_run_has_unit_and_response_figures_and_no_output_stream_ones() {
    let _serial = util::serial();
    let dir = TempDir::new("minicpmo");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["-s", "2", "-d", "2.5s", "--profile", "minicpmo"],
        Duration::from_secs(90),
    );
    util::assert_finished(&output);
    let s = summary(&out);
    let v = &s["serving"];
    assert_eq!(v["profile"], "minicpmo", "{v}");
    assert_eq!(v["unit_lag_s"]["n"], 2 * 2, "two whole units of 1 s each");
    assert_eq!(v["excluded_terminal_units"], 2);
    assert_eq!(v["send_lateness_s"]["n"], 2 * 32);
    for key in [
        "ttfa_s",
        "output_gap_s",
        "output_drift_s",
        "output_coverage",
        "underrun_count",
    ] {
        assert!(v[key].is_null(), "{key}: {v}");
    }
    assert!(v["responses"].as_u64().unwrap() >= 2, "{v}");
    assert_eq!(
        v["response_ttfa_s"]["n"], v["responses"],
        "every response was created before its audio: {v}"
    );
    validate_against_schema(&s);
}

/// PersonaPlex takes 24 kHz input (sglang-omni's gates resample their dataset for it): against
/// the built-in mock playing it, the client sends 24 kHz by default, the grant takes it, and
/// the serving figures are PersonaPlex's, its input's length read at 24 kHz (80 ms units: 2.4 s
/// is 30 whole units, then the empty unit that carries the end of input, the terminal one).
#[test]
fn a_personaplex_run_streams_24_khz_input_and_has_its_serving_figures() {
    let _serial = util::serial();
    let dir = TempDir::new("personaplex");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["-s", "2", "-d", "2.4s", "--profile", "personaplex"],
        Duration::from_secs(90),
    );
    util::assert_finished(&output);
    let s = summary(&out);
    assert_eq!(s["settings"]["client"]["input_sample_rate"], 24_000);
    assert_eq!(s["sessions"]["completed"], 2, "{}", describe(&output));
    let v = &s["serving"];
    assert_eq!(v["profile"], "personaplex", "{v}");
    assert_eq!(v["output_sample_rate"], 24_000.0, "{v}");
    assert_eq!(v["excluded_terminal_units"], 2, "{v}");
    assert_eq!(v["unit_lag_s"]["n"], 2 * 30, "{v}");
    assert_eq!(
        v["underrun_count"], 0,
        "a 16 kHz reading of the input would see underruns: {v}"
    );
    validate_against_schema(&s);
}

/// Issue 17: a packet allocates nothing on the worker's runtime thread. What a 1 × 64 run
/// without traces allocates there while streaming is the per-session start (about 30 a session)
/// and the receipts' and samples' batches (2 a session every half second): 0.8 a packet over
/// 38 packets. One allocation more a packet or a server frame (a `String`, a `Vec`, a boxed
/// future) would take it past 1.8.
#[test]
fn a_streaming_packet_allocates_nothing_on_the_runtime_thread() {
    let _serial = util::serial();
    let dir = TempDir::new("allocations");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["-p", "1", "-s", "64", "-d", "3s", "--trace", "off"],
        Duration::from_secs(90),
    );
    util::assert_finished(&output);
    let s = summary(&out);
    assert_eq!(s["verdict"]["complete"], true, "{}", describe(&output));
    let packets = s["pacing"]["packets"].as_u64().unwrap();
    let allocations: u64 = workers(&s)
        .iter()
        .map(|w| w["streaming"]["allocations"].as_u64().unwrap())
        .sum();
    let per_packet = allocations as f64 / packets as f64;
    assert!(
        per_packet < 1.4,
        "{allocations} allocations on the runtime thread for {packets} packets ({per_packet:.2} a packet): something allocates per packet or per frame"
    );
}

/// Issue 17: a worker's set-up heap is on transparent huge pages where the machine has them
/// (the kernel's `transparent_hugepage` not `never`, Linux 6.1 or later for `MADV_COLLAPSE`):
/// its sessions' state then costs fewer page walks. 256 sessions hold several MiB before the
/// gate (8 MiB of whole huge pages in a release build).
#[test]
fn a_workers_heap_is_on_huge_pages_where_the_machine_has_them() {
    let _serial = util::serial();
    let dir = TempDir::new("huge-pages");
    let out = dir.join("out");
    let output = util::run_to(
        &out,
        &["-p", "1", "-s", "256", "-d", "2s", "--trace", "off"],
        Duration::from_secs(90),
    );
    util::assert_finished(&output);
    let s = summary(&out);
    let worker = &workers(&s)[0];
    let huge = worker["streaming"]["huge_page_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("/proc/self/smaps_rollup is read: {worker}"));
    if machine_has_huge_pages() {
        assert!(
            huge >= 2 << 20,
            "no huge page in the worker's heap: {worker}"
        );
    }
}

/// Whether the kernel gives huge pages to a heap that asks (`madvise` or `always`) and has
/// `MADV_COLLAPSE` (6.1 and later).
fn machine_has_huge_pages() -> bool {
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let version: Vec<u32> = release
        .trim()
        .split(['.', '-'])
        .take(2)
        .map_while(|n| n.parse().ok())
        .collect();
    !thp.is_empty() && !thp.contains("[never]") && version >= vec![6, 1]
}

#[test]
fn injected_200ms_stall_makes_every_session_of_the_stalled_worker_late() {
    stall_makes_every_session_of_the_stalled_worker_late(&[]);
}

/// With `--stagger` every session has its own deadlines within the interval; a stalled
/// loop must make them late all the same.
#[test]
fn injected_stall_makes_staggered_sessions_late_too() {
    stall_makes_every_session_of_the_stalled_worker_late(&["--stagger"]);
}

fn stall_makes_every_session_of_the_stalled_worker_late(extra: &[&str]) {
    let _serial = util::serial();
    let dir = TempDir::new("stall");
    let out = dir.join("out");
    let mut args = vec![
        "-p",
        "2",
        "-s",
        "4",
        "-d",
        "4s",
        "--trace",
        "meta",
        "--inject-stall-ms",
        "200",
    ];
    args.extend_from_slice(extra);
    let output = util::run_to(&out, &args, Duration::from_secs(90));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    assert_eq!(s["verdict"]["pacing_qualified"], false);
    assert_eq!(
        s["verdict"]["complete"], true,
        "a stall makes packets late, not sessions incomplete"
    );
    let stalled = workers(&s)
        .into_iter()
        .find(|w| w["first_injection_s"].is_number())
        .expect("one worker records its injected stall");
    assert_eq!(
        stalled["pacing"]["sessions_with_late_packets"], 4,
        "{stalled}"
    );
    assert!(
        stalled["loop_lag_ms"]["max"].as_f64().unwrap() >= 150.0,
        "{stalled}"
    );
    assert!(stalled["pacing"]["deviation_ms"]["max"].as_f64().unwrap() >= 120.0);
    let reasons = s["verdict"]["reasons"].to_string();
    assert!(reasons.contains("late packets"), "{reasons}");
    // sglang-omni's serving metrics see the stall as late sends (over 20 ms behind the
    // gate's schedule), at least one in each stalled session.
    let late_sends = s["serving"]["late_send_count"].as_u64().unwrap();
    assert!(late_sends >= 4, "{}", s["serving"]);
    // With stalls, attribution and injections filled in, it still matches the schema.
    validate_against_schema(&s);
}

#[test]
fn sigint_stops_the_run_and_still_writes_a_cancelled_summary() {
    let _serial = util::serial();
    let dir = TempDir::new("sigint");
    let out = dir.join("out");
    let mut child = util::spawn_run(&out, &["-p", "1", "-s", "2", "-d", "60s"]);
    // Wait until packets flow (the samples file grows), then interrupt.
    let samples = out.join("samples/worker-0.csv");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&samples).map_or(0, |m| m.len()) < 500 {
        assert!(
            std::time::Instant::now() < deadline,
            "no packets within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    util::signal(child.id(), rustix::process::Signal::INT).unwrap();
    let status = util::wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(status, Some(130));
    let s = summary(&out);
    assert_eq!(s["cancelled"], true);
    assert_eq!(s["verdict"]["complete"], false);
    assert!(s["pacing"]["packets"].as_u64().unwrap() > 0);
    assert_eq!(s["sessions"]["stopped_early"], 2);
    // The sessions still ended properly with the server.
    assert_eq!(s["sessions"]["completed"], 2);
    // sglang-omni's serving metrics count a session that sent fewer appends than its input
    // has as failed.
    assert_eq!(s["serving"]["attempted_sessions"], 2);
    assert_eq!(s["serving"]["successful_sessions"], 0);
    // Their output is measured against the input they sent, not the 60 s they never sent
    // (which counted as the server's underrun: nearly all of the input).
    let serving = &s["serving"];
    assert!(
        serving["underrun_ratio"].as_f64().unwrap() < 0.5,
        "{serving}"
    );
    assert!(
        serving["output_coverage"]["p50"].as_f64().unwrap() > 0.5,
        "{serving}"
    );
    // The table says they stopped early, as summary.md does.
    let table = util::run(
        &["report", "--text", out.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("2 completed, 0 incomplete, 0 rejected of 2; 2 of them stopped early (before their input's end)"),
        "{text}"
    );
    // ... and why sglang-omni's own count of successful sessions is 0 of them.
    assert!(
        text.contains(
            "0 of 2 sessions successful, 2 stopped early, which it does not call successful"
        ),
        "{text}"
    );
}

/// Ctrl-C while sessions wait in set-up (a server that takes the connection and then says
/// nothing, or never answers the upgrade) ends the sessions at the stop, not after
/// --recv-timeout or --connect-timeout: the workers obeyed no command until every session had
/// set up or timed out (the conductor aborted them 30 s later), and a second Ctrl-C waited for
/// that abort too.
#[test]
fn sigint_during_set_up_stops_the_run_without_waiting_out_the_timeouts() {
    let _serial = util::serial();
    // Handshakes the silent server took, in all: each run's probe, then its sessions'.
    let handshakes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = handshakes.clone();
    let silent_ws = util::LoopbackServer::start(move |stream| {
        let counted = counted.clone();
        async move {
            if let Ok(ws) = tokio_tungstenite::accept_async(stream).await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(300)).await;
                drop(ws);
            }
        }
    });
    let no_upgrade = util::LoopbackServer::start(|mut stream| async move {
        let mut sink = [0u8; 4096];
        while tokio::io::AsyncReadExt::read(&mut stream, &mut sink)
            .await
            .is_ok_and(|n| n > 0)
        {}
    });
    // A session connected to the silent server waits for its answer; one to the other is
    // still connecting whenever the signal comes.
    let cases = [
        (&silent_ws, 1, "no session.created within 3 s of the stop"),
        (&no_upgrade, 1, "the run was stopped while connecting"),
        (&silent_ws, 2, "aborted"),
    ];
    for (server, signals, why) in cases {
        let connected_before = handshakes.load(std::sync::atomic::Ordering::SeqCst);
        let dir = TempDir::new("sigint-setup");
        let out = dir.join("out");
        let url = format!("ws://{}/v1/realtime", server.addr);
        let mut child = util::spawn_run(
            &out,
            &[
                "--url",
                &url,
                "-s",
                "2",
                "-d",
                "2s",
                "--recv-timeout",
                "300s",
                "--connect-timeout",
                "300s",
            ],
        );
        // The provisional summary is written once the workers are started; against the
        // silent server, both sessions then wait for its answer.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let waiting = |n: usize| server.addr != silent_ws.addr || n >= connected_before + 3;
        while !out.join("summary.json").exists()
            || !waiting(handshakes.load(std::sync::atomic::Ordering::SeqCst))
        {
            assert!(std::time::Instant::now() < deadline, "no run set up");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        for _ in 0..signals {
            duplexbench_tui::sys::signal(child.id(), rustix::process::Signal::INT);
            std::thread::sleep(Duration::from_millis(300));
        }
        // A stop's grace is 3 s and an abort's 5 s, against 300 s of timeouts (and the 30 s
        // the conductor gave the stop before aborting on its own).
        let status = util::wait_with_limit(&mut child, Duration::from_secs(25));
        assert_eq!(status, Some(130), "{url}, {signals} signal(s)");
        let s = summary(&out);
        assert_eq!(s["cancelled"], true);
        assert_eq!(s["pacing"]["packets"], 0);
        let errors = s["sessions"]["errors"].to_string();
        assert!(errors.contains(why), "{url}, {signals} signal(s): {errors}");
    }
}
