//! Claims on local upload links: dev-server's `PUT /upload/{id}` takes one upload per link, as a
//! family's pending record expects one. A claim is one conditional write that exactly one of
//! racing uploads wins, expiring with the link.

use super::{keys, Condition, Item, ItemStore, StoreError};

/// Claims `object` for one upload until `expires_at` (Unix seconds); `false` if it was claimed.
pub async fn claim(store: &dyn ItemStore, object: &str, expires_at: i64) -> Result<bool, StoreError> {
    let claim = Item::new(keys::upload_claim(object), Default::default()).with_ttl(expires_at);
    match store.put(claim, Condition::NotExists).await {
        Ok(()) => Ok(true),
        Err(e) if e.is_condition_failed() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Gives the claim on `object` back: its upload did not arrive whole, or was refused, and the
/// link may take another.
pub async fn release(store: &dyn ItemStore, object: &str) -> Result<(), StoreError> {
    store.delete(&keys::upload_claim(object), Condition::Always).await.map(drop)
}
