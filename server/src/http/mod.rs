//! The HTTP API: axum routes with their OpenAPI document generated from the same code
//! (utoipa), so the two cannot drift. Handlers translate HTTP to the use cases and map
//! their errors at this one boundary.

mod admin;
mod app_oauth;
mod approvals;
mod apps;
mod auth;
mod billing;
mod bots;
mod budgets;
mod channels;
mod chats;
mod code;
mod computers;
mod error;
mod executions;
mod files;
mod health;
mod json;
mod lean;
mod limits;
mod members;
mod memories;
mod metrics;
mod models;
mod organizations;
mod outcomes;
mod reminders;
mod serve;
mod sessions;
mod tokens;
mod tools;
mod triggers;
mod vaults;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use openbot_schema::{ErrorCategory, ErrorId};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{ApiError, ERROR_ID_HEADER};
pub use json::{ApiJson, ApiQuery, BODY_LIMIT};
pub use serve::serve;

use crate::engine::Engine;

/// What every handler shares: one allocation, so that a request's `State` is one reference
/// count (an event stream keeps it for its life).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The use cases and stores behind [`AppState`].
#[derive(Clone)]
pub struct Shared {
    /// The engine of this node.
    pub engine: Arc<Engine>,
    /// The account use cases: organizations, members, invitations, tokens, sessions, and
    /// the caller a credential stands for.
    pub accounts: crate::identity::Accounts,
    /// The Bot use cases.
    pub bots: crate::bots::Bots,
    /// The model provider settings use cases.
    pub providers: crate::models::Providers,
    /// The budget use cases.
    pub budgets: crate::budgets::Budgets,
    /// The tool registry use cases: HTTP tools and delegate tools.
    pub tools: crate::tools::Tools,
    /// The Chat use cases.
    pub chats: crate::chats::Chats,
    /// The approval use cases.
    pub approvals: crate::approvals::Approvals,
    /// The file use cases.
    pub files: crate::files::Files,
    /// What the deployment's outbound requests and scripted models may reach.
    pub platform: crate::platform::Platform,
    /// The unknown-outcome use cases.
    pub outcomes: crate::outcomes::Outcomes,
    /// Configuring shared limits.
    pub limits: crate::limits::LimitsAdmin,
    /// The billing use cases: prices, credits, usage reports.
    pub billing: crate::billing::Billing,
    /// The memory use cases.
    pub memories: crate::memories::Memories,
    /// The Vault use cases: items, fields (write-only values) and rules.
    pub vaults: crate::vaults::Vaults,
    /// The trigger use cases: schedules, webhooks and their firings.
    pub triggers: crate::triggers::Triggers,
    /// The reminder use cases.
    pub reminders: crate::reminders::Reminders,
    /// The Channel use cases: Slack and Telegram connections, their inputs and sends.
    pub channels: crate::channels::Channels,
    /// The App use cases: Apps, Connections, discovery.
    pub apps: crate::apps::Apps,
    /// OAuth sign-in of App connections.
    pub oauth: crate::apps::oauth::OAuth,
    /// What the capabilities that plug in by themselves registered (the operator's store).
    pub features: crate::features::Features,
}

impl AppState {
    /// The same state with `oauth` as its App sign-in (a node with its own OAuth settings).
    pub fn with_oauth(mut self, oauth: crate::apps::oauth::OAuth) -> Self {
        std::sync::Arc::make_mut(&mut self.0).oauth = oauth;
        self
    }

