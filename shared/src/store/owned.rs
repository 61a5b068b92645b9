//! Ownership between items, for cascading deletes: an item names, in its `satellites`
//! attribute, the items it owns outside its own partition (id pointers, tokens), and in `blob`
//! an archive it owns. Deleting a partition then deletes what its items own, whatever family
//! wrote them.

use serde::Deserialize;
use serde_json::Value;

use super::{Item, Key, StoreError};

pub const SATELLITES: &str = "satellites";
pub const BLOB: &str = "blob";

/// The `satellites` attribute value for items owned outside the partition.
pub fn satellites(keys: &[Key]) -> Value {
    serde_json::to_value(keys).expect("keys serialize")
}

/// What an item says it owns.
#[derive(Deserialize)]
struct Owner {
    #[serde(default)]
    satellites: Vec<Key>,
    blob: Option<String>,
}

/// The item's own key and the keys of the items it owns, with the archive it owns if any.
pub fn owned_by(item: &Item) -> Result<(Vec<Key>, Option<String>), StoreError> {
    let Owner { mut satellites, blob } = item.parse()?;
    satellites.push(item.key.clone());
    Ok((satellites, blob))
}

impl Item {
    /// Records the items this one owns outside its partition.
    pub fn with_satellites(mut self, owned: &[Key]) -> Self {
        self.set(SATELLITES, satellites(owned));
        self
    }
}
