//! Roles of the credential broker, written through `roles/:name` with the parameters and merge
//! rules of Vault's AWS secrets engine (`builtin/logical/aws/path_roles.go`), so Vault clients
//! and Terraform's Vault provider work unchanged. Where the API spec says a parameter is required
//! or only meaningful for some credential types, the write is refused: a role that could never
//! issue credentials fails when it is written, not when a client first asks for credentials.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::duration;
use super::error::{BrokerError, Result};
use super::mounts::{self, Mount};
use crate::config::BrokerLimits;
use crate::store::{keys, Condition, Item, ItemStore};

/// How a role's credentials are made: an IAM user, or one of three STS calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialType {
    /// A new IAM user with an access key.
    IamUser,
    /// `sts:AssumeRole` on one of the role's `role_arns`.
    AssumedRole,
    /// `sts:GetFederationToken`.
    FederationToken,
    /// `sts:GetSessionToken` for the root credentials' user.
    SessionToken,
}

use CredentialType::{AssumedRole, FederationToken, IamUser, SessionToken};

const ALL_TYPES: [CredentialType; 4] = [IamUser, AssumedRole, FederationToken, SessionToken];

impl CredentialType {
    /// The wire name, as in `credential_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            IamUser => "iam_user",
            AssumedRole => "assumed_role",
            FederationToken => "federation_token",
            SessionToken => "session_token",
        }
    }

    /// The type whose wire name is exactly `raw`.
    pub fn parse(raw: &str) -> Option<Self> {
        ALL_TYPES.into_iter().find(|kind| kind.as_str() == raw)
    }

    /// Whether the credentials come from STS: every type but `iam_user`.
    pub fn is_sts(self) -> bool {
        self != IamUser
    }
}

/// A role as stored: what `roles/:name` accepted, merged and validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Role {
    /// The name in the URL.
    pub name: String,
    /// One type, or two (`iam_user`, `federation_token`) for a legacy `policy` role.
    pub credential_types: Vec<CredentialType>,
    /// Roles `assumed_role` may assume.
    pub role_arns: Vec<String>,
    /// Managed policies attached to users, or passed to STS as a filter.
    pub policy_arns: Vec<String>,
    /// The inline policy, compacted JSON; "" when none.
    pub policy_document: String,
    /// Groups created users join, or whose policies STS calls combine.
    pub iam_groups: Vec<String>,
    /// Tags of created IAM users.
    pub iam_tags: BTreeMap<String, String>,
    /// Seconds an STS credential lives when the request names no `ttl`.
    pub default_sts_ttl: Option<u64>,
    /// Seconds an STS credential may live at most.
    pub max_sts_ttl: Option<u64>,
    /// IAM path of created users; `/` when unset.
    pub user_path: Option<String>,
    /// Managed policy set as created users' permissions boundary.
    pub permissions_boundary_arn: Option<String>,
    /// MFA device whose code `session_token` requests must carry.
    pub mfa_serial_number: Option<String>,
    /// Defined with the legacy `policy` / `arn` parameters (their own rules apply to creds/ and sts/).
    pub legacy: bool,
}

impl Role {
    fn blank(name: &str) -> Self {
        Role {
            name: name.to_owned(),
            credential_types: Vec::new(),
            role_arns: Vec::new(),
            policy_arns: Vec::new(),
            policy_document: String::new(),
            iam_groups: Vec::new(),
            iam_tags: BTreeMap::new(),
            default_sts_ttl: None,
            max_sts_ttl: None,
            user_path: None,
            permissions_boundary_arn: None,
            mfa_serial_number: None,
            legacy: false,
        }
    }
}

/// The parameters the legacy `policy` and `arn` cannot be combined with.
const CURRENT_PARAMETERS: [&str; 11] = [
    "credential_type",
    "role_arns",
    "policy_arns",
    "policy_document",
    "iam_groups",
    "iam_tags",
    "default_sts_ttl",
    "max_sts_ttl",
    "user_path",
    "permissions_boundary_arn",
    "mfa_serial_number",
];

/// A create-or-update write on `roles/:name`: merges `body` (the request's JSON object) over
/// `existing` (None when new) and validates the result. The error is the message Vault-style
/// clients see in `{"errors": [...]}` (a 400).
pub fn apply(name: &str, existing: Option<&Role>, body: &Map<String, Value>) -> Result<Role, String> {
    if name.is_empty() {
        return Err("missing role name".to_owned());
    }
    if let Some((parameter, entry)) = legacy_entry(body)? {
        if let Some(field) = CURRENT_PARAMETERS.into_iter().find(|field| given(body, field).is_some()) {
            return Err(format!(
                "the legacy {parameter} parameter cannot be combined with {field}; \
                 use credential_type with role_arns, policy_arns or policy_document instead"
            ));
        }
        let role = upgrade_legacy(name, parameter, entry)?;
        validate(&role)?;
        return Ok(role);
    }

    let mut role = existing.cloned().unwrap_or_else(|| Role::blank(name));
    role.name = name.to_owned();
    role.legacy = false;
    if let Some(value) = given(body, "credential_type") {
        role.credential_types = vec![credential_type(value)?];
    }
    if let Some(value) = given(body, "role_arns") {
        role.role_arns = string_list("role_arns", value)?;
    }
    if let Some(value) = given(body, "policy_arns") {
        role.policy_arns = string_list("policy_arns", value)?;
    }
    if let Some(value) = given(body, "policy_document") {
        role.policy_document = policy_document(value)?;
    }
    if let Some(value) = given(body, "iam_groups") {
        role.iam_groups = string_list("iam_groups", value)?;
    }
    if let Some(value) = given(body, "iam_tags") {
        role.iam_tags = tags(value)?;
    }
    if let Some(value) = given(body, "default_sts_ttl") {
        role.default_sts_ttl = ttl("default_sts_ttl", value)?;
    }
    if let Some(value) = given(body, "max_sts_ttl") {
        role.max_sts_ttl = ttl("max_sts_ttl", value)?;
    }
    if let Some(value) = given(body, "user_path") {
        role.user_path = optional_string("user_path", value)?;
    }
    if let Some(value) = given(body, "permissions_boundary_arn") {
        role.permissions_boundary_arn = optional_string("permissions_boundary_arn", value)?;
    }
    if let Some(value) = given(body, "mfa_serial_number") {
        role.mfa_serial_number = optional_string("mfa_serial_number", value)?;
    }
    validate(&role)?;
    Ok(role)
}

