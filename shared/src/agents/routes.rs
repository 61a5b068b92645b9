//! The agent pool management routes. Each handler parses, calls one domain function, renders.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::json;

use super::agents;
use super::pools::{self, NewPool, PoolChanges, PoolQuery, Shown};
use super::render;
use super::tokens;
use crate::accounts::grants::WorkspacePermissions;
use crate::api::{ApiError, Document, Incoming, JsonApiBody, Listing, Resource};
use crate::auth::{Permission, Principal};
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/organizations/{org}/agent-pools", get(list_pools).post(create_pool))
        .route("/api/v2/agent-pools/{id}", get(show_pool).patch(update_pool).delete(delete_pool))
        .route("/api/v2/agent-pools/{id}/agents", get(list_agents))
        .route("/api/v2/agent-pools/{id}/authentication-tokens", get(list_tokens).post(create_token))
        .route("/api/v2/agents/{id}", get(show_agent).delete(delete_agent))
        .route("/api/v2/authentication-tokens/{id}", get(show_token).delete(delete_token))
}

/// Pools with their agent counts, and the workspaces attached to them when asked (and the caller
/// sees them all), rendered.
fn render_pools(shown: &Shown, principal: &Principal) -> (Vec<Resource>, Vec<Resource>) {
    let Shown { org, pools, workspaces, .. } = shown;
    let resources =
        pools.iter().map(|(pool, count)| render::pool(pool, &org.name, *count, |id| shown.sees(id))).collect();
    // Included in full only for a caller that sees every workspace of the organization: a team
    // sees a workspace only through its access to it, which this list does not read.
    let may = WorkspacePermissions::org_wide(principal, &org.id);
    let shown = workspaces.iter().filter(|_| may.see);
    let included = shown.map(|workspace| crate::accounts::render::workspace(workspace, &org.name, &may)).collect();
    (resources, included)
}

fn includes_workspaces(listing_include: Option<&str>) -> Result<bool> {
    match listing_include {
        None => Ok(false),
        Some(include) if include.split(',').all(|part| part.trim() == "workspaces") => Ok(true),
        Some(_) => Err(ApiError::invalid_parameter("include", "include accepts only `workspaces`")),
    }
}

fn pool_query(listing: &Listing) -> Result<PoolQuery> {
    let sort = match listing.params.non_empty("sort") {
        None => None,
        Some(raw) => {
            let (field, descending) = raw.strip_prefix('-').map_or((raw, false), |field| (field, true));
            if field != "name" && field != "created-at" {
                return Err(ApiError::invalid_parameter(
                    "sort",
                    "sort must be name or created-at, with a leading - to reverse",
                ));
            }
            Some((field.to_owned(), descending))
        }
    };
    listing.params.refuse(
        &["filter[allowed_projects][name]"],
        "Hangar has no projects, so agent pools cannot be filtered by project",
    )?;
    Ok(PoolQuery {
        q: listing.params.non_empty("q").map(str::to_owned),
        sort,
        allowed_workspace_name: listing.params.non_empty("filter[allowed_workspaces][name]").map(str::to_owned),
    })
}

