//! `static-roles/` (list), `static-roles/:name` (read, create or update, delete) and
//! `static-creds/:name`. Reads answer at the top level as the spec places them, and in `data`
//! too, where Vault clients look.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::broker::error::{BrokerError, Result};
use crate::broker::http::VaultResponse;
use crate::broker::request::EngineRequest;
use crate::broker::statics;

pub async fn list(request: &EngineRequest<'_>) -> Result<Response> {
    let names = statics::list(request.state.store.as_ref(), &request.mount).await?;
    Ok(VaultResponse::keys(names)?.into_response())
}

pub async fn read(request: &EngineRequest<'_>) -> Result<Response> {
    let role = statics::load(request.state.store.as_ref(), &request.mount, request.name).await?;
    let role = role.ok_or(BrokerError::NotFound)?;
    let fields = json!({ "name": role.name, "username": role.username, "rotation_period": role.rotation_period });
    Ok(VaultResponse::top_level(fields).into_response())
}

pub async fn exists(request: &EngineRequest<'_>) -> Result<bool> {
    Ok(statics::load(request.state.store.as_ref(), &request.mount, request.name).await?.is_some())
}

pub async fn write(request: &EngineRequest<'_>) -> Result<Response> {
    statics::write(request.state, &request.mount, request.name, &request.object()?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn delete(request: &EngineRequest<'_>) -> Result<Response> {
    statics::delete(request.state, &request.mount, request.name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `static-creds/:name`: the role's current key.
pub async fn creds(request: &EngineRequest<'_>) -> Result<Response> {
    let (access_key, secret_key) = statics::creds(request.state, &request.mount, request.name).await?;
    Ok(VaultResponse::top_level(json!({ "access_key": access_key, "secret_key": secret_key })).into_response())
}
