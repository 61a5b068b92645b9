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

/// How long a fetched document is used, and how soon an unknown key id may fetch it again.
const FRESH_FOR: Duration = Duration::from_secs(300);
const REFETCH_AFTER: Duration = Duration::from_secs(10);
/// Most documents cached, and the largest one read.
const MAX_CACHED: usize = 64;
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
pub async fn key_set(state: &AppState, base_url: &str, config: &JwtConfig, refresh: bool) -> Result<KeySet, String> {
    if !config.jwt_validation_pubkeys.is_empty() {
        let keys: Result<Vec<_>, String> =
            config.jwt_validation_pubkeys.iter().map(|pem| from_pem(pem).map(|k| (None, k))).collect();
        return Ok(KeySet { keys: keys?, discovered_issuer: None });
    }
    let (jwks_url, discovered_issuer) = match (&config.jwks_url, &config.oidc_discovery_url) {
        (Some(url), _) => (url.clone(), None),
        (None, Some(url)) => {
            let discovery_url = format!("{}/.well-known/openid-configuration", url.trim_end_matches('/'));
            let document = document(state, base_url, &discovery_url, refresh).await?;
            let issuer = document["issuer"].as_str().unwrap_or_default();
            if issuer != url {
                return Err(format!("issuer did not match the returned issuer, expected {url:?} got {issuer:?}"));
            }
            let jwks = document["jwks_uri"].as_str().ok_or("the discovery document names no jwks_uri")?;
            (jwks.to_owned(), Some(issuer.to_owned()))
        }
        (None, None) => return Err("no key source is configured".into()),
    };
    let set: JwkSet = serde_json::from_value(document(state, base_url, &jwks_url, refresh).await?)
        .map_err(|e| format!("the key set at {jwks_url} is not a JWKS: {e}"))?;
    let keys = set.keys.iter().filter_map(|jwk| Some((jwk.common.key_id.clone(), DecodingKey::from_jwk(jwk).ok()?)));
    Ok(KeySet { keys: keys.collect(), discovered_issuer })
}

/// A discovery document or key set: Hangar's own from its identity key, others fetched.
async fn document(state: &AppState, base_url: &str, url: &str, refresh: bool) -> Result<Value, String> {
    if let Some(own) = own_document(state, base_url, url).await? {
        return Ok(own);
    }
    let now = Instant::now();
    if let Some((at, cached)) = CACHE.lock().expect("cache lock").get(url) {
        let fresh = now.duration_since(*at) < if refresh { REFETCH_AFTER } else { FRESH_FOR };
        if fresh {
            return Ok(cached.clone());
        }
    }
    let fetched = state.vcs.get_json(url, MAX_DOCUMENT_BYTES).await.map_err(|e| format!("fetching {url}: {e}"))?;
    let mut cache = CACHE.lock().expect("cache lock");
    if cache.len() >= MAX_CACHED {
        cache.retain(|_, (at, _)| now.duration_since(*at) < FRESH_FOR);
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
    }
    cache.insert(url.to_owned(), (now, fetched.clone()));
    Ok(fetched)
}

static CACHE: LazyLock<Mutex<HashMap<String, (Instant, Value)>>> = LazyLock::new(Default::default);

/// The documents Hangar publishes itself, when `url` is one of them.
async fn own_document(state: &AppState, base_url: &str, url: &str) -> Result<Option<Value>, String> {
    let base = base_url.trim_end_matches('/');
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
