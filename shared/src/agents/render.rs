//! The agent family's resources in HCP Terraform's wire format. Create, show and list render
//! a pool through the same function, so they return identical objects.

use serde_json::json;

use super::agents::Agent;
use super::pools::AgentPool;
use super::tokens::AgentToken;
use crate::api::Resource;
use crate::state::AppState;

/// A pool, naming of its workspaces only those `sees` (the caller sees).
pub fn pool(pool: &AgentPool, org_name: &str, agent_count: usize, sees: impl Fn(&str) -> bool) -> Resource {
    let named = |ids: &[String]| ids.iter().filter(|id| sees(id)).cloned().collect::<Vec<_>>();
    Resource::new(
        "agent-pools",
        &pool.id,
        json!({
            "name": pool.name,
            "created-at": pool.created_at,
            "organization-scoped": pool.organization_scoped,
            "agent-count": agent_count,
        }),
    )
    .related_link("agents", format!("/api/v2/agent-pools/{}/agents", pool.id))
    .related_link("authentication-tokens", format!("/api/v2/agent-pools/{}/authentication-tokens", pool.id))
    .to_many("workspaces", "workspaces", named(&pool.workspaces))
    .to_many("allowed-workspaces", "workspaces", named(&pool.allowed_workspaces))
    .to_one("organization", "organizations", org_name)
    .link("self", format!("/api/v2/agent-pools/{}", pool.id))
}

pub fn agent(agent: &Agent, state: &AppState) -> Resource {
    Resource::new(
        "agents",
        &agent.id,
        json!({
            "name": agent.name,
            "status": agent.status(state),
            "ip-address": agent.ip_address,
            "last-ping-at": agent.last_ping_at,
        }),
    )
    .to_one("agent-pool", "agent-pools", &agent.pool_id)
    .link("self", format!("/api/v2/agents/{}", agent.id))
}

/// An agent token; `secret` is given only in the response that created it.
pub fn token(token: &AgentToken, secret: Option<&str>) -> Resource {
    Resource::new(
        "authentication-tokens",
        &token.id,
        json!({
            "created-at": token.created_at,
            "last-used-at": token.last_used_at,
            "description": token.description,
            "token": secret,
        }),
    )
    .to_one("agent-pool", "agent-pools", &token.pool_id)
    .to_one_or_null("created-by", "users", token.created_by.as_deref())
    .link("self", format!("/api/v2/authentication-tokens/{}", token.id))
}