async fn list_pools(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let query = pool_query(&listing)?;
    let include = includes_workspaces(listing.params.non_empty("include"))?;
    let (shown, matching, total) = pools::list_shown(&state, &principal, &org, &query, &listing.page, include).await?;
    let (resources, included) = render_pools(&shown, &principal);
    let document = Document::page(resources, &listing.envelope(matching))
        .meta("status-counts", json!({ "total": total, "matching": matching }));
    Ok(if include { document.included(included) } else { document })
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct PoolAttrs {
    name: Option<String>,
    organization_scoped: Option<bool>,
}

/// HCP Terraform scopes pools to projects and excludes workspaces from them; Hangar has no
/// projects and no exclusions, so a request that asks for either is refused, never ignored. An
/// empty list asks for nothing (the tfe provider sends one when it destroys such a resource).
fn refuse_unsupported<A>(incoming: &Incoming<A>) -> Result<()> {
    for (name, kind, why) in [
        ("allowed-projects", "projects", "Hangar has no projects; scope the pool to workspaces with `allowed-workspaces`"),
        ("excluded-workspaces", "workspaces", "Hangar does not exclude workspaces from a pool; list those allowed in `allowed-workspaces` and set `organization-scoped` to false"),
    ] {
        if incoming.to_many(name, kind)?.is_some_and(|entries| !entries.is_empty()) {
            return Err(ApiError::invalid(format!("/data/relationships/{name}"), why));
        }
    }
    Ok(())
}

async fn create_pool(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let incoming = body.resource::<PoolAttrs>(&["agent-pools"])?;
    refuse_unsupported(&incoming)?;
    let new = NewPool {
        name: incoming.attributes.name.clone().unwrap_or_default(),
        organization_scoped: incoming.attributes.organization_scoped,
        allowed_workspaces: incoming.to_many("allowed-workspaces", "workspaces")?,
    };
    let shown = pools::create(&state, &principal, &org, new).await?;
    let (mut resources, _) = render_pools(&shown, &principal);
    Ok(Document::one(resources.remove(0)).created())
}

async fn show_pool(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let include = includes_workspaces(listing.params.non_empty("include"))?;
    let shown = pools::show(&state, &principal, &id, include).await?;
    let (mut resources, included) = render_pools(&shown, &principal);
    let document = Document::one(resources.remove(0));
    Ok(if include { document.included(included) } else { document })
}

async fn update_pool(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let incoming = body.resource::<PoolAttrs>(&["agent-pools"])?;
    refuse_unsupported(&incoming)?;
    let changes = PoolChanges {
        name: incoming.attributes.name.clone(),
        organization_scoped: incoming.attributes.organization_scoped,
        allowed_workspaces: incoming.to_many("allowed-workspaces", "workspaces")?,
    };
    let shown = pools::update(&state, &principal, &id, changes).await?;
    let (mut resources, _) = render_pools(&shown, &principal);
    Ok(Document::one(resources.remove(0)))
}

async fn delete_pool(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    pools::delete(state.store.as_ref(), &principal, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_agents(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let since = match listing.params.non_empty("filter[last-ping-since]") {
        None => None,
        Some(raw) => Some(
            chrono::DateTime::parse_from_rfc3339(raw)
                .map_err(|_| ApiError::invalid_parameter("filter[last-ping-since]", "must be an ISO 8601 date-time"))?
                .with_timezone(&chrono::Utc),
        ),
    };
    let status = listing.params.non_empty("filter[status]");
    let statuses = [agents::IDLE, agents::BUSY, agents::UNKNOWN, agents::ERRORED, agents::EXITED];
    if let Some(status) = status.filter(|status| !statuses.contains(status)) {
        return Err(ApiError::invalid_parameter(
            "filter[status]",
            format!("`{status}` is not a status: use idle, busy, unknown, errored or exited"),
        ));
    }
    let (page, total) = agents::list(&state, &principal, &id, since, status, &listing.page).await?;
    let resources = page.iter().map(|agent| render::agent(agent, &state)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_agent(State(state): State<AppState>, principal: Principal, Path(id): Path<String>) -> Result<Document> {
    let agent = agents::get(state.store.as_ref(), &principal, &id, Permission::Read).await?;
    Ok(Document::one(render::agent(&agent, &state)))
}

async fn delete_agent(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    agents::delete(&state, &principal, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, Default)]
struct TokenAttrs {
    description: Option<String>,
}

async fn create_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    // HCP Terraform's clients send `authentication-tokens`; its docs also show `agent-tokens`.
    let attrs: TokenAttrs = body.attributes_or_default(&["authentication-tokens", "agent-tokens"])?;
    let (token, secret) = tokens::create(state.store.as_ref(), &principal, &id, attrs.description).await?;
    Ok(Document::one(render::token(&token, Some(&secret))).created())
}

async fn list_tokens(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let all = tokens::list(state.store.as_ref(), &principal, &id).await?;
    let total = all.len();
    let resources = listing.page.slice(all).iter().map(|token| render::token(token, None)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_token(State(state): State<AppState>, principal: Principal, Path(id): Path<String>) -> Result<Document> {
    let token = tokens::get(state.store.as_ref(), &principal, &id, Permission::Read).await?;
    Ok(Document::one(render::token(&token, None)))
}

async fn delete_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    tokens::delete(state.store.as_ref(), &principal, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
