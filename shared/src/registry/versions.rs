//! Module versions: created `pending` with an upload link, made `ok` (or failed) by ingest,
//! deleted with the cascade the spec describes (last version → its provider goes).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{RegistryError, Result};
use super::modules::{self, load, modify, organization, Address, Module, VersionStatus};
use super::names::{parse_version, RegistryName};
use super::status::{OK, PENDING};
use crate::accounts::access::Organization;
use crate::api::{timestamp, Field};
use crate::auth::{Permission, Principal};
use crate::blobs::{BlobStore, ObjectId};
use crate::ids::new_id;
use crate::state::AppState;
use crate::store::owned::BLOB;
use crate::store::{
    keys, parse_all, query_all, query_all_as, Condition, Item, ItemStore, Key, Write, MAX_TRANSACTION_WRITES,
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
            item.attrs.insert(BLOB.into(), object.clone().into());
        }
        Ok(item)
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

/// Another version of the module that SemVer ranks equal to `version` (`1.0.0+a` and `1.0.0+b`):
/// which of the two `terraform init` would get is undefined, so only one may exist.
pub(super) fn same_precedence<'m>(module: &'m Module, version: &str) -> Option<&'m str> {
    let wanted = semver::Version::parse(version).ok()?;
    module.versions.iter().map(|v| v.version.as_str()).find(|existing| {
        *existing != version
            && semver::Version::parse(existing).is_ok_and(|v| v.cmp_precedence(&wanted) == std::cmp::Ordering::Equal)
    })
}

/// Adds a `pending` version to its module: the writes of the version and of the upload it
/// waits for, to commit with the module's (see [`modules::modify`]). They fail at their first
/// write if the version exists.
pub(super) fn add_pending(module: &mut Module, version: &ModuleVersion) -> Result<Vec<Write>> {
    if let Some(existing) = same_precedence(module, &version.version) {
        return Err(RegistryError::invalid(
            Field::Attribute("version"),
            format!(
                "version {} differs from version {existing} only in build metadata, which does not order versions",
                version.version
            ),
        ));
    }
    module.versions.push(version.status_entry());
    let mut writes = vec![Write::Put { item: version.to_item()?, condition: Condition::NotExists }];
    if let Some(upload) = &version.upload {
        let pending = PendingUpload { module: module.key(), version: version.key() };
        let item = Item::from_value(keys::pending_upload(upload), &pending)?;
        writes.push(Write::Put { item, condition: Condition::NotExists });
    }
    Ok(writes)
}

/// Creates an accepted version that waits for an upload to its link.
pub async fn create(state: &AppState, accepted: AcceptedVersion) -> Result<CreatedVersion> {
    let AcceptedVersion { module, version: semver, commit_sha } = accepted;
    let upload = ObjectId::generate();
    let (module, version) = modify(state.store.as_ref(), &module.key(), |module| {
        if module.publishes_from_tags() {
            return Err(RegistryError::invalid(
                Field::Attribute("version"),
                "this module publishes a version for each tag of its repository; versions cannot be created by hand",
            ));
        }
        let version = ModuleVersion::pending(module, &semver, API_SOURCE, commit_sha.clone(), &upload);
        Ok((add_pending(module, &version)?, version))
    })
    .await
    .map_err(|e| match e {
        RegistryError::Store(e) if e.failed_write() == Some(1) => {
            RegistryError::invalid(Field::Attribute("version"), format!("version {semver} already exists"))
        }
        other => other,
    })?;
    let upload_url = upload_url(state.blobs.as_ref(), &version).await?;
    Ok(CreatedVersion { version, module, upload_url })
}

