//! The item-store port: DynamoDB's own primitives (get, conditional put / update / delete,
//! partition queries with a sort-key prefix and an opaque cursor, secondary-index queries,
//! all-or-nothing transactions, TTL), with two adapters: [`SqliteStore`] for local runs and
//! [`DynamoStore`] for AWS. Key strings are built in [`keys`] and nowhere else.

mod ahead;
pub mod collection_index;
mod condition;
mod dynamo;
pub mod keys;
pub mod owned;
pub mod pointer;
mod race;
pub mod schedule;
#[cfg(feature = "sqlite")]
mod sqlite;
mod transaction;
pub mod upload_claims;
/// Fair work queues: one turn per organization, leases, backoff, bounded runs.
pub mod work_queue;

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use serde::de::DeserializeSeed;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use ahead::ReadAhead;
pub use condition::Condition;
pub use dynamo::DynamoStore;
pub use race::{retry_on_race, RACE_ATTEMPTS};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use transaction::{Transaction, Writes};

/// The attributes of an item, as a JSON object (numbers, strings, booleans, nulls, lists, maps).
pub type Attrs = Map<String, Value>;

/// Attribute names the adapters reserve for keys and expiry; domain attributes never use them.
pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const TTL: &str = "expires_at";

/// The primary key of an item.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Key {
    pub pk: String,
    pub sk: String,
}

impl Key {
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Self { pk: pk.into(), sk: sk.into() }
    }
}

/// The secondary indexes of the table. Each projects all attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Index {
    Gsi1,
    Gsi2,
}

impl Index {
    pub const ALL: [Index; 2] = [Index::Gsi1, Index::Gsi2];

    pub fn name(self) -> &'static str {
        match self {
            Index::Gsi1 => "GSI1",
            Index::Gsi2 => "GSI2",
        }
    }

    /// The attribute names holding this index's partition and sort key.
    pub fn key_attrs(self) -> (&'static str, &'static str) {
        match self {
            Index::Gsi1 => ("GSI1PK", "GSI1SK"),
            Index::Gsi2 => ("GSI2PK", "GSI2SK"),
        }
    }
}

/// One stored item: its key and its attributes (which may include index keys and the TTL).
///
/// An item the embedded store read holds its attributes as the JSON text it found, and
/// [`Item::parse`] reads the caller's type straight from that text: building a map first and
/// then reading the type from the map cost most of a warm request's reads (BENCHMARKS.md,
/// "Warm requests"). The map is built only for code that asks for it ([`Item::attrs`]), which
/// is why asking can fail: the text is parsed then.
#[derive(Debug, Clone)]
pub struct Item {
    pub key: Key,
    /// The attributes, unless `json` holds them still unparsed.
    attrs: Attrs,
    /// A JSON object, as the embedded store read it. Only there: the functions, built without
    /// it, carry no code for items read as text.
    #[cfg(feature = "sqlite")]
    json: Option<Box<str>>,
}

impl Item {
    pub fn new(key: Key, attrs: Attrs) -> Self {
        Self {
            key,
            attrs,
            #[cfg(feature = "sqlite")]
            json: None,
        }
    }

    /// An item read as the text of a JSON object, parsed when asked.
    #[cfg(feature = "sqlite")]
    pub(crate) fn stored(key: Key, json: &str) -> Self {
        Self { key, attrs: Attrs::new(), json: Some(json.into()) }
    }

    /// Builds an item from any serializable value whose JSON form is an object.
    pub fn from_value<T: Serialize>(key: Key, value: &T) -> Result<Self, StoreError> {
        match serde_json::to_value(value).map_err(StoreError::backend)? {
            Value::Object(attrs) => Ok(Self::new(key, attrs)),
            other => Err(StoreError::Backend(format!("item body must be an object, got {other}"))),
        }
    }

    /// Places the item in a secondary index under the given partition and sort key.
    pub fn with_index(mut self, index: Index, pk: impl Into<String>, sk: impl Into<String>) -> Self {
        let (pk_attr, sk_attr) = index.key_attrs();
        self.set(pk_attr, Value::String(pk.into()));
        self.set(sk_attr, Value::String(sk.into()));
        self
    }

    /// Makes the item expire (vanish from reads) at the given unix time in seconds.
    pub fn with_ttl(mut self, expires_at: i64) -> Self {
        self.set(TTL, Value::from(expires_at));
        self
    }

    /// Sets an attribute of an item being built. On a read item whose text is not a JSON
    /// object nothing can be set, and every later use of the item (a read, a write) fails.
    pub(crate) fn set(&mut self, name: &str, value: Value) {
        if let Ok(attrs) = self.attrs_mut() {
            attrs.insert(name.to_owned(), value);
        }
    }

