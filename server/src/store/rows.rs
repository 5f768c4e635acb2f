//! Reading rows into records; shared by both backends through macros, since their row types
//! differ only in the database they decode from.

/// The columns of `executions` that `execution_from_row!` reads.
macro_rules! execution_columns {
    () => {
        "id, kind, state, generation, owner_node, lease_expires_at, \
     scope, parent_id, chat_id, input_record, output_record, outcome, failure_category, error_id, input_tokens, \
     output_tokens, cached_tokens, cost_micros, last_sequence, wake_at, unknown_call, created_at, updated_at, \
     paused_at, paused_ms, reason"
    };
}

/// The columns of `calls` that `call_from_row!` reads.
macro_rules! call_columns {
    () => {
        "step, slot, attempt, status, idempotency_key, result_record, input_tokens, output_tokens, \
     cached_tokens, cost_micros, has_usage, generation, late"
    };
}

macro_rules! execution_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        use $crate::store::StoreError;
        use $crate::store::records::*;
        let row = $row;
        let invalid = |what: &str| StoreError::Invalid(format!("execution row: bad {what}"));
        let state: String = row.try_get("state")?;
        let scope: String = row.try_get("scope")?;
        let outcome: Option<String> = row.try_get("outcome")?;
        let category: Option<String> = row.try_get("failure_category")?;
        let unknown: Option<String> = row.try_get("unknown_call")?;
        let id: uuid::Uuid = row.try_get("id")?;
        let parent: Option<uuid::Uuid> = row.try_get("parent_id")?;
        let cost: Option<i64> = row.try_get("cost_micros")?;
        Ok::<ExecutionRow, StoreError>(ExecutionRow {
            id: id.into(),
            kind: row.try_get("kind")?,
            state: parse_state(&state).ok_or_else(|| invalid("state"))?,
            generation: row.try_get("generation")?,
            owner_node: row.try_get("owner_node")?,
            lease_expires_at: row.try_get("lease_expires_at")?,
            scope: Scope::from_stored(&scope).ok_or_else(|| invalid("scope"))?,
            parent_id: parent.map(Into::into),
            chat_id: row.try_get("chat_id")?,
            input_record: row.try_get("input_record")?,
            output_record: row.try_get("output_record")?,
            outcome: match outcome {
                Some(text) => Some(parse_outcome(&text).ok_or_else(|| invalid("outcome"))?),
                None => None,
            },
            failure_category: match category {
                Some(text) => Some(parse_category(&text).ok_or_else(|| invalid("category"))?),
                None => None,
            },
            error_id: row.try_get("error_id")?,
            usage: openbot_schema::Usage {
                input_tokens: row.try_get::<i64, _>("input_tokens")?.max(0) as u64,
                output_tokens: row.try_get::<i64, _>("output_tokens")?.max(0) as u64,
                cached_input_tokens: row.try_get::<i64, _>("cached_tokens")?.max(0) as u64,
                cost_micros: cost.map(|c| c.max(0) as u64),
            },
            last_sequence: row.try_get("last_sequence")?,
            wake_at: row.try_get("wake_at")?,
            unknown_call: match unknown {
                Some(text) => Some(parse_call_key(&text).ok_or_else(|| invalid("unknown call"))?),
                None => None,
            },
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            paused_at: row.try_get("paused_at")?,
            paused_ms: row.try_get("paused_ms")?,
            reason: row.try_get("reason")?,
        })
    }};
}

macro_rules! call_from_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        use $crate::store::StoreError;
        use $crate::store::records::*;
        let row = $row;
        let slot: String = row.try_get("slot")?;
        let status: String = row.try_get("status")?;
        let has_usage: bool = row.try_get("has_usage")?;
        let cost: Option<i64> = row.try_get("cost_micros")?;
        let step: i32 = row.try_get("step")?;
        let attempt: i32 = row.try_get("attempt")?;
        Ok::<CallRow, StoreError>(CallRow {
            key: openbot_core::turn::CallKey {
                step: u32::try_from(step).map_err(|_| StoreError::Invalid("call step".into()))?,
                slot: parse_slot(&slot).ok_or_else(|| StoreError::Invalid("call slot".into()))?,
                attempt: u32::try_from(attempt)
                    .map_err(|_| StoreError::Invalid("call attempt".into()))?,
            },
            phase: CallPhase::parse(&status)
                .ok_or_else(|| StoreError::Invalid("call status".into()))?,
            idempotency_key: row.try_get("idempotency_key")?,
            result_record: row.try_get("result_record")?,
            usage: has_usage
                .then(|| -> Result<openbot_schema::Usage, sqlx::Error> {
                    Ok(openbot_schema::Usage {
                        input_tokens: row.try_get::<i64, _>("input_tokens")?.max(0) as u64,
                        output_tokens: row.try_get::<i64, _>("output_tokens")?.max(0) as u64,
                        cached_input_tokens: row.try_get::<i64, _>("cached_tokens")?.max(0) as u64,
                        cost_micros: cost.map(|c| c.max(0) as u64),
                    })
                })
                .transpose()?,
            generation: row.try_get("generation")?,
            late: row.try_get("late")?,
        })
    }};
}

/// Reads an event row (`sequence, payload, key_id, sealed, at`) and opens its payload.
macro_rules! event_from_row {
    ($row:expr, $execution:expr, $seal:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let stored = $crate::store::sealing::stored_from_row!(row, "payload")?;
        $seal.open_event(
            $execution,
            row.try_get::<i64, _>("sequence")?,
            row.try_get::<i64, _>("at")?,
            stored,
        )
    }};
}

pub(crate) use {
    call_columns, call_from_row, event_from_row, execution_columns, execution_from_row,
};
