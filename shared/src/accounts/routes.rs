//! The accounts routes. Each handler parses, calls one domain function and renders.

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::Value;

use super::access;
use super::entitlements;
use super::locks::{self, LockChange};
use super::oauth::{self, NewOAuthClient};
use super::org_tokens;
use super::organizations::{self, NewOrganization, OrganizationChanges};
use super::render;
use super::teams::{self, NewTeam, NewToken};
use super::workspaces::{
    self, Execution, Found, NewWorkspace, SettingsChanges, WorkspaceAt, WorkspaceChanges, WorkspacePermissions,
};
use crate::api::BaseUrl;
use crate::api::{ApiError, Document, Incoming, JsonApiBody, Listing};
use crate::auth::{OrganizationAccess, Permission, Principal};
use crate::config::Edition;
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v2/ping", get(ping))
        .route("/api/v2/account/details", get(account_details))
        .route("/api/v2/organizations", get(list_organizations).post(create_organization))
        .route(
            "/api/v2/organizations/{org}",
            get(show_organization).patch(update_organization).delete(delete_organization),
        )
        .route("/api/v2/organizations/{org}/entitlement-set", get(show_entitlements))
        .route("/api/v2/organizations/{org}/teams", get(list_teams).post(create_team))
        .route("/api/v2/teams/{id}", get(show_team).delete(delete_team))
        .route(
            "/api/v2/teams/{id}/authentication-token",
            get(show_team_token).post(create_team_token).delete(delete_team_token),
        )
        .route(
            "/api/v2/organizations/{org}/authentication-token",
            get(show_organization_token).post(create_organization_token).delete(delete_organization_token),
        )
        .route("/api/v2/organizations/{org}/workspaces", get(list_workspaces).post(create_workspace))
        .route(
            "/api/v2/organizations/{org}/workspaces/{name}",
            get(show_workspace_by_name).patch(update_workspace_by_name).delete(delete_workspace_by_name),
        )
        .route("/api/v2/workspaces/{id}", get(show_workspace).patch(update_workspace).delete(delete_workspace))
        .route("/api/v2/workspaces/{id}/actions/safe-delete", post(safe_delete_workspace))
        .route("/api/v2/organizations/{org}/workspaces/{name}/actions/safe-delete", post(safe_delete_workspace_by_name))
        .route("/api/v2/workspaces/{id}/actions/lock", post(lock_workspace).layer(DefaultBodyLimit::max(MAX_LOCK_BODY)))
        .route("/api/v2/workspaces/{id}/actions/unlock", post(unlock_workspace))
        .route("/api/v2/workspaces/{id}/actions/force-unlock", post(force_unlock_workspace))
        .route("/api/v2/organizations/{org}/oauth-clients", get(list_oauth_clients).post(create_oauth_client))
        .route("/api/v2/oauth-clients/{id}", get(show_oauth_client).delete(delete_oauth_client))
        .route("/api/v2/oauth-clients/{id}/oauth-tokens", get(list_oauth_tokens))
        .route("/api/v2/oauth-tokens/{id}", get(show_oauth_token))
        .merge(super::variable_routes::router())
        .merge(super::team_access_routes::router())
}

/// go-tfe and pytfe call this first and read the API version and rate limit from it.
async fn ping(State(state): State<AppState>) -> Response {
    let app_name = match state.config.edition {
        Edition::SelfHosted => "Terraform Enterprise",
        Edition::Hosted | Edition::Enterprise => "HCP Terraform",
    };
    let headers = [
        (HeaderName::from_static("tfp-api-version"), HeaderValue::from_static("2.6")),
        (HeaderName::from_static("tfp-appname"), HeaderValue::from_static(app_name)),
        (HeaderName::from_static("x-ratelimit-limit"), HeaderValue::from_static("30")),
    ];
    (StatusCode::NO_CONTENT, headers).into_response()
}

