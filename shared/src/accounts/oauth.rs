//! VCS connections: the subset of HCP Terraform's OAuth clients that module publishing needs.
//! A connection is made from a personal access token, not an OAuth dance, so each client has
//! exactly one OAuth token, created with it. The provider credential is sealed at rest with the
//! application's sealer, bound to its OAuth token's id, and only [`token_for`] ever unseals it;
//! no response carries it.
//!
//! Both items live in the organization's partition and name their id pointers as satellites,
//! so deleting the organization removes them. As in the registry, a caller who may not do
//! something is told the resource is not there.

use serde::{Deserialize, Serialize};

use super::access::{self, join, Organization};
use super::error::{AccountsError, Result};
use crate::api::Field;
use crate::api::PageRequest;
use crate::auth::{Permission, Principal};
use crate::ids::{new_id, Kind};
use crate::seal::{self, Rebound, Resealed, SealContext};
use crate::state::AppState;
use crate::store::{
    keys, parse_all, pointer, query_all, Condition, Item, ItemStore, Key, Transaction, UpdateOp, Write,
};
use crate::vcs::{self, AllowedNetworks, UrlProblem};

/// Counter of VCS connections kept on the organization item, for list totals.
pub const OAUTH_CLIENT_COUNT: &str = "oauth_client_count";

const NAME_MAX: usize = 255;
const URL_MAX: usize = 2048;
/// KMS seals at most 4096 bytes; no provider's token comes near it.
const TOKEN_MAX: usize = 4096;

struct Provider {
    id: &'static str,
    display_name: &'static str,
    /// `(http-url, api-url)` of the hosted service; self-managed ones must be given both.
    defaults: Option<(&'static str, &'static str)>,
}

static PROVIDERS: [Provider; 5] = [
    Provider { id: "github", display_name: "GitHub", defaults: Some(("https://github.com", "https://api.github.com")) },
    Provider { id: "github_enterprise", display_name: "GitHub Enterprise", defaults: None },
    Provider {
        id: "gitlab_hosted",
        display_name: "GitLab",
        defaults: Some(("https://gitlab.com", "https://gitlab.com/api/v4")),
    },
    Provider { id: "gitlab_community_edition", display_name: "GitLab Community Edition", defaults: None },
    Provider { id: "gitlab_enterprise_edition", display_name: "GitLab Enterprise Edition", defaults: None },
];

/// A VCS connection (`oc-…`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OAuthClient {
    pub id: String,
    pub org_id: String,
    pub service_provider: String,
    pub name: Option<String>,
    pub http_url: String,
    pub api_url: String,
    pub created_at: String,
    /// Its one token.
    pub oauth_token_id: String,
}

impl pointer::Addressed for OAuthClient {
    const KIND: Kind = Kind::OAuthClient;
}

impl OAuthClient {
    fn key(&self) -> Key {
        keys::oauth_client(&self.org_id, &self.id)
    }

    fn to_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }

    /// How HCP Terraform names the service provider to people.
    pub fn service_provider_display_name(&self) -> &str {
        PROVIDERS.iter().find(|p| p.id == self.service_provider).map_or(&self.service_provider, |p| p.display_name)
    }
}

/// A VCS connection's OAuth token (`ot-…`). The credential it stands for is kept sealed and is
/// not a public field, so nothing that renders a token can reach it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OAuthToken {
    pub id: String,
    pub org_id: String,
    pub oauth_client_id: String,
    pub created_at: String,
    sealed_token: String,
}

impl pointer::Addressed for OAuthToken {
    const KIND: Kind = Kind::OAuthToken;
}

impl OAuthToken {
    fn key(&self) -> Key {
        keys::oauth_token(&self.org_id, &self.id)
    }

    fn to_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }
}

/// A create request's attributes as sent; [`create`] checks them. No `Debug`: it holds the
/// credential in the clear.
pub struct NewOAuthClient {
    pub service_provider: Option<String>,
    pub name: Option<String>,
    pub http_url: Option<String>,
    pub api_url: Option<String>,
    pub oauth_token_string: Option<String>,
}

