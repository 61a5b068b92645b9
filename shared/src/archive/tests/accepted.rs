//! Archives inspection must accept, and what it reports about them.

use sha2::{Digest, Sha256};
use tar::EntryType;

use super::{gzip, inspect, module, Tarball};
use crate::archive::limits::{Size, MIB};
use crate::archive::paths::normalise;
use crate::archive::{ArchiveLimits, ArchiveSummary};

#[test]
fn a_valid_module_is_summarised() {
    let mut builder = tar::Builder::new(Vec::new());
    let body = b"output \"id\" { value = 1 }\n";
    let mut header = tar::Header::new_gnu();
    header.set_size(body.len() as u64);
    header.set_mode(0o644);
    builder.append_data(&mut header, "modules/x/outputs.tf", &body[..]).unwrap();
    let tar = Tarball(builder)
        .dir("./")
        .file("./main.tf", "module \"x\" { source = \"./modules/x\" }\n")
        .file("./variables.tf", "variable \"name\" {}\n")
        .file("./outputs.tf.json", "{}\n")
        .file("./.hidden.tf", "")
        .file("./README.md", "# VPC\n\nA network.\n")
        .dir("./modules/")
        .dir("./modules/x/")
        .file("./modules/x/main.tf", "")
        .file("./examples/./basic/main.tf", "")
        .tar();
    let gz = gzip(&tar);

    let summary = inspect(&gz).unwrap();

    assert_eq!(
        summary,
        ArchiveSummary {
            root_module_files: vec!["main.tf".into(), "outputs.tf.json".into(), "variables.tf".into()],
            readme: Some("# VPC\n\nA network.\n".into()),
            entries: 11,
            compressed_bytes: gz.len() as u64,
            uncompressed_bytes: tar.len() as u64,
            sha256: hex::encode(Sha256::digest(&gz)),
            metadata: summary.metadata.clone(),
        }
    );
    let metadata = &summary.metadata;
    assert_eq!(metadata.root.inputs[0].name, "name");
    assert_eq!(metadata.root.dependencies[0].source, "./modules/x");
    let submodule = &metadata.submodules[0];
    assert_eq!((submodule.path.as_str(), submodule.outputs[0].name.as_str()), ("modules/x", "id"));
    assert_eq!(metadata.examples[0].path, "examples/basic", "found under its normalised path");
}

#[test]
fn a_symlink_inside_the_root_is_accepted() {
    let gz = module()
        .dir("modules/x/")
        .symlink("modules/x/shared.tf", "../../main.tf")
        .symlink("latest", "modules/x")
        .symlink("here", ".")
        .gz();

    assert_eq!(inspect(&gz).unwrap().entries, 5);
}

#[test]
fn a_hard_link_inside_the_root_is_accepted() {
    let gz = module().hard_link("copy.tf", "./main.tf").gz();

    assert_eq!(inspect(&gz).unwrap().root_module_files, ["main.tf"]);
}

#[test]
fn a_long_name_within_the_path_limit_is_accepted() {
    let path = format!("{}/main.tf", "d".repeat(1000));
    let gz = module().file(&path, "").gz();

    assert_eq!(inspect(&gz).unwrap().entries, 2);
}

#[test]
fn a_readme_over_one_mebibyte_is_cut_not_refused() {
    let text = "é".repeat(MIB as usize / 2 + 10);
    let gz = module().file("readme", &text).gz();

    let readme = inspect(&gz).unwrap().readme.unwrap();

    assert_eq!(readme.len(), MIB as usize);
    assert!(text.starts_with(&readme));
}

#[test]
fn readme_md_wins_over_a_plain_readme() {
    let gz = module().file("README.MD", "markdown").file("README", "plain").gz();

    assert_eq!(inspect(&gz).unwrap().readme.as_deref(), Some("markdown"));
}

#[test]
fn a_git_archive_pax_global_header_is_skipped() {
    let comment = b"52 comment=0123456789abcdef0123456789abcdef01234567\n";
    let gz = Tarball::new().raw(b"pax_global_header", EntryType::XGlobalHeader, b"", comment).file("main.tf", "").gz();

    assert_eq!(inspect(&gz).unwrap().entries, 1);
}

#[test]
fn a_gzip_of_several_members_is_read_whole() {
    let tar = module().file("README", "hi").tar();
    let (head, tail) = tar.split_at(1024);
    let gz = [gzip(head), gzip(tail)].concat();

    let summary = inspect(&gz).unwrap();

    assert_eq!((summary.readme.as_deref(), summary.compressed_bytes), (Some("hi"), gz.len() as u64));
}

#[tokio::test]
async fn the_async_inspect_reads_an_archive_from_a_stream() {
    let gz = module().gz();
    let stream = Box::pin(tokio::io::BufReader::new(std::io::Cursor::new(gz.clone())));
    let source = tokio_util::io::SyncIoBridge::new(stream);

    let summary = crate::archive::inspect(source, ArchiveLimits::default()).await.unwrap();

    assert_eq!(summary, inspect(&gz).unwrap());
}

#[test]
fn paths_are_normalised_before_they_are_judged() {
    let mut out = String::new();
    for (raw, normal, depth) in [("./a/./b", "a/b", 2), ("a//b/", "a/b", 2), ("./", "", 0), ("main.tf", "main.tf", 1)] {
        assert_eq!(normalise(raw.as_bytes(), &mut out), Ok(depth));
        assert_eq!(out, normal);
    }
}

#[test]
fn limits_are_quoted_in_the_units_they_are_set_in() {
    let shown = [500 * MIB, 64 * 1024, 1000].map(|n| Size(n).to_string());

    assert_eq!(shown, ["500 MiB", "64 KiB", "1000 bytes"]);
}
