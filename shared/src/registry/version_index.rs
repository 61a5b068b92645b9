//! A private module's version index: one item holding every version's status entry again, one
//! attribute each, so that a read of the module fetches them by key, in the same BatchGetItem as
//! the module, instead of by a query beside it (which no batch can hold).
//!
//! The entries of their own (`VST#…`, see [`keys::version_status`]) stay the truth and the guard
//! that no two versions share a SemVer precedence; every write of one changes the index in the
//! same transaction, with a blind attribute update (`SET`/`REMOVE` of that version's attribute,
//! `ADD writes 1`), so writers of distinct versions never contend on it.
//!
//! The index is trusted only while `complete`: a new module's is made complete and empty; one
//! stored before the index existed has none, and one whose entries outgrew [`BUDGET`] is replaced
//! by an overflowed marker. Reads of an incomplete index query the entries
//! and [`repair`] it when they fit, conditional on no write having touched it since it was read.

use serde_json::{Map, Value};

use super::error::Result;
use super::status::{precedence, VersionStatus};
use crate::store::{keys, Condition, Item, ItemStore, Key, StoreError, UpdateOp, Write};

/// The attributes of the index item besides its entries.
const COMPLETE: &str = "complete";
const WRITES: &str = "writes";
const BYTES: &str = "bytes";
/// Each entry is the attribute `v#<precedence>`.
const ENTRY_PREFIX: &str = "v#";

/// How many bytes of entries the index holds at most: a few hundred versions, far under
/// DynamoDB's 400 KB item limit (with room for writes racing past the check), and small enough
/// that rewriting it in every version's transaction stays cheap (DynamoDB bills an update by the
/// item's whole size).
pub(super) const BUDGET: i64 = 64 * 1024;
/// What `bytes` is set to once the index overflowed: every later growth fails its check.
const OVERFLOWED: i64 = 1 << 40;

pub(super) fn key(org_id: &str, name: &str, provider: &str) -> Key {
    keys::version_index(org_id, name, provider)
}

/// The complete, empty index of a new module.
pub(super) fn created(org_id: &str, name: &str, provider: &str) -> Write {
    let mut attrs = Map::new();
    attrs.insert(COMPLETE.into(), true.into());
    attrs.insert(WRITES.into(), 0.into());
    attrs.insert(BYTES.into(), 0.into());
    Write::Put { item: Item::new(key(org_id, name, provider), attrs), condition: Condition::Always }
}

/// The index's share of a write that sets one version's entry to `after` (`before` is what the
/// entry was, if any). It grows the index only while it stays within [`BUDGET`]; past it the
/// write fails, and [`transact`] marks the index overflowed instead.
pub(super) fn change(index: Key, before: Option<&VersionStatus>, after: &VersionStatus) -> Result<Write> {
    let name = entry_name(&after.version);
    let delta = size(&name, after) - before.map_or(0, |entry| size(&name, entry));
    let value = serde_json::to_value(after).map_err(StoreError::backend)?;
    let ops = vec![UpdateOp::Set(name, value), UpdateOp::Add(WRITES.into(), 1), UpdateOp::Add(BYTES.into(), delta)];
    let condition = if delta > 0 { Condition::Below(BYTES.into(), BUDGET - delta + 1) } else { Condition::Always };
    Ok(Write::Update { key: index, ops, condition })
}

/// The index's share of a write that removes one version's entry, `before`.
pub(super) fn removal(index: Key, before: &VersionStatus) -> Write {
    let name = entry_name(&before.version);
    let delta = -size(&name, before);
    let ops = vec![UpdateOp::Remove(name), UpdateOp::Add(WRITES.into(), 1), UpdateOp::Add(BYTES.into(), delta)];
    Write::Update { key: index, ops, condition: Condition::Always }
}

/// Commits `writes` as one transaction. When an index's share fails because the index is full
/// (or already overflowed), the index is read and the transaction committed again with, in that
/// share's place, the index replaced by a small overflowed marker (its entries dropped, so later
/// writes stay cheap) or, once it is one, only counted: its reads query the entries from then on.
/// Either is conditional on the index as read, so a racing writer makes it read again.
pub(super) async fn transact(store: &dyn ItemStore, mut writes: Vec<Write>) -> std::result::Result<(), StoreError> {
    let Some(share) = writes.iter().position(grows_an_index) else {
        return store.transact(writes).await;
    };
    let mut attempts = 0;
    loop {
        match store.transact(writes.clone()).await {
            Err(e) if e.failed_write() == Some(share) && attempts < 5 => {
                attempts += 1;
                let key = writes[share].key().clone();
                let index = store.get(&key).await?;
                writes[share] = overflowed(key, index.as_ref());
            }
            other => return other,
        }
    }
}