/// The role's validity (apply's final check), for data read back from the store. Every problem
/// is reported, joined by "; ".
pub fn validate(role: &Role) -> Result<(), String> {
    if role.credential_types.is_empty() {
        return Err(format!("credential_type is required: one of {}", names(&ALL_TYPES)));
    }
    let mut problems = Problems { types: &role.credential_types, found: Vec::new() };
    if !valid_role_name(&role.name) {
        problems.add(format!(
            "role name {:?} must be letters, digits and _, with - . @ inside (Vault's GenericNameWithAtRegex)",
            role.name
        ));
    }
    let policy_types = [IamUser, AssumedRole, FederationToken];
    let sts_ttl_types = [AssumedRole, FederationToken];

    problems.only_for("role_arns", !role.role_arns.is_empty(), &[AssumedRole]);
    if problems.includes(&[AssumedRole]) && role.role_arns.is_empty() {
        problems.add("role_arns is required when credential_type is assumed_role".to_owned());
    }
    problems.only_for("policy_arns", !role.policy_arns.is_empty(), &policy_types);
    problems.only_for("policy_document", !role.policy_document.is_empty(), &policy_types);
    let needs_policy = role.credential_types.iter().find(|kind| matches!(kind, IamUser | FederationToken));
    if let Some(kind) = needs_policy {
        if role.policy_arns.is_empty() && role.policy_document.is_empty() {
            problems.add(format!(
                "at least one of policy_arns or policy_document is required when credential_type is {}",
                kind.as_str()
            ));
        }
    }
    if !role.policy_document.is_empty() && serde_json::from_str::<IgnoredAny>(&role.policy_document).is_err() {
        problems.add("policy_document is not valid JSON".to_owned());
    }
    problems.only_for("iam_groups", !role.iam_groups.is_empty(), &policy_types);
    problems.only_for("iam_tags", !role.iam_tags.is_empty(), &[IamUser]);
    problems.only_for("default_sts_ttl", role.default_sts_ttl.is_some(), &sts_ttl_types);
    problems.only_for("max_sts_ttl", role.max_sts_ttl.is_some(), &sts_ttl_types);
    if let (Some(default), Some(max)) = (role.default_sts_ttl, role.max_sts_ttl) {
        if default > max {
            problems.add(format!(
                "default_sts_ttl ({}) must be less than or equal to max_sts_ttl ({})",
                duration::format(Duration::from_secs(default)),
                duration::format(Duration::from_secs(max)),
            ));
        }
    }
    problems.only_for("user_path", role.user_path.is_some(), &[IamUser]);
    if let Some(path) = role.user_path.as_deref().filter(|path| !valid_user_path(path)) {
        problems.add(format!(
            "user_path {path:?} must begin and end with \"/\" and be at most 512 printable ASCII characters \
             without spaces"
        ));
    }
    problems.only_for("permissions_boundary_arn", role.permissions_boundary_arn.is_some(), &[IamUser]);
    if let Some(arn) = role.permissions_boundary_arn.as_deref().filter(|arn| !is_iam_policy_arn(arn)) {
        problems.add(format!(
            "permissions_boundary_arn {arn:?} must be an IAM policy ARN: arn:<partition>:iam::<account>:policy/<name>"
        ));
    }
    problems.only_for("mfa_serial_number", role.mfa_serial_number.is_some(), &[SessionToken]);

    if problems.found.is_empty() {
        Ok(())
    } else {
        Err(problems.found.join("; "))
    }
}

/// Whether the deployment's allow-lists (`HANGAR_BROKER_*`) let `role` be served: checked when
/// it is written and again when credentials are asked for (settings may have changed since).
pub fn allowed(role: &Role, limits: &BrokerLimits) -> Result<(), String> {
    let refuse = |what: String, setting: &str| Err(format!("{what} is not allowed by this deployment ({setting})"));
    if role.credential_types.contains(&IamUser) {
        if let (Some(path), Some(allowed)) = (role.user_path.as_deref(), limits.user_path.as_deref()) {
            if !path.starts_with(allowed) {
                return refuse(format!("user_path {path:?} outside {allowed:?}"), "HANGAR_BROKER_USER_PATH");
            }
        }
        if let (Some(arn), Some(boundary)) =
            (role.permissions_boundary_arn.as_deref(), limits.permissions_boundary.as_deref())
        {
            if arn != boundary {
                return refuse(
                    format!("permissions_boundary_arn {arn} (only {boundary})"),
                    "HANGAR_BROKER_PERMISSIONS_BOUNDARY",
                );
            }
        }
        if let Some(arn) = role.policy_arns.iter().find(|arn| !BrokerLimits::allows(&limits.policy_arns, arn)) {
            return refuse(format!("policy_arns entry {arn}"), "HANGAR_BROKER_ALLOWED_POLICY_ARNS");
        }
        // Only iam_user roles add users to groups (to STS a group's policies are only a filter).
        if let Some(group) = role.iam_groups.iter().find(|group| !BrokerLimits::allows(&limits.groups, group)) {
            return refuse(format!("iam_groups entry {group}"), "HANGAR_BROKER_ALLOWED_GROUPS");
        }
    }
    if let Some(arn) = role.role_arns.iter().find(|arn| !BrokerLimits::allows(&limits.role_arns, arn)) {
        return refuse(format!("role_arns entry {arn}"), "HANGAR_BROKER_ALLOWED_ROLE_ARNS");
    }
    Ok(())
}

