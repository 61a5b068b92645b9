//! The AWS adapter of the object store: one S3 bucket, uploads under `upload/` and archives
//! under `object/`, reached through pre-signed links so that clients move archive bytes straight
//! to and from S3, never through a function.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::error::{DisplayErrorContext, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
use aws_sdk_s3::Client;

use crate::lazy::LazyClient;

use super::{BlobError, BlobReader, BlobStore, ObjectId, ReadUpload};

/// The object store on an S3 bucket.
#[derive(Clone)]
pub struct S3Blobs {
    client: LazyClient<Client>,
    bucket: String,
    /// The KMS key sealed objects are encrypted under (SSE-KMS).
    kms_key_id: Option<String>,
}

impl S3Blobs {
    /// A store on `bucket`, which must exist (see [`S3Blobs::create_bucket_if_missing`]).
    pub fn new(client: impl Into<LazyClient<Client>>, bucket: impl Into<String>) -> Self {
        Self { client: client.into(), bucket: bucket.into(), kms_key_id: None }
    }

    /// The same store, encrypting sealed objects under `kms_key_id` (else the bucket's default).
    pub fn sealing_with(mut self, kms_key_id: Option<&str>) -> Self {
        self.kms_key_id = kms_key_id.map(str::to_owned);
        self
    }

