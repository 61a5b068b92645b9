//! Bearer tokens and the principal a request acts as. A token is a random secret shown once;
//! the store keeps only its SHA-256, so resolving a token is one item read by hash, and the
//! stored hash is compared in constant time before it is trusted.

mod principal;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::{header, request::Parts};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use principal::{AgentGrant, JobGrant, OrganizationAccess, Permission, Principal, TeamGrant};

use crate::api::ApiError;
use crate::ids::{random_token, ID_CHARS, ORGANIZATION_PREFIX};
use crate::state::AppState;
use std::sync::Arc;

use crate::store::{
    keys, retry_on_race, Condition, Item, ItemStore, Key, ReadAhead, Store, StoreError, Transaction, Write,
};

/// The `token_id` of the site-admin token.
const SITE_ADMIN_TOKEN_ID: &str = "site-admin";

/// What separates a secret's two random parts, as in HCP Terraform's tokens.
const SECRET_INFIX: &str = ".atlasv1.";

/// A new token secret in HCP Terraform's shape (`<14>.atlasv1.<64>`), which tools (and secret
/// scanners) recognise.
pub fn new_secret() -> String {
    format!("{}{SECRET_INFIX}{}", random_token(14), random_token(64))
}

/// A team token's secret: the same shape, its long part opening with the 16 characters of its
/// organization's id after `org-`. A function instance that has not yet seen the organization
/// learns its id from the secret (see [`org_hint`]) and reads what a request wants there in the
/// token's own batch: one round trip for a first read, not two. An organization's id is no
/// secret (every member reads it); the other 62 characters are random.
pub fn new_team_secret(org_id: &str) -> String {
    let body = org_id.strip_prefix(ORGANIZATION_PREFIX).and_then(|rest| rest.strip_prefix('-'));
    match body.filter(|body| body.len() == ID_CHARS) {
        Some(body) => format!("{}{SECRET_INFIX}{body}{}", random_token(14), random_token(64 - ID_CHARS)),
        None => new_secret(),
    }
}

/// The organization id a secret's shape suggests (see [`new_team_secret`]). Only a guess: any
/// caller can send any secret, and secrets made before team tokens carried it, or for the site
/// admin, suggest an id nobody has. Items read with it are used only once the token resolves,
/// and only when the organization's name marker read in the same batch holds that id.
fn org_hint(secret: &str) -> Option<String> {
    let (_, long) = secret.split_once(SECRET_INFIX)?;
    let body = long.get(..ID_CHARS)?;
    body.bytes().all(|b| b.is_ascii_alphanumeric()).then(|| format!("{ORGANIZATION_PREFIX}-{body}"))
}

/// The hex SHA-256 of a secret: the only form in which tokens are stored.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// What the store keeps about a token, under the token's hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenRecord {
    pub hash: String,
    /// The id of the token resource (`at-…`), or `site-admin`.
    pub token_id: String,
    pub principal: Principal,
    pub created_at: String,
}

impl TokenRecord {
    pub fn key(&self) -> Key {
        keys::token(&self.hash)
    }

    pub fn to_item(&self) -> Result<Item, StoreError> {
        Item::from_value(self.key(), self)
    }
}

/// Resolves a presented secret to its principal: one item read, then a constant-time check.
pub async fn resolve(store: &dyn ItemStore, secret: &str) -> Result<Option<Principal>, StoreError> {
    let hash = hash_secret(secret);
    principal_of(store.get(&keys::token(&hash)).await?, &hash)
}

/// Resolves a token by the hash of its secret (what a web console session keeps instead of the
/// secret): `None` once the token is gone, so revoking a token ends the sessions it opened.
pub async fn resolve_hash(store: &dyn ItemStore, hash: &str) -> Result<Option<Principal>, StoreError> {
    principal_of(store.get(&keys::token(hash)).await?, hash)
}

