//! What the operator configured about the deployment's reach: the outbound policy every
//! outbound client keeps to, the platform's own provider keys (the server's environment), and
//! the folder scripted models come from. A member chooses model specs, tool URLs and provider
//! settings; this decides what those choices can reach.
//!
//! The key rule: a platform key is sent only to the endpoint the platform configured for it
//! (`OPENAI_BASE_URL` beside `OPENAI_API_KEY`, and so on). An organization that has settings
//! for a provider uses only its own key, at its own base URL or the provider's public one. A
//! `compatible:` endpoint never gets a platform key: it gets the organization's compatible key
//! when its URL is the base URL saved with that key, and no key otherwise.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openbot_core::live::openai::OpenAiRealtime;
use openbot_core::model::{Model, ModelError, ModelSpec, ModelSpecError, model_from_spec_with};
use openbot_core::outbound::OutboundPolicy;

/// Reads a configuration variable (a provider key, a base URL) by name.
pub type EnvReader = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The variables one model is built with (`model_from_spec_with` reads them by name).
type ModelEnv = Box<dyn Fn(&str) -> Option<String>>;

/// The deployment's reach. Cheap to clone.
#[derive(Clone)]
pub struct Platform {
    env: EnvReader,
    outbound: Arc<OutboundPolicy>,
    /// HTTP tools and embeddings: 10 s to connect, 5 min per call.
    tool_client: reqwest::Client,
    /// Short exchanges (Channel sends, OAuth): 10 s to connect, 30 s per request.
    exchange_client: reqwest::Client,
    scripted: Option<PathBuf>,
    stdio_apps: bool,
    code_limits: openbot_core::codemode::Limits,
}

impl std::fmt::Debug for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Platform")
            .field("outbound", &self.outbound)
            .field("scripted", &self.scripted)
            .field("stdio_apps", &self.stdio_apps)
            .finish_non_exhaustive()
    }
}

