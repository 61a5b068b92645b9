//! Agents: created when a real agent registers at the gateway, kept alive by its status
//! reports. An agent silent past the ping timeout is `unknown` wherever it is shown.
//!
//! The free edition's limit on live agents is held by slot items with a TTL: registering claims
//! a free slot in the same transaction that creates the agent, each report pushes the slot's
//! expiry forward, and a silent agent's slot lapses by itself, so the limit needs no sweeper
//! and two agents cannot register into one slot.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::{AgentsError, Result};
use super::pools;
use super::tokens;
use crate::accounts::access;
use crate::api::{timestamp, Field, PageRequest};
use crate::auth::{AgentGrant, Permission, Principal};
use crate::ids::{new_id, Kind};
use crate::state::AppState;
use crate::store::{keys, pointer, query_all_as, Condition, Item, ItemStore, Key, Write};

pub const IDLE: &str = "idle";
pub const BUSY: &str = "busy";
pub const EXITED: &str = "exited";
pub const ERRORED: &str = "errored";
pub const UNKNOWN: &str = "unknown";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Agent {
    pub id: String,
    pub org_id: String,
    pub pool_id: String,
    pub name: Option<String>,
    /// The status the agent last reported.
    pub status: String,
    pub ip_address: Option<String>,
    pub last_ping_at: String,
    pub created_at: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Slot {
    agent_id: String,
}

impl pointer::Addressed for Agent {
    const KIND: Kind = Kind::Agent;
}

impl Agent {
    pub fn key(&self) -> Key {
        keys::agent(&self.org_id, &self.pool_id, &self.id)
    }

    fn last_ping(&self) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&self.last_ping_at).map_or(DateTime::<Utc>::MIN_UTC, |at| at.with_timezone(&Utc))
    }

    /// The status as shown: a live status reported longer ago than the timeout is `unknown`.
    pub fn status(&self, state: &AppState) -> &str {
        let live = self.status == IDLE || self.status == BUSY;
        if live && silent_until(state, self.last_ping()) < Utc::now() {
            UNKNOWN
        } else {
            &self.status
        }
    }

    /// Counted by a pool's `agent-count`: idle, busy and unknown agents.
    pub fn counts(&self, state: &AppState) -> bool {
        matches!(self.status(state), IDLE | BUSY | UNKNOWN)
    }

    fn to_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }
}

