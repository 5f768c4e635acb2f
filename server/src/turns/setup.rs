//! Phase setup on restore, written once and shared by the Turn and the tool job: the saved
//! identity's current rights checked before anything else, the access guard, the Vault the
//! tools open references with, the App credentials, and the tool set.

use std::collections::HashMap;
use std::sync::Arc;

use openbot_core::turn::ToolSet;
use openbot_schema::{BotId, ChatId, ErrorCategory};

use super::host::{AccessGuard, BillingContext};
use super::{SavedTool, ToolRoute};
use crate::budgets::BudgetStore;
use crate::engine::{PhaseContext, PhaseError};
use crate::identity::{ExecutionIdentity, IdentityStore};
use crate::platform::Platform;

/// What restored work reads its rights and reaches its tools with. Cheap to clone.
#[derive(Clone)]
pub struct PhaseSetup {
    platform: Platform,
    http: reqwest::Client,
    identity: Option<Arc<dyn IdentityStore>>,
    budgets: Option<Arc<dyn BudgetStore>>,
    vaults: Option<Arc<dyn crate::vaults::VaultStore>>,
    apps: Option<Arc<dyn crate::apps::AppStore>>,
    credentials: Option<Arc<dyn crate::apps::ConnectionCredentials>>,
    oauth: Option<Arc<dyn crate::apps::oauth::OAuthStore>>,
    limits: Option<crate::limits::Limits>,
    /// The node's resource directory, where App sessions are registered.
    directory: Option<Arc<crate::cluster::directory::Directory>>,
    /// What the capabilities registered on this node (the machines' links, say).
    features: crate::features::Features,
}

/// The budgets a guarded phase spends: the Chat its tree works for and that Chat's Bot.
pub(crate) type BudgetTarget = (ChatId, BotId);

impl PhaseSetup {
    /// Setup with no database: no rights to check, no Vault and no Apps (standalone loops).
    pub fn new(platform: Platform) -> Self {
        Self {
            http: platform.tool_client(),
            platform,
            identity: None,
            budgets: None,
            vaults: None,
            apps: None,
            credentials: None,
            oauth: None,
            limits: None,
            directory: None,
            features: crate::features::Features::default(),
        }
    }

    /// Setup on a node's database: every saved identity is checked (work without one is
    /// refused), budgets are spent, Vault references and App Connections open.
    pub fn on_database(platform: Platform, database: &crate::node::Database) -> Self {
        Self {
            identity: Some(Arc::clone(&database.identity)),
            budgets: Some(Arc::clone(&database.budgets)),
            vaults: Some(Arc::clone(&database.vaults)),
            apps: Some(Arc::clone(&database.apps)),
            oauth: Some(Arc::clone(&database.oauth)),
            limits: Some(crate::limits::Limits::new(Arc::clone(&database.limits))),
            directory: crate::cluster::directory::runtime(&database.features).cloned(),
            features: database.features.clone(),
            ..Self::new(platform)
        }
    }

    /// Asks `credentials` what a Connection sends (default: manual credentials opened with
    /// the engine's key ring, and OAuth tokens from the OAuth service).
    pub fn with_credentials(
        mut self,
        credentials: Arc<dyn crate::apps::ConnectionCredentials>,
    ) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// The platform the work reaches the outside through.
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// Whether this setup spends budgets (model requests are then billed).
    pub(crate) fn bills(&self) -> bool {
        self.budgets.is_some()
    }

    /// The access guard of work with `identity`, its current rights checked first (restored
    /// work is checked before it does anything). Work with no saved identity on a node that
    /// checks identities is refused, never run unchecked.
    pub(crate) async fn access(
        &self,
        identity: Option<&ExecutionIdentity>,
        budgets: Option<BudgetTarget>,
        billing: Option<BillingContext>,
    ) -> Result<Option<AccessGuard>, PhaseError> {
        match (identity, &self.identity) {
            (Some(identity), Some(store)) => {
                identity.check_current(store.as_ref()).await?;
                Ok(Some(AccessGuard {
                    identity: identity.clone(),
                    store: Arc::clone(store),
                    budgets: self.budgets.as_ref().and_then(|store| {
                        budgets.map(|(chat, bot)| (Arc::clone(store), chat, bot))
                    }),
                    billing,
                }))
            }
            (None, Some(_)) => Err(unchecked_work()),
            (_, None) => Ok(None),
        }
    }

