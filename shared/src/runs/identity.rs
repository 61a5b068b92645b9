//! Run identity tokens, as HCP Terraform issues them: for each run phase that asks for dynamic
//! credentials, a JWT signed by Hangar's identity key, issued by Hangar's address and naming
//! the run's organization, project, workspace, run and phase, for the audience its variables
//! name. AWS's IAM OIDC provider and Vault's JWT auth check them against what this module
//! publishes at HCP's paths: `/.well-known/openid-configuration` and `/.well-known/jwks`.
//!
//! Hangar has no projects: each organization's workspaces are in one, named as HCP names the
//! default project.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::credentials::Requested;
use super::error::{Result, RunsError};
use super::record::{Phase, Run};
use crate::accounts::access::Organization;
use crate::accounts::workspaces::Workspace;
use crate::api::BaseUrl;
use crate::identity::{self, TokenSigner};
use crate::state::AppState;
use crate::store::{keys, Condition, Item, ItemStore};

/// HCP's name for an organization's default project, the one every Hangar workspace is in.
pub const DEFAULT_PROJECT_NAME: &str = "Default Project";

/// How long a phase's token lives: HCP's phase timeouts (a plan 2 hours, an apply 24), so a
/// token outlives no phase it was made for by more than that.
pub fn token_lifetime(phase: Phase) -> u64 {
    match phase {
        Phase::Plan => 2 * 3600,
        Phase::Apply => 24 * 3600,
    }
}

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/.well-known/openid-configuration", get(discovery)).route("/.well-known/jwks", get(keys))
}

async fn discovery(State(state): State<AppState>, BaseUrl(base): BaseUrl) -> Result<Json<Value>> {
    state.identity.as_ref().ok_or(RunsError::NotFound)?;
    let issuer = issuer(&base);
    Ok(Json(identity::discovery_document(&issuer, &format!("{issuer}/.well-known/jwks"))))
}

async fn keys(State(state): State<AppState>) -> Result<Json<Value>> {
    let signer = state.identity.as_ref().ok_or(RunsError::NotFound)?;
    Ok(Json(identity::jwks(signer.as_ref()).await.map_err(unavailable)?))
}

/// The issuer of run tokens: Hangar's address, as HCP's is `https://app.terraform.io`.
pub fn issuer(base_url: &str) -> String {
    base_url.trim_end_matches('/').to_owned()
}

/// The project every workspace of `org` is in: its id.
pub fn default_project_id(org: &Organization) -> String {
    format!("prj-{}", org.id.trim_start_matches("org-"))
}

/// Who a run phase's token speaks for.
pub struct RunIdentity<'a> {
    pub org: &'a Organization,
    pub workspace: &'a Workspace,
    pub run: &'a Run,
    pub phase: Phase,
}

impl RunIdentity<'_> {
    /// HCP's claims for `audience`, issued `now`.
    pub fn claims(&self, base_url: &str, audience: &str, now: i64) -> Value {
        let full_workspace =
            format!("organization:{}:project:{DEFAULT_PROJECT_NAME}:workspace:{}", self.org.name, self.workspace.name);
        let lifetime = i64::try_from(token_lifetime(self.phase)).unwrap_or(i64::MAX);
        json!({
            "jti": uuid::Uuid::new_v4().to_string(),
            "iss": issuer(base_url),
            "aud": audience,
            "iat": now,
            "nbf": now,
            "exp": now.saturating_add(lifetime),
            "sub": format!("{full_workspace}:run_phase:{}", self.phase.as_str()),
            "terraform_organization_id": self.org.id,
            "terraform_organization_name": self.org.name,
            "terraform_project_id": default_project_id(self.org),
            "terraform_project_name": DEFAULT_PROJECT_NAME,
            "terraform_workspace_id": self.workspace.id,
            "terraform_workspace_name": self.workspace.name,
            "terraform_full_workspace": full_workspace,
            "terraform_run_id": self.run.id,
            "terraform_run_phase": self.phase.as_str(),
        })
    }

    async fn token(&self, signer: &dyn TokenSigner, base_url: &str, audience: &str) -> Result<String> {
        let claims = self.claims(base_url, audience, chrono::Utc::now().timestamp());
        identity::sign(signer, &claims).await.map_err(unavailable)
    }
}