/// The write that leaves the index at `key` overflowed, given what was just read of it.
fn overflowed(key: Key, index: Option<&Item>) -> Write {
    let seen = number(index, WRITES).unwrap_or(0);
    // A marker's count of bytes only ever falls by what deletes take from it.
    if let Some(bytes) = number(index, BYTES).filter(|&bytes| bytes > OVERFLOWED / 2) {
        let ops = vec![UpdateOp::Add(WRITES.into(), 1)];
        return Write::Update { key, ops, condition: Condition::equals(BYTES, bytes) };
    }
    tracing::warn!(index = %key.sk, "a module's version index is full; its reads query the versions");
    let mut attrs = Map::new();
    attrs.insert(COMPLETE.into(), false.into());
    attrs.insert(BYTES.into(), OVERFLOWED.into());
    attrs.insert(WRITES.into(), (seen + 1).into());
    Write::Put { item: Item::new(key, attrs), condition: Condition::Below(WRITES.into(), seen + 1) }
}

fn grows_an_index(write: &Write) -> bool {
    matches!(write, Write::Update { key, condition: Condition::Below(..), .. } if keys::is_version_index(key))
}

/// The entries of a complete index, lowest version first in SemVer order; `None` when the index
/// is absent or incomplete.
pub(super) fn entries(index: Option<&Item>) -> Result<Option<Vec<VersionStatus>>> {
    let Some(index) = index.filter(|item| item.attrs.get(COMPLETE) == Some(&Value::Bool(true))) else {
        return Ok(None);
    };
    let mut entries = Vec::new();
    for (name, value) in &index.attrs {
        if name.starts_with(ENTRY_PREFIX) {
            entries.push(serde_json::from_value::<VersionStatus>(value.clone()).map_err(StoreError::backend)?);
        }
    }
    sort(&mut entries);
    Ok(Some(entries))
}

/// Lowest first in SemVer order.
pub(super) fn sort(entries: &mut [VersionStatus]) {
    entries.sort_by_cached_key(|status| semver::Version::parse(&status.version).ok());
}

/// Makes the index at `key` hold `statuses` (just queried) and be complete, if they fit and no
/// write touched the index since `index` (what was read of it before the query) was read.
/// Best effort: a read that loses the race, or a module too large, keeps querying.
pub(super) async fn repair(store: &dyn ItemStore, key: Key, index: Option<&Item>, statuses: &[VersionStatus]) {
    let seen = number(index, WRITES).unwrap_or(0);
    let mut attrs = Map::new();
    let mut bytes = 0;
    for status in statuses {
        let name = entry_name(&status.version);
        bytes += size(&name, status);
        let Ok(value) = serde_json::to_value(status) else { return };
        attrs.insert(name, value);
    }
    if bytes > BUDGET {
        return;
    }
    attrs.insert(COMPLETE.into(), true.into());
    attrs.insert(WRITES.into(), seen.into());
    attrs.insert(BYTES.into(), bytes.into());
    match store.put(Item::new(key, attrs), Condition::Below(WRITES.into(), seen + 1)).await {
        Err(e) if !e.is_condition_failed() => tracing::warn!(error = %e, "a module's version index was not repaired"),
        _ => {}
    }
}

/// A numeric attribute of the index as read.
fn number(index: Option<&Item>, name: &str) -> Option<i64> {
    index.and_then(|item| item.attrs.get(name)).and_then(Value::as_i64)
}

fn entry_name(version: &str) -> String {
    format!("{ENTRY_PREFIX}{}", precedence(version))
}

