//! The handlers of the engine's paths, a file per path as Vault's `path_*.go` are: each reads
//! the request, makes one domain call and renders Vault's answer. `engine.rs` lists them.

pub mod config_lease;
pub mod config_root;
pub mod creds;
pub mod roles;
pub mod static_roles;
