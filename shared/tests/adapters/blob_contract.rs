//! The object-store contract: one suite, run through the port against S3 (on the moto
//! emulator, see `support`) and against the local files served over HTTP as dev-server does,
//! so a client's upload and download links work the same in both. Uploads and archives are two
//! areas: what a link or `put_file` stores is an upload, read only once copied to an archive.
//! The local adapter also enforces what S3 enforces with its signatures, checked by the
//! local-only cases.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use hangar::app::objects::object_routes;
use hangar::blobs::{BlobError, BlobReader, Blobs, LocalBlobs, ObjectId, S3Blobs, UPLOAD_CONTENT_TYPE};
use reqwest::{StatusCode, Url};
use tokio::io::AsyncReadExt;

const MAX_UPLOAD_BYTES: u64 = 1 << 20;
const VALID: Duration = Duration::from_secs(300);

/// A store and whatever must outlive it.
struct Fixture {
    blobs: Blobs,
    _dir: Option<tempfile::TempDir>,
}

async fn s3() -> Fixture {
    let sdk = support::moto().await.sdk;
    let client = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build());
    let blobs = S3Blobs::new(client, support::unique_name("hangar-blobs"));
    blobs.create_bucket_if_missing().await.expect("create the bucket");
    blobs.create_bucket_if_missing().await.expect("creating an existing bucket is a no-op");
    Fixture { blobs: Arc::new(blobs), _dir: None }
}

/// Local files behind `object_routes` on an ephemeral port.
async fn local_with_limit(max_upload_bytes: u64) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base_url = format!("http://{}", listener.local_addr().expect("bound address"));
    let links = hangar::links::LinkSigner::new(b"contract-test-key".to_vec());
    let sealer = hangar::seal::LocalSealer::open(&dir.path().join("seal.key")).expect("a sealer");
    let blobs = LocalBlobs::new(dir.path(), links, sealer, base_url, max_upload_bytes).expect("local blobs");
    let app = object_routes(blobs.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Fixture { blobs: Arc::new(blobs), _dir: Some(dir) }
}

async fn local() -> Fixture {
    local_with_limit(MAX_UPLOAD_BYTES).await
}

/// Runs every case once per adapter, as `s3::<case>` and `local::<case>`.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod s3 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs the AWS emulator"]
                async fn $case() {
                    let fixture = super::s3().await;
                    super::$case(fixture.blobs.clone()).await;
                }
            )*
        }
        mod local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let fixture = super::local().await;
                    super::$case(fixture.blobs.clone()).await;
                }
            )*
        }
    };
}

contract!(
    upload_open_download_delete,
    missing_object_is_not_found,
    copy_is_independent_of_its_source,
    a_local_file_is_stored_whole,
    uploads_and_archives_are_apart,
    a_blocking_read_sees_the_same_bytes,
    a_sealed_object_is_apart_and_read_back_whole
);

/// A sealed object (a state) reads back as stored, is no archive or upload, is deleted by
/// `delete_sealed` alone, and in S3 has a pre-signed link that serves it decrypted.
async fn a_sealed_object_is_apart_and_read_back_whole(blobs: Blobs) {
    let id = ObjectId::generate();
    let body = payload(100_000, 9);
    blobs.put_sealed(&id, bytes::Bytes::from(body.clone())).await.unwrap();
    assert_eq!(blobs.open_sealed(&id).await.unwrap().to_vec(), body);
    assert!(matches!(read(&blobs, &id).await, Err(BlobError::NotFound)), "no archive of that id");
    if let Some(url) = blobs.sealed_download_url(&id, VALID).await.unwrap() {
        let served = reqwest::get(&url).await.expect("the link answers");
        assert_eq!(served.bytes().await.unwrap().to_vec(), body);
    }
    blobs.delete(&id).await.unwrap();
    assert_eq!(blobs.open_sealed(&id).await.unwrap().len(), body.len(), "delete leaves sealed objects");
    blobs.delete_sealed(&id).await.unwrap();
    assert!(matches!(blobs.open_sealed(&id).await, Err(BlobError::NotFound)));
    blobs.delete_sealed(&id).await.expect("deleting a missing sealed object succeeds");
}

