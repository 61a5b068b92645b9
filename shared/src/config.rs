//! Every setting, read once from the environment at start. docs/settings.md documents each one.

use std::ops::RangeInclusive;
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

/// Which certificate authorities the AWS clients trust (`HANGAR_AWS_TRUST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AwsTrust {
    /// Amazon Trust Services' roots, compiled in: every AWS endpoint's certificate chains to
    /// one, and nothing is read or parsed beyond them at a start.
    #[default]
    Amazon,
    /// The operating system's store (`SSL_CERT_FILE`, `SSL_CERT_DIR`, the platform's bundle):
    /// for an endpoint behind a private CA, e.g. a TLS-inspecting proxy or an AWS emulator.
    System,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Dynamodb,
}

/// Whether other processes may open the embedded store's file while this one runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreSharing {
    /// Shared: the functions under `cargo lambda watch`, each a process of its own on one data
    /// directory. Every read takes a lock the other processes can see.
    #[default]
    Shared,
    /// This process's alone (dev-server's default; `--shared-store` shares it): its reads take
    /// no lock outside the process, and another process opening the file is refused.
    Exclusive,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub edition: Edition,
    pub store: StoreKind,
    /// How the embedded store holds its file.
    pub store_sharing: StoreSharing,
    pub aws_trust: AwsTrust,
    pub data_dir: PathBuf,
    pub table: String,
    pub bucket: String,
    /// The address clients reach Hangar at; links are built from it, else from the request.
    pub public_url: Option<String>,
    pub admin_token: Option<String>,
    /// The token Hangar's own runners (`hangar-agent` on the site's pool, for `remote` workspaces)
    /// register with (`HANGAR_RUNNER_TOKEN`, or its secret in AWS).
    pub runner_token: Option<String>,
    pub max_upload_bytes: u64,
    /// The largest state a workspace keeps (`HANGAR_MAX_STATE_BYTES`, 64 MiB by default).
    pub max_state_bytes: u64,
    /// How long a state version's download links work (`HANGAR_STATE_LINK_SECONDS`, 300).
    pub state_link_lifetime: std::time::Duration,
    /// How long a run's log links work (`HANGAR_LOG_LINK_SECONDS`, 12 hours): the CLI reads one
    /// for as long as its plan or apply runs.
    pub log_link_lifetime: std::time::Duration,
    /// The key that signs links served without a bearer token (`HANGAR_LINK_KEY`; in AWS read
    /// from the secret `HANGAR_LINK_KEY_SECRET_ARN` names). Unset, dev-server signs with a key
    /// file in its data directory, and a deployed function signs no links.
    pub link_key: Option<String>,
    pub archive_limits: ArchiveLimits,
    /// The public registry's module API that `/api/registry/public/v1` forwards to.
    pub public_registry_url: String,
    pub public_registry_timeout: std::time::Duration,
    /// The largest upstream response the proxy relays.
    pub public_registry_max_bytes: usize,
    pub max_agent_pools: usize,
    /// Variables per workspace (each is an item a list reads).
    pub max_workspace_variables: usize,
    /// Live agents per organization (the free edition has one).
    pub max_agents: usize,
    /// How long an agent may stay silent before it is `unknown`.
    pub agent_ping_timeout: std::time::Duration,
    /// How much longer an `unknown` agent may stay silent before it is `errored` and stops
    /// counting against the live-agent limit (`HANGAR_AGENT_ERRORED_AFTER`).
    pub agent_errored_after: std::time::Duration,
    /// How long `errored` and `exited` agents are kept before they are pruned
    /// (`HANGAR_AGENT_RETENTION`).
    pub agent_retention: std::time::Duration,
    /// The broker's root token (stored hashed); dev-server generates one when unset.
    pub root_service_token: Option<String>,
    /// The KMS key sealing the broker's secrets; unset, a key file in the data directory does.
    pub kms_key_id: Option<String>,
    /// The asymmetric KMS key (`ECC_NIST_P256`) signing the broker's workload identity tokens
    /// (`HANGAR_IDENTITY_KMS_KEY_ID`); unset, dev-server signs with a key file in its data
    /// directory and a deployed function offers no workload identity.
    pub identity_kms_key_id: Option<String>,
    /// The identity keys it replaced, still published so that tokens they signed verify until
    /// they expire (`HANGAR_IDENTITY_PREVIOUS_KMS_KEY_IDS`, comma-separated); dev-server
    /// publishes `identity.previous.key` beside `identity.key` when that file exists.
    pub identity_previous_kms_key_ids: Vec<String>,
    /// Hosts a README's images may load from on the console, besides a VCS module's own
    /// repository host (`HANGAR_CONSOLE_IMAGE_HOSTS`, comma-separated): none by default, so a
    /// README cannot have every viewer's browser call a host of its author's choosing.
    pub console_image_hosts: Vec<String>,
    /// Networks VCS calls may reach besides the public Internet (`HANGAR_VCS_ALLOWED_NETWORKS`):
    /// none by default, so a connection cannot point Hangar at its own network.
    pub vcs_allowed_networks: AllowedNetworks,
    /// What the deployment lets the broker's roles ask of AWS (`HANGAR_BROKER_*`).
    pub broker_limits: BrokerLimits,
    /// How old a write-ahead record of an IAM user must be before the scheduled job rolls the
    /// user back (`HANGAR_BROKER_ROLLBACK_MIN_AGE`, Vault's 5 minutes by default).
    pub broker_rollback_min_age: std::time::Duration,
    /// How the broker waits for IAM and STS (`HANGAR_BROKER_AWS_*`).
    pub broker_aws: BrokerAws,
}

