//! Vault's own endpoints the broker serves: `sys/mounts`, `sys/policies/acl` (and the older
//! `sys/policy`), and `auth/token` create / lookup-self / revoke-self.

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::{BrokerError, Result};
use super::http::{is_list, Caller, VaultBody, VaultResponse};
use super::{duration, leases, mounts, policies, tokens};
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/sys/mounts", get(list_mounts))
        .route("/sys/mounts/{*path}", get(show_mount).post(create_mount).put(create_mount).delete(delete_mount))
        .route("/sys/policies/acl", get(list_policies))
        .route("/sys/policies/acl/{name}", get(show_policy).post(write_policy).put(write_policy).delete(delete_policy))
        .route("/sys/policy", get(list_policies_legacy))
        .route("/sys/policy/{name}", get(show_policy_legacy).post(write_policy).put(write_policy).delete(delete_policy))
        .route("/auth/token/create", post(create_token).put(create_token))
        .route("/auth/token/lookup-self", get(lookup_self))
        .route("/auth/token/revoke-self", post(revoke_self).put(revoke_self))
}

async fn authorize(state: &AppState, caller: &Caller, path: &str, capability: &str) -> Result<()> {
    policies::require(state.store.as_ref(), &caller.0, path, capability).await
}

async fn list_mounts(State(state): State<AppState>, caller: Caller) -> Result<VaultResponse> {
    authorize(&state, &caller, "sys/mounts", "read").await?;
    let mounts: Map<String, Value> = mounts::all(state.store.as_ref())
        .await?
        .iter()
        .map(|m| (format!("{}/", m.path), mounts::describe(m)))
        .collect();
    // Vault returns the mounts both in `data` and at the top level; older clients read the latter.
    Ok(VaultResponse::top_level(Value::Object(mounts)))
}

async fn show_mount(State(state): State<AppState>, caller: Caller, Path(path): Path<String>) -> Result<VaultResponse> {
    authorize(&state, &caller, &format!("sys/mounts/{}", path.trim_matches('/')), "read").await?;
    let path = mounts::normalize(&path)?;
    let mount =
        mounts::all(state.store.as_ref()).await?.into_iter().find(|m| m.path == path).ok_or(BrokerError::NotFound)?;
    Ok(VaultResponse::data(mounts::describe(&mount)))
}

#[derive(Deserialize)]
struct MountRequest {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    description: String,
}

async fn create_mount(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<String>,
    body: VaultBody,
) -> Result<StatusCode> {
    authorize(&state, &caller, &format!("sys/mounts/{}", path.trim_matches('/')), "create").await?;
    let request: MountRequest = serde_json::from_value(Value::Object(body.object()?))
        .map_err(|e| BrokerError::invalid(format!("invalid mount request: {e}")))?;
    mounts::create(state.store.as_ref(), &path, &request.kind, &request.description).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_mount(State(state): State<AppState>, caller: Caller, Path(path): Path<String>) -> Result<StatusCode> {
    authorize(&state, &caller, &format!("sys/mounts/{}", path.trim_matches('/')), "delete").await?;
    leases::unmount(&state, &path).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_policies(
    State(state): State<AppState>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<VaultResponse> {
    if !is_list(query.as_deref()) {
        return Err(BrokerError::MethodNotAllowed);
    }
    authorize(&state, &caller, "sys/policies/acl/", "list").await?;
    VaultResponse::keys(policies::names(state.store.as_ref()).await?)
}

async fn list_policies_legacy(State(state): State<AppState>, caller: Caller) -> Result<VaultResponse> {
    authorize(&state, &caller, "sys/policy", "read").await?;
    let names = policies::names(state.store.as_ref()).await?;
    Ok(VaultResponse::top_level(json!({ "policies": names, "keys": names })))
}

async fn show_policy(State(state): State<AppState>, caller: Caller, Path(name): Path<String>) -> Result<VaultResponse> {
    authorize(&state, &caller, &format!("sys/policies/acl/{name}"), "read").await?;
    let policy = policies::load(state.store.as_ref(), &name).await?.ok_or(BrokerError::NotFound)?;
    Ok(VaultResponse::data(json!({ "name": policy.name, "policy": policy.policy })))
}

async fn show_policy_legacy(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<VaultResponse> {
    authorize(&state, &caller, &format!("sys/policy/{name}"), "read").await?;
    let policy = policies::load(state.store.as_ref(), &name).await?.ok_or(BrokerError::NotFound)?;
    Ok(VaultResponse::top_level(json!({ "name": policy.name, "rules": policy.policy })))
}

async fn write_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    body: VaultBody,
) -> Result<StatusCode> {
    authorize(&state, &caller, &format!("sys/policies/acl/{name}"), "update").await?;
    let body = body.object()?;
    // `policy` is the current field; the older `sys/policy` endpoint took `rules`.
    let text = body.get("policy").or_else(|| body.get("rules")).and_then(Value::as_str);
    let text = text.ok_or_else(|| BrokerError::invalid("'policy' parameter not supplied or empty"))?;
    policies::write(state.store.as_ref(), &name, text).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_policy(State(state): State<AppState>, caller: Caller, Path(name): Path<String>) -> Result<StatusCode> {
    authorize(&state, &caller, &format!("sys/policies/acl/{name}"), "delete").await?;
    policies::delete(state.store.as_ref(), &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn create_token(State(state): State<AppState>, caller: Caller, body: VaultBody) -> Result<VaultResponse> {
    authorize(&state, &caller, "auth/token/create", "update").await?;
    let body = body.object()?;
    let policies = match body.get("policies") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(items.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
        Some(Value::String(list)) => Some(list.split(',').map(|p| p.trim().to_owned()).collect()),
        Some(_) => return Err(BrokerError::invalid("policies must be a list of policy names")),
    };
    let ttl = match body.get("ttl") {
        None | Some(Value::Null) => None,
        Some(value) => Some(duration::parse(value).map_err(BrokerError::invalid)?),
    };
    let display_name = body.get("display_name").and_then(Value::as_str).map(str::to_owned);
    let new = tokens::NewToken { policies, ttl, display_name };
    let (secret, token) = tokens::create(state.store.as_ref(), &caller.0, new).await?;
    Ok(VaultResponse::auth(tokens::auth(&secret, &token)))
}

async fn lookup_self(
    State(state): State<AppState>,
    caller: Caller,
    headers: axum::http::HeaderMap,
) -> Result<VaultResponse> {
    authorize(&state, &caller, "auth/token/lookup-self", "read").await?;
    let secret = ["x-vault-token", "x-service-token"]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()))
        .unwrap_or_default();
    Ok(VaultResponse::data(tokens::lookup(secret, &caller.0)))
}

async fn revoke_self(State(state): State<AppState>, caller: Caller) -> Result<StatusCode> {
    authorize(&state, &caller, "auth/token/revoke-self", "update").await?;
    tokens::revoke(state.store.as_ref(), &caller.0).await?;
    Ok(StatusCode::NO_CONTENT)
}
