//! TLS for `wss://`: the client's rustls configuration (the system's roots, `--ca-file`, or no
//! verification with `--insecure`; a client certificate with `--client-cert`), made once per
//! worker and shared by its sessions, and the mock's server configuration (`mock --tls-cert
//! --tls-key`, asking for client certificates with `--tls-client-ca`). ring is the crypto
//! provider.

use anyhow::{bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::CertificateError;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

// What to do about a refused server certificate ([`certificate_hint`]).
pub const UNTRUSTED: &str =
    "the server's certificate is not trusted (not signed by a CA the system or --ca-file trusts): give the CA that signed it with --ca-file FILE.pem (if it is given already, the server may not be sending its intermediate certificate: it must send its chain, or give the intermediate too), or skip verification with --insecure (test servers only)";
pub const WEAK_SIGNATURE: &str =
    "the server's certificate is signed with an algorithm or a key this client does not accept (SHA-1, or an RSA key under 2048 bits): re-issue it with SHA-256 and RSA of 2048 bits or more, or ECDSA, or skip verification with --insecure (test servers only)";
pub const WRONG_PURPOSE: &str =
    "the server's certificate is not for a TLS server (its extendedKeyUsage lacks serverAuth): re-issue it with `-addext extendedKeyUsage=serverAuth`, or skip verification with --insecure (test servers only)";
pub const CERT_REFUSED: &str =
    "the server's certificate was refused for the reason above: check it with `openssl x509 -in CERT.pem -noout -text`, or skip verification with --insecure (test servers only)";
pub const EXPIRED: &str =
    "the server's certificate is out of its validity period (expired, or not valid yet): renew it (or check this machine's clock), or skip verification with --insecure (test servers only)";
pub const CA_AS_SERVER: &str =
    "the server's certificate is a CA certificate (basicConstraints CA:TRUE, as `openssl req -x509` makes by default), which TLS refuses as a server's own: re-issue it with `-addext basicConstraints=critical,CA:FALSE`, or sign a server certificate with it and give it to --ca-file, or skip verification with --insecure (test servers only)";
pub const WRONG_NAME: &str =
    "the server's certificate is not valid for the URL's host: connect with a name the certificate was issued for, or skip verification with --insecure (test servers only)";

/// Whether a server asked this process's client for a certificate (mutual TLS) when it was
/// given none to send: the hint for the failure that follows says so.
static CLIENT_CERT_ASKED: AtomicBool = AtomicBool::new(false);

/// Whether a server asked for a client certificate (see [`CLIENT_CERT_ASKED`]).
pub fn client_certificate_asked() -> bool {
    CLIENT_CERT_ASKED.load(Ordering::Relaxed)
}

/// How many times this process's client showed a server its `--client-cert`: a certificate
/// alert that follows is the server refusing it, and the hint says so. (A count, so that the
/// probe before each run of a sweep can tell whether its own connection showed it.)
static CLIENT_CERTS_SHOWN: AtomicU64 = AtomicU64::new(0);

/// How many times a server was shown the `--client-cert` (see [`CLIENT_CERTS_SHOWN`]).
pub fn client_certificates_shown() -> u64 {
    CLIENT_CERTS_SHOWN.load(Ordering::Relaxed)
}

/// Whether a server was shown the `--client-cert` at all.
pub fn client_certificate_shown() -> bool {
    client_certificates_shown() > 0
}

/// Whether a server answered a handshake (any HTTP answer) after the certificate was shown:
/// it took the certificate, so a connection it drops later was not refused for it.
static CLIENT_CERT_TAKEN: AtomicBool = AtomicBool::new(false);

/// Notes that a `wss://` handshake got the server's HTTP answer (see [`CLIENT_CERT_TAKEN`]).
pub fn note_handshake_answered() {
    if client_certificate_shown() {
        CLIENT_CERT_TAKEN.store(true, Ordering::Relaxed);
    }
}

/// Whether a server has taken the `--client-cert` (see [`CLIENT_CERT_TAKEN`]).
pub fn client_certificate_taken() -> bool {
    CLIENT_CERT_TAKEN.load(Ordering::Relaxed)
}

/// Whether a server asked for the `--client-cert` but takes none of the signature schemes its
/// key can sign with (an Ed25519 key, say): rustls then sends no certificate, and the hint
/// names the key rather than the certificate.
static CLIENT_KEY_UNUSABLE: AtomicBool = AtomicBool::new(false);

/// Whether a server took none of the `--client-key`'s schemes (see [`CLIENT_KEY_UNUSABLE`]).
pub fn client_key_unusable() -> bool {
    CLIENT_KEY_UNUSABLE.load(Ordering::Relaxed)
}

/// `--client-cert`: the certificate for every server that asks (rustls' `SingleCertAndKey`),
/// noting that one did, and whether its key could sign for it.
#[derive(Debug)]
struct ShowsClientCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ShowsClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        if self.0.key.choose_scheme(sigschemes).is_some() {
            CLIENT_CERTS_SHOWN.fetch_add(1, Ordering::Relaxed);
        } else {
            CLIENT_KEY_UNUSABLE.store(true, Ordering::Relaxed);
        }
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The client has no certificate to send (no `--client-cert`), as `with_no_client_auth`, but
/// notes that a server asked for one.
#[derive(Debug)]
struct NoClientCert;

impl ResolvesClientCert for NoClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        CLIENT_CERT_ASKED.store(true, Ordering::Relaxed);
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate chain and its private key, each a PEM file, with the flags that named them
/// (`--client-cert`/`--client-key`, the mock's `--tls-cert`/`--tls-key`).
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
    pub cert_flag: &'static str,
    pub key_flag: &'static str,
}

