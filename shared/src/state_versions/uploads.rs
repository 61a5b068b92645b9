//! A pending version's state arriving on its upload link (`upload/<id>`). The S3 ObjectCreated
//! event (function `registry-ingest`, which takes every upload), dev-server's local PUT (before
//! it answers), and the workspace's next read or write ([`settle_pending`]) all call
//! [`object_created`]; whichever comes first settles it, the others find nothing left to do.
//!
//! The upload is read whole, bounded by the state size limit, and checked against what the
//! version's writer declared (MD5, serial, lineage); its bytes, not the upload, are then sealed,
//! so a later PUT on the still-valid link changes nothing that was checked. The version becomes
//! current in one transaction conditioned on the workspace, which must still wait for it, and not
//! be locked by another since before the state landed; else it is `discarded`. A state refused
//! leaves the version pending and its link open. What was read is removed whatever the outcome.

use serde::Serialize;

use super::error::{Result, StateError};
use super::record::{StateVersion, Status};
use super::versions::{record, verify, AwaitedUpload, Declared, Form, Writer};
use crate::accounts::workspaces::{self, Workspace};
use crate::accounts::AccountsError;
use crate::blobs::{BlobError, ObjectId, ReadUpload};
use crate::state::AppState;
use crate::store::{keys, pointer, retry_on_race, upload_claims, Condition, ItemStore, Transaction, Write};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Arrival {
    /// The state is the workspace's current.
    Finalized { version_id: String },
    /// Superseded by a newer write, or landed after another locked the workspace: the version
    /// will never be current.
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
    let Some(version) = version.filter(|version| wanted(awaited.form, version)) else {
        store.delete(&keys::pending_state_upload(object.as_str()), Condition::Always).await?;
        state.blobs.delete(object).await?;
        return Ok(Some(Arrival::Ignored));
    };
    let read = match state.blobs.read_upload(object, state.config.max_state_bytes).await {
        // Not landed yet, or an event delivered again after it was settled and removed.
        Err(BlobError::NotFound) => return Ok(Some(Arrival::Ignored)),
        Err(e @ BlobError::TooLarge { .. }) => {
            state.blobs.delete(object).await?;
            return Ok(Some(refused(state, object, &version.id, e.to_string()).await?));
        }
        Err(e) => return Err(e.into()),
        Ok(read) => read,
    };
    let arrival = match awaited.form {
        Form::State => state_arrived(state, version, &read).await?,
        Form::Json => json_arrived(state, object, &awaited, version, read.body.clone()).await?,
    };
    // What was read is removed, for good; an upload that landed since stays for its own event.
    state.blobs.remove_read_upload(object, &read).await?;
    match arrival {
        Arrival::Refused { version_id, reason } => Ok(Some(refused(state, object, &version_id, reason).await?)),
        other => Ok(Some(other)),
    }
}

async fn state_arrived(state: &AppState, pending: StateVersion, read: &ReadUpload) -> Result<Arrival> {
    let store = state.store.as_ref();
    let declared = Declared {
        serial: pending.serial,
        md5: pending.md5.clone(),
        lineage: Some(pending.lineage.clone()).filter(|lineage| !lineage.is_empty()),
    };
    let facts = match verify(&read.body, &declared) {
        Ok(facts) => facts,
        Err(e) => return Ok(Arrival::Refused { version_id: pending.id.clone(), reason: e.to_string() }),
    };
    let sealed = ObjectId::parse(&pending.object).ok_or(StateError::NotFound)?;
    state.blobs.put_sealed(&sealed, read.body.clone()).await?;
    let workspace = match workspaces::reread(store, &pending.workspace_id, None).await {
        Err(AccountsError::NotFound) => return forget(state, &pending).await,
        other => other?,
    };
    let version_id = pending.id.clone();
    let finalized = pending.clone().finalized(&facts, read.body.len() as u64);
    let writer = Writer::Upload { pending: &pending, stored_at: read.stored_at };
    match record(store, workspace, finalized, writer).await {
        Ok(Some(_)) => Ok(Arrival::Finalized { version_id }),
        // Settled meanwhile (an event delivered twice, racing itself), or busy: the event is
        // delivered again, or the next read or write of the workspace settles it.
        Ok(None) => Err(StateError::Conflict("The workspace's state is being written by others; retry.".into())),
        Err(StateError::Conflict(reason)) => discard(state, &pending, reason).await,
        Err(StateError::Workspace(AccountsError::NotFound)) => forget(state, &pending).await,
        Err(e) => Err(e),
    }
}

