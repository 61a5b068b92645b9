//! `roles/` (list) and `roles/:name` (read, create or update, delete).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::broker::error::{BrokerError, Result};
use crate::broker::http::VaultResponse;
use crate::broker::request::EngineRequest;
use crate::broker::roles;

pub async fn list(request: &EngineRequest<'_>) -> Result<Response> {
    let names = roles::list(request.state.store.as_ref(), &request.mount).await?;
    Ok(VaultResponse::keys(names)?.into_response())
}

/// A stored role that no longer validates is shown with its stored fields and `invalid_data`,
/// as Vault shows it, so that it can be fixed.
pub async fn read(request: &EngineRequest<'_>) -> Result<Response> {
    let role = roles::load(request.state.store.as_ref(), &request.mount, request.name).await?;
    let data = match role.ok_or(BrokerError::NotFound)? {
        Ok(role) => roles::to_data(&role),
        Err(invalid) => invalid.data(),
    };
    Ok(VaultResponse::data(data).into_response())
}

/// A stored role exists even when it no longer validates: writing it is an update.
pub async fn exists(request: &EngineRequest<'_>) -> Result<bool> {
    Ok(roles::load(request.state.store.as_ref(), &request.mount, request.name).await?.is_some())
}

pub async fn write(request: &EngineRequest<'_>) -> Result<Response> {
    // Unlike the other paths, which take a `null` body as an empty one, a role write refuses it.
    if matches!(request.body, Some(Value::Null)) {
        return Err(BrokerError::invalid("the request body must be a JSON object"));
    }
    roles::write(
        request.state.store.as_ref(),
        &request.state.config.broker_limits,
        &request.mount,
        request.name,
        &request.object()?,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn delete(request: &EngineRequest<'_>) -> Result<Response> {
    if !roles::delete(request.state.store.as_ref(), &request.mount, request.name).await? {
        return Err(BrokerError::NotFound);
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}
