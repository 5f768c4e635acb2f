//! Which route each tool of a Turn takes, decided when input is submitted and saved with the
//! Turn: a route is durable data, so a restored Turn calls what its submission saw.
//!
//! Capabilities plug in here from their own folders: a [`ToolSource`] claims the Bot tools it
//! provides (an App's, a registered HTTP tool, a delegate), a [`TurnOffer`] adds a tool the Bot
//! does not name (`propose_plan` in plan mode, `remind`). They are registered once, in
//! [`crate::node::tool_routing`]; the Chat use cases name none of them.

use std::sync::Arc;

use async_trait::async_trait;
use openbot_schema::ToolDefinition;

use super::ChatError;
use super::store::ChatRow;
use crate::bots::BotRow;
use crate::identity::Caller;
use crate::turns::{SavedTool, ToolRoute};

/// One Bot tool while its route is decided.
#[derive(Debug)]
pub enum Slot {
    /// No source has claimed it yet (a host tool if none does).
    Open(ToolDefinition),
    /// A source saved its route.
    Routed(SavedTool),
    /// A source claimed it and leaves it out of the Turn (delegation past its depth).
    Left,
}

/// What a source sees of the submission.
pub struct RouteRequest<'a> {
    /// Who submits: a source resolves only what this caller may use.
    pub caller: &'a Caller,
    /// The Bot whose tools are routed.
    pub bot: &'a BotRow,
    /// How many delegations below the Chat's own Bot this Bot is (0 for the Chat's Bot).
    pub depth: usize,
    /// The routing itself, for a source that saves another Bot's tools (a delegate).
    pub routing: &'a ToolRouting,
}

/// A capability that provides Bot tools by name.
#[async_trait]
pub trait ToolSource: Send + Sync {
    /// Claims the open slots this source provides, in place, and adds the tools it gives a
    /// Bot unasked (see [`ToolSource::adds`]). Sources run in registration order, so an
    /// earlier one wins a name two could provide. An error stops the send.
    async fn route(&self, request: &RouteRequest<'_>, slots: &mut [Slot]) -> Result<(), ChatError>;

    /// Whether this source may add tools the Bot does not name (a granted Computer's), so it
    /// is asked even when no slot is open.
    fn adds(&self) -> bool {
        false
    }
}

/// A capability that adds a tool to a Turn whatever the Bot names.
pub trait TurnOffer: Send + Sync {
    /// The tool to add to a Turn of `bot` in `chat`, if any.
    fn offer(&self, bot: &BotRow, chat: &ChatRow) -> Option<SavedTool>;
}

/// The registered sources and offers. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct ToolRouting {
    sources: Vec<Arc<dyn ToolSource>>,
    offers: Vec<Arc<dyn TurnOffer>>,
}

impl ToolRouting {
    /// This routing with `source` consulted after those registered before it.
    pub fn with_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// This routing with `offer` added after those registered before it.
    pub fn with_offer(mut self, offer: Arc<dyn TurnOffer>) -> Self {
        self.offers.push(offer);
        self
    }

    /// The tools of a Turn of `bot` in `chat`: the Bot's own, routed, then the offered ones.
    pub async fn turn_tools(
        &self,
        caller: &Caller,
        bot: &BotRow,
        chat: &ChatRow,
    ) -> Result<Vec<SavedTool>, ChatError> {
        let mut tools = self.bot_tools(caller, bot, 0).await?;
        tools.extend(
            self.offers
                .iter()
                .filter_map(|offer| offer.offer(bot, chat)),
        );
        Ok(tools)
    }

    /// `bot`'s own tools as a Turn saves them, `depth` delegations below a Chat's Bot: each
    /// claimed by the first source that provides it, any other a host tool, in the Bot's order.
    pub async fn bot_tools(
        &self,
        caller: &Caller,
        bot: &BotRow,
        depth: usize,
    ) -> Result<Vec<SavedTool>, ChatError> {
        let mut slots: Vec<Slot> = bot.spec.tools.iter().cloned().map(Slot::Open).collect();
        let request = RouteRequest {
            caller,
            bot,
            depth,
            routing: self,
        };
        for source in &self.sources {
            if slots.iter().any(|slot| matches!(slot, Slot::Open(_))) {
                source.route(&request, &mut slots).await?;
            }
        }
        Ok(slots
            .into_iter()
            .filter_map(|slot| match slot {
                Slot::Open(definition) => Some(SavedTool {
                    definition,
                    route: ToolRoute::Host,
                }),
                Slot::Routed(tool) => Some(tool),
                Slot::Left => None,
            })
            .collect())
    }
}

