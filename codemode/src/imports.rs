//! The functions the guest imports: `openbot.*` (input, limits, tool calls, console, result)
//! and the few `wasi_snapshot_preview1` functions the C library needs, answered with fixed
//! values (clock, random) or refusals (files, environment). Nothing reaches the real system.

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};
use wasmtime::{Caller, Error, Linker, Memory, ResourceLimiter, Result};

use crate::{ConsoleLine, LimitKind, ProgramError, ToolReply};

/// WASI errno EBADF: there is no file descriptor in the sandbox.
const EBADF: i32 = 8;
/// Largest tool request the host reads from the guest.
const MAX_REQUEST_BYTES: u32 = 4 << 20;

/// One tool call on its way from the run thread to the async side.
pub(crate) struct Request {
    pub index: u32,
    pub name: String,
    pub arguments: Value,
    pub reply: oneshot::Sender<ToolReply>,
}

/// Denies memory growth past the limit and remembers that it did.
pub(crate) struct MemoryLimiter {
    pub limit: usize,
    pub denied: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        let ok = desired <= self.limit;
        self.denied |= !ok;
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// The per-run state of a Store.
pub(crate) struct State {
    pub input: Vec<u8>,
    pub js_heap: u32,
    pub js_stack: u32,
    pub limiter: MemoryLimiter,
    pub tools: Vec<String>,
    pub calls: u32,
    pub max_calls: u32,
    pub requests: Option<mpsc::UnboundedSender<Request>>,
    pub reply: Vec<u8>,
    pub console: Vec<ConsoleLine>,
    pub output_bytes: usize,
    pub max_output: usize,
    pub result: Option<Vec<u8>>,
    pub stop: Option<ProgramError>,
    pub exit_code: Option<i32>,
    pub now_ns: u64,
    /// When the run's wall time ends, and its length for the message.
    pub deadline: std::time::Instant,
    pub wall_message: String,
    pub seed: u64,
    pub random_counter: u64,
}

impl State {
    fn limit(&mut self, limit: LimitKind, message: String) -> Error {
        self.stop
            .get_or_insert(ProgramError::Limit { limit, message });
        Error::msg("code mode limit reached")
    }

    /// The wall-time error, recorded as the run's ending.
    pub(crate) fn deadline_passed(&mut self) -> Error {
        let message = self.wall_message.clone();
        self.limit(LimitKind::WallTime, message)
    }