/// Deterministic bytes that are not all alike.
fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed).collect()
}

async fn put(url: &str, content_type: &str, body: Vec<u8>) -> StatusCode {
    let response = reqwest::Client::new()
        .put(url)
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .body(body)
        .send()
        .await
        .expect("PUT reaches the server");
    response.status()
}

async fn upload(blobs: &Blobs, id: &ObjectId, body: Vec<u8>) {
    let url = blobs.upload_url(id, VALID).await.unwrap();
    let status = put(&url, UPLOAD_CONTENT_TYPE, body).await;
    assert!(status.is_success(), "upload answered {status}");
}

/// The archive `id`.
async fn read(blobs: &Blobs, id: &ObjectId) -> Result<Vec<u8>, BlobError> {
    let mut reader = blobs.open(id).await?.into_async();
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).await.expect("read the stream");
    Ok(bytes)
}

/// The upload `id`, read through a copy as ingest reads it.
async fn read_upload(blobs: &Blobs, id: &ObjectId) -> Result<Vec<u8>, BlobError> {
    let copy = ObjectId::generate();
    blobs.copy_upload(id, &copy).await?;
    let bytes = read(blobs, &copy).await;
    blobs.delete(&copy).await.unwrap();
    bytes
}

async fn upload_open_download_delete(blobs: Blobs) {
    let id = ObjectId::generate();
    let body = payload(300_000, 7);
    upload(&blobs, &id, body.clone()).await;
    assert_eq!(blobs.upload_size(&id).await.unwrap(), 300_000);
    assert_eq!(read_upload(&blobs, &id).await.unwrap(), body);
    blobs.copy_upload(&id, &id).await.unwrap();
    assert_eq!(read(&blobs, &id).await.unwrap(), body);

    let url = blobs.download_url(&id, VALID).await.unwrap();
    let response = reqwest::get(&url).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.bytes().await.unwrap(), body);

    blobs.delete(&id).await.unwrap();
    assert!(matches!(read(&blobs, &id).await, Err(BlobError::NotFound)));
    assert!(matches!(read_upload(&blobs, &id).await, Err(BlobError::NotFound)), "the upload goes too");
    blobs.delete(&id).await.unwrap();
    let gone = reqwest::get(&url).await.unwrap().status();
    assert!(gone.is_client_error(), "download of a deleted object answered {gone}");
}

async fn missing_object_is_not_found(blobs: Blobs) {
    let id = ObjectId::generate();
    assert!(matches!(read(&blobs, &id).await, Err(BlobError::NotFound)));
    assert!(matches!(blobs.upload_size(&id).await, Err(BlobError::NotFound)));
    assert!(matches!(read_upload(&blobs, &id).await, Err(BlobError::NotFound)));
    blobs.delete(&id).await.unwrap();
}

/// An upload link stores under `upload/`, a download link reads under `object/`: an upload is
/// never served until copied, and a stray one can expire by its prefix.
async fn uploads_and_archives_are_apart(blobs: Blobs) {
    let id = ObjectId::generate();
    let upload_url = Url::parse(&blobs.upload_url(&id, VALID).await.unwrap()).unwrap();
    assert!(upload_url.path().ends_with(&format!("/upload/{id}")), "{upload_url}");
    let download_url = Url::parse(&blobs.download_url(&id, VALID).await.unwrap()).unwrap();
    assert!(download_url.path().ends_with(&format!("/object/{id}")), "{download_url}");
    upload(&blobs, &id, payload(100, 8)).await;
    assert!(matches!(read(&blobs, &id).await, Err(BlobError::NotFound)), "an upload is not an archive");
    let served = reqwest::get(download_url).await.unwrap().status();
    assert!(served.is_client_error(), "an upload is not served: {served}");
    assert_eq!(read_upload(&blobs, &id).await.unwrap(), payload(100, 8));
}

