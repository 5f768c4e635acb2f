//! The tool registry: an organization's HTTP tools. A Bot tool with a registered name calls
//! that endpoint (with the registry's description and schema); any other Bot tool is a host
//! tool its caller answers. A Turn saves each tool's definition and route when it is
//! submitted, so changing the registry later never changes a saved call.

mod call_parts;
mod route;
mod service;
mod sql;
mod store;
mod template;

pub use call_parts::{TemplateParts, ToolVault};
pub use route::{DelegateTools, HttpTools};
pub use service::Tools;
pub use store::{DelegateToolRow, HttpToolRow, ToolStore};
pub use template::{CallTemplate, argument_references, render_arguments};
