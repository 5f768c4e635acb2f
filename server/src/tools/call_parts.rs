//! An HTTP tool's headers and body fields ([`CallTemplate`]), with their Vault references
//! opened at the send and for it only: the values go into the request and nowhere else (not
//! the call's events, its result, an error or a log line). A missing item, field or rule is a
//! tool error naming the item ID and field, and nothing is sent. A Code Mode program's call
//! may carry references in its arguments' strings too; they open the same way, with a rule
//! for the Bot's Code Mode runs besides the Bot's and the tool's.

use async_trait::async_trait;
use openbot_core::tool::{PreparedCall, RequestParts, ToolError};
use openbot_schema::BotId;
use serde_json::Value;

use std::collections::{BTreeMap, BTreeSet};

use super::{CallTemplate, argument_references, render_arguments};
use crate::vaults::{OpenError, ReaderPath, Through, VaultOpener, VaultRef};

/// Where an HTTP tool's Vault references are opened, and as whom: the Turn's organization,
/// member and Bot (the tool's own name and URL complete the reader path).
#[derive(Debug, Clone)]
pub struct ToolVault {
    /// Checks the rules and opens the fields at each send.
    pub opener: VaultOpener,
    /// The Turn's organization.
    pub organization: uuid::Uuid,
    /// The member the Turn is for.
    pub member: uuid::Uuid,
    /// The Turn's Bot.
    pub bot: BotId,
}

impl ToolVault {
    /// Opens `refs` for one request sent `through` an HTTP tool or an App connection, as
    /// this Turn's member and Bot: the item, the field and both rules are read again now. A
    /// refusal is a tool error naming the item ID and field, never a value. With `from_code`
    /// the references came from a Code Mode program's arguments (a third rule is needed).
    pub async fn open(
        &self,
        refs: &BTreeSet<VaultRef>,
        through: Through,
        from_code: bool,
    ) -> Result<BTreeMap<VaultRef, String>, ToolError> {
        let path = ReaderPath {
            organization: self.organization,
            member: self.member,
            bot: Some(self.bot),
            through,
        };
        self.opener
            .open(refs, &path, from_code)
            .await
            .map_err(tool_error)
    }
}

/// A refusal as the model reads it; a storage failure is logged (it holds no value) and
/// read as a plain "could not be read".
pub fn tool_error(err: OpenError) -> ToolError {
    match err {
        OpenError::Refused(why) => ToolError::new(why),
        OpenError::Store(err) => {
            tracing::warn!(error = %err, "Vault fields could not be read");
            ToolError::new("the Vault could not be read; the call was not sent")
        }
    }
}

/// The [`RequestParts`] of a registered tool with a call template.
pub struct TemplateParts {
    /// The tool's headers and body fields.
    pub template: CallTemplate,
    /// Where its references open; without one, a reference is a tool error.
    pub vault: Option<ToolVault>,
    /// The tool's URL, part of a rule's reader path.
    pub url: String,
}

impl TemplateParts {
    async fn open(
        &self,
        tool: &str,
        refs: &BTreeSet<VaultRef>,
        from_code: bool,
    ) -> Result<BTreeMap<VaultRef, String>, ToolError> {
        if refs.is_empty() {
            return Ok(BTreeMap::new());
        }
        let vault = self.vault.as_ref().ok_or_else(|| {
            ToolError::new(
                "this tool's Vault references cannot be opened here: the work has no member",
            )
        })?;
        let through = Through::Tool {
            name: tool.to_string(),
            url: self.url.clone(),
        };
        vault.open(refs, through, from_code).await
    }
}

#[async_trait]
impl RequestParts for TemplateParts {
    async fn prepare(
        &self,
        tool: &str,
        arguments: &Value,
        from_code: bool,
    ) -> Result<PreparedCall, ToolError> {
        let refs = self
            .template
            .references()
            .map_err(|e| ToolError::new(e.to_string()))?;
        // Only a program's arguments open references: a model's direct call sends its text
        // as written.
        let code_refs = if from_code {
            argument_references(arguments).map_err(|e| ToolError::new(e.to_string()))?
        } else {
            BTreeSet::new()
        };
        let mut values = self.open(tool, &refs, false).await?;
        values.extend(self.open(tool, &code_refs, true).await?);
        let arguments = if code_refs.is_empty() {
            arguments.clone()
        } else {
            render_arguments(arguments, &values).map_err(|e| ToolError::new(e.to_string()))?
        };
        let (headers, body) = self
            .template
            .render(&arguments, &values)
            .map_err(|e| ToolError::new(e.to_string()))?;
        Ok(PreparedCall {
            headers,
            body,
            redact: values.into_values().collect(),
        })
    }
}
