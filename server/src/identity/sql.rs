//! The identity store on SQL, written once for SQLite and PostgreSQL.

use async_trait::async_trait;
use const_format::concatcp;
use sqlx::Row as _;
use uuid::Uuid;

use super::store::{
    IdentityStore, InvitationRow, MemberRef, MemberRow, NewToken, OrganizationRow, Role, TokenRow,
    parse_bot_ids, parse_rights,
};
use crate::paging::{CreatedPosition, FIRST_ID, LAST_ID};
use crate::store::{StoreError, both_backends, now_ms};

/// The store on both databases, written once (see `crate::store::both_backends`).
#[both_backends]
mod on_both {
    use super::*;

    // The statements of this store, by the use that sends them.
    const INSERT_TOKEN: &str = "INSERT INTO api_tokens (id, member_id, name, secret_hash, rights, bot_ids, expires_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
    const BOOTSTRAP_INSERT_BOOTSTRAP: &str =
        "INSERT INTO bootstrap (singleton, created_at) VALUES (1, $1) ON CONFLICT DO NOTHING";
    const BOOTSTRAP_INSERT_ORGANIZATIONS: &str =
        "INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3)";
    const BOOTSTRAP_INSERT_ACCOUNTS: &str =
        "INSERT INTO accounts (id, email, name, created_at) VALUES ($1, $2, $2, $3)";
    const BOOTSTRAP_INSERT_MEMBERS: &str = "INSERT INTO members (id, organization_id, account_id, role, created_at) VALUES ($1, $2, $3, 'owner', $4)";
    const FIRST_OWNER: &str = "SELECT id AS member_id, organization_id, role FROM members WHERE role = 'owner' AND removed_at IS NULL \
             ORDER BY created_at LIMIT 1";
    const ADD_MEMBER_INSERT_ACCOUNTS: &str = "INSERT INTO accounts (id, email, name, created_at) VALUES ($1, $2, $2, $3) \
             ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email RETURNING id";
    const ADD_MEMBER_INSERT_MEMBERS: &str = "INSERT INTO members (id, organization_id, account_id, role, created_at) VALUES ($1, $2, $3, $4, $5)";
    const CREATE_INVITATION: &str = "INSERT INTO invitations (id, organization_id, email, role, secret_hash, invited_by, expires_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             RETURNING id, organization_id, email, role, expires_at, accepted_at, revoked_at, created_at";
    const INVITATIONS_OF: &str = "SELECT id, organization_id, email, role, expires_at, accepted_at, revoked_at, created_at FROM invitations \
             WHERE organization_id = $1 AND (created_at < $2 OR (created_at = $2 AND id < $3)) \
             ORDER BY created_at DESC, id DESC LIMIT $4";
    const REVOKE_INVITATION: &str = "UPDATE invitations SET revoked_at = $3 WHERE id = $1 AND organization_id = $2 \
             AND accepted_at IS NULL AND revoked_at IS NULL";
    const ACCEPT_INVITATION_UPDATE_INVITATIONS: &str = "UPDATE invitations SET accepted_at = $2 WHERE secret_hash = $1 AND accepted_at IS NULL \
             AND revoked_at IS NULL AND expires_at > $2 RETURNING organization_id, email, role";
    const ACCEPT_INVITATION_INSERT_ACCOUNTS: &str = "INSERT INTO accounts (id, email, name, created_at) VALUES ($1, $2, $2, $3) \
             ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email RETURNING id";
    const ACCEPT_INVITATION_INSERT_MEMBERS: &str = "INSERT INTO members (id, organization_id, account_id, role, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (organization_id, account_id) DO UPDATE SET removed_at = NULL, role = EXCLUDED.role RETURNING id";
    const CREATE_ORGANIZATION_SELECT_MEMBERS: &str =
        "SELECT account_id FROM members WHERE id = $1 AND removed_at IS NULL";
    const CREATE_ORGANIZATION_INSERT_ORGANIZATIONS: &str =
        "INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3)";
    const CREATE_ORGANIZATION_INSERT_MEMBERS: &str = "INSERT INTO members (id, organization_id, account_id, role, created_at) VALUES ($1, $2, $3, $4, $5)";
    const ORGANIZATIONS_OF: &str = "SELECT o.id, o.name, o.created_at, m.id AS member_id, m.role FROM members me \
             JOIN members m ON m.account_id = me.account_id AND m.removed_at IS NULL \
             JOIN organizations o ON o.id = m.organization_id \
             WHERE me.id = $1 AND (o.created_at > $2 OR (o.created_at = $2 AND o.id > $3)) \
             ORDER BY o.created_at, o.id LIMIT $4";
    const MEMBERS_OF: &str = "SELECT m.id AS member_id, m.organization_id, m.role, m.created_at, a.email FROM members m \
             JOIN accounts a ON a.id = m.account_id WHERE m.organization_id = $1 AND m.removed_at IS NULL ORDER BY m.created_at";
    const MEMBERS_PAGE: &str = "SELECT m.id AS member_id, m.organization_id, m.role, m.created_at, a.email FROM members m \
             JOIN accounts a ON a.id = m.account_id WHERE m.organization_id = $1 AND m.removed_at IS NULL \
             AND (m.created_at > $2 OR (m.created_at = $2 AND m.id > $3)) ORDER BY m.created_at, m.id LIMIT $4";
    const REMOVE_MEMBER: &str = "UPDATE members SET removed_at = $3 WHERE id = $1 AND organization_id = $2 AND role <> 'owner' AND removed_at IS NULL";
    const CREATE_TOKEN: &str = "INSERT INTO api_tokens (id, member_id, name, secret_hash, rights, bot_ids, expires_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             RETURNING id, member_id, name, rights, bot_ids, expires_at, revoked_at, created_at";
    const TOKEN_BY_HASH: &str = "SELECT t.id, t.member_id, t.name, t.rights, t.bot_ids, t.expires_at, t.revoked_at, t.created_at, \
                    m.organization_id, m.role \
             FROM api_tokens t JOIN members m ON m.id = t.member_id \
             WHERE t.secret_hash = $1 AND m.removed_at IS NULL";
    const CREATE_SESSION: &str = "INSERT INTO sessions (id, member_id, secret_hash, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)";
    const TOKEN_BY_ID: &str = concatcp!(
        "SELECT t.id, t.member_id, t.name, t.rights, t.bot_ids, t.expires_at, t.revoked_at, t.created_at, \
                    m.organization_id, m.role, \
                    EXISTS (SELECT 1 FROM bots b WHERE b.id = ",
        "$2",
        Store::UUID_CAST,
        " AND ",
        crate::bots::bot_usable_by!("b", "m.organization_id", "m.id"),
        ") AS bot_usable \
             FROM api_tokens t JOIN members m ON m.id = t.member_id \
             WHERE t.id = $1 AND m.removed_at IS NULL"
    );
    const SESSION_MEMBER: &str = concatcp!(
        "SELECT s.member_id, m.organization_id, m.role, \
                    EXISTS (SELECT 1 FROM bots b WHERE b.id = ",
        "$3",
        Store::UUID_CAST,
        " AND ",
        crate::bots::bot_usable_by!("b", "m.organization_id", "m.id"),
        ") AS bot_usable \
             FROM sessions s JOIN members m ON m.id = s.member_id \
             WHERE s.id = $1 AND s.revoked_at IS NULL AND s.expires_at > $2 AND m.removed_at IS NULL"
    );
    const SESSION_BY_HASH: &str = "SELECT s.id, s.member_id, m.organization_id, m.role FROM sessions s JOIN members m ON m.id = s.member_id \
             WHERE s.secret_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > $2 AND m.removed_at IS NULL";
    const REVOKE_SESSION: &str =
        "UPDATE sessions SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1";
    const TOKENS_OF: &str = "SELECT id, member_id, name, rights, bot_ids, expires_at, revoked_at, created_at FROM api_tokens \
             WHERE member_id = $1 AND (created_at < $2 OR (created_at = $2 AND id < $3)) \
             ORDER BY created_at DESC, id DESC LIMIT $4";
    const REVOKE_TOKEN: &str = "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $3) WHERE id = $1 AND member_id = $2";

