//! The rewrite of a provider's archive, its top-level directory dropped, under an upload's
//! limits.

use flate2::read::GzDecoder;
use tar::EntryType;

use super::{gzip, header, Counted, Tarball};
use crate::archive::limits::MIB;
use crate::archive::{inspect_sync, strip_top_directory, ArchiveLimits};

fn stripped(gz: &[u8], limits: ArchiveLimits) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    strip_top_directory(gz, &mut out, limits).map(|()| out).map_err(|e| e.to_string())
}

fn refusal_within(gz: &[u8], limits: ArchiveLimits) -> String {
    match stripped(gz, limits) {
        Ok(_) => panic!("rewritten"),
        Err(e) => e,
    }
}

fn refusal(gz: &[u8]) -> String {
    refusal_within(gz, ArchiveLimits::default())
}

/// Each entry of a rewritten archive: its path, and its link target if it has one.
fn entries(gz: &[u8]) -> Vec<(String, Option<String>)> {
    let mut archive = tar::Archive::new(GzDecoder::new(gz));
    let entries = archive.entries().unwrap().map(|entry| {
        let entry = entry.unwrap();
        let link = entry.link_name().unwrap().map(|l| l.to_string_lossy().into_owned());
        (entry.path().unwrap().to_string_lossy().into_owned(), link)
    });
    entries.collect()
}

/// A gzip stream whose tar holds an entry of `kind` claiming a GiB, and holding it: zeros, in
/// gzip members of one MiB each, so the test never deflates or holds the GiB.
fn claiming_a_gibibyte(kind: EntryType) -> Vec<u8> {
    let claim = header(b"././@LongLink", kind, 1024 * MIB, b"");
    let one_mib = gzip(&vec![0; MIB as usize]);
    let mut bomb = gzip(claim.as_bytes());
    for _ in 0..1024 {
        bomb.extend_from_slice(&one_mib);
    }
    bomb.extend(Tarball::new().file("repo/main.tf", "").gz());
    bomb
}

#[test]
fn the_top_directory_leaves_paths_and_hard_link_targets() {
    let gz = Tarball::new()
        .dir("repo-abc/")
        .file("repo-abc/main.tf", "variable \"x\" {}\n")
        .dir("repo-abc/modules/")
        .file("repo-abc/modules/a.tf", "")
        .symlink("repo-abc/link.tf", "main.tf")
        .hard_link("repo-abc/hard.tf", "repo-abc/main.tf")
        .gz();

    let out = stripped(&gz, ArchiveLimits::default()).unwrap();

    let owned = |(path, link): (&str, Option<&str>)| (path.to_owned(), link.map(str::to_owned));
    let expected: Vec<_> = [
        ("main.tf", None),
        ("modules", None),
        ("modules/a.tf", None),
        ("link.tf", Some("main.tf")),
        ("hard.tf", Some("main.tf")),
    ]
    .into_iter()
    .map(owned)
    .collect();
    assert_eq!(entries(&out), expected);
    assert_eq!(inspect_sync(&out[..], ArchiveLimits::default()).unwrap().root_module_files, ["main.tf"]);
}

#[test]
fn a_long_name_claiming_a_gibibyte_stops_at_the_header_cap() {
    let bomb = claiming_a_gibibyte(EntryType::GNULongName);
    let mut source = Counted { bytes: &bomb, read: 0 };

    let error = strip_top_directory(&mut source, std::io::sink(), ArchiveLimits::default()).unwrap_err();

    assert_eq!(error.to_string(), "the tar headers of one entry exceed 1 MiB");
    assert!(source.read < bomb.len() / 4, "read {} of {} bytes", source.read, bomb.len());
}

#[test]
fn a_long_link_or_pax_record_claiming_a_gibibyte_stops_at_the_header_cap() {
    for kind in [EntryType::GNULongLink, EntryType::XHeader] {
        assert_eq!(refusal(&claiming_a_gibibyte(kind)), "the tar headers of one entry exceed 1 MiB", "{kind:?}");
    }
}

#[test]
fn a_path_over_the_length_limit_is_refused() {
    let gz = Tarball::new().file(&format!("repo/{}/main.tf", "d".repeat(1100)), "").gz();

    let message = refusal(&gz);

    assert!(message.starts_with("entry path longer than 1024 bytes: `repo/dddd"), "{message}");
}

#[test]
fn a_link_target_over_the_length_limit_is_refused() {
    let target = "t/".repeat(600);
    let mut long = target.clone().into_bytes();
    long.push(0);
    let gz = Tarball::new().raw(b"././@LongLink", EntryType::GNULongLink, b"", &long).symlink("repo/l", "x").gz();

    assert_eq!(refusal(&gz), "symlink `l` has a target longer than 1024 bytes");
}