    /// The tool set of `saved` for work of `identity`: HTTP tools open Vault references as
    /// its organization, member and Bot; App tools reach their Connections with its
    /// credentials (the OAuth service is built only when a tool calls an App).
    pub(crate) fn tools(
        &self,
        cx: &PhaseContext,
        saved: &[SavedTool],
        identity: Option<&ExecutionIdentity>,
    ) -> Result<(ToolSet, HashMap<String, bool>), PhaseError> {
        let vault = tool_vault(cx, self.vaults.as_ref(), identity);
        let calls_apps = saved.iter().any(|t| matches!(t.route, ToolRoute::App(_)));
        let credentials = self.credentials.clone().or_else(|| {
            calls_apps
                .then(|| {
                    crate::apps::phase_credentials(self.oauth.as_ref(), &cx.engine, &self.platform)
                })
                .flatten()
        });
        let apps = crate::apps::phase_apps(
            self.apps.as_ref(),
            credentials.as_ref(),
            &cx.engine.keys,
            &self.platform,
            self.limits.clone().map(|limits| crate::apps::AppPermits {
                limits,
                generation: cx.generation,
            }),
            self.directory.as_ref().map(|directory| {
                crate::cluster::directory::PhaseScope::new(
                    Arc::clone(directory),
                    cx.execution.id.as_uuid(),
                    format!("generation {}", cx.generation),
                )
            }),
            crate::apps::connector::reach(&self.features).cloned(),
        );
        saved_tool_set(
            saved,
            &self.http,
            self.platform.outbound(),
            vault.as_ref(),
            apps.as_ref(),
            &self.features,
        )
        .map_err(|cause| PhaseError::failed(ErrorCategory::Configuration, cause))
    }
}

/// The tool set of saved tools: each with its route's handler (HTTP tools call their endpoint;
/// host tools wait for a delivered result; delegate and background calls are answered at
/// admission and never reach a handler), and which tools may be sent again after a lost answer.
///
/// An HTTP tool's Vault references open with `vault` as each call is sent.
fn saved_tool_set(
    saved: &[SavedTool],
    http: &reqwest::Client,
    outbound: &Arc<openbot_core::outbound::OutboundPolicy>,
    vault: Option<&crate::tools::ToolVault>,
    apps: Option<&Arc<crate::apps::Apps>>,
    features: &crate::features::Features,
) -> Result<(ToolSet, HashMap<String, bool>), String> {
    let mut set = ToolSet::new();
    let mut retry_safe = HashMap::new();
    for tool in saved {
        let handler: Option<openbot_core::tool::SharedTool> = match &tool.route {
            ToolRoute::Host | ToolRoute::Delegate(_) | ToolRoute::Plan | ToolRoute::Remind => {
                // Waiting again for a delivered result repeats nothing outside: the caller
                // answers a call once, by its ID, and the first answer wins. A delegate call
                // starts its child in the same commit as its result.
                retry_safe.insert(tool.definition.name.clone(), true);
                None
            }
            ToolRoute::Http {
                url,
                retry_safe: safe,
                template,
                ..
            } => {
                retry_safe.insert(tool.definition.name.clone(), *safe);
                let mut handler = openbot_core::tool::HttpTool::new(
                    tool.definition.clone(),
                    url.clone(),
                    http.clone(),
                    Arc::clone(outbound),
                );
                // With a Vault, also for an empty template: a program's call may carry
                // references in its arguments.
                if !template.is_empty() || vault.is_some() {
                    handler = handler.with_parts(Arc::new(crate::tools::TemplateParts {
                        template: template.clone(),
                        vault: vault.cloned(),
                        url: url.clone(),
                    }));
                }
                Some(Arc::new(handler))
            }
            ToolRoute::App(route) => {
                // Sent again after a lost result only when the tool says it is read-only or
                // idempotent; then with the same request ID.
                retry_safe.insert(tool.definition.name.clone(), route.retry_safe());
                let apps = apps.ok_or_else(|| {
                    format!(
                        "the App tool `{}` needs the App store",
                        tool.definition.name
                    )
                })?;
                Some(Arc::new(crate::apps::tool::AppTool::new(
                    (**route).clone(),
                    Arc::clone(apps),
                    vault.cloned(),
                )))
            }
            ToolRoute::Computer(route) => {
                // A read is sent again after a lost answer; a call that changes the machine
                // never is.
                retry_safe.insert(
                    tool.definition.name.clone(),
                    crate::computers::tool::ComputerRoute::retry_safe(&tool.definition.name),
                );
                let handler =
                    crate::computers::phase_tool(features, tool.definition.clone(), route.clone())
                        .ok_or_else(|| {
                            format!(
                                "the Computer tool `{}` needs a node that holds machine links",
                                tool.definition.name
                            )
                        })?;
                Some(handler)
            }
        };
        set.insert(tool.definition.clone(), handler)
            .map_err(|e| e.to_string())?;
    }
    Ok((set, retry_safe))
}

/// The failure of work with no saved identity on a node that checks identities.
pub(crate) fn unchecked_work() -> PhaseError {
    PhaseError::failed(
        ErrorCategory::Access,
        "the work has no saved identity, so its rights and budgets cannot be checked; \
         submit it through the API with a token",
    )
}

/// Where work's HTTP tools open Vault references: as its saved identity's organization,
/// member and Bot. Work without an identity opens none.
fn tool_vault(
    cx: &PhaseContext,
    vaults: Option<&Arc<dyn crate::vaults::VaultStore>>,
    identity: Option<&ExecutionIdentity>,
) -> Option<crate::tools::ToolVault> {
    let (vaults, identity) = (vaults?, identity?);
    Some(crate::tools::ToolVault {
        opener: crate::vaults::VaultOpener::new(Arc::clone(vaults), cx.engine.keys.clone()),
        organization: identity.organization_id,
        member: identity.owner_member_id,
        bot: identity.bot_id,
    })
}
