//! `auth/<path>/login`: a JWT traded for a broker token, checked as Vault's JWT method checks
//! it, in its order and with its messages: the signature against the configured keys (never
//! `alg: none`), the issuer, subject and audiences, the times with the role's leeways, the
//! user claim, then the bound claims (strings or globs).

use std::collections::BTreeMap;

use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::config::{self, JwtConfig};
use super::keys;
use super::roles::{self, JwtRole};
use crate::broker::auth_mounts::AuthMount;
use crate::broker::error::{BrokerError, Result};
use crate::broker::tokens::{self, LoginToken, ServiceToken};
use crate::state::AppState;

/// Most bytes of a JWT read.
const MAX_JWT_BYTES: usize = 16 * 1024;

/// Logs in through `method` with the request's `role` and `jwt`.
pub async fn login(state: &AppState, method: &AuthMount, body: &Map<String, Value>) -> Result<(String, ServiceToken)> {
    let store = state.store.as_ref();
    let config =
        config::load(store, &method.uuid).await?.ok_or_else(|| BrokerError::invalid("could not load configuration"))?;
    let role_name = config::text(body, "role")?.or_else(|| config.default_role.clone());
    let role_name = role_name.ok_or_else(|| BrokerError::invalid("missing role"))?.to_lowercase();
    let role = roles::load(store, &method.uuid, &role_name)
        .await?
        .ok_or_else(|| BrokerError::invalid(format!("role {role_name:?} could not be found")))?;
    let jwt = config::text(body, "jwt")?.ok_or_else(|| BrokerError::invalid("missing token"))?;
    if jwt.len() > MAX_JWT_BYTES {
        return Err(BrokerError::invalid(format!("error validating token: the token is over {MAX_JWT_BYTES} bytes")));
    }
    let claims = verified_claims(state, &config, &role, &jwt)
        .await
        .map_err(|why| BrokerError::invalid(format!("error validating token: {why}")))?;
    let has_audience = match claims.get("aud") {
        Some(Value::String(aud)) => !aud.is_empty(),
        Some(Value::Array(auds)) => !auds.is_empty(),
        _ => false,
    };
    if role.bound_audiences.is_empty() && has_audience {
        return Err(BrokerError::invalid("audience claim found in JWT but no audiences bound to the role"));
    }
    let user = match claim(&claims, &role.user_claim) {
        None => return Err(BrokerError::invalid(format!("claim {:?} not found in token", role.user_claim))),
        Some(value) => as_text(value).ok_or_else(|| {
            BrokerError::invalid(format!("claim {:?} could not be converted to string", role.user_claim))
        })?,
    };
    let mut meta = BTreeMap::new();
    for (source, destination) in &role.claim_mappings {
        if let Some(value) = claim(&claims, source) {
            let text = as_text(value)
                .ok_or_else(|| BrokerError::invalid(format!("error converting claim '{source}' to string")))?;
            meta.insert(destination.clone(), text);
        }
    }
    meta.insert("role".into(), role.name.clone());
    check_bound_claims(&role, &claims)
        .map_err(|why| BrokerError::invalid(format!("error validating claims: {why}")))?;
    let grant = LoginToken {
        path: format!("auth/{}/login", method.path),
        auth_method: method.uuid.clone(),
        policies: role.token_policies.clone(),
        no_default_policy: role.token_no_default_policy,
        display_name: display_name(&method.path, &user),
        meta,
        ttl: role.token_ttl,
        max_ttl: role.token_max_ttl,
        explicit_max_ttl: role.token_explicit_max_ttl,
        num_uses: role.token_num_uses,
        period: role.token_period,
    };
    tokens::login(store, grant).await
}

/// The token's claims, once its signature, issuer, subject, audience and times hold.
async fn verified_claims(
    state: &AppState,
    config: &JwtConfig,
    role: &JwtRole,
    jwt: &str,
) -> std::result::Result<Map<String, Value>, String> {
    // `none` and symmetric algorithms are not in jsonwebtoken's asymmetric families: refused here.
    let header = jsonwebtoken::decode_header(jwt).map_err(|e| format!("oidc: malformed jwt: {e}"))?;
    let asymmetric = !matches!(header.alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512);
    let alg_name = format!("{:?}", header.alg);
    let allowed = config.jwt_supported_algs.is_empty() || config.jwt_supported_algs.contains(&alg_name);
    if !asymmetric || !allowed {
        return Err("invalid algorithm (alg) header parameter: token signed with unexpected algorithm".into());
    }
    let mut validation = Validation::new(header.alg);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let signature_failed = || "error verifying token signature: failed to verify id token signature".to_owned();
    let mut verified = None;
    for refresh in [false, true] {
        let set =
            keys::key_set(state, config, refresh).await.map_err(|e| format!("error verifying token signature: {e}"))?;
        let candidates = set.keys.iter().filter(|(kid, _)| header.kid.is_none() || kid.is_none() || *kid == header.kid);
        for (_, key) in candidates {
            if let Ok(data) = jsonwebtoken::decode::<Map<String, Value>>(jwt, key, &validation) {
                verified = Some((data.claims, set.discovered_issuer.clone()));
                break;
            }
        }
        // A key id it has not seen: the issuer may have rotated; fetch its keys once more.
        let known_kid = header.kid.as_ref().is_some_and(|kid| set.keys.iter().any(|(k, _)| k.as_ref() == Some(kid)));
        if verified.is_some() || known_kid || !config.jwt_validation_pubkeys.is_empty() {
            break;
        }
    }
    let (claims, discovered_issuer) = verified.ok_or_else(signature_failed)?;
    let issuer = claims.get("iss").and_then(Value::as_str).unwrap_or_default();
    let expected_issuer = config.bound_issuer.as_deref().or(discovered_issuer.as_deref());
    if expected_issuer.is_some_and(|expected| expected != issuer) {
        return Err("invalid issuer (iss) claim".into());
    }
    if !role.bound_subject.is_empty() && claims.get("sub").and_then(Value::as_str) != Some(role.bound_subject.as_str())
    {
        return Err("invalid subject (sub) claim".into());
    }
    if !role.bound_audiences.is_empty() {
        let audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(aud)) => vec![aud.as_str()],
            Some(Value::Array(auds)) => auds.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !audiences.iter().any(|aud| role.bound_audiences.iter().any(|bound| bound == aud)) {
            return Err("invalid audience (aud) claim: audience claim does not match any expected audience".into());
        }
    }
    check_times(role, &claims, chrono::Utc::now().timestamp())?;
    Ok(claims)
}

