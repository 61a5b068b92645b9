//! A store adapter that counts what each request costs: items read and written, as DynamoDB
//! bills them (a query costs the items it returns; a transaction, each of its writes), the calls
//! (a BatchGetItem or a transaction is one; calls made in parallel each count), and the
//! sequential round trips (calls made while another is in flight share its round trip), which is
//! what a request waits for on DynamoDB.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use hangar::store::{Condition, Item, ItemStore, Key, Page, Query, Store, StoreError, UpdateOp, Write};

#[derive(Debug, Default)]
pub struct Counters {
    calls: AtomicU64,
    rounds: AtomicU64,
    in_flight: AtomicU64,
    items_read: AtomicU64,
    items_written: AtomicU64,
}

/// What was counted between two snapshots. Counts of requests made one at a time: calls of
/// requests made at once would share round trips.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub calls: u64,
    pub rounds: u64,
    pub items_read: u64,
    pub items_written: u64,
}

impl Counters {
    pub fn snapshot(&self) -> Cost {
        Cost {
            calls: self.calls.load(Ordering::Relaxed),
            rounds: self.rounds.load(Ordering::Relaxed),
            items_read: self.items_read.load(Ordering::Relaxed),
            items_written: self.items_written.load(Ordering::Relaxed),
        }
    }

    /// Marks a call in flight until the guard drops: a call that starts when none is in flight
    /// starts a round trip. The yield lets calls joined with this one (`join!`) start before it
    /// ends, as they would on DynamoDB, where the embedded store answers reads without waiting.
    async fn begin(&self) -> InFlight<'_> {
        if self.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            self.rounds.fetch_add(1, Ordering::Relaxed);
        }
        // Made before the yield, so a call dropped there is not left in flight.
        let in_flight = InFlight(self);
        tokio::task::yield_now().await;
        in_flight
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
            rounds: self.rounds - earlier.rounds,
            items_read: self.items_read - earlier.items_read,
            items_written: self.items_written - earlier.items_written,
        }
    }
}

struct InFlight<'a>(&'a Counters);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
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
        let _in_flight = self.counters.begin().await;
        let found = self.inner.get(key).await;
        self.counters.count(1, 0);
        found
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        let _in_flight = self.counters.begin().await;
        let found = self.inner.get_many(keys).await;
        self.counters.count(keys.len(), 0);
        found
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        let _in_flight = self.counters.begin().await;
        self.counters.count(0, 1);
        self.inner.put(item, condition).await
    }

    async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError> {
        let _in_flight = self.counters.begin().await;
        self.counters.count(0, 1);
        self.inner.update(key, ops, condition).await
    }

    async fn delete(&self, key: &Key, condition: Condition) -> Result<Option<Item>, StoreError> {
        let _in_flight = self.counters.begin().await;
        self.counters.count(0, 1);
        self.inner.delete(key, condition).await
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        let _in_flight = self.counters.begin().await;
        let page = self.inner.query(query).await?;
        // DynamoDB bills at least one read for a query that finds nothing.
        self.counters.count(page.items.len().max(1), 0);
        Ok(page)
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        let _in_flight = self.counters.begin().await;
        self.counters.count(0, writes.len());
        self.inner.transact(writes).await
    }
}