    fn token_json(token: &NewToken) -> Result<(String, Option<String>), StoreError> {
        let rights =
            serde_json::to_string(&token.rights).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let bots = token
            .bot_ids
            .as_ref()
            .map(|ids| serde_json::to_string(ids).map_err(|e| StoreError::Invalid(e.to_string())))
            .transpose()?;
        Ok((rights, bots))
    }

    fn token_row(row: &Row) -> Result<TokenRow, StoreError> {
        Ok(TokenRow {
            id: row.try_get("id")?,
            member_id: row.try_get("member_id")?,
            name: row.try_get("name")?,
            rights: parse_rights(&row.try_get::<String, _>("rights")?)?,
            bot_ids: parse_bot_ids(row.try_get("bot_ids")?)?,
            expires_at: row.try_get("expires_at")?,
            revoked_at: row.try_get("revoked_at")?,
            created_at: row.try_get("created_at")?,
        })
    }

    fn member_ref(row: &Row) -> Result<MemberRef, StoreError> {
        let role: String = row.try_get("role")?;
        Ok(MemberRef {
            member_id: row.try_get("member_id")?,
            organization_id: row.try_get("organization_id")?,
            role: Role::parse(&role)
                .ok_or_else(|| StoreError::Invalid(format!("member role `{role}`")))?,
        })
    }

