//! Several modules from one repository (HCP Terraform's `vcs-repo.source-directory` and
//! `vcs-repo.tag-prefix`): each module names the folder its archive is cut from and the prefix
//! of the tags that make its versions. The rules for both values, and the versions tags name.

use crate::api::Field;
use crate::registry::error::{RegistryError, Result};

/// The longest source directory accepted (bytes): deep enough for any real layout, short
/// enough that the archive's own paths still fit under their limit.
pub const MAX_SOURCE_DIRECTORY: usize = 256;
/// The longest tag prefix accepted (bytes).
pub const MAX_TAG_PREFIX: usize = 128;

const SOURCE_DIRECTORY: Field = Field::Nested("vcs-repo", "source-directory");
const TAG_PREFIX: Field = Field::Nested("vcs-repo", "tag-prefix");

/// A folder of the repository as the module's root: relative, `/`-separated, no `.` or `..`
/// and no empty names, stored without a trailing `/`. Empty means the whole repository.
pub fn source_directory(raw: &str) -> Result<String> {
    let invalid = |why: &str| RegistryError::invalid(SOURCE_DIRECTORY, format!("source-directory {why}"));
    if raw.len() > MAX_SOURCE_DIRECTORY {
        return Err(invalid(&format!("is longer than {MAX_SOURCE_DIRECTORY} bytes")));
    }
    if raw.chars().any(|c| crate::names::deceptive(c) || c == '\\') {
        return Err(invalid(
            "must not hold control or bidirectional formatting characters or `\\`; separate folders with `/`",
        ));
    }
    if raw.starts_with('/') {
        return Err(invalid("must be relative to the repository root, without a leading `/`"));
    }
    let trimmed = raw.strip_suffix('/').unwrap_or(raw);
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    for name in trimmed.split('/') {
        if name.is_empty() || name == "." || name == ".." {
            return Err(invalid("must name folders inside the repository: no empty, `.` or `..` parts"));
        }
    }
    Ok(trimmed.to_owned())
}

/// A prefix of the tags that make versions (`vpc/`, `vpc-`): what Git allows in a tag name,
/// bounded. Empty means every tag.
pub fn tag_prefix(raw: &str) -> Result<String> {
    let invalid = |why: &str| RegistryError::invalid(TAG_PREFIX, format!("tag-prefix {why}"));
    if raw.len() > MAX_TAG_PREFIX {
        return Err(invalid(&format!("is longer than {MAX_TAG_PREFIX} bytes")));
    }
    let refused = |c: char| crate::names::deceptive(c) || c.is_whitespace() || "~^:?*[\\".contains(c);
    if raw.chars().any(refused) {
        return Err(invalid("must be usable in a Git tag name: no spaces, control characters or any of ~^:?*[\\"));
    }
    if raw.starts_with(['/', '-', '.']) || raw.contains("..") || raw.contains("//") || raw.contains("@{") {
        return Err(invalid("must be usable in a Git tag name: no leading `/`, `-` or `.`, and no `..`, `//` or `@{`"));
    }
    Ok(raw.to_owned())
}

/// The version a tag names for a module whose tags start with `prefix`: `<prefix><semver>` or
/// `<prefix>v<semver>`, the prefix and the `v` stripped.
pub fn tag_version(tag: &str, prefix: &str) -> Option<semver::Version> {
    let rest = tag.strip_prefix(prefix)?;
    semver::Version::parse(rest.strip_prefix('v').unwrap_or(rest)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_versions_with_an_optional_v_after_the_prefix() {
        assert_eq!(tag_version("v1.2.0", "").unwrap().to_string(), "1.2.0");
        assert_eq!(tag_version("1.2.0-rc1", "").unwrap().to_string(), "1.2.0-rc1");
        assert!(tag_version("release-1", "").is_none());
        assert!(tag_version("v1.2", "").is_none());
        assert_eq!(tag_version("vpc/v1.2.0", "vpc/").unwrap().to_string(), "1.2.0");
        assert_eq!(tag_version("vpc-1.3.0", "vpc-").unwrap().to_string(), "1.3.0");
        assert!(tag_version("dns/v1.2.0", "vpc/").is_none(), "another module's prefix");
        assert!(tag_version("v1.2.0", "vpc/").is_none(), "a tag without the prefix");
        assert!(tag_version("vpc/vv1.2.0", "vpc/").is_none());
    }

    #[test]
    fn a_source_directory_is_a_relative_folder_path() {
        assert_eq!(source_directory("modules/vpc").unwrap(), "modules/vpc");
        assert_eq!(source_directory("modules/vpc/").unwrap(), "modules/vpc");
        assert_eq!(source_directory("").unwrap(), "");
        let too_long = "a/".repeat(MAX_SOURCE_DIRECTORY);
        for bad in ["/modules", "../x", "a/../b", "a//b", "./a", "a\\b", "a\u{0}b", "a\u{202E}b", too_long.as_str()] {
            assert!(source_directory(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_tag_prefix_is_what_git_allows_in_a_tag_name() {
        for good in ["", "vpc/", "vpc-", "modules/vpc/v", "release_"] {
            assert_eq!(tag_prefix(good).unwrap(), good);
        }
        let too_long = "p".repeat(MAX_TAG_PREFIX + 1);
        for bad in ["vpc ", "a..b", "-x", "/x", "a:b", "a~", "a//b", "x@{", too_long.as_str()] {
            assert!(tag_prefix(bad).is_err(), "{bad:?}");
        }
    }
}
