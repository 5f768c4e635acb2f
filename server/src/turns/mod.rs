//! Turns on the durable engine: the saved input, the durable host, HTTP tools and the workflow.

mod delivery;
pub(crate) mod faults;
mod host;
mod input;
mod workflow;

pub use delivery::{DeliveryError, deliver_tool_result};
pub use faults::FaultPoint;
pub use host::DurableHost;
pub(crate) use host::{AccessGuard, BillingContext, ModelPermits};
pub use input::{
    DelegateRoute, PROPOSE_PLAN, SavedNoticeTarget, SavedTool, SourceLink, ToolRoute, TurnInput,
    propose_plan_tool,
};
pub use openbot_core::tool::HttpTool;
pub use workflow::{EnvReader, TURN, TurnWorkflow, saved_tool_set};
pub(crate) use workflow::{tool_vault, unchecked_work};
