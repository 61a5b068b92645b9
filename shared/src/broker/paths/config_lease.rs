//! `config/lease`: how long iam_user leases last, and may be renewed to.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::broker::config;
use crate::broker::error::Result;
use crate::broker::http::VaultResponse;
use crate::broker::request::EngineRequest;

pub async fn read(request: &EngineRequest<'_>) -> Result<Response> {
    let lease = config::lease(request.state.store.as_ref(), &request.mount).await?;
    Ok(VaultResponse::data(config::lease_data(&lease)).into_response())
}

pub async fn exists(request: &EngineRequest<'_>) -> Result<bool> {
    config::lease_exists(request.state.store.as_ref(), &request.mount).await
}

pub async fn write(request: &EngineRequest<'_>) -> Result<Response> {
    config::write_lease(request.state.store.as_ref(), &request.mount, &request.object()?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
