//! A provider file landing on its upload link (`upload/<id>`): the S3 ObjectCreated event
//! (function `registry-ingest`) and dev-server's local PUT both call [`object_created`].
//!
//! The upload's size is checked before anything is read; it is then copied to an object of its
//! own, and that copy is what is checked and served, so a later PUT on the link changes nothing
//! that was checked. `SHA256SUMS` must read as a sums file, a binary must be a sound zip with
//! the platform's shasum; once both `SHA256SUMS` and its signature are in, the signature is
//! checked with the version's key (inside the version's conditional write, so that of two files
//! landing together the one written second checks them both).

use std::collections::BTreeMap;

use super::record::{Part, ProviderUpload, ProviderVersion, SHASUMS_LIMIT, SIGNATURE_LIMIT};
use super::versions::modify;
use crate::archive::{self, ArchiveError, ArchiveLimits};
use crate::blobs::{BlobError, BlobStore, ObjectId};
use crate::openpgp;
use crate::registry::error::{RegistryError, Result};
use crate::state::AppState;
use crate::store::{keys, Condition, ItemStore, Write};

/// What became of an upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landed {
    /// Checked and stored.
    Accepted,
    /// Refused, for this reason (the version says so too).
    Refused(String),
    /// Nothing waits for it (already taken, or removed).
    Ignored,
}

async fn waiting(store: &dyn ItemStore, object: &ObjectId) -> Result<Option<(ProviderUpload, ProviderVersion)>> {
    let Some(marker) = store.get(&keys::provider_upload(object.as_str())).await? else { return Ok(None) };
    let marker: ProviderUpload = marker.parse()?;
    let Some(version) = store.get(&marker.version).await? else { return Ok(None) };
    let version: ProviderVersion = version.parse()?;
    let still = version.waiting().any(|(upload, part)| upload == object.as_str() && part == marker.part);
    Ok(still.then_some((marker, version)))
}

/// Whether a provider version waits for an upload to this object: `None` when the object is
/// no provider file's.
pub async fn awaits_upload(store: &dyn ItemStore, object: &ObjectId) -> Result<Option<bool>> {
    if store.get(&keys::provider_upload(object.as_str())).await?.is_none() {
        return Ok(None);
    }
    Ok(Some(waiting(store, object).await?.is_some()))
}

/// Settles the provider file uploaded as `object`: `None` when the object is no provider
/// file's.
pub async fn object_created(state: &AppState, object: &ObjectId) -> Result<Option<Landed>> {
    let store = state.store.as_ref();
    if store.get(&keys::provider_upload(object.as_str())).await?.is_none() {
        return Ok(None);
    }
    let Some((marker, _)) = waiting(store, object).await? else { return Ok(Some(Landed::Ignored)) };
    let limit = match marker.part {
        Part::Shasums => SHASUMS_LIMIT,
        Part::ShasumsSig => SIGNATURE_LIMIT,
        Part::Binary { .. } => state.config.archive_limits.max_compressed_bytes,
    };
    let size = match state.blobs.upload_size(object).await {
        Ok(size) => size,
        Err(BlobError::NotFound) => return Ok(Some(Landed::Ignored)),
        Err(e) => return Err(e.into()),
    };
    let copy = ObjectId::generate();
    let checked = if size > limit {
        Checked::Refused(over(limit))
    } else {
        match state.blobs.copy_upload(object, &copy).await {
            Ok(()) => match check(state.blobs.as_ref(), &copy, &marker.part, state.config.archive_limits).await {
                Ok(checked) => checked,
                // Reading failed (not the file's fault): the upload stays for the next attempt.
                Err(e) => {
                    let _ = state.blobs.delete(&copy).await;
                    return Err(e);
                }
            },
            Err(BlobError::NotFound) => return Ok(Some(Landed::Ignored)),
            Err(e) => return Err(e.into()),
        }
    };
    let settled = settle(state, object, &marker, &copy, checked).await;
    let landed = match &settled {
        Ok(landed) => landed.clone(),
        Err(RegistryError::NotFound) => Landed::Ignored,
        Err(_) => Landed::Ignored,
    };
    if !matches!(landed, Landed::Accepted) {
        let _ = state.blobs.delete(&copy).await;
    }
    settled.or_else(|e| match e {
        RegistryError::NotFound => Ok(Landed::Ignored),
        e => Err(e),
    })?;
    if let Err(e) = state.blobs.delete(object).await {
        tracing::warn!(object = %object, error = %e, "an uploaded provider file was not removed after it was checked");
    }
    match &landed {
        Landed::Accepted => tracing::info!(object = %object, part = ?marker.part, "a provider file checked out"),
        Landed::Refused(reason) => {
            tracing::warn!(object = %object, part = ?marker.part, reason = %reason, "a provider file was refused")
        }
        Landed::Ignored => tracing::debug!(object = %object, "a provider upload was no longer awaited"),
    }
    Ok(Some(landed))
}

