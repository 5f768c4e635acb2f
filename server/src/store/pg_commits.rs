//! PostgreSQL's commits in one statement. When this store wrote an execution last it knows its
//! tip (`tips.rs`), so a commit seals its events for the sequences that follow and sends the
//! row's update, the sealed results and output, the calls and the events as one statement of
//! data-modifying CTEs. The update checks each execution's generation and last sequence, and
//! every insert joins the updated rows, so a stale tip writes nothing for its execution and
//! its commit goes the usual way (`write_commit`), which refreshes it.
//!
//! The statement takes the commits of several executions at once: those that need nothing but
//! their rows are queued (`group_commit.rs`) and written together, sharing one statement and
//! one WAL flush. A commit with more to write (`commit_rest`: closing input, a failure,
//! signals, a usage roll-up, children, a notice, the outbox, capabilities' rows) is written
//! alone, the statement and the rest in one transaction.

use sqlx::Row as _;
use uuid::Uuid;

use openbot_schema::ExecutionId;

use super::group_commit::Pending;
use super::records::*;
use super::sealing::CLEARED;
use super::statements::call_upsert;
use super::tips::Tip;
use super::{PostgresStore, StoreError};

/// How many groups are written at once. Fewer, larger groups cost less CPU (on 2 cores, 32
/// Turns: 1 writer 0.71 ms per step and 2,002 steps/s, 2 writers 0.82 ms and 1,848,
/// docs/benchmarks.md). The price of one: while its group waits on a row lock (an input being
/// added, a renewal: milliseconds; a frozen client's transaction: at most the 5 s the server
/// gives it), the node's other commits wait too.
pub(crate) const GROUP_WRITERS: usize = 1;

/// A commit to write in one statement: its execution, the owner's generation, the commit and
/// the tip it starts from.
pub(crate) struct RowsJob {
    id: ExecutionId,
    generation: i64,
    commit: Commit,
    tip: Tip,
}

/// What became of a commit sent in one statement.
pub(crate) enum Written {
    /// Written: the execution's last sequence now.
    At(i64),
    /// Nothing written (the tip was stale, or the statement was refused as a whole): the commit,
    /// to write the usual way.
    Stale(Box<Commit>),
}

/// The commits' rows of `COMMITS_AT_ONCE`, one array per column.
#[derive(Default)]
struct Rows {
    now: Millis,
    // executions
    ids: Vec<Uuid>,
    generations: Vec<i64>,
    expected: Vec<i64>,
    event_counts: Vec<i64>,
    input_tokens: Vec<i64>,
    output_tokens: Vec<i64>,
    cached_tokens: Vec<i64>,
    costs: Vec<Option<i64>>,
    states: Vec<Option<&'static str>>,
    outcomes: Vec<Option<String>>,
    failure_categories: Vec<Option<String>>,
    error_ids: Vec<Option<Uuid>>,
    wake_ats: Vec<Option<i64>>,
    unknown_calls: Vec<Option<String>>,
    releases: Vec<bool>,
    output_records: Vec<Option<Uuid>>,
    reasons: Vec<Option<String>>,
    input_steps: Vec<Option<i32>>,
    close_inputs: Vec<bool>,
    // sealed_records
    blob_ids: Vec<Uuid>,
    blob_executions: Vec<Uuid>,
    blob_keys: Vec<String>,
    blob_nonces: Vec<Vec<u8>>,
    blob_ciphertexts: Vec<Vec<u8>>,
    // calls
    call_executions: Vec<Uuid>,
    call_generations: Vec<i64>,
    call_steps: Vec<i32>,
    call_slots: Vec<String>,
    call_attempts: Vec<i32>,
    call_statuses: Vec<&'static str>,
    call_keys: Vec<String>,
    call_results: Vec<Option<Uuid>>,
    call_has_usage: Vec<bool>,
    call_input_tokens: Vec<i64>,
    call_output_tokens: Vec<i64>,
    call_cached_tokens: Vec<i64>,
    call_costs: Vec<Option<i64>>,
    // events
    event_executions: Vec<Uuid>,
    event_sequences: Vec<i64>,
    event_kinds: Vec<String>,
    event_keys: Vec<String>,
    event_bytes: Vec<Vec<u8>>,
}