/// `exp`, `nbf` and `iat` with the role's clock skew (60 s by default); a missing `exp` or
/// `nbf` is derived with the expiration and not-before leeways (150 s by default), as Vault's.
fn check_times(role: &JwtRole, claims: &Map<String, Value>, now: i64) -> std::result::Result<(), String> {
    let leeway = |set: i64, default: i64| match set {
        0 => default,
        n if n < 0 => 0,
        n => n,
    };
    let skew = leeway(role.clock_skew_leeway, 60);
    let time = |name: &str| claims.get(name).and_then(Value::as_i64);
    let (iat, nbf, exp) = (time("iat"), time("nbf"), time("exp"));
    if iat.is_none() && nbf.is_none() && exp.is_none() {
        return Err("no issued at (iat), not before (nbf), or expiration time (exp) claims in token".into());
    }
    let exp = exp.or_else(|| iat.max(nbf).map(|at| at.saturating_add(leeway(role.expiration_leeway, 150))));
    let nbf = nbf.or(iat).or_else(|| exp.map(|at| at.saturating_sub(leeway(role.not_before_leeway, 150))));
    if nbf.is_some_and(|nbf| now.saturating_add(skew) < nbf) {
        return Err("invalid not before (nbf) claim: token not yet valid".into());
    }
    if exp.is_some_and(|exp| now.saturating_sub(skew) > exp) {
        return Err("invalid expiration time (exp) claim: token is expired".into());
    }
    if iat.is_some_and(|iat| now.saturating_add(skew) < iat) {
        return Err("invalid issued at (iat) claim: token issued in the future".into());
    }
    Ok(())
}

/// Every bound claim matches one of its values (any element of a list-valued claim).
fn check_bound_claims(role: &JwtRole, claims: &Map<String, Value>) -> std::result::Result<(), String> {
    for (name, expected) in &role.bound_claims {
        let Some(actual) = claim(claims, name) else { return Err(format!("claim {name:?} is missing")) };
        let actual: Vec<Option<String>> = match actual {
            Value::Array(items) => items.iter().map(as_text).collect(),
            other => vec![as_text(other)],
        };
        let matched = actual.iter().flatten().any(|value| {
            expected.iter().any(|pattern| if role.glob { glob(pattern, value) } else { pattern == value })
        });
        if !matched {
            return Err(format!("claim {name:?} does not match any associated bound claim values"));
        }
    }
    Ok(())
}

/// A claim by name, or by JSON pointer when the name starts with `/`.
fn claim<'c>(claims: &'c Map<String, Value>, name: &str) -> Option<&'c Value> {
    if name.starts_with('/') {
        let pointer = name.split('/').skip(1).map(|p| p.replace("~1", "/").replace("~0", "~")).collect::<Vec<_>>();
        let mut at = claims.get(pointer.first()?)?;
        for part in &pointer[1..] {
            at = match at {
                Value::Object(map) => map.get(part)?,
                Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        return Some(at);
    }
    claims.get(name)
}

fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.as_i64().map_or_else(|| n.to_string(), |i| i.to_string())),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// go-glob's match: `*` stands for any run of characters (`:` and `/` too); nothing else is
/// special.
fn glob(pattern: &str, subject: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == subject;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !subject.starts_with(first) || !subject[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &subject[first.len()..subject.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    subject.len() >= first.len() + last.len()
}

/// The token's display name: the method's path and the user claim's value, as Vault's.
fn display_name(path: &str, user: &str) -> String {
    let name = format!("{}-{user}", path.replace('/', "-"));
    name.chars().take(128).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_go_glob_does() {
        let sub = "organization:acme:project:Default Project:workspace:app:run_phase:plan";
        assert!(glob("organization:acme:project:*:workspace:app:run_phase:*", sub));
        assert!(glob("*", sub));
        assert!(!glob("organization:acme:project:*:workspace:other:run_phase:*", sub));
        assert!(!glob("organization:acme", sub), "no star is equality");
        assert!(glob("a*a", "aa") && !glob("ab*ba", "aba"), "prefix and suffix may not overlap");
    }

    #[test]
    fn times_hold_with_the_clock_skew_leeway() {
        let role = JwtRole::default();
        let claims = |exp: i64| serde_json::json!({"iat": 1000, "nbf": 1000, "exp": exp}).as_object().unwrap().clone();
        assert!(check_times(&role, &claims(2000), 1500).is_ok());
        assert!(check_times(&role, &claims(2000), 2060).is_ok(), "60 seconds of skew");
        assert!(check_times(&role, &claims(2000), 2061).unwrap_err().contains("expired"));
        assert!(check_times(&role, &claims(2000), 939).unwrap_err().contains("not yet valid"));
        let none = serde_json::json!({}).as_object().unwrap().clone();
        assert!(check_times(&role, &none, 1500).is_err());
    }
}
