//! Every setting, read once from the environment at start. README.md documents each one.

use std::path::PathBuf;

use crate::archive::ArchiveLimits;
use crate::vcs::AllowedNetworks;

/// Which product Hangar behaves as; some features exist only on some editions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edition {
    /// HCP Terraform's behaviour (the default): public module curation allowed.
    Hosted,
    /// Terraform Enterprise's: `registry-name` must be `private`.
    SelfHosted,
    /// Hosted, plus the broker's Enterprise-only parameters.
    Enterprise,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Dynamodb,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub edition: Edition,
    pub store: StoreKind,
    pub data_dir: PathBuf,
    pub table: String,
    pub bucket: String,
    /// The address clients reach Hangar at; links are built from it, else from the request.
    pub public_url: Option<String>,
    pub admin_token: Option<String>,
    pub max_upload_bytes: u64,
    pub archive_limits: ArchiveLimits,
    /// The public registry's module API that `/api/registry/public/v1` forwards to.
    pub public_registry_url: String,
    pub public_registry_timeout: std::time::Duration,
    /// The largest upstream response the proxy relays.
    pub public_registry_max_bytes: usize,
    pub max_agent_pools: usize,
    /// Live agents per organization (the free edition has one).
    pub max_agents: usize,
    /// How long an agent may stay silent before it is `unknown`.
    pub agent_ping_timeout: std::time::Duration,
    /// The broker's root token (stored hashed); dev-server generates one when unset.
    pub root_service_token: Option<String>,
    /// The KMS key sealing the broker's secrets; unset, a key file in the data directory does.
    pub kms_key_id: Option<String>,
    /// Networks VCS calls may reach besides the public Internet (`HANGAR_VCS_ALLOWED_NETWORKS`):
    /// none by default, so a connection cannot point Hangar at its own network.
    pub vcs_allowed_networks: AllowedNetworks,
}