/// How long the broker waits for AWS, and what workload identity may ask of it: no call to AWS
/// can hold a request or the scheduled job for longer than these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAws {
    /// How long a connection to IAM or STS may take (`HANGAR_BROKER_AWS_CONNECT_TIMEOUT`).
    pub connect_timeout: std::time::Duration,
    /// How long one IAM or STS operation may take, its retries included
    /// (`HANGAR_BROKER_AWS_OPERATION_TIMEOUT`).
    pub operation_timeout: std::time::Duration,
    /// The longest `identity_token_ttl` a mount may set (`HANGAR_BROKER_MAX_IDENTITY_TOKEN_TTL`):
    /// Vault caps it by its key's verification TTL, 24 hours by default.
    pub max_identity_token_ttl: std::time::Duration,
    /// STS endpoints besides AWS's own that a mount using workload identity may send its
    /// identity tokens to (`HANGAR_BROKER_IDENTITY_STS_ENDPOINTS`, comma-separated URLs).
    pub identity_sts_endpoints: Vec<String>,
}

impl Default for BrokerAws {
    fn default() -> Self {
        Self {
            connect_timeout: std::time::Duration::from_secs(3),
            operation_timeout: std::time::Duration::from_secs(20),
            max_identity_token_ttl: std::time::Duration::from_secs(24 * 3600),
            identity_sts_endpoints: Vec::new(),
        }
    }
}

/// What the deployment lets broker roles and static roles ask of AWS, besides what IAM itself
/// allows the broker. Each setting unset (as in a plain dev-server) restricts nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerLimits {
    /// `HANGAR_BROKER_USER_PATH`: the IAM path every dynamic user is created under (a role's
    /// own `user_path` must lie within it; a role without one gets it).
    pub user_path: Option<String>,
    /// `HANGAR_BROKER_PERMISSIONS_BOUNDARY`: the boundary every dynamic user gets (a role may
    /// name no other).
    pub permissions_boundary: Option<String>,
    /// `HANGAR_BROKER_ALLOWED_POLICY_ARNS`: the managed policies an `iam_user` role may attach
    /// (an entry ending in `*` matches a prefix).
    pub policy_arns: Option<Vec<String>>,
    /// `HANGAR_BROKER_ALLOWED_ROLE_ARNS`: the roles an `assumed_role` role may assume.
    pub role_arns: Option<Vec<String>>,
    /// `HANGAR_BROKER_ALLOWED_GROUPS`: the IAM groups an `iam_user` role may add its users to,
    /// by name (an entry ending in `*` matches a prefix).
    pub groups: Option<Vec<String>>,
    /// `HANGAR_BROKER_STATIC_USERS`: the IAM users a static role may hold, each entry a user
    /// name or, starting with `/`, an IAM path whose users are allowed.
    pub static_users: Option<Vec<String>>,
}

impl BrokerLimits {
    /// Whether `arn` is one of `allowed` (unset: any); an entry ending in `*` is a prefix.
    pub fn allows(allowed: &Option<Vec<String>>, arn: &str) -> bool {
        allowed.as_ref().is_none_or(|list| {
            list.iter().any(|entry| match entry.strip_suffix('*') {
                Some(prefix) => arn.starts_with(prefix),
                None => entry == arn,
            })
        })
    }

