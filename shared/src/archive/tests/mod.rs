//! Archives built in memory, entry by entry, with raw headers where `tar::Builder` would refuse
//! the hostile ones, then inspected as an upload would be.

mod accepted;
mod entries;
mod metadata;
mod repack;
mod streams;

use std::io::{self, Read, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use tar::{EntryType, Header};

use super::{inspect_sync, ArchiveError, ArchiveLimits, ArchiveSummary};

/// A tar stream under construction; every path and link target is written as given.
struct Tarball(tar::Builder<Vec<u8>>);

impl Tarball {
    fn new() -> Self {
        Self(tar::Builder::new(Vec::new()))
    }

    fn raw(mut self, path: &[u8], kind: EntryType, link: &[u8], body: &[u8]) -> Self {
        if path.len() > 100 {
            let mut long = Vec::from(path);
            long.push(0);
            self = self.raw(b"././@LongLink", EntryType::GNULongName, b"", &long);
        }
        let header = header(&path[..path.len().min(100)], kind, body.len() as u64, link);
        self.0.append(&header, body).unwrap();
        self
    }

    fn file(self, path: &str, body: &str) -> Self {
        self.raw(path.as_bytes(), EntryType::Regular, b"", body.as_bytes())
    }

    fn dir(self, path: &str) -> Self {
        self.raw(path.as_bytes(), EntryType::Directory, b"", b"")
    }

    fn symlink(self, path: &str, target: &str) -> Self {
        self.raw(path.as_bytes(), EntryType::Symlink, target.as_bytes(), b"")
    }

    fn hard_link(self, path: &str, target: &str) -> Self {
        self.raw(path.as_bytes(), EntryType::Link, target.as_bytes(), b"")
    }

    fn tar(self) -> Vec<u8> {
        self.0.into_inner().unwrap()
    }

    fn gz(self) -> Vec<u8> {
        gzip(&self.tar())
    }
}

/// A GNU header with `path` and `link` copied in byte for byte, bypassing the Builder's checks.
fn header(path: &[u8], kind: EntryType, size: u64, link: &[u8]) -> Header {
    let mut header = Header::new_gnu();
    let gnu = header.as_gnu_mut().unwrap();
    gnu.name[..path.len()].copy_from_slice(path);
    gnu.linkname[..link.len()].copy_from_slice(link);
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(if kind == EntryType::Directory { 0o755 } else { 0o644 });
    header.set_mtime(0);
    header.set_cksum();
    header
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// The smallest archive inspection accepts.
fn module() -> Tarball {
    Tarball::new().file("main.tf", "resource \"null_resource\" \"x\" {}\n")
}

fn inspect(bytes: &[u8]) -> Result<ArchiveSummary, ArchiveError> {
    inspect_sync(bytes, ArchiveLimits::default())
}

fn refusal(bytes: &[u8]) -> String {
    refusal_within(bytes, ArchiveLimits::default())
}

fn refusal_within(bytes: &[u8], limits: ArchiveLimits) -> String {
    match inspect_sync(bytes, limits) {
        Ok(summary) => panic!("accepted: {summary:?}"),
        Err(e) => e.to_string(),
    }
}

/// A source that counts what inspection took from it, to show where a stream stopped.
struct Counted<'a> {
    bytes: &'a [u8],
    read: usize,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (&self.bytes[self.read..]).read(buf)?;
        self.read += n;
        Ok(n)
    }
}
