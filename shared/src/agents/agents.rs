//! Agents: created when a real agent registers at the gateway, kept alive by its status
//! reports. As HCP Terraform's "Agent Capacity Usage" describes: an agent silent past the ping
//! timeout is `unknown` and still counts against the live-agent limit; silent for a further
//! `HANGAR_AGENT_ERRORED_AFTER` it is `errored` and stops counting; `errored` and `exited`
//! agents are pruned after `HANGAR_AGENT_RETENTION`.
//!
//! The limit is one counter item per organization, changed in the same transaction as the
//! agent: registering adds one on the condition that the count is below the limit, and an agent
//! that exits, errors or is deleted gives its slot back (`holds_slot` on the agent says whether
//! it still has one, so a slot is never given back twice). Every operation is then a constant
//! number of store calls, whatever the limit. A silent agent becomes errored by time, not by a
//! write, so its slot is given back by whoever next needs it: a registration that finds the
//! count at the limit reads the organization's slot holder that went silent first (one query
//! of an index ordered by when each becomes errored) and, if it is errored by now, releases it
//! and tries again; and the scheduled job releases every agent that is due (and prunes the
//! ended ones), reading only what is due from a schedule partition.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::agent::of_pool;
pub use super::agent::{Agent, BUSY, ERRORED, EXITED, IDLE, UNKNOWN};
use super::error::{AgentsError, Result};
use super::live_index;
use super::pools;
use super::tokens;
use crate::accounts::access;
use crate::api::{timestamp, Field, PageRequest};
use crate::auth::{AgentGrant, Permission, Principal};
use crate::config::Config;
use crate::ids::new_id;
use crate::state::AppState;
use crate::store::{
    collection_index, keys, pointer, retry_on_race, schedule, Condition, Item, ItemStore, Transaction, UpdateOp, Write,
};

/// The longest agent name, in characters (a host name is at most 253).
pub const MAX_NAME_CHARS: usize = 255;

/// The counter's attribute: agents holding a live-agent slot.
const LIVE: &str = "live";

/// How many silent agents a registration at the limit may release before it gives up (each
/// costs a query and a transaction); more only when others race for the freed slots.
const RELEASE_ATTEMPTS: usize = 3;

/// The most agents one scheduled run marks errored or prunes; the rest wait for the next run.
pub const SWEEP_LIMIT: usize = 500;

/// Takes one live-agent slot, if the organization has one free.
fn claim_slot(config: &Config, org_id: &str) -> Write {
    // Hangar's own runners are the site's, as many as it starts: no organization's limit.
    let max = match org_id == super::pool::SITE_ORG {
        true => i64::MAX,
        false => i64::try_from(config.max_agents).unwrap_or(i64::MAX),
    };
    Write::Update {
        key: keys::live_agent_counter(org_id),
        ops: vec![UpdateOp::Add(LIVE.into(), 1)],
        condition: Condition::Below(LIVE.into(), max),
    }
}

fn free_slot(org_id: &str) -> Write {
    Write::Update {
        key: keys::live_agent_counter(org_id),
        ops: vec![UpdateOp::Add(LIVE.into(), -1)],
        condition: Condition::Always,
    }
}

fn at_limit(config: &Config) -> AgentsError {
    AgentsError::Conflict(format!(
        "This organization already has {} live agent(s), the most it may run (HANGAR_MAX_AGENTS); \
         an agent counts until it reports exited or errored, is deleted, or has been silent past the \
         ping timeout and then the errored window (HANGAR_AGENT_ERRORED_AFTER).",
        config.max_agents
    ))
}

/// The writes that replace `agent` (as read, and only if still so) with `next` ended at
/// `ended_at`, giving its slot back.
fn ending(config: &Config, agent: &Agent, mut next: Agent, ended_at: DateTime<Utc>) -> Result<(Agent, Vec<Write>)> {
    next.holds_slot = false;
    next.ended_at = Some(timestamp(ended_at));
    let share = live_index::share(config, Some(agent), &mut next)?;
    let mut writes = vec![Write::Put { item: next.to_item(config)?, condition: agent.unchanged() }];
    if agent.holds_slot {
        writes.push(free_slot(&agent.org_id));
    }
    writes.extend(share);
    Ok((next, writes))
}

