//! Inspection of an uploaded module archive (a gzip-compressed tar, module files at its root)
//! before its version is marked `ok`. The archive is read once, as a stream: the upload is
//! counted and hashed, inflated, and walked entry by entry, so memory stays flat whatever the
//! archive's size, and anything unsafe to unpack or over a limit is refused with a message the
//! uploader can act on. Nothing is written anywhere. The module's Terraform files are kept on the
//! way (within a budget of their own) and read into its metadata (`terraform.rs`).

mod error;
mod inflated;
mod limits;
mod paths;
mod provider_zip;
mod repack;
mod sources;
mod terraform;
mod upload;
mod walk;

#[cfg(test)]
mod tests;

use std::io::{self, BufReader, Read};

use flate2::bufread::MultiGzDecoder;

pub use error::{ArchiveError, LinkKind};
pub use limits::ArchiveLimits;
pub use provider_zip::{inspect_zip, inspect_zip_sync, ZipSummary};
pub use repack::{repack, strip_top_directory};
pub use terraform::{Input, ModuleCall, ModuleDirectory, ModuleMetadata, Output, ProviderDependency, Resource};

use error::shown;
use inflated::{discard, Inflated, InflatedStop, Tally};
use limits::HEADER_CAP;
use upload::{Upload, UploadStop};
use walk::{Failure, Walk};

/// Size of the buffer that entry bodies are read into and dropped from.
const BUFFER_BYTES: usize = 64 * 1024;

/// What inspection learned about a valid archive.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveSummary {
    /// Names of the `.tf` and `.tf.json` files at the archive root, sorted.
    pub root_module_files: Vec<String>,
    /// The root `README.md` (or else `README`), any case, cut to its first MiB.
    pub readme: Option<String>,
    /// Files, directories and links; pax global headers are not counted.
    pub entries: usize,
    /// Bytes of the archive as uploaded.
    pub compressed_bytes: u64,
    /// Bytes of the tar stream once decompressed, headers and padding included.
    pub uncompressed_bytes: u64,
    /// Hex SHA-256 of the archive as uploaded.
    pub sha256: String,
    /// What the module's Terraform files declare (read from the same stream).
    pub metadata: ModuleMetadata,
}

/// Inspects the archive read from `source`, which is consumed as a stream. The work runs on
/// tokio's blocking pool, so this must be called from within a tokio runtime.
pub async fn inspect(
    source: impl Read + Send + 'static,
    limits: ArchiveLimits,
) -> Result<ArchiveSummary, ArchiveError> {
    match tokio::task::spawn_blocking(move || inspect_sync(source, limits)).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ArchiveError::Io(io::Error::other(e))),
    }
}

/// The same on this thread (what `inspect` runs inside `spawn_blocking`). Blocks until
/// `source` is read to its end or the archive is refused.
pub fn inspect_sync(source: impl Read, limits: ArchiveLimits) -> Result<ArchiveSummary, ArchiveError> {
    let tally = Tally::new(limits.max_uncompressed_bytes);
    let upload = Upload::new(source, limits.max_compressed_bytes);
    // `tar` reads each header as 512 bytes and each body as it is sized: inflating into reads
    // that small keeps zlib off its fast path (it wants room for a whole match), so the decoder
    // inflates into a buffer of its own and the reads above are served from it.
    let decoder = BufReader::with_capacity(BUFFER_BYTES, MultiGzDecoder::new(upload));
    let mut archive = tar::Archive::new(Inflated::new(decoder, &tally));
    let mut scratch = vec![0; BUFFER_BYTES];

    let walked = Walk::new(limits, &tally).run(&mut archive, &mut scratch);
    let mut inflated = archive.into_inner();
    let drained = walked.and_then(|findings| {
        discard(&mut inflated, &mut scratch)?;
        Ok(findings)
    });
    let mut upload = inflated.into_inner().into_inner().into_inner();
    let drained = drained.and_then(|findings| {
        upload.drain()?;
        Ok(findings)
    });
    let findings = match drained {
        Ok(findings) => findings,
        Err(Failure::Refused(e)) => return Err(e),
        Err(Failure::Stream(e)) => return Err(explain(e, &mut upload, &tally, limits)),
    };
    if findings.entries == 0 {
        return Err(ArchiveError::Empty);
    }
    if findings.root_module_files.is_empty() {
        return Err(match findings.module_subdirectory {
            Some(dir) => ArchiveError::ModuleInSubdirectory { dir },
            None => ArchiveError::NoRootModule,
        });
    }
    Ok(ArchiveSummary {
        metadata: terraform::read(findings.sources),
        root_module_files: findings.root_module_files,
        readme: findings.readme,
        entries: findings.entries,
        compressed_bytes: upload.consumed(),
        uncompressed_bytes: tally.consumed(),
        sha256: upload.into_sha256(),
    })
}

/// Turns an error that surfaced from the stream into the reason behind it: a failing source or a
/// limit the counting readers recorded, then a bad gzip header, then plain corruption.
fn explain<R: Read>(error: io::Error, upload: &mut Upload<R>, tally: &Tally, limits: ArchiveLimits) -> ArchiveError {
    match upload.take_stop() {
        Some(UploadStop::Source(source)) => return ArchiveError::Io(source),
        Some(UploadStop::TooLarge) => return ArchiveError::CompressedTooLarge { limit: limits.max_compressed_bytes },
        None => {}
    }
    match tally.stop() {
        Some(InflatedStop::TooLarge) => ArchiveError::UncompressedTooLarge { limit: limits.max_uncompressed_bytes },
        Some(InflatedStop::HeadersTooLarge) => ArchiveError::HeadersTooLarge { limit: HEADER_CAP },
        None if upload.consumed() == 0 => ArchiveError::Empty,
        None if !upload.looks_like_gzip() => ArchiveError::NotGzip,
        None => ArchiveError::Corrupt(shown(error.to_string().as_bytes())),
    }
}
