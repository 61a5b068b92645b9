//! Application state, built once per process (a Lambda cold start or dev-server's start): the
//! configuration and the adapters every family uses. It sits below the families, which take it
//! (or a narrower part of it) as their context, and imports only ports and adapters.

use std::sync::Arc;

use crate::aws::{AwsBase, CloudSettings, SharedCloud};
use crate::blobs::{Blobs, DeployedBlobs, LocalBlobs, WithS3};
use crate::config::{Config, StoreKind};
use crate::identity::{KeyRing, KmsSigner, LocalSigner, SharedTokenSigner};
use crate::lazy::LazyClient;
use crate::links::LinkSigner;
use crate::seal::{KmsSealer, LocalSealer, SharedSealer};
use crate::store::{DynamoStore, Store};

/// The state every handler is given, cheap to clone: one `Arc`. axum clones the state for each
/// request's handler (and its extractors); a clone of the parts themselves, a dozen reference
/// counts, was a measurable share of a warm GET (BENCHMARKS.md, "Warm requests"). Reads go
/// through to the parts; an assignment to a part (`state.store = …`, tests and benchmarks)
/// gives this state parts of its own first, leaving its clones as they were.
#[derive(Clone)]
pub struct AppState(Arc<StateParts>);

impl std::ops::Deref for AppState {
    type Target = StateParts;

    fn deref(&self) -> &StateParts {
        &self.0
    }
}

impl std::ops::DerefMut for AppState {
    fn deref_mut(&mut self) -> &mut StateParts {
        Arc::make_mut(&mut self.0)
    }
}

#[derive(Clone)]
pub struct StateParts {
    pub config: Arc<Config>,
    pub store: Store,
    pub blobs: Blobs,
    /// Set when blobs are local files: dev-server then serves their `/upload/` and `/object/`
    /// links.
    pub local_blobs: Option<LocalBlobs>,
    /// For calls out (the public registry proxy): built by the first call, cloned cheaply, the
    /// reason if it could not be built.
    pub http: LazyClient<Result<reqwest::Client, String>>,
    /// For VCS calls: reaches the public Internet and `HANGAR_VCS_ALLOWED_NETWORKS` only.
    pub vcs: crate::vcs::Client,
    /// Seals stored secrets: KMS in AWS, a key file locally.
    pub sealer: SharedSealer,
    /// Rung when background work is recorded; dev-server's job runner wakes on it (in AWS the
    /// schedule picks the work up).
    pub work: Arc<tokio::sync::Notify>,
    /// The broker's AWS clients, one per distinct root configuration, built on first use.
    pub clouds: Arc<tokio::sync::Mutex<Vec<(CloudSettings, SharedCloud)>>>,
    /// Signs the links served without a bearer token (state downloads); `None` where no key is
    /// configured (a deployed function not given one).
    pub links: Option<LinkSigner>,
    /// Signs the broker's workload identity tokens: a KMS key in AWS, a key file locally;
    /// `None` where no key is configured.
    pub identity: Option<SharedTokenSigner>,
    /// The SDK configuration and HTTP client every AWS client of the process shares.
    pub aws: AwsBase,
    /// Which id each organization name was last seen to have, for reading ahead.
    pub org_hints: Arc<OrgHints>,
    /// What happens around a workspace's lock (set by the app layer).
    pub lock_hooks: Arc<dyn LockHooks>,
}

/// What the families above accounts do around a workspace's lock, set by the app layer (nothing
/// by default).
#[async_trait::async_trait]
pub trait LockHooks: Send + Sync {
    /// Before the lock is taken: the state-versions family settles a state that landed under the
    /// lock before, so that it is not taken for one landing under the new lock. Called only for
    /// a workspace that waits for a state.
    async fn before_lock(&self, state: &AppState, workspace_id: &str) -> Result<(), String>;
    /// After someone unlocked it: the runs family starts the run waiting for it.
    async fn after_unlock(&self, state: &AppState, workspace_id: &str) -> Result<(), String>;
}

struct NoLockHooks;

#[async_trait::async_trait]
impl LockHooks for NoLockHooks {
    async fn before_lock(&self, _: &AppState, _: &str) -> Result<(), String> {
        Ok(())
    }

    async fn after_unlock(&self, _: &AppState, _: &str) -> Result<(), String> {
        Ok(())
    }
}

