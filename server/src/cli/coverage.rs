//! Every operation of the HTTP API is reachable from the CLI: [`COMMANDS`] names, for each
//! operation ID of `schema/openapi.json`, a command line that calls it, and [`NOT_CLI`] the few
//! that a person never calls (a platform or a browser does), with why. The tests fail on an
//! operation in neither table (a route added without its command), on a stale entry, and on
//! a command line the CLI does not parse.

use clap::Parser;

use super::Cli;

/// A stand-in ID in the command lines below.
const ID: &str = "01950000-0000-7000-8000-000000000000";

/// Operation ID, and a command line that calls it (`{id}` stands for an ID).
const COMMANDS: &[(&str, &str)] = &[
    // Admin (the platform operator).
    (
        "get_error",
        "admin errors show {id} --server http://x --operator-token t",
    ),
    (
        "list_cluster_nodes",
        "admin nodes --server http://x --operator-token t",
    ),
    (
        "list_physical_resources",
        "admin resources --scope app_connection:{id} --server http://x --operator-token t",
    ),
    // Computers.
    ("start_pairing", "computer pair --server http://x"),
    (
        "claim_pairing",
        "computer pair --server http://x --name laptop",
    ),
    ("approve_pairing", "computers approve ABCD-EFGH --shared"),
    ("list_computers", "computers list"),
    ("get_computer", "computers show {id}"),
    ("remove_computer", "computers remove {id}"),
    ("grant_computer", "computers grant {id} --bot {id} --no-ask"),
    ("revoke_computer", "computers revoke {id} --bot {id}"),
    (
        "terminal_output",
        "computers output {id} s1 --after 3 --follow",
    ),
    // App connections' OAuth sign-in.
    ("get_oauth", "oauth status {id}"),
    ("delete_oauth", "oauth remove {id}"),
    (
        "authorize_oauth",
        "oauth authorize {id} --server-url https://a.example --redirect-uri https://b.example/cb",
    ),
    ("get_oauth_cleanup", "oauth cleanup {id} {id}"),
    ("complete_oauth", "oauth complete {id} --state s --code c"),
    // Approvals.
    ("list_rules", "approvals rules"),
    ("create_rule", "approvals add-rule pay --action ask"),
    ("delete_rule", "approvals delete-rule {id}"),
    ("list_approvals", "approvals list"),
    ("get_approval", "approvals show {id}"),
    ("decide_approval", "approvals approve {id}"),
    // Apps.
    ("list_apps", "apps list"),
    (
        "register_app",
        "apps add time --url https://mcp.example/mcp",
    ),
    ("get_app", "apps show time"),
    ("remove_app", "apps remove time"),
    ("list_app_connections", "apps connections time"),
    ("open_app_connection", "apps connect time"),
    ("get_app_connection", "apps connection time {id}"),
    ("remove_app_connection", "apps disconnect time {id}"),
    ("discover_app_tools", "apps discover time"),
    // Billing: credits, prices, usage.
    ("get_credits", "credits show"),
    ("grant_credits", "credits grant --usd 25"),
    ("credit_ledger", "credits ledger --all"),
    ("list_prices", "prices list"),
    (
        "put_price",
        "prices set openai:gpt-4o --input-usd 2.5 --output-usd 10",
    ),
    ("delete_price", "prices delete openai:gpt-4o"),
    ("usage", "usage --by bot"),
    ("usage_export", "usage --csv"),
    // Bots.
    ("list_bots", "bots list"),
    ("create_bot", "bots create --name B --model openai:gpt-4o"),
    ("get_bot", "bots get {id}"),
    ("delete_bot", "bots delete {id}"),
    ("update_bot", "bots update {id} --name C"),
    ("run_code", "code run --bot {id} -"),
    // Memories.
    ("list_memories", "memories list {id}"),
    ("create_memory", "memories add {id} text"),
    ("search_memories", "memories search {id} query"),
    ("get_memory", "memories get {id} {id}"),
    ("delete_memory", "memories delete {id} {id}"),
    ("update_memory", "memories edit {id} {id} --content c"),
    ("get_memory_settings", "memories settings"),
    (
        "put_memory_settings",
        "memories settings --helper-model openai:gpt-4o-mini",
    ),
    // Budgets.
    ("list_budgets", "budgets list"),
    ("put_budget", "budgets set bot {id} --usd 2.5"),
    ("delete_budget", "budgets delete bot {id}"),
    // Channels.
    ("list_channels", "channels list"),
    (
        "create_channel",
        "channels create --kind telegram --bot {id}",
    ),
    ("get_channel", "channels show {id}"),
    ("delete_channel", "channels delete {id}"),
    ("list_channel_sends", "channels sends {id}"),
    (
        "link_speaker",
        "channels link-speaker {id} U1 --member {id}",
    ),
    ("unlink_speaker", "channels unlink-speaker {id} U1"),
    // Chats.
    ("list_chats", "chats list"),
    ("create_chat", "chats create --bot {id}"),
    ("get_chat", "chats get {id}"),
    ("delete_chat", "chats delete {id}"),
    ("history", "chats history {id}"),
    ("send", "chats send {id} hi"),
    ("steer", "chats send {id} hi --steer"),
    ("stop", "chats stop {id}"),
    ("get_plan_mode", "chats plan-mode {id}"),
    ("put_plan_mode", "chats plan-mode {id} on"),
    ("list_reminders", "reminders list --chat {id}"),
    ("cancel_reminder", "reminders cancel --chat {id} {id}"),
    // Tools and delegates.
    ("list_tools", "tools list"),
    ("put_tool", "tools put weather --url https://api.example/w"),
    ("delete_tool", "tools delete weather"),
    ("list_delegates", "tools delegates"),
    ("put_delegate", "tools delegate research --bot {id}"),
    ("delete_delegate", "tools delete-delegate research"),
    // Executions and outcomes.
    ("get_execution", "executions get {id}"),
    ("cancel_execution", "executions cancel {id}"),
    ("events", "executions observe {id} --after 3"),
    ("pause_execution", "executions pause {id}"),
    ("resume_execution", "executions resume {id}"),
    (
        "deliver_tool_result",
        "executions deliver {id} --call c1 --tool t --result ok",
    ),
    ("list_unknown_outcomes", "executions unknown"),
    (
        "decide_outcome",
        "executions decide {id} --call c1 --not-applied",
    ),
    // Files.
    ("list_files", "files list"),
    ("upload_file", "files upload notes.txt"),
    ("get_file", "files show {id}"),
    ("delete_file", "files delete {id}"),
    ("file_content", "files download {id} --output out.bin"),
    ("get_file_retention", "files retention show"),
    ("put_file_retention", "files retention set 30"),
    ("delete_file_retention", "files retention clear"),
    // The node.
    ("health", "health"),
    // Members, invitations and organizations.
    ("list_members", "members list"),
    ("remove_member", "members remove {id}"),
    ("list_invitations", "invitations list"),
    (
        "create_invitation",
        "invitations create a@example.com --role admin",
    ),
    ("accept_invitation", "invitations accept secret"),
    ("revoke_invitation", "invitations revoke {id}"),
    ("list_organizations", "organizations list"),
    ("create_organization", "organizations create Acme"),
    // Limits.
    ("list_limits", "limits list"),
    ("put_limit", "limits set organization --concurrent 4"),
    ("delete_limit", "limits delete organization"),
    // Model providers.
    ("list_providers", "providers list"),
    (
        "put_provider",
        "providers set openai --api-key-env OPENAI_API_KEY",
    ),
    ("delete_provider", "providers delete openai"),
    // API tokens.
    ("list_tokens", "tokens list"),
    ("create_token", "tokens create ci --right bots:read"),
    ("revoke_token", "tokens revoke {id}"),
    // Triggers.
    ("list_triggers", "triggers list"),
    ("create_trigger", "triggers create --chat {id} --webhook"),
    ("get_trigger", "triggers show {id}"),
    ("delete_trigger", "triggers delete {id}"),
    ("list_firings", "triggers firings {id}"),
    ("pause_trigger", "triggers pause {id}"),
    ("resume_trigger", "triggers resume {id}"),
    // Vaults.
    ("list_vault_items", "vaults list"),
    ("create_vault_item", "vaults create stripe"),
    ("get_vault_item", "vaults show {id}"),
    ("delete_vault_item", "vaults delete {id}"),
    ("put_vault_field", "vaults set {id} key --env STRIPE_KEY"),
    ("delete_vault_field", "vaults unset {id} key"),
    ("list_vault_rules", "vaults rules {id}"),
    (
        "create_vault_rule",
        "vaults allow {id} --field key --bot {id}",
    ),
    ("delete_vault_rule", "vaults revoke {id}"),
];

