//! Ingest: what happens when an archive lands on a version's upload link (`upload/<id>`). The
//! S3 ObjectCreated event (function `registry-ingest`, or dev-server on DynamoDB polling the
//! bucket's event queue) and dev-server's local PUT both call [`object_created`], after the
//! upload and off its request.
//!
//! The upload's size is checked before anything is read; the upload is then copied to an
//! archive of its own (`object/<id>`), and that copy is inspected as a stream and, if sound,
//! served: a later PUT on the still-valid upload link can change nothing that was inspected.
//! Either way the upload is removed and the version leaves `pending` in one conditional write:
//! there is no partial state to see.

use serde::Serialize;

use super::error::{RegistryError, Result};
use super::modules::{modify_or_refused, Refused};
use super::status::{FAILED, OK, PENDING};
use super::version_index;
use super::versions::{ModuleVersion, PendingUpload};
use crate::archive::{self, ArchiveError, ArchiveSummary};
use crate::blobs::{BlobError, ObjectId};
use crate::state::AppState;
use crate::store::{keys, Condition, ItemStore, Write};

/// How much of a README a version keeps (items must stay well under DynamoDB's 400 KB).
const README_KEPT: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum IngestOutcome {
    /// The version is `ok`.
    Ingested { version_id: String },
    /// The version is `reg_ingress_failed`, for this reason.
    Failed { version_id: String, reason: String },
    /// No pending version waits for this object (already ingested, deleted, or not an upload).
    Ignored,
}

/// Whether an upload to this object would be ingested: a version created through the API
/// waits for it. A repository's version takes no upload, even on a link issued before versions
/// from repositories stopped getting one: its archive is the repository's, fetched by the job.
pub async fn awaits_upload(store: &dyn ItemStore, object: &ObjectId) -> Result<bool> {
    let waiting = pending(store, object).await?;
    Ok(waiting.is_some_and(|(_, version)| version.source == super::versions::API_SOURCE))
}

async fn pending(store: &dyn ItemStore, object: &ObjectId) -> Result<Option<(PendingUpload, ModuleVersion)>> {
    let Some(item) = store.get(&keys::pending_upload(object.as_str())).await? else { return Ok(None) };
    let upload: PendingUpload = item.parse()?;
    let Some(version) = store.get(&upload.version).await? else { return Ok(None) };
    let version: ModuleVersion = version.parse()?;
    Ok((version.status == PENDING).then_some((upload, version)))
}

/// Inspects the archive uploaded as `object` and settles its version.
pub async fn object_created(state: &AppState, object: &ObjectId) -> Result<IngestOutcome> {
    let Some((upload, version)) = pending(state.store.as_ref(), object).await? else {
        return Ok(IngestOutcome::Ignored);
    };
    let limits = state.config.archive_limits;
    let size = match state.blobs.upload_size(object).await {
        Ok(size) => size,
        Err(BlobError::NotFound) => return Ok(IngestOutcome::Ignored),
        Err(e) => return Err(e.into()),
    };
    // The upload is copied to the version's own object first, and the copy is what is inspected
    // and served: another PUT on the still-valid link can replace the upload, never the copy,
    // so the bytes served are the bytes inspected.
    let archive = ObjectId::generate();
    let inspected = if size > limits.max_compressed_bytes {
        Err(ArchiveError::CompressedTooLarge { limit: limits.max_compressed_bytes })
    } else {
        match state.blobs.copy_upload(object, &archive).await {
            Ok(()) => archive::inspect(state.blobs.open(&archive).await?.into_blocking(), limits).await,
            Err(BlobError::NotFound) => return Ok(IngestOutcome::Ignored),
            Err(e) => return Err(e.into()),
        }
    };
    if inspected.is_err() {
        let _ = state.blobs.delete(&archive).await;
    }
    let archive = inspected.is_ok().then_some(archive);
    let result = inspected.as_ref().map_err(ToString::to_string);
    let settled = settle(state.store.as_ref(), object, &upload, &version, result, archive.as_ref()).await;
    if settled.is_err() {
        if let Some(archive) = &archive {
            let _ = state.blobs.delete(archive).await;
        }
    }
    let outcome = match settled {
        // The version or its module was deleted while the archive was inspected.
        Err(RegistryError::NotFound) => IngestOutcome::Ignored,
        other => other?,
    };
    if let Err(e) = state.blobs.delete(object).await {
        tracing::warn!(object = %object, error = %e, "uploaded object not removed after ingest");
    }
    outcome.log(&version.id);
    Ok(outcome)
}