impl Rows {
    /// Adds the rows of `commit` of execution `id`, its events sealed for the sequences after
    /// `tip`.
    fn push(
        &mut self,
        store: &PostgresStore,
        id: ExecutionId,
        generation: i64,
        commit: &Commit,
        tip: Tip,
    ) -> Result<(), StoreError> {
        // Sealed first: a payload that cannot be sealed leaves no row of this commit behind.
        let mut sealed = Vec::with_capacity(commit.events.len());
        for (i, event) in commit.events.iter().enumerate() {
            let sequence = tip.last_sequence + 1 + i as i64;
            sealed.push((sequence, store.seal.seal_event(id, sequence, event)?));
        }
        let execution = id.as_uuid();
        let usage = commit.usage.unwrap_or_default();
        let state = commit.state.as_ref();
        let failure = state.and_then(|s| s.failure.as_ref());
        let output = state.and_then(|s| s.output.as_ref());
        self.ids.push(execution);
        self.generations.push(generation);
        self.expected.push(tip.last_sequence);
        self.event_counts.push(commit.events.len() as i64);
        self.input_tokens.push(usage.input_tokens as i64);
        self.output_tokens.push(usage.output_tokens as i64);
        self.cached_tokens.push(usage.cached_input_tokens as i64);
        self.costs
            .push(commit.usage.and_then(|u| u.cost_micros).map(|c| c as i64));
        self.states.push(state.map(|s| s.state.as_str()));
        self.outcomes
            .push(state.and_then(|s| s.outcome).map(outcome_name));
        self.failure_categories
            .push(failure.map(|(category, _)| category_name(*category)));
        self.error_ids.push(failure.map(|(_, blob)| blob.id));
        self.wake_ats.push(state.and_then(|s| s.wake_at));
        self.unknown_calls.push(
            state
                .and_then(|s| s.unknown_call.as_ref())
                .map(call_key_name),
        );
        self.releases.push(state.is_some_and(|s| s.release));
        self.output_records.push(output.map(|blob| blob.id));
        self.reasons.push(state.and_then(|s| s.reason.clone()));
        self.input_steps
            .push(commit.input_step.map(|step| step as i32));
        self.close_inputs.push(commit.close_input);
        let blobs = commit
            .calls
            .iter()
            .filter_map(|call| call.result.as_ref())
            .chain(output);
        for blob in blobs {
            self.blob_ids.push(blob.id);
            self.blob_executions.push(execution);
            self.blob_keys.push(blob.key_id.clone());
            self.blob_nonces.push(blob.nonce.clone());
            self.blob_ciphertexts.push(blob.ciphertext.clone());
        }
        for call in &commit.calls {
            let usage = call.usage.unwrap_or_default();
            self.call_executions.push(execution);
            self.call_generations.push(generation);
            self.call_steps.push(call.key.step as i32);
            self.call_slots.push(slot_name(call.key.slot));
            self.call_attempts.push(call.key.attempt as i32);
            self.call_statuses.push(call.phase.as_str());
            self.call_keys.push(call.idempotency_key.clone());
            self.call_results.push(call.result.as_ref().map(|b| b.id));
            self.call_has_usage.push(call.usage.is_some());
            self.call_input_tokens.push(usage.input_tokens as i64);
            self.call_output_tokens.push(usage.output_tokens as i64);
            self.call_cached_tokens
                .push(usage.cached_input_tokens as i64);
            self.call_costs.push(usage.cost_micros.map(|c| c as i64));
        }
        for ((sequence, value), event) in sealed.into_iter().zip(&commit.events) {
            self.event_executions.push(execution);
            self.event_sequences.push(sequence);
            self.event_kinds.push(event_type(event));
            self.event_keys.push(value.key_id);
            self.event_bytes.push(value.bytes);
        }
        Ok(())
    }