/// What publishing needs to call a provider: where it is and the credential, unsealed.
#[derive(Clone)]
pub struct VcsConnection {
    pub oauth_token_id: String,
    pub oauth_client_id: String,
    pub service_provider: String,
    pub http_url: String,
    pub api_url: String,
    pub token: String,
}

impl std::fmt::Debug for VcsConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VcsConnection")
            .field("oauth_token_id", &self.oauth_token_id)
            .field("oauth_client_id", &self.oauth_client_id)
            .field("service_provider", &self.service_provider)
            .field("http_url", &self.http_url)
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

/// Maps "lacks the permission" to "not found".
fn hidden<T>(result: Result<T>) -> Result<T> {
    result.map_err(AccountsError::concealed)
}

fn check_provider(service_provider: Option<&str>) -> Result<&'static Provider> {
    let pointer = Field::Attribute("service-provider");
    let given = service_provider.ok_or_else(|| AccountsError::invalid(pointer, "`service-provider` is required."))?;
    PROVIDERS.iter().find(|p| p.id == given).ok_or_else(|| {
        let known: Vec<&str> = PROVIDERS.iter().map(|p| p.id).collect();
        AccountsError::invalid(pointer, format!("must be one of `{}`", known.join("`, `")))
    })
}

/// The URL given, or the provider's default. It must be an absolute http(s) URL with a host, no
/// credentials (it is shown in every response), no query or fragment (paths are appended to
/// it), and a host that, if it is a literal IP, lies outside the blocks VCS calls may not reach
/// or in an allowed network. A host name is checked when it is used, as what it resolves to may
/// change.
fn check_url(
    pointer: Field,
    given: Option<String>,
    default: Option<&str>,
    allowed: &AllowedNetworks,
) -> Result<String> {
    let given = given.filter(|url| !url.trim().is_empty());
    let url = match (given, default) {
        (Some(url), _) => url,
        (None, Some(default)) => return Ok(default.to_owned()),
        (None, None) => return Err(AccountsError::invalid(pointer, "is required for this service provider")),
    };
    if url.len() > URL_MAX {
        return Err(AccountsError::invalid(pointer, format!("must be at most {URL_MAX} characters")));
    }
    match vcs::check_url(&url, allowed) {
        Ok(_) => Ok(url),
        Err(UrlProblem::Malformed) => Err(AccountsError::invalid(
            pointer,
            "must be an http(s) URL with a host and no credentials, query or fragment",
        )),
        Err(UrlProblem::Refused(refused)) => Err(AccountsError::invalid(
            pointer,
            format!(
                "points at {}, {}, which Hangar does not call; an operator can allow its network with \
                 HANGAR_VCS_ALLOWED_NETWORKS",
                refused.address, refused.range
            ),
        )),
    }
}

/// Creates a VCS connection and its OAuth token in one transaction, sealing the credential.
pub async fn create(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    new: NewOAuthClient,
) -> Result<(OAuthClient, Organization)> {
    let store = state.store.as_ref();
    let org = hidden(access::authorized(store, principal, org_name, Permission::ManageModules).await)?;
    let provider = check_provider(new.service_provider.as_deref())?;
    let (default_http, default_api) = provider.defaults.unzip();
    let allowed = &state.config.vcs_allowed_networks;
    let http_url = check_url(Field::Attribute("http-url"), new.http_url, default_http, allowed)?;
    let api_url = check_url(Field::Attribute("api-url"), new.api_url, default_api, allowed)?;
    if new.name.as_ref().is_some_and(|name| name.chars().count() > NAME_MAX) {
        return Err(AccountsError::invalid(Field::Attribute("name"), format!("must be at most {NAME_MAX} characters")));
    }
    let token_pointer = Field::Attribute("oauth-token-string");
    let secret = new
        .oauth_token_string
        .filter(|token| !token.trim().is_empty())
        .ok_or_else(|| AccountsError::invalid(token_pointer, "`oauth-token-string` is required."))?;
    if secret.len() > TOKEN_MAX {
        return Err(AccountsError::invalid(token_pointer, format!("must be at most {TOKEN_MAX} bytes")));
    }
    let now = crate::api::timestamp(chrono::Utc::now());
    let client = OAuthClient {
        id: new_id("oc"),
        org_id: org.id.clone(),
        service_provider: provider.id.to_owned(),
        name: new.name,
        http_url,
        api_url,
        created_at: now.clone(),
        oauth_token_id: new_id("ot"),
    };
    let token = OAuthToken {
        id: client.oauth_token_id.clone(),
        org_id: org.id.clone(),
        oauth_client_id: client.id.clone(),
        created_at: now,
        sealed_token: state.sealer.seal_for(&SealContext::oauth_token(&client.oauth_token_id), &secret).await?,
    };
    let mut transaction = Transaction::new();
    transaction.add(Write::Put { item: client.to_item()?, condition: Condition::NotExists });
    transaction.add(pointer::create(&client.id, &client.key())?);
    transaction.add(Write::Put { item: token.to_item()?, condition: Condition::NotExists });
    transaction.add(pointer::create(&token.id, &token.key())?);
    let org_active = transaction.add(join(&org.id, OAUTH_CLIENT_COUNT, 1));
    match transaction.commit(store).await {
        Err(e) if e.failed_on(org_active) => Err(AccountsError::NotFound),
        other => other.map_err(AccountsError::from),
    }?;
    Ok((client, org))
}

