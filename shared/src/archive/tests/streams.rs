//! Limits, and streams that are not a whole gzip-compressed tar.

use std::io::{self, Read, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use sha2::{Digest, Sha256};
use tar::EntryType;

use super::{gzip, header, inspect, module, refusal, refusal_within, Counted, Tarball};
use crate::archive::limits::MIB;
use crate::archive::{inspect_sync, ArchiveError, ArchiveLimits};

/// A gzip-compressed tar holding one file of `mebibytes` MiB of zeros. Gzip members may be
/// concatenated, so one member inflating to a MiB is compressed once and repeated: the zeros are
/// never held whole in memory, nor deflated at debug-build speed.
fn zeros(mebibytes: u64) -> Vec<u8> {
    let header = header(b"zeros", EntryType::Regular, mebibytes * MIB, b"");
    let one_mib = gzip(&vec![0; MIB as usize]);
    let mut bomb = gzip(header.as_bytes());
    for _ in 0..mebibytes {
        bomb.extend_from_slice(&one_mib);
    }
    bomb.extend(gzip(&[0; 1024]));
    bomb
}

/// Text that deflate cannot shrink much.
fn noise(len: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'!' + (state % 94) as u8)
        })
        .collect()
}

#[test]
fn a_gzip_bomb_stops_at_the_default_uncompressed_limit() {
    let bomb = zeros(600);
    let mut source = Counted { bytes: &bomb, read: 0 };

    let error = inspect_sync(&mut source, ArchiveLimits::default()).unwrap_err();

    assert_eq!(error.to_string(), "the archive exceeds the 500 MiB uncompressed limit");
    assert!(source.read < bomb.len() / 2, "read {} of {} bytes", source.read, bomb.len());
}

#[test]
fn a_gzip_bomb_stops_at_a_small_uncompressed_limit() {
    let limits = ArchiveLimits { max_uncompressed_bytes: MIB, ..ArchiveLimits::default() };
    let mut tarball = module();
    for i in 0..8 {
        tarball = tarball.file(&format!("part{i}"), &"\0".repeat(256 * 1024));
    }

    assert_eq!(refusal_within(&tarball.gz(), limits), "the archive exceeds the 1 MiB uncompressed limit");
}

#[test]
fn bytes_after_the_end_of_the_tar_count_against_the_uncompressed_limit() {
    let limits = ArchiveLimits { max_uncompressed_bytes: 2 * MIB, ..ArchiveLimits::default() };
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(&module().tar()).unwrap();
    io::copy(&mut io::repeat(0).take(6 * MIB), &mut encoder).unwrap();

    assert_eq!(refusal_within(&encoder.finish().unwrap(), limits), "the archive exceeds the 2 MiB uncompressed limit");
}

#[test]
fn a_gzip_bomb_past_the_end_of_the_tar_stops_inflating_at_the_limit() {
    let limits = ArchiveLimits { max_uncompressed_bytes: 16 * MIB, ..ArchiveLimits::default() };
    let one_mib = gzip(&vec![0; MIB as usize]);
    let mut bomb = module().gz();
    for _ in 0..600 {
        bomb.extend_from_slice(&one_mib);
    }
    let mut source = Counted { bytes: &bomb, read: 0 };

    let error = inspect_sync(&mut source, limits).unwrap_err();

    assert_eq!(error.to_string(), "the archive exceeds the 16 MiB uncompressed limit");
    assert!(source.read < bomb.len() / 4, "read {} of {} bytes", source.read, bomb.len());
}

#[test]
fn an_oversized_long_name_is_stopped_at_the_header_cap() {
    let mut name = vec![b'a'; 8 * MIB as usize];
    name.push(0);
    let gz = Tarball::new().raw(b"././@LongLink", EntryType::GNULongName, b"", &name).file("main.tf", "").gz();

    assert_eq!(refusal(&gz), "the tar headers of one entry exceed 1 MiB");
}

