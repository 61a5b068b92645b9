//! The `registry-protocol` function: serves its family's router from the domain crate.

#[tokio::main]
async fn main() -> Result<(), hangar::lambda::Error> {
    hangar::lambda::serve_http::<hangar::blobs::WithS3>(hangar::app::routers::registry_protocol).await
}
