//! Connecting: TCP (with TCP_NODELAY) and TLS (rustls), as one stream type.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// How the server's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The operating system's root certificates.
    System,
    /// Only the certificates in this PEM file (e.g. a private CA or a self-signed server).
    CaFile(PathBuf),
    /// Accept any certificate. For self-signed test servers only: no authentication at all.
    Insecure,
}

/// A TLS client configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("cannot read CA file {path}: {reason}")]
    CaFile { path: String, reason: String },
    #[error("no usable root certificates: {0}")]
    NoRoots(String),
    #[error("invalid TLS server name `{0}`")]
    ServerName(String),
    #[error("TLS configuration: {0}")]
    Config(String),
    #[error("cannot use the client certificate {path}: {reason}")]
    Identity { path: String, reason: String },
}

/// A client certificate chain and its private key (mutual TLS), as PEM files name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl IdentityFiles {
    /// Reads both files: the chain (leaf first) and the key (PKCS#8, PKCS#1 or SEC1).
    fn load(
        &self,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsSetupError> {
        let err = |path: &Path, reason: String| TlsSetupError::Identity {
            path: path.display().to_string(),
            reason,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .map_err(|e| err(&self.cert, e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| err(&self.cert, e.to_string()))?;
        if certs.is_empty() {
            return Err(err(&self.cert, "no certificate in it".into()));
        }
        // The key's own error text is left out: it could quote key material.
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|_| err(&self.key, "no readable PEM private key in it".into()))?;
        Ok((certs, key))
    }
}

/// What to connect to, and how.
#[derive(Debug, Clone)]
pub struct NetTarget {
    pub addr: SocketAddr,
    /// `Some` for https/wss.
    pub tls: Option<TlsClient>,
    pub connect_timeout: Duration,
    /// The local address connections come from (`--source-address`); `None` lets the system
    /// choose.
    pub source: Option<std::net::IpAddr>,
}

/// A ready-to-use TLS client side: connector plus the name to verify.
#[derive(Clone)]
pub struct TlsClient {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("name", &self.name)
            .finish()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsClient {
    /// `alpn` lists the protocols offered (`h2`, `http/1.1`), in preference order; `identity`
    /// is a client certificate to present (mutual TLS).
    pub fn new(
        server_name: &str,
        trust: &Trust,
        identity: Option<&IdentityFiles>,
        alpn: &[&[u8]],
    ) -> Result<Self, TlsSetupError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsSetupError::Config(e.to_string()))?;
        let wants = match trust {
            Trust::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny(provider()))),
            Trust::System => {
                let loaded = rustls_native_certs::load_native_certs();
                let mut roots = rustls::RootCertStore::empty();
                let (added, _) = roots.add_parsable_certificates(loaded.certs);
                if added == 0 {
                    return Err(TlsSetupError::NoRoots(format!(
                        "the system store had none ({} errors)",
                        loaded.errors.len()
                    )));
                }
                builder.with_root_certificates(roots)
            }
            Trust::CaFile(path) => builder.with_root_certificates(read_roots(path)?),
        };
        let mut config = match identity {
            None => wants.with_no_client_auth(),
            Some(files) => {
                let (certs, key) = files.load()?;
                wants
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| TlsSetupError::Identity {
                        path: files.cert.display().to_string(),
                        reason: e.to_string(),
                    })?
            }
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let host = server_name.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| TlsSetupError::ServerName(server_name.into()))?;
        Ok(TlsClient {
            connector: TlsConnector::from(Arc::new(config)),
            name,
        })
    }
}

fn read_roots(path: &Path) -> Result<rustls::RootCertStore, TlsSetupError> {
    let err = |reason: String| TlsSetupError::CaFile {
        path: path.display().to_string(),
        reason,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no certificates in it".into()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots.add(c).map_err(|e| err(e.to_string()))?;
    }
    Ok(roots)
}

/// Certificate verification switched off (`insecure = true`); signatures are still checked so
/// the handshake itself is sound.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
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
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A connection that failed, with what a person needs to know.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connection to {addr} failed: {source}")]
    Tcp { addr: SocketAddr, source: io::Error },
    #[error("connection to {addr} timed out")]
    Timeout { addr: SocketAddr },
    #[error("TLS handshake with {addr} failed: {source}")]
    Tls { addr: SocketAddr, source: io::Error },
}

impl ConnectError {
    /// How a request that needed this connection ended: out of a local resource (file
    /// descriptors, ephemeral ports), or a plain connection failure.
    pub fn outcome(&self) -> crate::metrics::outcome::Outcome {
        match self {
            ConnectError::Tcp { source, .. } => {
                crate::metrics::outcome::LocalKind::or_connect(source)
            }
            _ => crate::metrics::outcome::Outcome::Connect,
        }
    }
}

