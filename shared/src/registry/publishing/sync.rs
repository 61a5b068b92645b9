//! The work queue the scheduled job runs: a *sync* reads a tag-based module's tags and adds a
//! version for each semantic-version tag it lacks; a *fetch* downloads one version's archive at
//! a tag or commit and hands it to ingest. A branch-based module's versions are queued here too.

use serde::{Deserialize, Serialize};

use crate::accounts::oauth;
use crate::api::{timestamp, Field};
use crate::blobs::ObjectId;
use crate::registry::error::{RegistryError, Result};
use crate::registry::ingest;
use crate::registry::modules::{load, modify, Module};
use crate::registry::versions::{self, AcceptedVersion, CreatedVersion, ModuleVersion};
use crate::state::AppState;
use crate::store::{Condition, Index, Item, ItemStore, Key, Query, Write};
use crate::vcs::{self, RepoId, ServiceProvider, VcsError};

const WORK_PARTITION: &str = "VCSWORK";

/// Work waiting for the scheduled job.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Work {
    /// Create a version for every semantic-version tag the module lacks.
    Sync { module: Key, org_id: String },
    /// Download a version's archive at `git_ref` and ingest it as `object`.
    Fetch { module: Key, org_id: String, object: String, git_ref: String },
}

/// The queue orders work by when it was recorded.
fn work_item(id: &str, work: &Work) -> Result<Item> {
    let item = Item::from_value(Key::new(format!("{WORK_PARTITION}#{id}"), "WORK"), work)?;
    Ok(item.with_index(Index::Gsi1, WORK_PARTITION, format!("{}#{id}", timestamp(chrono::Utc::now()))))
}

/// The write that queues a read of the module's tags (on publishing, or switching to tags).
pub(super) fn sync_work(module: &Module) -> Result<Write> {
    let sync = Work::Sync { module: module.key(), org_id: module.org_id.clone() };
    Ok(Write::Put { item: work_item(&crate::ids::random_token(20), &sync)?, condition: Condition::NotExists })
}

/// Adds `version` to the module, `pending` until the job has fetched its archive at `git_ref`:
/// the new version and the writes to commit with the module's, unless it has the version.
pub(super) fn add_fetched_version(
    module: &mut Module,
    version: &semver::Version,
    git_ref: &str,
    commit_sha: Option<String>,
) -> Result<Option<(ModuleVersion, Vec<Write>)>> {
    // A tag of a version already there (or equal to one but for build metadata) adds nothing.
    let version_text = version.to_string();
    if module.versions.iter().any(|v| v.version == version_text)
        || versions::same_precedence(module, &version_text).is_some()
    {
        return Ok(None);
    }
    let object = ObjectId::generate();
    let source = module.vcs_repo.as_ref().map_or("vcs".into(), |r| r.service_provider.clone());
    let stored = ModuleVersion::pending(module, version, &source, commit_sha, &object);
    let mut writes = versions::add_pending(module, &stored)?;
    let fetch = Work::Fetch {
        module: module.key(),
        org_id: module.org_id.clone(),
        object: object.to_string(),
        git_ref: git_ref.to_owned(),
    };
    writes.push(Write::Put { item: work_item(stored.id.as_str(), &fetch)?, condition: Condition::NotExists });
    Ok(Some((stored, writes)))
}

/// The version a tag names (`1.2.0` or `v1.2.0`), if it is a semantic version.
pub(super) fn tag_version(tag: &str) -> Option<semver::Version> {
    semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()
}

pub(super) fn connection_of(connection: oauth::VcsConnection) -> vcs::Connection {
    vcs::Connection {
        provider: ServiceProvider::parse(&connection.service_provider).unwrap_or(ServiceProvider::GitHub),
        api_url: connection.api_url,
        http_url: connection.http_url,
        token: connection.token,
    }
}

/// The provider client and repository of a VCS module.
async fn repository_of(state: &AppState, module: &Module) -> Result<(Box<dyn vcs::VcsProvider>, RepoId)> {
    let repo = module.vcs_repo.as_ref().ok_or(RegistryError::NotFound)?;
    let connection = oauth::token_for(state, &module.org_id, &repo.oauth_token_id).await?.ok_or_else(|| {
        RegistryError::Conflict(format!("the module's OAuth token {} no longer exists", repo.oauth_token_id))
    })?;
    let kind = ServiceProvider::parse(&connection.service_provider).unwrap_or(ServiceProvider::GitHub);
    let id = RepoId::parse(&kind, &repo.identifier).map_err(RegistryError::Conflict)?;
    Ok((vcs::provider(connection_of(connection), state.http.clone()), id))
}

/// Runs up to `limit` pieces of waiting work; returns how many finished.
pub async fn run_pending(state: &AppState, limit: usize) -> Result<usize> {
    let page = state.store.query(Query::index(Index::Gsi1, WORK_PARTITION, "").limit(limit)).await?;
    let mut done = 0;
    for item in page.items {
        let work: Work = item.parse()?;
        match run(state, &work).await {
            Ok(()) => {
                state.store.delete(&item.key, Condition::Always).await?;
                done += 1;
            }
            Err(e) => tracing::warn!(error = %e, "VCS work failed; retried next run"),
        }
    }
    Ok(done)
}

