//! The Computer use cases. A member's methods take the caller and check its right first:
//! approving a pairing and removing a Computer need the `computers` write right, reading needs
//! the read right, and a token limited to some Bots reaches no Computer. The machine's two
//! methods (start a pairing, claim its credential) have no member: the first is open to
//! anyone (its count is capped), the second proves the machine by the pairing's secret.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use openbot_schema::{
    Action, ApprovePairing, BotId, ClaimPairing, Computer, ComputerGrant, ComputerPage,
    GrantComputer, Pairing, PairingClaim, Resource, StartPairing,
};
use uuid::Uuid;

use super::store::{Approval, ComputerRow, ComputerStore, GrantRow, NewPairing};
use crate::identity::{Caller, secret_hash};
use crate::paging::Paging;
use crate::service::ServiceError;
use crate::store::{Millis, StoreError, now_ms, stored_time, stored_time_opt};

/// How long a pairing code may be approved, and a machine claim its credential after.
pub const PAIRING_MS: Millis = 10 * 60 * 1000;
/// The most pairings open at once (neither approved nor expired), for the whole deployment:
/// starting one needs no credential.
pub const MAX_OPEN_PAIRINGS: i64 = 1000;
/// The prefix of every Computer credential, so that a leaked one is easy to recognise and
/// never taken for a member's token (`obt_`).
pub const CREDENTIAL_PREFIX: &str = "obc_";

const UNKNOWN_CREDENTIAL: &str =
    "this Computer credential is unknown or was revoked: pair the machine again";

/// The code's letters: no 0/O, 1/I, so that a person reads it back without doubt.
const CODE_ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const CODE_LENGTH: usize = 8;

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    OsRng.fill_bytes(&mut bytes);
    bytes
}

/// A new pairing code: 8 letters of [`CODE_ALPHABET`] (40 bits), shown `XXXX-XXXX`.
fn new_code() -> String {
    let letters: String = random_bytes::<CODE_LENGTH>()
        .iter()
        .map(|b| CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()] as char)
        .collect();
    format!("{}-{}", &letters[..4], &letters[4..])
}

/// A code as a person may type it (any case, with or without the dash or spaces), in the
/// form it is hashed in; `None` when it cannot be a code.
fn normalize_code(code: &str) -> Option<String> {
    let letters: String = code
        .chars()
        .filter(|c| *c != '-' && !c.is_whitespace())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (letters.len() == CODE_LENGTH && letters.bytes().all(|b| CODE_ALPHABET.contains(&b)))
        .then_some(letters)
}

fn check_name(name: &str) -> Result<(), ServiceError> {
    let length = name.chars().count();
    if !(1..=100).contains(&length) || name.chars().any(char::is_control) {
        return Err(ServiceError::Invalid(
            "a Computer's name is 1-100 characters, none of them control characters".into(),
        ));
    }
    Ok(())
}

fn view(row: ComputerRow) -> Result<Computer, StoreError> {
    Ok(Computer {
        id: row.id,
        name: row.name,
        owner_member_id: row.owner_member_id,
        created_at: stored_time(row.created_at)?,
        paired_at: stored_time_opt(row.paired_at)?,
    })
}

fn grant_view(row: GrantRow) -> Result<ComputerGrant, StoreError> {
    Ok(ComputerGrant {
        computer_id: row.computer_id,
        bot_id: BotId::from(row.bot_id),
        ask: row.ask,
        granted_by: row.granted_by,
        granted_at: stored_time(row.granted_at)?,
    })
}

/// The Computer use cases. Cheap to clone.
#[derive(Clone)]
pub struct Computers {
    store: Arc<dyn ComputerStore>,
    bots: Option<crate::bots::Bots>,
    links: Option<Arc<super::Links>>,
}

impl Computers {
    /// The use cases on `store`.
    pub fn new(store: Arc<dyn ComputerStore>) -> Self {
        Self {
            store,
            bots: None,
            links: None,
        }
    }