    /// Deserializes the attributes, as a struct or a map, where they are: from the text read,
    /// or from the map without a copy of it (index keys and TTL are ignored by `T` unless it
    /// names them).
    pub fn parse<T: for<'de> Deserialize<'de>>(&self) -> Result<T, StoreError> {
        match self.text() {
            Some(json) => serde_json::from_str(json).map_err(StoreError::backend),
            None => T::deserialize(&self.attrs).map_err(StoreError::backend),
        }
    }

    /// The attributes' text, when they are held unparsed.
    fn text(&self) -> Option<&str> {
        #[cfg(feature = "sqlite")]
        return self.json.as_deref();
        #[cfg(not(feature = "sqlite"))]
        None
    }

    /// Deserializes the attributes with `seed`, as [`Item::parse`] does: for a reader that
    /// picks what it needs from them in one pass.
    pub fn parse_seed<'a, S: DeserializeSeed<'a>>(&'a self, seed: S) -> Result<S::Value, StoreError> {
        match self.text() {
            Some(json) => {
                let mut json = serde_json::Deserializer::from_str(json);
                let value = seed.deserialize(&mut json).map_err(StoreError::backend)?;
                json.end().map_err(StoreError::backend)?;
                Ok(value)
            }
            None => seed.deserialize(&self.attrs).map_err(StoreError::backend),
        }
    }

    /// The attributes as a map: borrowed when the item holds one, parsed from the text read
    /// otherwise.
    pub fn attrs(&self) -> Result<Cow<'_, Attrs>, StoreError> {
        match self.text() {
            Some(_) => self.parse().map(Cow::Owned),
            None => Ok(Cow::Borrowed(&self.attrs)),
        }
    }

    /// The attributes as a map to change, parsed first from the text read.
    pub fn attrs_mut(&mut self) -> Result<&mut Attrs, StoreError> {
        #[cfg(feature = "sqlite")]
        if self.json.is_some() {
            self.attrs = self.parse()?;
            self.json = None;
        }
        Ok(&mut self.attrs)
    }

    pub fn into_attrs(self) -> Result<Attrs, StoreError> {
        match self.text() {
            Some(json) => serde_json::from_str(json).map_err(StoreError::backend),
            None => Ok(self.attrs),
        }
    }

    /// One attribute, read as `T`; `None` when the item has none of that name, or a null.
    pub fn attr<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<Option<T>, StoreError> {
        match self.attrs()?.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => T::deserialize(value).map(Some).map_err(StoreError::backend),
        }
    }

    /// A counter attribute: absent, null or below zero reads as 0.
    pub fn count(&self, name: &str) -> Result<usize, StoreError> {
        Ok(self.attr::<i64>(name)?.and_then(|count| usize::try_from(count).ok()).unwrap_or(0))
    }

    /// The partition and sort key under which the item is in a secondary index, if it is.
    pub fn index_key(&self, index: Index) -> Result<Option<(String, String)>, StoreError> {
        Ok(index_key(&*self.attrs()?, index).map(|(pk, sk)| (pk.to_owned(), sk.to_owned())))
    }

    /// Whether the TTL has passed: an expired item reads as absent even before the store
    /// physically removes it (DynamoDB takes up to days to do so).
    pub fn is_expired(&self, now: i64) -> Result<bool, StoreError> {
        Ok(expires_at(&*self.attrs()?).is_some_and(|at| at <= now))
    }
}

/// Two items are equal when their keys and attributes are, however each holds them; an item
/// whose text does not parse equals no other.
impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
            && match (self.attrs(), other.attrs()) {
                (Ok(ours), Ok(theirs)) => ours == theirs,
                _ => false,
            }
    }
}

/// The partition and sort key the attributes place an item under in a secondary index.
pub(crate) fn index_key(attrs: &Attrs, index: Index) -> Option<(&str, &str)> {
    let (pk_attr, sk_attr) = index.key_attrs();
    Some((attrs.get(pk_attr)?.as_str()?, attrs.get(sk_attr)?.as_str()?))
}

/// When the attributes say the item expires (unix seconds), if they do.
pub(crate) fn expires_at(attrs: &Attrs) -> Option<i64> {
    attrs.get(TTL).and_then(Value::as_i64)
}

/// One change of an update, applied in order to the stored attributes.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateOp {
    Set(String, Value),
    Remove(String),
    /// Adds to a numeric attribute, treating a missing one as 0.
    Add(String, i64),
}

impl UpdateOp {
    pub fn set(name: impl Into<String>, value: impl Into<Value>) -> Self {
        UpdateOp::Set(name.into(), value.into())
    }

    /// Moves the item within a secondary index's partition: a new sort key there.
    pub fn set_index_sort_key(index: Index, sort_key: impl Into<String>) -> Self {
        UpdateOp::Set(index.key_attrs().1.into(), Value::String(sort_key.into()))
    }
}

