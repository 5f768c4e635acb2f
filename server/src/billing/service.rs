//! The billing use cases: prices, credits and usage reports, with their rights. Every one
//! needs the owner or admin role and the `billing` right (read to see, write to change); a
//! Bot-limited token reads only the usage of its Bots' Chats and changes nothing.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use openbot_core::model::Pricing;
use openbot_schema::{
    Action, CreditBalance, CreditEntry, CreditKind, CreditLedgerPage, GrantCredits, ModelPrice,
    ModelPricePage, PriceSource, PutModelPrice, Resource, UsageGroup, UsagePage, UsageRow,
};
use uuid::Uuid;

use super::catalog::{CATALOG_DATE, catalog, catalog_price};
use super::store::{BillingStore, CreditsRow, LedgerRow, PriceRow, UsageQuery, UsageSums};
use crate::identity::{AccessError, Caller};
use crate::paging::Paging;
use crate::store::{StoreError, stored_time};

/// Rows a usage page or ledger page holds by default.
pub const DEFAULT_PAGE: u32 = 50;
/// The most rows a page holds.
pub const MAX_PAGE: u32 = 500;
/// The most rows a CSV export holds.
pub const MAX_EXPORT: u32 = 10_000;

/// Why a billing use case failed.
#[derive(Debug, thiserror::Error)]
pub enum BillingError {
    /// The caller lacks the right or the role.
    #[error(transparent)]
    Forbidden(#[from] AccessError),
    /// The input is not valid.
    #[error("{0}")]
    Invalid(String),
    /// What was named does not exist.
    #[error("{0} was not found")]
    NotFound(&'static str),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a usage report selects and how it groups.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageFilter {
    /// Calls sent at or after.
    pub from: Option<DateTime<Utc>>,
    /// Calls sent before.
    pub to: Option<DateTime<Utc>>,
    /// The grouping; by model when absent.
    pub group: Option<UsageGroup>,
    /// Only calls made by this Bot.
    pub bot: Option<Uuid>,
    /// Only calls for this Chat.
    pub chat: Option<Uuid>,
    /// Only calls of this member's work.
    pub member: Option<Uuid>,
    /// Only calls to this model spec.
    pub model: Option<String>,
}

/// The billing use cases over one store.
#[derive(Clone)]
pub struct Billing {
    store: Arc<dyn BillingStore>,
}

fn forbidden(action: &'static str) -> BillingError {
    BillingError::Forbidden(AccessError {
        action,
        resource: "usage and billing (it needs the owner or admin role)",
    })
}

fn price_view(row: &PriceRow) -> Result<ModelPrice, StoreError> {
    Ok(ModelPrice {
        model: row.model.clone(),
        input_micros_per_million: row.price.input_per_million,
        output_micros_per_million: row.price.output_per_million,
        cached_input_micros_per_million: row.price.cached_input_per_million,
        source: PriceSource::Organization,
        as_of: None,
        updated_at: Some(stored_time(row.updated_at)?),
    })
}

fn balance_view(row: CreditsRow) -> CreditBalance {
    CreditBalance {
        enabled: row.enabled,
        balance_micros: row.balance_micros,
        held_micros: row.held_micros,
        available_micros: row.balance_micros.saturating_sub(row.held_micros),
    }
}

fn entry_view(row: LedgerRow) -> Result<CreditEntry, StoreError> {
    Ok(CreditEntry {
        id: row.id,
        kind: match row.kind.as_str() {
            "grant" => CreditKind::Grant,
            "charge" => CreditKind::Charge,
            other => {
                return Err(StoreError::Invalid(format!(
                    "ledger entry {}: kind `{other}`",
                    row.id
                )));
            }
        },
        amount_micros: row.amount_micros,
        execution_id: row.execution_id.map(Into::into),
        call: row.call_key,
        member_id: row.member_id,
        note: row.note,
        created_at: stored_time(row.created_at)?,
    })
}

fn usage_view(row: UsageSums) -> UsageRow {
    let n = |v: i64| v.max(0) as u64;
    UsageRow {
        key: row.key,
        calls: n(row.calls),
        confirmed_calls: n(row.confirmed_calls),
        unknown_calls: n(row.unknown_calls),
        input_tokens: n(row.input_tokens),
        output_tokens: n(row.output_tokens),
        cached_input_tokens: n(row.cached_tokens),
        cost_micros: n(row.cost_micros),
        unknown_estimate_micros: n(row.unknown_estimate_micros),
    }
}

/// A CSV field: quoted when it holds a comma, a quote or a line break; a leading `=`, `+`,
/// `-` or `@` is prefixed with `'` so that a spreadsheet never runs it as a formula.
fn csv_field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text.to_string()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

impl Billing {
    /// The use cases on `store`.
    pub fn new(store: Arc<dyn BillingStore>) -> Self {
        Self { store }
    }

    fn check(caller: &Caller, action: Action) -> Result<(), BillingError> {
        caller.require(Resource::Billing, action)?;
        if !caller.is_admin() {
            return Err(forbidden(match action {
                Action::Read => "read",
                Action::Write => "change",
            }));
        }
        if action == Action::Write && caller.bot_ids.is_some() {
            return Err(BillingError::Forbidden(AccessError {
                action: "change",
                resource: "usage and billing (a Bot-limited token changes no prices or credits)",
            }));
        }
        Ok(())
    }

    /// One page of the prices in force for the caller's organization, by model spec
    /// (compared by bytes): its overrides, and the catalog's prices of the models it did not
    /// override. The page's position is the last model spec it holds.
    pub async fn prices(
        &self,
        caller: &Caller,
        paging: &Paging<String>,
    ) -> Result<ModelPricePage, BillingError> {
        Self::check(caller, Action::Read)?;
        let fetch = paging.fetch();
        let after = paging.after.as_deref();
        let own = self
            .store
            .prices(caller.member.organization_id, after, fetch)
            .await?;
        // When the overrides fill the read, every override up to the last one read is known,
        // and the page ends at or before it: catalog entries past it wait for a later page
        // (one of them may be overridden by an override not read yet).
        let bound = (own.len() as i64 >= fetch)
            .then(|| own.last().map(|row| row.model.clone()))
            .flatten();
        let mut all = own
            .iter()
            .map(price_view)
            .collect::<Result<Vec<ModelPrice>, _>>()?;
        for (model, price) in catalog() {
            let after_cursor = after.is_none_or(|after| model.as_str() > after);
            let within = bound.as_deref().is_none_or(|bound| model.as_str() <= bound);
            if after_cursor && within && own.iter().all(|row| row.model != model) {
                all.push(ModelPrice {
                    model,
                    input_micros_per_million: price.input_per_million,
                    output_micros_per_million: price.output_per_million,
                    cached_input_micros_per_million: price.cached_input_per_million,
                    source: PriceSource::Catalog,
                    as_of: Some(CATALOG_DATE.to_string()),
                    updated_at: None,
                });
            }
        }
        all.sort_by(|a, b| a.model.cmp(&b.model));
        Ok(paging.page(all, |price| price.model.clone(), |price| price))
    }

    /// Sets the organization's price for a model: calls sent from now on are priced with it
    /// (a call already sent keeps the price saved with its reservation).
    pub async fn put_price(
        &self,
        caller: &Caller,
        request: PutModelPrice,
    ) -> Result<ModelPrice, BillingError> {
        Self::check(caller, Action::Write)?;
        let model = checked_model(&request.model)?;
        let limit = i64::MAX as u64 / 100_000_000;
        let price = Pricing {
            input_per_million: request.input_micros_per_million,
            output_per_million: request.output_micros_per_million,
            cached_input_per_million: request
                .cached_input_micros_per_million
                .unwrap_or(request.input_micros_per_million),
        };
        if [
            price.input_per_million,
            price.output_per_million,
            price.cached_input_per_million,
        ]
        .iter()
        .any(|p| *p > limit)
        {
            return Err(BillingError::Invalid(format!(
                "a price may be at most {limit} millionths of a dollar per million tokens"
            )));
        }
        let row = self
            .store
            .put_price(caller.member.organization_id, model, price)
            .await?;
        Ok(price_view(&row)?)
    }

    /// Removes the organization's price for a model: the catalog's applies again (or none).
    pub async fn delete_price(&self, caller: &Caller, model: &str) -> Result<(), BillingError> {
        Self::check(caller, Action::Write)?;
        let model = checked_model(model)?;
        if self
            .store
            .delete_price(caller.member.organization_id, model)
            .await?
        {
            Ok(())
        } else {
            Err(BillingError::NotFound("price"))
        }
    }

    /// The organization's credits.
    pub async fn credits(&self, caller: &Caller) -> Result<CreditBalance, BillingError> {
        Self::check(caller, Action::Read)?;
        if caller.bot_ids.is_some() {
            return Err(forbidden("read the credits of"));
        }
        Ok(balance_view(
            self.store.credits(caller.member.organization_id).await?,
        ))
    }

    /// Grants credits to the caller's organization, as the caller; the first grant puts the
    /// organization on credits (its model calls are then refused when credits run out).
    pub async fn grant(
        &self,
        caller: &Caller,
        request: GrantCredits,
    ) -> Result<CreditBalance, BillingError> {
        Self::check(caller, Action::Write)?;
        let amount = i64::try_from(request.amount_micros)
            .ok()
            .filter(|a| (1..=MAX_GRANT_MICROS).contains(a))
            .ok_or_else(|| {
                BillingError::Invalid(format!(
                    "amount_micros must be from 1 to {MAX_GRANT_MICROS}"
                ))
            })?;
        // The balance stays far from the database's integer limit (a sum past it is a fault).
        let balance = self
            .store
            .credits(caller.member.organization_id)
            .await?
            .balance_micros;
        if balance.saturating_add(amount) > MAX_BALANCE_MICROS {
            return Err(BillingError::Invalid(format!(
                "the balance may be at most {MAX_BALANCE_MICROS} micros"
            )));
        }
        if request
            .note
            .as_ref()
            .is_some_and(|n| n.chars().count() > 500)
        {
            return Err(BillingError::Invalid(
                "note must be at most 500 characters".into(),
            ));
        }
        let row = self
            .store
            .grant_credits(
                caller.member.organization_id,
                amount,
                Some(caller.member.member_id),
                request.note.as_deref(),
            )
            .await?;
        Ok(balance_view(row))
    }

    /// The organization's ledger, newest first, a page of `limit` after `cursor`.
    pub async fn ledger(
        &self,
        caller: &Caller,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<CreditLedgerPage, BillingError> {
        Self::check(caller, Action::Read)?;
        if caller.bot_ids.is_some() {
            return Err(forbidden("read the credits of"));
        }
        let limit = page_limit(limit)?;
        let before = cursor
            .map(str::parse::<Uuid>)
            .transpose()
            .map_err(|_| bad_cursor())?;
        let mut rows = self
            .store
            .ledger(caller.member.organization_id, before, i64::from(limit) + 1)
            .await?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next_cursor = more
            .then(|| rows.last().map(|row| row.id.to_string()))
            .flatten();
        Ok(CreditLedgerPage {
            items: rows.into_iter().map(entry_view).collect::<Result<_, _>>()?,
            next_cursor,
        })
    }

    fn query(caller: &Caller, filter: &UsageFilter) -> Result<UsageQuery, BillingError> {
        if let (Some(from), Some(to)) = (filter.from, filter.to)
            && from >= to
        {
            return Err(BillingError::Invalid("from must be before to".into()));
        }
        if let Some(model) = &filter.model {
            checked_model(model)?;
        }
        Ok(UsageQuery {
            organization: caller.member.organization_id,
            from: filter.from.map(|t| t.timestamp_millis()),
            to: filter.to.map(|t| t.timestamp_millis()),
            group: filter.group.unwrap_or(UsageGroup::Model),
            bot_limit: crate::bots::bot_limit(caller),
            bot: filter.bot,
            chat: filter.chat,
            member: filter.member,
            model: filter.model.clone(),
            after: None,
            limit: 0,
        })
    }

    /// Usage and cost of the model calls `filter` selects, one row per group, by key, a page
    /// of `limit` after `cursor`. Only confirmed usage counts as cost; calls with unknown usage
    /// are counted apart with their estimates.
    pub async fn usage(
        &self,
        caller: &Caller,
        filter: &UsageFilter,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<UsagePage, BillingError> {
        Self::check(caller, Action::Read)?;
        let limit = page_limit(limit)?;
        let mut query = Self::query(caller, filter)?;
        if let Some(cursor) = cursor {
            if (query.group != UsageGroup::Model && cursor.parse::<Uuid>().is_err())
                || cursor.chars().any(char::is_control)
            {
                return Err(bad_cursor());
            }
            query.after = Some(cursor.to_string());
        }
        query.limit = i64::from(limit) + 1;
        let mut rows = self.store.usage_report(&query).await?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next_cursor = more
            .then(|| rows.last().and_then(|r| r.key.clone()))
            .flatten();
        Ok(UsagePage {
            items: rows.into_iter().map(usage_view).collect(),
            next_cursor,
        })
    }

    /// The same report as CSV (a header line, then one line per group), at most
    /// `MAX_EXPORT` groups.
    pub async fn usage_csv(
        &self,
        caller: &Caller,
        filter: &UsageFilter,
    ) -> Result<String, BillingError> {
        Self::check(caller, Action::Read)?;
        let mut query = Self::query(caller, filter)?;
        query.limit = i64::from(MAX_EXPORT);
        let rows = self.store.usage_report(&query).await?;
        let mut out = format!(
            "{},calls,confirmed_calls,unknown_calls,input_tokens,output_tokens,cached_input_tokens,cost_micros,unknown_estimate_micros\n",
            query.group.as_str()
        );
        for row in rows.into_iter().map(usage_view) {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{}\n",
                csv_field(row.key.as_deref().unwrap_or("")),
                row.calls,
                row.confirmed_calls,
                row.unknown_calls,
                row.input_tokens,
                row.output_tokens,
                row.cached_input_tokens,
                row.cost_micros,
                row.unknown_estimate_micros
            ));
        }
        Ok(out)
    }

    /// The catalog price of a model spec (for a call with no reservation).
    pub fn catalog_price(spec: &str) -> Option<Pricing> {
        catalog_price(spec)
    }
}

fn page_limit(limit: Option<u32>) -> Result<u32, BillingError> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(BillingError::Invalid(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    Ok(limit)
}

fn bad_cursor() -> BillingError {
    BillingError::Invalid("cursor must be a `next_cursor` of this list".into())
}

/// The most one grant adds: one million US dollars, in millionths.
const MAX_GRANT_MICROS: i64 = 1_000_000_000_000;
/// The most credits an organization holds: a billion US dollars, in millionths.
const MAX_BALANCE_MICROS: i64 = 1_000_000_000_000_000;

/// A model spec as prices name it: 1-500 characters, no control characters (a NUL cannot be
/// stored, and no spec has one), surrounding spaces trimmed.
fn checked_model(model: &str) -> Result<&str, BillingError> {
    let model = model.trim();
    if model.is_empty() || model.chars().count() > 500 || model.chars().any(char::is_control) {
        return Err(BillingError::Invalid(
            "model must be a model spec of 1-500 characters without control characters".into(),
        ));
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn csv_fields_are_quoted_and_never_formulas() {
        assert_eq!(csv_field("openai:gpt-4o"), "openai:gpt-4o");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
    }
}
