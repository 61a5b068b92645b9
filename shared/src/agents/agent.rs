//! The agent record: what an agent last reported, and what time makes of it (`unknown` past the
//! ping timeout, `errored` past the errored window), apart from the operations on it so that the
//! pool's live index can read it too.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::Result;
use crate::config::Config;
use crate::ids::Kind;
use crate::state::AppState;
use crate::store::{keys, pointer, query_all_as, schedule, Condition, Index, Item, ItemStore, Key};

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
    /// The status the agent last reported (or `errored` once released for its silence).
    pub status: String,
    pub ip_address: Option<String>,
    pub last_ping_at: String,
    pub created_at: String,
    /// The agent token that registered the agent: the only one that may report for it.
    #[serde(default)]
    pub token_id: Option<String>,
    /// Whether the agent holds one of its organization's live-agent slots (is in the counter).
    #[serde(default)]
    pub holds_slot: bool,
    /// When it exited or errored; the retention period runs from here.
    #[serde(default)]
    pub ended_at: Option<String>,
    /// The `until` of the agent's entry in its pool's live index: its heartbeats rewrite the
    /// entry once they reach it (see [`live_index`]).
    #[serde(default)]
    pub indexed_until: Option<String>,
}

impl pointer::Addressed for Agent {
    const KIND: Kind = Kind::Agent;
}

pub(super) fn parse_time(at: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(at).map_or(DateTime::<Utc>::MIN_UTC, |at| at.with_timezone(&Utc))
}

/// `at` plus a setting's duration, never an overflow whatever the setting.
pub(super) fn after(at: DateTime<Utc>, duration: std::time::Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(duration)
        .ok()
        .and_then(|duration| at.checked_add_signed(duration))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

impl Agent {
    pub fn key(&self) -> Key {
        keys::agent(&self.org_id, &self.pool_id, &self.id)
    }

    pub(super) fn last_ping(&self) -> DateTime<Utc> {
        parse_time(&self.last_ping_at)
    }

    /// Whether the agent last reported idle or busy (whatever its silence makes of that).
    pub(super) fn reported_live(&self) -> bool {
        self.status == IDLE || self.status == BUSY
    }

    /// When a silent agent becomes `errored`: the ping timeout, then the errored window.
    pub(super) fn errored_at(&self, config: &Config) -> DateTime<Utc> {
        errored_at(config, self.last_ping())
    }

    /// When the scheduled job next has work with the agent: release it once errored, or prune
    /// it once it has been ended for the retention period.
    pub(super) fn due_at(&self, config: &Config) -> DateTime<Utc> {
        if self.reported_live() {
            self.errored_at(config)
        } else {
            let ended = self.ended_at.as_deref().map_or_else(|| self.last_ping(), parse_time);
            after(ended, config.agent_retention)
        }
    }

    /// The status as shown at `now`: a live status reported longer ago than the ping timeout
    /// is `unknown`, and `errored` once the errored window has passed too.
    pub fn status_at(&self, config: &Config, now: DateTime<Utc>) -> &str {
        if !self.reported_live() {
            &self.status
        } else if now >= self.errored_at(config) {
            ERRORED
        } else if now > after(self.last_ping(), config.agent_ping_timeout) {
            UNKNOWN
        } else {
            &self.status
        }
    }

    pub fn status(&self, state: &AppState) -> &str {
        self.status_at(&state.config, Utc::now())
    }

    /// Counted by a pool's `agent-count` and against the limit: idle, busy and unknown agents.
    pub fn counts(&self, state: &AppState) -> bool {
        self.counts_at(&state.config, Utc::now())
    }

    /// [`Agent::counts`] at `now`.
    pub(super) fn counts_at(&self, config: &Config, now: DateTime<Utc>) -> bool {
        matches!(self.status_at(config, now), IDLE | BUSY | UNKNOWN)
    }

    /// The item: on the job's schedule, and on the organization's index of slot holders by
    /// when each becomes errored while it holds a slot.
    pub(super) fn to_item(&self, config: &Config) -> Result<Item> {
        let due = schedule::sort_key(self.due_at(config).timestamp(), &self.id);
        let mut item = Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]).with_index(
            Index::Gsi1,
            keys::AGENT_SCHEDULE,
            due,
        );
        if self.holds_slot {
            let errored = schedule::sort_key(self.errored_at(config).timestamp(), &self.id);
            let (index, partition, sort) = keys::live_agent_index(&self.org_id, errored);
            item = item.with_index(index, partition, sort);
        }
        Ok(item)
    }

    /// The condition that nothing changed the agent since it was read.
    pub(super) fn unchanged(&self) -> Condition {
        Condition::equals("last_ping_at", self.last_ping_at.clone())
            .and(Condition::equals("status", self.status.clone()))
            .and(Condition::equals("holds_slot", self.holds_slot))
    }
}

/// When an agent that last pinged at `last_ping` becomes `errored`: the ping timeout, then the
/// errored window.
pub(super) fn errored_at(config: &Config, last_ping: DateTime<Utc>) -> DateTime<Utc> {
    after(after(last_ping, config.agent_ping_timeout), config.agent_errored_after)
}

/// Every agent of a pool.
pub(super) async fn of_pool(store: &dyn ItemStore, org_id: &str, pool_id: &str) -> Result<Vec<Agent>> {
    Ok(query_all_as(store, keys::agents(org_id, pool_id)).await?)
}
