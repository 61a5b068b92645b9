//! ACL policies in Vault's HCL form (`path "aws/creds/deploy" { capabilities = ["read"] }`),
//! parsed with hcl-rs, and the check every broker request passes: the caller's policies must
//! grant the capability the request needs on its path.
//!
//! Matching follows Vault: a `*` ends a pattern as a prefix, a `+` stands for one path segment.
//! The rules of a token's policies are merged per pattern (the union of the capabilities, a `deny`
//! leaving none), and among the patterns that match a path only the one of highest priority
//! decides, ranked as Vault ranks them (see `Priority`): a `deny` holds where its pattern wins.

use std::cmp::Reverse;
use std::collections::BTreeMap;

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
        // Vault refuses this when the policy is written: a `+` segment must be a whole segment.
        if path.contains("+*") {
            return Err(BrokerError::invalid(format!(
                "failed to parse policy: path \"{path}\": invalid use of wildcards ('+*' is forbidden)"
            )));
        }
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

/// A matching pattern's rank: the greatest decides. In the order of Vault's
/// `CheckAllowedFromNonExactPaths` (`vault/acl.go`) and its policy docs ("Priority matching"):
/// an exact path beats every wildcard; then the pattern whose first `+` or `*` comes later; then
/// one without a trailing `*`; then fewer `+` segments; then the longer; then the greater
/// lexicographically.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Priority<'a> {
    exact: bool,
    first_wildcard: usize,
    no_trailing_glob: bool,
    plus_segments: Reverse<usize>,
    length: usize,
    stem: &'a str,
}

fn priority(pattern: &str) -> Priority<'_> {
    let (stem, glob) = match pattern.strip_suffix('*') {
        Some(stem) => (stem, true),
        None => (pattern, false),
    };
    // Vault's test for a segment-wildcard path (`vault/policy.go`); its first wildcard is then
    // the first `+` anywhere in it, while a plain glob's is its `*`.
    let segment_wildcards = pattern == "+" || pattern.starts_with("+/") || pattern.contains("/+");
    let first_wildcard = if segment_wildcards { pattern.find('+').unwrap_or(stem.len()) } else { stem.len() };
    Priority {
        exact: !glob && !segment_wildcards,
        first_wildcard,
        no_trailing_glob: !glob,
        plus_segments: Reverse(stem.split('/').filter(|s| *s == "+").count()),
        length: stem.len(),
        stem,
    }
}

/// Whether `token` may do `capability` on `path` (relative to `/v1/`).
pub async fn allowed(store: &dyn ItemStore, token: &ServiceToken, path: &str, capability: &str) -> Result<bool> {
    if token.is_root() {
        return Ok(true);
    }
    Ok(permits(&rules_of(store, token).await?, path, capability))
}

/// Fails with 403 unless `token` may do `capability` on `path` and holds `sudo` there too: what
/// Vault asks on its root-protected paths (`sys/leases/revoke-prefix/*`, `revoke-force/*`,
/// `lookup/*`). Both come from the one pattern that decides the path, so `sudo` granted by a
/// broader pattern that loses to a narrower one does not count; the root token always may.
pub async fn require_sudo(store: &dyn ItemStore, token: &ServiceToken, path: &str, capability: &str) -> Result<()> {
    if token.is_root() {
        return Ok(());
    }
    let rules = rules_of(store, token).await?;
    if permits(&rules, path, capability) && permits(&rules, path, "sudo") {
        Ok(())
    } else {
        Err(BrokerError::PermissionDenied)
    }
}

/// The rules of all a token's policies, merged.
async fn rules_of(store: &dyn ItemStore, token: &ServiceToken) -> Result<BTreeMap<String, Vec<String>>> {
    let mut rules = Vec::new();
    for name in &token.policies {
        rules.extend(load(store, name).await?.map(|p| p.rules).unwrap_or_default());
    }
    Ok(merge(rules))
}