async fn run(state: &AppState, work: &Work) -> Result<()> {
    match work {
        Work::Sync { module, .. } => sync(state, module).await,
        Work::Fetch { object, git_ref, module, .. } => fetch(state, module, object, git_ref).await,
    }
}

/// Reads the repository's tags; settles the module's status when there is nothing to publish.
async fn sync(state: &AppState, module_key: &Key) -> Result<()> {
    let store = state.store.as_ref();
    let module = match load(store, module_key).await {
        Err(RegistryError::NotFound) => return Ok(()),
        other => other?,
    };
    let (provider, repo) = repository_of(state, &module).await?;
    let tags = match provider.tags(&repo).await {
        Ok(tags) => tags,
        Err(e @ VcsError::Upstream(_)) => return Err(e.into()),
        Err(unreadable) => return set_status(store, module_key, "setup_failed", Some(unreadable.to_string())).await,
    };
    let versions: Vec<(semver::Version, String)> =
        tags.iter().filter_map(|t| Some((tag_version(&t.name)?, t.name.clone()))).collect();
    if versions.is_empty() {
        return set_status(store, module_key, "no_version_tags", None).await;
    }
    modify(store, module_key, |module| {
        let mut writes = Vec::new();
        for (version, tag) in &versions {
            let commit = tags.iter().find(|t| &t.name == tag).map(|t| t.commit_sha.clone());
            writes.extend(add_fetched_version(module, version, tag, commit)?.into_iter().flat_map(|(_, w)| w));
        }
        Ok((writes, ()))
    })
    .await?;
    state.work.notify_one();
    Ok(())
}

async fn set_status(store: &dyn ItemStore, module_key: &Key, status: &str, reason: Option<String>) -> Result<()> {
    modify(store, module_key, |module| {
        module.status = status.to_owned();
        if let Some(repo) = module.vcs_repo.as_mut() {
            repo.setup_error = reason.clone();
        }
        Ok((Vec::new(), ()))
    })
    .await
    .map(drop)
}

/// Downloads the archive at `git_ref`, strips its top-level directory, stores it as the
/// version's upload and ingests it.
async fn fetch(state: &AppState, module_key: &Key, object: &str, git_ref: &str) -> Result<()> {
    let object = ObjectId::parse(object).ok_or(RegistryError::NotFound)?;
    let module = match load(state.store.as_ref(), module_key).await {
        Err(RegistryError::NotFound) => return Ok(()),
        other => other?,
    };
    let (provider, repo) = repository_of(state, &module).await?;
    let archive = match provider.archive(&repo, git_ref).await {
        Ok(archive) => archive,
        Err(e @ VcsError::Upstream(_)) => return Err(e.into()),
        Err(unreadable) => {
            let reason = format!("the repository archive at {git_ref} could not be read: {unreadable}");
            return ingest::fail(state, &object, &reason).await;
        }
    };
    let limits = state.config.archive_limits;
    let stripped = tokio::task::spawn_blocking(move || -> std::result::Result<tempfile::NamedTempFile, String> {
        let mut file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
        let source = tokio_util::io::SyncIoBridge::new(archive);
        crate::archive::strip_top_directory(source, file.as_file_mut(), limits).map_err(|e| e.to_string())?;
        Ok(file)
    })
    .await?;
    match stripped {
        Ok(file) => {
            state.blobs.put_file(&object, file.path()).await?;
            ingest::object_created(state, &object).await?;
        }
        Err(reason) => ingest::fail(state, &object, &reason).await?,
    }
    Ok(())
}

/// A branch-based module's new version: the archive at the request's commit, fetched by the
/// job. Its upload link works as well, and whichever archive lands first is the version's.
pub async fn create_branch_version(state: &AppState, accepted: AcceptedVersion) -> Result<CreatedVersion> {
    let AcceptedVersion { module, version, commit_sha } = accepted;
    let commit = commit_sha.filter(|c| !c.trim().is_empty()).ok_or_else(|| {
        RegistryError::invalid(
            Field::Attribute("commit-sha"),
            "commit-sha is required for a version of a branch-based VCS module",
        )
    })?;
    let (provider, repo) = repository_of(state, &module).await?;
    let sha = provider
        .commit(&repo, &commit)
        .await
        .map_err(|e| RegistryError::invalid(Field::Attribute("commit-sha"), e.to_string()))?;
    let (module, created) = modify(state.store.as_ref(), &module.key(), |module| {
        let (created, writes) = add_fetched_version(module, &version, &sha, Some(sha.clone()))?.ok_or_else(|| {
            RegistryError::invalid(Field::Attribute("version"), format!("version {version} already exists"))
        })?;
        Ok((writes, created))
    })
    .await?;
    state.work.notify_one();
    let upload_url = versions::upload_url(state.blobs.as_ref(), &created).await?;
    Ok(CreatedVersion { version: created, module, upload_url })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_versions_with_an_optional_v() {
        assert_eq!(tag_version("v1.2.0").unwrap().to_string(), "1.2.0");
        assert_eq!(tag_version("1.2.0-rc1").unwrap().to_string(), "1.2.0-rc1");
        assert!(tag_version("release-1").is_none());
        assert!(tag_version("v1.2").is_none());
    }
}