/// One write of a transaction.
#[derive(Debug, Clone)]
pub enum Write {
    Put {
        item: Item,
        condition: Condition,
    },
    Update {
        key: Key,
        ops: Vec<UpdateOp>,
        condition: Condition,
    },
    Delete {
        key: Key,
        condition: Condition,
    },
    /// Writes nothing; the transaction fails unless the condition holds.
    Check {
        key: Key,
        condition: Condition,
    },
}

impl Write {
    pub fn key(&self) -> &Key {
        match self {
            Write::Put { item, .. } => &item.key,
            Write::Update { key, .. } | Write::Delete { key, .. } | Write::Check { key, .. } => key,
        }
    }
}

/// A query on one partition of the table or of a secondary index.
#[derive(Debug, Clone)]
pub struct Query {
    pub index: Option<Index>,
    pub partition: String,
    pub sk_prefix: String,
    pub limit: usize,
    pub reverse: bool,
    pub cursor: Option<Cursor>,
}

impl Query {
    /// All items of a table partition whose sort key starts with `sk_prefix`, in sort order.
    pub fn partition(partition: impl Into<String>, sk_prefix: impl Into<String>) -> Self {
        Self {
            index: None,
            partition: partition.into(),
            sk_prefix: sk_prefix.into(),
            limit: 100,
            reverse: false,
            cursor: None,
        }
    }

    /// The same on a secondary index's partition.
    pub fn index(index: Index, partition: impl Into<String>, sk_prefix: impl Into<String>) -> Self {
        Self { index: Some(index), ..Self::partition(partition, sk_prefix) }
    }

    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit.max(1);
        self
    }

    pub fn reverse(mut self, reverse: bool) -> Self {
        self.reverse = reverse;
        self
    }

    pub fn after(mut self, cursor: Option<Cursor>) -> Self {
        self.cursor = cursor;
        self
    }
}

/// A page of query results; `next` resumes after the last item when there may be more.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Item>,
    pub next: Option<Cursor>,
}

/// An opaque position in a query's results. Callers pass it back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor(String);

impl Cursor {
    pub(crate) fn encode(position: &Map<String, Value>) -> Self {
        let json = serde_json::to_vec(position).expect("a JSON map always serializes");
        Cursor(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json))
    }

    pub(crate) fn decode(&self) -> Result<Map<String, Value>, StoreError> {
        let bytes =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&self.0).map_err(|_| StoreError::InvalidCursor)?;
        serde_json::from_slice(&bytes).map_err(|_| StoreError::InvalidCursor)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn from_string(raw: String) -> Self {
        Cursor(raw)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The condition of a single write, or of the write at `write` in a transaction, failed.
    #[error("condition failed")]
    ConditionFailed { write: Option<usize> },
    #[error("invalid page cursor")]
    InvalidCursor,
    #[error("transaction too large: {0} writes (at most 100)")]
    TooManyWrites(usize),
    #[error("store throttled the request")]
    Throttled,
    #[error("store error: {0}")]
    Backend(String),
}

impl StoreError {
    pub fn backend(e: impl std::fmt::Display) -> Self {
        StoreError::Backend(e.to_string())
    }

    /// What kind of failure it is: a throttle is worth a retry shortly; a cursor the caller
    /// sent is the request's fault; a condition that escapes to the caller, or anything else, is
    /// Hangar's own.
    pub fn kind(&self) -> crate::errors::Kind {
        use crate::errors::Kind;
        match self {
            StoreError::Throttled => Kind::Unavailable,
            StoreError::InvalidCursor => Kind::BadRequest,
            StoreError::ConditionFailed { .. } | StoreError::TooManyWrites(_) | StoreError::Backend(_) => {
                Kind::Internal
            }
        }
    }

    pub fn is_condition_failed(&self) -> bool {
        matches!(self, StoreError::ConditionFailed { .. })
    }
}

/// The most writes one transaction may hold (DynamoDB's limit).
pub const MAX_TRANSACTION_WRITES: usize = 100;

/// The port. Reads are strongly consistent on the table and eventually consistent on indexes
/// (as DynamoDB's), and never return expired items.
#[async_trait]
pub trait ItemStore: Send + Sync + 'static {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError>;

    /// Reads many items in as few calls as the backend allows (DynamoDB's BatchGetItem); the
    /// answer holds one entry per key, in `keys`' order.
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError>;

    /// Puts the item (replacing any) if `condition` holds on the stored one.
    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError>;

    /// Applies `ops` (creating the item if absent) if `condition` holds; returns the new item.
    async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError>;

    /// Deletes the item if `condition` holds; returns what was deleted.
    async fn delete(&self, key: &Key, condition: Condition) -> Result<Option<Item>, StoreError>;

    async fn query(&self, query: Query) -> Result<Page, StoreError>;

    /// Applies every write or none; at most [`MAX_TRANSACTION_WRITES`], one per key.
    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError>;
}

