//! Provider versions and their platforms. A version is made with the GPG key that signs it and
//! two upload links (`SHA256SUMS`, `SHA256SUMS.sig`); each platform adds a link for its zip
//! archive. Every change to a version or its platforms is one conditional write of the version
//! (on its revision) with its upload markers and its entry in the provider's version index, so
//! that racing uploads and requests never lose one another's change.

use std::time::Duration;

use super::gpg_keys::{self, USES};
use super::index;
use super::operations::{self, ProviderAddress};
use super::record::{
    check_protocols, parse_provider_version, Asset, NewPlatform, Part, Platform, Provider, ProviderUpload,
    ProviderVersion, MAX_PLATFORMS,
};
use crate::accounts::access::Organization;
use crate::api::{timestamp, Field, PageRequest};
use crate::auth::{Permission, Principal};
use crate::blobs::{BlobStore, ObjectId};
use crate::ids::new_id;
use crate::registry::error::{RegistryError, Result};
use crate::state::AppState;
use crate::store::{keys, query_all_as, retry_on_race, Condition, Item, ItemStore, Key, Transaction, UpdateOp, Write};

/// How long an upload link stays valid.
pub const UPLOAD_LINK_VALIDITY: Duration = Duration::from_secs(25 * 3600);

pub struct NewVersion {
    pub version: String,
    pub key_id: String,
    pub protocols: Vec<String>,
}

/// A version with the links its files are uploaded to, for a caller who may upload them.
pub struct Shown {
    pub version: ProviderVersion,
    pub links: Links,
}

