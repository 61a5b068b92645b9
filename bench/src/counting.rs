//! A store adapter that counts what each request costs: items read and written, as DynamoDB
//! bills them (a query costs the items it returns; a transaction, each of its writes).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use hangar::store::{Condition, Item, ItemStore, Key, Page, Query, Store, StoreError, UpdateOp, Write};

#[derive(Debug, Default)]
pub struct Counters {
    calls: AtomicU64,
    items_read: AtomicU64,
    items_written: AtomicU64,
}

/// What was counted between two snapshots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub calls: u64,
    pub items_read: u64,
    pub items_written: u64,
}

impl Counters {
    pub fn snapshot(&self) -> Cost {
        Cost {
            calls: self.calls.load(Ordering::Relaxed),
            items_read: self.items_read.load(Ordering::Relaxed),
            items_written: self.items_written.load(Ordering::Relaxed),
        }
    }

    fn count(&self, read: usize, written: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.items_read.fetch_add(read as u64, Ordering::Relaxed);
        self.items_written.fetch_add(written as u64, Ordering::Relaxed);
    }
}

impl std::ops::Sub for Cost {
    type Output = Cost;

    fn sub(self, earlier: Cost) -> Cost {
        Cost {
            calls: self.calls - earlier.calls,
            items_read: self.items_read - earlier.items_read,
            items_written: self.items_written - earlier.items_written,
        }
    }
}

pub struct CountingStore {
    inner: Store,
    pub counters: Arc<Counters>,
}

impl CountingStore {
    pub fn wrap(inner: Store) -> (Store, Arc<Counters>) {
        let counters = Arc::new(Counters::default());
        (Arc::new(CountingStore { inner, counters: counters.clone() }), counters)
    }
}

#[async_trait]
impl ItemStore for CountingStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        let found = self.inner.get(key).await;
        self.counters.count(1, 0);
        found
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        let found = self.inner.get_many(keys).await;
        self.counters.count(keys.len(), 0);
        found
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        self.counters.count(0, 1);
        self.inner.put(item, condition).await
    }

    async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError> {
        self.counters.count(0, 1);
        self.inner.update(key, ops, condition).await
    }

    async fn delete(&self, key: &Key, condition: Condition) -> Result<Option<Item>, StoreError> {
        self.counters.count(0, 1);
        self.inner.delete(key, condition).await
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        let page = self.inner.query(query).await?;
        // DynamoDB bills at least one read for a query that finds nothing.
        self.counters.count(page.items.len().max(1), 0);
        Ok(page)
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        self.counters.count(0, writes.len());
        self.inner.transact(writes).await
    }
}