/// The VCS connection with this id, if the principal holds `permission` in its organization.
pub async fn get(
    store: &dyn ItemStore,
    principal: &Principal,
    id: &str,
    permission: Permission,
) -> Result<(OAuthClient, Organization)> {
    let client: OAuthClient = pointer::resolve(store, id).await?.ok_or(AccountsError::NotFound)?;
    hidden(access::require(principal, &client.org_id, permission))?;
    let org = access::get_by_id(store, &client.org_id).await?;
    Ok((client, org))
}

/// A page of the organization's VCS connections, the organization, and their total.
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    page: &PageRequest,
) -> Result<(Vec<OAuthClient>, Organization, usize)> {
    let org = hidden(access::visible(store, principal, org_name).await)?;
    let items = page.fetch(store, keys::oauth_clients(&org.id)).await?;
    let clients = parse_all::<OAuthClient>(&items)?;
    let org_item = store.get(&keys::organization(&org.id)).await?;
    let total = org_item.map(|item| item.count(OAUTH_CLIENT_COUNT)).transpose()?.unwrap_or(0);
    Ok((clients, org, total))
}

/// Deletes a VCS connection and its token.
pub async fn delete(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<()> {
    let (client, _) = get(store, principal, id, Permission::ManageModules).await?;
    let writes = vec![
        Write::Delete { key: client.key(), condition: Condition::Exists },
        pointer::remove(&client.id),
        Write::Delete { key: keys::oauth_token(&client.org_id, &client.oauth_token_id), condition: Condition::Always },
        pointer::remove(&client.oauth_token_id),
        join(&client.org_id, OAUTH_CLIENT_COUNT, -1),
    ];
    store.transact(writes).await.map_err(|e| match e {
        e if e.is_condition_failed() => AccountsError::NotFound,
        e => e.into(),
    })
}

/// The OAuth token with this id, if the principal may read its organization.
pub async fn get_token(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<OAuthToken> {
    let token: OAuthToken = pointer::resolve(store, id).await?.ok_or(AccountsError::NotFound)?;
    hidden(access::require(principal, &token.org_id, Permission::Read))?;
    Ok(token)
}

/// The tokens of a VCS connection the principal may read (one, or none if it is going).
pub async fn tokens(store: &dyn ItemStore, principal: &Principal, client_id: &str) -> Result<Vec<OAuthToken>> {
    let (client, _) = get(store, principal, client_id, Permission::Read).await?;
    let token = store.get(&keys::oauth_token(&client.org_id, &client.oauth_token_id)).await?;
    Ok(token.map(|item| item.parse()).transpose()?.into_iter().collect())
}

/// The connection behind an OAuth token of the organization, with its credential unsealed, for
/// publishing modules from the provider. `None` when the token does not exist or belongs to
/// another organization.
pub async fn token_for(state: &AppState, org_id: &str, oauth_token_id: &str) -> Result<Option<VcsConnection>> {
    let store = state.store.as_ref();
    let Some(item) = store.get(&keys::oauth_token(org_id, oauth_token_id)).await? else { return Ok(None) };
    let token: OAuthToken = item.parse()?;
    let Some(item) = store.get(&keys::oauth_client(org_id, &token.oauth_client_id)).await? else { return Ok(None) };
    let client: OAuthClient = item.parse()?;
    Ok(Some(VcsConnection {
        oauth_token_id: token.id,
        oauth_client_id: client.id,
        service_provider: client.service_provider,
        http_url: client.http_url,
        api_url: client.api_url,
        token: state.sealer.unseal_for(&SealContext::oauth_token(oauth_token_id), &token.sealed_token).await?,
    }))
}

/// Rebinds the organization's OAuth tokens whose credential is still sealed in format 1 (before
/// contexts existed) to their ids, stopping once `tally` has rewritten `limit`. Each write is
/// conditional on the sealed value being unchanged; a value that opens nowhere is left, logged
/// by its token's id.
pub async fn reseal_tokens(state: &AppState, org_id: &str, limit: usize, tally: &mut Resealed) -> Result<()> {
    const SEALED: &str = "sealed_token";
    for item in query_all(state.store.as_ref(), keys::oauth_tokens(org_id)).await? {
        let (Some(id), Some(sealed)) = (item.attr::<String>("id")?, item.attr::<String>(SEALED)?) else {
            continue;
        };
        if tally.rewritten >= limit {
            tally.left += 1;
            continue;
        }
        let outcome = seal::rebind(state.sealer.as_ref(), &SealContext::oauth_token(&id), &sealed).await?;
        let written = match &outcome {
            Rebound::Rewritten(bound) => {
                let ops = vec![UpdateOp::set(SEALED, bound.as_str())];
                match state.store.update(&item.key, ops, Condition::equals(SEALED, sealed)).await {
                    Ok(_) => true,
                    Err(e) if e.is_condition_failed() => false,
                    Err(e) => return Err(e.into()),
                }
            }
            Rebound::Unreadable => {
                tracing::warn!(oauth_token = id, "a format-1 sealed credential opens with no key here; left as it is");
                false
            }
            Rebound::Bound => false,
        };
        tally.count(&outcome, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointer(e: AccountsError) -> Field {
        match e {
            AccountsError::Invalid { field, .. } => field,
            other => panic!("expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn urls_default_for_hosted_providers_and_are_checked_otherwise() {
        let (p, none) = (Field::Attribute("http-url"), &AllowedNetworks::default());
        assert_eq!(check_url(p, None, Some("https://github.com"), none).unwrap(), "https://github.com");
        assert_eq!(check_url(p, Some(" ".into()), Some("https://github.com"), none).unwrap(), "https://github.com");
        let given = check_url(p, Some("http://git.example:8080/".into()), None, none).unwrap();
        assert_eq!(given, "http://git.example:8080/");
        for bad in [
            None,
            Some("git.example"),
            Some("ftp://git.example"),
            Some("https://u:p@git.example"),
            Some("https://git.example/api?x=1"),
            Some("https://git.example/api#x"),
            Some("http://10.0.0.1/api/v4"),
            Some("http://[::ffff:127.0.0.1]/"),
        ] {
            assert_eq!(pointer(check_url(p, bad.map(str::to_owned), None, none).unwrap_err()), p, "{bad:?}");
        }
        let private = AllowedNetworks::parse("10.0.0.0/8").unwrap();
        assert!(check_url(p, Some("http://10.0.0.1/api/v4".into()), None, &private).is_ok());
    }

    #[test]
    fn only_the_supported_providers_are_accepted() {
        assert_eq!(check_provider(Some("gitlab_hosted")).unwrap().display_name, "GitLab");
        for bad in [None, Some("bitbucket_hosted"), Some("GitHub")] {
            assert_eq!(pointer(check_provider(bad).map(|_| ()).unwrap_err()), Field::Attribute("service-provider"));
        }
    }

    #[test]
    fn a_connection_never_prints_its_credential() {
        let connection = VcsConnection {
            oauth_token_id: "ot-1".into(),
            oauth_client_id: "oc-1".into(),
            service_provider: "github".into(),
            http_url: "https://github.com".into(),
            api_url: "https://api.github.com".into(),
            token: "ghp_secret".into(),
        };
        assert!(!format!("{connection:?}").contains("ghp_secret"));
    }
}
