//! The accounts family (function `accounts`): ping, organizations, teams and their tokens,
//! workspaces and the caller's account details, in HCP Terraform's wire format.

pub mod access;
pub mod cascade;
pub mod entitlements;
mod error;
pub mod grants;
pub mod locks;
pub mod oauth;
pub mod org_tokens;
pub mod organizations;
pub(crate) mod render;
mod routes;
pub mod team_access;
mod team_access_routes;
pub mod teams;
mod variable_routes;
pub mod variables;
pub mod workspaces;

pub use error::AccountsError;
pub use routes::router;
