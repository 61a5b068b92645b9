//! The statuses a module version moves through, as HCP Terraform spells them: `pending` until
//! its archive is ingested, then `ok` or `reg_ingress_failed`. Both the version record and its
//! module's `versions` list carry them, with the version's place in its lifecycle: deprecated
//! (still offered, with a warning) and revoked (no longer offered to new consumers).

use serde::{Deserialize, Serialize};

pub const PENDING: &str = "pending";
pub const OK: &str = "ok";
pub const FAILED: &str = "reg_ingress_failed";

/// Why a version is deprecated and where to read more: what the registry protocol's versions
/// list and the management API show for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deprecation {
    /// The `deprecations` resource's id in the management API's answer.
    pub id: String,
    /// May be empty: HCP Terraform does not require one.
    pub reason: String,
    /// An http(s) URL, when given.
    pub link: Option<String>,
    pub deprecated_at: String,
}

/// Why a (deprecated) version is no longer offered to new consumers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// May be empty.
    pub message: String,
    /// An http(s) URL, when given.
    pub link: Option<String>,
    pub revoked_at: String,
}

/// A version's entry in its module's list of versions: what lists of versions show without
/// reading the version record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionStatus {
    pub version: String,
    pub status: String,
    pub error: Option<String>,
    /// When the version became `ok`.
    #[serde(default)]
    pub published_at: Option<String>,
    /// Copied from the version record (see `lifecycle`), so that lists of versions need no
    /// further read: a deprecated version is still offered, a revoked one is not.
    #[serde(default)]
    pub deprecation: Option<Deprecation>,
    #[serde(default)]
    pub revocation: Option<Revocation>,
}

impl VersionStatus {
    /// Whether new consumers get this version: ingested and not revoked.
    pub fn offered(&self) -> bool {
        self.status == OK && self.revocation.is_none()
    }
}

/// A version without its build metadata: its place in SemVer's order, shared by no other version.
pub(super) fn precedence(version: &str) -> &str {
    version.split_once('+').map_or(version, |(ranked, _)| ranked)
}
