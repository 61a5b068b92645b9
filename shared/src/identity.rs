//! Hangar as an OIDC issuer for plugin workload identity, as Vault Enterprise is: the broker
//! signs short-lived identity tokens (ES256 JWTs) for its mounts and trades them with STS
//! (`AssumeRoleWithWebIdentity`) for the credentials its AWS calls use, so a mount configured
//! with `role_arn` + `identity_token_audience` holds no long-lived key at all. AWS checks each
//! token against the discovery document and keys Hangar publishes under
//! `/v1/identity/oidc/plugins/.well-known/`.
//!
//! The signing key never leaves KMS in AWS (an asymmetric `ECC_NIST_P256` key, `kms:Sign`);
//! dev-server keeps a P-256 key in a file of its own beside its data, owner-only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aws_sdk_kms::error::DisplayErrorContext;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{MessageType, SigningAlgorithmSpec};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::DecodePublicKey;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::lazy::LazyClient;

/// The path under Hangar's address that issues plugin identity tokens (Vault's).
pub const ISSUER_PATH: &str = "/v1/identity/oidc/plugins";

/// Why a token could not be signed, or the public key not read.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("identity key file {path}: {reason}")]
    KeyFile { path: PathBuf, reason: String },
    #[error("KMS: {0}")]
    Kms(String),
}

/// Signs identity tokens with one P-256 key and publishes its public half.
#[async_trait::async_trait]
pub trait TokenSigner: Send + Sync + 'static {
    /// The ES256 signature (`r || s`) of a JWS signing input.
    async fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, IdentityError>;
    /// The public key.
    async fn public_key(&self) -> Result<VerifyingKey, IdentityError>;
    /// Every key a verifier should accept: the current one, and those it replaced that tokens
    /// still in use may be signed with.
    async fn published_keys(&self) -> Result<Vec<VerifyingKey>, IdentityError> {
        Ok(vec![self.public_key().await?])
    }
}

pub type SharedTokenSigner = Arc<dyn TokenSigner>;

/// What one identity token says: who it is for and about, and for how long.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenRequest {
    /// Hangar's address (`HANGAR_PUBLIC_URL`); the issuer is this plus [`ISSUER_PATH`].
    pub base_url: String,
    /// `aud`: the mount's `identity_token_audience`.
    pub audience: String,
    /// `sub`: names the mount, as Vault's `plugin-identity:<namespace>:secret:<mount accessor>`.
    pub subject: String,
    /// Seconds until `exp`: the mount's `identity_token_ttl`.
    pub ttl_secs: u64,
}

/// The issuer URL of tokens for `base_url`.
pub fn issuer(base_url: &str) -> String {
    format!("{}{ISSUER_PATH}", base_url.trim_end_matches('/'))
}

/// The subject of a mount's tokens (Hangar has one namespace, Vault's root: `root`).
pub fn mount_subject(mount_uuid: &str) -> String {
    format!("plugin-identity:root:secret:{mount_uuid}")
}

/// Mints a signed identity token (a compact JWS) for `request`, issued now.
pub async fn mint(signer: &dyn TokenSigner, request: &TokenRequest) -> Result<String, IdentityError> {
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "iss": issuer(&request.base_url),
        "sub": request.subject,
        "aud": request.audience,
        "iat": now,
        "nbf": now,
        "exp": now.saturating_add(i64::try_from(request.ttl_secs).unwrap_or(i64::MAX)),
    });
    sign(signer, &claims).await
}

/// A compact JWS of `claims` (an object), signed ES256 with the signer's current key, whose id
/// the header names.
pub async fn sign(signer: &dyn TokenSigner, claims: &Value) -> Result<String, IdentityError> {
    let key_id = key_id(&signer.public_key().await?);
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": key_id});
    let signing_input = format!("{}.{}", BASE64URL.encode(header.to_string()), BASE64URL.encode(claims.to_string()));
    let signature = signer.sign(signing_input.as_bytes()).await?;
    Ok(format!("{signing_input}.{}", BASE64URL.encode(signature)))
}

