//! Bearer tokens and the principal a request acts as. A token is a random secret shown once;
//! the store keeps only its SHA-256, so resolving a token is one item read by hash, and the
//! stored hash is compared in constant time before it is trusted.

mod principal;

use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use principal::{AgentGrant, OrganizationAccess, Permission, Principal, TeamGrant};

use crate::api::ApiError;
use crate::ids::random_token;
use crate::state::AppState;
use crate::store::{keys, Condition, Item, ItemStore, Key, StoreError};

/// A new token secret in HCP Terraform's shape (`<14>.atlasv1.<64>`), which tools recognise.
pub fn new_secret() -> String {
    format!("{}.atlasv1.{}", random_token(14), random_token(64))
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
    let Some(item) = store.get(&keys::token(&hash)).await? else { return Ok(None) };
    let record: TokenRecord = item.parse()?;
    let matches: bool = record.hash.as_bytes().ct_eq(hash.as_bytes()).into();
    Ok(matches.then_some(record.principal))
}

/// Makes `secret` a site-admin token (idempotent): how dev-server and the functions bootstrap.
pub async fn install_admin_token(store: &dyn ItemStore, secret: &str) -> Result<(), StoreError> {
    let record = TokenRecord {
        hash: hash_secret(secret),
        token_id: "site-admin".into(),
        principal: Principal::SiteAdmin,
        created_at: crate::api::timestamp(chrono::Utc::now()),
    };
    store.put(record.to_item()?, Condition::Always).await
}

/// Whether any site-admin token exists (dev-server generates one at first start otherwise).
pub async fn admin_token_exists(store: &dyn ItemStore) -> Result<bool, StoreError> {
    Ok(store.get(&keys::site_admin_marker()).await?.is_some())
}

/// Records that a site-admin token was generated, so later starts do not print another.
pub async fn mark_admin_token_generated(store: &dyn ItemStore) -> Result<(), StoreError> {
    let marker = Item::new(keys::site_admin_marker(), Default::default());
    store.put(marker, Condition::Always).await
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
}
