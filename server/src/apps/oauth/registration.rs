//! Dynamic client registration (RFC 7591): a public client (PKCE, no secret unless the server
//! insists on one) for the authorization code and refresh token grants, with the caller's
//! redirect URI.

use serde_json::json;

use super::OAuthError;
use super::http::{OAuthHttp, cut};
use super::metadata::ServerMetadata;

/// A client the authorization server registered.
#[derive(Debug, Clone)]
pub struct Registered {
    /// Its ID.
    pub client_id: String,
    /// Its secret, when the server gave one.
    pub client_secret: Option<String>,
}

/// Registers a client at the server's registration endpoint.
pub async fn register(
    http: &OAuthHttp,
    server: &ServerMetadata,
    redirect_uri: &str,
    scope: Option<&str>,
) -> Result<Registered, OAuthError> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(OAuthError::Invalid(
            "the authorization server offers no dynamic client registration: give client_id (and client_secret) of a client registered there".into(),
        ));
    };
    let mut request = json!({
        "client_name": "OpenBot",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if let Some(scope) = scope {
        request["scope"] = json!(scope);
    }
    let (status, body) = http.post_json(endpoint, &request).await?;
    let body = body.unwrap_or_default();
    if !(200..300).contains(&status) {
        let error = body["error"].as_str().unwrap_or("an error");
        let description = body["error_description"].as_str().unwrap_or("");
        return Err(OAuthError::Discovery(format!(
            "client registration answered {status} ({}{}{})",
            cut(error),
            if description.is_empty() { "" } else { ": " },
            cut(description)
        )));
    }
    let Some(client_id) = body["client_id"].as_str().filter(|id| !id.is_empty()) else {
        return Err(OAuthError::Discovery(
            "client registration answered no client_id".into(),
        ));
    };
    Ok(Registered {
        client_id: client_id.to_string(),
        client_secret: body["client_secret"].as_str().map(str::to_string),
    })
}
