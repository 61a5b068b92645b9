//! The keys a JWT method checks signatures with: PEM keys from its configuration, or a JWKS
//! (at `jwks_url`, or where an OIDC discovery document says). Hangar's own issuers (run
//! identity tokens at its address, the plugin identity under `/v1/identity/oidc/plugins`) are
//! answered from its identity key, with no network call; any other URL is fetched through the
//! VCS network guard (`HANGAR_VCS_ALLOWED_NETWORKS`) and cached for a while, with bounds.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::DecodingKey;
use serde_json::Value;

use super::config::JwtConfig;
use crate::identity;
use crate::state::AppState;

/// How long a fetched document is used, how soon an unknown key id may fetch it again, and how
/// long a failed fetch is answered from memory (so unauthenticated logins cannot make Hangar
/// call an issuer that is down, or slow, once each).
const FRESH_FOR: Duration = Duration::from_secs(300);
const REFETCH_AFTER: Duration = Duration::from_secs(10);
const FAILURE_KEPT_FOR: Duration = Duration::from_secs(30);
/// Most documents cached (a discovery document and a key set for each auth method a broker may
/// hold), and the largest one read.
const MAX_CACHED: usize = 2 * crate::broker::auth_mounts::MAX_AUTH_MOUNTS;
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// The keys, with the issuer a discovery document names (which a token must then name).
pub struct KeySet {
    pub keys: Vec<(Option<String>, DecodingKey)>,
    pub discovered_issuer: Option<String>,
}

pub fn from_pem(pem: &str) -> Result<DecodingKey, String> {
    let bytes = pem.as_bytes();
    DecodingKey::from_rsa_pem(bytes)
        .or_else(|_| DecodingKey::from_ec_pem(bytes))
        .or_else(|_| DecodingKey::from_ed_pem(bytes))
        .map_err(|_| "not a PEM RSA, EC or Ed25519 public key".to_owned())
}

/// The keys `config` names; `refresh` fetches a remote document again (an unknown key id).
pub async fn key_set(state: &AppState, config: &JwtConfig, refresh: bool) -> Result<KeySet, String> {
    if !config.jwt_validation_pubkeys.is_empty() {
        let keys: Result<Vec<_>, String> =
            config.jwt_validation_pubkeys.iter().map(|pem| from_pem(pem).map(|k| (None, k))).collect();
        return Ok(KeySet { keys: keys?, discovered_issuer: None });
    }
    let (jwks_url, discovered_issuer) = match (&config.jwks_url, &config.oidc_discovery_url) {
        (Some(url), _) => (url.clone(), None),
        (None, Some(url)) => {
            let discovery_url = format!("{}/.well-known/openid-configuration", url.trim_end_matches('/'));
            let document = document(state, &discovery_url, refresh).await?;
            let issuer = document["issuer"].as_str().unwrap_or_default();
            if issuer != url {
                return Err(format!("issuer did not match the returned issuer, expected {url:?} got {issuer:?}"));
            }
            let jwks = document["jwks_uri"].as_str().ok_or("the discovery document names no jwks_uri")?;
            (jwks.to_owned(), Some(issuer.to_owned()))
        }
        (None, None) => return Err("no key source is configured".into()),
    };
    let set: JwkSet = serde_json::from_value(document(state, &jwks_url, refresh).await?)
        .map_err(|e| format!("the key set at {jwks_url} is not a JWKS: {e}"))?;
    let keys = set.keys.iter().filter_map(|jwk| Some((jwk.common.key_id.clone(), DecodingKey::from_jwk(jwk).ok()?)));
    Ok(KeySet { keys: keys.collect(), discovered_issuer })
}

/// A discovery document or key set: Hangar's own from its identity key, others fetched.
async fn document(state: &AppState, url: &str, refresh: bool) -> Result<Value, String> {
    if let Some(own) = own_document(state, url).await? {
        return Ok(own);
    }
    let now = Instant::now();
    if let Some((at, cached)) = CACHE.lock().expect("cache lock").get(url) {
        let kept_for = match (cached, refresh) {
            (Err(_), _) => FAILURE_KEPT_FOR,
            (Ok(_), true) => REFETCH_AFTER,
            (Ok(_), false) => FRESH_FOR,
        };
        if now.duration_since(*at) < kept_for {
            return cached.clone();
        }
    }
    let fetched = state.vcs.get_json(url, MAX_DOCUMENT_BYTES).await.map_err(|e| {
        tracing::warn!(url, error = %e, "JWT auth: an issuer's document could not be fetched");
        "the issuer's keys could not be fetched".to_owned()
    });
    let mut cache = CACHE.lock().expect("cache lock");
    if cache.len() >= MAX_CACHED && !cache.contains_key(url) {
        // The oldest goes: the others' issuers are not fetched again for it.
        if let Some(oldest) = cache.iter().min_by_key(|(_, (at, _))| *at).map(|(url, _)| url.clone()) {
            cache.remove(&oldest);
        }
    }
    cache.insert(url.to_owned(), (now, fetched.clone()));
    fetched
}

/// Documents by URL: each when fetched, and what the fetch gave (a failure too, briefly).
type Cache = HashMap<String, (Instant, Result<Value, String>)>;

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Default::default);

/// The documents Hangar publishes itself, when `url` is one of them: at its configured address
/// only (`HANGAR_PUBLIC_URL`), never at one a request's `Host` names, which would let a caller
/// have any issuer answered with Hangar's keys.
async fn own_document(state: &AppState, url: &str) -> Result<Option<Value>, String> {
    let Some(base) = state.config.public_url.as_deref() else { return Ok(None) };
    let base = base.trim_end_matches('/');
    let Some(path) = url.strip_prefix(base) else { return Ok(None) };
    let plugins = identity::ISSUER_PATH;
    let Some(signer) = state.identity.as_ref() else { return Ok(None) };
    let jwks = || async { identity::jwks(signer.as_ref()).await.map(Some).map_err(|e| e.to_string()) };
    match path {
        "/.well-known/openid-configuration" => {
            Ok(Some(identity::discovery_document(base, &format!("{base}/.well-known/jwks"))))
        }
        "/.well-known/jwks" => jwks().await,
        p if p == format!("{plugins}/.well-known/openid-configuration") => Ok(Some(identity::discovery(base))),
        p if p == format!("{plugins}/.well-known/keys") => jwks().await,
        _ => Ok(None),
    }
}
