//! Registry modules: one record per (namespace, name, provider), private ones filled by
//! uploaded versions, public ones kept as records of curated modules.

use serde::{Deserialize, Serialize};

use super::error::{RegistryError, Result};
use super::names::{ModuleName, Namespace, ProviderName, RegistryName};
use super::status::OK;
use crate::accounts::access::{self, join, Organization};
use crate::api::{timestamp, Field, PageRequest};
use crate::auth::{Permission, Principal};
use crate::config::Edition;
use crate::ids::new_id;
use crate::state::AppState;
use crate::store::{keys, parse_all, pointer, query_all_as, retry_on_race, Condition, Item, ItemStore, Key, Write};

pub const PRIVATE_COUNT: &str = "private_module_count";
pub const PUBLIC_COUNT: &str = "public_module_count";
/// `publishing_mechanism` of a module that publishes a version for each tag of its repository.
pub const TAGS: &str = "git_tag";
/// `publishing-mechanism` as shown for a module not connected to a repository (stored as none).
pub const NON_VCS: &str = "non_vcs";
/// `publishing_mechanism` of a module whose versions are made by hand from a branch's commits.
pub const BRANCH: &str = "branch";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionStatus {
    pub version: String,
    pub status: String,
    pub error: Option<String>,
    /// When the version became `ok`.
    #[serde(default)]
    pub published_at: Option<String>,
}

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
    /// Every version with its status, kept here so one read renders the module.
    #[serde(default)]
    pub versions: Vec<VersionStatus>,
    #[serde(default)]
    pub test_config: Option<TestConfig>,
    /// `git_tag` or `branch` for modules published from VCS.
    #[serde(default)]
    pub publishing_mechanism: Option<String>,
    /// The repository of a module published from VCS.
    #[serde(default)]
    pub vcs_repo: Option<VcsRepo>,
    /// The first paragraph of the latest ingested README, for the registry protocol.
    #[serde(default)]
    pub description: Option<String>,
    /// Downloads through the registry protocol.
    #[serde(default)]
    pub downloads: u64,
    /// Bumped by every change; writes are conditional on it (optimistic concurrency).
    #[serde(default)]
    pub revision: u64,
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
            versions: Vec::new(),
            test_config: None,
            publishing_mechanism: None,
            vcs_repo: None,
            description: None,
            downloads: 0,
            revision: 0,
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
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }

    fn counter(&self) -> &'static str {
        if self.is_private() {
            PRIVATE_COUNT
        } else {
            PUBLIC_COUNT
        }
    }

    /// The `ok` versions, lowest first in semantic-version order.
    pub fn ok_versions(&self) -> Vec<(semver::Version, &VersionStatus)> {
        let mut ok: Vec<_> = self
            .versions
            .iter()
            .filter(|v| v.status == OK)
            .filter_map(|v| Some((semver::Version::parse(&v.version).ok()?, v)))
            .collect();
        ok.sort_by(|a, b| a.0.cmp(&b.0));
        ok
    }

    /// The version consumers get by default: the highest stable `ok` version, else the highest
    /// prerelease.
    pub fn latest_ok(&self) -> Option<&VersionStatus> {
        let ok = self.ok_versions();
        let stable = ok.iter().rev().find(|(v, _)| v.pre.is_empty());
        stable.or(ok.last()).map(|(_, status)| *status)
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
        ]
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

/// Public modules exist only where the edition allows their curation.
pub(super) fn check_curation(state: &AppState, registry: RegistryName) -> Result<()> {
    if registry == RegistryName::Public && state.config.edition == Edition::SelfHosted {
        return Err(RegistryError::CurationDisabled);
    }
    Ok(())
}

pub(super) async fn load(store: &dyn ItemStore, key: &Key) -> Result<Module> {
    store.get(key).await?.ok_or(RegistryError::NotFound)?.parse().map_err(RegistryError::from)
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
        match store.transact(writes).await {
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

/// Stores a new module, its id pointer and its count, if its address is free (422 otherwise).
pub(super) async fn insert(store: &dyn ItemStore, module: &Module) -> Result<()> {
    let writes = vec![
        Write::Put { item: module.to_item()?, condition: Condition::NotExists },
        pointer::create(&module.id, &module.key())?,
        join(&module.org_id, module.counter(), 1),
    ];
    match store.transact(writes).await {
        Err(e) if e.failed_write() == Some(0) => Err(RegistryError::invalid(
            Field::Attribute("name"),
            "a module with this namespace, name and provider already exists",
        )),
        Err(e) if e.failed_write() == Some(2) => Err(RegistryError::NotFound),
        other => other.map_err(RegistryError::from),
    }
}

pub async fn get(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
) -> Result<(Module, Organization)> {
    let org = organization(state.store.as_ref(), principal, org_name, Permission::Read).await?;
    check_curation(state, address.registry)?;
    let module = load(state.store.as_ref(), &address.key(&org, provider)?).await?;
    Ok((module, org))
}

pub async fn get_by_id(state: &AppState, principal: &Principal, id: &str) -> Result<(Module, Organization)> {
    let store = state.store.as_ref();
    let module: Module = pointer::follow(store, id).await?.ok_or(RegistryError::NotFound)?.parse()?;
    access::require(principal, &module.org_id, Permission::Read)?;
    let org = access::get_by_id(store, &module.org_id).await?;
    Ok((module, org))
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
) -> Result<(Vec<Module>, usize, Organization)> {
    let store = state.store.as_ref();
    let org = organization(store, principal, org_name, Permission::Read).await?;
    if filter.organization_name.as_deref().is_some_and(|name| name != org.name) {
        return Ok((Vec::new(), 0, org));
    }
    let query = keys::modules(&org.id, filter.registry.map(RegistryName::as_str));
    if filter.q.is_none() && filter.provider.is_none() {
        let total = match filter.registry {
            Some(RegistryName::Private) => org.private_module_count,
            Some(RegistryName::Public) => org.public_module_count,
            None => org.private_module_count + org.public_module_count,
        };
        let modules = parse_all(&page.fetch(store, query).await?)?;
        return Ok((modules, total, org));
    }
    // Searching reads the organization's modules once and filters them here.
    let all: Vec<Module> = query_all_as(store, query).await?;
    let matching: Vec<Module> = all.into_iter().filter(|m| filter.matches(m, &org)).collect();
    let total = matching.len();
    Ok((page.slice(matching), total, org))
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
) -> Result<(Module, Organization)> {
    let org = organization(state.store.as_ref(), principal, org_name, Permission::Own).await?;
    if address.registry != RegistryName::Private {
        return Err(RegistryError::NotFound);
    }
    let key = address.key(&org, provider)?;
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
    Ok((module, org))
}
