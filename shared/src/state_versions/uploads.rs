//! A pending version's state arriving on its upload link (`upload/<id>`). The S3 ObjectCreated
//! event (function `registry-ingest`, which takes every upload) and dev-server's local PUT both
//! call [`object_created`], off the upload's request.
//!
//! The upload is read whole, bounded by the state size limit, and checked against what the
//! version's writer declared (MD5, serial, lineage); its bytes, not the upload, are then sealed,
//! so a later PUT on the still-valid link changes nothing that was checked. The version becomes
//! current in one transaction conditioned on the workspace, or `discarded` if another state
//! became current meanwhile. A state refused leaves the version pending and its link open. The
//! upload is removed whatever the outcome.

use serde::Serialize;

use super::error::{Result, StateError};
use super::record::{StateVersion, Status};
use super::versions::{record, verify, AwaitedUpload, Declared, Form, Writer};
use crate::accounts::workspaces;
use crate::accounts::AccountsError;
use crate::blobs::{BlobError, ObjectId};
use crate::state::AppState;
use crate::store::{keys, pointer, upload_claims, Condition, ItemStore, Write};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Arrival {
    /// The state is the workspace's current.
    Finalized { version_id: String },
    /// Another state became current first: the version will never be.
    Discarded { version_id: String, reason: String },
    /// Not the state its writer declared: the version waits on.
    Refused { version_id: String, reason: String },
    /// The JSON form is stored beside the state.
    JsonStored { version_id: String },
    /// Its version is gone or settled.
    Ignored,
}

/// What waits for an upload to `object`, if a state version does.
async fn awaited(store: &dyn ItemStore, object: &ObjectId) -> Result<Option<(AwaitedUpload, Option<StateVersion>)>> {
    let Some(item) = store.get(&keys::pending_state_upload(object.as_str())).await? else { return Ok(None) };
    let awaited: AwaitedUpload = item.parse()?;
    let version = pointer::resolve(store, &awaited.version_id).await?;
    Ok(Some((awaited, version)))
}

fn wanted(form: Form, version: &StateVersion) -> bool {
    match form {
        Form::State => version.status == Status::Pending,
        Form::Json => version.status != Status::Discarded,
    }
}

/// Whether an upload to `object` is a state version's: `Some(wanted)`, or `None` if no state
/// version has a link to it (another family's upload).
pub async fn awaits_upload(store: &dyn ItemStore, object: &ObjectId) -> Result<Option<bool>> {
    let waiting = awaited(store, object).await?;
    Ok(waiting.map(|(awaited, version)| version.is_some_and(|version| wanted(awaited.form, &version))))
}

/// Settles what waits for the upload `object`: `None` if no state version has a link to it.
pub async fn object_created(state: &AppState, object: &ObjectId) -> Result<Option<Arrival>> {
    let store = state.store.as_ref();
    let Some((awaited, version)) = awaited(store, object).await? else { return Ok(None) };
    let arrival = match version.filter(|version| wanted(awaited.form, version)) {
        None => {
            store.delete(&keys::pending_state_upload(object.as_str()), Condition::Always).await?;
            Arrival::Ignored
        }
        Some(version) => match state.blobs.read_upload(object, state.config.max_state_bytes).await {
            // An event delivered again after the upload was settled and removed.
            Err(BlobError::NotFound) => return Ok(Some(Arrival::Ignored)),
            Err(e @ BlobError::TooLarge { .. }) => refuse(&version, e.to_string()),
            Err(e) => return Err(e.into()),
            Ok(body) => match awaited.form {
                Form::State => state_arrived(state, object, version, body).await?,
                Form::Json => json_arrived(state, object, &awaited, version, body).await?,
            },
        },
    };
    state.blobs.delete(object).await?;
    if let Arrival::Refused { .. } = arrival {
        // Only once the refused upload is gone: a link's next upload must not be taken with it.
        upload_claims::release(store, object.as_str()).await?;
    }
    Ok(Some(arrival))
}

