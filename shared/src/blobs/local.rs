//! Local blobs: files under the data directory, uploads in `uploads/` and archives in
//! `objects/` (S3's `upload/` and `object/` prefixes), reached through links signed with
//! HMAC-SHA256 over the method, object id and expiry: `PUT /upload/{id}` and `GET /object/{id}`.
//! dev-server serves the links (the HTTP side lives with the routers, `app::objects`); an upload
//! is written to a temporary file and linked into place only once complete.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::{BlobError, BlobReader, BlobStore, ObjectId, ReadUpload};
use crate::links::{LinkSigner, Signed};
use crate::seal::{LocalSealer, SealContext};

const KEY_FILE: &str = "blob-signing.key";

#[derive(Clone)]
pub struct LocalBlobs {
    /// Archives, `object/` in S3.
    objects: PathBuf,
    /// Uploads, `upload/` in S3.
    uploads: PathBuf,
    /// Sealed objects (states), `sealed/` in S3, each sealed whole with the data directory's key.
    sealed: PathBuf,
    sealer: LocalSealer,
    links: LinkSigner,
    base_url: String,
    max_upload_bytes: u64,
}

/// Reads the data directory's signing key, creating it on first use, so every process sharing
/// the directory signs and checks links alike.
pub fn signing_key(data_dir: &Path) -> Result<Vec<u8>, BlobError> {
    let path = data_dir.join(KEY_FILE);
    match std::fs::read(&path) {
        Ok(key) if key.len() >= 32 => Ok(key),
        _ => {
            let key = crate::ids::random_token(64).into_bytes();
            write_private(&path, &key).map_err(BlobError::backend)?;
            // Another process may have won the race to create it: use whichever is on disk.
            std::fs::read(&path).map_err(BlobError::backend)
        }
    }
}

/// Writes a file readable only by its owner.
pub(crate) fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => file.write_all(contents),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

impl LocalBlobs {
    /// Blobs in `dir`: archives in `dir/objects/`, uploads in `dir/uploads/`, sealed objects in
    /// `dir/sealed/` (sealed by `sealer`). `base_url` prefixes the links (empty gives relative
    /// links such as `/object/…`).
    pub fn new(
        dir: &Path,
        links: LinkSigner,
        sealer: LocalSealer,
        base_url: String,
        max_upload_bytes: u64,
    ) -> Result<Self, BlobError> {
        let (objects, uploads, sealed) = (dir.join("objects"), dir.join("uploads"), dir.join("sealed"));
        for dir in [&objects, &uploads, &sealed] {
            crate::owner_only::create_dir_all(dir).map_err(BlobError::backend)?;
        }
        let base_url = base_url.trim_end_matches('/').to_owned();
        Ok(Self { objects, uploads, sealed, sealer, links, base_url, max_upload_bytes })
    }

    /// The same store with links on another base URL (dev-server learns its port after binding).
    pub fn with_base_url(mut self, base_url: &str) -> Self {
        self.base_url = base_url.trim_end_matches('/').to_owned();
        self
    }

    fn path(&self, id: &ObjectId) -> PathBuf {
        self.objects.join(id.as_str())
    }

    fn upload_path(&self, id: &ObjectId) -> PathBuf {
        self.uploads.join(id.as_str())
    }

    fn sealed_path(&self, id: &ObjectId) -> PathBuf {
        self.sealed.join(id.as_str())
    }

    /// What a link signs: the method and the object.
    fn subject(method: &str, id: &ObjectId) -> String {
        format!("{method}\n{id}")
    }

    /// A `PUT` link goes to `/upload/{id}`, a `GET` link to `/object/{id}`.
    fn signed_url(&self, method: &str, id: &ObjectId, valid_for: Duration) -> String {
        let query = self.links.query(&Self::subject(method, id), valid_for);
        let area = if method == "PUT" { "upload" } else { "object" };
        format!("{}/{area}/{id}?{query}", self.base_url)
    }

