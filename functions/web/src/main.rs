//! The `web` function: serves the console's pages from the domain crate.

#[tokio::main]
async fn main() -> Result<(), hangar::lambda::Error> {
    hangar::lambda::serve_http::<hangar::blobs::WithS3>(hangar::app::routers::web).await
}
