//! `sweep` (issue 15, item 1): the same run at several loads against the real mock on loopback,
//! each level a run folder; a stall injected from one level up stops the sweep there; Ctrl-C
//! keeps the levels done; bad levels and objectives are usage errors. Levels where a scripted
//! server refused the sessions place no knee, and a sweep that cannot start writes nothing.

use crate::util::{self, describe, TempDir};
use std::path::Path;
use std::time::{Duration, Instant};

fn sweep_json(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("sweep.json"))
        .unwrap_or_else(|e| panic!("no sweep.json in {}: {e}", out.display()));
    serde_json::from_str(&text).unwrap()
}

/// `sweep --no-tui --trace off ARGS --output OUT` in the background, for tests that signal it
/// or act while it runs.
fn spawn_sweep(out: &Path, args: &[&str]) -> std::process::Child {
    util::spawn_quiet(&["sweep", "--no-tui", "--trace", "off"], out, args)
}

/// A mock behind a proxy (its URL, and the proxy: dropped, the server goes away).
fn proxied_mock() -> (Mock, String, util::LoopbackServer) {
    let mock = Mock::start();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/v1/realtime", listener.local_addr().unwrap());
    let proxy = proxy(listener, mock.1);
    (mock, url, proxy)
}

/// A server on `listener` that passes every connection through to `upstream` (a mock).
fn proxy(listener: std::net::TcpListener, upstream: std::net::SocketAddr) -> util::LoopbackServer {
    listener.set_nonblocking(true).unwrap();
    util::LoopbackServer::serve(listener, move |mut stream| async move {
        if let Ok(mut mock) = tokio::net::TcpStream::connect(upstream).await {
            let _ = tokio::io::copy_bidirectional(&mut stream, &mut mock).await;
        }
    })
}

