//! ACL policies in Vault's HCL form (`path "aws/creds/deploy" { capabilities = ["read"] }`),
//! parsed with hcl-rs, and the check every broker request passes: the caller's policies must
//! grant the capability the request needs on its path.
//!
//! Matching follows Vault: among the rules that match a path, the most specific one decides
//! (an exact path over a glob, then fewer `+` segments, then the longer pattern); a `*` ends a
//! pattern as a prefix, a `+` stands for one path segment; `deny` wins over everything.

use serde::{Deserialize, Serialize};

use super::error::{BrokerError, Result};
use super::tokens::{ServiceToken, DEFAULT_POLICY, ROOT_POLICY};
use crate::store::{keys, query_all, Condition, Item, ItemStore};

const CAPABILITIES: [&str; 8] = ["create", "read", "update", "delete", "list", "sudo", "deny", "patch"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub path: String,
    pub capabilities: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Policy {
    pub name: String,
    /// The HCL as written, returned on read.
    pub policy: String,
    pub rules: Vec<Rule>,
}

/// What a token may always do with itself (Vault's `default` policy).
const DEFAULT_RULES: &str = r#"
path "auth/token/lookup-self" { capabilities = ["read"] }
path "auth/token/renew-self" { capabilities = ["update"] }
path "auth/token/revoke-self" { capabilities = ["update"] }
path "sys/leases/lookup" { capabilities = ["update"] }
path "sys/leases/renew" { capabilities = ["update"] }
"#;

/// Parses a policy's HCL into rules, with a clear message on any mistake.
pub fn parse(name: &str, text: &str) -> Result<Policy> {
    let body: hcl::Body =
        hcl::from_str(text).map_err(|e| BrokerError::invalid(format!("failed to parse policy: {e}")))?;
    let mut rules = Vec::new();
    for block in body.blocks() {
        if block.identifier() != "path" {
            return Err(BrokerError::invalid(format!(
                "failed to parse policy: unknown block `{}`",
                block.identifier()
            )));
        }
        let [label] = block.labels() else {
            return Err(BrokerError::invalid("failed to parse policy: a path block takes exactly one path"));
        };
        let path = label.as_str().trim_start_matches('/').to_owned();
        let capabilities = block
            .body()
            .attributes()
            .find(|a| a.key() == "capabilities")
            .and_then(|a| match a.expr() {
                hcl::Expression::Array(items) => Some(
                    items
                        .iter()
                        .filter_map(|e| match e {
                            hcl::Expression::String(s) => Some(s.clone()),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            })
            .ok_or_else(|| {
                BrokerError::invalid(format!("failed to parse policy: path \"{path}\" needs a capabilities list"))
            })?;
        if let Some(unknown) = capabilities.iter().find(|c| !CAPABILITIES.contains(&c.as_str())) {
            return Err(BrokerError::invalid(format!(
                "failed to parse policy: unknown capability `{unknown}` on \"{path}\""
            )));
        }
        rules.push(Rule { path, capabilities });
    }
    Ok(Policy { name: name.to_owned(), policy: text.to_owned(), rules })
}

fn matches(pattern: &str, path: &str) -> bool {
    let (pattern, prefix) = match pattern.strip_suffix('*') {
        Some(stem) => (stem, true),
        None => (pattern, false),
    };
    let pattern_parts: Vec<&str> = pattern.split('/').collect();
    let path_parts: Vec<&str> = path.split('/').collect();
    if !prefix && pattern_parts.len() != path_parts.len() {
        return false;
    }
    if prefix && path_parts.len() < pattern_parts.len() {
        return false;
    }
    let last = pattern_parts.len() - 1;
    pattern_parts.iter().zip(&path_parts).enumerate().all(|(i, (p, actual))| {
        if *p == "+" {
            return true;
        }
        if prefix && i == last {
            return actual.starts_with(p);
        }
        p == actual
    })
}

/// How specific a matching pattern is: higher wins.
fn specificity(pattern: &str) -> (bool, usize, usize) {
    let exact = !pattern.ends_with('*') && !pattern.split('/').any(|p| p == "+");
    let plus = pattern.split('/').filter(|p| *p == "+").count();
    (exact, usize::MAX - plus, pattern.len())
}

/// Whether `token` may do `capability` on `path` (relative to `/v1/`).
pub async fn allowed(store: &dyn ItemStore, token: &ServiceToken, path: &str, capability: &str) -> Result<bool> {
    if token.is_root() {
        return Ok(true);
    }
    // As Vault does, the rules of all the token's policies are merged per pattern first (a
    // `deny` anywhere on a pattern wins), then the most specific matching pattern decides.
    let mut merged: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for name in &token.policies {
        for rule in load(store, name).await?.map(|p| p.rules).unwrap_or_default() {
            merged.entry(rule.path).or_default().extend(rule.capabilities);
        }
    }
    let best =
        merged.iter().filter(|(pattern, _)| matches(pattern, path)).max_by_key(|(pattern, _)| specificity(pattern));
    Ok(best.is_some_and(|(_, capabilities)| {
        !capabilities.iter().any(|c| c == "deny") && capabilities.iter().any(|c| c == capability)
    }))
}

/// Fails with 403 unless `token` may do `capability` on `path`.
pub async fn require(store: &dyn ItemStore, token: &ServiceToken, path: &str, capability: &str) -> Result<()> {
    if allowed(store, token, path, capability).await? {
        Ok(())
    } else {
        Err(BrokerError::PermissionDenied)
    }
}

/// A policy by name; `default` exists until overwritten, `root` always.
pub async fn load(store: &dyn ItemStore, name: &str) -> Result<Option<Policy>> {
    if let Some(item) = store.get(&keys::broker_policy(name)).await? {
        return Ok(Some(item.parse()?));
    }
    match name {
        DEFAULT_POLICY => Ok(Some(parse(DEFAULT_POLICY, DEFAULT_RULES)?)),
        _ => Ok(None),
    }
}

pub async fn write(store: &dyn ItemStore, name: &str, text: &str) -> Result<()> {
    if name == ROOT_POLICY {
        return Err(BrokerError::invalid("cannot update \"root\" policy"));
    }
    let policy = parse(name, text)?;
    store.put(Item::from_value(keys::broker_policy(name), &policy)?, Condition::Always).await?;
    Ok(())
}

pub async fn delete(store: &dyn ItemStore, name: &str) -> Result<()> {
    if name == ROOT_POLICY || name == DEFAULT_POLICY {
        return Err(BrokerError::invalid(format!("cannot delete \"{name}\" policy")));
    }
    store.delete(&keys::broker_policy(name), Condition::Always).await?;
    Ok(())
}

pub async fn names(store: &dyn ItemStore) -> Result<Vec<String>> {
    let mut names: Vec<String> = query_all(store, keys::broker_policies())
        .await?
        .iter()
        .filter_map(|i| i.parse::<Policy>().ok())
        .map(|p| p.name)
        .collect();
    for builtin in [DEFAULT_POLICY, ROOT_POLICY] {
        if !names.iter().any(|n| n == builtin) {
            names.push(builtin.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_from_vault_hcl() {
        let policy = parse("deploy", "path \"aws/creds/deploy\" {\n  capabilities = [\"read\"]\n}\npath \"aws/roles/*\" { capabilities = [\"list\", \"read\"] }").unwrap();
        assert_eq!(policy.rules.len(), 2);
        assert_eq!(
            policy.rules[1],
            Rule { path: "aws/roles/*".into(), capabilities: vec!["list".into(), "read".into()] }
        );
        assert!(parse("x", "path \"a\" { capabilities = [\"fly\"] }").is_err());
        assert!(parse("x", "not hcl {").is_err());
        assert!(parse("x", "path \"a\" {}").is_err());
    }

    #[test]
    fn globs_match_as_vault_s_do() {
        assert!(matches("aws/creds/deploy", "aws/creds/deploy"));
        assert!(!matches("aws/creds/deploy", "aws/creds/deployer"));
        assert!(matches("aws/creds/*", "aws/creds/deployer"));
        assert!(matches("aws/creds/dep*", "aws/creds/deployer"));
        assert!(matches("+/creds/deploy", "team-aws/creds/deploy"));
        assert!(!matches("+/creds/deploy", "a/b/creds/deploy"));
        assert!(specificity("aws/creds/deploy") > specificity("aws/creds/*"));
        assert!(specificity("aws/creds/deploy*") > specificity("aws/creds/*"));
    }
}