/// What checking the stored copy found.
enum Checked {
    /// A file that reads as what it should be (a binary's archive: with this SHA-256).
    Sound {
        sha256: Option<String>,
    },
    Refused(String),
}

async fn check(blobs: &dyn BlobStore, copy: &ObjectId, part: &Part, limits: ArchiveLimits) -> Result<Checked> {
    Ok(match part {
        // The copy is measured again: a PUT that replaced the upload after its size was looked
        // at must not bring a larger file in.
        Part::Shasums => match read_whole(blobs, copy, SHASUMS_LIMIT).await? {
            body if body.len() as u64 > SHASUMS_LIMIT => Checked::Refused(over(SHASUMS_LIMIT)),
            body => match parse_sums(&body) {
                Ok(_) => Checked::Sound { sha256: None },
                Err(reason) => Checked::Refused(reason),
            },
        },
        // Checked with SHA256SUMS, once both are in.
        Part::ShasumsSig => match read_whole(blobs, copy, SIGNATURE_LIMIT).await? {
            body if body.len() as u64 > SIGNATURE_LIMIT => Checked::Refused(over(SIGNATURE_LIMIT)),
            _ => Checked::Sound { sha256: None },
        },
        Part::Binary { .. } => {
            let reader = blobs.open(copy).await?.into_blocking();
            match archive::inspect_zip(reader, limits).await {
                Ok(summary) => Checked::Sound { sha256: Some(summary.sha256) },
                Err(ArchiveError::Io(e)) => return Err(RegistryError::Blobs(BlobError::backend(e))),
                Err(e) => Checked::Refused(e.to_string()),
            }
        }
    })
}

fn over(limit: u64) -> String {
    format!("the file is over the limit of {limit} bytes")
}

async fn read_whole(blobs: &dyn BlobStore, id: &ObjectId, limit: u64) -> Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut body = Vec::new();
    blobs
        .open(id)
        .await?
        .into_async()
        .take(limit + 1)
        .read_to_end(&mut body)
        .await
        .map_err(|e| RegistryError::Blobs(BlobError::backend(e)))?;
    Ok(body)
}

/// `SHA256SUMS` as `shasum` writes it, read as Terraform reads it: per line, whitespace-separated
/// fields, the first a SHA-256 in hex and the second the filename. A blank line, or two lines for
/// one filename (Terraform takes the first, `shasum -c` checks both), are refused.
fn parse_sums(body: &[u8]) -> std::result::Result<BTreeMap<String, String>, String> {
    let text = std::str::from_utf8(body).map_err(|_| "SHA256SUMS is not text".to_owned())?;
    let mut sums = BTreeMap::new();
    // Terraform 1.0.3 fails on a blank line inside (it reads each line's first field), so such a
    // file is refused; a file's final newline is no blank line.
    for (number, line) in text.strip_suffix('\n').unwrap_or(text).split('\n').enumerate() {
        let mut fields = line.split_whitespace();
        let (sum, name) = (fields.next().unwrap_or_default(), fields.next());
        let hex = sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_hexdigit());
        let Some(name) = name.filter(|_| hex) else {
            return Err(format!("line {} of SHA256SUMS is not `<sha256>  <filename>`", number + 1));
        };
        if sums.insert(name.to_owned(), sum.to_ascii_lowercase()).is_some() {
            return Err(format!("SHA256SUMS lists {name} twice"));
        }
    }
    if sums.is_empty() {
        return Err("SHA256SUMS lists no file".into());
    }
    Ok(sums)
}

