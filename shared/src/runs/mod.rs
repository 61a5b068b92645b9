//! Runs: configuration versions, runs with their plans and applies, and the jobs agents claim to
//! run them (HCP Terraform's run workflow). A non-speculative run holds its workspace's lock from
//! its plan to its end, and the runs behind it wait `pending`; its jobs go to its workspace's
//! agent pool, or to Hangar's own runners in `remote` mode. Read it from `routes.rs` (the
//! management API) and `agent_routes.rs` (what agents speak), then `runs.rs`, `queue.rs`.

pub mod agent_routes;
pub mod configurations;
pub mod credentials;
mod error;
pub mod identity;
pub mod job_files;
pub mod queue;
pub mod record;
mod render;
mod routes;
#[allow(clippy::module_inception)]
pub mod runs;

pub use error::RunsError;
pub use record::{ConfigurationVersion, Run};
pub use routes::router;
