//! The event-driven functions' handlers: `registry-ingest` (S3 ObjectCreated) and
//! `key-rotation` (EventBridge schedule).

use aws_lambda_events::event::s3::S3Event;
use serde::Serialize;

use crate::blobs::ObjectId;
use crate::registry::ingest::IngestOutcome;
use crate::registry::publishing::RunBounds;
use crate::state::AppState;

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct IngestSummary {
    /// Archives inspected and their versions settled, `ok` or failed.
    pub ingested: Vec<String>,
    /// Objects with no version waiting for them (or outside `object/`).
    pub ignored: Vec<String>,
}

/// Handles an S3 ObjectCreated notification for `object/<id>` keys. A record that fails is
/// retried by Lambda with the whole event; records already settled are then ignored.
pub async fn ingest(state: &AppState, event: S3Event) -> Result<IngestSummary, crate::lambda::Error> {
    let mut summary = IngestSummary::default();
    for record in event.records {
        let key = record.s3.object.key.unwrap_or_default();
        let Some(id) = key.strip_prefix("object/").and_then(ObjectId::parse) else {
            summary.ignored.push(key);
            continue;
        };
        match crate::registry::ingest::object_created(state, &id).await? {
            IngestOutcome::Ingested { .. } | IngestOutcome::Failed { .. } => summary.ingested.push(id.to_string()),
            IngestOutcome::Ignored => summary.ignored.push(id.to_string()),
        }
    }
    tracing::info!(ingested = summary.ingested.len(), ignored = summary.ignored.len(), "ingest");
    Ok(summary)
}

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct RotationSummary {
    pub rotated: usize,
    pub revoked: usize,
    pub vcs_work: usize,
}

/// The scheduled work: static-role keys that are due, expired leases, and the VCS work that
/// publishing and webhooks recorded (repository syncs, archive fetches).
pub async fn scheduled(state: &AppState) -> Result<RotationSummary, crate::lambda::Error> {
    let (rotated, revoked) = crate::broker::scheduled_run(state).await?;
    let fetched = crate::registry::publishing::run_pending(state, RunBounds::default()).await?;
    Ok(RotationSummary { rotated, revoked, vcs_work: fetched })
}

/// Rotates the static-role keys that are due and revokes expired leases (and runs VCS work).
/// The payload is not read: EventBridge rules send their envelope, EventBridge Scheduler may send
/// `{}`, and both mean "run now".
pub async fn rotate(state: &AppState, _event: serde_json::Value) -> Result<RotationSummary, crate::lambda::Error> {
    let summary = scheduled(state).await?;
    tracing::info!(rotated = summary.rotated, revoked = summary.revoked, "rotation");
    Ok(summary)
}
