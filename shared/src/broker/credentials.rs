//! Generating credentials (`creds/:name`, `sts/:name`) for the four role types, with the calls
//! Vault makes, and the leases that let iam_user credentials be revoked.

use std::time::Duration;

use axum::http::Method;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::config;
use super::duration;
use super::engine::{load_role, EngineRequest};
use super::error::{BrokerError, Result};
use super::leases;
use super::roles::{CredentialType, Role};
use super::statics;
use super::template::{self, UserKind, DEFAULT_USERNAME_TEMPLATE};
use crate::api::QueryParams;
use crate::aws::{self, SharedCloud};

/// Where the request came from: `creds/` or `sts/` (legacy roles care).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Creds,
    Sts,
}

/// Dispatches the engine paths beyond config and roles.
pub(super) async fn route(request: EngineRequest<'_>) -> Result<Response> {
    let segments: Vec<&str> = request.path.split('/').collect();
    let write = matches!(request.method, Method::POST | Method::PUT);
    let read = request.method == Method::GET && !request.list;
    match segments.as_slice() {
        ["creds", name] if read || write => generate(&request, name, Endpoint::Creds).await,
        ["sts", name] if read || write => generate(&request, name, Endpoint::Sts).await,
        ["config", "rotate-root"] if write => statics::rotate_root(&request).await,
        ["static-roles"] if request.list => statics::list(&request).await,
        ["static-roles", name] if read => statics::read(&request, name).await,
        ["static-roles", name] if write => statics::write(&request, name).await,
        ["static-roles", name] if request.method == Method::DELETE => statics::delete(&request, name).await,
        ["static-creds", name] if read => statics::creds(&request, name).await,
        _ if known(&segments) => Err(BrokerError::MethodNotAllowed),
        _ => Err(BrokerError::NotFoundWithReason(format!(
            "no handler for route \"{}/{}\"",
            request.mount.path, request.path
        ))),
    }
}

fn known(segments: &[&str]) -> bool {
    matches!(
        segments,
        ["config", "root" | "lease" | "rotate-root"]
            | ["roles"]
            | ["roles" | "creds" | "sts" | "static-roles" | "static-creds", _]
            | ["static-roles"]
    )
}

/// The generate parameters, from the query (GET) or the body (POST/PUT).
fn parameters(request: &EngineRequest<'_>) -> Result<Map<String, Value>> {
    if request.method == Method::GET {
        let params =
            QueryParams::parse(request.query.as_deref().unwrap_or("")).map_err(|e| BrokerError::invalid(e.detail))?;
        let mut map = Map::new();
        for name in ["role_arn", "role_session_name", "ttl", "mfa_code"] {
            if let Some(value) = params.non_empty(name) {
                map.insert(name.into(), Value::String(value.to_owned()));
            }
        }
        return Ok(map);
    }
    match &request.body {
        Some(Value::Object(map)) => Ok(map.clone()),
        None | Some(Value::Null) => Ok(Map::new()),
        Some(_) => Err(BrokerError::invalid("the request body must be a JSON object")),
    }
}

fn param(params: &Map<String, Value>, name: &str) -> Option<String> {
    params
        .get(name)
        .and_then(|v| v.as_str().map(str::to_owned).or_else(|| v.as_i64().map(|n| n.to_string())))
        .filter(|v| !v.is_empty())
}

/// The cloud client for a mount's root configuration.
pub(super) async fn cloud(request: &EngineRequest<'_>) -> Result<(SharedCloud, config::RootConfig)> {
    let root = config::root(request.state, &request.mount).await?;
    Ok((config::cloud(request.state, &root).await?, root))
}

/// Which of a role's types a request gets.
fn credential_type(role: &Role, endpoint: Endpoint) -> Result<CredentialType> {
    if role.legacy {
        let wanted = |t: &CredentialType| match endpoint {
            Endpoint::Creds => *t == CredentialType::IamUser,
            Endpoint::Sts => matches!(t, CredentialType::AssumedRole | CredentialType::FederationToken),
        };
        return role.credential_types.iter().copied().find(wanted).ok_or_else(|| {
            let path = if endpoint == Endpoint::Creds {
                "creds/ must be of type iam_user"
            } else {
                "sts/ must be of type assumed_role or federation_token"
            };
            BrokerError::invalid(format!(
                "role {} was defined with the legacy policy or arn parameter: credentials fetched through {path}",
                role.name
            ))
        });
    }
    role.credential_types
        .first()
        .copied()
        .ok_or_else(|| BrokerError::invalid(format!("role {} has no credential type", role.name)))
}

/// The STS lifetime: the request's ttl, else the role's default, else 3600 s; capped by max.
fn sts_ttl(role: &Role, params: &Map<String, Value>) -> Result<u64> {
    let requested = match params.get("ttl").filter(|v| !v.is_null()) {
        Some(value) => Some(duration::parse(value).map_err(|e| BrokerError::invalid(format!("ttl: {e}")))?.as_secs()),
        None => None,
    };
    let ttl = requested.or(role.default_sts_ttl).unwrap_or(3600);
    Ok(role.max_sts_ttl.map_or(ttl, |max| ttl.min(max)))
}

fn username(root: &config::RootConfig, kind: UserKind, display_name: &str, role: &str) -> Result<String> {
    let template = root.username_template.as_deref().unwrap_or(DEFAULT_USERNAME_TEMPLATE);
    template::render(template, kind, display_name, role).map_err(|e| BrokerError::Failed(e.to_string()))
}