    fn invitation_row(row: &Row) -> Result<InvitationRow, StoreError> {
        let role: String = row.try_get("role")?;
        Ok(InvitationRow {
            id: row.try_get("id")?,
            organization_id: row.try_get("organization_id")?,
            email: row.try_get("email")?,
            role: Role::parse(&role)
                .ok_or_else(|| StoreError::Invalid(format!("invitation role `{role}`")))?,
            expires_at: row.try_get("expires_at")?,
            accepted_at: row.try_get("accepted_at")?,
            revoked_at: row.try_get("revoked_at")?,
            created_at: row.try_get("created_at")?,
        })
    }

    /// Stores a member's new token (its secret only as a hash) inside `tx`.
    async fn insert_token(
        tx: &mut sqlx::Transaction<'_, Db>,
        member_id: Uuid,
        token: &NewToken,
        now: i64,
    ) -> Result<(), StoreError> {
        let (rights, bots) = token_json(token)?;
        sqlx::query(INSERT_TOKEN)
            .bind(token.id)
            .bind(member_id)
            .bind(&token.name)
            .bind(&token.secret_hash)
            .bind(rights)
            .bind(bots)
            .bind(token.expires_at)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    #[async_trait]
    impl IdentityStore for Store {
        async fn bot_usable(
            &self,
            caller: &crate::identity::Caller,
            bot: openbot_schema::BotId,
        ) -> Result<bool, StoreError> {
            Ok(crate::bots::BotStore::visible_bot(self, caller, bot)
                .await?
                .is_some())
        }

        async fn bootstrap(
            &self,
            organization: &str,
            owner_email: &str,
            token: NewToken,
        ) -> Result<bool, StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            let first = sqlx::query(BOOTSTRAP_INSERT_BOOTSTRAP)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if first == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
            let (organization_id, account_id, member_id) =
                (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
            sqlx::query(BOOTSTRAP_INSERT_ORGANIZATIONS)
                .bind(organization_id)
                .bind(organization)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query(BOOTSTRAP_INSERT_ACCOUNTS)
                .bind(account_id)
                .bind(owner_email)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query(BOOTSTRAP_INSERT_MEMBERS)
                .bind(member_id)
                .bind(organization_id)
                .bind(account_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            insert_token(&mut tx, member_id, &token, now).await?;
            tx.commit().await?;
            Ok(true)
        }

        async fn first_owner(&self) -> Result<Option<MemberRef>, StoreError> {
            let row = sqlx::query(FIRST_OWNER)
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(member_ref).transpose()
        }

        async fn add_member(
            &self,
            organization_id: Uuid,
            email: &str,
            role: Role,
        ) -> Result<MemberRef, StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            let account: Uuid = sqlx::query_scalar(ADD_MEMBER_INSERT_ACCOUNTS)
                .bind(Uuid::now_v7())
                .bind(email)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            let member_id = Uuid::now_v7();
            sqlx::query(ADD_MEMBER_INSERT_MEMBERS)
                .bind(member_id)
                .bind(organization_id)
                .bind(account)
                .bind(role.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(MemberRef {
                member_id,
                organization_id,
                role,
            })
        }

        async fn create_invitation(
            &self,
            inviter: &MemberRef,
            id: Uuid,
            email: &str,
            role: Role,
            secret_hash: &[u8],
            expires_at: i64,
        ) -> Result<InvitationRow, StoreError> {
            let row = sqlx::query(CREATE_INVITATION)
                .bind(id)
                .bind(inviter.organization_id)
                .bind(email)
                .bind(role.as_str())
                .bind(secret_hash)
                .bind(inviter.member_id)
                .bind(expires_at)
                .bind(now_ms())
                .fetch_one(self.writer())
                .await?;
            invitation_row(&row)
        }

        async fn invitations_of(
            &self,
            organization_id: Uuid,
            before: Option<CreatedPosition>,
            limit: i64,
        ) -> Result<Vec<InvitationRow>, StoreError> {
            let (before_at, before_id) = before.unwrap_or((i64::MAX, LAST_ID));
            let rows = sqlx::query(INVITATIONS_OF)
                .bind(organization_id)
                .bind(before_at)
                .bind(before_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(invitation_row).collect()
        }

        async fn revoke_invitation(
            &self,
            organization_id: Uuid,
            id: Uuid,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(REVOKE_INVITATION)
                .bind(id)
                .bind(organization_id)
                .bind(now_ms())
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(done == 1)
        }

        async fn accept_invitation(
            &self,
            secret_hash: &[u8],
            token: NewToken,
        ) -> Result<Option<MemberRef>, StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            let row = sqlx::query(ACCEPT_INVITATION_UPDATE_INVITATIONS)
                .bind(secret_hash)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(row) = row else {
                tx.rollback().await?;
                return Ok(None);
            };
            let organization_id: Uuid = row.try_get("organization_id")?;
            let email: String = row.try_get("email")?;
            let role_name: String = row.try_get("role")?;
            let role = Role::parse(&role_name)
                .ok_or_else(|| StoreError::Invalid(format!("invitation role `{role_name}`")))?;
            let account: Uuid = sqlx::query_scalar(ACCEPT_INVITATION_INSERT_ACCOUNTS)
                .bind(Uuid::now_v7())
                .bind(&email)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            let member_id: Uuid = sqlx::query_scalar(ACCEPT_INVITATION_INSERT_MEMBERS)
                .bind(Uuid::now_v7())
                .bind(organization_id)
                .bind(account)
                .bind(role.as_str())
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            insert_token(&mut tx, member_id, &token, now).await?;
            tx.commit().await?;
            Ok(Some(MemberRef {
                member_id,
                organization_id,
                role,
            }))
        }

        async fn create_organization(
            &self,
            member: &MemberRef,
            name: &str,
            token: NewToken,
        ) -> Result<OrganizationRow, StoreError> {
            let mut tx = self.writer().begin().await?;
            let now = now_ms();
            let account: Option<Uuid> = sqlx::query_scalar(CREATE_ORGANIZATION_SELECT_MEMBERS)
                .bind(member.member_id)
                .fetch_optional(&mut *tx)
                .await?;
            let account =
                account.ok_or_else(|| StoreError::Invalid("the member was removed".into()))?;
            let organization = Uuid::now_v7();
            sqlx::query(CREATE_ORGANIZATION_INSERT_ORGANIZATIONS)
                .bind(organization)
                .bind(name)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let member_id = Uuid::now_v7();
            sqlx::query(CREATE_ORGANIZATION_INSERT_MEMBERS)
                .bind(member_id)
                .bind(organization)
                .bind(account)
                .bind(Role::Owner.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            insert_token(&mut tx, member_id, &token, now).await?;
            tx.commit().await?;
            Ok(OrganizationRow {
                id: organization,
                name: name.to_string(),
                member_id,
                role: Role::Owner,
                created_at: now,
            })
        }

        async fn organizations_of(
            &self,
            member: &MemberRef,
            after: Option<CreatedPosition>,
            limit: i64,
        ) -> Result<Vec<OrganizationRow>, StoreError> {
            let (after_at, after_id) = after.unwrap_or((i64::MIN, FIRST_ID));
            let rows = sqlx::query(ORGANIZATIONS_OF)
                .bind(member.member_id)
                .bind(after_at)
                .bind(after_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    let role: String = row.try_get("role")?;
                    Ok(OrganizationRow {
                        id: row.try_get("id")?,
                        name: row.try_get("name")?,
                        member_id: row.try_get("member_id")?,
                        role: Role::parse(&role)
                            .ok_or_else(|| StoreError::Invalid(format!("member role `{role}`")))?,
                        created_at: row.try_get("created_at")?,
                    })
                })
                .collect()
        }

        async fn members_of(&self, organization_id: Uuid) -> Result<Vec<MemberRow>, StoreError> {
            let rows = sqlx::query(MEMBERS_OF)
                .bind(organization_id)
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(MemberRow {
                        member: member_ref(row)?,
                        email: row.try_get("email")?,
                        created_at: row.try_get("created_at")?,
                    })
                })
                .collect()
        }

        async fn members_page(
            &self,
            organization_id: Uuid,
            after: Option<CreatedPosition>,
            limit: i64,
        ) -> Result<Vec<MemberRow>, StoreError> {
            let (after_at, after_id) = after.unwrap_or((i64::MIN, FIRST_ID));
            let rows = sqlx::query(MEMBERS_PAGE)
                .bind(organization_id)
                .bind(after_at)
                .bind(after_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(MemberRow {
                        member: member_ref(row)?,
                        email: row.try_get("email")?,
                        created_at: row.try_get("created_at")?,
                    })
                })
                .collect()
        }