/// What a job is given for its credentials: each requested configuration with its token.
/// Tokens are issued only by a Hangar that knows its address (`HANGAR_PUBLIC_URL`): an issuer
/// taken from a request's `Host` would be the caller's to choose.
pub async fn issue(
    signer: Option<&dyn TokenSigner>,
    public_url: Option<&str>,
    who: &RunIdentity<'_>,
    requested: &Requested,
) -> Result<Value> {
    if requested.is_empty() {
        return Ok(json!({ "aws": [], "vault": [], "identity-tokens": [] }));
    }
    let base_url = public_url.ok_or_else(|| {
        RunsError::Conflict(
            "dynamic credentials are asked for but Hangar has no public address to issue tokens as \
             (HANGAR_PUBLIC_URL, the stack's PublicUrl)"
                .into(),
        )
    })?;
    let signer = signer.ok_or_else(|| {
        RunsError::Conflict(
            "dynamic credentials are asked for but Hangar has no identity key (HANGAR_IDENTITY_KMS_KEY_ID)".into(),
        )
    })?;
    let mut aws = Vec::new();
    for role in &requested.aws {
        let token = who.token(signer, base_url, &role.audience).await?;
        aws.push(json!({
            "tag": role.tag, "role-arn": role.role_arn, "audience": role.audience,
            "session-name": who.run.id, "token": token,
        }));
    }
    let mut vault = Vec::new();
    for login in &requested.vault {
        let token = who.token(signer, base_url, &login.audience).await?;
        vault.push(json!({
            "tag": login.tag,
            "address": login.address.clone().unwrap_or_else(|| base_url.trim_end_matches('/').to_owned()),
            "namespace": login.namespace,
            "auth-path": login.auth_path,
            "role": login.role,
            "encoded-cacert": login.encoded_cacert,
            "token": token,
            "aws": login.aws.as_ref().map(|aws| json!({
                "auth-type": aws.auth_type, "mount-path": aws.mount_path,
                "vault-role": aws.vault_role, "role-arn": aws.role_arn, "sleep-seconds": aws.sleep_seconds,
            })),
        }));
    }
    let mut tokens = Vec::new();
    for bare in &requested.tokens {
        let token = who.token(signer, base_url, &bare.audience).await?;
        tokens.push(json!({ "tag": bare.tag, "audience": bare.audience, "token": token }));
    }
    Ok(json!({ "aws": aws, "vault": vault, "identity-tokens": tokens }))
}

/// What a run phase was given tokens for (never the tokens): what the console shows.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Issued {
    pub phase: String,
    pub at: String,
    pub requested: Requested,
}

/// Records that `who`'s phase was given tokens for `requested`.
pub async fn record(store: &dyn ItemStore, who: &RunIdentity<'_>, requested: &Requested) -> Result<()> {
    let key = keys::run_credentials(&who.org.id, &who.workspace.id, &who.run.id, who.phase.as_str());
    let issued =
        Issued { phase: who.phase.as_str().into(), at: chrono::Utc::now().to_rfc3339(), requested: requested.clone() };
    store.put(Item::from_value(key, &issued)?, Condition::Always).await?;
    Ok(())
}

/// What each phase of a run was given tokens for, plan first.
pub async fn issued(store: &dyn ItemStore, org_id: &str, run: &Run) -> Result<Vec<Issued>> {
    let mut found = Vec::new();
    for phase in [Phase::Plan, Phase::Apply] {
        let key = keys::run_credentials(org_id, &run.workspace_id, &run.id, phase.as_str());
        if let Some(item) = store.get(&key).await? {
            found.push(item.parse()?);
        }
    }
    Ok(found)
}

fn unavailable(e: identity::IdentityError) -> RunsError {
    tracing::error!(error = %e, "run identity token");
    RunsError::Unavailable("the identity key could not sign".into())
}
