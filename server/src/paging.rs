//! Keyset paging of every list: a checked [`PageQuery`] becomes a [`Paging`] (the page's size
//! and the position after which it starts), the store reads `limit + 1` rows after that
//! position in SQL, and [`Paging::finish`] cuts the extra row off and turns the last row's
//! position into the next cursor.
//!
//! A cursor is the base64url text of the position's JSON (for example `[created_at, id]`), a
//! keyset and never an offset: rows added while a reader pages never shift what the next page
//! holds. It is opaque to callers; one that does not decode to the list's position is refused.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openbot_schema::{DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, Page, PageQuery};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why a page query was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// The limit is outside 1..=[`MAX_PAGE_LIMIT`].
    #[error("limit must be between 1 and {MAX_PAGE_LIMIT}")]
    Limit,
    /// The cursor is not a `next_cursor` of this list.
    #[error("cursor must be a `next_cursor` of this list")]
    Cursor,
}

/// A checked page request of a list whose rows are ordered by the position `K`.
#[derive(Debug, Clone, PartialEq)]
pub struct Paging<K> {
    /// How many rows the page holds (1..=[`MAX_PAGE_LIMIT`]).
    pub limit: u32,
    /// The position of the last row of the page before; `None` for the first page.
    pub after: Option<K>,
}

impl<K: Serialize + DeserializeOwned> Paging<K> {
    /// Checks `query`: the limit (default [`DEFAULT_PAGE_LIMIT`]) and the cursor.
    pub fn parse(query: &PageQuery) -> Result<Self, PageError> {
        let limit = query.limit.unwrap_or(DEFAULT_PAGE_LIMIT);
        if limit == 0 || limit > MAX_PAGE_LIMIT {
            return Err(PageError::Limit);
        }
        let after = query.cursor.as_deref().map(decode).transpose()?;
        Ok(Self { limit, after })
    }

    /// The first page of `limit` rows (for callers inside the server).
    pub fn first(limit: u32) -> Self {
        Self { limit, after: None }
    }

    /// How many rows the store reads: one more than the page, to know whether more follow.
    pub fn fetch(&self) -> i64 {
        i64::from(self.limit) + 1
    }

    /// Cuts `rows` (read with [`Paging::fetch`]) to the page and names the next page's cursor
    /// by the position of its last row, when more rows follow.
    pub fn finish<R>(
        &self,
        mut rows: Vec<R>,
        position: impl Fn(&R) -> K,
    ) -> (Vec<R>, Option<String>) {
        let more = rows.len() > self.limit as usize;
        rows.truncate(self.limit as usize);
        let next = if more {
            rows.last().map(|row| encode(&position(row)))
        } else {
            None
        };
        (rows, next)
    }

    /// [`Paging::finish`], then each row turned into its item, as the list's page type.
    pub fn page<R, P: Page>(
        &self,
        rows: Vec<R>,
        position: impl Fn(&R) -> K,
        item: impl FnMut(R) -> P::Item,
    ) -> P {
        let (rows, next) = self.finish(rows, position);
        P::new(rows.into_iter().map(item).collect(), next)
    }

    /// [`Paging::page`] with an item view that can fail (a damaged row): the first failure
    /// is the answer, never a page missing a row.
    pub fn try_page<R, P: Page, E>(
        &self,
        rows: Vec<R>,
        position: impl Fn(&R) -> K,
        item: impl FnMut(R) -> Result<P::Item, E>,
    ) -> Result<P, E> {
        let (rows, next) = self.finish(rows, position);
        Ok(P::new(
            rows.into_iter().map(item).collect::<Result<_, E>>()?,
            next,
        ))
    }
}

/// The cursor of a position.
pub fn encode<K: Serialize>(position: &K) -> String {
    // A position is plain data (numbers, text, UUIDs): it always serializes.
    let json = serde_json::to_vec(position).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// The position of a cursor.
pub fn decode<K: DeserializeOwned>(cursor: &str) -> Result<K, PageError> {
    let json = URL_SAFE_NO_PAD
        .decode(cursor.as_bytes())
        .map_err(|_| PageError::Cursor)?;
    serde_json::from_slice(&json).map_err(|_| PageError::Cursor)
}

/// The position of a row in a list ordered by creation: its creation time (milliseconds) and
/// its ID, which breaks ties.
pub type CreatedPosition = (i64, uuid::Uuid);

/// The nil UUID: before every UUID, the position of a first page in ascending lists.
pub const FIRST_ID: uuid::Uuid = uuid::Uuid::nil();

/// The largest UUID: after every UUID, the position of a first page in descending lists.
pub const LAST_ID: uuid::Uuid = uuid::Uuid::max();

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    type Position = (i64, Uuid);

    #[test]
    fn a_cursor_reads_back_its_position() {
        let position: Position = (1234, Uuid::now_v7());
        assert_eq!(decode::<Position>(&encode(&position)), Ok(position));
    }

    #[test]
    fn a_limit_outside_the_range_is_refused() {
        for limit in [0, MAX_PAGE_LIMIT + 1] {
            assert_eq!(
                Paging::<Position>::parse(&PageQuery::first(limit)),
                Err(PageError::Limit)
            );
        }
        assert_eq!(
            Paging::<Position>::parse(&PageQuery::default()).map(|p| p.limit),
            Ok(DEFAULT_PAGE_LIMIT)
        );
    }

    #[test]
    fn a_cursor_of_another_shape_is_refused() {
        let other = encode(&"name");
        for cursor in ["not base64!", other.as_str()] {
            let query = PageQuery {
                limit: None,
                cursor: Some(cursor.into()),
            };
            assert_eq!(Paging::<Position>::parse(&query), Err(PageError::Cursor));
        }
    }

    #[test]
    fn finish_cuts_the_extra_row_and_names_the_last_position() {
        let paging = Paging::<i64>::first(2);
        let (rows, next) = paging.finish(vec![1, 2, 3], |row| *row);
        assert_eq!(rows, vec![1, 2]);
        assert_eq!(next.as_deref().map(decode::<i64>), Some(Ok(2)));
        let (rows, next) = paging.finish(vec![1, 2], |row| *row);
        assert_eq!((rows, next), (vec![1, 2], None));
    }
}
