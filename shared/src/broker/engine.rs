//! The AWS secrets engine's paths under a mount (`/v1/<mount>/…`). A mount path may hold
//! slashes, so one catch-all route finds the mount, checks the caller's policy for the method's
//! capability, and dispatches on the rest of the path.

use axum::extract::{Path, RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::error::{BrokerError, Result};
use super::http::{is_list, Caller, VaultBody, VaultResponse};
use super::mounts::{self, Mount};
use super::sys::object;
use super::{config, policies, roles};
use crate::app::AppState;
use crate::store::{keys, query_all, Condition, Item};

/// One request to the engine: who, on which mount, which path inside it, and how.
pub(super) struct EngineRequest<'a> {
    pub state: &'a AppState,
    pub caller: Caller,
    pub mount: Mount,
    pub path: &'a str,
    pub method: Method,
    pub list: bool,
    pub query: Option<String>,
    pub body: Option<Value>,
}

/// The capability a request needs, as Vault maps methods.
fn capability(method: &Method, list: bool) -> &'static str {
    match *method {
        Method::GET if list => "list",
        Method::GET => "read",
        Method::DELETE => "delete",
        _ => "update",
    }
}

pub(super) async fn dispatch(
    State(state): State<AppState>,
    caller: Caller,
    method: Method,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    VaultBody(body): VaultBody,
) -> Result<Response> {
    let path = path.trim_matches('/').to_owned();
    let (mount, rest) = mounts::route(state.store.as_ref(), &path).await?.ok_or_else(|| {
        BrokerError::NotFoundWithReason(format!("no handler for route \"{path}\": no secrets engine is mounted there"))
    })?;
    let list = method == Method::GET && is_list(query.as_deref());
    let needed = capability(&method, list);
    // Vault checks a LIST against the path with a trailing slash, so `aws/roles/*` covers it.
    let checked = if list { format!("{path}/") } else { path.clone() };
    let allowed = policies::allowed(state.store.as_ref(), &caller.0, &checked, needed).await?
        || (needed == "update" && policies::allowed(state.store.as_ref(), &caller.0, &checked, "create").await?);
    if !allowed {
        return Err(BrokerError::PermissionDenied);
    }
    let rest = rest.to_owned();
    let request = EngineRequest { state: &state, caller, mount, path: &rest, method, list, query, body };
    route(request).await
}

async fn route(request: EngineRequest<'_>) -> Result<Response> {
    let segments: Vec<&str> = request.path.split('/').collect();
    let write = matches!(request.method, Method::POST | Method::PUT);
    match (segments.as_slice(), &request.method) {
        (["config", "root"], &Method::GET) => {
            let root = config::root(request.state, &request.mount).await?;
            Ok(VaultResponse::data(config::root_data(&root, request.state.config.edition)).into_response())
        }
        (["config", "root"], _) if write => {
            config::write_root(request.state, &request.mount, &object(VaultBody(request.body))?).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        (["config", "lease"], &Method::GET) => {
            let lease = config::lease(request.state, &request.mount).await?;
            Ok(VaultResponse::data(config::lease_data(&lease)).into_response())
        }
        (["config", "lease"], _) if write => {
            config::write_lease(request.state, &request.mount, &object(VaultBody(request.body))?).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        (["roles"], &Method::GET) if request.list => list_roles(&request).await,
        (["roles", name], &Method::GET) => read_role(&request, name).await,
        (["roles", name], _) if write => write_role(&request, name).await,
        (["roles", name], &Method::DELETE) => delete_role(&request, name).await,
        _ => super::credentials::route(request).await,
    }
}

async fn list_roles(request: &EngineRequest<'_>) -> Result<Response> {
    let items = query_all(request.state.store.as_ref(), keys::mount_roles(&request.mount.uuid)).await?;
    let names =
        items.iter().filter_map(|item| item.attrs.get("name").and_then(Value::as_str).map(str::to_owned)).collect();
    Ok(VaultResponse::keys(names)?.into_response())
}

/// A stored role; data that no longer validates is reported as `invalid_data`.
pub(super) async fn load_role(
    state: &AppState,
    mount: &Mount,
    name: &str,
) -> Result<Option<std::result::Result<roles::Role, String>>> {
    let Some(item) = state.store.get(&keys::mount_role(&mount.uuid, name)).await? else { return Ok(None) };
    let role = match item.parse::<roles::Role>() {
        Ok(role) => roles::validate(&role).map(|()| role),
        Err(e) => Err(e.to_string()),
    };
    Ok(Some(role))
}

async fn read_role(request: &EngineRequest<'_>, name: &str) -> Result<Response> {
    let role = load_role(request.state, &request.mount, name).await?.ok_or(BrokerError::NotFound)?;
    let data = match role {
        Ok(role) => roles::to_data(&role),
        Err(problem) => json!({ "invalid_data": problem }),
    };
    Ok(VaultResponse::data(data).into_response())
}

async fn write_role(request: &EngineRequest<'_>, name: &str) -> Result<Response> {
    let body = match &request.body {
        Some(Value::Object(map)) => map.clone(),
        None => Default::default(),
        Some(_) => return Err(BrokerError::invalid("the request body must be a JSON object")),
    };
    let existing = load_role(request.state, &request.mount, name).await?.and_then(|role| role.ok());
    let role = roles::apply(name, existing.as_ref(), &body).map_err(BrokerError::invalid)?;
    let item = Item::from_value(keys::mount_role(&request.mount.uuid, name), &role)?;
    request.state.store.put(item, Condition::Always).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn delete_role(request: &EngineRequest<'_>, name: &str) -> Result<Response> {
    let deleted = request.state.store.delete(&keys::mount_role(&request.mount.uuid, name), Condition::Always).await?;
    match deleted {
        Some(_) => Ok(StatusCode::NO_CONTENT.into_response()),
        None => Err(BrokerError::NotFound),
    }
}
