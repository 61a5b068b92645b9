//! An organization's agent pools, each with its agents: status (as the API shows it, a silent
//! agent `unknown` then `errored`), last ping, and the capacity used: the agents that count
//! against the organization's live-agent limit. Read through `pools::list` and `agents::list`,
//! as `GET …/agent-pools` and `GET /api/v2/agent-pools/:id/agents` read them.

use axum::extract::{Path, RawQuery, State};
use maud::html;

use super::{page, params};
use crate::agents::agents::{self, Agent};
use crate::agents::pools::{self, PoolQuery};
use crate::api::{PageRequest, MAX_PAGE_SIZE};
use crate::state::AppState;
use crate::web::error::WebError;
use crate::web::layout::{self, badge, pager, Page};
use crate::web::session::Viewer;

pub async fn pools(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(org): Path<String>,
    query: RawQuery,
) -> Result<Page, WebError> {
    let principal = viewer.principal()?;
    let params = params(query)?;
    let page = page(&params)?;
    let (pools, matching, _, org) =
        pools::list(state.store.as_ref(), principal, &org, &PoolQuery::default(), &page).await?;
    // A pool's agents, the first page of the largest size: a pool holds at most the organization's
    // live-agent limit of running agents, plus those ended within the retention period.
    let first = PageRequest { number: 1, size: MAX_PAGE_SIZE };
    // Read for every pool of the page together, not one pool after another.
    let reads = pools.iter().map(|pool| agents::list(&state, principal, &pool.id, None, None, &first));
    let listed: Vec<(Vec<Agent>, usize)> = futures::future::try_join_all(reads).await?;
    let counted = |agents: &[Agent]| agents.iter().filter(|a| a.counts(&state)).count();
    let used: usize = listed.iter().map(|(agents, _)| counted(agents)).sum();
    let here = format!("/app/organizations/{}/agent-pools", org.name);
    let body = html! {
        h1 { "Agent pools of " (org.name) }
        p.summary {
            "Capacity used: " strong { (used) " of " (state.config.max_agents) } " live agents "
            span.note { "(idle, busy and unknown agents count against the organization's limit)" }
        }
        @if pools.is_empty() { p.empty { "No agent pool yet." } }
        @for (pool, (agents, total)) in pools.iter().zip(&listed) {
            section.pool {
                h2 { (pool.name) span.note { " · " (pool.id) } }
                p.summary {
                    (counted(agents)) " counted of " (total) " agents · "
                    @if pool.organization_scoped { "every workspace may use it" }
                    @else { (pool.allowed_workspaces.len()) " workspaces allowed" }
                    " · created " (layout::time(&pool.created_at))
                }
                @if agents.is_empty() { p.empty { "No agent has registered." } } @else {
                    table.list {
                        thead { tr { th { "Agent" } th { "Status" } th { "Last ping" } th { "IP address" } } }
                        tbody {
                            @for agent in agents {
                                tr {
                                    td { (agent.name.as_deref().unwrap_or("(unnamed)")) span.note { " · " (agent.id) } }
                                    td { (badge(agent.status(&state))) }
                                    td { (layout::time(&agent.last_ping_at)) }
                                    td { (agent.ip_address.as_deref().unwrap_or("")) }
                                }
                            }
                        }
                    }
                    @if *total > agents.len() { p.note { "Showing the first " (agents.len()) " of " (total) " agents." } }
                }
            }
        }
        (pager(&here, &params, page, matching))
    };
    let crumbs = [("Organizations", "/app".to_owned())];
    Ok(layout::page(viewer.chrome(), &format!("Agent pools of {}", org.name), &crumbs, body))
}
