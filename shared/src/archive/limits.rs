//! The ceilings an uploaded archive must stay under, kept apart so that settings can build them
//! and error messages can quote them in the units people use.

use std::fmt;

pub(super) const KIB: u64 = 1024;
pub(super) const MIB: u64 = 1024 * KIB;

/// How much of a README the summary keeps; the rest is read and discarded.
pub(super) const README_CAP: u64 = MIB;

/// The most tar header bytes (GNU long names, pax records) one entry may carry. The `tar` crate
/// holds these in memory, so they need a ceiling of their own below the uncompressed limit.
pub(super) const HEADER_CAP: u64 = MIB;

/// Limits; every one a setting with a sane default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Bytes of the archive as uploaded (default 100 MiB).
    pub max_compressed_bytes: u64,
    /// Bytes of the tar stream once decompressed, headers included (default 500 MiB).
    pub max_uncompressed_bytes: u64,
    /// Entries of the tar stream: files, directories and links (default 10 000).
    pub max_entries: usize,
    /// Bytes of one entry's path or link target, as stored in the archive (default 1024).
    pub max_path_len: usize,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            max_compressed_bytes: 100 * MIB,
            max_uncompressed_bytes: 500 * MIB,
            max_entries: 10_000,
            max_path_len: 1024,
        }
    }
}

/// A byte count written the way a limit is usually set: `500 MiB`, `64 KiB`, `1000 bytes`.
pub(super) struct Size(pub(super) u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            n if n >= MIB && n % MIB == 0 => write!(f, "{} MiB", n / MIB),
            n if n >= KIB && n % KIB == 0 => write!(f, "{} KiB", n / KIB),
            n => write!(f, "{n} bytes"),
        }
    }
}
