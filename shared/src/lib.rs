//! Hangar's domain crate: the three API families, their storage ports and adapters, the web
//! console, and the HTTP routers that both the Lambda functions and dev-server serve.
//!
//! The modules stand in layers, top down, and a file imports only from its own layer and those
//! below it (ARCHITECTURE.md; `tests/layering.py` holds the code to it and fails on a module it
//! has no layer for).

// Top: what the functions serve. Routers and middleware, the Lambda entry points, the event
// handlers, the boot tokens.
pub mod app;
pub mod bootstrap;
pub mod jobs;
pub mod lambda;

// The console: pages over every family's domain functions.
pub mod web;

// The families: a route table, domain functions, one error type each.
pub mod agents;
pub mod broker;
pub mod registry;
pub mod runs;
pub mod state_versions;

// Organizations, teams, tokens, workspaces, and the access checks every family uses.
pub mod accounts;

// Principals and tokens; the JSON:API toolkit.
pub mod api;
pub mod auth;

// The process's state: configuration and adapters, built once.
pub mod state;

// Ports, adapters and leaf libraries.
pub mod archive;
pub mod aws;
pub mod blobs;
pub mod config;
pub mod errors;
pub mod https;
pub mod identity;
pub mod ids;
pub mod lazy;
pub mod links;
pub mod names;
pub mod openpgp;
pub mod owner_only;
pub mod seal;
pub mod store;
pub mod vcs;
