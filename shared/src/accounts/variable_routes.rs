//! The workspace variable routes (`/workspaces/:id/vars`). Each handler parses, calls one
//! domain function and renders.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use super::render;
use super::variables::{self, Category, VariableChanges};
use crate::api::{ApiError, Document, JsonApiBody, Listing};
use crate::auth::Principal;
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/workspaces/{id}/vars", get(list).post(create))
        .route("/api/v2/workspaces/{id}/vars/{var}", get(show).patch(update).delete(delete))
}

#[derive(Deserialize)]
struct VariableAttrs {
    key: Option<String>,
    value: Option<String>,
    description: Option<String>,
    category: Option<String>,
    hcl: Option<bool>,
    sensitive: Option<bool>,
}

fn changes(body: &JsonApiBody) -> Result<VariableChanges> {
    let attrs = body.resource::<VariableAttrs>(&["vars"])?.attributes;
    Ok(VariableChanges {
        key: attrs.key,
        value: attrs.value,
        description: attrs.description,
        category: attrs.category.as_deref().map(Category::parse).transpose()?,
        hcl: attrs.hcl,
        sensitive: attrs.sensitive,
    })
}

async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let (new, max) = (changes(&body)?, state.config.max_workspace_variables);
    let variable = variables::create(state.store.as_ref(), state.sealer.as_ref(), &principal, &id, new, max).await?;
    Ok(Document::one(render::variable(&variable)).created())
}

async fn list(
    State(state): State<AppState>,
    principal: Principal,
    listing: Listing,
    Path(id): Path<String>,
) -> Result<Document> {
    let all = variables::list(state.store.as_ref(), &principal, &id).await?;
    let total = all.len();
    let resources = listing.page.slice(all).iter().map(render::variable).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, variable)): Path<(String, String)>,
) -> Result<Document> {
    let variable = variables::get(state.store.as_ref(), &principal, &id, &variable).await?;
    Ok(Document::one(render::variable(&variable)))
}

async fn update(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, variable)): Path<(String, String)>,
    body: JsonApiBody,
) -> Result<Document> {
    let changes = changes(&body)?;
    let store = state.store.as_ref();
    let variable = variables::update(store, state.sealer.as_ref(), &principal, &id, &variable, changes).await?;
    Ok(Document::one(render::variable(&variable)))
}

async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    Path((id, variable)): Path<(String, String)>,
) -> Result<StatusCode> {
    variables::delete(state.store.as_ref(), &principal, &id, &variable).await?;
    Ok(StatusCode::NO_CONTENT)
}
