//! `identity/oidc/plugins/.well-known/*`: what AWS reads to check the broker's workload identity
//! tokens (Vault Enterprise's plugin identity issuer): the OpenID discovery document and the
//! signing key set. Public, as an OIDC issuer's are; nothing in them is secret.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use super::error::{BrokerError, Result};
use crate::api::BaseUrl;
use crate::identity;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/identity/oidc/plugins/.well-known/openid-configuration", get(discovery))
        .route("/identity/oidc/plugins/.well-known/keys", get(keys))
}

async fn discovery(State(state): State<AppState>, BaseUrl(base): BaseUrl) -> Result<Response> {
    state.identity.as_ref().ok_or(BrokerError::NotFound)?;
    Ok(Json(identity::discovery(&base)).into_response())
}

async fn keys(State(state): State<AppState>) -> Result<Response> {
    let signer = state.identity.as_ref().ok_or(BrokerError::NotFound)?;
    let set = identity::jwks(signer.as_ref()).await.map_err(|e| BrokerError::Internal(e.to_string()))?;
    Ok(Json(set).into_response())
}