    /// Creates the bucket, in the client's region, unless it exists.
    pub async fn create_bucket_if_missing(&self) -> Result<(), BlobError> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => return Ok(()),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_not_found()) => {}
            Err(e) => return Err(backend(e)),
        }
        let mut request = self.client.create_bucket().bucket(&self.bucket);
        // us-east-1 is the one region that takes no location constraint.
        if let Some(region) = self.client.config().region().map(|r| r.as_ref()).filter(|r| *r != "us-east-1") {
            let location = CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(region))
                .build();
            request = request.create_bucket_configuration(location);
        }
        match request.send().await {
            Err(e) if !e.as_service_error().is_some_and(|e| e.is_bucket_already_owned_by_you()) => Err(backend(e)),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl BlobStore for S3Blobs {
    async fn upload_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError> {
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(id.upload_key())
            // The content type is left out of the signature: go-tfe sends
            // `application/octet-stream` and pytfe sends none, and both must be able to upload.
            .presigned(presigning(valid_for)?)
            .await
            .map_err(backend)?;
        Ok(request.uri().to_owned())
    }

    async fn put_file(&self, id: &ObjectId, file: &std::path::Path) -> Result<(), BlobError> {
        let body = aws_sdk_s3::primitives::ByteStream::from_path(file).await.map_err(BlobError::backend)?;
        let request =
            self.client.put_object().bucket(&self.bucket).key(id.upload_key()).content_type(super::UPLOAD_CONTENT_TYPE);
        request.body(body).send().await.map_err(backend)?;
        Ok(())
    }

    async fn upload_size(&self, id: &ObjectId) -> Result<u64, BlobError> {
        match self.client.head_object().bucket(&self.bucket).key(id.upload_key()).send().await {
            Ok(head) => Ok(head.content_length().unwrap_or(0).max(0) as u64),
            Err(e) if e.as_service_error().is_some_and(|e| e.is_not_found()) => Err(BlobError::NotFound),
            Err(e) => Err(backend(e)),
        }
    }

    async fn read_upload(&self, id: &ObjectId, limit: u64) -> Result<ReadUpload, BlobError> {
        let object = match self.client.get_object().bucket(&self.bucket).key(id.upload_key()).send().await {
            Ok(object) => object,
            Err(e) if e.as_service_error().is_some_and(GetObjectError::is_no_such_key) => {
                return Err(BlobError::NotFound)
            }
            Err(e) => return Err(backend(e)),
        };
        let version = object.version_id().filter(|v| *v != "null").map(str::to_owned);
        // The length S3 declares bounds what the body holds; the body is dropped unread if over.
        let size = object.content_length().unwrap_or(0).max(0) as u64;
        if size > limit {
            return Ok(ReadUpload { body: bytes::Bytes::new(), size, version });
        }
        let body = object.body.collect().await.map_err(BlobError::backend)?.into_bytes();
        Ok(ReadUpload { body, size, version })
    }

    async fn remove_read_upload(&self, id: &ObjectId, read: &ReadUpload) -> Result<(), BlobError> {
        let request = self.client.delete_object().bucket(&self.bucket).key(id.upload_key());
        // The version read, removed for good: a plain delete would keep it behind a marker.
        request.set_version_id(read.version.clone()).send().await.map_err(backend)?;
        Ok(())
    }

    async fn copy_upload(&self, from: &ObjectId, to: &ObjectId) -> Result<(), BlobError> {
        // Keys hold only URL-safe characters, so the copy source needs no escaping.
        let source = format!("{}/{}", self.bucket, from.upload_key());
        match self.client.copy_object().bucket(&self.bucket).copy_source(source).key(to.key()).send().await {
            Err(e) if e.as_service_error().and_then(|e| e.meta().code()) == Some("NoSuchKey") => {
                Err(BlobError::NotFound)
            }
            other => other.map(drop).map_err(backend),
        }
    }

    async fn download_url(&self, id: &ObjectId, valid_for: Duration) -> Result<String, BlobError> {
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(id.key())
            .presigned(presigning(valid_for)?)
            .await
            .map_err(backend)?;
        Ok(request.uri().to_owned())
    }

    async fn open(&self, id: &ObjectId) -> Result<BlobReader, BlobError> {
        match self.client.get_object().bucket(&self.bucket).key(id.key()).send().await {
            Ok(object) => Ok(BlobReader::Stream(Box::pin(object.body.into_async_read()))),
            Err(e) if e.as_service_error().is_some_and(GetObjectError::is_no_such_key) => Err(BlobError::NotFound),
            Err(e) => Err(backend(e)),
        }
    }

    async fn put_sealed(&self, id: &ObjectId, body: bytes::Bytes) -> Result<(), BlobError> {
        let mut request = self.client.put_object().bucket(&self.bucket).key(id.sealed_key());
        if let Some(key) = &self.kms_key_id {
            // A bucket key: S3 asks KMS for a data key per bucket and period, not per object.
            request = request
                .server_side_encryption(aws_sdk_s3::types::ServerSideEncryption::AwsKms)
                .ssekms_key_id(key)
                .bucket_key_enabled(true);
        }
        let body = aws_sdk_s3::primitives::ByteStream::from(body);
        request.content_type("application/json").body(body).send().await.map_err(backend)?;
        Ok(())
    }

    async fn open_sealed(&self, id: &ObjectId) -> Result<bytes::Bytes, BlobError> {
        match self.client.get_object().bucket(&self.bucket).key(id.sealed_key()).send().await {
            Ok(object) => Ok(object.body.collect().await.map_err(BlobError::backend)?.into_bytes()),
            Err(e) if e.as_service_error().is_some_and(GetObjectError::is_no_such_key) => Err(BlobError::NotFound),
            Err(e) => Err(backend(e)),
        }
    }

    async fn sealed_download_url(&self, id: &ObjectId, valid_for: Duration) -> Result<Option<String>, BlobError> {
        let request = self.client.get_object().bucket(&self.bucket).key(id.sealed_key());
        let presigned = request.presigned(presigning(valid_for)?).await.map_err(backend)?;
        Ok(Some(presigned.uri().to_owned()))
    }

    async fn delete_sealed(&self, id: &ObjectId) -> Result<(), BlobError> {
        self.client.delete_object().bucket(&self.bucket).key(id.sealed_key()).send().await.map_err(backend)?;
        Ok(())
    }

    async fn delete(&self, id: &ObjectId) -> Result<(), BlobError> {
        for key in [id.key(), id.upload_key()] {
            self.client.delete_object().bucket(&self.bucket).key(key).send().await.map_err(backend)?;
        }
        Ok(())
    }
}

fn presigning(valid_for: Duration) -> Result<PresigningConfig, BlobError> {
    PresigningConfig::expires_in(valid_for).map_err(BlobError::backend)
}

fn backend<E: std::error::Error + 'static>(err: SdkError<E>) -> BlobError {
    BlobError::Backend(DisplayErrorContext(&err).to_string())
}
