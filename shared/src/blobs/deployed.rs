//! Which blob adapter a deployed function connects to. The families that keep archives
//! (registry, accounts' cascades, key-rotation's VCS fetches) use S3; the others (agent pools,
//! the agent gateway, the credential broker) use none, and so carry no S3 client in their
//! packages. A type parameter rather than a value makes that a compile-time choice.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::lazy::LazyClient;

use super::{BlobError, BlobReader, BlobStore, Blobs, ObjectId, S3Blobs};

#[async_trait]
pub trait DeployedBlobs {
    /// Connects to the bucket (with `init`, creating it when missing); sealed objects are
    /// encrypted under `kms_key_id` (the bucket's default encryption without one).
    async fn connect(
        sdk: &aws_config::SdkConfig,
        bucket: &str,
        kms_key_id: Option<&str>,
        init: bool,
    ) -> Result<Blobs, BlobError>;
}

/// S3, path-style when an endpoint is configured (moto, MinIO).
pub struct WithS3;

#[async_trait]
impl DeployedBlobs for WithS3 {
    async fn connect(
        sdk: &aws_config::SdkConfig,
        bucket: &str,
        kms_key_id: Option<&str>,
        init: bool,
    ) -> Result<Blobs, BlobError> {
        // Built on first use: most requests of a family that keeps archives touch none.
        let blobs = S3Blobs::new(LazyClient::of_sdk(sdk, s3_client), bucket).sealing_with(kms_key_id);
        if init {
            blobs.create_bucket_if_missing().await?;
        }
        Ok(Arc::new(blobs))
    }
}

fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let path_style = sdk.endpoint_url().is_some();
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(sdk).force_path_style(path_style).build())
}

/// For the families that never read or write an archive: any call is a bug, reported as one.
pub struct WithoutBlobs;

#[async_trait]
impl DeployedBlobs for WithoutBlobs {
    async fn connect(_: &aws_config::SdkConfig, _: &str, _: Option<&str>, _: bool) -> Result<Blobs, BlobError> {
        Ok(Arc::new(NoBlobs))
    }
}

struct NoBlobs;

fn unavailable() -> BlobError {
    BlobError::Backend("this function keeps no archives".into())
}

#[async_trait]
impl BlobStore for NoBlobs {
    async fn upload_url(&self, _: &ObjectId, _: Duration) -> Result<String, BlobError> {
        Err(unavailable())
    }

    async fn download_url(&self, _: &ObjectId, _: Duration) -> Result<String, BlobError> {
        Err(unavailable())
    }

    async fn open(&self, _: &ObjectId) -> Result<BlobReader, BlobError> {
        Err(unavailable())
    }

    async fn upload_size(&self, _: &ObjectId) -> Result<u64, BlobError> {
        Err(unavailable())
    }

    async fn read_upload(&self, _: &ObjectId, _: u64) -> Result<super::ReadUpload, BlobError> {
        Err(unavailable())
    }

    async fn remove_read_upload(&self, _: &ObjectId, _: &super::ReadUpload) -> Result<(), BlobError> {
        Err(unavailable())
    }

    async fn delete(&self, _: &ObjectId) -> Result<(), BlobError> {
        Err(unavailable())
    }

    async fn delete_sealed(&self, _: &ObjectId) -> Result<(), BlobError> {
        Err(unavailable())
    }

    async fn put_sealed(&self, _: &ObjectId, _: bytes::Bytes) -> Result<(), BlobError> {
        Err(unavailable())
    }

    async fn open_sealed(&self, _: &ObjectId) -> Result<bytes::Bytes, BlobError> {
        Err(unavailable())
    }

    async fn sealed_download_url(&self, _: &ObjectId, _: Duration) -> Result<Option<String>, BlobError> {
        Err(unavailable())
    }

    async fn copy_upload(&self, _: &ObjectId, _: &ObjectId) -> Result<(), BlobError> {
        Err(unavailable())
    }

    async fn put_file(&self, _: &ObjectId, _: &std::path::Path) -> Result<(), BlobError> {
        Err(unavailable())
    }
}