    /// The state of a node's HTTP API over its engine, its database and its object store,
    /// checking what members configure against `platform`.
    pub fn new(
        engine: Arc<Engine>,
        database: &crate::node::Database,
        objects: Arc<dyn object_store::ObjectStore>,
        platform: crate::platform::Platform,
    ) -> Self {
        let files = crate::files::Files::new(
            objects,
            Arc::clone(&database.files),
            Arc::clone(engine.context()),
        );
        let chats = crate::chats::Chats::new(
            Arc::clone(&engine),
            Arc::clone(&database.chats),
            Arc::clone(&database.bots),
            crate::node::tool_routing(database),
        )
        .with_files(files.clone());
        let approvals = crate::approvals::Approvals::new(
            Arc::clone(&engine),
            Arc::clone(&database.rules),
            Arc::clone(&database.identity),
        );
        let outcomes = crate::outcomes::Outcomes::new(Arc::clone(&engine));
        let memories = crate::memories::Memories::new(
            Arc::clone(&database.memories),
            Arc::clone(&database.bots),
            engine.context().keys.clone(),
            crate::memories::Embedder::new(
                platform.clone(),
                Arc::clone(&database.models),
                Arc::clone(engine.context()),
            ),
        );
        let vaults = crate::vaults::Vaults::new(
            Arc::clone(&database.vaults),
            engine.context().keys.clone(),
            Arc::clone(&database.bots),
            Arc::clone(&database.tools),
        )
        .with_apps(Arc::clone(&database.apps));
        let triggers = crate::triggers::Triggers::new(
            Arc::clone(&engine),
            Arc::clone(&database.triggers),
            Arc::clone(&database.chats),
            chats.clone(),
            Arc::clone(&database.identity),
        );
        let reminders = crate::reminders::Reminders::new(
            Arc::clone(&engine),
            Arc::clone(&database.reminders),
            Arc::clone(&database.chats),
        );
        let channels = crate::channels::Channels::new(
            Arc::clone(&engine),
            Arc::clone(&database.channels),
            Arc::clone(&database.bots),
            Arc::clone(&database.identity),
            platform.clone(),
        );
        let keys = engine.context().keys.clone();
        let oauth = crate::apps::oauth::OAuth::new(
            Arc::clone(engine.context()),
            Arc::clone(&database.oauth),
            &platform,
            crate::apps::oauth::OAuthConfig::default(),
            Some(Arc::new(crate::apps::AppStatusWrite)),
        );
        let apps = crate::apps::Apps::new(
            Arc::clone(&database.apps),
            keys.clone(),
            platform.clone(),
            Arc::new(crate::apps::OAuthCredentials::new(
                oauth.clone(),
                keys.clone(),
            )),
        )
        .with_vault(crate::vaults::VaultOpener::new(
            Arc::clone(&database.vaults),
            keys,
        ));
        let apps = match crate::cluster::directory::runtime(&database.features) {
            Some(directory) => apps.with_directory(Arc::clone(directory)),
            None => apps,
        }
        .with_connectors(crate::apps::connector::reach(&database.features).cloned());
        let providers = crate::models::Providers::new(
            Arc::clone(&database.models),
            engine.context().keys.clone(),
            platform.clone(),
        );
        let bots = crate::bots::Bots::new(
            Arc::clone(&engine),
            Arc::clone(&database.bots),
            platform.clone(),
        );
        Self(Arc::new(Shared {
            memories,
            triggers,
            reminders,
            channels,
            apps,
            oauth,
            billing: crate::billing::Billing::new(Arc::clone(&database.billing)),
            tools: crate::tools::Tools::new(
                Arc::clone(&database.tools),
                platform.clone(),
                vaults.clone(),
                bots.clone(),
            ),
            vaults,
            bots,
            engine,
            outcomes,
            limits: crate::limits::LimitsAdmin::new(Arc::clone(&database.limits)),
            files,
            approvals,
            accounts: crate::identity::Accounts::new(Arc::clone(&database.identity)),
            features: database.features.clone(),
            providers,
            budgets: crate::budgets::Budgets::new(Arc::clone(&database.budgets)),
            chats,
            platform,
        }))
    }
}

