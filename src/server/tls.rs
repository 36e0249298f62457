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
    #[error("cannot use the client CA file {path}: {reason}")]
    ClientCa { path: PathBuf, reason: String },
}

/// Client certificates (mutual TLS): verified against this CA file's roots; `optional`
/// accepts clients that present none.
#[derive(Debug, Clone)]
pub struct ClientAuth {
    pub ca: PathBuf,
    pub optional: bool,
}

/// A server config from a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or
/// SEC1).
pub fn load_pem(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    load_pem_with(cert, key, None)
}

/// [`load_pem`], asking clients for certificates when `clients` says so.
pub fn load_pem_with(
    cert: &Path,
    key: &Path,
    clients: Option<&ClientAuth>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
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
    match clients {
        None => server_config(certs, key),
        Some(c) => server_config_with(certs, key, Some(client_verifier(c)?)),
    }
}

fn client_verifier(
    c: &ClientAuth,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let err = |reason: String| TlsError::ClientCa {
        path: c.ca.clone(),
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&c.ca).map_err(|e| err(e.to_string()))? {
        roots
            .add(cert.map_err(|e| err(e.to_string()))?)
            .map_err(|e| err(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(err("no certificates in it".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    let builder = if c.optional {
        builder.allow_unauthenticated()
    } else {
        builder
    };
    builder.build().map_err(|e| err(e.to_string()))
}

/// The names a client certificate (DER) goes by: its subject's common names and its DNS
/// subject alternative names.
pub fn client_names(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = n {
                names.push((*d).to_string());
            }
        }
    }
    names
}

/// A server config from DER parts, with ALPN `h2` then `http/1.1`.
pub fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    server_config_with(certs, key, None)
}

fn server_config_with(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    clients: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?;
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(v) => builder.with_client_cert_verifier(v),
    };
    let mut config = builder.with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
