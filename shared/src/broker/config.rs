//! A mount's `config/root` (the cloud account's credentials and endpoints; the secret key is
//! sealed at rest and never returned), the AWS client it yields, the rotation of its key
//! (`config/rotate-root`), and `config/lease`; and the rebinding of the broker's format-1 sealed
//! values ([`reseal_value`]).

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::error::{BrokerError, Result};
use super::mounts::Mount;
use super::{duration, template};
use crate::aws::{Breaker, CloudSettings, SharedCloud, WebIdentity};
use crate::config::Edition;
use crate::identity::{self, TokenRequest};
use crate::seal::{self, Rebound, Resealed, SealContext};
use crate::state::AppState;
use crate::store::{keys, Condition, Item, ItemStore, UpdateOp};

/// What Vault's lease defaults to when `config/lease` was never written (its system TTL).
const DEFAULT_LEASE: Duration = Duration::from_secs(768 * 3600);
/// Vault's default lifetime of a plugin identity token.
const DEFAULT_IDENTITY_TOKEN_TTL: u64 = 3600;
/// The most retries `max_retries` may ask for: each waits longer, within the operation timeout.
const MAX_RETRIES: i64 = 10;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RootConfig {
    pub access_key: String,
    /// The secret key, sealed (KMS in AWS, the local key file in dev-server).
    pub sealed_secret_key: Option<String>,
    pub region: Option<String>,
    pub iam_endpoint: Option<String>,
    pub sts_endpoint: Option<String>,
    pub max_retries: i64,
    pub username_template: Option<String>,
    pub role_arn: Option<String>,
    pub identity_token_audience: Option<String>,
    pub identity_token_ttl: Option<u64>,
}

fn text(body: &Map<String, Value>, name: &str) -> Result<Option<String>> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
        Some(_) => Err(BrokerError::invalid(format!("{name} must be a string"))),
    }
}

/// A `config/root` write: it replaces the whole configuration, as Vault's does.
pub async fn write_root(state: &AppState, mount: &Mount, body: &Map<String, Value>) -> Result<()> {
    let access_key = text(body, "access_key")?;
    let secret_key = text(body, "secret_key")?;
    let (role_arn, audience) = (text(body, "role_arn")?, text(body, "identity_token_audience")?);
    let enterprise_only = ["role_arn", "identity_token_audience", "identity_token_ttl"];
    if state.config.edition != Edition::Enterprise {
        if let Some(field) = enterprise_only.iter().find(|f| body.get(**f).is_some_and(|v| !v.is_null())) {
            return Err(BrokerError::invalid(format!(
                "{field} is available only on the enterprise edition (HANGAR_EDITION=enterprise)"
            )));
        }
    }
    if access_key.is_some() != secret_key.is_some() {
        return Err(BrokerError::invalid("access_key and secret_key must be provided together"));
    }
    if access_key.is_some() && audience.is_some() {
        return Err(BrokerError::invalid("access_key and identity_token_audience are mutually exclusive"));
    }
    if audience.is_some() && role_arn.is_none() {
        return Err(BrokerError::invalid("role_arn is required with identity_token_audience"));
    }
    let max_retries = match body.get("max_retries") {
        None | Some(Value::Null) => -1,
        Some(value) => value
            .as_i64()
            .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
            .filter(|n| (-1..=MAX_RETRIES).contains(n))
            .ok_or_else(|| {
                BrokerError::invalid(format!(
                    "max_retries must be a whole number from 0 to {MAX_RETRIES}, or -1 for the SDK's default"
                ))
            })?,
    };
    let username_template = text(body, "username_template")?;
    if let Some(template) = &username_template {
        template::validate(template).map_err(|e| BrokerError::invalid(e.to_string()))?;
    }
    let identity_token_ttl = match body.get("identity_token_ttl") {
        None | Some(Value::Null) => None,
        Some(value) => Some(duration::parse(value).map_err(BrokerError::invalid)?.as_secs()),
    };
    // 0 is unset, as Vault reads it.
    let identity_token_ttl = identity_token_ttl.filter(|&ttl| ttl > 0);
    let most = state.config.broker_aws.max_identity_token_ttl;
    if identity_token_ttl.is_some_and(|ttl| ttl > most.as_secs()) {
        return Err(BrokerError::invalid(format!(
            "identity_token_ttl must be from 1s to {} (HANGAR_BROKER_MAX_IDENTITY_TOKEN_TTL)",
            duration::format(most)
        )));
    }
    let sts_endpoint = text(body, "sts_endpoint")?;
    if audience.is_some() {
        check_identity_sts_endpoint(sts_endpoint.as_deref(), &state.config.broker_aws.identity_sts_endpoints)?;
    }
    let sealed_secret_key = match &secret_key {
        Some(secret) => Some(state.sealer.seal_for(&SealContext::broker_root_key(&mount.uuid), secret).await?),
        None => None,
    };
    let config = RootConfig {
        access_key: access_key.unwrap_or_default(),
        sealed_secret_key,
        region: text(body, "region")?,
        iam_endpoint: text(body, "iam_endpoint")?,
        sts_endpoint,
        max_retries,
        username_template,
        role_arn,
        identity_token_audience: audience,
        identity_token_ttl,
    };
    let item = Item::from_value(keys::mount_config(&mount.uuid, "root"), &config)?;
    state.store.put(item, Condition::Always).await?;
    Ok(())
}

