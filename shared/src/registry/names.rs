//! The registry's names as types that validate on parse: an invalid module name, provider,
//! namespace or version cannot exist past the request's edge.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::RegistryError;

pub const MAX_NAME_LEN: usize = 64;

/// Letters and digits, with `-` and `_` allowed anywhere but first and last.
fn check_name(pointer: &str, what: &str, value: &str) -> Result<(), RegistryError> {
    let invalid = |detail: String| Err(RegistryError::invalid(pointer, detail));
    if value.is_empty() {
        return invalid(format!("{what} is required"));
    }
    if value.len() > MAX_NAME_LEN {
        return invalid(format!("{what} must be at most {MAX_NAME_LEN} characters"));
    }
    let inner = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if !value.chars().all(inner) {
        return invalid(format!("{what} may contain only letters, numbers, `-` and `_`"));
    }
    if value.starts_with(['-', '_']) || value.ends_with(['-', '_']) {
        return invalid(format!("{what} must not start or end with `-` or `_`"));
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $type:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $type(String);

        impl $type {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// A module's name, e.g. `vpc`.
    ModuleName
);
name_type!(
    /// A provider name, lowercase alphanumeric, e.g. `aws`.
    ProviderName
);
name_type!(
    /// A public module's namespace, e.g. `hashicorp`.
    Namespace
);

impl ModuleName {
    pub fn parse(pointer: &str, raw: &str) -> Result<Self, RegistryError> {
        check_name(pointer, "name", raw).map(|()| Self(raw.to_owned()))
    }
}

impl Namespace {
    pub fn parse(pointer: &str, raw: &str) -> Result<Self, RegistryError> {
        check_name(pointer, "namespace", raw).map(|()| Self(raw.to_owned()))
    }
}

impl ProviderName {
    pub fn parse(pointer: &str, raw: &str) -> Result<Self, RegistryError> {
        let invalid = |detail: &str| Err(RegistryError::invalid(pointer, detail));
        if raw.is_empty() {
            return invalid("provider is required");
        }
        if raw.len() > MAX_NAME_LEN {
            return invalid("provider must be at most 64 characters");
        }
        if !raw.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
            return invalid("provider may contain only lowercase letters and numbers");
        }
        Ok(Self(raw.to_owned()))
    }
}

/// `private` (the organization's own modules) or `public` (records of curated public ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistryName {
    Private,
    Public,
}

impl RegistryName {
    pub fn parse(pointer: &str, raw: &str) -> Result<Self, RegistryError> {
        match raw {
            "private" => Ok(RegistryName::Private),
            "public" => Ok(RegistryName::Public),
            _ => Err(RegistryError::invalid(pointer, "registry-name must be `private` or `public`")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RegistryName::Private => "private",
            RegistryName::Public => "public",
        }
    }
}

/// A semantic version, prerelease and build metadata included (`1.2.3-alpha+feature`).
pub fn parse_version(pointer: &str, raw: &str) -> Result<semver::Version, RegistryError> {
    semver::Version::parse(raw)
        .map_err(|e| RegistryError::invalid(pointer, format!("`{raw}` is not a valid semantic version: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_allow_dashes_and_underscores_only_inside() {
        assert!(ModuleName::parse("/n", "my_vpc-2").is_ok());
        for bad in ["", "-vpc", "vpc_", "v.pc", "v pc", &"a".repeat(65)] {
            assert!(ModuleName::parse("/n", bad).is_err(), "{bad:?}");
        }
        assert!(ModuleName::parse("/n", &"a".repeat(64)).is_ok());
    }

    #[test]
    fn providers_are_lowercase_alphanumeric() {
        assert!(ProviderName::parse("/p", "aws2").is_ok());
        for bad in ["", "AWS", "aws-x", "aws_x"] {
            assert!(ProviderName::parse("/p", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn versions_take_prerelease_and_build_metadata() {
        assert_eq!(parse_version("/v", "1.2.3-alpha+feature").unwrap().to_string(), "1.2.3-alpha+feature");
        assert!(parse_version("/v", "1.2").is_err());
        assert!(parse_version("/v", "v1.2.3").is_err());
    }
}
