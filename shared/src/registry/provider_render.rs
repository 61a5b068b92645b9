//! The provider registry's resources in HCP Terraform's wire format: GPG keys, providers,
//! versions and platforms. Create, read and list render through these functions alike.

use serde_json::{json, Value};

use super::providers::{FileLink, GpgKey, Links, Platform, Provider, ProviderVersion};
use crate::accounts::access::Organization;
use crate::api::Resource;
use crate::auth::{Permission, Principal};

/// Where a provider lives in the management API.
pub fn provider_path(org: &Organization, provider: &Provider) -> String {
    format!(
        "/api/v2/organizations/{}/registry-providers/{}/{}/{}",
        org.name,
        provider.registry.as_str(),
        provider.namespace_in(org),
        provider.name
    )
}

pub fn gpg_key(key: &GpgKey, org: &Organization) -> Resource {
    let attributes = json!({
        "ascii-armor": key.ascii_armor,
        "created-at": key.created_at,
        "key-id": key.key_id,
        "namespace": org.name,
        "source": "",
        "source-url": null,
        "trust-signature": "",
        "updated-at": key.updated_at,
    });
    Resource::new("gpg-keys", &key.id, attributes)
        .link("self", format!("/api/registry/private/v2/gpg-keys/{}/{}", org.name, key.key_id))
}

/// A provider; `versions` are its versions' ids where they were read.
pub fn provider(provider: &Provider, org: &Organization, principal: &Principal, versions: &[&str]) -> Resource {
    let path = provider_path(org, provider);
    let attributes = json!({
        "name": provider.name,
        "namespace": provider.namespace_in(org),
        "registry-name": provider.registry.as_str(),
        "created-at": provider.created_at,
        "updated-at": provider.updated_at,
        "permissions": { "can-delete": principal.can(&org.id, Permission::ManageProviders) },
    });
    let mut resource = Resource::new("registry-providers", &provider.id, attributes).to_one(
        "organization",
        "organizations",
        &org.name,
    );
    if provider.is_private() {
        // HCP's documents name the relationship `versions`; go-tfe and pytfe read it as
        // `registry-provider-versions`: both are given.
        let linkage: Vec<Value> =
            versions.iter().map(|id| json!({ "id": id, "type": "registry-provider-versions" })).collect();
        let related = json!({ "data": linkage, "links": { "related": format!("{path}/versions") } });
        resource.relationships.insert("versions".into(), related.clone());
        resource.relationships.insert("registry-provider-versions".into(), related);
    }
    resource.link("self", path)
}

fn permissions(principal: &Principal, org_id: &str) -> Value {
    let manages = principal.can(org_id, Permission::ManageProviders);
    json!({ "can-delete": manages, "can-upload-asset": manages })
}

fn with_file_link(resource: Resource, link: &FileLink, upload: &str, download: &str) -> Resource {
    match link {
        FileLink::Upload(url) => resource.link(upload, url.clone()),
        FileLink::Download(url) => resource.link(download, url.clone()),
        FileLink::None => resource,
    }
}

/// A version, its files' links, and (a Hangar attribute) what keeps it from being served.
pub fn version(version: &ProviderVersion, links: &Links, provider_path: &str, principal: &Principal) -> Resource {
    let attributes = json!({
        "version": version.version,
        "created-at": version.created_at,
        "updated-at": version.updated_at,
        "key-id": version.key_id,
        "protocols": version.protocols,
        "permissions": permissions(principal, &version.org_id),
        "shasums-uploaded": version.shasums.uploaded(),
        "shasums-sig-uploaded": version.shasums_sig.uploaded(),
        "error": version.problem(),
    });
    let platforms = format!("{provider_path}/versions/{}/platforms", version.version);
    let linkage: Vec<Value> =
        version.platforms.iter().map(|p| json!({ "id": p.id, "type": "registry-provider-platforms" })).collect();
    let mut resource = Resource::new("registry-provider-versions", &version.id, attributes).to_one(
        "registry-provider",
        "registry-providers",
        &version.provider_id,
    );
    resource.relationships.insert("platforms".into(), json!({ "data": linkage, "links": { "related": platforms } }));
    let resource = with_file_link(resource, &links.shasums, "shasums-upload", "shasums-download");
    with_file_link(resource, &links.shasums_sig, "shasums-sig-upload", "shasums-sig-download")
}

/// A platform, its archive's link, and (a Hangar attribute) what keeps it from being served.
pub fn platform(platform: &Platform, version: &ProviderVersion, links: &Links, principal: &Principal) -> Resource {
    let attributes = json!({
        "os": platform.os,
        "arch": platform.arch,
        "filename": platform.filename,
        "shasum": platform.shasum,
        "permissions": permissions(principal, &version.org_id),
        "provider-binary-uploaded": platform.binary.uploaded(),
        "error": version.platform_problem(platform),
    });
    let resource = Resource::new("registry-provider-platforms", &platform.id, attributes).to_one(
        "registry-provider-version",
        "registry-provider-versions",
        &version.id,
    );
    with_file_link(resource, links.binary(platform), "provider-binary-upload", "provider-binary-download")
}
