//! Vault-style service tokens, in a tree as Vault keeps them: the root token that bootstraps,
//! and tokens created by others, with policies, a TTL and a display name (which feeds the
//! username template). Stored only as SHA-256, expiring through the store's TTL.
//!
//! A token created by another records its parent (by accessor, listed in the parent's children
//! index) and never outlives it: its TTL is capped at the parent's remaining TTL and at
//! [`MAX_TTL`]. Only `create-orphan`, and `no_parent` with `sudo`, make a token without a parent.
//! Revoking a token revokes its descendants and the leases each of them holds (leases never
//! outlive their token either, so expiry needs no cascade beyond the lease sweep). A revocation
//! first marks each token, which makes it unusable and schedules it; the token goes once its
//! children and leases are gone. What a call cannot finish within its bounds, or what fails in
//! IAM, stays marked and scheduled, and the scheduled job finishes it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::error::{BrokerError, Result};
use super::leases::Revoker;
use crate::auth::hash_secret;
use crate::state::AppState;
use crate::store::{keys, schedule, Condition, Index, Item, ItemStore, Write};

pub const ROOT_POLICY: &str = "root";
pub const DEFAULT_POLICY: &str = "default";

/// The longest a created token lives, and its TTL when none (or 0) is asked for: Vault's system
/// max and default TTL for tokens without a role, 768 hours. Only the installed root token never
/// expires; Vault lets root create more of those, the broker does not.
pub const MAX_TTL: u64 = 768 * 3600;

/// Tokens one revocation call marks revoked (store writes only) before it leaves the rest of the
/// tree to the scheduled job.
pub const REVOKE_TOKENS_PER_CALL: usize = 200;
/// Leases one revocation call revokes: each is about eight IAM calls, and the call must answer
/// within API Gateway's 29 seconds. The rest is left to the scheduled job.
pub const REVOKE_LEASES_PER_CALL: usize = 20;
/// What one run of the scheduled job does of the revocations left to it (it has 300 seconds).
const PENDING_PER_RUN: usize = 100;
const PENDING_TOKENS_PER_RUN: usize = 1000;
const PENDING_LEASES_PER_RUN: usize = 200;

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
}

impl ServiceToken {
    pub fn is_root(&self) -> bool {
        self.policies.iter().any(|p| p == ROOT_POLICY)
    }

    pub fn is_orphan(&self) -> bool {
        self.parent.is_none()
    }

    fn key(&self) -> crate::store::Key {
        keys::service_token(&self.hash)
    }

    /// The check, in a transaction, that this token still stands (exists, is not being
    /// revoked): what a child or a lease is written with, so that a revocation that has begun
    /// cannot miss one made meanwhile.
    pub fn standing(&self) -> Write {
        Write::Check { key: self.key(), condition: Condition::Exists.and(Condition::Below("revoked_at".into(), 1)) }
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
    let hash = hash_secret(secret);
    let Some(item) = store.get(&keys::service_token(&hash)).await? else { return Ok(None) };
    let token: ServiceToken = item.parse()?;
    let same: bool = token.hash.as_bytes().ct_eq(hash.as_bytes()).into();
    Ok(same.then_some(token))
}

/// The token a secret names, if it exists, has not expired, is not being revoked, and neither
/// is its parent.
pub async fn resolve(store: &dyn ItemStore, secret: &str) -> Result<Option<ServiceToken>> {
    let Some(token) = find(store, secret).await?.filter(|t| t.revoked_at.is_none()) else { return Ok(None) };
    if let Some(parent) = &token.parent_hash {
        let standing = match store.get(&keys::service_token(parent)).await? {
            Some(item) => item.parse::<ServiceToken>()?.revoked_at.is_none(),
            None => false,
        };
        if !standing {
            return Ok(None);
        }
    }
    Ok(Some(token))
}

/// Makes `secret` a root token (idempotent): how dev-server and the functions bootstrap. An
/// installed root keeps its accessor, which its children's index names.
pub async fn install_root(store: &dyn ItemStore, secret: &str) -> Result<()> {
    let hash = hash_secret(secret);
    if let Some(item) = store.get(&keys::service_token(&hash)).await? {
        let token: ServiceToken = item.parse()?;
        store.put(token.pointer()?, Condition::Always).await?;
        return Ok(());
    }
    let token = ServiceToken {
        hash,
        accessor: crate::ids::random_token(24),
        policies: vec![ROOT_POLICY.into()],
        display_name: "root".into(),
        creation_time: chrono::Utc::now().timestamp(),
        ttl: 0,
        expire_at: None,
        parent: None,
        parent_hash: None,
        path: ROOT_PATH.into(),
        revoked_at: None,
    };
    let writes = vec![
        Write::Put { item: token.to_item()?, condition: Condition::NotExists },
        Write::Put { item: token.pointer()?, condition: Condition::Always },
    ];
    match store.transact(writes).await {
        // Another cold start installed it first.
        Err(e) if e.is_condition_failed() => Ok(()),
        other => Ok(other?),
    }
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
    /// `None` or zero: the default, [`MAX_TTL`].
    pub ttl: Option<Duration>,
    pub display_name: Option<String>,
    /// Whether the token has no parent: the handler has checked that the caller may.
    pub orphan: bool,
}

/// Creates a token, a child of `parent` unless it is an orphan. A non-root parent can only hand
/// out policies it holds itself; a child lives at most as long as its parent.
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
    let mut ttl = new.ttl.map(|d| d.as_secs()).filter(|&secs| secs > 0).unwrap_or(MAX_TTL).min(MAX_TTL);
    if let (false, Some(parent_expiry)) = (new.orphan, parent.expire_at) {
        let left = u64::try_from(parent_expiry - now).unwrap_or(0);
        if left == 0 {
            return Err(BrokerError::PermissionDenied);
        }
        ttl = ttl.min(left);
    }
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
        expire_at: Some(now + ttl as i64),
        parent: (!new.orphan).then(|| parent.accessor.clone()),
        parent_hash: (!new.orphan).then(|| parent.hash.clone()),
        path: if new.orphan { CREATE_ORPHAN_PATH } else { CREATE_PATH }.into(),
        revoked_at: None,
    };
    let mut writes = vec![
        Write::Put { item: token.to_item()?, condition: Condition::NotExists },
        Write::Put { item: token.pointer()?, condition: Condition::NotExists },
    ];
    if !new.orphan {
        writes.push(parent.standing());
    }
    match store.transact(writes).await {
        Err(e) if e.failed_write() == Some(2) => Err(BrokerError::PermissionDenied),
        other => other.map_err(BrokerError::from),
    }?;
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
        "orphan": token.is_orphan(),
    })
}

