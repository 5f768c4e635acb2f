//! Listing a paged list: `--limit`, `--cursor` and `--all` on every list command, the page
//! object with `--json`, and the next cursor on a line `next: <cursor>` for people.

use clap::Args;
use openbot_core::RemoteClient;
use openbot_schema::{Page, PageQuery};

use super::Output;

/// Which page to list.
#[derive(Debug, Clone, Args)]
pub struct PageArgs {
    /// How many a page holds (1-200, default 50).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Start after this cursor (the `next:` of the page before).
    #[arg(long, conflicts_with = "all")]
    pub cursor: Option<String>,
    /// Follow the cursors and list everything, as one page.
    #[arg(long)]
    pub all: bool,
}

/// Lists the page `args` asks for of the list at `path` (which may hold a filter), or with
/// `--all` every item as one page. People see a line per item (`empty` when there is none)
/// and `next: <cursor>` when another page follows.
pub async fn list<P: Page>(
    client: &RemoteClient,
    path: &str,
    args: &PageArgs,
    output: Output,
    line: impl Fn(&P::Item) -> String,
    empty: &str,
) -> anyhow::Result<()> {
    let query = PageQuery {
        limit: args.limit,
        cursor: args.cursor.clone(),
    };
    let page: P = if args.all {
        let mut query = query;
        let mut items = Vec::new();
        loop {
            let (mut got, next) = client.page::<P>(path, &query).await?.into_parts();
            items.append(&mut got);
            match next {
                Some(cursor) => query.cursor = Some(cursor),
                None => break P::new(items, None),
            }
        }
    } else {
        client.page(path, &query).await?
    };
    output.print(&page, |page| text(page, &line, empty))
}

/// A page for people: a line per item, then the next cursor.
pub fn text<P: Page>(page: &P, line: impl Fn(&P::Item) -> String, empty: &str) -> String {
    let mut lines: Vec<String> = page.items().iter().map(line).collect();
    if lines.is_empty() {
        lines.push(empty.to_string());
    }
    if let Some(cursor) = page.next_cursor() {
        lines.push(format!("next: {cursor}"));
    }
    lines.join("\n")
}
