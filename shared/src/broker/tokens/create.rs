//! `auth/token/create`, `create-orphan` and `create/:role_name`: a token with Vault's parameters,
//! each honoured as Vault does or refused with Vault's message, never dropped.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

use super::roles::{self, TokenRole, TokenType};
use super::{new_secret, ServiceToken, CREATE_ORPHAN_PATH, CREATE_PATH, DEFAULT_POLICY, MAX_TTL, ROOT_POLICY};
use crate::auth::hash_secret;
use crate::broker::error::{BrokerError, Result};
use crate::broker::http::flag;
use crate::broker::{duration, policies};
use crate::store::{Condition, ItemStore, Transaction, Write};

/// Bounds on `meta`, which the token carries on every request: Hangar's, Vault sets none.
const MAX_META_ENTRIES: usize = 64;
const MAX_META_KEY_BYTES: usize = 128;
const MAX_META_VALUE_BYTES: usize = 1024;

/// Creates a token for `caller` through `path` (`auth/token/create`, `create-orphan`, or
/// `create/<role>` with `role_name`), from the request's `body`. The caller's policy must grant
/// `update` on the path; what Vault reserves to `sudo` there (an orphan, a period, an id, any
/// policy) needs it here too. A child lives at most as long as its parent.
pub async fn create(
    store: &dyn ItemStore,
    caller: &ServiceToken,
    path: &str,
    role_name: Option<&str>,
    body: &Map<String, Value>,
) -> Result<(String, ServiceToken)> {
    // `role_name` in the body of `auth/token/create` names the role as the path would.
    let body_role = text(body, "role_name")?.filter(|_| path == CREATE_PATH);
    let role_name = role_name.map(str::to_owned).or(body_role);
    let path = match &role_name {
        Some(role) => format!("{CREATE_PATH}/{role}"),
        None => path.to_owned(),
    };
    policies::require(store, caller, &path, "update").await?;
    let role = match &role_name {
        Some(name) => {
            Some(roles::load(store, name).await?.ok_or_else(|| BrokerError::invalid(format!("unknown role {name}"))))
        }
        None => None,
    }
    .transpose()?;
    let sudo = caller.is_root() || policies::allowed(store, caller, &path, "sudo").await?;
    let request = Request::parse(body)?;
    let now = chrono::Utc::now().timestamp();
    let (secret, token) = request.token(caller, &path, role.as_ref(), sudo, now)?;

    let mut transaction = Transaction::new();
    let token_absent = transaction.add(Write::Put { item: token.to_item()?, condition: Condition::NotExists });
    transaction.add(Write::Put { item: token.pointer()?, condition: Condition::NotExists });
    let parent_standing = (!token.is_orphan()).then(|| transaction.add(caller.standing()));
    match transaction.commit(store).await {
        Err(e) if parent_standing.is_some_and(|standing| e.failed_on(standing)) => Err(BrokerError::PermissionDenied),
        Err(e) if e.failed_on(token_absent) => Err(BrokerError::invalid("cannot create a token with a duplicate ID")),
        other => other.map_err(BrokerError::from),
    }?;
    Ok((secret, token))
}

/// What a creation request asks for, as read from its body.
struct Request {
    id: Option<String>,
    policies: Option<Vec<String>>,
    meta: BTreeMap<String, String>,
    no_parent: bool,
    no_default_policy: bool,
    renewable: Option<bool>,
    ttl: u64,
    explicit_max_ttl: u64,
    period: u64,
    display_name: Option<String>,
    num_uses: i64,
    kind: Option<TokenType>,
    entity_alias: Option<String>,
}