    /// These use cases, ending a removed Computer's links through `links`.
    pub fn with_links(mut self, links: Arc<super::Links>) -> Self {
        self.links = Some(links);
        self
    }

    /// These use cases, granting Computers to the Bots of `bots`.
    pub fn with_bots(mut self, bots: crate::bots::Bots) -> Self {
        self.bots = Some(bots);
        self
    }

    /// The Computer whose credential this is: how a machine's agent proves itself when it
    /// connects. An unknown or revoked credential is unauthorized, without saying which.
    pub async fn machine(&self, credential: &str) -> Result<ComputerRow, ServiceError> {
        if !credential.starts_with(CREDENTIAL_PREFIX) {
            return Err(ServiceError::Unauthorized(UNKNOWN_CREDENTIAL));
        }
        self.store
            .computer_by_credential(&secret_hash(credential))
            .await?
            .ok_or(ServiceError::Unauthorized(UNKNOWN_CREDENTIAL))
    }

    /// Grants the Computer `id` to a Bot the caller may change: the Bot's Turns get the
    /// Computer tools on it, its calls that change the machine waiting for approval unless
    /// `request.ask` is off. A shared Computer is granted by an owner or admin only. Replaces
    /// the Bot's grant before.
    pub async fn grant(
        &self,
        caller: &Caller,
        id: Uuid,
        bot: BotId,
        request: &GrantComputer,
    ) -> Result<ComputerGrant, ServiceError> {
        Self::may(caller, Action::Write)?;
        caller.require(Resource::Bots, Action::Write)?;
        let computer = self.visible(caller, id).await?;
        if computer.owner_member_id.is_none() && !caller.is_admin() {
            return Err(ServiceError::Forbidden(
                "only owners and admins grant a shared Computer".into(),
            ));
        }
        let bots = self.bots.as_ref().ok_or_else(|| {
            ServiceError::Internal("this node cannot reach the Bots to grant a Computer".into())
        })?;
        let bot = bots.changeable(caller, bot).await?;
        let row = GrantRow {
            bot_id: bot.id.as_uuid(),
            computer_id: computer.id,
            ask: request.ask,
            granted_by: caller.member.member_id,
            granted_at: now_ms(),
        };
        self.store.grant(&row).await?;
        Ok(grant_view(row)?)
    }

    /// Takes the Computer `id` back from a Bot the caller may change; its Turns submitted
    /// after this get no Computer tools, and calls of Turns running already are refused.
    pub async fn revoke(&self, caller: &Caller, id: Uuid, bot: BotId) -> Result<(), ServiceError> {
        Self::may(caller, Action::Write)?;
        caller.require(Resource::Bots, Action::Write)?;
        let computer = self.visible(caller, id).await?;
        let bots = self.bots.as_ref().ok_or_else(|| {
            ServiceError::Internal("this node cannot reach the Bots to revoke a grant".into())
        })?;
        let bot = bots.changeable(caller, bot).await?;
        if self.store.revoke(bot.id.as_uuid(), computer.id).await? {
            Ok(())
        } else {
            Err(ServiceError::NotFound("grant"))
        }
    }

    /// The right to reach Computers with `action`: the `computers` right, and a token not
    /// limited to some Bots (Computers are no Bot's yet).
    fn may(caller: &Caller, action: Action) -> Result<(), ServiceError> {
        caller.require(Resource::Computers, action)?;
        if caller.bot_ids.is_some() {
            return Err(ServiceError::Forbidden(
                "a token limited to some Bots reaches no Computer".into(),
            ));
        }
        Ok(())
    }

