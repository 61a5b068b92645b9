//! `auth/<path>/role/:name`: what a JWT must say to log in as a role (its audiences, subject
//! and bound claims, matched as strings or globs) and the token it earns (`token_*`), with
//! Vault's names, defaults and refusals. Only `role_type` `jwt` is offered: the broker runs no
//! browser OIDC flow.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::config::{list, text};
use crate::broker::duration;
use crate::broker::error::{BrokerError, Result};
use crate::broker::http::flag;
use crate::store::{keys, query_all_as, Condition, Item, ItemStore};

const MAX_BOUND_CLAIMS: usize = 32;
const MAX_CLAIM_VALUES: usize = 64;
const MAX_ROLES_LISTED: usize = 1000;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JwtRole {
    pub name: String,
    pub bound_audiences: Vec<String>,
    pub bound_subject: String,
    /// Claim (or `/`-pointer) → the values any of which it must match.
    pub bound_claims: BTreeMap<String, Vec<String>>,
    pub glob: bool,
    pub user_claim: String,
    pub claim_mappings: BTreeMap<String, String>,
    pub token_policies: Vec<String>,
    pub token_ttl: u64,
    pub token_max_ttl: u64,
    pub token_explicit_max_ttl: u64,
    pub token_period: u64,
    pub token_num_uses: i64,
    pub token_no_default_policy: bool,
    /// Seconds; 0 is Vault's default (60 for clock skew, 150 for the others), negative none.
    pub clock_skew_leeway: i64,
    pub expiration_leeway: i64,
    pub not_before_leeway: i64,
}