/// Waits (up to 60 s) until the sweep writing to `out` lists its level of 2 sessions as done;
/// with a long `--cooldown` it then sits between levels.
fn wait_for_level_2(out: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(out.join("sweep.json"))
        .is_ok_and(|t| t.contains("\"folder\": \"level-0002\""))
    {
        assert!(Instant::now() < deadline, "level 2 never finished");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sweep(out: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "sweep",
        "--no-tui",
        "--trace",
        "off",
        "--cooldown",
        "0s",
        "--output",
    ];
    all.push(out.to_str().unwrap());
    all.extend_from_slice(args);
    util::run(&all, Duration::from_secs(240))
}

#[test]
fn a_sweep_of_8_16_32_gives_a_level_folder_each_a_table_json_and_svg_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep");
    let out = dir.join("sweep");
    let done = sweep(
        &out,
        &["-s", "8,16,32", "-d", "3s", "--slo", "unit_lag_ms.p99<5000"],
    );
    util::assert_finished(&done);
    let s = sweep_json(&out);
    assert_eq!(s["schema_version"], 1);
    assert_eq!(s["planned_sessions"], serde_json::json!([8, 16, 32]));
    let levels = s["levels"].as_array().unwrap();
    // The box is busy: a level may be unqualified, and then the sweep stops there.
    let all_qualified = levels.iter().all(|l| l["qualified"] == true);
    if all_qualified {
        assert_eq!(levels.len(), 3, "{s:#}");
        assert!(s["stopped_early"].is_null());
    } else {
        assert_eq!(
            levels.last().unwrap()["qualified"],
            false,
            "it stops at the first unqualified level: {s:#}"
        );
    }
    let stderr = String::from_utf8_lossy(&done.stderr);
    for (i, level) in levels.iter().enumerate() {
        let n = level["sessions_total"].as_u64().unwrap();
        assert_eq!(n, [8, 16, 32][i]);
        let folder = level["runs"][0]["folder"].as_str().unwrap();
        assert_eq!(folder, format!("level-{n:04}"));
        let summary = util::summary(&out.join(folder));
        assert_eq!(
            summary["layout"]["sessions_total"], n,
            "each level is a full run"
        );
        assert!(
            level["audio_s_per_s"]["median"].as_f64().unwrap() > 0.0,
            "{level:#}"
        );
        assert!(
            level["server_events_per_s"]["median"].as_f64().unwrap() > 0.0,
            "{level:#}"
        );
        assert!(
            level["latency_ms"]["unit_lag_ms.p99"]["median"].is_number(),
            "{level:#}"
        );
        assert_eq!(level["slos"][0]["slo"], "unit_lag_ms.p99<5000");
        assert!(
            stderr.contains(&format!("sweep: level {}/3 {n} sessions", i + 1)),
            "one line per level: {stderr}"
        );
    }
    assert!(s["knees"]["client"]["reason"].is_string());
    assert!(s["knees"]["server_throughput"]["reason"].is_string());
    assert!(s["knees"]["server_slo"]["reason"].is_string());
    let md = std::fs::read_to_string(out.join("sweep.md")).unwrap();
    assert!(
        md.contains("| sessions | P × S | client | complete |"),
        "{md}"
    );
    assert!(
        md.contains("![latency and throughput against load](sweep.svg)"),
        "{md}"
    );
    assert!(md.contains("The client's knee"), "{md}");
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.contains("throughput against load") && svg.contains("unit_lag_ms.p99"));
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(stdout.contains("client's knee:"), "{stdout}");
    // `report` renders the sweep again from sweep.json.
    let again = util::run(&["report", out.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(again.status.code(), Some(0), "{}", describe(&again));
    assert_eq!(String::from_utf8_lossy(&again.stdout), md);
}

#[test]
fn a_stall_from_8_sessions_up_stops_the_sweep_there_and_names_the_client_knee_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-stall");
    let out = dir.join("sweep");
    let done = sweep(
        &out,
        &[
            "-s",
            "4,8,16",
            "-d",
            "3s",
            "--inject-stall-ms",
            "400",
            "--inject-from-sessions",
            "8",
        ],
    );
    let s = sweep_json(&out);
    let levels = s["levels"].as_array().unwrap();
    let last = levels.last().unwrap();
    assert_eq!(last["qualified"], false, "{s:#}");
    assert!(
        levels.len() <= 2,
        "nothing runs above the unqualified level: {s:#}"
    );
    assert!(!out.join("level-0016").exists());
    assert!(
        s["stopped_early"]
            .as_str()
            .unwrap()
            .contains("pacing-unqualified"),
        "{s:#}"
    );
    let client = &s["knees"]["client"];
    if levels.len() == 2 && levels[0]["qualified"] == true {
        assert_eq!(last["sessions_total"], 8, "{s:#}");
        assert_eq!(client["sessions_total"], 4, "{s:#}");
        assert!(
            client["reason"]
                .as_str()
                .unwrap()
                .contains("up to 4 sessions and not at 8"),
            "{client}"
        );
        assert_eq!(done.status.code(), Some(0), "{}", describe(&done));
        // The stall went to level 8 only.
        assert!(util::summary(&out.join("level-0004"))["injections"]
            .as_array()
            .unwrap()
            .is_empty());
        assert!(!util::summary(&out.join("level-0008"))["injections"]
            .as_array()
            .unwrap()
            .is_empty());
    } else {
        // The busy box made level 4 unqualified already: no knee, exit 1.
        assert_eq!(client["sessions_total"], serde_json::Value::Null, "{s:#}");
        assert_eq!(done.status.code(), Some(1), "{}", describe(&done));
    }
}

#[test]
fn ctrl_c_ends_the_sweep_and_keeps_the_levels_done_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-cancel");
    let out = dir.join("sweep");
    let mut child = spawn_sweep(&out, &["--cooldown", "30s", "-s", "2,4", "-d", "1s"]);
    // The first level is done once sweep.json lists it; the sweep then sits in its cooldown.
    wait_for_level_2(&out);
    util::signal(child.id(), rustix::process::Signal::INT).unwrap();
    let code = util::wait_with_limit(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(130));
    let s = sweep_json(&out);
    assert_eq!(s["cancelled"], true);
    assert_eq!(s["levels"].as_array().unwrap().len(), 1, "{s:#}");
    assert!(
        !out.join("level-0004").exists(),
        "the cooldown was cut short, not the next level run"
    );
    let md = std::fs::read_to_string(out.join("sweep.md")).unwrap();
    assert!(md.contains("**Cancelled**"), "{md}");
}

