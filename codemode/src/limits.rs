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
        }
    }
}

impl Limits {
    /// Bytes of linear memory kept out of the QuickJS heap: the guest's 8 MiB shadow stack,
    /// its data and its Rust allocations, so a memory bomb hits QuickJS's limit (a catchable
    /// "out of memory") before the wasm memory limit.
    pub(crate) const RESERVED_BYTES: u64 = 12 << 20;

    /// The QuickJS heap limit handed to the guest.
    pub(crate) fn js_heap_bytes(&self) -> u32 {
        self.memory_bytes
            .saturating_sub(Self::RESERVED_BYTES)
            .clamp(1 << 20, u32::MAX as u64) as u32
    }
}
