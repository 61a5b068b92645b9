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
/// is its parent.
pub async fn resolve(store: &dyn ItemStore, secret: &str) -> Result<Option<ServiceToken>> {
    resolve_hash(store, &hash_secret(secret)).await
}

/// [`resolve`] by the hash of the secret: what a web console session keeps, so a token revoked
/// or expired since ends the session at its next request.
pub async fn resolve_hash(store: &dyn ItemStore, hash: &str) -> Result<Option<ServiceToken>> {
    let Some(token) = find_hash(store, hash).await?.filter(|t| t.revoked_at.is_none()) else { return Ok(None) };
    if let (Some(parent), Some(parent_hash)) = (&token.parent, &token.parent_hash) {
        if !parent_stands(store, parent, parent_hash).await? {
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

/// The bootstrap record of the root service token: the value configured last (its hash; `None`
/// when configured as none) and the accessor of the root token installed for it.
#[derive(Debug, Serialize, Deserialize)]
struct RootRecord {
    hash: Option<String>,
    accessor: Option<String>,
    /// Bumped by every change: what a change is conditioned on, so concurrent starts agree.
    revision: u64,
}

/// What [`install_root`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootInstall {
    /// The configured value was already the one recorded (a root revoked since stays revoked).
    Unchanged,
    /// The configured value is the root token now (a new one, or one installed before this
    /// record existed); the root recorded before it, if it still stood, is revoked.
    Installed,
    /// The recorded root token has the configured secret now, in place: same accessor, so the
    /// tokens it made stay its children; the old secret stops working at once.
    Rotated,
    /// There is no root token now; the recorded one's revocation has begun (the scheduled job
    /// finishes it, with its children's).
    Removed,
    /// The configured value is the secret of a token still being revoked (installed at a start
    /// after the scheduled job has finished that revocation), or of a token the broker issued
    /// (never installed as root): nothing changed, and the log says so.
    Deferred,
}

impl RootInstall {
    /// Whether the scheduled job may have a revocation to finish.
    pub fn leaves_work(self) -> bool {
        matches!(self, RootInstall::Installed | RootInstall::Removed | RootInstall::Deferred)
    }
}

/// Makes `secret` the root token, or with `None` leaves the broker without one: how dev-server
/// and the broker's function bootstrap. The record keeps one bootstrap root token:
///
/// - the same value as recorded changes nothing, so a root revoked through `revoke-self` stays
///   revoked until another value is configured;
/// - another value is given to the recorded root token if it still stands (a rotation: the old
///   secret stops working, the tokens it made keep their parent), else installed as a new root;
/// - `None` revokes the recorded root, as `revoke-self` would (its children with it).
///
/// Starts racing with each other agree (the record is written on the condition that it is
/// unchanged).
pub async fn install_root(store: &dyn ItemStore, secret: Option<&str>, now: i64) -> Result<RootInstall> {
    let hash = secret.map(hash_secret);
    let outcome = crate::store::retry_on_race(|| install_root_once(store, hash.as_deref(), now)).await?;
    outcome.ok_or_else(|| BrokerError::Internal("the root token's bootstrap record kept changing".into()))
}

/// One attempt of [`install_root`]; `None` when another start changed the record meanwhile.
async fn install_root_once(store: &dyn ItemStore, hash: Option<&str>, now: i64) -> Result<Option<RootInstall>> {
    let record: Option<RootRecord> = store.get(&keys::broker_root_bootstrap()).await?.map(|i| i.parse()).transpose()?;
    if record.as_ref().is_some_and(|r| r.hash.as_deref() == hash) {
        return Ok(Some(RootInstall::Unchanged));
    }
    let (condition, revision) = match &record {
        Some(r) => (Condition::equals("revision", r.revision), r.revision + 1),
        None => (Condition::NotExists, 1),
    };
    // The recorded root, if it still stands.
    let recorded = match record.as_ref().and_then(|r| r.accessor.as_deref()) {
        Some(accessor) => by_accessor(store, accessor).await?.filter(|t| t.revoked_at.is_none()),
        None => None,
    };
    let record_write = |hash: Option<&str>, accessor: Option<&str>| -> Result<Write> {
        let record = RootRecord { hash: hash.map(str::to_owned), accessor: accessor.map(str::to_owned), revision };
        Ok(Write::Put { item: Item::from_value(keys::broker_root_bootstrap(), &record)?, condition: condition.clone() })
    };
    let Some(hash) = hash else {
        let mut writes = vec![record_write(None, None)?];
        retire(&mut writes, recorded.as_ref(), now)?;
        return commit(store, writes, RootInstall::Removed).await;
    };
    if let Some(existing) = by_hash(store, hash).await? {
        // A token has this secret already: a root installed before the record existed, or one
        // still being revoked (its key is taken until the job has removed it).
        if existing.revoked_at.is_some() || !existing.is_root() || existing.expire_at.is_some() {
            tracing::warn!(
                accessor = %existing.accessor,
                "the configured root service token is the secret of a token being revoked or of an issued token; \
                 not installed (configure another value, or restart once the revocation has finished)"
            );
            return Ok(Some(RootInstall::Deferred));
        }
        let mut writes = vec![record_write(Some(hash), Some(&existing.accessor))?];
        writes.push(Write::Put { item: existing.pointer()?, condition: Condition::Always });
        retire(&mut writes, recorded.as_ref().filter(|r| r.accessor != existing.accessor), now)?;
        return commit(store, writes, RootInstall::Installed).await;
    }
    if let Some(root) = recorded {
        let rotated = ServiceToken { hash: hash.to_owned(), ..root.clone() };
        let writes = vec![
            record_write(Some(hash), Some(&root.accessor))?,
            Write::Delete { key: root.key(), condition: standing() },
            Write::Put { item: rotated.to_item()?, condition: Condition::NotExists },
            Write::Put { item: rotated.pointer()?, condition: Condition::Always },
        ];
        return commit(store, writes, RootInstall::Rotated).await;
    }
    let token = ServiceToken {
        hash: hash.to_owned(),
        accessor: crate::ids::random_token(24),
        policies: vec![ROOT_POLICY.into()],
        display_name: "root".into(),
        creation_time: now,
        ttl: 0,
        expire_at: None,
        parent: None,
        parent_hash: None,
        path: ROOT_PATH.into(),
        revoked_at: None,
    };
    let writes = vec![
        record_write(Some(hash), Some(&token.accessor))?,
        Write::Put { item: token.to_item()?, condition: Condition::NotExists },
        Write::Put { item: token.pointer()?, condition: Condition::NotExists },
    ];
    commit(store, writes, RootInstall::Installed).await
}

/// Adds the revocation of the root recorded before (if it still stands) to `writes`.
fn retire(writes: &mut Vec<Write>, recorded: Option<&ServiceToken>, now: i64) -> Result<()> {
    if let Some(root) = recorded {
        let marked = ServiceToken { revoked_at: Some(now), ..root.clone() };
        writes.push(Write::Put { item: marked.to_item()?, condition: standing() });
    }
    Ok(())
}

/// Commits a change of the bootstrap record (the first write): `None` when a write's condition
/// failed, as another start changed the record or the token meanwhile.
async fn commit(store: &dyn ItemStore, writes: Vec<Write>, done: RootInstall) -> Result<Option<RootInstall>> {
    match store.transact(writes).await {
        Err(e) if e.is_condition_failed() => Ok(None),
        other => other.map(|()| Some(done)).map_err(BrokerError::from),
    }
}

/// Whether a root service token was ever configured, generated or removed here (dev-server
/// generates one at first start otherwise).
pub async fn root_configured(store: &dyn ItemStore) -> Result<bool> {
    let found = store.get_many(&[keys::broker_root_bootstrap(), keys::broker_root_generated()]).await?;
    Ok(found.iter().any(Option::is_some))
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
