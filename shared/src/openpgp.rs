//! OpenPGP, for provider releases: a GPG key is parsed when it is registered (a public key, and
//! its key id as Terraform and HCP name it), and a release's `SHA256SUMS.sig` is checked as
//! Terraform 1.0.3 checks it, a binary detached signature of `SHA256SUMS` by the key or one of its
//! signing subkeys.

use std::io::Cursor;

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey, SignedPublicSubKey};
use pgp::crypto::public_key::PublicKeyAlgorithm;
use pgp::packet::{KeyFlags, Signature, SignatureType, SignatureVersion, SubpacketData};
use pgp::types::{KeyDetails, KeyId, KeyVersion, SignedUser};

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

/// Parses a key as Terraform 1.0.3's OpenPGP library (golang.org/x/crypto/openpgp) can use it: a
/// version 4 RSA or DSA key (it knows neither EdDSA nor RFC 9580's version 6), its bindings
/// valid, not revoked.
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
    if key.primary_key.version() != KeyVersion::V4 {
        return Err(PgpError::NotAPublicKey("not a version 4 key, the only kind Terraform reads".into()));
    }
    if !key.details.revocation_signatures.is_empty() {
        return Err(PgpError::NotAPublicKey("the key is revoked".into()));
    }
    Ok(key)
}

fn terraform_reads(algorithm: PublicKeyAlgorithm) -> bool {
    matches!(algorithm, PublicKeyAlgorithm::RSA | PublicKeyAlgorithm::RSASign | PublicKeyAlgorithm::DSA)
}

/// The key flags a signature sets, if it carries the subpacket at all (Terraform's library
/// allows any use to a key whose self-signature sets none).
fn flags_of(signature: &Signature) -> Option<KeyFlags> {
    signature.config()?.hashed_subpackets().find_map(|p| match &p.data {
        SubpacketData::KeyFlags(flags) => Some(flags.clone()),
        _ => None,
    })
}

/// Whether the primary key may sign data, as Terraform's library decides: by the latest
/// self-signature of the primary identity (the user ID marked primary, else the first).
fn primary_signs(key: &SignedPublicKey) -> bool {
    let id = key.primary_key.legacy_key_id();
    let primary =
        key.details.users.iter().find(|user| latest_self_signature(user, &id).is_some_and(Signature::is_primary));
    let identity = primary.or(key.details.users.first()).and_then(|user| latest_self_signature(user, &id));
    identity.and_then(flags_of).is_none_or(|flags| flags.sign())
}

/// A user ID's latest self-signature (by the primary key `id`; certifications by others skipped).
fn latest_self_signature<'a>(user: &'a SignedUser, id: &KeyId) -> Option<&'a Signature> {
    let own = user.signatures.iter().filter(|s| s.issuer_key_id().contains(&id));
    own.max_by_key(|s| s.created().map(|at| at.as_secs()))
}

/// Whether a subkey may sign data, as Terraform's library decides: by its first binding.
fn subkey_signs(subkey: &SignedPublicSubKey) -> bool {
    terraform_reads(subkey.key.algorithm()) && subkey.signatures.first().and_then(flags_of).is_none_or(|f| f.sign())
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
    let packet = &signature.signature;
    if !matches!(packet.version(), SignatureVersion::V3 | SignatureVersion::V4) {
        return Err(PgpError::NotASignature("not a version 4 signature, the only kind Terraform reads".into()));
    }
    if !matches!(packet.typ(), Some(SignatureType::Binary | SignatureType::Text)) {
        return Err(PgpError::NotASignature("not a signature of a document".into()));
    }
    // Terraform finds the key by the issuer's key id, which the signature must name.
    let issuers = packet.issuer_key_id();
    if issuers.is_empty() {
        return Err(PgpError::NotASignature("it names no issuer key id".into()));
    }
    let names = |id: KeyId| issuers.iter().any(|issuer| **issuer == id);
    let primary = names(key.primary_key.legacy_key_id())
        && primary_signs(&key)
        && signature.verify(&key.primary_key, document).is_ok();
    let mut signing = key.public_subkeys.iter().filter(|sub| names(sub.key.legacy_key_id()) && subkey_signs(sub));
    if primary || signing.any(|sub| signature.verify(&sub.key, document).is_ok()) {
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
