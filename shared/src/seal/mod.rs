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

mod kms;
mod local;

use std::sync::Arc;

pub use kms::KmsSealer;
pub use local::{restrict_to_owner, secret_key_file, LocalSealer};

/// What every format-1 value was sealed for: its AES-GCM associated data, and the value of its
/// KMS encryption context's `purpose` entry.
const PURPOSE: &str = "hangar-broker-secret";

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
    /// A stored object sealed whole (a workspace's state); the record is the object's id. Only
    /// local blobs seal with it: in S3 the object is encrypted under KMS by S3 itself.
    SealedObject,
    /// A workspace variable's sensitive value; the record is the variable's `var-` id.
    WorkspaceVariable,
}

impl SecretKind {
    /// Its name in associated data and in the KMS encryption context.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::BrokerRootKey => "broker-root-key",
            SecretKind::StaticRoleKey => "broker-static-role-key",
            SecretKind::OAuthToken => "oauth-token",
            SecretKind::WebhookSecret => "webhook-secret",
            SecretKind::SealedObject => "sealed-object",
            SecretKind::WorkspaceVariable => "workspace-variable",
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

    /// A workspace variable's sensitive value, by the variable's id.
    pub fn workspace_variable(variable_id: &str) -> Self {
        Self::new(SecretKind::WorkspaceVariable, variable_id)
    }

    /// A stored object sealed whole, by its object id.
    pub fn sealed_object(object_id: &str) -> Self {
        Self::new(SecretKind::SealedObject, object_id)
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    pub(super) fn key_path(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("broker.key")
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
            SealContext::sealed_object("a"),
            SealContext::workspace_variable("a"),
        ];
        for (i, one) in contexts.iter().enumerate() {
            for other in &contexts[i + 1..] {
                assert_ne!(one.associated_data(), other.associated_data(), "{one:?} {other:?}");
            }
        }
    }
}
