//! Registry modules: one record per (namespace, name, provider), private ones filled by
//! uploaded versions, public ones kept as records of curated modules.

use serde::{Deserialize, Serialize};

use super::error::{RegistryError, Result};
use super::names::{ModuleName, Namespace, ProviderName, RegistryName};
pub(super) use super::status::precedence;
pub use super::status::VersionStatus;
use super::version_index;
use crate::accounts::access::{self, join, Organization};
use crate::api::{timestamp, Field, PageRequest};
use crate::auth::{PathParam, Permission, Principal, ReadPlan, Scoped};
use crate::config::Edition;
use crate::ids::new_id;
use crate::state::AppState;
use crate::store::{
    keys, parse_all, pointer, query_all, query_all_as, retry_on_race, Condition, Item, ItemStore, Key, UpdateOp, Write,
};

pub const PRIVATE_COUNT: &str = "private_module_count";
pub const PUBLIC_COUNT: &str = "public_module_count";
/// The attribute of a module's download count item.
pub const DOWNLOADS: &str = "downloads";
/// `publishing_mechanism` of a module that publishes a version for each tag of its repository.
pub const TAGS: &str = "git_tag";
/// `publishing-mechanism` as shown for a module not connected to a repository (stored as none).
pub const NON_VCS: &str = "non_vcs";
/// `publishing_mechanism` of a module whose versions are made by hand from a branch's commits.
pub const BRANCH: &str = "branch";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestConfig {
    pub id: String,
    pub tests_enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Module {
    pub id: String,
    pub org_id: String,
    pub registry: RegistryName,
    /// Public modules only: a private module's namespace is its organization's name.
    pub namespace: Option<Namespace>,
    pub name: ModuleName,
    pub provider: ProviderName,
    /// `pending` until a version is ingested, then `setup_complete`.
    pub status: String,
    pub no_code: bool,
    pub created_at: String,
    pub updated_at: String,
    /// The version consumers get by default (see [`Module::offer`]); every version's status is
    /// an item of its own (see [`statuses`]), so a module holds any number of versions.
    #[serde(default)]
    pub latest: Option<VersionStatus>,
    #[serde(default)]
    pub test_config: Option<TestConfig>,
    /// `git_tag` or `branch` for modules published from VCS.
    #[serde(default)]
    pub publishing_mechanism: Option<String>,
    /// The repository of a module published from VCS.
    #[serde(default)]
    pub vcs_repo: Option<VcsRepo>,
    /// The first paragraph of the latest version's README, for the registry protocol.
    #[serde(default)]
    pub description: Option<String>,
    /// Bumped by every change; writes are conditional on it (optimistic concurrency).
    #[serde(default)]
    pub revision: u64,
    /// What modules stored before versions and downloads had items of their own; [`load`] moves
    /// them out.
    #[serde(default, rename = "versions", skip_serializing)]
    pub(super) legacy_versions: Vec<VersionStatus>,
    #[serde(default, rename = "downloads", skip_serializing)]
    pub(super) legacy_downloads: i64,
}

/// A module's repository, as publishing recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VcsRepo {
    pub identifier: String,
    pub display_identifier: String,
    /// Empty for tag-based publishing.
    pub branch: String,
    pub ingress_submodules: bool,
    pub oauth_token_id: String,
    pub service_provider: String,
    pub repository_http_url: String,
    pub webhook_url: String,
    pub webhook_uuid: String,
    pub sealed_webhook_secret: String,
    /// Why setting the module up failed (`setup_failed`), as the provider answered.
    #[serde(default)]
    pub setup_error: Option<String>,
    /// The folder of the repository the module's archives are cut from; empty for its root.
    #[serde(default)]
    pub source_directory: String,
    /// Only tags `<prefix><semver>` (or `<prefix>v<semver>`) make versions; empty for all.
    #[serde(default)]
    pub tag_prefix: String,
}

impl VcsRepo {
    /// The module's entry among the modules published from its repository.
    pub fn index_key(&self, org_id: &str, module_id: &str) -> Key {
        keys::vcs_repository_module(org_id, &self.oauth_token_id, &self.identifier, module_id)
    }
}

