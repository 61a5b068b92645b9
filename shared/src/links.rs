//! Signed, expiring links: what Hangar hands out where a client fetches something with no bearer
//! token (local blobs' upload and download links, a state version's download links). A link
//! carries `expires` (Unix seconds) and `signature`, an HMAC-SHA256 over what it names and its
//! expiry; an altered or expired link does not verify. The key is a file in the data directory
//! locally and a Secrets Manager secret in AWS (`HANGAR_LINK_KEY_SECRET_ARN`).

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

/// The query a signed link carries.
#[derive(Debug, Clone, Deserialize)]
pub struct Signed {
    pub expires: i64,
    pub signature: String,
}

/// Signs and checks links with one key.
#[derive(Clone)]
pub struct LinkSigner {
    key: Vec<u8>,
}

impl std::fmt::Debug for LinkSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSigner").finish_non_exhaustive()
    }
}

impl LinkSigner {
    pub fn new(key: Vec<u8>) -> Self {
        Self { key }
    }

    fn mac(&self, subject: &str, expires: i64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(format!("{subject}\n{expires}").as_bytes());
        mac
    }

    /// The query (`expires=…&signature=…`) of a link to `subject`, valid for `valid_for`.
    pub fn query(&self, subject: &str, valid_for: Duration) -> String {
        let expires = chrono::Utc::now().timestamp() + valid_for.as_secs() as i64;
        let signature = hex::encode(self.mac(subject, expires).finalize().into_bytes());
        format!("expires={expires}&signature={signature}")
    }

    /// Whether `signed` is this key's signature of `subject` and has not expired (constant-time
    /// compare).
    pub fn verify(&self, subject: &str, signed: &Signed) -> bool {
        let Ok(presented) = hex::decode(&signed.signature) else { return false };
        signed.expires > chrono::Utc::now().timestamp()
            && self.mac(subject, signed.expires).verify_slice(&presented).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> Signed {
        serde_urlencoded::from_str(query).expect("a signed query")
    }

    #[test]
    fn a_link_verifies_for_its_subject_alone_until_it_expires() {
        let signer = LinkSigner::new(vec![7; 32]);
        let signed = parse(&signer.query("GET\nsv-1", Duration::from_secs(60)));
        assert!(signer.verify("GET\nsv-1", &signed));
        assert!(!signer.verify("GET\nsv-2", &signed), "another subject");
        assert!(!LinkSigner::new(vec![8; 32]).verify("GET\nsv-1", &signed), "another key");
        let stretched = Signed { expires: signed.expires + 3600, ..signed.clone() };
        assert!(!signer.verify("GET\nsv-1", &stretched), "a changed expiry");
        let expired = parse(&signer.query("GET\nsv-1", Duration::ZERO));
        assert!(!signer.verify("GET\nsv-1", &expired), "expired");
    }
}
