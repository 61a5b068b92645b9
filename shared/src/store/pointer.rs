//! Id pointers: resources addressed by their own id (`/teams/team-…`, `/workspaces/ws-…`) live
//! in their organization's partition; a pointer item maps the id to that item's key.
//!
//! An id is read as one kind of resource only ([`resolve`]): an id of another kind, or one
//! that names no kind, is as missing as an unknown one (a 404 in every family), never an item
//! of the wrong shape.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{keys, Condition, Item, ItemStore, Key, StoreError, Write};
use crate::ids::Kind;

#[derive(Debug, Serialize, Deserialize)]
struct Pointer {
    target: Key,
}

/// A stored resource addressed by its id: the kind of id that names it.
pub trait Addressed: DeserializeOwned {
    const KIND: Kind;
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

/// The `T` an id names: none unless the id is of `T`'s kind (checked before anything is read),
/// and its pointer and the item it leads to exist.
pub async fn resolve<T: Addressed>(store: &dyn ItemStore, id: &str) -> Result<Option<T>, StoreError> {
    if Kind::of(id) != Some(T::KIND) {
        return Ok(None);
    }
    follow(store, id).await?.map(|item| item.parse()).transpose()
}

/// Where the `T` an id names is kept, read from the id's pointer alone (one read), so that the
/// item can be read in one batch with others of its partition: none unless the id is of `T`'s
/// kind and its pointer leads to an item of that kind.
pub async fn target<T: Addressed>(store: &dyn ItemStore, id: &str) -> Result<Option<Key>, StoreError> {
    if Kind::of(id) != Some(T::KIND) {
        return Ok(None);
    }
    let Some(pointer) = store.get(&keys::id_pointer(id)).await? else { return Ok(None) };
    let Pointer { target } = pointer.parse()?;
    Ok(keys::holds(&target, T::KIND).then_some(target))
}

/// The `T`s that `ids` name, in two batched reads (the pointers, then their items): those of
/// `T`'s kind whose pointer and item exist, in no particular order.
pub async fn resolve_many<T: Addressed>(store: &dyn ItemStore, ids: &[String]) -> Result<Vec<T>, StoreError> {
    let ids: Vec<&String> = ids.iter().filter(|id| Kind::of(id) == Some(T::KIND)).collect();
    let pointers = store.get_many(&ids.iter().map(|id| keys::id_pointer(id)).collect::<Vec<_>>()).await?;
    let mut targets = Vec::new();
    for pointer in pointers.into_iter().flatten() {
        let Pointer { target } = pointer.parse()?;
        if keys::holds(&target, T::KIND) {
            targets.push(target);
        }
    }
    store.get_many(&targets).await?.into_iter().flatten().map(|item| item.parse()).collect()
}

/// The item an id points to, if both exist and the item is of the kind the id names. Prefer
/// [`resolve`], which also checks the id is of the kind the caller reads.
pub async fn follow(store: &dyn ItemStore, id: &str) -> Result<Option<Item>, StoreError> {
    let Some(kind) = Kind::of(id) else { return Ok(None) };
    let Some(pointer) = store.get(&keys::id_pointer(id)).await? else { return Ok(None) };
    let Pointer { target } = pointer.parse()?;
    if !keys::holds(&target, kind) {
        return Ok(None);
    }
    store.get(&target).await
}