    /// Whether a static role may hold the user `name` whose IAM path is `path` (unknown: only
    /// an entry naming the user allows it).
    pub fn allows_static_user(&self, name: &str, path: Option<&str>) -> bool {
        self.static_users.as_ref().is_none_or(|list| {
            list.iter().any(|entry| match entry.starts_with('/') {
                true => path.is_some_and(|path| path.starts_with(entry.as_str())),
                false => entry == name,
            })
        })
    }
}

/// An IAM path setting: starts and ends with `/`.
fn iam_path(name: &'static str, raw: Option<String>) -> Result<Option<String>, ConfigError> {
    match raw {
        Some(path) if !(path.starts_with('/') && path.ends_with('/')) || path.contains(char::is_whitespace) => {
            Err(ConfigError { name, problem: format!("`{path}` is not an IAM path: it starts and ends with /") })
        }
        other => Ok(other),
    }
}

/// An allow-list: comma-separated entries each of which `valid` accepts (else the problem it
/// names), `none` for an empty list (nothing allowed), or `None` when unset.
fn allow_list(
    name: &'static str,
    raw: Option<String>,
    valid: impl Fn(&str) -> Result<(), String>,
) -> Result<Option<Vec<String>>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    if raw == "none" {
        return Ok(Some(Vec::new()));
    }
    let list: Vec<String> = raw.split(',').map(str::trim).filter(|e| !e.is_empty()).map(str::to_owned).collect();
    match list.iter().find_map(|entry| valid(entry).err()) {
        Some(problem) => Err(ConfigError { name, problem }),
        None => Ok(Some(list)),
    }
}

/// A list of ARNs (each starting `arn:`), as [`allow_list`] reads it.
fn arns(name: &'static str, raw: Option<String>) -> Result<Option<Vec<String>>, ConfigError> {
    allow_list(name, raw, |entry| match entry.starts_with("arn:") {
        true => Ok(()),
        false => Err(format!("`{entry}` is not an ARN (arn:…)")),
    })
}

/// A list of IAM group names (1 to 128 letters, digits or `_+=,.@-`; a last `*` makes the
/// entry a prefix), as [`allow_list`] reads it. A group named `none` cannot be listed alone.
fn group_names(name: &'static str, raw: Option<String>) -> Result<Option<Vec<String>>, ConfigError> {
    allow_list(name, raw, |entry| {
        let group = entry.strip_suffix('*').unwrap_or(entry);
        let valid = group.len() <= 128
            && (!group.is_empty() || entry == "*")
            && group.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+=.@-".contains(&b));
        match valid {
            true => Ok(()),
            false => {
                Err(format!("`{entry}` is not an IAM group name (letters, digits, _+=.@-; a last * for a prefix)"))
            }
        }
    })
}

/// A comma-separated list of IAM user names and IAM paths (`/…/`), or `None` when unset.
fn static_users(name: &'static str, raw: Option<String>) -> Result<Option<Vec<String>>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let list: Vec<String> = raw.split(',').map(str::trim).filter(|e| !e.is_empty()).map(str::to_owned).collect();
    for entry in &list {
        if entry.starts_with('/') {
            iam_path(name, Some(entry.clone()))?;
        }
    }
    Ok(Some(list))
}

/// A variable's trimmed, non-empty value by its name.
type Lookup<'a> = dyn Fn(&str) -> Option<String> + 'a;

#[derive(Debug, thiserror::Error)]
#[error("{name}: {problem}")]
pub struct ConfigError {
    pub name: &'static str,
    pub problem: String,
}

/// A list of CIDR blocks, or none when unset.
fn networks(name: &'static str, raw: Option<String>) -> Result<AllowedNetworks, ConfigError> {
    raw.map_or(Ok(AllowedNetworks::default()), |raw| {
        AllowedNetworks::parse(&raw).map_err(|problem| ConfigError { name, problem })
    })
}

