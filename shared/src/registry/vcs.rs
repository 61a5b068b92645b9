//! Publishing modules from a VCS repository. Publishing and webhook deliveries only record
//! work; the scheduled job (dev-server's timer, or EventBridge's key-rotation schedule in AWS)
//! does it off the request path: a *sync* lists the repository's tags and creates a version for
//! each semantic-version tag, a *fetch* downloads a version's archive through the provider's API,
//! strips its top-level directory and hands it to the same ingest as an upload.

use serde::{Deserialize, Serialize};

use super::error::{RegistryError, Result};
use super::ingest;
use super::modules::{self, load, modify, Module};
use super::names::{ModuleName, ProviderName, RegistryName};
use super::versions::{ModuleVersion, PendingUpload, PENDING};
use crate::accounts::oauth;
use crate::accounts::organizations::{self, Organization};
use crate::api::timestamp;
use crate::app::AppState;
use crate::auth::{Permission, Principal};
use crate::blobs::ObjectId;
use crate::ids::new_id;
use crate::store::{keys, Condition, Index, Item, Key, Query, Write};
use crate::vcs::{self, RepoId, ServiceProvider, VcsError};

const WORK_PARTITION: &str = "VCSWORK";
pub const TAGS: &str = "git_tag";
pub const BRANCH: &str = "branch";

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

/// Work waiting for the scheduled job.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Work {
    /// Create a version for every semantic-version tag the module lacks.
    Sync { module: Key, org_id: String },
    /// Download a version's archive at `git_ref` and ingest it as `object`.
    Fetch { module: Key, org_id: String, object: String, git_ref: String },
}

fn work_item(id: &str, work: &Work) -> Result<Item> {
    let item = Item::from_value(Key::new(format!("{WORK_PARTITION}#{id}"), "WORK"), work)?;
    Ok(item.with_index(Index::Gsi1, WORK_PARTITION, format!("{}#{id}", timestamp(chrono::Utc::now()))))
}

/// The module name and provider a repository named `terraform-<provider>-<name>` publishes.
pub fn module_from_repository(repository: &str) -> Option<(ModuleName, ProviderName)> {
    let rest = repository.strip_prefix("terraform-")?;
    let (provider, name) = rest.split_once('-')?;
    Some((ModuleName::parse("", name).ok()?, ProviderName::parse("", provider).ok()?))
}

/// The version a tag names (`1.2.0` or `v1.2.0`), if it is a semantic version.
pub fn tag_version(tag: &str) -> Option<semver::Version> {
    semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()
}

pub struct PublishRequest {
    pub identifier: Option<String>,
    pub display_identifier: Option<String>,
    pub oauth_token_id: Option<String>,
    pub github_app_installation_id: Option<String>,
    pub branch: Option<String>,
    pub ingress_submodules: Option<bool>,
    pub no_code: Option<bool>,
}

const REPO: &str = "/data/attributes/vcs-repo";

/// The organization a deprecated `POST /registry-modules` publishes into: its OAuth token's.
pub async fn organization_of_token(state: &AppState, oauth_token_id: Option<&str>) -> Result<String> {
    let id = oauth_token_id
        .ok_or_else(|| RegistryError::invalid(&format!("{REPO}/oauth-token-id"), "oauth-token-id is required"))?;
    let item = crate::store::pointer::follow(state.store.as_ref(), id).await?;
    let org_id = item
        .filter(|_| id.starts_with("ot-"))
        .and_then(|i| i.attrs.get("org_id").and_then(|v| v.as_str()).map(str::to_owned));
    let org_id = org_id.ok_or_else(|| {
        RegistryError::invalid(&format!("{REPO}/oauth-token-id"), format!("OAuth token {id} not found"))
    })?;
    Ok(organizations::get_by_id(state.store.as_ref(), &org_id).await?.name)
}

