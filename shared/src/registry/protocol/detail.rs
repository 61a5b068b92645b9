//! A version's parsed metadata in the public registry's v1 module detail shapes: `root`,
//! `submodules` and `examples` (each with `path`, `name`, `readme`, `empty`, `inputs`,
//! `outputs`, `dependencies`, `provider_dependencies`, `resources`) and `providers`.

use serde_json::{json, Value};

use crate::archive::{ModuleDirectory, ModuleMetadata};

/// The detail's metadata members for a module named `name` whose root README is `readme` (the
/// version's own); without metadata (a version ingested before it was read), the root alone
/// with what the version holds.
pub(super) fn members(name: &str, readme: &str, empty: bool, metadata: Option<&ModuleMetadata>) -> Value {
    let Some(metadata) = metadata else {
        let root = ModuleDirectory { empty, ..ModuleDirectory::default() };
        return json!({ "root": directory(&root, name, readme), "submodules": [], "examples": [] });
    };
    let nested = |directories: &[ModuleDirectory]| -> Vec<Value> {
        let name_of = |path: &str| path.rsplit('/').next().unwrap_or(path).to_owned();
        directories.iter().map(|d| directory(d, &name_of(&d.path), d.readme.as_deref().unwrap_or(""))).collect()
    };
    let mut members = json!({
        "root": directory(&metadata.root, name, readme),
        "submodules": nested(&metadata.submodules),
        "examples": nested(&metadata.examples),
    });
    if let Some(problem) = &metadata.problem {
        // Not in the public registry's shape: what kept some of the metadata from being read.
        members["metadata_problem"] = json!(problem);
    }
    members
}

/// The providers the module's root needs, by local name; `fallback` (the module's own
/// provider) when it names none.
pub(super) fn providers(metadata: Option<&ModuleMetadata>, fallback: &str) -> Vec<String> {
    let mut names: Vec<String> =
        metadata.map(|m| m.root.provider_dependencies.iter().map(|p| p.name.clone()).collect()).unwrap_or_default();
    if names.is_empty() {
        names.push(fallback.to_owned());
    }
    names
}

fn directory(directory: &ModuleDirectory, name: &str, readme: &str) -> Value {
    let inputs: Vec<Value> = directory
        .inputs
        .iter()
        .map(|input| {
            // The public registry writes a default as JSON text, and "" where there is none.
            let default = input.default.as_ref().map(Value::to_string).unwrap_or_default();
            json!({
                "name": input.name, "type": input.kind, "description": input.description,
                "default": default, "required": input.required,
            })
        })
        .collect();
    let outputs: Vec<Value> =
        directory.outputs.iter().map(|o| json!({ "name": o.name, "description": o.description })).collect();
    let dependencies: Vec<Value> = directory
        .dependencies
        .iter()
        .map(|call| json!({ "name": call.name, "source": call.source, "version": call.version }))
        .collect();
    let providers: Vec<Value> = directory
        .provider_dependencies
        .iter()
        .map(|p| json!({ "name": p.name, "namespace": p.namespace, "source": p.source, "version": p.version }))
        .collect();
    let resources: Vec<Value> = directory.resources.iter().map(|r| json!({ "name": r.name, "type": r.kind })).collect();
    json!({
        "path": directory.path,
        "name": name,
        "readme": readme,
        "empty": directory.empty,
        "inputs": inputs,
        "outputs": outputs,
        "dependencies": dependencies,
        "provider_dependencies": providers,
        "resources": resources,
    })
}
