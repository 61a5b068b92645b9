//! A module's metadata, read from the sources the walk kept (HCL with hcl-rs, `.tf.json` with
//! serde_json): per directory its inputs, outputs, required providers, module calls, resources
//! and data sources, as the public registry's v1 module detail shows them. A directory that does
//! not parse still has a version behind it (Terraform will say what is wrong); its metadata says
//! it could not be read and why, and keeps what the other files gave.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::sources::{DirectorySources, ModuleSources};

/// A module's metadata: the root, its submodules (`modules/*`) and examples (`examples/*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModuleMetadata {
    pub root: ModuleDirectory,
    #[serde(default)]
    pub submodules: Vec<ModuleDirectory>,
    #[serde(default)]
    pub examples: Vec<ModuleDirectory>,
    /// What kept some of it from being read (sources over budget, files that do not parse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One directory of a module.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModuleDirectory {
    /// `""` for the root, `modules/<name>` or `examples/<name>`.
    pub path: String,
    /// The directory's README (the root's is the version's own, kept apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readme: Option<String>,
    /// No `.tf` or `.tf.json` file.
    pub empty: bool,
    #[serde(default)]
    pub inputs: Vec<Input>,
    #[serde(default)]
    pub outputs: Vec<Output>,
    /// Module calls (`module "…" { source, version }`).
    #[serde(default)]
    pub dependencies: Vec<ModuleCall>,
    #[serde(default)]
    pub provider_dependencies: Vec<ProviderDependency>,
    #[serde(default)]
    pub resources: Vec<Resource>,
    #[serde(default)]
    pub data_sources: Vec<Resource>,
    /// Why some of its files could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    pub name: String,
    /// The type constraint as written (`list(string)`), empty when none.
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
    /// The default value, when it has one (then it is not required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    pub required: bool,
    pub sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub name: String,
    pub description: String,
    pub sensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModuleCall {
    pub name: String,
    pub source: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderDependency {
    /// The local name (`aws`).
    pub name: String,
    /// The source's namespace (`hashicorp`).
    pub namespace: String,
    /// The source (`hashicorp/aws`; Terraform's default for a bare local name).
    pub source: String,
    /// The version constraint, empty when none.
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
}

/// Parses source files on a thread of its own as the walk hands them over, so that parsing
/// overlaps the decompression the walk waits on; a machine that cannot start a thread parses them
/// in place.
pub(super) struct Parser {
    sender: Option<mpsc::Sender<(String, String, String)>>,
    worker: Option<thread::JoinHandle<Parsed>>,
    in_place: Parsed,
}

/// What each directory's files declare, by directory.
type Parsed = BTreeMap<String, Declarations>;

impl Parser {
    pub(super) fn start() -> Self {
        let (sender, files) = mpsc::channel::<(String, String, String)>();
        let worker = thread::Builder::new().name("module-metadata".into()).spawn(move || {
            let mut parsed = Parsed::new();
            for (directory, name, text) in files {
                parse_file(parsed.entry(directory).or_default(), &name, &text);
            }
            parsed
        });
        match worker {
            Ok(worker) => Parser { sender: Some(sender), worker: Some(worker), in_place: Parsed::new() },
            Err(_) => Parser { sender: None, worker: None, in_place: Parsed::new() },
        }
    }

    pub(super) fn parse(&mut self, directory: &str, name: &str, text: String) {
        let file = (directory.to_owned(), name.to_owned(), text);
        // A worker that is gone (it panicked: `finish` says so) leaves the file to parse here.
        let (directory, name, text) = match &self.sender {
            Some(sender) => match sender.send(file) {
                Ok(()) => return,
                Err(mpsc::SendError(file)) => file,
            },
            None => file,
        };
        parse_file(self.in_place.entry(directory).or_default(), &name, &text);
    }

    fn finish(mut self) -> Parsed {
        drop(self.sender.take());
        match self.worker.take().map(thread::JoinHandle::join) {
            Some(Ok(parsed)) => parsed,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => self.in_place,
        }
    }
}

/// Reads the metadata of every directory the walk kept, once its parser has read every file.
pub fn read(sources: ModuleSources) -> ModuleMetadata {
    let mut parsed = sources.parser.map(Parser::finish).unwrap_or_default();
    let mut directory =
        |path: &str, kept: &DirectorySources| directory(path, kept, parsed.remove(path).unwrap_or_default());
    let mut metadata = ModuleMetadata { problem: sources.left_out.clone(), ..ModuleMetadata::default() };
    let empty = DirectorySources::default();
    metadata.root = directory("", sources.directories.get("").unwrap_or(&empty));
    for (path, kept) in sources.directories.iter().filter(|(path, _)| !path.is_empty()) {
        let read = directory(path, kept);
        if path.starts_with("modules/") {
            metadata.submodules.push(read);
        } else {
            metadata.examples.push(read);
        }
    }
    let unreadable: Vec<String> = std::iter::once(&metadata.root)
        .chain(&metadata.submodules)
        .chain(&metadata.examples)
        .filter_map(|dir| dir.problem.as_ref().map(|problem| format!("{}: {problem}", shown_path(&dir.path))))
        .collect();
    if !unreadable.is_empty() {
        let joined = unreadable.join("; ");
        metadata.problem = Some(match metadata.problem.take() {
            Some(earlier) => format!("{earlier}; {joined}"),
            None => joined,
        });
    }
    metadata
}

fn shown_path(path: &str) -> &str {
    if path.is_empty() {
        "root module"
    } else {
        path
    }
}

/// Everything one directory declares, file by file.
#[derive(Default)]
struct Declarations {
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    calls: Vec<ModuleCall>,
    providers: BTreeMap<String, ProviderDependency>,
    resources: Vec<Resource>,
    data_sources: Vec<Resource>,
    problems: Vec<String>,
}

/// Reads one file into what its directory declares; a file that does not parse is named.
fn parse_file(found: &mut Declarations, name: &str, text: &str) {
    let read = if name.ends_with(".tf.json") { json_file(text, found) } else { hcl_file(text, found) };
    if let Err(problem) = read {
        found.problems.push(format!("{name}: {problem}"));
    }
}

/// How deep a variable's default may nest, and how large it may be as JSON, to be kept: the
/// stored metadata must read back in every store (DynamoDB nests an item 32 levels at most, and
/// the default lies some six below its top), and a page shows it whole.
pub const MAX_DEFAULT_DEPTH: usize = 16;
pub const MAX_DEFAULT_BYTES: usize = 16 * 1024;

/// The depth of a JSON value (a scalar is 1), counted without recursion.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 1)];
    while let Some((value, at)) = pending.pop() {
        deepest = deepest.max(at);
        match value {
            Value::Array(items) => pending.extend(items.iter().map(|item| (item, at + 1))),
            Value::Object(fields) => pending.extend(fields.values().map(|field| (field, at + 1))),
            _ => {}
        }
    }
    deepest
}

