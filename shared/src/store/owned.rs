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

/// The item's own key and the keys of the items it owns, with the archive it owns if any. A
/// delete never depends on reading what it deletes: an item whose text does not parse (a
/// record nested past the parser's limit, written before ingest bounded what it keeps) is
/// deleted all the same, as owning nothing, and the log says so.
pub fn owned_by(item: &Item) -> Result<(Vec<Key>, Option<String>), StoreError> {
    let Owner { mut satellites, blob } = match item.parse() {
        Ok(owner) => owner,
        // Only a record nested past the parser's limit: any other failure is a fault to report,
        // not a reason to leave what the item owns behind.
        Err(e) if e.to_string().contains("recursion limit") => {
            tracing::warn!(key = ?item.key, error = %e, "an unreadable item is deleted as owning nothing");
            Owner { satellites: Vec::new(), blob: None }
        }
        Err(e) => return Err(e),
    };
    satellites.push(item.key.clone());
    Ok((satellites, blob))
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;

    #[test]
    fn an_item_that_does_not_parse_is_still_deleted() {
        let deep = format!("{{\"a\": {}1{}}}", "[".repeat(200), "]".repeat(200));
        let item = Item::stored(Key::new("ORG#o", "VMETA#x"), &deep);
        let (keys, blob) = owned_by(&item).expect("its own key at least");
        assert_eq!(keys, [Key::new("ORG#o", "VMETA#x")]);
        assert_eq!(blob, None);
    }
}

impl Item {
    /// Records the items this one owns outside its partition.
    pub fn with_satellites(mut self, owned: &[Key]) -> Self {
        self.set(SATELLITES, satellites(owned));
        self
    }
}
