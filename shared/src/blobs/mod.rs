//! The object-store port: archives live under `object/<object-id>`, reached by pre-signed
//! links that carry no bearer token. Two adapters: [`S3Blobs`] and [`LocalBlobs`] (files in the
//! data directory, links signed with HMAC and served by dev-server's `/object/` routes).

mod deployed;
mod local;
mod s3;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncRead;

pub use deployed::{DeployedBlobs, WithS3, WithoutBlobs};
pub use local::{signing_key, LocalBlobs};
pub use s3::S3Blobs;

/// The content type archives are uploaded and served with. Upload links also take a PUT with
/// no content type at all, as pytfe sends it, so they do not insist on this one.
pub const UPLOAD_CONTENT_TYPE: &str = "application/octet-stream";

/// A streaming reader over a stored object.
pub type BlobReader = Pin<Box<dyn AsyncRead + Send>>;

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

    /// The object's key in the bucket.
    pub fn key(&self) -> String {
        format!("object/{}", self.0)
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
    /// A link that accepts a `PUT` of the object's bytes (`Content-Type: application/octet-stream`
    /// or none), with no Authorization header.
    async fn upload_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError>;

    /// A link that serves the object to a `GET`.
    async fn download_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError>;

    /// Streams the stored object.
    async fn open(&self, id: &ObjectId) -> Result<BlobReader, BlobError>;

    /// The stored object's size in bytes, read without reading the object.
    async fn size(&self, id: &ObjectId) -> Result<u64, BlobError>;

    /// Removes the object; removing a missing object succeeds.
    async fn delete(&self, id: &ObjectId) -> Result<(), BlobError>;

    /// Copies an object inside the store (no bytes through the caller), replacing `to`.
    async fn copy(&self, from: &ObjectId, to: &ObjectId) -> Result<(), BlobError>;

    /// Stores a local file as the object, replacing it (archives Hangar fetched itself).
    async fn put_file(&self, id: &ObjectId, file: &std::path::Path) -> Result<(), BlobError>;
}

pub type Blobs = Arc<dyn BlobStore>;

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

    /// Runs after the object is stored, before the PUT is answered.
    async fn uploaded(&self, id: &ObjectId);
}
