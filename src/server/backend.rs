//! The reference server's pooled HTTP client to the REST backend.
//!
//! hyper-util's pooled client keeps idle keep-alive connections per host and retries a request
//! that raced a connection the backend closed, which is what a production gateway does too.
//! Errors are reduced to what a tool caller may see: never a URL, address or backend message.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Backend responses larger than this are refused.
const MAX_BACKEND_BODY: usize = 16 * 1024 * 1024;

/// A failed backend call, as safe to show to a tool caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BackendError {
    #[error("the backend service is unavailable")]
    Unavailable,
    #[error("the backend service did not answer in time")]
    Timeout,
    #[error("the backend service sent a response that was too large")]
    TooLarge,
}

/// A pooled client for one backend base URL.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    timeout: Duration,
}

impl Backend {
    /// `base` is like `http://127.0.0.1:8081` (a trailing slash is ignored).
    pub(crate) fn new(base: &str, timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(1024)
            .build(connector);
        Backend {
            client,
            base: base.trim_end_matches('/').to_string(),
            timeout,
        }
    }

    /// GET `path` (with query); returns status and body.
    pub(crate) async fn get(&self, path: &str) -> Result<(u16, Bytes), BackendError> {
        self.send("GET", path, Bytes::new()).await
    }

    /// POST a JSON body to `path`.
    pub(crate) async fn post_json(
        &self,
        path: &str,
        body: Bytes,
    ) -> Result<(u16, Bytes), BackendError> {
        self.send("POST", path, body).await
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Bytes,
    ) -> Result<(u16, Bytes), BackendError> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        if !body.is_empty() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(body))
            .map_err(|_| BackendError::Unavailable)?;
        let call = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|_| BackendError::Unavailable)?;
            let status = resp.status().as_u16();
            let body = Limited::new(resp.into_body(), MAX_BACKEND_BODY)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        BackendError::TooLarge
                    } else {
                        BackendError::Unavailable
                    }
                })?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| BackendError::Timeout)?
    }
}