/// Parses a role write; `name` is lower-cased, as Vault stores it.
pub fn parse(name: &str, body: &Map<String, Value>) -> Result<JwtRole> {
    const KNOWN: &[&str] = &[
        "role_type",
        "bound_audiences",
        "bound_subject",
        "bound_claims",
        "bound_claims_type",
        "user_claim",
        "claim_mappings",
        "token_policies",
        "policies",
        "token_ttl",
        "ttl",
        "token_max_ttl",
        "max_ttl",
        "token_explicit_max_ttl",
        "token_period",
        "period",
        "token_num_uses",
        "num_uses",
        "token_no_default_policy",
        "token_type",
        "clock_skew_leeway",
        "expiration_leeway",
        "not_before_leeway",
        "allowed_redirect_uris",
        "user_claim_json_pointer",
        "name",
    ];
    // What hvac and the vault CLI send with their defaults: taken when empty, refused when set,
    // as the broker has no identity groups, CIDR bounds or browser OIDC flow.
    const UNOFFERED: &[&str] =
        &["groups_claim", "oidc_scopes", "verbose_oidc_logging", "token_bound_cidrs", "bound_cidrs", "max_age"];
    for (field, value) in body {
        if UNOFFERED.contains(&field.as_str()) {
            if !is_unset(value) {
                return Err(BrokerError::invalid(format!(
                    "{field} is not offered by this broker (no identity groups, CIDR bounds or OIDC flows)"
                )));
            }
        } else if !KNOWN.contains(&field.as_str()) {
            return Err(BrokerError::invalid(format!("{field} is not a role setting of the JWT auth method")));
        }
    }
    match text(body, "role_type")?.as_deref() {
        Some("jwt") => {}
        None | Some("oidc") if list(body, "allowed_redirect_uris")?.is_empty() => {
            return Err(BrokerError::invalid(
                "'allowed_redirect_uris' must be set if 'role_type' is 'oidc' or unspecified.",
            ));
        }
        None | Some("oidc") => {
            return Err(BrokerError::invalid("role_type \"oidc\" is not offered by this broker: use role_type=jwt"));
        }
        Some(other) => return Err(BrokerError::invalid(format!("invalid 'role_type': {other}"))),
    }
    let glob = match text(body, "bound_claims_type")?.as_deref() {
        None | Some("string") => false,
        Some("glob") => true,
        Some(other) => return Err(BrokerError::invalid(format!("invalid 'bound_claims_type': {other}"))),
    };
    let user_claim = text(body, "user_claim")?.unwrap_or_default();
    if user_claim.is_empty() {
        return Err(BrokerError::invalid("a user claim must be defined on the role"));
    }
    let token_type = text(body, "token_type")?;
    if !matches!(token_type.as_deref(), None | Some("default") | Some("service") | Some("default-service")) {
        return Err(BrokerError::invalid("token_type: this broker issues service tokens only"));
    }
    let claim_mappings = string_map(body.get("claim_mappings"), "claim_mappings")?;
    let mut destinations = std::collections::BTreeSet::new();
    for destination in claim_mappings.values() {
        if destination == "role" {
            return Err(BrokerError::invalid("metadata key \"role\" is reserved and may not be a mapping destination"));
        }
        if !destinations.insert(destination) {
            return Err(BrokerError::invalid(format!("multiple keys are mapped to metadata key {destination:?}")));
        }
    }
    let role = JwtRole {
        name: name.to_lowercase(),
        bound_audiences: list(body, "bound_audiences")?,
        bound_subject: text(body, "bound_subject")?.unwrap_or_default(),
        bound_claims: bound_claims(body.get("bound_claims"))?,
        glob,
        user_claim,
        claim_mappings,
        token_policies: match body.get("token_policies") {
            Some(_) => list(body, "token_policies")?,
            None => list(body, "policies")?,
        },
        token_ttl: seconds(body, &["token_ttl", "ttl"])?,
        token_max_ttl: seconds(body, &["token_max_ttl", "max_ttl"])?,
        token_explicit_max_ttl: seconds(body, &["token_explicit_max_ttl"])?,
        token_period: seconds(body, &["token_period", "period"])?,
        token_num_uses: whole(body, &["token_num_uses", "num_uses"])?,
        token_no_default_policy: flag(body, "token_no_default_policy")?.unwrap_or(false),
        clock_skew_leeway: whole(body, &["clock_skew_leeway"])?,
        expiration_leeway: whole(body, &["expiration_leeway"])?,
        not_before_leeway: whole(body, &["not_before_leeway"])?,
    };
    if role.bound_audiences.is_empty() && role.bound_subject.is_empty() && role.bound_claims.is_empty() {
        return Err(BrokerError::invalid("must have at least one bound constraint when creating/updating a role"));
    }
    if role.token_max_ttl > 0 && role.token_ttl > role.token_max_ttl {
        return Err(BrokerError::invalid("'token_ttl' cannot be greater than 'token_max_ttl'"));
    }
    if role.token_num_uses < 0 {
        return Err(BrokerError::invalid("'token_num_uses' cannot be negative"));
    }
    Ok(role)
}

impl JwtRole {
    pub fn describe(&self) -> Value {
        json!({
            "role_type": "jwt",
            "bound_audiences": self.bound_audiences,
            "bound_subject": self.bound_subject,
            "bound_claims": if self.bound_claims.is_empty() { Value::Null } else { json!(self.bound_claims) },
            "bound_claims_type": if self.glob { "glob" } else { "string" },
            "user_claim": self.user_claim,
            "user_claim_json_pointer": false,
            "claim_mappings": if self.claim_mappings.is_empty() { Value::Null } else { json!(self.claim_mappings) },
            "groups_claim": "",
            "token_policies": self.token_policies,
            "policies": self.token_policies,
            "token_ttl": self.token_ttl,
            "ttl": self.token_ttl,
            "token_max_ttl": self.token_max_ttl,
            "max_ttl": self.token_max_ttl,
            "token_explicit_max_ttl": self.token_explicit_max_ttl,
            "token_period": self.token_period,
            "period": self.token_period,
            "token_num_uses": self.token_num_uses,
            "num_uses": self.token_num_uses,
            "token_no_default_policy": self.token_no_default_policy,
            "token_type": "default-service",
            "token_bound_cidrs": [],
            "clock_skew_leeway": self.clock_skew_leeway,
            "expiration_leeway": self.expiration_leeway,
            "not_before_leeway": self.not_before_leeway,
            "allowed_redirect_uris": [],
            "oidc_scopes": [],
            "verbose_oidc_logging": false,
            "max_age": 0,
        })
    }
}