async fn account_details(principal: Principal) -> Document {
    Document::one(render::user(&principal))
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct OrganizationAttrs {
    name: Option<String>,
    email: Option<String>,
}

async fn create_organization(
    State(state): State<AppState>,
    principal: Principal,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<OrganizationAttrs>(&["organizations"])?.attributes;
    let new = NewOrganization {
        name: attrs.name.ok_or_else(|| ApiError::invalid("/data/attributes/name", "`name` is required."))?,
        email: attrs.email.ok_or_else(|| ApiError::invalid("/data/attributes/email", "`email` is required."))?,
    };
    let org = organizations::create(state.store.as_ref(), &principal, new).await?;
    Ok(Document::one(render::organization(&org, &principal)).created())
}

async fn list_organizations(State(state): State<AppState>, principal: Principal, listing: Listing) -> Result<Document> {
    let (orgs, total) = organizations::list(state.store.as_ref(), &principal, &listing.page).await?;
    let resources = orgs.iter().map(|org| render::organization(org, &principal)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_organization(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
) -> Result<Document> {
    let org = access::visible(state.store.as_ref(), &principal, &org).await?;
    Ok(Document::one(render::organization(&org, &principal)))
}

async fn update_organization(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<OrganizationAttrs>(&["organizations"])?.attributes;
    let changes = OrganizationChanges { name: attrs.name, email: attrs.email };
    let org = organizations::update(state.store.as_ref(), &principal, &org, changes).await?;
    Ok(Document::one(render::organization(&org, &principal)))
}

async fn delete_organization(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
) -> Result<StatusCode> {
    organizations::delete(state.store.as_ref(), state.blobs.as_ref(), &principal, &org).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct TeamAttrs {
    name: String,
    #[serde(default)]
    organization_access: IncomingAccess,
    visibility: Option<String>,
}

/// `organization-access` as clients send it: any subset of flags, nulls meaning false; flags
/// Hangar has no use for are accepted and ignored.
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct IncomingAccess {
    manage_modules: Option<bool>,
    manage_providers: Option<bool>,
    manage_agent_pools: Option<bool>,
    manage_workspaces: Option<bool>,
}

impl From<IncomingAccess> for OrganizationAccess {
    fn from(access: IncomingAccess) -> Self {
        OrganizationAccess {
            manage_modules: access.manage_modules.unwrap_or(false),
            manage_providers: access.manage_providers.unwrap_or(false),
            manage_agent_pools: access.manage_agent_pools.unwrap_or(false),
            manage_workspaces: access.manage_workspaces.unwrap_or(false),
        }
    }
}

async fn create_team(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<TeamAttrs>(&["teams"])?.attributes;
    let new = NewTeam { name: attrs.name, access: attrs.organization_access.into(), visibility: attrs.visibility };
    let team = teams::create(state.store.as_ref(), &principal, &org, new).await?;
    Ok(Document::one(render::team(&team, &org)).created())
}

async fn list_teams(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let (teams, total) = teams::list(state.store.as_ref(), &principal, &org, &listing.page).await?;
    let resources = teams.iter().map(|team| render::team(team, &org)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_team(State(state): State<AppState>, principal: Principal, Path(id): Path<String>) -> Result<Document> {
    let (team, org) = teams::show(state.store.as_ref(), &principal, &id).await?;
    Ok(Document::one(render::team(&team, &org.name)))
}

async fn delete_team(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    teams::delete(state.store.as_ref(), &principal, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct TokenAttrs {
    description: Option<String>,
    expired_at: Option<chrono::DateTime<chrono::Utc>>,
}

async fn create_team_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    // go-tfe sends the plural type, HCP's docs the singular: both are taken.
    let attrs: TokenAttrs = body.attributes_or_default(&["authentication-tokens", "authentication-token"])?;
    let new = NewToken { description: attrs.description, expired_at: attrs.expired_at };
    let (team, token, secret) = teams::create_token(state.store.as_ref(), &principal, &id, new).await?;
    Ok(Document::one(render::token(&token, &team, Some(&secret))).created())
}

async fn create_organization_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs: TokenAttrs = body.attributes_or_default(&["authentication-tokens", "authentication-token"])?;
    let new = NewToken { description: attrs.description, expired_at: attrs.expired_at };
    let (token, secret) = org_tokens::create(state.store.as_ref(), &principal, &org, new).await?;
    Ok(Document::one(render::organization_token(&token, Some(&secret))).created())
}

async fn show_entitlements(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
) -> Result<Document> {
    let (org, features) = entitlements::of(state.store.as_ref(), &principal, &org).await?;
    Ok(Document::one(render::entitlements(&org, &features)))
}

/// The organization token's metadata (never its secret), for the owners.
async fn show_organization_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
) -> Result<Document> {
    let token = org_tokens::show(state.store.as_ref(), &principal, &org).await?;
    Ok(Document::one(render::organization_token(&token, None)))
}

async fn delete_organization_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
) -> Result<StatusCode> {
    org_tokens::delete(state.store.as_ref(), &principal, &org).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The team token's metadata (never its secret), for the owners.
async fn show_team_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Document> {
    let (team, token) = teams::token(state.store.as_ref(), &principal, &id).await?;
    Ok(Document::one(render::token(&token, &team, None)))
}

async fn delete_team_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    teams::delete_token(state.store.as_ref(), &principal, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct WorkspaceAttrs {
    name: Option<String>,
    description: Option<String>,
    execution_mode: Option<String>,
    /// go-tfe sends the pool as this attribute; the API's own form is the `agent-pool`
    /// relationship. Both are accepted.
    agent_pool_id: Option<String>,
    terraform_version: Option<String>,
    working_directory: Option<String>,
    auto_apply: Option<bool>,
}

impl WorkspaceAttrs {
    fn settings(&self) -> SettingsChanges {
        SettingsChanges {
            terraform_version: self.terraform_version.clone(),
            working_directory: self.working_directory.clone(),
            auto_apply: self.auto_apply,
        }
    }
}

/// The execution a workspace request asks for, from its attributes and relationships.
fn execution(incoming: &Incoming<WorkspaceAttrs>) -> Result<Execution> {
    let relationship = incoming.to_one("agent-pool", "agent-pools")?.map(|pool| pool.map(|p| p.id));
    let agent_pool = relationship.or_else(|| incoming.attributes.agent_pool_id.clone().map(Some));
    Ok(Execution { mode: incoming.attributes.execution_mode.clone(), agent_pool })
}

async fn create_workspace(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let incoming = body.resource::<WorkspaceAttrs>(&["workspaces"])?;
    let name = incoming
        .attributes
        .name
        .clone()
        .ok_or_else(|| ApiError::invalid("/data/attributes/name", "`name` is required."))?;
    let new = NewWorkspace {
        name,
        description: incoming.attributes.description.clone(),
        execution: execution(&incoming)?,
        settings: incoming.attributes.settings(),
    };
    let (workspace, org) = workspaces::create(state.store.as_ref(), &principal, &org, new).await?;
    Ok(Document::one(render::workspace(&workspace, &org.name, &WorkspacePermissions::ALL)).created())
}

/// A workspace found for the caller, rendered with what the caller may do with it.
fn shown(found: &Found) -> Document {
    Document::one(render::workspace(&found.workspace, &found.org.name, &found.may))
}

fn changes(body: &JsonApiBody) -> Result<WorkspaceChanges> {
    let incoming = body.resource::<WorkspaceAttrs>(&["workspaces"])?;
    Ok(WorkspaceChanges {
        name: incoming.attributes.name.clone(),
        description: incoming.attributes.description.clone(),
        execution: execution(&incoming)?,
        settings: incoming.attributes.settings(),
    })
}

async fn update_workspace(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let changes = changes(&body)?;
    let found = workspaces::update(state.store.as_ref(), &principal, WorkspaceAt::Id(&id), changes).await?;
    Ok(shown(&found))
}

async fn update_workspace_by_name(
    State(state): State<AppState>,
    principal: Principal,
    Path((org, name)): Path<(String, String)>,
    body: JsonApiBody,
) -> Result<Document> {
    let changes = changes(&body)?;
    let at = WorkspaceAt::Name { org: &org, name: &name };
    Ok(shown(&workspaces::update(state.store.as_ref(), &principal, at, changes).await?))
}

async fn list_workspaces(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    listing: Listing,
) -> Result<Document> {
    // HCP's filters Hangar does not apply.
    let unsupported = [
        "search[tags]",
        "search[exclude-tags]",
        "search[wildcard-name]",
        "filter[project][id]",
        "filter[current-run][status]",
        "filter[tagged]",
    ];
    listing.params.refuse(&unsupported, "Hangar does not filter workspaces by this; use `search[name]`")?;
    let search = listing.params.non_empty("search[name]");
    let (list, matching, org) = workspaces::list(state.store.as_ref(), &principal, &org, search, &listing.page).await?;
    let resources = list.iter().map(|(ws, may)| render::workspace(ws, &org.name, may)).collect();
    Ok(Document::page(resources, &listing.envelope(matching)))
}

async fn show_workspace(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Document> {
    Ok(shown(&workspaces::find(state.store.as_ref(), &principal, WorkspaceAt::Id(&id)).await?))
}

async fn show_workspace_by_name(
    State(state): State<AppState>,
    principal: Principal,
    Path((org, name)): Path<(String, String)>,
) -> Result<Document> {
    let at = WorkspaceAt::Name { org: &org, name: &name };
    Ok(shown(&workspaces::find(state.store.as_ref(), &principal, at).await?))
}

async fn delete_workspace(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    workspaces::delete(state.store.as_ref(), state.blobs.as_ref(), &principal, WorkspaceAt::Id(&id), false).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_workspace_by_name(
    State(state): State<AppState>,
    principal: Principal,
    Path((org, name)): Path<(String, String)>,
) -> Result<StatusCode> {
    let at = WorkspaceAt::Name { org: &org, name: &name };
    workspaces::delete(state.store.as_ref(), state.blobs.as_ref(), &principal, at, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// HCP's `safe-delete`: refused (409) while the workspace is locked or its state holds resources.
async fn safe_delete_workspace(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    workspaces::delete(state.store.as_ref(), state.blobs.as_ref(), &principal, WorkspaceAt::Id(&id), true).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn safe_delete_workspace_by_name(
    State(state): State<AppState>,
    principal: Principal,
    Path((org, name)): Path<(String, String)>,
) -> Result<StatusCode> {
    let at = WorkspaceAt::Name { org: &org, name: &name };
    workspaces::delete(state.store.as_ref(), state.blobs.as_ref(), &principal, at, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The largest body `actions/lock` reads: a reason of at most `locks::MAX_REASON` bytes, in JSON.
const MAX_LOCK_BODY: usize = 8 * 1024;

/// `actions/lock`: the body names a reason, as HCP's `{"reason": "…"}` or in a JSON:API
/// document's attributes; it may be empty.
async fn lock_workspace(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Document> {
    let change = LockChange::Lock { reason: lock_reason(&body)? };
    Ok(shown(&locks::change(&state, &principal, &id, change).await?))
}

async fn unlock_workspace(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Document> {
    Ok(shown(&locks::change(&state, &principal, &id, LockChange::Unlock).await?))
}

async fn force_unlock_workspace(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Document> {
    Ok(shown(&locks::change(&state, &principal, &id, LockChange::ForceUnlock).await?))
}

fn lock_reason(body: &[u8]) -> Result<Option<String>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    let (reason, pointer) = match value.pointer("/data/attributes/reason") {
        Some(reason) => (reason, "/data/attributes/reason"),
        None => (value.get("reason").unwrap_or(&Value::Null), "/reason"),
    };
    match reason {
        Value::Null => Ok(None),
        Value::String(reason) => Ok(Some(reason.clone())),
        _ => Err(ApiError::invalid(pointer, "must be a string")),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct OAuthClientAttrs {
    service_provider: Option<String>,
    name: Option<String>,
    http_url: Option<String>,
    api_url: Option<String>,
    oauth_token_string: Option<String>,
}

async fn create_oauth_client(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    Path(org): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<OAuthClientAttrs>(&["oauth-clients"])?.attributes;
    let new = NewOAuthClient {
        service_provider: attrs.service_provider,
        name: attrs.name,
        http_url: attrs.http_url,
        api_url: attrs.api_url,
        oauth_token_string: attrs.oauth_token_string,
    };
    let (client, org) = oauth::create(&state, &principal, &org, new).await?;
    Ok(Document::one(render::oauth_client(&client, &org.name, &base)).created())
}

async fn list_oauth_clients(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    Path(org): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let (clients, org, total) = oauth::list(state.store.as_ref(), &principal, &org, &listing.page).await?;
    let resources = clients.iter().map(|client| render::oauth_client(client, &org.name, &base)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_oauth_client(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    Path(id): Path<String>,
) -> Result<Document> {
    let (client, org) = oauth::get(state.store.as_ref(), &principal, &id, Permission::Read).await?;
    Ok(Document::one(render::oauth_client(&client, &org.name, &base)))
}

async fn delete_oauth_client(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    oauth::delete(state.store.as_ref(), &principal, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_oauth_tokens(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let tokens = oauth::tokens(state.store.as_ref(), &principal, &id).await?;
    let total = tokens.len();
    let resources = listing.page.slice(tokens).iter().map(render::oauth_token).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_oauth_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Document> {
    let token = oauth::get_token(state.store.as_ref(), &principal, &id).await?;
    Ok(Document::one(render::oauth_token(&token)))
}
