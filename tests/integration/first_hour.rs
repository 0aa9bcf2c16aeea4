//! A newcomer's first hour (issue 14): pointing the tool at a server that speaks something
//! else, headless phase lines, the flags people expect, completions and the man page, and the
//! finished dashboard that stays explorable.

use crate::util::{self, describe, TempDir};
use futures_util::SinkExt;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

/// A WebSocket server on 127.0.0.1 that greets every connection with `{"hello":1}` (not a
/// native event) and then only listens; it stops when dropped.
struct HelloServer {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HelloServer {
    fn start() -> HelloServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                let serve = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        tokio::spawn(async move {
                            let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                                return;
                            };
                            let _ = ws.send(Message::Text(r#"{"hello":1}"#.into())).await;
                            // Listen (bounded) so the client, not the server, ends the session.
                            let _ = tokio::time::timeout(Duration::from_secs(60), async {
                                use futures_util::StreamExt;
                                while let Some(Ok(_)) = ws.next().await {}
                            })
                            .await;
                        });
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = stop_rx => {}
                    _ = tokio::time::sleep(Duration::from_secs(120)) => {}
                }
            });
        });
        HelloServer {
            url: format!("ws://{addr}/v1/realtime"),
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for HelloServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_server_speaking_something_else_fails_fast_and_stderr_quotes_why_issue_14() {
    let server = HelloServer::start();
    let dir = TempDir::new("hello");
    let out = dir.join("out");
    let started = std::time::Instant::now();
    let run = util::run_to(
        &out,
        &["--url", &server.url, "-s", "2", "-d", "2s"],
        Duration::from_secs(60),
    );
    eprintln!("{}", describe(&run));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "set-up ends at the first frame, not after --recv-timeout: {}",
        describe(&run)
    );
    assert_eq!(run.status.code(), Some(1), "{}", describe(&run));
    let summary = util::summary(&out);
    let first_reason = summary["verdict"]["reasons"][0].as_str().unwrap_or_default();
    assert!(first_reason.contains("type"), "{first_reason}");
    let err = stderr(&run);
    assert!(err.contains("missing field `type`"), "{err}");
}