/// Publishes a module from a repository: `pending` until the job has read its tags.
pub async fn publish(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    base_url: &str,
    request: PublishRequest,
) -> Result<(Module, Organization)> {
    let org = modules::organization(state, principal, org_name, Permission::ManageModules).await?;
    let identifier = request.identifier.filter(|i| !i.trim().is_empty());
    let identifier =
        identifier.ok_or_else(|| RegistryError::invalid(&format!("{REPO}/identifier"), "identifier is required"))?;
    let oauth_token_id = match (request.oauth_token_id, request.github_app_installation_id) {
        (Some(_), Some(_)) => {
            return Err(RegistryError::invalid(
                &format!("{REPO}/oauth-token-id"),
                "oauth-token-id and github-app-installation-id are mutually exclusive",
            ))
        }
        (None, Some(_)) => {
            return Err(RegistryError::invalid(
                &format!("{REPO}/github-app-installation-id"),
                "GitHub App installations are not available; connect the repository with an oauth-token-id",
            ))
        }
        (None, None) => {
            return Err(RegistryError::invalid(&format!("{REPO}/oauth-token-id"), "oauth-token-id is required"))
        }
        (Some(id), None) => id,
    };
    let connection = oauth::token_for(state, &org.id, &oauth_token_id).await?.ok_or_else(|| {
        RegistryError::invalid(
            &format!("{REPO}/oauth-token-id"),
            format!("OAuth token {oauth_token_id} not found in organization {}", org.name),
        )
    })?;
    let kind = ServiceProvider::parse(&connection.service_provider).ok_or_else(|| {
        RegistryError::invalid(&format!("{REPO}/oauth-token-id"), "the token's VCS provider is not supported")
    })?;
    let repo =
        RepoId::parse(&kind, &identifier).map_err(|e| RegistryError::invalid(&format!("{REPO}/identifier"), e))?;
    let (name, provider) = module_from_repository(&repo.name).ok_or_else(|| {
        RegistryError::invalid(
            &format!("{REPO}/identifier"),
            format!("repository {} must be named terraform-<provider>-<name>", repo.name),
        )
    })?;
    let branch = request.branch.map(|b| b.trim().to_owned()).unwrap_or_default();
    let secret = crate::ids::random_token(40);
    let uuid = crate::ids::random_token(32).to_lowercase();
    let now = timestamp(chrono::Utc::now());
    let repository_http_url = format!("{}/{}", connection.http_url.trim_end_matches('/'), repo.full());
    let vcs_repo = VcsRepo {
        display_identifier: request.display_identifier.filter(|d| !d.is_empty()).unwrap_or_else(|| identifier.clone()),
        identifier,
        branch: branch.clone(),
        ingress_submodules: request.ingress_submodules.unwrap_or(false),
        oauth_token_id,
        service_provider: kind.as_str().to_owned(),
        repository_http_url,
        webhook_url: format!("{}/webhooks/vcs/{uuid}", base_url.trim_end_matches('/')),
        webhook_uuid: uuid.clone(),
        setup_error: None,
        sealed_webhook_secret: state.sealer.seal(&secret).await.map_err(|e| RegistryError::Conflict(e.to_string()))?,
    };
    let module = Module {
        id: new_id("mod"),
        org_id: org.id.clone(),
        registry: RegistryName::Private,
        namespace: None,
        name,
        provider,
        status: "pending".into(),
        no_code: request.no_code.unwrap_or(false),
        created_at: now.clone(),
        updated_at: now,
        versions: Vec::new(),
        test_config: None,
        publishing_mechanism: Some(if branch.is_empty() { TAGS } else { BRANCH }.to_owned()),
        vcs_repo: Some(vcs_repo.clone()),
        description: None,
        downloads: 0,
        revision: 0,
    };
    modules::insert(state, &org, &module).await?;
    let webhook = Item::from_value(keys::vcs_webhook(&uuid), &module.key())?;
    let mut writes = vec![Write::Put { item: webhook, condition: Condition::NotExists }];
    if branch.is_empty() {
        let sync = Work::Sync { module: module.key(), org_id: org.id.clone() };
        writes.push(Write::Put {
            item: work_item(&crate::ids::random_token(20), &sync)?,
            condition: Condition::NotExists,
        });
    }
    state.store.transact(writes).await?;
    let provider_client = vcs::provider(connection_of(connection), state.http.clone());
    if let Err(e) = provider_client.create_webhook(&repo, &vcs_repo.webhook_url, &secret).await {
        tracing::warn!(module = %module.id, error = %e, "webhook not registered with the provider; new tags need a resync");
    }
    state.work.notify_one();
    Ok((module, org))
}

