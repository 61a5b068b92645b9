//! Entries that would be unsafe to unpack, and archives that hold no module at their root.

use tar::EntryType;

use super::{header, module, refusal, Tarball};
use crate::archive::{ArchiveError, LinkKind};

#[test]
fn an_entry_climbing_out_with_dot_dot_is_refused() {
    let gz = module().file("../evil.tf", "").gz();

    assert_eq!(refusal(&gz), "entry `../evil.tf` escapes the archive root");
}

#[test]
fn dot_dot_in_the_middle_of_a_path_is_refused() {
    let gz = module().file("./modules/../../evil.tf", "").gz();

    assert_eq!(refusal(&gz), "entry `./modules/../../evil.tf` escapes the archive root");
}

#[test]
fn an_absolute_path_is_refused() {
    let gz = module().file("/etc/evil.tf", "").gz();

    assert_eq!(refusal(&gz), "absolute path `/etc/evil.tf`: entries must be relative to the archive root");
}

#[test]
fn windows_drive_unc_and_backslash_paths_are_refused() {
    for (path, message) in [
        ("C:\\evil.tf", "absolute path `C:\\evil.tf`: entries must be relative to the archive root"),
        (
            "\\\\server\\share\\x.tf",
            "absolute path `\\\\server\\share\\x.tf`: entries must be relative to the archive root",
        ),
        ("a\\..\\..\\x.tf", "entry `a\\..\\..\\x.tf` escapes the archive root"),
    ] {
        assert_eq!(refusal(&module().file(path, "").gz()), message);
    }
}

#[test]
fn a_nul_byte_in_a_path_is_refused() {
    let path = format!("{}\0.tf", "a".repeat(120));
    let gz = module().raw(path.as_bytes(), EntryType::Regular, b"", b"").gz();

    assert!(refusal(&gz).ends_with("\\u{0}.tf` contains a NUL byte"));
}

#[test]
fn a_symlink_pointing_outside_the_root_is_refused() {
    let gz = module().dir("a/").symlink("a/link", "../../etc/passwd").gz();

    assert_eq!(refusal(&gz), "symlink `a/link` points outside the archive root (`../../etc/passwd`)");
}

#[test]
fn a_symlink_with_an_absolute_target_is_refused() {
    let gz = module().symlink("passwd", "/etc/passwd").gz();

    assert_eq!(refusal(&gz), "symlink `passwd` points outside the archive root (`/etc/passwd`)");
}

#[test]
fn a_symlink_climbing_back_after_a_directory_is_refused() {
    let gz = module().symlink("up", "modules/../..").gz();

    let error = crate::archive::inspect_sync(&gz[..], Default::default()).unwrap_err();

    assert!(matches!(error, ArchiveError::LinkTargetUnclear { link: LinkKind::Symlink, .. }), "{error}");
}

#[test]
fn an_entry_beneath_a_symlink_is_refused() {
    let gz = module().dir("d/").symlink("d/up", "..").file("d/up/evil.tf", "").gz();

    assert_eq!(refusal(&gz), "entry `d/up/evil.tf` lies beneath the symlink `d/up`");
}

#[test]
fn a_hard_link_pointing_outside_the_root_is_refused() {
    let gz = module().dir("a/").hard_link("a/shadow", "../etc/shadow").gz();

    assert_eq!(refusal(&gz), "hard link `a/shadow` points outside the archive root (`../etc/shadow`)");
}

#[test]
fn device_files_are_refused() {
    for kind in [EntryType::Char, EntryType::Block] {
        let gz = module().raw(b"./sda", kind, b"", b"").gz();

        assert_eq!(refusal(&gz), "entry `sda` is a device file");
    }
}

#[test]
fn a_fifo_is_refused() {
    let gz = module().raw(b"pipe", EntryType::Fifo, b"", b"").gz();

    assert_eq!(refusal(&gz), "entry `pipe` is a FIFO");
}

#[test]
fn a_sparse_file_is_refused() {
    let mut sparse = header(b"holes", EntryType::GNUSparse, 0, b"");
    sparse.as_gnu_mut().unwrap().set_real_size(0);
    sparse.set_cksum();
    let mut tarball = module();
    tarball.0.append(&sparse, &[][..]).unwrap();
    let gz = tarball.gz();

    assert_eq!(refusal(&gz), "entry `holes` is a sparse file, which a module archive may not contain");
}

#[test]
fn a_file_posing_as_the_root_directory_is_refused() {
    let gz = module().file("./", "").gz();

    assert_eq!(refusal(&gz), "entry `./` names no file");
}

#[test]
fn a_module_inside_a_single_folder_is_pointed_out() {
    let gz = Tarball::new()
        .dir("terraform-aws-vpc/")
        .file("terraform-aws-vpc/main.tf", "")
        .file("terraform-aws-vpc/README.md", "")
        .file("terraform-aws-vpc/modules/x/main.tf", "")
        .gz();

    assert_eq!(
        refusal(&gz),
        "no .tf or .tf.json files at the archive root; the module sits in the subdirectory \
         `terraform-aws-vpc/`: archive the module's files themselves, not their folder"
    );
}

#[test]
fn a_module_folder_is_pointed_out_even_without_its_directory_entry() {
    let gz = Tarball::new().file("terraform-aws-vpc/main.tf", "").gz();
    assert!(refusal(&gz).contains("the module sits in the subdirectory `terraform-aws-vpc/`"), "{}", refusal(&gz));
}

#[test]
fn files_spread_over_several_folders_have_no_root_module() {
    let gz = Tarball::new().file("a/main.tf", "").file("b/main.tf", "").gz();

    assert_eq!(refusal(&gz), "no .tf or .tf.json files at the archive root");
}

#[test]
fn an_archive_with_only_a_readme_has_no_root_module() {
    let gz = Tarball::new().file("README.md", "# Nothing here").gz();

    assert_eq!(refusal(&gz), "no .tf or .tf.json files at the archive root");
}
