//! Vault-style tokens, in a tree as Vault keeps them: the root token that bootstraps, and
//! tokens created by others (`create.rs`), with policies, a TTL, a display name (which feeds the
//! username template) and Vault's other parameters: use counts, an explicit max TTL, a period,
//! renewability, metadata, a type and a token role (`roles.rs`). Stored only as SHA-256, expiring
//! through the store's TTL.
//!
//! A token created by another records its parent (by accessor, listed in the parent's children
//! index) and never outlives it: its TTL, and every renewal (`renew.rs`), is capped at the
//! parent's expiry, and all but a periodic token's at [`MAX_TTL`] from its creation. Only `create-orphan`, `no_parent` with `sudo`, and an
//! orphan role make a token without a parent. Revoking a token (`revoke.rs`) revokes its
//! descendants and the leases each of them holds; a limited-use token's last use begins its
//! revocation ([`authenticate`]).

mod create;
mod login;
mod renew;
mod revoke;
pub mod roles;
mod root;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::error::{BrokerError, Result};
use crate::auth::hash_secret;
use crate::store::{keys, schedule, Condition, Index, Item, ItemStore, Write};

pub use create::create;
pub use login::{login, LoginToken};
pub use renew::{renew, Renewal};
pub use revoke::{
    revoke, revoke_accessor, revoke_pending, revoke_secret, REVOKE_LEASES_PER_CALL, REVOKE_TOKENS_PER_CALL,
};
pub use root::{install_root, root_configured, RootInstall};

pub const ROOT_POLICY: &str = "root";
pub const DEFAULT_POLICY: &str = "default";

/// The longest a created token lives, and its TTL when none (or 0) is asked for: Vault's system
/// max and default TTL for tokens without a role, 768 hours. Only the installed root token never
/// expires; Vault lets root create more of those, the broker does not.
pub const MAX_TTL: u64 = 768 * 3600;

/// The creation paths a token shows in lookup.
const ROOT_PATH: &str = "auth/token/root";
pub const CREATE_PATH: &str = "auth/token/create";
pub const CREATE_ORPHAN_PATH: &str = "auth/token/create-orphan";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServiceToken {
    pub hash: String,
    pub accessor: String,
    pub policies: Vec<String>,
    pub display_name: String,
    pub creation_time: i64,
    /// Seconds; 0 never expires (the installed root token only).
    pub ttl: u64,
    pub expire_at: Option<i64>,
    /// The accessor of the token that created this one; `None` for an orphan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The parent's stored hash: a token is refused once its parent is gone or being revoked,
    /// even before the revocation reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_hash: Option<String>,
    /// The path that created it (`auth/token/create`, `create-orphan`, `root`).
    #[serde(default)]
    pub path: String,
    /// When its revocation began: the token is unusable, and stays (scheduled) until its
    /// children and leases are gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    revoked_at: Option<i64>,
    /// Uses left: 0 is unlimited; -1 once the last was used (its revocation has begun).
    #[serde(default)]
    pub num_uses: i64,
    /// Seconds after creation past which no renewal reaches; 0 for none.
    #[serde(default)]
    pub explicit_max_ttl: u64,
    /// A periodic token's period in seconds (each renewal sets its TTL to it); 0 for none.
    #[serde(default)]
    pub period: u64,
    /// Whether it may be renewed (a token that never expires is not, whatever this says).
    #[serde(default = "renewable_by_default")]
    renewable: bool,
    /// The token role it was created against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Its metadata (`meta`), as Vault keeps it: strings by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
    /// A batch token: never renewed or revoked on its own, and it creates no tokens.
    #[serde(default)]
    pub batch: bool,
    /// When it was last renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_renewal: Option<i64>,
    /// The uuid of the auth method whose login issued it: it stands only while that does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_method: Option<String>,
}

fn renewable_by_default() -> bool {
    true
}

