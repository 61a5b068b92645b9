//! The one-call read of a module: its organization, the module and its versions' statuses, with
//! the caller's permission checked, in one BatchGetItem once the organization is located.
//!
//! [`get`](super::get), the way to read a module, goes through it in this order:
//!
//! 1. Before the handler runs, the [`Scoped`] extractor reads the caller's token in one
//!    BatchGetItem with the name marker of the organization the path names (`{org}` or
//!    `{namespace}`). On a route that carries [`PRIVATE_MODULE`] (a [`ReadPlan`]), when this
//!    process has seen the organization's id before ([`crate::state::OrgHints`]) or a team
//!    token's secret suggests it, the same batch reads ahead the organization's item, the module
//!    and its version index; the store of [`Scoped::store`] then answers reads of those keys
//!    from what was read.
//! 2. [`read_at`] refuses a public module where the edition does not curate them
//!    ([`check_curation`]; said only to callers who may read the organization) and turns the
//!    address into the stored namespace: none for a private module, whose namespace must be the
//!    organization's name.
//! 3. [`read_scoped`] locates the organization ([`access::locate`]): its id comes from the name
//!    marker read with the token, at no cost; for a caller without one, it is a team's own
//!    organization (checked in the next batch) or one read of the marker.
//! 4. [`read`] reads, in one BatchGetItem ([`access::authorized_at`]), the organization's item
//!    (and its name marker when it was located from a team's token), the module, its version
//!    index when statuses are wanted of a private module, and the items at `also` (the registry
//!    protocol's download reads the version's item there). When step 1 read every one of these
//!    keys ahead, the batch is answered from them with no call; else (nothing read ahead, or a
//!    wrong guess of the organization's id, which makes other keys) it is one call. A caller
//!    who may not read the organization is told it does not exist.
//! 5. [`upgraded`] (`legacy.rs`) moves a module stored in the older layout to the current one;
//!    a module stored in the current layout passes through unchanged, with no call.
//! 6. [`indexed_statuses`] takes the statuses from the version index when it is complete. When
//!    it is absent (a module stored before the index existed) or incomplete (more versions than
//!    it holds), it queries the versions' own status items instead, lowest first, and repairs
//!    the index with them, so that the next read is by key again.
//! 7. [`read_scoped`] remembers the organization's id in [`crate::state::OrgHints`] so that the
//!    next request under it reads ahead in step 1, and [`get`](super::get) answers a [`Shown`]
//!    and the organization.
//!
//! A read of a module thus costs the token's batch and one more, or the token's batch alone when
//! its read-ahead guessed right, and a query more, once, for a module whose index is incomplete.
//!
//! The other reads here are variants of it: [`readable`] (no statuses, nothing read ahead),
//! [`read`] for callers that locate the organization themselves (the registry protocol),
//! [`load`] by key for writers, [`Shown::read`], [`Shown::read_all`] and [`statuses`] for
//! modules already in hand, and [`parse_modules`] for listed items.

use super::legacy::upgraded;
use super::permissions::{check_curation, organization};
use super::record::{Address, Module};
use crate::accounts::access::{self, Organization};
use crate::auth::{PathParam, Permission, Principal, ReadPlan, Scoped};
use crate::registry::error::{RegistryError, Result};
use crate::registry::names::RegistryName;
use crate::registry::status::VersionStatus;
use crate::registry::version_index;
use crate::state::AppState;
use crate::store::{keys, parse_all, query_all_as, Item, ItemStore, Key};

/// What [`read`] found.
pub(crate) struct Read {
    pub org: Organization,
    pub module: Module,
    pub statuses: Vec<VersionStatus>,
    /// The items at `also`, in its order.
    pub also: Vec<Option<Item>>,
}

/// What [`read`] reads: the module at `namespace` (none for a private module) / `name` /
/// `provider` of the organization called `org_name`.
pub(crate) struct Wanted<'a> {
    pub org_name: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub provider: &'a str,
    pub statuses: bool,
}

/// [`readable`], with the versions' statuses when `statuses`: the organization, the module and
/// the statuses in one round trip once the organization is located (see [`read`]): located
/// already when its name marker was read with the token (`name_read`) or the caller is a team.
pub(super) async fn read_at(
    state: &AppState,
    caller: &Scoped,
    org_name: &str,
    address: &Address,
    provider: &str,
    statuses: bool,
) -> Result<Read> {
    if let Err(refused) = check_curation(state, address.registry) {
        // Told only to those who may read the organization.
        organization(state.store.as_ref(), &caller.principal, org_name, Permission::ReadRegistry).await?;
        return Err(refused);
    }
    // A private module's namespace is its organization's name, which the path also names.
    let namespace = match address.registry {
        RegistryName::Private if address.namespace == org_name => None,
        RegistryName::Private => return Err(RegistryError::NotFound),
        RegistryName::Public => Some(address.namespace.as_str()),
    };
    let wanted = Wanted { org_name, namespace, name: &address.name, provider, statuses };
    read_scoped(state, caller, wanted).await
}

/// [`read`] for a caller under one organization: located by the name marker read with its token,
/// answered from what was read ahead with the token where it can be, and the organization's id
/// then remembered for this process's next read ahead.
pub(crate) async fn read_scoped(state: &AppState, caller: &Scoped, wanted: Wanted<'_>) -> Result<Read> {
    let store = caller.store(&state.store);
    let org_name = wanted.org_name;
    let located = access::locate(store.as_ref(), &caller.principal, org_name, caller.name.as_ref()).await?;
    let read = read(store.as_ref(), &caller.principal, &located, wanted, &[]).await?;
    state.org_hints.learn(org_name, &read.org.id);
    Ok(read)
}