/// The OpenID discovery document of the plugin identity issuer for `base_url`.
pub fn discovery(base_url: &str) -> Value {
    let issuer = issuer(base_url);
    discovery_document(&issuer, &format!("{issuer}/.well-known/keys"))
}

/// An OpenID discovery document: the issuer, where its keys are, what it signs with.
pub fn discovery_document(issuer: &str, jwks_uri: &str) -> Value {
    json!({
        "issuer": issuer,
        "jwks_uri": jwks_uri,
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
        "scopes_supported": ["openid"],
    })
}

/// The JSON Web Key Set of the signer's published keys, the current one first.
pub async fn jwks(signer: &dyn TokenSigner) -> Result<Value, IdentityError> {
    let mut keys = Vec::new();
    for key in signer.published_keys().await? {
        let point = key.to_sec1_point(false);
        let (Some(x), Some(y)) = (point.x(), point.y()) else {
            return Err(IdentityError::Kms("the public key is not an uncompressed P-256 point".into()));
        };
        keys.push(json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": key_id(&key),
            "x": BASE64URL.encode(x), "y": BASE64URL.encode(y),
        }));
    }
    Ok(json!({ "keys": keys }))
}

/// The current key and the keys it replaced: tokens are signed with the first, and all are
/// published, so that tokens signed before a rotation verify until they expire. Rotating is
/// making a new key current and keeping the old one here for at least a token's lifetime.
pub struct KeyRing {
    current: SharedTokenSigner,
    previous: Vec<SharedTokenSigner>,
}

impl KeyRing {
    pub fn new(current: SharedTokenSigner, previous: Vec<SharedTokenSigner>) -> Self {
        Self { current, previous }
    }
}

#[async_trait::async_trait]
impl TokenSigner for KeyRing {
    async fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, IdentityError> {
        self.current.sign(signing_input).await
    }

    async fn public_key(&self) -> Result<VerifyingKey, IdentityError> {
        self.current.public_key().await
    }

    async fn published_keys(&self) -> Result<Vec<VerifyingKey>, IdentityError> {
        let mut keys = vec![self.current.public_key().await?];
        for signer in &self.previous {
            // A replaced key that cannot be read (deleted, disabled, misnamed) costs only its own
            // tokens, never the current key's.
            match signer.public_key().await {
                Ok(key) if !keys.contains(&key) => keys.push(key),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "a previous identity key is not published"),
            }
        }
        Ok(keys)
    }
}

/// A key's id: the SHA-256 of its SEC1 encoding, base64url, so a new key gets a new id.
fn key_id(key: &VerifyingKey) -> String {
    BASE64URL.encode(&Sha256::digest(key.to_sec1_bytes())[..16])
}

/// A P-256 key in a file (dev-server), created owner-only on first use.
pub struct LocalSigner {
    key: SigningKey,
}

impl LocalSigner {
    /// Opens the key in `key_file`, creating it (mode 0600) if it does not exist.
    pub fn open(key_file: &Path) -> Result<Self, IdentityError> {
        let failed = |reason: String| IdentityError::KeyFile { path: key_file.to_path_buf(), reason };
        let bytes = crate::seal::secret_key_file(key_file).map_err(|e| failed(e.to_string()))?;
        // A random 32 bytes is a valid P-256 scalar but with negligible probability.
        let key = SigningKey::from_slice(&bytes).map_err(|_| failed("not a P-256 private key".into()))?;
        Ok(Self { key })
    }
}

#[async_trait::async_trait]
impl TokenSigner for LocalSigner {
    async fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, IdentityError> {
        let signature: Signature = self.key.sign(signing_input);
        Ok(signature.to_bytes().to_vec())
    }

    async fn public_key(&self) -> Result<VerifyingKey, IdentityError> {
        Ok(*self.key.verifying_key())
    }
}

/// An asymmetric KMS key (`ECC_NIST_P256`, `SIGN_VERIFY`); its public key is read once.
pub struct KmsSigner {
    client: LazyClient<aws_sdk_kms::Client>,
    key_id: String,
    public_key: tokio::sync::OnceCell<VerifyingKey>,
}

