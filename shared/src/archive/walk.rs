//! The walk over the tar entries: each entry's type, path and link target are judged as it
//! arrives, its body read and dropped, and what the summary needs is noted on the way.

use std::collections::HashSet;
use std::io::{self, Read};

use tar::{Archive, Entry, EntryType};

use super::error::{shown, ArchiveError, LinkKind};
use super::inflated::{discard, Tally};
use super::limits::{ArchiveLimits, HEADER_CAP, README_CAP};
use super::paths::{check_target, normalise, PathProblem, TargetProblem};
use super::sources::{is_module_file, readme_rank, ModuleSources, Wanted};

/// Why the walk stopped: a refusal of its own, or an error reading the stream that the caller
/// still has to explain.
pub(super) enum Failure {
    Refused(ArchiveError),
    Stream(io::Error),
}

impl From<ArchiveError> for Failure {
    fn from(e: ArchiveError) -> Self {
        Self::Refused(e)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Self::Stream(e)
    }
}

/// What the walk learned, before the stream's end is checked.
pub(super) struct Findings {
    pub(super) entries: usize,
    pub(super) root_module_files: Vec<String>,
    pub(super) readme: Option<String>,
    /// The single top-level directory every entry lives under, when there is one and it holds
    /// `.tf` files directly.
    pub(super) module_subdirectory: Option<String>,
    pub(super) sources: ModuleSources,
}

enum Kind {
    File,
    Directory,
    Link(LinkKind),
}

/// Whether the entries seen so far all live under one top-level directory.
enum Layout {
    Unknown,
    OneDirectory { name: String, has_module_files: bool },
    Mixed,
}

pub(super) struct Walk<'t> {
    limits: ArchiveLimits,
    tally: &'t Tally,
    entries: usize,
    root_module_files: Vec<String>,
    /// The README kept so far, with its rank: `README.md` beats `README`.
    readme: Option<(u8, Vec<u8>)>,
    layout: Layout,
    symlinks: HashSet<String>,
    path: String,
    sources: ModuleSources,
}

impl<'t> Walk<'t> {
    pub(super) fn new(limits: ArchiveLimits, tally: &'t Tally) -> Self {
        Self {
            limits,
            tally,
            entries: 0,
            root_module_files: Vec::new(),
            readme: None,
            layout: Layout::Unknown,
            symlinks: HashSet::new(),
            path: String::new(),
            sources: ModuleSources::default(),
        }
    }

    pub(super) fn run<R: Read>(mut self, archive: &mut Archive<R>, scratch: &mut [u8]) -> Result<Findings, Failure> {
        let mut entries = archive.entries()?;
        loop {
            self.tally.open_window(HEADER_CAP);
            let next = entries.next();
            self.tally.close_window();
            match next {
                None => break,
                Some(entry) => self.visit(entry?, scratch)?,
            }
        }
        Ok(self.into_findings())
    }