impl<'a> Identity<'a> {
    /// `--client-cert` and `--client-key`: the client's certificate for mutual TLS.
    pub fn client(cert: &'a Path, key: &'a Path) -> Identity<'a> {
        Identity {
            cert,
            key,
            cert_flag: "--client-cert",
            key_flag: "--client-key",
        }
    }

    fn load(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        Ok((read_certs(self.cert, self.cert_flag)?, self.read_key()?))
    }

    fn read_key(&self) -> Result<PrivateKeyDer<'static>> {
        let path = self.key;
        PrivateKeyDer::from_pem_file(path).map_err(|err| {
            // A certificate where the key belongs is the usual slip (openssl writes both); an
            // encrypted key is the other (`openssl genpkey` with `-aes256`, or a PKCS#8 export).
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let encrypted =
                text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED");
            let what = if encrypted {
                format!(
                    "the key is encrypted, which this tool cannot read: decrypt it first, `openssl pkey -in {} -out key-plain.pem`",
                    path.display()
                )
            } else if matches!(CertificateDer::pem_file_iter(path).map(|mut c| c.next()), Ok(Some(Ok(_)))) {
                "no private key in it: it holds a certificate; give the private key (the file with -----BEGIN PRIVATE KEY-----)".to_string()
            } else if looks_like_der(path) {
                // A key, or a certificate given where the key belongs.
                format!(
                    "it looks like a DER (binary) file; if it is the key, convert it to PEM, `openssl pkey -inform DER -in {} -out key.pem`",
                    path.display()
                )
            } else if matches!(err, rustls::pki_types::pem::Error::NoItemsFound) {
                "no PEM private key in it (a file with -----BEGIN PRIVATE KEY-----, or an EC or RSA one)".to_string()
            } else {
                format!("no PEM private key in it ({err})")
            };
            anyhow::anyhow!("{} {}: {what}", self.key_flag, path.display())
        })
    }

    /// What rustls said of the pair, in the flags' words.
    fn refused(&self, err: rustls::Error) -> anyhow::Error {
        match err {
            rustls::Error::InconsistentKeys(_) => anyhow::anyhow!(
                "{} {} is not the private key of the certificate in {} {}: give the key that was made with it",
                self.key_flag,
                self.key.display(),
                self.cert_flag,
                self.cert.display()
            ),
            other => anyhow::anyhow!(
                "{} and {} do not make a usable certificate: {other}",
                self.cert_flag,
                self.key_flag
            ),
        }
    }
}

/// The client's configuration: trust the system's roots plus `ca_file`, or (`insecure`)
/// anything, which only a test server with a self-signed certificate should need; with
/// `identity`, the certificate it shows a server that asks for one (mutual TLS).
pub fn client_config(
    insecure: bool,
    ca_file: Option<&Path>,
    identity: Option<Identity<'_>>,
) -> Result<Arc<ClientConfig>> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("cannot set up TLS")?;
    let resolver: Arc<dyn ResolvesClientCert> = match identity {
        Some(identity) => {
            let (certs, key) = identity.load()?;
            // As `with_client_auth_cert`, which checks that the key is the certificate's.
            let key = CertifiedKey::from_der(certs, key, &provider)
                .map_err(|err| identity.refused(err))?;
            Arc::new(ShowsClientCert(Arc::new(key)))
        }
        None => Arc::new(NoClientCert),
    };
    let config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
            .with_client_cert_resolver(resolver)
    } else {
        let mut roots = RootCertStore::empty();
        // A root the store cannot parse is skipped, as every TLS client does; none at all is an
        // error only when no --ca-file gives one either.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(path) = ca_file {
            let certs = read_certs(path, "--ca-file")?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                bail!(
                    "--ca-file {}: no certificate in it could be used",
                    path.display()
                );
            }
        }
        if roots.is_empty() {
            bail!("no trusted root certificates: the system has none (install ca-certificates) and no --ca-file was given");
        }
        builder
            .with_root_certificates(roots)
            .with_client_cert_resolver(resolver)
    };
    Ok(Arc::new(config))
}

