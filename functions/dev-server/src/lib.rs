//! dev-server: every family's router in one local process, on the embedded store and local
//! blobs by default, so Hangar runs with no network and no AWS account. Tests start it
//! in-process with [`start`] on port 0 and a temporary data directory.

mod uploads;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use std::time::Duration;

use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use hangar::app::routers;
use hangar::bootstrap::{install_tokens, Unconfigured};
use hangar::config::{Config, StoreKind, StoreSharing};
use hangar::state::{AppState, BootError};
use hyper_util::rt::TokioTimer;
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;
use tower_http::timeout::RequestBodyTimeoutLayer;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Store {
    /// SQLite in the data directory, blobs as files beside it.
    Sqlite,
    /// DynamoDB and S3 (`HANGAR_TABLE`, `HANGAR_BUCKET`, `AWS_ENDPOINT_URL`).
    Dynamodb,
}

#[derive(Debug, Clone, clap::Parser)]
#[command(name = "dev-server", about = "Run every Hangar family locally.")]
pub struct Options {
    /// Address to listen on.
    #[arg(long, env = "HANGAR_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory for the embedded store, local blobs, keys and the TLS certificate.
    #[arg(long, env = "HANGAR_DATA_DIR", default_value = ".hangar")]
    pub data_dir: PathBuf,
    /// Where modules, versions and everything else are stored.
    #[arg(long, env = "HANGAR_STORE", value_enum, default_value = "sqlite")]
    pub store: Store,
    /// Create the DynamoDB table and S3 bucket when missing (with `--store dynamodb`).
    #[arg(long, env = "HANGAR_INIT")]
    pub init: bool,
    /// Serve https with a self-signed certificate generated into the data directory.
    #[arg(long, env = "HANGAR_TLS")]
    pub tls: bool,
    /// Seconds between runs of the key-rotation job (EventBridge runs it every minute in AWS).
    #[arg(long, env = "HANGAR_ROTATION_INTERVAL", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub rotation_interval: u64,
    /// Seconds a client has to send a request's line and headers.
    #[arg(long, env = "HANGAR_HEADER_TIMEOUT", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub header_timeout: u64,
    /// Seconds a client has to send a request's whole body (an archive upload included).
    #[arg(long, env = "HANGAR_BODY_TIMEOUT", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub body_timeout: u64,
    /// With `--store dynamodb`: the SQS queue that receives the bucket's upload events, which
    /// dev-server polls to ingest uploads (`--init` creates it and points the bucket at it).
    /// Empty: dev-server does not poll, and something else (the stack's registry-ingest) must.
    #[arg(long, env = "HANGAR_UPLOAD_QUEUE", default_value = "hangar-uploads")]
    pub upload_queue: String,
    /// Let other processes open the embedded store while dev-server runs (functions under
    /// `cargo lambda watch` on the same data directory). By default dev-server holds it alone,
    /// which makes every read cheaper, and a second server on the same directory is refused.
    #[arg(long, env = "HANGAR_SHARED_STORE")]
    pub shared_store: bool,
    /// Built-in runners: what runs the workspaces in `remote` execution mode (the same code as
    /// `hangar-agent`, registered to the site's pool). 0: none.
    #[arg(long, env = "HANGAR_RUNNERS", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(0..=64))]
    pub runners: u64,
    /// The Terraform binary the built-in runners run (a path, or a name on the `PATH`): Hangar
    /// never downloads one.
    #[arg(long, env = "HANGAR_TERRAFORM", default_value = "terraform")]
    pub terraform: PathBuf,
}