async fn generate(request: &EngineRequest<'_>, name: &str, endpoint: Endpoint) -> Result<Response> {
    let role = match load_role(request.state, &request.mount, name).await? {
        Some(Ok(role)) => role,
        Some(Err(problem)) => return Err(BrokerError::invalid(format!("role {name} is invalid: {problem}"))),
        None => return Err(BrokerError::invalid(format!("role \"{name}\" not found"))),
    };
    let params = parameters(request)?;
    let kind = credential_type(&role, endpoint)?;
    if kind == CredentialType::IamUser && params.get("ttl").is_some_and(|v| !v.is_null()) && endpoint == Endpoint::Sts {
        return Err(BrokerError::invalid("ttl is valid only for assumed_role, federation_token and session_token"));
    }
    let (cloud, root) = cloud(request).await?;
    let display = request.caller.0.display_name.clone();
    match kind {
        CredentialType::IamUser => iam_user(request, &role, &root, &cloud, &display).await,
        CredentialType::AssumedRole => {
            let ttl = sts_ttl(&role, &params)?;
            let arn = match (param(&params, "role_arn"), role.role_arns.as_slice()) {
                (Some(arn), arns) if arns.contains(&arn) => arn,
                (Some(arn), _) => {
                    return Err(BrokerError::invalid(format!("role_arn {arn} is not allowed by role {name}")))
                }
                (None, [only]) => only.clone(),
                (None, _) => {
                    return Err(BrokerError::invalid(format!(
                        "role {name} allows several role_arns: choose one with role_arn"
                    )))
                }
            };
            let session: String = match param(&params, "role_session_name") {
                Some(session) => session.chars().take(64).collect(),
                // Vault renders session names as an IAM-kind name (the 64-character cap).
                None => username(&root, UserKind::Iam, &display, name)?,
            };
            let document = (!role.policy_document.is_empty()).then_some(role.policy_document.as_str());
            let creds = cloud.assume_role(&arn, &session, document, &role.policy_arns, ttl as i32).await?;
            sts_response(request, name, endpoint, &creds, ttl, true)
        }
        CredentialType::FederationToken => {
            let ttl = sts_ttl(&role, &params)?;
            let user = username(&root, UserKind::Sts, &display, name)?;
            let document = (!role.policy_document.is_empty()).then_some(role.policy_document.as_str());
            let creds = cloud.get_federation_token(&user, document, &role.policy_arns, ttl as i32).await?;
            sts_response(request, name, endpoint, &creds, ttl, false)
        }
        CredentialType::SessionToken => {
            let ttl = sts_ttl(&role, &params)?;
            let mfa_code = param(&params, "mfa_code");
            if role.mfa_serial_number.is_some() && mfa_code.is_none() {
                return Err(BrokerError::invalid(format!("role {name} requires mfa_code")));
            }
            let creds =
                cloud.get_session_token(ttl as i32, role.mfa_serial_number.as_deref(), mfa_code.as_deref()).await?;
            sts_response(request, name, endpoint, &creds, ttl, false)
        }
    }
}

fn sts_response(
    request: &EngineRequest<'_>,
    role: &str,
    endpoint: Endpoint,
    creds: &aws::StsCredentials,
    ttl: u64,
    with_arn: bool,
) -> Result<Response> {
    let mut data = json!({
        "access_key": creds.access_key,
        "secret_key": creds.secret_key,
        "session_token": creds.session_token,
        "security_token": creds.session_token,
        "ttl": ttl,
    });
    if with_arn {
        data["arn"] = json!(creds.arn);
    }
    // A lease is named after the path that made it, as Vault names it.
    let via = if endpoint == Endpoint::Creds { "creds" } else { "sts" };
    let lease_id = format!("{}/{via}/{role}/{}", request.mount.path, crate::ids::random_token(24));
    Ok(super::http::VaultResponse::leased(data, &lease_id, ttl, false).into_response())
}

/// Creates an IAM user the way Vault does, undoing everything if a step fails, and leases it.
async fn iam_user(
    request: &EngineRequest<'_>,
    role: &Role,
    root: &config::RootConfig,
    cloud: &SharedCloud,
    display: &str,
) -> Result<Response> {
    let name = username(root, UserKind::Iam, display, &role.name)?;
    let tags: Vec<(String, String)> = role.iam_tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    cloud.create_user(&name, role.user_path.as_deref(), role.permissions_boundary_arn.as_deref(), &tags).await?;
    let key = match attach_and_key(cloud, role, &name).await {
        Ok(key) => key,
        Err(e) => {
            if let Err(cleanup) = cloud.delete_user(&name).await {
                tracing::error!(user = %name, error = %cleanup, "could not undo a half-created IAM user");
            }
            return Err(e.into());
        }
    };
    let lease = config::lease(request.state, &request.mount).await?;
    let lease_id =
        leases::create(request.state, &request.mount, &role.name, &name, Duration::from_secs(lease.lease)).await?;
    let data = json!({ "access_key": key.id, "secret_key": key.secret, "session_token": null, "security_token": null });
    Ok(super::http::VaultResponse::leased(data, &lease_id, lease.lease, true).into_response())
}

async fn attach_and_key(
    cloud: &SharedCloud,
    role: &Role,
    user: &str,
) -> std::result::Result<aws::AccessKey, aws::CloudError> {
    for arn in &role.policy_arns {
        cloud.attach_user_policy(user, arn).await?;
    }
    if !role.policy_document.is_empty() {
        cloud.put_user_policy(user, &format!("hangar-{}", role.name), &role.policy_document).await?;
    }
    for group in &role.iam_groups {
        cloud.add_user_to_group(user, group).await?;
    }
    cloud.create_access_key(Some(user)).await
}