/// `data` of lookup-self.
pub fn lookup(secret: &str, token: &ServiceToken) -> Value {
    let now = chrono::Utc::now().timestamp();
    let rfc3339 = |at: i64| chrono::DateTime::from_timestamp(at, 0).map(|at| at.to_rfc3339());
    let path = match token.path.as_str() {
        "" if token.is_root() && token.ttl == 0 => ROOT_PATH,
        "" => CREATE_PATH,
        path => path,
    };
    json!({
        "accessor": token.accessor,
        "creation_time": token.creation_time,
        "creation_ttl": token.ttl,
        "display_name": token.display_name,
        "entity_id": "",
        "expire_time": token.expire_at.and_then(rfc3339),
        "explicit_max_ttl": 0,
        "id": secret,
        "issue_time": rfc3339(token.creation_time),
        "meta": null,
        "num_uses": 0,
        "orphan": token.is_orphan(),
        "path": path,
        "policies": token.policies,
        "renewable": token.ttl > 0,
        "ttl": token.expire_at.map_or(0, |at| (at - now).max(0)),
        "type": "service",
    })
}

/// How much of a revocation is left to do in this call or run.
struct Budget {
    tokens: usize,
    leases: usize,
}

/// Revokes `token`, its descendants, and the leases each of them holds (`revoke-self`,
/// `auth/token/revoke`). When it answers, all of that is gone, unless the tree was larger than
/// one call's bounds or IAM failed (the answer is then that failure). What is left is the
/// scheduled job's: the tokens reached are unusable at once, and so is any child of theirs (a
/// token whose parent is being revoked is refused); only tokens deeper than that, under a child
/// the bound left unreached, stay usable until the job reaches them.
pub async fn revoke(state: &AppState, token: &ServiceToken) -> Result<()> {
    let mut budget = Budget { tokens: REVOKE_TOKENS_PER_CALL, leases: REVOKE_LEASES_PER_CALL };
    let mut revoker = Revoker::default();
    let finished = revoke_tree(state, token.clone(), chrono::Utc::now().timestamp(), &mut budget, &mut revoker).await?;
    if !finished {
        state.work.notify_one();
    }
    // The failure as AWS errors are always answered (the tokens are revoked all the same, and
    // the job retries the credentials), as Vault answers a revocation whose leases failed.
    revoker.failure.map_or(Ok(()), Err)
}

/// `auth/token/revoke`: as [`revoke`], for the token a secret names; none is no error (Vault).
pub async fn revoke_secret(state: &AppState, secret: &str) -> Result<()> {
    match find(state.store.as_ref(), secret).await? {
        Some(token) => revoke(state, &token).await,
        None => Ok(()),
    }
}

