//! Why an archive was refused. Each message is written for the person who uploaded it: it lands
//! in the version's `error` field, so it names the offending entry and says what to change.

use std::fmt;

use super::limits::Size;

/// Why inspection refused an archive; `Display` is the message the uploader reads.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Reading the upload itself failed; the cause stays in `source()` for the logs.
    #[error("the archive could not be read in full; upload it again")]
    Io(#[source] std::io::Error),
    #[error("the archive is not gzip-compressed")]
    NotGzip,
    #[error("the archive is not a zip file")]
    NotZip,
    #[error("the archive is truncated or corrupt: {0}")]
    Corrupt(String),
    #[error("the archive exceeds the {} compressed limit", Size(*.limit))]
    CompressedTooLarge { limit: u64 },
    #[error("the archive exceeds the {} uncompressed limit", Size(*.limit))]
    UncompressedTooLarge { limit: u64 },
    #[error("the archive holds more than {limit} entries")]
    TooManyEntries { limit: usize },
    #[error("the tar headers of one entry exceed {}", Size(*.limit))]
    HeadersTooLarge { limit: u64 },
    #[error("the archive is empty")]
    Empty,
    #[error("no .tf or .tf.json files at the archive root")]
    NoRootModule,
    #[error(
        "no .tf or .tf.json files at the archive root; the module sits in the subdirectory `{dir}/`: \
         archive the module's files themselves, not their folder"
    )]
    ModuleInSubdirectory { dir: String },
    #[error("entry `{path}` escapes the archive root")]
    PathEscapes { path: String },
    #[error("absolute path `{path}`: entries must be relative to the archive root")]
    AbsolutePath { path: String },
    #[error("path `{path}` contains a NUL byte")]
    NulInPath { path: String },
    #[error("entry path longer than {limit} bytes: `{path}`")]
    PathTooLong { path: String, limit: usize },
    #[error("entry `{path}` names no file")]
    UnnamedEntry { path: String },
    #[error("entry `{path}` is a device file")]
    DeviceFile { path: String },
    #[error("entry `{path}` is a FIFO")]
    Fifo { path: String },
    #[error("entry `{path}` is a {kind}, which a module archive may not contain")]
    UnsupportedEntry { path: String, kind: String },
    #[error("entry `{path}` lies beneath the symlink `{symlink}`")]
    BeneathSymlink { path: String, symlink: String },
    #[error("{link} `{path}` points outside the archive root (`{target}`)")]
    LinkEscapes { link: LinkKind, path: String, target: String },
    #[error(
        "{link} `{path}` has the target `{target}`, which cannot be checked: name it without `..` after a directory"
    )]
    LinkTargetUnclear { link: LinkKind, path: String, target: String },
    #[error("{link} `{path}` points outside the source directory `{dir}/` (`{target}`)")]
    LinkLeavesDirectory { link: LinkKind, path: String, target: String, dir: String },
    #[error("the repository has no directory `{dir}/`")]
    DirectoryMissing { dir: String },
    #[error("{link} `{path}` has a target longer than {limit} bytes")]
    LinkTargetTooLong { link: LinkKind, path: String, limit: usize },
}

/// Which of the two link entry types an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    Symlink,
    HardLink,
}

impl fmt::Display for LinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Symlink => "symlink",
            Self::HardLink => "hard link",
        })
    }
}

/// The most characters of a path an error message quotes.
const SHOWN_CHARS: usize = 200;

/// An archive path as a message can quote it: lossy UTF-8, control characters escaped, long
/// paths cut short.
pub(super) fn shown(raw: &[u8]) -> String {
    let mut out = String::new();
    for (i, c) in String::from_utf8_lossy(raw).chars().enumerate() {
        if i == SHOWN_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