/// `data` of a role read: credential_type (the single type or the first), credential_types,
/// role_arns, policy_arns, policy_document, iam_groups, iam_tags (map), default_sts_ttl and
/// max_sts_ttl (seconds, 0 when unset), user_path ("/" default for iam_user),
/// permissions_boundary_arn, mfa_serial_number.
pub fn to_data(role: &Role) -> Value {
    let default_path = if role.credential_types.contains(&IamUser) { "/" } else { "" };
    json!({
        "credential_type": role.credential_types.first().map_or("", |kind| kind.as_str()),
        "credential_types": role.credential_types,
        "role_arns": role.role_arns,
        "policy_arns": role.policy_arns,
        "policy_document": role.policy_document,
        "iam_groups": role.iam_groups,
        "iam_tags": role.iam_tags,
        "default_sts_ttl": role.default_sts_ttl.unwrap_or(0),
        "max_sts_ttl": role.max_sts_ttl.unwrap_or(0),
        "user_path": role.user_path.as_deref().unwrap_or(default_path),
        "permissions_boundary_arn": role.permissions_boundary_arn.as_deref().unwrap_or(""),
        "mfa_serial_number": role.mfa_serial_number.as_deref().unwrap_or(""),
    })
}

/// A stored role that no longer validates: what is wrong with it, and what is stored, which
/// nothing discards (a read shows both, a partial update merges over the stored fields).
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    /// Why the stored role does not validate.
    pub problem: String,
    /// The stored role, when it still parses as one.
    pub role: Option<Role>,
    /// The stored fields as they are.
    pub stored: Map<String, Value>,
}

impl Invalid {
    /// `data` of a read, as Vault shows a role with invalid data: every stored field (as a
    /// valid role's read shows them, when the role still parses) and `invalid_data`.
    pub fn data(&self) -> Value {
        let mut data = match &self.role {
            Some(role) => to_data(role),
            None => Value::Object(self.stored.clone()),
        };
        data["invalid_data"] = Value::String(self.problem.clone());
        data
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

/// Serialized as its problem, where only the reason is shown.
impl Serialize for Invalid {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.problem)
    }
}

/// A stored role, or why it does not validate now with what is stored (see [`Invalid`]).
pub async fn load(store: &dyn ItemStore, mount: &Mount, name: &str) -> Result<Option<Result<Role, Invalid>>> {
    let Some(item) = store.get(&keys::mount_role(&mount.uuid, name)).await? else { return Ok(None) };
    let role = match item.parse::<Role>() {
        Ok(role) => match validate(&role) {
            Ok(()) => Ok(role),
            Err(problem) => Err(Invalid { problem, role: Some(role), stored: item.into_attrs()? }),
        },
        Err(e) => Err(Invalid { problem: e.to_string(), role: None, stored: item.into_attrs()? }),
    };
    Ok(Some(role))
}

/// The names of a mount's roles.
pub async fn list(store: &dyn ItemStore, mount: &Mount) -> Result<Vec<String>> {
    mounts::names(store, keys::mount_roles(&mount.uuid)).await
}

/// Writes `roles/:name`: `body` merged over the stored role, also one that no longer validates
/// (as Vault keeps such a role's fields; the result must validate); a role the deployment's
/// allow-lists refuse is not stored.
pub async fn write(
    store: &dyn ItemStore,
    limits: &BrokerLimits,
    mount: &Mount,
    name: &str,
    body: &Map<String, Value>,
) -> Result<()> {
    let existing = load(store, mount, name).await?.and_then(|stored| stored.map_or_else(|invalid| invalid.role, Some));
    let role = apply(name, existing.as_ref(), body).map_err(BrokerError::invalid)?;
    allowed(&role, limits).map_err(BrokerError::invalid)?;
    let item = Item::from_value(keys::mount_role(&mount.uuid, name), &role)?;
    store.put(item, Condition::Always).await?;
    Ok(())
}

/// Deletes a role; false when there was none.
pub async fn delete(store: &dyn ItemStore, mount: &Mount, name: &str) -> Result<bool> {
    Ok(store.delete(&keys::mount_role(&mount.uuid, name), Condition::Always).await?.is_some())
}

struct Problems<'a> {
    types: &'a [CredentialType],
    found: Vec<String>,
}

impl Problems<'_> {
    fn includes(&self, any_of: &[CredentialType]) -> bool {
        self.types.iter().any(|kind| any_of.contains(kind))
    }

    fn add(&mut self, problem: String) {
        self.found.push(problem);
    }

    fn only_for(&mut self, field: &str, given: bool, allowed: &[CredentialType]) {
        if given && !self.includes(allowed) {
            let allowed = match allowed {
                [single] => single.as_str().to_owned(),
                several => format!("one of {}", names(several)),
            };
            self.add(format!("{field} is only allowed when credential_type is {allowed}, not {}", names(self.types)));
        }
    }
}

fn names(types: &[CredentialType]) -> String {
    types.iter().map(|kind| kind.as_str()).collect::<Vec<_>>().join(", ")
}

/// The body's value for `field`; null counts as absent, so the previous value stays.
fn given<'a>(body: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    body.get(field).filter(|value| !value.is_null())
}

/// The non-empty legacy `policy` or `arn`, with the parameter's name.
fn legacy_entry(body: &Map<String, Value>) -> Result<Option<(&'static str, String)>, String> {
    let mut found = Vec::new();
    for parameter in ["policy", "arn"] {
        if let Some(value) = given(body, parameter) {
            found.extend(optional_string(parameter, value)?.map(|entry| (parameter, entry)));
        }
    }
    if found.len() > 1 {
        return Err("only one of the legacy policy or arn parameters may be given".to_owned());
    }
    Ok(found.pop())
}

/// Vault's `upgradeLegacyPolicyEntry`: an entry starting with `arn:` is a role or policy ARN,
/// anything else an inline policy, whichever of the two parameters carried it.
fn upgrade_legacy(name: &str, parameter: &str, entry: String) -> Result<Role, String> {
    let mut role = Role { legacy: true, ..Role::blank(name) };
    if entry.starts_with("arn:") {
        let arn = Arn::parse(&entry).ok_or_else(|| {
            format!("{parameter} {entry:?} is not a valid ARN: arn:<partition>:<service>:<region>:<account>:<resource>")
        })?;
        match arn.resource.split('/').next() {
            Some("role") => {
                role.credential_types = vec![AssumedRole];
                role.role_arns = vec![entry];
            }
            Some("policy") => {
                role.credential_types = vec![IamUser];
                role.policy_arns = vec![entry];
            }
            _ => {
                return Err(format!(
                    "{parameter} {entry:?} must be the ARN of an IAM role (role/...) or policy (policy/...)"
                ))
            }
        }
    } else {
        role.policy_document = compact_json(&entry)
            .map_err(|error| format!("{parameter} is neither an ARN nor a JSON policy: {error}"))?;
        role.credential_types = vec![IamUser, FederationToken];
    }
    Ok(role)
}