impl Options {
    /// `config` with what these options decide: the data directory, the store and how its file
    /// is held.
    pub fn configure(&self, config: Config) -> Config {
        let store = match self.store {
            Store::Sqlite => StoreKind::Sqlite,
            Store::Dynamodb => StoreKind::Dynamodb,
        };
        let store_sharing = if self.shared_store { StoreSharing::Shared } else { StoreSharing::Exclusive };
        Config { data_dir: self.data_dir.clone(), store, store_sharing, ..config }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Boot(#[from] BootError),
    #[error("listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("TLS certificate: {0}")]
    Tls(String),
    #[error(transparent)]
    Queue(#[from] uploads::QueueError),
}

/// A started server.
pub struct Running {
    /// The base URL it answers on, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    /// The site-admin token generated at this start, if one was (it is never shown again).
    pub generated_admin_token: Option<String>,
    /// The broker's root service token generated at this start, if one was.
    pub generated_root_token: Option<String>,
    /// The certificate clients must trust, with `--tls`.
    pub certificate: Option<PathBuf>,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
    rotation: JoinHandle<()>,
    /// The upload-event poller, on DynamoDB and S3.
    uploads: Option<JoinHandle<()>>,
    /// The built-in runners, told to stop (and report `exited`) with the server.
    runners: Vec<JoinHandle<()>>,
    stop_runners: tokio::sync::watch::Sender<bool>,
}

impl Running {
    /// Stops accepting connections, lets requests in flight finish, and waits.
    pub async fn stop(self) -> std::io::Result<()> {
        let _ = self.stop_runners.send(true);
        for runner in self.runners {
            // A runner in a job stops at its end; one that takes longer is left to its lease.
            let _ = tokio::time::timeout(Duration::from_secs(5), runner).await;
        }
        self.rotation.abort();
        if let Some(uploads) = &self.uploads {
            uploads.abort();
        }
        let _ = self.shutdown.send(());
        self.task.await.unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

fn data_dir_link_key(dir: &std::path::Path) -> Result<String, Error> {
    let failed = |source| BootError::DataDir { path: dir.display().to_string(), source };
    hangar::owner_only::create_dir_all(dir).map_err(failed)?;
    let key = hangar::blobs::signing_key(dir).map_err(BootError::from)?;
    // The key file holds random letters and digits.
    Ok(String::from_utf8_lossy(&key).into_owned())
}

/// Builds the state from `config` and `options`, binds, and serves in the background.
pub async fn start(options: Options, config: Config) -> Result<Running, Error> {
    let listener =
        std::net::TcpListener::bind(options.listen).map_err(|source| Error::Listen { addr: options.listen, source })?;
    listener.set_nonblocking(true).map_err(|source| Error::Listen { addr: options.listen, source })?;
    let addr = listener.local_addr().map_err(|source| Error::Listen { addr: options.listen, source })?;
    let url = format!("{}://{addr}", if options.tls { "https" } else { "http" });

    let mut config = options.configure(config);
    config.public_url.get_or_insert_with(|| url.clone());
    if config.link_key.is_none() {
        // dev-server signs links with its data directory's key, whichever store it runs on.
        config.link_key = Some(data_dir_link_key(&config.data_dir)?);
    }
    let state = AppState::build(config, options.init).await?;
    let generated = install_tokens(&state, Unconfigured::Generate).await?;
    let (generated_admin_token, generated_root_token) = (generated.admin_token, generated.root_service_token);
    // On the embedded store the `/upload/` route starts ingest itself; on S3 the bucket's
    // events come through the queue, as they reach the registry-ingest function in AWS.
    let queue = if options.store == Store::Dynamodb && !options.upload_queue.is_empty() {
        let sdk = state.aws.config().await;
        Some(uploads::UploadQueue::connect(sdk, &options.upload_queue, &state.config.bucket, options.init).await?)
    } else {
        None
    };
    if queue.is_none() {
        // Uploads a stop left stored but not ingested are ingested now, off the start.
        let state = state.clone();
        tokio::spawn(async move {
            if let Err(e) = hangar::jobs::resume_uploads(&state).await {
                tracing::error!(error = %e, "uploads left by a stop were not ingested");
            }
        });
    }
    let rotation = tokio::spawn(run_jobs(state.clone(), options.rotation_interval));
    let uploads = queue.map(|queue| tokio::spawn(queue.run(state.clone())));
    // `/` opens the web console, as Vault's `-dev` server opens on its UI.
    let runner_state = state.clone();
    let router = routers::all(state).route("/", axum::routing::get(|| async { axum::response::Redirect::to("/app") }));

    // A client gets `header_timeout` to send its request line and headers and `body_timeout` to
    // send its body; a half-sent request is not held open (API Gateway bounds both in AWS).
    let router = router.layer(RequestBodyTimeoutLayer::new(Duration::from_secs(options.body_timeout.max(1))));
    let (shutdown, signal) = oneshot::channel::<()>();
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        let _ = signal.await;
        stopper.graceful_shutdown(Some(Duration::from_secs(10)));
    });
    let mut server = axum_server::from_tcp(listener).map_err(|source| Error::Listen { addr, source })?.handle(handle);
    server
        .http_builder()
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(options.header_timeout.max(1)));
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    let (task, certificate) = if options.tls {
        let (cert, key) = certificate(&options.data_dir, addr)?;
        let tls = RustlsConfig::from_pem_file(&cert, &key).await.map_err(|e| Error::Tls(e.to_string()))?;
        let server = server.acceptor(RustlsAcceptor::new(tls));
        (tokio::spawn(async move { server.serve(service).await }), Some(cert))
    } else {
        (tokio::spawn(async move { server.serve(service).await }), None)
    };
    let (stop_runners, runners) = start_runners(&runner_state, &options, &url, certificate.as_deref()).await?;
    Ok(Running {
        url,
        generated_admin_token,
        generated_root_token,
        certificate,
        shutdown,
        task,
        rotation,
        uploads,
        runners,
        stop_runners,
    })
}

/// Starts the built-in runners: a token of their own, new at each start (installed hashed, the
/// previous start's no longer works), and the agent's loop for each, against this server.
async fn start_runners(
    state: &AppState,
    options: &Options,
    url: &str,
    certificate: Option<&Path>,
) -> Result<(tokio::sync::watch::Sender<bool>, Vec<JoinHandle<()>>), Error> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    if options.runners == 0 {
        return Ok((stop, Vec::new()));
    }
    let secret = hangar::auth::new_secret();
    hangar::bootstrap::install_runner_token(state, &secret).await?;
    let runners = (1..=options.runners)
        .map(|n| {
            let settings = hangar_agent::Settings {
                address: url.to_owned(),
                token: secret.clone(),
                name: format!("dev-server-runner-{n}"),
                terraform: options.terraform.clone(),
                single: false,
                work_dir: None,
                poll: Duration::from_secs(1),
                ca_file: certificate.map(Path::to_path_buf),
            };
            let stopped = stopped.clone();
            tokio::spawn(async move {
                if let Err(e) = hangar_agent::run(settings, stopped).await {
                    tracing::error!(error = %e, "a built-in runner stopped");
                }
            })
        })
        .collect();
    Ok((stop, runners))
}

/// The scheduled jobs on a timer (and at once when work is recorded): what EventBridge does for
/// the key-rotation and registry-sync functions. Each job runs in a loop of its own, as the two
/// functions do, so a broker run waiting on AWS never holds up the registry's work or the
/// agents' sweep; work recorded while a job runs wakes it again once the run is over.
async fn run_jobs(state: AppState, every_seconds: u64) {
    let (broker, registry) = (Notify::new(), Notify::new());
    let wake_both = async {
        loop {
            state.work.notified().await;
            broker.notify_one();
            registry.notify_one();
        }
    };
    let broker_job = run_job(&state, every_seconds, &broker, |state| async move {
        if let Err(e) = hangar::jobs::rotation(&state).await {
            tracing::warn!(error = %e, "the broker's scheduled run failed; retried next run");
        }
    });
    let registry_job = run_job(&state, every_seconds, &registry, |state| async move {
        if let Err(e) = hangar::jobs::vcs(&state).await {
            tracing::warn!(error = %e, "the registry's scheduled run failed; retried next run");
        }
    });
    tokio::join!(wake_both, broker_job, registry_job);
}

/// Runs `job` every `every_seconds`, and again when `wake` is notified (a notification during a
/// run is kept for after it).
async fn run_job<F: std::future::Future<Output = ()>>(
    state: &AppState,
    every_seconds: u64,
    wake: &Notify,
    job: impl Fn(AppState) -> F,
) {
    let mut ticker = tokio::time::interval(std::time::Duration::from_secs(every_seconds.max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = wake.notified() => {}
        }
        job(state.clone()).await;
    }
}

/// The self-signed certificate in `<data-dir>/tls/`, generated on first use for localhost,
/// 127.0.0.1 and the listen address. Its private key is readable by its owner only.
fn certificate(data_dir: &Path, addr: SocketAddr) -> Result<(PathBuf, PathBuf), Error> {
    let dir = data_dir.join("tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if cert.exists() && key.exists() {
        hangar::seal::restrict_to_owner(&key);
        return Ok((cert, key));
    }
    let tls = |e: &dyn std::fmt::Display| Error::Tls(e.to_string());
    std::fs::create_dir_all(&dir).map_err(|e| tls(&e))?;
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    if !addr.ip().is_unspecified() && !names.contains(&addr.ip().to_string()) {
        names.push(addr.ip().to_string());
    }
    let generated = rcgen::generate_simple_self_signed(names).map_err(|e| tls(&e))?;
    std::fs::write(&cert, generated.cert.pem()).map_err(|e| tls(&e))?;
    write_owner_only(&key, generated.signing_key.serialize_pem().as_bytes()).map_err(|e| tls(&e))?;
    Ok((cert, key))
}

/// Writes a file only its owner may read (mode 0600), from its creation on.
fn write_owner_only(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    // A file that was there already keeps its mode through `open`.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(contents)?;
    file.sync_all()
}

/// Installs the TLS crypto provider once per process (several may be compiled in).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}
