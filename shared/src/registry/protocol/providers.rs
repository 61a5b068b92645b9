//! `/api/registry/v1/providers`: the organization's private providers as the provider registry
//! protocol serves them (namespace = the organization's name), with only what checks out: a
//! version is listed with the platforms whose archive, shasum and signed sums agree, and a
//! download names the version's signing key. The files are fetched by Terraform without a token,
//! through links to the object store (pre-signed in S3, signed by dev-server).
//!
//! Each answer reads the caller's token (with the organization's name marker) and one batch more:
//! the organization with the provider and its version index (`versions`), or with the version
//! (`download`), whatever the number of versions. When the organization's id is known before the
//! token is read (a team token names it; this process may have read under it before), that batch
//! is read with the token's ([`ReadPlan`]), and the answer costs one call.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::handler::Handler;
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde_json::{json, Value};

use super::error::{ProtocolError, Result};
use crate::accounts::access;
use crate::api::ApiError;
use crate::auth::{Permission, ReadPlan, Scoped};
use crate::blobs::ObjectId;
use crate::registry::providers::{self, ProviderVersion};
use crate::state::AppState;
use crate::store::keys;

const PREFIX: &str = "/api/registry/v1/providers";
/// How long the files' links stay valid: long enough for a slow `terraform init`.
const DOWNLOAD_LINK_VALIDITY: Duration = Duration::from_secs(600);

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(&format!("{PREFIX}/{{namespace}}/{{name}}/versions"), get(versions.layer(Extension(VERSIONS))))
        .route(
            &format!("{PREFIX}/{{namespace}}/{{name}}/{{version}}/download/{{os}}/{{arch}}"),
            get(download.layer(Extension(DOWNLOAD))),
        )
}

/// What `versions` reads once it knows the organization's id: the provider and its index. With
/// the organization's id known ahead (a team token's, or one this process has read under
/// before), the whole read is the token's batch.
const VERSIONS: ReadPlan = ReadPlan(|org_id, param| {
    let name = param("name")?;
    Some(vec![keys::registry_provider(org_id, None, &name), keys::provider_version_index(org_id, &name)])
});

/// What `download` reads once it knows the organization's id: the version, its platforms inside.
const DOWNLOAD: ReadPlan =
    ReadPlan(|org_id, param| Some(vec![keys::provider_version(org_id, &param("name")?, &param("version")?)]));

type ScopedCaller = std::result::Result<Scoped, ApiError>;

async fn versions(
    State(state): State<AppState>,
    caller: ScopedCaller,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<Value>> {
    let caller = caller?;
    let store = caller.store(&state.store);
    let store = store.as_ref();
    let located = access::locate(store, &caller.principal, &namespace, caller.name.as_ref()).await?;
    let org_id = located.org_id();
    let wanted = [keys::registry_provider(org_id, None, &name), keys::provider_version_index(org_id, &name)];
    let (org, found) =
        access::authorized_at(store, &caller.principal, &namespace, &located, Permission::ReadRegistry, &wanted)
            .await?;
    state.org_hints.learn(&namespace, &org.id);
    if found[0].is_none() {
        return Err(ProtocolError::NotFound);
    }
    let entries = providers::index_entries(store, &org.id, &name, found[1].as_ref()).await?;
    let versions: Vec<Value> = entries
        .iter()
        .filter(|entry| !entry.platforms.is_empty())
        .map(|entry| {
            let platforms: Vec<Value> =
                entry.platforms.iter().map(|[os, arch]| json!({ "os": os, "arch": arch })).collect();
            json!({ "version": entry.version, "protocols": entry.protocols, "platforms": platforms })
        })
        .collect();
    Ok(Json(json!({ "id": format!("{namespace}/{name}"), "versions": versions, "warnings": null })))
}

async fn download(
    State(state): State<AppState>,
    caller: ScopedCaller,
    Path((namespace, name, version, os, arch)): Path<(String, String, String, String, String)>,
) -> Result<Json<Value>> {
    let caller = caller?;
    let store = caller.store(&state.store);
    let store = store.as_ref();
    let located = access::locate(store, &caller.principal, &namespace, caller.name.as_ref()).await?;
    let wanted = [keys::provider_version(located.org_id(), &name, &version)];
    let (org, mut found) =
        access::authorized_at(store, &caller.principal, &namespace, &located, Permission::ReadRegistry, &wanted)
            .await?;
    state.org_hints.learn(&namespace, &org.id);
    let stored: ProviderVersion = found.remove(0).ok_or(ProtocolError::NotFound)?.parse()?;
    let platform = stored.platform(&os, &arch).filter(|p| stored.serves(p)).ok_or(ProtocolError::NotFound)?;
    let objects = (platform.binary.stored(), stored.shasums.stored(), stored.shasums_sig.stored());
    let (Some(binary), Some(sums), Some(signature)) = objects else { return Err(ProtocolError::NotFound) };
    let link = |id: ObjectId| {
        let blobs = state.blobs.clone();
        async move { blobs.download_url(&id, DOWNLOAD_LINK_VALIDITY).await }
    };
    let (download, shasums, signature) = futures::try_join!(link(binary), link(sums), link(signature))?;
    Ok(Json(json!({
        "protocols": stored.protocols,
        "os": platform.os,
        "arch": platform.arch,
        "filename": platform.filename,
        "download_url": download,
        "shasums_url": shasums,
        "shasums_signature_url": signature,
        "shasum": platform.shasum,
        "signing_keys": {
            "gpg_public_keys": [{
                "key_id": stored.key_id,
                "ascii_armor": stored.signing_key,
                // Empty: a trust signature makes Terraform look for HashiCorp's partner key.
                "trust_signature": "",
                "source": "",
                "source_url": null,
            }],
        },
    })))
}
