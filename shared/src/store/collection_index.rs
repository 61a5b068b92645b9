//! A collection index: one item holding an entry per member of a collection (a module's
//! versions, a pool's live agents), one attribute each, so that a read fetches them by key, in
//! the same BatchGetItem as their owner, instead of by a query beside it (which no batch can
//! hold).
//!
//! The members' own items stay the truth; every write that changes a member's entry changes the
//! index in the same transaction, with a blind attribute update (`SET`/`REMOVE` of that entry's
//! attribute, `ADD writes 1`), so writers of distinct members never contend on it.
//!
//! The index is trusted only while `complete`: a new owner's is made complete and empty; one
//! stored before its index existed has none, and one whose entries outgrew [`BUDGET`] is replaced
//! by an overflowed marker. Reads of an incomplete index query the members and [`repair`] it when
//! they fit, conditional on no write having touched it since it was read.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Serialize;
use serde_json::{Map, Value};

use super::{Attrs, Condition, Item, ItemStore, Key, StoreError, Transaction, UpdateOp, Write, Writes};

/// The attributes of the index item besides its entries.
const COMPLETE: &str = "complete";
const WRITES: &str = "writes";
const BYTES: &str = "bytes";

/// How many bytes of entries an index holds at most: a few hundred module versions, far under
/// DynamoDB's 400 KB item limit (with room for writes racing past the check), and small enough
/// that rewriting it in every member's transaction stays cheap (DynamoDB bills an update by the
/// item's whole size).
pub const BUDGET: i64 = 64 * 1024;
/// What `bytes` is set to once the index overflowed: every later growth fails its check.
const OVERFLOWED: i64 = 1 << 40;

/// The complete, empty index of a new owner.
pub fn created(key: Key) -> Write {
    let mut attrs = Map::new();
    attrs.insert(COMPLETE.into(), true.into());
    attrs.insert(WRITES.into(), 0.into());
    attrs.insert(BYTES.into(), 0.into());
    Write::Put { item: Item::new(key, attrs), condition: Condition::Always }
}

/// The index's share of a write that sets the entry `name` to `after` (`before` is what the
/// entry was, if any). It grows the index only while it stays within [`BUDGET`]; past it the
/// write fails, and [`transact`] marks the index overflowed instead.
pub fn change<T: Serialize>(index: Key, name: String, before: Option<&T>, after: &T) -> Result<Write, StoreError> {
    let delta = size(&name, after) - before.map_or(0, |entry| size(&name, entry));
    let value = serde_json::to_value(after).map_err(StoreError::backend)?;
    let ops = vec![UpdateOp::Set(name, value), UpdateOp::Add(WRITES.into(), 1), UpdateOp::Add(BYTES.into(), delta)];
    let condition = if delta > 0 { Condition::Below(BYTES.into(), BUDGET - delta + 1) } else { Condition::Always };
    Ok(Write::Update { key: index, ops, condition })
}

/// The index's share of a write that removes the entry `name`, which was `before`.
pub fn removal<T: Serialize>(index: Key, name: String, before: &T) -> Write {
    let delta = -size(&name, before);
    let ops = vec![UpdateOp::Remove(name), UpdateOp::Add(WRITES.into(), 1), UpdateOp::Add(BYTES.into(), delta)];
    Write::Update { key: index, ops, condition: Condition::Always }
}

/// Commits `transaction`. When an index's share fails because the index is full (or already
/// overflowed), the index is read and the transaction committed again with, in that share's
/// place, the index replaced by a small overflowed marker (its entries dropped, so later writes
/// stay cheap) or, once it is one, only counted: its reads query the members from then on.
/// Either is conditional on the index as read, so a racing writer makes it read again. Every
/// write keeps its place, so the caller's handles name the same writes in what fails.
pub async fn transact(store: &dyn ItemStore, mut transaction: Transaction) -> Result<(), StoreError> {
    let Some(at) = transaction.writes.iter().position(grows_an_index) else {
        return transaction.commit(store).await;
    };
    let index_share = Writes { start: at, end: at + 1 };
    let mut attempts = 0;
    loop {
        match transaction.clone().commit(store).await {
            Err(e) if e.failed_on(index_share) && attempts < 5 => {
                attempts += 1;
                let key = transaction.writes[at].key().clone();
                let index = store.get(&key).await?;
                let attrs = index.as_ref().map(Item::attrs).transpose()?;
                transaction.replace(index_share, overflowed(key, attrs.as_deref()));
            }
            other => return other,
        }
    }
}