impl IngestOutcome {
    /// One line, in words, at the level the outcome deserves.
    pub fn log(&self, version: &str) {
        match self {
            IngestOutcome::Ingested { .. } => tracing::info!(version, "version ingested: its archive is served"),
            IngestOutcome::Failed { reason, .. } => tracing::warn!(version, reason = %reason, "version failed ingest"),
            IngestOutcome::Ignored => tracing::debug!(version, "upload ignored: no version waits for it"),
        }
    }
}

/// Settles the version waiting for `object` as failed, for a reason found before ingest could
/// run (an archive the provider would not give).
pub async fn fail(store: &dyn ItemStore, object: &ObjectId, reason: &str) -> Result<()> {
    let Some((upload, version)) = pending(store, object).await? else { return Ok(()) };
    match settle(store, object, &upload, &version, Err(reason.to_owned()), None).await {
        Err(RegistryError::NotFound) | Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Moves the version out of `pending` (only if it still is) and records it on its module.
async fn settle(
    store: &dyn ItemStore,
    object: &ObjectId,
    upload: &PendingUpload,
    version: &ModuleVersion,
    inspected: std::result::Result<&ArchiveSummary, String>,
    archive: Option<&ObjectId>,
) -> Result<IngestOutcome> {
    let mut settled = version.clone();
    let metadata_item = match &inspected {
        Ok(summary) => Some(super::metadata::item(version, &summary.metadata)?),
        Err(_) => None,
    };
    settled.upload = None;
    settled.updated_at = crate::api::timestamp(chrono::Utc::now());
    let outcome = match inspected {
        Ok(summary) => {
            settled.status = OK.into();
            settled.archive = archive.map(ToString::to_string);
            settled.sha256 = Some(summary.sha256.clone());
            settled.root_module_files = summary.root_module_files.clone();
            settled.readme = summary.readme.as_deref().map(|readme| truncate(readme, README_KEPT));
            IngestOutcome::Ingested { version_id: version.id.clone() }
        }
        Err(reason) => {
            settled.status = FAILED.into();
            settled.error = Some(reason.clone());
            IngestOutcome::Failed { version_id: version.id.clone(), reason }
        }
    };
    let version_item = settled.to_item()?;
    let status_item = settled.status_item()?;
    let index = version_index::key(&settled.org_id, &settled.name, &settled.provider);
    let index_write = version_index::change(index, Some(&version.status_entry()), &settled.status_entry())?;

    let settling = modify_or_refused(store, &upload.module, |module, transaction| {
        if settled.status == OK {
            module.status = "setup_complete".into();
        }
        // The module's description is its latest version's, whichever version landed last.
        module.offer(&settled.status_entry(), settled.description());
        let still_pending =
            transaction.add(Write::Put { item: version_item.clone(), condition: Condition::equals("status", PENDING) });
        transaction.add(Write::Delete { key: keys::pending_upload(object.as_str()), condition: Condition::Always });
        transaction.add(Write::Put { item: status_item.clone(), condition: Condition::Always });
        transaction
            .extend(metadata_item.iter().map(|item| Write::Put { item: item.clone(), condition: Condition::Always }));
        transaction.add(index_write.clone());
        Ok(still_pending)
    })
    .await?;
    match settling {
        Ok(_) => Ok(outcome),
        // The version was deleted or settled by someone else meanwhile.
        Err(Refused { error, named: still_pending }) if error.failed_on(still_pending) => Err(RegistryError::NotFound),
        Err(refused) => Err(refused.error.into()),
    }
}

fn truncate(text: &str, max: usize) -> String {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