fn credential_type(value: &Value) -> Result<CredentialType, String> {
    let raw = value.as_str().ok_or_else(|| format!("credential_type must be a string, got {value}"))?;
    CredentialType::parse(raw).ok_or_else(|| {
        let list = if raw.contains(',') { "; a role has exactly one credential_type" } else { "" };
        format!("credential_type {raw:?} is not one of {}{list}", names(&ALL_TYPES))
    })
}

/// A comma-separated string or a JSON array of strings; entries trimmed, empty ones dropped.
fn string_list(field: &str, value: &Value) -> Result<Vec<String>, String> {
    let entries: Vec<&str> = match value {
        Value::String(raw) => raw.split(',').collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().ok_or_else(|| format!("{field} must hold only strings, got {item}")))
            .collect::<Result<_, _>>()?,
        other => return Err(format!("{field} must be a comma-separated string or a list of strings, got {other}")),
    };
    Ok(entries.into_iter().map(str::trim).filter(|entry| !entry.is_empty()).map(str::to_owned).collect())
}

/// A map of strings, or a list of `key=value` strings (a string is split on commas, which AWS
/// tags cannot contain).
/// The tags a role may give its users: IAM's 50, less the one the broker adds.
const MAX_IAM_TAGS: usize = 49;

fn tags(value: &Value) -> Result<BTreeMap<String, String>, String> {
    let pairs: Vec<(String, String)> = match value {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| match value.as_str() {
                Some(text) => Ok((key.clone(), text.to_owned())),
                None => Err(format!("iam_tags value of {key:?} must be a string, got {value}")),
            })
            .collect::<Result<_, _>>()?,
        Value::String(_) | Value::Array(_) => string_list("iam_tags", value)?
            .into_iter()
            .map(|pair| match pair.split_once('=') {
                Some((key, value)) => Ok((key.to_owned(), value.to_owned())),
                None => Err(format!("iam_tags entry {pair:?} must be key=value")),
            })
            .collect::<Result<_, _>>()?,
        other => return Err(format!("iam_tags must be a map or a list of key=value strings, got {other}")),
    };
    if pairs.iter().any(|(key, _)| key.is_empty()) {
        return Err("iam_tags keys must not be empty".to_owned());
    }
    if pairs.iter().any(|(key, _)| key.eq_ignore_ascii_case(super::intents::REQUEST_TAG)) {
        return Err(format!("iam_tags may not set {}: the broker tags its users with it", super::intents::REQUEST_TAG));
    }
    let tags: BTreeMap<String, String> = pairs.into_iter().collect();
    if tags.len() > MAX_IAM_TAGS {
        return Err(format!(
            "iam_tags holds at most {MAX_IAM_TAGS} tags: IAM allows 50 on a user, and the broker adds {}",
            super::intents::REQUEST_TAG
        ));
    }
    Ok(tags)
}

fn policy_document(value: &Value) -> Result<String, String> {
    let raw = value.as_str().ok_or_else(|| "policy_document must be a string holding a JSON policy".to_owned())?;
    if raw.is_empty() {
        return Ok(String::new());
    }
    compact_json(raw).map_err(|error| format!("policy_document is not valid JSON: {error}"))
}

