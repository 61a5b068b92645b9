//! Token roles (`auth/token/roles/:role_name`): what `auth/token/create/:role_name` makes, as
//! Vault's token store keeps them. A role with policy lists grants the policies it allows to
//! whoever may create against it; its period and explicit max TTL need no `sudo`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::broker::duration;
use crate::broker::error::{BrokerError, Result};
use crate::broker::http::flag;
use crate::store::{keys, Condition, Item, ItemStore};

/// Which tokens a role makes (`token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenType {
    Service,
    Batch,
    /// Service tokens unless the request asks for a batch one (Vault's default).
    DefaultService,
    /// Batch tokens unless the request asks for a service one.
    DefaultBatch,
}

impl TokenType {
    fn parse(raw: &str) -> Option<Self> {
        match raw {
            "service" => Some(Self::Service),
            "batch" => Some(Self::Batch),
            "default-service" | "default" => Some(Self::DefaultService),
            "default-batch" => Some(Self::DefaultBatch),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::Batch => "batch",
            Self::DefaultService => "default-service",
            Self::DefaultBatch => "default-batch",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenRole {
    pub name: String,
    pub allowed_policies: Vec<String>,
    pub disallowed_policies: Vec<String>,
    pub allowed_policies_glob: Vec<String>,
    pub disallowed_policies_glob: Vec<String>,
    pub orphan: bool,
    pub renewable: bool,
    pub path_suffix: String,
    /// Seconds; 0 for none.
    pub token_period: u64,
    /// Seconds; 0 for none.
    pub token_explicit_max_ttl: u64,
    pub token_type: TokenType,
    pub token_no_default_policy: bool,
    pub token_num_uses: i64,
}

impl TokenRole {
    fn new(name: &str) -> Self {
        TokenRole {
            name: name.to_owned(),
            allowed_policies: Vec::new(),
            disallowed_policies: Vec::new(),
            allowed_policies_glob: Vec::new(),
            disallowed_policies_glob: Vec::new(),
            orphan: false,
            renewable: true,
            path_suffix: String::new(),
            token_period: 0,
            token_explicit_max_ttl: 0,
            token_type: TokenType::DefaultService,
            token_no_default_policy: false,
            token_num_uses: 0,
        }
    }

    /// Whether the role has any policy list, which makes it decide the token's policies.
    pub fn lists_policies(&self) -> bool {
        self.restricts_policies() || !self.disallowed_policies.is_empty() || !self.disallowed_policies_glob.is_empty()
    }

    /// Whether the role names the policies a token may ask for.
    pub fn restricts_policies(&self) -> bool {
        !self.allowed_policies.is_empty() || !self.allowed_policies_glob.is_empty()
    }

    /// Whether `policy` matches one of the role's allowed globs.
    pub fn glob_allows(&self, policy: &str) -> bool {
        self.allowed_policies_glob.iter().any(|glob| glob_matches(glob, policy))
    }

    /// Whether the role refuses `policy` (by name or glob).
    pub fn disallows(&self, policy: &str) -> bool {
        self.disallowed_policies.iter().any(|p| p == policy)
            || self.disallowed_policies_glob.iter().any(|glob| glob_matches(glob, policy))
    }

    /// `data` of a read.
    pub fn data(&self) -> Value {
        let mut data = json!({
            "name": self.name,
            "allowed_policies": self.allowed_policies,
            "disallowed_policies": self.disallowed_policies,
            "allowed_policies_glob": self.allowed_policies_glob,
            "disallowed_policies_glob": self.disallowed_policies_glob,
            "orphan": self.orphan,
            "renewable": self.renewable,
            "path_suffix": self.path_suffix,
            "allowed_entity_aliases": null,
            "token_type": self.token_type.as_str(),
            "token_no_default_policy": self.token_no_default_policy,
            "period": self.token_period,
            "token_period": self.token_period,
            "explicit_max_ttl": self.token_explicit_max_ttl,
            "token_explicit_max_ttl": self.token_explicit_max_ttl,
        });
        if self.token_num_uses > 0 {
            data["token_num_uses"] = json!(self.token_num_uses);
        }
        data
    }
}

/// A glob of Vault's policy lists: `*` stands for any run of characters.
fn glob_matches(glob: &str, text: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else { return glob == text };
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Policy names as Vault sanitizes them: trimmed, lowercased, without empties or repeats,
/// sorted, `default` added when asked; `root` among them leaves `root` alone.
pub fn sanitized(policies: Vec<String>, add_default: bool) -> Vec<String> {
    let mut out: Vec<String> =
        policies.into_iter().map(|p| p.trim().to_lowercase()).filter(|p| !p.is_empty()).collect();
    if out.iter().any(|p| p == super::ROOT_POLICY) {
        return vec![super::ROOT_POLICY.to_owned()];
    }
    if add_default {
        out.push(super::DEFAULT_POLICY.to_owned());
    }
    out.sort();
    out.dedup();
    out
}

/// A list of policy names: a JSON list of strings, or one comma-separated string.
pub fn policy_list(name: &str, value: &Value) -> Result<Vec<String>> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| BrokerError::invalid(format!("{name} must be a list of names"))),
        Value::String(list) => Ok(list.split(',').map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect()),
        _ => Err(BrokerError::invalid(format!("{name} must be a list of names"))),
    }
}

/// Whether a role name is one Vault's path takes (`\w(([\w-.]+)?\w)?`), at most 128 bytes.
fn valid_name(name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    (1..=128).contains(&name.len())
        && name.chars().next().is_some_and(word)
        && name.chars().last().is_some_and(word)
        && name.chars().all(|c| word(c) || c == '-' || c == '.')
}

pub async fn load(store: &dyn ItemStore, name: &str) -> Result<Option<TokenRole>> {
    if !valid_name(name) {
        return Ok(None);
    }
    Ok(store.get(&keys::broker_token_role(name)).await?.map(|item| item.parse()).transpose()?)
}

/// The names of every token role, sorted.
pub async fn names(store: &dyn ItemStore) -> Result<Vec<String>> {
    let items = crate::store::query_all(store, keys::broker_token_roles()).await?;
    let mut names: Vec<String> = items.iter().filter_map(|item| item.attr::<String>("name").ok().flatten()).collect();
    names.sort();
    Ok(names)
}

pub async fn delete(store: &dyn ItemStore, name: &str) -> Result<()> {
    if valid_name(name) {
        store.delete(&keys::broker_token_role(name), Condition::Always).await?;
    }
    Ok(())
}

/// Writes a role from a request body: a new role takes Vault's defaults for what the body does
/// not give, an existing one keeps its values.
pub async fn write(store: &dyn ItemStore, name: &str, body: &Map<String, Value>) -> Result<()> {
    if !valid_name(name) {
        return Err(BrokerError::invalid(
            "a role name is letters, digits and _ with - and . inside, at most 128 bytes",
        ));
    }
    let mut role = load(store, name).await?.unwrap_or_else(|| TokenRole::new(name));
    let lists: [(&str, &mut Vec<String>); 4] = [
        ("allowed_policies", &mut role.allowed_policies),
        ("disallowed_policies", &mut role.disallowed_policies),
        ("allowed_policies_glob", &mut role.allowed_policies_glob),
        ("disallowed_policies_glob", &mut role.disallowed_policies_glob),
    ];
    for (field, list) in lists {
        if let Some(value) = body.get(field) {
            *list = sanitized(policy_list(field, value)?, false);
        }
    }
    if let Some(orphan) = flag(body, "orphan")? {
        role.orphan = orphan;
    }
    if let Some(renewable) = flag(body, "renewable")? {
        role.renewable = renewable;
    }
    if let Some(no_default) = flag(body, "token_no_default_policy")? {
        role.token_no_default_policy = no_default;
    }
    if let Some(value) = body.get("path_suffix") {
        let suffix = value.as_str().ok_or_else(|| BrokerError::invalid("path_suffix must be a string"))?;
        if suffix.contains("..") {
            return Err(BrokerError::invalid("error registering path suffix: path cannot contain parent references"));
        }
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let valid = suffix.is_empty()
            || (suffix.len() >= 3
                && suffix.len() <= 128
                && suffix.chars().next().is_some_and(word)
                && suffix.chars().last().is_some_and(word)
                && suffix.chars().all(|c| word(c) || c == '-' || c == '.'));
        if !valid {
            return Err(BrokerError::invalid(
                "given role path suffix contains invalid characters; must match \\w[\\w-.]+\\w",
            ));
        }
        role.path_suffix = suffix.to_owned();
    }
    // The current names win over Vault's deprecated ones.
    for (field, deprecated) in [("token_period", "period"), ("token_explicit_max_ttl", "explicit_max_ttl")] {
        let Some(value) = body.get(field).or_else(|| body.get(deprecated)) else { continue };
        let secs = duration::parse(value)
            .map_err(|e| match e.contains("negative") {
                true => BrokerError::invalid(format!("error parsing role fields: '{field}' cannot be negative")),
                false => BrokerError::invalid(format!("error parsing role fields: {field}: {e}")),
            })?
            .as_secs();
        match field {
            "token_period" => role.token_period = secs,
            _ => role.token_explicit_max_ttl = secs,
        }
    }
    if let Some(value) = body.get("token_num_uses") {
        let uses = value
            .as_i64()
            .or_else(|| value.as_str().and_then(|raw| raw.trim().parse().ok()))
            .ok_or_else(|| BrokerError::invalid("error parsing role fields: 'token_num_uses' must be a number"))?;
        if uses < 0 {
            return Err(BrokerError::invalid("error parsing role fields: 'token_num_uses' cannot be negative"));
        }
        role.token_num_uses = uses;
    }
    if let Some(value) = body.get("token_type") {
        let raw = value.as_str().unwrap_or_default();
        role.token_type = TokenType::parse(raw)
            .ok_or_else(|| BrokerError::invalid(format!("invalid 'token_type' value \"{raw}\"")))?;
    }
    // What the broker has no identity store or network rules for is refused, never dropped.
    for field in ["allowed_entity_aliases", "token_bound_cidrs", "bound_cidrs"] {
        if body.get(field).is_some_and(|value| !is_empty_list(value)) {
            return Err(BrokerError::invalid(format!("{field} is not supported by this broker")));
        }
    }
    if role.token_type == TokenType::Batch {
        let refused = [
            (!role.orphan, "non-orphan tokens"),
            (role.token_period > 0, "periodic tokens"),
            (role.renewable, "renewable tokens"),
            (role.token_explicit_max_ttl > 0, "tokens with an explicit max TTL"),
        ];
        if let Some((_, what)) = refused.iter().find(|(refused, _)| *refused) {
            return Err(BrokerError::invalid(format!(
                "'token_type' cannot be 'batch' when role is set to generate {what}"
            )));
        }
    }
    store.put(Item::from_value(keys::broker_token_role(name), &role)?, Condition::Always).await?;
    Ok(())
}

fn is_empty_list(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.is_empty(),
        Value::String(text) => text.trim().is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_any_run_of_characters() {
        assert!(glob_matches("dev-*", "dev-ops"));
        assert!(glob_matches("*-ops", "dev-ops"));
        assert!(glob_matches("d*-*s", "dev-ops"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("dev-*", "prod-ops"));
        assert!(!glob_matches("a*a", "a"));
    }

    #[test]
    fn policies_are_sanitized_as_vault_does() {
        let list = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(sanitized(list(&[" B", "a", "", "a"]), true), ["a", "b", "default"]);
        assert_eq!(sanitized(list(&["root", "a"]), true), ["root"]);
    }
}
