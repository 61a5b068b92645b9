//! A private provider's version index: one item holding what the registry protocol lists of
//! each version (its protocols and the platforms that check out), one attribute each, so that
//! `versions` reads it by key with the provider, in one BatchGetItem. The versions' items stay
//! the truth: every write of one changes its entry in the same transaction (the store's
//! [`collection_index`]), and a read of an index that is incomplete (overflowed) queries them.

use super::record::{IndexEntry, ProviderVersion};
use crate::registry::error::Result;
use crate::store::{collection_index, keys, query_all_as, Item, ItemStore, Key, StoreError, Transaction, Write};

const ENTRY_PREFIX: &str = "v#";

pub(super) fn key(org_id: &str, name: &str) -> Key {
    keys::provider_version_index(org_id, name)
}

/// The complete, empty index of a new provider.
pub(super) fn created(org_id: &str, name: &str) -> Write {
    collection_index::created(key(org_id, name))
}

/// The index's share of a write that changes `before` (absent for a new version) to `after`.
pub(super) fn change(before: Option<&ProviderVersion>, after: &ProviderVersion) -> Result<Write> {
    let before = before.map(ProviderVersion::index_entry);
    let index = key(&after.org_id, &after.name);
    Ok(collection_index::change(index, entry_name(&after.version), before.as_ref(), &after.index_entry())?)
}

/// The index's share of a write that removes `before`.
pub(super) fn removal(before: &ProviderVersion) -> Write {
    let index = key(&before.org_id, &before.name);
    collection_index::removal(index, entry_name(&before.version), &before.index_entry())
}

fn entry_name(version: &str) -> String {
    format!("{ENTRY_PREFIX}{version}")
}

/// Commits `transaction`, an index's share among its writes (past the index's budget, the
/// index is marked overflowed and the write commits; see [`collection_index::transact`]).
pub(super) async fn transact(store: &dyn ItemStore, transaction: Transaction) -> std::result::Result<(), StoreError> {
    collection_index::transact(store, transaction).await
}

/// Every version's entry, lowest first in SemVer order: from the index as read, or, when it is
/// incomplete, from the versions themselves.
pub async fn entries(store: &dyn ItemStore, org_id: &str, name: &str, index: Option<&Item>) -> Result<Vec<IndexEntry>> {
    let mut entries = match collection_index::entries::<IndexEntry>(index, ENTRY_PREFIX)? {
        Some(entries) => entries,
        None => {
            let versions: Vec<ProviderVersion> = query_all_as(store, keys::provider_versions(org_id, name)).await?;
            versions.iter().map(ProviderVersion::index_entry).collect()
        }
    };
    entries.sort_by_cached_key(|entry| semver::Version::parse(&entry.version).ok());
    Ok(entries)
}
