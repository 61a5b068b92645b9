//! The team access routes (`/team-workspaces`). Each handler parses, calls one domain function
//! and renders.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use super::grants::{Access, Runs, SentinelMocks, StateVersions, Variables};
use super::render;
use super::team_access::{self, CustomGrants, NewTeamAccess};
use crate::api::{ApiError, Document, Incoming, JsonApiBody, Listing};
use crate::auth::Principal;
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/team-workspaces", get(list).post(create))
        .route("/api/v2/team-workspaces/{id}", get(show).patch(update).delete(delete))
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct AccessAttrs {
    access: Option<String>,
    runs: Option<Runs>,
    variables: Option<Variables>,
    state_versions: Option<StateVersions>,
    sentinel_mocks: Option<SentinelMocks>,
    workspace_locking: Option<bool>,
    run_tasks: Option<bool>,
}

fn parse(body: &JsonApiBody) -> Result<(Incoming<AccessAttrs>, Option<Access>, CustomGrants)> {
    let incoming = body.resource::<AccessAttrs>(&["team-workspaces"])?;
    let attrs = &incoming.attributes;
    let access = attrs.access.as_deref().map(Access::parse).transpose()?;
    let custom = CustomGrants {
        runs: attrs.runs,
        variables: attrs.variables,
        state_versions: attrs.state_versions,
        sentinel_mocks: attrs.sentinel_mocks,
        workspace_locking: attrs.workspace_locking,
        run_tasks: attrs.run_tasks,
    };
    Ok((incoming, access, custom))
}

fn required(incoming: &Incoming<AccessAttrs>, name: &str, kind: &str) -> Result<String> {
    match incoming.to_one(name, kind)? {
        Some(Some(relationship)) => Ok(relationship.id),
        _ => Err(ApiError::invalid(format!("/data/relationships/{name}"), format!("`{name}` is required."))),
    }
}

async fn create(State(state): State<AppState>, principal: Principal, body: JsonApiBody) -> Result<Document> {
    let (incoming, access, custom) = parse(&body)?;
    let new = NewTeamAccess {
        workspace_id: required(&incoming, "workspace", "workspaces")?,
        team_id: required(&incoming, "team", "teams")?,
        access: access.ok_or_else(|| ApiError::invalid("/data/attributes/access", "`access` is required."))?,
        custom,
    };
    let access = team_access::create(state.store.as_ref(), &principal, new).await?;
    Ok(Document::one(render::team_access(&access)).created())
}

/// HCP's list: `filter[workspace][id]` is required.
async fn list(State(state): State<AppState>, principal: Principal, listing: Listing) -> Result<Document> {
    let name = "filter[workspace][id]";
    let workspace = listing
        .params
        .non_empty(name)
        .ok_or_else(|| ApiError::invalid_parameter(name, format!("`{name}` is required.")))?;
    let all = team_access::list(state.store.as_ref(), &principal, workspace).await?;
    let total = all.len();
    let resources = listing.page.slice(all).iter().map(render::team_access).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show(State(state): State<AppState>, principal: Principal, Path(id): Path<String>) -> Result<Document> {
    let access = team_access::get(state.store.as_ref(), &principal, &id).await?;
    Ok(Document::one(render::team_access(&access)))
}

async fn update(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let (_, access, custom) = parse(&body)?;
    let access = team_access::update(state.store.as_ref(), &principal, &id, access, custom).await?;
    Ok(Document::one(render::team_access(&access)))
}

async fn delete(State(state): State<AppState>, principal: Principal, Path(id): Path<String>) -> Result<StatusCode> {
    team_access::delete(state.store.as_ref(), &principal, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