/// A whole-number setting within `range`, or its default when unset. Anything else (not a
/// number, out of the range, beyond any number) stops start-up with a message naming the
/// variable and its range, so no setting can overflow where it is used.
fn number<T: TryFrom<u64>>(
    var: &Lookup,
    name: &'static str,
    default: T,
    range: RangeInclusive<u64>,
) -> Result<T, ConfigError> {
    let Some(raw) = var(name) else { return Ok(default) };
    let expected = format!("a whole number from {} to {}", range.start(), range.end());
    if !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ConfigError { name, problem: format!("`{raw}` is not {expected}") });
    }
    let out_of_range = || ConfigError { name, problem: format!("`{raw}` is out of range: {expected}") };
    let value = raw.parse::<u64>().ok().filter(|value| range.contains(value)).ok_or_else(out_of_range)?;
    T::try_from(value).map_err(|_| out_of_range())
}

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// The range of each numeric setting (docs/settings.md's table gives the same).
mod range {
    use std::ops::RangeInclusive;

    use super::{GIB, MIB};

    /// S3's largest single PUT, which an upload link is.
    pub const UPLOAD_BYTES: RangeInclusive<u64> = 1..=5 * GIB;
    /// A state is read whole into a function's memory to parse it.
    pub const STATE_BYTES: RangeInclusive<u64> = 1..=GIB;
    /// A second to an hour.
    pub const STATE_LINK_SECONDS: RangeInclusive<u64> = 1..=3600;
    pub const LOG_LINK_SECONDS: RangeInclusive<u64> = 1..=7 * 24 * 3600;
    pub const ARCHIVE_COMPRESSED_BYTES: RangeInclusive<u64> = 1..=5 * GIB;
    pub const ARCHIVE_UNCOMPRESSED_BYTES: RangeInclusive<u64> = 1..=64 * GIB;
    pub const ARCHIVE_ENTRIES: RangeInclusive<u64> = 1..=1_000_000;
    pub const ARCHIVE_PATH_LENGTH: RangeInclusive<u64> = 1..=4096;
    /// A Lambda function's longest run.
    pub const PUBLIC_REGISTRY_TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=900;
    pub const PUBLIC_REGISTRY_MAX_BYTES: RangeInclusive<u64> = 1..=64 * MIB;
    pub const MAX_AGENT_POOLS: RangeInclusive<u64> = 0..=1_000_000;
    /// A variable list reads them all.
    pub const MAX_WORKSPACE_VARIABLES: RangeInclusive<u64> = 0..=10_000;
    /// Held by one counter item, so any limit costs the same.
    pub const MAX_AGENTS: RangeInclusive<u64> = 0..=1_000_000;
    /// A week.
    pub const AGENT_PING_TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=7 * 24 * 3600;
    /// A week, like the ping timeout.
    pub const AGENT_ERRORED_AFTER_SECONDS: RangeInclusive<u64> = 1..=7 * 24 * 3600;
    /// Up to 90 days.
    pub const AGENT_RETENTION_SECONDS: RangeInclusive<u64> = 1..=90 * 24 * 3600;
    /// Up to a day: a record waits at least a run of the job, at most a day.
    pub const ROLLBACK_MIN_AGE_SECONDS: RangeInclusive<u64> = 1..=24 * 3600;
    pub const AWS_CONNECT_TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=60;
    /// Within API Gateway's 29 seconds is wise for requests; the job has more.
    pub const AWS_OPERATION_TIMEOUT_SECONDS: RangeInclusive<u64> = 1..=300;
    /// A minute (the least a token needs to be exchanged) to 30 days.
    pub const MAX_IDENTITY_TOKEN_TTL_SECONDS: RangeInclusive<u64> = 60..=30 * 24 * 3600;
}

/// `HANGAR_CONSOLE_IMAGE_HOSTS`: comma-separated host names (none when unset), lowercased.
fn image_hosts(raw: Option<String>) -> Result<Vec<String>, ConfigError> {
    const NAME: &str = "HANGAR_CONSOLE_IMAGE_HOSTS";
    let Some(raw) = raw else { return Ok(Vec::new()) };
    let mut hosts = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
        let host = entry.to_ascii_lowercase();
        let valid = host.len() <= 253 && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !valid {
            return Err(ConfigError {
                name: NAME,
                problem: format!("`{entry}` is not a host name (no scheme, port or path)"),
            });
        }
        hosts.push(host);
    }
    Ok(hosts)
}

