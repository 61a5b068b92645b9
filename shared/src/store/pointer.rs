//! Id pointers: resources addressed by their own id (`/teams/team-…`, `/workspaces/ws-…`) live
//! in their organization's partition; a pointer item maps the id to that item's key.

use serde::{Deserialize, Serialize};

use super::{keys, Condition, Item, ItemStore, Key, StoreError, Write};

#[derive(Debug, Serialize, Deserialize)]
struct Pointer {
    target: Key,
}

/// The write that creates the pointer for `id`, failing if the id is somehow taken.
pub fn create(id: &str, target: &Key) -> Result<Write, StoreError> {
    let item = Item::from_value(keys::id_pointer(id), &Pointer { target: target.clone() })?;
    Ok(Write::Put { item, condition: Condition::NotExists })
}

/// Moves the pointer for `id` to a new target (after a rename).
pub fn retarget(id: &str, target: &Key) -> Result<Write, StoreError> {
    let item = Item::from_value(keys::id_pointer(id), &Pointer { target: target.clone() })?;
    Ok(Write::Put { item, condition: Condition::Exists })
}

pub fn remove(id: &str) -> Write {
    Write::Delete { key: keys::id_pointer(id), condition: Condition::Always }
}

/// The item an id points to, if both exist.
pub async fn follow(store: &dyn ItemStore, id: &str) -> Result<Option<Item>, StoreError> {
    let Some(pointer) = store.get(&keys::id_pointer(id)).await? else { return Ok(None) };
    let Pointer { target } = pointer.parse()?;
    store.get(&target).await
}