impl ServiceToken {
    /// A token of `policies` made `now` that never expires, with a fresh accessor and Vault's
    /// defaults for everything else (no parent, unlimited uses, renewable, service).
    fn new(hash: String, policies: Vec<String>, display_name: String, now: i64) -> Self {
        ServiceToken {
            hash,
            accessor: crate::ids::random_token(24),
            policies,
            display_name,
            creation_time: now,
            ttl: 0,
            expire_at: None,
            parent: None,
            parent_hash: None,
            path: String::new(),
            revoked_at: None,
            num_uses: 0,
            explicit_max_ttl: 0,
            period: 0,
            renewable: true,
            role: None,
            meta: BTreeMap::new(),
            batch: false,
            last_renewal: None,
            auth_method: None,
        }
    }

    /// The condition that the token stands and neither its uses nor its expiry changed since it
    /// was read: what a write of the whole record after spending a use or renewing it is
    /// conditioned on, so neither undoes the other.
    fn unchanged(&self) -> Condition {
        standing()
            .and(Condition::equals("num_uses", self.num_uses))
            .and(Condition::equals("expire_at", serde_json::json!(self.expire_at)))
    }

    /// Whether its revocation has begun (its last use was spent, or it was revoked).
    pub fn is_being_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }

    pub fn is_root(&self) -> bool {
        self.policies.iter().any(|p| p == ROOT_POLICY)
    }

    pub fn is_orphan(&self) -> bool {
        self.parent.is_none()
    }

    /// Whether renewing it can extend it: a renewable service token that expires.
    pub fn renewable(&self) -> bool {
        self.renewable && !self.batch && self.expire_at.is_some()
    }

    /// Whether it has a bounded number of uses.
    pub fn is_limited_use(&self) -> bool {
        self.num_uses != 0
    }

    fn type_name(&self) -> &'static str {
        if self.batch {
            "batch"
        } else {
            "service"
        }
    }

    fn key(&self) -> crate::store::Key {
        keys::service_token(&self.hash)
    }

    /// The check, in a transaction, that this token still stands (exists, is not being
    /// revoked): what a child or a lease is written with, so that a revocation that has begun
    /// cannot miss one made meanwhile.
    pub fn standing(&self) -> Write {
        Write::Check { key: self.key(), condition: standing() }
    }

    fn to_item(&self) -> Result<Item> {
        let mut item = Item::from_value(self.key(), self)?;
        if let Some(parent) = &self.parent {
            let (index, pk, sk) = keys::service_token_child(parent, &self.accessor);
            item = item.with_index(index, pk, sk);
        }
        if let Some(at) = self.revoked_at {
            let sort = schedule::sort_key(at, &self.accessor);
            item = item.with_index(Index::Gsi1, keys::TOKEN_REVOCATION_SCHEDULE, sort);
        }
        Ok(match self.expire_at {
            Some(at) => item.with_ttl(at),
            None => item,
        })
    }

    /// The accessor's pointer to the token, living as long as it.
    fn pointer(&self) -> Result<Item> {
        let item =
            Item::from_value(keys::service_token_accessor(&self.accessor), &Pointer { hash: self.hash.clone() })?;
        Ok(match self.expire_at {
            Some(at) => item.with_ttl(at),
            None => item,
        })
    }
}

/// The condition that a token exists and is not being revoked.
fn standing() -> Condition {
    Condition::Exists.and(Condition::Below("revoked_at".into(), 1))
}

#[derive(Serialize, Deserialize)]
struct Pointer {
    hash: String,
}

/// A new service-token secret in Vault's form (`hvs.` and 24 characters).
fn new_secret() -> String {
    format!("hvs.{}", crate::ids::random_token(24))
}

/// The stored token a secret names, revoked or not, if it has not expired.
async fn find(store: &dyn ItemStore, secret: &str) -> Result<Option<ServiceToken>> {
    find_hash(store, &hash_secret(secret)).await
}

/// The stored token whose secret hashes to `hash`, revoked or not, if it has not expired.
async fn find_hash(store: &dyn ItemStore, hash: &str) -> Result<Option<ServiceToken>> {
    let Some(item) = store.get(&keys::service_token(hash)).await? else { return Ok(None) };
    let token: ServiceToken = item.parse()?;
    let same: bool = token.hash.as_bytes().ct_eq(hash.as_bytes()).into();
    Ok(same.then_some(token))
}

