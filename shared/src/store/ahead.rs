//! Items read ahead of the code that wants them, in an earlier call's batch (a request's token
//! read together with the organization's items it guessed it would need): a view of the store
//! that answers reads of keys it holds from them, each once (an item read ahead is handed over,
//! not copied), and everything else from the store. A key written through the view is read from
//! the store again.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Condition, Item, ItemStore, Key, Page, Query, Store, StoreError, UpdateOp, Write};

/// The store, with `items` read ahead.
pub struct ReadAhead {
    store: Store,
    items: Mutex<HashMap<Key, Option<Item>>>,
}

impl ReadAhead {
    pub fn new(store: Store, items: impl IntoIterator<Item = (Key, Option<Item>)>) -> Self {
        Self { store, items: Mutex::new(items.into_iter().collect()) }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Option<Item>>> {
        self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn forget(&self, key: &Key) {
        self.held().remove(key);
    }
}

impl std::fmt::Debug for ReadAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadAhead").field("keys", &self.held().keys().collect::<Vec<_>>()).finish()
    }
}

#[async_trait]
impl ItemStore for ReadAhead {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        let held = self.held().remove(key);
        match held {
            Some(item) => Ok(item),
            None => self.store.get(key).await,
        }
    }

    /// From the items read ahead when it holds every key (each key once), else all from the store
    /// (one call either way).
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        let held = {
            let mut items = self.held();
            match keys.iter().all(|key| items.contains_key(key)) {
                true => keys.iter().map(|key| items.remove(key)).collect::<Option<Vec<_>>>(),
                false => None,
            }
        };
        match held {
            Some(items) => Ok(items),
            None => self.store.get_many(keys).await,
        }
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        self.forget(&item.key);
        self.store.put(item, condition).await
    }

    async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError> {
        self.forget(key);
        self.store.update(key, ops, condition).await
    }

    async fn delete(&self, key: &Key, condition: Condition) -> Result<Option<Item>, StoreError> {
        self.forget(key);
        self.store.delete(key, condition).await
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.store.query(query).await
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        for write in &writes {
            self.forget(write.key());
        }
        self.store.transact(writes).await
    }
}
