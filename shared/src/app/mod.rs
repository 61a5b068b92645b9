//! The top layer: the routers of each function with what every function adds around them (the
//! request log, JSON:API 404 and 405), and the log subscriber. dev-server mounts the same
//! routers, so local and deployed behaviour cannot drift.

pub mod objects;

use std::time::Instant;

use axum::extract::Request;
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tracing_subscriber::filter::{LevelFilter, Targets};

use crate::api::ApiError;
use crate::state::AppState;

/// One log line per request: method, path (never the query, which may hold a signature),
/// status and latency. Headers, and so tokens, are never logged.
async fn log_request(request: Request, next: Next) -> Response {
    let (method, path, started) = (request.method().clone(), request.uri().path().to_owned(), Instant::now());
    let response = next.run(request).await;
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    response
}

/// Gives axum's bare 405 (raised by a route that lacks the method) a JSON:API body, keeping
/// its `Allow` header.
async fn render_method_not_allowed(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() != axum::http::StatusCode::METHOD_NOT_ALLOWED
        || response.headers().contains_key(header::CONTENT_TYPE)
    {
        return response;
    }
    let mut rendered = ApiError::method_not_allowed().into_response();
    if let Some(allow) = response.headers().get(header::ALLOW) {
        rendered.headers_mut().insert(header::ALLOW, allow.clone());
    }
    rendered
}

/// Wraps a family's router with what every function adds: the request log, and JSON:API
/// answers for unknown paths (404) and methods (405).
pub fn finish(router: Router<AppState>, state: AppState) -> Router {
    router
        .fallback(|| async { ApiError::not_found() })
        .with_state(state)
        .layer(middleware::from_fn(render_method_not_allowed))
        .layer(middleware::from_fn(log_request))
}

/// Installs the JSON (CloudWatch-friendly) or human log format, filtered by `RUST_LOG`.
pub fn init_tracing(json: bool) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // `RUST_LOG` as a level or `target=level` directives: Targets needs no regular expressions,
    // which keeps a regex engine out of every function's package.
    let filter = std::env::var("RUST_LOG").ok().and_then(|directives| directives.parse().ok());
    let filter = filter.unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    let registry = tracing_subscriber::registry().with(filter);
    // A second initialisation (tests, a reused process) keeps the first subscriber.
    let _ = if json {
        registry.with(tracing_subscriber::fmt::layer().json().without_time().with_target(false)).try_init()
    } else {
        registry.with(tracing_subscriber::fmt::layer().with_target(false)).try_init()
    };
}

/// The routers each function serves. Families not built yet answer every path with a 404.
pub mod routers {
    use axum::Router;

    use super::{finish, AppState};

    pub fn accounts(state: AppState) -> Router {
        finish(crate::accounts::router(), state)
    }

    pub fn registry_api(state: AppState) -> Router {
        finish(crate::registry::router(), state)
    }

    pub fn registry_protocol(state: AppState) -> Router {
        finish(crate::registry::protocol::router(), state)
    }

    pub fn agent_pools(state: AppState) -> Router {
        finish(crate::agents::router(), state)
    }

    pub fn agent_gateway(state: AppState) -> Router {
        finish(crate::agents::gateway::router(), state)
    }

    pub fn credential_broker(state: AppState) -> Router {
        crate::broker::with_vault_requests(finish(crate::broker::router(), state))
    }

    /// Every family in one router, plus the `/object/` links of local blobs: dev-server's.
    pub fn all(state: AppState) -> Router {
        let families = Router::new()
            .merge(crate::accounts::router())
            .merge(crate::registry::router())
            .merge(crate::registry::protocol::router())
            .merge(crate::agents::router())
            .merge(crate::agents::gateway::router())
            .merge(crate::broker::router());
        let mut router = finish(families, state.clone());
        if let Some(local) = state.local_blobs.clone() {
            let ingest = std::sync::Arc::new(crate::registry::ingest::LocalIngest(state.clone()));
            router = router.merge(super::objects::object_routes_with_hooks(local, ingest));
        }
        crate::broker::with_vault_requests(router)
    }
}