/// The token a secret names, if it exists, has not expired, is not being revoked, and neither
/// is its parent. Uses nothing: what authenticates a request is [`authenticate`].
pub async fn resolve(store: &dyn ItemStore, secret: &str) -> Result<Option<ServiceToken>> {
    resolve_hash(store, &hash_secret(secret)).await
}

/// The token a request presents, with one of its uses spent when it has a limited number, as
/// Vault spends one on every request the token makes (denied ones too). The last use marks it
/// revoked, so the scheduled job revokes it and what it holds; the request itself still runs
/// with it (a lease it would take is refused, as its token no longer stands). `None` for a
/// secret that resolves to nothing usable, or whose uses ran out meanwhile.
pub async fn authenticate(store: &dyn ItemStore, secret: &str, now: i64) -> Result<Option<ServiceToken>> {
    let hash = hash_secret(secret);
    let spent = crate::store::retry_on_race(|| async {
        let Some(token) = resolve_hash(store, &hash).await? else { return Ok(Some(None)) };
        if !token.is_limited_use() {
            return Ok(Some(Some(token)));
        }
        let last = token.num_uses == 1;
        let used = ServiceToken {
            num_uses: if last { -1 } else { token.num_uses - 1 },
            revoked_at: if last { Some(now) } else { None },
            ..token.clone()
        };
        let unchanged = token.unchanged();
        match store.put(used.to_item()?, unchanged).await {
            Ok(()) => Ok(Some(Some(used))),
            Err(e) if e.is_condition_failed() => Ok(None),
            Err(e) => Err(BrokerError::from(e)),
        }
    })
    .await?;
    spent
        .ok_or_else(|| BrokerError::Conflict("the token was used by other requests at the same time; try again".into()))
}

/// [`resolve`] by the hash of the secret: what a web console session keeps, so a token revoked
/// or expired since ends the session at its next request.
pub async fn resolve_hash(store: &dyn ItemStore, hash: &str) -> Result<Option<ServiceToken>> {
    let usable = |t: &ServiceToken| t.revoked_at.is_none() && t.num_uses >= 0;
    let Some(token) = find_hash(store, hash).await?.filter(usable) else { return Ok(None) };
    if let (Some(parent), Some(parent_hash)) = (&token.parent, &token.parent_hash) {
        if !parent_stands(store, parent, parent_hash).await? {
            return Ok(None);
        }
    }
    if let Some(method) = &token.auth_method {
        if !auth_method_stands(store, &token.path, method).await? {
            return Ok(None);
        }
    }
    Ok(Some(token))
}

/// Whether a token's parent exists and is not being revoked: one read by the hash the parent had
/// when the child was made; when that no longer names it (the bootstrap root token was given a
/// new secret since, or its old secret now names another token), by its accessor.
async fn parent_stands(store: &dyn ItemStore, accessor: &str, hash: &str) -> Result<bool> {
    let parent = match by_hash(store, hash).await?.filter(|p| p.accessor == accessor) {
        Some(parent) => Some(parent),
        None => by_accessor(store, accessor).await?,
    };
    Ok(parent.is_some_and(|p| p.revoked_at.is_none()))
}

/// Whether the auth method that issued a token (`auth/<path>/login`) is still enabled: the
/// same one, not another enabled at its path since.
async fn auth_method_stands(store: &dyn ItemStore, login_path: &str, uuid: &str) -> Result<bool> {
    let path = login_path.strip_prefix("auth/").and_then(|p| p.strip_suffix("/login")).unwrap_or_default();
    Ok(crate::broker::auth_mounts::find(store, path).await?.is_some_and(|mount| mount.uuid == uuid))
}

/// The stored token whose secret has this hash, revoked or not.
async fn by_hash(store: &dyn ItemStore, hash: &str) -> Result<Option<ServiceToken>> {
    store.get(&keys::service_token(hash)).await?.map(|item| item.parse()).transpose().map_err(BrokerError::from)
}

