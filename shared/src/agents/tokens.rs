//! Agent tokens: what a pool's agents authenticate with at the gateway. The secret is shown
//! once; the store keeps its hash, as for every token.

use serde::{Deserialize, Serialize};

use super::error::{AgentsError, Result};
use super::pools::{self, AgentPool};
use crate::accounts::access;
use crate::api::{timestamp, Field};
use crate::auth::{hash_secret, new_secret, AgentGrant, Permission, Principal, TokenRecord};
use crate::ids::{new_id, Kind};
use crate::store::{keys, pointer, query_all_as, Condition, Item, ItemStore, Key, UpdateOp, Write};

/// The longest token description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 255;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentToken {
    pub id: String,
    pub org_id: String,
    pub pool_id: String,
    pub hash: String,
    pub description: Option<String>,
    pub created_at: String,
    pub last_used_at: Option<String>,
    /// The user who created it, as `created-by` names it.
    #[serde(default)]
    pub created_by: Option<String>,
}

impl pointer::Addressed for AgentToken {
    const KIND: Kind = Kind::AgentToken;
}

impl AgentToken {
    pub fn key(&self) -> Key {
        keys::agent_token(&self.org_id, &self.pool_id, &self.id)
    }

    /// The writes that remove the token, its secret's record and its id pointer.
    pub(super) fn removal(&self) -> Vec<Write> {
        [self.key(), keys::token(&self.hash), keys::id_pointer(&self.id)]
            .into_iter()
            .map(|key| Write::Delete { key, condition: Condition::Always })
            .collect()
    }
}

/// Creates a token for the pool; the secret exists only in the result.
pub async fn create(
    store: &dyn ItemStore,
    principal: &Principal,
    pool_id: &str,
    description: Option<String>,
) -> Result<(AgentToken, String)> {
    let (pool, _) = pools::get(store, principal, pool_id, Permission::ManageAgentPools).await?;
    // HCP Terraform requires a description (go-tfe refuses to send a token request without one).
    if description.as_deref().is_none_or(|text| text.trim().is_empty()) {
        return Err(AgentsError::invalid(Field::Attribute("description"), "`description` is required."));
    }
    if description.as_ref().is_some_and(|text| text.chars().count() > MAX_DESCRIPTION_CHARS) {
        return Err(AgentsError::invalid(
            Field::Attribute("description"),
            format!("description is longer than {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    let secret = new_secret();
    let token = AgentToken {
        id: new_id("at"),
        org_id: pool.org_id.clone(),
        pool_id: pool.id.clone(),
        hash: hash_secret(&secret),
        description,
        created_at: timestamp(chrono::Utc::now()),
        last_used_at: None,
        created_by: Some(principal.user_id()),
    };
    let grant = AgentGrant { org_id: pool.org_id.clone(), pool_id: pool.id.clone(), token_id: token.id.clone() };
    let record = TokenRecord {
        hash: token.hash.clone(),
        token_id: token.id.clone(),
        principal: Principal::Agent(grant),
        created_at: token.created_at.clone(),
    };
    let item = Item::from_value(token.key(), &token)?
        .with_satellites(&[keys::token(&token.hash), keys::id_pointer(&token.id)]);
    store_writes(
        store,
        &pool,
        vec![
            Write::Put { item, condition: Condition::NotExists },
            Write::Put { item: record.to_item()?, condition: Condition::NotExists },
            pointer::create(&token.id, &token.key())?,
        ],
    )
    .await?;
    Ok((token, secret))
}

/// Commits writes that add to a pool, only while the pool exists.
async fn store_writes(store: &dyn ItemStore, pool: &AgentPool, mut writes: Vec<Write>) -> Result<()> {
    writes.push(Write::Check { key: pool.key(), condition: Condition::Exists });
    match store.transact(writes).await {
        Err(e) if e.is_condition_failed() => Err(AgentsError::NotFound),
        other => Ok(other?),
    }
}

pub async fn list(store: &dyn ItemStore, principal: &Principal, pool_id: &str) -> Result<Vec<AgentToken>> {
    let (pool, _) = pools::get(store, principal, pool_id, Permission::Read).await?;
    let mut tokens: Vec<AgentToken> = query_all_as(store, keys::agent_tokens(&pool.org_id, &pool.id)).await?;
    tokens.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    Ok(tokens)
}

/// A token by id, if the principal holds `permission` in its organization.
pub async fn get(store: &dyn ItemStore, principal: &Principal, id: &str, permission: Permission) -> Result<AgentToken> {
    let token: AgentToken = pointer::resolve(store, id).await?.ok_or(AgentsError::NotFound)?;
    access::require(principal, &token.org_id, permission)?;
    Ok(token)
}

pub async fn delete(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<()> {
    let token = get(store, principal, id, Permission::ManageAgentPools).await?;
    Ok(store.transact(token.removal()).await?)
}

/// Records that an agent used the token (best effort: the request it came with goes on).
pub(super) async fn touch(store: &dyn ItemStore, grant: &AgentGrant) {
    let key = keys::agent_token(&grant.org_id, &grant.pool_id, &grant.token_id);
    let now = timestamp(chrono::Utc::now());
    if let Err(e) = store.update(&key, vec![UpdateOp::set("last_used_at", now)], Condition::Exists).await {
        tracing::warn!(token = %grant.token_id, error = %e, "last-used-at not recorded");
    }
}
