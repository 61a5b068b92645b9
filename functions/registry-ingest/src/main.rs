//! The `registry-ingest` function: S3 ObjectCreated on `upload/` → the registry's ingest.

#[tokio::main]
async fn main() -> Result<(), hangar::lambda::Error> {
    hangar::lambda::serve_events(|state, event| async move { hangar::jobs::ingest(&state, event).await }).await
}
