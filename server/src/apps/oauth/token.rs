//! The authorization server's token and revocation endpoints through the oauth2 crate, sent by
//! [`OAuthHttp`] (so every request keeps to the outbound policy). PKCE S256 always; the
//! `resource` parameter (RFC 8707) on the authorization request, the code exchange and every
//! refresh.

use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet,
    EndpointNotSet, EndpointSet, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken,
    RequestTokenError, RevocationUrl, Scope, TokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};

use super::http::{OAuthHttp, SendFailure, cut};
use super::metadata::ServerMetadata;
use crate::store::now_ms;

/// The client OpenBot is at an authorization server.
#[derive(Clone)]
pub struct ClientCredentials {
    /// Its ID.
    pub client_id: String,
    /// Its secret, if it has one.
    pub client_secret: Option<String>,
}

/// The tokens of one grant. Its `Debug` shows no token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSet {
    /// The access token.
    pub access_token: String,
    /// The refresh token, if the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires (ms since the epoch), if the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// The scopes granted, if the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// When this server got the tokens (ms since the epoch); absent in grants saved before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obtained_at: Option<i64>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("refresh_token", &self.refresh_token.is_some())
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// A token or revocation request that got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum TokenFailure {
    /// The server answered with an OAuth error (`invalid_grant` ...): it refused for good.
    #[error("{error}{}", description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Refused {
        /// The error code.
        error: String,
        /// Its description, cut.
        description: Option<String>,
    },
    /// The request was never sent (no connection, refused by the outbound policy).
    #[error("not sent: {0}")]
    NotSent(String),
    /// The request may have reached the server, but its answer was lost or unreadable.
    #[error("the answer was lost: {0}")]
    Lost(String),
}

type Client =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointMaybeSet, EndpointSet>;

fn client(
    server: &ServerMetadata,
    credentials: &ClientCredentials,
    redirect_uri: &str,
) -> Result<Client, TokenFailure> {
    let bad = |what: &str, e: oauth2::url::ParseError| {
        TokenFailure::NotSent(format!("the {what} cannot be used: {e}"))
    };
    let mut client = BasicClient::new(ClientId::new(credentials.client_id.clone()))
        .set_auth_uri(
            AuthUrl::new(server.authorization_endpoint.clone())
                .map_err(|e| bad("authorization endpoint", e))?,
        )
        .set_token_uri(
            TokenUrl::new(server.token_endpoint.clone()).map_err(|e| bad("token endpoint", e))?,
        )
        .set_revocation_url_option(
            server
                .revocation_endpoint
                .clone()
                .map(RevocationUrl::new)
                .transpose()
                .map_err(|e| bad("revocation endpoint", e))?,
        )
        .set_redirect_uri(
            RedirectUrl::new(redirect_uri.to_string()).map_err(|e| bad("redirect URI", e))?,
        );
    if let Some(secret) = &credentials.client_secret {
        client = client.set_client_secret(ClientSecret::new(secret.clone()));
    }
    Ok(client)
}

/// The authorization URL of a browser step with `state`, and its PKCE verifier.
pub fn authorization_url(
    server: &ServerMetadata,
    credentials: &ClientCredentials,
    redirect_uri: &str,
    scope: Option<&str>,
    resource: &str,
    state: &str,
) -> Result<(String, String), TokenFailure> {
    let client = client(server, credentials, redirect_uri)?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let state = state.to_string();
    let mut request = client
        .authorize_url(move || CsrfToken::new(state))
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", resource);
    for scope in scope
        .unwrap_or_default()
        .split(' ')
        .filter(|s| !s.is_empty())
    {
        request = request.add_scope(Scope::new(scope.to_string()));
    }
    let (url, _) = request.url();
    Ok((url.to_string(), verifier.secret().clone()))
}

fn token_set(answer: &oauth2::basic::BasicTokenResponse, old_refresh: Option<&str>) -> TokenSet {
    TokenSet {
        access_token: answer.access_token().secret().clone(),
        // A refresh answer without a new refresh token keeps the old one (no rotation).
        refresh_token: answer
            .refresh_token()
            .map(|t| t.secret().clone())
            .or_else(|| old_refresh.map(str::to_string)),
        expires_at: answer
            .expires_in()
            .map(|d| now_ms() + i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)),
        scope: answer.scopes().map(|scopes| {
            scopes
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        }),
        obtained_at: Some(now_ms()),
    }
}

fn failure<T: oauth2::ErrorResponse>(
    err: RequestTokenError<SendFailure, T>,
    code: impl Fn(&T) -> (String, Option<String>),
) -> TokenFailure {
    match err {
        RequestTokenError::ServerResponse(answer) => {
            let (error, description) = code(&answer);
            TokenFailure::Refused {
                error: cut(&error),
                description: description.map(|d| cut(&d)),
            }
        }
        RequestTokenError::Request(failure) if !failure.maybe_sent => {
            TokenFailure::NotSent(failure.message)
        }
        RequestTokenError::Request(failure) => TokenFailure::Lost(failure.message),
        // The server answered something that is not a token answer: it may have granted.
        RequestTokenError::Parse(_, _) => TokenFailure::Lost("the answer cannot be read".into()),
        RequestTokenError::Other(message) => TokenFailure::Lost(cut(&message)),
    }
}

