//! Ownership between items, for cascading deletes: an item names, in its `satellites`
//! attribute, the items it owns outside its own partition (id pointers, tokens), and in `blob`
//! an archive it owns. Deleting a partition then deletes what its items own, whatever family
//! wrote them.

use serde_json::Value;

use super::{Item, Key};

pub const SATELLITES: &str = "satellites";
pub const BLOB: &str = "blob";

/// The `satellites` attribute value for items owned outside the partition.
pub fn satellites(keys: &[Key]) -> Value {
    serde_json::to_value(keys).expect("keys serialize")
}

/// The item's own key and the keys of the items it owns.
pub fn owned_keys(item: &Item) -> Vec<Key> {
    let mut owned: Vec<Key> =
        item.attrs.get(SATELLITES).and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default();
    owned.push(item.key.clone());
    owned
}

impl Item {
    /// Records the items this one owns outside its partition.
    pub fn with_satellites(mut self, owned: &[Key]) -> Self {
        self.attrs.insert(SATELLITES.into(), satellites(owned));
        self
    }
}
