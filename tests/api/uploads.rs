//! The upload path as an attacker drives it: the bytes served are the bytes inspected, and one
//! upload per version wins.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hangar::blobs::{BlobError, BlobReader, BlobStore, Blobs, ObjectId};
use hangar_tests::{module_archive, targz, Entry, TestApp};
use serde_json::json;

const VPC: &str = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";

/// `acme/vpc/aws` with version 1.0.0 pending; returns the app, the owners token and the link.
async fn pending_version() -> (TestApp, String, String) {
    let (app, owners) = TestApp::with_organization("acme").await;
    pending_version_on(app, owners).await
}

/// The same on an app whose organization `acme` exists already.
async fn pending_version_on(app: TestApp, owners: String) -> (TestApp, String, String) {
    let module = json!({"data": {"type": "registry-modules", "attributes": {"name": "vpc", "provider": "aws"}}});
    assert_eq!(app.post("/api/v2/organizations/acme/registry-modules", &owners, module).await.status, 201);
    let version = json!({"data": {"type": "registry-module-versions", "attributes": {"version": "1.0.0"}}});
    let created = app.post(&format!("{VPC}/versions"), &owners, version).await;
    let link = created.body["data"]["links"]["upload"].as_str().expect("an upload link").to_owned();
    (app, owners, link)
}

/// The bytes `terraform init` would download for 1.0.0.
async fn served(app: &TestApp, token: &str) -> Vec<u8> {
    let reply = app.get("/api/registry/v1/modules/acme/vpc/aws/1.0.0/download", token).await;
    assert_eq!(reply.status, 204, "{:?}", reply.body);
    let get = reply.headers["x-terraform-get"].to_str().unwrap().trim_end_matches("&archive=tar.gz").to_owned();
    app.client.get(get).send().await.unwrap().bytes().await.unwrap().to_vec()
}

fn hostile_archive() -> Vec<u8> {
    targz(&[
        Entry::File("./main.tf", b"resource \"null_resource\" \"x\" {}\n"),
        Entry::File("../escape.tf", b"# outside the module\n"),
        Entry::Raw { name: "./passwd", kind: tar::EntryType::Symlink, link: Some("/etc/passwd") },
    ])
}

/// A blob store that, the first time ingest reads the upload (to inspect or to copy it), puts
/// other bytes behind the same upload link: a second PUT arriving during the inspection.
struct SwappedAfterFirstRead {
    inner: Blobs,
    upload: ObjectId,
    replacement: std::path::PathBuf,
    swapped: AtomicBool,
}

impl SwappedAfterFirstRead {
    async fn swap(&self, id: &ObjectId) {
        if *id == self.upload && !self.swapped.swap(true, Ordering::SeqCst) {
            self.inner.put_file(&self.upload, &self.replacement).await.expect("the second upload lands");
        }
    }
}

#[async_trait]
impl BlobStore for SwappedAfterFirstRead {
    async fn upload_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError> {
        self.inner.upload_url(id, valid_for).await
    }
    async fn download_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError> {
        self.inner.download_url(id, valid_for).await
    }
    async fn open(&self, id: &ObjectId) -> Result<BlobReader, BlobError> {
        let reader = self.inner.open(id).await;
        self.swap(id).await;
        reader
    }
    async fn size(&self, id: &ObjectId) -> Result<u64, BlobError> {
        self.inner.size(id).await
    }
    async fn delete(&self, id: &ObjectId) -> Result<(), BlobError> {
        self.inner.delete(id).await
    }
    async fn copy(&self, from: &ObjectId, to: &ObjectId) -> Result<(), BlobError> {
        let copied = self.inner.copy(from, to).await;
        self.swap(from).await;
        copied
    }
    async fn put_file(&self, id: &ObjectId, file: &std::path::Path) -> Result<(), BlobError> {
        self.inner.put_file(id, file).await
    }
}

#[tokio::test]
async fn the_bytes_served_are_the_bytes_inspected_even_when_the_upload_is_replaced_midway() {
    let (app, owners, link) = pending_version().await;
    served_bytes_are_inspected_bytes(app, owners, link).await;
}

#[tokio::test]
async fn the_bytes_served_are_the_bytes_inspected_on_dynamodb_and_s3_too() {
    let Some(app) = hangar_tests::spawn_on_dynamodb().await else { return };
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    let (app, owners, link) = pending_version_on(app, owners).await;
    served_bytes_are_inspected_bytes(app, owners, link).await;
}

/// Puts a clean archive behind the link and ingests it while a replacement lands on the same
/// link; the version must be `ok` and serve the clean archive.
async fn served_bytes_are_inspected_bytes(app: TestApp, owners: String, link: String) {
    let upload = ObjectId::parse(link.split("/object/").nth(1).unwrap().split('?').next().unwrap()).unwrap();
    let files = tempfile::tempdir().unwrap();
    let (clean, hostile) = (files.path().join("clean.tar.gz"), files.path().join("hostile.tar.gz"));
    std::fs::write(&clean, module_archive()).unwrap();
    std::fs::write(&hostile, hostile_archive()).unwrap();

    let mut state = app.second_state().await;
    state.blobs.put_file(&upload, &clean).await.unwrap();
    state.blobs = Arc::new(SwappedAfterFirstRead {
        inner: state.blobs.clone(),
        upload: upload.clone(),
        replacement: hostile,
        swapped: AtomicBool::new(false),
    });
    hangar::registry::ingest::object_created(&state, &upload).await.expect("ingest runs");

    let version = app.get(&format!("{VPC}/version?module_version=1.0.0"), &owners).await;
    assert_eq!(version.body["data"]["attributes"]["status"], "ok", "the clean archive was inspected");
    assert_eq!(served(&app, &owners).await, module_archive(), "and it, not the replacement, is served");
    app.stop().await;
}

#[tokio::test]
async fn of_concurrent_uploads_to_one_link_exactly_one_lands() {
    let (app, owners, link) = pending_version().await;
    let app = Arc::new(app);
    let tasks: Vec<_> = (0..10)
        .map(|n| {
            let (app, link) = (app.clone(), link.clone());
            let body = if n == 0 { module_archive() } else { hostile_archive() };
            tokio::spawn(async move { app.upload(&link, body).await.as_u16() })
        })
        .collect();
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "one upload lands: {statuses:?}");
    assert!(statuses.iter().all(|s| *s == 200 || *s == 409), "the others are refused: {statuses:?}");
    let again = app.upload(&link, module_archive()).await;
    assert_eq!(again.as_u16(), 409, "a later upload changes nothing");
    let version = app.get(&format!("{VPC}/version?module_version=1.0.0"), &owners).await;
    if version.body["data"]["attributes"]["status"] == "ok" {
        assert_eq!(served(&app, &owners).await, module_archive(), "the served archive is the one inspected");
    }
}
