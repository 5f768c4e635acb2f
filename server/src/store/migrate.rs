//! Schema migrations: SQL files under `migrations/`, applied by `openbot migrate` only. A
//! running server never changes the schema; it refuses a database at another version.

/// Which database a store uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite, the embedded default.
    Sqlite,
    /// PostgreSQL, for several nodes.
    Postgres,
}

/// One migration: its version and SQL.
pub(crate) struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// The schema version this build needs.
pub const SCHEMA_VERSION: i64 = 34;

pub(crate) const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "engine",
        sql: include_str!("../../../migrations/sqlite/0001_engine.sql"),
    },
    Migration {
        version: 2,
        name: "identity",
        sql: include_str!("../../../migrations/sqlite/0002_identity.sql"),
    },
    Migration {
        version: 3,
        name: "bots_chats",
        sql: include_str!("../../../migrations/sqlite/0003_bots_chats.sql"),
    },
    Migration {
        version: 4,
        name: "sessions",
        sql: include_str!("../../../migrations/sqlite/0004_sessions.sql"),
    },
    Migration {
        version: 5,
        name: "model_providers",
        sql: include_str!("../../../migrations/sqlite/0005_model_providers.sql"),
    },
    Migration {
        version: 6,
        name: "invitations",
        sql: include_str!("../../../migrations/sqlite/0006_invitations.sql"),
    },
    Migration {
        version: 7,
        name: "budgets",
        sql: include_str!("../../../migrations/sqlite/0007_budgets.sql"),
    },
    Migration {
        version: 8,
        name: "tools",
        sql: include_str!("../../../migrations/sqlite/0008_tools.sql"),
    },
    Migration {
        version: 9,
        name: "work",
        sql: include_str!("../../../migrations/sqlite/0009_work.sql"),
    },
    Migration {
        version: 10,
        name: "files",
        sql: include_str!("../../../migrations/sqlite/0010_files.sql"),
    },
    Migration {
        version: 11,
        name: "pause",
        sql: include_str!("../../../migrations/sqlite/0011_pause.sql"),
    },
    Migration {
        version: 12,
        name: "plan_mode",
        sql: include_str!("../../../migrations/sqlite/0012_plan_mode.sql"),
    },
    Migration {
        version: 13,
        name: "file_tokens",
        sql: include_str!("../../../migrations/sqlite/0013_file_tokens.sql"),
    },
    Migration {
        version: 14,
        name: "interrupted",
        sql: include_str!("../../../migrations/sqlite/0014_interrupted.sql"),
    },
    Migration {
        version: 15,
        name: "unknown_outcomes",
        sql: include_str!("../../../migrations/sqlite/0015_unknown_outcomes.sql"),
    },
    Migration {
        version: 16,
        name: "sealed_rows",
        sql: include_str!("../../../migrations/sqlite/0016_sealed_rows.sql"),
    },
    Migration {
        version: 17,
        name: "limits",
        sql: include_str!("../../../migrations/sqlite/0017_limits.sql"),
    },
    Migration {
        version: 18,
        name: "billing",
        sql: include_str!("../../../migrations/sqlite/0018_billing.sql"),
    },
    Migration {
        version: 19,
        name: "vaults",
        sql: include_str!("../../../migrations/sqlite/0019_vaults.sql"),
    },
    Migration {
        version: 20,
        name: "apps",
        sql: include_str!("../../../migrations/sqlite/0020_apps.sql"),
    },
    Migration {
        version: 21,
        name: "app_oauth",
        sql: include_str!("../../../migrations/sqlite/0021_app_oauth.sql"),
    },
    Migration {
        version: 22,
        name: "memories",
        sql: include_str!("../../../migrations/sqlite/0022_memories.sql"),
    },
    Migration {
        version: 23,
        name: "triggers",
        sql: include_str!("../../../migrations/sqlite/0023_triggers.sql"),
    },
    Migration {
        version: 24,
        name: "file_retention",
        sql: include_str!("../../../migrations/sqlite/0024_file_retention.sql"),
    },
    Migration {
        version: 25,
        name: "channels",
        sql: include_str!("../../../migrations/sqlite/0025_channels.sql"),
    },
    Migration {
        version: 26,
        name: "oauth_connection_keys",
        sql: include_str!("../../../migrations/sqlite/0026_oauth_connection_keys.sql"),
    },
    Migration {
        version: 27,
        name: "memory_digests",
        sql: include_str!("../../../migrations/sqlite/0027_memory_digests.sql"),
    },
    Migration {
        version: 28,
        name: "member_rights",
        sql: include_str!("../../../migrations/sqlite/0028_member_rights.sql"),
    },
    Migration {
        version: 29,
        name: "operator",
        sql: include_str!("../../../migrations/sqlite/0029_operator.sql"),
    },
    Migration {
        version: 30,
        name: "nodes",
        sql: include_str!("../../../migrations/sqlite/0030_nodes.sql"),
    },
    Migration {
        version: 31,
        name: "resources",
        sql: include_str!("../../../migrations/sqlite/0031_resources.sql"),
    },
    Migration {
        version: 32,
        name: "computers",
        sql: include_str!("../../../migrations/sqlite/0032_computers.sql"),
    },
    Migration {
        version: 33,
        name: "computer_grants",
        sql: include_str!("../../../migrations/sqlite/0033_computer_grants.sql"),
    },
    Migration {
        version: 34,
        name: "terminal_output",
        sql: include_str!("../../../migrations/sqlite/0034_terminal_output.sql"),
    },
];

