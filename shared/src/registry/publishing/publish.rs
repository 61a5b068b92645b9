//! Publishing a module from a repository (`POST …/registry-modules/vcs` and its deprecated
//! form), and switching a published module between tag- and branch-based publishing.

use super::monorepo;
use super::sync::{connection_of, sync_work};
use crate::accounts::access::{self, Organization};
use crate::accounts::oauth;
use crate::api::Field;
use crate::auth::{Permission, Principal};
use crate::registry::error::{RegistryError, Result};
use crate::registry::modules::{self, Module, ModuleChange, VcsRepo, BRANCH, TAGS};
use crate::registry::names::{ModuleName, ProviderName, RegistryName};
use crate::seal::SealContext;
use crate::state::AppState;
use crate::store::{keys, query_all_as, Condition, Item, ItemStore, Key, Write};
use crate::vcs::{self, RepoId, ServiceProvider};

/// The most modules published from one repository: a webhook delivery reads them all.
pub const MAX_MODULES_PER_REPOSITORY: usize = 100;

/// Where a publish request's repository settings sit in the request document.
const REPO: Field = Field::Attribute("vcs-repo");

pub struct PublishRequest {
    /// The module's name and provider; by default, those of a repository named
    /// `terraform-<provider>-<name>` (a monorepo's name says nothing of its modules).
    pub name: Option<String>,
    pub provider: Option<String>,
    pub identifier: Option<String>,
    pub display_identifier: Option<String>,
    pub oauth_token_id: Option<String>,
    pub github_app_installation_id: Option<String>,
    pub branch: Option<String>,
    pub ingress_submodules: Option<bool>,
    pub no_code: Option<bool>,
    pub source_directory: Option<String>,
    pub tag_prefix: Option<String>,
}

/// The module name and provider a repository named `terraform-<provider>-<name>` publishes.
pub fn module_from_repository(repository: &str) -> Option<(ModuleName, ProviderName)> {
    let rest = repository.strip_prefix("terraform-")?;
    let (provider, name) = rest.split_once('-')?;
    Some((ModuleName::parse(Field::Document, name).ok()?, ProviderName::parse(Field::Document, provider).ok()?))
}

/// The organization a deprecated `POST /registry-modules` publishes into: its OAuth token's.
pub async fn organization_of_token(store: &dyn ItemStore, oauth_token_id: Option<&str>) -> Result<String> {
    let id = oauth_token_id.ok_or_else(|| {
        RegistryError::invalid(Field::Nested("vcs-repo", "oauth-token-id"), "oauth-token-id is required")
    })?;
    let item = crate::store::pointer::follow(store, id).await?;
    let org_id =
        item.filter(|_| id.starts_with("ot-")).map(|item| item.attr::<String>("org_id")).transpose()?.flatten();
    let org_id = org_id.ok_or_else(|| {
        RegistryError::invalid(Field::Nested("vcs-repo", "oauth-token-id"), format!("OAuth token {id} not found"))
    })?;
    Ok(access::get_by_id(store, &org_id).await?.name)
}

/// The OAuth token a publish request connects the repository with; GitHub App installations
/// are not supported.
fn oauth_token_id(request: &PublishRequest) -> Result<String> {
    match (&request.oauth_token_id, &request.github_app_installation_id) {
        (Some(_), Some(_)) => Err(RegistryError::invalid(
            Field::Nested("vcs-repo", "oauth-token-id"),
            "oauth-token-id and github-app-installation-id are mutually exclusive",
        )),
        (None, Some(_)) => Err(RegistryError::invalid(
            Field::Nested("vcs-repo", "github-app-installation-id"),
            "GitHub App installations are not available; connect the repository with an oauth-token-id",
        )),
        (None, None) => {
            Err(RegistryError::invalid(Field::Nested("vcs-repo", "oauth-token-id"), "oauth-token-id is required"))
        }
        (Some(id), None) => Ok(id.clone()),
    }
}