/// A platform that cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// The outbound HTTP clients cannot be built.
    #[error(transparent)]
    HttpClient(#[from] openbot_core::outbound::ClientBuildError),
    /// The scripted models folder cannot be used.
    #[error("the scripted models folder {path}: {source}")]
    ScriptedFolder {
        /// The folder.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// One organization's settings for one provider kind, its key opened.
#[derive(Clone)]
pub struct OrganizationProvider {
    /// `openai`, `anthropic` or `compatible`.
    pub kind: String,
    /// The organization's base URL, if it set one.
    pub base_url: Option<String>,
    /// The organization's key, if it set one.
    pub api_key: Option<String>,
}

impl Platform {
    /// A platform reading its keys from the server's environment, keeping outbound requests
    /// to `outbound` and reading scripted models only from `scripted` (none without it).
    pub fn new(outbound: OutboundPolicy, scripted: Option<&Path>) -> Result<Self, PlatformError> {
        let scripted = match scripted {
            Some(folder) => {
                Some(
                    folder
                        .canonicalize()
                        .map_err(|source| PlatformError::ScriptedFolder {
                            path: folder.display().to_string(),
                            source,
                        })?,
                )
            }
            None => None,
        };
        let outbound = Arc::new(outbound);
        let connect = Duration::from_secs(10);
        Ok(Self {
            env: Arc::new(|name| std::env::var(name).ok()),
            tool_client: outbound.client(connect, Duration::from_secs(300))?,
            exchange_client: outbound.client(connect, Duration::from_secs(30))?,
            outbound,
            scripted,
            stdio_apps: false,
            code_limits: openbot_core::codemode::Limits::default(),
        })
    }

    /// The same platform with its keys read through `env` instead of the environment.
    pub fn with_env(mut self, env: EnvReader) -> Self {
        self.env = env;
        self
    }

    /// The outbound policy.
    pub fn outbound(&self) -> &Arc<OutboundPolicy> {
        &self.outbound
    }

    /// The same platform with stdio Apps (MCP servers started as child processes of the
    /// server) allowed or not. Off by default: a stdio App runs a command on the server's
    /// machine, so only an operator turns it on (`openbot serve --stdio-apps`).
    pub fn with_stdio_apps(mut self, allowed: bool) -> Self {
        self.stdio_apps = allowed;
        self
    }

    /// The same platform with Code Mode runs limited to `wall_ms` of wall time each
    /// (`openbot serve --code-wall-ms`; default [`openbot_core::codemode::DEFAULT_WALL_MS`]).
    pub fn with_code_wall_ms(mut self, wall_ms: u64) -> Self {
        self.code_limits.wall_ms = wall_ms.max(1);
        self
    }

    /// The limits of every Code Mode run on this node (a Turn's `run_code` and the model-free
    /// run).
    pub fn code_limits(&self) -> openbot_core::codemode::Limits {
        self.code_limits
    }

    /// Whether stdio Apps are allowed.
    pub fn stdio_apps(&self) -> bool {
        self.stdio_apps
    }

    /// How MCP sessions of Apps are opened: the outbound policy, stdio only where allowed.
    pub fn mcp_options(&self) -> openbot_core::mcp::OpenOptions {
        openbot_core::mcp::OpenOptions {
            outbound: Arc::clone(&self.outbound),
            allow_stdio: self.stdio_apps,
            open_timeout: Duration::from_secs(30),
        }
    }

    /// The HTTP client of HTTP tools and embeddings: the outbound policy, 10 s to connect,
    /// 5 min per call.
    pub fn tool_client(&self) -> reqwest::Client {
        self.tool_client.clone()
    }

    /// The HTTP client of short exchanges (Channel sends, OAuth): the outbound policy, 10 s to
    /// connect, 30 s per request.
    pub fn exchange_client(&self) -> reqwest::Client {
        self.exchange_client.clone()
    }

    /// The file a scripted model's name stands for: a name inside the operator's folder
    /// (relative, or absolute within it), with no `..` and no link leading out of it.
    pub fn scripted_path(&self, name: &str) -> Result<PathBuf, ModelSpecError> {
        let Some(root) = &self.scripted else {
            return Err(ModelSpecError::ScriptNotAllowed(
                "scripted models are not enabled on this server (its operator names their folder with --scripted-dir)".into(),
            ));
        };
        let refused = |why: &str| {
            ModelSpecError::ScriptNotAllowed(format!(
                "scripted model `{}`: {why}",
                name.chars().take(200).collect::<String>()
            ))
        };
        let path = Path::new(name);
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(refused("`..` is not allowed"));
        }
        let joined = root.join(path);
        // Canonical paths resolve every link, so a link out of the folder is caught here.
        let file = joined
            .canonicalize()
            .map_err(|_| refused("there is no such file in the scripted models folder"))?;
        if !file.starts_with(root) || !file.is_file() {
            return Err(refused("it is not a file in the scripted models folder"));
        }
        Ok(file)
    }

    /// Checks a Bot's model spec when the Bot is created or changed: a spec that parses, a
    /// scripted model in the operator's folder, and an endpoint address the outbound policy
    /// allows.
    pub fn check_model(&self, spec: &str) -> Result<(), String> {
        match ModelSpec::parse(spec).map_err(|e| e.to_string())? {
            ModelSpec::Scripted { path } => self
                .scripted_path(&path)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            ModelSpec::Compatible { base_url, .. } => self
                .outbound
                .check_url(&base_url)
                .map_err(|e| e.to_string()),
            _ => Ok(()),
        }
    }

    /// Builds the model `spec` names, with an organization's provider settings, by the key
    /// rule of this module.
    pub fn model(
        &self,
        spec: &str,
        organization: &[OrganizationProvider],
    ) -> Result<Arc<dyn Model>, ModelSpecError> {
        let parsed = ModelSpec::parse(spec)?;
        let own = |kind: &str| organization.iter().find(|p| p.kind == kind);
        let env: ModelEnv = match &parsed {
            ModelSpec::OpenAi { .. } | ModelSpec::OpenAiResponses { .. } => {
                self.provider_env(own("openai"), "openai", "OPENAI_API_KEY", "OPENAI_BASE_URL")?
            }
            ModelSpec::Anthropic { .. } => self.provider_env(
                own("anthropic"),
                "anthropic",
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_BASE_URL",
            )?,
            ModelSpec::Compatible { base_url, .. } => {
                let key = own("compatible")
                    .filter(|p| {
                        p.base_url
                            .as_deref()
                            .is_some_and(|saved| same_base(saved, base_url))
                    })
                    .and_then(|p| p.api_key.clone());
                Box::new(move |name| {
                    (name == "OPENBOT_COMPATIBLE_API_KEY")
                        .then(|| key.clone())
                        .flatten()
                })
            }
            ModelSpec::Scripted { .. } => Box::new(|_| None),
        };
        model_from_spec_with(spec, &env, &self.outbound, &|name| self.scripted_path(name))
    }

    /// The realtime endpoint and model name a live session with model `spec` uses, by the
    /// key rule of [`Self::model`]: `openai:<model>` reaches the organization's own settings
    /// (its key, and its base URL when it set one) or else the platform's key at the
    /// platform's endpoint; `compatible:<base>:<model>` reaches its base URL with the
    /// organization's key for that URL only, never a platform key. Other providers have no
    /// realtime API. The endpoint is checked against the outbound policy.
    pub fn realtime(
        &self,
        spec: &str,
        organization: &[OrganizationProvider],
    ) -> Result<(OpenAiRealtime, String), ModelSpecError> {
        let own = |kind: &str| organization.iter().find(|p| p.kind == kind);
        let (base, key, model) = match ModelSpec::parse(spec)? {
            ModelSpec::OpenAi { model } | ModelSpec::OpenAiResponses { model } => {
                let env = self.provider_env(
                    own("openai"),
                    "openai",
                    "OPENAI_API_KEY",
                    "OPENAI_BASE_URL",
                )?;
                let key = env("OPENAI_API_KEY").ok_or(ModelSpecError::MissingKey {
                    provider: "openai",
                    variable: "OPENAI_API_KEY",
                })?;
                let base = env("OPENAI_BASE_URL")
                    .unwrap_or_else(|| "https://api.openai.com/v1".to_string());
                (base, Some(key), model)
            }
            ModelSpec::Compatible { base_url, model } => {
                let key = own("compatible")
                    .filter(|p| {
                        p.base_url
                            .as_deref()
                            .is_some_and(|saved| same_base(saved, &base_url))
                    })
                    .and_then(|p| p.api_key.clone());
                (base_url, key, model)
            }
            ModelSpec::Anthropic { .. } | ModelSpec::Scripted { .. } => {
                return Err(ModelSpecError::Model(ModelError::Configuration(
                    "a live session needs a realtime model: openai:<model> or compatible:<base-url>:<model>".into(),
                )));
            }
        };
        self.outbound
            .check_url(&base)
            .map_err(|err| ModelSpecError::Model(ModelError::Configuration(err.to_string())))?;
        Ok((
            OpenAiRealtime::with_key(base, key, Arc::clone(&self.outbound)),
            model,
        ))
    }

    /// The variables of one provider: the organization's own settings when it has any (its
    /// key only), else the platform's key with the platform's endpoint.
    fn provider_env(
        &self,
        own: Option<&OrganizationProvider>,
        kind: &'static str,
        key_var: &'static str,
        url_var: &'static str,
    ) -> Result<ModelEnv, ModelSpecError> {
        match own {
            Some(settings) => {
                let Some(key) = settings.api_key.clone() else {
                    return Err(ModelSpecError::Model(ModelError::Configuration(format!(
                        "the organization's {kind} settings have no API key: set api_key with PUT /v1/models/providers/{kind} (a platform key is only sent to the platform's endpoint)"
                    ))));
                };
                let base = settings.base_url.clone();
                Ok(Box::new(move |name| {
                    if name == key_var {
                        Some(key.clone())
                    } else if name == url_var {
                        base.clone()
                    } else {
                        None
                    }
                }))
            }
            None => {
                let env = Arc::clone(&self.env);
                Ok(Box::new(move |name| {
                    (name == key_var || name == url_var)
                        .then(|| env(name))
                        .flatten()
                }))
            }
        }
    }
}

/// Whether two base URLs name the same endpoint (a trailing slash aside).
fn same_base(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn platform_with_key() -> Platform {
        Platform::new(OutboundPolicy::allow_all(), None)
            .map(|p| {
                p.with_env(Arc::new(|name| match name {
                    "OPENAI_API_KEY" | "OPENBOT_COMPATIBLE_API_KEY" => Some("sk-platform".into()),
                    _ => None,
                }))
            })
            .expect("a platform")
    }

    #[test]
    fn a_compatible_endpoint_never_gets_a_platform_key() {
        let platform = platform_with_key();
        let model = platform.model("compatible:http://127.0.0.1:9/v1:x", &[]);
        assert!(model.is_ok());
        // The key is checked end to end in the HTTP tests; here: no key without its own.
        let own = OrganizationProvider {
            kind: "compatible".into(),
            base_url: Some("http://other/v1".into()),
            api_key: Some("sk-org".into()),
        };
        assert!(
            platform
                .model("compatible:http://127.0.0.1:9/v1:x", &[own])
                .is_ok()
        );
    }

    #[test]
    fn an_organization_base_url_without_its_own_key_is_refused() {
        let platform = platform_with_key();
        let own = OrganizationProvider {
            kind: "openai".into(),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            api_key: None,
        };
        let Err(err) = platform.model("openai:gpt-4o-mini", &[own]) else {
            panic!("a base URL without the organization's key must not be used");
        };
        assert!(err.to_string().contains("no API key"), "{err}");
    }

    fn organization(kind: &str, base_url: Option<&str>, key: Option<&str>) -> OrganizationProvider {
        OrganizationProvider {
            kind: kind.into(),
            base_url: base_url.map(str::to_string),
            api_key: key.map(str::to_string),
        }
    }

    #[test]
    fn a_live_session_sends_the_platform_key_only_to_the_platforms_endpoint() {
        let platform = platform_with_key();
        let (endpoint, model) = platform.realtime("openai:gpt-realtime", &[]).unwrap();
        assert_eq!(model, "gpt-realtime");
        assert_eq!(endpoint.base_url(), "https://api.openai.com/v1");
        assert!(endpoint.sends_key("sk-platform"));
        // The organization's own settings: its key at its base URL, never the platform's.
        let own = organization("openai", Some("http://127.0.0.1:9/v1"), Some("sk-org"));
        let (endpoint, _) = platform.realtime("openai:gpt-realtime", &[own]).unwrap();
        assert_eq!(endpoint.base_url(), "http://127.0.0.1:9/v1");
        assert!(endpoint.sends_key("sk-org") && !endpoint.sends_key("sk-platform"));
        // Its base URL without its own key is refused.
        let keyless = organization("openai", Some("http://127.0.0.1:9/v1"), None);
        let err = platform
            .realtime("openai:gpt-realtime", &[keyless])
            .unwrap_err();
        assert!(err.to_string().contains("no API key"), "{err}");
    }

    #[test]
    fn a_live_session_on_a_compatible_endpoint_sends_only_its_own_key() {
        let platform = platform_with_key();
        let spec = "compatible:http://127.0.0.1:9/v1:local-realtime";
        let (endpoint, model) = platform.realtime(spec, &[]).unwrap();
        assert_eq!(model, "local-realtime");
        assert!(!endpoint.sends_key("sk-platform"));
        let other = organization("compatible", Some("http://other/v1"), Some("sk-other"));
        let (endpoint, _) = platform.realtime(spec, &[other]).unwrap();
        assert!(!endpoint.sends_key("sk-other"));
        let own = organization("compatible", Some("http://127.0.0.1:9/v1/"), Some("sk-own"));
        let (endpoint, _) = platform.realtime(spec, &[own]).unwrap();
        assert!(endpoint.sends_key("sk-own"));
    }

    #[test]
    fn a_live_session_needs_a_realtime_provider_the_outbound_policy_allows() {
        let platform = platform_with_key();
        let err = platform
            .realtime("anthropic:claude-sonnet-4-5", &[])
            .unwrap_err();
        assert!(err.to_string().contains("realtime model"), "{err}");
        let guarded = Platform::new(OutboundPolicy::default(), None).unwrap();
        let err = guarded
            .realtime("compatible:http://127.0.0.1:9/v1:m", &[])
            .unwrap_err();
        assert!(err.to_string().contains("outbound"), "{err}");
    }

    #[test]
    fn scripted_models_come_only_from_the_operators_folder() {
        let Ok(dir) = tempfile::tempdir() else {
            panic!("a temp folder");
        };
        let inside = dir.path().join("hello.json");
        let _ = std::fs::write(&inside, "[]");
        let Ok(platform) = Platform::new(OutboundPolicy::default(), Some(dir.path())) else {
            panic!("the folder is usable");
        };
        assert!(platform.scripted_path("hello.json").is_ok());
        assert!(
            platform
                .scripted_path(&inside.display().to_string())
                .is_ok()
        );
        assert!(platform.scripted_path("/etc/passwd").is_err());
        assert!(platform.scripted_path("../hello.json").is_err());
        assert!(platform.scripted_path("missing.json").is_err());
        #[cfg(unix)]
        {
            let _ = std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link.json"));
            assert!(platform.scripted_path("link.json").is_err());
        }
        assert!(
            Platform::new(OutboundPolicy::default(), None)
                .unwrap()
                .scripted_path("hello.json")
                .is_err()
        );
    }
}
