//! Provider archives (GitHub's and GitLab's tarballs of a tag or commit) hold the repository in
//! one top-level directory; modules are stored with their files at the archive root. This
//! rewrites such an archive as a stream, dropping that first path component, before the
//! ordinary inspection runs on the result. A module published from a folder of a monorepo keeps
//! only that folder, which becomes the root; the rest of the repository is left out, and a link
//! that would lead out of the folder is refused here, naming the folder.
//!
//! The provider's stream is read through the same counting readers as an upload, under the same
//! limits: the compressed and uncompressed sizes, the entry count, the length of paths and link
//! targets, and the header window. The window matters most here: `tar` reads a GNU long name or
//! long link, or a pax extension, into memory whole, as long as its header claims, so a header
//! claiming a GiB would have it buffer a GiB. The window stops the stream once one entry's
//! headers pass `HEADER_CAP`, before `tar` has buffered more than that.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use flate2::bufread::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{Archive, Builder, Entry, EntryType};

use super::error::{shown, LinkKind};
use super::paths::{check_target, TargetProblem};
use super::walk::Failure;
use super::{explain, ArchiveError, ArchiveLimits, Inflated, Tally, Upload, HEADER_CAP};

/// Copies `source` to `dest` without its top-level directory, refusing the archive at the first
/// limit it crosses. Entries outside a top-level directory, and links, are carried over
/// unchanged in kind; the inspection that follows judges them.
pub fn strip_top_directory(source: impl Read, dest: impl Write, limits: ArchiveLimits) -> Result<(), ArchiveError> {
    repack(source, dest, limits, "")
}

/// Copies the folder `directory` (a relative path of `/`-separated names, none `.` or `..`) of
/// the repository in `source` to `dest`, as the root of its own archive; with an empty
/// `directory`, the whole repository, as [`strip_top_directory`] does. A repository without the
/// folder, and a link inside it whose target lies outside it, are refused.
pub fn repack(source: impl Read, dest: impl Write, limits: ArchiveLimits, directory: &str) -> Result<(), ArchiveError> {
    let mut folder = Folder::new(directory);
    let tally = Tally::new(limits.max_uncompressed_bytes);
    let upload = Upload::unhashed(source, limits.max_compressed_bytes);
    let mut archive = Archive::new(Inflated::new(MultiGzDecoder::new(upload), &tally));
    let mut builder = Builder::new(GzEncoder::new(dest, Compression::fast()));

    let copied = copy_entries(&mut archive, &mut builder, &tally, limits, &mut folder);
    let mut upload = archive.into_inner().into_inner().into_inner();
    match copied {
        Ok(()) => {}
        Err(Failure::Refused(e)) => return Err(e),
        Err(Failure::Stream(e)) => return Err(explain(e, &mut upload, &tally, limits)),
    }
    if !folder.found {
        return Err(ArchiveError::DirectoryMissing { dir: directory.to_owned() });
    }
    let corrupt = |e: std::io::Error| ArchiveError::Corrupt(e.to_string());
    builder.into_inner().and_then(|gz| gz.finish()).map_err(corrupt)?.flush().map_err(corrupt)
}

/// The folder of the repository that becomes the archive root, and whether any entry lay in it.
struct Folder {
    components: Vec<String>,
    found: bool,
}

impl Folder {
    fn new(directory: &str) -> Self {
        let components: Vec<String> =
            directory.split('/').filter(|c| !c.is_empty() && *c != ".").map(str::to_owned).collect();
        // The whole repository is always there.
        Folder { found: components.is_empty(), components }
    }

    /// `path` (the top-level directory already dropped) relative to the folder, if inside it.
    fn inside(&self, path: &Path) -> Option<PathBuf> {
        let mut parts = path.components();
        for expected in &self.components {
            if parts.next()?.as_os_str() != expected.as_str() {
                return None;
            }
        }
        Some(parts.collect())
    }

