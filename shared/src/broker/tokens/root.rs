//! The bootstrap root service token: the value configured last, installed, rotated in place or
//! retired, one record agreeing across concurrent starts.

use serde::{Deserialize, Serialize};

use super::{by_accessor, by_hash, standing, ServiceToken, ROOT_PATH, ROOT_POLICY};
use crate::auth::hash_secret;
use crate::broker::error::{BrokerError, Result};
use crate::store::{keys, Condition, Item, ItemStore, Write};

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
        path: ROOT_PATH.into(),
        ..ServiceToken::new(hash.to_owned(), vec![ROOT_POLICY.into()], "root".into(), now)
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
