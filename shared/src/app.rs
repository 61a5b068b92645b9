//! Application state, built once per process (a Lambda cold start or dev-server's start), and
//! the routers of each function. dev-server mounts the same routers, so local and deployed
//! behaviour cannot drift.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{FromRequestParts, Request};
use axum::http::{header, request::Parts};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tracing_subscriber::filter::{LevelFilter, Targets};

use crate::api::ApiError;
use crate::blobs::{Blobs, LocalBlobs};
use crate::config::{Config, StoreKind};
use crate::store::{DynamoStore, Store};

#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub store: Store,
    pub blobs: Blobs,
    /// Set when blobs are local files: dev-server then serves their `/object/` links.
    pub local_blobs: Option<LocalBlobs>,
    /// For calls out (the public registry proxy); built once, cloned cheaply.
    pub http: reqwest::Client,
    /// Seals the broker's stored secrets: KMS in AWS, a key file locally.
    pub sealer: crate::broker::seal::SharedSealer,
    /// Rung when background work is recorded; dev-server's job runner wakes on it (in AWS the
    /// schedule picks the work up).
    pub work: Arc<tokio::sync::Notify>,
    /// The broker's AWS clients, one per distinct root configuration, built on first use.
    pub clouds: Arc<tokio::sync::Mutex<Vec<(crate::aws::CloudSettings, crate::aws::SharedCloud)>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("blobs: {0}")]
    Blobs(#[from] crate::blobs::BlobError),
    #[error("HTTP client: {0}")]
    Http(String),
    #[error("broker: {0}")]
    Seal(String),
    #[error("HANGAR_STORE=sqlite: this build has no embedded store (a Lambda function); set HANGAR_STORE=dynamodb")]
    NoEmbeddedStore,
    #[error("data directory {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
}

impl AppState {
    /// Builds the store and blob adapters the configuration names. With `init`, the DynamoDB
    /// table and S3 bucket are created when missing.
    pub async fn build(config: Config, init: bool) -> Result<Self, BootError> {
        Self::build_with::<crate::blobs::WithS3>(config, init).await
    }

    /// The same, with `B` as the blob adapter when deployed: a type rather than a value, so
    /// that a function whose family keeps no archives has no S3 client compiled in.
    pub async fn build_with<B: crate::blobs::DeployedBlobs>(config: Config, init: bool) -> Result<Self, BootError> {
        let (store, blobs, local_blobs): (Store, Blobs, Option<LocalBlobs>) = match config.store {
            StoreKind::Sqlite => embedded(&config)?,
            StoreKind::Dynamodb => {
                let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
                let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), config.table.clone());
                if init {
                    store.create_table_if_missing().await?;
                }
                let blobs = B::connect(&sdk, &config.bucket, init).await?;
                (Arc::new(store), blobs, None)
            }
        };
        let http = reqwest::Client::builder()
            .timeout(config.public_registry_timeout)
            .user_agent(concat!("hangar/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| BootError::Http(e.to_string()))?;
        let sealer: crate::broker::seal::SharedSealer = match &config.kms_key_id {
            Some(key_id) => {
                let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
                Arc::new(crate::broker::seal::KmsSealer::new(aws_sdk_kms::Client::new(&sdk), key_id.clone()))
            }
            None => {
                let dir = &config.data_dir;
                std::fs::create_dir_all(dir)
                    .map_err(|source| BootError::DataDir { path: dir.display().to_string(), source })?;
                let local = crate::broker::seal::LocalSealer::open(&dir.join("broker-seal.key"))
                    .map_err(|e| BootError::Seal(e.to_string()))?;
                Arc::new(local)
            }
        };
        let work = Arc::new(tokio::sync::Notify::new());
        let clouds = Arc::new(tokio::sync::Mutex::new(Vec::new()));
        let state = Self { config: Arc::new(config), store, blobs, local_blobs, http, sealer, work, clouds };
        if let Some(secret) = &state.config.admin_token {
            crate::auth::install_admin_token(state.store.as_ref(), secret).await?;
        }
        if let Some(secret) = &state.config.root_service_token {
            crate::broker::tokens::install_root(state.store.as_ref(), secret)
                .await
                .map_err(|e| BootError::Seal(e.to_string()))?;
        }
        Ok(state)
    }
}

/// The embedded store and local blobs in the data directory: dev-server's.
#[cfg(feature = "sqlite")]
fn embedded(config: &Config) -> Result<(Store, Blobs, Option<LocalBlobs>), BootError> {
    let dir = &config.data_dir;
    std::fs::create_dir_all(dir).map_err(|source| BootError::DataDir { path: dir.display().to_string(), source })?;
    let store = crate::store::SqliteStore::open(dir.join("hangar.db"))?;
    let key = crate::blobs::signing_key(dir)?;
    let local = LocalBlobs::new(
        dir.join("objects"),
        key,
        config.public_url.clone().unwrap_or_default(),
        config.max_upload_bytes,
    )?;
    Ok((Arc::new(store), Arc::new(local.clone()), Some(local)))
}