    fn visit<R: Read>(&mut self, mut entry: Entry<'_, R>, scratch: &mut [u8]) -> Result<(), Failure> {
        let entry_type = entry.header().entry_type();
        if entry_type == EntryType::XGlobalHeader {
            discard(&mut entry, scratch)?;
            return Ok(());
        }
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(ArchiveError::TooManyEntries { limit: self.limits.max_entries }.into());
        }
        let depth = self.check_path(&entry.path_bytes())?;
        let kind = kind_of(entry_type, &self.path)?;
        if self.tally.would_exceed(entry.size()) {
            return Err(ArchiveError::UncompressedTooLarge { limit: self.limits.max_uncompressed_bytes }.into());
        }
        self.check_not_beneath_symlink()?;
        if depth == 0 {
            return match kind {
                Kind::Directory => Ok(discard(&mut entry, scratch)?),
                _ => Err(ArchiveError::UnnamedEntry { path: shown(&entry.path_bytes()) }.into()),
            };
        }
        if let Kind::Link(link) = kind {
            self.check_link(link, depth, entry.link_name_bytes().as_deref().unwrap_or_default())?;
        }
        self.note_layout(&kind, depth);
        if depth == 1 && matches!(kind, Kind::File) {
            if is_module_file(&self.path) {
                self.root_module_files.push(self.path.clone());
            }
            if let Some(rank) = readme_rank(&self.path) {
                if self.readme.as_ref().is_none_or(|(kept, _)| rank >= *kept) {
                    let mut text = Vec::with_capacity(entry.size().min(README_CAP) as usize);
                    (&mut entry).take(README_CAP).read_to_end(&mut text)?;
                    self.readme = Some((rank, text));
                }
            }
        }
        if matches!(kind, Kind::File) {
            if let Some((directory, name, wanted)) = ModuleSources::wants(&self.path) {
                let (directory, name) = (directory.to_owned(), name.to_owned());
                self.keep_source(&directory, &name, wanted, &mut entry)?;
            }
        }
        Ok(discard(&mut entry, scratch)?)
    }

    /// Keeps a file the metadata reads, within the sources' budget.
    fn keep_source<R: Read>(
        &mut self,
        directory: &str,
        name: &str,
        wanted: Wanted,
        entry: &mut Entry<'_, R>,
    ) -> io::Result<()> {
        if let Wanted::Readme(rank) = wanted {
            if !self.sources.takes_readme(directory, rank) {
                return Ok(());
            }
        }
        let size = entry.size();
        let take = size.min(self.sources.room());
        let mut text = Vec::with_capacity(take as usize);
        Read::take(&mut *entry, take).read_to_end(&mut text)?;
        let complete = text.len() as u64 == size;
        self.sources.keep(directory, name, wanted, text, complete);
        Ok(())
    }

    /// Checks the entry's raw path and leaves its normalised form in `self.path`.
    fn check_path(&mut self, raw: &[u8]) -> Result<usize, ArchiveError> {
        if raw.len() > self.limits.max_path_len {
            return Err(ArchiveError::PathTooLong { path: shown(raw), limit: self.limits.max_path_len });
        }
        normalise(raw, &mut self.path).map_err(|problem| {
            let path = shown(raw);
            match problem {
                PathProblem::Absolute => ArchiveError::AbsolutePath { path },
                PathProblem::Escapes => ArchiveError::PathEscapes { path },
                PathProblem::Nul => ArchiveError::NulInPath { path },
            }
        })
    }

    /// Refuses an entry placed under a symlink seen earlier: unpacking it would write wherever
    /// the symlink points, and would make the lexical checks on later targets meaningless.
    fn check_not_beneath_symlink(&self) -> Result<(), ArchiveError> {
        if self.symlinks.is_empty() {
            return Ok(());
        }
        let beneath = self.path.match_indices('/').map(|(i, _)| &self.path[..i]).find(|p| self.symlinks.contains(*p));
        match beneath {
            Some(symlink) => Err(ArchiveError::BeneathSymlink { path: self.path.clone(), symlink: symlink.to_owned() }),
            None => Ok(()),
        }
    }

    fn check_link(&mut self, link: LinkKind, depth: usize, target: &[u8]) -> Result<(), ArchiveError> {
        if target.len() > self.limits.max_path_len {
            let (path, limit) = (self.path.clone(), self.limits.max_path_len);
            return Err(ArchiveError::LinkTargetTooLong { link, path, limit });
        }
        let checked = match link {
            LinkKind::Symlink => check_target(target, depth - 1, false),
            LinkKind::HardLink => check_target(target, 0, true),
        };
        match checked {
            Ok(()) => {
                if link == LinkKind::Symlink {
                    self.symlinks.insert(self.path.clone());
                }
                Ok(())
            }
            Err(problem) => {
                let (path, target) = (self.path.clone(), shown(target));
                Err(match problem {
                    TargetProblem::Escapes => ArchiveError::LinkEscapes { link, path, target },
                    TargetProblem::Unclear => ArchiveError::LinkTargetUnclear { link, path, target },
                })
            }
        }
    }

    fn note_layout(&mut self, kind: &Kind, depth: usize) {
        let top = self.path.split('/').next().unwrap_or_default();
        // Whether this entry is a module file directly inside its top-level directory: the
        // first entry can be one too (archives need not list the directory itself).
        let module_file_in_top =
            depth == 2 && matches!(kind, Kind::File) && is_module_file(&self.path[top.len() + 1..]);
        self.layout = match std::mem::replace(&mut self.layout, Layout::Mixed) {
            _ if depth == 1 && !matches!(kind, Kind::Directory) => Layout::Mixed,
            Layout::Unknown => Layout::OneDirectory { name: top.to_owned(), has_module_files: module_file_in_top },
            Layout::OneDirectory { name, has_module_files } if name == top => {
                Layout::OneDirectory { name, has_module_files: has_module_files || module_file_in_top }
            }
            _ => Layout::Mixed,
        };
    }

    fn into_findings(mut self) -> Findings {
        self.root_module_files.sort_unstable();
        self.root_module_files.dedup();
        let module_subdirectory = match self.layout {
            Layout::OneDirectory { name, has_module_files: true } => Some(name),
            _ => None,
        };
        Findings {
            entries: self.entries,
            root_module_files: self.root_module_files,
            readme: self.readme.map(|(_, text)| utf8_prefix(text)),
            module_subdirectory,
            sources: self.sources,
        }
    }
}

fn kind_of(entry_type: EntryType, path: &str) -> Result<Kind, ArchiveError> {
    let path = || path.to_owned();
    Ok(match entry_type {
        EntryType::Regular | EntryType::Continuous => Kind::File,
        EntryType::Directory => Kind::Directory,
        EntryType::Symlink => Kind::Link(LinkKind::Symlink),
        EntryType::Link => Kind::Link(LinkKind::HardLink),
        EntryType::Char | EntryType::Block => return Err(ArchiveError::DeviceFile { path: path() }),
        EntryType::Fifo => return Err(ArchiveError::Fifo { path: path() }),
        EntryType::GNUSparse => {
            return Err(ArchiveError::UnsupportedEntry { path: path(), kind: "sparse file".to_owned() })
        }
        other => {
            let kind = format!("tar entry of type `{}`", other.as_byte().escape_ascii());
            return Err(ArchiveError::UnsupportedEntry { path: path(), kind });
        }
    })
}

/// The README as text; a character cut in two by the size cap is dropped rather than replaced.
fn utf8_prefix(mut bytes: Vec<u8>) -> String {
    if let Err(e) = std::str::from_utf8(&bytes) {
        if e.error_len().is_none() {
            bytes.truncate(e.valid_up_to());
        }
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}
