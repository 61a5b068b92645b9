//! The module record: what is stored for each (namespace, name, provider), its constants, its
//! keys and the writes that store and remove it, which of its versions consumers get by default,
//! and [`Address`], where a request points. Nothing here reads the store.

use serde::{Deserialize, Serialize};

use crate::accounts::access::{join, Organization};
use crate::api::timestamp;
use crate::ids::new_id;
use crate::registry::error::{RegistryError, Result};
use crate::registry::names::{ModuleName, Namespace, ProviderName, RegistryName};
use crate::registry::status::VersionStatus;
use crate::registry::version_index;
use crate::store::{keys, pointer, Condition, Item, Key, Transaction, Write, Writes};

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
    /// an item of its own (see [`statuses`](super::statuses)), so a module holds any number of
    /// versions.
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
    /// What modules stored before versions and downloads had items of their own;
    /// [`load`](super::load) moves them out.
    #[serde(default, rename = "versions", skip_serializing)]
    pub(in crate::registry) legacy_versions: Vec<VersionStatus>,
    #[serde(default, rename = "downloads", skip_serializing)]
    pub(in crate::registry) legacy_downloads: i64,
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

    pub(in crate::registry) fn to_item(&self) -> Result<Item> {
        let mut owned = vec![keys::id_pointer(&self.id)];
        owned.extend(self.repository_entry());
        Ok(Item::from_value(self.key(), self)?.with_satellites(&owned))
    }

    /// Where a VCS module is listed among the modules of its repository.
    pub(super) fn repository_entry(&self) -> Option<Key> {
        self.vcs_repo.as_ref().map(|repo| repo.index_key(&self.org_id, &self.id))
    }

    pub(super) fn counter(&self) -> &'static str {
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
    pub(in crate::registry) fn version_index_key(&self) -> Key {
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

    /// Adds the writes that remove the module record itself (not its versions) to `transaction`.
    /// The handle is the record's delete, on the revision the module was read at: it fails when
    /// the module changed since.
    pub(in crate::registry) fn add_removal(&self, transaction: &mut Transaction) -> Writes {
        let module_unchanged =
            transaction.add(Write::Delete { key: self.key(), condition: Condition::equals("revision", self.revision) });
        transaction.extend([
            pointer::remove(&self.id),
            join(&self.org_id, self.counter(), -1),
            Write::Delete { key: self.downloads_key(), condition: Condition::Always },
            Write::Delete { key: self.version_index_key(), condition: Condition::Always },
        ]);
        transaction.extend(self.repository_entry().map(|key| Write::Delete { key, condition: Condition::Always }));
        module_unchanged
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

/// The versions new consumers may get among `statuses` (`ok`, not revoked), in their order.
pub fn offered_versions(statuses: &[VersionStatus]) -> impl Iterator<Item = &VersionStatus> {
    statuses.iter().filter(|status| status.offered())
}

/// The version consumers get by default among `statuses`: the highest stable offered version,
/// else the highest prerelease.
pub(in crate::registry) fn latest_of(statuses: &[VersionStatus]) -> Option<&VersionStatus> {
    offered_versions(statuses).max_by_key(|status| latest_rank(&status.version))
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
    pub(in crate::registry) fn stored_namespace(&self, org: &Organization) -> Result<Option<&str>> {
        match self.registry {
            RegistryName::Private if self.namespace == org.name => Ok(None),
            RegistryName::Private => Err(RegistryError::NotFound),
            RegistryName::Public => Ok(Some(&self.namespace)),
        }
    }

    pub(in crate::registry) fn key(&self, org: &Organization, provider: &str) -> Result<Key> {
        Ok(keys::module(&org.id, self.stored_namespace(org)?, &self.name, provider))
    }
}
