//! Encryption at rest for the secrets Hangar stores (the broker's cloud secret keys, VCS
//! connections' provider tokens, webhook secrets), so that the store's contents alone (a table
//! export, a backup, a copied database) do not give them away. In AWS the key never leaves KMS;
//! dev-server has no KMS, so it keeps an AES-256-GCM key in a file of its own beside its data.
//!
//! Every value is sealed for a [`SealContext`]: the kind of secret and the id of the record that
//! holds it, bound in as GCM associated data and as the KMS encryption context. A sealed value
//! copied into another record, or read as another kind of secret, does not open; and in AWS, IAM
//! can allow each function only the kinds it needs (`kms:EncryptionContext:kind`).
//!
//! Values sealed before contexts existed (format 1: one purpose, `hangar-broker-secret`, for
//! everything) still open wherever they are read, so nothing already stored becomes unreadable.
//! Each family's scheduled job rewrites its own once ([`rebind`]: `key-rotation` the broker's,
//! `registry-sync` the registry's, dev-server both at start) and records that it finished; from
//! then on the deployment need not let any function open format 1 (template.yaml's
//! `LegacySealedValues`). The formats tell themselves apart: a local value by its first byte, a
//! KMS value by the `v2:` prefix of the bound format.

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use aws_sdk_kms::error::DisplayErrorContext;
use aws_sdk_kms::primitives::Blob;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use rand::rngs::OsRng;
use rand::RngCore;

use crate::lazy::LazyClient;

/// What every format-1 value was sealed for: its AES-GCM associated data, and the value of its
/// KMS encryption context's `purpose` entry.
const PURPOSE: &str = "hangar-broker-secret";

const KMS_CONTEXT_KEY: &str = "purpose";
/// The KMS encryption context entries of a format-2 value (what IAM conditions can name).
const KMS_KIND_KEY: &str = "kind";
const KMS_RECORD_KEY: &str = "record";
/// What a format-2 KMS value starts with (base64 never holds a `:`).
const KMS_FORMAT_V2: &str = "v2:";

/// The first byte of a [`LocalSealer`] value: format 1 (one purpose), format 2 (a context).
const LOCAL_FORMAT_V1: u8 = 1;
const LOCAL_FORMAT_V2: u8 = 2;

const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;

/// How long [`LocalSealer::open`] waits for a key file that another process has just created to
/// hold its whole key.
const KEY_FILE_WAIT: Duration = Duration::from_secs(1);
const KEY_FILE_POLL: Duration = Duration::from_millis(20);

/// The kinds of secret Hangar seals, each bound into its sealed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// A broker mount's `config/root` secret key; the record is the mount's uuid.
    BrokerRootKey,
    /// A broker static role's secret key; the record is `<mount-uuid>/<role name>`.
    StaticRoleKey,
    /// A VCS connection's provider token; the record is its OAuth token's `ot-` id.
    OAuthToken,
    /// A VCS module's webhook secret; the record is the webhook's uuid.
    WebhookSecret,
}

impl SecretKind {
    /// Its name in associated data and in the KMS encryption context.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::BrokerRootKey => "broker-root-key",
            SecretKind::StaticRoleKey => "broker-static-role-key",
            SecretKind::OAuthToken => "oauth-token",
            SecretKind::WebhookSecret => "webhook-secret",
        }
    }
}

/// What a sealed value is and where it belongs: it opens only for the same kind and record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealContext {
    kind: SecretKind,
    record: String,
}

impl SealContext {
    pub fn new(kind: SecretKind, record: impl Into<String>) -> Self {
        Self { kind, record: record.into() }
    }

    /// The secret key of a broker mount's `config/root`.
    pub fn broker_root_key(mount_uuid: &str) -> Self {
        Self::new(SecretKind::BrokerRootKey, mount_uuid)
    }

    /// The secret key of a broker static role (a mount's uuid holds no `/`).
    pub fn static_role_key(mount_uuid: &str, role: &str) -> Self {
        Self::new(SecretKind::StaticRoleKey, format!("{mount_uuid}/{role}"))
    }

