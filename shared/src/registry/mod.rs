//! The private module registry: its management API (function `registry-api`), the ingest of
//! uploaded archives (function `registry-ingest`), and the registry protocol that
//! `terraform init` speaks (function `registry-protocol`).
//!
//! Layers, each importing only those below it: `routes` → `publishing` (modules from a VCS
//! repository) → the core (`lifecycle`, `ingest`, `retry` → `versions` → `modules` →
//! `version_index`) → `names`,
//! `status`, `error`.
//! `protocol` reads the core; `render` turns core records into resources for `routes`.

mod error;
pub mod ingest;
pub mod lifecycle;
mod metadata;
pub mod modules;
pub mod names;
pub mod protocol;
mod provider_render;
mod provider_routes;
pub mod providers;
pub mod publishing;
mod render;
mod retry;
mod routes;
pub mod status;
mod version_index;
pub mod versions;

pub use error::RegistryError;
pub use routes::router;