impl Request {
    fn parse(body: &Map<String, Value>) -> Result<Self> {
        let policies = match body.get("policies") {
            None => None,
            Some(value) => Some(roles::policy_list("policies", value)?),
        };
        let kind = match text(body, "type")?.as_deref() {
            None | Some("") => None,
            Some("service") => Some(TokenType::Service),
            Some("batch") => Some(TokenType::Batch),
            Some(_) => return Err(BrokerError::invalid("invalid 'token_type' value")),
        };
        let num_uses = match body.get("num_uses") {
            None => 0,
            Some(value) => whole(value).ok_or_else(|| BrokerError::invalid("num_uses must be a whole number"))?,
        };
        if num_uses < 0 {
            return Err(BrokerError::invalid("number of uses cannot be negative"));
        }
        Ok(Request {
            id: text(body, "id")?,
            policies,
            meta: meta(body.get("meta"))?,
            no_parent: flag(body, "no_parent")?.unwrap_or(false),
            no_default_policy: flag(body, "no_default_policy")?.unwrap_or(false),
            renewable: flag(body, "renewable")?,
            ttl: seconds(body, "ttl")?.or(seconds(body, "lease")?).unwrap_or(0),
            explicit_max_ttl: seconds(body, "explicit_max_ttl")?.unwrap_or(0),
            period: seconds(body, "period")?.unwrap_or(0),
            display_name: text(body, "display_name")?,
            num_uses,
            kind,
            entity_alias: text(body, "entity_alias")?,
        })
    }

    /// The token this request makes for `caller` (its secret, and the token), as Vault's
    /// `handleCreateCommon` decides it.
    fn token(
        self,
        caller: &ServiceToken,
        path: &str,
        role: Option<&TokenRole>,
        sudo: bool,
        now: i64,
    ) -> Result<(String, ServiceToken)> {
        if caller.batch {
            return Err(BrokerError::invalid("batch tokens cannot create more tokens"));
        }
        if caller.is_limited_use() {
            return Err(BrokerError::invalid("restricted use token cannot generate child tokens"));
        }
        let mut renewable = self.renewable.unwrap_or(true);
        let batch = match (role.map(|r| r.token_type), self.kind) {
            (Some(TokenType::Service), _) => false,
            (Some(TokenType::Batch), _) => true,
            (Some(TokenType::DefaultBatch), None) => true,
            (_, kind) => kind == Some(TokenType::Batch),
        };
        let (mut explicit_max_ttl, mut period, mut num_uses) = (self.explicit_max_ttl, self.period, self.num_uses);
        if batch {
            for (field, set) in
                [("explicit_max_ttl", explicit_max_ttl > 0), ("num_uses", num_uses != 0), ("period", period > 0)]
            {
                if set {
                    return Err(BrokerError::invalid(format!("batch tokens cannot have \"{field}\" set")));
                }
            }
            renewable = false;
        }
        if self.entity_alias.is_some() {
            return Err(BrokerError::invalid(match role {
                None => "'entity_alias' is only allowed in combination with token role",
                // No role allows entity aliases: the broker has no identity store.
                Some(_) => "invalid 'entity_alias' value",
            }));
        }
        let mut token_path = path.to_owned();
        if let Some(role) = role {
            renewable &= role.renewable;
            num_uses = lesser_set(num_uses, role.token_num_uses);
            if !role.path_suffix.is_empty() {
                token_path = format!("{token_path}/{}", role.path_suffix);
            }
        }
        let display_name = match self.display_name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
            Some(name) => display_name(name),
            None => "token".to_owned(),
        };
        let secret = match self.id {
            Some(_) if !sudo => {
                return Err(BrokerError::invalid("root or sudo privileges required to specify token id"))
            }
            Some(id) => custom_id(id)?,
            None => new_secret(),
        };
        let policies = token_policies(caller, role, self.policies, self.no_default_policy, sudo, batch)?;
        let orphan = match role {
            Some(role) => role.orphan,
            None if path == CREATE_ORPHAN_PATH => true,
            None if self.no_parent && !sudo => {
                return Err(BrokerError::invalid("root or sudo privileges required to create orphan token"));
            }
            None => self.no_parent,
        };
        if period > 0 && !sudo {
            return Err(BrokerError::invalid("root or sudo privileges required to create periodic token"));
        }
        if let Some(role) = role.filter(|_| !batch) {
            explicit_max_ttl = lesser_set(explicit_max_ttl, role.token_explicit_max_ttl);
            period = lesser_set(period, role.token_period);
        }
        if batch {
            // A batch token keeps no count of uses, whatever its role says.
            num_uses = 0;
        }