/// The principal of a token's item, if its stored hash is `hash` (compared in constant time).
fn principal_of(item: Option<Item>, hash: &str) -> Result<Option<Principal>, StoreError> {
    let Some(item) = item else { return Ok(None) };
    let record: TokenRecord = item.parse()?;
    let matches: bool = record.hash.as_bytes().ct_eq(hash.as_bytes()).into();
    Ok(matches.then_some(record.principal))
}

/// The item that maps an organization's name to its id, as read with a token (see [`Scoped`]):
/// `None` when no organization has the name.
#[derive(Debug, Clone)]
pub struct NameRead {
    pub name: String,
    pub marker: Option<Item>,
}

/// A caller of a path under one organization, named by its `{org}` or `{namespace}` segment: the
/// principal, and the organization's name marker read in the same BatchGetItem as the token, so
/// locating the organization costs no round trip of its own, whoever the caller is (a team's
/// token names its organization; the site admin's does not).
///
/// On a route with a [`ReadPlan`], when this process has seen the organization's id before (see
/// [`crate::state::OrgHints`]), the batch also reads the items the route will want there
/// (`ahead`), which [`Scoped::store`] then answers from.
#[derive(Debug)]
pub struct Scoped {
    pub principal: Principal,
    pub name: Option<NameRead>,
    ahead: Option<Arc<ReadAhead>>,
}

impl Scoped {
    /// A caller whose token was resolved apart, with nothing read ahead.
    pub fn of(principal: Principal) -> Self {
        Scoped { principal, name: None, ahead: None }
    }

    /// The store, answering reads of the items read ahead with the token from them.
    pub fn store(&self, store: &Store) -> Store {
        match &self.ahead {
            Some(ahead) => ahead.clone(),
            None => store.clone(),
        }
    }
}