    /// Whether a link's signature is this store's and has not expired (constant-time compare).
    pub fn verify(&self, method: &str, id: &ObjectId, signed: &Signed) -> bool {
        self.links.verify(&Self::subject(method, id), signed)
    }

    /// Stores an uploaded stream as the upload `id`: written to a temporary file and linked
    /// into place only once complete, so no partial upload is ever visible; over the size cap
    /// it stops at once with [`BlobError::TooLarge`]; an upload that exists already is never
    /// replaced ([`BlobError::AlreadyStored`]).
    pub async fn receive<S, E>(&self, id: &ObjectId, body: S) -> Result<(), BlobError>
    where
        S: futures::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let temp = self.uploads.join(format!(".upload-{}-{}", id, crate::ids::random_token(8)));
        // A hard link, unlike a rename, never replaces: of uploads racing to one object exactly
        // one lands, and the others are refused with nothing changed.
        let result = match write_capped(&temp, body, self.max_upload_bytes).await {
            Ok(()) => match tokio::fs::hard_link(&temp, self.upload_path(id)).await {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(BlobError::AlreadyStored),
                other => other.map_err(BlobError::backend),
            },
            Err(e) => Err(e),
        };
        let _ = tokio::fs::remove_file(&temp).await;
        result
    }
}

async fn write_capped<S, E>(path: &Path, mut body: S, cap: u64) -> Result<(), BlobError>
where
    S: futures::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let opened = crate::owner_only::file_options().write(true).create(true).truncate(true).open(path).await;
    let mut file = opened.map_err(BlobError::backend)?;
    let mut written: u64 = 0;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| BlobError::Interrupted(e.to_string()))?;
        written += chunk.len() as u64;
        if written > cap {
            return Err(BlobError::TooLarge { limit: cap });
        }
        file.write_all(&chunk).await.map_err(BlobError::backend)?;
    }
    file.sync_all().await.map_err(BlobError::backend)
}

#[async_trait]
impl BlobStore for LocalBlobs {
    async fn upload_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError> {
        Ok(self.signed_url("PUT", id, valid_for))
    }

    async fn put_file(&self, id: &ObjectId, file: &Path) -> Result<(), BlobError> {
        let temp = self.uploads.join(format!(".put-{id}-{}", crate::ids::random_token(8)));
        let stored = match tokio::fs::copy(file, &temp).await {
            Ok(_) => tokio::fs::rename(&temp, self.upload_path(id)).await.map_err(BlobError::backend),
            Err(e) => Err(BlobError::backend(e)),
        };
        if stored.is_err() {
            let _ = tokio::fs::remove_file(&temp).await;
        }
        stored
    }

    async fn upload_size(&self, id: &ObjectId) -> Result<u64, BlobError> {
        match tokio::fs::metadata(self.upload_path(id)).await {
            Ok(metadata) => Ok(metadata.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BlobError::NotFound),
            Err(e) => Err(BlobError::backend(e)),
        }
    }

