//! The module registry protocol that `terraform init` speaks (function `registry-protocol`):
//! service discovery, the private registry under `/api/registry/v1/modules` (namespace = the
//! organization's name, only `ok` versions), and the public proxy under
//! `/api/registry/public/v1/modules` for modules an organization has curated, and the private
//! providers under `/api/registry/v1/providers`.

mod detail;
mod error;
mod private;
mod providers;
mod proxy;

use axum::middleware;
use axum::routing::{any, get};
use axum::{Json, Router};
use serde_json::{json, Value};

pub use error::ProtocolError;

use crate::api::refusal::render_refusals;
use crate::state::AppState;

/// The protocol's routes; axum's refusals (a 405, a path that does not parse) answer in the
/// protocol's own error shape too.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/.well-known/terraform.json", get(discovery))
        .merge(private::routes())
        .merge(providers::routes())
        .merge(proxy::routes())
        // Unknown paths under /api/registry answer in the protocol's own error shape too.
        .route("/api/registry/{*rest}", any(|| async { ProtocolError::NotFound }))
        .layer(middleware::from_fn(|request, next| render_refusals(request, next, ProtocolError::refused)))
}

/// Service discovery: where the module registry and the management API live. Unauthenticated.
async fn discovery() -> Json<Value> {
    Json(json!({
        "modules.v1": "/api/registry/v1/modules/",
        "providers.v1": "/api/registry/v1/providers/",
        "tfe.v2": "/api/v2/",
        "tfe.v2.1": "/api/v2/",
        "tfe.v2.2": "/api/v2/",
    }))
}
