//! Apps: MCP servers as tool sources and their connections. This branch holds the OAuth
//! sign-in of connections; the Apps and Connections themselves come with the Apps work.

pub mod oauth;
