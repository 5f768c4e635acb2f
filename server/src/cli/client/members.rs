//! `openbot members` and `openbot invitations`: the people of the caller's organization, and
//! inviting more (owners and admins manage them; see docs/api.md).

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use openbot_core::Operations;
use openbot_schema::{
    AcceptInvitation, CreateInvitation, Invitation, InvitationPage, Member, MemberPage, MemberRole,
};
use uuid::Uuid;

use super::ServerArgs;
use super::paging::{PageArgs, list};

/// Arguments of `openbot members`.
#[derive(Debug, Args)]
pub struct MembersArgs {
    #[command(subcommand)]
    command: MembersCommand,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Debug, Subcommand)]
enum MembersCommand {
    /// Lists the organization's members.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Removes a member: their tokens and sessions stop working (owners and admins).
    Remove {
        /// The member's ID.
        id: Uuid,
    },
}

/// Arguments of `openbot invitations`.
#[derive(Debug, Args)]
pub struct InvitationsArgs {
    #[command(subcommand)]
    command: InvitationsCommand,
    #[command(flatten)]
    server: ServerArgs,
}

/// The role an invited person gets.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Role {
    Member,
    Admin,
}

#[derive(Debug, Subcommand)]
enum InvitationsCommand {
    /// Lists the organization's invitations (owners and admins).
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Invites a person; prints the secret they accept it with (shown only once).
    Create {
        /// The person's email.
        email: String,
        /// The role they get.
        #[arg(long, value_enum, default_value = "member")]
        role: Role,
    },
    /// Revokes an invitation that was not accepted yet.
    Revoke {
        /// The invitation's ID.
        id: Uuid,
    },
    /// Accepts an invitation with its secret (no token needed); prints the new member's
    /// first token once.
    Accept {
        /// The invitation's secret.
        secret: String,
    },
}

fn role_name(role: MemberRole) -> String {
    serde_json::to_value(role)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn member_line(member: &Member) -> String {
    format!(
        "{}  {}  {}  since {}",
        member.id,
        member.email,
        role_name(member.role),
        member.created_at.to_rfc3339()
    )
}

fn invitation_line(invitation: &Invitation) -> String {
    let state = if invitation.accepted_at.is_some() {
        "accepted".to_string()
    } else if invitation.revoked_at.is_some() {
        "revoked".to_string()
    } else {
        format!("open until {}", invitation.expires_at.to_rfc3339())
    };
    format!(
        "{}  {}  {}  {state}",
        invitation.id,
        invitation.email,
        role_name(invitation.role)
    )
}

/// Runs `openbot members`.
pub async fn run(args: MembersArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        MembersCommand::List { page } => {
            list::<MemberPage>(
                &client,
                "/v1/members",
                &page,
                output,
                member_line,
                "no members",
            )
            .await?;
        }
        MembersCommand::Remove { id } => {
            client.remove_member(&id).await?;
            output.print(&serde_json::json!({"removed": id}), |_| {
                format!("removed {id}")
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `openbot invitations`.
pub async fn run_invitations(args: InvitationsArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.remote()?;
    let output = args.server.output();
    match args.command {
        InvitationsCommand::List { page } => {
            list::<InvitationPage>(
                &client,
                "/v1/invitations",
                &page,
                output,
                invitation_line,
                "no invitations",
            )
            .await?;
        }
        InvitationsCommand::Create { email, role } => {
            let role = match role {
                Role::Member => MemberRole::Member,
                Role::Admin => MemberRole::Admin,
            };
            let created = client
                .create_invitation(&CreateInvitation { email, role })
                .await?;
            output.print(&created, |created| {
                format!(
                    "{}\nsecret (shown once; the person accepts with `openbot invitations accept`): {}",
                    invitation_line(&created.invitation),
                    created.secret
                )
            })?;
        }
        InvitationsCommand::Revoke { id } => {
            client.revoke_invitation(&id).await?;
            output.print(&serde_json::json!({"revoked": id}), |_| {
                format!("revoked {id}")
            })?;
        }
        InvitationsCommand::Accept { secret } => {
            let accepted = client
                .accept_invitation(&AcceptInvitation { secret })
                .await?;
            output.print(&accepted, |accepted| {
                format!(
                    "member {} of organization {}\ntoken (shown once): {}",
                    accepted.member_id, accepted.organization_id, accepted.token_secret
                )
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