/// Publishes a module from a repository: `pending` until the job has read its tags.
pub async fn publish(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    base_url: &str,
    request: PublishRequest,
) -> Result<(Module, Organization)> {
    let store = state.store.as_ref();
    let org = modules::organization(store, principal, org_name, Permission::ManageModules).await?;
    let identifier = request.identifier.clone().filter(|i| !i.trim().is_empty());
    let identifier = identifier
        .ok_or_else(|| RegistryError::invalid(Field::Nested("vcs-repo", "identifier"), "identifier is required"))?;
    let oauth_token_id = oauth_token_id(&request)?;
    let connection = oauth::token_for(state, &org.id, &oauth_token_id).await?.ok_or_else(|| {
        RegistryError::invalid(
            Field::Nested("vcs-repo", "oauth-token-id"),
            format!("OAuth token {oauth_token_id} not found in organization {}", org.name),
        )
    })?;
    let kind = ServiceProvider::parse(&connection.service_provider).ok_or_else(|| {
        RegistryError::invalid(Field::Nested("vcs-repo", "oauth-token-id"), "the token's VCS provider is not supported")
    })?;
    // A connection made before its URL was checked, or whose address the operator no longer
    // allows, would leave the module pending for good: refuse it now, with what to do.
    if vcs::check_url(&connection.api_url, state.vcs.allowed()).is_err() {
        return Err(RegistryError::invalid(
            Field::Nested("vcs-repo", "oauth-token-id"),
            format!(
                "the api-url of OAuth token {oauth_token_id}'s VCS connection is not one Hangar calls; connect the \
                 repository through a new connection"
            ),
        ));
    }
    let repo = RepoId::parse(&kind, &identifier)
        .map_err(|e| RegistryError::invalid(Field::Nested("vcs-repo", "identifier"), e))?;
    let (name, provider) = name_and_provider(&request, &repo.name)?;
    let source_directory = monorepo::source_directory(request.source_directory.as_deref().unwrap_or_default())?;
    let tag_prefix = monorepo::tag_prefix(request.tag_prefix.as_deref().unwrap_or_default())?;
    let branch = request.branch.map(|b| b.trim().to_owned()).unwrap_or_default();
    let repository_http_url = format!("{}/{}", connection.http_url.trim_end_matches('/'), repo.full());
    // Modules already published from this repository share their webhook: one delivery then
    // feeds them all, and the provider holds one hook per repository, not one per module.
    let sibling = sibling_of(store, &org.id, &oauth_token_id, &identifier).await?;
    let (webhook, secret) = match sibling {
        Some(shared) => (shared, None),
        None => {
            let secret = crate::ids::random_token(40);
            let uuid = crate::ids::random_token(32).to_lowercase();
            let sealed = state.sealer.seal_for(&SealContext::webhook_secret(&uuid), &secret).await?;
            let url = format!("{}/webhooks/vcs/{uuid}", base_url.trim_end_matches('/'));
            (Webhook { url, uuid, sealed_secret: sealed }, Some(secret))
        }
    };
    let vcs_repo = VcsRepo {
        display_identifier: request.display_identifier.filter(|d| !d.is_empty()).unwrap_or_else(|| identifier.clone()),
        identifier,
        branch: branch.clone(),
        ingress_submodules: request.ingress_submodules.unwrap_or(false),
        oauth_token_id,
        service_provider: kind.as_str().to_owned(),
        repository_http_url,
        webhook_url: webhook.url.clone(),
        webhook_uuid: webhook.uuid.clone(),
        setup_error: None,
        sealed_webhook_secret: webhook.sealed_secret,
        source_directory,
        tag_prefix,
    };
    let module = Module {
        publishing_mechanism: Some(if branch.is_empty() { TAGS } else { BRANCH }.to_owned()),
        vcs_repo: Some(vcs_repo.clone()),
        ..Module::new(&org.id, RegistryName::Private, None, name, provider, request.no_code.unwrap_or(false))
    };
    modules::insert(store, &module).await?;
    let mut writes = Vec::new();
    if secret.is_some() {
        let target = Hook { module: module.key(), repository: Some(RepositoryRef::of(&module.org_id, &vcs_repo)) };
        let item = Item::from_value(keys::vcs_webhook(&webhook.uuid), &target)?;
        writes.push(Write::Put { item, condition: Condition::NotExists });
    }
    if branch.is_empty() {
        writes.push(sync_work(&module)?);
    }
    if !writes.is_empty() {
        store.transact(writes).await?;
    }
    if let Some(secret) = secret {
        let provider_client = vcs::provider(connection_of(connection), state.vcs.clone());
        if let Err(e) = provider_client.create_webhook(&repo, &vcs_repo.webhook_url, &secret).await {
            // `e` is the generic text; the provider's answer was logged where it was read.
            tracing::warn!(module = %module.id, error = %e, "webhook not registered with the provider; new tags need a resync");
        }
    }
    state.work.notify_one();
    Ok((module, org))
}

