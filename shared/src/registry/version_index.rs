//! A private module's version index: one item holding every version's status entry again, one
//! attribute each, so that a read of the module fetches them by key, in the same BatchGetItem as
//! the module, instead of by a query beside it (which no batch can hold).
//!
//! The entries of their own (`VST#…`, see [`keys::version_status`]) stay the truth and the guard
//! that no two versions share a SemVer precedence; every write of one changes the index in the
//! same transaction, with a blind attribute update (`SET`/`REMOVE` of that version's attribute,
//! `ADD writes 1`), so writers of distinct versions never contend on it.
//!
//! The mechanism (completeness, the budget and its overflow, repair) is the store's
//! [`collection_index`]: a module stored before the index existed has none, and its reads query
//! the entries and repair it.

use super::error::Result;
use super::status::{precedence, VersionStatus};
use crate::store::{collection_index, keys, Item, ItemStore, Key, StoreError, Transaction, Write};

/// Each entry is the attribute `v#<precedence>`.
const ENTRY_PREFIX: &str = "v#";

pub(super) fn key(org_id: &str, name: &str, provider: &str) -> Key {
    keys::version_index(org_id, name, provider)
}

/// The complete, empty index of a new module.
pub(super) fn created(org_id: &str, name: &str, provider: &str) -> Write {
    collection_index::created(key(org_id, name, provider))
}

/// The index's share of a write that sets one version's entry to `after` (`before` is what the
/// entry was, if any).
pub(super) fn change(index: Key, before: Option<&VersionStatus>, after: &VersionStatus) -> Result<Write> {
    Ok(collection_index::change(index, entry_name(&after.version), before, after)?)
}

/// The index's share of a write that removes one version's entry, `before`.
pub(super) fn removal(index: Key, before: &VersionStatus) -> Write {
    collection_index::removal(index, entry_name(&before.version), before)
}

/// Commits `transaction`, an index's share among its writes (see [`collection_index::transact`]
/// for what happens past the budget; the writes keep their places, so handles still name them).
pub(super) async fn transact(store: &dyn ItemStore, transaction: Transaction) -> std::result::Result<(), StoreError> {
    collection_index::transact(store, transaction).await
}

/// The entries of a complete index, lowest version first in SemVer order; `None` when the index
/// is absent or incomplete.
pub(super) fn entries(index: Option<&Item>) -> Result<Option<Vec<VersionStatus>>> {
    let mut entries = collection_index::entries(index, ENTRY_PREFIX)?;
    if let Some(entries) = &mut entries {
        sort(entries);
    }
    Ok(entries)
}

/// Lowest first in SemVer order.
pub(super) fn sort(entries: &mut [VersionStatus]) {
    entries.sort_by_cached_key(|status| semver::Version::parse(&status.version).ok());
}

/// Makes the index at `key` hold `statuses` (just queried) and be complete, if they fit and no
/// write touched the index since `index` (what was read of it before the query) was read.
pub(super) async fn repair(store: &dyn ItemStore, key: Key, index: Option<&Item>, statuses: &[VersionStatus]) {
    let entries = statuses.iter().map(|status| (entry_name(&status.version), status)).collect();
    collection_index::repair(store, key, index, entries).await;
}

fn entry_name(version: &str) -> String {
    format!("{ENTRY_PREFIX}{}", precedence(version))
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    fn entry(version: &str) -> VersionStatus {
        VersionStatus {
            version: version.into(),
            status: "ok".into(),
            error: None,
            published_at: None,
            deprecation: None,
            revocation: None,
        }
    }

    #[tokio::test]
    async fn entries_come_back_in_semver_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("hangar.db")).unwrap();
        let index = key("org-1", "vpc", "aws");
        store.transact(vec![created("org-1", "vpc", "aws")]).await.unwrap();
        for version in ["1.10.0", "1.2.0", "1.0.0-rc.1", "1.0.0"] {
            let mut transaction = Transaction::new();
            transaction.add(change(index.clone(), None, &entry(version)).unwrap());
            transact(&store, transaction).await.unwrap();
        }
        let held = entries(store.get(&index).await.unwrap().as_ref()).unwrap().expect("complete");
        let versions: Vec<&str> = held.iter().map(|e| e.version.as_str()).collect();
        assert_eq!(versions, ["1.0.0-rc.1", "1.0.0", "1.2.0", "1.10.0"]);
    }
}