/// What a route under one organization reads there once it knows the organization's id, from its
/// path parameters (`None`: nothing it can say ahead), beside the organization's own item.
/// Installed on a route as an extension for [`Scoped`] to read ahead.
#[derive(Clone, Copy)]
pub struct ReadPlan(pub fn(org_id: &str, param: &PathParam<'_>) -> Option<Vec<Key>>);

/// A path parameter of the request by name, if it has one.
pub type PathParam<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// Resolves a secret and, in the same BatchGetItem, the name marker of the organization `name`
/// and the items at `ahead`.
pub async fn resolve_scoped(
    store: &Store,
    secret: &str,
    name: Option<&str>,
    ahead: Vec<Key>,
) -> Result<Option<Scoped>, StoreError> {
    let hash = hash_secret(secret);
    let Some(name) = name else {
        return Ok(principal_of(store.get(&keys::token(&hash)).await?, &hash)?.map(Scoped::of));
    };
    let mut wanted = vec![keys::token(&hash), keys::organization_name(name)];
    wanted.extend(ahead.iter().cloned());
    let mut found = store.get_many(&wanted).await?.into_iter();
    let Some(principal) = principal_of(found.next().flatten(), &hash)? else { return Ok(None) };
    let name = Some(NameRead { name: name.to_owned(), marker: found.next().flatten() });
    let ahead = (!ahead.is_empty()).then(|| Arc::new(ReadAhead::new(Arc::clone(store), ahead.into_iter().zip(found))));
    Ok(Some(Scoped { principal, name, ahead }))
}

/// The bootstrap record of the site-admin token: which hash was installed last.
#[derive(Debug, Serialize, Deserialize)]
struct Installed {
    hash: String,
    /// Bumped by every change: what a change is conditioned on, so concurrent starts agree.
    revision: u64,
}

/// What [`install_admin_token`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminInstall {
    /// It was installed already.
    Unchanged,
    /// It is installed, and the one installed before (if any) is gone.
    Installed,
}

/// Makes `secret` the site-admin token: how dev-server and the functions bootstrap. One
/// site-admin token is installed at a time: a value other than the one installed last replaces
/// it in one transaction, so the old value stops working at once; the same value again changes
/// nothing. Starts racing with each other agree (the record is written on the condition that it
/// is unchanged). Tokens installed by versions before the record existed are not known here.
pub async fn install_admin_token(store: &dyn ItemStore, secret: &str) -> Result<AdminInstall, StoreError> {
    install_site_token(store, secret, keys::site_admin_bootstrap(), SITE_ADMIN_TOKEN_ID, Principal::SiteAdmin).await
}

/// The `token_id` of the runners' token.
const SITE_RUNNER_TOKEN_ID: &str = "site-runner";

/// Makes `secret` the token Hangar's own runners register with (an agent token of the site's
/// pool, which runs the workspaces in `remote` execution mode), as [`install_admin_token`] does.
pub async fn install_runner_token(store: &dyn ItemStore, secret: &str) -> Result<AdminInstall, StoreError> {
    let grant = AgentGrant {
        org_id: crate::agents::pool::SITE_ORG.into(),
        pool_id: crate::agents::pool::SITE_POOL.into(),
        token_id: SITE_RUNNER_TOKEN_ID.into(),
    };
    install_site_token(store, secret, keys::site_runner_bootstrap(), SITE_RUNNER_TOKEN_ID, Principal::Agent(grant))
        .await
}

/// Installs one of the site's own tokens, each with its bootstrap record at `record_key`.
async fn install_site_token(
    store: &dyn ItemStore,
    secret: &str,
    record_key: Key,
    token_id: &str,
    principal: Principal,
) -> Result<AdminInstall, StoreError> {
    let hash = hash_secret(secret);
    let outcome = retry_on_race(|| async {
        let previous: Option<Installed> = store.get(&record_key).await?.map(|i| i.parse()).transpose()?;
        if previous.as_ref().is_some_and(|p| p.hash == hash) {
            return Ok(Some(AdminInstall::Unchanged));
        }
        let token = TokenRecord {
            hash: hash.clone(),
            token_id: token_id.into(),
            principal: principal.clone(),
            created_at: crate::api::timestamp(chrono::Utc::now()),
        };
        let (condition, revision) = match &previous {
            Some(p) => (Condition::equals("revision", p.revision), p.revision + 1),
            None => (Condition::NotExists, 1),
        };
        let installed = Installed { hash: hash.clone(), revision };
        let mut transaction = Transaction::new();
        let record = Item::from_value(record_key.clone(), &installed)?;
        let record_unchanged = transaction.add(Write::Put { item: record, condition });
        transaction.add(Write::Put { item: token.to_item()?, condition: Condition::Always });
        if let Some(previous) = &previous {
            let key = keys::token(&previous.hash);
            transaction.add(Write::Delete { key, condition: Condition::Always });
        }
        match transaction.commit(store).await {
            Err(e) if e.failed_on(record_unchanged) => Ok(None),
            other => other.map(|()| Some(AdminInstall::Installed)),
        }
    })
    .await?;
    outcome.ok_or_else(|| StoreError::backend("a site token's bootstrap record kept changing"))
}

/// Whether a site-admin token was ever installed or generated here (dev-server generates one at
/// first start otherwise).
pub async fn admin_token_exists(store: &dyn ItemStore) -> Result<bool, StoreError> {
    let found = store.get_many(&[keys::site_admin_bootstrap(), keys::site_admin_marker()]).await?;
    Ok(found.iter().any(Option::is_some))
}

/// The bearer secret of a request, if it carries one.
fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, secret) = value.split_once(' ')?;
    let secret = secret.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !secret.is_empty()).then_some(secret)
}

/// A caller of the management APIs: a site-admin or team token (agent tokens are refused).
impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let secret = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        match resolve(state.store.as_ref(), secret).await? {
            Some(Principal::Agent(_)) | None => Err(ApiError::unauthorized()),
            Some(principal) => Ok(principal),
        }
    }
}

