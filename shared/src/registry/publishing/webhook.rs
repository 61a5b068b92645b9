//! Webhook deliveries (`POST /webhooks/vcs/{uuid}`): a pushed semantic-version tag of a
//! tag-based module becomes a version, fetched by the job.

use axum::http::HeaderMap;

use super::sync::{add_fetched_version, tag_version};
use crate::api::Field;
use crate::registry::error::{RegistryError, Result};
use crate::registry::modules::{load, modify};
use crate::state::AppState;
use crate::store::{keys, Key};
use crate::vcs::{self, ServiceProvider};

/// The largest delivery the route reads (413 above it, before anything is checked). A tag push
/// is a few KiB; the cap keeps an unauthenticated caller from making Hangar hold and hash more.
pub const MAX_DELIVERY_BYTES: usize = 1024 * 1024;

/// A webhook's id as [`publish`](super::publish) makes it: 32 lowercase letters and digits.
const UUID_LEN: usize = 32;

/// Verifies a delivery against the module's webhook secret and records the version it names.
/// Returns whether it did anything (a replayed delivery does not).
pub async fn delivery(state: &AppState, uuid: &str, headers: &HeaderMap, body: &[u8]) -> Result<bool> {
    let well_formed = uuid.len() == UUID_LEN && uuid.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !well_formed {
        return Err(RegistryError::NotFound);
    }
    let store = state.store.as_ref();
    let Some(pointer) = store.get(&keys::vcs_webhook(uuid)).await? else { return Err(RegistryError::NotFound) };
    let module_key: Key = pointer.parse()?;
    let module = load(store, &module_key).await?;
    let repo = module.vcs_repo.clone().ok_or(RegistryError::NotFound)?;
    let secret = state.sealer.unseal(&repo.sealed_webhook_secret).await?;
    let kind = ServiceProvider::parse(&repo.service_provider).unwrap_or(ServiceProvider::GitHub);
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
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
    let Some(version) = tag_version(&tag) else { return Ok(false) };
    if !module.publishes_from_tags() {
        return Ok(false);
    }
    let commit = (!sha.is_empty()).then_some(sha);
    let (_, added) = modify(store, &module_key, |module| {
        let added = add_fetched_version(module, &version, &tag, commit.clone())?;
        Ok(added.map_or((Vec::new(), false), |(_, writes)| (writes, true)))
    })
    .await?;
    state.work.notify_one();
    Ok(added)
}