/// A TCP or TLS byte stream.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    /// A TCP stream lent to a worker's event loop, which waits on an epoll of its own for it
    /// (`driver::event_loop`): reads and writes never wait and never register a waker —
    /// `Pending` means "would block", and the loop's epoll reports when to try again. Only
    /// while the loop holds it: it is a `Tcp` stream again before anything else uses it.
    Polled(std::net::TcpStream),
}

impl Stream {
    /// The ALPN protocol the server chose, for TLS streams.
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Stream::Tcp(_) | Stream::Polled(_) => None,
            Stream::Tls(t) => t.get_ref().1.alpn_protocol(),
        }
    }
}

/// Connects (and handshakes TLS) within the target's timeout.
pub async fn connect(t: &NetTarget) -> Result<Stream, ConnectError> {
    let addr = t.addr;
    let connecting = async {
        match t.source {
            None => TcpStream::connect(addr).await,
            Some(ip) => {
                let socket = match addr {
                    SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                    SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
                };
                socket.bind(SocketAddr::new(ip, 0))?;
                socket.connect(addr).await
            }
        }
    };
    let tcp = match tokio::time::timeout(t.connect_timeout, connecting).await {
        Err(_) => return Err(ConnectError::Timeout { addr }),
        Ok(Err(source)) => return Err(ConnectError::Tcp { addr, source }),
        Ok(Ok(s)) => s,
    };
    let _ = tcp.set_nodelay(true);
    let Some(tls) = &t.tls else {
        return Ok(Stream::Tcp(tcp));
    };
    match tokio::time::timeout(
        t.connect_timeout,
        tls.connector.connect(tls.name.clone(), tcp),
    )
    .await
    {
        Err(_) => Err(ConnectError::Timeout { addr }),
        Ok(Err(source)) => Err(ConnectError::Tls { addr, source }),
        Ok(Ok(s)) => Ok(Stream::Tls(Box::new(s))),
    }
}

/// A read of a lent stream. On Linux the bare syscall: glibc's `recv` wraps it in
/// thread-cancellation bookkeeping, which the event loop would pay on every request.
fn polled_read(s: &std::net::TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    return rustix::io::read(s, buf).map_err(io::Error::from);
    #[cfg(not(target_os = "linux"))]
    return std::io::Read::read(&mut &*s, buf);
}

/// A write to a lent stream (see [`polled_read`]), as std's: no SIGPIPE if the peer is gone.
fn polled_write(s: &std::net::TcpStream, buf: &[u8]) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    return rustix::net::send(s, buf, rustix::net::SendFlags::NOSIGNAL).map_err(io::Error::from);
    #[cfg(not(target_os = "linux"))]
    return std::io::Write::write(&mut &*s, buf);
}

/// A non-blocking call's result as a poll: `Pending` when it would block.
fn would_block<T>(r: io::Result<T>) -> Poll<io::Result<T>> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        r => Poll::Ready(r),
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Polled(s) => {
                would_block(polled_read(s, buf.initialize_unfilled())).map_ok(|n| buf.advance(n))
            }
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Polled(s) => would_block(polled_write(s, buf)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Polled(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Polled(s) => Poll::Ready(s.shutdown(std::net::Shutdown::Write)),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            Stream::Polled(s) => would_block(std::io::Write::write_vectored(s, bufs)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
            Stream::Polled(_) => true,
        }
    }
}

/// The reading half of a [`Stream`]: TCP splits without a lock; TLS needs tokio's split.
#[derive(Debug)]
pub enum ReadHalf {
    Tcp(tokio::net::tcp::OwnedReadHalf),
    Tls(tokio::io::ReadHalf<Stream>),
}

/// The writing half of a [`Stream`].
#[derive(Debug)]
pub enum WriteHalf {
    Tcp(tokio::net::tcp::OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<Stream>),
}

impl Stream {
    /// Splits for a reader task and a writer.
    pub fn split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Tcp(t) => {
                let (r, w) = t.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            // (A lent stream is never split: it is HTTP/1.1's, and a `Tcp` one again first.)
            other @ (Stream::Tls(_) | Stream::Polled(_)) => {
                let (r, w) = tokio::io::split(other);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
        }
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            ReadHalf::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            WriteHalf::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(s) => Pin::new(s).poll_flush(cx),
            WriteHalf::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            WriteHalf::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a source address, connections come from it (any 127.x.y.z on loopback).
    #[tokio::test]
    async fn connections_come_from_the_source_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        for source in [None, Some("127.0.0.7".parse().unwrap())] {
            let t = NetTarget {
                addr,
                tls: None,
                connect_timeout: Duration::from_secs(5),
                source,
            };
            let _stream = connect(&t).await.unwrap();
            let (_, peer) = listener.accept().unwrap();
            assert_eq!(
                peer.ip(),
                source.unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]))
            );
        }
    }
}