impl AppState {
    /// Seals a fault's full cause and returns its ID; only the ID and category are logged.
    /// A record the database does not take now (the very fault may be the database) is
    /// saved later: `error::save_later` tries again in the background, so the ID the answer
    /// gives comes to name a record.
    pub async fn seal_error(&self, category: ErrorCategory, cause: String) -> ErrorId {
        let cx = self.engine.context();
        let id = uuid::Uuid::now_v7();
        let error_id = ErrorId::from(id);
        match cx.keys.seal(id, cause.as_bytes()) {
            Ok(blob) => {
                let category_name = crate::store::category_name(category);
                if let Err(err) = cx
                    .store
                    .put_error_record(None, &category_name, blob.clone())
                    .await
                {
                    tracing::warn!(%error_id, error_kind = crate::engine::store_error_kind(&err), "could not save a sealed error record; trying again later");
                    error::save_later(Arc::clone(&cx.store), category_name, blob);
                }
            }
            Err(_) => tracing::warn!(%error_id, "could not seal an error record"),
        }
        error::log_fault(category, error_id);
        error_id
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "OpenBot API", description = "Bots, Chats, Turns and their events."),
    components(schemas(openbot_schema::ErrorBody)),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The API's routes and its OpenAPI document.
pub fn api() -> (axum::Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::health))
        .routes(routes!(admin::get_error))
        .routes(routes!(admin::list_cluster_nodes))
        .routes(routes!(admin::list_physical_resources))
        .routes(routes!(tokens::create_token, tokens::list_tokens))
        .routes(routes!(tokens::revoke_token))
        .routes(routes!(sessions::create_session, sessions::end_session))
        .routes(routes!(
            organizations::list_organizations,
            organizations::create_organization
        ))
        .routes(routes!(members::list_members))
        .routes(routes!(members::remove_member))
        .routes(routes!(
            members::create_invitation,
            members::list_invitations
        ))
        .routes(routes!(members::revoke_invitation))
        .routes(routes!(members::accept_invitation))
        .routes(routes!(models::list_providers))
        .routes(routes!(models::put_provider, models::delete_provider))
        .routes(routes!(computers::start_pairing))
        .routes(routes!(computers::approve_pairing))
        .routes(routes!(computers::claim_pairing))
        .routes(routes!(computers::list_computers))
        .routes(routes!(computers::get_computer, computers::remove_computer))
        .routes(routes!(
            computers::grant_computer,
            computers::revoke_computer
        ))
        .routes(routes!(computers::terminal_output))
        .routes(routes!(budgets::list_budgets))
        .routes(routes!(budgets::put_budget, budgets::delete_budget))
        .routes(routes!(limits::list_limits))
        .routes(routes!(limits::put_limit, limits::delete_limit))
        .routes(routes!(
            billing::list_prices,
            billing::put_price,
            billing::delete_price
        ))
        .routes(routes!(billing::get_credits))
        .routes(routes!(billing::grant_credits))
        .routes(routes!(billing::credit_ledger))
        .routes(routes!(billing::usage))
        .routes(routes!(billing::usage_export))
        .routes(routes!(tools::list_tools))
        .routes(routes!(tools::put_tool, tools::delete_tool))
        .routes(routes!(tools::list_delegates))
        .routes(routes!(tools::put_delegate, tools::delete_delegate))
        .routes(routes!(apps::list_apps, apps::register_app))
        .routes(routes!(apps::get_app, apps::remove_app))
        .routes(routes!(
            apps::list_app_connections,
            apps::open_app_connection
        ))
        .routes(routes!(
            apps::get_app_connection,
            apps::remove_app_connection
        ))
        .routes(routes!(apps::discover_app_tools))
        .routes(routes!(approvals::list_approvals))
        .routes(routes!(approvals::get_approval))
        .routes(routes!(approvals::decide_approval))
        .routes(routes!(approvals::list_rules, approvals::create_rule))
        .routes(routes!(approvals::delete_rule))
        .routes(routes!(bots::create_bot, bots::list_bots))
        .routes(routes!(bots::get_bot, bots::update_bot, bots::delete_bot))
        .routes(routes!(memories::list_memories, memories::create_memory))
        .routes(routes!(memories::search_memories))
        .routes(routes!(
            memories::get_memory,
            memories::update_memory,
            memories::delete_memory
        ))
        .routes(routes!(
            memories::get_memory_settings,
            memories::put_memory_settings
        ))
        .routes(routes!(code::run_code))
        .routes(routes!(chats::create_chat, chats::list_chats))
        .routes(routes!(chats::get_chat, chats::delete_chat))
        .routes(routes!(chats::send, chats::history))
        .routes(routes!(chats::steer))
        .routes(routes!(chats::stop))
        .routes(routes!(chats::get_plan_mode, chats::put_plan_mode))
        .routes(routes!(files::upload_file, files::list_files))
        .routes(routes!(files::get_file, files::delete_file))
        .routes(routes!(files::file_content))
        .routes(routes!(
            files::get_file_retention,
            files::put_file_retention,
            files::delete_file_retention
        ))
        .routes(routes!(executions::get_execution))
        .routes(routes!(executions::cancel_execution))
        .routes(routes!(executions::pause_execution))
        .routes(routes!(executions::resume_execution))
        .routes(routes!(executions::events))
        .routes(routes!(executions::deliver_tool_result))
        .routes(routes!(outcomes::list_unknown_outcomes))
        .routes(routes!(outcomes::decide_outcome))
        .routes(routes!(vaults::list_vault_items, vaults::create_vault_item))
        .routes(routes!(vaults::get_vault_item, vaults::delete_vault_item))
        .routes(routes!(vaults::put_vault_field, vaults::delete_vault_field))
        .routes(routes!(vaults::list_vault_rules, vaults::create_vault_rule))
        .routes(routes!(vaults::delete_vault_rule))
        .routes(routes!(triggers::create_trigger, triggers::list_triggers))
        .routes(routes!(triggers::get_trigger, triggers::delete_trigger))
        .routes(routes!(triggers::pause_trigger))
        .routes(routes!(triggers::resume_trigger))
        .routes(routes!(triggers::list_firings))
        .routes(routes!(triggers::receive_hook))
        .routes(routes!(channels::create_channel, channels::list_channels))
        .routes(routes!(channels::get_channel, channels::delete_channel))
        .routes(routes!(channels::list_channel_sends))
        .routes(routes!(channels::link_speaker, channels::unlink_speaker))
        .routes(routes!(channels::slack_events))
        .routes(routes!(channels::telegram_update))
        .routes(routes!(reminders::list_reminders))
        .routes(routes!(reminders::cancel_reminder))
        .routes(routes!(app_oauth::authorize_oauth))
        .routes(routes!(app_oauth::complete_oauth))
        .routes(routes!(app_oauth::get_oauth, app_oauth::delete_oauth))
        .routes(routes!(app_oauth::get_oauth_cleanup))
        .split_for_parts()
}

/// The OpenAPI document as served at `/v1/openapi.json` and committed at
/// `schema/openapi.json`.
pub fn openapi_json() -> String {
    let (_, doc) = api();
    doc.to_pretty_json().unwrap_or_default()
}

/// The whole HTTP application for a node.
pub fn app(state: AppState) -> axum::Router {
    let (router, doc) = api();
    let doc = Arc::new(doc.to_pretty_json().unwrap_or_default());
    router
        .route(
            "/v1/openapi.json",
            axum::routing::get(move || {
                let doc = Arc::clone(&doc);
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        (*doc).clone(),
                    )
                }
            }),
        )
        .route("/metrics", axum::routing::get(metrics::metrics))
        .route("/v1/computers/link", axum::routing::get(computers::link))
        .fallback(|| async { ApiError::not_found("this path") })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        // Outermost of the application's layers: every fault's cause, from a handler, an
        // extractor or the fallback, is sealed here and nowhere else.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            error::seal_faults,
        ))
        // Outside the sealing: the request's span sees the error ID it names.
        .layer(axum::middleware::from_fn(
            crate::telemetry::http::trace_request,
        ))
        .with_state(state)
}
