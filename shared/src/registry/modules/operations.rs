//! The operations on modules: those of the management API ([`get`], [`get_by_id`], [`list`],
//! [`create`], [`update`]) and the two writes the rest of the registry builds on, [`insert`] (a
//! new module) and [`modify`] (a change conditional on the module's revision).

use super::legacy::upgraded;
use super::permissions::{check_curation, organization};
use super::read::{load, parse_modules, read_at, Shown};
use super::record::{Address, Module, TestConfig};
use crate::accounts::access::{self, join, Organization};
use crate::api::{timestamp, Field, PageRequest};
use crate::auth::{Permission, Principal, Scoped};
use crate::ids::new_id;
use crate::registry::error::{RegistryError, Result};
use crate::registry::names::{ModuleName, Namespace, ProviderName, RegistryName};
use crate::registry::version_index;
use crate::state::AppState;
use crate::store::{
    keys, pointer, query_all, retry_on_race, Condition, Item, ItemStore, Key, StoreError, Transaction, Write,
};

/// The module at an address with its versions' statuses, if the caller may read it: two round
/// trips in all, the token's with the organization's name marker, then the rest (see
/// [`read`](super::read::read); the top of `read.rs` walks the whole read).
pub async fn get(
    state: &AppState,
    caller: &Scoped,
    org_name: &str,
    address: &Address,
    provider: &str,
) -> Result<(Shown, Organization)> {
    let read = read_at(state, caller, org_name, address, provider, true).await?;
    Ok((Shown { module: read.module, statuses: read.statuses }, read.org))
}

pub async fn get_by_id(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<(Shown, Organization)> {
    let module: Module = pointer::resolve(store, id).await?.ok_or(RegistryError::NotFound)?;
    access::require(principal, &module.org_id, Permission::Read)?;
    let org = access::get_by_id(store, &module.org_id).await?;
    let module = upgraded(store, module).await?;
    Ok((Shown::read(store, module).await?, org))
}

/// The list's filters; all optional.
#[derive(Debug, Default)]
pub struct ModuleFilter {
    pub q: Option<String>,
    pub registry: Option<RegistryName>,
    pub provider: Option<String>,
    pub organization_name: Option<String>,
}

impl ModuleFilter {
    fn matches(&self, module: &Module, org: &Organization) -> bool {
        let q = self.q.as_deref().map(str::to_lowercase);
        let searched = q.is_none_or(|q| {
            [module.name.as_str(), module.namespace_in(org), module.provider.as_str()]
                .iter()
                .any(|field| field.to_lowercase().contains(&q))
        });
        searched && self.provider.as_deref().is_none_or(|p| p == module.provider.as_str())
    }
}

/// A page of the organization's modules in a stable order (private first, then by
/// namespace, name, provider), and how many match in all.
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    filter: &ModuleFilter,
    page: &PageRequest,
) -> Result<(Vec<Shown>, usize, Organization)> {
    let org = organization(store, principal, org_name, Permission::Read).await?;
    if filter.organization_name.as_deref().is_some_and(|name| name != org.name) {
        return Ok((Vec::new(), 0, org));
    }
    let query = keys::modules(&org.id, filter.registry.map(RegistryName::as_str));
    let (modules, total) = if filter.q.is_none() && filter.provider.is_none() {
        let total = match filter.registry {
            Some(RegistryName::Private) => org.private_module_count,
            Some(RegistryName::Public) => org.public_module_count,
            None => org.private_module_count + org.public_module_count,
        };
        (parse_modules(store, &page.fetch(store, query).await?).await?, total)
    } else {
        // Searching reads the organization's modules once and filters them here.
        let all = parse_modules(store, &query_all(store, query).await?).await?;
        let matching: Vec<Module> = all.into_iter().filter(|m| filter.matches(m, &org)).collect();
        let total = matching.len();
        (page.slice(matching), total)
    };
    Ok((Shown::read_all(store, modules).await?, total, org))
}

pub struct NewModule {
    pub name: String,
    pub provider: String,
    pub namespace: Option<String>,
    pub registry: Option<String>,
    pub no_code: Option<bool>,
}

pub async fn create(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    new: NewModule,
) -> Result<(Module, Organization)> {
    let org = organization(state.store.as_ref(), principal, org_name, Permission::ManageModules).await?;
    // Older clients omit `registry-name`; HCP Terraform then creates a private module.
    let registry = match &new.registry {
        None => RegistryName::Private,
        Some(raw) => RegistryName::parse(Field::Attribute("registry-name"), raw)?,
    };
    check_curation(state, registry)?;
    let name = ModuleName::parse(Field::Attribute("name"), &new.name)?;
    let provider = ProviderName::parse(Field::Attribute("provider"), &new.provider)?;
    let namespace = match (registry, new.namespace.as_deref()) {
        (RegistryName::Private, Some(ns)) if ns != org.name => {
            return Err(RegistryError::invalid(
                Field::Attribute("namespace"),
                "namespace must not be set for private modules: it is the organization's name",
            ))
        }
        (RegistryName::Private, _) => None,
        (RegistryName::Public, Some(ns)) => Some(Namespace::parse(Field::Attribute("namespace"), ns)?),
        (RegistryName::Public, None) => {
            return Err(RegistryError::invalid(
                Field::Attribute("namespace"),
                "namespace is required for public modules",
            ))
        }
    };
    let module = Module::new(&org.id, registry, namespace, name, provider, new.no_code.unwrap_or(false));
    insert(state.store.as_ref(), &module).await?;
    Ok((module, org))
}

