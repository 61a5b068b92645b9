//! Vault's own endpoints the broker serves: `sys/mounts` and `sys/policies/acl` (and the older
//! `sys/policy`). The token store's are `sys_tokens.rs`, the leases' `sys_leases.rs`.

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::{BrokerError, Result};
use super::http::{is_list, Caller, VaultBody, VaultPath, VaultResponse};
use super::request::Operation;
use super::{auth_mounts, leases, mounts, policies};
use crate::state::AppState;
use crate::store::ItemStore;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/sys/mounts", get(list_mounts))
        .route("/sys/mounts/{*path}", get(show_mount).post(create_mount).put(create_mount).delete(delete_mount))
        .route("/sys/auth", get(list_auth_methods))
        .route(
            "/sys/auth/{*path}",
            get(show_auth_method).post(enable_auth_method).put(enable_auth_method).delete(disable_auth_method),
        )
        .route("/sys/policies/acl", get(list_policies))
        .route("/sys/policies/acl/{name}", get(show_policy).post(write_policy).put(write_policy).delete(delete_policy))
        .route("/sys/policy", get(list_policies_legacy))
        .route("/sys/policy/{name}", get(show_policy_legacy).post(write_policy).put(write_policy).delete(delete_policy))
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

async fn show_mount(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(path): Path<String>,
) -> Result<VaultResponse> {
    authorize(&state, &caller, &checked, "read").await?;
    let path = mounts::normalize(&path)?;
    let mount = mounted(state.store.as_ref(), &path).await?.ok_or(BrokerError::NotFound)?;
    Ok(VaultResponse::data(mounts::describe(&mount)))
}

/// The mount at exactly `path`, if any (a path no mount may have holds none).
async fn mounted(store: &dyn ItemStore, path: &str) -> Result<Option<mounts::Mount>> {
    let Ok(path) = mounts::normalize(path) else { return Ok(None) };
    Ok(mounts::all(store).await?.into_iter().find(|m| m.path == path))
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
    VaultPath(checked): VaultPath,
    Path(path): Path<String>,
    body: VaultBody,
) -> Result<StatusCode> {
    let exists = mounted(state.store.as_ref(), &path).await?.is_some();
    authorize(&state, &caller, &checked, Operation::write(exists).capability()).await?;
    let request: MountRequest = serde_json::from_value(Value::Object(body.object()?))
        .map_err(|e| BrokerError::invalid(format!("invalid mount request: {e}")))?;
    mounts::create(state.store.as_ref(), &path, &request.kind, &request.description).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_mount(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(path): Path<String>,
) -> Result<StatusCode> {
    authorize(&state, &caller, &checked, "delete").await?;
    leases::unmount(&state, &path).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_auth_methods(State(state): State<AppState>, caller: Caller) -> Result<VaultResponse> {
    super::jwt::list_methods(&state, &caller.0).await
}

async fn show_auth_method(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(path): Path<String>,
) -> Result<VaultResponse> {
    policies::require_sudo(state.store.as_ref(), &caller.0, &checked, "read").await?;
    let method = auth_mounts::find(state.store.as_ref(), &path).await?.ok_or(BrokerError::NotFound)?;
    Ok(VaultResponse::data(auth_mounts::describe(&method)))
}

#[derive(Deserialize)]
struct AuthMethodRequest {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    description: String,
    /// hvac sends these; a local mount or tuning is not offered, so only their defaults pass.
    #[serde(default)]
    local: bool,
    #[serde(default)]
    config: Option<Map<String, Value>>,
}

/// Enabling (or disabling) an auth method takes `sudo` on its `sys/auth/<path>`, as in Vault.
async fn enable_auth_method(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(path): Path<String>,
    body: VaultBody,
) -> Result<StatusCode> {
    policies::require_sudo(state.store.as_ref(), &caller.0, &checked, "update").await?;
    let request: AuthMethodRequest = serde_json::from_value(Value::Object(body.object()?))
        .map_err(|e| BrokerError::invalid(format!("invalid auth method request: {e}")))?;
    if request.local {
        return Err(BrokerError::invalid("local auth methods are not offered: the broker has one cluster"));
    }
    // The vault CLI sends its tuning flags' defaults ("0s", false, ""): only a value set is refused.
    if let Some((field, _)) = request.config.iter().flatten().find(|(_, value)| !is_default_tuning(value)) {
        return Err(BrokerError::invalid(format!("config.{field}: tuning auth methods is not offered")));
    }
    auth_mounts::enable(state.store.as_ref(), &path, &request.kind, &request.description).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A tuning value that changes nothing: none, false, zero, empty, or a zero duration.
fn is_default_tuning(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(set) => !set,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(text) => text.trim().is_empty() || super::duration::parse(value).is_ok_and(|d| d.is_zero()),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
    }
}

async fn disable_auth_method(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(path): Path<String>,
) -> Result<StatusCode> {
    policies::require_sudo(state.store.as_ref(), &caller.0, &checked, "delete").await?;
    auth_mounts::disable(state.store.as_ref(), &path).await?;
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

/// The policy a read names, checked on the path the request came by.
async fn read_policy(state: &AppState, caller: &Caller, checked: &str, name: &str) -> Result<policies::Policy> {
    authorize(state, caller, checked, "read").await?;
    policies::load(state.store.as_ref(), name).await?.ok_or(BrokerError::NotFound)
}

async fn show_policy(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(name): Path<String>,
) -> Result<VaultResponse> {
    let policy = read_policy(&state, &caller, &checked, &name).await?;
    Ok(VaultResponse::data(json!({ "name": policy.name, "policy": policy.policy })))
}

/// The older `sys/policy/{name}`: the text as `rules`, at the top level.
async fn show_policy_legacy(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(name): Path<String>,
) -> Result<VaultResponse> {
    let policy = read_policy(&state, &caller, &checked, &name).await?;
    Ok(VaultResponse::top_level(json!({ "name": policy.name, "rules": policy.policy })))
}

/// Writes a policy, from `sys/policies/acl/{name}` or the older `sys/policy/{name}`; the caller's
/// policy is checked on the path the request came by, as Vault checks it.
async fn write_policy(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(name): Path<String>,
    body: VaultBody,
) -> Result<StatusCode> {
    let exists = policies::load(state.store.as_ref(), &name).await?.is_some();
    authorize(&state, &caller, &checked, Operation::write(exists).capability()).await?;
    let body = body.object()?;
    // `policy` is the current field; the older `sys/policy` endpoint took `rules`.
    let text = body.get("policy").or_else(|| body.get("rules")).and_then(Value::as_str);
    let text = text.ok_or_else(|| BrokerError::invalid("'policy' parameter not supplied or empty"))?;
    policies::write(state.store.as_ref(), &name, text).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_policy(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(checked): VaultPath,
    Path(name): Path<String>,
) -> Result<StatusCode> {
    authorize(&state, &caller, &checked, "delete").await?;
    policies::delete(state.store.as_ref(), &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
