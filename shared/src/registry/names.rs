//! The registry's names as types that validate on parse: an invalid module name, provider,
//! namespace or version cannot exist past the request's edge.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::RegistryError;
use crate::api::Field;

/// Letters and digits, with `-` and `_` allowed anywhere but first and last.
fn check_name(field: Field, what: &str, value: &str) -> Result<(), RegistryError> {
    crate::names::check(value, crate::names::REGISTRY).map_err(|e| RegistryError::invalid(field, format!("{what} {e}")))
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
    pub fn parse(field: Field, raw: &str) -> Result<Self, RegistryError> {
        check_name(field, "name", raw).map(|()| Self(raw.to_owned()))
    }
}

impl Namespace {
    pub fn parse(field: Field, raw: &str) -> Result<Self, RegistryError> {
        check_name(field, "namespace", raw).map(|()| Self(raw.to_owned()))
    }
}

impl ProviderName {
    pub fn parse(field: Field, raw: &str) -> Result<Self, RegistryError> {
        let invalid = |detail: &str| RegistryError::invalid(field, detail);
        crate::names::check(raw, crate::names::REGISTRY).map_err(|e| invalid(&format!("provider {e}")))?;
        if !raw.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
            return Err(invalid("provider may contain only lowercase letters and numbers"));
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
    pub fn parse(field: Field, raw: &str) -> Result<Self, RegistryError> {
        match raw {
            "private" => Ok(RegistryName::Private),
            "public" => Ok(RegistryName::Public),
            _ => Err(RegistryError::invalid(field, "registry-name must be `private` or `public`")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RegistryName::Private => "private",
            RegistryName::Public => "public",
        }
    }
}

/// The longest version string accepted. Versions are part of store keys (DynamoDB caps a key
/// at 1,024 bytes) and of URLs; real ones are a few dozen characters.
pub const MAX_VERSION_LEN: usize = 128;

/// A semantic version, prerelease and build metadata included (`1.2.3-alpha+feature`).
pub fn parse_version(field: Field, raw: &str) -> Result<semver::Version, RegistryError> {
    if raw.len() > MAX_VERSION_LEN {
        return Err(RegistryError::invalid(field, format!("a version must be at most {MAX_VERSION_LEN} characters")));
    }
    semver::Version::parse(raw)
        .map_err(|e| RegistryError::invalid(field, format!("`{raw}` is not a valid semantic version: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_allow_dashes_and_underscores_only_inside() {
        assert!(ModuleName::parse(Field::Document, "my_vpc-2").is_ok());
        for bad in ["", "-vpc", "vpc_", "v.pc", "v pc", &"a".repeat(65)] {
            assert!(ModuleName::parse(Field::Document, bad).is_err(), "{bad:?}");
        }
        assert!(ModuleName::parse(Field::Document, &"a".repeat(64)).is_ok());
    }

    #[test]
    fn providers_are_lowercase_alphanumeric() {
        assert!(ProviderName::parse(Field::Document, "aws2").is_ok());
        for bad in ["", "AWS", "aws-x", "aws_x"] {
            assert!(ProviderName::parse(Field::Document, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn versions_take_prerelease_and_build_metadata() {
        assert_eq!(parse_version(Field::Document, "1.2.3-alpha+feature").unwrap().to_string(), "1.2.3-alpha+feature");
        assert!(parse_version(Field::Document, "1.2").is_err());
        assert!(parse_version(Field::Document, "v1.2.3").is_err());
        let long = format!("1.0.0-{}", "a".repeat(MAX_VERSION_LEN));
        assert!(parse_version(Field::Document, &long).is_err(), "a version over the cap");
    }
}