/// Go's `json.Compact`: insignificant whitespace removed, key order and numbers untouched.
fn compact_json(raw: &str) -> Result<String, serde_json::Error> {
    serde_json::from_str::<IgnoredAny>(raw)?;
    let mut compacted = String::with_capacity(raw.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in raw.chars() {
        if in_string {
            compacted.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            in_string = c == '"';
            compacted.push(c);
        }
    }
    Ok(compacted)
}

/// Whole seconds; zero and "" unset the TTL, as in Vault.
fn ttl(field: &str, value: &Value) -> Result<Option<u64>, String> {
    if value.as_str() == Some("") {
        return Ok(None);
    }
    let seconds = duration::parse(value).map_err(|error| format!("{field}: {error}"))?.as_secs();
    Ok(Some(seconds).filter(|&seconds| seconds > 0))
}

/// A string; "" unsets it.
fn optional_string(field: &str, value: &Value) -> Result<Option<String>, String> {
    let raw = value.as_str().ok_or_else(|| format!("{field} must be a string, got {value}"))?;
    Ok(Some(raw.to_owned()).filter(|raw| !raw.is_empty()))
}

/// IAM's path rule: `/`, or `/.../` of printable ASCII without spaces, at most 512 characters.
/// Vault's `framework.GenericNameWithAtRegex`, `\w(([\w-.@]+)?\w)?` (Go's `\w` is ASCII): word
/// characters at both ends, `-`, `.` and `@` also inside.
fn valid_role_name(name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let (Some(first), Some(last)) = (name.chars().next(), name.chars().last()) else { return false };
    word(first) && word(last) && name.chars().all(|c| word(c) || "-.@".contains(c))
}

fn valid_user_path(path: &str) -> bool {
    path.len() <= 512
        && path.starts_with('/')
        && path.ends_with('/')
        && path.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

fn is_iam_policy_arn(raw: &str) -> bool {
    Arn::parse(raw).is_some_and(|arn| {
        let name = arn.resource.strip_prefix("policy/").unwrap_or("");
        arn.service == "iam" && arn.region.is_empty() && !arn.account.is_empty() && !name.is_empty()
    })
}

/// The sections of an ARN, as the AWS SDK's `arn.Parse` splits them.
struct Arn<'a> {
    service: &'a str,
    region: &'a str,
    account: &'a str,
    resource: &'a str,
}

impl<'a> Arn<'a> {
    fn parse(raw: &'a str) -> Option<Self> {
        let sections: Vec<&str> = raw.splitn(6, ':').collect();
        let [prefix, partition, service, region, account, resource] = sections[..] else {
            return None;
        };
        let complete = prefix == "arn" && !partition.is_empty() && !service.is_empty() && !resource.is_empty();
        complete.then_some(Arn { service, region, account, resource })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const POLICY_ARN: &str = "arn:aws:iam::aws:policy/ReadOnlyAccess";
    const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/deployer";

    fn body(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn create(value: Value) -> Result<Role, String> {
        apply("deploy", None, &body(value))
    }

    fn update(role: &Role, value: Value) -> Result<Role, String> {
        apply("deploy", Some(role), &body(value))
    }

    fn refused(value: Value) -> String {
        create(value).expect_err("the write should be refused")
    }

    fn iam_user() -> Role {
        create(json!({"credential_type": "iam_user", "policy_arns": POLICY_ARN})).unwrap()
    }

    #[test]
    fn credential_types_print_and_parse_their_wire_names() {
        for kind in ALL_TYPES {
            assert_eq!(CredentialType::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.as_str()));
        }
        assert_eq!(CredentialType::parse("IAM_USER"), None);
        assert!(!IamUser.is_sts());
        assert!(AssumedRole.is_sts() && FederationToken.is_sts() && SessionToken.is_sts());
    }

    #[test]
    fn a_role_needs_a_name() {
        assert_eq!(
            apply("", None, &body(json!({"credential_type": "session_token"}))),
            Err("missing role name".into())
        );
    }

    #[test]
    fn credential_type_is_required_on_create() {
        assert_eq!(
            refused(json!({"policy_arns": POLICY_ARN})),
            "credential_type is required: one of iam_user, assumed_role, federation_token, session_token"
        );
    }

    #[test]
    fn credential_type_must_be_one_of_the_four() {
        assert_eq!(
            refused(json!({"credential_type": "root"})),
            "credential_type \"root\" is not one of iam_user, assumed_role, federation_token, session_token"
        );
        assert_eq!(refused(json!({"credential_type": 3})), "credential_type must be a string, got 3");
    }

    #[test]
    fn a_comma_separated_credential_type_is_refused_as_vault_does() {
        let error = refused(json!({"credential_type": "iam_user,federation_token", "policy_arns": POLICY_ARN}));
        assert!(error.ends_with("; a role has exactly one credential_type"), "{error}");
    }

    #[test]
    fn role_arns_are_required_for_assumed_role_and_refused_for_the_others() {
        assert_eq!(
            refused(json!({"credential_type": "assumed_role"})),
            "role_arns is required when credential_type is assumed_role"
        );
        let role = create(json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN})).unwrap();
        assert_eq!(role.role_arns, [ROLE_ARN]);
        assert_eq!(
            refused(json!({"credential_type": "iam_user", "policy_arns": POLICY_ARN, "role_arns": ROLE_ARN})),
            "role_arns is only allowed when credential_type is assumed_role, not iam_user"
        );
    }

    #[test]
    fn iam_user_and_federation_token_need_a_policy_arn_or_a_policy_document() {
        for kind in ["iam_user", "federation_token"] {
            assert_eq!(
                refused(json!({"credential_type": kind})),
                format!("at least one of policy_arns or policy_document is required when credential_type is {kind}")
            );
            assert!(create(json!({"credential_type": kind, "policy_document": "{}"})).is_ok());
            assert!(create(json!({"credential_type": kind, "policy_arns": [POLICY_ARN]})).is_ok());
        }
        assert!(create(json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN})).is_ok());
    }

    #[test]
    fn session_token_refuses_policy_arns_and_policy_documents() {
        assert_eq!(
            refused(json!({"credential_type": "session_token", "policy_arns": POLICY_ARN, "policy_document": "{}"})),
            "policy_arns is only allowed when credential_type is one of iam_user, assumed_role, federation_token, \
             not session_token; policy_document is only allowed when credential_type is one of iam_user, \
             assumed_role, federation_token, not session_token"
        );
    }

    #[test]
    fn policy_document_must_be_json_and_is_stored_compacted_in_its_own_order() {
        let document = r#"{
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:Get Object", "N": 1.50}]
        }"#;
        let role = create(json!({"credential_type": "federation_token", "policy_document": document})).unwrap();
        assert_eq!(
            role.policy_document,
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:Get Object","N":1.50}]}"#
        );
        let escaped =
            create(json!({"credential_type": "iam_user", "policy_document": r#"{ "a\" b" : "c\\" }"#})).unwrap();
        assert_eq!(escaped.policy_document, r#"{"a\" b":"c\\"}"#);
        let error = refused(json!({"credential_type": "iam_user", "policy_document": "{\"Version\": "}));
        assert!(error.starts_with("policy_document is not valid JSON: "), "{error}");
        assert_eq!(
            refused(json!({"credential_type": "iam_user", "policy_document": {"Version": "2012-10-17"}})),
            "policy_document must be a string holding a JSON policy"
        );
    }

    #[test]
    fn iam_groups_are_allowed_for_every_type_but_session_token() {
        let role =
            create(json!({"credential_type": "iam_user", "policy_arns": POLICY_ARN, "iam_groups": "ops"})).unwrap();
        assert_eq!(role.iam_groups, ["ops"]);
        let assumed = json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN, "iam_groups": ["ops"]});
        assert!(create(assumed).is_ok());
        let federated = json!({"credential_type": "federation_token", "policy_document": "{}", "iam_groups": ["ops"]});
        assert!(create(federated).is_ok());
        assert_eq!(
            refused(json!({"credential_type": "session_token", "iam_groups": ["ops"]})),
            "iam_groups is only allowed when credential_type is one of iam_user, assumed_role, federation_token, \
             not session_token"
        );
    }

    #[test]
    fn iam_tags_are_only_for_iam_user() {
        assert_eq!(
            refused(json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN, "iam_tags": ["team=ops"]})),
            "iam_tags is only allowed when credential_type is iam_user, not assumed_role"
        );
    }

    #[test]
    fn iam_tags_are_taken_as_a_list_of_pairs_or_as_a_map() {
        let expected = BTreeMap::from([("team".to_owned(), "ops".to_owned()), ("url".to_owned(), "a=b".to_owned())]);
        for tags in [json!(["team=ops", " url=a=b "]), json!("team=ops,url=a=b"), json!({"team": "ops", "url": "a=b"})]
        {
            let role = create(json!({"credential_type": "iam_user", "policy_arns": POLICY_ARN, "iam_tags": tags}));
            assert_eq!(role.unwrap().iam_tags, expected);
        }
        let empty_value = create(json!({"credential_type": "iam_user", "policy_arns": POLICY_ARN, "iam_tags": ["k="]}));
        assert_eq!(empty_value.unwrap().iam_tags["k"], "");
    }

    #[test]
    fn iam_tags_that_are_not_key_value_pairs_are_refused() {
        let with =
            |tags: Value| refused(json!({"credential_type": "iam_user", "policy_arns": POLICY_ARN, "iam_tags": tags}));
        assert_eq!(with(json!(["team"])), "iam_tags entry \"team\" must be key=value");
        assert_eq!(with(json!(["=ops"])), "iam_tags keys must not be empty");
        assert_eq!(with(json!({"team": 1})), "iam_tags value of \"team\" must be a string, got 1");
        assert_eq!(with(json!(5)), "iam_tags must be a map or a list of key=value strings, got 5");
    }

    #[test]
    fn sts_ttls_take_seconds_or_duration_strings() {
        let role = create(json!({
            "credential_type": "assumed_role",
            "role_arns": ROLE_ARN,
            "default_sts_ttl": "30m",
            "max_sts_ttl": 7200,
        }))
        .unwrap();
        assert_eq!((role.default_sts_ttl, role.max_sts_ttl), (Some(1800), Some(7200)));
        let role = update(&role, json!({"default_sts_ttl": "3600", "max_sts_ttl": "1h30m"})).unwrap();
        assert_eq!((role.default_sts_ttl, role.max_sts_ttl), (Some(3600), Some(5400)));
        let cleared = update(&role, json!({"default_sts_ttl": 0, "max_sts_ttl": ""})).unwrap();
        assert_eq!((cleared.default_sts_ttl, cleared.max_sts_ttl), (None, None));
    }

    #[test]
    fn sts_ttls_name_the_field_when_unparseable() {
        let error = refused(json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN, "max_sts_ttl": "1d"}));
        assert!(error.starts_with("max_sts_ttl: invalid duration \"1d\": unknown unit \"d\""), "{error}");
        let error = refused(json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN, "default_sts_ttl": -1}));
        assert_eq!(error, "default_sts_ttl: invalid duration -1: must not be negative");
    }

    #[test]
    fn sts_ttls_are_only_for_assumed_role_and_federation_token() {
        for (kind, extra) in [("iam_user", json!({"policy_arns": POLICY_ARN})), ("session_token", json!({}))] {
            let mut request = body(extra);
            request.insert("credential_type".into(), json!(kind));
            request.insert("default_sts_ttl".into(), json!("1h"));
            request.insert("max_sts_ttl".into(), json!("2h"));
            assert_eq!(
                apply("deploy", None, &request).unwrap_err(),
                format!(
                    "default_sts_ttl is only allowed when credential_type is one of assumed_role, federation_token, \
                     not {kind}; max_sts_ttl is only allowed when credential_type is one of assumed_role, \
                     federation_token, not {kind}"
                )
            );
        }
        let federated = json!({"credential_type": "federation_token", "policy_arns": POLICY_ARN, "max_sts_ttl": "1h"});
        assert!(create(federated).is_ok());
    }

    #[test]
    fn default_sts_ttl_may_not_exceed_max_sts_ttl() {
        let ttls = |default: Value, max: Value| {
            let mut request = body(json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN}));
            request.extend([("default_sts_ttl".to_owned(), default), ("max_sts_ttl".to_owned(), max)]);
            apply("deploy", None, &request)
        };
        assert_eq!(
            ttls(json!("2h"), json!("1h")).unwrap_err(),
            "default_sts_ttl (2h0m0s) must be less than or equal to max_sts_ttl (1h0m0s)"
        );
        assert!(ttls(json!("1h"), json!(3600)).is_ok());
    }

    #[test]
    fn user_path_is_only_for_iam_user_and_follows_iam_path_rules() {
        let role = update(&iam_user(), json!({"user_path": "/service/ci/"})).unwrap();
        assert_eq!(role.user_path.as_deref(), Some("/service/ci/"));
        assert!(update(&iam_user(), json!({"user_path": format!("/{}/", "a".repeat(510))})).is_ok());
        for bad in ["service/", "/service", "/with space/", "/tab\t/", "/é/", &format!("/{}/", "a".repeat(511))] {
            assert_eq!(
                update(&iam_user(), json!({"user_path": bad})).unwrap_err(),
                format!(
                    "user_path {bad:?} must begin and end with \"/\" and be at most 512 printable ASCII \
                     characters without spaces"
                )
            );
        }
        assert_eq!(
            refused(json!({"credential_type": "session_token", "user_path": "/ci/"})),
            "user_path is only allowed when credential_type is iam_user, not session_token"
        );
    }

    #[test]
    fn permissions_boundary_arn_is_only_for_iam_user_and_must_name_an_iam_policy() {
        for good in [POLICY_ARN, "arn:aws-us-gov:iam::123456789012:policy/team/boundary"] {
            let role = update(&iam_user(), json!({"permissions_boundary_arn": good})).unwrap();
            assert_eq!(role.permissions_boundary_arn.as_deref(), Some(good));
        }
        for bad in [
            ROLE_ARN,
            "arn:aws:s3::123456789012:policy/x",
            "arn:aws:iam:us-east-1:1:policy/x",
            "arn:aws:iam:::policy/x",
            "arn:aws:iam::1:policy/",
            "boundary",
        ] {
            assert_eq!(
                update(&iam_user(), json!({"permissions_boundary_arn": bad})).unwrap_err(),
                format!(
                    "permissions_boundary_arn {bad:?} must be an IAM policy ARN: \
                     arn:<partition>:iam::<account>:policy/<name>"
                )
            );
        }
        assert_eq!(
            refused(json!({
                "credential_type": "assumed_role",
                "role_arns": ROLE_ARN,
                "permissions_boundary_arn": POLICY_ARN,
            })),
            "permissions_boundary_arn is only allowed when credential_type is iam_user, not assumed_role"
        );
    }

    #[test]
    fn mfa_serial_number_is_only_for_session_token_and_takes_an_arn_or_a_device_number() {
        for serial in ["arn:aws:iam::123456789012:mfa/ops", "GAHT12345678"] {
            let role = create(json!({"credential_type": "session_token", "mfa_serial_number": serial})).unwrap();
            assert_eq!(role.mfa_serial_number.as_deref(), Some(serial));
        }
        assert_eq!(
            update(&iam_user(), json!({"mfa_serial_number": "GAHT12345678"})).unwrap_err(),
            "mfa_serial_number is only allowed when credential_type is session_token, not iam_user"
        );
    }

    #[test]
    fn list_fields_take_comma_separated_strings_or_arrays_trimmed_without_empties() {
        let from_string =
            create(json!({"credential_type": "iam_user", "policy_arns": " a , b,,c ,", "iam_groups": ""})).unwrap();
        let from_array =
            create(json!({"credential_type": "iam_user", "policy_arns": [" a", "b ", "", "c"], "iam_groups": []}))
                .unwrap();
        assert_eq!(from_string.policy_arns, ["a", "b", "c"]);
        assert_eq!(from_string, from_array);
        assert_eq!(
            refused(json!({"credential_type": "iam_user", "policy_arns": [POLICY_ARN, 7]})),
            "policy_arns must hold only strings, got 7"
        );
        assert_eq!(
            refused(json!({"credential_type": "iam_user", "policy_arns": {"a": 1}})),
            "policy_arns must be a comma-separated string or a list of strings, got {\"a\":1}"
        );
    }

    #[test]
    fn an_update_keeps_every_field_it_does_not_send_or_sends_as_null() {
        let role = create(json!({
            "credential_type": "iam_user",
            "policy_arns": [POLICY_ARN],
            "policy_document": "{}",
            "iam_groups": "ops",
            "iam_tags": {"team": "ops"},
            "user_path": "/ci/",
            "permissions_boundary_arn": POLICY_ARN,
        }))
        .unwrap();
        let updated =
            update(&role, json!({"iam_groups": "ops,dev", "policy_document": null, "user_path": null})).unwrap();
        assert_eq!(updated, Role { iam_groups: vec!["ops".into(), "dev".into()], ..role.clone() });
        assert_eq!(update(&role, json!({})).unwrap(), role);
    }

    #[test]
    fn an_update_with_empty_values_clears_those_fields() {
        let role =
            update(&iam_user(), json!({"policy_document": "{}", "iam_groups": ["ops"], "user_path": "/ci/"})).unwrap();
        let cleared =
            update(&role, json!({"policy_document": "", "iam_groups": "", "iam_tags": [], "user_path": ""})).unwrap();
        assert_eq!(cleared, iam_user());
        assert_eq!(
            update(&role, json!({"policy_arns": [], "policy_document": ""})).unwrap_err(),
            "at least one of policy_arns or policy_document is required when credential_type is iam_user"
        );
    }

    #[test]
    fn an_update_changing_credential_type_revalidates_every_kept_field() {
        let role = update(&iam_user(), json!({"iam_tags": ["team=ops"], "user_path": "/ci/"})).unwrap();
        assert_eq!(
            update(&role, json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN})).unwrap_err(),
            "iam_tags is only allowed when credential_type is iam_user, not assumed_role; \
             user_path is only allowed when credential_type is iam_user, not assumed_role"
        );
        let moved =
            update(&role, json!({"credential_type": "federation_token", "iam_tags": {}, "user_path": ""})).unwrap();
        assert_eq!(moved.credential_types, [FederationToken]);
        assert_eq!(moved.policy_arns, [POLICY_ARN]);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let role = create(json!({"credential_type": "session_token", "color": "blue", "external_id": "x"})).unwrap();
        assert_eq!(role, Role { credential_types: vec![SessionToken], ..Role::blank("deploy") });
    }

    #[test]
    fn legacy_policy_becomes_an_iam_user_or_federation_token_role() {
        let role = create(json!({"policy": "{ \"Version\": \"2012-10-17\" }"})).unwrap();
        assert_eq!(role.credential_types, [IamUser, FederationToken]);
        assert_eq!(role.policy_document, r#"{"Version":"2012-10-17"}"#);
        assert!(role.legacy);
        assert_eq!(to_data(&role)["credential_type"], "iam_user");
    }

    #[test]
    fn legacy_arn_of_a_role_becomes_assumed_role_and_of_a_policy_iam_user() {
        let assumed = create(json!({"arn": ROLE_ARN})).unwrap();
        assert_eq!(
            (assumed.credential_types, assumed.role_arns, assumed.legacy),
            (vec![AssumedRole], vec![ROLE_ARN.into()], true)
        );
        let user = create(json!({"arn": POLICY_ARN})).unwrap();
        assert_eq!(
            (user.credential_types, user.policy_arns, user.legacy),
            (vec![IamUser], vec![POLICY_ARN.into()], true)
        );
    }

    #[test]
    fn legacy_entries_are_told_apart_by_content_as_vault_does() {
        assert_eq!(create(json!({"policy": ROLE_ARN})).unwrap().credential_types, [AssumedRole]);
        assert_eq!(create(json!({"arn": "{}"})).unwrap().credential_types, [IamUser, FederationToken]);
    }

    #[test]
    fn legacy_entries_that_are_neither_a_role_or_policy_arn_nor_json_are_refused() {
        assert_eq!(
            refused(json!({"arn": "arn:aws:iam::123456789012:user/ops"})),
            "arn \"arn:aws:iam::123456789012:user/ops\" must be the ARN of an IAM role (role/...) \
             or policy (policy/...)"
        );
        assert_eq!(
            refused(json!({"arn": "arn:aws:iam"})),
            "arn \"arn:aws:iam\" is not a valid ARN: arn:<partition>:<service>:<region>:<account>:<resource>"
        );
        let error = refused(json!({"policy": "allow everything"}));
        assert!(error.starts_with("policy is neither an ARN nor a JSON policy: "), "{error}");
    }

    #[test]
    fn legacy_policy_and_arn_are_exclusive_and_do_not_mix_with_current_parameters() {
        assert_eq!(
            refused(json!({"policy": "{}", "arn": POLICY_ARN})),
            "only one of the legacy policy or arn parameters may be given"
        );
        for field in CURRENT_PARAMETERS {
            let mut request = body(json!({"arn": POLICY_ARN}));
            request.insert(field.to_owned(), json!(""));
            assert_eq!(
                apply("deploy", None, &request).unwrap_err(),
                format!(
                    "the legacy arn parameter cannot be combined with {field}; \
                     use credential_type with role_arns, policy_arns or policy_document instead"
                )
            );
        }
        assert!(create(json!({"arn": POLICY_ARN, "credential_type": null, "policy": ""})).is_ok());
    }

    #[test]
    fn a_legacy_write_replaces_the_role_and_a_current_write_ends_legacy_status() {
        let existing = update(&iam_user(), json!({"iam_groups": "ops"})).unwrap();
        let legacy = update(&existing, json!({"policy": "{}"})).unwrap();
        assert_eq!(
            legacy,
            Role {
                credential_types: vec![IamUser, FederationToken],
                policy_document: "{}".into(),
                legacy: true,
                ..Role::blank("deploy")
            }
        );
        let current = update(&legacy, json!({"iam_groups": "ops"})).unwrap();
        assert_eq!((current.credential_types.len(), current.legacy), (2, false));
    }

    #[test]
    fn every_problem_of_a_write_is_reported_at_once() {
        let error = refused(json!({"credential_type": "session_token", "iam_tags": "a=b", "max_sts_ttl": 60}));
        assert_eq!(error.split("; ").count(), 2, "{error}");
    }

    #[test]
    fn validate_checks_roles_read_back_from_the_store() {
        assert!(validate(&iam_user()).is_ok());
        let stored = Role { credential_types: vec![], ..iam_user() };
        assert!(validate(&stored).unwrap_err().starts_with("credential_type is required"));
        let stored = Role { policy_document: "{not json".into(), ..iam_user() };
        assert_eq!(validate(&stored), Err("policy_document is not valid JSON".into()));
        let round_trip: Role = serde_json::from_value(serde_json::to_value(iam_user()).unwrap()).unwrap();
        assert_eq!(round_trip, iam_user());
    }

    #[test]
    fn a_read_shows_every_field_with_vault_defaults() {
        assert_eq!(
            to_data(&iam_user()),
            json!({
                "credential_type": "iam_user",
                "credential_types": ["iam_user"],
                "role_arns": [],
                "policy_arns": [POLICY_ARN],
                "policy_document": "",
                "iam_groups": [],
                "iam_tags": {},
                "default_sts_ttl": 0,
                "max_sts_ttl": 0,
                "user_path": "/",
                "permissions_boundary_arn": "",
                "mfa_serial_number": "",
            })
        );
        let role = create(json!({"credential_type": "assumed_role", "role_arns": ROLE_ARN, "default_sts_ttl": "15m"}))
            .unwrap();
        let data = to_data(&role);
        assert_eq!((data["default_sts_ttl"].clone(), data["user_path"].clone()), (json!(900), json!("")));
        let session = create(json!({"credential_type": "session_token", "mfa_serial_number": "GAHT12345678"})).unwrap();
        assert_eq!(to_data(&session)["mfa_serial_number"], "GAHT12345678");
    }

    #[test]
    fn role_names_follow_vaults_generic_name_with_at_pattern() {
        for name in ["a", "_", "deploy", "team.ci@example-1", "a-b"] {
            assert!(valid_role_name(name), "{name}");
        }
        for name in ["-lead", "trail.", "sp ace", "a/b", "ünï", "@"] {
            let refused = apply(name, None, &body(json!({"credential_type": "session_token"})));
            assert!(refused.expect_err(name).contains("role name"), "{name}");
        }
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_stored_role_that_no_longer_validates_keeps_its_fields_when_read_and_partly_updated() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::SqliteStore::open(dir.path().join("db")).unwrap();
        let mount = Mount {
            path: "aws".into(),
            kind: "aws".into(),
            uuid: "m-1".into(),
            accessor: "aws_1".into(),
            description: String::new(),
        };
        // Stored before today's rules: an assumed_role role with a policy and a group, and a
        // default above its maximum.
        let mut stored = Role::blank("deploy");
        stored.credential_types = vec![AssumedRole];
        stored.role_arns = vec![ROLE_ARN.into()];
        stored.iam_groups = vec!["ops".into()];
        stored.default_sts_ttl = Some(7200);
        stored.max_sts_ttl = Some(3600);
        let item = Item::from_value(keys::mount_role(&mount.uuid, "deploy"), &stored).unwrap();
        store.put(item, Condition::Always).await.unwrap();

        let invalid = load(&store, &mount, "deploy").await.unwrap().unwrap().expect_err("invalid now");
        let data = invalid.data();
        assert!(data["invalid_data"].as_str().unwrap().contains("default_sts_ttl"), "{data}");
        assert_eq!((data["role_arns"].clone(), data["iam_groups"].clone()), (json!([ROLE_ARN]), json!(["ops"])));

        let limits = BrokerLimits::default();
        let fix = body(json!({"default_sts_ttl": "30m"}));
        write(&store, &limits, &mount, "deploy", &fix).await.unwrap();
        let role = load(&store, &mount, "deploy").await.unwrap().unwrap().expect("valid again");
        assert_eq!((role.role_arns, role.iam_groups), (vec![ROLE_ARN.to_owned()], vec!["ops".to_owned()]));
        assert_eq!((role.default_sts_ttl, role.max_sts_ttl), (Some(1800), Some(3600)));
    }
}