    /// Starts a pairing for a machine (no credential): its code for a member to approve and
    /// its secret to claim the credential with, both shown only now.
    pub async fn start_pairing(&self, request: &StartPairing) -> Result<Pairing, ServiceError> {
        check_name(&request.name)?;
        let code = new_code();
        let secret = URL_SAFE_NO_PAD.encode(random_bytes::<32>());
        let now = now_ms();
        let pairing = NewPairing {
            id: Uuid::now_v7(),
            code_hash: secret_hash(&normalize_code(&code).unwrap_or_default()),
            secret_hash: secret_hash(&secret),
            name: request.name.clone(),
            expires_at: now + PAIRING_MS,
        };
        // A pairing ended a day ago is of use to no one.
        let forget_before = now - 24 * 60 * 60 * 1000;
        if !self
            .store
            .start_pairing(&pairing, MAX_OPEN_PAIRINGS, forget_before)
            .await?
        {
            return Err(ServiceError::RateLimited(
                "too many pairings are waiting for approval: try again in a few minutes".into(),
            ));
        }
        Ok(Pairing {
            id: pairing.id,
            code,
            secret,
            expires_at: stored_time(pairing.expires_at)?,
        })
    }

    /// Approves a pairing code: makes the Computer, the caller's own, or the organization's
    /// when `shared` (an owner or admin only). A code is approved once; an unknown, expired
    /// or used code says which.
    pub async fn approve(
        &self,
        caller: &Caller,
        request: &ApprovePairing,
    ) -> Result<Computer, ServiceError> {
        Self::may(caller, Action::Write)?;
        if request.shared && !caller.is_admin() {
            return Err(ServiceError::Forbidden(
                "only owners and admins share a Computer with the organization".into(),
            ));
        }
        let Some(code) = normalize_code(&request.code) else {
            return Err(ServiceError::Invalid(
                "a pairing code is 8 letters and digits, as `openbot computer pair` shows it"
                    .into(),
            ));
        };
        let code_hash = secret_hash(&code);
        let Some(pairing) = self.store.pairing_by_code(&code_hash).await? else {
            return Err(ServiceError::NotFound("pairing code"));
        };
        let now = now_ms();
        let used = || ServiceError::Conflict("this pairing code was used already".into());
        let expired =
            || ServiceError::Conflict("this pairing code expired: pair the machine again".into());
        if pairing.computer_id.is_some() {
            return Err(used());
        }
        if pairing.expires_at <= now {
            return Err(expired());
        }
        let approval = Approval {
            pairing_id: pairing.id,
            computer_id: Uuid::now_v7(),
            organization_id: caller.member.organization_id,
            owner_member_id: (!request.shared).then_some(caller.member.member_id),
            name: pairing.name,
            claim_until: now + PAIRING_MS,
        };
        match self.store.approve(&approval, now).await? {
            Some(row) => Ok(view(row)?),
            // Approved by someone else, or expired, in between: say which.
            None => match self.store.pairing(pairing.id).await? {
                Some(p) if p.computer_id.is_some() => Err(used()),
                _ => Err(expired()),
            },
        }
    }

    /// The machine's claim with its pairing secret: not approved yet, or its credential,
    /// shown once. A claim while the pairing's window lasts issues a new credential and voids
    /// the one before, so a claim whose answer was lost is simply made again.
    pub async fn claim(
        &self,
        pairing_id: Uuid,
        request: &ClaimPairing,
    ) -> Result<PairingClaim, ServiceError> {
        let pairing = self
            .store
            .pairing(pairing_id)
            .await?
            .filter(|p| p.secret_hash == secret_hash(&request.secret))
            .ok_or(ServiceError::NotFound("pairing"))?;
        let now = now_ms();
        if pairing.expires_at <= now {
            return Err(ServiceError::Conflict(
                "this pairing expired: pair the machine again".into(),
            ));
        }
        let Some(computer_id) = pairing.computer_id else {
            return Ok(PairingClaim {
                approved: false,
                computer_id: None,
                credential: None,
            });
        };
        let credential = format!(
            "{CREDENTIAL_PREFIX}{}",
            URL_SAFE_NO_PAD.encode(random_bytes::<32>())
        );
        if !self
            .store
            .set_credential(computer_id, &secret_hash(&credential), now)
            .await?
        {
            return Err(ServiceError::Conflict(
                "this Computer was removed: pair the machine again".into(),
            ));
        }
        Ok(PairingClaim {
            approved: true,
            computer_id: Some(computer_id),
            credential: Some(credential),
        })
    }