#[test]
fn an_archive_over_the_compressed_limit_is_refused() {
    let limits = ArchiveLimits { max_compressed_bytes: 4096, ..ArchiveLimits::default() };
    let gz = module().file("noise", &noise(64 * 1024)).gz();

    assert_eq!(refusal_within(&gz, limits), "the archive exceeds the 4 KiB compressed limit");
}

#[test]
fn an_archive_with_too_many_entries_is_refused() {
    let limits = ArchiveLimits { max_entries: 3, ..ArchiveLimits::default() };
    let gz = module().file("a", "").file("b", "").file("c", "").gz();

    assert_eq!(refusal_within(&gz, limits), "the archive holds more than 3 entries");
}

#[test]
fn an_entry_path_over_the_length_limit_is_refused() {
    let path = format!("{}/main.tf", "d".repeat(1020));
    let gz = module().file(&path, "").gz();

    let message = refusal(&gz);

    assert!(message.starts_with("entry path longer than 1024 bytes: `dddd"), "{message}");
    assert!(message.len() < 300, "{message}");
}

#[test]
fn a_truncated_archive_is_reported_as_truncated() {
    let gz = module().file("README.md", &"words ".repeat(10_000)).gz();

    let message = refusal(&gz[..gz.len() / 2]);

    assert!(message.starts_with("the archive is truncated or corrupt: "), "{message}");
}

#[test]
fn an_archive_missing_only_its_gzip_trailer_is_truncated() {
    let gz = module().gz();

    let message = refusal(&gz[..gz.len() - 4]);

    assert!(message.starts_with("the archive is truncated or corrupt: "), "{message}");
}

#[test]
fn a_gzip_stream_that_holds_no_tar_is_corrupt() {
    let message = refusal(&gzip(&[b'x'; 2048]));

    assert!(message.starts_with("the archive is truncated or corrupt: "), "{message}");
}

#[test]
fn a_file_that_is_not_gzip_is_reported_as_such() {
    assert_eq!(refusal(b"resource \"null_resource\" \"x\" {}\n"), "the archive is not gzip-compressed");
}

#[test]
fn an_empty_tar_is_reported_as_empty() {
    assert_eq!(refusal(&Tarball::new().gz()), "the archive is empty");
}

#[test]
fn a_zero_byte_upload_is_reported_as_empty() {
    assert_eq!(refusal(b""), "the archive is empty");
}

#[test]
fn a_failing_source_is_reported_without_its_internals() {
    let gz = module().gz();
    let source = (&gz[..20]).chain(Failing);

    let error = inspect_sync(source, ArchiveLimits::default()).unwrap_err();

    assert_eq!(error.to_string(), "the archive could not be read in full; upload it again");
    assert!(matches!(error, ArchiveError::Io(ref e) if e.to_string() == "connection reset by S3"));
}

struct Failing;

impl Read for Failing {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::ConnectionReset, "connection reset by S3"))
    }
}

#[test]
fn a_valid_archive_reads_the_whole_source() {
    let gz = module().gz();
    let mut source = Counted { bytes: &gz, read: 0 };

    inspect_sync(&mut source, ArchiveLimits::default()).unwrap();

    assert_eq!((source.read, inspect(&gz).unwrap().compressed_bytes), (gz.len(), gz.len() as u64));
}

#[test]
fn the_hash_and_count_cover_a_large_upload_read_in_dribbles() {
    let gz = module().file("noise", &noise(600 * 1024)).gz();
    let source = Dribble(&gz);

    let summary = inspect_sync(source, ArchiveLimits::default()).unwrap();

    assert_eq!(summary.sha256, hex::encode(Sha256::digest(&gz)));
    assert_eq!(summary.compressed_bytes, gz.len() as u64);
}

/// A source that never returns more than 1000 bytes a read, as a network stream may.
struct Dribble<'a>(&'a [u8]);

impl Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(1000);
        self.0.read(&mut buf[..n])
    }
}
