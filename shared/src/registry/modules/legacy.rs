//! The upgrade of a module stored in the older layout, whose item held every version's status
//! (`versions`) and the download count (`downloads`) itself. Every read of a module passes it
//! through [`upgraded`], which moves them to items of their own, once, and hands back the module
//! as it is now stored.

use super::read::load;
use super::record::{latest_of, Module, DOWNLOADS};
use crate::registry::error::Result;
use crate::registry::status::precedence;
use crate::store::{keys, Condition, Item, ItemStore, Transaction, UpdateOp, Write};

/// A module stored before each version's status and the download count had items of their own,
/// moved to that layout: the statuses first (idempotent), then the module, on its revision.
pub(super) async fn upgraded(store: &dyn ItemStore, mut module: Module) -> Result<Module> {
    if module.legacy_versions.is_empty() && module.legacy_downloads == 0 {
        return Ok(module);
    }
    let legacy = std::mem::take(&mut module.legacy_versions);
    let status_writes = legacy.iter().map(|status| {
        let key = keys::version_status(
            &module.org_id,
            module.name.as_str(),
            module.provider.as_str(),
            precedence(&status.version),
        );
        Ok(Write::Put { item: Item::from_value(key, status)?, condition: Condition::Always })
    });
    for chunk in status_writes.collect::<Result<Vec<_>>>()?.chunks(crate::store::MAX_TRANSACTION_WRITES) {
        store.transact(chunk.to_vec()).await?;
    }
    module.latest = latest_of(&legacy).cloned();
    let downloads = std::mem::take(&mut module.legacy_downloads);
    let revision = module.revision;
    module.revision += 1;
    let mut transaction = Transaction::new();
    let module_unchanged =
        transaction.add(Write::Put { item: module.to_item()?, condition: Condition::equals("revision", revision) });
    transaction.add(Write::Update {
        key: module.downloads_key(),
        ops: vec![UpdateOp::Add(DOWNLOADS.into(), downloads)],
        condition: Condition::Always,
    });
    match transaction.commit(store).await {
        // Another request upgraded it first.
        Err(e) if e.failed_on(module_unchanged) => Box::pin(load(store, &module.key())).await,
        other => other.map(|()| module).map_err(Into::into),
    }
}