/// Drops a default nested or sized past the bounds, in its place a note of why, and says so in
/// `problems`: a module's metadata is readable by construction, whatever its author wrote.
fn bound_default(input: &mut Input, problems: &mut Vec<String>) {
    let Some(default) = &input.default else { return };
    let why = if depth(default) > MAX_DEFAULT_DEPTH {
        format!("nests deeper than {MAX_DEFAULT_DEPTH} levels")
    } else if serde_json::to_string(default).map_or(true, |text| text.len() > MAX_DEFAULT_BYTES) {
        format!("is larger than {MAX_DEFAULT_BYTES} bytes")
    } else {
        return;
    };
    problems.push(format!("the default of variable {} {why}: not kept", input.name));
    // Taken apart without recursion: a value nested to the parser's limit can be dropped deeper
    // than a thread's stack allows.
    let mut pending = vec![input.default.replace(Value::String(format!("(not kept: it {why})"))).unwrap_or_default()];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(fields) => pending.extend(fields.into_iter().map(|(_, field)| field)),
            _ => {}
        }
    }
}

fn directory(path: &str, kept: &DirectorySources, mut found: Declarations) -> ModuleDirectory {
    for input in &mut found.inputs {
        bound_default(input, &mut found.problems);
    }
    found.inputs.sort_by(|a, b| a.name.cmp(&b.name));
    found.outputs.sort_by(|a, b| a.name.cmp(&b.name));
    ModuleDirectory {
        path: path.to_owned(),
        readme: kept.readme.clone(),
        empty: kept.files.is_empty(),
        inputs: found.inputs,
        outputs: found.outputs,
        dependencies: found.calls,
        provider_dependencies: found.providers.into_values().collect(),
        resources: found.resources,
        data_sources: found.data_sources,
        problem: (!found.problems.is_empty()).then(|| found.problems.join("; ")),
    }
}

// ----- HCL -----

