//! The platform operator: whoever runs the deployment, above every organization. An operator
//! is no member: it calls with an operator token (`openbot admin operator-token create`, kept
//! in `operator_tokens`, never a member's API token) or works on the database itself
//! (`openbot admin ...`). What it may do that no member may is here: reading the sealed cause
//! of an error record (`GET /v1/admin/errors/{id}`, `openbot admin errors show`). Every such
//! read is written to the operator audit (who, what, which record, when) before the cause is
//! opened; a read whose audit entry cannot be written opens nothing.

mod sql;

/// Registers the operator's store with the capabilities' features, where the HTTP route and
/// the CLI find it ([`store`]).
pub fn register(
    features: crate::features::Features,
    store: std::sync::Arc<dyn OperatorStore>,
) -> crate::features::Features {
    features.with(store)
}

/// The operator's store, as [`register`] left it.
pub fn store(features: &crate::features::Features) -> Option<&std::sync::Arc<dyn OperatorStore>> {
    features.get::<std::sync::Arc<dyn OperatorStore>>()
}

use async_trait::async_trait;

use openbot_schema::{ErrorId, ErrorRecord, ExecutionId};
use uuid::Uuid;

use crate::sealed::KeyRing;
use crate::store::{SealedBlob, StoreError, now_ms, parse_category};

/// An operator token's identity (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorToken {
    /// Its ID.
    pub id: Uuid,
    /// Its name.
    pub name: String,
}

/// Who acts as the operator: a token over HTTP, or someone on the database's machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperatorActor {
    /// A request with an operator token.
    Token(OperatorToken),
    /// An `openbot admin` command on the database (the name of the account that ran it).
    Local(String),
}

impl OperatorActor {
    fn label(&self) -> String {
        match self {
            OperatorActor::Token(token) => format!("token:{}", token.name),
            OperatorActor::Local(user) => format!("local:{user}"),
        }
    }

    fn token_id(&self) -> Option<Uuid> {
        match self {
            OperatorActor::Token(token) => Some(token.id),
            OperatorActor::Local(_) => None,
        }
    }
}

/// A stored error record, still sealed.
#[derive(Debug, Clone)]
pub struct ErrorRecordRow {
    /// The fault's category, as stored.
    pub category: String,
    /// The execution that failed with it, if any.
    pub execution_id: Option<Uuid>,
    /// When it was written (milliseconds since the epoch).
    pub created_at: i64,
    /// The sealed cause.
    pub blob: SealedBlob,
}

/// One entry of the operator audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Its ID.
    pub id: Uuid,
    /// The operator token used, for a request over HTTP.
    pub operator_token_id: Option<Uuid>,
    /// Who: `token:<name>` or `local:<account>`.
    pub actor: String,
    /// What, e.g. `error.read`.
    pub action: String,
    /// On what, e.g. the error ID.
    pub subject: String,
    /// When (milliseconds since the epoch).
    pub at: i64,
}

/// The action an error record's read is audited as.
pub const READ_ERROR: &str = "error.read";

/// Operator tokens, error records as the operator reads them, and the audit.
#[async_trait]
pub trait OperatorStore: Send + Sync {
    /// Saves a new operator token by its secret's hash.
    async fn create_operator_token(
        &self,
        id: Uuid,
        name: &str,
        secret_hash: &[u8],
    ) -> Result<(), StoreError>;

    /// The operator token with this secret hash, unless it was revoked.
    async fn operator_token_by_hash(
        &self,
        secret_hash: &[u8],
    ) -> Result<Option<OperatorToken>, StoreError>;

    /// A stored error record, sealed.
    async fn error_record_row(&self, id: Uuid) -> Result<Option<ErrorRecordRow>, StoreError>;

    /// Writes an audit entry.
    async fn write_audit(&self, entry: &AuditEntry) -> Result<(), StoreError>;

    /// The audit entries about `subject`, oldest first.
    async fn audit_of(&self, subject: &str) -> Result<Vec<AuditEntry>, StoreError>;
}

/// Why an operator's read failed.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The database failed (the audit entry included: then nothing was opened).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The record could not be opened (a key this deployment lacks, or damage).
    #[error("the error record could not be opened: {0}")]
    Open(String),
}

/// Reads an error record for the operator: audits the read (found or not), then opens the
/// cause. `None` when no record has that ID.
pub async fn read_error(
    store: &dyn OperatorStore,
    keys: &KeyRing,
    id: ErrorId,
    actor: &OperatorActor,
) -> Result<Option<ErrorRecord>, OperatorError> {
    store
        .write_audit(&AuditEntry {
            id: Uuid::now_v7(),
            operator_token_id: actor.token_id(),
            actor: actor.label(),
            action: READ_ERROR.to_string(),
            subject: id.to_string(),
            at: now_ms(),
        })
        .await?;
    let Some(row) = store.error_record_row(id.as_uuid()).await? else {
        return Ok(None);
    };
    let cause = keys
        .open(&row.blob)
        .map_err(|err| OperatorError::Open(err.to_string()))?;
    let category = parse_category(&row.category)
        .ok_or_else(|| OperatorError::Open(format!("unknown error category `{}`", row.category)))?;
    Ok(Some(ErrorRecord {
        error_id: id,
        category,
        created_at: crate::store::stored_time(row.created_at)?,
        execution_id: row.execution_id.map(ExecutionId::from),
        cause: String::from_utf8_lossy(&cause).into_owned(),
    }))
}
