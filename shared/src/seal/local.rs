//! The dev-server adapter: AES-256-GCM under a key kept in a file of its own beside the data,
//! and the key-file helpers it shares with the local identity signer.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use rand::rngs::OsRng;
use rand::RngCore;

use super::{SealContext, SealError, Sealer, PURPOSE};

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
        BASE64.encode(self.encrypt_bytes(format, aad, plaintext.as_bytes()))
    }

    /// format byte || nonce || ciphertext+tag.
    fn encrypt_bytes(&self, format: u8, aad: &[u8], plaintext: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        OsRng.fill_bytes(&mut nonce);
        let payload = Payload { msg: plaintext, aad };
        let ciphertext = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), payload)
            .expect("AES-GCM encrypts any plaintext under 64 GiB");
        let mut out = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
        out.push(format);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        out
    }

    /// Seals a whole object (a state file) for `context`, as raw bytes rather than printable
    /// text: what local blobs keep on disk where S3 would encrypt under KMS.
    pub fn seal_bytes(&self, context: &SealContext, plaintext: &[u8]) -> Vec<u8> {
        self.encrypt_bytes(LOCAL_FORMAT_V2, &context.associated_data(), plaintext)
    }

    /// Opens what [`LocalSealer::seal_bytes`] sealed for the same context.
    pub fn open_bytes(&self, context: &SealContext, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let Some((&LOCAL_FORMAT_V2, rest)) = sealed.split_first() else { return Err(SealError::Corrupt) };
        if rest.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Corrupt);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let payload = Payload { msg: ciphertext, aad: &context.associated_data() };
        self.cipher.decrypt(Nonce::from_slice(nonce), payload).map_err(|_| SealError::Corrupt)
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

#[cfg(test)]
mod tests {
    use super::super::tests::key_path;
    use super::*;

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
