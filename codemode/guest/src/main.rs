//! The Code Mode guest: QuickJS in wasm32-wasip1. It reads the run's input from the host,
//! evaluates the program, and reports the settled result once. Every effect goes through the
//! `openbot` imports; the WASI imports the C library pulls in are answered by the host with
//! fixed values (clock, random) or refusals (files, environment).

use rquickjs::{Context, Function, Runtime};
use std::sync::atomic::{AtomicBool, Ordering};

#[link(wasm_import_module = "openbot")]
unsafe extern "C" {
    /// Length of the run's input JSON ({code, tools, seed}).
    fn input_len() -> u32;
    /// Copies the input into guest memory at `ptr`.
    fn input_read(ptr: *mut u8);
    /// A limit the host set: 0 = QuickJS heap bytes, 1 = QuickJS stack bytes.
    fn limit(which: u32) -> u32;
    /// Calls a tool; returns the length of the reply JSON, read with `reply_read`.
    fn call_tool(ptr: *const u8, len: u32) -> u32;
    /// Copies the last reply into guest memory at `ptr`.
    fn reply_read(ptr: *mut u8);
    /// One console line (0 log, 1 warn, 2 error).
    fn console(level: u32, ptr: *const u8, len: u32);
    /// The settled result JSON ({ok, value} or {ok: false, error}); called once.
    fn finish(ptr: *const u8, len: u32);
}

static FINISHED: AtomicBool = AtomicBool::new(false);

fn report(text: &str) {
    if !FINISHED.swap(true, Ordering::SeqCst) {
        // SAFETY: the pointer and length describe a live string.
        unsafe { finish(text.as_ptr(), text.len() as u32) }
    }
}

fn host_error(message: &str) -> String {
    let escaped: String = message
        .chars()
        .map(|c| match c {
            '"' => "\\\"".to_string(),
            '\\' => "\\\\".to_string(),
            c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32),
            c => c.to_string(),
        })
        .collect();
    format!("{{\"ok\":false,\"error\":{{\"name\":\"InternalError\",\"message\":\"{escaped}\"}}}}")
}

fn read_input() -> String {
    // SAFETY: the host writes exactly `input_len()` bytes into the buffer we give it.
    unsafe {
        let len = input_len() as usize;
        let mut buf = vec![0u8; len];
        input_read(buf.as_mut_ptr());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

fn tool_call(request: String) -> String {
    // SAFETY: as above; the reply buffer has the length the host announced.
    unsafe {
        let len = call_tool(request.as_ptr(), request.len() as u32) as usize;
        let mut buf = vec![0u8; len];
        reply_read(buf.as_mut_ptr());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

fn console_line(level: u32, text: String) {
    // SAFETY: the pointer and length describe a live string.
    unsafe { console(level, text.as_ptr(), text.len() as u32) }
}

fn run() -> Result<(), String> {
    let input = read_input();
    let rt = Runtime::new().map_err(|e| e.to_string())?;
    // SAFETY: plain reads of host-provided numbers.
    let (heap, stack) = unsafe { (limit(0), limit(1)) };
    rt.set_memory_limit(heap as usize);
    rt.set_max_stack_size(stack as usize);
    let ctx = Context::full(&rt).map_err(|e| e.to_string())?;
    ctx.with(|ctx| -> Result<(), String> {
        let g = ctx.globals();
        let err = |e: rquickjs::Error| e.to_string();
        g.set(
            "__openbot_call",
            Function::new(ctx.clone(), tool_call).map_err(err)?,
        )
        .map_err(err)?;
        g.set(
            "__openbot_console",
            Function::new(ctx.clone(), |level: u32, text: String| {
                console_line(level, text)
            })
            .map_err(err)?,
        )
        .map_err(err)?;
        g.set(
            "__openbot_finish",
            Function::new(ctx.clone(), |text: String| report(&text)).map_err(err)?,
        )
        .map_err(err)?;
        g.set("__openbot_input", input).map_err(err)?;
        match ctx.eval::<(), _>(include_str!("prelude.js")) {
            Ok(()) => Ok(()),
            Err(rquickjs::Error::Exception) => {
                let e = ctx.catch();
                Err(format!("the sandbox prelude failed: {e:?}"))
            }
            Err(e) => Err(e.to_string()),
        }
    })?;
    loop {
        match rt.execute_pending_job() {
            Ok(true) => continue,
            Ok(false) => break,
            // An exception inside a job settles the program's promise as rejected; go on.
            Err(_) => continue,
        }
    }
    Ok(())
}

fn main() {
    if let Err(message) = run() {
        report(&host_error(&message));
    }
    if !FINISHED.load(Ordering::SeqCst) {
        report(&host_error(
            "the program did not settle: it awaits something that never resolves",
        ));
    }
}
