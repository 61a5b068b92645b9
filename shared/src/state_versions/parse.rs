//! What Hangar reads from a Terraform state (format version 4, what Terraform 0.12 and later
//! write): its serial and lineage, which a write checks, and what HCP shows of it (outputs,
//! resources, providers, the Terraform version). Only those members are parsed; the rest of a
//! state, however large, is skipped without being built.

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many resource summaries are kept on a state version (grouped by module, type and
/// name, so far fewer than the state's instances); the count covers them all.
pub const MAX_RESOURCE_SUMMARIES: usize = 200;

/// A state's serial, lineage and what HCP shows of it.
#[derive(Debug, Clone)]
pub struct StateFacts {
    pub serial: u64,
    pub lineage: String,
    pub terraform_version: Option<String>,
    pub state_version: u64,
    /// How many outputs it has; they are numbered in name order ([`outputs`]).
    pub output_count: usize,
    /// Managed resource instances, HCP's `resource-count`.
    pub resource_count: u64,
    pub resources: Vec<ResourceSummary>,
    /// Per provider, how many resources of each type.
    pub providers: BTreeMap<String, BTreeMap<String, u64>>,
}

/// One resource block of the state, as HCP's `resources` attribute lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSummary {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub count: u64,
    pub module: String,
    pub provider: String,
}

#[derive(Deserialize)]
struct RawState {
    version: u64,
    terraform_version: Option<String>,
    serial: u64,
    lineage: String,
    #[serde(default)]
    outputs: BTreeMap<String, IgnoredAny>,
    #[serde(default)]
    resources: Vec<RawResource>,
}

#[derive(Deserialize)]
struct RawResource {
    #[serde(default)]
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    name: String,
    #[serde(default)]
    module: Option<String>,
    #[serde(default)]
    provider: String,
    #[serde(default)]
    instances: Vec<IgnoredAny>,
}

/// Why a body is not a state Hangar keeps.
#[derive(Debug, thiserror::Error)]
pub enum NotAState {
    #[error("the state is not a Terraform state: {0}")]
    Malformed(String),
    #[error("the state is format version {0}; Hangar keeps version 4 (Terraform 0.12 and later)")]
    Version(u64),
    #[error("the state's {0} is longer than {MAX_LABEL} bytes")]
    TooLong(&'static str),
}

/// The longest lineage and Terraform version a state may declare (Terraform writes a UUID and
/// a version number).
pub const MAX_LABEL: usize = 64;

/// Reads what Hangar keeps of a state.
pub fn facts(state: &[u8]) -> Result<StateFacts, NotAState> {
    let raw: RawState = serde_json::from_slice(state).map_err(|e| NotAState::Malformed(e.to_string()))?;
    if raw.version != 4 {
        return Err(NotAState::Version(raw.version));
    }
    if raw.lineage.len() > MAX_LABEL {
        return Err(NotAState::TooLong("lineage"));
    }
    if raw.terraform_version.as_ref().is_some_and(|version| version.len() > MAX_LABEL) {
        return Err(NotAState::TooLong("terraform_version"));
    }
    let mut resources: Vec<ResourceSummary> = Vec::new();
    let mut providers: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut resource_count = 0;
    for resource in raw.resources.iter().filter(|r| r.mode == "managed") {
        let count = resource.instances.len() as u64;
        resource_count += count;
        *providers.entry(resource.provider.clone()).or_default().entry(resource.kind.clone()).or_default() += count;
        if resources.len() < MAX_RESOURCE_SUMMARIES {
            resources.push(ResourceSummary {
                name: resource.name.clone(),
                kind: resource.kind.clone(),
                count,
                module: resource.module.clone().unwrap_or_else(|| "root".to_owned()),
                provider: resource.provider.clone(),
            });
        }
    }
    Ok(StateFacts {
        serial: raw.serial,
        lineage: raw.lineage,
        terraform_version: raw.terraform_version,
        state_version: raw.version,
        output_count: raw.outputs.len(),
        resource_count,
        resources,
        providers,
    })
}

/// One output of a state.
#[derive(Debug, Clone, Deserialize)]
pub struct Output {
    #[serde(skip)]
    pub name: String,
    pub value: Value,
    /// Terraform's type of the value (`"string"`, `["list", "string"]`, …).
    #[serde(rename = "type", default)]
    pub detailed_type: Value,
    #[serde(default)]
    pub sensitive: bool,
}

impl Output {
    /// HCP's coarse `type`: the JSON kind of the value.
    pub fn simple_type(&self) -> &'static str {
        let kind = match &self.detailed_type {
            Value::String(kind) => kind.as_str(),
            Value::Array(parts) => parts.first().and_then(Value::as_str).unwrap_or(""),
            _ => "",
        };
        match kind {
            "string" => "string",
            "number" => "number",
            "bool" => "boolean",
            "list" | "set" | "tuple" => "array",
            "map" | "object" => "object",
            _ => "unknown",
        }
    }
}

#[derive(Deserialize)]
struct RawOutputs {
    #[serde(default)]
    outputs: BTreeMap<String, Output>,
}

/// A state's outputs, in name order: the order their ids number them in.
pub fn outputs(state: &[u8]) -> Result<Vec<Output>, NotAState> {
    let raw: RawOutputs = serde_json::from_slice(state).map_err(|e| NotAState::Malformed(e.to_string()))?;
    Ok(raw.outputs.into_iter().map(|(name, output)| Output { name, ..output }).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = r#"{
        "version": 4, "terraform_version": "1.0.3", "serial": 7, "lineage": "abc",
        "outputs": {
            "b": {"value": ["x"], "type": ["list", "string"]},
            "a": {"value": "s3cret", "type": "string", "sensitive": true}
        },
        "resources": [
            {"mode": "managed", "type": "aws_instance", "name": "web", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
             "instances": [{"attributes": {}}, {"attributes": {}}]},
            {"mode": "data", "type": "aws_ami", "name": "ubuntu", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
             "instances": [{}]},
            {"module": "module.net", "mode": "managed", "type": "aws_vpc", "name": "main", "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
             "instances": [{}]}
        ]
    }"#;

    #[test]
    fn facts_count_managed_instances_and_group_them_by_provider() {
        let facts = facts(STATE.as_bytes()).unwrap();
        assert_eq!((facts.serial, facts.lineage.as_str(), facts.output_count), (7, "abc", 2));
        assert_eq!(facts.resource_count, 3, "data sources are not resources");
        assert_eq!(facts.resources.len(), 2);
        assert_eq!(facts.resources[1].module, "module.net");
        let aws = &facts.providers["provider[\"registry.terraform.io/hashicorp/aws\"]"];
        assert_eq!((aws["aws_instance"], aws["aws_vpc"]), (2, 1));
    }

    #[test]
    fn outputs_come_in_name_order_with_their_types() {
        let outputs = outputs(STATE.as_bytes()).unwrap();
        assert_eq!(outputs.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(outputs[0].sensitive);
        assert_eq!((outputs[0].simple_type(), outputs[1].simple_type()), ("string", "array"));
    }

    #[test]
    fn what_is_not_a_version_4_state_is_refused() {
        assert!(matches!(facts(b"not json"), Err(NotAState::Malformed(_))));
        assert!(matches!(facts(br#"{"version": 3, "serial": 1, "lineage": "x"}"#), Err(NotAState::Version(3))));
        assert!(matches!(facts(br#"{"version": 4, "lineage": "x"}"#), Err(NotAState::Malformed(_))));
    }
}
