//! Registry modules: one record per (namespace, name, provider), private ones filled by
//! uploaded versions, public ones kept as records of curated modules.
//!
//! To read a module, call [`get`]: it answers the module at an address with every version's
//! status and the organization, if the caller may read it, in one call to the store once the
//! organization is located (or none beyond the token's own, when its route read them ahead). The
//! top of `read.rs` walks that read from top to bottom; the other reads there are variants of it
//! for callers that want less (no statuses, a module by key) or locate the organization
//! themselves.
//!
//! One file per idea, each importing only those listed after it, except that `read.rs` and
//! `legacy.rs` call each other (a read upgrades the module; an upgrade that lost a race reads it
//! again):
//! - `operations.rs`: the operations: [`get`], [`get_by_id`], [`list`], [`create`], [`update`],
//!   and the writes the rest of the registry builds on, `insert` and `modify` (or
//!   `modify_or_refused`, which hands back what the change named when one of its writes fails).
//! - `read.rs`: the one-call read behind [`get`] and its variants, [`statuses`] and [`Shown`]
//!   (a module with every version's status), and the [`PRIVATE_MODULE`] read-ahead plan.
//! - `legacy.rs`: the upgrade of a module stored in the older layout, which every read does.
//! - `permissions.rs`: the organization a principal acts in and the edition's rule on public
//!   modules (`organization`, `managing_versions`, `check_curation`).
//! - `record.rs`: the record itself ([`Module`], [`VcsRepo`], [`TestConfig`]), its constants and
//!   keys, which version consumers get by default, and [`Address`], where a request points.
//!
//! Callers name everything through this module (`registry::modules::…`), never its files.

mod legacy;
mod operations;
mod permissions;
mod read;
mod record;

pub use operations::{create, get, get_by_id, list, update, ModuleChange, ModuleChanges, ModuleFilter, NewModule};
pub(super) use operations::{insert, modify, modify_or_refused, Refused};
pub(super) use permissions::{check_curation, managing_versions, organization};
pub(super) use read::readable;
pub(crate) use read::{load, parse_modules, read, read_scoped, Read, Wanted};
pub use read::{statuses, Shown, PRIVATE_MODULE};
pub(super) use record::latest_of;
pub use record::{
    offered_versions, Address, Module, TestConfig, VcsRepo, BRANCH, DOWNLOADS, NON_VCS, PRIVATE_COUNT, PUBLIC_COUNT,
    TAGS,
};

pub(super) use super::status::precedence;
pub use super::status::VersionStatus;