/// The write that leaves the index at `key` overflowed, given what was just read of it.
fn overflowed(key: Key, index: Option<&Attrs>) -> Write {
    let seen = number(index, WRITES).unwrap_or(0);
    // A marker's count of bytes only ever falls by what removals take from it.
    if let Some(bytes) = number(index, BYTES).filter(|&bytes| bytes > OVERFLOWED / 2) {
        let ops = vec![UpdateOp::Add(WRITES.into(), 1)];
        return Write::Update { key, ops, condition: Condition::equals(BYTES, bytes) };
    }
    tracing::warn!(index = %key.sk, "a collection index is full; its reads query the members");
    let mut attrs = Map::new();
    attrs.insert(COMPLETE.into(), false.into());
    attrs.insert(BYTES.into(), OVERFLOWED.into());
    attrs.insert(WRITES.into(), (seen + 1).into());
    Write::Put { item: Item::new(key, attrs), condition: Condition::Below(WRITES.into(), seen + 1) }
}

/// Whether `write` is an index's share that grows it ([`change`] with a positive delta).
fn grows_an_index(write: &Write) -> bool {
    match write {
        Write::Update { ops, condition: Condition::Below(attr, _), .. } => {
            attr == BYTES && ops.iter().any(|op| matches!(op, UpdateOp::Add(name, 1) if name == WRITES))
        }
        _ => false,
    }
}

/// The entries of a complete index whose names start with `prefix`, in no particular order;
/// `None` when the index is absent or incomplete.
pub fn entries<T: DeserializeOwned>(index: Option<&Item>, prefix: &str) -> Result<Option<Vec<T>>, StoreError> {
    let Some(index) = index else { return Ok(None) };
    match index.parse_seed(Entries { prefix, entry: PhantomData::<T> }) {
        Ok((complete, entries)) => Ok(complete.then_some(entries)),
        // An entry that does not read as `T` matters in a complete index only: an incomplete one
        // is not trusted anyway (its reader queries the members and repairs it).
        Err(e) => match index.attr::<Value>(COMPLETE)? {
            Some(Value::Bool(true)) => Err(e),
            _ => Ok(None),
        },
    }
}

/// Reads an index's attributes in one pass: whether it is complete, and each entry whose name
/// starts with `prefix` as a `T`; the rest is skipped, not built.
struct Entries<'p, T> {
    prefix: &'p str,
    entry: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Entries<'_, T> {
    type Value = (bool, Vec<T>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Entries<'_, T> {
    type Value = (bool, Vec<T>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a collection index's attributes")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut attributes: A) -> Result<Self::Value, A::Error> {
        let (mut complete, mut entries) = (false, Vec::new());
        while let Some(name) = attributes.next_key::<String>()? {
            if name == COMPLETE {
                complete = attributes.next_value::<Value>()? == Value::Bool(true);
            } else if name.starts_with(self.prefix) {
                entries.push(attributes.next_value::<T>()?);
            } else {
                attributes.next_value::<IgnoredAny>()?;
            }
        }
        Ok((complete, entries))
    }
}

/// Makes the index at `key` hold `entries` (named, just queried from the members) and be
/// complete, if they fit and no write touched the index since `index` (what was read of it
/// before the query) was read. Best effort: a read that loses the race, or a collection too
/// large, keeps querying.
pub async fn repair<T: Serialize>(store: &dyn ItemStore, key: Key, index: Option<&Item>, entries: Vec<(String, T)>) {
    let Ok(index) = index.map(Item::attrs).transpose() else { return };
    let seen = number(index.as_deref(), WRITES).unwrap_or(0);
    let mut attrs = Map::new();
    let mut bytes = 0;
    for (name, entry) in entries {
        bytes += size(&name, &entry);
        let Ok(value) = serde_json::to_value(entry) else { return };
        attrs.insert(name, value);
    }
    if bytes > BUDGET {
        return;
    }
    attrs.insert(COMPLETE.into(), true.into());
    attrs.insert(WRITES.into(), seen.into());
    attrs.insert(BYTES.into(), bytes.into());
    match store.put(Item::new(key, attrs), Condition::Below(WRITES.into(), seen + 1)).await {
        Err(e) if !e.is_condition_failed() => tracing::warn!(error = %e, "a collection index was not repaired"),
        _ => {}
    }
}

/// A numeric attribute of the index as read.
fn number(index: Option<&Attrs>, name: &str) -> Option<i64> {
    index.and_then(|attrs| attrs.get(name)).and_then(Value::as_i64)
}

