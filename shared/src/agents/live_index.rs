//! A pool's index of its live agents, so that a read of the pool counts them (its
//! `agent-count`) from an item fetched in the pool's own batch instead of a query of its agents.
//!
//! An entry per agent that last reported idle or busy, kept by the store's
//! [`collection_index`]. Whether such an agent counts depends on time: it stops once silent past
//! the errored window. A heartbeat moves the agent's last ping, but rewriting the index with every
//! heartbeat would make it a hot item; so an entry holds two bounds, `ping` (the last ping when the
//! entry was written, at or before the agent's real one) and `until` (a time the real last ping is
//! known to be before), and a heartbeat rewrites the entry only when its ping reaches `until`
//! (every ping timeout). A read then knows that an agent counts when `ping`'s errored time is
//! still ahead, and that it does not when `until`'s has passed; only when the time falls between
//! the two (an agent that went silent, for one ping timeout) does the read query the agents.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::agent::{after, errored_at, of_pool, parse_time, Agent};
use super::error::Result;
use super::pool::AgentPool;
use crate::api::timestamp;
use crate::config::Config;
use crate::store::{collection_index, keys, Item, ItemStore, Key, Write};

/// Each entry is the attribute `a#<agent-id>`.
const ENTRY_PREFIX: &str = "a#";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct LiveEntry {
    ping: String,
    until: String,
}

pub(super) fn key(org_id: &str, pool_id: &str) -> Key {
    keys::pool_live_agents(org_id, pool_id)
}

/// The complete, empty index of a new pool.
pub(super) fn created(org_id: &str, pool_id: &str) -> Write {
    collection_index::created(key(org_id, pool_id))
}

fn entry_name(agent: &Agent) -> String {
    format!("{ENTRY_PREFIX}{}", agent.id)
}

/// An entry the size of the one `agent` has in the index (every entry is two timestamps), for
/// the budget's count of bytes.
fn entry_of(agent: &Agent) -> LiveEntry {
    let until = agent.indexed_until.clone().unwrap_or_else(|| agent.last_ping_at.clone());
    LiveEntry { ping: agent.last_ping_at.clone(), until }
}

/// The index's share of a write that replaces `before` (`None` for a new agent) with `next`,
/// if the index must change: the agent became live or stopped being so, or its ping reached
/// its entry's `until` (or went back, a clock behind the last writer's, below the entry's
/// `ping`). Records on `next` the `until` of the entry it has.
pub(super) fn share(config: &Config, before: Option<&Agent>, next: &mut Agent) -> Result<Option<Write>> {
    let before = before.filter(|before| before.reported_live());
    let index = key(&next.org_id, &next.pool_id);
    if !next.reported_live() {
        next.indexed_until = None;
        return Ok(before.map(|before| collection_index::removal(index, entry_name(before), &entry_of(before))));
    }
    let indexed_until = before.and_then(|before| before.indexed_until.clone());
    let forward = before.is_some_and(|before| next.last_ping() >= before.last_ping());
    if forward && indexed_until.as_deref().is_some_and(|until| next.last_ping() < parse_time(until)) {
        next.indexed_until = indexed_until;
        return Ok(None);
    }
    let until = timestamp(after(next.last_ping(), config.agent_ping_timeout));
    next.indexed_until = Some(until.clone());
    let entry = LiveEntry { ping: next.last_ping_at.clone(), until };
    let before = before.map(entry_of);
    Ok(Some(collection_index::change(index, entry_name(next), before.as_ref(), &entry)?))
}

/// The index's share of deleting `agent`, if it has an entry.
pub(super) fn removal(agent: &Agent) -> Option<Write> {
    let index = key(&agent.org_id, &agent.pool_id);
    agent.reported_live().then(|| collection_index::removal(index, entry_name(agent), &entry_of(agent)))
}

/// How many of a complete index's `entries` count at `now`; `None` when an entry's agent may or
/// may not have become errored since its last rewrite.
fn counted(config: &Config, entries: &[LiveEntry], now: DateTime<Utc>) -> Option<usize> {
    let mut count = 0;
    for entry in entries {
        if errored_at(config, parse_time(&entry.ping)) > now {
            count += 1;
        } else if errored_at(config, parse_time(&entry.until)) > now {
            return None;
        }
    }
    Some(count)
}

/// Each pool's count of agents that count (idle, busy or unknown) at `now`, from the pools' live
/// indexes as read (`indexes[i]` is `pools[i]`'s); a pool whose index cannot say queries its
/// agents, and repairs its index when it was incomplete.
pub(super) async fn counts(
    store: &dyn ItemStore,
    config: &Config,
    pools: &[AgentPool],
    indexes: &[Option<Item>],
    now: DateTime<Utc>,
) -> Result<Vec<usize>> {
    let counts = pools.iter().zip(indexes).map(|(pool, index)| async move {
        let (org_id, pool_id) = (pool.org_id.as_str(), pool.id.as_str());
        let entries = collection_index::entries::<LiveEntry>(index.as_ref(), ENTRY_PREFIX)?;
        if let Some(count) = entries.as_deref().and_then(|entries| counted(config, entries, now)) {
            return Ok(count);
        }
        let agents = of_pool(store, org_id, pool_id).await?;
        if entries.is_none() {
            let live = agents.iter().filter(|agent| agent.reported_live());
            let entries = live.map(|agent| (entry_name(agent), repaired_entry(config, agent))).collect();
            collection_index::repair(store, key(org_id, pool_id), index.as_ref(), entries).await;
        }
        Ok(agents.iter().filter(|agent| agent.counts_at(config, now)).count())
    });
    futures::future::try_join_all(counts).await
}

/// The entry a repair writes for `agent`, as just queried: its ping as read, and an `until` no
/// earlier than the one its heartbeats go by (they rewrite the entry only once they reach it).
fn repaired_entry(config: &Config, agent: &Agent) -> LiveEntry {
    let until = after(agent.last_ping(), config.agent_ping_timeout);
    let indexed = agent.indexed_until.as_deref().map(parse_time).filter(|&indexed| indexed > until);
    LiveEntry { ping: agent.last_ping_at.clone(), until: timestamp(indexed.unwrap_or(until)) }
}