/// A sweep of 2 repeats cancelled after the first repeat of its level of 4 (in the cooldown,
/// or in the second repeat: that run is no repeat) keeps the level, marked as cut short, and
/// sets no knee on it: it said "2 of 2 levels" and set both knees at 4 on one repeat of two
/// (QA of 2026-12-07).
#[test]
fn ctrl_c_between_repeats_marks_the_level_cut_short_and_sets_no_knee_on_it() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-cancel-repeats");
    let out = dir.join("sweep");
    let args = [
        "--cooldown",
        "3s",
        "-s",
        "2,4",
        "-d",
        "1s",
        "--repeats",
        "2",
    ];
    let mut child = spawn_sweep(&out, &args);
    wait_for_final_summary(&out.join("level-0004"));
    util::signal(child.id(), rustix::process::Signal::INT).unwrap();
    let code = util::wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(code, Some(130));
    let s = sweep_json(&out);
    let levels = s["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{s:#}");
    assert_eq!(levels[1]["runs"].as_array().unwrap().len(), 1, "{s:#}");
    assert_eq!(
        s["stopped_early"],
        "cancelled during the level of 4 sessions after 1 of 2 repeats (1 of 2 levels whole)"
    );
    for knee in ["client", "server_throughput"] {
        assert_ne!(s["knees"][knee]["sessions_total"], 4, "{s:#}");
    }
    let md = std::fs::read_to_string(out.join("sweep.md")).unwrap();
    assert!(md.contains("| 4 (1 of 2 repeats) |"), "{md}");
    assert!(
        md.contains("the level of 4 sessions was cut short after 1 of 2 repeats"),
        "{md}"
    );
}

/// A sweep killed between levels (SIGKILL: nothing of it runs after) leaves files that say
/// it did not finish, as a run's provisional summary.json does; they read as a finished sweep
/// of one level before (QA of 2026-12-07).
#[test]
fn a_sweep_killed_between_levels_leaves_files_that_say_it_did_not_finish() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-killed");
    let out = dir.join("sweep");
    let mut child = spawn_sweep(&out, &["--cooldown", "30s", "-s", "2,4", "-d", "1s"]);
    wait_for_level_2(&out);
    child.kill().unwrap();
    let _ = child.wait();
    let s = sweep_json(&out);
    assert_eq!(s["cancelled"], true, "{s:#}");
    let why = s["stopped_early"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("the sweep did not finish: these files were written after level 1 of 2"),
        "{why}"
    );
    let md = std::fs::read_to_string(out.join("sweep.md")).unwrap();
    assert!(
        md.contains("**Stopped early**: the sweep did not finish"),
        "{md}"
    );
    let report = util::run(
        &["report", out.to_str().unwrap(), "--text"],
        Duration::from_secs(10),
    );
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("stopped early: the sweep did not finish"),
        "{text}"
    );
}

