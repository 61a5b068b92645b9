//! Provider archives (GitHub's and GitLab's tarballs of a tag or commit) hold the repository in
//! one top-level directory; modules are stored with their files at the archive root. This
//! rewrites such an archive as a stream, dropping that first path component, before the
//! ordinary inspection runs on the result.

use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{Archive, Builder, EntryType};

use super::{ArchiveError, ArchiveLimits};

/// Copies `source` to `dest` without its top-level directory, stopping past the uncompressed
/// limit. Entries outside a top-level directory, and links, are carried over unchanged in
/// kind; the inspection that follows judges them.
pub fn strip_top_directory(source: impl Read, dest: impl Write, limits: ArchiveLimits) -> Result<(), ArchiveError> {
    let corrupt = |e: std::io::Error| ArchiveError::Corrupt(e.to_string());
    let mut archive = Archive::new(GzDecoder::new(source));
    let mut builder = Builder::new(GzEncoder::new(dest, Compression::fast()));
    let mut copied: u64 = 0;
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        if matches!(entry.header().entry_type(), EntryType::XGlobalHeader | EntryType::XHeader) {
            continue;
        }
        let path = entry.path().map_err(corrupt)?.into_owned();
        let inner: std::path::PathBuf = path.components().skip(1).collect();
        if inner.as_os_str().is_empty() {
            continue;
        }
        copied += entry.header().size().unwrap_or(0);
        if copied > limits.max_uncompressed_bytes {
            return Err(ArchiveError::UncompressedTooLarge { limit: limits.max_uncompressed_bytes });
        }
        let mut header = entry.header().clone();
        match entry.link_name().map_err(corrupt)? {
            Some(target) => {
                // A hard link names its target from the archive root, so it loses the top
                // directory too; a symlink's target is relative to the link and stays.
                let target: std::path::PathBuf = match header.entry_type() {
                    EntryType::Link => target.components().skip(1).collect(),
                    _ => target.into_owned(),
                };
                builder.append_link(&mut header, &inner, target).map_err(corrupt)?;
            }
            None => builder.append_data(&mut header, &inner, &mut entry).map_err(corrupt)?,
        }
    }
    builder.into_inner().and_then(|gz| gz.finish()).map_err(corrupt)?.flush().map_err(corrupt)
}