impl Module {
    /// A module with no versions yet (`pending`), published by hand: publishing from a
    /// repository sets `publishing_mechanism` and `vcs_repo` on it.
    pub fn new(
        org_id: &str,
        registry: RegistryName,
        namespace: Option<Namespace>,
        name: ModuleName,
        provider: ProviderName,
        no_code: bool,
    ) -> Self {
        let now = timestamp(chrono::Utc::now());
        Module {
            id: new_id("mod"),
            org_id: org_id.to_owned(),
            registry,
            namespace,
            name,
            provider,
            status: "pending".into(),
            no_code,
            created_at: now.clone(),
            updated_at: now,
            latest: None,
            test_config: None,
            publishing_mechanism: None,
            vcs_repo: None,
            description: None,
            revision: 0,
            legacy_versions: Vec::new(),
            legacy_downloads: 0,
        }
    }

    pub fn key(&self) -> Key {
        keys::module(
            &self.org_id,
            self.namespace.as_ref().map(Namespace::as_str),
            self.name.as_str(),
            self.provider.as_str(),
        )
    }

    pub fn is_private(&self) -> bool {
        self.registry == RegistryName::Private
    }

    /// The namespace clients see: the organization's name for private modules.
    pub fn namespace_in<'a>(&'a self, org: &'a Organization) -> &'a str {
        self.namespace.as_ref().map_or(org.name.as_str(), Namespace::as_str)
    }

    pub(super) fn to_item(&self) -> Result<Item> {
        let mut owned = vec![keys::id_pointer(&self.id)];
        owned.extend(self.repository_entry());
        Ok(Item::from_value(self.key(), self)?.with_satellites(&owned))
    }

    /// Where a VCS module is listed among the modules of its repository.
    fn repository_entry(&self) -> Option<Key> {
        self.vcs_repo.as_ref().map(|repo| repo.index_key(&self.org_id, &self.id))
    }

    fn counter(&self) -> &'static str {
        if self.is_private() {
            PRIVATE_COUNT
        } else {
            PUBLIC_COUNT
        }
    }

    /// Makes an `ok` version the latest if consumers should now get it by default: it ranks
    /// above the current latest. Tells whether it did.
    pub fn offer(&mut self, version: &VersionStatus, description: Option<String>) -> bool {
        let becomes_latest = version.offered()
            && self.latest.as_ref().is_none_or(|latest| latest_rank(&version.version) > latest_rank(&latest.version));
        if becomes_latest {
            // The lifecycle is read from the version's own entry, never from this copy.
            self.latest = Some(VersionStatus { deprecation: None, revocation: None, ..version.clone() });
            self.description = description;
        }
        becomes_latest
    }

    /// Where the module's version index is (see [`version_index`]); a public module has none.
    pub(super) fn version_index_key(&self) -> Key {
        version_index::key(&self.org_id, self.name.as_str(), self.provider.as_str())
    }

    pub fn downloads_key(&self) -> Key {
        keys::module_downloads(
            &self.org_id,
            self.namespace.as_ref().map(Namespace::as_str),
            self.name.as_str(),
            self.provider.as_str(),
        )
    }

    /// Whether the module publishes a version for each tag of its repository.
    pub fn publishes_from_tags(&self) -> bool {
        self.publishing_mechanism.as_deref() == Some(TAGS)
    }

    /// Whether the module's versions are made by hand from commits of a branch.
    pub fn publishes_from_branch(&self) -> bool {
        self.publishing_mechanism.as_deref() == Some(BRANCH)
    }

    /// The writes that remove the module record itself (not its versions).
    pub(super) fn removal_writes(&self) -> Vec<Write> {
        vec![
            Write::Delete { key: self.key(), condition: Condition::equals("revision", self.revision) },
            pointer::remove(&self.id),
            join(&self.org_id, self.counter(), -1),
            Write::Delete { key: self.downloads_key(), condition: Condition::Always },
            Write::Delete { key: self.version_index_key(), condition: Condition::Always },
        ]
        .into_iter()
        .chain(self.repository_entry().map(|key| Write::Delete { key, condition: Condition::Always }))
        .collect()
    }
}

/// A module is addressed by its id too (`/registry-modules/mod-…`): an id of another kind
/// reads as absent.
impl pointer::Addressed for Module {
    const KIND: crate::ids::Kind = crate::ids::Kind::Module;
}