/// Which organization id each name had when this process last read its name marker: a guess that
/// lets a request under an organization read the organization's items in its token's batch. The
/// marker read in that same batch says whether the guess was right, so a wrong or stale one
/// (a renamed organization) costs the read it would have saved, never a wrong answer.
#[derive(Debug, Default)]
pub struct OrgHints(std::sync::RwLock<std::collections::HashMap<String, String>>);

impl OrgHints {
    /// At most this many names are held; past it the guesses start over.
    const MAX: usize = 4096;

    pub fn guess(&self, name: &str) -> Option<String> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(name).cloned()
    }

    pub fn learn(&self, name: &str, org_id: &str) {
        if self.guess(name).as_deref() == Some(org_id) {
            return;
        }
        let mut hints = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if hints.len() >= Self::MAX {
            hints.clear();
        }
        hints.insert(name.to_owned(), org_id.to_owned());
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("blobs: {0}")]
    Blobs(#[from] crate::blobs::BlobError),
    #[error("seal: {0}")]
    Seal(#[from] crate::seal::SealError),
    #[error("identity: {0}")]
    Identity(#[from] crate::identity::IdentityError),
    #[error("bootstrap tokens: {0}")]
    Bootstrap(String),
    #[error("HANGAR_STORE=sqlite: this build has no embedded store (a Lambda function); set HANGAR_STORE=dynamodb")]
    NoEmbeddedStore,
    #[error("data directory {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
}

impl AppState {
    /// Builds the store and blob adapters the configuration names. With `init`, the DynamoDB
    /// table and S3 bucket are created when missing.
    pub async fn build(config: Config, init: bool) -> Result<Self, BootError> {
        let aws = AwsBase::new(config.aws_trust);
        Self::build_with::<WithS3>(config, init, aws).await
    }

    /// The same, with `B` as the blob adapter when deployed (a type rather than a value, so
    /// that a function whose family keeps no archives has no S3 client compiled in), and the AWS
    /// configuration the process has already loaded, if any.
    pub async fn build_with<B: DeployedBlobs>(config: Config, init: bool, aws: AwsBase) -> Result<Self, BootError> {
        let (store, blobs, local_blobs): (Store, Blobs, Option<LocalBlobs>) = match config.store {
            StoreKind::Sqlite => embedded(&config)?,
            StoreKind::Dynamodb => {
                let sdk = aws.config().await;
                let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), config.table.clone());
                if init {
                    store.create_table_if_missing().await?;
                }
                let blobs = B::connect(sdk, &config.bucket, config.kms_key_id.as_deref(), init).await?;
                (Arc::new(store), blobs, None)
            }
        };
        let timeout = config.public_registry_timeout;
        let http = LazyClient::new(move || {
            let tls = crate::https::client_tls().map_err(|e| e.to_string())?;
            reqwest::Client::builder()
                .use_preconfigured_tls(tls)
                .timeout(timeout)
                .user_agent(concat!("hangar/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| e.to_string())
        });
        let vcs =
            crate::vcs::Client::new(config.vcs_allowed_networks.clone(), config.archive_limits.max_compressed_bytes);
        let sealer: SharedSealer = match &config.kms_key_id {
            Some(key_id) => Arc::new(KmsSealer::new(
                LazyClient::of_sdk(aws.config().await, aws_sdk_kms::Client::new),
                key_id.clone(),
            )),
            None => Arc::new(LocalSealer::open(&data_dir(&config)?.join(SEAL_KEY_FILE))?),
        };
        let identity: Option<SharedTokenSigner> = match (&config.identity_kms_key_id, config.store) {
            (Some(key_id), _) => {
                let kms = LazyClient::of_sdk(aws.config().await, aws_sdk_kms::Client::new);
                let signer = |id: &String| -> SharedTokenSigner { Arc::new(KmsSigner::new(kms.clone(), id.clone())) };
                let previous = config.identity_previous_kms_key_ids.iter().map(signer).collect();
                Some(Arc::new(KeyRing::new(signer(key_id), previous)))
            }
            (None, StoreKind::Sqlite) => {
                let dir = data_dir(&config)?;
                let current: SharedTokenSigner = Arc::new(LocalSigner::open(&dir.join(IDENTITY_KEY_FILE))?);
                let previous_file = dir.join(PREVIOUS_IDENTITY_KEY_FILE);
                let previous: Vec<SharedTokenSigner> = match previous_file.exists() {
                    true => vec![Arc::new(LocalSigner::open(&previous_file)?)],
                    false => Vec::new(),
                };
                Some(Arc::new(KeyRing::new(current, previous)))
            }
            (None, StoreKind::Dynamodb) => None,
        };
        let links = match (&config.link_key, config.store) {
            (Some(key), _) => Some(LinkSigner::new(key.as_bytes().to_vec())),
            (None, StoreKind::Sqlite) => Some(LinkSigner::new(crate::blobs::signing_key(data_dir(&config)?)?)),
            (None, StoreKind::Dynamodb) => None,
        };
        let work = Arc::new(tokio::sync::Notify::new());
        let clouds = Arc::new(tokio::sync::Mutex::new(Vec::new()));
        let org_hints = Arc::default();
        Ok(Self(Arc::new(StateParts {
            config: Arc::new(config),
            store,
            blobs,
            local_blobs,
            http,
            vcs,
            sealer,
            work,
            clouds,
            links,
            identity,
            aws,
            org_hints,
            lock_hooks: Arc::new(NoLockHooks),
        })))
    }
}

/// The data directory's sealing key (named before it sealed anything but the broker's secrets).
const SEAL_KEY_FILE: &str = "broker-seal.key";
/// The data directory's identity key, and the one it replaced (published until removed).
const IDENTITY_KEY_FILE: &str = "identity.key";
const PREVIOUS_IDENTITY_KEY_FILE: &str = "identity.previous.key";

/// The data directory, created when missing, its owner's alone (`owner_only`).
fn data_dir(config: &Config) -> Result<&std::path::Path, BootError> {
    let dir = config.data_dir.as_path();
    let failed = |source| BootError::DataDir { path: dir.display().to_string(), source };
    crate::owner_only::create_dir_all(dir).map_err(failed)?;
    Ok(dir)
}

/// What Hangar makes in its data directory: the embedded store and its journals, the archives
/// and uploads, dev-server's TLS files and the key files.
#[cfg(feature = "sqlite")]
const OWNED_ENTRIES: &[&str] = &[
    "hangar.db",
    "hangar.db-wal",
    "hangar.db-shm",
    "hangar.db-journal",
    "objects",
    "uploads",
    "sealed",
    "tls",
    "broker-seal.key",
    "identity.key",
    "identity.previous.key",
    "blob-signing.key",
];

/// Tightens what the data directory holds to its owner alone; `announce`: saying so, when an
/// earlier version (or another hand) had left it readable by others.
#[cfg(feature = "sqlite")]
fn tighten(dir: &std::path::Path, announce: bool) -> Result<(), BootError> {
    let failed = |source| BootError::DataDir { path: dir.display().to_string(), source };
    let tightened = crate::owner_only::tighten(dir, OWNED_ENTRIES).map_err(failed)?;
    if tightened > 0 && announce {
        tracing::warn!(
            directory = %dir.display(),
            entries = tightened,
            "the data directory was readable by others: it and what it holds are its owner's alone now"
        );
    }
    Ok(())
}

/// The embedded store and local blobs in the data directory: dev-server's.
#[cfg(feature = "sqlite")]
fn embedded(config: &Config) -> Result<(Store, Blobs, Option<LocalBlobs>), BootError> {
    let dir = data_dir(config)?;
    // What an earlier start left, before this one adds to it.
    tighten(dir, true)?;
    let path = dir.join("hangar.db");
    let store = match config.store_sharing {
        crate::config::StoreSharing::Shared => crate::store::SqliteStore::open(path)?,
        crate::config::StoreSharing::Exclusive => crate::store::SqliteStore::open_exclusive(path)?,
    };
    let links = LinkSigner::new(crate::blobs::signing_key(dir)?);
    let sealer = LocalSealer::open(&dir.join(SEAL_KEY_FILE))?;
    let base_url = config.public_url.clone().unwrap_or_default();
    let local = LocalBlobs::new(dir, links, sealer, base_url, config.max_upload_bytes)?;
    // The files the store has just made (SQLite makes them 0644), before anything is served.
    tighten(dir, false)?;
    Ok((Arc::new(store), Arc::new(local.clone()), Some(local)))
}

#[cfg(not(feature = "sqlite"))]
fn embedded(_: &Config) -> Result<(Store, Blobs, Option<LocalBlobs>), BootError> {
    Err(BootError::NoEmbeddedStore)
}