/// What an entry adds to the item: its attribute's name and its value as JSON, near enough to
/// DynamoDB's own count for a budget that leaves a quarter of the item free.
fn size(name: &str, entry: &VersionStatus) -> i64 {
    let value = serde_json::to_vec(entry).map_or(0, |json| json.len());
    (name.len() + value) as i64
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    fn entry(version: &str, error_len: usize) -> VersionStatus {
        VersionStatus {
            version: version.into(),
            status: "reg_ingress_failed".into(),
            error: Some("e".repeat(error_len)),
            published_at: None,
            deprecation: None,
            revocation: None,
        }
    }

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("hangar.db")).unwrap();
        (dir, store)
    }

    async fn index(store: &SqliteStore) -> Option<Item> {
        store.get(&key("org-1", "vpc", "aws")).await.unwrap()
    }

    #[tokio::test]
    async fn entries_past_the_budget_mark_the_index_overflowed_and_nothing_fails() {
        let (_dir, store) = store();
        store.transact(vec![created("org-1", "vpc", "aws")]).await.unwrap();
        let big = 20 * 1024;
        let fitting = (BUDGET / (big as i64 + 40)) as usize;
        for n in 0..fitting {
            let write = change(key("org-1", "vpc", "aws"), None, &entry(&format!("1.0.{n}"), big)).unwrap();
            transact(&store, vec![write]).await.unwrap();
        }
        let held = entries(index(&store).await.as_ref()).unwrap().expect("still complete");
        assert_eq!(held.len(), fitting);
        assert_eq!(held[2].version, "1.0.2", "SemVer order, not the attributes' order");

        let write = change(key("org-1", "vpc", "aws"), None, &entry("2.0.0", big)).unwrap();
        transact(&store, vec![write]).await.expect("the write itself succeeds");
        let marker = index(&store).await;
        assert_eq!(entries(marker.as_ref()).unwrap(), None, "overflowed: reads query instead");
        assert!(marker.unwrap().attrs.len() <= 3, "the entries are dropped, so later writes stay cheap");
        // Later writes, growing or shrinking, still succeed, and leave it overflowed and small.
        let write = change(key("org-1", "vpc", "aws"), None, &entry("2.0.1", 10)).unwrap();
        transact(&store, vec![write]).await.unwrap();
        transact(&store, vec![removal(key("org-1", "vpc", "aws"), &entry("1.0.0", big))]).await.unwrap();
        let write = change(key("org-1", "vpc", "aws"), None, &entry("2.0.2", 10)).unwrap();
        transact(&store, vec![write]).await.unwrap();
        let marker = index(&store).await;
        assert_eq!(entries(marker.as_ref()).unwrap(), None);
        assert_eq!(marker.unwrap().attrs.get("writes"), Some(&Value::from(fitting as i64 + 4)), "every write counted");
    }

    #[tokio::test]
    async fn a_repair_never_overwrites_a_write_it_did_not_see() {
        let (_dir, store) = store();
        let key = key("org-1", "vpc", "aws");
        // An index that predates the module's last write: absent, as for modules stored before it.
        let seen = index(&store).await;
        let write = change(key.clone(), None, &entry("1.1.0", 0)).unwrap();
        transact(&store, vec![write]).await.unwrap();
        assert_eq!(entries(index(&store).await.as_ref()).unwrap(), None, "a write alone does not complete it");
        repair(&store, key.clone(), seen.as_ref(), &[entry("1.0.0", 0)]).await;
        assert_eq!(entries(index(&store).await.as_ref()).unwrap(), None, "the stale repair lost");

        let seen = index(&store).await;
        repair(&store, key.clone(), seen.as_ref(), &[entry("1.0.0", 0), entry("1.1.0", 0)]).await;
        let held = entries(index(&store).await.as_ref()).unwrap().expect("repaired");
        assert_eq!(held.iter().map(|e| e.version.as_str()).collect::<Vec<_>>(), ["1.0.0", "1.1.0"]);
        transact(&store, vec![removal(key.clone(), &entry("1.0.0", 0))]).await.unwrap();
        let held = entries(index(&store).await.as_ref()).unwrap().expect("still complete");
        assert_eq!(held.len(), 1);
    }

    #[tokio::test]
    async fn a_repair_of_more_than_the_budget_leaves_the_index_incomplete() {
        let (_dir, store) = store();
        let many: Vec<VersionStatus> = (0..5).map(|n| entry(&format!("1.0.{n}"), 20 * 1024)).collect();
        repair(&store, key("org-1", "vpc", "aws"), None, &many).await;
        assert_eq!(entries(index(&store).await.as_ref()).unwrap(), None);
    }
}