/// What an entry adds to the item: its attribute's name and its value as JSON, near enough to
/// DynamoDB's own count for a budget that leaves a quarter of the item free.
fn size<T: Serialize>(name: &str, entry: &T) -> i64 {
    let value = serde_json::to_vec(entry).map_or(0, |json| json.len());
    (name.len() + value) as i64
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    const PREFIX: &str = "e#";

    fn entry(id: u32, len: usize) -> (String, String) {
        (format!("{PREFIX}{id}"), "e".repeat(len))
    }

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("hangar.db")).unwrap();
        (dir, store)
    }

    fn key() -> Key {
        Key::new("OWNER#1", "INDEX")
    }

    async fn index(store: &SqliteStore) -> Option<Item> {
        store.get(&key()).await.unwrap()
    }

    async fn held(store: &SqliteStore) -> Option<Vec<String>> {
        let mut held: Vec<String> = entries(index(store).await.as_ref(), PREFIX).unwrap()?;
        held.sort();
        Some(held)
    }

    fn set(id: u32, len: usize) -> Write {
        let (name, value) = entry(id, len);
        change(key(), name, None, &value).unwrap()
    }

    #[tokio::test]
    async fn an_entry_of_another_shape_fails_a_complete_index_only() {
        let (_dir, store) = store();
        for complete in [false, true] {
            let attrs =
                serde_json::from_value(serde_json::json!({"complete": complete, "e#1": "one", "e#2": 2})).unwrap();
            store.put(Item::new(key(), attrs), Condition::Always).await.unwrap();
            let read = entries::<String>(index(&store).await.as_ref(), PREFIX);
            match complete {
                false => assert!(matches!(read, Ok(None)), "incomplete: queried around, as before"),
                true => assert!(read.is_err(), "complete: the entry it cannot read is an error"),
            }
        }
    }

    #[tokio::test]
    async fn entries_past_the_budget_mark_the_index_overflowed_and_nothing_fails() {
        let (_dir, store) = store();
        store.transact(vec![created(key())]).await.unwrap();
        let big = 20 * 1024;
        let fitting = (BUDGET / (big as i64 + 40)) as u32;
        for n in 0..fitting {
            transact(&store, vec![set(n, big)].into()).await.unwrap();
        }
        assert_eq!(held(&store).await.expect("still complete").len(), fitting as usize);

        transact(&store, vec![set(99, big)].into()).await.expect("the write itself succeeds");
        let marker = index(&store).await;
        assert_eq!(held(&store).await, None, "overflowed: reads query instead");
        assert!(marker.unwrap().attrs().unwrap().len() <= 3, "the entries are dropped, so later writes stay cheap");
        // Later writes, growing or shrinking, still succeed, and leave it overflowed and small.
        transact(&store, vec![set(100, 10)].into()).await.unwrap();
        let (name, value) = entry(0, big);
        transact(&store, vec![removal(key(), name, &value)].into()).await.unwrap();
        transact(&store, vec![set(101, 10)].into()).await.unwrap();
        let marker = index(&store).await;
        assert_eq!(held(&store).await, None);
        assert_eq!(
            marker.unwrap().attrs().unwrap().get("writes"),
            Some(&Value::from(fitting as i64 + 4)),
            "every write counted"
        );
    }

    #[tokio::test]
    async fn a_repair_never_overwrites_a_write_it_did_not_see() {
        let (_dir, store) = store();
        // An index that predates the collection's last write: absent, as for owners stored before it.
        let seen = index(&store).await;
        transact(&store, vec![set(2, 1)].into()).await.unwrap();
        assert_eq!(held(&store).await, None, "a write alone does not complete it");
        repair(&store, key(), seen.as_ref(), vec![entry(1, 1)]).await;
        assert_eq!(held(&store).await, None, "the stale repair lost");

        let seen = index(&store).await;
        repair(&store, key(), seen.as_ref(), vec![entry(1, 1), entry(2, 1)]).await;
        assert_eq!(held(&store).await.expect("repaired").len(), 2);
        let (name, value) = entry(1, 1);
        transact(&store, vec![removal(key(), name, &value)].into()).await.unwrap();
        assert_eq!(held(&store).await.expect("still complete").len(), 1);
    }

    #[tokio::test]
    async fn a_repair_of_more_than_the_budget_leaves_the_index_incomplete() {
        let (_dir, store) = store();
        let many = (0..5).map(|n| entry(n, 20 * 1024)).collect();
        repair(&store, key(), None, many).await;
        assert_eq!(held(&store).await, None);
    }
}
