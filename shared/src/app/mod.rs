//! The top layer: the routers of each function with what every function adds around them (the
//! request log, paths in one form, JSON:API 404s and axum's refusals in the family's format),
//! and the log subscriber. dev-server mounts the same
//! routers, so local and deployed behaviour cannot drift.

mod batched_log;
mod edge;
pub mod objects;
pub mod openapi;

use axum::middleware;
use axum::Router;
use tracing_subscriber::filter::{LevelFilter, Targets};

use crate::api::refusal::{self, render_refusals};
use crate::api::ApiError;
use crate::state::AppState;

/// Wraps a family's router with what every function adds: the OpenAPI document, and JSON:API
/// answers for unknown paths (404) and for axum's refusals (405, a path or body an extractor
/// refused) that the family has not rendered in its own format.
pub fn finish(router: Router<AppState>, mut state: AppState) -> Router {
    state.lock_hooks = std::sync::Arc::new(FamilyLockHooks);
    router
        .route(openapi::PATH, axum::routing::get(openapi::serve))
        .fallback(|| async { ApiError::not_found() })
        .with_state(state)
        .layer(middleware::from_fn(|request, next| render_refusals(request, next, refusal::json_api)))
}

/// Before a workspace's lock is taken, a state that landed on an upload link under the lock
/// before is settled (made current, or discarded), so that the new lock's holder reads it and it
/// is never taken for one landing under the new lock. After it is unlocked, the run waiting for
/// it starts, so that it waits on no read of it or schedule.
struct FamilyLockHooks;

#[async_trait::async_trait]
impl crate::state::LockHooks for FamilyLockHooks {
    async fn before_lock(&self, state: &AppState, workspace_id: &str) -> Result<(), String> {
        let store = state.store.as_ref();
        let workspace =
            crate::accounts::workspaces::reread(store, workspace_id, None).await.map_err(|e| e.to_string())?;
        crate::state_versions::uploads::settle_pending(state, workspace).await.map(drop).map_err(|e| e.to_string())
    }

    async fn after_unlock(&self, state: &AppState, workspace_id: &str) -> Result<(), String> {
        crate::runs::queue::advance(state, workspace_id).await.map_err(|e| e.to_string())
    }
}

/// Installs the JSON (CloudWatch-friendly) or human log format, filtered by `RUST_LOG`, writing
/// each line to stdout as it is made. The functions use this: Lambda serves one request at a
/// time per process and may freeze the process as soon as the response is out, so a line still
/// queued for a writer thread would reach CloudWatch late, or never if the sandbox is then
/// retired.
pub fn init_tracing(json: bool) {
    install_subscriber(json, std::io::stdout);
}

/// The same for a long-running server (dev-server): lines are buffered in memory and written to
/// stdout in batches ([`batched_log`]), so a request never waits on the pipe or terminal behind
/// stdout (one write per line was most of dev-server's system time under load), nor wakes a
/// thread. Nothing is dropped, and the returned guard writes out what is buffered when dropped:
/// hold it until the server has stopped.
pub fn init_buffered_tracing(json: bool) -> LogGuard {
    let (writer, guard) = batched_log::batched_stdout();
    install_subscriber(json, writer);
    LogGuard(guard)
}

/// Flushes the buffered log when dropped (see [`init_buffered_tracing`]).
#[must_use = "the log is flushed when this guard is dropped"]
pub struct LogGuard(#[allow(dead_code)] batched_log::FlushGuard);

fn install_subscriber<W>(json: bool, writer: W)
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // `RUST_LOG` as a level or `target=level` directives: Targets needs no regular expressions,
    // which keeps a regex engine out of every function's package.
    let filter = std::env::var("RUST_LOG").ok().and_then(|directives| directives.parse().ok());
    let filter = filter.unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    let registry = tracing_subscriber::registry().with(filter);
    // A second initialisation (tests, a reused process) keeps the first subscriber.
    let _ = if json {
        let layer = tracing_subscriber::fmt::layer().json().without_time().with_target(false).with_writer(writer);
        registry.with(layer).try_init()
    } else {
        // Colours only for a terminal: escape codes in a file or a pipe are noise (and their
        // formatting was a tenth of each log line's cost).
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
        registry
            .with(tracing_subscriber::fmt::layer().with_target(false).with_ansi(ansi).with_writer(writer))
            .try_init()
    };
}

/// The routers each function serves. Families not built yet answer every path with a 404.
pub mod routers {
    use axum::Router;

    use super::edge::edge;
    use super::{finish, AppState};

    pub fn accounts(state: AppState) -> Router {
        edge(finish(crate::accounts::router(), state))
    }

    pub fn registry_api(state: AppState) -> Router {
        edge(finish(crate::registry::router(), state))
    }

    pub fn registry_protocol(state: AppState) -> Router {
        edge(finish(crate::registry::protocol::router(), state))
    }

    pub fn state_versions(state: AppState) -> Router {
        edge(finish(crate::state_versions::router(), state))
    }

    pub fn agent_pools(state: AppState) -> Router {
        edge(finish(crate::agents::router(), state))
    }

    /// Agents' own API: registration and reports, and the jobs they claim and run.
    pub fn agent_gateway(state: AppState) -> Router {
        edge(finish(crate::agents::gateway::router().merge(crate::runs::agent_routes::router()), state))
    }

    pub fn runs(state: AppState) -> Router {
        edge(finish(crate::runs::router(), state))
    }

    pub fn credential_broker(state: AppState) -> Router {
        edge(crate::broker::with_vault_requests(finish(crate::broker::router(), state)))
    }

    /// The console: HTML pages, so its own 404 page for every path (not the JSON:API answer).
    pub fn web(state: AppState) -> Router {
        edge(crate::web::standalone(&state).with_state(state))
    }

    /// Every family and the console in one router, plus the `/upload/` and `/object/` links of
    /// local blobs: dev-server's.
    pub fn all(state: AppState) -> Router {
        let mut router =
            finish(super::families(), state.clone()).merge(crate::web::router(&state).with_state(state.clone()));
        if let Some(local) = state.local_blobs.clone() {
            let ingest = std::sync::Arc::new(super::objects::SettleUploads(state.clone()));
            let links = super::objects::object_routes_with_hooks(local, ingest);
            router = router.merge(links.layer(super::middleware::from_fn(|request, next| {
                super::render_refusals(request, next, super::refusal::json_api)
            })));
        }
        edge(crate::broker::with_vault_requests(router))
    }
}

/// Every family's routes in one router: dev-server's, and what the OpenAPI document is checked
/// against.
fn families() -> Router<AppState> {
    Router::new()
        .merge(crate::accounts::router())
        .merge(crate::registry::router())
        .merge(crate::registry::protocol::router())
        .merge(crate::state_versions::router())
        .merge(crate::agents::router())
        .merge(crate::agents::gateway::router())
        .merge(crate::runs::router())
        .merge(crate::runs::agent_routes::router())
        .merge(crate::broker::router())
}
