//! Computers: machines paired with the server (docs/computers.md). A machine starts a pairing
//! (`openbot computer pair`), a member approves its code, and the machine claims its own
//! credential, revocable and never a member's token. The machine's agent (`openbot computer
//! run`) then keeps a link to one node, through which a Bot granted the Computer works on it.
//! This machine as a Computer, its terminal sessions and file tools, are
//! `openbot_core::computer`.
//!
//! - `store`: the rows and the [`ComputerStore`] trait; `sql`: its one body for both databases;
//! - `service`: [`Computers`], the use cases, each checking its caller first;
//! - [`link`]: the machines' links a node holds, and calls routed to the node that holds one;
//! - [`tool`]: the Computer tools of a granted Bot, routed at submission, called through links;
//! - `connector`: how Connector Apps reach the local MCP servers machines publish.

mod connector;
pub mod link;
mod service;
mod sql;
mod store;
pub mod tool;

use std::sync::Arc;

pub use connector::LinkedConnectors;
pub use link::Links;
pub use service::{CREDENTIAL_PREFIX, Computers, MAX_OPEN_PAIRINGS, PAIRING_MS};
pub use store::{Approval, ComputerRow, ComputerStore, GrantRow, NewPairing, PairingRow};

/// Registers the Computer store with the capabilities' features, where the HTTP routes and
/// the CLI find it ([`store`]).
pub fn register(
    features: crate::features::Features,
    store: Arc<dyn ComputerStore>,
) -> crate::features::Features {
    features.with(store)
}

/// The Computer store, as [`register`] left it.
pub fn store(features: &crate::features::Features) -> Option<&Arc<dyn ComputerStore>> {
    features.get::<Arc<dyn ComputerStore>>()
}

/// Registers this node's machine links ([`links`]), and Connector Apps' reach through them
/// ([`crate::apps::connector::reach`]) when the Computer store is registered.
pub fn with_links(
    features: crate::features::Features,
    links: Arc<Links>,
) -> crate::features::Features {
    let connectors = store(&features).map(|store| {
        Arc::new(LinkedConnectors::new(Arc::clone(&links), Arc::clone(store)))
            as Arc<dyn crate::apps::ConnectorReach>
    });
    let features = features.with(links);
    match connectors {
        Some(reach) => crate::apps::connector::register(features, reach),
        None => features,
    }
}

/// This node's machine links, as [`with_links`] left them.
pub fn links(features: &crate::features::Features) -> Option<&Arc<Links>> {
    features.get::<Arc<Links>>()
}

/// The handler of a saved Computer tool in a phase on this node: `None` when the node holds
/// no links or no Computer store (it cannot reach any machine).
pub fn phase_tool(
    features: &crate::features::Features,
    definition: openbot_schema::ToolDefinition,
    route: tool::ComputerRoute,
) -> Option<openbot_core::tool::SharedTool> {
    let links = links(features)?;
    let store = store(features)?;
    Some(Arc::new(tool::LinkedTool::new(
        definition,
        route,
        Arc::clone(links),
        Arc::clone(store),
    )))
}
