//! The private module registry's management API (function `registry-api`) and the ingest of
//! uploaded archives (function `registry-ingest`).

mod error;
pub mod ingest;
pub mod modules;
pub mod names;
mod render;
mod routes;
pub mod versions;

pub use error::RegistryError;
pub use routes::router;