/// The workspace went while its state arrived: what this sealed goes too (the cascade that
/// deleted the workspace may have run before).
async fn forget(state: &AppState, pending: &StateVersion) -> Result<Arrival> {
    for sealed in std::iter::once(&pending.object).chain(&pending.json_object).filter_map(|id| ObjectId::parse(id)) {
        state.blobs.delete_sealed(&sealed).await?;
    }
    Ok(Arrival::Ignored)
}

/// The version will never be current: it says so, its link takes nothing more, its state is not
/// kept, and the workspace waits for it no longer.
pub(super) async fn discard(state: &AppState, pending: &StateVersion, reason: String) -> Result<Arrival> {
    let store = state.store.as_ref();
    let version_id = pending.id.clone();
    let discarded = StateVersion { status: Status::Discarded, uploads: None, json_object: None, ..pending.clone() };
    let (discarded, pending_ref) = (&discarded, pending);
    let done = retry_on_race(|| async move {
        let workspace = match workspaces::reread(store, &pending_ref.workspace_id, None).await {
            Err(AccountsError::NotFound) => None,
            other => Some(other?),
        };
        let mut transaction = Transaction::new();
        let waiting = Condition::equals("status", Status::Pending.as_str());
        let still_pending = transaction.add(Write::Put { item: discarded.to_item()?, condition: waiting });
        for upload in pending_ref.uploads.iter().flat_map(|u| [&u.state, &u.json]) {
            transaction.add(Write::Delete { key: keys::pending_state_upload(upload), condition: Condition::Always });
        }
        if let Some(workspace) = workspace.filter(|ws| ws.pending_state.as_deref() == Some(pending_ref.id.as_str())) {
            transaction.add(workspaces::await_state(&workspace, None)?);
        }
        match transaction.commit(store).await {
            Ok(()) => Ok(Some(true)),
            // Settled by another meanwhile.
            Err(e) if e.failed_on(still_pending) => Ok(Some(false)),
            Err(e) if e.is_condition_failed() => Ok(None),
            Err(e) => Err(StateError::from(e)),
        }
    })
    .await?;
    match done {
        Some(true) => {
            forget(state, pending).await?;
            tracing::info!(version = %version_id, reason = %reason, "a pending state version was discarded");
            Ok(Arrival::Discarded { version_id, reason })
        }
        Some(false) => Ok(Arrival::Ignored),
        None => Err(StateError::Conflict("The workspace is changing; retry.".into())),
    }
}

/// Settles the workspace's pending version before a read or a write that must see what it holds:
/// a state that has landed is checked and made current (or discarded); one that has not is left
/// to wait, or, before a new write (`superseded`), discarded. Returns the workspace as it is then.
pub async fn settle_pending(state: &AppState, workspace: Workspace, superseded: bool) -> Result<Workspace> {
    let Some(id) = workspace.pending_state.clone() else { return Ok(workspace) };
    let store = state.store.as_ref();
    let pending: Option<StateVersion> = pointer::resolve(store, &id).await?;
    if let Some(pending) = pending.filter(|version| version.status == Status::Pending) {
        let upload = pending.uploads.as_ref().and_then(|uploads| ObjectId::parse(&uploads.state));
        let arrival = match upload {
            Some(upload) => object_created(state, &upload).await?,
            None => None,
        };
        let landed = matches!(arrival, Some(Arrival::Finalized { .. } | Arrival::Discarded { .. }));
        if superseded && !landed {
            discard(state, &pending, "a newer state version superseded it".into()).await?;
        }
    }
    Ok(workspaces::reread(store, &workspace.id, None).await?)
}

/// Not what the version's writer declared: the version waits on, and its link may take another
/// upload (locally: its claim is given back, once the refused upload is gone).
async fn refused(state: &AppState, object: &ObjectId, version_id: &str, reason: String) -> Result<Arrival> {
    tracing::warn!(version = %version_id, reason = %reason, "a state upload was refused");
    upload_claims::release(state.store.as_ref(), object.as_str()).await?;
    Ok(Arrival::Refused { version_id: version_id.to_owned(), reason })
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
        return Ok(Arrival::Refused { version_id: version.id, reason: "the JSON state is not JSON".into() });
    }
    let sealed = ObjectId::parse(&awaited.sealed).ok_or(StateError::NotFound)?;
    state.blobs.put_sealed(&sealed, body).await?;
    // From here a finalize names the JSON form itself (it checks this key is still there).
    store.delete(&keys::pending_state_upload(object.as_str()), Condition::Always).await?;
    // A version finalized before, without it, names it now; finalized versions change no other way.
    let finalized: Option<StateVersion> = pointer::resolve(store, &version.id).await?;
    if finalized.is_none() {
        // Its workspace went meanwhile.
        state.blobs.delete_sealed(&sealed).await?;
    }
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