    /// The provider token of a VCS connection, by its OAuth token's id.
    pub fn oauth_token(oauth_token_id: &str) -> Self {
        Self::new(SecretKind::OAuthToken, oauth_token_id)
    }

    /// The webhook secret of a VCS module, by its webhook's uuid.
    pub fn webhook_secret(webhook_uuid: &str) -> Self {
        Self::new(SecretKind::WebhookSecret, webhook_uuid)
    }

    pub fn kind(&self) -> SecretKind {
        self.kind
    }

    pub fn record(&self) -> &str {
        &self.record
    }

    /// GCM associated data of a format-2 value: no kind holds a NUL, and the record comes last,
    /// so two contexts never share their bytes.
    fn associated_data(&self) -> Vec<u8> {
        [b"hangar\0".as_slice(), self.kind.as_str().as_bytes(), b"\0", self.record.as_bytes()].concat()
    }
}

/// Why a secret could not be sealed or unsealed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The sealed value is not one this sealer produced for this context: not base64,
    /// truncated, altered, sealed under another key, or for another kind of secret or record.
    #[error("sealed secret is malformed or was not sealed with this key")]
    Corrupt,
    /// The local key file could not be created or read, or does not hold a 32-byte key.
    #[error("key file {path}: {reason}")]
    KeyFile { path: String, reason: String },
    /// KMS refused or failed the request (other than for a value it cannot decrypt).
    #[error("KMS: {0}")]
    Kms(String),
}

/// Encrypts secrets for storage and decrypts them again.
#[async_trait::async_trait]
pub trait Sealer: Send + Sync + 'static {
    /// Encrypts a secret for storage, bound to `context`; the result is printable and carries
    /// what unsealing needs (format, nonce / KMS blob).
    async fn seal_for(&self, context: &SealContext, plaintext: &str) -> Result<String, SealError>;

    /// Decrypts a value [`Sealer::seal_for`] produced with the same key and context, or a
    /// format-1 value (sealed before contexts existed); anything else is [`SealError::Corrupt`].
    async fn unseal_for(&self, context: &SealContext, sealed: &str) -> Result<String, SealError>;

    /// Encrypts a secret in format 1, bound to no record, as values were sealed before contexts
    /// existed: no call site stores one any more (tests plant them, to show they still open
    /// and are rebound); everything uses [`Sealer::seal_for`].
    async fn seal(&self, plaintext: &str) -> Result<String, SealError>;

    /// Decrypts a format-1 value; a bound one is [`SealError::Corrupt`] here, as it names a
    /// context this call does not give.
    async fn unseal(&self, sealed: &str) -> Result<String, SealError>;

    /// Whether `sealed` is in the bound format (format 2), from its form alone: false for a
    /// format-1 value, and for anything this sealer cannot have produced.
    fn is_bound(&self, sealed: &str) -> bool;
}

/// What [`rebind`] found a stored value to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rebound {
    /// Bound already: nothing to do.
    Bound,
    /// A format-1 value, sealed again for its context: store this in its place.
    Rewritten(String),
    /// A value that opens nowhere (not this key's, damaged): left as it is, it gives nothing away.
    Unreadable,
}

/// A format-1 value opened and sealed again for `context`, the record that holds it: what the
/// reseal passes write in its place (on the condition that the record still holds `sealed`).
pub async fn rebind(sealer: &dyn Sealer, context: &SealContext, sealed: &str) -> Result<Rebound, SealError> {
    if sealer.is_bound(sealed) {
        return Ok(Rebound::Bound);
    }
    match sealer.unseal(sealed).await {
        Ok(plaintext) => Ok(Rebound::Rewritten(sealer.seal_for(context, &plaintext).await?)),
        Err(SealError::Corrupt) => Ok(Rebound::Unreadable),
        Err(other) => Err(other),
    }
}

/// What one reseal pass over a family's records did. The pass has finished when nothing is
/// `left`: then no format-1 value of the family remains that could still be opened.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resealed {
    /// Format-1 values rewritten bound to their records.
    pub rewritten: usize,
    /// Format-1 values that open nowhere, left as they are (logged by kind and record).
    pub unreadable: usize,
    /// Format-1 values still there: a concurrent change won, or the run's bound was reached.
    pub left: usize,
}

