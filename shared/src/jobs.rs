//! The event-driven functions' handlers: `registry-ingest` (S3 ObjectCreated) and
//! `key-rotation` (EventBridge schedule). Their families fill them in; until then they account
//! for every event they receive and change nothing.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::s3::S3Event;
use serde::Serialize;

use crate::app::AppState;
use crate::blobs::ObjectId;

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct IngestSummary {
    /// Archives parsed and their versions marked `ok` or failed.
    pub ingested: Vec<String>,
    /// Objects with no version waiting for them (or outside `object/`).
    pub ignored: Vec<String>,
}

/// Handles an S3 ObjectCreated notification for `object/<id>` keys.
pub async fn ingest(_state: &AppState, event: S3Event) -> Result<IngestSummary, crate::lambda::Error> {
    let mut summary = IngestSummary::default();
    for record in event.records {
        let key = record.s3.object.key.unwrap_or_default();
        match key.strip_prefix("object/").and_then(ObjectId::parse) {
            // The registry family (module versions) is not built yet: no version waits on any object.
            Some(id) => summary.ignored.push(id.to_string()),
            None => summary.ignored.push(key),
        }
    }
    tracing::info!(ingested = summary.ingested.len(), ignored = summary.ignored.len(), "ingest");
    Ok(summary)
}

#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct RotationSummary {
    pub rotated: usize,
    pub revoked: usize,
}

/// Rotates the static-role keys that are due and revokes expired dynamic users.
pub async fn rotate(_state: &AppState, _event: EventBridgeEvent) -> Result<RotationSummary, crate::lambda::Error> {
    // The broker family (static roles, leases) is not built yet: nothing is ever due.
    let summary = RotationSummary::default();
    tracing::info!(rotated = summary.rotated, revoked = summary.revoked, "rotation");
    Ok(summary)
}
