//! The object-store port. Two areas: uploads land under `upload/<object-id>` (through a
//! version's upload link, or [`BlobStore::put_file`]), and the archives served for downloads
//! live under `object/<object-id>`, where only ingest's copy of an upload ever puts them. Links
//! are pre-signed and carry no bearer token. The areas are apart so that a stray upload can be
//! expired by age (the bucket's lifecycle rule) while a served archive lives as long as its
//! version. A third area, `sealed/<object-id>`, holds what must be encrypted at rest beyond the
//! bucket's default (workspaces' states). Two adapters: [`S3Blobs`] and [`LocalBlobs`] (files in the data directory, links
//! signed with HMAC and served by dev-server's `/upload/` and `/object/` routes).

mod deployed;
mod local;
mod s3;

use std::io::Read;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncRead;
use tokio_util::io::SyncIoBridge;

pub use deployed::{DeployedBlobs, WithS3, WithoutBlobs};
pub use local::{signing_key, LocalBlobs};
pub use s3::S3Blobs;

/// The content type archives are uploaded and served with. Upload links also take a PUT with
/// no content type at all, as pytfe sends it, so they do not insist on this one.
pub const UPLOAD_CONTENT_TYPE: &str = "application/octet-stream";

/// Where uploads land: the prefix of upload links' keys, which the bucket's ObjectCreated
/// notification and its expiry rule name.
pub const UPLOAD_PREFIX: &str = "upload/";

/// Where the archives served for downloads live.
pub const OBJECT_PREFIX: &str = "object/";

/// Where sealed objects (workspaces' states) live, encrypted under KMS.
pub const SEALED_PREFIX: &str = "sealed/";

/// A stored object, open for reading: a file on this machine, or a stream from the network.
pub enum BlobReader {
    /// Read where it lies. A blocking reader (ingest's walk) reads it directly: through tokio,
    /// each read was a hop to the blocking pool and a copy out of tokio's buffer, which cost
    /// ingest a tenth of its time (BENCHMARKS.md, "Archive ingest").
    File(std::fs::File),
    Stream(Pin<Box<dyn AsyncRead + Send>>),
}

impl BlobReader {
    /// The object as an async stream, whichever it is.
    pub fn into_async(self) -> Pin<Box<dyn AsyncRead + Send>> {
        match self {
            Self::File(file) => Box::pin(tokio::fs::File::from_std(file)),
            Self::Stream(stream) => stream,
        }
    }

    /// The object as a blocking reader, for a blocking thread (`spawn_blocking`); made within
    /// the tokio runtime, which a stream's reads are bridged to.
    pub fn into_blocking(self) -> Box<dyn Read + Send> {
        match self {
            Self::File(file) => Box::new(file),
            Self::Stream(stream) => Box::new(SyncIoBridge::new(stream)),
        }
    }
}

/// The id of a stored object: letters, digits, `-` and `_` only, so it is safe in a key and a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectId(String);

impl ObjectId {
    pub fn parse(raw: &str) -> Option<Self> {
        let valid = !raw.is_empty()
            && raw.len() <= 128
            && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        valid.then(|| ObjectId(raw.to_owned()))
    }

    /// A fresh random id.
    pub fn generate() -> Self {
        ObjectId(crate::ids::random_token(24))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key of the archive `id` in the bucket.
    pub fn key(&self) -> String {
        format!("{OBJECT_PREFIX}{}", self.0)
    }

    /// The key of the sealed object `id` in the bucket.
    pub fn sealed_key(&self) -> String {
        format!("{SEALED_PREFIX}{}", self.0)
    }

    /// The key of the upload `id` in the bucket.
    pub fn upload_key(&self) -> String {
        format!("{UPLOAD_PREFIX}{}", self.0)
    }

    /// The upload a bucket key names (`upload/<id>`), if it names one.
    pub fn from_upload_key(key: &str) -> Option<Self> {
        key.strip_prefix(UPLOAD_PREFIX).and_then(Self::parse)
    }
}

impl std::fmt::Display for ObjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("object not found")]
    NotFound,
    #[error("blob store error: {0}")]
    Backend(String),
    /// An upload went over the size cap (local links only: S3 enforces its own).
    #[error("upload exceeds the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    /// The uploading client stopped sending before the body was complete.
    #[error("upload interrupted: {0}")]
    Interrupted(String),
    /// An upload to an object that already holds one (local links take one upload each).
    #[error("the object already holds an upload")]
    AlreadyStored,
}

impl BlobError {
    pub fn backend(e: impl std::fmt::Display) -> Self {
        BlobError::Backend(e.to_string())
    }
}