impl Resealed {
    pub fn finished(&self) -> bool {
        self.left == 0
    }

    /// Counts one value's outcome: `written` tells whether its conditional write went through.
    pub fn count(&mut self, outcome: &Rebound, written: bool) {
        match (outcome, written) {
            (Rebound::Bound, _) => {}
            (Rebound::Unreadable, _) => self.unreadable += 1,
            (Rebound::Rewritten(_), true) => self.rewritten += 1,
            (Rebound::Rewritten(_), false) => self.left += 1,
        }
    }
}

/// Format-1 values a pass rewrites in one run at most (two KMS calls and a write each); the
/// rest are left to the next run.
pub const RESEAL_PER_RUN: usize = 500;

/// A sealer shared by the handlers of a process.
pub type SharedSealer = Arc<dyn Sealer>;

/// AES-256-GCM with a 32-byte key kept in a file readable only by its owner (mode 0600), created
/// on first use (create_new, so several processes sharing the directory agree on one key: if
/// creation races, read the winner's file; an existing file readable by others is made
/// owner-only). Random 96-bit nonce per seal; output = base64(format byte || nonce ||
/// ciphertext+tag), the context as associated data. A tampered or foreign sealed value →
/// [`SealError::Corrupt`].
#[derive(Clone)]
pub struct LocalSealer {
    cipher: Aes256Gcm,
    key_file: PathBuf,
}

impl fmt::Debug for LocalSealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalSealer").field("key_file", &self.key_file).finish_non_exhaustive()
    }
}

impl LocalSealer {
    /// Opens the key in `key_file`, creating the file with a fresh random key if it does not
    /// exist. Its directory must exist. Blocks (up to about a second) when another process has
    /// just created the file and not yet written its key.
    pub fn open(key_file: &Path) -> Result<Self, SealError> {
        let key = secret_key_file(key_file)?;
        let cipher = Aes256Gcm::new_from_slice(&key).map_err(|_| key_file_error(key_file, "bad key length"))?;
        Ok(Self { cipher, key_file: key_file.to_path_buf() })
    }
}

/// The 32 random bytes in the key file `path`, created owner-only with new random bytes when it
/// does not exist (another process creating it meanwhile is waited for): the local sealer's key,
/// and the local identity signer's.
pub fn secret_key_file(path: &Path) -> Result<[u8; KEY_LEN], SealError> {
    match create_key_file(path) {
        Ok(key) => Ok(key),
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            restrict_to_owner(path);
            read_key_file(path)
        }
        Err(err) => Err(key_file_error(path, format!("cannot create: {err}"))),
    }
}

/// Creates `path` (failing with `AlreadyExists` if it is there) and writes a new random key to it.
fn create_key_file(path: &Path) -> std::io::Result<[u8; KEY_LEN]> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    let mut key = [0u8; KEY_LEN];
    OsRng.fill_bytes(&mut key);
    if let Err(err) = write_key(&mut file, &key) {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(err);
    }
    Ok(key)
}