/// Operations a person does not call from a terminal, and who does.
const NOT_CLI: &[(&str, &str)] = &[
    (
        "slack_events",
        "Slack calls it, signed with the Channel's signing secret",
    ),
    (
        "telegram_update",
        "Telegram calls it, with the Channel's secret token",
    ),
    (
        "receive_hook",
        "the webhook's sender calls it, signed with the trigger's secret",
    ),
    (
        "create_session",
        "a browser signs in with it: its answer is a cookie, which a command cannot keep",
    ),
    ("end_session", "a browser signs out with its session cookie"),
];

/// The operation IDs of the committed OpenAPI document.
fn operation_ids() -> Vec<String> {
    let document: serde_json::Value =
        serde_json::from_str(include_str!("../../../schema/openapi.json")).unwrap_or_default();
    let mut ids = Vec::new();
    for methods in document["paths"]
        .as_object()
        .into_iter()
        .flat_map(|p| p.values())
    {
        for operation in methods.as_object().into_iter().flat_map(|m| m.values()) {
            if let Some(id) = operation["operationId"].as_str() {
                ids.push(id.to_string());
            }
        }
    }
    ids
}

#[test]
fn every_operation_of_the_api_has_a_command_or_a_reason() {
    let ids = operation_ids();
    assert!(ids.len() > 100, "the document lists the operations");
    let missing: Vec<&String> = ids
        .iter()
        .filter(|id| {
            !COMMANDS.iter().any(|(op, _)| op == id) && !NOT_CLI.iter().any(|(op, _)| op == id)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "operations with no CLI command (add one, then a line to COMMANDS): {missing:?}"
    );
    let stale: Vec<&str> = COMMANDS
        .iter()
        .chain(NOT_CLI)
        .map(|(op, _)| *op)
        .filter(|op| !ids.iter().any(|id| id == op))
        .collect();
    assert!(stale.is_empty(), "entries of no operation: {stale:?}");
    let mut seen = std::collections::HashSet::new();
    for (op, _) in COMMANDS.iter().chain(NOT_CLI) {
        assert!(seen.insert(*op), "{op} is listed twice");
    }
}

#[test]
fn every_command_line_of_the_table_parses() {
    for (op, line) in COMMANDS {
        let line = line.replace("{id}", ID);
        let args = std::iter::once("openbot").chain(line.split_whitespace());
        if let Err(err) = Cli::try_parse_from(args) {
            panic!("{op}: `openbot {line}` does not parse: {err}");
        }
    }
}