    async fn read_upload(&self, id: &ObjectId, limit: u64) -> Result<ReadUpload, BlobError> {
        // Uploads are only ever linked into place whole, never written in place: the size read
        // is the size of what is read.
        let metadata = match tokio::fs::metadata(self.upload_path(id)).await {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BlobError::NotFound),
            Err(e) => return Err(BlobError::backend(e)),
        };
        let size = metadata.len();
        if size > limit {
            return Ok(ReadUpload { body: bytes::Bytes::new(), size, version: None });
        }
        match tokio::fs::read(self.upload_path(id)).await {
            Ok(body) => Ok(ReadUpload { body: body.into(), size, version: None }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BlobError::NotFound),
            Err(e) => Err(BlobError::backend(e)),
        }
    }

    async fn remove_read_upload(&self, id: &ObjectId, _: &ReadUpload) -> Result<(), BlobError> {
        // A link takes one upload at a time here (a file is never replaced while it is there).
        self.delete(id).await
    }

    async fn unannounced_uploads(&self) -> Result<Vec<ObjectId>, BlobError> {
        let mut entries = tokio::fs::read_dir(&self.uploads).await.map_err(BlobError::backend)?;
        let mut ids = Vec::new();
        // Partly written uploads (`.upload-…`, `.put-…`) are not ids, and are skipped.
        while let Some(entry) = entries.next_entry().await.map_err(BlobError::backend)? {
            ids.extend(entry.file_name().to_str().and_then(ObjectId::parse));
        }
        Ok(ids)
    }

    async fn copy_upload(&self, from: &ObjectId, to: &ObjectId) -> Result<(), BlobError> {
        let temp = self.objects.join(format!(".copy-{to}-{}", crate::ids::random_token(8)));
        // Files are only ever replaced by a rename, never written in place, so a hard link is
        // a copy that costs nothing; a filesystem without links gets a byte copy.
        let source = self.upload_path(from);
        let linked = match tokio::fs::hard_link(&source, &temp).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => tokio::fs::copy(&source, &temp).await.map(drop),
            other => other,
        };
        let copied = match linked {
            Ok(()) => tokio::fs::rename(&temp, self.path(to)).await.map_err(BlobError::backend),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BlobError::NotFound),
            Err(e) => Err(BlobError::backend(e)),
        };
        if copied.is_err() {
            let _ = tokio::fs::remove_file(&temp).await;
        }
        copied
    }

    async fn download_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError> {
        Ok(self.signed_url("GET", id, valid_for))
    }

    async fn open(&self, id: &ObjectId) -> Result<BlobReader, BlobError> {
        match tokio::fs::File::open(self.path(id)).await {
            Ok(file) => Ok(BlobReader::File(file.into_std().await)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BlobError::NotFound),
            Err(e) => Err(BlobError::backend(e)),
        }
    }

    async fn put_sealed(&self, id: &ObjectId, body: bytes::Bytes) -> Result<(), BlobError> {
        let sealed = self.sealer.seal_bytes(&SealContext::sealed_object(id.as_str()), &body);
        let temp = self.sealed.join(format!(".seal-{id}-{}", crate::ids::random_token(8)));
        let written = async {
            let mut file = crate::owner_only::file_options().write(true).create_new(true).open(&temp).await?;
            file.write_all(&sealed).await?;
            file.sync_all().await?;
            tokio::fs::rename(&temp, self.sealed_path(id)).await
        };
        let result = written.await.map_err(BlobError::backend);
        if result.is_err() {
            let _ = tokio::fs::remove_file(&temp).await;
        }
        result
    }

    async fn open_sealed(&self, id: &ObjectId) -> Result<bytes::Bytes, BlobError> {
        let sealed = match tokio::fs::read(self.sealed_path(id)).await {
            Ok(sealed) => sealed,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BlobError::NotFound),
            Err(e) => return Err(BlobError::backend(e)),
        };
        let context = SealContext::sealed_object(id.as_str());
        self.sealer.open_bytes(&context, &sealed).map(bytes::Bytes::from).map_err(BlobError::backend)
    }

    async fn sealed_download_url(&self, _: &ObjectId, _: Duration) -> Result<Option<String>, BlobError> {
        Ok(None)
    }

    async fn delete_sealed(&self, id: &ObjectId) -> Result<(), BlobError> {
        match tokio::fs::remove_file(self.sealed_path(id)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BlobError::backend(e)),
            _ => Ok(()),
        }
    }

    async fn delete(&self, id: &ObjectId) -> Result<(), BlobError> {
        for path in [self.path(id), self.upload_path(id)] {
            match tokio::fs::remove_file(path).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(BlobError::backend(e)),
                _ => {}
            }
        }
        Ok(())
    }
}