#[async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// A link that accepts a `PUT` of the upload `id` (`Content-Type: application/octet-stream`
    /// or none), with no Authorization header.
    async fn upload_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError>;

    /// Stores a local file as the upload `id`, replacing it, as a PUT on its link would
    /// (archives Hangar fetched itself).
    async fn put_file(&self, id: &ObjectId, file: &std::path::Path) -> Result<(), BlobError>;

    /// The upload's size in bytes, read without reading the upload.
    async fn upload_size(&self, id: &ObjectId) -> Result<u64, BlobError>;

    /// The upload `id`, read whole if it holds at most `limit` bytes (else its body is left
    /// unread and empty, and [`ReadUpload::size`] says how large it is): for uploads bounded by
    /// what takes them (a state).
    async fn read_upload(&self, id: &ObjectId, limit: u64) -> Result<ReadUpload, BlobError>;

    /// Removes the upload as [`BlobStore::read_upload`] read it, and only that: in a versioned
    /// bucket the very version (no copy kept behind a delete marker), leaving a later upload to
    /// the same link in place.
    async fn remove_read_upload(&self, id: &ObjectId, read: &ReadUpload) -> Result<(), BlobError>;

    /// Copies the upload `from` to the archive `to` inside the store (no bytes through the
    /// caller), replacing `to`. A later change of the upload leaves the copy alone.
    async fn copy_upload(&self, from: &ObjectId, to: &ObjectId) -> Result<(), BlobError>;

    /// A link that serves the archive `id` to a `GET`.
    async fn download_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError>;

    /// Streams the archive `id`.
    async fn open(&self, id: &ObjectId) -> Result<BlobReader, BlobError>;

    /// Uploads stored here that may not have been ingested yet, for a process that ingests its
    /// own uploads to resume after a restart (dev-server's local links). A store whose uploads
    /// are announced by events (S3) has none to offer: those events are delivered again.
    async fn unannounced_uploads(&self) -> Result<Vec<ObjectId>, BlobError> {
        Ok(Vec::new())
    }

    /// Stores `body` as the sealed object `id`, encrypted at rest: under the stack's KMS key in
    /// S3 (SSE-KMS, under `sealed/`), sealed with the data directory's key locally. Replaces
    /// what `id` held; ids are never reused, so nothing ever does.
    async fn put_sealed(&self, id: &ObjectId, body: bytes::Bytes) -> Result<(), BlobError>;

    /// The sealed object `id`, opened. Sealed objects are bounded by what stores them (a
    /// state's size limit), so they are read whole.
    async fn open_sealed(&self, id: &ObjectId) -> Result<bytes::Bytes, BlobError>;

    /// A link that serves the sealed object `id`, decrypted, to a `GET` with no other
    /// authorization, where the store has one (S3's pre-signed link); `None` where Hangar
    /// serves it itself ([`BlobStore::open_sealed`]).
    async fn sealed_download_url(&self, id: &ObjectId, valid_for: Duration) -> Result<Option<String>, BlobError>;

    /// Removes the sealed object `id`; removing a missing one succeeds.
    async fn delete_sealed(&self, id: &ObjectId) -> Result<(), BlobError>;

    /// Removes what `id` names, the archive and the upload alike (ids are random, so one id is
    /// only ever one of them); removing a missing object succeeds.
    async fn delete(&self, id: &ObjectId) -> Result<(), BlobError>;
}

pub type Blobs = Arc<dyn BlobStore>;

/// An upload read whole (or, over the reader's limit, only looked at).
#[derive(Debug, Clone)]
pub struct ReadUpload {
    /// Empty when over the limit.
    pub body: bytes::Bytes,
    pub size: u64,
    /// The bucket's version of it, where the bucket keeps versions.
    pub version: Option<String>,
}

/// What dev-server's local upload links consult around an upload, standing in for S3's
/// ObjectCreated notification.
#[async_trait]
pub trait UploadHooks: Send + Sync + 'static {
    /// Whether an upload to this object is wanted now. Answering `true` claims the object for
    /// this upload alone: of uploads racing to one link exactly one is accepted, and a link
    /// already used is refused.
    async fn accepts(&self, id: &ObjectId) -> bool;

    /// An accepted upload did not arrive whole: the object may take another upload.
    async fn abandoned(&self, id: &ObjectId);

    /// The upload is stored. Called before the PUT is answered, so it must not hold it long:
    /// what takes a while (a module's ingest) runs after, off the request, as S3's event does in
    /// AWS; what is checked in a moment (a state, bounded) may be settled before the answer, so
    /// that a refusal reaches the client that sent it.
    async fn uploaded(&self, id: &ObjectId) -> Result<(), UploadRefused>;
}

/// Why a stored upload was not taken.
#[derive(Debug, thiserror::Error)]
pub enum UploadRefused {
    /// Not what its link was made for (the detail says how).
    #[error("{0}")]
    Invalid(String),
    /// Taken too late: what it was for was settled otherwise meanwhile.
    #[error("{0}")]
    Superseded(String),
    /// Taking it failed; the link may take it again.
    #[error("{0}")]
    Failed(String),
}
