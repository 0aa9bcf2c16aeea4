//! A connection that fails says what to do when its error tells: `ws://` to a TLS server,
//! `wss://` to a plain one (answered or silent), a certificate the client does not trust. The
//! library's own error text stays in the message.

use crate::mock_protocol::Mock;
use crate::openai::self_signed;
use crate::util::{self, describe, summary, LoopbackServer, TempDir};
use std::time::{Duration, Instant};

/// A one-session run against `url`: the first session error in the summary.
fn first_error(dir: &TempDir, url: &str, extra: &[&str]) -> String {
    let out = dir.join("out");
    let mut args = vec!["--url", url, "-s", "1", "-d", "1s", "--no-sampler"];
    args.extend_from_slice(extra);
    let output = util::run_to(&out, &args, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    let message = s["sessions"]["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(&message),
        "the run says it too: {}",
        describe(&output)
    );
    message
}

#[test]
fn ws_to_a_tls_server_says_use_wss_and_keeps_its_answer() {
    let _serial = util::serial();
    let dir = TempDir::new("hint-ws-to-tls");
    let (cert, key) = self_signed(&dir);
    let mock = Mock::start(&["--tls-cert", &cert, "--tls-key", &key]);
    let error = first_error(&dir, &format!("ws://{}/v1/realtime", mock.addr), &[]);
    // The mock answers plain HTTP on its TLS port as nginx does: a 400 that says so.
    assert!(error.contains("400 Bad Request"), "{error}");
    assert!(
        error.contains("the server says this port takes TLS")
            && error.contains("give a wss:// URL"),
        "{error}"
    );
}

#[test]
fn wss_to_a_plain_server_fails_at_once_saying_use_ws() {
    let _serial = util::serial();
    let dir = TempDir::new("hint-wss-to-plain");
    let mock = Mock::start(&[]);
    let started = Instant::now();
    let error = first_error(
        &dir,
        &format!("wss://{}/v1/realtime", mock.addr),
        &["--connect-timeout", "30s"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "not after --connect-timeout: {:?}",
        started.elapsed()
    );
    assert!(error.contains("InvalidContentType"), "{error}");
    assert!(
        error.contains("the server's answer is not TLS") && error.contains("give a ws:// URL"),
        "{error}"
    );
}

#[test]
fn a_server_that_never_answers_the_handshake_says_what_was_made_at_the_timeout() {
    let _serial = util::serial();
    let dir = TempDir::new("hint-wss-silent");
    // Takes the ClientHello and says nothing, as a plain server waiting for a request head.
    let server = LoopbackServer::start(|mut stream| async move {
        let mut buf = [0u8; 4096];
        while tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
            .await
            .is_ok_and(|n| n > 0)
        {}
    });
    let error = first_error(
        &dir,
        &format!("wss://{}/v1/realtime", server.addr),
        &["--connect-timeout", "1s"],
    );
    assert!(
        error.contains("took longer than --connect-timeout 1s"),
        "{error}"
    );
    assert!(
        error.contains("never answered the TLS handshake") && error.contains("give a ws:// URL"),
        "{error}"
    );
    // The same server given ws://: it takes the upgrade request and never answers it (another
    // service on the port, a proxy holding it). The timeout says the connection was made (the
    // QA pass of 2026-12-07 found a bare "took longer than --connect-timeout").
    let error = first_error(
        &dir,
        &format!("ws://{}/v1/realtime", server.addr),
        &["--connect-timeout", "1s", "--force"],
    );
    assert!(
        error.contains("took longer than --connect-timeout 1s")
            && error.contains(
                "the connection was made, but the server did not answer the WebSocket handshake"
            ),
        "{error}"
    );
}

#[test]
fn a_self_signed_certificate_is_said_to_be_untrusted_naming_ca_file_and_insecure() {
    let _serial = util::serial();
    let dir = TempDir::new("hint-untrusted");
    let (cert, key) = self_signed(&dir);
    let mock = Mock::start(&["--tls-cert", &cert, "--tls-key", &key]);
    let error = first_error(&dir, &format!("wss://{}/v1/realtime", mock.addr), &[]);
    assert!(error.contains("invalid peer certificate"), "{error}");
    assert!(
        error.contains("certificate is not trusted")
            && error.contains("--ca-file FILE.pem")
            && error.contains("--insecure"),
        "{error}"
    );
}

/// A proxy that sends plain HTTP on to HTTPS, as nginx's `return 301 https://…` does: a
/// WebSocket client follows no redirect (RFC 6455 §4.1), so the error names the URL to give,
/// in WebSocket terms.
#[test]
fn a_redirect_names_the_url_to_give_with_its_websocket_scheme() {
    let _serial = util::serial();
    let dir = TempDir::new("hint-redirect");
    let server = refusing(
        "HTTP/1.1",
        "Location: https://speech.example.test/v1/realtime",
    );
    let error = first_error(&dir, &format!("ws://{}/v1/realtime", server.addr), &[]);
    assert!(error.contains("301"), "{error}");
    assert!(
        error.contains("give `wss://speech.example.test/v1/realtime` as --url"),
        "{error}"
    );
}

/// The same redirect in HTTP/1.0 (which tungstenite refuses as a wrong version, so the client
/// reads it itself) names its URL too: its headers went unread, and the hint said the redirect
/// named none.
#[test]
fn a_redirect_in_http_10_names_the_url_to_give_as_in_http_11() {
    let _serial = util::serial();
    let dir = TempDir::new("hint-redirect-http10");
    let server = refusing("HTTP/1.0", "Location: ws://127.0.0.1:9/v1/realtime");
    let error = first_error(&dir, &format!("ws://{}/v1/realtime", server.addr), &[]);
    assert!(error.contains("301"), "{error}");
    assert!(
        error.contains(
            "redirects the handshake to `ws://127.0.0.1:9/v1/realtime`: give that as --url"
        ),
        "{error}"
    );
}

/// A server on 127.0.0.1 that answers every upgrade with `301 Moved Permanently` in `version`
/// (`HTTP/1.1`, `HTTP/1.0`), with the header line `header`, and closes.
fn refusing(version: &'static str, header: &'static str) -> LoopbackServer {
    LoopbackServer::start(move |mut stream| async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut request = [0u8; 4096];
        if stream.read(&mut request).await.is_ok_and(|n| n > 0) {
            let reply = format!("{version} 301 Moved Permanently\r\n{header}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(reply.as_bytes()).await;
        }
    })
}

/// A server of another protocol: the verdict says which, from what its errors name, and the
/// flag to give (the native client against an OpenAI server, and the reverse).
#[test]
fn a_server_of_another_protocol_is_named_with_the_flag_to_give() {
    let _serial = util::serial();
    let dir = TempDir::new("hint-other-protocol");
    let cases: [(&[&str], &[&str], &str); 2] = [
        (&["--protocol", "openai"], &[], "give --protocol openai"),
        (&[], &["--protocol", "openai"], "give --protocol native"),
    ];
    for (k, (mock_args, run_args, want)) in cases.into_iter().enumerate() {
        let mock = Mock::start(mock_args);
        let out = dir.join(&format!("out-{k}"));
        let url = format!("ws://{}/v1/realtime", mock.addr);
        let mut args = vec!["--url", &url, "-s", "1", "-d", "1s", "--no-sampler"];
        args.extend_from_slice(run_args);
        let output = util::run_to(&out, &args, Duration::from_secs(60));
        assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
        let reasons = summary(&out)["verdict"]["reasons"].clone();
        let first = reasons[0].as_str().unwrap_or_default();
        assert!(first.contains(want), "{reasons}");
        assert!(
            !reasons.to_string().contains("no turn ended"),
            "no advice about speech: {reasons}"
        );
    }
}

/// A rustls server of `cert` and `key` that asks every client for a certificate signed by one
/// of `trusted` and refuses the handshake without one.
fn asking_for_client_certificates(
    cert: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
    trusted: Vec<rustls::pki_types::CertificateDer<'static>>,
) -> tokio_rustls::TlsAcceptor {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(trusted);
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        std::sync::Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(cert, key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config))
}

/// A server that asks for a client certificate (mutual TLS) refuses every session of a client
/// that has none to send; the check before the run says so, whatever way the server then ends
/// the connection (an alert, a reset, a close: the QA pass of 2026-12-07 saw exit 2 blaming a
/// firewall once, then exit 1 with a bare rustls error).
#[test]
fn a_server_that_asks_for_a_client_certificate_is_named_before_the_run() {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let _serial = util::serial();
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = CertificateDer::from(made.cert.der().to_vec());
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der()).unwrap();
    let acceptor = asking_for_client_certificates(vec![cert.clone()], key, vec![cert]);
    let server = LoopbackServer::start(move |stream| {
        let acceptor = acceptor.clone();
        async move {
            // The client sends no certificate: the handshake fails here.
            if let Ok(tls) = acceptor.accept(stream).await {
                let _ = tokio_tungstenite::accept_async(tls).await;
            }
        }
    });
    let dir = TempDir::new("hint-mtls");
    let url = format!("wss://{}/v1/realtime", server.addr);
    let args = ["--url", url.as_str(), "--insecure", "-s", "1", "-d", "1s"];
    let output = util::run_to(&dir.join("out"), &args, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot talk to the server")
            && stderr.contains("asked for a client certificate (mutual TLS)"),
        "{}",
        describe(&output)
    );
}

