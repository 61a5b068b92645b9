//! The private module registry: its management API (function `registry-api`), the ingest of
//! uploaded archives (function `registry-ingest`), and the registry protocol that
//! `terraform init` speaks (function `registry-protocol`).

mod error;
pub mod ingest;
pub mod modules;
pub mod names;
pub mod protocol;
mod render;
mod routes;
pub mod vcs;
pub mod versions;

pub use error::RegistryError;
pub use routes::router;
