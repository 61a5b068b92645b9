//! Hangar's domain crate: the three API families, their storage ports and adapters, the web
//! console, and the HTTP routers that both the Lambda functions and dev-server serve.

pub mod accounts;
pub mod agents;
pub mod api;
pub mod app;
pub mod archive;
pub mod auth;
pub mod aws;
pub mod blobs;
pub mod bootstrap;
pub mod broker;
pub mod config;
pub mod errors;
pub mod https;
pub mod identity;
pub mod ids;
pub mod jobs;
pub mod lambda;
pub mod lazy;
pub mod names;
pub mod owner_only;
pub mod registry;
pub mod seal;
pub mod state;
pub mod store;
pub mod vcs;
pub mod web;
