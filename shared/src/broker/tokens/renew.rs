//! `auth/token/renew-self`, `renew` and `renew-accessor`: a token's TTL extended as Vault's
//! token store extends it. A periodic token gets its period again; any other gets the
//! increment (else its original TTL), never past its explicit max TTL nor the system's max
//! counted from its creation. A child is never renewed past its parent's expiry.

use std::time::Duration;

use super::{by_accessor, resolve_hash, ServiceToken, MAX_TTL};
use crate::auth::hash_secret;
use crate::broker::error::{BrokerError, Result};
use crate::store::{Condition, ItemStore};

/// Which token a renewal names.
pub enum Renewal<'a> {
    /// The caller's own (`renew-self`), with the secret it presented.
    Own(&'a ServiceToken, &'a str),
    /// The token a secret names (`renew`).
    Secret(&'a str),
    /// The token an accessor names (`renew-accessor`): the answer shows no secret.
    Accessor(&'a str),
}

/// Renews the token `which` names by `increment`; returns the secret to show (empty for an
/// accessor) and the renewed token. The token is written only over what was read, so a use
/// spent meanwhile is kept (the renewal reads it again and retries).
pub async fn renew(
    store: &dyn ItemStore,
    which: Renewal<'_>,
    increment: Option<Duration>,
    now: i64,
) -> Result<(String, ServiceToken)> {
    let by_accessor_name = matches!(which, Renewal::Accessor(_));
    let missing = move || BrokerError::invalid(if by_accessor_name { "invalid accessor" } else { "token not found" });
    let (shown, hash) = match which {
        Renewal::Own(token, secret) => (secret.to_owned(), token.hash.clone()),
        Renewal::Secret(secret) => (secret.to_owned(), hash_secret(secret)),
        Renewal::Accessor(accessor) => (String::new(), by_accessor(store, accessor).await?.ok_or_else(missing)?.hash),
    };
    let renewed = crate::store::retry_on_race(|| async {
        let token = resolve_hash(store, &hash).await?.ok_or_else(missing)?;
        if token.batch {
            return Err(BrokerError::invalid("batch tokens cannot be renewed"));
        }
        if !token.renewable() {
            return Err(BrokerError::invalid("lease is not renewable"));
        }
        let mut expire_at = renewed_expiry(&token, increment, now)?;
        if let Some(parent) = &token.parent {
            if let Some(parent_expiry) = by_accessor(store, parent).await?.and_then(|parent| parent.expire_at) {
                expire_at = expire_at.min(parent_expiry);
            }
        }
        let renewed = ServiceToken { expire_at: Some(expire_at), last_renewal: Some(now), ..token.clone() };
        match store.put(renewed.to_item()?, token.unchanged()).await {
            Ok(()) => Ok(Some(renewed)),
            Err(e) if e.is_condition_failed() => Ok(None),
            Err(e) => Err(BrokerError::from(e)),
        }
    })
    .await?
    .ok_or_else(|| BrokerError::Conflict("the token kept changing while it was renewed; try again".into()))?;
    // The accessor's pointer lives as long as the token.
    store.put(renewed.pointer()?, Condition::Always).await?;
    Ok((shown, renewed))
}

/// When a renewal at `now` makes the token expire, as Vault's `CalculateTTL` decides it.
fn renewed_expiry(token: &ServiceToken, increment: Option<Duration>, now: i64) -> Result<i64> {
    let seconds = |secs: u64| i64::try_from(secs).unwrap_or(i64::MAX);
    let most = if token.explicit_max_ttl > 0 { token.explicit_max_ttl.min(MAX_TTL) } else { MAX_TTL };
    let explicit_end =
        (token.explicit_max_ttl > 0).then(|| token.creation_time.saturating_add(seconds(token.explicit_max_ttl)));
    if token.period > 0 {
        let end = now.saturating_add(seconds(token.period.min(most)));
        return Ok(explicit_end.map_or(end, |cap| end.min(cap)));
    }
    let cap = token.creation_time.saturating_add(seconds(most));
    if cap <= now {
        return Err(BrokerError::Failed("past the max TTL, cannot renew".into()));
    }
    let ttl = increment.map(|d| d.as_secs()).filter(|&secs| secs > 0).unwrap_or(token.ttl);
    Ok(now.saturating_add(seconds(ttl)).min(cap))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(ttl: u64, explicit_max_ttl: u64, period: u64) -> ServiceToken {
        ServiceToken {
            ttl,
            explicit_max_ttl,
            period,
            expire_at: Some(1000 + ttl as i64),
            ..ServiceToken::new("h".into(), vec![], "token".into(), 1000)
        }
    }

    #[test]
    fn a_periodic_token_gets_its_period_again_within_its_explicit_max() {
        assert_eq!(renewed_expiry(&token(60, 0, 60), None, 5000).unwrap(), 5060);
        assert_eq!(renewed_expiry(&token(60, 100, 60), None, 1050).unwrap(), 1100);
    }

    #[test]
    fn any_other_gets_the_increment_else_its_ttl_within_its_max_from_creation() {
        assert_eq!(renewed_expiry(&token(600, 0, 0), None, 1100).unwrap(), 1700);
        assert_eq!(renewed_expiry(&token(600, 0, 0), Some(Duration::from_secs(60)), 1100).unwrap(), 1160);
        assert_eq!(renewed_expiry(&token(600, 900, 0), None, 1500).unwrap(), 1900);
        assert!(renewed_expiry(&token(600, 900, 0), None, 1900).is_err(), "past the max TTL");
    }
}

/// A renewal racing a request of the same token: the use the request spends between the
/// renewal's read and its write stays spent.
#[cfg(all(test, feature = "sqlite"))]
mod racing {
    use std::sync::atomic::{AtomicBool, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::store::{Item, Key, Page, Query, SqliteStore, StoreError, UpdateOp, Write};

    /// The store, but a request of `secret` spends a use right before the first write.
    struct Interleaved {
        inner: SqliteStore,
        secret: String,
        spent: AtomicBool,
    }

    #[async_trait]
    impl ItemStore for Interleaved {
        async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
            self.inner.get(key).await
        }
        async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
            self.inner.get_many(keys).await
        }
        async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
            if !self.spent.swap(true, Ordering::SeqCst) {
                let used = super::super::authenticate(&self.inner, &self.secret, 1000).await;
                assert_eq!(used.expect("a use").expect("the token").num_uses, 4);
            }
            self.inner.put(item, condition).await
        }
        async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError> {
            self.inner.update(key, ops, condition).await
        }
        async fn delete(&self, key: &Key, condition: Condition) -> Result<Option<Item>, StoreError> {
            self.inner.delete(key, condition).await
        }
        async fn query(&self, query: Query) -> Result<Page, StoreError> {
            self.inner.query(query).await
        }
        async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
            self.inner.transact(writes).await
        }
    }

    #[tokio::test]
    async fn a_use_spent_while_a_renewal_runs_stays_spent() {
        let dir = tempfile::tempdir().expect("a directory");
        let inner = SqliteStore::open(dir.path().join("db")).expect("a store");
        let secret = "hvs.racing";
        let now = chrono::Utc::now().timestamp();
        let token = ServiceToken {
            num_uses: 5,
            ttl: 3600,
            expire_at: Some(now + 3600),
            ..ServiceToken::new(hash_secret(secret), vec!["default".into()], "token".into(), now)
        };
        inner.put(token.to_item().expect("an item"), Condition::NotExists).await.expect("stored");
        inner.put(token.pointer().expect("a pointer"), Condition::NotExists).await.expect("stored");
        let store = Interleaved { inner, secret: secret.into(), spent: AtomicBool::new(false) };

        let (_, renewed) = renew(&store, Renewal::Secret(secret), None, now).await.expect("renewed");
        assert_eq!(renewed.num_uses, 4, "the renewal read the token again after losing the race");
        let stored = super::super::resolve(&store.inner, secret).await.expect("a read").expect("the token");
        assert_eq!(stored.num_uses, 4);
    }
}
