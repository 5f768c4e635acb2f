//! Approval rules: which tool calls run, wait for a person, or are refused.

use openbot_schema::{BotId, RuleAction, ToolCall};
use uuid::Uuid;

use crate::store::Millis;

/// How long an `ask` waits for a decision unless its rule says otherwise: one day.
pub const DEFAULT_EXPIRY_MS: u64 = 24 * 60 * 60 * 1000;

/// A stored rule.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleRow {
    /// Its ID.
    pub id: Uuid,
    /// The tool-name pattern.
    pub tool: String,
    /// The arguments pattern, if any.
    pub arguments: Option<String>,
    /// What it does.
    pub action: RuleAction,
    /// Only this Bot's calls.
    pub bot_id: Option<BotId>,
    /// Only calls for this member.
    pub member_id: Option<Uuid>,
    /// How long its requests wait.
    pub expires_after_ms: u64,
    /// When it was added.
    pub created_at: Millis,
}

impl RuleRow {
    /// Whether the rule holds for `call` of `bot` made for `member`.
    pub fn matches(&self, call: &ToolCall, bot: BotId, member: Uuid) -> bool {
        if self.bot_id.is_some_and(|b| b != bot) || self.member_id.is_some_and(|m| m != member) {
            return false;
        }
        if !glob(&self.tool, &call.name) {
            return false;
        }
        match &self.arguments {
            None => true,
            Some(pattern) => glob(pattern, &call.arguments.to_string()),
        }
    }
}

/// The verdict of the rules on one call: the strictest action of every matching rule, and for
/// an `ask` the shortest expiry among the asking rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// What happens.
    pub action: RuleAction,
    /// For `ask`: how long the request waits.
    pub expires_after_ms: u64,
}

/// Applies `rules` to a call. No matching rule allows it.
pub fn verdict(rules: &[RuleRow], call: &ToolCall, bot: BotId, member: Uuid) -> Verdict {
    let mut verdict = Verdict {
        action: RuleAction::Allow,
        expires_after_ms: DEFAULT_EXPIRY_MS,
    };
    let mut asked = false;
    for rule in rules.iter().filter(|r| r.matches(call, bot, member)) {
        if rule.action == RuleAction::Ask {
            verdict.expires_after_ms = if asked {
                verdict.expires_after_ms.min(rule.expires_after_ms)
            } else {
                rule.expires_after_ms
            };
            asked = true;
        }
        verdict.action = verdict.action.max(rule.action);
    }
    verdict
}

/// Whether `text` matches `pattern`, where `*` stands for any text (also none) and every
/// other character stands for itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, rest) = (parts[0], &parts[1..]);
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let (last, middle) = rest.split_last().unwrap_or((&"", &[]));
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments,
        }
    }

    fn rule(tool: &str, action: RuleAction) -> RuleRow {
        RuleRow {
            id: Uuid::now_v7(),
            tool: tool.into(),
            arguments: None,
            action,
            bot_id: None,
            member_id: None,
            expires_after_ms: DEFAULT_EXPIRY_MS,
            created_at: 0,
        }
    }

    #[test]
    fn a_star_stands_for_any_text() {
        assert!(glob("send_*", "send_mail"));
        assert!(glob("*", ""));
        assert!(glob("*mail*", "send_mail_now"));
        assert!(glob("a*b*c", "abc"));
        assert!(!glob("a*b*c", "acb"));
        assert!(!glob("send_*", "read_mail"));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exactly"));
        assert!(!glob("ab*ba", "aba"));
    }

    #[test]
    fn a_call_no_rule_matches_is_allowed() {
        let verdict = verdict(
            &[rule("other", RuleAction::Deny)],
            &call("x", json!({})),
            BotId::new(),
            Uuid::nil(),
        );
        assert_eq!(verdict.action, RuleAction::Allow);
    }

    #[test]
    fn the_strictest_matching_rule_wins() {
        let rules = [
            rule("*", RuleAction::Allow),
            rule("pay*", RuleAction::Ask),
            rule("pay_all", RuleAction::Deny),
        ];
        let bot = BotId::new();
        assert_eq!(
            verdict(&rules, &call("pay", json!({})), bot, Uuid::nil()).action,
            RuleAction::Ask
        );
        assert_eq!(
            verdict(&rules, &call("pay_all", json!({})), bot, Uuid::nil()).action,
            RuleAction::Deny
        );
        assert_eq!(
            verdict(&rules, &call("read", json!({})), bot, Uuid::nil()).action,
            RuleAction::Allow
        );
    }

    #[test]
    fn a_rule_for_a_bot_or_member_holds_only_for_them() {
        let bot = BotId::new();
        let member = Uuid::now_v7();
        let mut for_bot = rule("*", RuleAction::Deny);
        for_bot.bot_id = Some(bot);
        let mut for_member = rule("*", RuleAction::Ask);
        for_member.member_id = Some(member);
        let rules = [for_bot, for_member];
        assert_eq!(
            verdict(&rules, &call("x", json!({})), BotId::new(), Uuid::nil()).action,
            RuleAction::Allow
        );
        assert_eq!(
            verdict(&rules, &call("x", json!({})), BotId::new(), member).action,
            RuleAction::Ask
        );
        assert_eq!(
            verdict(&rules, &call("x", json!({})), bot, member).action,
            RuleAction::Deny
        );
    }

    #[test]
    fn an_arguments_pattern_matches_the_compact_json() {
        let mut big = rule("pay", RuleAction::Ask);
        big.arguments = Some(r#"*"amount":1000*"#.into());
        let bot = BotId::new();
        assert_eq!(
            verdict(
                &[big.clone()],
                &call("pay", json!({"amount": 1000, "to": "x"})),
                bot,
                Uuid::nil()
            )
            .action,
            RuleAction::Ask
        );
        assert_eq!(
            verdict(&[big], &call("pay", json!({"amount": 5})), bot, Uuid::nil()).action,
            RuleAction::Allow
        );
    }

    #[test]
    fn the_shortest_expiry_of_the_asking_rules_holds() {
        let mut long = rule("*", RuleAction::Ask);
        long.expires_after_ms = 10_000;
        let mut short = rule("x", RuleAction::Ask);
        short.expires_after_ms = 500;
        let verdict = verdict(
            &[long, short],
            &call("x", json!({})),
            BotId::new(),
            Uuid::nil(),
        );
        assert_eq!(verdict.expires_after_ms, 500);
    }
}
