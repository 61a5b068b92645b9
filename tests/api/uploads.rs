//! The upload path as an attacker drives it: the bytes served are the bytes inspected, and one
//! upload per version wins.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hangar::blobs::{BlobError, BlobReader, BlobStore, Blobs, ObjectId};
use hangar::config::Config;
use hangar::store::ItemStore;
use hangar_tests::builders::{acme, acme_on_dynamodb_without_queue, module, new_module, new_version, version};
use hangar_tests::{module_archive, targz, Entry, TestApp};
use serde_json::json;

const VPC: &str = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";

/// `acme/vpc/aws` with version 1.0.0 pending; returns the app, the owners token and the link.
async fn pending_version() -> (TestApp, String, String) {
    let (app, owners) = acme().await;
    pending_version_on(app, owners).await
}

/// The same on an app whose organization `acme` exists already.
async fn pending_version_on(app: TestApp, owners: String) -> (TestApp, String, String) {
    new_module(&app, &owners, "acme", "vpc", "aws").await;
    let link = new_version(&app, &owners, VPC, "1.0.0").await;
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
    async fn upload_size(&self, id: &ObjectId) -> Result<u64, BlobError> {
        self.inner.upload_size(id).await
    }
    async fn delete(&self, id: &ObjectId) -> Result<(), BlobError> {
        self.inner.delete(id).await
    }
    async fn read_upload(&self, id: &ObjectId, limit: u64) -> Result<hangar::blobs::ReadUpload, BlobError> {
        self.inner.read_upload(id, limit).await
    }
    async fn remove_read_upload(&self, id: &ObjectId, read: &hangar::blobs::ReadUpload) -> Result<(), BlobError> {
        self.inner.remove_read_upload(id, read).await
    }
    async fn copy_upload(&self, from: &ObjectId, to: &ObjectId) -> Result<(), BlobError> {
        let copied = self.inner.copy_upload(from, to).await;
        self.swap(from).await;
        copied
    }
    async fn put_file(&self, id: &ObjectId, file: &std::path::Path) -> Result<(), BlobError> {
        self.inner.put_file(id, file).await
    }
    async fn delete_sealed(&self, id: &ObjectId) -> Result<(), BlobError> {
        self.inner.delete_sealed(id).await
    }
    async fn put_sealed(&self, id: &ObjectId, body: bytes::Bytes) -> Result<(), BlobError> {
        self.inner.put_sealed(id, body).await
    }
    async fn open_sealed(&self, id: &ObjectId) -> Result<bytes::Bytes, BlobError> {
        self.inner.open_sealed(id).await
    }
    async fn sealed_download_url(&self, id: &ObjectId, valid_for: Duration) -> Result<Option<String>, BlobError> {
        self.inner.sealed_download_url(id, valid_for).await
    }
}