/// `auth/token/revoke-accessor`: as [`revoke`], for the token an accessor names.
pub async fn revoke_accessor(state: &AppState, accessor: &str) -> Result<()> {
    let store = state.store.as_ref();
    let invalid = || BrokerError::invalid("invalid accessor");
    let pointer: Pointer = store.get(&keys::service_token_accessor(accessor)).await?.ok_or_else(invalid)?.parse()?;
    let item = store.get(&keys::service_token(&pointer.hash)).await?.ok_or_else(invalid)?;
    revoke(state, &item.parse()?).await
}

/// Continues the revocations left to the scheduled job, oldest first, within one run's bounds;
/// returns how many leases it revoked.
pub async fn revoke_pending(state: &AppState, now: i64) -> Result<usize> {
    let due = schedule::due(state.store.as_ref(), keys::TOKEN_REVOCATION_SCHEDULE, now, PENDING_PER_RUN).await?;
    let more_due = due.len() == PENDING_PER_RUN;
    let mut budget = Budget { tokens: PENDING_TOKENS_PER_RUN, leases: PENDING_LEASES_PER_RUN };
    let mut revoker = Revoker::default();
    for found in due {
        if budget.tokens == 0 || budget.leases == 0 {
            break;
        }
        let token: ServiceToken = found.parse()?;
        if let Err(e) = revoke_tree(state, token.clone(), now, &mut budget, &mut revoker).await {
            tracing::warn!(accessor = %token.accessor, error = %e, "token revocation not finished; retried next run");
        }
    }
    if (more_due || budget.tokens == 0 || budget.leases == 0) && revoker.failure.is_none() {
        // More is due than a run does: dev-server's runner goes again at once (in AWS the
        // schedule's next run picks it up); a failure waits for the next run instead.
        state.work.notify_one();
    }
    Ok(revoker.revoked)
}

/// Revokes a token and its descendants within `budget`: first marks the tree breadth first (the
/// tokens are unusable from then on), then, children before parents, revokes each token's
/// leases and deletes the token once it has neither children nor leases left. True when the
/// whole tree is gone; otherwise what is left is marked, so scheduled, or below a marked token.
async fn revoke_tree(
    state: &AppState,
    top: ServiceToken,
    now: i64,
    budget: &mut Budget,
    revoker: &mut Revoker,
) -> Result<bool> {
    const PAGE: usize = 25;
    let store = state.store.as_ref();
    let Some(top) = mark(store, top, now).await? else { return Ok(true) };
    // The tree as far as the budget reaches: each token, its parent's place, how many children
    // were found under it, and whether all were.
    let mut tree = vec![Node { token: top, parent: None, children: 0, complete: false }];
    let mut next = 0;
    while next < tree.len() {
        let mut query = keys::service_token_children(&tree[next].token.accessor).limit(PAGE);
        // Reads follow from the bound on tokens: a page per token reached, one per 25 marked.
        loop {
            let page = store.query(query.clone()).await?;
            let mut cut = false;
            for found in page.items {
                if budget.tokens == 0 {
                    cut = true;
                    break;
                }
                let Some(child) = mark(store, found.parse()?, now).await? else { continue };
                budget.tokens -= 1;
                tree[next].children += 1;
                tree.push(Node { token: child, parent: Some(next), children: 0, complete: false });
            }
            match (cut, page.next) {
                (false, Some(cursor)) => query.cursor = Some(cursor),
                (false, None) => {
                    tree[next].complete = true;
                    break;
                }
                (true, _) => break,
            }
        }
        next += 1;
    }
    let mut finished = true;
    for at in (0..tree.len()).rev() {
        let node = &tree[at];
        let leases_gone = revoker.revoke_held(state, &node.token.accessor, &mut budget.leases).await?;
        if !(leases_gone && node.complete && node.children == 0) {
            finished = false;
            continue;
        }
        let writes = vec![
            Write::Delete { key: node.token.key(), condition: Condition::Always },
            Write::Delete { key: keys::service_token_accessor(&node.token.accessor), condition: Condition::Always },
        ];
        store.transact(writes).await?;
        if let Some(parent) = node.parent {
            tree[parent].children -= 1;
        }
    }
    Ok(finished)
}

struct Node {
    token: ServiceToken,
    parent: Option<usize>,
    /// Children found and not yet deleted.
    children: usize,
    /// Whether every child was found.
    complete: bool,
}

/// Marks a token revoked (unusable, and scheduled for the job); `None` when it is gone.
async fn mark(store: &dyn ItemStore, token: ServiceToken, now: i64) -> Result<Option<ServiceToken>> {
    if token.revoked_at.is_some() {
        return Ok(Some(token));
    }
    let marked = ServiceToken { revoked_at: Some(now), ..token };
    match store.put(marked.to_item()?, Condition::Exists).await {
        Ok(()) => Ok(Some(marked)),
        Err(e) if e.is_condition_failed() => Ok(None),
        Err(e) => Err(e.into()),
    }
}