/// The store as handed around the application.
pub type Store = Arc<dyn ItemStore>;

/// Reads every item of a query, page by page. For bounded sets only (a cascade, a test).
pub async fn query_all(store: &dyn ItemStore, mut query: Query) -> Result<Vec<Item>, StoreError> {
    let mut items = Vec::new();
    loop {
        let page = store.query(query.clone()).await?;
        items.extend(page.items);
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => return Ok(items),
        }
    }
}

/// Reads every item of a query, parsed as `T`.
pub async fn query_all_as<T: for<'de> Deserialize<'de>>(
    store: &dyn ItemStore,
    query: Query,
) -> Result<Vec<T>, StoreError> {
    parse_all(&query_all(store, query).await?)
}

/// Parses items as `T`, failing on the first that does not parse.
pub fn parse_all<T: for<'de> Deserialize<'de>>(items: &[Item]) -> Result<Vec<T>, StoreError> {
    items.iter().map(Item::parse).collect()
}

pub(crate) fn now_epoch() -> i64 {
    chrono::Utc::now().timestamp()
}

pub(crate) fn validate_transaction(writes: &[Write]) -> Result<(), StoreError> {
    if writes.len() > MAX_TRANSACTION_WRITES {
        return Err(StoreError::TooManyWrites(writes.len()));
    }
    let mut seen = std::collections::HashSet::new();
    for write in writes {
        if !seen.insert(write.key()) {
            return Err(StoreError::Backend(format!(
                "a transaction touches {}/{} twice",
                write.key().pk,
                write.key().sk
            )));
        }
    }
    Ok(())
}

/// Applies update operations to attributes, as DynamoDB's SET / REMOVE / ADD would.
#[cfg(feature = "sqlite")]
pub(crate) fn apply_ops(attrs: &mut Attrs, ops: &[UpdateOp]) -> Result<(), StoreError> {
    for op in ops {
        match op {
            UpdateOp::Set(name, value) => {
                attrs.insert(name.clone(), value.clone());
            }
            UpdateOp::Remove(name) => {
                attrs.remove(name);
            }
            UpdateOp::Add(name, delta) => {
                let current = match attrs.get(name) {
                    None => 0,
                    Some(v) => {
                        v.as_i64().ok_or_else(|| StoreError::Backend(format!("ADD on non-numeric attribute {name}")))?
                    }
                };
                attrs.insert(name.clone(), Value::from(current + delta));
            }
        }
    }
    Ok(())
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Record {
        name: String,
        count: u64,
    }

    fn built() -> Item {
        let attrs = serde_json::from_value(json!({"name": "a", "count": 2, "extra": [1]})).unwrap();
        Item::new(Key::new("P", "S"), attrs)
    }

    #[test]
    fn an_item_read_as_text_reads_as_the_same_item_built_as_a_map() {
        let read = Item::stored(Key::new("P", "S"), r#"{"name":"a","count":2,"extra":[1]}"#);
        assert_eq!(read.parse::<Record>().unwrap(), built().parse::<Record>().unwrap());
        assert_eq!(read, built());
        assert_eq!(read.attr::<u64>("count").unwrap(), Some(2));
        assert_eq!(read.attr::<u64>("absent").unwrap(), None);
        let unset = Item::stored(Key::new("P", "S"), r#"{"sealed":null,"below":-2}"#);
        assert_eq!(unset.attr::<String>("sealed").unwrap(), None, "a null reads as no value");
        assert_eq!(
            (unset.count("below").unwrap(), unset.count("absent").unwrap(), read.count("count").unwrap()),
            (0, 0, 2)
        );
        let mut changed = read.clone().with_ttl(10);
        changed.attrs_mut().unwrap().remove("extra");
        assert_eq!(changed.attrs().unwrap().get(TTL), Some(&json!(10)));
        assert!(changed.is_expired(10).unwrap() && !read.is_expired(10).unwrap());
        assert_eq!(changed.into_attrs().unwrap().len(), 3);
    }

    #[test]
    fn text_that_is_not_an_object_fails_every_use_and_equals_nothing() {
        let broken = Item::stored(Key::new("P", "S"), "{\"name\":");
        assert!(broken.parse::<Record>().is_err());
        assert!(broken.attrs().is_err() && broken.attr::<u64>("count").is_err());
        assert!(broken.index_key(Index::Gsi1).is_err() && broken.is_expired(0).is_err());
        assert_ne!(broken, broken.clone());
        // An attribute set on it is not kept quietly: the item still fails when written.
        let mut set = broken.with_ttl(5);
        assert!(set.attrs_mut().is_err() && set.into_attrs().is_err());
        let list = Item::stored(Key::new("P", "S"), "[1]");
        assert!(list.attrs().is_err());
    }
}