#[test]
fn more_entries_than_the_limit_are_refused() {
    let limits = ArchiveLimits { max_entries: 3, ..ArchiveLimits::default() };
    let gz = Tarball::new().dir("repo/").file("repo/a", "").file("repo/b", "").file("repo/c", "").gz();

    assert_eq!(refusal_within(&gz, limits), "the archive holds more than 3 entries");
}

#[test]
fn an_archive_over_the_compressed_or_uncompressed_limit_is_refused() {
    let compressed = ArchiveLimits { max_compressed_bytes: 1024, ..ArchiveLimits::default() };
    let noisy: String =
        (0..64 * 1024u32).map(|i| char::from(b'!' + (i.wrapping_mul(2_654_435_761) >> 27) as u8)).collect();
    let gz = Tarball::new().file("repo/noise", &noisy).gz();
    assert_eq!(refusal_within(&gz, compressed), "the archive exceeds the 1 KiB compressed limit");

    let uncompressed = ArchiveLimits { max_uncompressed_bytes: MIB, ..ArchiveLimits::default() };
    let gz = Tarball::new().file("repo/zeros", &"\0".repeat(2 * MIB as usize)).gz();
    assert_eq!(refusal_within(&gz, uncompressed), "the archive exceeds the 1 MiB uncompressed limit");
}

#[test]
fn a_stream_that_is_not_gzip_is_reported_as_such() {
    assert_eq!(refusal(b"not an archive at all"), "the archive is not gzip-compressed");
    let plain = Tarball::new().file("repo/main.tf", "").tar();
    assert_eq!(refusal(&plain), "the archive is not gzip-compressed");
}

fn folder_of(gz: &[u8], directory: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    crate::archive::repack(gz, &mut out, ArchiveLimits::default(), directory).map(|()| out).map_err(|e| e.to_string())
}

fn monorepo() -> Tarball {
    Tarball::new()
        .dir("repo-abc/")
        .file("repo-abc/README.md", "# all of it\n")
        .dir("repo-abc/modules/")
        .dir("repo-abc/modules/vpc/")
        .file("repo-abc/modules/vpc/main.tf", "variable \"cidr\" {}\n")
        .symlink("repo-abc/modules/vpc/same.tf", "main.tf")
        .hard_link("repo-abc/modules/vpc/hard.tf", "repo-abc/modules/vpc/main.tf")
        .dir("repo-abc/modules/dns/")
        .file("repo-abc/modules/dns/main.tf", "")
}

#[test]
fn a_source_directory_becomes_the_root_and_the_rest_is_left_out() {
    let out = folder_of(&monorepo().gz(), "modules/vpc").unwrap();

    let paths: Vec<_> = entries(&out);
    let expected = [
        ("main.tf".to_owned(), None),
        ("same.tf".to_owned(), Some("main.tf".to_owned())),
        ("hard.tf".to_owned(), Some("main.tf".to_owned())),
    ];
    assert_eq!(paths, expected);
    assert_eq!(inspect_sync(&out[..], ArchiveLimits::default()).unwrap().root_module_files, ["main.tf"]);
}

#[test]
fn links_leaving_the_source_directory_are_refused() {
    let symlink = monorepo().symlink("repo-abc/modules/vpc/up.tf", "../dns/main.tf").gz();
    assert_eq!(
        folder_of(&symlink, "modules/vpc").unwrap_err(),
        "symlink `up.tf` points outside the source directory `modules/vpc/` (`../dns/main.tf`)"
    );
    let hard = monorepo().hard_link("repo-abc/modules/vpc/dns.tf", "repo-abc/modules/dns/main.tf").gz();
    assert!(folder_of(&hard, "modules/vpc").unwrap_err().starts_with("hard link `dns.tf` points outside"));
    // Inside the folder, a link may climb as long as it stays in it.
    let inner = monorepo().symlink("repo-abc/modules/vpc/sub/x.tf", "../main.tf").gz();
    assert!(folder_of(&inner, "modules/vpc").is_ok());
}

#[test]
fn a_missing_source_directory_is_named() {
    assert_eq!(folder_of(&monorepo().gz(), "modules/s3").unwrap_err(), "the repository has no directory `modules/s3/`");
    // A folder name is matched whole, never as a prefix of another.
    assert!(folder_of(&monorepo().gz(), "modules/vp").is_err());
}
