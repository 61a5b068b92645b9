//! State versions and their outputs as HCP Terraform shapes them.

use serde_json::{json, Value};

use super::parse::Output;
use super::record::StateVersion;
use super::versions::{Form, Links, Seen};
use crate::api::Resource;

pub fn state_version(version: &StateVersion, seen: &Seen, links: &Links) -> Resource {
    let outputs: Vec<String> = (0..version.output_count).map(|index| version.output_id(index)).collect();
    Resource::new(
        "state-versions",
        &version.id,
        json!({
            "created-at": version.created_at,
            "size": version.size,
            "serial": version.serial,
            "lineage": version.lineage,
            "md5": version.md5,
            "state-version": version.state_version,
            "terraform-version": version.terraform_version,
            "status": version.status.as_str(),
            "intermediate": false,
            "resources-processed": true,
            "resources": version.resources,
            "providers": version.providers,
            "billable-rum-count": version.resource_count,
            "hosted-state-download-url": links.url(version, Form::State, &seen.may),
            "hosted-json-state-download-url": links.url(version, Form::Json, &seen.may),
            "hosted-state-upload-url": null,
            "hosted-json-state-upload-url": null,
            "vcs-commit-sha": null,
            "vcs-commit-url": null,
        }),
    )
    .to_one("workspace", "workspaces", &version.workspace_id)
    .to_one("created-by", "users", &version.created_by)
    .to_one_or_null("run", "runs", None)
    .to_many("outputs", "state-version-outputs", outputs)
    .link("self", format!("/api/v2/state-versions/{}", version.id))
}

/// A version just made without its state, with the links that take it (shown only to its
/// writer, in the answer to the create).
pub fn with_upload_links(mut resource: Resource, links: Option<(String, String)>) -> Resource {
    if let Some((state, json)) = links {
        resource.attributes["hosted-state-upload-url"] = json!(state);
        resource.attributes["hosted-json-state-upload-url"] = json!(json);
    }
    resource
}

/// One output; a sensitive value only where `reveal` (HCP shows it when an output is read
/// alone, never in a list).
pub fn output(output: &Output, id: &str, reveal: bool) -> Resource {
    let value = if output.sensitive && !reveal { Value::Null } else { output.value.clone() };
    Resource::new(
        "state-version-outputs",
        id,
        json!({
            "name": output.name,
            "sensitive": output.sensitive,
            "type": output.simple_type(),
            "value": value,
            "detailed-type": output.detailed_type,
        }),
    )
    .link("self", format!("/api/v2/state-version-outputs/{id}"))
}

/// A state version's outputs, listed.
pub fn outputs(version: &StateVersion, outputs: &[Output]) -> Vec<Resource> {
    outputs.iter().enumerate().map(|(index, o)| output(o, &version.output_id(index), false)).collect()
}
