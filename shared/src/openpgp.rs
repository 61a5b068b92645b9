//! OpenPGP, for provider releases: a GPG key is parsed when it is registered (a public key, and
//! its key id as Terraform and HCP name it), and a release's `SHA256SUMS.sig` is checked as
//! Terraform checks it, a detached signature of `SHA256SUMS` by the key or one of its subkeys.

use std::io::Cursor;

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
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

fn parse(armor: &str) -> Result<SignedPublicKey, PgpError> {
    let (key, _) =
        SignedPublicKey::from_string(armor.trim()).map_err(|e| PgpError::NotAPublicKey(first_line(&e.to_string())))?;
    key.verify_bindings().map_err(|e| PgpError::NotAPublicKey(first_line(&e.to_string())))?;
    Ok(key)
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
    let signature = if signature.trim_ascii_start().starts_with(b"-----BEGIN") {
        let text = std::str::from_utf8(signature).map_err(|e| PgpError::NotASignature(e.to_string()))?;
        DetachedSignature::from_string(text).map(|(signature, _)| signature)
    } else {
        DetachedSignature::from_bytes(Cursor::new(signature))
    }
    .map_err(|e| PgpError::NotASignature(first_line(&e.to_string())))?;
    let primary = signature.verify(&key.primary_key, document).is_ok();
    if primary || key.public_subkeys.iter().any(|sub| signature.verify(&sub.key, document).is_ok()) {
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
