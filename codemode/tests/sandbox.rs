//! The sandbox as an attacker meets it: every limit ends the run with a readable error,
//! nothing reaches files, environment or clock, and the tool API cannot be subverted.

use std::sync::Mutex;

use openbot_codemode::{
    LimitKind, Limits, ProgramError, RunInput, RunOutcome, Sandbox, ToolHost, ToolReply,
};
use serde_json::{Value, json};

/// Echoes each call and records what reached the host.
#[derive(Default)]
struct Echo {
    calls: Mutex<Vec<(u32, String, Value)>>,
}

#[async_trait::async_trait]
impl ToolHost for Echo {
    async fn call(&self, index: u32, name: &str, arguments: Value) -> ToolReply {
        self.calls
            .lock()
            .expect("lock")
            .push((index, name.to_string(), arguments.clone()));
        match name {
            "fail" => ToolReply::Failed {
                code: "tool.failed".into(),
                message: "it failed".into(),
            },
            "stop" => ToolReply::Stop {
                code: "code_mode.call_order".into(),
                message: "not the saved call".into(),
            },
            "slow" => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                ToolReply::Ok(json!(index))
            }
            _ => ToolReply::Ok(json!({"echo": arguments, "index": index})),
        }
    }
}

async fn run_with(code: &str, limits: Limits, host: &Echo) -> RunOutcome {
    let input = RunInput {
        code: code.into(),
        tools: vec!["echo".into(), "fail".into(), "stop".into(), "slow".into()],
        seed: 42,
        now_ms: 1_700_000_000_000,
    };
    Sandbox::shared()
        .expect("sandbox")
        .run(input, limits, host)
        .await
        .expect("run")
}

async fn run(code: &str) -> RunOutcome {
    run_with(code, Limits::default(), &Echo::default()).await
}

fn limit_of(outcome: &RunOutcome) -> Option<LimitKind> {
    match &outcome.result {
        Err(ProgramError::Limit { limit, .. }) => Some(*limit),
        _ => None,
    }
}

#[tokio::test]
async fn a_program_returns_its_value_and_console_lines() {
    let out = run("console.log('hi', {a: 1}); return 1 + 2;").await;
    assert_eq!(out.result, Ok(json!(3)));
    assert_eq!(out.console.len(), 1);
    assert_eq!(out.console[0].text, "hi {\"a\":1}");
}

#[tokio::test]
async fn tool_calls_await_the_host_in_order_with_indexes() {
    let host = Echo::default();
    let out = run_with(
        "const a = await tools.echo({x: 1}); const b = await tools.echo({x: a.index + 10}); return [a, b];",
        Limits::default(),
        &host,
    )
    .await;
    assert_eq!(
        out.result,
        Ok(json!([{"echo": {"x": 1}, "index": 0}, {"echo": {"x": 10}, "index": 1}]))
    );
    let calls = host.calls.lock().expect("lock").clone();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1], (1, "echo".to_string(), json!({"x": 10})));
    assert_eq!(out.tool_calls, 2);
}

#[tokio::test]
async fn a_failed_tool_throws_a_catchable_tool_error() {
    let out = run(
        "try { await tools.fail({}); } catch (e) { return [e.name, e.code, e.tool, e.message]; }",
    )
    .await;
    assert_eq!(
        out.result,
        Ok(json!(["ToolError", "tool.failed", "fail", "it failed"]))
    );
    let uncaught = run("await tools.fail({});").await;
    assert!(
        matches!(&uncaught.result, Err(ProgramError::Thrown { code: Some(c), .. }) if c == "tool.failed"),
        "{uncaught:?}"
    );
}

