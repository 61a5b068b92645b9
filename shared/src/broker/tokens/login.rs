//! The token a login through an auth method issues (`auth/<path>/login`): an orphan, as Vault's
//! login tokens are, with its role's policies and `token_*` limits, and bound to the auth
//! method that issued it, so that disabling the method ends it at once.

use std::collections::BTreeMap;

use super::{new_secret, ServiceToken, DEFAULT_POLICY, MAX_TTL};
use crate::auth::hash_secret;
use crate::broker::error::{BrokerError, Result};
use crate::store::{Condition, ItemStore, Transaction, Write};

/// The role's token settings, as Vault's `tokenutil` reads them (0: unset).
#[derive(Debug, Clone, Default)]
pub struct LoginToken {
    /// `auth/<path>/login`.
    pub path: String,
    /// The auth method's uuid: the token stands only while the method does.
    pub auth_method: String,
    pub policies: Vec<String>,
    pub no_default_policy: bool,
    pub display_name: String,
    pub meta: BTreeMap<String, String>,
    pub ttl: u64,
    pub max_ttl: u64,
    pub explicit_max_ttl: u64,
    pub num_uses: i64,
    pub period: u64,
}

/// Stores the token a login earned: its secret, and the token.
pub async fn login(store: &dyn ItemStore, grant: LoginToken) -> Result<(String, ServiceToken)> {
    let now = chrono::Utc::now().timestamp();
    let mut policies = super::roles::sanitized(grant.policies, !grant.no_default_policy);
    if grant.no_default_policy {
        policies.retain(|p| p != DEFAULT_POLICY);
    }
    if policies.iter().any(|p| p == super::ROOT_POLICY) {
        return Err(BrokerError::invalid("a login may not issue a root token"));
    }
    // The hard cap: the explicit max, else the role's max TTL (kept as the token's own cap, so
    // renewals stop there), never the system's past; none set shows none, as in Vault.
    let set_cap = [grant.explicit_max_ttl, grant.max_ttl].into_iter().filter(|t| *t > 0).min();
    let cap = set_cap.unwrap_or(MAX_TTL).min(MAX_TTL);
    let asked = if grant.period > 0 {
        grant.period
    } else if grant.ttl > 0 {
        grant.ttl
    } else {
        cap
    };
    let ttl = asked.min(cap);
    let secret = new_secret();
    let token = ServiceToken {
        ttl,
        expire_at: Some(now + ttl as i64),
        path: grant.path,
        num_uses: grant.num_uses,
        explicit_max_ttl: set_cap.map_or(0, |_| cap),
        period: grant.period,
        meta: grant.meta,
        auth_method: Some(grant.auth_method),
        ..ServiceToken::new(hash_secret(&secret), policies, grant.display_name, now)
    };
    let mut transaction = Transaction::new();
    transaction.add(Write::Put { item: token.to_item()?, condition: Condition::NotExists });
    transaction.add(Write::Put { item: token.pointer()?, condition: Condition::NotExists });
    transaction.commit(store).await?;
    Ok((secret, token))
}
