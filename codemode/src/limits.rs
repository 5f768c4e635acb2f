use serde::{Deserialize, Serialize};

/// The limits of one run. Each one reached ends the run with a [`crate::LimitKind`] error the
/// model can read; none of them can crash the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Wasm fuel (about one unit per instruction): bounds CPU time deterministically.
    pub fuel: u64,
    /// Linear memory of the sandbox in bytes (the guest's stack and QuickJS heap included).
    pub memory_bytes: u64,
    /// QuickJS's own stack limit in bytes: deep recursion becomes a RangeError first.
    pub js_stack_bytes: u32,
    /// Tool calls one run may make.
    pub max_tool_calls: u32,
    /// Console output plus the JSON of the return value, in bytes.
    pub max_output_bytes: u32,
    /// Size of the program text in bytes.
    pub max_code_bytes: u32,
    /// Wall time one run may take, in milliseconds, its tool calls' waits included: checked
    /// by wasmtime's epoch interruption while the program computes and before each tool call
    /// (a call in flight is not cut off; it ends by its own rules).
    #[serde(default = "default_wall_ms")]
    pub wall_ms: u64,
}

/// The default of [`Limits::wall_ms`]: 30 seconds.
pub const DEFAULT_WALL_MS: u64 = 30_000;

fn default_wall_ms() -> u64 {
    DEFAULT_WALL_MS
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 2_000_000_000,
            memory_bytes: 64 << 20,
            js_stack_bytes: 1 << 20,
            max_tool_calls: 200,
            max_output_bytes: 64 << 10,
            max_code_bytes: 64 << 10,
            wall_ms: DEFAULT_WALL_MS,
        }
    }
}

impl Limits {
    /// Bytes of linear memory kept out of the QuickJS heap: the guest's 8 MiB shadow stack,
    /// its data and its Rust allocations, so a memory bomb hits QuickJS's limit (a catchable
    /// "out of memory") before the wasm memory limit.
    pub(crate) const RESERVED_BYTES: u64 = 12 << 20;

    /// What the model reads when the wall time ran out.
    pub(crate) fn wall_time_message(&self) -> String {
        format!(
            "the program ran longer than its wall time of {} ms; make fewer or faster calls",
            self.wall_ms
        )
    }

    /// The QuickJS heap limit handed to the guest.
    pub(crate) fn js_heap_bytes(&self) -> u32 {
        self.memory_bytes
            .saturating_sub(Self::RESERVED_BYTES)
            .clamp(1 << 20, u32::MAX as u64) as u32
    }
}
