//! Identity and access: organizations, accounts, members with roles, and API tokens with
//! rights. Every entry point (HTTP with a token, later cookies, tools, restored work) turns
//! its credentials into a [`Caller`] and passes the same access checks.

mod caller;
mod execution_identity;
mod secret;
mod service;
mod service_identity;
mod sql;
mod store;

pub use caller::{AccessError, Caller};
pub use execution_identity::{Credential, ExecutionIdentity, IdentityCheckError, current_caller};
pub use openbot_schema::{Action, Resource, Right};
pub use secret::{TOKEN_PREFIX, new_secret, secret_hash};
pub use service::{Accounts, INVITATION_DAYS, NewSession, SESSION_SECONDS, role_view};
pub use service_identity::{InvalidServiceName, ServiceIdentity, ServiceOwner};
pub use store::{
    IdentityStore, InvitationRow, MemberRef, MemberRow, NewToken, OrganizationRow, Role, TokenRow,
};