#[cfg(not(feature = "sqlite"))]
fn embedded(_: &Config) -> Result<(Store, Blobs, Option<LocalBlobs>), BootError> {
    Err(BootError::NoEmbeddedStore)
}

/// The base URL links are built on: `HANGAR_PUBLIC_URL` when set, else the request's own
/// scheme (`X-Forwarded-Proto`, as API Gateway sends it) and host.
#[derive(Debug, Clone)]
pub struct BaseUrl(pub String);

impl FromRequestParts<AppState> for BaseUrl {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(url) = &state.config.public_url {
            return Ok(BaseUrl(url.clone()));
        }
        let header = |name| parts.headers.get(name).and_then(|v: &header::HeaderValue| v.to_str().ok());
        let host = header(header::HOST).or_else(|| parts.uri.authority().map(|a| a.as_str())).unwrap_or("localhost");
        let scheme = header(header::HeaderName::from_static("x-forwarded-proto")).unwrap_or("http");
        Ok(BaseUrl(format!("{scheme}://{host}")))
    }
}

/// One log line per request: method, path (never the query, which may hold a signature),
/// status and latency. Headers, and so tokens, are never logged.
async fn log_request(request: Request, next: Next) -> Response {
    let (method, path, started) = (request.method().clone(), request.uri().path().to_owned(), Instant::now());
    let response = next.run(request).await;
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    response
}

/// Gives axum's bare 405 (raised by a route that lacks the method) a JSON:API body, keeping
/// its `Allow` header.
async fn render_method_not_allowed(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() != axum::http::StatusCode::METHOD_NOT_ALLOWED
        || response.headers().contains_key(header::CONTENT_TYPE)
    {
        return response;
    }
    let mut rendered = ApiError::method_not_allowed().into_response();
    if let Some(allow) = response.headers().get(header::ALLOW) {
        rendered.headers_mut().insert(header::ALLOW, allow.clone());
    }
    rendered
}

/// Wraps a family's router with what every function adds: the request log, and JSON:API
/// answers for unknown paths (404) and methods (405).
pub fn finish(router: Router<AppState>, state: AppState) -> Router {
    router
        .fallback(|| async { ApiError::not_found() })
        .with_state(state)
        .layer(middleware::from_fn(render_method_not_allowed))
        .layer(middleware::from_fn(log_request))
}

/// Installs the JSON (CloudWatch-friendly) or human log format, filtered by `RUST_LOG`.
pub fn init_tracing(json: bool) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // `RUST_LOG` as a level or `target=level` directives: Targets needs no regular expressions,
    // which keeps a regex engine out of every function's package.
    let filter = std::env::var("RUST_LOG").ok().and_then(|directives| directives.parse().ok());
    let filter = filter.unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    let registry = tracing_subscriber::registry().with(filter);
    // A second initialisation (tests, a reused process) keeps the first subscriber.
    let _ = if json {
        registry.with(tracing_subscriber::fmt::layer().json().without_time().with_target(false)).try_init()
    } else {
        registry.with(tracing_subscriber::fmt::layer().with_target(false)).try_init()
    };
}

/// The routers each function serves. Families not built yet answer every path with a 404.
pub mod routers {
    use axum::Router;

    use super::{finish, AppState};

    pub fn accounts(state: AppState) -> Router {
        finish(crate::accounts::router(), state)
    }

    pub fn registry_api(state: AppState) -> Router {
        finish(crate::registry::router(), state)
    }

    pub fn registry_protocol(state: AppState) -> Router {
        finish(crate::registry::protocol::router(), state)
    }

    pub fn agent_pools(state: AppState) -> Router {
        finish(crate::agents::router(), state)
    }

    pub fn agent_gateway(state: AppState) -> Router {
        finish(crate::agents::gateway::router(), state)
    }

    pub fn credential_broker(state: AppState) -> Router {
        crate::broker::with_list_verb(finish(crate::broker::router(), state))
    }

    /// Every family in one router, plus the `/object/` links of local blobs: dev-server's.
    pub fn all(state: AppState) -> Router {
        let families = Router::new()
            .merge(crate::accounts::router())
            .merge(crate::registry::router())
            .merge(crate::registry::protocol::router())
            .merge(crate::agents::router())
            .merge(crate::agents::gateway::router())
            .merge(crate::broker::router());
        let mut router = finish(families, state.clone());
        if let Some(local) = state.local_blobs.clone() {
            let ingest = std::sync::Arc::new(crate::registry::ingest::LocalIngest(state.clone()));
            router = router.merge(crate::blobs::object_routes_with_hooks(local, ingest));
        }
        crate::broker::with_list_verb(router)
    }
}