/// How a version ranks for being the one consumers get by default: any stable version above
/// any prerelease, then by semantic version. A version that does not parse ranks lowest.
fn latest_rank(version: &str) -> Option<(bool, semver::Version)> {
    let version = semver::Version::parse(version).ok()?;
    Some((version.pre.is_empty(), version))
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
        access::authorized_at(store, principal, wanted.org_name, located, Permission::Read, &keys).await?;
    let module: Module = found.remove(0).ok_or(RegistryError::NotFound)?.parse()?;
    let index = if indexed { found.remove(0) } else { None };
    let module = upgraded(store, module).await?;
    let statuses = if indexed { indexed_statuses(store, &module, index.as_ref()).await? } else { Vec::new() };
    Ok(Read { org, module, statuses, also: found })
}

/// The versions new consumers may get among `statuses` (`ok`, not revoked), in their order.
pub fn offered_versions(statuses: &[VersionStatus]) -> impl Iterator<Item = &VersionStatus> {
    statuses.iter().filter(|status| status.offered())
}

/// The version consumers get by default among `statuses`: the highest stable offered version,
/// else the highest prerelease.
pub(super) fn latest_of(statuses: &[VersionStatus]) -> Option<&VersionStatus> {
    offered_versions(statuses).max_by_key(|status| latest_rank(&status.version))
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

/// Where a request points: `/:registry_name/:namespace/:name[/:provider]`.
#[derive(Debug, Clone)]
pub struct Address {
    pub registry: RegistryName,
    pub namespace: String,
    pub name: String,
}

impl Address {
    pub fn new(registry: &str, namespace: &str, name: &str) -> Result<Self> {
        let registry = match registry {
            "private" => RegistryName::Private,
            "public" => RegistryName::Public,
            _ => return Err(RegistryError::NotFound),
        };
        Ok(Self { registry, namespace: namespace.to_owned(), name: name.to_owned() })
    }

    /// The namespace as stored: none for private modules, whose namespace must be the
    /// organization's name.
    pub(super) fn stored_namespace(&self, org: &Organization) -> Result<Option<&str>> {
        match self.registry {
            RegistryName::Private if self.namespace == org.name => Ok(None),
            RegistryName::Private => Err(RegistryError::NotFound),
            RegistryName::Public => Ok(Some(&self.namespace)),
        }
    }

    pub(super) fn key(&self, org: &Organization, provider: &str) -> Result<Key> {
        Ok(keys::module(&org.id, self.stored_namespace(org)?, &self.name, provider))
    }
}

/// The organization, if the principal holds `permission` there; else 404.
pub(super) async fn organization(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    permission: Permission,
) -> Result<Organization> {
    Ok(access::authorized(store, principal, org_name, permission).await?)
}

/// The organization where the principal changes a private module's versions, if it holds
/// `permission` there; a public module has no versions, so its are 404.
pub(super) async fn managing_versions(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    permission: Permission,
) -> Result<Organization> {
    let org = organization(state.store.as_ref(), principal, org_name, permission).await?;
    check_curation(state, address.registry)?;
    if address.registry == RegistryName::Public {
        return Err(RegistryError::NotFound);
    }
    Ok(org)
}

/// Public modules exist only where the edition allows their curation.
pub(super) fn check_curation(state: &AppState, registry: RegistryName) -> Result<()> {
    if registry == RegistryName::Public && state.config.edition == Edition::SelfHosted {
        return Err(RegistryError::CurationDisabled);
    }
    Ok(())
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

/// A module stored before each version's status and the download count had items of their own,
/// moved to that layout: the statuses first (idempotent), then the module, on its revision.
async fn upgraded(store: &dyn ItemStore, mut module: Module) -> Result<Module> {
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
    let writes = vec![
        Write::Put { item: module.to_item()?, condition: Condition::equals("revision", revision) },
        Write::Update {
            key: module.downloads_key(),
            ops: vec![UpdateOp::Add(DOWNLOADS.into(), downloads)],
            condition: Condition::Always,
        },
    ];
    match store.transact(writes).await {
        // Another request upgraded it first.
        Err(e) if e.failed_write() == Some(0) => Box::pin(load(store, &module.key())).await,
        other => other.map(|()| module).map_err(Into::into),
    }
}

/// Changes a module with optimistic concurrency. `change` edits the module and returns further
/// writes to commit with it; the module's write is the transaction's first (index 0), so a
/// failure at index ≥ 1 is the caller's to interpret. A lost race re-reads and retries.
pub(super) async fn modify<T>(
    store: &dyn ItemStore,
    key: &Key,
    change: impl Fn(&mut Module) -> Result<(Vec<Write>, T)>,
) -> Result<(Module, T)> {
    let change = &change;
    let changed = retry_on_race::<_, RegistryError, _>(|| async move {
        let mut module = load(store, key).await?;
        let before = module.clone();
        let revision = module.revision;
        let (extra, out) = change(&mut module)?;
        // A change that changed nothing writes nothing (a replayed webhook delivery, say).
        if extra.is_empty() && module == before {
            return Ok(Some((module, out)));
        }
        module.revision = revision + 1;
        module.updated_at = timestamp(chrono::Utc::now());
        let mut writes =
            vec![Write::Put { item: module.to_item()?, condition: Condition::equals("revision", revision) }];
        writes.extend(extra);
        match version_index::transact(store, writes).await {
            Ok(()) => Ok(Some((module, out))),
            Err(e) if e.failed_write() == Some(0) => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    changed.ok_or_else(|| RegistryError::Conflict("The module is being changed by other requests; retry.".into()))
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
pub(super) async fn insert(store: &dyn ItemStore, module: &Module) -> Result<()> {
    let mut writes = vec![
        Write::Put { item: module.to_item()?, condition: Condition::NotExists },
        pointer::create(&module.id, &module.key())?,
        join(&module.org_id, module.counter(), 1),
    ];
    if let Some(entry) = module.repository_entry() {
        writes.push(Write::Put { item: Item::from_value(entry, &module.key())?, condition: Condition::Always });
    }
    if module.is_private() {
        writes.push(version_index::created(&module.org_id, module.name.as_str(), module.provider.as_str()));
    }
    match store.transact(writes).await {
        Err(e) if e.failed_write() == Some(0) => Err(RegistryError::invalid(
            Field::Attribute("name"),
            "a module with this namespace, name and provider already exists",
        )),
        Err(e) if e.failed_write() == Some(2) => Err(RegistryError::NotFound),
        other => other.map_err(RegistryError::from),
    }
}

/// The module at an address, if the principal may read it.
pub(super) async fn readable(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
) -> Result<(Module, Organization)> {
    let read = read_at(state, &Scoped::of(principal.clone()), org_name, address, provider, false).await?;
    Ok((read.module, read.org))
}

/// [`readable`], with the versions' statuses when `statuses`: the organization, the module and
/// the statuses in one round trip once the organization is located (see [`read`]): located
/// already when its name marker was read with the token (`name_read`) or the caller is a team.
async fn read_at(
    state: &AppState,
    caller: &Scoped,
    org_name: &str,
    address: &Address,
    provider: &str,
    statuses: bool,
) -> Result<Read> {
    if let Err(refused) = check_curation(state, address.registry) {
        // Told only to those who may read the organization.
        organization(state.store.as_ref(), &caller.principal, org_name, Permission::Read).await?;
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

/// The module at an address with its versions' statuses, if the caller may read it: two round
/// trips in all, the token's with the organization's name marker, then the rest (see [`read`]).
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

pub async fn get_by_id(state: &AppState, principal: &Principal, id: &str) -> Result<(Shown, Organization)> {
    let store = state.store.as_ref();
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
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    filter: &ModuleFilter,
    page: &PageRequest,
) -> Result<(Vec<Shown>, usize, Organization)> {
    let store = state.store.as_ref();
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
    let (module, ()) = modify(state.store.as_ref(), &key, |module| {
        let writes = match changes.publishing {
            Some(change) => change.apply(module)?,
            None => Vec::new(),
        };
        if let Some(tests_enabled) = changes.tests_enabled {
            let id = module.test_config.as_ref().map_or_else(|| new_id("tc"), |tc| tc.id.clone());
            module.test_config = Some(TestConfig { id, tests_enabled });
        }
        if let Some(no_code) = changes.no_code {
            module.no_code = no_code;
        }
        Ok((writes, ()))
    })
    .await?;
    // A switch to tags recorded a sync for the job.
    state.work.notify_one();
    Ok((Shown::read(state.store.as_ref(), module).await?, org))
}
