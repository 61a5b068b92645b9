//! Deleting an organization deletes everything it owns. Every owned item lives in the
//! organization's partition and names the items and archive it owns outside it
//! (`store::owned`), so the cascade is one strongly consistent walk of one partition, whatever
//! family wrote the items.

use crate::blobs::{BlobStore, ObjectId};
use crate::store::owned::owned_by;
use crate::store::{keys, Condition, ItemStore, Query, StoreError, Write, MAX_TRANSACTION_WRITES};

/// Deletes every item of the organization's partition but the organization item itself,
/// their satellites and their blobs. Safe to run again after an interruption.
pub async fn purge_partition(store: &dyn ItemStore, blobs: &dyn BlobStore, org_id: &str) -> Result<(), StoreError> {
    let org_key = keys::organization(org_id);
    let mut query: Query = keys::organization_partition(org_id).limit(MAX_TRANSACTION_WRITES / 4);
    loop {
        let page = store.query(query.clone()).await?;
        let mut writes = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for item in page.items.iter().filter(|item| item.key != org_key) {
            let (owned, blob) = owned_by(item)?;
            if let Some(id) = blob.as_deref().and_then(ObjectId::parse) {
                blobs.delete(&id).await.map_err(StoreError::backend)?;
            }
            let fresh = owned.into_iter().filter(|key| seen.insert(key.clone()));
            writes.extend(fresh.map(|key| Write::Delete { key, condition: Condition::Always }));
        }
        for chunk in writes.chunks(MAX_TRANSACTION_WRITES) {
            store.transact(chunk.to_vec()).await?;
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => return Ok(()),
        }
    }
}
