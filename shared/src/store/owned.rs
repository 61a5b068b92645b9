//! Ownership between items, for cascading deletes: an item names, in its `satellites`
//! attribute, the items it owns outside its own partition (id pointers, tokens), and in `blob`
//! an archive it owns (in `blobs` when it owns several), and in `sealed` the sealed objects it owns (a state version's state and its
//! JSON form), which are deleted apart (`BlobStore::delete_sealed`). Deleting a partition then deletes what its items own, whatever family
//! wrote them.

use serde::Deserialize;
use serde_json::Value;

use super::{Item, Key, StoreError};

pub const SATELLITES: &str = "satellites";
pub const BLOB: &str = "blob";
pub const BLOBS: &str = "blobs";
pub const SEALED: &str = "sealed";

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
    /// An item owning several objects (a provider version's files) names them all here.
    #[serde(default)]
    blobs: Vec<String>,
    #[serde(default)]
    sealed: Vec<String>,
}

/// What an item owns: the keys to delete with it (its own among them), and the objects.
#[derive(Debug, Default)]
pub struct Owned {
    pub keys: Vec<Key>,
    /// Archives or uploads (`BlobStore::delete`).
    pub objects: Vec<String>,
    /// Sealed objects (`BlobStore::delete_sealed`).
    pub sealed: Vec<String>,
}

/// The item's own key and the keys of the items it owns, with the objects it owns. A
/// delete never depends on reading what it deletes: an item whose text does not parse (a
/// record nested past the parser's limit, written before ingest bounded what it keeps) is
/// deleted all the same, as owning nothing, and the log says so.
pub fn owned_by(item: &Item) -> Result<Owned, StoreError> {
    let Owner { mut satellites, blob, blobs, sealed } = match item.parse() {
        Ok(owner) => owner,
        // Only a record nested past the parser's limit: any other failure is a fault to report,
        // not a reason to leave what the item owns behind.
        Err(e) if e.to_string().contains("recursion limit") => {
            tracing::warn!(key = ?item.key, error = %e, "an unreadable item is deleted as owning nothing");
            Owner { satellites: Vec::new(), blob: None, blobs: Vec::new(), sealed: Vec::new() }
        }
        Err(e) => return Err(e),
    };
    satellites.push(item.key.clone());
    Ok(Owned { keys: satellites, objects: blob.into_iter().chain(blobs).collect(), sealed })
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;

    #[test]
    fn an_item_that_does_not_parse_is_still_deleted() {
        let deep = format!("{{\"a\": {}1{}}}", "[".repeat(200), "]".repeat(200));
        let item = Item::stored(Key::new("ORG#o", "VMETA#x"), &deep);
        let owned = owned_by(&item).expect("its own key at least");
        assert_eq!(owned.keys, [Key::new("ORG#o", "VMETA#x")]);
        assert!(owned.objects.is_empty() && owned.sealed.is_empty());
    }
}

impl Item {
    /// Records the items this one owns outside its partition.
    pub fn with_satellites(mut self, owned: &[Key]) -> Self {
        self.set(SATELLITES, satellites(owned));
        self
    }
}
