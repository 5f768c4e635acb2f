//! The operations the in-memory Client answers beyond those the [`Client`](crate::Client)
//! trait declares: the HTTP and delegate tool registry and files, by the server's operation
//! IDs, parameters and answer shapes, so the generated SDK methods work unchanged in both
//! modes. Every other operation needs a server.

use std::fmt::Display;
use std::str::FromStr;

use openbot_schema::{DEFAULT_PAGE_LIMIT, FileId, MAX_PAGE_LIMIT, PutDelegateTool, PutHttpTool};
use serde::Serialize;

use super::MemoryClient;
use crate::client::api::{ApiAnswer, ApiBody, ApiRequest, Operation, fill_path};
use crate::error::Error;

impl MemoryClient {
    /// Answers `op` when memory has it (the table's [`Operation::memory`], declared in
    /// scripts/sdkgen/spec.py); `None` otherwise.
    pub(super) fn memory_operation(
        &self,
        op: &Operation,
        request: &ApiRequest,
    ) -> Option<Result<ApiAnswer, Error>> {
        if !op.memory {
            return None;
        }
        Some(self.answer(op, request))
    }

    fn answer(&self, op: &Operation, request: &ApiRequest) -> Result<ApiAnswer, Error> {
        // The same parameter checks as a request to a server: every path parameter given, no
        // parameter the operation lacks.
        fill_path(op, request)?;
        let id = op.id;
        let name = || request.text(id, "name");
        let file = || parse::<FileId>(request, id, "id");
        match id {
            "list_tools" => keyset_page(
                self.tools()?.into_iter().map(|t| (t.name.clone(), t)),
                Order::Ascending,
                request,
                id,
            ),
            "put_tool" => {
                ApiAnswer::of(&self.put_tool(&name()?, request.body_as::<PutHttpTool>(id)?)?)
            }
            "delete_tool" => self.delete_tool(&name()?).map(|()| ApiAnswer::Empty),
            "list_delegates" => keyset_page(
                self.delegates()?.into_iter().map(|d| (d.name.clone(), d)),
                Order::Ascending,
                request,
                id,
            ),
            "put_delegate" => ApiAnswer::of(
                &self.put_delegate(&name()?, request.body_as::<PutDelegateTool>(id)?)?,
            ),
            "delete_delegate" => self.delete_delegate(&name()?).map(|()| ApiAnswer::Empty),
            "list_files" => keyset_page(self.files()?, Order::Descending, request, id),
            "upload_file" => match &request.body {
                Some(ApiBody::Bytes { data, content_type }) => {
                    ApiAnswer::of(&self.upload_file(&name()?, content_type, data.clone())?)
                }
                Some(ApiBody::Json(_)) => Err(Error::invalid_input(format!(
                    "{id} takes the file's bytes, not JSON"
                ))),
                None => Err(Error::invalid_input(format!("{id} needs the file's bytes"))),
            },
            "get_file" => ApiAnswer::of(&self.get_file(file()?)?),
            "delete_file" => self.delete_file(file()?).map(|()| ApiAnswer::Empty),
            "file_content" => Ok(ApiAnswer::Bytes(self.file_content(file()?)?)),
            other => Err(crate::client::api::server_only(other)),
        }
    }
}

/// The order of a list by its keys.
#[derive(Clone, Copy)]
enum Order {
    Ascending,
    Descending,
}

/// A page of a list given in its order with each item's key, as a server pages it: a keyset
/// after the cursor's key (so items added or removed while a reader pages never shift a page),
/// `limit` 1-200 (default 50), `{items, next_cursor}`.
fn keyset_page<K, T>(
    items: impl IntoIterator<Item = (K, T)>,
    order: Order,
    request: &ApiRequest,
    op: &str,
) -> Result<ApiAnswer, Error>
where
    K: Ord + Display + FromStr,
    T: Serialize,
{
    let limit: u32 = request.decoded(op, "limit")?.unwrap_or(DEFAULT_PAGE_LIMIT);
    if !(1..=MAX_PAGE_LIMIT).contains(&limit) {
        return Err(Error::invalid_input(format!(
            "limit must be between 1 and {MAX_PAGE_LIMIT}"
        )));
    }
    let after = match request.decoded::<String>(op, "cursor")? {
        None => None,
        Some(cursor) => Some(
            cursor
                .strip_prefix("after:")
                .and_then(|key| key.parse::<K>().ok())
                .ok_or_else(|| {
                    Error::invalid_input("cursor must be a `next_cursor` of this list")
                })?,
        ),
    };
    let mut rest = items.into_iter().filter(|(key, _)| match (&after, order) {
        (None, _) => true,
        (Some(after), Order::Ascending) => key > after,
        (Some(after), Order::Descending) => key < after,
    });
    let page: Vec<(K, T)> = rest.by_ref().take(limit as usize).collect();
    let more = rest.next().is_some();
    let next_cursor = match (more, page.last()) {
        (true, Some((key, _))) => Some(format!("after:{key}")),
        _ => None,
    };
    let items: Vec<T> = page.into_iter().map(|(_, item)| item).collect();
    let mut answer = serde_json::json!({ "items": items });
    if let Some(cursor) = next_cursor {
        answer["next_cursor"] = serde_json::Value::String(cursor);
    }
    Ok(ApiAnswer::Json(answer))
}

fn parse<T: FromStr>(request: &ApiRequest, op: &str, name: &str) -> Result<T, Error> {
    let text = request.text(op, name)?;
    T::from_str(&text).map_err(|_| {
        Error::invalid_input(format!(
            "`{}` is not a valid `{name}` for {op}",
            text.chars().take(64).collect::<String>()
        ))
    })
}
