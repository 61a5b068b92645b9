//! The accounts family's resources in HCP Terraform's wire format.

use serde_json::{json, Value};

use super::access::Organization;
use super::entitlements::Entitlements;
use super::grants::TeamAccess;
use super::teams::{Team, TeamToken};
use super::variables::Variable;
use super::workspaces::{Workspace, WorkspacePermissions};
use crate::api::Resource;
use crate::auth::{Permission, Principal};

pub fn organization(org: &Organization, principal: &Principal) -> Resource {
    let owns = principal.can(&org.id, Permission::Own);
    Resource::new(
        "organizations",
        &org.name,
        json!({
            "name": org.name,
            "email": org.email,
            "external-id": org.id,
            "created-at": org.created_at,
            "collaborator-auth-policy": "password",
            "default-execution-mode": "remote",
            "permissions": {
                "can-update": owns,
                "can-destroy": owns,
                "can-create-team": owns,
                "can-create-workspace": principal.can(&org.id, Permission::ManageWorkspaces),
                "can-create-module": principal.can(&org.id, Permission::ManageModules),
                "can-manage-agent-pools": principal.can(&org.id, Permission::ManageAgentPools),
                "can-create-provider": principal.can(&org.id, Permission::ManageProviders),
            },
        }),
    )
    .link("self", format!("/api/v2/organizations/{}", org.name))
}

/// An entitlement set as HCP shapes it: its id is the organization's, and every feature HCP
/// names is there, false where Hangar does not serve it.
pub fn entitlements(org: &Organization, features: &Entitlements) -> Resource {
    Resource::new(
        "entitlement-sets",
        &org.id,
        json!({
            "agents": features.agents,
            "audit-logging": false,
            "configuration-designer": false,
            "cost-estimation": false,
            "global-run-tasks": false,
            "module-tests-generation": false,
            "operations": features.operations,
            "private-module-registry": features.private_module_registry,
            "private-policy-agents": false,
            "private-run-tasks": false,
            "private-vcs": false,
            "run-tasks": false,
            "self-serve-billing": false,
            "sentinel": false,
            "sso": false,
            "state-storage": features.state_storage,
            "teams": features.teams,
            "usage-reporting": false,
            "vcs-integrations": features.vcs_integrations,
            "waypoint-actions": false,
            "waypoint-templates-and-addons": false,
        }),
    )
    .link("self", format!("/api/v2/entitlement-sets/{}", org.id))
}

pub fn team(team: &Team, org_name: &str) -> Resource {
    Resource::new(
        "teams",
        &team.id,
        json!({
            "name": team.name,
            "visibility": team.visibility,
            "created-at": team.created_at,
            "users-count": 0,
            "organization-access": team.access,
            "permissions": { "can-update-membership": false, "can-destroy": !team.is_owners() },
        }),
    )
    .to_one("organization", "organizations", org_name)
    .related_link("authentication-token", format!("/api/v2/teams/{}/authentication-token", team.id))
    .link("self", format!("/api/v2/teams/{}", team.id))
}

/// A team token; `secret` is given only in the response that created it.
/// An organization token, as HCP Terraform shows it.
pub fn organization_token(token: &TeamToken, secret: Option<&str>) -> Resource {
    Resource::new("authentication-tokens", &token.id, token_attributes(token, secret))
}

fn token_attributes(token: &TeamToken, secret: Option<&str>) -> Value {
    json!({
        "created-at": token.created_at,
        "last-used-at": null,
        "description": token.description,
        "expired-at": token.expired_at,
        "token": secret,
    })
}

pub fn token(token: &TeamToken, team: &Team, secret: Option<&str>) -> Resource {
    Resource::new("authentication-tokens", &token.id, token_attributes(token, secret)).to_one("team", "teams", &team.id)
}

/// A workspace as HCP shapes it, with what the caller may do with it. The permissions of what
/// Hangar does not serve (tags, run tasks) are false.
pub fn workspace(workspace: &Workspace, org_name: &str, may: &WorkspacePermissions) -> Resource {
    Resource::new(
        "workspaces",
        &workspace.id,
        json!({
            "name": workspace.name,
            "description": workspace.description,
            "execution-mode": workspace.execution_mode,
            // What Terraform before 1.1 reads instead of the mode: whether runs are remote.
            "operations": workspace.execution_mode != "local",
            "vcs-repo": null,
            "terraform-version": workspace.settings.terraform_version.as_deref().unwrap_or("latest"),
            "working-directory": workspace.settings.working_directory,
            "auto-apply": workspace.settings.auto_apply,
            "created-at": workspace.created_at,
            "updated-at": workspace.updated_at.as_deref().unwrap_or(&workspace.created_at),
            "resource-count": workspace.resource_count,
            "actions": { "is-destroyable": true },
            "permissions": {
                "can-read-settings": true,
                "can-update": may.manage,
                "can-destroy": may.manage,
                "can-force-delete": may.manage,
                "can-lock": may.lock,
                "can-unlock": may.lock,
                "can-force-unlock": may.manage,
                "can-queue-run": may.queue_run,
                "can-queue-apply": may.apply_run,
                "can-queue-destroy": may.apply_run,
                "can-read-variable": may.read_variables,
                "can-update-variable": may.write_variables,
                "can-read-state-versions": may.read_state,
                "can-read-state-outputs": may.read_state_outputs,
                "can-create-state-versions": may.write_state,
                "can-manage-tags": false,
                "can-manage-run-tasks": false,
            },
            "locked": workspace.locked_by.is_some(),
            "locked-reason": workspace.locked_by.as_ref().and_then(|lock| lock.reason.as_deref()),
        }),
    )
    .to_one("organization", "organizations", org_name)
    .to_one_or_null("locked-by", locker_kind(workspace), workspace.locked_by.as_ref().map(|lock| lock.holder.as_str()))
    .to_one_or_null("agent-pool", "agent-pools", workspace.agent_pool_id.as_deref())
    .to_one_or_null("current-run", "runs", current_run(workspace))
    .to_one_or_null("current-state-version", "state-versions", workspace.current_state.as_ref().map(|s| s.id.as_str()))
    .link("self", format!("/api/v2/organizations/{org_name}/workspaces/{}", workspace.name))
}