fn token_error(answer: &oauth2::basic::BasicErrorResponse) -> (String, Option<String>) {
    let error = match answer.error() {
        BasicErrorResponseType::Extension(other) => other.clone(),
        known => known.as_ref().to_string(),
    };
    (error, answer.error_description().cloned())
}

/// Exchanges an authorization code (with its PKCE verifier) for tokens.
pub async fn exchange(
    http: &OAuthHttp,
    server: &ServerMetadata,
    credentials: &ClientCredentials,
    redirect_uri: &str,
    code: &str,
    verifier: &str,
    resource: &str,
) -> Result<TokenSet, TokenFailure> {
    let client = client(server, credentials, redirect_uri)?;
    let answer = client
        .exchange_code(AuthorizationCode::new(code.to_string()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_string()))
        .add_extra_param("resource", resource)
        .request_async(http)
        .await
        .map_err(|e| failure(e, token_error))?;
    Ok(token_set(&answer, None))
}

/// Refreshes a grant; with rotation the answer's refresh token replaces the old one.
pub async fn refresh(
    http: &OAuthHttp,
    server: &ServerMetadata,
    credentials: &ClientCredentials,
    redirect_uri: &str,
    refresh_token: &str,
    resource: &str,
) -> Result<TokenSet, TokenFailure> {
    let client = client(server, credentials, redirect_uri)?;
    let token = RefreshToken::new(refresh_token.to_string());
    let answer = client
        .exchange_refresh_token(&token)
        .add_extra_param("resource", resource)
        .request_async(http)
        .await
        .map_err(|e| failure(e, token_error))?;
    Ok(token_set(&answer, Some(refresh_token)))
}

/// What a revocation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// The server revoked the tokens (RFC 7009).
    Revoked,
    /// The server has no revocation endpoint: the tokens can only be forgotten.
    LocalOnly,
}

/// Revokes a grant's refresh token (which revokes what it granted on most servers) and its
/// access token with RFC 7009 form requests. Revoking a token twice is harmless (RFC 7009
/// answers 200 for an invalid token), so a retry after a lost answer is safe. (The oauth2
/// crate's revocation refuses `http` endpoints; OpenBot's own URL check already allows those
/// only on this machine.)
pub async fn revoke(
    http: &OAuthHttp,
    server: &ServerMetadata,
    credentials: &ClientCredentials,
    _redirect_uri: &str,
    tokens: &TokenSet,
) -> Result<Revoked, TokenFailure> {
    let Some(endpoint) = &server.revocation_endpoint else {
        return Ok(Revoked::LocalOnly);
    };
    let mut revocable = Vec::new();
    if let Some(refresh) = &tokens.refresh_token {
        revocable.push((refresh.as_str(), "refresh_token"));
    }
    revocable.push((tokens.access_token.as_str(), "access_token"));
    for (token, hint) in revocable {
        let mut pairs = vec![("token", token), ("token_type_hint", hint)];
        let mut request = oauth2::http::Request::builder()
            .method(oauth2::http::Method::POST)
            .uri(endpoint.as_str())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json");
        match &credentials.client_secret {
            Some(secret) => {
                use base64::Engine as _;
                let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    form_encode(&credentials.client_id),
                    form_encode(secret)
                ));
                request = request.header("authorization", format!("Basic {basic}"));
            }
            None => pairs.push(("client_id", credentials.client_id.as_str())),
        }
        let body = pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let request = request
            .body(body.into_bytes())
            .map_err(|e| TokenFailure::NotSent(e.to_string()))?;
        let answer = http.send(request).await.map_err(|failure| {
            if failure.maybe_sent {
                TokenFailure::Lost(failure.message)
            } else {
                TokenFailure::NotSent(failure.message)
            }
        })?;
        let status = answer.status().as_u16();
        if status == 200 {
            continue;
        }
        let body: serde_json::Value = serde_json::from_slice(answer.body()).unwrap_or_default();
        match body["error"].as_str() {
            // The server asks to try later (RFC 7009 2.2.1: 503), or failed: retry.
            Some(_) if status == 503 || status >= 500 => {
                return Err(TokenFailure::Lost(format!("the server answered {status}")));
            }
            Some(error) => {
                return Err(TokenFailure::Refused {
                    error: cut(error),
                    description: body["error_description"].as_str().map(cut),
                });
            }
            None if status >= 500 => {
                return Err(TokenFailure::Lost(format!("the server answered {status}")));
            }
            None => {
                return Err(TokenFailure::Refused {
                    error: format!("http_{status}"),
                    description: None,
                });
            }
        }
    }
    Ok(Revoked::Revoked)
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form_encode(value: &str) -> String {
    oauth2::url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
