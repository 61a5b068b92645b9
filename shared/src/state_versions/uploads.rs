//! A pending version's state arriving on its upload link (`upload/<id>`). The S3 ObjectCreated
//! event (function `registry-ingest`, which takes every upload), dev-server's local PUT (before
//! it answers), and the workspace's next read or write ([`settle_pending`]) all call
//! [`object_created`]; whichever comes first settles it, the others find nothing left to do.
//!
//! The upload is read whole, bounded by the state size limit, and checked against what the
//! version's writer declared (MD5, serial, lineage); its bytes, not the upload, are then sealed,
//! so a later PUT on the still-valid link changes nothing that was checked. The version becomes
//! current in one transaction conditioned on the workspace, which must still wait for it, with
//! no lock taken since the one its writer held; else it is `discarded` (taking a lock first
//! settles what landed under the lock before: see `app::hooks`). A state refused leaves the
//! version pending and its link open. What was read is removed whatever the outcome.

use serde::Serialize;

use super::error::{Result, StateError};
use super::record::{StateVersion, Status};
use super::versions::{record, verify, AwaitedUpload, Declared, Form, Writer};
use crate::accounts::workspaces::{self, Workspace};
use crate::accounts::AccountsError;
use crate::blobs::{BlobError, ObjectId};
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
    let Some((awaited, version)) = awaited(state.store.as_ref(), object).await? else { return Ok(None) };
    Ok(Some(settle(state, object, &awaited, version).await?))
}

/// Settles the upload `object` for the version its link was made for.
async fn settle(
    state: &AppState,
    object: &ObjectId,
    awaited: &AwaitedUpload,
    version: Option<StateVersion>,
) -> Result<Arrival> {
    let limit = state.config.max_state_bytes;
    let wanted = version.filter(|version| wanted(awaited.form, version));
    // Not landed yet, or an event delivered again after it was settled and removed.
    let read = match state.blobs.read_upload(object, if wanted.is_some() { limit } else { 0 }).await {
        Err(BlobError::NotFound) => return Ok(Arrival::Ignored),
        other => other?,
    };
    let arrival = match wanted {
        // Settled already, or superseded: an upload now changes nothing.
        None => Arrival::Ignored,
        Some(version) if read.size > limit => {
            let reason =
                format!("the upload is {} bytes, over the limit of {limit} (HANGAR_MAX_STATE_BYTES)", read.size);
            Arrival::Refused { version_id: version.id, reason }
        }
        Some(version) => match awaited.form {
            Form::State => state_arrived(state, version, &read.body).await?,
            Form::Json => json_arrived(state, object, awaited, version, read.body.clone()).await?,
        },
    };
    // What was read is removed, for good; an upload that landed since stays for its own event.
    state.blobs.remove_read_upload(object, &read).await?;
    if let Arrival::Refused { version_id, reason } = &arrival {
        tracing::warn!(version = %version_id, reason = %reason, "a state upload was refused");
        // Only once the refused upload is gone: the link may take another (locally: its claim).
        upload_claims::release(state.store.as_ref(), object.as_str()).await?;
    }
    Ok(arrival)
}

async fn state_arrived(state: &AppState, pending: StateVersion, body: &bytes::Bytes) -> Result<Arrival> {
    let store = state.store.as_ref();
    let declared = Declared {
        serial: pending.serial,
        md5: pending.md5.clone(),
        lineage: Some(pending.lineage.clone()).filter(|lineage| !lineage.is_empty()),
    };
    let facts = match verify(body, &declared) {
        Ok(facts) => facts,
        Err(e) => return Ok(Arrival::Refused { version_id: pending.id.clone(), reason: e.to_string() }),
    };
    let sealed = ObjectId::parse(&pending.object).ok_or(StateError::NotFound)?;
    state.blobs.put_sealed(&sealed, body.clone()).await?;
    let workspace = match workspaces::reread(store, &pending.workspace_id, None).await {
        Err(AccountsError::NotFound) => return forget(state, &pending).await.map(|()| Arrival::Ignored),
        other => other?,
    };
    let version_id = pending.id.clone();
    let finalized = pending.clone().finalized(&facts, body.len() as u64);
    match record(store, workspace, finalized, Writer::Upload { pending: &pending }).await {
        Ok(Some(_)) => Ok(Arrival::Finalized { version_id }),
        // Busy: the event is delivered again, or the next read or write of the workspace
        // settles it.
        Ok(None) => Err(StateError::Conflict("The workspace's state is being written by others; retry.".into())),
        Err(StateError::Conflict(reason)) => discard(state, &pending, reason).await,
        Err(StateError::Workspace(AccountsError::NotFound)) => forget(state, &pending).await.map(|()| Arrival::Ignored),
        Err(e) => Err(e),
    }
}

/// Takes back what a version that will never be current had sealed (its state, its JSON form).
pub(super) async fn forget(state: &AppState, version: &StateVersion) -> Result<()> {
    let sealed = std::iter::once(&version.object).chain(&version.json_object).filter_map(|id| ObjectId::parse(id));
    for sealed in sealed {
        state.blobs.delete_sealed(&sealed).await?;
    }
    Ok(())
}

/// The write that marks a pending version discarded, if it is pending still. It keeps its upload
/// links' records (they expire with them), so that an upload on one is told it came too late.
pub(super) fn discarded(pending: &StateVersion) -> Result<Write> {
    let discarded = StateVersion { status: Status::Discarded, ..pending.clone() };
    let waiting = Condition::equals("status", Status::Pending.as_str());
    Ok(Write::Put { item: discarded.to_item()?, condition: waiting })
}