fn connection_of(connection: oauth::VcsConnection) -> vcs::Connection {
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

/// The writes that add a version fetched from `git_ref`, unless the module already has it.
fn version_writes(
    module: &mut Module,
    version: &semver::Version,
    git_ref: &str,
    commit_sha: Option<String>,
) -> Result<Option<Vec<Write>>> {
    let text = version.to_string();
    if module.versions.iter().any(|v| v.version == text) {
        return Ok(None);
    }
    let now = timestamp(chrono::Utc::now());
    let object = ObjectId::generate();
    let stored = ModuleVersion {
        id: new_id("modver"),
        org_id: module.org_id.clone(),
        module_id: module.id.clone(),
        name: module.name.to_string(),
        provider: module.provider.to_string(),
        version: text,
        status: PENDING.into(),
        source: module.vcs_repo.as_ref().map_or("vcs".into(), |r| r.service_provider.clone()),
        error: None,
        commit_sha,
        upload: Some(object.to_string()),
        archive: None,
        sha256: None,
        root_module_files: Vec::new(),
        readme: None,
        created_at: now.clone(),
        updated_at: now,
    };
    module.versions.push(stored.status_entry());
    let pending = PendingUpload { module: module.key(), version: stored.key() };
    let fetch = Work::Fetch {
        module: module.key(),
        org_id: module.org_id.clone(),
        object: object.to_string(),
        git_ref: git_ref.to_owned(),
    };
    Ok(Some(vec![
        Write::Put { item: stored.to_item()?, condition: Condition::NotExists },
        Write::Put {
            item: Item::from_value(keys::pending_upload(object.as_str()), &pending)?,
            condition: Condition::NotExists,
        },
        Write::Put { item: work_item(stored.id.as_str(), &fetch)?, condition: Condition::NotExists },
    ]))
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
    let module = match load(state.store.as_ref(), module_key).await {
        Err(RegistryError::NotFound) => return Ok(()),
        other => other?,
    };
    let (provider, repo) = repository_of(state, &module).await?;
    let tags = match provider.tags(&repo).await {
        Ok(tags) => tags,
        Err(VcsError::Upstream(e)) => return Err(RegistryError::Conflict(e)),
        Err(unreadable) => return set_status(state, module_key, "setup_failed", Some(unreadable.to_string())).await,
    };
    let versions: Vec<(semver::Version, String)> =
        tags.iter().filter_map(|t| Some((tag_version(&t.name)?, t.name.clone()))).collect();
    if versions.is_empty() {
        return set_status(state, module_key, "no_version_tags", None).await;
    }
    modify(state.store.as_ref(), module_key, |module| {
        let mut writes = Vec::new();
        for (version, tag) in &versions {
            let commit = tags.iter().find(|t| &t.name == tag).map(|t| t.commit_sha.clone());
            writes.extend(version_writes(module, version, tag, commit)?.into_iter().flatten());
        }
        Ok((writes, ()))
    })
    .await?;
    state.work.notify_one();
    Ok(())
}

async fn set_status(state: &AppState, module_key: &Key, status: &str, reason: Option<String>) -> Result<()> {
    modify(state.store.as_ref(), module_key, |module| {
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
        Err(VcsError::Upstream(e)) => return Err(RegistryError::Conflict(e)),
        Err(unreadable) => {
            ingest::fail(
                state,
                &object,
                &format!("the repository archive at {git_ref} could not be read: {unreadable}"),
            )
            .await?;
            return Ok(());
        }
    };
    let limits = state.config.archive_limits;
    let stripped = tokio::task::spawn_blocking(move || -> std::result::Result<tempfile::NamedTempFile, String> {
        let mut file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
        let source = tokio_util::io::SyncIoBridge::new(archive);
        crate::archive::strip_top_directory(source, file.as_file_mut(), limits).map_err(|e| e.to_string())?;
        Ok(file)
    })
    .await
    .map_err(|e| RegistryError::Conflict(e.to_string()))?;
    match stripped {
        Ok(file) => {
            state.blobs.put_file(&object, file.path()).await?;
            ingest::object_created(state, &object).await?;
        }
        Err(reason) => ingest::fail(state, &object, &reason).await?,
    }
    Ok(())
}

/// A branch-based module's new version: the archive at `commit_sha`, fetched by the job.
pub async fn create_branch_version(
    state: &AppState,
    module_key: &Key,
    version: &semver::Version,
    commit_sha: Option<String>,
) -> Result<ModuleVersion> {
    let commit = commit_sha.filter(|c| !c.trim().is_empty()).ok_or_else(|| {
        RegistryError::invalid(
            "/data/attributes/commit-sha",
            "commit-sha is required for a version of a branch-based VCS module",
        )
    })?;
    let module = load(state.store.as_ref(), module_key).await?;
    let (provider, repo) = repository_of(state, &module).await?;
    let sha = provider
        .commit(&repo, &commit)
        .await
        .map_err(|e| RegistryError::invalid("/data/attributes/commit-sha", e.to_string()))?;
    let (module, ()) = modify(state.store.as_ref(), module_key, |module| {
        let writes = version_writes(module, version, &sha, Some(sha.clone()))?.ok_or_else(|| {
            RegistryError::invalid("/data/attributes/version", format!("version {version} already exists"))
        })?;
        Ok((writes, ()))
    })
    .await?;
    state.work.notify_one();
    let key =
        keys::module_version(&module.org_id, module.name.as_str(), module.provider.as_str(), &version.to_string());
    Ok(state.store.get(&key).await?.ok_or(RegistryError::NotFound)?.parse()?)
}

/// Switches a VCS module between tag- and branch-based publishing (the PATCH of `vcs-repo`).
pub fn switch(module: &mut Module, branch: Option<&str>, tags: Option<bool>) -> Result<bool> {
    let repo = module
        .vcs_repo
        .as_mut()
        .ok_or_else(|| RegistryError::invalid(REPO, "this module is not connected to a VCS repository"))?;
    match (branch, tags) {
        (Some(branch), _) if !branch.trim().is_empty() => {
            repo.branch = branch.trim().to_owned();
            module.publishing_mechanism = Some(BRANCH.into());
            Ok(false)
        }
        (_, Some(true)) => {
            repo.branch.clear();
            module.publishing_mechanism = Some(TAGS.into());
            Ok(true)
        }
        _ => Err(RegistryError::invalid(REPO, "send a branch to publish from it, or tags: true to publish from tags")),
    }
}

/// The work that re-reads a module's tags (after switching to tag-based publishing).
pub fn sync_write(module: &Module) -> Result<Write> {
    let sync = Work::Sync { module: module.key(), org_id: module.org_id.clone() };
    Ok(Write::Put { item: work_item(&crate::ids::random_token(20), &sync)?, condition: Condition::NotExists })
}

/// A webhook delivery: a new semantic-version tag of a tag-based module becomes a version.
/// Returns whether it did anything (a replayed delivery does not).
pub async fn delivery(state: &AppState, uuid: &str, headers: &axum::http::HeaderMap, body: &[u8]) -> Result<bool> {
    let Some(pointer) = state.store.get(&keys::vcs_webhook(uuid)).await? else { return Err(RegistryError::NotFound) };
    let module_key: Key = pointer.parse()?;
    let module = load(state.store.as_ref(), &module_key).await?;
    let repo = module.vcs_repo.clone().ok_or(RegistryError::NotFound)?;
    let secret =
        state.sealer.unseal(&repo.sealed_webhook_secret).await.map_err(|e| RegistryError::Conflict(e.to_string()))?;
    let kind = ServiceProvider::parse(&repo.service_provider).unwrap_or(ServiceProvider::GitHub);
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let authentic = if kind.is_gitlab() {
        vcs::verify_gitlab_token(&secret, header("x-gitlab-token"))
    } else {
        vcs::verify_github_signature(&secret, body, header("x-hub-signature-256"))
    };
    if !authentic {
        return Err(RegistryError::Unauthorized);
    }
    let payload: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| RegistryError::invalid("", format!("the delivery is not JSON: {e}")))?;
    let event = header("x-github-event").or_else(|| header("x-gitlab-event"));
    let Some((tag, sha)) = vcs::tag_from_delivery(&kind, event, &payload) else { return Ok(false) };
    let Some(version) = tag_version(&tag) else { return Ok(false) };
    if module.publishing_mechanism.as_deref() != Some(TAGS) {
        return Ok(false);
    }
    let commit = (!sha.is_empty()).then_some(sha);
    let (_, added) = modify(state.store.as_ref(), &module_key, |module| {
        let writes = version_writes(module, &version, &tag, commit.clone())?;
        let added = writes.is_some();
        Ok((writes.unwrap_or_default(), added))
    })
    .await?;
    state.work.notify_one();
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_names_give_the_module_name_and_provider() {
        let (name, provider) = module_from_repository("terraform-aws-vpc-peering").unwrap();
        assert_eq!((name.as_str(), provider.as_str()), ("vpc-peering", "aws"));
        assert!(module_from_repository("vpc").is_none());
        assert!(module_from_repository("terraform-aws").is_none());
        assert!(module_from_repository("terraform-AWS-vpc").is_none());
    }

    #[test]
    fn tags_are_versions_with_an_optional_v() {
        assert_eq!(tag_version("v1.2.0").unwrap().to_string(), "1.2.0");
        assert_eq!(tag_version("1.2.0-rc1").unwrap().to_string(), "1.2.0-rc1");
        assert!(tag_version("release-1").is_none());
        assert!(tag_version("v1.2").is_none());
    }
}
