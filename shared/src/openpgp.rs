//! OpenPGP, for provider releases: a GPG key is parsed when it is registered (a public key, and
//! its key id as Terraform and HCP name it), and a release's `SHA256SUMS.sig` is checked as
//! Terraform 1.0.3 checks it, a binary detached signature of `SHA256SUMS` by the key or one of its
//! signing subkeys.

use std::io::Cursor;

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::crypto::public_key::PublicKeyAlgorithm;
use pgp::types::KeyDetails;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PgpError {
    #[error("not an ASCII-armored OpenPGP public key: {0}")]
    NotAPublicKey(String),
    #[error("the signature is not an OpenPGP detached signature: {0}")]
    NotASignature(String),
    #[error("the signature does not verify with this key")]
    DoesNotVerify,
}

/// A registered public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The primary key's 64-bit key id, 16 upper-case hex digits (HCP's `key-id`).
    pub key_id: String,
}

/// Parses a key as Terraform 1.0.3's OpenPGP library can use it: an RSA or DSA key (it knows no
/// EdDSA), its bindings valid, not revoked.
fn parse(armor: &str) -> Result<SignedPublicKey, PgpError> {
    let (key, _) =
        SignedPublicKey::from_string(armor.trim()).map_err(|e| PgpError::NotAPublicKey(first_line(&e.to_string())))?;
    key.verify_bindings().map_err(|e| PgpError::NotAPublicKey(first_line(&e.to_string())))?;
    if !terraform_reads(key.primary_key.algorithm()) {
        let algorithm = key.primary_key.algorithm();
        return Err(PgpError::NotAPublicKey(format!(
            "a {algorithm:?} key, which Terraform cannot check signatures with: use an RSA key"
        )));
    }
    if !key.details.revocation_signatures.is_empty() {
        return Err(PgpError::NotAPublicKey("the key is revoked".into()));
    }
    Ok(key)
}

fn terraform_reads(algorithm: PublicKeyAlgorithm) -> bool {
    matches!(algorithm, PublicKeyAlgorithm::RSA | PublicKeyAlgorithm::RSASign | PublicKeyAlgorithm::DSA)
}

/// Whether the primary key may sign data, as Terraform's library decides: its user IDs'
/// self-signatures allow signing, or none of them sets key flags at all.
fn primary_signs(key: &SignedPublicKey) -> bool {
    let flags: Vec<_> = key.details.users.iter().flat_map(|user| &user.signatures).map(|s| s.key_flags()).collect();
    let set = |f: &pgp::packet::KeyFlags| f.sign() || f.certify() || f.encrypt_comms() || f.encrypt_storage();
    flags.iter().any(|f| f.sign()) || !flags.iter().any(set)
}

/// Parses an ASCII-armored public key (one key, its bindings valid).
pub fn public_key(armor: &str) -> Result<PublicKey, PgpError> {
    let key = parse(armor)?;
    Ok(PublicKey { key_id: hex::encode_upper(key.primary_key.legacy_key_id()) })
}

/// Checks that `signature` (binary, as `gpg --detach-sign` writes it, or armored) is a
/// signature of `document` by the key in `armor` or one of its subkeys.
pub fn verify_detached(armor: &str, document: &[u8], signature: &[u8]) -> Result<(), PgpError> {
    let key = parse(armor)?;
    // Terraform reads the signature as raw packets: an armored one fails there, so here too.
    if signature.trim_ascii_start().starts_with(b"-----BEGIN") {
        return Err(PgpError::NotASignature(
            "it is ASCII-armored; upload the binary signature (`gpg --detach-sign`, without `--armor`)".into(),
        ));
    }
    let signature = DetachedSignature::from_bytes(Cursor::new(signature))
        .map_err(|e| PgpError::NotASignature(first_line(&e.to_string())))?;
    let primary = primary_signs(&key) && signature.verify(&key.primary_key, document).is_ok();
    // A subkey signs only if its binding says it may, and only with an algorithm Terraform knows.
    let signing = key
        .public_subkeys
        .iter()
        .filter(|sub| terraform_reads(sub.key.algorithm()) && sub.signatures.iter().any(|s| s.key_flags().sign()));
    if primary || signing.into_iter().any(|sub| signature.verify(&sub.key, document).is_ok()) {
        return Ok(());
    }
    Err(PgpError::DoesNotVerify)
}

/// A library error's first line: enough to say what is wrong, never a dump of the input.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_public_key_is_refused() {
        assert!(matches!(public_key("hello"), Err(PgpError::NotAPublicKey(_))));
        let private = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nxx\n-----END PGP PRIVATE KEY BLOCK-----\n";
        assert!(matches!(public_key(private), Err(PgpError::NotAPublicKey(_))));
    }
}