/// What to do about a server certificate the client refused, by why: the words of the client's
/// connection errors, and of the mock's check of its own certificate at start.
pub fn certificate_hint(err: &CertificateError) -> &'static str {
    match err {
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            WRONG_NAME
        }
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => EXPIRED,
        // webpki's own error, inside rustls's `Other`: named only in its Debug text.
        CertificateError::Other(other) if format!("{other:?}").contains("CaUsedAsEndEntity") => {
            CA_AS_SERVER
        }
        CertificateError::UnknownIssuer => UNTRUSTED,
        CertificateError::BadSignature
        | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            WEAK_SIGNATURE
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            WRONG_PURPOSE
        }
        _ => CERT_REFUSED,
    }
}

/// The mock's certificate checked as a client that trusts it (`--ca-file` with it, or with the
/// certificates of its own file) would check it: a warning when such a client would refuse it
/// for the certificate itself — a CA's (`openssl req -x509`'s default), out of its validity
/// period, not for a TLS server, a weak signature. Not: a name (clients connect by any), an
/// issuer the file does not hold (its root is the clients' to trust).
pub fn server_certificate_warning(cert: &Path) -> Option<String> {
    let certs = read_certs(cert, "--tls-cert").ok()?;
    let (leaf, intermediates) = certs.split_first()?;
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(certs.iter().cloned());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .ok()?;
    let name = ServerName::try_from("localhost").ok()?;
    let refused = verifier
        .verify_server_cert(leaf, intermediates, &name, &[], UnixTime::now())
        .err()?;
    let rustls::Error::InvalidCertificate(why) = &refused else {
        return None;
    };
    if matches!(
        why,
        CertificateError::NotValidForName
            | CertificateError::NotValidForNameContext { .. }
            | CertificateError::UnknownIssuer
    ) {
        return None;
    }
    Some(format!(
        "mock: warning: a client will refuse this certificate ({refused}): {}",
        certificate_hint(why)
    ))
}

