//! Embeddings: an organization's embeddings model, called in OpenAI's `/v1/embeddings` wire
//! format through the platform's outbound policy, with the key of the organization's own
//! provider settings (`openai`, or `compatible` for the same base URL). A platform key is
//! never sent to it.

use std::sync::Arc;

use openbot_core::model::ModelSpec;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::engine::EngineContext;
use crate::models::ModelRegistryStore;
use crate::platform::Platform;

/// Why embeddings could not be made. Never holds the texts or a key.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The configured model is not an embeddings model spec this server can call.
    #[error("the embeddings model must be `openai:<model>` or `compatible:<base url>:<model>`")]
    Spec,
    /// The outbound policy refused the endpoint, or it could not be reached.
    #[error("the embeddings endpoint could not be reached: {0}")]
    Unreachable(String),
    /// The endpoint answered with an error or with something else than embeddings.
    #[error("the embeddings endpoint answered badly: {0}")]
    Answer(String),
    /// The organization's provider key could not be read.
    #[error("provider settings: {0}")]
    Settings(String),
}

/// Checks an embeddings model spec; returns its base URL (or `None`: OpenAI's) and model.
pub fn parse_spec(spec: &str) -> Result<(Option<String>, String, &'static str), EmbedError> {
    match ModelSpec::parse(spec).map_err(|_| EmbedError::Spec)? {
        ModelSpec::OpenAi { model } => Ok((None, model, "openai")),
        ModelSpec::Compatible { base_url, model } => Ok((Some(base_url), model, "compatible")),
        _ => Err(EmbedError::Spec),
    }
}

/// Makes embeddings for one organization.
#[derive(Clone)]
pub struct Embedder {
    platform: Platform,
    registry: Arc<dyn ModelRegistryStore>,
    engine: Arc<EngineContext>,
    http: reqwest::Client,
}

impl Embedder {
    /// An embedder reaching out as `platform` allows, with keys from `registry`.
    pub fn new(
        platform: Platform,
        registry: Arc<dyn ModelRegistryStore>,
        engine: Arc<EngineContext>,
    ) -> Self {
        Self {
            http: platform.tool_client(),
            platform,
            registry,
            engine,
        }
    }

    /// The embedding of each text, in order.
    pub async fn embed(
        &self,
        organization: Uuid,
        spec: &str,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (base, model, kind) = parse_spec(spec)?;
        let (providers, _) = crate::models::organization_providers(
            &self.engine,
            self.registry.as_ref(),
            organization,
        )
        .await
        .map_err(|e| EmbedError::Settings(e.to_string()))?;
        let own = providers.iter().find(|p| p.kind == kind);
        let (base, key) = match base {
            Some(base) => {
                let same = |saved: &str| saved.trim_end_matches('/') == base.trim_end_matches('/');
                let key = own
                    .filter(|p| p.base_url.as_deref().is_some_and(same))
                    .and_then(|p| p.api_key.clone());
                (base, key)
            }
            None => (
                own.and_then(|p| p.base_url.clone())
                    .unwrap_or_else(|| "https://api.openai.com/v1".into()),
                own.and_then(|p| p.api_key.clone()),
            ),
        };
        let url = format!("{}/embeddings", base.trim_end_matches('/'));
        self.platform
            .outbound()
            .check_url(&url)
            .map_err(|e| EmbedError::Unreachable(e.to_string()))?;
        let mut request = self
            .http
            .post(&url)
            .json(&json!({"model": model, "input": texts}));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| {
            EmbedError::Unreachable(
                openbot_core::outbound::OutboundPolicy::refusal(&e)
                    .unwrap_or_else(|| e.without_url().to_string()),
            )
        })?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .map_err(|e| EmbedError::Answer(e.without_url().to_string()))?;
        if !status.is_success() {
            return Err(EmbedError::Answer(format!("HTTP {}", status.as_u16())));
        }
        let data = body["data"]
            .as_array()
            .ok_or_else(|| EmbedError::Answer("no `data` list".into()))?;
        let mut out = vec![Vec::new(); texts.len()];
        for (position, item) in data.iter().enumerate() {
            let index = item["index"].as_u64().map_or(position, |i| i as usize);
            let vector: Vec<f32> = item["embedding"]
                .as_array()
                .ok_or_else(|| EmbedError::Answer("an item without `embedding`".into()))?
                .iter()
                .map(|x| x.as_f64().unwrap_or(0.0) as f32)
                .collect();
            if let Some(slot) = out.get_mut(index) {
                *slot = vector;
            }
        }
        if out.iter().any(Vec::is_empty) {
            return Err(EmbedError::Answer("fewer embeddings than texts".into()));
        }
        Ok(out)
    }
}