#[derive(Debug, thiserror::Error)]
#[error("{name}: {problem}")]
pub struct ConfigError {
    pub name: &'static str,
    pub problem: String,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// A list of CIDR blocks, or none when unset.
fn networks(name: &'static str, raw: Option<String>) -> Result<AllowedNetworks, ConfigError> {
    raw.map_or(Ok(AllowedNetworks::default()), |raw| {
        AllowedNetworks::parse(&raw).map_err(|problem| ConfigError { name, problem })
    })
}

/// A whole-number setting, or its default when unset.
fn number<T: std::str::FromStr>(name: &'static str, default: T) -> Result<T, ConfigError> {
    match var(name) {
        None => Ok(default),
        Some(raw) => raw.parse().map_err(|_| ConfigError { name, problem: format!("`{raw}` is not a whole number") }),
    }
}

impl Default for Config {
    /// What an empty environment gives: embedded store under `./.hangar`, hosted edition.
    fn default() -> Self {
        Self {
            edition: Edition::Hosted,
            store: StoreKind::Sqlite,
            data_dir: PathBuf::from(".hangar"),
            table: "hangar".into(),
            bucket: "hangar-archives".into(),
            public_url: None,
            admin_token: None,
            max_upload_bytes: 512 * 1024 * 1024,
            archive_limits: ArchiveLimits::default(),
            public_registry_url: "https://registry.terraform.io/v1/modules".into(),
            public_registry_timeout: std::time::Duration::from_secs(10),
            public_registry_max_bytes: 4 * 1024 * 1024,
            max_agent_pools: 1,
            max_agents: 1,
            agent_ping_timeout: std::time::Duration::from_secs(120),
            root_service_token: None,
            kms_key_id: None,
            vcs_allowed_networks: AllowedNetworks::default(),
        }
    }
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let edition = match var("HANGAR_EDITION").as_deref() {
            None | Some("hosted") => Edition::Hosted,
            Some("self-hosted") => Edition::SelfHosted,
            Some("enterprise") => Edition::Enterprise,
            Some(other) => {
                return Err(ConfigError {
                    name: "HANGAR_EDITION",
                    problem: format!("`{other}` is not hosted, self-hosted or enterprise"),
                })
            }
        };
        let store = match var("HANGAR_STORE").as_deref() {
            None | Some("sqlite") => StoreKind::Sqlite,
            Some("dynamodb") => StoreKind::Dynamodb,
            Some(other) => {
                return Err(ConfigError {
                    name: "HANGAR_STORE",
                    problem: format!("`{other}` is not sqlite or dynamodb"),
                })
            }
        };
        let max_upload_bytes = number("HANGAR_MAX_UPLOAD_BYTES", defaults.max_upload_bytes)?;
        let limits = defaults.archive_limits;
        let archive_limits = ArchiveLimits {
            max_compressed_bytes: number("HANGAR_ARCHIVE_MAX_COMPRESSED_BYTES", limits.max_compressed_bytes)?,
            max_uncompressed_bytes: number("HANGAR_ARCHIVE_MAX_UNCOMPRESSED_BYTES", limits.max_uncompressed_bytes)?,
            max_entries: number("HANGAR_ARCHIVE_MAX_ENTRIES", limits.max_entries)?,
            max_path_len: number("HANGAR_ARCHIVE_MAX_PATH_LENGTH", limits.max_path_len)?,
        };
        Ok(Self {
            edition,
            store,
            data_dir: var("HANGAR_DATA_DIR").map(PathBuf::from).unwrap_or(defaults.data_dir),
            table: var("HANGAR_TABLE").unwrap_or(defaults.table),
            bucket: var("HANGAR_BUCKET").unwrap_or(defaults.bucket),
            public_url: var("HANGAR_PUBLIC_URL").map(|url| url.trim_end_matches('/').to_owned()),
            admin_token: var("HANGAR_ADMIN_TOKEN"),
            max_upload_bytes,
            archive_limits,
            public_registry_url: var("HANGAR_PUBLIC_REGISTRY_URL")
                .map(|url| url.trim_end_matches('/').to_owned())
                .unwrap_or(defaults.public_registry_url),
            public_registry_timeout: std::time::Duration::from_secs(number(
                "HANGAR_PUBLIC_REGISTRY_TIMEOUT_SECONDS",
                defaults.public_registry_timeout.as_secs(),
            )?),
            public_registry_max_bytes: number("HANGAR_PUBLIC_REGISTRY_MAX_BYTES", defaults.public_registry_max_bytes)?,
            max_agent_pools: number("HANGAR_MAX_AGENT_POOLS", defaults.max_agent_pools)?,
            max_agents: number("HANGAR_MAX_AGENTS", defaults.max_agents)?,
            agent_ping_timeout: std::time::Duration::from_secs(number(
                "HANGAR_AGENT_PING_TIMEOUT",
                defaults.agent_ping_timeout.as_secs(),
            )?),
            root_service_token: var("HANGAR_ROOT_SERVICE_TOKEN"),
            kms_key_id: var("HANGAR_KMS_KEY_ID"),
            vcs_allowed_networks: networks("HANGAR_VCS_ALLOWED_NETWORKS", var("HANGAR_VCS_ALLOWED_NETWORKS"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_vcs_networks_are_read_once_and_a_bad_one_names_the_variable() {
        let name = "HANGAR_VCS_ALLOWED_NETWORKS";
        assert_eq!(networks(name, None).unwrap(), AllowedNetworks::default());
        let parsed = networks(name, Some("10.0.0.0/8, 127.0.0.0/8".into())).unwrap();
        assert_eq!(parsed.networks().len(), 2);
        for bad in ["10.0.0.0/33", "intranet", "10.1.0.0/8"] {
            let message = networks(name, Some(bad.into())).unwrap_err().to_string();
            assert!(message.starts_with("HANGAR_VCS_ALLOWED_NETWORKS: ") && message.contains(bad), "{message}");
        }
    }
}