        // The TTL: a period's, else the request's, else the default; never past the explicit
        // max, the system's max, nor (for a child) the parent's expiry.
        let most = if explicit_max_ttl > 0 { explicit_max_ttl.min(MAX_TTL) } else { MAX_TTL };
        let asked = if period > 0 {
            period
        } else if self.ttl > 0 {
            self.ttl
        } else {
            MAX_TTL
        };
        let mut ttl = asked.min(most);
        if let (false, Some(parent_expiry)) = (orphan, caller.expire_at) {
            let left = u64::try_from(parent_expiry - now).unwrap_or(0);
            if left == 0 {
                return Err(BrokerError::PermissionDenied);
            }
            ttl = ttl.min(left);
        }
        let token = ServiceToken {
            ttl,
            expire_at: Some(now + ttl as i64),
            parent: (!orphan).then(|| caller.accessor.clone()),
            parent_hash: (!orphan).then(|| caller.hash.clone()),
            path: token_path,
            num_uses,
            explicit_max_ttl,
            period,
            renewable,
            role: role.map(|r| r.name.clone()),
            meta: self.meta,
            batch,
            ..ServiceToken::new(hash_secret(&secret), policies, display_name, now)
        };
        Ok((secret, token))
    }
}

/// The token's policies, as Vault decides them: a role with policy lists grants what it allows
/// (the caller need not hold them); otherwise a caller without `sudo` hands out only policies it
/// holds, and with none asked for the caller's own. `default` is added unless refused, `root`
/// only by a root caller.
fn token_policies(
    caller: &ServiceToken,
    role: Option<&TokenRole>,
    asked: Option<Vec<String>>,
    no_default_policy: bool,
    sudo: bool,
    batch: bool,
) -> Result<Vec<String>> {
    let asked = asked.map(|list| roles::sanitized(list, false));
    let mut policies = match role.filter(|role| role.lists_policies()) {
        Some(role) => {
            let add_default = !no_default_policy && !role.token_no_default_policy && !role.disallows(DEFAULT_POLICY);
            let allowed = roles::sanitized(role.allowed_policies.clone(), add_default);
            let chosen = match asked {
                Some(asked) => {
                    let asked = roles::sanitized(asked, add_default);
                    if role.restricts_policies() {
                        if let Some(outside) = asked.iter().find(|p| !allowed.contains(p) && !role.glob_allows(p)) {
                            return Err(BrokerError::invalid(format!(
                                "token policies ({asked:?}) must be subset of the role's allowed policies \
                                 ({:?}) or glob policies ({:?}): {outside} is not",
                                role.allowed_policies, role.allowed_policies_glob
                            )));
                        }
                    }
                    asked
                }
                None if !role.allowed_policies.is_empty() => allowed,
                None => roles::sanitized(caller.policies.clone(), add_default),
            };
            if let Some(refused) = chosen.iter().find(|p| role.disallows(p)) {
                return Err(BrokerError::invalid(format!("token policy \"{refused}\" is disallowed by this role")));
            }
            chosen
        }
        None => match asked {
            None => caller.policies.clone(),
            Some(asked) if !sudo => {
                if let Some(extra) = asked.iter().find(|p| !caller.policies.contains(p)) {
                    return Err(BrokerError::invalid(format!(
                        "child policies must be subset of parent: `{extra}` is not"
                    )));
                }
                let inherit_default = caller.policies.iter().any(|p| p == DEFAULT_POLICY) || caller.is_root();
                roles::sanitized(asked, inherit_default && !no_default_policy)
            }
            Some(asked) => roles::sanitized(asked, !no_default_policy),
        },
    };
    if no_default_policy {
        policies.retain(|p| p != DEFAULT_POLICY);
    }
    if policies.iter().any(|p| p == ROOT_POLICY) {
        if !caller.is_root() {
            return Err(BrokerError::invalid("root tokens may not be created without parent token being root"));
        }
        if batch {
            return Err(BrokerError::invalid("batch tokens cannot be root tokens"));
        }
        return Ok(vec![ROOT_POLICY.to_owned()]);
    }
    Ok(policies)
}

