//! `config/root` (read, write) and `config/rotate-root`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::broker::config;
use crate::broker::error::Result;
use crate::broker::http::VaultResponse;
use crate::broker::request::EngineRequest;

pub async fn read(request: &EngineRequest<'_>) -> Result<Response> {
    let root = config::root(request.state.store.as_ref(), &request.mount).await?;
    Ok(VaultResponse::data(config::root_data(&root, request.state.config.edition)).into_response())
}

pub async fn exists(request: &EngineRequest<'_>) -> Result<bool> {
    config::root_exists(request.state.store.as_ref(), &request.mount).await
}

pub async fn write(request: &EngineRequest<'_>) -> Result<Response> {
    config::write_root(request.state, &request.mount, &request.object()?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn rotate(request: &EngineRequest<'_>) -> Result<Response> {
    let access_key = config::rotate_root(request.state, &request.mount).await?;
    Ok(VaultResponse::data(json!({ "access_key": access_key })).into_response())
}
