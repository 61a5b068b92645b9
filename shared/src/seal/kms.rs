//! The AWS adapter: KMS Encrypt/Decrypt, the secret bound in as the encryption context.

use std::collections::HashMap;

use aws_sdk_kms::error::DisplayErrorContext;
use aws_sdk_kms::primitives::Blob;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use crate::lazy::LazyClient;

use super::{SealContext, SealError, Sealer, PURPOSE};

const KMS_CONTEXT_KEY: &str = "purpose";
/// The KMS encryption context entries of a format-2 value (what IAM conditions can name).
const KMS_KIND_KEY: &str = "kind";
const KMS_RECORD_KEY: &str = "record";
/// What a format-2 KMS value starts with (base64 never holds a `:`).
const KMS_FORMAT_V2: &str = "v2:";

/// KMS Encrypt/Decrypt with the key given by id, ARN or alias; output `v2:` and the base64 of
/// the ciphertext blob, encrypted with the encryption context `kind`, `record` (format 1: the
/// bare base64, with `purpose` = `hangar-broker-secret`). Decrypt names the key too, so a blob
/// made under another key is refused. KMS does not encrypt an empty plaintext or one over 4096
/// bytes; sealing one is a [`SealError::Kms`].
#[derive(Debug, Clone)]
pub struct KmsSealer {
    client: LazyClient<aws_sdk_kms::Client>,
    key_id: String,
}

impl KmsSealer {
    /// A sealer using the KMS key `key_id` (key id, key ARN, alias name or alias ARN).
    pub fn new(client: impl Into<LazyClient<aws_sdk_kms::Client>>, key_id: impl Into<String>) -> Self {
        Self { client: client.into(), key_id: key_id.into() }
    }

    async fn encrypt(&self, context: HashMap<String, String>, plaintext: &str) -> Result<Vec<u8>, SealError> {
        let output = self
            .client
            .encrypt()
            .key_id(&self.key_id)
            .plaintext(Blob::new(plaintext.as_bytes()))
            .set_encryption_context(Some(context))
            .send()
            .await
            .map_err(|err| SealError::Kms(DisplayErrorContext(&err).to_string()))?;
        let blob = output.ciphertext_blob().ok_or_else(|| SealError::Kms("Encrypt returned no ciphertext".into()))?;
        Ok(blob.as_ref().to_vec())
    }

    /// Opens a value of either format: format 1 with its one purpose, format 2 with
    /// `context` (none given: format 2 does not open).
    async fn decrypt(&self, context: Option<&SealContext>, sealed: &str) -> Result<String, SealError> {
        let (encoded, context) = match (sealed.strip_prefix(KMS_FORMAT_V2), context) {
            (Some(encoded), Some(context)) => (encoded, kms_context(context)),
            (Some(_), None) => return Err(SealError::Corrupt),
            (None, _) => (sealed, legacy_kms_context()),
        };
        let blob = BASE64.decode(encoded).map_err(|_| SealError::Corrupt)?;
        if blob.is_empty() {
            return Err(SealError::Corrupt);
        }
        let output = self
            .client
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(blob))
            .set_encryption_context(Some(context))
            .send()
            .await
            .map_err(|err| {
                let foreign = err
                    .as_service_error()
                    .is_some_and(|e| e.is_invalid_ciphertext_exception() || e.is_incorrect_key_exception());
                if foreign {
                    SealError::Corrupt
                } else {
                    SealError::Kms(DisplayErrorContext(&err).to_string())
                }
            })?;
        let plaintext = output.plaintext().ok_or_else(|| SealError::Kms("Decrypt returned no plaintext".into()))?;
        String::from_utf8(plaintext.as_ref().to_vec()).map_err(|_| SealError::Corrupt)
    }
}

fn kms_context(context: &SealContext) -> HashMap<String, String> {
    HashMap::from([
        (KMS_KIND_KEY.to_owned(), context.kind.as_str().to_owned()),
        (KMS_RECORD_KEY.to_owned(), context.record.clone()),
    ])
}

fn legacy_kms_context() -> HashMap<String, String> {
    HashMap::from([(KMS_CONTEXT_KEY.to_owned(), PURPOSE.to_owned())])
}

#[async_trait::async_trait]
impl Sealer for KmsSealer {
    async fn seal_for(&self, context: &SealContext, plaintext: &str) -> Result<String, SealError> {
        let blob = self.encrypt(kms_context(context), plaintext).await?;
        Ok(format!("{KMS_FORMAT_V2}{}", BASE64.encode(blob)))
    }

    async fn unseal_for(&self, context: &SealContext, sealed: &str) -> Result<String, SealError> {
        self.decrypt(Some(context), sealed).await
    }

    async fn seal(&self, plaintext: &str) -> Result<String, SealError> {
        Ok(BASE64.encode(self.encrypt(legacy_kms_context(), plaintext).await?))
    }

    async fn unseal(&self, sealed: &str) -> Result<String, SealError> {
        self.decrypt(None, sealed).await
    }

    fn is_bound(&self, sealed: &str) -> bool {
        sealed.starts_with(KMS_FORMAT_V2)
    }
}
