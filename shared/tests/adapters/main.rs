//! The adapter tests of the domain crate, one module per adapter or contract, all in one
//! binary (and one process): the store and blob contracts, KMS sealing, the broker's IAM and
//! STS calls, the VCS providers, and SQLite shared by several processes.

// The AWS emulator, the same helper the black-box tests use (this crate cannot depend on
// theirs, so the file is compiled in here by path).
// The policy-enforcing emulator is the black-box tests' alone.
#[path = "../../../tests/support/moto.rs"]
#[allow(dead_code)]
mod moto;
mod support;

mod aws_cloud;
mod blob_contract;
mod seal_kms;
mod sqlite_processes;
mod store_contract;
mod vcs_providers;
