//! TLS for the reference server: HTTPS and WSS on the same listener, ALPN `h2` and
//! `http/1.1` (HTTP/2 or HTTP/1.1 over TLS; the HTTP layer also detects the HTTP/2 preface).
//! The ring provider is used explicitly, so no process-wide default has to be installed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why the certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read certificates from {path}: {reason}")]
    Certs { path: PathBuf, reason: String },
    #[error("{path} holds no certificate")]
    NoCert { path: PathBuf },
    #[error("cannot read a private key from {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("invalid certificate or key: {0}")]
    Config(#[from] rustls::Error),
}

/// A server config from a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or
/// SEC1).
pub fn load_pem(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Certs {
            path: cert.to_path_buf(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCert {
            path: cert.to_path_buf(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.to_path_buf(),
        reason: e.to_string(),
    })?;
    server_config(certs, key)
}

/// A server config from DER parts, with ALPN `h2` then `http/1.1`.
pub fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
