//! The `state-versions` function: serves its family's router from the domain crate.

#[tokio::main]
async fn main() -> Result<(), hangar::lambda::Error> {
    hangar::lambda::serve_http::<hangar::blobs::WithS3>(hangar::app::routers::state_versions).await
}