/// Stores a new module, its id pointer, its count and, for a VCS module, its entry among its
/// repository's modules, if its address is free (422 otherwise).
pub(in crate::registry) async fn insert(store: &dyn ItemStore, module: &Module) -> Result<()> {
    let mut transaction = Transaction::new();
    let address_claim = transaction.add(Write::Put { item: module.to_item()?, condition: Condition::NotExists });
    transaction.add(pointer::create(&module.id, &module.key())?);
    let org_active = transaction.add(join(&module.org_id, module.counter(), 1));
    if let Some(entry) = module.repository_entry() {
        transaction.add(Write::Put { item: Item::from_value(entry, &module.key())?, condition: Condition::Always });
    }
    if module.is_private() {
        transaction.add(version_index::created(&module.org_id, module.name.as_str(), module.provider.as_str()));
    }
    match transaction.commit(store).await {
        Err(e) if e.failed_on(address_claim) => Err(RegistryError::invalid(
            Field::Attribute("name"),
            "a module with this namespace, name and provider already exists",
        )),
        Err(e) if e.failed_on(org_active) => Err(RegistryError::NotFound),
        other => other.map_err(RegistryError::from),
    }
}

/// A change to a module that a layer above the core defines (publishing's switch between tags
/// and a branch). `update` makes it in the same conditional write as its own changes.
pub trait ModuleChange: Send + Sync {
    /// Edits the module and returns further writes to commit with it; called again when the
    /// write loses a race.
    fn apply(&self, module: &mut Module) -> Result<Vec<Write>>;
}

/// What a PATCH changes; `None` keeps the current value.
pub struct ModuleChanges<'a> {
    pub publishing: Option<&'a dyn ModuleChange>,
    pub tests_enabled: Option<bool>,
    pub no_code: Option<bool>,
}

pub async fn update(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
    changes: ModuleChanges<'_>,
) -> Result<(Shown, Organization)> {
    let org = organization(state.store.as_ref(), principal, org_name, Permission::Own).await?;
    let key = address.key(&org, provider)?;
    if address.registry != RegistryName::Private {
        // A curated public module exists (404 when it does not) but has nothing to update.
        load(state.store.as_ref(), &key).await?;
        return Err(RegistryError::Forbidden("Public modules have no settings to update.".into()));
    }
    let (module, ()) = modify(state.store.as_ref(), &key, |module, transaction| {
        if let Some(change) = changes.publishing {
            transaction.extend(change.apply(module)?);
        }
        if let Some(tests_enabled) = changes.tests_enabled {
            let id = module.test_config.as_ref().map_or_else(|| new_id("tc"), |tc| tc.id.clone());
            module.test_config = Some(TestConfig { id, tests_enabled });
        }
        if let Some(no_code) = changes.no_code {
            module.no_code = no_code;
        }
        Ok(())
    })
    .await?;
    // A switch to tags recorded a sync for the job.
    state.work.notify_one();
    Ok((Shown::read(state.store.as_ref(), module).await?, org))
}

/// Changes a module with optimistic concurrency. `change` edits the module and adds further
/// writes to commit with it to the transaction it is handed (after the module's own write, which
/// comes first), returning what it wants back (the handles of those writes, say). A lost race
/// re-reads and retries; a failure of a write the change added is an error (see
/// [`modify_or_refused`] to tell which).
pub(in crate::registry) async fn modify<T>(
    store: &dyn ItemStore,
    key: &Key,
    change: impl Fn(&mut Module, &mut Transaction) -> Result<T>,
) -> Result<(Module, T)> {
    modify_or_refused(store, key, change).await?.map_err(|refused| RegistryError::from(refused.error))
}

/// A change whose transaction failed on a write the change added: the store's error and what
/// the change returned, the handles the caller tells that write by.
pub(in crate::registry) struct Refused<T> {
    pub error: StoreError,
    pub named: T,
}

/// [`modify`], answering a failure of a write the change added as [`Refused`], with the handles
/// the change returned, for a caller to whom that failure means something.
pub(in crate::registry) async fn modify_or_refused<T>(
    store: &dyn ItemStore,
    key: &Key,
    change: impl Fn(&mut Module, &mut Transaction) -> Result<T>,
) -> Result<std::result::Result<(Module, T), Refused<T>>> {
    let change = &change;
    let changed = retry_on_race::<_, RegistryError, _>(|| async move {
        let mut module = load(store, key).await?;
        let before = module.clone();
        let revision = module.revision;
        let unchanged = Condition::equals("revision", revision);
        // The module's own write comes first, but what it writes is known only once the change
        // has run: its place is held by a check on the same key until then.
        let mut transaction = Transaction::new();
        let module_unchanged = transaction.add(Write::Check { key: key.clone(), condition: unchanged.clone() });
        let named = change(&mut module, &mut transaction)?;
        // A change that changed nothing writes nothing (a replayed webhook delivery, say).
        if transaction.len() == 1 && module == before {
            return Ok(Some(Ok((module, named))));
        }
        module.revision = revision + 1;
        module.updated_at = timestamp(chrono::Utc::now());
        transaction.replace(module_unchanged, Write::Put { item: module.to_item()?, condition: unchanged });
        match version_index::transact(store, transaction).await {
            Ok(()) => Ok(Some(Ok((module, named)))),
            Err(e) if e.failed_on(module_unchanged) => Ok(None),
            Err(error) => Ok(Some(Err(Refused { error, named }))),
        }
    })
    .await?;
    changed.ok_or_else(|| RegistryError::Conflict("The module is being changed by other requests; retry.".into()))
}