/// The [`ReadPlan`] of a route that reads one private module (path parameters `name` and
/// `provider`, under `org` or `namespace`): the module and its version index.
pub const PRIVATE_MODULE: ReadPlan = ReadPlan(private_module_plan);

fn private_module_plan(org_id: &str, param: &PathParam<'_>) -> Option<Vec<Key>> {
    if param("registry").is_some_and(|registry| registry != "private") {
        return None;
    }
    if let (Some(org), Some(namespace)) = (param("org"), param("namespace")) {
        if org != namespace {
            return None;
        }
    }
    let (name, provider) = (param("name")?, param("provider")?);
    Some(vec![keys::module(org_id, None, &name, &provider), version_index::key(org_id, &name, &provider)])
}

/// A module read with its organization, when asked its version index (its versions' statuses,
/// by key), and the items at `also`, all in one BatchGetItem, if the principal may read it.
/// Since `located` gives the organization's id before this read, the whole read is one call. The
/// statuses are queried after it only for a module whose index is incomplete (stored before the
/// index existed, or with more versions than it holds), which the read repairs.
pub(crate) async fn read(
    store: &dyn ItemStore,
    principal: &Principal,
    located: &access::Located,
    wanted: Wanted<'_>,
    also: &[Key],
) -> Result<Read> {
    let org_id = located.org_id();
    // Public modules have no versions (see [`statuses`]).
    let indexed = wanted.statuses && wanted.namespace.is_none();
    let mut keys = vec![keys::module(org_id, wanted.namespace, wanted.name, wanted.provider)];
    if indexed {
        keys.push(version_index::key(org_id, wanted.name, wanted.provider));
    }
    keys.extend_from_slice(also);
    let (org, mut found) =
        access::authorized_at(store, principal, wanted.org_name, located, Permission::ReadRegistry, &keys).await?;
    let module: Module = found.remove(0).ok_or(RegistryError::NotFound)?.parse()?;
    let index = if indexed { found.remove(0) } else { None };
    let module = upgraded(store, module).await?;
    let statuses = if indexed { indexed_statuses(store, &module, index.as_ref()).await? } else { Vec::new() };
    Ok(Read { org, module, statuses, also: found })
}

/// Every version of a private module with its status, lowest first in semantic-version order:
/// from its version index, one read by key.
pub async fn statuses(store: &dyn ItemStore, module: &Module) -> Result<Vec<VersionStatus>> {
    if !module.is_private() {
        return Ok(Vec::new());
    }
    let index = store.get(&module.version_index_key()).await?;
    indexed_statuses(store, module, index.as_ref()).await
}

/// The statuses in `index` (the module's version index as just read), or, when it is absent or
/// incomplete, those its entries hold, repairing the index with them.
async fn indexed_statuses(store: &dyn ItemStore, module: &Module, index: Option<&Item>) -> Result<Vec<VersionStatus>> {
    if let Some(entries) = version_index::entries(index)? {
        return Ok(entries);
    }
    let query = keys::version_statuses(&module.org_id, module.name.as_str(), module.provider.as_str());
    let mut statuses: Vec<VersionStatus> = query_all_as(store, query).await?;
    version_index::sort(&mut statuses);
    version_index::repair(store, module.version_index_key(), index, &statuses).await;
    Ok(statuses)
}

/// The module at an address, if the principal may read it.
pub(in crate::registry) async fn readable(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
) -> Result<(Module, Organization)> {
    let read = read_at(state, &Scoped::of(principal.clone()), org_name, address, provider, false).await?;
    Ok((read.module, read.org))
}

/// A module as the management API shows it: with every version's status.
pub struct Shown {
    pub module: Module,
    pub statuses: Vec<VersionStatus>,
}

impl Shown {
    pub async fn read(store: &dyn ItemStore, module: Module) -> Result<Self> {
        let statuses = statuses(store, &module).await?;
        Ok(Shown { module, statuses })
    }

    /// A new module, which has no versions yet.
    pub fn new(module: Module) -> Self {
        Shown { module, statuses: Vec::new() }
    }

    /// Several modules, their version indexes read in one batch (a private module's; the few
    /// whose index is incomplete then query their statuses, concurrently).
    pub async fn read_all(store: &dyn ItemStore, modules: Vec<Module>) -> Result<Vec<Self>> {
        let index_keys: Vec<Key> =
            modules.iter().filter(|module| module.is_private()).map(Module::version_index_key).collect();
        let mut indexes = store.get_many(&index_keys).await?.into_iter();
        let reads = modules.iter().map(|module| {
            let index = if module.is_private() { indexes.next().flatten() } else { None };
            async move {
                match module.is_private() {
                    true => indexed_statuses(store, module, index.as_ref()).await,
                    false => Ok(Vec::new()),
                }
            }
        });
        let statuses = futures::future::try_join_all(reads).await?;
        Ok(modules.into_iter().zip(statuses).map(|(module, statuses)| Shown { module, statuses }).collect())
    }
}

pub(crate) async fn load(store: &dyn ItemStore, key: &Key) -> Result<Module> {
    let module = store.get(key).await?.ok_or(RegistryError::NotFound)?.parse()?;
    upgraded(store, module).await
}

/// Parses listed modules, upgrading any stored in the older layout.
pub(crate) async fn parse_modules(store: &dyn ItemStore, items: &[Item]) -> Result<Vec<Module>> {
    let mut modules = Vec::with_capacity(items.len());
    for module in parse_all(items)? {
        modules.push(upgraded(store, module).await?);
    }
    Ok(modules)
}