#[tokio::test]
async fn the_bytes_served_are_the_bytes_inspected_even_when_the_upload_is_replaced_midway() {
    let (app, owners, link) = pending_version().await;
    served_bytes_are_inspected_bytes(app, owners, link).await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn the_bytes_served_are_the_bytes_inspected_on_dynamodb_and_s3_too() {
    // No queue: the test's own ingest is the only one.
    let (app, owners) = acme_on_dynamodb_without_queue().await;
    let (app, owners, link) = pending_version_on(app, owners).await;
    served_bytes_are_inspected_bytes(app, owners, link).await;
}

/// Puts a clean archive behind the link and ingests it while a replacement lands on the same
/// link; the version must be `ok` and serve the clean archive.
async fn served_bytes_are_inspected_bytes(app: TestApp, owners: String, link: String) {
    let upload = ObjectId::parse(link.split("/upload/").nth(1).unwrap().split('?').next().unwrap()).unwrap();
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
    let version = app.settled(&format!("{VPC}/version?module_version=1.0.0"), &owners).await;
    if version.body["data"]["attributes"]["status"] == "ok" {
        assert_eq!(served(&app, &owners).await, module_archive(), "the served archive is the one inspected");
    }
}

/// dev-server answers an upload's PUT once the bytes are stored, and ingests after, off the
/// request, as S3's event has it done in AWS. Shown without a race: another writer takes the
/// embedded store's write lock once the upload is claimed (before its body is read), so ingest
/// cannot settle the version; the PUT is answered all the same and the version is `pending`,
/// and once the lock is released the version settles. (Ingest inside the PUT held it until the
/// store gave up waiting, and left the version pending for good.)
#[tokio::test]
async fn an_upload_is_answered_once_stored_and_ingested_after() {
    let (app, owners, link) = pending_version().await;
    let id = link.split("/upload/").nth(1).and_then(|rest| rest.split('?').next()).expect("an /upload/ link");
    let link = if link.starts_with('/') { format!("{}{link}", app.url) } else { link.clone() };
    let version = format!("{VPC}/version?module_version=1.0.0");
    let archive = module_archive();
    let (last, first) = archive.split_last().expect("an archive");

    let (body, chunks) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
    let stream = futures::stream::unfold(chunks, |mut chunks| async move { chunks.recv().await.map(|c| (c, chunks)) });
    body.send(Ok(first.to_vec())).await.unwrap();
    let request = app.client.put(&link).header("Content-Type", "application/octet-stream");
    let put = tokio::spawn(request.body(reqwest::Body::wrap_stream(stream)).send());

    let (store, claim) = (app.store(), hangar::store::keys::upload_claim(id));
    for _ in 0..1000 {
        if store.get(&claim).await.unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(store.get(&claim).await.unwrap().is_some(), "the upload is claimed before its body is read");
    // Opened as dev-server holds the file (SQLite's `unix-excl`, alone): one process's
    // connections to a file keep to one kind of lock.
    let flags = rusqlite::OpenFlags::default();
    let writer =
        rusqlite::Connection::open_with_flags_and_vfs(app.data_dir.path().join("hangar.db"), flags, c"unix-excl")
            .unwrap();
    writer.busy_timeout(Duration::from_secs(10)).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();

    body.send(Ok(vec![*last])).await.unwrap();
    drop(body);
    assert_eq!(put.await.unwrap().unwrap().status(), 200, "answered while ingest cannot settle");
    let right_after = app.get(&version, &owners).await;
    assert_eq!(right_after.body["data"]["attributes"]["status"], "pending");

    writer.execute_batch("ROLLBACK").unwrap();
    assert_eq!(app.upload(&link, hostile_archive()).await, 409, "the link is used all the same");
    let settled = app.settled(&version, &owners).await;
    assert_eq!(settled.body["data"]["attributes"]["status"], "ok", "ingest settles it after");
    assert_eq!(served(&app, &owners).await, module_archive());
    app.stop().await;
}

/// Uploads and the archives served live apart, as S3's `upload/` and `object/` prefixes: the
/// link stores the upload in the data directory's `uploads/`, ingest copies it to `objects/`
/// and serves that copy under another id, and the upload is removed.
#[tokio::test]
async fn an_upload_lands_apart_from_the_archive_that_is_served() {
    let (app, owners, link) = pending_version().await;
    let path = link.strip_prefix(&app.url).unwrap_or(&link);
    let upload = path.strip_prefix("/upload/").and_then(|rest| rest.split('?').next()).expect("an /upload/ link");
    assert_eq!(app.upload(&link, module_archive()).await, 200);
    let version = app.settled(&format!("{VPC}/version?module_version=1.0.0"), &owners).await;
    assert_eq!(version.body["data"]["attributes"]["status"], "ok");

    let download = app.get("/api/registry/v1/modules/acme/vpc/aws/1.0.0/download", &owners).await;
    let get = download.headers["x-terraform-get"].to_str().unwrap().to_owned();
    let archive = get.split("/object/").nth(1).and_then(|rest| rest.split('?').next()).expect("an /object/ link");
    assert_ne!(archive, upload, "the archive served is a copy of its own");
    let data = app.data_dir.path();
    assert_eq!(std::fs::read(data.join("objects").join(archive)).unwrap(), module_archive());
    assert_eq!(served(&app, &owners).await, module_archive());
    let uploads = || std::fs::read_dir(data.join("uploads")).unwrap().count();
    for _ in 0..100 {
        if uploads() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(uploads(), 0, "the upload is removed once ingested");
    app.stop().await;
}

/// An upload stored when dev-server stopped, before its ingest ran (a crash, a Ctrl-C), is
/// ingested at the next start: the version does not stay `pending` with its link spent.
#[tokio::test]
async fn an_upload_left_by_a_stop_before_its_ingest_is_ingested_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let first = dev_server::start(hangar_tests::options(dir.path()), Config::default()).await.unwrap();
    let admin = first.generated_admin_token.clone().expect("a generated admin token");
    let client = reqwest::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        let request = client.post(format!("{}{path}", first.url)).bearer_auth(&admin);
        request.header("Content-Type", "application/vnd.api+json").body(body.to_string()).send()
    };
    let org = json!({"data": {"type": "organizations", "attributes": {"name": "acme", "email": "a@b.io"}}});
    assert_eq!(post("/api/v2/organizations", org).await.unwrap().status(), 201);
    assert_eq!(post("/api/v2/organizations/acme/registry-modules", module("vpc", "aws")).await.unwrap().status(), 201);
    let created: serde_json::Value =
        post(&format!("{VPC}/versions"), version("1.0.0")).await.unwrap().json().await.unwrap();
    let link = created["data"]["links"]["upload"].as_str().expect("an upload link").to_owned();
    first.stop().await.unwrap();

    // What the PUT had stored when the process died, before ingest ran.
    let id = link.split('?').next().unwrap().rsplit('/').next().unwrap().to_owned();
    std::fs::write(dir.path().join("uploads").join(&id), module_archive()).unwrap();

    let second = dev_server::start(hangar_tests::options(dir.path()), Config::default()).await.unwrap();
    let read = format!("{}{VPC}/version?module_version=1.0.0", second.url);
    let mut status = serde_json::Value::Null;
    for _ in 0..300 {
        let reply: serde_json::Value =
            client.get(&read).bearer_auth(&admin).send().await.unwrap().json().await.unwrap();
        status = reply["data"]["attributes"]["status"].clone();
        if status != "pending" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, "ok");
    second.stop().await.unwrap();
}