/// A caller of a path under one organization: a site-admin or team token, as [`Principal`].
impl FromRequestParts<AppState> for Scoped {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let secret = bearer(parts).ok_or_else(ApiError::unauthorized)?.to_owned();
        let params = RawPathParams::from_request_parts(parts, state).await.ok();
        // The management API names the organization `{org}`; the registry protocol, `{namespace}`.
        let param = |wanted: &str| params.as_ref()?.iter().find(|(key, _)| *key == wanted).map(|(_, value)| value);
        let name = param("org").or_else(|| param("namespace"));
        let plan = parts.extensions.get::<ReadPlan>().copied();
        let ahead = match (name, plan) {
            // What this process saw last, else what a team token's secret says.
            (Some(name), Some(ReadPlan(plan))) => {
                state.org_hints.guess(name).or_else(|| org_hint(&secret)).and_then(|org_id| {
                    let keys = plan(&org_id, &|wanted| param(wanted).map(str::to_owned))?;
                    Some(std::iter::once(keys::organization(&org_id)).chain(keys).collect())
                })
            }
            _ => None,
        };
        match resolve_scoped(&state.store, &secret, name, ahead.unwrap_or_default()).await? {
            Some(Scoped { principal: Principal::Agent(_), .. }) | None => Err(ApiError::unauthorized()),
            Some(scoped) => Ok(scoped),
        }
    }
}

/// A caller of the agent gateway: an agent token only.
#[derive(Debug, Clone)]
pub struct AgentCaller(pub AgentGrant);

impl FromRequestParts<AppState> for AgentCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let secret = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        match resolve(state.store.as_ref(), secret).await? {
            Some(Principal::Agent(grant)) => Ok(AgentCaller(grant)),
            _ => Err(ApiError::unauthorized()),
        }
    }
}

/// A caller of a run's job API: a job token only (the agent running the job).
#[derive(Debug, Clone)]
pub struct JobCaller {
    pub principal: Principal,
    pub grant: JobGrant,
}

impl FromRequestParts<AppState> for JobCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let secret = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        match resolve(state.store.as_ref(), secret).await? {
            Some(principal @ Principal::Job(_)) => {
                let Principal::Job(grant) = &principal else { unreachable!("matched above") };
                Ok(JobCaller { grant: grant.clone(), principal })
            }
            _ => Err(ApiError::unauthorized()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_and_hashes_stable() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.contains(".atlasv1."));
        assert_eq!(hash_secret("x"), hash_secret("x"));
        assert_eq!(hash_secret("x").len(), 64);
    }

    /// HCP Terraform's shape, which secret scanners match: 14 and 64 alphanumeric characters.
    fn hcp_shaped(secret: &str) -> bool {
        let Some((short, long)) = secret.split_once(".atlasv1.") else { return false };
        let alphanumeric = |part: &str| part.bytes().all(|b| b.is_ascii_alphanumeric());
        short.len() == 14 && long.len() == 64 && alphanumeric(short) && alphanumeric(long)
    }

    #[test]
    fn a_team_secret_keeps_the_shape_and_names_its_organization() {
        let org_id = crate::ids::new_id(ORGANIZATION_PREFIX);
        let (a, b) = (new_team_secret(&org_id), new_team_secret(&org_id));
        assert!(hcp_shaped(&a) && hcp_shaped(&b), "{a} {b}");
        assert_ne!(a, b);
        assert_eq!(org_hint(&a).as_deref(), Some(org_id.as_str()));
        assert!(hcp_shaped(&new_secret()));
        // An id of another shape is not put in a secret.
        assert!(hcp_shaped(&new_team_secret("org-short")));
    }

    #[test]
    fn a_secret_of_any_other_shape_suggests_no_organization() {
        for secret in ["", "plain", "abc.atlasv1.", "abc.atlasv1.short", "abc.atlasv1.0123456789abcde-xyz"] {
            assert_eq!(org_hint(secret), None, "{secret}");
        }
        // Multi-byte text where the id would be ends the guess rather than splitting a character.
        assert_eq!(org_hint("abc.atlasv1.0123456789abcdé"), None);
    }
}
