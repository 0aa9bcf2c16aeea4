//! TLS for `wss://`: the client's rustls configuration (the system's roots, `--ca-file`, or no
//! verification with `--insecure`), made once per worker and shared by its sessions, and the
//! mock's server configuration (`mock --tls-cert --tls-key`). ring is the crypto provider.

use anyhow::{bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether a server asked this process's client for a certificate (mutual TLS), which it
/// has none of to send: the hint for the failure that follows says so.
static CLIENT_CERT_ASKED: AtomicBool = AtomicBool::new(false);

/// Whether a server asked for a client certificate (see [`CLIENT_CERT_ASKED`]).
pub fn client_certificate_asked() -> bool {
    CLIENT_CERT_ASKED.load(Ordering::Relaxed)
}

/// The client sends no certificate (mutual TLS is not supported), as `with_no_client_auth`,
/// but notes that a server asked for one.
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

/// The client's configuration: trust the system's roots plus `ca_file`, or (`insecure`)
/// anything, which only a test server with a self-signed certificate should need.
pub fn client_config(insecure: bool, ca_file: Option<&Path>) -> Result<Arc<ClientConfig>> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("cannot set up TLS")?;
    let config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
            .with_client_cert_resolver(Arc::new(NoClientCert))
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
            .with_client_cert_resolver(Arc::new(NoClientCert))
    };
    Ok(Arc::new(config))
}

/// The mock's configuration from a PEM certificate chain and private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>> {
    let certs = read_certs(cert, "--tls-cert")?;
    let key_path = key;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|err| {
        // A certificate where the key belongs is the usual slip (openssl writes both).
        let what = if matches!(CertificateDer::pem_file_iter(key_path).map(|mut c| c.next()), Ok(Some(Ok(_)))) {
            "no private key in it: it holds a certificate; give the private key (the file with -----BEGIN PRIVATE KEY-----)".to_string()
        } else {
            format!("no PEM private key in it ({err})")
        };
        anyhow::anyhow!("--tls-key {}: {what}", key_path.display())
    })?;
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("cannot set up TLS")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|err| match err {
            rustls::Error::InconsistentKeys(_) => anyhow::anyhow!(
                "--tls-key {} is not the private key of the certificate in --tls-cert {}: give the key that was made with it",
                key_path.display(),
                cert.display()
            ),
            other => anyhow::anyhow!(
                "--tls-cert and --tls-key do not make a usable certificate: {other}"
            ),
        })?;
    Ok(Arc::new(config))
}

fn read_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|err| anyhow::anyhow!("{flag} {}: {err}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|err| anyhow::anyhow!("{flag} {}: {err}", path.display()))?;
    if certs.is_empty() {
        // A private key where a certificate belongs is the usual slip (openssl writes both).
        let what = if PrivateKeyDer::from_pem_file(path).is_ok() {
            ": it holds a private key; give the certificate (the file with -----BEGIN CERTIFICATE-----)"
        } else {
            ""
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