impl KmsSigner {
    pub fn new(client: impl Into<LazyClient<aws_sdk_kms::Client>>, key_id: impl Into<String>) -> Self {
        Self { client: client.into(), key_id: key_id.into(), public_key: tokio::sync::OnceCell::new() }
    }
}

#[async_trait::async_trait]
impl TokenSigner for KmsSigner {
    async fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, IdentityError> {
        // KMS signs a digest of any length; a token's signing input may pass its 4 KiB limit.
        let output = self
            .client
            .sign()
            .key_id(&self.key_id)
            .message(Blob::new(Sha256::digest(signing_input).to_vec()))
            .message_type(MessageType::Digest)
            .signing_algorithm(SigningAlgorithmSpec::EcdsaSha256)
            .send()
            .await
            .map_err(|err| IdentityError::Kms(DisplayErrorContext(&err).to_string()))?;
        let der = output.signature().ok_or_else(|| IdentityError::Kms("Sign returned no signature".into()))?;
        let signature = Signature::from_der(der.as_ref())
            .map_err(|_| IdentityError::Kms("Sign returned a signature that is not ECDSA P-256".into()))?;
        Ok(signature.to_bytes().to_vec())
    }

    async fn public_key(&self) -> Result<VerifyingKey, IdentityError> {
        let key = self
            .public_key
            .get_or_try_init(|| async {
                let output = self
                    .client
                    .get_public_key()
                    .key_id(&self.key_id)
                    .send()
                    .await
                    .map_err(|err| IdentityError::Kms(DisplayErrorContext(&err).to_string()))?;
                let der = output.public_key().ok_or_else(|| IdentityError::Kms("no public key".into()))?;
                VerifyingKey::from_public_key_der(der.as_ref())
                    .map_err(|_| IdentityError::Kms(format!("key {} is not an ECC_NIST_P256 key", self.key_id)))
            })
            .await?;
        Ok(*key)
    }
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::signature::Verifier;

    use super::*;

    fn request() -> TokenRequest {
        TokenRequest {
            base_url: "https://hangar.example.com/".into(),
            audience: "sts.amazonaws.com".into(),
            subject: mount_subject("m-1"),
            ttl_secs: 3600,
        }
    }

    #[tokio::test]
    async fn a_token_verifies_with_the_published_key_and_says_who_it_is_for() {
        let dir = tempfile::tempdir().unwrap();
        let signer = LocalSigner::open(&dir.path().join("identity.key")).unwrap();
        let token = mint(&signer, &request()).await.unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);

        let set = jwks(&signer).await.unwrap();
        let jwk = &set["keys"][0];
        let coordinate = |name: &str| BASE64URL.decode(jwk[name].as_str().unwrap()).unwrap();
        let sec1 = [vec![4u8], coordinate("x"), coordinate("y")].concat();
        let published = VerifyingKey::from_sec1_bytes(&sec1).unwrap();
        let signature = Signature::from_slice(&BASE64URL.decode(parts[2]).unwrap()).unwrap();
        published.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature).unwrap();

        let header: Value = serde_json::from_slice(&BASE64URL.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["kid"], jwk["kid"]);
        let claims: Value = serde_json::from_slice(&BASE64URL.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "https://hangar.example.com/v1/identity/oidc/plugins");
        assert_eq!(claims["aud"], "sts.amazonaws.com");
        assert_eq!(claims["sub"], "plugin-identity:root:secret:m-1");
        assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 3600);
        assert_eq!(
            discovery("https://hangar.example.com")["jwks_uri"],
            format!("{}/.well-known/keys", claims["iss"].as_str().unwrap())
        );
    }

    #[tokio::test]
    async fn the_key_file_is_kept_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("identity.key");
        let first = jwks(&LocalSigner::open(&path).unwrap()).await.unwrap();
        let second = jwks(&LocalSigner::open(&path).unwrap()).await.unwrap();
        assert_eq!(first, second);
    }
}