/// Two sweeps compared with --force still name what differs (the loads and the servers), as
/// two runs' comparison does: the sweeps' said nothing (QA of 2026-12-07), and a server
/// difference is the flag that differs, not both mocks' flag lists.
#[test]
fn sweeps_compared_name_how_their_loads_and_servers_differ() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-vs");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let done = sweep(&a, &["-s", "2", "-d", "1s"]);
    assert!(
        matches!(done.status.code(), Some(0 | 1)),
        "{}",
        describe(&done)
    );
    let done = sweep(&b, &["-s", "2", "-d", "2s", "--replies-per-append", "1"]);
    assert!(
        matches!(done.status.code(), Some(0 | 1)),
        "{}",
        describe(&done)
    );
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let refused = util::run(&["report", a, "--vs", b], Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    let forced = util::run(
        &["report", a, "--vs", b, "--force"],
        Duration::from_secs(30),
    );
    assert_eq!(forced.status.code(), Some(0), "{}", describe(&forced));
    let md = String::from_utf8_lossy(&forced.stdout);
    assert!(
        md.contains("The loads differ (") && md.contains("ratios compare different loads"),
        "{md}"
    );
    assert!(
        md.contains("The servers differ: the built-in mock (--protocol native) with --replies-per-append 3 vs 1."),
        "{md}"
    );
    assert!(md.contains("1 level, 1 run"), "{md}");

    // A repeat whose summary cannot be read is left out and named; the rest still compares
    // (the whole comparison failed on it).
    let copy = dir.join("b-copy");
    let done = sweep(
        &copy,
        &["-s", "2,4", "-d", "2s", "--replies-per-append", "1"],
    );
    assert!(
        matches!(done.status.code(), Some(0 | 1)),
        "{}",
        describe(&done)
    );
    std::fs::write(copy.join("level-0004").join("summary.json"), "{\"cut").unwrap();
    let vs = util::run(
        &["report", b, "--vs", copy.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(vs.status.code(), Some(0), "{}", describe(&vs));
    let md = String::from_utf8_lossy(&vs.stdout);
    assert!(
        md.contains("**Left out**") && md.contains("level-0004: ") && md.contains("## 2 sessions"),
        "{md}"
    );
}

#[test]
fn bad_levels_and_unknown_slo_figures_are_usage_errors_that_say_what_to_give_issue_15() {
    let dir = TempDir::new("sweep-bad");
    let out = dir.join("sweep");
    for (args, says) in [
        (&["-s", "16,8"][..], "the levels must rise"),
        (
            &["-c", "3,6", "-p", "2"][..],
            "does not spread evenly over --processes 2",
        ),
        (
            &["-s", "4", "--slo", "first_update_ms.p95<800"][..],
            "the figures are accepted_ms.p50",
        ),
        (
            &["-s", "4", "--slo", "unit_lag_ms.p99"][..],
            "has no comparison",
        ),
        // vLLM's first text comes before the input ends: that objective could never hold.
        (
            &[
                "-s",
                "4",
                "--protocol",
                "vllm",
                "--slo",
                "first_text_after_end_ms.p99<1000",
            ][..],
            "give its time to first text from the start of the input, `first_text_after_start_ms.p99`",
        ),
        (&[][..], "--sessions"),
        // Unpaced, every level was called the client's fault and the sweep stopped at the
        // first (QA of 2026-12-07).
        (
            &["-s", "2,4", "--no-pace"][..],
            "--no-pace: a sweep finds its knees from paced levels",
        ),
    ] {
        let done = sweep(&out, args);
        assert_eq!(done.status.code(), Some(2), "{args:?}: {}", describe(&done));
        let err = String::from_utf8_lossy(&done.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.join("sweep.json").exists(), "nothing is written");
    }
}

#[test]
fn a_warm_up_is_kept_apart_and_repeats_give_min_median_max_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-repeats");
    let out = dir.join("sweep");
    let done = sweep(
        &out,
        &[
            "-s",
            "2",
            "-d",
            "1s",
            "--repeats",
            "2",
            "--warmup",
            "1s",
            "--audio",
            concat!(env!("CARGO_MANIFEST_DIR"), "/assets/speech-16k.wav"),
        ],
    );
    util::assert_finished(&done);
    let s = sweep_json(&out);
    // The audio every level streamed, cut at --duration, is in sweep.json and sweep.md.
    assert_eq!(s["audio"]["kind"], "wav", "{s:#}");
    assert_eq!(s["audio"]["cut"], 16000, "{s:#}");
    let md = std::fs::read_to_string(out.join("sweep.md")).unwrap();
    assert!(
        md.contains("1 s of audio (")
            && md.contains("speech-16k.wav (93249 samples) × 1, cut at 16000 samples) per level"),
        "{md}"
    );
    assert_eq!(s["warmup"]["folder"], "warmup", "{s:#}");
    assert!(
        s["warmup"]["pacing_qualified"].is_boolean(),
        "its pacing is checked"
    );
    assert_eq!(
        util::summary(&out.join("warmup"))["settings"]["duration_s"],
        1.0
    );
    let level = &s["levels"][0];
    let runs = level["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{s:#}");
    assert_eq!(runs[1]["folder"], "level-0002-r2");
    assert!(out.join("level-0002-r2/summary.json").is_file());
    let t = &level["audio_s_per_s"];
    let (min, median, max) = (
        t["min"].as_f64().unwrap(),
        t["median"].as_f64().unwrap(),
        t["max"].as_f64().unwrap(),
    );
    assert!(min <= median && median <= max, "{t}");
    // A second sweep into the same folder is refused unless --force.
    let again = sweep(&out, &["-s", "2", "-d", "1s"]);
    assert_eq!(again.status.code(), Some(2), "{}", describe(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
}

#[test]
fn ctrl_c_during_a_level_stops_that_run_cleanly_and_counts_no_level_issue_15() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-cancel-level");
    let out = dir.join("sweep");
    let mut child = spawn_sweep(&out, &["-s", "2,4", "-d", "20s"]);
    // Streaming has begun once the first level's samples file has packets in it.
    let samples = out.join("level-0002/samples/worker-0.csv");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&samples).map_or(0, |s| s.lines().count()) < 10 {
        assert!(Instant::now() < deadline, "level 2 never streamed");
        std::thread::sleep(Duration::from_millis(100));
    }
    util::signal(child.id(), rustix::process::Signal::INT).unwrap();
    let code = util::wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(code, Some(130));
    let s = sweep_json(&out);
    assert_eq!(s["cancelled"], true, "{s:#}");
    assert_eq!(
        s["levels"].as_array().unwrap().len(),
        0,
        "a cancelled run is no level: {s:#}"
    );
    assert_eq!(
        util::summary(&out.join("level-0002"))["cancelled"],
        true,
        "its own summary says so"
    );
    assert!(!out.join("level-0004").exists());
}

/// A server on 127.0.0.1 that reads each WebSocket handshake and answers the status line
/// `status` (e.g. `HTTP/1.1 403 Forbidden`) to every one after the first `serve` handshakes,
/// which go to the mock at `upstream`. The conductor's probe before each level makes a
/// handshake too, and counts.
fn refusing_after(
    serve: usize,
    upstream: Option<std::net::SocketAddr>,
    status: &'static str,
) -> util::LoopbackServer {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let handshakes = std::sync::Arc::new(AtomicUsize::new(0));
    util::LoopbackServer::start(move |mut stream| {
        let handshakes = handshakes.clone();
        async move {
            let mut request = vec![0u8; 8192];
            let n = match stream.read(&mut request).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let first = handshakes.fetch_add(1, Ordering::SeqCst) < serve;
            let upstream = upstream.filter(|_| first);
            let Some(upstream) = upstream else {
                let reply = format!("{status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = stream.write_all(reply.as_bytes()).await;
                return;
            };
            let Ok(mut mock) = tokio::net::TcpStream::connect(upstream).await else {
                return;
            };
            if mock.write_all(&request[..n]).await.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut stream, &mut mock).await;
            }
        }
    })
}

