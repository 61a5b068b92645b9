//! Module versions: created `pending` with an upload link, made `ok` (or failed) by ingest,
//! deleted with the cascade the spec describes (last version → its provider goes).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{RegistryError, Result};
use super::modules::{self, latest_of, load, organization, precedence, statuses, Address, Module, VersionStatus};
use super::names::{parse_version, RegistryName};
use super::status::{Deprecation, Revocation, OK, PENDING};
use super::version_index;
use crate::api::{timestamp, Field, PageRequest};
use crate::archive::ModuleMetadata;
use crate::auth::{Permission, Principal};
use crate::blobs::{BlobStore, ObjectId};
use crate::ids::new_id;
use crate::state::AppState;
use crate::store::owned::BLOB;
use crate::store::{
    keys, query_all_as, retry_on_race, Condition, Item, ItemStore, Key, Transaction, UpdateOp, Write, Writes,
    MAX_TRANSACTION_WRITES,
};

/// How long an upload link stays valid.
pub const UPLOAD_LINK_VALIDITY: Duration = Duration::from_secs(25 * 3600);
/// The `source` of versions created through the API, as HCP Terraform marks them.
pub const API_SOURCE: &str = "tfe-api";
/// The longest description kept (bytes): the public registry's are a sentence or two.
const DESCRIPTION_KEPT: usize = 300;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleVersion {
    pub id: String,
    pub org_id: String,
    pub module_id: String,
    pub name: String,
    pub provider: String,
    pub version: String,
    pub status: String,
    pub source: String,
    pub error: Option<String>,
    pub commit_sha: Option<String>,
    /// The object the upload link writes, while the version waits for its archive.
    pub upload: Option<String>,
    /// The validated archive that downloads serve, once `ok`.
    pub archive: Option<String>,
    pub sha256: Option<String>,
    #[serde(default)]
    pub root_module_files: Vec<String>,
    pub readme: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Set while the version is deprecated (see `lifecycle`); still offered to consumers.
    #[serde(default)]
    pub deprecation: Option<Deprecation>,
    /// Set while the version is revoked: no longer offered to new consumers.
    #[serde(default)]
    pub revocation: Option<Revocation>,
    /// Bumped by every lifecycle change, which is written on the condition that it is unchanged.
    #[serde(default)]
    pub lifecycle_revision: u64,
}

impl ModuleVersion {
    /// The first paragraph of prose of the version's README (headings, badges and blank lines
    /// skipped): the registry protocol's `description` of this version.
    pub fn description(&self) -> Option<String> {
        let readme = self.readme.as_deref()?;
        let prose = |line: &&str| !line.is_empty() && !line.starts_with(['#', '[', '!', '<', '=', '-']);
        let first: Vec<&str> =
            readme.lines().map(str::trim).skip_while(|l| !prose(l)).take_while(|l| !l.is_empty()).collect();
        let mut text = first.join(" ");
        let mut end = DESCRIPTION_KEPT.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        (!text.is_empty()).then_some(text)
    }

    /// A new version of `module`, `pending` until an archive lands on `upload`. `source` is
    /// where it comes from: the API, or the repository's provider.
    pub fn pending(
        module: &Module,
        version: &semver::Version,
        source: &str,
        commit_sha: Option<String>,
        upload: &ObjectId,
    ) -> Self {
        let now = timestamp(chrono::Utc::now());
        ModuleVersion {
            id: new_id("modver"),
            org_id: module.org_id.clone(),
            module_id: module.id.clone(),
            name: module.name.to_string(),
            provider: module.provider.to_string(),
            version: version.to_string(),
            status: PENDING.into(),
            source: source.to_owned(),
            error: None,
            commit_sha,
            upload: Some(upload.to_string()),
            archive: None,
            sha256: None,
            root_module_files: Vec::new(),
            readme: None,
            created_at: now.clone(),
            updated_at: now,
            deprecation: None,
            revocation: None,
            lifecycle_revision: 0,
        }
    }

    pub fn key(&self) -> Key {
        keys::module_version(&self.org_id, &self.name, &self.provider, &self.version)
    }