fn hcl_file(text: &str, found: &mut Declarations) -> Result<(), String> {
    let body = hcl::parse(text).map_err(|e| first_line(&e.to_string()))?;
    for block in body.blocks() {
        let labels: Vec<&str> = block.labels().iter().map(hcl::BlockLabel::as_str).collect();
        let attributes: BTreeMap<&str, &hcl::Expression> =
            block.body().attributes().map(|attribute| (attribute.key(), attribute.expr())).collect();
        let text_of = |key: &str| attributes.get(key).map(|expr| literal_text(expr)).unwrap_or_default();
        let flag = |key: &str| matches!(attributes.get(key), Some(hcl::Expression::Bool(true)));
        match (block.identifier(), labels.as_slice()) {
            ("variable", [name]) => {
                let default = attributes.get("default").map(|expr| json_of(expr));
                found.inputs.push(Input {
                    name: (*name).to_owned(),
                    kind: attributes.get("type").map(|expr| written(expr)).unwrap_or_default(),
                    description: text_of("description"),
                    required: default.is_none(),
                    default,
                    sensitive: flag("sensitive"),
                });
            }
            ("output", [name]) => found.outputs.push(Output {
                name: (*name).to_owned(),
                description: text_of("description"),
                sensitive: flag("sensitive"),
            }),
            ("module", [name]) => found.calls.push(ModuleCall {
                name: (*name).to_owned(),
                source: text_of("source"),
                version: text_of("version"),
            }),
            ("resource", [kind, name]) => {
                found.resources.push(Resource { kind: (*kind).to_owned(), name: (*name).to_owned() })
            }
            ("data", [kind, name]) => {
                found.data_sources.push(Resource { kind: (*kind).to_owned(), name: (*name).to_owned() })
            }
            ("provider", [name]) => provider(found, name, None),
            ("terraform", []) => {
                for required in block.body().blocks().filter(|inner| inner.identifier() == "required_providers") {
                    for attribute in required.body().attributes() {
                        provider(found, attribute.key(), Some(json_of(attribute.expr())));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// An expression as HCL text (a type constraint, a reference).
fn written(expr: &hcl::Expression) -> String {
    hcl::format::to_string(expr).unwrap_or_default()
}

/// A string literal's text; anything else as written.
fn literal_text(expr: &hcl::Expression) -> String {
    match expr {
        hcl::Expression::String(text) => text.clone(),
        other => written(other),
    }
}

/// An expression as JSON: literals as themselves, anything computed as its HCL text.
fn json_of(expr: &hcl::Expression) -> Value {
    serde_json::to_value(hcl::Value::from(expr.clone())).unwrap_or(Value::Null)
}

fn first_line(message: &str) -> String {
    message.lines().find(|line| !line.trim().is_empty()).unwrap_or(message).trim().to_owned()
}

// ----- JSON syntax (`.tf.json`) -----

fn json_file(text: &str, found: &mut Declarations) -> Result<(), String> {
    let document: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let top = document.as_object().ok_or("not a JSON object")?;
    for (name, body) in named(top.get("variable")) {
        let default = body.get("default").cloned();
        found.inputs.push(Input {
            name,
            kind: body.get("type").map(json_text).unwrap_or_default(),
            description: body.get("description").map(json_text).unwrap_or_default(),
            required: default.is_none(),
            default,
            sensitive: body.get("sensitive") == Some(&Value::Bool(true)),
        });
    }
    for (name, body) in named(top.get("output")) {
        found.outputs.push(Output {
            name,
            description: body.get("description").map(json_text).unwrap_or_default(),
            sensitive: body.get("sensitive") == Some(&Value::Bool(true)),
        });
    }
    for (name, body) in named(top.get("module")) {
        let text = |key: &str| body.get(key).map(json_text).unwrap_or_default();
        found.calls.push(ModuleCall { source: text("source"), version: text("version"), name });
    }
    for (key, list) in [("resource", &mut found.resources), ("data", &mut found.data_sources)] {
        for (kind, of_kind) in named(top.get(key)) {
            for name in of_kind.keys() {
                list.push(Resource { kind: kind.clone(), name: name.clone() });
            }
        }
    }
    for (name, _) in named(top.get("provider")) {
        provider(found, &name, None);
    }
    for terraform in blocks(top.get("terraform")) {
        for required in blocks(terraform.get("required_providers")) {
            for (name, requirement) in required {
                provider(found, name, Some(requirement.clone()));
            }
        }
    }
    Ok(())
}

/// A JSON block of labelled blocks (`{"name": {…}}`, `{"name": [{…}]}`, or a list of such
/// objects), as `(label, body)`.
fn named(value: Option<&Value>) -> Vec<(String, Map<String, Value>)> {
    let mut found = Vec::new();
    for members in blocks(value) {
        for (label, body) in members {
            found.extend(blocks(Some(body)).into_iter().map(|block| (label.clone(), block.clone())));
        }
    }
    found
}

/// A JSON block body, or a list of them.
fn blocks(value: Option<&Value>) -> Vec<&Map<String, Value>> {
    match value {
        Some(Value::Object(body)) => vec![body],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_object).collect(),
        _ => Vec::new(),
    }
}

fn json_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

// ----- providers -----

/// Records a provider a directory needs: from `required_providers` (`{ source, version }`, or
/// the older bare version string) or from a `provider` block (the default source).
fn provider(found: &mut Declarations, name: &str, requirement: Option<Value>) {
    let (source, version) = match &requirement {
        Some(Value::String(version)) => (None, version.clone()),
        Some(Value::Object(fields)) => (
            fields.get("source").and_then(Value::as_str).map(str::to_owned),
            fields.get("version").and_then(Value::as_str).unwrap_or_default().to_owned(),
        ),
        _ => (None, String::new()),
    };
    let source = source.unwrap_or_else(|| format!("hashicorp/{name}"));
    // `registry.terraform.io/hashicorp/aws` and `hashicorp/aws` both name the hashicorp namespace.
    let parts: Vec<&str> = source.split('/').collect();
    let namespace = parts.get(parts.len().saturating_sub(2)).copied().unwrap_or_default().to_owned();
    let entry = ProviderDependency { name: name.to_owned(), namespace, source, version };
    match found.providers.get(name) {
        // A provider block adds nothing to a requirement already read.
        Some(_) if requirement.is_none() => {}
        _ => {
            found.providers.insert(name.to_owned(), entry);
        }
    }
}