/// The run that holds the workspace's lock, if one does: HCP's `current-run`.
fn current_run(workspace: &Workspace) -> Option<&str> {
    let holder = workspace.locked_by.as_ref().map(|lock| lock.holder.as_str());
    holder.filter(|holder| crate::ids::Kind::of(holder) == Some(crate::ids::Kind::Run))
}

/// What holds a workspace's lock, as HCP names it: a run (its own id) or a user.
fn locker_kind(workspace: &Workspace) -> &'static str {
    match current_run(workspace) {
        Some(_) => "runs",
        None => "users",
    }
}

/// A team's access to a workspace, with the permissions it grants.
pub fn team_access(access: &TeamAccess) -> Resource {
    let grants = serde_json::to_value(access.grants).expect("grants serialize");
    let mut attributes = json!({ "access": access.access.as_str() });
    if let (Some(all), Value::Object(grants)) = (attributes.as_object_mut(), grants) {
        all.extend(grants);
    }
    Resource::new("team-workspaces", &access.id, attributes)
        .to_one("team", "teams", &access.team_id)
        .to_one("workspace", "workspaces", &access.workspace_id)
        .link("self", format!("/api/v2/team-workspaces/{}", access.id))
}

/// A workspace variable; a sensitive one without its value.
pub fn variable(variable: &Variable) -> Resource {
    Resource::new(
        "vars",
        &variable.id,
        json!({
            "key": variable.key,
            "value": if variable.sensitive { None } else { variable.value.as_deref() },
            "description": variable.description,
            "category": variable.category.as_str(),
            "hcl": variable.hcl,
            "sensitive": variable.sensitive,
            "created-at": variable.created_at,
            "version-id": format!("{}-{}", variable.id, variable.revision),
        }),
    )
    .to_one("configurable", "workspaces", &variable.workspace_id)
    .link("self", format!("/api/v2/workspaces/{}/vars/{}", variable.workspace_id, variable.id))
}

/// The caller as HCP Terraform describes a token's user: a service account for team tokens.
pub fn user(principal: &Principal) -> Resource {
    let (id, username) = principal.user_identity();
    Resource::new(
        "users",
        &id,
        json!({
            "username": username,
            "is-service-account": !principal.is_site_admin(),
            "is-site-admin": principal.is_site_admin(),
            "email": null,
            "avatar-url": null,
            "two-factor": { "enabled": false, "verified": false },
            "permissions": {
                "can-create-organizations": principal.is_site_admin(),
                "can-change-email": false,
                "can-change-username": false,
                "can-manage-user-tokens": false,
            },
        }),
    )
    .link("self", format!("/api/v2/users/{id}"))
}

/// A VCS connection; `base` is the public base URL its OAuth callback would live under.
pub fn oauth_client(client: &super::oauth::OAuthClient, org_name: &str, base: &str) -> Resource {
    Resource::new(
        "oauth-clients",
        &client.id,
        json!({
            "created-at": client.created_at,
            "callback-url": format!("{base}/auth/{}/callback", client.id),
            "connect-path": format!("/auth/{}?organization_id={}", client.id, client.org_id),
            "service-provider": client.service_provider,
            "service-provider-display-name": client.service_provider_display_name(),
            "name": client.name,
            "http-url": client.http_url,
            "api-url": client.api_url,
            "key": null,
            "secret": null,
            "rsa-public-key": null,
        }),
    )
    .to_one("organization", "organizations", org_name)
    .to_many("oauth-tokens", "oauth-tokens", [client.oauth_token_id.as_str()])
    .link("self", format!("/api/v2/oauth-clients/{}", client.id))
}

/// A VCS connection's OAuth token: which connection it belongs to, never the credential.
pub fn oauth_token(token: &super::oauth::OAuthToken) -> Resource {
    Resource::new(
        "oauth-tokens",
        &token.id,
        json!({
            "uid": token.id,
            "created-at": token.created_at,
            "has-ssh-key": false,
            "service-provider-user": null,
        }),
    )
    .to_one("oauth-client", "oauth-clients", &token.oauth_client_id)
    .link("self", format!("/api/v2/oauth-tokens/{}", token.id))
}