/// Of two settings where 0 means unset, the lesser one set.
fn lesser_set<T: Ord + Default + Copy>(a: T, b: T) -> T {
    let unset = T::default();
    match (a == unset, b == unset) {
        (true, _) => b,
        (_, true) => a,
        _ => a.min(b),
    }
}

/// Vault's display name: `token-` and the name with every character but letters, digits and
/// `-` replaced by `-`, one trailing `-` dropped.
fn display_name(name: &str) -> String {
    let cleaned: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    let name = format!("token-{cleaned}");
    name.strip_suffix('-').map(str::to_owned).unwrap_or(name)
}

/// A token id the caller chose (with `sudo`), refused where Vault refuses it.
fn custom_id(id: String) -> Result<String> {
    for prefix in ["hvs.", "s.", "hvb.", "b."] {
        if id.starts_with(prefix) {
            return Err(BrokerError::invalid(format!("custom token ID cannot have the '{prefix}' prefix")));
        }
    }
    if id.contains('.') {
        return Err(BrokerError::invalid("custom token ID cannot have a '.' in the value"));
    }
    if id.len() > 256 {
        return Err(BrokerError::invalid("custom token ID must be at most 256 bytes"));
    }
    Ok(id)
}

/// `meta`: strings by name (numbers and booleans read as their text), within Hangar's bounds.
fn meta(value: Option<&Value>) -> Result<BTreeMap<String, String>> {
    let Some(value) = value else { return Ok(BTreeMap::new()) };
    let Value::Object(fields) = value else { return Err(BrokerError::invalid("meta must be a map of strings")) };
    if fields.len() > MAX_META_ENTRIES {
        return Err(BrokerError::invalid(format!("meta holds at most {MAX_META_ENTRIES} entries")));
    }
    let mut meta = BTreeMap::new();
    for (key, value) in fields {
        let text = match value {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            Value::Bool(flag) => flag.to_string(),
            Value::Null => continue,
            _ => return Err(BrokerError::invalid(format!("meta value of {key:?} must be a string"))),
        };
        if key.len() > MAX_META_KEY_BYTES || text.len() > MAX_META_VALUE_BYTES {
            return Err(BrokerError::invalid(format!(
                "meta keys hold at most {MAX_META_KEY_BYTES} bytes and values {MAX_META_VALUE_BYTES}"
            )));
        }
        meta.insert(key.clone(), text);
    }
    Ok(meta)
}

/// A string field; `None` when absent or empty.
fn text(body: &Map<String, Value>, name: &str) -> Result<Option<String>> {
    match body.get(name) {
        None => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.trim().to_owned())),
        Some(Value::Number(number)) => Ok(Some(number.to_string())),
        Some(_) => Err(BrokerError::invalid(format!("{name} must be a string"))),
    }
}

/// A duration field in whole seconds, as Vault's API takes one (`"1h"`, `3600`).
fn seconds(body: &Map<String, Value>, name: &str) -> Result<Option<u64>> {
    match body.get(name) {
        None => Ok(None),
        Some(value) => {
            let parsed = duration::parse(value).map_err(|e| match e.contains("negative") {
                true => BrokerError::invalid(format!("{name} must be positive")),
                false => BrokerError::invalid(format!("{name}: {e}")),
            })?;
            Ok(Some(Duration::as_secs(&parsed)))
        }
    }
}

/// A whole number, as a JSON number or its text.
fn whole(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_are_cleaned_as_vault_cleans_them() {
        assert_eq!(display_name("ci"), "token-ci");
        assert_eq!(display_name("ci.bot@example"), "token-ci-bot-example");
        assert_eq!(display_name("trailing!"), "token-trailing");
    }

    #[test]
    fn the_lesser_of_two_settings_where_zero_is_unset() {
        assert_eq!(lesser_set(0u64, 5), 5);
        assert_eq!(lesser_set(7u64, 0), 7);
        assert_eq!(lesser_set(7u64, 5), 5);
        assert_eq!(lesser_set(0i64, 0), 0);
    }
}
