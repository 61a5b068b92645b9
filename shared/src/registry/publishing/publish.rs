//! Publishing a module from a repository (`POST …/registry-modules/vcs` and its deprecated
//! form), and switching a published module between tag- and branch-based publishing.

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
use crate::store::{keys, Condition, Item, ItemStore, Write};
use crate::vcs::{self, RepoId, ServiceProvider};

/// Where a publish request's repository settings sit in the request document.
const REPO: Field = Field::Attribute("vcs-repo");

pub struct PublishRequest {
    pub identifier: Option<String>,
    pub display_identifier: Option<String>,
    pub oauth_token_id: Option<String>,
    pub github_app_installation_id: Option<String>,
    pub branch: Option<String>,
    pub ingress_submodules: Option<bool>,
    pub no_code: Option<bool>,
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
    let org_id = item
        .filter(|_| id.starts_with("ot-"))
        .and_then(|i| i.attrs.get("org_id").and_then(|v| v.as_str()).map(str::to_owned));
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
    let (name, provider) = module_from_repository(&repo.name).ok_or_else(|| {
        RegistryError::invalid(
            Field::Nested("vcs-repo", "identifier"),
            format!("repository {} must be named terraform-<provider>-<name>", repo.name),
        )
    })?;
    let branch = request.branch.map(|b| b.trim().to_owned()).unwrap_or_default();
    let secret = crate::ids::random_token(40);
    let uuid = crate::ids::random_token(32).to_lowercase();
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
        sealed_webhook_secret: state.sealer.seal_for(&SealContext::webhook_secret(&uuid), &secret).await?,
    };
    let module = Module {
        publishing_mechanism: Some(if branch.is_empty() { TAGS } else { BRANCH }.to_owned()),
        vcs_repo: Some(vcs_repo.clone()),
        ..Module::new(&org.id, RegistryName::Private, None, name, provider, request.no_code.unwrap_or(false))
    };
    modules::insert(store, &module).await?;
    let webhook = Item::from_value(keys::vcs_webhook(&uuid), &module.key())?;
    let mut writes = vec![Write::Put { item: webhook, condition: Condition::NotExists }];
    if branch.is_empty() {
        writes.push(sync_work(&module)?);
    }
    store.transact(writes).await?;
    let provider_client = vcs::provider(connection_of(connection), state.vcs.clone());
    if let Err(e) = provider_client.create_webhook(&repo, &vcs_repo.webhook_url, &secret).await {
        // `e` is the generic text; the provider's answer was logged where it was read.
        tracing::warn!(module = %module.id, error = %e, "webhook not registered with the provider; new tags need a resync");
    }
    state.work.notify_one();
    Ok((module, org))
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

impl ModuleChange for Switch {
    fn apply(&self, module: &mut Module) -> Result<Vec<Write>> {
        let repo = module
            .vcs_repo
            .as_mut()
            .ok_or_else(|| RegistryError::invalid(REPO, "this module is not connected to a VCS repository"))?;
        match self {
            Switch::ToBranch(branch) => {
                repo.branch.clone_from(branch);
                module.publishing_mechanism = Some(BRANCH.into());
                Ok(Vec::new())
            }
            Switch::ToTags => {
                repo.branch.clear();
                module.publishing_mechanism = Some(TAGS.into());
                Ok(vec![sync_work(module)?])
            }
        }
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