/// Refuses an STS endpoint a mount using workload identity may not send its identity tokens
/// to: AWS's own (the SDK's default, or `https://sts[.<region>].amazonaws.com[.cn]`), or one
/// the operator lists (`HANGAR_BROKER_IDENTITY_STS_ENDPOINTS`). A token Hangar signs is a
/// credential: a tenant must not be able to have it sent to an endpoint of its choice.
fn check_identity_sts_endpoint(endpoint: Option<&str>, allowed: &[String]) -> Result<()> {
    let Some(endpoint) = endpoint else { return Ok(()) };
    let normal = endpoint.trim_end_matches('/');
    if allowed.iter().any(|url| url == normal) || is_aws_sts(normal) {
        return Ok(());
    }
    Err(BrokerError::invalid(format!(
        "sts_endpoint {endpoint} is not AWS's: with workload identity the broker sends identity tokens only to AWS's \
         STS endpoints and those HANGAR_BROKER_IDENTITY_STS_ENDPOINTS lists"
    )))
}

/// Whether `url` is one of AWS's STS endpoints (global, regional or FIPS, in the commercial or
/// China partitions), over https.
fn is_aws_sts(url: &str) -> bool {
    let Some(host) = url.strip_prefix("https://") else { return false };
    let Some(rest) = host.strip_prefix("sts.").or_else(|| host.strip_prefix("sts-fips.")) else { return false };
    let region = rest.strip_suffix(".amazonaws.com").or_else(|| rest.strip_suffix(".amazonaws.com.cn"));
    match region {
        Some(region) => region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
        None => rest == "amazonaws.com",
    }
}

pub async fn root(store: &dyn ItemStore, mount: &Mount) -> Result<RootConfig> {
    match store.get(&keys::mount_config(&mount.uuid, "root")).await? {
        Some(item) => Ok(item.parse()?),
        None => Ok(RootConfig { max_retries: -1, ..RootConfig::default() }),
    }
}

/// Whether the mount's `config/root` was ever written: a write to it is then an update, else a
/// create (`root` reads the defaults either way).
pub async fn root_exists(store: &dyn ItemStore, mount: &Mount) -> Result<bool> {
    Ok(store.get(&keys::mount_config(&mount.uuid, "root")).await?.is_some())
}

/// The region the engine calls AWS in: configured, else `AWS_REGION`, else
/// `AWS_DEFAULT_REGION`, else `us-east-1`.
pub fn region(config: &RootConfig) -> String {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    config
        .region
        .clone()
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".into())
}

/// `data` of a `config/root` read: never the secret key.
pub fn root_data(config: &RootConfig, edition: Edition) -> Value {
    let mut data = json!({
        "access_key": config.access_key,
        "region": region(config),
        "iam_endpoint": config.iam_endpoint.clone().unwrap_or_default(),
        "sts_endpoint": config.sts_endpoint.clone().unwrap_or_default(),
        "max_retries": config.max_retries,
        "username_template": config.username_template.clone().unwrap_or_default(),
    });
    if edition == Edition::Enterprise {
        data["role_arn"] = json!(config.role_arn.clone().unwrap_or_default());
        data["identity_token_audience"] = json!(config.identity_token_audience.clone().unwrap_or_default());
        data["identity_token_ttl"] = json!(config.identity_token_ttl.unwrap_or(DEFAULT_IDENTITY_TOKEN_TTL));
    }
    data
}

/// The AWS client for a mount's root configuration, built once per process and per distinct
/// configuration (a `config/root` write yields new settings, hence a new client).
pub async fn cloud(state: &AppState, mount: &Mount, config: &RootConfig) -> Result<SharedCloud> {
    let settings = cloud_settings(state, mount, config).await?;
    let mut clients = state.clouds.lock().await;
    if let Some((_, cloud)) = clients.iter().find(|(known, _)| *known == settings) {
        return Ok(cloud.clone());
    }
    let cloud = crate::aws::connect(&settings, &state.aws).await;
    // A handful of mounts at most; an old configuration's client is dropped first.
    if clients.len() >= 8 {
        clients.remove(0);
    }
    clients.push((settings, cloud.clone()));
    Ok(cloud)
}

