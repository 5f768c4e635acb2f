//! SQL text the shared code (`sql/engine.rs`) and a backend's own file both send: written once
//! here. PostgreSQL's commits in one statement (`pg_commits.rs`) update the execution's row
//! with the same `SET` as `commit_update!`, written for a row of values instead of parameters;
//! the conformance suite runs every commit behaviour on both paths.

/// A commit's update of its execution's row, checked against the owner's generation and an
/// unended state; `$1` the execution, `$2` the generation, `$3`-`$19` as
/// `bind_commit_update!` binds them. The caller adds its `RETURNING`. Keep it in step with
/// `COMMITS_AT_ONCE` (`pg_commits.rs`).
macro_rules! commit_update {
    () => {
        "UPDATE executions SET last_sequence = last_sequence + $3, \
             input_tokens = input_tokens + $4, output_tokens = output_tokens + $5, cached_tokens = cached_tokens + $6, \
             cost_micros = CASE WHEN CAST($7 AS BIGINT) IS NULL THEN cost_micros ELSE COALESCE(cost_micros, 0) + $7 END, \
             state = COALESCE($8, state), outcome = COALESCE($9, outcome), \
             failure_category = COALESCE($10, failure_category), error_id = COALESCE($11, error_id), \
             wake_at = CASE WHEN $8 IS NULL THEN wake_at \
                 WHEN $8 = 'waiting' AND (wake_at IS NOT NULL OR EXISTS (SELECT 1 FROM signals g WHERE g.execution_id = $1 \
                     AND g.handled_at IS NULL AND g.kind IN ('cancel', 'wake'))) THEN $15 ELSE $12 END, \
             unknown_call = CASE WHEN $8 IS NULL THEN unknown_call ELSE $13 END, \
             owner_node = CASE WHEN $14 THEN NULL ELSE owner_node END, \
             lease_expires_at = CASE WHEN $14 THEN NULL ELSE lease_expires_at END, \
             updated_at = $15, output_record = COALESCE($16, output_record), reason = COALESCE($17, reason), \
             input_step = CASE WHEN CAST($18 AS INTEGER) IS NULL OR input_step >= $18 THEN input_step ELSE $18 END, \
             input_closed = CASE WHEN $19 THEN TRUE ELSE input_closed END \
         WHERE id = $1 AND generation = $2 AND state NOT IN ('completed', 'failed', 'cancelled', 'interrupted')"
    };
}

/// Binds `$1`-`$19` of `commit_update!` for `commit` of execution `id` at `generation`, `now`.
macro_rules! bind_commit_update {
    ($query:expr, $id:expr, $generation:expr, $commit:expr, $now:expr) => {{
        let commit: &$crate::store::Commit = $commit;
        let usage = commit.usage.unwrap_or_default();
        let state = commit.state.as_ref();
        let failure = state.and_then(|s| s.failure.as_ref());
        $query
            .bind($id.as_uuid())
            .bind($generation)
            .bind(commit.events.len() as i64)
            .bind(usage.input_tokens as i64)
            .bind(usage.output_tokens as i64)
            .bind(usage.cached_input_tokens as i64)
            .bind(commit.usage.and_then(|u| u.cost_micros).map(|c| c as i64))
            .bind(state.map(|s| s.state.as_str()))
            .bind(
                state
                    .and_then(|s| s.outcome)
                    .map($crate::store::records::outcome_name),
            )
            .bind(failure.map(|(category, _)| $crate::store::records::category_name(*category)))
            .bind(failure.map(|(_, blob)| blob.id))
            .bind(state.and_then(|s| s.wake_at))
            .bind(
                state
                    .and_then(|s| s.unknown_call.as_ref())
                    .map($crate::store::records::call_key_name),
            )
            .bind(state.is_some_and(|s| s.release))
            .bind($now)
            .bind(state.and_then(|s| s.output.as_ref()).map(|blob| blob.id))
            .bind(state.and_then(|s| s.reason.as_deref()))
            .bind(commit.input_step.map(|step| step as i32))
            .bind(commit.close_input)
    }};
}

/// How a call-log write meets the row of its call (`execution_id, step, slot, attempt`): it
/// changes it unless the call is done.
macro_rules! call_upsert {
    () => {
        " ON CONFLICT (execution_id, step, slot, attempt) DO UPDATE SET \
             status = EXCLUDED.status, result_record = EXCLUDED.result_record, has_usage = EXCLUDED.has_usage, \
             input_tokens = EXCLUDED.input_tokens, output_tokens = EXCLUDED.output_tokens, \
             cached_tokens = EXCLUDED.cached_tokens, cost_micros = EXCLUDED.cost_micros, \
             generation = EXCLUDED.generation, late = EXCLUDED.late, updated_at = EXCLUDED.updated_at \
         WHERE calls.status <> 'done'"
    };
}

pub(crate) use {bind_commit_update, call_upsert, commit_update};