/// An S3 pre-signed link cannot refuse: a later PUT replaces the object (ingest copies an
/// upload before it reads it, so a replacement never reaches what is served).
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn s3_a_later_upload_replaces() {
    let fixture = s3().await;
    let (blobs, id) = (fixture.blobs.clone(), ObjectId::generate());
    upload(&blobs, &id, payload(1000, 1)).await;
    upload(&blobs, &id, payload(10, 2)).await;
    assert_eq!(read_upload(&blobs, &id).await.unwrap(), payload(10, 2));
}

/// A local link takes one upload: a later PUT is a 409 and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_a_later_upload_is_refused_and_changes_nothing() {
    let fixture = local().await;
    let (blobs, id) = (fixture.blobs.clone(), ObjectId::generate());
    upload(&blobs, &id, payload(1000, 1)).await;
    let url = blobs.upload_url(&id, VALID).await.unwrap();
    assert_eq!(put(&url, UPLOAD_CONTENT_TYPE, payload(10, 2)).await, StatusCode::CONFLICT);
    assert_eq!(read_upload(&blobs, &id).await.unwrap(), payload(1000, 1));
}

async fn copy_is_independent_of_its_source(blobs: Blobs) {
    let (source, copy) = (ObjectId::generate(), ObjectId::generate());
    upload(&blobs, &source, payload(70_000, 3)).await;
    blobs.copy_upload(&source, &copy).await.unwrap();
    let replacement = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(replacement.path(), payload(5, 4)).unwrap();
    blobs.put_file(&source, replacement.path()).await.unwrap();
    assert_eq!(
        read(&blobs, &copy).await.unwrap(),
        payload(70_000, 3),
        "a later change of the source leaves the copy alone"
    );
    blobs.delete(&source).await.unwrap();
    assert_eq!(read(&blobs, &copy).await.unwrap(), payload(70_000, 3));
    let missing = blobs.copy_upload(&ObjectId::generate(), &ObjectId::generate()).await;
    assert!(matches!(missing, Err(BlobError::NotFound)), "{missing:?}");
}

async fn a_local_file_is_stored_whole(blobs: Blobs) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), payload(90_000, 5)).unwrap();
    let id = ObjectId::generate();
    blobs.put_file(&id, file.path()).await.unwrap();
    assert_eq!(blobs.upload_size(&id).await.unwrap(), 90_000);
    assert_eq!(read_upload(&blobs, &id).await.unwrap(), payload(90_000, 5), "stored as an upload");
}

/// Ingest reads an archive on a blocking thread: S3's body through a bridge to the runtime, a
/// local file where it lies.
async fn a_blocking_read_sees_the_same_bytes(blobs: Blobs) {
    let (source, archive) = (ObjectId::generate(), ObjectId::generate());
    upload(&blobs, &source, payload(300_000, 6)).await;
    blobs.copy_upload(&source, &archive).await.unwrap();
    let mut reader = blobs.open(&archive).await.unwrap().into_blocking();
    let bytes = tokio::task::spawn_blocking(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut bytes).map(|_| bytes)
    });
    assert_eq!(bytes.await.unwrap().unwrap(), payload(300_000, 6));
}

/// dev-server's archives are files, read as files: no hop to tokio's blocking pool per read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_archives_open_as_files() {
    let fixture = local().await;
    let (blobs, source, archive) = (fixture.blobs.clone(), ObjectId::generate(), ObjectId::generate());
    upload(&blobs, &source, payload(10, 7)).await;
    blobs.copy_upload(&source, &archive).await.unwrap();
    assert!(matches!(blobs.open(&archive).await, Ok(BlobReader::File(_))));
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn s3_upload_link_signs_only_the_host() {
    let fixture = s3().await;
    let url = fixture.blobs.upload_url(&ObjectId::generate(), VALID).await.unwrap();
    let url = Url::parse(&url).unwrap();
    let signed = url.query_pairs().find(|(name, _)| name == "X-Amz-SignedHeaders").map(|(_, v)| v.into_owned());
    assert_eq!(signed.as_deref(), Some("host"), "clients that send no content type must be able to upload: {url}");
}