/// The AWS client of a mount, and the root configuration it was built from.
pub async fn mount_cloud(state: &AppState, mount: &Mount) -> Result<(SharedCloud, RootConfig)> {
    let config = root(state.store.as_ref(), mount).await?;
    Ok((cloud(state, mount, &config).await?, config))
}

/// The AWS clients of the mounts one run goes through (the scheduled job): each mount's root
/// configuration is read and unsealed once per run, not once per role, and each mount's client
/// gives up for the rest of the run once AWS did not answer it ([`Breaker`]), so a mount whose
/// endpoint hangs holds the run up for one timeout, not one a role or a lease.
#[derive(Default)]
pub struct MountClouds(HashMap<String, SharedCloud>);

impl MountClouds {
    pub async fn get(&mut self, state: &AppState, mount: &Mount) -> Result<SharedCloud> {
        if let Some(cloud) = self.0.get(&mount.uuid) {
            return Ok(cloud.clone());
        }
        let (cloud, _) = mount_cloud(state, mount).await?;
        let cloud = Breaker::wrap(cloud);
        self.0.insert(mount.uuid.clone(), cloud.clone());
        Ok(cloud)
    }
}

/// `config/rotate-root`: a new key for the engine's own user, stored, then the old one deleted.
/// Returns the new key's id.
pub async fn rotate_root(state: &AppState, mount: &Mount) -> Result<String> {
    let (cloud, mut root) = mount_cloud(state, mount).await?;
    if root.access_key.is_empty() {
        return Err(BrokerError::invalid("rotate-root needs static credentials in config/root"));
    }
    let user = cloud.get_user(None).await?;
    let keys = cloud.list_access_keys(Some(&user.name)).await?;
    if keys.len() > 1 {
        return Err(BrokerError::invalid(format!(
            "IAM user {} has {} access keys; rotate-root needs the engine's key to be its only one",
            user.name,
            keys.len()
        )));
    }
    let new = cloud.create_access_key(Some(&user.name)).await?;
    let old = std::mem::replace(&mut root.access_key, new.id.clone());
    root.sealed_secret_key =
        Some(state.sealer.seal_for(&SealContext::broker_root_key(&mount.uuid), &new.secret).await?);
    let stored = Item::from_value(keys::mount_config(&mount.uuid, "root"), &root)?;
    // Stored only over the key it replaces: of two rotations at once, one stores its key and
    // the other deletes its own.
    if let Err(e) = state.store.put(stored, Condition::equals("access_key", old.clone())).await {
        if let Err(undo) = cloud.delete_access_key(Some(&user.name), &new.id).await {
            tracing::warn!(key = %new.id, error = %undo, "an unstored new root key could not be deleted");
        }
        return Err(match e.is_condition_failed() {
            true => BrokerError::Conflict("config/root was changed by another request; try again".into()),
            false => e.into(),
        });
    }
    // The old key goes only once the new one is stored; until then both work. A failure is
    // reported, as Vault reports it: the old key still works, and its holder should know.
    if let Err(e) = cloud.delete_access_key(Some(&user.name), &old).await {
        tracing::warn!(key = %old, error = %e, "the previous root key could not be deleted");
        let code = e.fault().code().map(|code| format!(" ({code})")).unwrap_or_default();
        return Err(BrokerError::Upstream(format!(
            "the new root key {} is stored, but deleting the previous key {old} failed{code}: delete it in IAM",
            new.id
        )));
    }
    Ok(new.id)
}

/// How the engine reaches AWS: static keys when configured, else the default credential chain.
/// The secret key opens only as this mount's.
pub async fn cloud_settings(state: &AppState, mount: &Mount, config: &RootConfig) -> Result<CloudSettings> {
    let secret_key = match &config.sealed_secret_key {
        Some(sealed) => Some(state.sealer.unseal_for(&SealContext::broker_root_key(&mount.uuid), sealed).await?),
        None => None,
    };
    Ok(CloudSettings {
        access_key: (!config.access_key.is_empty()).then(|| config.access_key.clone()),
        secret_key,
        region: region(config),
        iam_endpoint: config.iam_endpoint.clone(),
        sts_endpoint: config.sts_endpoint.clone(),
        max_retries: config.max_retries,
        connect_timeout: state.config.broker_aws.connect_timeout,
        operation_timeout: state.config.broker_aws.operation_timeout,
        web_identity: web_identity(state, mount, config)?,
    })
}