pub(crate) const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "engine",
        sql: include_str!("../../../migrations/postgres/0001_engine.sql"),
    },
    Migration {
        version: 2,
        name: "identity",
        sql: include_str!("../../../migrations/postgres/0002_identity.sql"),
    },
    Migration {
        version: 3,
        name: "bots_chats",
        sql: include_str!("../../../migrations/postgres/0003_bots_chats.sql"),
    },
    Migration {
        version: 4,
        name: "sessions",
        sql: include_str!("../../../migrations/postgres/0004_sessions.sql"),
    },
    Migration {
        version: 5,
        name: "model_providers",
        sql: include_str!("../../../migrations/postgres/0005_model_providers.sql"),
    },
    Migration {
        version: 6,
        name: "invitations",
        sql: include_str!("../../../migrations/postgres/0006_invitations.sql"),
    },
    Migration {
        version: 7,
        name: "budgets",
        sql: include_str!("../../../migrations/postgres/0007_budgets.sql"),
    },
    Migration {
        version: 8,
        name: "tools",
        sql: include_str!("../../../migrations/postgres/0008_tools.sql"),
    },
    Migration {
        version: 9,
        name: "work",
        sql: include_str!("../../../migrations/postgres/0009_work.sql"),
    },
    Migration {
        version: 10,
        name: "files",
        sql: include_str!("../../../migrations/postgres/0010_files.sql"),
    },
    Migration {
        version: 11,
        name: "pause",
        sql: include_str!("../../../migrations/postgres/0011_pause.sql"),
    },
    Migration {
        version: 12,
        name: "plan_mode",
        sql: include_str!("../../../migrations/postgres/0012_plan_mode.sql"),
    },
    Migration {
        version: 13,
        name: "file_tokens",
        sql: include_str!("../../../migrations/postgres/0013_file_tokens.sql"),
    },
    Migration {
        version: 14,
        name: "interrupted",
        sql: include_str!("../../../migrations/postgres/0014_interrupted.sql"),
    },
    Migration {
        version: 15,
        name: "unknown_outcomes",
        sql: include_str!("../../../migrations/postgres/0015_unknown_outcomes.sql"),
    },
    Migration {
        version: 16,
        name: "sealed_rows",
        sql: include_str!("../../../migrations/postgres/0016_sealed_rows.sql"),
    },
    Migration {
        version: 17,
        name: "limits",
        sql: include_str!("../../../migrations/postgres/0017_limits.sql"),
    },
    Migration {
        version: 18,
        name: "billing",
        sql: include_str!("../../../migrations/postgres/0018_billing.sql"),
    },
    Migration {
        version: 19,
        name: "vaults",
        sql: include_str!("../../../migrations/postgres/0019_vaults.sql"),
    },
    Migration {
        version: 20,
        name: "apps",
        sql: include_str!("../../../migrations/postgres/0020_apps.sql"),
    },
    Migration {
        version: 21,
        name: "app_oauth",
        sql: include_str!("../../../migrations/postgres/0021_app_oauth.sql"),
    },
    Migration {
        version: 22,
        name: "memories",
        sql: include_str!("../../../migrations/postgres/0022_memories.sql"),
    },
    Migration {
        version: 23,
        name: "triggers",
        sql: include_str!("../../../migrations/postgres/0023_triggers.sql"),
    },
    Migration {
        version: 24,
        name: "file_retention",
        sql: include_str!("../../../migrations/postgres/0024_file_retention.sql"),
    },
    Migration {
        version: 25,
        name: "channels",
        sql: include_str!("../../../migrations/postgres/0025_channels.sql"),
    },
    Migration {
        version: 26,
        name: "oauth_connection_keys",
        sql: include_str!("../../../migrations/postgres/0026_oauth_connection_keys.sql"),
    },
    Migration {
        version: 27,
        name: "memory_digests",
        sql: include_str!("../../../migrations/postgres/0027_memory_digests.sql"),
    },
    Migration {
        version: 28,
        name: "member_rights",
        sql: include_str!("../../../migrations/postgres/0028_member_rights.sql"),
    },
    Migration {
        version: 29,
        name: "operator",
        sql: include_str!("../../../migrations/postgres/0029_operator.sql"),
    },
    Migration {
        version: 30,
        name: "nodes",
        sql: include_str!("../../../migrations/postgres/0030_nodes.sql"),
    },
    Migration {
        version: 31,
        name: "resources",
        sql: include_str!("../../../migrations/postgres/0031_resources.sql"),
    },
    Migration {
        version: 32,
        name: "computers",
        sql: include_str!("../../../migrations/postgres/0032_computers.sql"),
    },
    Migration {
        version: 33,
        name: "computer_grants",
        sql: include_str!("../../../migrations/postgres/0033_computer_grants.sql"),
    },
    Migration {
        version: 34,
        name: "terminal_output",
        sql: include_str!("../../../migrations/postgres/0034_terminal_output.sql"),
    },
];

/// The statements of a migration file, split at `;` line ends. Migration files hold no
/// procedural code, so this is exact for them.
pub(crate) fn statements(sql: &str) -> impl Iterator<Item = String> + '_ {
    sql.split(";\n")
        .map(|statement| {
            statement
                .lines()
                .filter(|line| !line.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .filter(|statement| !statement.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_have_every_version_in_order() {
        for list in [SQLITE, POSTGRES] {
            let versions: Vec<i64> = list.iter().map(|m| m.version).collect();
            assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
            assert!(
                list.iter()
                    .all(|m| statements(m.sql).count() > 0 && !m.name.is_empty())
            );
        }
    }
}