/// The stored token with this accessor, revoked or not.
async fn by_accessor(store: &dyn ItemStore, accessor: &str) -> Result<Option<ServiceToken>> {
    let Some(pointer) = store.get(&keys::service_token_accessor(accessor)).await? else { return Ok(None) };
    let pointer: Pointer = pointer.parse()?;
    Ok(by_hash(store, &pointer.hash).await?.filter(|token| token.accessor == accessor))
}

/// `auth` of a token's creation or renewal; `secret` is empty where Vault shows none
/// (`renew-accessor`).
pub fn auth_block(secret: &str, token: &ServiceToken, now: i64) -> Value {
    json!({
        "client_token": secret,
        "accessor": token.accessor,
        "policies": token.policies,
        "token_policies": token.policies,
        "metadata": metadata(token),
        "lease_duration": remaining(token, now),
        "renewable": token.renewable(),
        "entity_id": "",
        "token_type": token.type_name(),
        "orphan": token.is_orphan(),
        "mfa_requirement": null,
        "num_uses": token.num_uses.max(0),
    })
}

fn metadata(token: &ServiceToken) -> Value {
    if token.meta.is_empty() {
        Value::Null
    } else {
        json!(token.meta)
    }
}

/// Seconds the token has left at `now`; 0 for one that never expires.
fn remaining(token: &ServiceToken, now: i64) -> u64 {
    token.expire_at.map_or(0, |at| u64::try_from(at - now).unwrap_or(0))
}

/// `data` of a lookup (`lookup-self`, `lookup`: `id` is the secret; `lookup-accessor`: empty).
pub fn lookup_data(secret: &str, token: &ServiceToken) -> Value {
    let now = chrono::Utc::now().timestamp();
    let rfc3339 = |at: i64| chrono::DateTime::from_timestamp(at, 0).map(|at| at.to_rfc3339());
    let path = match token.path.as_str() {
        "" if token.is_root() && token.ttl == 0 => ROOT_PATH,
        "" => CREATE_PATH,
        path => path,
    };
    let mut data = json!({
        "accessor": token.accessor,
        "creation_time": token.creation_time,
        "creation_ttl": token.ttl,
        "display_name": token.display_name,
        "entity_id": "",
        "expire_time": token.expire_at.and_then(rfc3339),
        "explicit_max_ttl": token.explicit_max_ttl,
        "id": secret,
        "issue_time": rfc3339(token.creation_time),
        "meta": metadata(token),
        "num_uses": token.num_uses,
        "orphan": token.is_orphan(),
        "path": path,
        "policies": token.policies,
        "renewable": token.renewable(),
        "ttl": remaining(token, now),
        "type": token.type_name(),
    });
    if token.period > 0 {
        data["period"] = json!(token.period);
    }
    if let Some(role) = &token.role {
        data["role"] = json!(role);
    }
    if let Some(at) = token.last_renewal {
        data["last_renewal_time"] = json!(at);
        data["last_renewal"] = json!(rfc3339(at));
    }
    data
}

/// `auth/token/lookup` and `lookup-accessor`: the token a secret or an accessor names, which
/// Vault answers with 403 `bad token` (an accessor: 400 `invalid accessor`) when it is not
/// usable. Neither spends one of its uses.
pub async fn lookup_named(store: &dyn ItemStore, secret: Option<&str>, accessor: Option<&str>) -> Result<Value> {
    match (secret, accessor) {
        (Some(secret), _) => {
            let token = resolve(store, secret).await?.ok_or_else(|| BrokerError::Forbidden("bad token".into()))?;
            Ok(lookup_data(secret, &token))
        }
        (None, Some(accessor)) => {
            let invalid = || BrokerError::invalid("invalid accessor");
            let token = by_accessor(store, accessor).await?.ok_or_else(invalid)?;
            let token = resolve_hash(store, &token.hash).await?.ok_or_else(invalid)?;
            Ok(lookup_data("", &token))
        }
        (None, None) => Err(BrokerError::invalid("missing token ID")),
    }
}