/// Records the checked file on its version (only if the version still waits for it), and,
/// once the sums and their signature are both in, whether the signature checks out.
async fn settle(
    state: &AppState,
    object: &ObjectId,
    marker: &ProviderUpload,
    copy: &ObjectId,
    checked: Checked,
) -> Result<Landed> {
    let store = state.store.as_ref();
    let landed = std::sync::Mutex::new(Landed::Ignored);
    // The other file's bytes, read outside the write's closure: the closure then checks the
    // signature with what the version holds when it is written.
    let signed = std::sync::Mutex::new(None::<Signed>);
    let mut attempts = 0;
    loop {
        let version: ProviderVersion = store.get(&marker.version).await?.ok_or(RegistryError::NotFound)?.parse()?;
        let (sums, sig) = (
            stored_or(&version.shasums, &marker.part, Part::Shasums, copy, &checked),
            stored_or(&version.shasums_sig, &marker.part, Part::ShasumsSig, copy, &checked),
        );
        if let (Some(sums), Some(sig)) = (sums, sig) {
            let known = signed.lock().expect("not poisoned").as_ref().is_some_and(|s| s.sums == sums && s.sig == sig);
            if !known && version.sums.is_none() && version.signature_error.is_none() {
                let body = read_whole(state.blobs.as_ref(), &sums, SHASUMS_LIMIT).await?;
                let signature = read_whole(state.blobs.as_ref(), &sig, SIGNATURE_LIMIT).await?;
                *signed.lock().expect("not poisoned") = Some(Signed { sums, sig, body, signature });
            }
        }
        let outcome = modify(store, &marker.version, |version| {
            let part = &marker.part;
            let refusal = match &checked {
                Checked::Refused(reason) => Some(reason.clone()),
                Checked::Sound { sha256: Some(sha256) } => match part {
                    Part::Binary { os, arch } => {
                        let platform = version.platform(os, arch).ok_or(RegistryError::NotFound)?;
                        (platform.shasum != *sha256).then(|| {
                            format!("the archive's SHA-256 is {sha256}, not the platform's shasum {}", platform.shasum)
                        })
                    }
                    _ => None,
                },
                Checked::Sound { sha256: None } => None,
            };
            let asset = match part {
                Part::Shasums => &mut version.shasums,
                Part::ShasumsSig => &mut version.shasums_sig,
                Part::Binary { os, arch } => {
                    let platform = version.platforms.iter_mut().find(|p| p.os == *os && p.arch == *arch);
                    &mut platform.ok_or(RegistryError::NotFound)?.binary
                }
            };
            if asset.upload.as_deref() != Some(object.as_str()) {
                return Err(RegistryError::NotFound);
            }
            asset.upload = None;
            asset.object = refusal.is_none().then(|| copy.to_string());
            asset.error = refusal.clone();
            *landed.lock().expect("not poisoned") = match refusal {
                Some(reason) => Landed::Refused(reason),
                None => Landed::Accepted,
            };
            if !verify_signature(version, &signed.lock().expect("not poisoned")) {
                return Err(RegistryError::Conflict(UNREAD.into()));
            }
            Ok(vec![Write::Delete { key: keys::provider_upload(object.as_str()), condition: Condition::Always }])
        })
        .await;
        match outcome {
            Ok(_) => return Ok(landed.into_inner().expect("not poisoned")),
            // The other file landed meanwhile: read it, and check the signature with it.
            Err(RegistryError::Conflict(why)) if why == UNREAD && attempts < 5 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Why a settling write went back to read the version's files again.
const UNREAD: &str = "the other file of the signature landed meanwhile";

/// The object `asset` holds once this upload is settled: its stored copy, or this upload's copy
/// when this upload is for it and sound.
fn stored_or(
    asset: &super::record::Asset,
    landing: &Part,
    this: Part,
    copy: &ObjectId,
    checked: &Checked,
) -> Option<ObjectId> {
    if *landing == this {
        return matches!(checked, Checked::Sound { .. }).then(|| copy.clone());
    }
    asset.stored()
}

/// `SHA256SUMS` and its signature as read from their stored copies.
struct Signed {
    sums: ObjectId,
    sig: ObjectId,
    body: Vec<u8>,
    signature: Vec<u8>,
}

/// Checks the signature once the version holds both files, sound, and has not checked it yet,
/// with the bytes read for those very objects. Answers `false` when those bytes were not read
/// (the other file landed after the read): the write then goes back to read them.
fn verify_signature(version: &mut ProviderVersion, signed: &Option<Signed>) -> bool {
    let (Some(sums), Some(sig)) = (version.shasums.stored(), version.shasums_sig.stored()) else { return true };
    if version.sums.is_some() || version.signature_error.is_some() {
        return true;
    }
    let Some(read) = signed.as_ref().filter(|read| read.sums == sums && read.sig == sig) else { return false };
    match openpgp::verify_detached(&version.signing_key, &read.body, &read.signature) {
        Ok(()) => version.sums = parse_sums(&read.body).ok(),
        Err(e) => {
            version.signature_error = Some(format!(
                "SHA256SUMS.sig is not a valid signature of SHA256SUMS by the key {}: {e}",
                version.key_id
            ))
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::parse_sums;

    #[test]
    fn sums_are_read_as_terraform_reads_them() {
        let (a, b) = ("a".repeat(64), "B".repeat(64));
        let sums = parse_sums(format!("{a}  x.zip\n{b}  *y.zip\n").as_bytes()).unwrap();
        assert_eq!(sums["x.zip"], a);
        assert_eq!(sums["*y.zip"], "b".repeat(64), "a filename is the second field as it stands");
        assert!(parse_sums(format!("{a}  x.zip\n{b} x.zip\n").as_bytes()).is_err(), "a filename twice");
        assert!(parse_sums(format!("{a}  x.zip\n\n").as_bytes()).is_err(), "a blank line");
        assert!(parse_sums(b"not sums\n").is_err());
        assert!(parse_sums(b"").is_err());
    }
}