/// The rules of all a token's policies merged per pattern, as Vault's `NewACL` merges them: the
/// union of the capabilities, where a `deny` (checked in `permits`) leaves nothing else.
fn merge(rules: impl IntoIterator<Item = Rule>) -> BTreeMap<String, Vec<String>> {
    let mut merged: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rule in rules {
        merged.entry(rule.path).or_default().extend(rule.capabilities);
    }
    merged
}

/// Whether merged rules grant `capability` on `path`: the highest-priority matching pattern
/// alone decides, and a `deny` on it refuses everything.
fn permits(merged: &BTreeMap<String, Vec<String>>, path: &str, capability: &str) -> bool {
    let best = merged.iter().filter(|(pattern, _)| matches(pattern, path)).max_by_key(|(pattern, _)| priority(pattern));
    best.is_some_and(|(_, capabilities)| {
        !capabilities.iter().any(|c| c == "deny") && capabilities.iter().any(|c| c == capability)
    })
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
        assert!(priority("aws/creds/deploy") > priority("aws/creds/*"));
        assert!(priority("aws/creds/deploy*") > priority("aws/creds/*"));
        assert!(priority("aws/creds/+") > priority("aws/*"), "the first wildcard comes later");
    }

    /// Whether a token holding `policies` (HCL each) may do `capability` on `path`.
    fn grants(policies: &[&str], path: &str, capability: &str) -> bool {
        let rules = policies.iter().flat_map(|text| parse("p", text).unwrap().rules);
        permits(&merge(rules), path, capability)
    }

    /// (loser, winner, a path both match), from Vault's policy docs ("Priority matching"), the
    /// priority comments in `vault/acl.go` and its `TestACL_SegmentWildcardPriority`.
    const VAULT_PRIORITY_EXAMPLES: [(&str, &str, &str); 18] = [
        // The first wildcard later wins (rule 1), whatever the rest.
        ("foo/+", "foo/a*", "foo/abc"),
        ("foo/+/bar/baz", "foo/bar/+/baz", "foo/bar/bar/baz"),
        ("foo/+/+/baz", "foo/bar/+/baz", "foo/bar/x/baz"),
        ("+/*", "foo/+/*", "foo/bar/bar/baz"),
        ("foo/+/(ar/baz", "foo/(ar/+/baz", "foo/(ar/(ar/baz"),
        // The first wildcard in the same place: the one ending in `*` loses (rule 2).
        ("secret/*", "secret/+/foo", "secret/a/foo"),
        ("foo/*", "foo/+", "foo/x"),
        ("foo/+/ba*", "foo/+/bar", "foo/x/bar"),
        ("foo/bar/+/baz*", "foo/bar/+/baz", "foo/bar/bar/baz"),
        ("foo/+/+/*", "foo/+/bar/baz", "foo/bar/bar/baz"),
        // Then more `+` segments lose (rule 3); the first is the docs' own example.
        ("secret/+/+/foo/*", "secret/*", "secret/a/b/foo/c"),
        ("secret/+/*", "secret/*", "secret/a/b"),
        ("foo/+/+/baz", "foo/+/bar/baz", "foo/bar/bar/baz"),
        ("+/*", "*", "foo/bar/bar/baz"),
        // Then the shorter loses (rule 4), then the lexicographically smaller (rule 5).
        ("foo/+/bar/b*", "foo/+/bar/ba*", "foo/x/bar/baz"),
        ("+/+/x", "+/x/+", "x/x/x"),
        // An exact path beats every wildcard.
        ("aws/creds/+", "aws/creds/prod", "aws/creds/prod"),
        ("aws/creds/pro*", "aws/creds/prod", "aws/creds/prod"),
    ];

    #[test]
    fn the_highest_priority_pattern_decides_as_in_vault_s_documented_examples() {
        for (loser, winner, path) in VAULT_PRIORITY_EXAMPLES {
            assert!(matches(loser, path) && matches(winner, path), "both {loser} and {winner} match {path}");
            // Both ways round, so neither the capability nor the order of the rules decides.
            for (lost, won) in [("read", "update"), ("update", "read")] {
                let policy = format!(
                    "path \"{loser}\" {{ capabilities = [\"{lost}\"] }}\npath \"{winner}\" {{ capabilities = [\"{won}\"] }}"
                );
                assert!(grants(&[&policy], path, won), "{winner} should beat {loser} on {path}");
                assert!(!grants(&[&policy], path, lost), "{loser} should lose to {winner} on {path}");
            }
        }
    }

    #[test]
    fn a_deny_on_aws_plus_prod_beats_a_read_on_aws_star() {
        let broad = r#"path "aws/*" { capabilities = ["read"] }"#;
        let deny = r#"path "aws/+/prod" { capabilities = ["deny"] }"#;
        let both = format!("{broad}\n{deny}");
        for policies in [vec![broad, deny], vec![deny, broad], vec![both.as_str()]] {
            assert!(!grants(&policies, "aws/creds/prod", "read"), "{policies:?}");
            assert!(grants(&policies, "aws/creds/dev", "read"), "{policies:?}");
            assert!(grants(&policies, "aws/creds/prod/x", "read"), "+/prod is not a prefix: {policies:?}");
        }
    }

    #[test]
    fn a_deny_on_aws_creds_star_beats_a_read_on_aws_plus_prod() {
        let policies =
            [r#"path "aws/creds/*" { capabilities = ["deny"] }"#, r#"path "aws/+/prod" { capabilities = ["read"] }"#];
        assert!(!grants(&policies, "aws/creds/prod", "read"));
        assert!(grants(&policies, "aws/roles/prod", "read"));
    }

    #[test]
    fn a_deny_decides_only_where_its_pattern_has_the_highest_priority() {
        let policies =
            [r#"path "aws/*" { capabilities = ["deny"] }"#, r#"path "aws/creds/+" { capabilities = ["read"] }"#];
        assert!(grants(&policies, "aws/creds/prod", "read"), "aws/creds/+ has its first wildcard later");
        assert!(!grants(&policies, "aws/roles/prod", "read"));
        let exact = [
            r#"path "aws/creds/prod" { capabilities = ["read"] }"#,
            r#"path "aws/+/prod" { capabilities = ["deny"] }"#,
        ];
        assert!(grants(&exact, "aws/creds/prod", "read"), "an exact path beats a + pattern");
    }

    #[test]
    fn one_pattern_in_several_policies_merges_its_capabilities_and_deny_wins() {
        let read = r#"path "aws/+/prod" { capabilities = ["read"] }"#;
        let update = r#"path "aws/+/prod" { capabilities = ["update"] }"#;
        let deny = r#"path "aws/+/prod" { capabilities = ["deny"] }"#;
        assert!(grants(&[read, update], "aws/creds/prod", "read"));
        assert!(grants(&[read, update], "aws/creds/prod", "update"));
        for policies in [[read, update, deny], [deny, read, update]] {
            assert!(!grants(&policies, "aws/creds/prod", "read"));
            assert!(!grants(&policies, "aws/creds/prod", "update"));
        }
    }

    #[test]
    fn sudo_is_a_capability_of_the_pattern_that_decides_the_path() {
        let policies = [
            r#"path "sys/leases/revoke-force/*" { capabilities = ["update", "sudo"] }"#,
            r#"path "sys/leases/revoke-force/aws/creds/prod" { capabilities = ["update"] }"#,
        ];
        assert!(grants(&policies, "sys/leases/revoke-force/aws/creds/dev", "sudo"));
        assert!(!grants(&policies, "sys/leases/revoke-force/aws/creds/prod", "sudo"), "the exact path wins");
        assert!(grants(&policies, "sys/leases/revoke-force/aws/creds/prod", "update"));
    }

    #[test]
    fn a_plus_followed_by_a_glob_is_refused_when_written_as_vault_refuses_it() {
        let refused = parse("p", r#"path "aws/+*" { capabilities = ["read"] }"#).unwrap_err();
        assert!(refused.to_string().contains("'+*' is forbidden"), "{refused}");
        assert!(parse("p", r#"path "aws/+/*" { capabilities = ["read"] }"#).is_ok());
    }
}