    fn shown(&self) -> String {
        self.components.join("/")
    }
}

fn copy_entries<R: Read, W: Write>(
    archive: &mut Archive<R>,
    builder: &mut Builder<W>,
    tally: &Tally,
    limits: ArchiveLimits,
    folder: &mut Folder,
) -> Result<(), Failure> {
    let mut entries = archive.entries()?;
    let mut count = 0;
    loop {
        // Whatever `tar` reads to find the next entry (its headers, long names, pax records)
        // is held in memory, so it is read under the header cap.
        tally.open_window(HEADER_CAP);
        let next = entries.next();
        tally.close_window();
        let Some(entry) = next else { return Ok(()) };
        let mut entry = entry?;
        if entry.header().entry_type() == EntryType::XGlobalHeader {
            continue;
        }
        count += 1;
        if count > limits.max_entries {
            return Err(ArchiveError::TooManyEntries { limit: limits.max_entries }.into());
        }
        if tally.would_exceed(entry.size()) {
            return Err(ArchiveError::UncompressedTooLarge { limit: limits.max_uncompressed_bytes }.into());
        }
        copy_entry(&mut entry, builder, limits, folder)?;
    }
}

fn copy_entry<R: Read, W: Write>(
    entry: &mut Entry<'_, R>,
    builder: &mut Builder<W>,
    limits: ArchiveLimits,
    folder: &mut Folder,
) -> Result<(), Failure> {
    let raw = entry.path_bytes();
    if raw.len() > limits.max_path_len {
        let path = super::error::shown(&raw);
        return Err(ArchiveError::PathTooLong { path, limit: limits.max_path_len }.into());
    }
    let path = entry.path()?.into_owned();
    let in_repository: PathBuf = path.components().skip(1).collect();
    let Some(inner) = folder.inside(&in_repository) else { return Ok(()) };
    folder.found = true;
    if inner.as_os_str().is_empty() {
        return Ok(());
    }
    let mut header = entry.header().clone();
    match entry.link_name_bytes() {
        Some(target) => {
            if target.len() > limits.max_path_len {
                let link = if header.entry_type() == EntryType::Link { LinkKind::HardLink } else { LinkKind::Symlink };
                let path = inner.to_string_lossy().into_owned();
                return Err(ArchiveError::LinkTargetTooLong { link, path, limit: limits.max_path_len }.into());
            }
            let target = entry.link_name()?.unwrap_or_default().into_owned();
            // A hard link names its target from the archive root, so it loses the top
            // directory (and the folder) too; a symlink's target is relative to the link and
            // stays, as long as it stays in the folder.
            let target: PathBuf = match header.entry_type() {
                EntryType::Link => {
                    let in_repository: PathBuf = target.components().skip(1).collect();
                    match folder.inside(&in_repository) {
                        Some(target) => target,
                        None if folder.components.is_empty() => in_repository,
                        None => return Err(leaves(folder, LinkKind::HardLink, &inner, &target).into()),
                    }
                }
                _ if folder.components.is_empty() => target,
                _ => {
                    let depth = inner.components().count() - 1;
                    match check_target(target.as_os_str().as_encoded_bytes(), depth, false) {
                        Err(TargetProblem::Escapes) => {
                            return Err(leaves(folder, LinkKind::Symlink, &inner, &target).into())
                        }
                        // The inspection that follows explains an unclear target.
                        Ok(()) | Err(TargetProblem::Unclear) => target,
                    }
                }
            };
            builder.append_link(&mut header, &inner, target)?;
        }
        None => builder.append_data(&mut header, &inner, entry)?,
    }
    Ok(())
}

fn leaves(folder: &Folder, link: LinkKind, path: &Path, target: &Path) -> ArchiveError {
    ArchiveError::LinkLeavesDirectory {
        link,
        path: path.to_string_lossy().into_owned(),
        target: shown(target.as_os_str().as_encoded_bytes()),
        dir: folder.shown(),
    }
}
