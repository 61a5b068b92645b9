//! What every black-box test starts with: a dev-server on port 0 with a fresh data directory,
//! its generated site-admin token, and helpers that speak JSON:API to it.

pub mod aws_proxy;
pub mod builders;
pub mod counting;
pub mod gpg;
pub mod moto;

use dev_server::{start, Options, Running, Store};
use hangar::config::{Config, StoreKind, StoreSharing};
use hangar::ids::random_token;
use hangar::state::AppState;
use hangar::store::SqliteStore;
use hangar::vcs::AllowedNetworks;
pub use moto::Moto;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

pub const JSONAPI: &str = "application/vnd.api+json";

pub struct TestApp {
    pub url: String,
    /// The configuration it was started with (table and bucket names, limits).
    pub config: Config,
    pub admin_token: String,
    pub client: reqwest::Client,
    pub data_dir: tempfile::TempDir,
    running: Option<Running>,
}

/// A response: status, headers and the body parsed as JSON (Null when empty).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    /// Reads a response: its status, headers and body.
    pub async fn read(response: reqwest::Response) -> Reply {
        let (status, headers) = (response.status(), response.headers().clone());
        let text = response.text().await.expect("a body");
        let body =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        Reply { status, headers, body }
    }

    /// The `source.pointer` of the first error.
    pub fn pointer(&self) -> &str {
        self.body["errors"][0]["source"]["pointer"].as_str().unwrap_or("")
    }
}

/// The default configuration, plus `HANGAR_VCS_ALLOWED_NETWORKS=127.0.0.0/8`: the tests' GitHub
/// and GitLab stand-ins listen on 127.0.0.1, which VCS calls may not reach otherwise. Set on the
/// `Config`, not the environment, since every test shares one process.
pub fn vcs_stand_in_config() -> Config {
    let loopback = AllowedNetworks::parse("127.0.0.0/8").expect("a CIDR block");
    Config { vcs_allowed_networks: loopback, ..Config::default() }
}

pub fn options(data_dir: &std::path::Path) -> Options {
    Options {
        listen: "127.0.0.1:0".parse().expect("an address"),
        data_dir: data_dir.to_path_buf(),
        store: Store::Sqlite,
        init: false,
        tls: false,
        rotation_interval: 3600,
        header_timeout: 10,
        body_timeout: 300,
        // Only `spawn_on_dynamodb` polls a queue of its own: every test shares one emulator.
        upload_queue: String::new(),
        shared_store: false,
        // No built-in runner claims jobs behind a test's back: tests start the agents they want.
        runners: 0,
        terraform: "terraform".into(),
    }
}