        async fn remove_member(
            &self,
            organization_id: Uuid,
            member_id: Uuid,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(REMOVE_MEMBER)
                .bind(member_id)
                .bind(organization_id)
                .bind(now_ms())
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(done == 1)
        }

        async fn create_token(
            &self,
            member_id: Uuid,
            token: NewToken,
        ) -> Result<TokenRow, StoreError> {
            let (rights, bots) = token_json(&token)?;
            let row = sqlx::query(CREATE_TOKEN)
                .bind(token.id)
                .bind(member_id)
                .bind(&token.name)
                .bind(&token.secret_hash)
                .bind(rights)
                .bind(bots)
                .bind(token.expires_at)
                .bind(now_ms())
                .fetch_one(self.writer())
                .await?;
            token_row(&row)
        }

        async fn token_by_hash(
            &self,
            secret_hash: &[u8],
        ) -> Result<Option<(TokenRow, MemberRef)>, StoreError> {
            let row = sqlx::query(TOKEN_BY_HASH)
                .bind(secret_hash)
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| Ok((token_row(&row)?, member_ref(&row)?)))
                .transpose()
        }

        async fn create_session(
            &self,
            member_id: Uuid,
            id: Uuid,
            secret_hash: &[u8],
            expires_at: i64,
        ) -> Result<(), StoreError> {
            sqlx::query(CREATE_SESSION)
                .bind(id)
                .bind(member_id)
                .bind(secret_hash)
                .bind(expires_at)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn token_by_id(
            &self,
            id: Uuid,
            bot: Option<openbot_schema::BotId>,
        ) -> Result<Option<(TokenRow, MemberRef, bool)>, StoreError> {
            let row = sqlx::query(TOKEN_BY_ID)
                .bind(id)
                .bind(bot.map(|b| b.as_uuid()))
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| {
                Ok((
                    token_row(&row)?,
                    member_ref(&row)?,
                    row.try_get::<bool, _>("bot_usable")?,
                ))
            })
            .transpose()
        }

        async fn session_member(
            &self,
            id: Uuid,
            bot: Option<openbot_schema::BotId>,
        ) -> Result<Option<(MemberRef, bool)>, StoreError> {
            let row = sqlx::query(SESSION_MEMBER)
                .bind(id)
                .bind(now_ms())
                .bind(bot.map(|b| b.as_uuid()))
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| Ok((member_ref(&row)?, row.try_get::<bool, _>("bot_usable")?)))
                .transpose()
        }

        async fn session_by_hash(
            &self,
            secret_hash: &[u8],
        ) -> Result<Option<(Uuid, MemberRef)>, StoreError> {
            let row = sqlx::query(SESSION_BY_HASH)
                .bind(secret_hash)
                .bind(now_ms())
                .fetch_optional(self.reader())
                .await?;
            row.map(|row| Ok((row.try_get("id")?, member_ref(&row)?)))
                .transpose()
        }

        async fn revoke_session(&self, id: Uuid) -> Result<(), StoreError> {
            sqlx::query(REVOKE_SESSION)
                .bind(id)
                .bind(now_ms())
                .execute(self.writer())
                .await?;
            Ok(())
        }

        async fn tokens_of(
            &self,
            member_id: Uuid,
            before: Option<CreatedPosition>,
            limit: i64,
        ) -> Result<Vec<TokenRow>, StoreError> {
            let (before_at, before_id) = before.unwrap_or((i64::MAX, LAST_ID));
            let rows = sqlx::query(TOKENS_OF)
                .bind(member_id)
                .bind(before_at)
                .bind(before_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(token_row).collect()
        }

        async fn revoke_token(&self, member_id: Uuid, token_id: Uuid) -> Result<bool, StoreError> {
            let done = sqlx::query(REVOKE_TOKEN)
                .bind(token_id)
                .bind(member_id)
                .bind(now_ms())
                .execute(self.writer())
                .await?
                .rows_affected();
            Ok(done == 1)
        }
    }
}