/// The mock's configuration from a PEM certificate chain and private key; with `client_ca`
/// (`--tls-client-ca`), it asks every client for a certificate signed by a CA in that file
/// and refuses a handshake without one (mutual TLS).
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>> {
    let identity = Identity {
        cert,
        key,
        cert_flag: "--tls-cert",
        key_flag: "--tls-key",
    };
    let (certs, key) = identity.load()?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("cannot set up TLS")?;
    let builder = match client_ca {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(read_certs(path, "--tls-client-ca")?);
            if added == 0 {
                bail!(
                    "--tls-client-ca {}: no certificate in it could be used",
                    path.display()
                );
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider(),
            )
            .build()
            .map_err(|err| anyhow::anyhow!("--tls-client-ca {}: {err}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|err| identity.refused(err))?;
    Ok(Arc::new(config))
}

/// Whether the file at `path` looks like DER (binary) rather than PEM: it starts with an ASN.1
/// SEQUENCE, of a long length (a certificate, an RSA key) or an EC key's short one.
fn looks_like_der(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| {
        b.starts_with(&[0x30, 0x82]) || b.starts_with(&[0x30, 0x81]) || b.starts_with(&[0x30, 0x77])
    })
}

fn read_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|err| anyhow::anyhow!("{flag} {}: {err}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|err| anyhow::anyhow!("{flag} {}: {err}", path.display()))?;
    if certs.is_empty() {
        // A private key where a certificate belongs is the usual slip (openssl writes both).
        let der = looks_like_der(path);
        let what = if PrivateKeyDer::from_pem_file(path).is_ok() {
            ": it holds a private key; give the certificate (the file with -----BEGIN CERTIFICATE-----)".to_string()
        } else if der {
            format!(
                ": it looks like a DER (binary) certificate; convert it to PEM, `openssl x509 -inform DER -in {} -out cert.pem`",
                path.display()
            )
        } else {
            String::new()
        };
        bail!("{flag} {}: no PEM certificate in it{what}", path.display());
    }
    Ok(certs)
}

/// `--insecure`: any certificate is accepted, but the handshake's signatures are still checked
/// (so it is still TLS, only not authenticated).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate made by `params` (for localhost), written to a file of its own.
    fn written(params: rcgen::CertificateParams, name: &str) -> std::path::PathBuf {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let path =
            std::env::temp_dir().join(format!("duplexbench-tls-{}-{name}.pem", std::process::id()));
        std::fs::write(&path, cert.pem()).unwrap();
        path
    }

    fn params() -> rcgen::CertificateParams {
        rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap()
    }

    /// The mock warns at start about a certificate its clients will refuse for what it is (the
    /// TLS QA of 2026-12-07: it started on a CA's certificate and told the user to give it to
    /// --ca-file, which then failed), and not about one they take, of whatever name.
    #[test]
    fn the_mocks_certificate_is_checked_as_a_client_would_check_it() {
        let fine = written(params(), "fine");
        assert_eq!(server_certificate_warning(&fine), None);
        let mut other_name = params();
        other_name.subject_alt_names = vec![rcgen::SanType::DnsName(
            "asr.example.test".try_into().unwrap(),
        )];
        let other_name = written(other_name, "name");
        assert_eq!(server_certificate_warning(&other_name), None);
        let mut ca = params();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = written(ca, "ca");
        let warning = server_certificate_warning(&ca).unwrap();
        assert!(warning.contains(CA_AS_SERVER), "{warning}");
        let mut expired = params();
        expired.not_before = rcgen::date_time_ymd(2000, 1, 1);
        expired.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let expired = written(expired, "expired");
        let warning = server_certificate_warning(&expired).unwrap();
        assert!(warning.contains(EXPIRED), "{warning}");
        for path in [fine, other_name, ca, expired] {
            let _ = std::fs::remove_file(path);
        }
    }

    /// A DER certificate is said so, with the command that converts it.
    #[test]
    fn a_der_certificate_is_named_with_the_command_that_converts_it() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params().self_signed(&key).unwrap();
        let path =
            std::env::temp_dir().join(format!("duplexbench-tls-{}-der.crt", std::process::id()));
        std::fs::write(&path, cert.der()).unwrap();
        let err = client_config(false, Some(&path), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("DER (binary)") && err.contains("openssl x509 -inform DER"),
            "{err}"
        );
        let _ = std::fs::remove_file(path);
    }

    /// `--client-cert` and `--client-key`: a pair makes a configuration that has a certificate
    /// to show; a key of another certificate, or the files given the wrong way round, are
    /// named by their flags before any connection.
    #[test]
    fn a_client_certificate_and_its_key_are_checked_as_a_pair() {
        let dir =
            std::env::temp_dir().join(format!("duplexbench-tls-{}-client", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pair = |name: &str| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = params().self_signed(&key).unwrap();
            let (c, k) = (
                dir.join(format!("{name}.pem")),
                dir.join(format!("{name}-key.pem")),
            );
            std::fs::write(&c, cert.pem()).unwrap();
            std::fs::write(&k, key.serialize_pem()).unwrap();
            (c, k)
        };
        let (cert, key) = pair("mine");
        let (_, other_key) = pair("other");
        let config = client_config(true, None, Some(Identity::client(&cert, &key))).unwrap();
        assert!(config.client_auth_cert_resolver.has_certs());
        let none = client_config(true, None, None).unwrap();
        assert!(!none.client_auth_cert_resolver.has_certs());
        let err = client_config(true, None, Some(Identity::client(&cert, &other_key)))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--client-key ")
                && err.contains("is not the private key of the certificate in --client-cert"),
            "{err}"
        );
        let err = client_config(true, None, Some(Identity::client(&key, &cert)))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--client-cert ") && err.contains("it holds a private key"),
            "{err}"
        );
        // A DER key is named with the command that converts it (the mTLS QA: "no items found").
        let der = dir.join("key.der");
        let pem = std::fs::read_to_string(&key).unwrap();
        std::fs::write(
            &der,
            PrivateKeyDer::from_pem_slice(pem.as_bytes())
                .unwrap()
                .secret_der(),
        )
        .unwrap();
        let err = client_config(true, None, Some(Identity::client(&cert, &der)))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("DER (binary) file") && err.contains("openssl pkey -inform DER"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    /// An encrypted key is said so, with the command that decrypts it (the TLS QA of
    /// 2026-12-07: "no PEM private key in it (no items found)").
    #[test]
    fn an_encrypted_key_is_named_with_the_command_that_decrypts_it() {
        let cert = written(params(), "enc-cert");
        let key = cert.with_extension("key.pem");
        std::fs::write(
            &key,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let err = server_config(&cert, &key, None).unwrap_err().to_string();
        assert!(
            err.contains("the key is encrypted") && err.contains("openssl pkey -in"),
            "{err}"
        );
        let _ = std::fs::remove_file(cert);
        let _ = std::fs::remove_file(key);
    }
}