    pub(super) fn to_item(&self) -> Result<Item> {
        let mut item = Item::from_value(self.key(), self)?;
        let owned: Vec<Key> = self.upload.iter().map(|id| keys::pending_upload(id)).collect();
        item = item.with_satellites(&owned);
        if let Some(object) = self.archive.as_ref().or(self.upload.as_ref()) {
            item.set(BLOB, object.clone().into());
        }
        Ok(item)
    }

    /// Where the version's entry in its module's list of versions lives.
    pub(super) fn status_key(&self) -> Key {
        keys::version_status(&self.org_id, &self.name, &self.provider, precedence(&self.version))
    }

    pub(super) fn status_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.status_key(), &self.status_entry())?)
    }

    /// The objects this version holds in the blob store.
    pub(super) fn objects(&self) -> impl Iterator<Item = ObjectId> + '_ {
        self.upload.iter().chain(self.archive.iter()).filter_map(|id| ObjectId::parse(id))
    }

    pub(super) fn status_entry(&self) -> VersionStatus {
        VersionStatus {
            version: self.version.clone(),
            status: self.status.clone(),
            error: self.error.clone(),
            published_at: (self.status == OK).then(|| self.updated_at.clone()),
            deprecation: self.deprecation.clone(),
            revocation: self.revocation.clone(),
        }
    }
}

/// What waits under `UPLOAD#<object-id>`: the version an uploaded archive belongs to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PendingUpload {
    pub module: Key,
    pub version: Key,
}

pub struct NewVersion {
    pub version: String,
    pub commit_sha: Option<String>,
}

/// A version the principal may create: a private module in an organization whose modules it
/// manages, and a valid number. Created by [`create`] with an upload link, or by publishing from
/// a commit of the module's branch.
pub struct AcceptedVersion {
    pub module: Module,
    pub version: semver::Version,
    pub commit_sha: Option<String>,
}

/// A created version and the link its archive is uploaded to (while it waits for one).
pub struct CreatedVersion {
    pub version: ModuleVersion,
    pub module: Module,
    pub upload_url: Option<String>,
}

/// Checks a request to create a version, whichever way the version will get its archive.
pub async fn accept(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
    new: NewVersion,
) -> Result<AcceptedVersion> {
    let store = state.store.as_ref();
    let org = organization(store, principal, org_name, Permission::ManageModules).await?;
    modules::check_curation(state, address.registry)?;
    let module = load(store, &address.key(&org, provider)?).await?;
    if address.registry == RegistryName::Public {
        return Err(RegistryError::Forbidden("Versions cannot be created for public modules.".into()));
    }
    let version = parse_version(Field::Attribute("version"), &new.version)?;
    Ok(AcceptedVersion { module, version, commit_sha: new.commit_sha })
}

/// Why a version could not be added: its place in SemVer's order is taken, by the same version
/// or by one that differs only in build metadata.
pub(crate) struct Taken {
    pub existing: String,
}

impl Taken {
    /// The answer to a client that asked for `version`.
    pub(crate) fn refusal(&self, version: &str) -> RegistryError {
        let detail = if self.existing == version {
            format!("version {version} already exists")
        } else {
            format!(
                "version {version} differs from version {} only in build metadata, which does not order versions",
                self.existing
            )
        };
        RegistryError::invalid(Field::Attribute("version"), detail)
    }
}

