//! The Terraform sources a module's metadata is read from, kept as the walk passes them: the
//! `.tf` and `.tf.json` files and the README of the root module, of each submodule
//! (`modules/<name>/`) and of each example (`examples/<name>/`), as the public registry lays a
//! module out. What is kept has a budget of its own, so a huge archive costs the walk no more
//! memory than the budget. Each source file goes to a parser thread as soon as it is read
//! ([`Parser`]), so parsing overlaps the decompression the walk waits on.

use std::collections::BTreeMap;

use super::limits::MIB;
use super::terraform::Parser;

/// The most source bytes (files and READMEs of every directory together) kept for metadata.
pub(super) const SOURCES_CAP: u64 = 4 * MIB;
/// The most directories (root, submodules, examples) whose sources are kept.
const DIRECTORIES_CAP: usize = 256;

/// What the walk kept of a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirectorySources {
    /// The names of its `.tf` and `.tf.json` files, in archive order (their text went to the
    /// parser).
    pub files: Vec<String>,
    /// Its README (`README.md` preferred over `README`), when it has one.
    pub readme: Option<String>,
    readme_rank: u8,
}

/// What the walk kept, by directory (`""` for the root, `modules/<name>`, `examples/<name>`).
#[derive(Default)]
pub struct ModuleSources {
    pub directories: BTreeMap<String, DirectorySources>,
    /// Set when something was left out for the budget: the metadata says so.
    pub left_out: Option<String>,
    kept: u64,
    /// Parses the source files as they come; started with the first.
    pub(super) parser: Option<Parser>,
}

/// What a file is to the metadata.
pub(super) enum Wanted {
    Source,
    Readme(u8),
}

impl ModuleSources {
    /// The directory and file name of `path` when the metadata reads it, and what it is.
    pub(super) fn wants(path: &str) -> Option<(&str, &str, Wanted)> {
        let (directory, name) = match path.rsplit_once('/') {
            None => ("", path),
            Some((directory, name)) => {
                let mut parts = directory.split('/');
                let (Some("modules" | "examples"), Some(_), None) = (parts.next(), parts.next(), parts.next()) else {
                    return None;
                };
                (directory, name)
            }
        };
        // The root's README is the version's own (the walk keeps it apart).
        let wanted = match readme_rank(name) {
            _ if is_module_file(name) => Wanted::Source,
            Some(rank) if !directory.is_empty() => Wanted::Readme(rank),
            _ => return None,
        };
        Some((directory, name, wanted))
    }

    /// How many more bytes may be kept.
    pub(super) fn room(&self) -> u64 {
        SOURCES_CAP - self.kept
    }

    /// Whether a README of `rank` would replace what `directory` keeps (or is its first).
    pub(super) fn takes_readme(&self, directory: &str, rank: u8) -> bool {
        self.directories.get(directory).is_none_or(|kept| kept.readme.is_none() || rank >= kept.readme_rank)
    }

    /// Keeps `text` (read whole: `complete`) as `name` of `directory`; a file cut short by the
    /// budget is left out and said so.
    pub(super) fn keep(&mut self, directory: &str, name: &str, wanted: Wanted, text: Vec<u8>, complete: bool) {
        if !complete {
            self.left_out.get_or_insert_with(|| {
                format!("sources over {} MiB: {directory}/{name} and later files not read", SOURCES_CAP / MIB)
            });
            return;
        }
        if !self.directories.contains_key(directory) && self.directories.len() >= DIRECTORIES_CAP {
            self.left_out.get_or_insert_with(|| format!("more than {DIRECTORIES_CAP} module directories"));
            return;
        }
        let text = String::from_utf8(text).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        let entry = self.directories.entry(directory.to_owned()).or_default();
        match wanted {
            Wanted::Source => {
                self.kept += text.len() as u64;
                entry.files.push(name.to_owned());
                self.parser.get_or_insert_with(Parser::start).parse(directory, name, text);
            }
            Wanted::Readme(rank) => {
                let replaced = entry.readme.as_ref().map_or(0, |readme| readme.len() as u64);
                self.kept = self.kept + text.len() as u64 - replaced;
                entry.readme = Some(text);
                entry.readme_rank = rank;
            }
        }
    }
}

/// Whether Terraform loads `name` as part of a module: `.tf` or `.tf.json`, not hidden.
pub(super) fn is_module_file(name: &str) -> bool {
    (name.ends_with(".tf") || name.ends_with(".tf.json")) && !name.starts_with('.')
}

pub(super) fn readme_rank(name: &str) -> Option<u8> {
    if name.eq_ignore_ascii_case("README.md") {
        Some(2)
    } else if name.eq_ignore_ascii_case("README") {
        Some(1)
    } else {
        None
    }
}
