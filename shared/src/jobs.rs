//! The event-driven functions' handlers: `registry-ingest` (S3 ObjectCreated, for module
//! archives and pending state versions' states alike), and on
//! EventBridge schedules `key-rotation` (the broker's) and `registry-sync` (VCS work).

use aws_lambda_events::event::s3::S3Event;
use serde::Serialize;

use crate::blobs::ObjectId;
use crate::registry::ingest::IngestOutcome;
use crate::registry::publishing::RunBounds;
use crate::state::AppState;
use crate::state_versions::uploads::Arrival;

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct IngestSummary {
    /// Uploads inspected and their versions settled: archives `ok` or failed, states current,
    /// discarded or refused.
    pub ingested: Vec<String>,
    /// Uploads with no version waiting for them (or keys outside `upload/`).
    pub ignored: Vec<String>,
}

/// Whether an upload settled something.
#[derive(Debug, PartialEq, Eq)]
pub enum Landed {
    Settled,
    Ignored,
}

/// Settles what waits for the upload `id`: a pending state version's state (its links say so),
/// a provider version's file (its marker says so), else a module version's archive.
pub async fn object_created(state: &AppState, id: &ObjectId) -> Result<Landed, crate::lambda::Error> {
    if let Some(arrival) = crate::state_versions::uploads::object_created(state, id).await? {
        tracing::info!(object = %id, arrival = ?arrival, "a state upload settled");
        return Ok(match arrival {
            Arrival::Ignored => Landed::Ignored,
            _ => Landed::Settled,
        });
    }
    if let Some(landed) = crate::registry::providers::object_created(state, id).await? {
        return Ok(match landed {
            crate::registry::providers::Landed::Ignored => Landed::Ignored,
            _ => Landed::Settled,
        });
    }
    let outcome = crate::registry::ingest::object_created(state, id).await?;
    outcome.log(id.as_str());
    Ok(match outcome {
        IngestOutcome::Ingested { .. } | IngestOutcome::Failed { .. } => Landed::Settled,
        IngestOutcome::Ignored => Landed::Ignored,
    })
}

/// Settles the uploads a restart may have left stored but not settled (dev-server stopped in
/// the middle of an ingest); the others are ignored.
pub async fn resume_uploads(state: &AppState) -> Result<(), crate::lambda::Error> {
    for object in state.blobs.unannounced_uploads().await? {
        if let Err(e) = object_created(state, &object).await {
            tracing::error!(object = %object, error = %e, "a resumed upload was not settled");
        }
    }
    Ok(())
}

/// Handles an S3 ObjectCreated notification for `upload/<id>` keys. A record that fails is
/// retried by Lambda (or, from a queue, redelivered) with the whole event; records already
/// settled are then ignored.
pub async fn ingest(state: &AppState, event: S3Event) -> Result<IngestSummary, crate::lambda::Error> {
    let mut summary = IngestSummary::default();
    for record in event.records {
        let key = event_key(&record.s3.object.key.unwrap_or_default());
        let Some(id) = ObjectId::from_upload_key(&key) else {
            summary.ignored.push(key);
            continue;
        };
        match object_created(state, &id).await? {
            Landed::Settled => summary.ingested.push(id.to_string()),
            Landed::Ignored => summary.ignored.push(id.to_string()),
        }
    }
    tracing::info!(ingested = summary.ingested.len(), ignored = summary.ignored.len(), "ingest");
    Ok(summary)
}

/// An event's object key as stored: S3 sends keys URL-encoded (`+` for a space; some senders
/// also encode `/`).
fn event_key(raw: &str) -> String {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut rest = raw.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        let hex =
            tail.get(..2).filter(|h| h.iter().all(u8::is_ascii_hexdigit)).and_then(|h| std::str::from_utf8(h).ok());
        match (first, hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                bytes.push(byte);
                rest = &tail[2..];
            }
            (b'+', _) => {
                bytes.push(b' ');
                rest = tail;
            }
            (other, _) => {
                bytes.push(other);
                rest = tail;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct RotationSummary {
    pub rotated: usize,
    pub revoked: usize,
}

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct SyncSummary {
    pub vcs_work: usize,
}

/// The broker's scheduled work: static-role keys that are due and expired leases (and, until
/// it has finished once, rebinding the broker's format-1 sealed values). Nothing else runs with
/// the broker's IAM powers.
pub async fn rotation(state: &AppState) -> Result<RotationSummary, crate::lambda::Error> {
    let (rotated, revoked) = crate::broker::scheduled_run(state).await?;
    tracing::debug!(rotated, revoked, "the broker's scheduled run is done");
    Ok(RotationSummary { rotated, revoked })
}

/// The registry's scheduled work: what publishing and webhooks recorded (repository syncs,
/// archive fetches from tenant-controlled URLs), after, until it has finished once, rebinding
/// the registry's format-1 sealed values (a failure there is logged and retried next run).
pub async fn vcs(state: &AppState) -> Result<SyncSummary, crate::lambda::Error> {
    let now = chrono::Utc::now().timestamp();
    if let Err(e) = crate::registry::publishing::reseal(state, now).await {
        tracing::warn!(error = %e, "the registry's format-1 sealed values are not all rebound; retried next run");
    }
    let fetched = crate::registry::publishing::run_pending(state, RunBounds::default()).await?;
    // The agents' sweep rides this schedule (store work only): silent agents past the errored
    // window give their live-agent slots back, and ended agents are pruned after retention.
    match crate::agents::agents::sweep(state).await {
        Ok(swept) if swept.errored + swept.pruned > 0 => tracing::info!(
            errored = swept.errored,
            pruned = swept.pruned,
            "agent sweep: silent agents marked errored, ended ones pruned"
        ),
        Ok(_) => tracing::debug!("agent sweep: nothing to do"),
        Err(e) => tracing::warn!(error = %e, "the agent sweep failed; retried next run"),
    }
    // And the runs': a job whose agent stopped reporting past its lease errors its run and gives
    // the workspace's lock back.
    match crate::runs::queue::sweep(state).await {
        Ok(0) => tracing::debug!("run sweep: nothing to do"),
        Ok(errored) => tracing::info!(errored, "run sweep: runs whose agents went silent errored"),
        Err(e) => tracing::warn!(error = %e, "the run sweep failed; retried next run"),
    }
    tracing::debug!(vcs_work = fetched, "the registry's scheduled run is done");
    Ok(SyncSummary { vcs_work: fetched })
}

/// The `key-rotation` function: rotates the static-role keys that are due and revokes expired
/// leases. The payload is not read: EventBridge rules send their envelope, EventBridge Scheduler
/// may send `{}`, and both mean "run now".
pub async fn rotate(state: &AppState, _event: serde_json::Value) -> Result<RotationSummary, crate::lambda::Error> {
    let summary = rotation(state).await?;
    tracing::info!(rotated = summary.rotated, revoked = summary.revoked, "rotation");
    Ok(summary)
}

/// The `registry-sync` function: runs waiting VCS work (any payload, as `rotate`).
pub async fn sync(state: &AppState, _event: serde_json::Value) -> Result<SyncSummary, crate::lambda::Error> {
    let summary = vcs(state).await?;
    tracing::info!(vcs_work = summary.vcs_work, "registry sync");
    Ok(summary)
}

#[cfg(test)]
mod tests {
    #[test]
    fn event_keys_are_url_decoded() {
        assert_eq!(super::event_key("upload%2Fabc"), "upload/abc");
        assert_eq!(super::event_key("upload/abc"), "upload/abc");
        assert_eq!(super::event_key("a+b%20c%2"), "a b c%2");
    }
}