/// A link for a pending version's archive (fresh on each read), `None` once it has one. Only
/// for a principal known to publish (the version's creator); readers go through
/// [`upload_url_for`].
pub(crate) async fn upload_url(blobs: &dyn BlobStore, version: &ModuleVersion) -> Result<Option<String>> {
    match version.upload.as_deref().and_then(ObjectId::parse) {
        Some(id) if version.status == PENDING => Ok(Some(blobs.upload_url(&id, UPLOAD_LINK_VALIDITY).await?)),
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
) -> Result<(ModuleVersion, Module, Organization)> {
    let (module, org) = modules::get(state, principal, org_name, address, provider).await?;
    let key = keys::module_version(&org.id, &address.name, provider, version);
    let version = state.store.get(&key).await?.ok_or(RegistryError::NotFound)?.parse()?;
    Ok((version, module, org))
}

/// Every version of one provider, in semantic-version order.
pub async fn list(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    provider: &str,
) -> Result<(Vec<ModuleVersion>, Module, Organization)> {
    let (module, org) = modules::get(state, principal, org_name, address, provider).await?;
    let items = query_all(state.store.as_ref(), keys::module_versions(&org.id, &address.name, provider)).await?;
    let mut versions: Vec<ModuleVersion> = parse_all(&items)?;
    versions.sort_by_cached_key(|v| semver::Version::parse(&v.version).ok());
    Ok((versions, module, org))
}

/// The organization of a private module the principal owns. The version and provider forms of
/// delete do not exist for public modules: they are 404 there.
async fn owned_private(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
) -> Result<Organization> {
    let org = organization(state.store.as_ref(), principal, org_name, Permission::Own).await?;
    modules::check_curation(state, address.registry)?;
    if address.registry == RegistryName::Public {
        return Err(RegistryError::NotFound);
    }
    Ok(org)
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
    let org = owned_private(state, principal, org_name, address).await?;
    let store = state.store.as_ref();
    let module_key = address.key(&org, provider)?;
    let version: ModuleVersion = store
        .get(&keys::module_version(&org.id, &address.name, provider, version))
        .await?
        .ok_or(RegistryError::NotFound)?
        .parse()?;
    let gone = version_removal(&version);
    for _ in 0..10 {
        let mut module = load(store, &module_key).await?;
        module.versions.retain(|v| v.version != version.version);
        let mut writes = gone.clone();
        if module.versions.is_empty() {
            writes.extend(module.removal_writes());
        } else {
            let revision = module.revision;
            module.revision += 1;
            module.updated_at = timestamp(chrono::Utc::now());
            writes.push(Write::Put { item: module.to_item()?, condition: Condition::equals("revision", revision) });
        }
        match store.transact(writes).await {
            Ok(()) => {
                remove_objects(state, [version].iter()).await;
                return Ok(());
            }
            Err(e) if e.failed_write() == Some(0) => return Err(RegistryError::NotFound),
            Err(e) if e.failed_write() == Some(gone.len()) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(RegistryError::Conflict("The module is being changed by other requests; retry.".into()))
}

fn version_removal(version: &ModuleVersion) -> Vec<Write> {
    let mut writes = vec![Write::Delete { key: version.key(), condition: Condition::Exists }];
    writes.extend(
        version.upload.iter().map(|id| Write::Delete { key: keys::pending_upload(id), condition: Condition::Always }),
    );
    writes
}

/// Deletes one provider of a module and all its versions. When they fit in one transaction the
/// whole removal is atomic; otherwise versions go first and the module record last, so an
/// interrupted delete leaves a module that can be deleted again.
pub(super) async fn remove_provider(state: &AppState, module: &Module) -> Result<()> {
    let store: &dyn ItemStore = state.store.as_ref();
    let versions: Vec<ModuleVersion> = if module.is_private() {
        let query = keys::module_versions(&module.org_id, module.name.as_str(), module.provider.as_str());
        query_all_as(store, query).await?
    } else {
        Vec::new()
    };
    let version_writes: Vec<Write> = versions.iter().flat_map(version_removal).collect();
    let module_writes = module.removal_writes();
    if version_writes.len() + module_writes.len() <= MAX_TRANSACTION_WRITES {
        let first_module_write = version_writes.len();
        let writes = version_writes.into_iter().chain(module_writes).collect();
        match store.transact(writes).await {
            Err(e) if e.failed_write() == Some(first_module_write) => {
                return Err(RegistryError::Conflict("The module changed while it was being deleted; retry.".into()))
            }
            other => other?,
        }
    } else {
        for chunk in version_writes.chunks(MAX_TRANSACTION_WRITES) {
            let relaxed = chunk.iter().map(|w| Write::Delete { key: w.key().clone(), condition: Condition::Always });
            store.transact(relaxed.collect()).await?;
        }
        let current = load(store, &module.key()).await?;
        store.transact(current.removal_writes()).await?;
    }
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
    let org = owned_private(state, principal, org_name, address).await?;
    let module = load(state.store.as_ref(), &address.key(&org, provider)?).await?;
    remove_provider(state, &module).await
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
        remove_provider(state, module).await?;
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
