//! `auth/token/*`: Vault's token store over the broker's tokens: create (with a role),
//! lookup, renew and revoke (of the caller's own token, of a secret, of an accessor), and
//! token roles. Each path is checked against the caller's policy as it was requested.

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{Map, Value};

use super::error::{BrokerError, Result};
use super::http::{self, is_list, Caller, VaultBody, VaultPath, VaultResponse};
use super::request::Operation;
use super::tokens::{self, roles, Renewal};
use super::{duration, policies};
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/auth/token/create", post(create).put(create))
        .route("/auth/token/create-orphan", post(create).put(create))
        .route("/auth/token/create/{role}", post(create_with_role).put(create_with_role))
        .route("/auth/token/lookup-self", get(lookup_self).post(lookup_self))
        .route("/auth/token/lookup", get(lookup).post(lookup).put(lookup))
        .route("/auth/token/lookup-accessor", post(lookup).put(lookup))
        .route("/auth/token/renew-self", post(renew).put(renew))
        .route("/auth/token/renew", post(renew).put(renew))
        .route("/auth/token/renew-accessor", post(renew).put(renew))
        .route("/auth/token/revoke-self", post(revoke_self).put(revoke_self))
        .route("/auth/token/revoke", post(revoke_token).put(revoke_token))
        .route("/auth/token/revoke-accessor", post(revoke_accessor).put(revoke_accessor))
        .route("/auth/token/roles", get(list_roles))
        .route("/auth/token/roles/{name}", get(read_role).post(write_role).put(write_role).delete(delete_role))
}

async fn authorize(state: &AppState, caller: &Caller, path: &str, capability: &str) -> Result<()> {
    policies::require(state.store.as_ref(), &caller.0, path, capability).await
}

/// `auth/token/create` and `create-orphan`: which one is the path's.
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    body: VaultBody,
) -> Result<VaultResponse> {
    let (secret, token) = tokens::create(state.store.as_ref(), &caller.0, &path, None, &body.object()?).await?;
    Ok(VaultResponse::auth(tokens::auth_block(&secret, &token, token.creation_time)))
}

async fn create_with_role(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    Path(role): Path<String>,
    body: VaultBody,
) -> Result<VaultResponse> {
    let body = body.object()?;
    let (secret, token) = tokens::create(state.store.as_ref(), &caller.0, &path, Some(&role), &body).await?;
    Ok(VaultResponse::auth(tokens::auth_block(&secret, &token, token.creation_time)))
}