/// The mock alone on 127.0.0.1, killed when dropped.
struct Mock(std::process::Child, std::net::SocketAddr);

impl Mock {
    fn start() -> Mock {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(util::bin())
            .args(["mock", "--port", "0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .parse()
            .unwrap();
        Mock(child, addr)
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server that accepts every session and drops it mid-stream: its sessions streamed, and
/// ended early, so audio over the short wall time read as a server that keeps up and the sweep
/// named a knee "at or above" the top and exited 0 (the QA finding of 2026-12-06). The
/// throughput counts only sessions carried to their end: none here, so no server knee, exit 1.
#[test]
fn a_sweep_of_a_server_that_drops_every_session_mid_stream_names_no_server_knee() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-dropped");
    let server = crate::fake_server::start(crate::fake_server::Misbehaviour::CloseAfterAppends(5));
    let out = dir.join("sweep");
    let done = sweep(&out, &["--url", &server.url, "-s", "1,2", "-d", "2s"]);
    assert_eq!(done.status.code(), Some(1), "{}", describe(&done));
    let s = sweep_json(&out);
    for level in s["levels"].as_array().unwrap() {
        assert_eq!(level["audio_s_per_s"]["median"], 0.0, "{level:#}");
    }
    let knee = &s["knees"]["server_throughput"];
    assert!(knee["sessions_total"].is_null(), "{knee:#}");
    assert!(
        knee["reason"]
            .as_str()
            .unwrap()
            .starts_with("no session completed at any qualified level, 1 and 2 sessions (most common error: the server closed the connection mid-session"),
        "{knee:#}"
    );
}

#[test]
fn a_sweep_of_a_server_that_refuses_every_session_names_no_knee_and_exits_1() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-refused");
    // An HTTP/1.0 answer is a refusal too (a proxy's, Python's `http.server`'s), named by its
    // status and not as a wrong HTTP version.
    for (status, folder) in [
        ("HTTP/1.1 403 Forbidden", "403"),
        ("HTTP/1.1 503 Service Unavailable", "503"),
        ("HTTP/1.0 503 Service Unavailable", "503-http10"),
    ] {
        let server = refusing_after(0, None, status);
        let url = format!("ws://{}/v1/realtime", server.addr);
        let out = dir.join(folder);
        let done = sweep(&out, &["--url", &url, "-s", "1,2", "-d", "2s"]);
        assert_eq!(
            done.status.code(),
            Some(1),
            "nothing streamed: the sweep did not measure the server: {}",
            describe(&done)
        );
        let s = sweep_json(&out);
        let levels = s["levels"].as_array().unwrap();
        assert_eq!(levels.len(), 2, "{s:#}");
        for level in levels {
            assert_eq!(level["sessions_streamed"]["max"], 0.0, "{level:#}");
        }
        for knee in ["client", "server_throughput"] {
            let knee = &s["knees"][knee];
            assert!(knee["sessions_total"].is_null(), "{s:#}");
            assert!(
                knee["reason"]
                    .as_str()
                    .unwrap()
                    .contains("no session streamed at any level"),
                "{knee}"
            );
        }
        let stdout = String::from_utf8_lossy(&done.stdout);
        assert!(
            stdout.contains(
                "client's knee: none: no session streamed at any level (1 and 2 sessions"
            ),
            "{stdout}"
        );
        assert!(
            stdout.contains(&status[9..12]) && !stdout.contains("HTTP version"),
            "the server's answer is named: {stdout}"
        );
        assert!(
            stdout.contains("check that the server at --url"),
            "{stdout}"
        );
        assert!(stdout.contains("NO (0 of 2 streamed)"), "{stdout}");
        assert!(!stdout.contains("at or above"), "{stdout}");
    }
}

#[test]
fn levels_where_sessions_were_refused_count_only_what_streamed() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-refused-later");
    let out = dir.join("sweep");
    let mock = Mock::start();
    // Five handshakes reach the mock: the sweep's probe before it names its folder, level 1's
    // probe and session, level 2's probe and one of its sessions; level 4 is refused.
    let server = refusing_after(5, Some(mock.1), "HTTP/1.1 403 Forbidden");
    let url = format!("ws://{}/v1/realtime", server.addr);
    let done = sweep(&out, &["--url", &url, "-s", "1,2,4", "-d", "2s"]);
    let s = sweep_json(&out);
    let levels = s["levels"].as_array().unwrap();
    if levels[0]["qualified"] == false {
        return util::skip(
            "levels_where_sessions_were_refused_count_only_what_streamed",
            "the busy box made 1 session unqualified",
        );
    }
    assert_eq!(levels.len(), 3, "{s:#}");
    let streamed: Vec<f64> = levels
        .iter()
        .map(|l| l["sessions_streamed"]["median"].as_f64().unwrap())
        .collect();
    assert_eq!(streamed, [1.0, 1.0, 0.0], "{s:#}");
    assert_eq!(
        done.status.code(),
        Some(0),
        "level 1 measured the server: {}",
        describe(&done)
    );
    let client = &s["knees"]["client"];
    let why = client["reason"].as_str().unwrap();
    if levels[1]["qualified"] == true {
        assert_eq!(
            client["sessions_total"], 2,
            "not 4, where nothing streamed: {s:#}"
        );
        assert!(why.contains("at 2 sessions only 1 of 2 streamed"), "{why}");
    }
    assert!(
        why.contains("no session streamed at 4 sessions (most common error: cannot connect"),
        "{why}"
    );
    assert!(why.contains("403 Forbidden"), "{why}");
    let throughput = &s["knees"]["server_throughput"];
    assert_ne!(throughput["sessions_total"], 4, "{s:#}");
    assert!(
        throughput["reason"]
            .as_str()
            .unwrap()
            .contains("so that level places no knee"),
        "{throughput}"
    );
}

#[test]
fn a_sweep_that_cannot_start_writes_nothing_so_it_can_be_run_again_as_it_is() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-unreachable");
    let out = dir.join("swunr");
    // A port nothing listens on (bound, then closed), where the server comes up later.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("ws://127.0.0.1:{port}/v1/realtime");
    let args = ["--url", url.as_str(), "-s", "1,2", "-d", "1s"];
    let done = sweep(&out, &args);
    assert_eq!(done.status.code(), Some(2), "{}", describe(&done));
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(
        stderr.contains("cannot reach the server"),
        "{}",
        describe(&done)
    );
    // It names no folder it does not keep.
    assert!(!stderr.contains("sweep folder"), "{}", describe(&done));
    assert!(
        !out.exists(),
        "nothing is written: {:?}",
        std::fs::read_dir(&out).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
    // Once the server is up, the same command runs, without --force.
    let mock = Mock::start();
    let upstream = mock.1;
    let _server = proxy(
        std::net::TcpListener::bind(("127.0.0.1", port)).unwrap(),
        upstream,
    );
    let again = sweep(&out, &args);
    assert!(
        matches!(again.status.code(), Some(0 | 1)),
        "{}",
        describe(&again)
    );
    assert!(!sweep_json(&out)["levels"].as_array().unwrap().is_empty());
}

/// A sweep whose second repeat of its first level cannot start (the server went away during
/// the cooldown) writes nothing either: the first repeat's finished folder goes too, so the
/// same command runs again without --force (it was left, and refused the re-run).
#[test]
fn a_first_level_whose_later_repeat_cannot_start_leaves_nothing_behind() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-repeat-unreachable");
    let out = dir.join("sw");
    let (_mock, url, proxy) = proxied_mock();
    let args = [
        "--cooldown",
        "5s",
        "--repeats",
        "2",
        "--url",
        &url,
        "-s",
        "1",
        "-d",
        "1s",
    ];
    let mut child = spawn_sweep(&out, &args);
    // Then the server goes away, during the cooldown.
    wait_for_final_summary(&out.join("level-0001"));
    drop(proxy);
    let code = util::wait_with_limit(&mut child, Duration::from_secs(60));
    assert_eq!(code, Some(2));
    assert!(
        !out.exists(),
        "nothing is written: {:?}",
        std::fs::read_dir(&out).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
}

/// Waits until the run in `folder` is done: its summary is the final one (the provisional one
/// says the run did not finish).
fn wait_for_final_summary(folder: &Path) {
    let summary = folder.join("summary.json");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let is_final = |s: String| s.contains("\"verdict\"") && !s.contains("the run did not finish");
    while !std::fs::read_to_string(&summary).is_ok_and(is_final) {
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not finish",
            folder.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A level above the first that cannot start (the server went away during the cooldown) ends
/// the sweep with exit 2, its files keep the levels done, and the table and knees of those
/// are printed as at any other end (stdout was empty).
#[test]
fn a_later_level_that_cannot_start_keeps_and_prints_the_levels_done() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-later-unreachable");
    let out = dir.join("sw");
    let (_mock, url, proxy) = proxied_mock();
    let out_arg = out.to_str().unwrap();
    let args = [
        "sweep",
        "--no-tui",
        "--trace",
        "off",
        "--cooldown",
        "5s",
        "--url",
        &url,
        "-s",
        "1,2",
        "-d",
        "1s",
        "--output",
        out_arg,
    ];
    let mut child = util::spawn_in(&dir.join(""), &args);
    wait_for_final_summary(&out.join("level-0001"));
    drop(proxy);
    let code = util::wait_with_limit(&mut child, Duration::from_secs(60));
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    let levels = sweep_json(&out)["levels"].as_array().unwrap().len();
    assert_eq!(levels, 1, "{stderr}");
    assert!(stdout.contains("could not start"), "{stdout}\n{stderr}");
    assert!(stderr.contains("sweep: results in"), "{stderr}");
}

/// `sweep --force` over another sweep replaces it once its first level is done: the old
/// sweep's levels it does not run again go then, other files stay; one that cannot start
/// leaves the old sweep whole (it was deleted before the first level).
#[test]
fn a_forced_sweep_replaces_the_old_one_only_once_a_level_is_done() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-force");
    let out = dir.join("sw");
    let first = sweep(&out, &["-s", "1,2", "-d", "1s"]);
    assert!(
        matches!(first.status.code(), Some(0 | 1)),
        "{}",
        describe(&first)
    );
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    // A server nobody listens on: the forced sweep cannot start.
    let url = util::unreachable_url();
    let refused = sweep(&out, &["--force", "--url", &url, "-s", "1", "-d", "1s"]);
    assert_eq!(refused.status.code(), Some(2), "{}", describe(&refused));
    assert!(out.join("level-0002").is_dir(), "the old sweep is whole");
    assert_eq!(sweep_json(&out)["levels"].as_array().unwrap().len(), 2);
    let again = sweep(&out, &["--force", "-s", "1", "-d", "1s"]);
    assert!(
        matches!(again.status.code(), Some(0 | 1)),
        "{}",
        describe(&again)
    );
    assert!(
        !out.join("level-0002").exists(),
        "the old level not run again is gone"
    );
    assert!(out.join("level-0001").is_dir() && out.join("notes.txt").is_file());
    assert_eq!(sweep_json(&out)["levels"].as_array().unwrap().len(), 1);
}

/// A second sweep into a folder a sweep is writing to (`--output`) is refused at once, naming
/// the other; it used to start and collide with the first at a level's run folder, later.
#[test]
fn a_second_sweep_into_a_folder_a_sweep_is_writing_to_is_refused() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-twice");
    let out = dir.join("sw");
    let mut first = spawn_sweep(&out, &["--cooldown", "0s", "-s", "1", "-d", "4s"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !out.join("level-0001").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first sweep did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = sweep(&out, &["-s", "1", "-d", "1s"]);
    assert_eq!(second.status.code(), Some(2), "{}", describe(&second));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("another sweep (pid"), "{err}");
    // `report` on it names it a sweep (it said a run, with a summary.json it has not).
    let report = util::run(&["report", out.to_str().unwrap()], Duration::from_secs(10));
    assert_eq!(report.status.code(), Some(2), "{}", describe(&report));
    let err = String::from_utf8_lossy(&report.stderr);
    assert!(
        err.contains("is still being written by a sweep (pid "),
        "{err}"
    );
    let code = util::wait_with_limit(&mut first, Duration::from_secs(120));
    assert!(
        matches!(code, Some(0 | 1)),
        "the first sweep went on: {code:?}"
    );
    assert!(!sweep_json(&out)["levels"].as_array().unwrap().is_empty());
}

/// Two sweeps without `--output` started in the same second: the second numbers its folder
/// (`runs/sweep-<time>-2`, its levels inside it), as two runs do; it used to be refused
/// because the first held `runs/sweep-<time>`.
#[test]
fn two_sweeps_without_output_started_together_each_get_a_folder_of_their_own() {
    let _serial = util::serial();
    let dir = TempDir::new("sweep-default-folders");
    let cwd = dir.join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let args = [
        "sweep",
        "--no-tui",
        "--trace",
        "off",
        "--cooldown",
        "0s",
        "-s",
        "1",
        "-d",
        "1s",
    ];
    let start = || util::spawn_in(&cwd, &args);
    let sweeps = [start(), start()].map(|child| child.wait_with_output().unwrap());
    for output in &sweeps {
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "both sweeps ran: {}",
            describe(output)
        );
    }
    let folders = util::entry_names(&cwd.join("runs"));
    assert_eq!(folders.len(), 2, "{folders:?}");
    for folder in &folders {
        let sweep = cwd.join("runs").join(folder);
        assert!(sweep.join("sweep.json").is_file(), "{folder}");
        assert!(
            sweep.join("level-0001").join("summary.json").is_file(),
            "{folder}'s level is inside it"
        );
    }
    if folders[1] == format!("{}-2", folders[0]) {
        // The same second: the second sweep numbered its folder.
    } else {
        assert!(
            folders.iter().all(|f| f.len() == "sweep-".len() + 15),
            "two seconds, two plain stamps: {folders:?}"
        );
    }
}