/// dev-server with `--tls` on `data_dir` (its certificate generated there on first start), and
/// an HTTPS client that trusts that certificate.
pub async fn tls_dev_server(data_dir: &std::path::Path) -> (Running, reqwest::Client) {
    dev_server::install_crypto_provider();
    let running =
        start(Options { tls: true, ..options(data_dir) }, Config::default()).await.expect("dev-server starts");
    let pem = std::fs::read(running.certificate.as_ref().expect("a certificate path")).expect("the certificate");
    let certificate = reqwest::Certificate::from_pem(&pem).expect("a PEM certificate");
    let client = reqwest::Client::builder().add_root_certificate(certificate).build().expect("a client");
    (running, client)
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with(Config::default()).await
    }

    pub async fn spawn_with(config: Config) -> TestApp {
        let data_dir = tempfile::tempdir().expect("a temporary directory");
        let options = options(data_dir.path());
        Self::spawn_in(data_dir, options, config).await
    }

    /// Starts dev-server with explicit options in `data_dir`.
    pub async fn spawn_in(data_dir: tempfile::TempDir, options: Options, config: Config) -> TestApp {
        // Kept as dev-server runs it, so a test can build a second state on the same files.
        let config = options.configure(config);
        let running = start(options, config.clone()).await.expect("dev-server starts");
        let admin_token = running.generated_admin_token.clone().expect("a fresh data directory gets a generated token");
        TestApp {
            url: running.url.clone(),
            config,
            admin_token,
            client: reqwest::Client::new(),
            data_dir,
            running: Some(running),
        }
    }

    /// dev-server with an organization `org`; returns it and the owners team's token.
    pub async fn with_organization(org: &str) -> (TestApp, String) {
        Self::spawn_with_organization(Config::default(), org).await
    }

    /// The same, allowed to call VCS stand-ins on 127.0.0.1 (see [`vcs_stand_in_config`]).
    pub async fn with_organization_and_vcs_stand_ins(org: &str) -> (TestApp, String) {
        Self::spawn_with_organization(vcs_stand_in_config(), org).await
    }

    /// dev-server started with `config`, an organization `org` and its owners team's token.
    pub async fn spawn_with_organization(config: Config, org: &str) -> (TestApp, String) {
        let app = Self::spawn_with(config).await;
        app.create_organization(org).await;
        let owners = app.owners_token(org).await;
        (app, owners)
    }

    /// A second state on the same configuration and data, as a Lambda function or the
    /// scheduled job builds it (in this process, so on the store as dev-server holds it).
    pub async fn second_state(&self) -> AppState {
        AppState::build(self.config.clone(), false).await.expect("a second state on the same data")
    }

    /// The embedded store's file, opened a second time as dev-server opened it.
    pub fn store(&self) -> SqliteStore {
        let path = self.data_dir.path().join("hangar.db");
        match self.config.store_sharing {
            StoreSharing::Shared => SqliteStore::open(path),
            StoreSharing::Exclusive => SqliteStore::open_exclusive(path),
        }
        .expect("the embedded store")
    }

    pub async fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.stop().await.expect("dev-server stops cleanly");
        }
    }

    /// Sends a request with an optional bearer token and JSON:API body.
    pub async fn request(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Reply {
        let mut request = self.client.request(method, format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.header("Content-Type", JSONAPI).body(body.to_string());
        }
        Reply::read(request.send().await.expect("the request reaches dev-server")).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.request(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Reply {
        self.request(Method::POST, path, Some(token), Some(body)).await
    }

    pub async fn patch(&self, path: &str, token: &str, body: Value) -> Reply {
        self.request(Method::PATCH, path, Some(token), Some(body)).await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Reply {
        self.request(Method::DELETE, path, Some(token), None).await
    }

    /// Reads a module version (`path`, e.g. `…/version?module_version=1.0.0`) until it is no
    /// longer `pending`: ingest runs after an upload, off its PUT, as in AWS.
    pub async fn settled(&self, path: &str, token: &str) -> Reply {
        for _ in 0..600 {
            let reply = self.get(path, token).await;
            if reply.body["data"]["attributes"]["status"] != "pending" {
                return reply;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("{path} still pending after 60 s");
    }

    /// Creates an organization as the site admin.
    pub async fn create_organization(&self, name: &str) -> Reply {
        let body = json!({"data": {"type": "organizations", "attributes": {"name": name, "email": "ops@example.com"}}});
        let reply = self.post("/api/v2/organizations", &self.admin_token, body).await;
        assert_eq!(reply.status, 201, "creating organization {name}: {:?}", reply.body);
        reply
    }

    /// Creates a team with the given organization-access flags and returns (team id, token).
    pub async fn team_with_token(&self, org: &str, name: &str, access: Value) -> (String, String) {
        let body = json!({"data": {"type": "teams", "attributes": {"name": name, "organization-access": access}}});
        let team = self.post(&format!("/api/v2/organizations/{org}/teams"), &self.admin_token, body).await;
        assert_eq!(team.status, 201, "creating team {name}: {:?}", team.body);
        let id = team.body["data"]["id"].as_str().expect("a team id").to_owned();
        (id.clone(), self.token_for_team(&id).await)
    }

    /// The owners team's token of an organization.
    pub async fn owners_token(&self, org: &str) -> String {
        let teams = self.get(&format!("/api/v2/organizations/{org}/teams"), &self.admin_token).await;
        let owners = teams.body["data"]
            .as_array()
            .and_then(|all| all.iter().find(|t| t["attributes"]["name"] == "owners"))
            .expect("an owners team");
        self.token_for_team(owners["id"].as_str().expect("an id")).await
    }

    pub async fn token_for_team(&self, team_id: &str) -> String {
        let path = format!("/api/v2/teams/{team_id}/authentication-token");
        let token = self.request(Method::POST, &path, Some(&self.admin_token), None).await;
        assert_eq!(token.status, 201, "creating a team token: {:?}", token.body);
        token.body["data"]["attributes"]["token"].as_str().expect("the secret, once").to_owned()
    }
}

/// The AWS emulator (see [`moto`]), with the AWS SDK's default chain also pointed at it, for
/// code that builds its clients from the environment: dev-server on DynamoDB, a Lambda cold
/// start. Every test shares one process, so the variables are set once, to the same values for
/// all, and never removed. A failure without the emulator, as [`moto::moto`].
pub async fn moto_in_environment() -> Moto {
    static POINTED: std::sync::Once = std::sync::Once::new();
    let moto = moto::moto().await;
    POINTED.call_once(|| {
        for (name, value) in [
            ("AWS_ENDPOINT_URL", moto.endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", moto::ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", moto::SECRET_KEY),
            ("AWS_REGION", moto::REGION),
        ] {
            std::env::set_var(name, value);
        }
    });
    moto
}

/// A Lambda function's cold start (`state_from_env`) with `variables` as its environment.
/// Tests share one process: the variables are set for this call only, one cold start at a
/// time, and the JSON log subscriber a cold start installs is kept out of the other tests'
/// output (a quiet one is installed first; the cold start keeps it).
pub async fn cold_start(variables: &[(&str, &str)]) -> AppState {
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let _ = tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::default());
    for (name, value) in variables {
        std::env::set_var(name, value);
    }
    let state = hangar::lambda::state_from_env::<hangar::blobs::WithS3>().await;
    for (name, _) in variables {
        std::env::remove_var(name);
    }
    state.expect("the cold start builds its state")
}

/// dev-server on DynamoDB and S3 in the emulator, with a fresh table, bucket and upload-event
/// queue: uploads are ingested as in AWS, from the bucket's events. A failure without the
/// emulator: a test that calls it is `#[ignore = "needs the AWS emulator"]`.
pub async fn spawn_on_dynamodb() -> TestApp {
    spawn_on_dynamodb_polling(true).await
}

/// The same with no queue: nothing ingests an upload but what the test calls itself (the
/// registry-ingest handler, fed events it makes).
pub async fn spawn_on_dynamodb_without_queue() -> TestApp {
    spawn_on_dynamodb_polling(false).await
}

async fn spawn_on_dynamodb_polling(queue: bool) -> TestApp {
    spawn_on_dynamodb_configured(queue, Config::default()).await
}

/// dev-server on DynamoDB and S3 in the emulator, polling its upload queue, with `base`'s
/// settings (its table and bucket new).
pub async fn spawn_on_dynamodb_with(base: Config) -> TestApp {
    spawn_on_dynamodb_configured(true, base).await
}

async fn spawn_on_dynamodb_configured(queue: bool, base: Config) -> TestApp {
    moto_in_environment().await;
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    let suffix = random_token(10).to_lowercase();
    let config = Config {
        store: StoreKind::Dynamodb,
        table: format!("hangar-{suffix}"),
        bucket: format!("hangar-{suffix}"),
        ..base
    };
    let upload_queue = if queue { format!("hangar-{suffix}") } else { String::new() };
    let options = Options { store: Store::Dynamodb, init: true, upload_queue, ..options(data_dir.path()) };
    TestApp::spawn_in(data_dir, options, config).await
}

/// One entry of a test archive. `raw` entries bypass the tar crate's own path checks, to build
/// the hostile archives a real attacker would.
pub enum Entry<'a> {
    File(&'a str, &'a [u8]),
    Raw { name: &'a str, kind: tar::EntryType, link: Option<&'a str> },
}

/// A gzip-compressed tar archive of `entries`.
pub fn targz(entries: &[Entry<'_>]) -> Vec<u8> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        match entry {
            Entry::File(name, body) => {
                header.set_size(body.len() as u64);
                header.set_mode(0o644);
                header.set_entry_type(tar::EntryType::Regular);
                raw_name(&mut header, name);
                header.set_cksum();
                builder.append(&header, *body).expect("append a file");
            }
            Entry::Raw { name, kind, link } => {
                header.set_size(0);
                header.set_mode(0o644);
                header.set_entry_type(*kind);
                raw_name(&mut header, name);
                if let Some(link) = link {
                    let field = &mut header.as_old_mut().linkname;
                    field[..link.len()].copy_from_slice(link.as_bytes());
                }
                header.set_cksum();
                builder.append(&header, std::io::empty()).expect("append a raw entry");
            }
        }
    }
    builder.into_inner().and_then(|gz| gz.finish()).expect("finish the archive")
}

fn raw_name(header: &mut tar::Header, name: &str) {
    let field = &mut header.as_old_mut().name;
    field[..name.len()].copy_from_slice(name.as_bytes());
}

/// A small valid module.
pub fn module_archive() -> Vec<u8> {
    targz(&[
        Entry::File("./main.tf", b"variable \"cidr\" {}\noutput \"id\" { value = \"x\" }\n"),
        Entry::File("./README.md", b"# vpc\nA test module.\n"),
        Entry::File("./modules/subnet/main.tf", b"variable \"az\" {}\n"),
    ])
}

impl TestApp {
    /// The ObjectCreated event S3 sends for `key` (the sample in `events/`, pointed at this
    /// app's bucket), as the registry-ingest function receives it.
    pub fn s3_event(&self, key: &str) -> aws_lambda_events::event::s3::S3Event {
        let sample = include_str!("../../events/registry-ingest.01-object-created.json");
        let mut event: serde_json::Value = serde_json::from_str(sample).expect("the sample is JSON");
        event["Records"][0]["s3"]["object"]["key"] = serde_json::json!(key);
        event["Records"][0]["s3"]["bucket"]["name"] = serde_json::json!(self.config.bucket);
        serde_json::from_value(event).expect("the sample is an S3 event")
    }

    /// PUTs an archive to an upload link the way clients do: no Authorization header.
    pub async fn upload(&self, url: &str, body: Vec<u8>) -> StatusCode {
        let url = if url.starts_with('/') { format!("{}{url}", self.url) } else { url.to_owned() };
        let response = self
            .client
            .put(url)
            .header("Content-Type", "application/octet-stream")
            .body(body)
            .send()
            .await
            .expect("the upload reaches dev-server");
        response.status()
    }
}