    /// The statement with every row bound.
    fn query(&self) -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments> {
        sqlx::query(COMMITS_AT_ONCE)
            .bind(&self.ids)
            .bind(&self.generations)
            .bind(&self.expected)
            .bind(&self.event_counts)
            .bind(&self.input_tokens)
            .bind(&self.output_tokens)
            .bind(&self.cached_tokens)
            .bind(&self.costs)
            .bind(&self.states)
            .bind(&self.outcomes)
            .bind(&self.failure_categories)
            .bind(&self.error_ids)
            .bind(&self.wake_ats)
            .bind(&self.unknown_calls)
            .bind(&self.releases)
            .bind(&self.output_records)
            .bind(&self.reasons)
            .bind(&self.input_steps)
            .bind(&self.close_inputs)
            .bind(self.now)
            .bind(&self.blob_ids)
            .bind(&self.blob_executions)
            .bind(&self.blob_keys)
            .bind(&self.blob_nonces)
            .bind(&self.blob_ciphertexts)
            .bind(&self.call_executions)
            .bind(&self.call_generations)
            .bind(&self.call_steps)
            .bind(&self.call_slots)
            .bind(&self.call_attempts)
            .bind(&self.call_statuses)
            .bind(&self.call_keys)
            .bind(&self.call_results)
            .bind(&self.call_has_usage)
            .bind(&self.call_input_tokens)
            .bind(&self.call_output_tokens)
            .bind(&self.call_cached_tokens)
            .bind(&self.call_costs)
            .bind(CLEARED)
            .bind(&self.event_executions)
            .bind(&self.event_sequences)
            .bind(&self.event_kinds)
            .bind(&self.event_keys)
            .bind(&self.event_bytes)
    }
}

