//! A job's working directory: the configuration unpacked into it (nothing outside it, whatever
//! the archive says), the backend overridden so Terraform keeps its state in a local file, the
//! workspace's Terraform variables as a tfvars file, and a CLI configuration with the job token
//! for Hangar's host (so modules from Hangar's registry install). Removed when the job ends.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;
use serde_json::Value;

/// The state's file, in the directory Terraform runs in.
const STATE_FILE: &str = "hangar-job.tfstate";

/// The most bytes a configuration unpacks to (Hangar checked the archive already; this is the
/// agent's own bound).
const MAX_UNPACKED: u64 = 2 * 1024 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum WorkdirError {
    #[error("the configuration archive could not be unpacked: {0}")]
    Archive(String),
    #[error("the working directory could not be prepared: {0}")]
    Io(#[from] std::io::Error),
    #[error("the workspace's working directory `{0}` is not a directory inside the configuration")]
    WorkingDirectory(String),
}

pub struct Workdir {
    /// Removed with everything in it when dropped.
    root: tempfile::TempDir,
    /// Where Terraform runs: the configuration's root, or the workspace's working directory in it.
    pub terraform_dir: PathBuf,
}

impl Workdir {
    /// Where Terraform keeps the state: beside the configuration, named relatively in the backend
    /// override, because a saved plan carries its backend's settings to the apply, which runs in
    /// a directory of its own.
    pub fn state_file(&self) -> PathBuf {
        self.terraform_dir.join(STATE_FILE)
    }

    pub fn plan_file(&self) -> PathBuf {
        self.root.path().join("tfplan")
    }

    pub fn cli_config(&self) -> PathBuf {
        self.root.path().join("terraform.rc")
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }
}

/// Unpacks `archive` (a gzipped tar) into a fresh directory under `parent`: entries that would
/// land outside it (`..`, absolute paths, through a link) are refused, as are device files.
pub fn unpack(parent: Option<&Path>, archive: &[u8], working_directory: &str) -> Result<Workdir, WorkdirError> {
    let root = match parent {
        Some(parent) => tempfile::Builder::new().prefix("hangar-job-").tempdir_in(parent)?,
        None => tempfile::Builder::new().prefix("hangar-job-").tempdir()?,
    };
    let config = root.path().join("config");
    std::fs::create_dir(&config)?;
    let limited = GzDecoder::new(archive).take(MAX_UNPACKED);
    let mut tar = tar::Archive::new(limited);
    tar.set_preserve_permissions(false);
    tar.set_overwrite(true);
    let entries = tar.entries().map_err(|e| WorkdirError::Archive(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| WorkdirError::Archive(e.to_string()))?;
        let path = entry.path().map_err(|e| WorkdirError::Archive(e.to_string()))?.into_owned();
        let kind = entry.header().entry_type();
        if !(kind.is_file()
            || kind.is_dir()
            || kind.is_symlink()
            || kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions())
        {
            return Err(WorkdirError::Archive(format!(
                "`{}` is neither a file, a directory nor a link",
                path.display()
            )));
        }
        if path.components().any(|c| matches!(c, Component::ParentDir | Component::RootDir | Component::Prefix(_))) {
            return Err(WorkdirError::Archive(format!("`{}` escapes the configuration's root", path.display())));
        }
        if kind.is_symlink() {
            let target = entry.link_name().map_err(|e| WorkdirError::Archive(e.to_string()))?.unwrap_or_default();
            if !link_stays_inside(&path, &target) {
                return Err(WorkdirError::Archive(format!(
                    "the link `{}` points outside the configuration",
                    path.display()
                )));
            }
        }
        // `unpack_in` refuses, again, a path that would leave `config`, links included.
        let inside = entry.unpack_in(&config).map_err(|e| WorkdirError::Archive(e.to_string()))?;
        if !inside {
            return Err(WorkdirError::Archive(format!("`{}` escapes the configuration's root", path.display())));
        }
    }
    let terraform_dir = match working_directory.trim_matches('/') {
        "" => config.clone(),
        dir => {
            let relative = Path::new(dir);
            let safe = relative.components().all(|c| matches!(c, Component::Normal(_)));
            let joined = config.join(relative);
            if !safe || !joined.is_dir() {
                return Err(WorkdirError::WorkingDirectory(dir.to_owned()));
            }
            joined
        }
    };
    Ok(Workdir { root, terraform_dir })
}

/// Whether a symlink at `path` to `target` resolves inside the root, read lexically.
fn link_stays_inside(path: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: i64 = path.components().count() as i64 - 1;
    for component in target.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

/// Terraform's backend, overridden so the run keeps its state in the job's own file (Hangar
/// writes it to the workspace): an override file replaces a `backend` or `cloud` block.
pub fn override_backend(workdir: &Workdir) -> std::io::Result<()> {
    let body = format!("terraform {{\n  backend \"local\" {{\n    path = {}\n  }}\n}}\n", hcl_string(STATE_FILE));
    std::fs::write(workdir.terraform_dir.join("zz_hangar_backend_override.tf"), body)
}

/// A string as an HCL literal: JSON's escapes, and template sequences escaped so the value is
/// taken as written.
pub fn hcl_string(value: &str) -> String {
    let quoted = serde_json::to_string(value).expect("strings serialize");
    quoted.replace("${", "$${").replace("%{", "%%{")
}

/// The workspace's Terraform variables (HCL ones as written, the others as strings), then the
/// run's own (HCL), which take precedence: two tfvars files loaded after any the configuration has.
pub fn write_variables(workdir: &Workdir, variables: &[Value], run_variables: &[Value]) -> std::io::Result<()> {
    let mut workspace = String::new();
    for variable in variables.iter().filter(|v| v["category"] == "terraform") {
        let (Some(key), Some(value)) = (variable["key"].as_str(), variable["value"].as_str()) else { continue };
        let value = if variable["hcl"].as_bool() == Some(true) { value.to_owned() } else { hcl_string(value) };
        workspace.push_str(&format!("{key} = {value}\n"));
    }
    std::fs::write(workdir.terraform_dir.join("zzzz_hangar_workspace.auto.tfvars"), workspace)?;
    let mut run = String::new();
    for variable in run_variables {
        let (Some(key), Some(value)) = (variable["key"].as_str(), variable["value"].as_str()) else { continue };
        run.push_str(&format!("{key} = {value}\n"));
    }
    std::fs::write(workdir.terraform_dir.join("zzzzz_hangar_run.auto.tfvars"), run)
}

/// The CLI configuration that gives Terraform the job token for Hangar's host.
pub fn write_cli_config(workdir: &Workdir, host: &str, token: &str) -> std::io::Result<()> {
    let body = format!("credentials {} {{\n  token = {}\n}}\n", hcl_string(host), hcl_string(token));
    std::fs::write(workdir.cli_config(), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_read_lexically_from_where_they_sit() {
        assert!(link_stays_inside(Path::new("a/link"), Path::new("b")));
        assert!(link_stays_inside(Path::new("a/link"), Path::new("../b")));
        assert!(!link_stays_inside(Path::new("a/link"), Path::new("../../b")));
        assert!(!link_stays_inside(Path::new("link"), Path::new("/etc/passwd")));
    }

    /// One entry of a test archive: name, kind, link target, body.
    type Entry<'a> = (&'a str, tar::EntryType, Option<&'a str>, &'a [u8]);

    /// A gzipped tar of `entries`, names written raw (as an attacker would, past the tar crate's
    /// own checks).
    fn archive(entries: &[Entry<'_>]) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        for (name, kind, link, body) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(body.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(*kind);
            header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            if let Some(link) = link {
                header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            header.set_cksum();
            builder.append(&header, *body).expect("an entry");
        }
        builder.into_inner().expect("a tar").finish().expect("a gzip")
    }

    #[test]
    fn a_hostile_archive_writes_nothing_outside_the_job_directory() {
        use tar::EntryType::{Regular, Symlink};
        let parent = tempfile::tempdir().expect("a directory");
        let cases: [&[Entry<'_>]; 4] = [
            &[("../escaped.tf", Regular, None, b"x")],
            &[("/tmp/absolute.tf", Regular, None, b"x")],
            &[("link", Symlink, Some("../../.."), b""), ("link/escaped.tf", Regular, None, b"x")],
            &[("link", Symlink, Some("/"), b"")],
        ];
        for entries in cases {
            let refused = unpack(Some(parent.path()), &archive(entries), "");
            assert!(refused.is_err(), "{:?}", entries.iter().map(|e| e.0).collect::<Vec<_>>());
        }
        assert!(!parent.path().join("escaped.tf").exists() && !Path::new("/tmp/absolute.tf").exists());
        let kept = std::fs::read_dir(parent.path()).expect("the parent").count();
        assert_eq!(kept, 0, "a refused job's directory is removed");

        let fine = archive(&[
            ("main.tf", Regular, None, b"output \"x\" { value = 1 }"),
            ("env/prod/main.tf", Regular, None, b""),
        ]);
        let workdir = unpack(Some(parent.path()), &fine, "env/prod").expect("a safe archive unpacks");
        assert!(workdir.terraform_dir.ends_with("config/env/prod"));
        assert!(unpack(Some(parent.path()), &fine, "../..").is_err(), "a working directory outside");
    }

    #[test]
    fn a_string_is_taken_as_written() {
        assert_eq!(hcl_string("a\"b${c}%{d}\n"), "\"a\\\"b$${c}%%{d}\\n\"");
    }
}