/// `HANGAR_BROKER_IDENTITY_STS_ENDPOINTS`: comma-separated https URLs (none when unset).
fn sts_endpoints(raw: Option<String>) -> Result<Vec<String>, ConfigError> {
    const NAME: &str = "HANGAR_BROKER_IDENTITY_STS_ENDPOINTS";
    let Some(raw) = raw else { return Ok(Vec::new()) };
    let mut endpoints = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
        let parsed = reqwest::Url::parse(entry).ok().filter(|url| matches!(url.scheme(), "https" | "http"));
        let url =
            parsed.ok_or_else(|| ConfigError { name: NAME, problem: format!("`{entry}` is not an http(s) URL") })?;
        endpoints.push(url.as_str().trim_end_matches('/').to_owned());
    }
    Ok(endpoints)
}

/// A duration setting written as humans write one (`5m`, `1s`, `1h 30m`), within `range`
/// seconds.
fn duration(
    var: &Lookup,
    name: &'static str,
    default: std::time::Duration,
    range: RangeInclusive<u64>,
) -> Result<std::time::Duration, ConfigError> {
    let Some(raw) = var(name) else { return Ok(default) };
    let expected = format!("a duration from {}s to {}s, such as `5m` or `1s`", range.start(), range.end());
    let parsed = humantime::parse_duration(&raw)
        .map_err(|_| ConfigError { name, problem: format!("`{raw}` is not {expected}") })?;
    if parsed.subsec_nanos() != 0 || !range.contains(&parsed.as_secs()) {
        return Err(ConfigError { name, problem: format!("`{raw}` is out of range: {expected}") });
    }
    Ok(parsed)
}

impl Default for Config {
    /// What an empty environment gives: embedded store under `./.hangar`, hosted edition.
    fn default() -> Self {
        Self {
            edition: Edition::Hosted,
            store: StoreKind::Sqlite,
            store_sharing: StoreSharing::Shared,
            aws_trust: AwsTrust::Amazon,
            data_dir: PathBuf::from(".hangar"),
            table: "hangar".into(),
            bucket: "hangar-archives".into(),
            public_url: None,
            admin_token: None,
            runner_token: None,
            max_upload_bytes: 512 * MIB,
            max_state_bytes: 64 * MIB,
            state_link_lifetime: std::time::Duration::from_secs(300),
            log_link_lifetime: std::time::Duration::from_secs(12 * 3600),
            link_key: None,
            archive_limits: ArchiveLimits::default(),
            public_registry_url: "https://registry.terraform.io/v1/modules".into(),
            public_registry_timeout: std::time::Duration::from_secs(10),
            public_registry_max_bytes: 4 * MIB as usize,
            max_agent_pools: 1,
            max_workspace_variables: 500,
            max_agents: 1,
            agent_ping_timeout: std::time::Duration::from_secs(120),
            // HCP's "Agent Capacity Usage" (developer.hashicorp.com/terraform/cloud-docs/agents/
            // agent-pools): unknown agents that do not respond for 2 hours become errored.
            agent_errored_after: std::time::Duration::from_secs(2 * 3600),
            // HCP documents no period after which errored and exited agents leave the list
            // (same page, "View Agent Statuses"); Hangar keeps them a day.
            agent_retention: std::time::Duration::from_secs(24 * 3600),
            root_service_token: None,
            kms_key_id: None,
            identity_kms_key_id: None,
            identity_previous_kms_key_ids: Vec::new(),
            vcs_allowed_networks: AllowedNetworks::default(),
            console_image_hosts: Vec::new(),
            broker_limits: BrokerLimits::default(),
            broker_rollback_min_age: std::time::Duration::from_secs(300),
            broker_aws: BrokerAws::default(),
        }
    }
}