/// The commits of several executions in one statement: `c` holds one row per commit (`$1`-`$19`;
/// `$20` is the time), `l` locks their rows in the order of their IDs first (an uncorrelated
/// subquery, so it runs once before the update takes any row: two statements that update
/// several executions, this one and a lease renewal, then never wait for each other in a
/// circle), `u` updates each execution whose generation and last sequence still match and is
/// not ended, and the sealed records (`$21`-`$25`), calls (`$26`-`$38`) and events
/// (`$39`-`$44`) are inserted for the updated executions only. Returns each updated execution
/// with its last sequence now. The update is `commit_update!`'s, row by row.
const COMMITS_AT_ONCE: &str = concat!(
    "WITH c AS (SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[], $4::bigint[], \
         $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::text[], \
         $12::uuid[], $13::bigint[], $14::text[], $15::boolean[], $16::uuid[], $17::text[], \
         $18::integer[], $19::boolean[]) \
         AS c(id, generation, expected, events, input_tokens, output_tokens, cached_tokens, cost_micros, \
             state, outcome, failure_category, error_id, wake_at, unknown_call, release, output_record, \
             reason, input_step, close_input)), \
     l AS (SELECT x.id FROM executions x WHERE x.id IN (SELECT id FROM c) ORDER BY x.id FOR NO KEY UPDATE), \
     u AS (UPDATE executions e SET last_sequence = e.last_sequence + c.events, \
             input_tokens = e.input_tokens + c.input_tokens, output_tokens = e.output_tokens + c.output_tokens, \
             cached_tokens = e.cached_tokens + c.cached_tokens, \
             cost_micros = CASE WHEN c.cost_micros IS NULL THEN e.cost_micros ELSE COALESCE(e.cost_micros, 0) + c.cost_micros END, \
             state = COALESCE(c.state, e.state), outcome = COALESCE(c.outcome, e.outcome), \
             failure_category = COALESCE(c.failure_category, e.failure_category), error_id = COALESCE(c.error_id, e.error_id), \
             wake_at = CASE WHEN c.state IS NULL THEN e.wake_at \
                 WHEN c.state = 'waiting' AND (e.wake_at IS NOT NULL OR EXISTS (SELECT 1 FROM signals g WHERE g.execution_id = e.id \
                     AND g.handled_at IS NULL AND g.kind IN ('cancel', 'wake'))) THEN $20 ELSE c.wake_at END, \
             unknown_call = CASE WHEN c.state IS NULL THEN e.unknown_call ELSE c.unknown_call END, \
             owner_node = CASE WHEN c.release THEN NULL ELSE e.owner_node END, \
             lease_expires_at = CASE WHEN c.release THEN NULL ELSE e.lease_expires_at END, \
             updated_at = $20, output_record = COALESCE(c.output_record, e.output_record), reason = COALESCE(c.reason, e.reason), \
             input_step = CASE WHEN c.input_step IS NULL OR e.input_step >= c.input_step THEN e.input_step ELSE c.input_step END, \
             input_closed = CASE WHEN c.close_input THEN TRUE ELSE e.input_closed END \
         FROM c WHERE e.id = c.id AND e.generation = c.generation AND e.last_sequence = c.expected \
             AND e.state NOT IN ('completed', 'failed', 'cancelled', 'interrupted') \
             AND (SELECT count(*) FROM l) >= 0 \
         RETURNING e.id, e.last_sequence), \
     s AS (INSERT INTO sealed_records (id, execution_id, key_id, nonce, ciphertext, created_at) \
         SELECT r.id, r.execution_id, r.key_id, r.nonce, r.ciphertext, $20 \
         FROM UNNEST($21::uuid[], $22::uuid[], $23::text[], $24::bytea[], $25::bytea[]) \
             AS r(id, execution_id, key_id, nonce, ciphertext), u WHERE u.id = r.execution_id), \
     k AS (INSERT INTO calls (execution_id, step, slot, attempt, status, idempotency_key, result_record, \
             has_usage, input_tokens, output_tokens, cached_tokens, cost_micros, generation, late, created_at, updated_at) \
         SELECT k.execution_id, k.step, k.slot, k.attempt, k.status, k.idempotency_key, k.result_record, k.has_usage, \
             k.input_tokens, k.output_tokens, k.cached_tokens, k.cost_micros, k.generation, FALSE, $20, $20 \
         FROM UNNEST($26::uuid[], $27::bigint[], $28::integer[], $29::text[], $30::integer[], $31::text[], \
             $32::text[], $33::uuid[], $34::boolean[], $35::bigint[], $36::bigint[], $37::bigint[], $38::bigint[]) \
             AS k(execution_id, generation, step, slot, attempt, status, idempotency_key, result_record, has_usage, \
                 input_tokens, output_tokens, cached_tokens, cost_micros), u WHERE u.id = k.execution_id",
    call_upsert!(),
    "), \
     v AS (INSERT INTO events (execution_id, sequence, kind, payload, key_id, sealed, at) \
         SELECT v.execution_id, v.sequence, v.kind, $39, v.key_id, v.sealed, $20 \
         FROM UNNEST($40::uuid[], $41::bigint[], $42::text[], $43::text[], $44::bytea[]) \
             AS v(execution_id, sequence, kind, key_id, sealed), u WHERE u.id = v.execution_id) \
     SELECT id, last_sequence FROM u"
);

impl PostgresStore {
    /// Writes `commit` in one statement when this store wrote the execution last (its tip):
    /// with the commits of other executions waiting at the same time when it needs nothing but
    /// its rows, alone with the rest in one transaction otherwise. Gives the commit back, with
    /// nothing written, when there is no tip, the commit writes one call twice (one upsert
    /// cannot change a row twice) or its tip was stale: the caller then writes it the usual
    /// way, which finds out why.
    pub(crate) async fn commit_at_once_rows(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
    ) -> Result<Result<i64, Commit>, StoreError> {
        let Some(tip) = self.tips.get(id, generation) else {
            return Ok(Err(commit));
        };
        let calls = &commit.calls;
        if calls
            .iter()
            .enumerate()
            .any(|(i, call)| calls[..i].iter().any(|earlier| earlier.key == call.key))
        {
            return Ok(Err(commit));
        }
        if !Self::rest_is_empty(&commit, tip.has_parent) {
            return self.commit_alone(id, generation, commit, tip).await;
        }
        let job = RowsJob {
            id,
            generation,
            commit,
            tip,
        };
        match self
            .group
            .submit(job, |group| self.write_group(group))
            .await?
        {
            Written::At(last) => Ok(Ok(last)),
            Written::Stale(commit) => Ok(Err(*commit)),
        }
    }