/// When an agent last heard from at `at` stops counting as live: never sooner than the ping
/// timeout allows, and never an overflow, whatever the timeout.
fn silent_until(state: &AppState, at: DateTime<Utc>) -> DateTime<Utc> {
    let timeout = chrono::Duration::from_std(state.config.agent_ping_timeout).unwrap_or(chrono::Duration::MAX);
    at.checked_add_signed(timeout).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Every agent of a pool.
pub(super) async fn of_pool(store: &dyn ItemStore, org_id: &str, pool_id: &str) -> Result<Vec<Agent>> {
    Ok(query_all_as(store, keys::agents(org_id, pool_id)).await?)
}

/// The slot an agent holds, as a write that frees it (if it still holds one).
async fn release(state: &AppState, agent: &Agent) -> Result<Option<Write>> {
    for slot in 0..state.config.max_agents {
        let key = keys::agent_slot(&agent.org_id, slot);
        if let Some(item) = state.store.get(&key).await? {
            if item.parse::<Slot>()?.agent_id == agent.id {
                return Ok(Some(Write::Delete { key, condition: Condition::equals("agent_id", agent.id.clone()) }));
            }
        }
    }
    Ok(None)
}

fn slot_item(state: &AppState, org_id: &str, slot: usize, agent_id: &str) -> Result<Item> {
    let expires = silent_until(state, Utc::now());
    let item = Item::from_value(keys::agent_slot(org_id, slot), &Slot { agent_id: agent_id.to_owned() })?;
    Ok(item.with_ttl(expires.timestamp()))
}

/// Commits `writes` together with a live-agent slot for the agent: the one it holds if it
/// still does, else any free one. None free: the organization is at its limit.
async fn with_slot(state: &AppState, agent: &Agent, writes: Vec<Write>) -> Result<()> {
    let max = state.config.max_agents;
    for slot in 0..max {
        let held = Condition::equals("agent_id", agent.id.clone());
        let claim = Write::Put {
            item: slot_item(state, &agent.org_id, slot, &agent.id)?,
            condition: Condition::Or(vec![Condition::NotExists, held]),
        };
        let mut all = vec![claim];
        all.extend(writes.iter().cloned());
        match state.store.transact(all).await {
            Ok(()) => return Ok(()),
            Err(e) if e.failed_write() == Some(0) => continue,
            Err(e) if e.is_condition_failed() => return Err(AgentsError::NotFound),
            Err(e) => return Err(e.into()),
        }
    }
    Err(AgentsError::Conflict(format!(
        "This organization already has {max} live agent(s), the most it may run (HANGAR_MAX_AGENTS); \
         an agent counts until it reports exited or errored, or stays silent past the ping timeout."
    )))
}

/// Registers an agent of the token's pool: `idle`, pinged now.
pub async fn register(
    state: &AppState,
    grant: &AgentGrant,
    name: Option<String>,
    ip_address: Option<String>,
) -> Result<Agent> {
    let pool = pools::load(state.store.as_ref(), &keys::agent_pool(&grant.org_id, &grant.pool_id)).await?;
    let now = timestamp(Utc::now());
    let agent = Agent {
        id: new_id("agent"),
        org_id: pool.org_id.clone(),
        pool_id: pool.id.clone(),
        name: name.filter(|n| !n.trim().is_empty()),
        status: IDLE.into(),
        ip_address,
        last_ping_at: now.clone(),
        created_at: now,
    };
    let writes = vec![
        Write::Put { item: agent.to_item()?, condition: Condition::NotExists },
        pointer::create(&agent.id, &agent.key())?,
        Write::Check { key: pool.key(), condition: Condition::Exists },
    ];
    with_slot(state, &agent, writes).await?;
    tokens::touch(state, grant).await;
    Ok(agent)
}

/// An agent's status report, which is also its heartbeat.
pub async fn report(state: &AppState, grant: &AgentGrant, agent_id: &str, status: &str) -> Result<Agent> {
    if ![IDLE, BUSY, EXITED, ERRORED].contains(&status) {
        return Err(AgentsError::invalid(Field::Member("status"), "status must be idle, busy, exited or errored"));
    }
    let store = state.store.as_ref();
    let mut agent: Agent = pointer::resolve(store, agent_id).await?.ok_or(AgentsError::NotFound)?;
    if agent.pool_id != grant.pool_id || agent.org_id != grant.org_id {
        return Err(AgentsError::NotFound);
    }
    if agent.status == EXITED || agent.status == ERRORED {
        return Err(AgentsError::Conflict(format!(
            "Agent {agent_id} has {}; a new agent must register.",
            agent.status
        )));
    }
    agent.status = status.to_owned();
    agent.last_ping_at = timestamp(Utc::now());
    let write = Write::Put { item: agent.to_item()?, condition: Condition::Exists };
    if status == IDLE || status == BUSY {
        with_slot(state, &agent, vec![write]).await?;
    } else {
        let mut writes = vec![write];
        writes.extend(release(state, &agent).await?);
        store
            .transact(writes)
            .await
            .map_err(|e| if e.is_condition_failed() { AgentsError::NotFound } else { e.into() })?;
    }
    tokens::touch(state, grant).await;
    Ok(agent)
}

/// An agent by id, if the principal may read its organization.
pub async fn get(state: &AppState, principal: &Principal, id: &str, permission: Permission) -> Result<Agent> {
    let agent: Agent = pointer::resolve(state.store.as_ref(), id).await?.ok_or(AgentsError::NotFound)?;
    access::require(principal, &agent.org_id, permission)?;
    Ok(agent)
}

/// A page of a pool's agents, optionally only those that pinged since a time.
pub async fn list(
    state: &AppState,
    principal: &Principal,
    pool_id: &str,
    pinged_since: Option<DateTime<Utc>>,
    page: &PageRequest,
) -> Result<(Vec<Agent>, usize)> {
    let (pool, _) = pools::get(state, principal, pool_id, Permission::Read).await?;
    let mut agents = of_pool(state.store.as_ref(), &pool.org_id, &pool.id).await?;
    agents.retain(|agent| pinged_since.is_none_or(|since| agent.last_ping() >= since));
    agents.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    let total = agents.len();
    Ok((page.slice(agents), total))
}

/// Deletes an agent that is no longer running (`unknown`, `errored` or `exited`).
pub async fn delete(state: &AppState, principal: &Principal, id: &str) -> Result<()> {
    let agent = get(state, principal, id, Permission::ManageAgentPools).await?;
    let status = agent.status(state);
    if ![UNKNOWN, ERRORED, EXITED].contains(&status) {
        return Err(AgentsError::PreconditionFailed(format!(
            "Agent {id} is {status}: only unknown, errored or exited agents can be deleted. \
             Stop the agent first, or wait until it has been silent past the ping timeout."
        )));
    }
    let mut writes = vec![Write::Delete { key: agent.key(), condition: Condition::Exists }, pointer::remove(&agent.id)];
    writes.extend(release(state, &agent).await?);
    state
        .store
        .transact(writes)
        .await
        .map_err(|e| if e.is_condition_failed() { AgentsError::NotFound } else { e.into() })
}

/// The writes that remove an agent (with its pointer and slot), for a pool being deleted.
pub(super) async fn removal(state: &AppState, agent: &Agent) -> Result<Vec<Write>> {
    let mut writes = vec![Write::Delete { key: agent.key(), condition: Condition::Always }, pointer::remove(&agent.id)];
    writes.extend(release(state, agent).await?.map(|w| match w {
        Write::Delete { key, .. } => Write::Delete { key, condition: Condition::Always },
        other => other,
    }));
    Ok(writes)
}