impl Config {
    /// Seconds until an agent should report next (its status, or its job's heartbeat): well
    /// inside the ping timeout, and often enough that a cancel reaches Terraform within seconds.
    pub fn agent_report_in(&self) -> u64 {
        (self.agent_ping_timeout.as_secs() / 4).clamp(1, 10)
    }

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings `lookup` gives (a variable's value by its name), e.g. a test's map.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = move |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let var: &Lookup = &var;
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
        let aws_trust = match var("HANGAR_AWS_TRUST").as_deref() {
            None | Some("amazon") => AwsTrust::Amazon,
            Some("system") => AwsTrust::System,
            Some(other) => {
                return Err(ConfigError {
                    name: "HANGAR_AWS_TRUST",
                    problem: format!("`{other}` is not amazon or system"),
                })
            }
        };
        let max_upload_bytes = number(var, "HANGAR_MAX_UPLOAD_BYTES", defaults.max_upload_bytes, range::UPLOAD_BYTES)?;
        let limits = defaults.archive_limits;
        let archive_limits = ArchiveLimits {
            max_compressed_bytes: number(
                var,
                "HANGAR_ARCHIVE_MAX_COMPRESSED_BYTES",
                limits.max_compressed_bytes,
                range::ARCHIVE_COMPRESSED_BYTES,
            )?,
            max_uncompressed_bytes: number(
                var,
                "HANGAR_ARCHIVE_MAX_UNCOMPRESSED_BYTES",
                limits.max_uncompressed_bytes,
                range::ARCHIVE_UNCOMPRESSED_BYTES,
            )?,
            max_entries: number(var, "HANGAR_ARCHIVE_MAX_ENTRIES", limits.max_entries, range::ARCHIVE_ENTRIES)?,
            max_path_len: number(
                var,
                "HANGAR_ARCHIVE_MAX_PATH_LENGTH",
                limits.max_path_len,
                range::ARCHIVE_PATH_LENGTH,
            )?,
        };
        Ok(Self {
            edition,
            store,
            store_sharing: StoreSharing::Shared,
            aws_trust,
            data_dir: var("HANGAR_DATA_DIR").map(PathBuf::from).unwrap_or(defaults.data_dir),
            table: var("HANGAR_TABLE").unwrap_or(defaults.table),
            bucket: var("HANGAR_BUCKET").unwrap_or(defaults.bucket),
            public_url: var("HANGAR_PUBLIC_URL").map(|url| url.trim_end_matches('/').to_owned()),
            admin_token: var("HANGAR_ADMIN_TOKEN"),
            runner_token: var("HANGAR_RUNNER_TOKEN"),
            max_upload_bytes,
            max_state_bytes: number(var, "HANGAR_MAX_STATE_BYTES", defaults.max_state_bytes, range::STATE_BYTES)?,
            state_link_lifetime: std::time::Duration::from_secs(number(
                var,
                "HANGAR_STATE_LINK_SECONDS",
                defaults.state_link_lifetime.as_secs(),
                range::STATE_LINK_SECONDS,
            )?),
            log_link_lifetime: std::time::Duration::from_secs(number(
                var,
                "HANGAR_LOG_LINK_SECONDS",
                defaults.log_link_lifetime.as_secs(),
                range::LOG_LINK_SECONDS,
            )?),
            link_key: var("HANGAR_LINK_KEY"),
            archive_limits,
            public_registry_url: var("HANGAR_PUBLIC_REGISTRY_URL")
                .map(|url| url.trim_end_matches('/').to_owned())
                .unwrap_or(defaults.public_registry_url),
            public_registry_timeout: std::time::Duration::from_secs(number(
                var,
                "HANGAR_PUBLIC_REGISTRY_TIMEOUT_SECONDS",
                defaults.public_registry_timeout.as_secs(),
                range::PUBLIC_REGISTRY_TIMEOUT_SECONDS,
            )?),
            public_registry_max_bytes: number(
                var,
                "HANGAR_PUBLIC_REGISTRY_MAX_BYTES",
                defaults.public_registry_max_bytes,
                range::PUBLIC_REGISTRY_MAX_BYTES,
            )?,
            max_agent_pools: number(var, "HANGAR_MAX_AGENT_POOLS", defaults.max_agent_pools, range::MAX_AGENT_POOLS)?,
            max_workspace_variables: number(
                var,
                "HANGAR_MAX_WORKSPACE_VARIABLES",
                defaults.max_workspace_variables,
                range::MAX_WORKSPACE_VARIABLES,
            )?,
            max_agents: number(var, "HANGAR_MAX_AGENTS", defaults.max_agents, range::MAX_AGENTS)?,
            agent_ping_timeout: std::time::Duration::from_secs(number(
                var,
                "HANGAR_AGENT_PING_TIMEOUT",
                defaults.agent_ping_timeout.as_secs(),
                range::AGENT_PING_TIMEOUT_SECONDS,
            )?),
            agent_errored_after: std::time::Duration::from_secs(number(
                var,
                "HANGAR_AGENT_ERRORED_AFTER",
                defaults.agent_errored_after.as_secs(),
                range::AGENT_ERRORED_AFTER_SECONDS,
            )?),
            agent_retention: std::time::Duration::from_secs(number(
                var,
                "HANGAR_AGENT_RETENTION",
                defaults.agent_retention.as_secs(),
                range::AGENT_RETENTION_SECONDS,
            )?),
            root_service_token: var("HANGAR_ROOT_SERVICE_TOKEN"),
            kms_key_id: var("HANGAR_KMS_KEY_ID"),
            identity_kms_key_id: var("HANGAR_IDENTITY_KMS_KEY_ID"),
            identity_previous_kms_key_ids: var("HANGAR_IDENTITY_PREVIOUS_KMS_KEY_IDS")
                .map(|ids| ids.split(',').map(str::trim).filter(|id| !id.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default(),
            vcs_allowed_networks: networks("HANGAR_VCS_ALLOWED_NETWORKS", var("HANGAR_VCS_ALLOWED_NETWORKS"))?,
            console_image_hosts: image_hosts(var("HANGAR_CONSOLE_IMAGE_HOSTS"))?,
            broker_limits: BrokerLimits {
                user_path: iam_path("HANGAR_BROKER_USER_PATH", var("HANGAR_BROKER_USER_PATH"))?,
                permissions_boundary: arns(
                    "HANGAR_BROKER_PERMISSIONS_BOUNDARY",
                    var("HANGAR_BROKER_PERMISSIONS_BOUNDARY"),
                )?
                .and_then(|list| list.into_iter().next()),
                policy_arns: arns("HANGAR_BROKER_ALLOWED_POLICY_ARNS", var("HANGAR_BROKER_ALLOWED_POLICY_ARNS"))?,
                role_arns: arns("HANGAR_BROKER_ALLOWED_ROLE_ARNS", var("HANGAR_BROKER_ALLOWED_ROLE_ARNS"))?,
                groups: group_names("HANGAR_BROKER_ALLOWED_GROUPS", var("HANGAR_BROKER_ALLOWED_GROUPS"))?,
                static_users: static_users("HANGAR_BROKER_STATIC_USERS", var("HANGAR_BROKER_STATIC_USERS"))?,
            },
            broker_rollback_min_age: duration(
                var,
                "HANGAR_BROKER_ROLLBACK_MIN_AGE",
                defaults.broker_rollback_min_age,
                range::ROLLBACK_MIN_AGE_SECONDS,
            )?,
            broker_aws: BrokerAws {
                connect_timeout: duration(
                    var,
                    "HANGAR_BROKER_AWS_CONNECT_TIMEOUT",
                    defaults.broker_aws.connect_timeout,
                    range::AWS_CONNECT_TIMEOUT_SECONDS,
                )?,
                operation_timeout: duration(
                    var,
                    "HANGAR_BROKER_AWS_OPERATION_TIMEOUT",
                    defaults.broker_aws.operation_timeout,
                    range::AWS_OPERATION_TIMEOUT_SECONDS,
                )?,
                max_identity_token_ttl: duration(
                    var,
                    "HANGAR_BROKER_MAX_IDENTITY_TOKEN_TTL",
                    defaults.broker_aws.max_identity_token_ttl,
                    range::MAX_IDENTITY_TOKEN_TTL_SECONDS,
                )?,
                identity_sts_endpoints: sts_endpoints(var("HANGAR_BROKER_IDENTITY_STS_ENDPOINTS"))?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_numeric_setting_is_its_default_or_a_whole_number_in_its_range() {
        let set = |raw: &'static str| move |_: &str| Some(raw.to_owned());
        assert_eq!(number(&|_: &str| None, "N", 7u64, 1..=10).unwrap(), 7);
        assert_eq!(number(&set("10"), "N", 7u64, 1..=10).unwrap(), 10);
        let refused = |raw: &'static str| number(&set(raw), "N", 7usize, 1..=10).unwrap_err().to_string();
        assert_eq!(refused("11"), "N: `11` is out of range: a whole number from 1 to 10");
        assert_eq!(refused("0"), "N: `0` is out of range: a whole number from 1 to 10");
        assert_eq!(
            refused("99999999999999999999999"),
            "N: `99999999999999999999999` is out of range: a whole number from 1 to 10"
        );
        assert_eq!(refused("-1"), "N: `-1` is not a whole number from 1 to 10");
        assert_eq!(refused("1e3"), "N: `1e3` is not a whole number from 1 to 10");
    }

    #[test]
    fn every_default_is_within_its_range() {
        let config = Config::from_lookup(|_| None).unwrap();
        let limits = config.archive_limits;
        for (value, range) in [
            (config.max_upload_bytes, range::UPLOAD_BYTES),
            (config.max_state_bytes, range::STATE_BYTES),
            (config.state_link_lifetime.as_secs(), range::STATE_LINK_SECONDS),
            (limits.max_compressed_bytes, range::ARCHIVE_COMPRESSED_BYTES),
            (limits.max_uncompressed_bytes, range::ARCHIVE_UNCOMPRESSED_BYTES),
            (limits.max_entries as u64, range::ARCHIVE_ENTRIES),
            (limits.max_path_len as u64, range::ARCHIVE_PATH_LENGTH),
            (config.public_registry_timeout.as_secs(), range::PUBLIC_REGISTRY_TIMEOUT_SECONDS),
            (config.public_registry_max_bytes as u64, range::PUBLIC_REGISTRY_MAX_BYTES),
            (config.max_agent_pools as u64, range::MAX_AGENT_POOLS),
            (config.max_workspace_variables as u64, range::MAX_WORKSPACE_VARIABLES),
            (config.max_agents as u64, range::MAX_AGENTS),
            (config.agent_ping_timeout.as_secs(), range::AGENT_PING_TIMEOUT_SECONDS),
            (config.agent_errored_after.as_secs(), range::AGENT_ERRORED_AFTER_SECONDS),
            (config.agent_retention.as_secs(), range::AGENT_RETENTION_SECONDS),
        ] {
            assert!(range.contains(&value), "{value} in {range:?}");
        }
    }

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

    #[test]
    fn broker_limits_are_unset_by_default_and_a_bad_entry_names_the_variable() {
        assert_eq!(Config::from_lookup(|_| None).unwrap().broker_limits, BrokerLimits::default());
        let config = Config::from_lookup(|name| match name {
            "HANGAR_BROKER_USER_PATH" => Some("/hangar/".into()),
            "HANGAR_BROKER_ALLOWED_POLICY_ARNS" => Some("arn:aws:iam::1:policy/a, arn:aws:iam::1:policy/b-*".into()),
            "HANGAR_BROKER_STATIC_USERS" => Some("/static/,ci".into()),
            "HANGAR_BROKER_ALLOWED_ROLE_ARNS" => Some("none".into()),
            "HANGAR_BROKER_ALLOWED_GROUPS" => Some("ops, ci-*".into()),
            _ => None,
        })
        .unwrap();
        let limits = config.broker_limits;
        assert_eq!(limits.user_path.as_deref(), Some("/hangar/"));
        assert!(BrokerLimits::allows(&limits.policy_arns, "arn:aws:iam::1:policy/b-ci"));
        assert!(!BrokerLimits::allows(&limits.policy_arns, "arn:aws:iam::1:policy/ab"));
        assert!(!BrokerLimits::allows(&limits.role_arns, "arn:aws:iam::1:role/anything"), "none allows none");
        assert!(BrokerLimits::allows(&None, "arn:aws:iam::1:role/anything"), "unset allows all");
        assert!(BrokerLimits::allows(&limits.groups, "ops") && BrokerLimits::allows(&limits.groups, "ci-deploy"));
        assert!(!BrokerLimits::allows(&limits.groups, "admins") && !BrokerLimits::allows(&limits.groups, "ops2"));
        let none = Config::from_lookup(|n| (n == "HANGAR_BROKER_ALLOWED_GROUPS").then(|| "none".to_owned())).unwrap();
        assert_eq!(none.broker_limits.groups, Some(Vec::new()), "none allows no group");
        assert!(limits.allows_static_user("x", Some("/static/team/")) && limits.allows_static_user("ci", None));
        assert!(!limits.allows_static_user("x", None));
        for (name, bad) in [
            ("HANGAR_BROKER_USER_PATH", "hangar"),
            ("HANGAR_BROKER_ALLOWED_ROLE_ARNS", "role/x"),
            ("HANGAR_BROKER_ALLOWED_GROUPS", "group/ops"),
            ("HANGAR_BROKER_ALLOWED_GROUPS", "a*b"),
        ] {
            let message = Config::from_lookup(|n| (n == name).then(|| bad.to_owned())).unwrap_err().to_string();
            assert!(message.starts_with(&format!("{name}: ")) && message.contains(bad), "{message}");
        }
    }
}
