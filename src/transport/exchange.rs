//! One HTTP/1.1 request on a fresh connection, through hyper's client over [`net`]: for the
//! exchanges off the hot path that need a request exactly as the caller writes it — the OAuth
//! token endpoint, the tenant probe's hostile requests (another tenant's session id, a token in
//! the query string, no credentials at all), the upstream's `/seen-credentials`.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::HeaderMap;
use hyper_util::rt::TokioIo;

use super::net::{self, NetTarget};

/// How an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    #[error("cannot connect")]
    Connect,
    #[error("the connection failed mid-exchange")]
    Io,
    #[error("the response body is larger than {0} bytes")]
    TooLarge(usize),
}

/// A response: its status and headers, and its body when it was read.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// The media type of the body (lower case, without parameters), or "".
    pub fn media_type(&self) -> String {
        self.headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .unwrap_or_default()
    }
}

/// Sends `req` on a new connection to `net` and reads the response: the whole body (at most
/// `max_body` bytes) when `read_body`, else only its head (for a stream that may never end).
/// The connection is closed afterwards. The caller bounds the time it takes.
pub async fn exchange(
    net: &NetTarget,
    req: hyper::Request<Full<Bytes>>,
    max_body: usize,
    read_body: bool,
) -> Result<Answer, ExchangeError> {
    let stream = net::connect(net)
        .await
        .map_err(|_| ExchangeError::Connect)?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|_| ExchangeError::Connect)?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let result = async {
        let resp = send
            .send_request(req)
            .await
            .map_err(|_| ExchangeError::Io)?;
        let (parts, body) = resp.into_parts();
        let body = if read_body {
            Limited::new(body, max_body)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        ExchangeError::TooLarge(max_body)
                    } else {
                        ExchangeError::Io
                    }
                })?
                .to_bytes()
        } else {
            Bytes::new()
        };
        Ok(Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }
    .await;
    driver.abort();
    result
}