/// `lookup-self`: the caller's token, `id` included however it was presented. A GET needs
/// `read`, a POST `update`, as in Vault.
async fn lookup_self(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Result<VaultResponse> {
    let capability = if method == axum::http::Method::GET { "read" } else { "update" };
    authorize(&state, &caller, &path, capability).await?;
    let secret = http::presented(&headers).unwrap_or_default();
    Ok(VaultResponse::data(tokens::lookup_data(secret, &caller.0)))
}

/// `lookup` (a `token`, else the caller's own) and `lookup-accessor` (an `accessor`); a GET
/// needs `read`, a write `update`.
async fn lookup(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    method: axum::http::Method,
    headers: HeaderMap,
    body: VaultBody,
) -> Result<VaultResponse> {
    let capability = if method == axum::http::Method::GET { "read" } else { "update" };
    authorize(&state, &caller, &path, capability).await?;
    let body = body.object()?;
    let data = if path.ends_with("-accessor") {
        let accessor = required(&body, "accessor", "missing accessor")?;
        tokens::lookup_named(state.store.as_ref(), None, Some(&accessor)).await?
    } else {
        let secret = optional(&body, "token").or_else(|| http::presented(&headers).map(str::to_owned));
        tokens::lookup_named(state.store.as_ref(), secret.as_deref(), None).await?
    };
    Ok(VaultResponse::data(data))
}

/// `renew-self`, `renew` (a `token`) and `renew-accessor` (an `accessor`), by `increment`.
async fn renew(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    headers: HeaderMap,
    body: VaultBody,
) -> Result<VaultResponse> {
    authorize(&state, &caller, &path, "update").await?;
    let body = body.object()?;
    let increment = match body.get("increment") {
        Some(value) => Some(duration::parse(value).map_err(|e| BrokerError::invalid(format!("increment: {e}")))?),
        None => None,
    };
    let (secret, accessor);
    let which = match path.rsplit('/').next() {
        Some("renew-self") => Renewal::Own(&caller.0, http::presented(&headers).unwrap_or_default()),
        Some("renew-accessor") => {
            accessor = required(&body, "accessor", "missing accessor")?;
            Renewal::Accessor(&accessor)
        }
        _ => {
            secret = required(&body, "token", "missing token ID")?;
            Renewal::Secret(&secret)
        }
    };
    let now = chrono::Utc::now().timestamp();
    let (shown, token) = tokens::renew(state.store.as_ref(), which, increment, now).await?;
    Ok(VaultResponse::auth(tokens::auth_block(&shown, &token, now)))
}

async fn revoke_self(State(state): State<AppState>, caller: Caller) -> Result<StatusCode> {
    authorize(&state, &caller, "auth/token/revoke-self", "update").await?;
    tokens::revoke(&state, &caller.0).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn revoke_token(State(state): State<AppState>, caller: Caller, body: VaultBody) -> Result<StatusCode> {
    authorize(&state, &caller, "auth/token/revoke", "update").await?;
    let secret = required(&body.object()?, "token", "missing token ID")?;
    tokens::revoke_secret(&state, &secret).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn revoke_accessor(State(state): State<AppState>, caller: Caller, body: VaultBody) -> Result<StatusCode> {
    authorize(&state, &caller, "auth/token/revoke-accessor", "update").await?;
    let accessor = required(&body.object()?, "accessor", "missing accessor")?;
    tokens::revoke_accessor(&state, &accessor).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `LIST auth/token/roles`, checked on the path with a trailing slash as Vault checks a LIST.
async fn list_roles(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    RawQuery(query): RawQuery,
) -> Result<VaultResponse> {
    if !is_list(query.as_deref()) {
        return Err(BrokerError::MethodNotAllowed);
    }
    authorize(&state, &caller, &format!("{path}/"), "list").await?;
    VaultResponse::keys(roles::names(state.store.as_ref()).await?)
}

async fn read_role(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    Path(name): Path<String>,
) -> Result<VaultResponse> {
    authorize(&state, &caller, &path, "read").await?;
    let role = roles::load(state.store.as_ref(), &name).await?.ok_or(BrokerError::NotFound)?;
    Ok(VaultResponse::data(role.data()))
}

/// A role's write: `create` while it does not exist, `update` once it does.
async fn write_role(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    Path(name): Path<String>,
    body: VaultBody,
) -> Result<StatusCode> {
    let exists = roles::load(state.store.as_ref(), &name).await?.is_some();
    authorize(&state, &caller, &path, Operation::write(exists).capability()).await?;
    roles::write(state.store.as_ref(), &name, &body.object()?).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_role(
    State(state): State<AppState>,
    caller: Caller,
    VaultPath(path): VaultPath,
    Path(name): Path<String>,
) -> Result<StatusCode> {
    authorize(&state, &caller, &path, "delete").await?;
    roles::delete(state.store.as_ref(), &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A string field that must be present and non-empty.
fn required(body: &Map<String, Value>, name: &str, missing: &str) -> Result<String> {
    optional(body, name).ok_or_else(|| BrokerError::invalid(missing))
}

fn optional(body: &Map<String, Value>, name: &str) -> Option<String> {
    let value = body.get(name).and_then(Value::as_str).map(str::trim).filter(|v| !v.is_empty());
    value.map(str::to_owned)
}
