//! Workspaces' state (function `state-versions`): HCP Terraform's state-versions and
//! state-version-outputs APIs, which the CLI's `remote` backend, go-tfe, pytfe and terrasnek
//! speak. A state is a sealed object (`blobs`), never an item; its version is an item under its
//! workspace's data, and the workspace records which version is current.

mod error;
mod parse;
mod record;
mod render;
mod routes;
pub mod uploads;
pub mod versions;

pub use error::StateError;
pub use record::{StateVersion, Status};
pub use routes::router;