/// A CA, a certificate it signs for `extended` use (127.0.0.1 for a server), and their files in
/// `dir` under `name`: (the CA's PEM file, the certificate's, its key's).
fn signed_by_a_ca(
    dir: &TempDir,
    name: &str,
    extended: rcgen::ExtendedKeyUsagePurpose,
) -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    // Names of their own (rcgen gives every certificate the same one): an issuer is found by
    // its name.
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, format!("{name} CA"));
    let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.extended_key_usages = vec![extended];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name.to_string());
    let cert = params.signed_by(&key, &ca).unwrap();
    let write = |file: &str, text: String| {
        let path = dir.join(&format!("{name}-{file}"));
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    (
        write("ca.pem", ca.pem()),
        write("cert.pem", cert.pem()),
        write("key.pem", key.serialize_pem()),
    )
}

/// Mutual TLS against the mock that asks for client certificates (`--tls-client-ca`): without
/// `--client-cert` the run is refused before it starts and told to give one; with a
/// certificate the mock's CA signed it completes; one of another CA fails every session with
/// the mock's alert and what to check.
#[test]
fn mutual_tls_completes_with_the_client_certificate_and_names_one_refused() {
    use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let _serial = util::serial();
    let dir = TempDir::new("hint-mtls-mock");
    let (server_ca, server_cert, server_key) = signed_by_a_ca(&dir, "server", ServerAuth);
    let (client_ca, client_cert, client_key) = signed_by_a_ca(&dir, "client", ClientAuth);
    let (_, stranger_cert, stranger_key) = signed_by_a_ca(&dir, "stranger", ClientAuth);
    let mock = Mock::start(&[
        "--protocol",
        "openai",
        "--tls-cert",
        &server_cert,
        "--tls-key",
        &server_key,
        "--tls-client-ca",
        &client_ca,
    ]);
    let url = format!("wss://{}/v1/realtime", mock.addr);
    let run = |name: &str, identity: &[&str]| {
        let out = dir.join(name);
        let mut args = vec![
            "--url",
            url.as_str(),
            "--protocol",
            "openai",
            "--model",
            "gpt-realtime",
            "--ca-file",
            server_ca.as_str(),
            "-s",
            "2",
            "-d",
            "1s",
            "--no-sampler",
        ];
        args.extend_from_slice(identity);
        (util::run_to(&out, &args, Duration::from_secs(60)), out)
    };

    let (output, _) = run("none", &[]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("asked for a client certificate (mutual TLS)")
            && stderr.contains("--client-cert FILE.pem and --client-key FILE.pem"),
        "{}",
        describe(&output)
    );

    let (output, out) = run(
        "shown",
        &["--client-cert", &client_cert, "--client-key", &client_key],
    );
    // Complete, whatever a busy machine did to its pacing (which the exit code also says).
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        describe(&output)
    );
    let s = summary(&out);
    assert_eq!(s["sessions"]["completed"], 2, "{s}");
    assert_eq!(s["verdict"]["complete"], true, "{s}");
    let connection = &s["settings"]["connection"];
    assert_eq!(connection["client_cert"], client_cert.as_str());
    assert_eq!(connection["client_key"], client_key.as_str());

    let (output, out) = run(
        "stranger",
        &[
            "--client-cert",
            &stranger_cert,
            "--client-key",
            &stranger_key,
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    let message = s["sessions"]["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("UnknownCA")
            && message.contains("the server refused the client certificate (--client-cert)"),
        "{message}"
    );

    // A key that is not the certificate's is refused before anything starts.
    let (output, _) = run(
        "mismatched",
        &["--client-cert", &client_cert, "--client-key", &stranger_key],
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("is not the private key of the certificate in --client-cert"),
        "{}",
        describe(&output)
    );
}

/// A server that refuses the client certificate without a TLS alert (Python's asyncio and
/// uvloop end the connection: the mTLS QA of 2026-12-07 saw rustls' bare "peer closed
/// connection without sending TLS close_notify", and exit 2 blaming a firewall when it came as
/// a reset) fails the sessions with what to check about the certificate.
#[test]
fn a_client_certificate_refused_without_an_alert_is_named() {
    use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let _serial = util::serial();
    let dir = TempDir::new("hint-mtls-silent");
    let (server_ca, server_cert, server_key) = signed_by_a_ca(&dir, "server", ServerAuth);
    let (client_ca, client_cert, client_key) = signed_by_a_ca(&dir, "client", ClientAuth);
    let pem = |path: &str| -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_file_iter(path)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let acceptor = asking_for_client_certificates(
        pem(&server_cert),
        PrivateKeyDer::from_pem_file(&server_key).unwrap(),
        pem(&client_ca),
    );
    let server = LoopbackServer::start(move |stream| {
        let acceptor = acceptor.clone();
        async move {
            // It takes the certificate, then resets the connection unanswered, as a server
            // that refuses one silently looks from the client's side of TLS 1.3 (asyncio's
            // reset: the check before the run let it through as a server that resets every
            // connection, exit 2 blaming a firewall).
            if let Ok(tls) = acceptor.accept(stream).await {
                let (tcp, _) = tls.into_inner();
                let _ = tcp.set_zero_linger();
                drop(tcp);
            }
        }
    });
    let url = format!("wss://{}/v1/realtime", server.addr);
    let out = dir.join("out");
    let args = [
        "--url",
        url.as_str(),
        "--ca-file",
        server_ca.as_str(),
        "--client-cert",
        client_cert.as_str(),
        "--client-key",
        client_key.as_str(),
        "-s",
        "1",
        "-d",
        "1s",
        "--no-sampler",
    ];
    let output = util::run_to(&out, &args, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let s = summary(&out);
    let message = s["sessions"]["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "after it was shown the client certificate (--client-cert) and without a TLS alert"
        ),
        "{message}"
    );
}
