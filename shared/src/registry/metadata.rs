//! A version's parsed metadata (what its Terraform files declare, read at ingest from the same
//! stream the inspector reads), stored as an item of its own beside the version, and read for
//! the registry protocol's module detail.

use crate::archive::ModuleMetadata;
use crate::store::{keys, Item, ItemStore, Key};

use super::error::Result;
use super::versions::ModuleVersion;

/// The largest metadata item kept (DynamoDB's item limit is 400 KB): past it, the READMEs of
/// submodules and examples are left out, then everything but the reason.
const STORED_CAP: usize = 300 * 1024;

pub(super) fn key(version: &ModuleVersion) -> Key {
    keys::module_version_metadata(&version.org_id, &version.name, &version.provider, &version.version)
}

/// The metadata's item, within [`STORED_CAP`].
pub(super) fn item(version: &ModuleVersion, metadata: &ModuleMetadata) -> Result<Item> {
    let fits = |metadata: &ModuleMetadata| serde_json::to_vec(metadata).map_or(0, |bytes| bytes.len()) <= STORED_CAP;
    let mut kept = metadata.clone();
    if !fits(&kept) {
        for directory in kept.submodules.iter_mut().chain(kept.examples.iter_mut()) {
            directory.readme = None;
        }
        note(&mut kept, "the READMEs of submodules and examples are left out (over 300 KiB)");
    }
    if !fits(&kept) {
        kept = ModuleMetadata::default();
        note(&mut kept, "over 300 KiB of metadata: not kept");
    }
    Ok(Item::from_value(key(version), &kept)?)
}

fn note(metadata: &mut ModuleMetadata, what: &str) {
    metadata.problem = Some(match metadata.problem.take() {
        Some(earlier) => format!("{earlier}; {what}"),
        None => what.to_owned(),
    });
}

/// A stored version and its metadata, read together (one BatchGetItem): `None` for a version
/// that does not exist, and no metadata for one ingested before metadata was read.
pub(super) async fn with_version(
    store: &dyn ItemStore,
    org_id: &str,
    name: &str,
    provider: &str,
    version: &str,
) -> Result<Option<(ModuleVersion, Option<ModuleMetadata>)>> {
    let keys = [
        keys::module_version(org_id, name, provider, version),
        keys::module_version_metadata(org_id, name, provider, version),
    ];
    let mut found = store.get_many(&keys).await?.into_iter();
    let (Some(Some(stored)), metadata) = (found.next(), found.next().flatten()) else { return Ok(None) };
    Ok(Some((stored.parse()?, metadata.map(|item| item.parse()).transpose()?)))
}
