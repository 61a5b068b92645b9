//! The `key-rotation` function: an EventBridge schedule → rotation of due static-role keys and
//! revocation of expired leases (the broker's work only; VCS work is `registry-sync`'s).

#[tokio::main]
async fn main() -> Result<(), hangar::lambda::Error> {
    hangar::lambda::serve_events(|state, event| async move { hangar::jobs::rotate(&state, event).await }).await
}
