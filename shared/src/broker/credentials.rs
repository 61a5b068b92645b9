//! Issuing credentials for a role (what `creds/:name` and `sts/:name` answer): an IAM user with
//! an access key, leased so that it can be revoked, or one of three STS calls, with the calls
//! Vault makes.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::config::{self, RootConfig};
use super::error::{BrokerError, Result};
use super::mounts::Mount;
use super::roles::{self, CredentialType, Role};
use super::template::{self, UserKind, DEFAULT_USERNAME_TEMPLATE};
use super::tokens::ServiceToken;
use super::{duration, leases};
use crate::aws::{self, SharedCloud};
use crate::state::AppState;
use crate::store::ItemStore;

/// The path a request came through: `creds/` or `sts/` (legacy roles care).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Creds,
    Sts,
}

/// Issued credentials: the response's `data`, and the lease they come with.
pub struct Issued {
    pub data: Value,
    pub lease_id: String,
    pub lease_duration: u64,
    pub renewable: bool,
}

/// The role a request names, which must exist and still validate.
pub async fn role(store: &dyn ItemStore, mount: &Mount, name: &str) -> Result<Role> {
    match roles::load(store, mount, name).await? {
        Some(Ok(role)) => Ok(role),
        Some(Err(problem)) => Err(BrokerError::invalid(format!("role {name} is invalid: {problem}"))),
        None => Err(BrokerError::invalid(format!("role \"{name}\" not found"))),
    }
}

/// Issues credentials of `role` to the caller's token (whose display name feeds the username
/// template, and which holds the lease); `params` are the request's (`role_arn`,
/// `role_session_name`, `ttl`, `mfa_code`).
pub async fn issue(
    state: &AppState,
    mount: &Mount,
    role: &Role,
    endpoint: Endpoint,
    params: &Map<String, Value>,
    caller: &ServiceToken,
) -> Result<Issued> {
    let name = role.name.as_str();
    let display_name = caller.display_name.as_str();
    let kind = credential_type(role, endpoint)?;
    if kind == CredentialType::IamUser && params.get("ttl").is_some_and(|v| !v.is_null()) && endpoint == Endpoint::Sts {
        return Err(BrokerError::invalid("ttl is valid only for assumed_role, federation_token and session_token"));
    }
    roles::allowed(role, &state.config.broker_limits).map_err(BrokerError::invalid)?;
    let (cloud, root) = config::mount_cloud(state, mount).await?;
    match kind {
        CredentialType::IamUser => iam_user(state, mount, role, &root, &cloud, caller).await,
        CredentialType::AssumedRole => {
            let ttl = sts_ttl(role, params)?;
            let arn = match (param(params, "role_arn"), role.role_arns.as_slice()) {
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
            let session: String = match param(params, "role_session_name") {
                Some(session) => session.chars().take(64).collect(),
                // Vault renders session names as an IAM-kind name (the 64-character cap).
                None => username(&root, UserKind::Iam, display_name, name)?,
            };
            let document = (!role.policy_document.is_empty()).then_some(role.policy_document.as_str());
            let creds = cloud.assume_role(&arn, &session, document, &role.policy_arns, ttl as i32).await?;
            Ok(sts_issued(mount, name, endpoint, &creds, ttl, true))
        }
        CredentialType::FederationToken => {
            let ttl = sts_ttl(role, params)?;
            let user = username(&root, UserKind::Sts, display_name, name)?;
            let document = (!role.policy_document.is_empty()).then_some(role.policy_document.as_str());
            let creds = cloud.get_federation_token(&user, document, &role.policy_arns, ttl as i32).await?;
            Ok(sts_issued(mount, name, endpoint, &creds, ttl, false))
        }
        CredentialType::SessionToken => {
            let ttl = sts_ttl(role, params)?;
            let mfa_code = param(params, "mfa_code");
            if role.mfa_serial_number.is_some() && mfa_code.is_none() {
                return Err(BrokerError::invalid(format!("role {name} requires mfa_code")));
            }
            let creds =
                cloud.get_session_token(ttl as i32, role.mfa_serial_number.as_deref(), mfa_code.as_deref()).await?;
            Ok(sts_issued(mount, name, endpoint, &creds, ttl, false))
        }
    }
}

fn param(params: &Map<String, Value>, name: &str) -> Option<String> {
    params
        .get(name)
        .and_then(|v| v.as_str().map(str::to_owned).or_else(|| v.as_i64().map(|n| n.to_string())))
        .filter(|v| !v.is_empty())
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

fn username(root: &RootConfig, kind: UserKind, display_name: &str, role: &str) -> Result<String> {
    let template = root.username_template.as_deref().unwrap_or(DEFAULT_USERNAME_TEMPLATE);
    template::render(template, kind, display_name, role).map_err(|e| BrokerError::Failed(e.to_string()))
}

fn sts_issued(
    mount: &Mount,
    role: &str,
    endpoint: Endpoint,
    creds: &aws::StsCredentials,
    ttl: u64,
    with_arn: bool,
) -> Issued {
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
    let lease_id = format!("{}/{via}/{role}/{}", mount.path, crate::ids::random_token(24));
    Issued { data, lease_id, lease_duration: ttl, renewable: false }
}

/// Creates an IAM user the way Vault does, undoing everything if a step fails, and leases it.
async fn iam_user(
    state: &AppState,
    mount: &Mount,
    role: &Role,
    root: &RootConfig,
    cloud: &SharedCloud,
    caller: &ServiceToken,
) -> Result<Issued> {
    let name = username(root, UserKind::Iam, &caller.display_name, &role.name)?;
    let tags: Vec<(String, String)> = role.iam_tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    // The deployment's path and boundary stand in for a role's own (which lie within them).
    let limits = &state.config.broker_limits;
    let path = role.user_path.as_deref().or(limits.user_path.as_deref());
    let boundary = role.permissions_boundary_arn.as_deref().or(limits.permissions_boundary.as_deref());
    cloud.create_user(&name, path, boundary, &tags).await?;
    let key = match attach_and_key(cloud, role, &name).await {
        Ok(key) => key,
        Err(e) => {
            undo_user(cloud, &name).await;
            return Err(e.into());
        }
    };
    // The lease belongs to the caller's token, and ends with it at the latest; a user whose
    // lease cannot be recorded (the token was revoked meanwhile) is undone.
    let holder =
        leases::Holder { accessor: &caller.accessor, expire_at: caller.expire_at, standing: caller.standing() };
    let leased = match config::lease(state.store.as_ref(), mount).await {
        Ok(config) => {
            let ttl = Duration::from_secs(config.lease);
            leases::create(state.store.as_ref(), mount, &role.name, &name, ttl, holder).await
        }
        Err(e) => Err(e),
    };
    let lease = match leased {
        Ok(lease) => lease,
        Err(e) => {
            undo_user(cloud, &name).await;
            return Err(e);
        }
    };
    let data = json!({ "access_key": key.id, "secret_key": key.secret, "session_token": null, "security_token": null });
    let lease_duration = (lease.expire_at - lease.issued_at).max(0) as u64;
    Ok(Issued { data, lease_id: lease.id, lease_duration, renewable: true })
}

async fn undo_user(cloud: &SharedCloud, name: &str) {
    if let Err(cleanup) = cloud.delete_user(name).await {
        tracing::error!(user = %name, error = %cleanup, "could not undo a half-created IAM user");
    }
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