#[tokio::test]
async fn a_host_stop_ends_the_run_and_cannot_be_caught() {
    let out =
        run("try { await tools.stop({}); } catch (e) { return 'caught'; } return 'after';").await;
    assert!(
        matches!(&out.result, Err(ProgramError::Stopped { code, .. }) if code == "code_mode.call_order"),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_syntax_error_and_a_throw_are_readable_errors() {
    let out = run("return (;").await;
    assert!(
        matches!(&out.result, Err(ProgramError::Thrown { name, .. }) if name == "SyntaxError"),
        "{out:?}"
    );
    let out = run("throw new TypeError('bad input');").await;
    assert_eq!(
        out.result.as_ref().err().map(|e| e.message()),
        Some("TypeError: bad input".into())
    );
}

#[tokio::test]
async fn an_infinite_loop_runs_out_of_fuel() {
    let limits = Limits {
        fuel: 50_000_000,
        ..Limits::default()
    };
    let out = run_with("while (true) {}", limits, &Echo::default()).await;
    assert_eq!(limit_of(&out), Some(LimitKind::Fuel), "{out:?}");
}

#[tokio::test]
async fn a_loop_with_fuel_to_spare_ends_at_the_wall_time() {
    let limits = Limits {
        fuel: u64::MAX / 2,
        wall_ms: 300,
        ..Limits::default()
    };
    let out = run_with("while (true) {}", limits, &Echo::default()).await;
    assert_eq!(limit_of(&out), Some(LimitKind::WallTime), "{out:?}");
    assert_eq!(
        out.result
            .as_ref()
            .map_err(ProgramError::code)
            .err()
            .as_deref(),
        Some("code_mode.deadline_exceeded")
    );
}

#[tokio::test]
async fn many_cheap_slow_calls_end_at_the_wall_time() {
    let host = Echo::default();
    let limits = Limits {
        wall_ms: 300,
        max_tool_calls: 100_000,
        ..Limits::default()
    };
    // Each call costs little fuel but waits for the host: fuel alone would let it run for
    // 10,000 x 20 ms.
    let out = run_with(
        "for (let i = 0; i < 10000; i++) { await tools.slow({i}); } return 'done';",
        limits,
        &host,
    )
    .await;
    assert_eq!(limit_of(&out), Some(LimitKind::WallTime), "{out:?}");
    let calls = host.calls.lock().expect("lock").len();
    assert!(
        calls > 0 && calls < 10_000,
        "{calls} calls reached the host"
    );
    assert!(out.fuel_used < limits.fuel, "{out:?}");
}

#[tokio::test]
async fn a_memory_bomb_hits_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let out = run_with(
        "let a = []; while (true) { a.push('x'.repeat(1 << 16) + a.length); }",
        limits,
        &Echo::default(),
    )
    .await;
    assert_eq!(limit_of(&out), Some(LimitKind::Memory), "{out:?}");
}

#[tokio::test]
async fn deep_recursion_overflows_the_stack() {
    let out = run("function f(n) { return f(n + 1) + 1; } return f(0);").await;
    assert_eq!(limit_of(&out), Some(LimitKind::Stack), "{out:?}");
}

#[tokio::test]
async fn huge_console_output_hits_the_output_limit() {
    let limits = Limits {
        max_output_bytes: 10_000,
        ..Limits::default()
    };
    let out = run_with(
        "for (let i = 0; i < 100000; i++) console.log('line ' + i);",
        limits,
        &Echo::default(),
    )
    .await;
    assert_eq!(limit_of(&out), Some(LimitKind::Output), "{out:?}");
    let total: usize = out.console.iter().map(|l| l.text.len()).sum();
    assert!(total <= 10_000, "kept {total} bytes");
    let out = run_with("return 'y'.repeat(1 << 20);", limits, &Echo::default()).await;
    assert_eq!(limit_of(&out), Some(LimitKind::Output), "{out:?}");
}

#[tokio::test]
async fn too_many_tool_calls_hit_the_call_limit() {
    let host = Echo::default();
    let limits = Limits {
        max_tool_calls: 50,
        ..Limits::default()
    };
    let out = run_with(
        "for (let i = 0; i < 5000; i++) { await tools.echo({i}); }",
        limits,
        &host,
    )
    .await;
    assert_eq!(limit_of(&out), Some(LimitKind::ToolCalls), "{out:?}");
    assert_eq!(host.calls.lock().expect("lock").len(), 50);
}

#[tokio::test]
async fn a_too_long_program_is_refused_before_it_runs() {
    let limits = Limits {
        max_code_bytes: 100,
        ..Limits::default()
    };
    let out = run_with(&"1;".repeat(100), limits, &Echo::default()).await;
    assert_eq!(limit_of(&out), Some(LimitKind::CodeSize));
}

#[tokio::test]
async fn files_environment_network_and_modules_are_absent() {
    let out = run(
        "return [typeof require, typeof process, typeof fetch, typeof XMLHttpRequest, typeof std, typeof os, \
         typeof Deno, typeof __openbot_call, typeof __openbot_finish, typeof __openbot_input];",
    )
    .await;
    assert_eq!(out.result, Ok(Value::Array(vec![json!("undefined"); 10])));
    let out =
        run("try { await import('os'); return 'imported'; } catch (e) { return e.name; }").await;
    assert_ne!(out.result, Ok(json!("imported")), "{out:?}");
}

#[tokio::test]
async fn time_and_random_are_fixed_by_the_seed() {
    let code = "return [Date.now(), new Date().toISOString(), Math.random(), Math.random()];";
    let a = run(code).await;
    let b = run(code).await;
    assert_eq!(a.result, b.result);
    let values = a.result.clone().expect("value");
    assert_eq!(values[0], json!(1_700_000_000_000i64));
    assert_ne!(values[2], values[3]);
    let other = Sandbox::shared()
        .expect("sandbox")
        .run(
            RunInput {
                code: code.into(),
                tools: vec![],
                seed: 7,
                now_ms: 5,
            },
            Limits::default(),
            &Echo::default(),
        )
        .await
        .expect("run");
    let other = other.result.expect("value");
    assert_eq!(other[0], json!(5));
    assert_ne!(other[2], values[2]);
}

#[tokio::test]
async fn prototype_tampering_cannot_forge_or_redirect_calls() {
    let host = Echo::default();
    let out = run_with(
        r#"
        "use strict";
        const results = [];
        try { tools.echo = async () => 'forged'; } catch (e) { results.push('assign:' + e.name); }
        try { tools.other = 1; } catch (e) { results.push('add:' + e.name); }
        try { globalThis.tools = {}; } catch (e) { results.push('global:' + e.name); }
        Object.prototype.then = function () { results.push('then hijacked'); };
        JSON.parse = () => ({ ok: true, value: 'forged' });
        JSON.stringify = () => '{"tool":"stop","arguments":{}}';
        delete Object.prototype.then;
        results.push(Object.getPrototypeOf(tools) === null);
        results.push(typeof tools.constructor);
        const r = await tools.echo({ a: 1 });
        results.push(r.index);
        return results;
        "#,
        Limits::default(),
        &host,
    )
    .await;
    let calls = host.calls.lock().expect("lock").clone();
    assert_eq!(
        calls,
        vec![(0, "echo".to_string(), json!({"a": 1}))],
        "{out:?}"
    );
    let value = out.result.expect("value");
    let text = value.to_string();
    assert!(
        text.contains("assign:TypeError")
            && text.contains("add:TypeError")
            && text.contains("global:TypeError"),
        "{text}"
    );
    assert!(
        !text.contains("forged") && !text.contains("hijacked"),
        "{text}"
    );
}

#[tokio::test]
async fn a_name_outside_the_api_never_reaches_the_host() {
    let host = Echo::default();
    let out = run_with(
        "return typeof tools.secret_admin_tool;",
        Limits::default(),
        &host,
    )
    .await;
    assert_eq!(out.result, Ok(json!("undefined")));
    assert!(host.calls.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_program_that_never_settles_is_an_error() {
    let out = run("await new Promise(() => {});").await;
    assert!(
        matches!(&out.result, Err(ProgramError::Thrown { message, .. }) | Err(ProgramError::Stopped { message, .. }) if message.contains("settle")),
        "{out:?}"
    );
}

#[tokio::test]
async fn runs_in_parallel_do_not_share_state() {
    let a = run("globalThis.leak = 'a'; return 1;");
    let b = run("return typeof globalThis.leak;");
    let (a, b) = tokio::join!(a, b);
    assert_eq!(a.result, Ok(json!(1)));
    assert_eq!(b.result, Ok(json!("undefined")));
}