/// The link with one character of its signature changed.
fn tampered(url: &str) -> String {
    let mut url = Url::parse(url).unwrap();
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(name, value)| {
            let mut value = value.into_owned();
            if name == "signature" {
                let last = value.pop().expect("a signature");
                value.push(if last == 'a' { 'b' } else { 'a' });
            }
            (name.into_owned(), value)
        })
        .collect();
    url.query_pairs_mut().clear().extend_pairs(pairs);
    url.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_rejects_tampered_links() {
    let fixture = local_with_limit(MAX_UPLOAD_BYTES).await;
    let id = ObjectId::generate();
    let upload_url = fixture.blobs.upload_url(&id, VALID).await.unwrap();
    assert_eq!(put(&tampered(&upload_url), UPLOAD_CONTENT_TYPE, payload(10, 0)).await, StatusCode::FORBIDDEN);
    assert!(matches!(read_upload(&fixture.blobs, &id).await, Err(BlobError::NotFound)));

    upload(&fixture.blobs, &id, payload(10, 0)).await;
    fixture.blobs.copy_upload(&id, &id).await.unwrap();
    let download_url = fixture.blobs.download_url(&id, VALID).await.unwrap();
    assert_eq!(reqwest::get(tampered(&download_url)).await.unwrap().status(), StatusCode::FORBIDDEN);
    let other = ObjectId::generate();
    let swapped = download_url.replace(id.as_str(), other.as_str());
    assert_eq!(reqwest::get(swapped).await.unwrap().status(), StatusCode::FORBIDDEN);
    let as_download = upload_url.replace("/upload/", "/object/");
    assert_eq!(
        reqwest::get(as_download).await.unwrap().status(),
        StatusCode::FORBIDDEN,
        "an upload link's signature is no download link's"
    );
    let as_upload = reqwest::get(upload_url).await.unwrap().status();
    assert!(as_upload.is_client_error(), "an upload link serves nothing: {as_upload}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_rejects_expired_links() {
    let fixture = local_with_limit(MAX_UPLOAD_BYTES).await;
    let id = ObjectId::generate();
    let upload_url = fixture.blobs.upload_url(&id, Duration::from_secs(1)).await.unwrap();
    upload(&fixture.blobs, &id, payload(10, 0)).await;
    fixture.blobs.copy_upload(&id, &id).await.unwrap();
    let download_url = fixture.blobs.download_url(&id, Duration::from_secs(1)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(put(&upload_url, UPLOAD_CONTENT_TYPE, payload(10, 1)).await, StatusCode::FORBIDDEN);
    assert_eq!(reqwest::get(download_url).await.unwrap().status(), StatusCode::FORBIDDEN);
    assert_eq!(read_upload(&fixture.blobs, &id).await.unwrap(), payload(10, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_limits_upload_size() {
    let fixture = local_with_limit(1024).await;
    let id = ObjectId::generate();
    let url = fixture.blobs.upload_url(&id, VALID).await.unwrap();
    assert_eq!(put(&url, UPLOAD_CONTENT_TYPE, payload(8 * 1024, 0)).await, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(matches!(read_upload(&fixture.blobs, &id).await, Err(BlobError::NotFound)), "nothing partial is kept");
    assert_eq!(put(&url, UPLOAD_CONTENT_TYPE, payload(1025, 0)).await, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(matches!(read_upload(&fixture.blobs, &id).await, Err(BlobError::NotFound)));
    upload(&fixture.blobs, &id, payload(1024, 0)).await;
    assert_eq!(read_upload(&fixture.blobs, &id).await.unwrap(), payload(1024, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_accepts_uploads_without_a_content_type() {
    let fixture = local_with_limit(MAX_UPLOAD_BYTES).await;
    let id = ObjectId::generate();
    let url = fixture.blobs.upload_url(&id, VALID).await.unwrap();
    let status = reqwest::Client::new().put(&url).body(payload(10, 0)).send().await.unwrap().status();
    assert_eq!(status, StatusCode::OK, "pytfe uploads with no content type");
    assert_eq!(read_upload(&fixture.blobs, &id).await.unwrap(), payload(10, 0));
}