/// Adds a `pending` version to its module in one transaction with `extra`: the version, its
/// entry in the module's list (keyed by its precedence, so it fails for a version SemVer ranks
/// equal to an existing one) and the upload it waits for. The module itself is only bumped
/// (`ADD revision`), never rewritten: creates of distinct versions do not contend, while every
/// read-modify-write of the module (a delete among them) sees that it changed.
pub(crate) async fn insert_pending(
    store: &dyn ItemStore,
    module: &Module,
    version: &ModuleVersion,
    extra: Vec<Write>,
) -> Result<std::result::Result<(), Taken>> {
    let bump = vec![UpdateOp::Add("revision".into(), 1), UpdateOp::set("updated_at", version.created_at.clone())];
    let mut transaction = Transaction::new();
    let module_exists = transaction.add(Write::Update { key: module.key(), ops: bump, condition: Condition::Exists });
    // The version and its entry (keyed by its precedence): either already there means its place is taken.
    let version_claim = transaction.extend([
        Write::Put { item: version.to_item()?, condition: Condition::NotExists },
        Write::Put { item: version.status_item()?, condition: Condition::NotExists },
    ]);
    if let Some(upload) = &version.upload {
        let pending = PendingUpload { module: module.key(), version: version.key() };
        let item = Item::from_value(keys::pending_upload(upload), &pending)?;
        transaction.add(Write::Put { item, condition: Condition::NotExists });
    }
    transaction.extend(extra);
    transaction.add(version_index::change(module.version_index_key(), None, &version.status_entry())?);
    match version_index::transact(store, transaction).await {
        Ok(()) => Ok(Ok(())),
        Err(e) if e.failed_on(module_exists) => Err(RegistryError::NotFound),
        Err(e) if e.failed_on(version_claim) => {
            let holder = store.get(&version.status_key()).await?;
            let existing = match holder {
                Some(item) => item.parse::<VersionStatus>()?.version,
                None => version.version.clone(),
            };
            Ok(Err(Taken { existing }))
        }
        Err(e) => Err(e.into()),
    }
}

/// Creates an accepted version that waits for an upload to its link.
pub async fn create(state: &AppState, accepted: AcceptedVersion) -> Result<CreatedVersion> {
    let AcceptedVersion { module, version: semver, commit_sha } = accepted;
    if module.publishes_from_tags() {
        return Err(RegistryError::invalid(
            Field::Attribute("version"),
            "this module publishes a version for each tag of its repository; versions cannot be created by hand",
        ));
    }
    let upload = ObjectId::generate();
    let version = ModuleVersion::pending(&module, &semver, API_SOURCE, commit_sha, &upload);
    if let Err(taken) = insert_pending(state.store.as_ref(), &module, &version, Vec::new()).await? {
        return Err(taken.refusal(&version.version));
    }
    let upload_url = upload_url(state.blobs.as_ref(), &version).await?;
    Ok(CreatedVersion { version, module, upload_url })
}

/// A link for a pending version's archive (fresh on each read), `None` once it has one. Only
/// for a principal known to publish (the version's creator); readers go through
/// [`upload_url_for`].
/// The link a pending version's archive is uploaded to. Only a version created through the API
/// has one: a version whose source is a repository gets its archive from the repository alone,
/// so no upload can stand in for the tag it is shown as.
pub(crate) async fn upload_url(blobs: &dyn BlobStore, version: &ModuleVersion) -> Result<Option<String>> {
    match version.upload.as_deref().and_then(ObjectId::parse) {
        Some(id) if version.status == PENDING && version.source == API_SOURCE => {
            Ok(Some(blobs.upload_url(&id, UPLOAD_LINK_VALIDITY).await?))
        }
        _ => Ok(None),
    }
}

/// The upload link as a reader of the version sees it: the link is a write capability, so only
/// a principal that may manage the organization's modules gets it.
pub async fn upload_url_for(
    blobs: &dyn BlobStore,
    principal: &Principal,
    version: &ModuleVersion,
) -> Result<Option<String>> {
    if !principal.can(&version.org_id, Permission::ManageModules) {
        return Ok(None);
    }
    upload_url(blobs, version).await
}

pub async fn read(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
    version: &str,
) -> Result<(ModuleVersion, Option<ModuleMetadata>, Module)> {
    let (module, org) = modules::readable(state, principal, org_name, address, provider).await?;
    let found = super::metadata::with_version(state.store.as_ref(), &org.id, &address.name, provider, version).await?;
    let (version, metadata) = found.ok_or(RegistryError::NotFound)?;
    Ok((version, metadata, module))
}

