//! Vault's JWT auth method, at each path `sys/auth` enabled it: `config`, `role/:name` (and its
//! LIST) and `login`, so a run's identity token (and GitHub Actions', GitLab CI's, any OIDC
//! workload's) logs in to the broker as it would to Vault. Read it from `dispatch`, then
//! `login.rs`.

mod config;
mod keys;
mod login;
mod roles;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::auth_mounts::{self, AuthMount};
use super::error::{BrokerError, Result};
use super::http::{authenticated, is_list, VaultBody, VaultResponse};
use super::policies;
use super::request::Operation;
use super::tokens;
use crate::state::AppState;

/// The paths a JWT method serves under `auth/<path>/`, and their methods (a LIST as `LIST`):
/// what `dispatch` answers and the API document lists.
pub const PATHS: &[(&str, &[&str])] = &[
    ("login", &["POST", "PUT"]),
    ("config", &["GET", "POST", "PUT"]),
    ("role", &["LIST"]),
    ("role/{name}", &["GET", "POST", "PUT", "DELETE"]),
];

/// Everything under `auth/` but the token store's own paths.
pub(super) async fn dispatch(
    State(state): State<AppState>,
    method: Method,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: VaultBody,
) -> Result<Response> {
    let store = state.store.as_ref();
    let Some((mount, rest)) = auth_mounts::route(store, &path).await? else { return Err(BrokerError::NotFound) };
    let rest = rest.to_owned();
    if rest == "login" {
        if !matches!(method, Method::POST | Method::PUT) {
            return Err(BrokerError::MethodNotAllowed);
        }
        let (secret, token) = login::login(&state, &mount, &body.object()?).await?;
        let now = chrono::Utc::now().timestamp();
        return Ok(VaultResponse::auth(tokens::auth_block(&secret, &token, now)).into_response());
    }
    let caller = authenticated(&state, &headers).await?;
    // Role names are stored lower-cased: the policy is checked on the name the write reaches.
    let rest = match rest.strip_prefix("role/") {
        Some(name) => format!("role/{}", name.to_lowercase()),
        None => rest,
    };
    let checked = format!("auth/{}/{rest}", mount.path);
    let require = |capability: &'static str| {
        let (state, caller, checked) = (&state, &caller, &checked);
        async move { policies::require(state.store.as_ref(), caller, checked, capability).await }
    };
    match (rest.as_str(), rest.strip_prefix("role/")) {
        ("config", _) => match method {
            Method::GET => {
                require("read").await?;
                let config = config::load(store, &mount.uuid).await?.ok_or(BrokerError::NotFound)?;
                Ok(VaultResponse::data(config.describe()).into_response())
            }
            Method::POST | Method::PUT => {
                let exists = config::load(store, &mount.uuid).await?.is_some();
                require(Operation::write(exists).capability()).await?;
                let config = config::JwtConfig::parse(&body.object()?)?;
                if config.oidc_discovery_url.is_some() {
                    keys::key_set(&state, &config, true).await.map_err(|why| {
                        tracing::warn!(mount = %mount.path, %why, "JWT auth: the OIDC discovery URL could not be checked");
                        BrokerError::invalid(format!("error checking oidc discovery URL: {why}"))
                    })?;
                }
                config::save(store, &mount.uuid, &config).await?;
                Ok(StatusCode::NO_CONTENT.into_response())
            }
            _ => Err(BrokerError::MethodNotAllowed),
        },
        ("role", _) if method == Method::GET && is_list(query.as_deref()) => {
            require("list").await?;
            Ok(VaultResponse::keys(roles::names(store, &mount.uuid).await?)?.into_response())
        }
        (_, Some(name)) if !name.is_empty() && !name.contains('/') => {
            role(&state, &mount, &method, name, &body, require).await
        }
        _ => Err(BrokerError::NotFound),
    }
}

async fn role<F, Fut>(
    state: &AppState,
    mount: &AuthMount,
    method: &Method,
    name: &str,
    body: &VaultBody,
    require: F,
) -> Result<Response>
where
    F: Fn(&'static str) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let store = state.store.as_ref();
    match *method {
        Method::GET => {
            require("read").await?;
            let role = roles::load(store, &mount.uuid, name).await?.ok_or(BrokerError::NotFound)?;
            Ok(VaultResponse::data(role.describe()).into_response())
        }
        Method::POST | Method::PUT => {
            let exists = roles::load(store, &mount.uuid, name).await?.is_some();
            require(Operation::write(exists).capability()).await?;
            let role = roles::parse(name, &body.object()?)?;
            roles::save(store, &mount.uuid, &role).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Method::DELETE => {
            require("delete").await?;
            roles::delete(store, &mount.uuid, name).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        _ => Err(BrokerError::MethodNotAllowed),
    }
}

/// `sys/auth`: every auth method, in `data` and at the top level, as Vault answers.
pub(super) async fn list_methods(state: &AppState, caller: &tokens::ServiceToken) -> Result<VaultResponse> {
    policies::require(state.store.as_ref(), caller, "sys/auth", "read").await?;
    Ok(VaultResponse::top_level(Value::Object(auth_mounts::listing(state.store.as_ref()).await?)))
}
