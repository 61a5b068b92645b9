//! Webhook deliveries (`POST /webhooks/vcs/{uuid}`): a pushed tag becomes a version, fetched by
//! the job, of each tag-based module of the repository whose tag prefix it matches (the modules
//! of a monorepo share one webhook).

use axum::http::HeaderMap;

use super::monorepo::tag_version;
use super::publish::Hook;
use super::sync::add_fetched_version;
use crate::api::Field;
use crate::registry::error::{RegistryError, Result};
use crate::registry::modules::{load, Module};
use crate::seal::SealContext;
use crate::state::AppState;
use crate::store::{keys, ItemStore};
use crate::vcs::{self, ServiceProvider};

/// The largest delivery the route reads (413 above it, before anything is checked). A tag push
/// is a few KiB; the cap keeps an unauthenticated caller from making Hangar hold and hash more.
pub const MAX_DELIVERY_BYTES: usize = 1024 * 1024;

/// A webhook's id as [`publish`](super::publish) makes it: 32 lowercase letters and digits.
const UUID_LEN: usize = 32;

/// Whether a delivery's credential header could verify at all: a GitHub `sha256=` followed by a
/// SHA-256 in hex, or a non-empty GitLab token.
fn plausible(gitlab: bool, credential: Option<&str>) -> bool {
    let Some(credential) = credential.map(str::trim) else { return false };
    if gitlab {
        return !credential.is_empty();
    }
    credential.strip_prefix("sha256=").is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Unsealed webhook secrets, per warm instance, keyed by webhook id and sealed value (a new
/// secret is a new sealed value, so nothing stale is used), so that a stream of deliveries to one
/// webhook costs one KMS call per instance.
mod secrets {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    /// Entries kept at most; the cache starts over when full.
    const CAPACITY: usize = 1024;

    fn cache() -> &'static Mutex<HashMap<(String, String), String>> {
        static CACHE: OnceLock<Mutex<HashMap<(String, String), String>>> = OnceLock::new();
        CACHE.get_or_init(Default::default)
    }

    pub fn cached(uuid: &str, sealed: &str) -> Option<String> {
        let cache = cache().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.get(&(uuid.to_owned(), sealed.to_owned())).cloned()
    }

    pub fn keep(uuid: &str, sealed: &str, secret: &str) {
        let mut cache = cache().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if cache.len() >= CAPACITY {
            cache.clear();
        }
        cache.insert((uuid.to_owned(), sealed.to_owned()), secret.to_owned());
    }
}

/// The modules a webhook feeds: those of its repository, found through their index, and the
/// module it was made for (a webhook older than the index names only that one). A module
/// deleted since is not among them.
async fn modules_of(store: &dyn ItemStore, hook: &Hook) -> Result<Vec<Module>> {
    let mut modules = match &hook.repository {
        Some(repository) => repository.modules(store).await?,
        None => Vec::new(),
    };
    if !modules.iter().any(|m| m.key() == hook.module) {
        match load(store, &hook.module).await {
            Ok(module) => modules.push(module),
            Err(RegistryError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(modules)
}

/// Verifies a delivery against the repository's webhook secret and records the version it
/// names for each module it feeds. Returns whether it did anything (a replayed delivery does
/// not).
pub async fn delivery(state: &AppState, uuid: &str, headers: &HeaderMap, body: &[u8]) -> Result<bool> {
    let well_formed = uuid.len() == UUID_LEN && uuid.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !well_formed {
        return Err(RegistryError::NotFound);
    }
    let store = state.store.as_ref();
    let Some(pointer) = store.get(&keys::vcs_webhook(uuid)).await? else { return Err(RegistryError::NotFound) };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // A delivery that no provider could have signed is refused before its repository's modules
    // are read.
    if !plausible(false, header("x-hub-signature-256")) && !plausible(true, header("x-gitlab-token")) {
        return Err(RegistryError::Unauthorized);
    }
    let hook: Hook = pointer.parse()?;
    let modules = modules_of(store, &hook).await?;
    // Every module fed by this webhook holds the same sealed secret.
    let repo = modules.iter().find_map(|m| m.vcs_repo.clone().filter(|r| r.webhook_uuid == uuid));
    let repo = repo.ok_or(RegistryError::NotFound)?;
    let kind = ServiceProvider::parse(&repo.service_provider).unwrap_or(ServiceProvider::GitHub);
    // A delivery that cannot be authentic is refused before KMS is asked for anything.
    let credential = if kind.is_gitlab() { header("x-gitlab-token") } else { header("x-hub-signature-256") };
    if !plausible(kind.is_gitlab(), credential) {
        return Err(RegistryError::Unauthorized);
    }
    let secret = match secrets::cached(uuid, &repo.sealed_webhook_secret) {
        Some(secret) => secret,
        None => {
            let context = SealContext::webhook_secret(uuid);
            let secret = state.sealer.unseal_for(&context, &repo.sealed_webhook_secret).await?;
            secrets::keep(uuid, &repo.sealed_webhook_secret, &secret);
            secret
        }
    };
    let authentic = if kind.is_gitlab() {
        vcs::verify_gitlab_token(&secret, header("x-gitlab-token"))
    } else {
        vcs::verify_github_signature(&secret, body, header("x-hub-signature-256"))
    };
    if !authentic {
        return Err(RegistryError::Unauthorized);
    }
    let payload: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| RegistryError::invalid(Field::Document, format!("the delivery is not JSON: {e}")))?;
    let event = header("x-github-event").or_else(|| header("x-gitlab-event"));
    let Some((tag, sha)) = vcs::tag_from_delivery(&kind, event, &payload) else { return Ok(false) };
    let commit = (!sha.is_empty()).then_some(sha);
    let mut added = false;
    for module in modules.iter().filter(|m| m.publishes_from_tags()) {
        let prefix = module.vcs_repo.as_ref().map_or("", |r| r.tag_prefix.as_str());
        let Some(version) = tag_version(&tag, prefix) else { continue };
        match add_fetched_version(store, module, &version, &tag, commit.clone()).await {
            Ok(result) => added |= result.is_ok(),
            // Deleted since it was read.
            Err(RegistryError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    if added {
        state.work.notify_one();
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_credential_is_worth_unsealing_for() {
        let signature = format!("sha256={}", "ab".repeat(32));
        assert!(plausible(false, Some(&signature)));
        for bad in [None, Some(""), Some("sha256="), Some("sha1=abc"), Some("sha256=zz")] {
            assert!(!plausible(false, bad), "{bad:?}");
        }
        assert!(plausible(true, Some("token")));
        assert!(!plausible(true, None) && !plausible(true, Some(" ")));
    }

    #[test]
    fn a_secret_is_cached_by_webhook_and_sealed_value() {
        assert_eq!(secrets::cached("hook-a", "sealed-1"), None);
        secrets::keep("hook-a", "sealed-1", "secret");
        assert_eq!(secrets::cached("hook-a", "sealed-1").as_deref(), Some("secret"));
        assert_eq!(secrets::cached("hook-a", "sealed-2"), None, "a new sealed value is unsealed again");
        assert_eq!(secrets::cached("hook-b", "sealed-1"), None, "another webhook's is not used");
    }
}
