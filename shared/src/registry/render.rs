//! The registry's resources in HCP Terraform's wire format. Create, get and list all render
//! through these functions, so they return identical objects for one module.

use serde_json::{json, Value};

use super::modules::{Shown, NON_VCS};
use super::status::{Deprecation, Revocation};
use super::versions::ModuleVersion;
use crate::accounts::access::Organization;
use crate::api::{Document, Resource};
use crate::archive::ModuleMetadata;
use crate::auth::{Permission, Principal};

pub fn module(shown: &Shown, org: &Organization, principal: &Principal) -> Resource {
    let module = &shown.module;
    let namespace = module.namespace_in(org);
    let manages = principal.can(&org.id, Permission::ManageModules);
    let mut attributes = json!({
        "name": module.name,
        "namespace": namespace,
        "provider": module.provider,
        "registry-name": module.registry,
        "status": module.status,
        "version-statuses": shown
            .statuses
            .iter()
            .map(|v| json!({
                "version": v.version,
                "status": v.status,
                "error": v.error,
                "deprecation": deprecation(v.deprecation.as_ref()),
                "revocation": revocation(v.revocation.as_ref()),
            }))
            .collect::<Vec<_>>(),
        // HCP Terraform's list of a module's revoked versions.
        "revoked-versions": shown
            .statuses
            .iter()
            .filter(|v| v.revocation.is_some())
            .map(|v| v.version.as_str())
            .collect::<Vec<_>>(),
        "created-at": module.created_at,
        "updated-at": module.updated_at,
        "no-code": module.no_code,
        "publishing-mechanism": module.publishing_mechanism.as_deref().unwrap_or(NON_VCS),
        // What the caller's permissions allow, as HCP Terraform answers (go-tfe's tests expect
        // both true for an owner of a new module); an action the module's state does not allow
        // (a resync without a repository, a retry of a version that has not failed) is a 422.
        "permissions": {
            "can-delete": principal.can(&org.id, Permission::Own),
            "can-resync": manages,
            "can-retry": manages,
        },
    });
    if let Some(repo) = &module.vcs_repo {
        attributes["vcs-repo"] = json!({
            "branch": repo.branch,
            "ingress-submodules": repo.ingress_submodules,
            "identifier": repo.identifier,
            "display-identifier": repo.display_identifier,
            "oauth-token-id": repo.oauth_token_id,
            "webhook-url": repo.webhook_url,
            "service-provider": repo.service_provider,
            "repository-http-url": repo.repository_http_url,
            "tags": repo.branch.is_empty(),
            "source-directory": repo.source_directory,
            "tag-prefix": repo.tag_prefix,
        });
        if let Some(error) = &repo.setup_error {
            attributes["vcs-repo"]["error"] = json!(error);
        }
    }
    if let Some(test_config) = &module.test_config {
        attributes["test-config"] = json!({ "id": test_config.id, "tests-enabled": test_config.tests_enabled });
    }
    Resource::new("registry-modules", &module.id, attributes).to_one("organization", "organizations", &org.name).link(
        "self",
        format!(
            "/api/v2/organizations/{}/registry-modules/{}/{namespace}/{}/{}",
            org.name,
            module.registry.as_str(),
            module.name,
            module.provider
        ),
    )
}

/// A version; `upload` is the link for its archive while it waits for one.
/// One version as `GET …/version` shows it: with its parsed `metadata` (what its Terraform
/// files declare: a Hangar attribute, the registry protocol's detail in JSON:API's case), when
/// it was read.
pub fn version_with_metadata(
    version: &ModuleVersion,
    upload: Option<String>,
    metadata: Option<&ModuleMetadata>,
) -> Resource {
    let mut resource = self::version(version, upload);
    if let Some(metadata) = metadata {
        resource.attributes["metadata"] = serde_json::to_value(metadata).unwrap_or(Value::Null);
    }
    resource
}

pub fn version(version: &ModuleVersion, upload: Option<String>) -> Resource {
    let mut attributes = json!({
        "source": version.source,
        "status": version.status,
        "version": version.version,
        "created-at": version.created_at,
        "updated-at": version.updated_at,
        "deprecation": deprecation(version.deprecation.as_ref()),
        "revocation": revocation(version.revocation.as_ref()),
    });
    if let Some(error) = &version.error {
        attributes["error"] = Value::String(error.clone());
    }
    let resource = Resource::new("registry-module-versions", &version.id, attributes)
        .to_one("registry-module", "registry-modules", &version.module_id)
        .to_one_or_null("deprecation", "deprecations", version.deprecation.as_ref().map(|d| d.id.as_str()));
    match upload {
        Some(url) => resource.link("upload", url),
        None => resource,
    }
}

/// A version's deprecation as the management API shows it; `null` when it is not deprecated.
fn deprecation(deprecation: Option<&Deprecation>) -> Value {
    deprecation.map_or(Value::Null, |d| {
        json!({
            "deprecated-status": "Deprecated",
            "reason": d.reason,
            "link": d.link,
            "deprecated-at": d.deprecated_at,
        })
    })
}

/// A version's revocation as the management API shows it; `null` when it is not revoked.
fn revocation(revocation: Option<&Revocation>) -> Value {
    revocation.map_or(
        Value::Null,
        |r| json!({ "status": "Revoked", "message": r.message, "link": r.link, "revoked-at": r.revoked_at }),
    )
}

/// A document of one version `resource` with its deprecation `included`, as HCP Terraform
/// answers a deprecation: a `deprecations` resource with the reason and the link.
pub fn with_deprecation(resource: Resource, version: &ModuleVersion) -> Document {
    match &version.deprecation {
        Some(d) => Document::one(resource).included(vec![Resource::new(
            "deprecations",
            &d.id,
            json!({ "reason": d.reason, "link": d.link }),
        )]),
        None => Document::one(resource),
    }
}
