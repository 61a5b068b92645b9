//! Issuing credentials for a role (what `creds/:name` and `sts/:name` answer): an IAM user with
//! an access key, leased so that it can be revoked, or one of three STS calls, with the calls
//! Vault makes.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::config::{self, RootConfig};
use super::error::{BrokerError, Result};
use super::mounts::Mount;
use super::roles::{self, CredentialType, Role};
use super::template::{self, UserKind, DEFAULT_USERNAME_TEMPLATE};
use super::tokens::ServiceToken;
use super::{duration, intents, leases};
use crate::aws::{self, SharedCloud, StsDuration};
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
    // Vault parses `ttl` for every type and uses it for STS only: an iam_user role ignores a
    // valid one, through creds/ and sts/ alike.
    let requested = requested_ttl(params)?;
    let mfa_code = param(params, "mfa_code");
    if mfa_code.is_some() && role.mfa_serial_number.is_none() {
        return Err(BrokerError::invalid(format!("mfa_code given, but role {name} has no mfa_serial_number")));
    }
    roles::allowed(role, &state.config.broker_limits).map_err(BrokerError::invalid)?;
    let (cloud, root) = config::mount_cloud(state, mount).await?;
    match kind {
        CredentialType::IamUser => iam_user(state, mount, role, &root, &cloud, caller).await,
        CredentialType::AssumedRole => {
            let ttl = sts_ttl(role, kind, requested)?;
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
            let session = match param(params, "role_session_name") {
                // Vault replaces what AWS does not accept, and sends the result uncut.
                Some(session) => template::normalize_name(&session),
                // Vault renders session names as an IAM-kind name (the 64-character cap).
                None => username(&root, UserKind::Iam, display_name, name)?,
            };
            template::check_name("role session name", &session, template::STS_NAME_MIN, template::IAM_USERNAME_MAX)
                .map_err(BrokerError::invalid)?;
            let (document, policy_arns) = with_group_policies(&cloud, role).await?;
            let creds = cloud.assume_role(&arn, &session, document.as_deref(), &policy_arns, ttl).await?;
            sts_leased(state.store.as_ref(), mount, name, caller, sts_issued(mount, name, endpoint, &creds, ttl, true))
                .await
        }
        CredentialType::FederationToken => {
            let ttl = sts_ttl(role, kind, requested)?;
            let user = username(&root, UserKind::Sts, display_name, name)?;
            let (document, policy_arns) = with_group_policies(&cloud, role).await?;
            let creds = cloud.get_federation_token(&user, document.as_deref(), &policy_arns, ttl).await?;
            sts_leased(state.store.as_ref(), mount, name, caller, sts_issued(mount, name, endpoint, &creds, ttl, false))
                .await
        }
        CredentialType::SessionToken => {
            let ttl = sts_ttl(role, kind, requested)?;
            if role.mfa_serial_number.is_some() && mfa_code.is_none() {
                return Err(BrokerError::invalid(format!("role {name} requires mfa_code")));
            }
            let creds = cloud.get_session_token(ttl, role.mfa_serial_number.as_deref(), mfa_code.as_deref()).await?;
            sts_leased(state.store.as_ref(), mount, name, caller, sts_issued(mount, name, endpoint, &creds, ttl, false))
                .await
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

/// The request's `ttl` in seconds, when it names one.
fn requested_ttl(params: &Map<String, Value>) -> Result<Option<u64>> {
    let Some(value) = params.get("ttl").filter(|v| !v.is_null()) else { return Ok(None) };
    let ttl = duration::parse(value).map_err(|e| BrokerError::invalid(format!("ttl: {e}")))?;
    Ok(Some(ttl.as_secs()))
}

/// The STS lifetime: the request's ttl, else the role's default, else 3600 s; capped by the
/// role's `max_sts_ttl` as Vault caps it, then refused unless STS grants it for `kind`
/// (assumed_role: 15 minutes to 12 hours; federation_token, session_token: to 36 hours).
fn sts_ttl(role: &Role, kind: CredentialType, requested: Option<u64>) -> Result<StsDuration> {
    let wanted = requested.or(role.default_sts_ttl).unwrap_or(3600);
    let ttl = role.max_sts_ttl.map_or(wanted, |max| wanted.min(max));
    let most =
        if kind == CredentialType::AssumedRole { StsDuration::ASSUME_ROLE_MAX_SECS } else { StsDuration::MAX_SECS };
    let refused = || {
        let show = |secs: u64| duration::format(Duration::from_secs(secs));
        BrokerError::invalid(format!(
            "ttl {} is out of range: {} credentials live from {} to {}",
            show(ttl),
            kind.as_str(),
            show(StsDuration::MIN_SECS),
            show(most)
        ))
    };
    if ttl > most {
        return Err(refused());
    }
    StsDuration::from_secs(ttl).ok_or_else(refused)
}

/// The rendered username for `kind`, refused (400) unless AWS accepts it as an IAM user name (1
/// to 64 characters) or a federated user name (2 to 32).
fn username(root: &RootConfig, kind: UserKind, display_name: &str, role: &str) -> Result<String> {
    let template = root.username_template.as_deref().unwrap_or(DEFAULT_USERNAME_TEMPLATE);
    let name = template::render(template, kind, display_name, role).map_err(|e| BrokerError::Failed(e.to_string()))?;
    let (what, min) = match kind {
        UserKind::Iam => ("IAM user name the username_template renders", 1),
        UserKind::Sts => ("federated user name the username_template renders", template::STS_NAME_MIN),
    };
    template::check_name(what, &name, min, kind.max_len()).map_err(BrokerError::invalid)?;
    Ok(name)
}

/// The role's session policy and policy ARNs, with those of its `iam_groups` merged in as
/// Vault's `getGroupPolicies` and `combinePolicyDocuments` do: the groups' inline documents and
/// the role's own become one document of all their statements, and the groups' managed
/// policies follow the role's ARNs.
async fn with_group_policies(cloud: &SharedCloud, role: &Role) -> Result<(Option<String>, Vec<String>)> {
    let mut documents = Vec::new();
    let mut policy_arns = role.policy_arns.clone();
    for group in &role.iam_groups {
        let policies = cloud.group_policies(group).await?;
        documents.extend(policies.documents);
        policy_arns.extend(policies.policy_arns);
    }
    let document = if documents.is_empty() {
        role.policy_document.clone()
    } else {
        documents.push(role.policy_document.clone());
        combine_policy_documents(&documents).map_err(BrokerError::invalid)?
    };
    Ok(((!document.is_empty()).then_some(document), policy_arns))
}

/// One policy document holding every statement of `documents` (a single `Statement` object
/// counts as a list of one; empty documents are skipped), as Vault's `combinePolicyDocuments`.
fn combine_policy_documents(documents: &[String]) -> std::result::Result<String, String> {
    let mut statements = Vec::new();
    for document in documents.iter().filter(|document| !document.is_empty()) {
        let parsed: Value =
            serde_json::from_str(document).map_err(|e| format!("an IAM group's policy document is not JSON: {e}"))?;
        let Value::Object(mut fields) = parsed else {
            return Err("an IAM group's policy document is not a JSON object".to_owned());
        };
        match fields.remove("Statement") {
            None => {}
            Some(Value::Array(list)) => statements.extend(list),
            Some(Value::Null) => return Err("a policy document's Statement is null".to_owned()),
            Some(single) => statements.push(single),
        }
    }
    Ok(json!({ "Version": "2012-10-17", "Statement": statements }).to_string())
}

fn sts_issued(
    mount: &Mount,
    role: &str,
    endpoint: Endpoint,
    creds: &aws::StsCredentials,
    asked: StsDuration,
    with_arn: bool,
) -> Issued {
    let ttl = granted(creds.expiration, Utc::now(), asked);
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

/// Leases STS credentials to the caller's token, as Vault keeps a lease for them: lookup finds
/// it, and revoking it (or the token) removes the record; AWS cannot revoke the credentials.
async fn sts_leased(
    store: &dyn ItemStore,
    mount: &Mount,
    role: &str,
    caller: &ServiceToken,
    issued: Issued,
) -> Result<Issued> {
    let holder =
        leases::Holder { accessor: &caller.accessor, expire_at: caller.expire_at, standing: caller.standing() };
    let ttl = Duration::from_secs(issued.lease_duration);
    leases::create_sts(store, mount, role, &issued.lease_id, ttl, holder).await?;
    Ok(issued)
}

/// The seconds the credentials live from `now`, by the `Expiration` STS reported (as Vault
/// reports it): whole seconds rounded up, since AWS states the expiry to the second, and never
/// more than was asked for (a clock ahead of AWS's does not lengthen a lease).
fn granted(expiration: Option<DateTime<Utc>>, now: DateTime<Utc>, asked: StsDuration) -> u64 {
    let Some(expiration) = expiration else { return asked.secs() };
    let millis = u64::try_from((expiration - now).num_milliseconds()).unwrap_or(0);
    millis.div_ceil(1000).min(asked.secs())
}

/// Creates an IAM user the way Vault does and leases it. The user is recorded before it is
/// created and the record settles with the lease ([`intents`]), so a failure undoes the user and
/// a request that dies midway leaves it to the scheduled job, never to no one.
async fn iam_user(
    state: &AppState,
    mount: &Mount,
    role: &Role,
    root: &RootConfig,
    cloud: &SharedCloud,
    caller: &ServiceToken,
) -> Result<Issued> {
    let store = state.store.as_ref();
    let name = username(root, UserKind::Iam, &caller.display_name, &role.name)?;
    let mut tags: Vec<(String, String)> = role.iam_tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    // The deployment's path and boundary stand in for a role's own (which lie within them).
    let limits = &state.config.broker_limits;
    let path = role.user_path.as_deref().or(limits.user_path.as_deref());
    let boundary = role.permissions_boundary_arn.as_deref().or(limits.permissions_boundary.as_deref());
    let intent = intents::record(store, mount, &name).await?;
    tags.push((intents::REQUEST_TAG.to_owned(), intent.nonce.clone()));
    if let Err(e) = cloud.create_user(&name, path, boundary, &tags).await {
        // A name taken by a user carrying the record's nonce is this request's: the SDK retried
        // a `CreateUser` whose answer was lost, and IAM refused the retry. A user IAM cannot
        // tell us about leaves the record to the job, which asks again.
        let owner = match e.fault().code() {
            Some("EntityAlreadyExists") => Some(intents::owner(cloud, &intent).await),
            _ => None,
        };
        match owner {
            Some(Ok(intents::Owner::Record)) => {
                tracing::info!(user = %name, "CreateUser's answer was lost and its retry found the user: taken as created");
            }
            Some(Err(_)) => return Err(e.into()),
            // A refusal IAM answered created nothing (and a name taken is someone else's user);
            // anything else may have created it, which the job finds out.
            _ => {
                if !e.is_on_aws_side() {
                    intents::forget(store, &intent).await?;
                }
                return Err(e.into());
            }
        }
    }
    let key = match attach_and_key(cloud, role, &name).await {
        Ok(key) => key,
        Err(e) => {
            intents::undo(store, cloud, &intent).await;
            return Err(e.into());
        }
    };
    // The lease belongs to the caller's token, and ends with it at the latest; a user whose
    // lease cannot be recorded (the token was revoked meanwhile) is undone.
    let holder =
        leases::Holder { accessor: &caller.accessor, expire_at: caller.expire_at, standing: caller.standing() };
    let leased = match config::lease(store, mount).await {
        Ok(config) => {
            let ttl = Duration::from_secs(config.lease);
            leases::create(store, mount, &role.name, &name, ttl, holder, intent.settled()).await
        }
        Err(e) => Err(e),
    };
    let lease = match leased {
        Ok(lease) => lease,
        Err(e) => {
            intents::undo(store, cloud, &intent).await;
            return Err(e);
        }
    };
    let data = json!({ "access_key": key.id, "secret_key": key.secret, "session_token": null, "security_token": null });
    let lease_duration = (lease.expire_at - lease.issued_at).max(0) as u64;
    Ok(Issued { data, lease_id: lease.id, lease_duration, renewable: true })
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
