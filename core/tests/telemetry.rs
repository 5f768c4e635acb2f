//! The agent loop's GenAI spans in `memory://` (docs/observability.md): the same
//! `invoke_agent`, `chat` and `execute_tool` spans a server emits, nested the same way, with
//! no message text or tool arguments unless capture is turned on.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[path = "support/scripts.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use openbot_core::{Client, ConnectOptions, connect};
use openbot_schema::{BotSpec, EventKind, Limits, SendInput, ToolDefinition};
use serde_json::json;
use support::{echo_tool, scripted};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

/// One span as the capture saw it.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    parent: Option<String>,
    fields: HashMap<String, String>,
}

#[derive(Default, Clone)]
struct Capture(Arc<Mutex<Vec<Seen>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = ctx
            .span(id)
            .and_then(|span| span.parent())
            .map(|parent| parent.name().to_string());
        self.0.lock().unwrap().push(Seen {
            name: attrs.metadata().name().to_string(),
            parent,
            fields,
        });
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = HashMap::new();
        values.record(&mut Fields(&mut fields));
        // Spans of one name are told apart by their position; the last opened wins, enough here.
        let mut seen = self.0.lock().unwrap();
        if let Some(entry) = seen.iter_mut().rev().find(|s| s.name == span.name()) {
            entry.fields.extend(fields);
        }
    }
}

const PRIVATE: &str = "zebra-private-7731";

#[test]
fn a_memory_turn_with_a_tool_call_emits_the_genai_spans_nested_as_on_a_server() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _default = tracing::subscriber::set_default(subscriber);
    // One thread: every task the Turn spawns runs under this thread's subscriber.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let model = scripted(json!([
            {"tool_calls": [{"id": "c1", "name": "echo", "arguments": {"text": PRIVATE}}]},
            {"text": "done"}
        ]));
        let client: Arc<dyn Client> = connect(
            "memory://",
            ConnectOptions {
                tools: vec![Arc::new(echo_tool())],
                models: HashMap::from([("test".to_string(), model as _)]),
                ..ConnectOptions::default()
            },
        )
        .await
        .unwrap();
        let echo = ToolDefinition {
            name: "echo".into(),
            description: "Repeats the text.".into(),
            input_schema: json!({"type": "object"}),
        };
        let bot = client
            .create_bot(BotSpec {
                name: "Helper".into(),
                instructions: String::new(),
                model: "test".into(),
                tools: vec![echo],
                limits: Limits::default(),
                shared: false,
                memory: false,
                reminders: false,
                code_mode: false,
            })
            .await
            .unwrap();
        let chat = client.create_chat(bot.id).await.unwrap();
        let receipt = client
            .send(chat.id, SendInput::text(format!("say {PRIVATE}")))
            .await
            .unwrap();
        let mut events = client.observe(receipt.execution_id, 0).await.unwrap();
        while let Some(event) = events.next().await {
            if matches!(event.unwrap().kind, EventKind::TurnEnded { .. }) {
                break;
            }
        }
        let seen = capture.0.lock().unwrap().clone();
        let agent: Vec<_> = seen.iter().filter(|s| s.name == "invoke_agent").collect();
        assert_eq!(agent.len(), 1, "{seen:#?}");
        assert_eq!(agent[0].fields["gen_ai.agent.name"], "Helper");
        assert_eq!(agent[0].fields["gen_ai.agent.id"], bot.id.to_string());
        assert_eq!(
            agent[0].fields["gen_ai.conversation.id"],
            chat.id.to_string()
        );
        let chats: Vec<_> = seen.iter().filter(|s| s.name == "chat").collect();
        assert_eq!(chats.len(), 2, "{seen:#?}");
        assert!(
            chats
                .iter()
                .all(|s| s.parent.as_deref() == Some("invoke_agent"))
        );
        let tools: Vec<_> = seen.iter().filter(|s| s.name == "execute_tool").collect();
        assert_eq!(tools.len(), 1, "{seen:#?}");
        assert_eq!(tools[0].parent.as_deref(), Some("invoke_agent"));
        assert_eq!(tools[0].fields["gen_ai.tool.name"], "echo");
        assert_eq!(tools[0].fields["gen_ai.tool.call.id"], "c1");
        assert!(
            !format!("{seen:?}").contains(PRIVATE),
            "no message text or tool arguments without the opt-in"
        );
    });
}
