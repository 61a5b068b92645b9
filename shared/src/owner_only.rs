//! The data directory is its owner's alone: dev-server's embedded store, archives, uploads and
//! keys live there, so directories are made 0700 and files 0600, and a directory made by an
//! earlier version (0755, files 0644) is tightened at start. Elsewhere than on Unix these are
//! the platform's defaults.

use std::path::Path;

/// Creates `dir` and its missing parents, the ones it creates readable by their owner only.
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Options that create a file readable and writable by its owner only.
pub fn file_options() -> tokio::fs::OpenOptions {
    let mut options = tokio::fs::OpenOptions::new();
    #[cfg(unix)]
    options.mode(0o600);
    options
}

/// Takes every permission from group and others on `dir` itself and on the entries of it named
/// `owned` (and all they hold): only what Hangar makes there, so a data directory pointed at a
/// shared folder leaves the rest of it alone. Links are left as they are, and an entry gone
/// meanwhile (a journal SQLite removed) is passed over. Returns how many were tightened.
pub fn tighten(dir: &Path, owned: &[&str]) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
        let mut tightened = 0;
        let mut pending: Vec<(std::path::PathBuf, bool)> = vec![(dir.to_path_buf(), false)];
        pending.extend(owned.iter().map(|name| (dir.join(name), true)));
        while let Some((path, deep)) = pending.pop() {
            let metadata = match std::fs::symlink_metadata(&path) {
                Err(e) if gone(&e) => continue,
                other => other?,
            };
            if metadata.file_type().is_symlink() {
                continue;
            }
            if metadata.is_dir() && deep {
                let entries = match std::fs::read_dir(&path) {
                    Err(e) if gone(&e) => continue,
                    other => other?,
                };
                for entry in entries {
                    pending.push((entry?.path(), true));
                }
            }
            let mode = metadata.permissions().mode();
            if mode & 0o077 != 0 {
                match std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o700)) {
                    Err(e) if gone(&e) => continue,
                    other => other?,
                }
                tightened += 1;
            }
        }
        Ok(tightened)
    }
    #[cfg(not(unix))]
    {
        let _ = (dir, owned);
        Ok(0)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_directory_made_here_is_its_owners_and_an_older_one_is_tightened() {
        let root = tempfile::tempdir().unwrap();
        let made = root.path().join("a/b");
        create_dir_all(&made).unwrap();
        assert_eq!((mode(&root.path().join("a")), mode(&made)), (0o700, 0o700));

        let old = root.path().join("old");
        std::fs::create_dir_all(old.join("objects")).unwrap();
        std::fs::write(old.join("objects/archive"), b"x").unwrap();
        for (path, mode) in [(old.clone(), 0o755), (old.join("objects"), 0o775), (old.join("objects/archive"), 0o644)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::write(old.join("someone-elses"), b"x").unwrap();
        std::fs::set_permissions(old.join("someone-elses"), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(tighten(&old, &["objects", "gone-already"]).unwrap(), 3);
        assert_eq!(mode(&old.join("someone-elses")), 0o644, "what Hangar did not make is left alone");
        assert_eq!(mode(&old), 0o700);
        assert_eq!(mode(&old.join("objects")), 0o700);
        assert_eq!(mode(&old.join("objects/archive")), 0o600);
        assert_eq!(tighten(&old, &["objects"]).unwrap(), 0, "nothing left to tighten");
    }
}