async fn state_arrived(
    state: &AppState,
    object: &ObjectId,
    pending: StateVersion,
    body: bytes::Bytes,
) -> Result<Arrival> {
    let store = state.store.as_ref();
    let declared = Declared {
        serial: pending.serial,
        md5: pending.md5.clone(),
        lineage: Some(pending.lineage.clone()).filter(|lineage| !lineage.is_empty()),
    };
    let facts = match verify(&body, &declared) {
        Ok(facts) => facts,
        Err(e) => return Ok(refuse(&pending, e.to_string())),
    };
    let sealed = ObjectId::parse(&pending.object).ok_or(StateError::NotFound)?;
    state.blobs.put_sealed(&sealed, body.clone()).await?;
    let workspace = match workspaces::reread(store, &pending.workspace_id, None).await {
        Err(AccountsError::NotFound) => return Ok(Arrival::Ignored),
        other => other?,
    };
    let version_id = pending.id.clone();
    let finalized = pending.clone().finalized(&facts, body.len() as u64);
    match record(store, workspace, finalized, Writer::Upload { pending: &pending }).await {
        Ok(Some(_)) => Ok(Arrival::Finalized { version_id }),
        // Settled meanwhile (an event delivered twice, racing itself), or busy: the event is
        // delivered again and reads afresh.
        Ok(None) => Err(StateError::Conflict("The workspace's state is being written by others; retry.".into())),
        Err(StateError::Conflict(reason)) => discard(store, object, pending, reason).await,
        Err(e) => Err(e),
    }
}

/// The version will never be current: it says so, and its link takes nothing more.
async fn discard(store: &dyn ItemStore, object: &ObjectId, pending: StateVersion, reason: String) -> Result<Arrival> {
    let version_id = pending.id.clone();
    let discarded = StateVersion { status: Status::Discarded, uploads: None, ..pending.clone() };
    let waiting = Condition::equals("status", Status::Pending.as_str());
    let mut transaction = crate::store::Transaction::new();
    transaction.add(Write::Put { item: discarded.to_item()?, condition: waiting });
    transaction.add(Write::Delete { key: keys::pending_state_upload(object.as_str()), condition: Condition::Always });
    match transaction.commit(store).await {
        Err(e) if e.is_condition_failed() => Ok(Arrival::Ignored),
        other => other.map(|()| Arrival::Discarded { version_id, reason }).map_err(StateError::from),
    }
}

/// Not what the version's writer declared: the version waits on, and its link may take another
/// upload.
fn refuse(version: &StateVersion, reason: String) -> Arrival {
    tracing::warn!(version = %version.id, reason = %reason, "a state upload was refused");
    Arrival::Refused { version_id: version.id.clone(), reason }
}

async fn json_arrived(
    state: &AppState,
    object: &ObjectId,
    awaited: &AwaitedUpload,
    version: StateVersion,
    body: bytes::Bytes,
) -> Result<Arrival> {
    let store = state.store.as_ref();
    if serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err() {
        return Ok(refuse(&version, "the JSON state is not JSON".into()));
    }
    let sealed = ObjectId::parse(&awaited.sealed).ok_or(StateError::NotFound)?;
    state.blobs.put_sealed(&sealed, body).await?;
    // From here a finalize names the JSON form itself (it checks this key is still there).
    store.delete(&keys::pending_state_upload(object.as_str()), Condition::Always).await?;
    // A version finalized before, without it, names it now; finalized versions change no other way.
    let finalized: Option<StateVersion> = pointer::resolve(store, &version.id).await?;
    if let Some(finalized) = finalized.filter(|v| v.status == Status::Finalized && v.json_object.is_none()) {
        let named = StateVersion { json_object: Some(awaited.sealed.clone()), ..finalized };
        let still = Condition::equals("status", Status::Finalized.as_str());
        match store.put(named.to_item()?, still).await {
            Err(e) if e.is_condition_failed() => {}
            other => other?,
        }
    }
    Ok(Arrival::JsonStored { version_id: version.id })
}