/// Plugin workload identity (enterprise): the mount's `role_arn`, assumed with identity tokens
/// for its `identity_token_audience`, signed by this deployment's key and issued at its
/// public address (which AWS fetches the keys from).
fn web_identity(state: &AppState, mount: &Mount, config: &RootConfig) -> Result<Option<WebIdentity>> {
    let (Some(role_arn), Some(audience)) = (&config.role_arn, &config.identity_token_audience) else {
        return Ok(None);
    };
    let signer = state.identity.clone().ok_or_else(|| {
        BrokerError::invalid(
            "workload identity needs a signing key: this deployment sets no HANGAR_IDENTITY_KMS_KEY_ID",
        )
    })?;
    let base_url = state.config.public_url.clone().ok_or_else(|| {
        BrokerError::invalid("workload identity needs HANGAR_PUBLIC_URL: AWS reads the issuer's keys there")
    })?;
    // The bounds hold for a configuration written before them, or before they were narrowed.
    let limits = &state.config.broker_aws;
    check_identity_sts_endpoint(config.sts_endpoint.as_deref(), &limits.identity_sts_endpoints)?;
    let token = TokenRequest {
        base_url,
        audience: audience.clone(),
        subject: identity::mount_subject(&mount.uuid),
        ttl_secs: config
            .identity_token_ttl
            .unwrap_or(DEFAULT_IDENTITY_TOKEN_TTL)
            .min(limits.max_identity_token_ttl.as_secs()),
    };
    Ok(Some(WebIdentity { role_arn: role_arn.clone(), token, signer }))
}

/// Rebinds the mount's root key if it is still in format 1 (sealed before contexts existed).
pub async fn reseal_root_key(state: &AppState, mount: &Mount, tally: &mut Resealed) -> Result<()> {
    let Some(item) = state.store.get(&keys::mount_config(&mount.uuid, "root")).await? else { return Ok(()) };
    reseal_value(state, &item, "sealed_secret_key", &SealContext::broker_root_key(&mount.uuid), tally).await
}

/// Rebinds the format-1 value of `item`'s attribute `attribute` to `context`, the record that
/// holds it, with an update conditional on the attribute being unchanged: a concurrent write
/// (a new `config/root`, a rotation) wins, and the value is counted as left for the next run.
/// A value that opens nowhere is left as it is, logged by kind and record (never the value).
pub async fn reseal_value(
    state: &AppState,
    item: &Item,
    attribute: &str,
    context: &SealContext,
    tally: &mut Resealed,
) -> Result<()> {
    let Some(sealed) = item.attr::<String>(attribute)? else { return Ok(()) };
    let outcome = seal::rebind(state.sealer.as_ref(), context, &sealed).await?;
    let written = match &outcome {
        Rebound::Rewritten(bound) => {
            let ops = vec![UpdateOp::set(attribute, bound.as_str())];
            match state.store.update(&item.key, ops, Condition::equals(attribute, sealed)).await {
                Ok(_) => true,
                Err(e) if e.is_condition_failed() => false,
                Err(e) => return Err(e.into()),
            }
        }
        Rebound::Unreadable => {
            let (kind, record) = (context.kind().as_str(), context.record());
            tracing::warn!(kind, record, "a format-1 sealed value opens with no key here; left as it is");
            false
        }
        Rebound::Bound => false,
    };
    tally.count(&outcome, written);
    Ok(())
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct LeaseConfig {
    pub lease: u64,
    pub lease_max: u64,
}

pub async fn write_lease(store: &dyn ItemStore, mount: &Mount, body: &Map<String, Value>) -> Result<()> {
    let field = |name: &str| -> Result<u64> {
        let value = body
            .get(name)
            .filter(|v| !v.is_null())
            .ok_or_else(|| BrokerError::invalid(format!("{name} is required")))?;
        Ok(duration::parse(value).map_err(|e| BrokerError::invalid(format!("{name}: {e}")))?.as_secs())
    };
    let config = LeaseConfig { lease: field("lease")?, lease_max: field("lease_max")? };
    if config.lease > config.lease_max {
        return Err(BrokerError::invalid("lease must not exceed lease_max"));
    }
    let item = Item::from_value(keys::mount_config(&mount.uuid, "lease"), &config)?;
    store.put(item, Condition::Always).await?;
    Ok(())
}

pub async fn lease(store: &dyn ItemStore, mount: &Mount) -> Result<LeaseConfig> {
    match store.get(&keys::mount_config(&mount.uuid, "lease")).await? {
        Some(item) => Ok(item.parse()?),
        None => Ok(LeaseConfig { lease: DEFAULT_LEASE.as_secs(), lease_max: DEFAULT_LEASE.as_secs() }),
    }
}

/// Whether the mount's `config/lease` was ever written (see [`root_exists`]).
pub async fn lease_exists(store: &dyn ItemStore, mount: &Mount) -> Result<bool> {
    Ok(store.get(&keys::mount_config(&mount.uuid, "lease")).await?.is_some())
}

pub fn lease_data(config: &LeaseConfig) -> Value {
    json!({
        "lease": duration::format(Duration::from_secs(config.lease)),
        "lease_max": duration::format(Duration::from_secs(config.lease_max)),
    })
}
