//! The `runs` function: configuration versions, runs, plans, applies and their logs, from the
//! domain crate's router.

#[tokio::main]
async fn main() -> Result<(), hangar::lambda::Error> {
    hangar::lambda::serve_http::<hangar::blobs::WithS3>(hangar::app::routers::runs).await
}
