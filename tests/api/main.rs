//! The black-box tests: dev-server driven over HTTP exactly as clients drive it, one module per
//! family, all in one binary (and one process: a test that changes process-wide state, such as
//! environment variables, does it through a fixture of `hangar_tests` that makes it safe).

mod accounts;
mod agent_capacity;
mod agent_pool_rules;
mod agent_pools;
mod aws_trust;
mod bootstrap;
mod broker;
mod dev_server;
mod dynamodb;
mod events;
mod hardening;
mod monorepo;
mod oauth_clients;
mod providers;
mod registry;
mod registry_lifecycle;
mod registry_metadata;
mod registry_protocol;
mod registry_proxy;
mod reseal;
mod round_trips;
mod runs;
mod state_versions;
mod store_throttle;
mod team_access;
mod template;
mod uploads;
mod variables;
mod vcs_publishing;
mod web_console;