/// Makes a key file an earlier version left readable by others owner-only (mode 0600). A file
/// this process may not change is left as it is, with a warning: it still holds the key.
pub fn restrict_to_owner(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(metadata) = std::fs::metadata(path) else { return };
        if metadata.permissions().mode() & 0o077 != 0 {
            if let Err(err) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
                tracing::warn!(path = %path.display(), error = %err, "key file is readable by others and cannot be made owner-only");
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn write_key(file: &mut File, key: &[u8]) -> std::io::Result<()> {
    file.write_all(key)?;
    file.sync_all()
}

/// Reads an existing key file, waiting briefly while it is shorter than a key, as it is between
/// another process creating it and writing the key.
fn read_key_file(path: &Path) -> Result<[u8; KEY_LEN], SealError> {
    let mut waited = Duration::ZERO;
    loop {
        let bytes = std::fs::read(path).map_err(|err| key_file_error(path, format!("cannot read: {err}")))?;
        if let Ok(key) = <[u8; KEY_LEN]>::try_from(bytes.as_slice()) {
            return Ok(key);
        }
        if bytes.len() > KEY_LEN || waited >= KEY_FILE_WAIT {
            return Err(key_file_error(path, format!("holds {} bytes, expected a {KEY_LEN}-byte key", bytes.len())));
        }
        std::thread::sleep(KEY_FILE_POLL);
        waited += KEY_FILE_POLL;
    }
}

fn key_file_error(path: &Path, reason: impl Into<String>) -> SealError {
    SealError::KeyFile { path: path.display().to_string(), reason: reason.into() }
}

impl LocalSealer {
    fn encrypt(&self, format: u8, aad: &[u8], plaintext: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        OsRng.fill_bytes(&mut nonce);
        let payload = Payload { msg: plaintext.as_bytes(), aad };
        let ciphertext = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), payload)
            .expect("AES-GCM encrypts any plaintext under 64 GiB");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
        out.push(format);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        BASE64.encode(out)
    }

    /// Opens a value of either format: format 1 with its one purpose, format 2 with `context`'s
    /// associated data (none given: format 2 does not open).
    fn decrypt(&self, context: Option<&SealContext>, sealed: &str) -> Result<String, SealError> {
        let raw = BASE64.decode(sealed).map_err(|_| SealError::Corrupt)?;
        let aad = match (raw.first(), context) {
            (Some(&LOCAL_FORMAT_V1), _) => PURPOSE.as_bytes().to_vec(),
            (Some(&LOCAL_FORMAT_V2), Some(context)) => context.associated_data(),
            _ => return Err(SealError::Corrupt),
        };
        let rest = &raw[1..];
        if rest.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Corrupt);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let payload = Payload { msg: ciphertext, aad: &aad };
        let plaintext = self.cipher.decrypt(Nonce::from_slice(nonce), payload).map_err(|_| SealError::Corrupt)?;
        String::from_utf8(plaintext).map_err(|_| SealError::Corrupt)
    }
}

#[async_trait::async_trait]
impl Sealer for LocalSealer {
    async fn seal_for(&self, context: &SealContext, plaintext: &str) -> Result<String, SealError> {
        Ok(self.encrypt(LOCAL_FORMAT_V2, &context.associated_data(), plaintext))
    }

    async fn unseal_for(&self, context: &SealContext, sealed: &str) -> Result<String, SealError> {
        self.decrypt(Some(context), sealed)
    }

    async fn seal(&self, plaintext: &str) -> Result<String, SealError> {
        Ok(self.encrypt(LOCAL_FORMAT_V1, PURPOSE.as_bytes(), plaintext))
    }

    async fn unseal(&self, sealed: &str) -> Result<String, SealError> {
        self.decrypt(None, sealed)
    }

