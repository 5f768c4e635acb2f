//! Fault points for the engine's process tests: in a build with the `fault-points` feature
//! (only the test builds of `scripts/test`), with `OPENBOT_FAULT_POINT` set to a point's name,
//! the process aborts at once when it reaches that point, like a crash. Any other build has no
//! fault points at all: [`fault`] is empty and the variable is never read.

/// Places in a Turn where a test may crash the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// A tool call's intent is saved; nothing was sent.
    AfterToolIntent,
    /// A tool call is marked sending; it is about to be sent.
    AfterToolSending,
    /// A tool call's result is saved.
    AfterToolResult,
}

impl FaultPoint {
    #[cfg_attr(not(feature = "fault-points"), allow(dead_code))]
    fn name(self) -> &'static str {
        match self {
            FaultPoint::AfterToolIntent => "after_tool_intent",
            FaultPoint::AfterToolSending => "after_tool_sending",
            FaultPoint::AfterToolResult => "after_tool_result",
        }
    }
}

/// Aborts the process if `point` is the configured fault point.
#[cfg(feature = "fault-points")]
pub fn fault(point: FaultPoint) {
    use std::sync::OnceLock;
    static CONFIGURED: OnceLock<Option<String>> = OnceLock::new();
    let configured = CONFIGURED.get_or_init(|| std::env::var("OPENBOT_FAULT_POINT").ok());
    if configured.as_deref() == Some(point.name()) {
        eprintln!("openbot: fault point {} reached; aborting", point.name());
        std::process::abort();
    }
}

/// Does nothing: this build has no fault points.
#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub fn fault(_point: FaultPoint) {}