    /// The Computers the caller sees (its own and the organization's shared ones), oldest
    /// first.
    pub async fn list(
        &self,
        caller: &Caller,
        paging: &Paging<Uuid>,
    ) -> Result<ComputerPage, ServiceError> {
        Self::may(caller, Action::Read)?;
        let rows = self
            .store
            .computers_page(
                caller.member.organization_id,
                caller.member.member_id,
                paging.after,
                paging.fetch(),
            )
            .await?;
        Ok(paging.try_page(rows, |row| row.id, view)?)
    }

    /// One Computer the caller sees; another member's is not found.
    pub async fn get(&self, caller: &Caller, id: Uuid) -> Result<Computer, ServiceError> {
        Self::may(caller, Action::Read)?;
        self.visible(caller, id)
            .await
            .and_then(|row| Ok(view(row)?))
    }

    async fn visible(&self, caller: &Caller, id: Uuid) -> Result<ComputerRow, ServiceError> {
        self.store
            .computer(caller.member.organization_id, caller.member.member_id, id)
            .await?
            .ok_or(ServiceError::NotFound("computer"))
    }

    /// A terminal session's output after `after`, as the server saved it: readable on any
    /// node, and after the machine went away. With `wait`, waits for output (or the session's
    /// end) when there is none yet. A session the server has no output of is not found.
    pub async fn terminal_output(
        &self,
        caller: &Caller,
        id: Uuid,
        session: &str,
        after: u64,
        wait: std::time::Duration,
    ) -> Result<openbot_schema::TerminalOutput, ServiceError> {
        Self::may(caller, Action::Read)?;
        let computer = self.visible(caller, id).await?;
        if wait > openbot_core::computer::MAX_READ_WAIT {
            return Err(ServiceError::Invalid("wait_ms is at most 30000".into()));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(terminal) = self.store.terminal(computer.id, session).await? {
                let chunks = self
                    .store
                    .output_after(computer.id, session, after, READ_CHUNKS)
                    .await?;
                if !chunks.is_empty() || terminal.exited || tokio::time::Instant::now() >= deadline
                {
                    return Ok(output_view(&terminal, after, chunks));
                }
            } else if tokio::time::Instant::now() >= deadline {
                return Err(ServiceError::NotFound("terminal session"));
            }
            let now = tokio::time::Instant::now();
            tokio::time::sleep(OUTPUT_POLL.min(deadline.saturating_duration_since(now))).await;
        }
    }

    /// Removes a Computer: its credential stops working at once, the removal is saved, and
    /// its machine's links are closed by the nodes holding them, all before this answers. A
    /// shared Computer is removed by an owner or admin only.
    pub async fn remove(&self, caller: &Caller, id: Uuid) -> Result<(), ServiceError> {
        Self::may(caller, Action::Write)?;
        let row = self.visible(caller, id).await?;
        if row.owner_member_id.is_none() && !caller.is_admin() {
            return Err(ServiceError::Forbidden(
                "only owners and admins remove a shared Computer".into(),
            ));
        }
        if self
            .store
            .remove(caller.member.organization_id, id, now_ms())
            .await?
        {
            // Its credential is void and its grants reach nothing now; its links end too,
            // each closed by the node that holds it, before the answer.
            if let Some(links) = &self.links {
                match links.close(id).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(computer = %id, "a removed Computer's link is not known closed yet; its owner closes it when its lease ends")
                    }
                    Err(err) => {
                        tracing::warn!(computer = %id, error_kind = err.kind(), "a removed Computer's links could not be closed")
                    }
                }
            }
            Ok(())
        } else {
            Err(ServiceError::NotFound("computer"))
        }
    }
}