    fn count_output(&mut self, bytes: usize) -> Result<()> {
        self.output_bytes = self.output_bytes.saturating_add(bytes);
        if self.output_bytes > self.max_output {
            let max = self.max_output;
            return Err(self.limit(
                LimitKind::Output,
                format!("the program printed or returned more than {max} bytes; print less and return a smaller value"),
            ));
        }
        Ok(())
    }
}

fn memory(caller: &mut Caller<'_, State>) -> Result<Memory> {
    caller
        .get_export("memory")
        .and_then(|e| e.into_memory())
        .ok_or_else(|| Error::msg("the guest exports no memory"))
}

fn read(caller: &mut Caller<'_, State>, ptr: i32, len: i32) -> Result<Vec<u8>> {
    let mem = memory(caller)?;
    let mut buf = vec![0u8; len as u32 as usize];
    mem.read(&*caller, ptr as u32 as usize, &mut buf)
        .map_err(|e| Error::msg(e.to_string()))?;
    Ok(buf)
}

fn write(caller: &mut Caller<'_, State>, ptr: i32, data: &[u8]) -> Result<()> {
    let mem = memory(caller)?;
    mem.write(&mut *caller, ptr as u32 as usize, data)
        .map_err(|e| Error::msg(e.to_string()))
}

fn reply_json(reply: &ToolReply) -> Vec<u8> {
    let value = match reply {
        ToolReply::Ok(value) => serde_json::json!({"ok": true, "value": value}),
        ToolReply::Failed { code, message } | ToolReply::Stop { code, message } => {
            serde_json::json!({"ok": false, "error": {"code": code, "message": message}})
        }
    };
    value.to_string().into_bytes()
}

fn call_tool(mut caller: Caller<'_, State>, ptr: i32, len: i32) -> Result<i32> {
    if len as u32 > MAX_REQUEST_BYTES {
        let reply = ToolReply::Failed {
            code: "code_mode.request_too_large".into(),
            message: format!("tool arguments are limited to {MAX_REQUEST_BYTES} bytes"),
        };
        caller.data_mut().reply = reply_json(&reply);
        return Ok(caller.data().reply.len() as i32);
    }
    let bytes = read(&mut caller, ptr, len)?;
    let state = caller.data_mut();
    // No new call starts after the deadline, however cheap the calls were in fuel.
    if std::time::Instant::now() >= state.deadline {
        return Err(state.deadline_passed());
    }
    if state.calls >= state.max_calls {
        let max = state.max_calls;
        return Err(state.limit(
            LimitKind::ToolCalls,
            format!("the program made more than {max} tool calls; batch the work into fewer calls"),
        ));
    }
    let request: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let name = request
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let arguments = request.get("arguments").cloned().unwrap_or(Value::Null);
    let reply = if !state.tools.contains(&name) {
        // Only names of the declared API leave the sandbox; they do not count as calls.
        ToolReply::Failed {
            code: "tool.not_found".into(),
            message: format!("there is no tool named {name:?}"),
        }
    } else {
        let index = state.calls;
        state.calls += 1;
        let (tx, rx) = oneshot::channel();
        let sent = state
            .requests
            .as_ref()
            .map(|r| {
                r.send(Request {
                    index,
                    name,
                    arguments,
                    reply: tx,
                })
                .is_ok()
            })
            .unwrap_or(false);
        let reply = if sent { rx.blocking_recv().ok() } else { None };
        match reply {
            Some(reply) => reply,
            None => ToolReply::Stop {
                code: "code_mode.cancelled".into(),
                message: "the run was cancelled".into(),
            },
        }
    };
    if let ToolReply::Stop { code, message } = &reply {
        state.stop.get_or_insert(ProgramError::Stopped {
            code: code.clone(),
            message: message.clone(),
        });
        return Err(Error::msg("code mode run stopped by the host"));
    }
    state.reply = reply_json(&reply);
    Ok(state.reply.len() as i32)
}

/// Adds the guest's imports to `linker`.
pub(crate) fn define(linker: &mut Linker<State>) -> Result<()> {
    linker.func_wrap("openbot", "input_len", |caller: Caller<'_, State>| {
        caller.data().input.len() as i32
    })?;
    linker.func_wrap(
        "openbot",
        "input_read",
        |mut caller: Caller<'_, State>, ptr: i32| {
            let input = std::mem::take(&mut caller.data_mut().input);
            let done = write(&mut caller, ptr, &input);
            caller.data_mut().input = input;
            done
        },
    )?;
    linker.func_wrap(
        "openbot",
        "limit",
        |caller: Caller<'_, State>, which: i32| match which {
            0 => caller.data().js_heap as i32,
            _ => caller.data().js_stack as i32,
        },
    )?;
    linker.func_wrap("openbot", "call_tool", call_tool)?;
    linker.func_wrap(
        "openbot",
        "reply_read",
        |mut caller: Caller<'_, State>, ptr: i32| {
            let reply = std::mem::take(&mut caller.data_mut().reply);
            write(&mut caller, ptr, &reply)
        },
    )?;
    linker.func_wrap(
        "openbot",
        "console",
        |mut caller: Caller<'_, State>, level: i32, ptr: i32, len: i32| {
            let max = caller.data().max_output;
            if len as u32 as usize > max {
                return caller.data_mut().count_output(len as u32 as usize);
            }
            let text = String::from_utf8_lossy(&read(&mut caller, ptr, len)?).into_owned();
            let state = caller.data_mut();
            state.count_output(text.len())?;
            let level = match level {
                1 => "warn",
                2 => "error",
                _ => "log",
            };
            state.console.push(ConsoleLine {
                level: level.into(),
                text,
            });
            Ok(())
        },
    )?;
    linker.func_wrap(
        "openbot",
        "finish",
        |mut caller: Caller<'_, State>, ptr: i32, len: i32| {
            let max = caller.data().max_output;
            if len as u32 as usize > max {
                return caller.data_mut().count_output(len as u32 as usize);
            }
            let bytes = read(&mut caller, ptr, len)?;
            let state = caller.data_mut();
            state.count_output(bytes.len())?;
            state.result = Some(bytes);
            Ok(())
        },
    )?;

    let wasi = "wasi_snapshot_preview1";
    linker.func_wrap(
        wasi,
        "random_get",
        |mut caller: Caller<'_, State>, ptr: i32, len: i32| {
            let mut out = Vec::with_capacity(len as u32 as usize);
            while out.len() < len as u32 as usize {
                let state = caller.data_mut();
                let mut hasher = Sha256::new();
                hasher.update(state.seed.to_le_bytes());
                hasher.update(state.random_counter.to_le_bytes());
                state.random_counter += 1;
                out.extend_from_slice(&hasher.finalize());
            }
            out.truncate(len as u32 as usize);
            write(&mut caller, ptr, &out)?;
            Ok(0i32)
        },
    )?;
    linker.func_wrap(
        wasi,
        "clock_time_get",
        |mut caller: Caller<'_, State>, _id: i32, _precision: i64, out: i32| {
            let now = caller.data().now_ns;
            write(&mut caller, out, &now.to_le_bytes())?;
            Ok(0i32)
        },
    )?;
    linker.func_wrap(
        wasi,
        "environ_sizes_get",
        |mut caller: Caller<'_, State>, count: i32, size: i32| {
            write(&mut caller, count, &0u32.to_le_bytes())?;
            write(&mut caller, size, &0u32.to_le_bytes())?;
            Ok(0i32)
        },
    )?;
    linker.func_wrap(
        wasi,
        "environ_get",
        |_: Caller<'_, State>, _: i32, _: i32| 0i32,
    )?;
    linker.func_wrap(wasi, "fd_close", |_: Caller<'_, State>, _: i32| EBADF)?;
    linker.func_wrap(
        wasi,
        "fd_fdstat_get",
        |_: Caller<'_, State>, _: i32, _: i32| EBADF,
    )?;
    linker.func_wrap(
        wasi,
        "fd_seek",
        |_: Caller<'_, State>, _: i32, _: i64, _: i32, _: i32| EBADF,
    )?;
    linker.func_wrap(
        wasi,
        "fd_write",
        |_: Caller<'_, State>, _: i32, _: i32, _: i32, _: i32| EBADF,
    )?;
    linker.func_wrap(
        wasi,
        "proc_exit",
        |mut caller: Caller<'_, State>, code: i32| -> Result<()> {
            caller.data_mut().exit_code = Some(code);
            Err(Error::msg("guest exited"))
        },
    )?;
    Ok(())
}