/// One page of a provider's versions in semantic-version order, and how many there are: the
/// order comes from the versions' small status entries, and only the page's versions are read.
pub async fn list(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
    page: &PageRequest,
) -> Result<(Vec<ModuleVersion>, usize)> {
    let store = state.store.as_ref();
    let (module, org) = modules::readable(state, principal, org_name, address, provider).await?;
    let statuses = statuses(store, &module).await?;
    let total = statuses.len();
    let keys: Vec<Key> = page
        .slice(statuses)
        .iter()
        .map(|s| keys::module_version(&org.id, &address.name, provider, &s.version))
        .collect();
    let versions =
        store.get_many(&keys).await?.into_iter().flatten().map(|item| item.parse()).collect::<Result<_, _>>()?;
    Ok((versions, total))
}

/// Deletes one version; deleting a provider's last version deletes the provider.
pub async fn delete(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
    version: &str,
) -> Result<()> {
    let org = modules::managing_versions(state, principal, org_name, address, Permission::Own).await?;
    let store = state.store.as_ref();
    let module_key = address.key(&org, provider)?;
    let version: ModuleVersion = store
        .get(&keys::module_version(&org.id, &address.name, provider, version))
        .await?
        .ok_or(RegistryError::NotFound)?
        .parse()?;
    let (version, module_key) = (&version, &module_key);
    let removed = retry_on_race(|| async move {
        let mut module = load(store, module_key).await?;
        let others: Vec<VersionStatus> =
            statuses(store, &module).await?.into_iter().filter(|s| s.version != version.version).collect();
        let mut transaction = Transaction::new();
        let version_there = add_version_removal(&mut transaction, version);
        let module_unchanged = if others.is_empty() {
            module.add_removal(&mut transaction)
        } else {
            if module.latest.as_ref().is_some_and(|latest| latest.version == version.version) {
                module.latest = None;
                module.description = None;
                if let Some(next) = latest_of(&others) {
                    let key = keys::module_version(&module.org_id, &version.name, &version.provider, &next.version);
                    let stored: Option<ModuleVersion> = store.get(&key).await?.map(|item| item.parse()).transpose()?;
                    module.offer(next, stored.and_then(|v| v.description()));
                }
            }
            let revision = module.revision;
            module.revision += 1;
            module.updated_at = timestamp(chrono::Utc::now());
            let module_unchanged = transaction
                .add(Write::Put { item: module.to_item()?, condition: Condition::equals("revision", revision) });
            // Not when the module goes too: its removal deletes the index, and a transaction
            // may touch an item once.
            transaction.add(version_index::removal(module.version_index_key(), &version.status_entry()));
            module_unchanged
        };
        match version_index::transact(store, transaction).await {
            Ok(()) => Ok(Some(())),
            Err(e) if e.failed_on(version_there) => Err(RegistryError::NotFound),
            Err(e) if e.failed_on(module_unchanged) => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    removed.ok_or_else(|| RegistryError::Conflict("The module is being changed by other requests; retry.".into()))?;
    remove_objects(state, [version].into_iter()).await;
    Ok(())
}

/// Adds the writes that remove one version to `transaction`. The handle is the version's own
/// delete, on its being there: it fails when the version is gone already.
fn add_version_removal(transaction: &mut Transaction, version: &ModuleVersion) -> Writes {
    let version_there = transaction.add(Write::Delete { key: version.key(), condition: Condition::Exists });
    transaction.extend([
        Write::Delete { key: version.status_key(), condition: Condition::Always },
        Write::Delete { key: super::metadata::key(version), condition: Condition::Always },
    ]);
    transaction.extend(
        version.upload.iter().map(|id| Write::Delete { key: keys::pending_upload(id), condition: Condition::Always }),
    );
    version_there
}

/// Deletes one provider of a module and all its versions. When they fit in one transaction the
/// whole removal is atomic; otherwise versions go first and the module record last, on the
/// revision read before the versions were: a version created meanwhile makes it start again,
/// so none is left behind, and an interrupted delete leaves a module that can be deleted again.
pub(super) async fn remove_provider(state: &AppState, module_key: &Key) -> Result<()> {
    let store: &dyn ItemStore = state.store.as_ref();
    let removed = retry_on_race(|| async move {
        let module = load(store, module_key).await?;
        let versions: Vec<ModuleVersion> = if module.is_private() {
            let query = keys::module_versions(&module.org_id, module.name.as_str(), module.provider.as_str());
            query_all_as(store, query).await?
        } else {
            Vec::new()
        };
        let mut gone = Transaction::new();
        for version in &versions {
            add_version_removal(&mut gone, version);
        }
        let version_writes = gone.into_writes();
        // Only counted here: the module's removal goes last in whichever transaction commits.
        let mut module_removal = Transaction::new();
        module.add_removal(&mut module_removal);
        let mut transaction = Transaction::new();
        let versions_there = if version_writes.len() + module_removal.len() <= MAX_TRANSACTION_WRITES {
            Some(transaction.extend(version_writes))
        } else {
            for chunk in version_writes.chunks(MAX_TRANSACTION_WRITES) {
                let relaxed =
                    chunk.iter().map(|w| Write::Delete { key: w.key().clone(), condition: Condition::Always });
                store.transact(relaxed.collect()).await?;
            }
            None
        };
        let module_unchanged = module.add_removal(&mut transaction);
        match transaction.commit(store).await {
            Ok(()) => Ok(Some(versions)),
            // A version deleted or the module changed meanwhile: read both again.
            Err(e) if versions_there.is_some_and(|there| e.failed_on(there)) || e.failed_on(module_unchanged) => {
                Ok(None)
            }
            Err(e) => Err(RegistryError::from(e)),
        }
    })
    .await?;
    let versions = removed
        .ok_or_else(|| RegistryError::Conflict("The module changed while it was being deleted; retry.".into()))?;
    remove_objects(state, versions.iter()).await;
    Ok(())
}

/// Removes deleted versions' archives. The records are already gone, so a failure here only
/// leaves an unreachable object behind: it is logged, not returned.
async fn remove_objects(state: &AppState, versions: impl Iterator<Item = &ModuleVersion>) {
    for id in versions.flat_map(ModuleVersion::objects) {
        if let Err(e) = state.blobs.delete(&id).await {
            tracing::warn!(object = %id, error = %e, "archive of a deleted version not removed");
        }
    }
}

/// Deletes one provider (the `…/:name/:provider` form).
pub async fn delete_provider(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
) -> Result<()> {
    let org = modules::managing_versions(state, principal, org_name, address, Permission::Own).await?;
    remove_provider(state, &address.key(&org, provider)?).await
}

/// Deletes every provider of a module (the `…/:namespace/:name` form); for a public module,
/// the organization's record of it.
pub async fn delete_module(state: &AppState, principal: &Principal, org_name: &str, address: &Address) -> Result<()> {
    let org = organization(state.store.as_ref(), principal, org_name, Permission::Own).await?;
    modules::check_curation(state, address.registry)?;
    let query = keys::module_providers(&org.id, address.stored_namespace(&org)?, &address.name);
    let providers: Vec<Module> = query_all_as(state.store.as_ref(), query).await?;
    if providers.is_empty() {
        return Err(RegistryError::NotFound);
    }
    for module in &providers {
        remove_provider(state, &module.key()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod description_tests {
    use super::ModuleVersion;

    fn with_readme(readme: &str) -> ModuleVersion {
        let mut version: ModuleVersion = serde_json::from_value(serde_json::json!({
            "id": "modver-1", "org_id": "org-1", "module_id": "mod-1", "name": "vpc", "provider": "aws",
            "version": "1.0.0", "status": "ok", "source": "tfe-api", "error": null, "commit_sha": null,
            "upload": null, "archive": null, "sha256": null, "readme": null,
            "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z",
        }))
        .expect("a version");
        version.readme = Some(readme.to_owned());
        version
    }

    #[test]
    fn the_description_is_the_readme_s_first_paragraph_of_prose() {
        let readme = "# VPC\n\n[![badge](x)](y)\n\nCreates a VPC\nwith subnets.\n\nMore text.";
        assert_eq!(with_readme(readme).description().as_deref(), Some("Creates a VPC with subnets."));
        assert_eq!(with_readme("# Only a title\n").description(), None);
        assert_eq!(with_readme(&"é".repeat(400)).description().map(|d| d.len()), Some(300));
    }
}
