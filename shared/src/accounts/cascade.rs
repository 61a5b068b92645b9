//! Deleting an organization or a workspace deletes everything it owns. Every owned item lives
//! in the organization's partition, under a prefix of its owner's (a workspace's under
//! `store::keys::workspace_data`), and names the items and objects it owns outside it
//! (`store::owned`), so the cascade is one strongly consistent walk of one range, whatever
//! family wrote the items.

use crate::blobs::{BlobStore, ObjectId};
use crate::store::owned::owned_by;
use crate::store::{keys, Condition, ItemStore, Key, Query, StoreError, Write, MAX_TRANSACTION_WRITES};

/// Deletes every item of the organization's partition but the organization item itself,
/// their satellites and their blobs. Safe to run again after an interruption.
pub async fn purge_partition(store: &dyn ItemStore, blobs: &dyn BlobStore, org_id: &str) -> Result<(), StoreError> {
    purge(store, blobs, keys::organization_partition(org_id), Some(keys::organization(org_id))).await
}

/// Deletes what a deleted workspace owned (its state versions, their states and pointers).
/// Safe to run again after an interruption; what an interrupted run leaves behind is unreachable
/// (its workspace is gone) and goes with the organization.
pub async fn purge_workspace(
    store: &dyn ItemStore,
    blobs: &dyn BlobStore,
    org_id: &str,
    workspace_id: &str,
) -> Result<(), StoreError> {
    purge(store, blobs, keys::workspace_data(org_id, workspace_id), None).await
}

/// Deletes every item `query` finds but `keep`, with what each owns.
async fn purge(
    store: &dyn ItemStore,
    blobs: &dyn BlobStore,
    query: Query,
    keep: Option<Key>,
) -> Result<(), StoreError> {
    let mut query = query.limit(MAX_TRANSACTION_WRITES / 4);
    loop {
        let page = store.query(query.clone()).await?;
        let mut writes = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for item in page.items.iter().filter(|item| Some(&item.key) != keep.as_ref()) {
            let owned = owned_by(item)?;
            for id in owned.objects.iter().filter_map(|object| ObjectId::parse(object)) {
                blobs.delete(&id).await.map_err(StoreError::backend)?;
            }
            for id in owned.sealed.iter().filter_map(|object| ObjectId::parse(object)) {
                blobs.delete_sealed(&id).await.map_err(StoreError::backend)?;
            }
            let fresh = owned.keys.into_iter().filter(|key| seen.insert(key.clone()));
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
