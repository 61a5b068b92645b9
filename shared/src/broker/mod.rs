//! The cloud credential broker (function `credential-broker`): the Vault AWS secrets engine's
//! API under `/v1/{mount}`, Vault's token, policy, mount and lease endpoints under `/v1/sys`
//! and `/v1/auth/token`, and the scheduled rotation of static-role keys (function
//! `key-rotation`).

pub mod auth_mounts;
pub mod config;
mod credentials;
pub mod duration;
mod engine;
mod error;
mod http;
mod identity;
mod intents;
mod jwt;
pub mod leases;
pub mod mounts;
mod paths;
pub mod policies;
mod request;
pub mod roles;
mod rotation;
mod static_claims;
pub mod statics;
mod sys;
mod sys_leases;
mod sys_tokens;
pub mod template;
pub mod tokens;

use axum::routing::any;
use axum::Router;
use tower::Layer;

pub use engine::served_paths as engine_paths;
pub use error::BrokerError;
pub use jwt::PATHS as auth_method_paths;
pub use rotation::{scheduled_run, scheduled_run_at};

use crate::state::AppState;

/// Everything under `/v1`: Vault's format for errors, and one clean path per request, checked
/// before any handler runs (the outermost layer), so that the policy check and the route read
/// the same one.
pub fn router() -> Router<AppState> {
    let v1 = Router::new()
        .merge(sys::routes())
        .merge(sys_leases::routes())
        .merge(sys_tokens::routes())
        .merge(identity::routes())
        .route("/auth/{*path}", any(jwt::dispatch))
        .route("/{*path}", any(engine::dispatch))
        .fallback(|| async { BrokerError::NotFound })
        .layer(axum::middleware::from_fn(vault_method_not_allowed))
        .layer(axum::extract::DefaultBodyLimit::max(http::MAX_BODY_BYTES));
    // On the outer router: inside the nest, axum has already dropped an empty segment after `/v1`.
    Router::new().nest("/v1", v1).layer(axum::middleware::from_fn(http::refuse_unclean_paths))
}

/// What must happen to a `/v1` request before routing (a layer on a router runs after it, when a
/// GET-only route has already refused the verb), so it wraps a whole router: `LIST` served as
/// `GET ?list=true`, and the path rewritten to its canonical form (one trailing slash dropped,
/// escapes only where needed), so that `/v1/sys/policies/acl/` finds its route. Both are plain
/// rewrites of the request, so they wrap the router without a middleware future of their own.
pub fn with_vault_requests(router: Router) -> Router {
    let rewrite = |request| http::canonical_uri(http::list_as_get(request));
    Router::new().fallback_service(tower::util::MapRequestLayer::new(rewrite).layer(router))
}

/// axum's bare 405, in Vault's format, keeping its `Allow` header.
async fn vault_method_not_allowed(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let response = next.run(request).await;
    if response.status() == axum::http::StatusCode::METHOD_NOT_ALLOWED
        && !response.headers().contains_key(axum::http::header::CONTENT_TYPE)
    {
        let mut rendered = axum::response::IntoResponse::into_response(BrokerError::MethodNotAllowed);
        if let Some(allow) = response.headers().get(axum::http::header::ALLOW) {
            rendered.headers_mut().insert(axum::http::header::ALLOW, allow.clone());
        }
        return rendered;
    }
    response
}