impl std::fmt::Debug for ToolRouting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRouting")
            .field("sources", &self.sources.len())
            .field("offers", &self.offers.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Credential, MemberRef, Role};
    use openbot_schema::{BotId, ChatId};

    /// Claims every open tool whose name starts with its prefix, routed as an HTTP tool of
    /// its own URL (a stand-in route that tells the sources apart).
    struct Prefix(&'static str, &'static str);

    #[async_trait]
    impl ToolSource for Prefix {
        async fn route(
            &self,
            _request: &RouteRequest<'_>,
            slots: &mut [Slot],
        ) -> Result<(), ChatError> {
            for slot in slots.iter_mut() {
                if let Slot::Open(definition) = slot
                    && definition.name.starts_with(self.0)
                {
                    *slot = if self.1.is_empty() {
                        Slot::Left
                    } else {
                        Slot::Routed(SavedTool {
                            definition: definition.clone(),
                            route: ToolRoute::Http {
                                url: self.1.into(),
                                retry_safe: false,
                                background: false,
                                template: Default::default(),
                            },
                        })
                    };
                }
            }
            Ok(())
        }
    }

    struct Always;

    impl TurnOffer for Always {
        fn offer(&self, _bot: &BotRow, chat: &ChatRow) -> Option<SavedTool> {
            chat.plan_mode.then(crate::turns::propose_plan_tool)
        }
    }

    fn caller() -> Caller {
        Caller {
            member: MemberRef {
                member_id: uuid::Uuid::now_v7(),
                organization_id: uuid::Uuid::now_v7(),
                role: Role::Owner,
            },
            credential: Credential::Token {
                id: uuid::Uuid::now_v7(),
            },
            rights: openbot_schema::Right::all(),
            bot_ids: None,
        }
    }

    fn bot(tools: &[&str]) -> BotRow {
        let tools: Vec<_> = tools
            .iter()
            .map(|name| serde_json::json!({"name": name, "description": "", "input_schema": {"type": "object"}}))
            .collect();
        let spec = serde_json::from_value(
            serde_json::json!({"name": "b", "model": "openai:m", "tools": tools}),
        )
        .expect("a Bot spec");
        BotRow {
            id: BotId::new(),
            organization_id: uuid::Uuid::now_v7(),
            owner_member_id: uuid::Uuid::now_v7(),
            spec,
            revision: 1,
            created_at: 0,
        }
    }

    fn chat(bot: &BotRow, plan_mode: bool) -> ChatRow {
        ChatRow {
            id: ChatId::new(),
            bot_id: bot.id,
            member_id: uuid::Uuid::now_v7(),
            title: String::new(),
            revision: 1,
            created_at: 0,
            plan_mode,
        }
    }

    fn routes(tools: &[SavedTool]) -> Vec<(String, String)> {
        tools
            .iter()
            .map(|tool| {
                let route = match &tool.route {
                    ToolRoute::Http { url, .. } => url.clone(),
                    ToolRoute::Host => "host".into(),
                    other => format!("{other:?}"),
                };
                (tool.definition.name.clone(), route)
            })
            .collect()
    }

    #[tokio::test]
    async fn the_first_source_claiming_a_tool_wins_and_an_unclaimed_tool_is_a_host_tool() {
        let routing = ToolRouting::default()
            .with_source(Arc::new(Prefix("a", "first")))
            .with_source(Arc::new(Prefix("ab", "second")))
            .with_source(Arc::new(Prefix("b", "third")));
        let bot = bot(&["ab", "c", "b"]);
        let tools = routing.bot_tools(&caller(), &bot, 0).await.expect("routed");
        let expected = [("ab", "first"), ("c", "host"), ("b", "third")];
        let expected: Vec<_> = expected
            .iter()
            .map(|(n, r)| (n.to_string(), r.to_string()))
            .collect();
        assert_eq!(routes(&tools), expected);
    }

    #[tokio::test]
    async fn a_tool_a_source_leaves_out_is_not_offered() {
        let routing = ToolRouting::default().with_source(Arc::new(Prefix("deep", "")));
        let bot = bot(&["deep", "kept"]);
        let tools = routing.bot_tools(&caller(), &bot, 0).await.expect("routed");
        assert_eq!(
            routes(&tools),
            vec![("kept".to_string(), "host".to_string())]
        );
    }

    #[tokio::test]
    async fn offers_come_after_the_bots_own_tools_only_when_they_apply() {
        let routing = ToolRouting::default().with_offer(Arc::new(Always));
        let bot = bot(&["own"]);
        let off = routing
            .turn_tools(&caller(), &bot, &chat(&bot, false))
            .await
            .expect("routed");
        assert_eq!(routes(&off), vec![("own".to_string(), "host".to_string())]);
        let on = routing
            .turn_tools(&caller(), &bot, &chat(&bot, true))
            .await
            .expect("routed");
        let names: Vec<_> = on.iter().map(|t| t.definition.name.as_str()).collect();
        assert_eq!(names, ["own", crate::turns::PROPOSE_PLAN]);
    }
}
