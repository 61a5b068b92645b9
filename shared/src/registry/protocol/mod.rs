//! The module registry protocol that `terraform init` speaks (function `registry-protocol`):
//! service discovery, the private registry under `/api/registry/v1/modules` (namespace = the
//! organization's name, only `ok` versions), and the public proxy under
//! `/api/registry/public/v1/modules` for modules an organization has curated.

mod error;
mod private;
mod proxy;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use serde_json::{json, Value};

pub use error::ProtocolError;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    let protocol = Router::new()
        .merge(private::routes())
        .merge(proxy::routes())
        // Unknown paths under /api/registry answer in the protocol's own error shape too.
        .route("/api/registry/{*rest}", any(|| async { ProtocolError::NotFound }))
        .layer(middleware::from_fn(method_not_allowed));
    Router::new().route("/.well-known/terraform.json", get(discovery)).merge(protocol)
}

/// axum's bare 405 in the protocol's error shape, keeping its `Allow` header.
async fn method_not_allowed(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED || response.headers().contains_key(header::CONTENT_TYPE) {
        return response;
    }
    let mut rendered = ProtocolError::MethodNotAllowed.into_response();
    if let Some(allow) = response.headers().get(header::ALLOW) {
        rendered.headers_mut().insert(header::ALLOW, allow.clone());
    }
    rendered
}

/// Service discovery: where the module registry and the management API live. Unauthenticated.
async fn discovery() -> Json<Value> {
    Json(json!({
        "modules.v1": "/api/registry/v1/modules/",
        "tfe.v2": "/api/v2/",
        "tfe.v2.1": "/api/v2/",
        "tfe.v2.2": "/api/v2/",
    }))
}
