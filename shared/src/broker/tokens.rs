//! Vault-style service tokens: a root token that bootstraps, and child tokens with policies,
//! a TTL and a display name (which feeds the username template). Stored only as SHA-256,
//! expiring through the store's TTL.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::error::{BrokerError, Result};
use crate::auth::hash_secret;
use crate::store::{keys, Condition, Item, ItemStore};

pub const ROOT_POLICY: &str = "root";
pub const DEFAULT_POLICY: &str = "default";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServiceToken {
    pub hash: String,
    pub accessor: String,
    pub policies: Vec<String>,
    pub display_name: String,
    pub creation_time: i64,
    /// Seconds; 0 never expires.
    pub ttl: u64,
    pub expire_at: Option<i64>,
}

impl ServiceToken {
    pub fn is_root(&self) -> bool {
        self.policies.iter().any(|p| p == ROOT_POLICY)
    }

    fn to_item(&self) -> Result<Item> {
        let item = Item::from_value(keys::service_token(&self.hash), self)?;
        Ok(match self.expire_at {
            Some(at) => item.with_ttl(at),
            None => item,
        })
    }
}

/// A new service-token secret in Vault's form (`hvs.` and 24 characters).
fn new_secret() -> String {
    format!("hvs.{}", crate::ids::random_token(24))
}

/// The token a secret names, if it exists and has not expired.
pub async fn resolve(store: &dyn ItemStore, secret: &str) -> Result<Option<ServiceToken>> {
    let hash = hash_secret(secret);
    let Some(item) = store.get(&keys::service_token(&hash)).await? else { return Ok(None) };
    let token: ServiceToken = item.parse()?;
    let same: bool = token.hash.as_bytes().ct_eq(hash.as_bytes()).into();
    Ok(same.then_some(token))
}

/// Makes `secret` a root token (idempotent): how dev-server and the functions bootstrap.
pub async fn install_root(store: &dyn ItemStore, secret: &str) -> Result<()> {
    let token = ServiceToken {
        hash: hash_secret(secret),
        accessor: crate::ids::random_token(24),
        policies: vec![ROOT_POLICY.into()],
        display_name: "root".into(),
        creation_time: chrono::Utc::now().timestamp(),
        ttl: 0,
        expire_at: None,
    };
    store.put(token.to_item()?, Condition::Always).await?;
    Ok(())
}

/// Whether a root token was ever generated here (dev-server prints one only once).
pub async fn root_generated(store: &dyn ItemStore) -> Result<bool> {
    Ok(store.get(&keys::broker_root_generated()).await?.is_some())
}

pub async fn mark_root_generated(store: &dyn ItemStore) -> Result<()> {
    store.put(Item::new(keys::broker_root_generated(), Default::default()), Condition::Always).await?;
    Ok(())
}

pub struct NewToken {
    pub policies: Option<Vec<String>>,
    pub ttl: Option<std::time::Duration>,
    pub display_name: Option<String>,
}

/// Creates a child token. A non-root parent can only hand out policies it holds itself.
pub async fn create(store: &dyn ItemStore, parent: &ServiceToken, new: NewToken) -> Result<(String, ServiceToken)> {
    let mut policies = new.policies.unwrap_or_else(|| parent.policies.clone());
    policies.retain(|p| !p.trim().is_empty());
    if !parent.is_root() {
        if let Some(extra) = policies.iter().find(|p| *p != DEFAULT_POLICY && !parent.policies.contains(p)) {
            return Err(BrokerError::invalid(format!("child policies must be subset of parent: `{extra}` is not")));
        }
    }
    if !policies.iter().any(|p| p == ROOT_POLICY) && !policies.iter().any(|p| p == DEFAULT_POLICY) {
        policies.push(DEFAULT_POLICY.into());
    }
    policies.sort();
    policies.dedup();
    let now = chrono::Utc::now().timestamp();
    let ttl = new.ttl.map(|d| d.as_secs()).unwrap_or(if parent.ttl > 0 { parent.ttl } else { 768 * 3600 });
    let display_name = match new.display_name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => format!("token-{name}"),
        None => "token".to_owned(),
    };
    let secret = new_secret();
    let token = ServiceToken {
        hash: hash_secret(&secret),
        accessor: crate::ids::random_token(24),
        policies,
        display_name,
        creation_time: now,
        ttl,
        expire_at: (ttl > 0).then(|| now + ttl as i64),
    };
    store.put(token.to_item()?, Condition::NotExists).await?;
    Ok((secret, token))
}

/// `auth` of a token creation.
pub fn auth(secret: &str, token: &ServiceToken) -> Value {
    json!({
        "client_token": secret,
        "accessor": token.accessor,
        "policies": token.policies,
        "token_policies": token.policies,
        "metadata": null,
        "lease_duration": token.ttl,
        "renewable": token.ttl > 0,
        "entity_id": "",
        "token_type": "service",
        "orphan": false,
    })
}

/// `data` of lookup-self.
pub fn lookup(secret: &str, token: &ServiceToken) -> Value {
    let now = chrono::Utc::now().timestamp();
    let expire_time = token.expire_at.and_then(|at| chrono::DateTime::from_timestamp(at, 0)).map(|at| at.to_rfc3339());
    json!({
        "accessor": token.accessor,
        "creation_time": token.creation_time,
        "creation_ttl": token.ttl,
        "display_name": token.display_name,
        "entity_id": "",
        "expire_time": expire_time,
        "explicit_max_ttl": 0,
        "id": secret,
        "issue_time": chrono::DateTime::from_timestamp(token.creation_time, 0).map(|at| at.to_rfc3339()),
        "meta": null,
        "num_uses": 0,
        "orphan": false,
        "path": if token.is_root() { "auth/token/root" } else { "auth/token/create" },
        "policies": token.policies,
        "renewable": token.ttl > 0,
        "ttl": token.expire_at.map_or(0, |at| (at - now).max(0)),
        "type": "service",
    })
}

pub async fn revoke(store: &dyn ItemStore, token: &ServiceToken) -> Result<()> {
    store.delete(&keys::service_token(&token.hash), Condition::Always).await?;
    Ok(())
}
