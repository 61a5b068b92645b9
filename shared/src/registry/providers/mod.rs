//! The private provider registry: GPG keys, providers, their versions and platforms (HCP's
//! registry-providers API), the uploads that bring a release's files in, and what the provider
//! registry protocol reads.
//!
//! A release is served only once it checks out: `SHA256SUMS.sig` is a detached signature of
//! `SHA256SUMS` by the version's key, each platform's zip archive has the platform's shasum and
//! is safe to unpack, and the signed sums list that shasum for the platform's filename.
//!
//! Files, each importing only those after it: `uploads.rs` (a file landing on its link) →
//! `versions.rs` (versions, platforms, a provider's deletion, and the one conditional write
//! that changes a version) → `operations.rs` (providers) → `gpg_keys.rs`, `index.rs` → `record.rs`.

mod gpg_keys;
mod index;
mod operations;
mod record;
mod uploads;
mod versions;

pub use gpg_keys::GpgKey;
pub use index::entries as index_entries;
pub use operations::{create, get, list, NewProvider, ProviderAddress, ProviderFilter};
pub use record::{NewPlatform, Platform, Provider, ProviderVersion};
pub use uploads::{awaits_upload, object_created, Landed};
pub use versions::{
    create_platform, create_version, delete_platform, delete_provider, delete_version, get_platform, get_version,
    latest_versions, links, list_platforms, list_versions, show_provider, FileLink, Links, NewVersion, Shown,
    UPLOAD_LINK_VALIDITY,
};

pub mod keys {
    //! GPG keys' operations, named `providers::keys::…`.
    pub use super::gpg_keys::{create, delete, get, list, update};
}
