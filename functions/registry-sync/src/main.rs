//! The `registry-sync` function: an EventBridge schedule → the VCS work publishing and webhooks
//! recorded (repository syncs, archive fetches). Its role has no IAM or STS permission.

#[tokio::main]
async fn main() -> Result<(), hangar::lambda::Error> {
    hangar::lambda::serve_events(|state, event| async move { hangar::jobs::sync(&state, event).await }).await
}