/// The name and provider a publish request gives, else those its repository's name gives.
fn name_and_provider(request: &PublishRequest, repository: &str) -> Result<(ModuleName, ProviderName)> {
    let given = |value: &Option<String>| value.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let (name, provider) = (given(&request.name), given(&request.provider));
    let derived = module_from_repository(repository);
    if name.is_none() && provider.is_none() && derived.is_none() {
        return Err(RegistryError::invalid(
            Field::Nested("vcs-repo", "identifier"),
            format!(
                "repository {repository} must be named terraform-<provider>-<name>, or the request must send the \
                 module's name and provider (as for a module of a monorepo)"
            ),
        ));
    }
    let name = match (name, &derived) {
        (Some(name), _) => ModuleName::parse(Field::Attribute("name"), &name)?,
        (None, Some((name, _))) => name.clone(),
        (None, None) => {
            return Err(RegistryError::invalid(
                Field::Attribute("name"),
                format!("repository {repository} is not named terraform-<provider>-<name>: send the module's name"),
            ))
        }
    };
    let provider = match (provider, derived) {
        (Some(provider), _) => ProviderName::parse(Field::Attribute("provider"), &provider)?,
        (None, Some((_, provider))) => provider,
        (None, None) => {
            return Err(RegistryError::invalid(
                Field::Attribute("provider"),
                format!("repository {repository} is not named terraform-<provider>-<name>: send the module's provider"),
            ))
        }
    };
    Ok((name, provider))
}

/// A repository's webhook as its modules record it.
struct Webhook {
    url: String,
    uuid: String,
    sealed_secret: String,
}

/// The webhook of a module already published from the repository, if there is one; refuses a
/// repository that already has as many modules as one may.
async fn sibling_of(
    store: &dyn ItemStore,
    org_id: &str,
    oauth_token_id: &str,
    identifier: &str,
) -> Result<Option<Webhook>> {
    let query = keys::vcs_repository_modules(org_id, oauth_token_id, identifier).limit(MAX_MODULES_PER_REPOSITORY);
    let listed = store.query(query).await?.items;
    if listed.len() >= MAX_MODULES_PER_REPOSITORY {
        return Err(RegistryError::invalid(
            Field::Nested("vcs-repo", "identifier"),
            format!("{MAX_MODULES_PER_REPOSITORY} modules are published from this repository already, the most one may hold"),
        ));
    }
    let Some(module_key) = listed.first().map(Item::parse::<Key>).transpose()? else {
        return Ok(None);
    };
    let Some(item) = store.get(&module_key).await? else { return Ok(None) };
    let sibling: Module = item.parse()?;
    Ok(sibling.vcs_repo.map(|repo| Webhook {
        url: repo.webhook_url,
        uuid: repo.webhook_uuid,
        sealed_secret: repo.sealed_webhook_secret,
    }))
}

/// What a webhook id points to: the module it was made for and the repository whose modules a
/// delivery feeds (absent from webhooks made before monorepos).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Hook {
    #[serde(flatten)]
    pub module: Key,
    #[serde(default)]
    pub repository: Option<RepositoryRef>,
}

/// A repository as its modules are indexed: one organization's, read through one token.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct RepositoryRef {
    pub org_id: String,
    pub oauth_token_id: String,
    pub identifier: String,
}

impl RepositoryRef {
    pub fn of(org_id: &str, repo: &VcsRepo) -> Self {
        Self {
            org_id: org_id.to_owned(),
            oauth_token_id: repo.oauth_token_id.clone(),
            identifier: repo.identifier.clone(),
        }
    }

    /// Every module published from the repository (a bounded set: one per module address).
    pub async fn modules(&self, store: &dyn ItemStore) -> Result<Vec<Module>> {
        let query = keys::vcs_repository_modules(&self.org_id, &self.oauth_token_id, &self.identifier);
        let module_keys: Vec<Key> = query_all_as(store, query).await?;
        let found = store.get_many(&module_keys).await?;
        let modules = found.into_iter().flatten().map(|item| item.parse::<Module>());
        Ok(modules.collect::<std::result::Result<_, _>>()?)
    }
}

