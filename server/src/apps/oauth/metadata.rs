//! Discovery: from an MCP server's URL to its authorization server's endpoints.
//!
//! 1. The protected resource's metadata (RFC 9728): the URL in the `resource_metadata`
//!    parameter of the server's 401 `WWW-Authenticate` answer, else
//!    `/.well-known/oauth-protected-resource` with the server's path, then without it. Its
//!    `resource` must be on the server's own origin.
//! 2. The authorization server's metadata (RFC 8414): `/.well-known/oauth-authorization-server`
//!    with the issuer's path inserted, falling back to OpenID discovery. Its `issuer` must be
//!    the one the resource named, and it must offer PKCE S256.
//!
//! Every URL any answer names is checked by the outbound policy before it is used, so
//! metadata that points at an internal address is refused without a request to it.

use serde::{Deserialize, Serialize};

use super::OAuthError;
use super::http::{OAuthHttp, cut};

/// What OpenBot uses of an authorization server's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerMetadata {
    /// The issuer identifier.
    pub issuer: String,
    /// The authorization endpoint (the browser step).
    pub authorization_endpoint: String,
    /// The token endpoint.
    pub token_endpoint: String,
    /// The dynamic client registration endpoint, if any (RFC 7591).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    /// The revocation endpoint, if any (RFC 7009).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    /// The PKCE methods offered.
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
    /// The scopes offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
}

/// A protected resource's metadata (RFC 9728), as far as OpenBot reads it.
#[derive(Debug, Clone, Deserialize)]
struct ResourceMetadata {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

/// What discovery found for one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The resource identifier tokens are asked for (RFC 8707).
    pub resource: String,
    /// The scopes the resource advertises.
    pub scopes: Vec<String>,
    /// Its authorization server.
    pub server: ServerMetadata,
}

/// Discovers the authorization server of the MCP server at `server_url`.
pub async fn discover(http: &OAuthHttp, server_url: &str) -> Result<Discovered, OAuthError> {
    let server = http.check(server_url).map_err(|e| match e {
        OAuthError::Discovery(m) => OAuthError::Invalid(m),
        other => other,
    })?;
    let resource = resource_metadata(http, &server).await?;
    let claimed = http.check(&resource.resource)?;
    if claimed.origin() != server.origin() {
        return Err(OAuthError::Discovery(format!(
            "the protected resource metadata names `{}`, which is not on the MCP server's origin",
            cut(&resource.resource)
        )));
    }
    let Some(issuer) = resource.authorization_servers.first() else {
        return Err(OAuthError::Discovery(
            "the protected resource metadata names no authorization server".into(),
        ));
    };
    let metadata = server_metadata(http, issuer).await?;
    Ok(Discovered {
        resource: resource.resource,
        scopes: resource.scopes_supported,
        server: metadata,
    })
}

/// The resource's metadata: from its 401 challenge, else from the well-known paths.
async fn resource_metadata(
    http: &OAuthHttp,
    server: &reqwest::Url,
) -> Result<ResourceMetadata, OAuthError> {
    let (status, challenge, _) = http.get(server.as_str()).await?;
    let mut candidates = Vec::new();
    if status == 401
        && let Some(url) = challenge.as_deref().and_then(resource_metadata_param)
    {
        candidates.push(url);
    }
    let origin = server.origin().ascii_serialization();
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        candidates.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    candidates.push(format!("{origin}/.well-known/oauth-protected-resource"));
    for url in candidates {
        if let Some(found) = http.get_json::<ResourceMetadata>(&url).await? {
            return Ok(found);
        }
    }
    Err(OAuthError::Discovery(format!(
        "{} publishes no protected resource metadata (RFC 9728)",
        cut(server.as_str())
    )))
}

/// The authorization server's metadata, checked.
async fn server_metadata(http: &OAuthHttp, issuer: &str) -> Result<ServerMetadata, OAuthError> {
    let parsed = http.check(issuer)?;
    let origin = parsed.origin().ascii_serialization();
    let path = parsed.path().trim_end_matches('/');
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ),
    ];
    for url in candidates {
        let Some(metadata) = http.get_json::<ServerMetadata>(&url).await? else {
            continue;
        };
        if metadata.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
            return Err(OAuthError::Discovery(format!(
                "the authorization server's metadata names the issuer `{}`, not `{}`",
                cut(&metadata.issuer),
                cut(issuer)
            )));
        }
        for endpoint in [
            Some(&metadata.authorization_endpoint),
            Some(&metadata.token_endpoint),
            metadata.registration_endpoint.as_ref(),
            metadata.revocation_endpoint.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            http.check(endpoint)?;
        }
        if !metadata
            .code_challenge_methods_supported
            .iter()
            .any(|m| m == "S256")
        {
            return Err(OAuthError::Discovery(
                "the authorization server does not offer PKCE S256".into(),
            ));
        }
        return Ok(metadata);
    }
    Err(OAuthError::Discovery(format!(
        "{} publishes no authorization server metadata (RFC 8414)",
        cut(issuer)
    )))
}

/// The `resource_metadata` parameter of a `WWW-Authenticate: Bearer ...` challenge.
fn resource_metadata_param(challenge: &str) -> Option<String> {
    let at = challenge.find("resource_metadata=")?;
    let rest = &challenge[at + "resource_metadata=".len()..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    (!value.is_empty()).then(|| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_names_the_metadata() {
        assert_eq!(
            resource_metadata_param(
                r#"Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="mcp""#
            )
            .as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            resource_metadata_param("Bearer resource_metadata=https://b.example/m, scope=x")
                .as_deref(),
            Some("https://b.example/m")
        );
        assert_eq!(resource_metadata_param(r#"Bearer realm="x""#), None);
    }
}