/// Marks an agent silent past the errored window `errored`, giving its slot back. False when
/// it changed meanwhile (it reported, or someone else released it).
async fn release_silent(state: &AppState, agent: &Agent) -> Result<bool> {
    let config = &state.config;
    let mut next = agent.clone();
    next.status = ERRORED.into();
    let (_, writes) = ending(config, agent, next, agent.errored_at(config))?;
    match state.store.transact(writes).await {
        Ok(()) => Ok(true),
        Err(e) if e.is_condition_failed() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Releases the organization's slot holder that went silent first, if it is errored by `now`.
/// False when none is: the organization is at its limit.
async fn release_first_silent(state: &AppState, org_id: &str, now: DateTime<Utc>) -> Result<bool> {
    let page = state.store.query(keys::live_agents_by_silence(org_id).limit(1)).await?;
    let Some(agent) = page.items.first().map(Item::parse::<Agent>).transpose()? else { return Ok(false) };
    if !agent.holds_slot || agent.errored_at(&state.config) > now {
        return Ok(false);
    }
    release_silent(state, &agent).await?;
    // Released here or by another request meanwhile: either way, the claim is worth retrying.
    Ok(true)
}

/// An agent's name as it registers: optional, at most [`MAX_NAME_CHARS`], nothing deceptive.
pub fn check_name(name: Option<String>) -> Result<Option<String>> {
    let Some(name) = name.filter(|name| !name.trim().is_empty()) else { return Ok(None) };
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(AgentsError::invalid(
            Field::Member("name"),
            format!("name is longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    if name.chars().any(crate::names::deceptive) {
        return Err(AgentsError::invalid(
            Field::Member("name"),
            "name must not contain control or bidirectional formatting characters",
        ));
    }
    Ok(Some(name))
}

/// Registers an agent of the token's pool: `idle`, pinged now.
pub async fn register(
    state: &AppState,
    grant: &AgentGrant,
    name: Option<String>,
    ip_address: Option<String>,
) -> Result<Agent> {
    register_at(state, grant, name, ip_address, Utc::now()).await
}

/// [`register`] at `now`.
pub async fn register_at(
    state: &AppState,
    grant: &AgentGrant,
    name: Option<String>,
    ip_address: Option<String>,
    now: DateTime<Utc>,
) -> Result<Agent> {
    let name = check_name(name)?;
    let store = state.store.as_ref();
    let pool = pools::load(store, &keys::agent_pool(&grant.org_id, &grant.pool_id)).await?;
    let at = timestamp(now);
    let mut agent = Agent {
        id: new_id("agent"),
        org_id: pool.org_id.clone(),
        pool_id: pool.id.clone(),
        name,
        status: IDLE.into(),
        ip_address,
        last_ping_at: at.clone(),
        created_at: at,
        token_id: Some(grant.token_id.clone()),
        holds_slot: true,
        ended_at: None,
        indexed_until: None,
    };
    let share = live_index::share(&state.config, None, &mut agent)?;
    let mut transaction = Transaction::new();
    let slot_claim = transaction.add(claim_slot(&state.config, &agent.org_id));
    transaction.add(Write::Put { item: agent.to_item(&state.config)?, condition: Condition::NotExists });
    transaction.add(pointer::create(&agent.id, &agent.key())?);
    // The pool's revision moves, so a delete of the pool that read it before this commit
    // fails (and is retried) rather than leave this agent behind.
    transaction.add(Write::Update {
        key: pool.key(),
        ops: vec![UpdateOp::Add("revision".into(), 1)],
        condition: Condition::Exists,
    });
    transaction.extend(share);
    // Committed as they are on each attempt: the collection index keeps every write where it
    // stands, so `slot_claim` names the same write in each.
    for _ in 0..=RELEASE_ATTEMPTS {
        match collection_index::transact(store, transaction.clone()).await {
            Ok(()) => {
                tokens::touch(store, grant).await;
                return Ok(agent);
            }
            Err(e) if e.failed_on(slot_claim) => {
                if !release_first_silent(state, &agent.org_id, now).await? {
                    break;
                }
            }
            Err(e) if e.is_condition_failed() => return Err(AgentsError::NotFound),
            Err(e) => return Err(e.into()),
        }
    }
    Err(at_limit(&state.config))
}

/// An agent's status report, which is also its heartbeat.
pub async fn report(state: &AppState, grant: &AgentGrant, agent_id: &str, status: &str) -> Result<Agent> {
    report_at(state, grant, agent_id, status, Utc::now()).await
}

/// [`report`] at `now`.
pub async fn report_at(
    state: &AppState,
    grant: &AgentGrant,
    agent_id: &str,
    status: &str,
    now: DateTime<Utc>,
) -> Result<Agent> {
    if ![IDLE, BUSY, EXITED, ERRORED].contains(&status) {
        return Err(AgentsError::invalid(Field::Member("status"), "status must be idle, busy, exited or errored"));
    }
    let (store, config) = (state.store.as_ref(), &state.config);
    let reported = retry_on_race(|| async move {
        let agent: Agent = pointer::resolve(store, agent_id).await?.ok_or(AgentsError::NotFound)?;
        let other_token = agent.token_id.as_ref().is_some_and(|token| *token != grant.token_id);
        if agent.pool_id != grant.pool_id || agent.org_id != grant.org_id || other_token {
            return Err(AgentsError::NotFound);
        }
        let shown = agent.status_at(config, now);
        if shown == EXITED || shown == ERRORED {
            return Err(AgentsError::Conflict(format!("Agent {agent_id} has {shown}; a new agent must register.")));
        }
        let mut next = agent.clone();
        next.status = status.to_owned();
        next.last_ping_at = timestamp(now);
        let mut transaction = Transaction::new();
        // The live-agent slot the report claims, if it claims one.
        let (next, slot_claim) = if status == IDLE || status == BUSY {
            next.holds_slot = true;
            let share = live_index::share(config, Some(&agent), &mut next)?;
            transaction.add(Write::Put { item: next.to_item(config)?, condition: agent.unchanged() });
            // Only an agent recorded before slots were counted holds none while live.
            let slot_claim = (!agent.holds_slot).then(|| transaction.add(claim_slot(config, &agent.org_id)));
            transaction.extend(share);
            (next, slot_claim)
        } else {
            let (next, writes) = ending(config, &agent, next, now)?;
            transaction.extend(writes);
            (next, None)
        };
        match collection_index::transact(store, transaction).await {
            Ok(()) => Ok(Some(next)),
            Err(e) if slot_claim.is_some_and(|claim| e.failed_on(claim)) => Err(at_limit(config)),
            Err(e) if e.is_condition_failed() => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await?;
    let agent =
        reported.ok_or_else(|| AgentsError::Conflict("The agent is being changed by other requests; retry.".into()))?;
    tokens::touch(store, grant).await;
    Ok(agent)
}

/// An agent by id, if the principal may read its organization.
pub async fn get(store: &dyn ItemStore, principal: &Principal, id: &str, permission: Permission) -> Result<Agent> {
    let agent: Agent = pointer::resolve(store, id).await?.ok_or(AgentsError::NotFound)?;
    access::require(principal, &agent.org_id, permission)?;
    Ok(agent)
}

/// A page of a pool's agents, optionally only those that pinged since a time.
pub async fn list(
    state: &AppState,
    principal: &Principal,
    pool_id: &str,
    pinged_since: Option<DateTime<Utc>>,
    status: Option<&str>,
    page: &PageRequest,
) -> Result<(Vec<Agent>, usize)> {
    let store = state.store.as_ref();
    let (pool, _) = pools::get(store, principal, pool_id, Permission::Read).await?;
    let mut agents = of_pool(store, &pool.org_id, &pool.id).await?;
    agents.retain(|agent| pinged_since.is_none_or(|since| agent.last_ping() >= since));
    agents.retain(|agent| status.is_none_or(|status| agent.status(state) == status));
    agents.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    let total = agents.len();
    Ok((page.slice(agents), total))
}

/// The writes that delete an agent and its pointer, giving its slot back if it holds one.
fn deletion(agent: &Agent, condition: Condition) -> Vec<Write> {
    let mut writes = vec![Write::Delete { key: agent.key(), condition }, pointer::remove(&agent.id)];
    if agent.holds_slot {
        writes.push(free_slot(&agent.org_id));
    }
    writes.extend(live_index::removal(agent));
    writes
}

/// Deletes an agent that is no longer running (`unknown`, `errored` or `exited`).
pub async fn delete(state: &AppState, principal: &Principal, id: &str) -> Result<()> {
    let agent = get(state.store.as_ref(), principal, id, Permission::ManageAgentPools).await?;
    let status = agent.status(state);
    if ![UNKNOWN, ERRORED, EXITED].contains(&status) {
        return Err(AgentsError::PreconditionFailed(format!(
            "Agent {id} is {status}: only unknown, errored or exited agents can be deleted. \
             Stop the agent first, or wait until it has been silent past the ping timeout."
        )));
    }
    state.store.transact(deletion(&agent, agent.unchanged())).await.map_err(|e| {
        if e.is_condition_failed() {
            AgentsError::Conflict(format!("Agent {id} changed while it was being deleted; retry."))
        } else {
            e.into()
        }
    })
}

/// The writes that remove an agent with its pointer, for a pool being deleted (each conditional
/// on `pool_unchanged`). An agent that holds a slot or is in the pool's live index is removed at
/// once instead, in a transaction of its own with the counter and the index, so both stay exact
/// however the pool's deletion is split.
pub(super) async fn removal(store: &dyn ItemStore, agent: &Agent, pool_unchanged: &Write) -> Result<Vec<Write>> {
    if !agent.holds_slot && !agent.reported_live() {
        return Ok(vec![Write::Delete { key: agent.key(), condition: Condition::Always }, pointer::remove(&agent.id)]);
    }
    // Whatever its heartbeats change meanwhile, so long as it still holds its slot and entry.
    let unchanged =
        Condition::equals("holds_slot", agent.holds_slot).and(Condition::equals("status", agent.status.clone()));
    let mut writes = deletion(agent, unchanged);
    writes.push(pool_unchanged.clone());
    match store.transact(writes).await {
        Err(e) if e.is_condition_failed() => Err(AgentsError::Conflict(
            "The agent pool or one of its agents changed while it was being deleted; retry.".into(),
        )),
        other => Ok(other.map(|()| Vec::new())?),
    }
}

/// What a scheduled run did.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct SweepSummary {
    /// Agents silent past the errored window, marked errored and their slots given back.
    pub errored: usize,
    /// Errored and exited agents removed after the retention period.
    pub pruned: usize,
}

/// The scheduled job's share: agents silent past the errored window are marked errored (their
/// slots given back), and agents ended for longer than the retention period are removed. Reads
/// only what is due, at most [`SWEEP_LIMIT`] agents.
pub async fn sweep_at(state: &AppState, now: DateTime<Utc>) -> Result<SweepSummary> {
    let (store, config) = (state.store.as_ref(), &state.config);
    let mut summary = SweepSummary::default();
    for item in schedule::due(store, keys::AGENT_SCHEDULE, now.timestamp(), SWEEP_LIMIT).await? {
        let agent: Agent = item.parse()?;
        let due = agent.due_at(config);
        if due > now {
            // Scheduled under other settings (or within the second): put back at its time.
            let reschedule = vec![schedule::reschedule(due.timestamp(), &agent.id)];
            match store.update(&agent.key(), reschedule, agent.unchanged()).await {
                Err(e) if !e.is_condition_failed() => return Err(e.into()),
                _ => continue,
            }
        }
        if agent.reported_live() {
            summary.errored += usize::from(release_silent(state, &agent).await?);
        } else {
            match store.transact(deletion(&agent, agent.unchanged())).await {
                Ok(()) => summary.pruned += 1,
                Err(e) if e.is_condition_failed() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(summary)
}

/// [`sweep_at`] now.
pub async fn sweep(state: &AppState) -> Result<SweepSummary> {
    sweep_at(state, Utc::now()).await
}
