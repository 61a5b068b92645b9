//! Inspection of a provider release's archive: a zip file, which Terraform unpacks into its
//! plugin directory. The upload is copied to a temporary file while it is hashed and counted
//! (a zip is read from its end, so it cannot be walked as a stream), then every entry is read
//! through, so that what its headers claim is not trusted: the bytes inflated are counted
//! against the limit as they come, which stops a zip bomb however its sizes were forged.

use std::io::{self, Read, Seek, Write};

use sha2::{Digest, Sha256};

use super::error::{shown, ArchiveError};
use super::limits::ArchiveLimits;
use super::paths::{normalise, PathProblem};

/// What inspection learned about a sound provider archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZipSummary {
    /// Hex SHA-256 of the archive as uploaded (what `SHA256SUMS` lists).
    pub sha256: String,
    pub entries: usize,
    pub compressed_bytes: u64,
    /// Bytes of every entry once inflated.
    pub uncompressed_bytes: u64,
}

/// Inspects the provider archive read from `source` on tokio's blocking pool.
pub async fn inspect_zip(
    source: impl Read + Send + 'static,
    limits: ArchiveLimits,
) -> Result<ZipSummary, ArchiveError> {
    match tokio::task::spawn_blocking(move || inspect_zip_sync(source, limits)).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ArchiveError::Io(io::Error::other(e))),
    }
}

/// The same on this thread.
pub fn inspect_zip_sync(mut source: impl Read, limits: ArchiveLimits) -> Result<ZipSummary, ArchiveError> {
    let mut file = tempfile::tempfile().map_err(ArchiveError::Io)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 64 * 1024];
    let mut compressed_bytes = 0u64;
    loop {
        let read = source.read(&mut buffer).map_err(ArchiveError::Io)?;
        if read == 0 {
            break;
        }
        compressed_bytes += read as u64;
        if compressed_bytes > limits.max_compressed_bytes {
            return Err(ArchiveError::CompressedTooLarge { limit: limits.max_compressed_bytes });
        }
        hasher.update(&buffer[..read]);
        file.write_all(&buffer[..read]).map_err(ArchiveError::Io)?;
    }
    if compressed_bytes == 0 {
        return Err(ArchiveError::Empty);
    }
    file.rewind().map_err(ArchiveError::Io)?;
    let mut archive = zip::ZipArchive::new(file).map_err(|_| ArchiveError::NotZip)?;
    if archive.len() > limits.max_entries {
        return Err(ArchiveError::TooManyEntries { limit: limits.max_entries });
    }
    let mut uncompressed_bytes = 0u64;
    let mut normalised = String::new();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|e| ArchiveError::Corrupt(shown(e.to_string().as_bytes())))?;
        let raw = entry.name_raw().to_vec();
        if raw.len() > limits.max_path_len {
            return Err(ArchiveError::PathTooLong { path: shown(&raw), limit: limits.max_path_len });
        }
        match normalise(&raw, &mut normalised) {
            Ok(0) => return Err(ArchiveError::UnnamedEntry { path: shown(&raw) }),
            Ok(_) => {}
            Err(PathProblem::Absolute) => return Err(ArchiveError::AbsolutePath { path: shown(&raw) }),
            Err(PathProblem::Escapes) => return Err(ArchiveError::PathEscapes { path: shown(&raw) }),
            Err(PathProblem::Nul) => return Err(ArchiveError::NulInPath { path: shown(&raw) }),
        }
        if entry.is_symlink() {
            return Err(ArchiveError::UnsupportedEntry { path: shown(&raw), kind: "symlink".into() });
        }
        // Inflated through a bound one byte past what is left: reaching it is the refusal.
        let left = limits.max_uncompressed_bytes - uncompressed_bytes;
        let inflated = io::copy(&mut (&mut entry).take(left + 1), &mut io::sink())
            .map_err(|e| ArchiveError::Corrupt(shown(e.to_string().as_bytes())))?;
        if inflated > left {
            return Err(ArchiveError::UncompressedTooLarge { limit: limits.max_uncompressed_bytes });
        }
        uncompressed_bytes += inflated;
    }
    if archive.is_empty() {
        return Err(ArchiveError::Empty);
    }
    Ok(ZipSummary {
        sha256: hex::encode(hasher.finalize()),
        entries: archive.len(),
        compressed_bytes,
        uncompressed_bytes,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, body) in entries {
            writer.start_file(*name, options).unwrap();
            writer.write_all(body).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    #[test]
    fn a_sound_archive_is_hashed_and_counted() {
        let bytes = zip_of(&[("terraform-provider-x_v1.0.0", b"#!/bin/sh\n")]);
        let summary = inspect_zip_sync(Cursor::new(bytes.clone()), ArchiveLimits::default()).unwrap();
        assert_eq!(summary.sha256, hex::encode(Sha256::digest(&bytes)));
        assert_eq!((summary.entries, summary.uncompressed_bytes), (1, 10));
    }

    #[test]
    fn bombs_escapes_and_non_zips_are_refused() {
        let limits = ArchiveLimits { max_uncompressed_bytes: 1000, ..ArchiveLimits::default() };
        let bomb = zip_of(&[("a", &[0; 600]), ("b", &[0; 600])]);
        assert!(matches!(inspect_zip_sync(Cursor::new(bomb), limits), Err(ArchiveError::UncompressedTooLarge { .. })));
        let escape = zip_of(&[("../x", b"x")]);
        assert!(matches!(inspect_zip_sync(Cursor::new(escape), limits), Err(ArchiveError::PathEscapes { .. })));
        assert!(matches!(inspect_zip_sync(Cursor::new(b"not a zip".to_vec()), limits), Err(ArchiveError::NotZip)));
        let many = ArchiveLimits { max_entries: 1, ..limits };
        let two = zip_of(&[("a", b"1"), ("b", b"2")]);
        assert!(matches!(inspect_zip_sync(Cursor::new(two), many), Err(ArchiveError::TooManyEntries { .. })));
    }
}