/// How often a waiting read looks for saved output.
const OUTPUT_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The most chunks one read looks at (then cut at [`READ_BYTES`]).
const READ_CHUNKS: i64 = 1024;

/// The most text one read returns, in bytes (at least one chunk).
const READ_BYTES: usize = 64 * 1024;

/// A read's answer: `chunks` (after `after`) cut at [`READ_BYTES`], counting the chunks that
/// are no longer kept, and the session's end once nothing follows.
fn output_view(
    terminal: &super::store::TerminalRow,
    after: u64,
    chunks: Vec<openbot_schema::OutputChunk>,
) -> openbot_schema::TerminalOutput {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for chunk in chunks {
        if !kept.is_empty() && bytes + chunk.text.len() > READ_BYTES {
            break;
        }
        bytes += chunk.text.len();
        kept.push(chunk);
    }
    let dropped = kept
        .first()
        .map_or(0, |first| first.seq.saturating_sub(after + 1));
    let next_cursor = kept.last().map_or(after, |last| last.seq);
    let last_saved = u64::try_from(terminal.last_seq).unwrap_or(0);
    let exited = terminal.exited && next_cursor >= last_saved;
    openbot_schema::TerminalOutput {
        session_id: terminal.session_id.clone(),
        chunks: kept,
        next_cursor,
        dropped,
        exited,
        exit_code: if exited { terminal.exit_code } else { None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_code_reads_back_in_any_case_with_or_without_its_dash() {
        let code = new_code();
        assert_eq!(code.len(), 9);
        let normal = normalize_code(&code).unwrap();
        assert_eq!(normalize_code(&code.to_lowercase()), Some(normal.clone()));
        assert_eq!(normalize_code(&code.replace('-', " ")), Some(normal));
    }

    #[test]
    fn a_code_with_letters_a_person_could_misread_is_no_code() {
        assert_eq!(normalize_code("ABCD-EFG0"), None);
        assert_eq!(normalize_code("ABCD-EFGI"), None);
        assert_eq!(normalize_code("ABCD-EFG"), None);
        assert_eq!(normalize_code(""), None);
    }

    fn terminal(last_seq: i64, exited: bool) -> super::super::store::TerminalRow {
        super::super::store::TerminalRow {
            session_id: "t1".into(),
            cwd: "/w".into(),
            command: "sh".into(),
            started_at: 0,
            last_seq,
            exited,
            exit_code: exited.then_some(3),
        }
    }

    fn chunk(seq: u64, text: &str) -> openbot_schema::OutputChunk {
        openbot_schema::OutputChunk {
            seq,
            text: text.into(),
        }
    }

    #[test]
    fn a_read_counts_chunks_no_longer_kept_and_ends_only_with_the_last_one() {
        let out = super::output_view(&terminal(9, true), 2, vec![chunk(5, "a"), chunk(6, "b")]);
        assert_eq!((out.dropped, out.next_cursor, out.exited), (2, 6, false));
        assert_eq!(out.exit_code, None);
        let out = super::output_view(&terminal(9, true), 8, vec![chunk(9, "z")]);
        assert_eq!((out.dropped, out.next_cursor, out.exited), (0, 9, true));
        assert_eq!(out.exit_code, Some(3));
    }

    #[test]
    fn a_read_stops_at_its_byte_bound_but_returns_at_least_one_chunk() {
        let big = "x".repeat(super::READ_BYTES);
        let out = super::output_view(
            &terminal(3, false),
            0,
            vec![chunk(1, &big), chunk(2, "y"), chunk(3, "z")],
        );
        assert_eq!(out.chunks.len(), 1);
        assert_eq!(out.next_cursor, 1);
    }
}