    fn is_bound(&self, sealed: &str) -> bool {
        BASE64.decode(sealed).is_ok_and(|raw| raw.first() == Some(&LOCAL_FORMAT_V2))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn key_path(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("broker.key")
    }

    #[tokio::test]
    async fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        for secret in ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "naïve ✓ secret"] {
            let sealed = sealer.seal(secret).await.unwrap();
            assert_eq!(sealer.unseal(&sealed).await.unwrap(), secret);
        }
    }

    #[tokio::test]
    async fn output_is_versioned_base64_with_nonce_and_tag() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        let sealed = sealer.seal("abc").await.unwrap();
        let raw = BASE64.decode(&sealed).unwrap();
        assert_eq!(raw[0], LOCAL_FORMAT_V1);
        assert_eq!(raw.len(), 1 + NONCE_LEN + 3 + TAG_LEN);
    }

    #[tokio::test]
    async fn two_seals_of_one_value_differ() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        let first = sealer.seal("same secret").await.unwrap();
        let second = sealer.seal("same secret").await.unwrap();
        assert_ne!(first, second);
        assert_ne!(BASE64.decode(&first).unwrap()[1..1 + NONCE_LEN], BASE64.decode(&second).unwrap()[1..1 + NONCE_LEN]);
    }

    #[tokio::test]
    async fn any_altered_byte_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        let raw = BASE64.decode(sealer.seal("secret").await.unwrap()).unwrap();
        for i in 0..raw.len() {
            let mut tampered = raw.clone();
            tampered[i] ^= 0x01;
            let result = sealer.unseal(&BASE64.encode(&tampered)).await;
            assert!(matches!(result, Err(SealError::Corrupt)), "byte {i}: {result:?}");
        }
        let truncated = BASE64.encode(&raw[..raw.len() - 1]);
        assert!(matches!(sealer.unseal(&truncated).await, Err(SealError::Corrupt)));
    }

    #[tokio::test]
    async fn value_sealed_under_another_key_file_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let ours = LocalSealer::open(&dir.path().join("ours.key")).unwrap();
        let theirs = LocalSealer::open(&dir.path().join("theirs.key")).unwrap();
        let sealed = theirs.seal("secret").await.unwrap();
        assert!(matches!(ours.unseal(&sealed).await, Err(SealError::Corrupt)));
    }

    #[tokio::test]
    async fn value_sealed_for_another_purpose_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_path(&dir);
        let sealer = LocalSealer::open(&path).unwrap();
        let key = std::fs::read(&path).unwrap();
        let cipher = Aes256Gcm::new_from_slice(&key).unwrap();
        let nonce = [7u8; NONCE_LEN];
        let payload = Payload { msg: b"secret".as_slice(), aad: b"something-else".as_slice() };
        let mut raw = vec![LOCAL_FORMAT_V1];
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&cipher.encrypt(Nonce::from_slice(&nonce), payload).unwrap());
        assert!(matches!(sealer.unseal(&BASE64.encode(raw)).await, Err(SealError::Corrupt)));
    }

    #[tokio::test]
    async fn key_file_is_created_owner_only_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_path(&dir);
        let first = LocalSealer::open(&path).unwrap();
        let key = std::fs::read(&path).unwrap();
        assert_eq!(key.len(), KEY_LEN);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let sealed = first.seal("secret").await.unwrap();

        let second = LocalSealer::open(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), key);
        assert_eq!(second.unseal(&sealed).await.unwrap(), "secret");
    }

    #[tokio::test]
    async fn racing_opens_agree_on_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_path(&dir);
        let sealers: Vec<LocalSealer> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8).map(|_| scope.spawn(|| LocalSealer::open(&path).unwrap())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let sealed = sealers[0].seal("secret").await.unwrap();
        for sealer in &sealers {
            assert_eq!(sealer.unseal(&sealed).await.unwrap(), "secret");
        }
    }

    #[tokio::test]
    async fn garbage_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        let mut wrong_version = BASE64.decode(sealer.seal("secret").await.unwrap()).unwrap();
        wrong_version[0] = 3;
        let garbage = [
            String::new(),
            "not base64 at all!".to_owned(),
            "secret".to_owned(),
            BASE64.encode([LOCAL_FORMAT_V1]),
            BASE64.encode([LOCAL_FORMAT_V1; 1 + NONCE_LEN + TAG_LEN - 1]),
            BASE64.encode([0u8; 64]),
            BASE64.encode(wrong_version),
        ];
        for input in garbage {
            let result = sealer.unseal(&input).await;
            assert!(matches!(result, Err(SealError::Corrupt)), "{input:?}: {result:?}");
        }
    }

    #[tokio::test]
    async fn a_bound_value_opens_only_for_its_kind_and_record() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        let context = SealContext::oauth_token("ot-one");
        let sealed = sealer.seal_for(&context, "secret").await.unwrap();
        assert_eq!(BASE64.decode(&sealed).unwrap()[0], LOCAL_FORMAT_V2);
        assert_eq!(sealer.unseal_for(&context, &sealed).await.unwrap(), "secret");
        for other in [
            SealContext::oauth_token("ot-two"),
            SealContext::oauth_token("ot-one "),
            SealContext::webhook_secret("ot-one"),
            SealContext::static_role_key("ot", "one"),
            SealContext::broker_root_key("ot-one"),
        ] {
            let result = sealer.unseal_for(&other, &sealed).await;
            assert!(matches!(result, Err(SealError::Corrupt)), "{other:?}: {result:?}");
        }
        let unbound = sealer.unseal(&sealed).await;
        assert!(matches!(unbound, Err(SealError::Corrupt)), "a bound value needs its context: {unbound:?}");
        let mut relabelled = BASE64.decode(&sealed).unwrap();
        relabelled[0] = LOCAL_FORMAT_V1;
        let result = sealer.unseal_for(&context, &BASE64.encode(relabelled)).await;
        assert!(matches!(result, Err(SealError::Corrupt)), "nor does it open as format 1: {result:?}");
    }

    #[tokio::test]
    async fn a_value_sealed_before_contexts_still_opens_for_any() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        let before = sealer.seal("secret").await.unwrap();
        assert_eq!(BASE64.decode(&before).unwrap()[0], LOCAL_FORMAT_V1);
        assert_eq!(sealer.unseal(&before).await.unwrap(), "secret");
        for context in [SealContext::broker_root_key("m"), SealContext::static_role_key("m", "r")] {
            assert_eq!(sealer.unseal_for(&context, &before).await.unwrap(), "secret");
        }
    }

    #[tokio::test]
    async fn rebind_seals_a_format_1_value_for_its_context_and_leaves_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        let context = SealContext::webhook_secret("hook");
        let legacy = sealer.seal("secret").await.unwrap();
        assert!(!sealer.is_bound(&legacy));
        let Rebound::Rewritten(bound) = rebind(&sealer, &context, &legacy).await.unwrap() else { panic!("rewritten") };
        assert!(sealer.is_bound(&bound));
        assert_eq!(sealer.unseal_for(&context, &bound).await.unwrap(), "secret");
        assert!(matches!(sealer.unseal(&bound).await, Err(SealError::Corrupt)), "it no longer opens unbound");
        assert_eq!(rebind(&sealer, &context, &bound).await.unwrap(), Rebound::Bound);
        let other = LocalSealer::open(&dir.path().join("other.key")).unwrap();
        let foreign = other.seal("secret").await.unwrap();
        assert_eq!(rebind(&sealer, &context, &foreign).await.unwrap(), Rebound::Unreadable);
        let mut tally = Resealed::default();
        tally.count(&Rebound::Rewritten(bound.clone()), false);
        assert!(!tally.finished(), "a value a concurrent change kept is left for the next run");
    }

    #[test]
    fn contexts_do_not_share_their_associated_data() {
        let contexts = [
            SealContext::static_role_key("m", "a"),
            SealContext::broker_root_key("m/a"),
            SealContext::oauth_token("a"),
            SealContext::oauth_token("a\0"),
            SealContext::webhook_secret("a"),
        ];
        for (i, one) in contexts.iter().enumerate() {
            for other in &contexts[i + 1..] {
                assert_ne!(one.associated_data(), other.associated_data(), "{one:?} {other:?}");
            }
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_readable_by_others_is_made_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = key_path(&dir);
        drop(LocalSealer::open(&path).unwrap());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        LocalSealer::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn key_file_of_the_wrong_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_path(&dir);
        std::fs::write(&path, [0u8; KEY_LEN + 1]).unwrap();
        let err = LocalSealer::open(&path).unwrap_err();
        assert!(matches!(&err, SealError::KeyFile { reason, .. } if reason.contains("33 bytes")), "{err}");
    }

    #[test]
    fn missing_directory_is_a_key_file_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent").join("broker.key");
        let err = LocalSealer::open(&path).unwrap_err();
        assert!(matches!(&err, SealError::KeyFile { path: p, .. } if p.ends_with("broker.key")), "{err}");
    }

    #[test]
    fn debug_does_not_show_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = LocalSealer::open(&key_path(&dir)).unwrap();
        let shown = format!("{sealer:?}");
        assert!(shown.starts_with("LocalSealer { key_file: ") && shown.ends_with(", .. }"), "{shown}");
    }
}
