//! Agent pools, agent tokens and agents (function `agent-pools`), and the agent-facing
//! gateway that real agents register and report to (function `agent-gateway`).

mod agent;
#[allow(clippy::module_inception)]
pub mod agents;
mod error;
pub mod gateway;
mod live_index;
pub mod pool;
pub mod pools;
mod render;
mod routes;
pub mod tokens;

pub use error::AgentsError;
pub use routes::router;

use crate::store::{query_all_as, ItemStore, Write};

/// The writes that remove everything a pool owns: its tokens and its agents (each conditional
/// on `pool_unchanged`, which those removed at once check themselves).
async fn owned_by_pool(
    store: &dyn ItemStore,
    org_id: &str,
    pool_id: &str,
    pool_unchanged: &Write,
) -> error::Result<Vec<Write>> {
    let tokens: Vec<tokens::AgentToken> =
        query_all_as(store, crate::store::keys::agent_tokens(org_id, pool_id)).await?;
    let mut writes: Vec<Write> = tokens.iter().flat_map(tokens::AgentToken::removal).collect();
    for agent in agent::of_pool(store, org_id, pool_id).await? {
        writes.extend(agents::removal(store, &agent, pool_unchanged).await?);
    }
    Ok(writes)
}
