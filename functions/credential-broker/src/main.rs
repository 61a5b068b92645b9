//! The `credential-broker` function: serves its family's router from the domain crate.

#[tokio::main]
async fn main() -> Result<(), hangar::lambda::Error> {
    hangar::lambda::serve_http::<hangar::blobs::WithoutBlobs>(hangar::app::routers::credential_broker).await
}