/// A PATCH of `vcs-repo`: publish from a branch's commits, or from tags again.
#[derive(Debug, Clone)]
pub enum Switch {
    ToBranch(String),
    /// Reads the repository's tags again once switched.
    ToTags,
}

/// Reads the `vcs-repo` of a PATCH: `None` when it asks for no switch.
pub fn switch(branch: Option<String>, tags: Option<bool>) -> Result<Option<Switch>> {
    match (branch, tags) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => {
            Err(RegistryError::invalid(REPO, "vcs-repo.branch and vcs-repo.tags cannot be sent together"))
        }
        (Some(branch), None) if !branch.trim().is_empty() => Ok(Some(Switch::ToBranch(branch.trim().to_owned()))),
        (None, Some(true)) => Ok(Some(Switch::ToTags)),
        _ => Err(RegistryError::invalid(REPO, "send a branch to publish from it, or tags: true to publish from tags")),
    }
}

impl Switch {
    /// Edits the module (one connected to a repository).
    fn apply(&self, module: &mut Module) {
        let Some(repo) = module.vcs_repo.as_mut() else { return };
        match self {
            Switch::ToBranch(branch) => {
                repo.branch.clone_from(branch);
                module.publishing_mechanism = Some(BRANCH.into());
            }
            Switch::ToTags => {
                repo.branch.clear();
                module.publishing_mechanism = Some(TAGS.into());
            }
        }
    }
}

/// A PATCH of `vcs-repo`: a switch between tags and a branch, a new source directory, a new
/// tag prefix, or any of them together.
#[derive(Debug, Clone)]
pub struct RepoUpdate {
    switch: Option<Switch>,
    source_directory: Option<String>,
    tag_prefix: Option<String>,
}

/// Reads the `vcs-repo` of a PATCH: `None` when it changes nothing of it.
pub fn repo_update(
    branch: Option<String>,
    tags: Option<bool>,
    source_directory: Option<String>,
    tag_prefix: Option<String>,
) -> Result<Option<RepoUpdate>> {
    let switch = switch(branch, tags)?;
    let source_directory = source_directory.as_deref().map(monorepo::source_directory).transpose()?;
    let tag_prefix = tag_prefix.as_deref().map(monorepo::tag_prefix).transpose()?;
    if switch.is_none() && source_directory.is_none() && tag_prefix.is_none() {
        return Ok(None);
    }
    Ok(Some(RepoUpdate { switch, source_directory, tag_prefix }))
}

impl ModuleChange for RepoUpdate {
    /// A module publishing from tags reads them again when it switches to tags or its prefix
    /// changes; a new source directory applies to the versions fetched from then on.
    fn apply(&self, module: &mut Module) -> Result<Vec<Write>> {
        let repo = module
            .vcs_repo
            .as_mut()
            .ok_or_else(|| RegistryError::invalid(REPO, "this module is not connected to a VCS repository"))?;
        let mut read_tags = false;
        if let Some(directory) = &self.source_directory {
            repo.source_directory.clone_from(directory);
        }
        if let Some(prefix) = self.tag_prefix.as_ref().filter(|p| **p != repo.tag_prefix) {
            repo.tag_prefix.clone_from(prefix);
            read_tags = true;
        }
        if let Some(switch) = &self.switch {
            switch.apply(module);
            read_tags |= matches!(switch, Switch::ToTags);
        }
        Ok(if read_tags && module.publishes_from_tags() { vec![sync_work(module)?] } else { Vec::new() })
    }
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
    fn a_patch_switches_to_a_branch_or_to_tags_never_both() {
        assert!(matches!(switch(Some(" main ".into()), None), Ok(Some(Switch::ToBranch(b))) if b == "main"));
        assert!(matches!(switch(None, Some(true)), Ok(Some(Switch::ToTags))));
        assert!(matches!(switch(None, None), Ok(None)));
        for (branch, tags) in [(Some("main"), Some(true)), (Some(" "), None), (None, Some(false))] {
            assert!(switch(branch.map(str::to_owned), tags).is_err(), "{branch:?} {tags:?}");
        }
    }
}