pub async fn load(store: &dyn ItemStore, method_uuid: &str, name: &str) -> Result<Option<JwtRole>> {
    let item = store.get(&keys::mount_role(method_uuid, &name.to_lowercase())).await?;
    Ok(item.map(|item| item.parse()).transpose()?)
}

pub async fn save(store: &dyn ItemStore, method_uuid: &str, role: &JwtRole) -> Result<()> {
    store.put(Item::from_value(keys::mount_role(method_uuid, &role.name), role)?, Condition::Always).await?;
    Ok(())
}

pub async fn delete(store: &dyn ItemStore, method_uuid: &str, name: &str) -> Result<()> {
    store.delete(&keys::mount_role(method_uuid, &name.to_lowercase()), Condition::Always).await?;
    Ok(())
}

pub async fn names(store: &dyn ItemStore, method_uuid: &str) -> Result<Vec<String>> {
    let roles: Vec<JwtRole> = query_all_as(store, keys::mount_roles(method_uuid)).await?;
    Ok(roles.into_iter().take(MAX_ROLES_LISTED).map(|role| role.name).collect())
}

/// A default a client sends for a setting it was not given: nothing, false, zero, empty.
fn is_unset(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.trim().is_empty() || s.trim() == "0",
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
    }
}

/// `bound_claims`: each claim's value a string or a list of strings (Vault also takes numbers
/// and booleans in string mode, which are compared as their text here).
fn bound_claims(value: Option<&Value>) -> Result<BTreeMap<String, Vec<String>>> {
    let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(BTreeMap::new()) };
    let Value::Object(fields) = value else { return Err(BrokerError::invalid("bound_claims must be a map")) };
    if fields.len() > MAX_BOUND_CLAIMS {
        return Err(BrokerError::invalid(format!("bound_claims holds at most {MAX_BOUND_CLAIMS} claims")));
    }
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let mut claims = BTreeMap::new();
    for (claim, expected) in fields {
        let values: Vec<String> = match expected {
            Value::Array(items) => items.iter().map(scalar).collect::<Option<_>>(),
            other => scalar(other).map(|s| vec![s]),
        }
        .ok_or_else(|| BrokerError::invalid(format!("claim is not a string or list: {expected}")))?;
        if values.len() > MAX_CLAIM_VALUES {
            return Err(BrokerError::invalid(format!("a bound claim lists at most {MAX_CLAIM_VALUES} values")));
        }
        claims.insert(claim.clone(), values);
    }
    Ok(claims)
}

fn string_map(value: Option<&Value>, name: &str) -> Result<BTreeMap<String, String>> {
    let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(BTreeMap::new()) };
    let Value::Object(fields) = value else { return Err(BrokerError::invalid(format!("{name} must be a map"))) };
    if fields.len() > MAX_BOUND_CLAIMS {
        return Err(BrokerError::invalid(format!("{name} holds at most {MAX_BOUND_CLAIMS} entries")));
    }
    fields
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            _ => Err(BrokerError::invalid(format!("{name} values must be strings"))),
        })
        .collect()
}

/// The first of `names` present, as a duration in whole seconds; 0 when none is.
fn seconds(body: &Map<String, Value>, names: &[&str]) -> Result<u64> {
    let Some((name, value)) = names.iter().find_map(|n| body.get(*n).map(|v| (n, v))) else { return Ok(0) };
    let parsed = duration::parse(value).map_err(|e| BrokerError::invalid(format!("'{name}': {e}")))?;
    Ok(parsed.as_secs())
}

/// The first of `names` present, as a whole number (negative allowed); 0 when none is.
fn whole(body: &Map<String, Value>, names: &[&str]) -> Result<i64> {
    let Some((name, value)) = names.iter().find_map(|n| body.get(*n).map(|v| (n, v))) else { return Ok(0) };
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
        .ok_or_else(|| BrokerError::invalid(format!("'{name}' must be a whole number")))
}