/// The version will never be current: it says so, keeps no state, and the workspace waits for it
/// no longer.
async fn discard(state: &AppState, pending: &StateVersion, reason: String) -> Result<Arrival> {
    let store = state.store.as_ref();
    let done = retry_on_race(|| async move {
        let workspace = match workspaces::reread(store, &pending.workspace_id, None).await {
            Err(AccountsError::NotFound) => None,
            other => Some(other?),
        };
        let mut transaction = Transaction::new();
        let still_pending = transaction.add(discarded(pending)?);
        if let Some(workspace) = workspace.filter(|ws| ws.pending_state.as_deref() == Some(pending.id.as_str())) {
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
            tracing::info!(version = %pending.id, reason = %reason, "a pending state version was discarded");
            Ok(Arrival::Discarded { version_id: pending.id.clone(), reason })
        }
        Some(false) => {
            // Discarded by another meanwhile, perhaps before this sealed its state: not kept.
            let now: Option<StateVersion> = pointer::resolve(store, &pending.id).await?;
            if now.is_some_and(|version| version.status == Status::Discarded) {
                forget(state, pending).await?;
            }
            Ok(Arrival::Ignored)
        }
        None => Err(StateError::Conflict("The workspace is changing; retry.".into())),
    }
}

/// Settles the workspace's pending version, if its state has landed, before a read or write that
/// must see what the workspace holds (or before its lock changes hands); one that has not landed
/// is left waiting. Returns the workspace as it is then.
pub async fn settle_pending(state: &AppState, workspace: Workspace) -> Result<Workspace> {
    let Some(id) = workspace.pending_state.clone() else { return Ok(workspace) };
    let store = state.store.as_ref();
    let pending: Option<StateVersion> = pointer::resolve(store, &id).await?;
    let pending = pending.filter(|version| version.status == Status::Pending);
    // Its upload is read from the version itself: the link's record may have expired.
    let upload = pending.as_ref().and_then(|v| v.uploads.as_ref()).and_then(|u| ObjectId::parse(&u.state));
    if let (Some(pending), Some(upload)) = (pending, upload) {
        let awaited = AwaitedUpload { version_id: id, form: Form::State, sealed: pending.object.clone() };
        let arrival = settle(state, &upload, &awaited, Some(pending.clone())).await?;
        // Nothing landed, and nothing can any more: the workspace waits for it no longer.
        if arrival == Arrival::Ignored && links_expired(&pending, state.config.state_link_lifetime, chrono::Utc::now())
        {
            discard(state, &pending, "its upload links expired unused".into()).await?;
        }
    }
    Ok(workspaces::reread(store, &workspace.id, None).await?)
}

/// Whether a pending version's links can no longer bring anything: past their lifetime, with an
/// hour's grace for a large upload begun just in time (a link is checked when a PUT begins).
fn links_expired(pending: &StateVersion, lifetime: std::time::Duration, now: chrono::DateTime<chrono::Utc>) -> bool {
    let Ok(created) = chrono::DateTime::parse_from_rfc3339(&pending.created_at) else { return false };
    now > created + chrono::Duration::seconds(lifetime.as_secs() as i64 + 3600)
}

/// What became of the state version an upload to `object` was for, as far as its link's record
/// tells: `None` once it is settled and the record gone (finalized), else the version's status.
pub async fn status_after(store: &dyn ItemStore, object: &ObjectId) -> Result<Option<Status>> {
    Ok(awaited(store, object).await?.and_then(|(_, version)| version.map(|version| version.status)))
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
    // A version finalized before, without it, names it now (finalized versions change no other
    // way); one discarded or gone meanwhile keeps nothing.
    let now: Option<StateVersion> = pointer::resolve(store, &version.id).await?;
    match now {
        Some(finalized) if finalized.status == Status::Finalized && finalized.json_object.is_none() => {
            let named = StateVersion { json_object: Some(awaited.sealed.clone()), ..finalized };
            let still = Condition::equals("status", Status::Finalized.as_str());
            match store.put(named.to_item()?, still).await {
                Err(e) if e.is_condition_failed() => state.blobs.delete_sealed(&sealed).await?,
                other => other?,
            }
        }
        Some(version) if version.status != Status::Discarded => {}
        _ => state.blobs.delete_sealed(&sealed).await?,
    }
    Ok(Arrival::JsonStored { version_id: version.id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_expire_an_hour_after_their_lifetime() {
        let created = chrono::DateTime::parse_from_rfc3339("2026-11-28T10:00:00.000Z").unwrap().to_utc();
        let pending: StateVersion = serde_json::from_value(serde_json::json!({
            "id": "sv-a", "org_id": "o", "workspace_id": "ws-a", "sequence": 0, "serial": 1, "lineage": "",
            "md5": "", "size": 0, "terraform_version": null, "state_version": 0,
            "created_at": crate::api::timestamp(created), "created_by": "u", "object": "x",
            "output_count": 0, "resource_count": 0, "status": "pending",
        }))
        .unwrap();
        let lifetime = std::time::Duration::from_secs(300);
        let at = |seconds| created + chrono::Duration::seconds(seconds);
        assert!(!links_expired(&pending, lifetime, at(300 + 3600)), "an upload begun just in time may still land");
        assert!(links_expired(&pending, lifetime, at(300 + 3601)));
    }
}
