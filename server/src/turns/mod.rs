//! Turns on the durable engine: the saved input, the durable host, HTTP tools and the workflow.

mod delivery;
pub(crate) mod faults;
mod feature;
mod host;
mod input;
mod setup;
mod workflow;

pub use delivery::{DeliveryError, deliver_tool_result};
pub use faults::FaultPoint;
pub use feature::{TurnFeature, TurnPhase};
pub use host::DurableHost;
pub(crate) use host::{AccessGuard, BillingContext, ModelPermits};
pub use input::{
    DelegateRoute, PROPOSE_PLAN, SavedNoticeTarget, SavedTool, SourceLink, ToolRoute, TurnInput,
    propose_plan_tool,
};
pub use openbot_core::tool::HttpTool;
pub use setup::PhaseSetup;
pub use workflow::{EnvReader, TURN, TurnWorkflow};
