//! The one HTTP client of OAuth: built by the outbound policy (its resolver drops internal
//! addresses the operator did not allow, no redirects, no proxy), every URL checked before it
//! is used, answers read up to a bound. The oauth2 crate sends through [`OAuthHttp::send`].

use std::sync::Arc;

use openbot_core::outbound::OutboundPolicy;
use serde::de::DeserializeOwned;

use super::OAuthError;

/// The most an OAuth answer may hold: metadata and token answers are small.
const MAX_ANSWER: usize = 256 * 1024;

/// A request that failed before an answer came.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SendFailure {
    /// Whether the request may have reached the server (false: it was never sent).
    pub maybe_sent: bool,
    /// What happened, without the request's content.
    pub message: String,
}

/// HTTP for discovery, registration, tokens and revocation.
#[derive(Clone)]
pub struct OAuthHttp {
    client: reqwest::Client,
    outbound: Arc<OutboundPolicy>,
}

impl OAuthHttp {
    /// Exchanges through `platform`'s exchange client, under its outbound policy.
    pub fn new(platform: &crate::platform::Platform) -> Self {
        Self {
            client: platform.exchange_client(),
            outbound: Arc::clone(platform.outbound()),
        }
    }

    /// Checks a URL an answer named before anything is sent to it: the outbound policy, and
    /// `https` unless the host is this machine (development and tests).
    pub fn check(&self, url: &str) -> Result<reqwest::Url, OAuthError> {
        self.outbound
            .check_url(url)
            .map_err(|e| OAuthError::Refused(e.to_string()))?;
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| OAuthError::Discovery(format!("`{}` is not a URL: {e}", cut(url))))?;
        let local = match parsed.host() {
            Some(oauth2::url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(oauth2::url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(oauth2::url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        if parsed.scheme() != "https" && !local {
            return Err(OAuthError::Discovery(format!(
                "`{}` must use https",
                cut(url)
            )));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(OAuthError::Discovery(format!(
                "`{}` must not carry credentials",
                cut(url)
            )));
        }
        Ok(parsed)
    }

    /// GETs `url` (checked first) and answers its status, its `WWW-Authenticate` header and
    /// its body read as JSON when it is.
    pub async fn get(
        &self,
        url: &str,
    ) -> Result<(u16, Option<String>, Option<serde_json::Value>), OAuthError> {
        let url = self.check(url)?;
        let response = self
            .client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| self.failure(&e))?;
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = read_bounded(response).await?;
        Ok((status, challenge, serde_json::from_slice(&bytes).ok()))
    }

    /// GETs `url` and reads a 200 answer as `T`.
    pub async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<Option<T>, OAuthError> {
        let (status, _, body) = self.get(url).await?;
        if status != 200 {
            return Ok(None);
        }
        match body.map(serde_json::from_value::<T>) {
            Some(Ok(value)) => Ok(Some(value)),
            Some(Err(e)) => Err(OAuthError::Discovery(format!(
                "{} answered metadata that cannot be read: {e}",
                cut(url)
            ))),
            None => Ok(None),
        }
    }

    /// POSTs JSON to `url` (checked first); answers the status and the JSON body.
    pub async fn post_json(
        &self,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<(u16, Option<serde_json::Value>), OAuthError> {
        let url = self.check(url)?;
        let response = self
            .client
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(|e| self.failure(&e))?;
        let status = response.status().as_u16();
        let bytes = read_bounded(response).await?;
        Ok((status, serde_json::from_slice(&bytes).ok()))
    }

    /// Sends a request the oauth2 crate built (token, refresh, revocation), its URL checked.
    pub async fn send(
        &self,
        request: oauth2::HttpRequest,
    ) -> Result<oauth2::HttpResponse, SendFailure> {
        let not_sent = |message: String| SendFailure {
            maybe_sent: false,
            message,
        };
        let url = request.uri().to_string();
        self.check(&url).map_err(|e| not_sent(e.to_string()))?;
        let (parts, body) = request.into_parts();
        let method = reqwest::Method::from_bytes(parts.method.as_str().as_bytes())
            .map_err(|e| not_sent(e.to_string()))?;
        let mut builder = self.client.request(method, &url).body(body);
        for (name, value) in &parts.headers {
            builder = builder.header(name.as_str(), value.as_bytes());
        }
        let response = builder.send().await.map_err(|e| SendFailure {
            // A request that never connected reached no one.
            maybe_sent: !e.is_connect() && !e.is_builder(),
            message: OutboundPolicy::refusal(&e).unwrap_or_else(|| without_url(&e)),
        })?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = read_bounded(response).await.map_err(|e| SendFailure {
            maybe_sent: true,
            message: e.to_string(),
        })?;
        let mut answer = oauth2::http::Response::builder().status(status);
        for (name, value) in &headers {
            answer = answer.header(name.as_str(), value.as_bytes());
        }
        answer.body(bytes).map_err(|e| SendFailure {
            maybe_sent: true,
            message: e.to_string(),
        })
    }

    fn failure(&self, err: &reqwest::Error) -> OAuthError {
        match OutboundPolicy::refusal(err) {
            Some(refusal) => OAuthError::Refused(refusal),
            None => OAuthError::Discovery(without_url(err)),
        }
    }
}

impl<'c> oauth2::AsyncHttpClient<'c> for OAuthHttp {
    type Error = SendFailure;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<oauth2::HttpResponse, SendFailure>> + Send + 'c>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(self.send(request))
    }
}

/// A transport error's words without its URL (a URL may carry a query).
fn without_url(err: &reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    format!("the request {kind}")
}

async fn read_bounded(response: reqwest::Response) -> Result<Vec<u8>, OAuthError> {
    use futures::StreamExt as _;
    let mut stream = response.bytes_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| OAuthError::Discovery(without_url(&e)))?;
        if bytes.len() + chunk.len() > MAX_ANSWER {
            return Err(OAuthError::Discovery(
                "an OAuth answer is larger than 256 KiB".into(),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// At most 200 characters of `text`, for messages.
pub fn cut(text: &str) -> String {
    text.chars().take(200).collect()
}