/// The link of each file of a version: where it is uploaded while its version waits for it
/// (shown only to those who manage providers: a link is a write capability), where it is
/// downloaded once it checked out.
#[derive(Debug, Default)]
pub struct Links {
    pub shasums: FileLink,
    pub shasums_sig: FileLink,
    /// (os, arch, link) of each platform's archive.
    pub binaries: Vec<(String, String, FileLink)>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub enum FileLink {
    Upload(String),
    Download(String),
    #[default]
    None,
}

impl Links {
    pub fn binary(&self, platform: &Platform) -> &FileLink {
        let found = self.binaries.iter().find(|(os, arch, _)| *os == platform.os && *arch == platform.arch);
        found.map_or(&FileLink::None, |(_, _, link)| link)
    }
}

/// How long a download link of the management API stays valid.
const DOWNLOAD_LINK_VALIDITY: Duration = Duration::from_secs(600);

async fn file_link(blobs: &dyn BlobStore, uploads: bool, asset: &Asset) -> Result<FileLink> {
    if let Some(id) = asset.upload.as_deref().and_then(ObjectId::parse) {
        return Ok(match uploads {
            true => FileLink::Upload(blobs.upload_url(&id, UPLOAD_LINK_VALIDITY).await?),
            false => FileLink::None,
        });
    }
    Ok(match asset.stored() {
        Some(id) => FileLink::Download(blobs.download_url(&id, DOWNLOAD_LINK_VALIDITY).await?),
        None => FileLink::None,
    })
}

/// The links of `version`'s files as the caller may see them.
pub async fn links(blobs: &dyn BlobStore, principal: &Principal, version: &ProviderVersion) -> Result<Links> {
    let uploads = principal.can(&version.org_id, Permission::ManageProviders);
    let mut links = Links {
        shasums: file_link(blobs, uploads, &version.shasums).await?,
        shasums_sig: file_link(blobs, uploads, &version.shasums_sig).await?,
        binaries: Vec::new(),
    };
    for platform in &version.platforms {
        let link = file_link(blobs, uploads, &platform.binary).await?;
        links.binaries.push((platform.os.clone(), platform.arch.clone(), link));
    }
    Ok(links)
}

/// A private provider the caller holds `permission` on; a public one has no versions.
async fn private_provider(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
    permission: Permission,
) -> Result<(Provider, Organization)> {
    let (provider, org) = operations::get(state, principal, org_name, address, permission).await?;
    if !provider.is_private() {
        return Err(RegistryError::Forbidden("Versions cannot be created for public providers.".into()));
    }
    Ok((provider, org))
}

fn marker(version: &ProviderVersion, upload: &ObjectId, part: Part) -> Result<Write> {
    let marker = ProviderUpload { version: version.key(), part };
    let item = Item::from_value(keys::provider_upload(upload.as_str()), &marker)?;
    Ok(Write::Put { item, condition: Condition::NotExists })
}

pub async fn create_version(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
    new: NewVersion,
) -> Result<Shown> {
    let (provider, org) = private_provider(state, principal, org_name, address, Permission::ManageProviders).await?;
    let store = state.store.as_ref();
    let number = parse_provider_version(&new.version)?;
    check_protocols(&new.protocols)?;
    let key_field = Field::Attribute("key-id");
    let key = match gpg_keys::read(store, &org, &new.key_id).await {
        Ok(key) => key,
        Err(RegistryError::NotFound) => {
            let detail = format!(
                "key-id `{}` names no GPG key of namespace {}",
                new.key_id.chars().take(40).collect::<String>(),
                org.name
            );
            return Err(RegistryError::invalid(key_field, detail));
        }
        Err(e) => return Err(e),
    };
    let (sums, sig) = (ObjectId::generate(), ObjectId::generate());
    let version =
        ProviderVersion::pending(&provider, &number, (&key.key_id, &key.ascii_armor), new.protocols, (&sums, &sig));
    let mut transaction = Transaction::new();
    let provider_there = transaction.add(operations::version_added(&provider));
    let version_claim = transaction.add(Write::Put { item: version.to_item()?, condition: Condition::NotExists });
    transaction.add(marker(&version, &sums, Part::Shasums)?);
    transaction.add(marker(&version, &sig, Part::ShasumsSig)?);
    let key_there = transaction.add(Write::Update {
        key: keys::gpg_key(&org.id, &key.key_id),
        ops: vec![UpdateOp::Add(USES.into(), 1)],
        condition: Condition::Exists,
    });
    transaction.add(index::change(None, &version)?);
    match index::transact(store, transaction).await {
        Ok(()) => {}
        Err(e) if e.failed_on(provider_there) => return Err(RegistryError::NotFound),
        Err(e) if e.failed_on(version_claim) => {
            let detail = format!("version {} already exists", version.version);
            return Err(RegistryError::invalid(Field::Attribute("version"), detail));
        }
        Err(e) if e.failed_on(key_there) => {
            return Err(RegistryError::invalid(key_field, format!("the key {} was removed", key.key_id)))
        }
        Err(e) => return Err(e.into()),
    }
    let links = links(state.blobs.as_ref(), principal, &version).await?;
    Ok(Shown { version, links })
}

/// A page of a provider's versions, lowest first in SemVer order, each with its files' links as
/// the caller may see them, and how many there are.
pub async fn list_versions(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
    page: &PageRequest,
) -> Result<(Vec<Shown>, usize)> {
    let (provider, _) = private_provider(state, principal, org_name, address, Permission::Read).await?;
    let versions = all_versions(state.store.as_ref(), &provider).await?;
    let total = versions.len();
    Ok((with_links(state.blobs.as_ref(), principal, page.slice(versions)).await?, total))
}

/// A provider the caller may read, and, when `with_versions` (`include=registry-provider-versions`),
/// every version of a private one with its links.
pub async fn show_provider(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
    with_versions: bool,
) -> Result<(Provider, Organization, Vec<Shown>)> {
    let (provider, org) = operations::get(state, principal, org_name, address, Permission::Read).await?;
    if !with_versions || !provider.is_private() {
        return Ok((provider, org, Vec::new()));
    }
    let versions = all_versions(state.store.as_ref(), &provider).await?;
    let shown = with_links(state.blobs.as_ref(), principal, versions).await?;
    Ok((provider, org, shown))
}

/// The latest `count` versions of a private provider, the latest first (the console's; no
/// links made).
pub async fn latest_versions(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
    count: usize,
) -> Result<Vec<ProviderVersion>> {
    let (provider, _) = private_provider(state, principal, org_name, address, Permission::Read).await?;
    let versions = all_versions(state.store.as_ref(), &provider).await?;
    Ok(versions.into_iter().rev().take(count).collect())
}

/// Every version of a private provider, lowest first in SemVer order.
pub(super) async fn all_versions(store: &dyn ItemStore, provider: &Provider) -> Result<Vec<ProviderVersion>> {
    let query = keys::provider_versions(&provider.org_id, provider.name.as_str());
    let mut versions: Vec<ProviderVersion> = query_all_as(store, query).await?;
    versions.sort_by_cached_key(|v| semver::Version::parse(&v.version).ok());
    Ok(versions)
}

/// Versions with their links.
pub(super) async fn with_links(
    blobs: &dyn BlobStore,
    principal: &Principal,
    versions: Vec<ProviderVersion>,
) -> Result<Vec<Shown>> {
    let mut shown = Vec::with_capacity(versions.len());
    for version in versions {
        let links = links(blobs, principal, &version).await?;
        shown.push(Shown { version, links });
    }
    Ok(shown)
}

/// One version, if the caller may read its provider.
pub async fn get_version(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
    version: &str,
) -> Result<Shown> {
    let (provider, _) = private_provider(state, principal, org_name, address, Permission::Read).await?;
    let version = read(state.store.as_ref(), &provider, version).await?;
    let links = links(state.blobs.as_ref(), principal, &version).await?;
    Ok(Shown { version, links })
}

async fn read(store: &dyn ItemStore, provider: &Provider, version: &str) -> Result<ProviderVersion> {
    let key = keys::provider_version(&provider.org_id, provider.name.as_str(), version);
    Ok(store.get(&key).await?.ok_or(RegistryError::NotFound)?.parse()?)
}

/// Deletes a version and its files.
pub async fn delete_version(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
    version: &str,
) -> Result<()> {
    let (provider, _) = private_provider(state, principal, org_name, address, Permission::ManageProviders).await?;
    let version = read(state.store.as_ref(), &provider, version).await?;
    remove_versions(state, std::slice::from_ref(&version)).await
}

/// Removes versions, each in a transaction of its own (with its upload markers, its count on
/// its key and its index entry), then their files. A version changed meanwhile (an upload
/// landed) is read again and removed as it now is.
pub(super) async fn remove_versions(state: &AppState, versions: &[ProviderVersion]) -> Result<()> {
    let store = state.store.as_ref();
    for version in versions {
        let key = version.key();
        let removed = retry_on_race(|| remove_one(store, &key)).await?;
        match removed {
            Some(Some(removed)) => remove_objects(state.blobs.as_ref(), removed.objects()).await,
            Some(None) => {}
            None => {
                return Err(RegistryError::Conflict(
                    "The version kept changing while it was being deleted; retry.".into(),
                ))
            }
        }
    }
    Ok(())
}

/// One attempt at removing the version at `key`: `Some(Some(removed))`, `Some(None)` when it
/// is gone already, `None` when it changed after it was read.
async fn remove_one(store: &dyn ItemStore, key: &Key) -> Result<Option<Option<ProviderVersion>>> {
    let Some(item) = store.get(key).await? else { return Ok(Some(None)) };
    let version: ProviderVersion = item.parse()?;
    let mut transaction = Transaction::new();
    let unchanged =
        transaction.add(Write::Delete { key: key.clone(), condition: Condition::equals("revision", version.revision) });
    let markers = version.waiting().map(|(upload, _)| keys::provider_upload(upload)).collect::<Vec<_>>();
    transaction.extend(markers.into_iter().map(|key| Write::Delete { key, condition: Condition::Always }));
    transaction.add(Write::Update {
        key: keys::gpg_key(&version.org_id, &version.key_id),
        ops: vec![UpdateOp::Add(USES.into(), -1)],
        condition: Condition::Exists,
    });
    transaction.add(index::removal(&version));
    match transaction.commit(store).await {
        Ok(()) => Ok(Some(Some(version))),
        Err(e) if e.failed_on(unchanged) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes files of what was deleted. The records are gone already, so a failure only leaves
/// an unreachable object behind: it is logged, not returned.
pub(super) async fn remove_objects(blobs: &dyn BlobStore, objects: impl Iterator<Item = ObjectId>) {
    for id in objects {
        if let Err(e) = blobs.delete(&id).await {
            tracing::warn!(object = %id, error = %e, "a file of a deleted provider version was not removed");
        }
    }
}

/// Changes the version at `key` with `change` (which may refuse, or add writes of its own),
/// as one write conditional on the version's revision, with its index entry; a race reads it
/// again. Answers the version as changed.
pub(super) async fn modify<F>(store: &dyn ItemStore, key: &Key, change: F) -> Result<ProviderVersion>
where
    F: Fn(&mut ProviderVersion) -> Result<Vec<Write>>,
{
    let change = &change;
    let changed = retry_on_race(|| async move {
        let before: ProviderVersion = store.get(key).await?.ok_or(RegistryError::NotFound)?.parse()?;
        let mut after = before.clone();
        let extra = change(&mut after)?;
        after.revision = before.revision + 1;
        after.updated_at = timestamp(chrono::Utc::now());
        let mut transaction = Transaction::new();
        let unchanged = transaction
            .add(Write::Put { item: after.to_item()?, condition: Condition::equals("revision", before.revision) });
        transaction.extend(extra);
        transaction.add(index::change(Some(&before), &after)?);
        match index::transact(store, transaction).await {
            Ok(()) => Ok(Some(after)),
            Err(e) if e.failed_on(unchanged) => Ok(None),
            Err(e) => Err(RegistryError::from(e)),
        }
    })
    .await?;
    changed.ok_or_else(|| RegistryError::Conflict("The version kept changing; retry.".into()))
}

/// Adds a platform to a version, with the link its archive is uploaded to.
pub async fn create_platform(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    (address, version): (&ProviderAddress, &str),
    new: NewPlatform,
) -> Result<(Platform, ProviderVersion, Links)> {
    let (provider, _) = private_provider(state, principal, org_name, address, Permission::ManageProviders).await?;
    let new = new.check()?;
    let key = keys::provider_version(&provider.org_id, provider.name.as_str(), version);
    let upload = ObjectId::generate();
    let platform = Platform {
        id: new_id("provpltfrm"),
        os: new.os,
        arch: new.arch,
        shasum: new.shasum,
        filename: new.filename,
        binary: Asset { upload: Some(upload.to_string()), object: None, error: None },
        created_at: timestamp(chrono::Utc::now()),
    };
    let added = modify(state.store.as_ref(), &key, |version| {
        if version.platform(&platform.os, &platform.arch).is_some() {
            let detail =
                format!("version {} already has a platform {}_{}", version.version, platform.os, platform.arch);
            return Err(RegistryError::invalid(Field::Document, detail));
        }
        if let Some(other) = version.platforms.iter().find(|p| p.filename == platform.filename) {
            let detail =
                format!("the platform {}_{} already has the filename {}", other.os, other.arch, other.filename);
            return Err(RegistryError::invalid(Field::Attribute("filename"), detail));
        }
        if version.platforms.len() >= MAX_PLATFORMS {
            let detail = format!("a version holds at most {MAX_PLATFORMS} platforms");
            return Err(RegistryError::invalid(Field::Document, detail));
        }
        version.platforms.push(platform.clone());
        let part = Part::Binary { os: platform.os.clone(), arch: platform.arch.clone() };
        Ok(vec![marker(version, &upload, part)?])
    })
    .await?;
    let links = links(state.blobs.as_ref(), principal, &added).await?;
    Ok((platform.clone(), added, links))
}

/// A page of a version's platforms, how many it has, and the version.
pub async fn list_platforms(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    (address, version): (&ProviderAddress, &str),
    page: &PageRequest,
) -> Result<(Vec<Platform>, usize, Shown)> {
    let shown = get_version(state, principal, org_name, address, version).await?;
    let total = shown.version.platforms.len();
    Ok((page.slice(shown.version.platforms.clone()), total, shown))
}

/// One platform of a version, and the version.
pub async fn get_platform(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    (address, version): (&ProviderAddress, &str),
    (os, arch): (&str, &str),
) -> Result<(Platform, Shown)> {
    let shown = get_version(state, principal, org_name, address, version).await?;
    let platform = shown.version.platform(os, arch).cloned().ok_or(RegistryError::NotFound)?;
    Ok((platform, shown))
}

/// Removes a platform and its archive.
pub async fn delete_platform(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    (address, version): (&ProviderAddress, &str),
    (os, arch): (&str, &str),
) -> Result<()> {
    let (provider, _) = private_provider(state, principal, org_name, address, Permission::ManageProviders).await?;
    let key = keys::provider_version(&provider.org_id, provider.name.as_str(), version);
    let removed = std::sync::Mutex::new(None);
    modify(state.store.as_ref(), &key, |version| {
        let at = version.platforms.iter().position(|p| p.os == os && p.arch == arch).ok_or(RegistryError::NotFound)?;
        let platform = version.platforms.remove(at);
        let markers = platform.binary.upload.iter().map(|u| keys::provider_upload(u));
        let writes = markers.map(|key| Write::Delete { key, condition: Condition::Always }).collect();
        *removed.lock().expect("not poisoned") = Some(platform);
        Ok(writes)
    })
    .await?;
    if let Some(platform) = removed.into_inner().expect("not poisoned") {
        let objects = platform.binary.upload.iter().chain(platform.binary.object.iter());
        remove_objects(state.blobs.as_ref(), objects.filter_map(|id| ObjectId::parse(id))).await;
    }
    Ok(())
}

/// Deletes a provider, its versions and their files. Versions go first and the provider last,
/// on the revision read before the versions were: a version added meanwhile makes it start
/// again, so none is left behind, and an interrupted delete leaves a provider that can be
/// deleted again.
pub async fn delete_provider(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
) -> Result<()> {
    let (provider, _) = operations::get(state, principal, org_name, address, Permission::ManageProviders).await?;
    let store = state.store.as_ref();
    let provider = &provider;
    let removed = retry_on_race(|| async move {
        let current: Provider = match store.get(&provider.key()).await? {
            Some(item) => item.parse()?,
            None => return Err(RegistryError::NotFound),
        };
        let versions: Vec<ProviderVersion> = if current.is_private() {
            query_all_as(store, keys::provider_versions(&current.org_id, current.name.as_str())).await?
        } else {
            Vec::new()
        };
        remove_versions(state, &versions).await?;
        let mut transaction = Transaction::new();
        let unchanged = transaction
            .add(Write::Delete { key: current.key(), condition: Condition::equals("revision", current.revision) });
        if current.is_private() {
            transaction.add(operations::private_count(&current.org_id, -1, Condition::Exists));
            transaction.add(Write::Delete {
                key: index::key(&current.org_id, current.name.as_str()),
                condition: Condition::Always,
            });
        }
        match transaction.commit(store).await {
            Ok(()) => Ok(Some(())),
            Err(e) if e.failed_on(unchanged) => Ok(None),
            Err(e) => Err(RegistryError::from(e)),
        }
    })
    .await?;
    removed.ok_or_else(|| RegistryError::Conflict("The provider changed while it was being deleted; retry.".into()))
}