    /// Writes one commit's rows in one statement and its rest after it, in one transaction.
    async fn commit_alone(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
        tip: Tip,
    ) -> Result<Result<i64, Commit>, StoreError> {
        let mut rows = Rows {
            now: now_ms(),
            ..Rows::default()
        };
        rows.push(self, id, generation, &commit, tip)?;
        let written: Result<Option<i64>, StoreError> = async {
            let mut tx = self.pool.begin().await?;
            let Some(row) = rows.query().fetch_optional(&mut *tx).await? else {
                tx.rollback().await?;
                return Ok(None);
            };
            let last: i64 = row.try_get("last_sequence")?;
            if let Err(err) =
                Self::commit_rest(&mut tx, &self.seal, id, &commit, tip.has_parent, rows.now).await
            {
                tx.rollback().await?;
                return Err(err);
            }
            tx.commit().await?;
            Ok(Some(last))
        }
        .await;
        match written {
            Ok(Some(last)) => {
                self.after_commit(id, generation, &commit, last, tip.has_parent);
                Ok(Ok(last))
            }
            Ok(None) => {
                self.tips.forget(id);
                Ok(Err(commit))
            }
            Err(err) => {
                self.tips.forget(id);
                Err(err)
            }
        }
    }

    /// Writes a group of commits in one statement and answers each: written, or given back when
    /// its tip was stale. An execution twice in a group (never from one owner, who waits for
    /// each commit) is given back the second time. If the database refuses the statement,
    /// nothing of it was written and every commit is given back, to be written alone; if the
    /// answer is lost, each commit hears a passing failure (its owner checks whether it landed).
    async fn write_group(&self, group: Vec<Pending<RowsJob, Written>>) {
        let mut rows = Rows {
            now: now_ms(),
            ..Rows::default()
        };
        let mut sent = Vec::with_capacity(group.len());
        for pending in group {
            let job = &pending.job;
            if sent
                .iter()
                .any(|other: &Pending<RowsJob, Written>| other.job.id == job.id)
            {
                let _ = pending
                    .answer
                    .send(Ok(Written::Stale(Box::new(pending.job.commit))));
                continue;
            }
            match rows.push(self, job.id, job.generation, &job.commit, job.tip) {
                Ok(()) => sent.push(pending),
                Err(err) => {
                    let _ = pending.answer.send(Err(err));
                }
            }
        }
        if sent.is_empty() {
            return;
        }
        let written = rows.query().fetch_all(&self.pool).await;
        let updated = written.and_then(|found| {
            found
                .iter()
                .map(|row| {
                    Ok((
                        row.try_get::<Uuid, _>("id")?,
                        row.try_get::<i64, _>("last_sequence")?,
                    ))
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
        });
        match updated {
            Ok(updated) => {
                for pending in sent {
                    let RowsJob {
                        id,
                        generation,
                        commit,
                        tip,
                    } = pending.job;
                    let last = updated
                        .iter()
                        .find(|(execution, _)| *execution == id.as_uuid())
                        .map(|(_, last)| *last);
                    let answer = match last {
                        Some(last) => {
                            self.after_commit(id, generation, &commit, last, tip.has_parent);
                            Written::At(last)
                        }
                        None => {
                            self.tips.forget(id);
                            Written::Stale(Box::new(commit))
                        }
                    };
                    let _ = pending.answer.send(Ok(answer));
                }
            }
            Err(sqlx::Error::Database(refused)) if sent.len() > 1 => {
                // Refused as a whole, so nothing landed: each commit is tried alone, where only
                // the one the database refuses fails.
                tracing::debug!(code = ?refused.code(), "a group of commits was refused; each goes alone");
                for pending in sent {
                    self.tips.forget(pending.job.id);
                    let _ = pending
                        .answer
                        .send(Ok(Written::Stale(Box::new(pending.job.commit))));
                }
            }
            Err(err) => {
                let message = err.to_string();
                let mut err = Some(err);
                for pending in sent {
                    self.tips.forget(pending.job.id);
                    let failure = err.take().unwrap_or_else(|| {
                        sqlx::Error::Protocol(format!("group commit: {message}"))
                    });
                    let _ = pending.answer.send(Err(failure.into()));
                }
            }
        }
    }
}
