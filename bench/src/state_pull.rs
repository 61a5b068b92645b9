//! Reading a large state on the production path: dev-server (`--store dynamodb --tls`) against
//! moto behind the delaying proxy, one workspace whose current state is 10 MB. Three reads of the
//! same bytes, interleaved: a raw S3 GetObject of the state's object (the harness, through the
//! proxy), the download as a client makes it through Hangar (the current version, then its link,
//! which redirects to S3), and `terraform state pull` (the Terraform CLI, a process a pull).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::aws_delay::DelayProxy;
use crate::local::ADMIN_TOKEN;
use crate::prod_path::{dev_server_env, harness_sdk};
use crate::server::start_dev_server;
use crate::stats::{millis, ratio, table, Samples};

/// The state's size, about.
const STATE_BYTES: usize = 10 * 1024 * 1024;
const ROUNDS: usize = 10;
const HEADER: [&str; 5] = ["read of the 10 MB state", "reads", "median", "p90", "raw GET ÷ this (goal ≥ 0.8×)"];

pub async fn run(binaries: &Path, moto: &str, delay: Duration) -> String {
    let proxy = DelayProxy::start(moto, delay).await;
    let suffix = hangar::ids::random_token(10).to_lowercase();
    let bucket = format!("hangar-bench-{suffix}");
    let env = dev_server_env(&proxy.endpoint, &suffix);
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    let args = ["--store", "dynamodb", "--init", "--tls", "--rotation-interval", "86400"];
    let (_hangar, address) = start_dev_server(&binaries.join("dev-server"), data_dir.path(), &args, &env);
    let certificate = data_dir.path().join("tls").join("cert.pem");
    let url = format!("https://{address}");
    let client = https_client(&certificate);
    let (workspace, state) = seed(&client, &url).await;

    let s3 = s3_client(&proxy.endpoint).await;
    let key = s3.list_objects_v2().bucket(&bucket).prefix("sealed/").send().await.expect("the bucket lists");
    let key = key.contents().first().and_then(|object| object.key()).expect("the state's object").to_owned();
    let terraform = which("terraform");
    let work = terraform.as_ref().map(|binary| Cli::init(binary, &address.to_string(), &certificate));

    let local = terraform.as_ref().map(|binary| Cli::local(binary, &state, &certificate));
    let (mut raw, mut hangar, mut cli) = (Samples::default(), Samples::default(), Samples::default());
    let (mut metadata, mut link, mut cli_local) = (Samples::default(), Samples::default(), Samples::default());
    for round in 0..=ROUNDS {
        let began = Instant::now();
        let object = s3.get_object().bucket(&bucket).key(&key).send().await.expect("the object");
        let bytes = object.body.collect().await.expect("its body").into_bytes();
        let raw_time = began.elapsed();
        assert_eq!(bytes.len(), state.len());

        let (pulled, metadata_time, link_time) = download(&client, &url, &workspace).await;
        assert_eq!(pulled.len(), state.len(), "Hangar serves the state as written");

        let cli_time = work.as_ref().map(|work| work.pull(state.len()));
        let cli_local_time = local.as_ref().map(|local| local.pull(state.len()));
        // The first round warms connections and caches; it is not counted.
        if round > 0 {
            raw.push(raw_time);
            hangar.push(metadata_time + link_time);
            metadata.push(metadata_time);
            link.push(link_time);
            cli_time.into_iter().for_each(|time| cli.push(time));
            cli_local_time.into_iter().for_each(|time| cli_local.push(time));
        }
    }
    let row = |name: &str, samples: &Samples| {
        vec![
            name.to_owned(),
            samples.len().to_string(),
            millis(samples.median()),
            millis(samples.percentile(0.9)),
            ratio(raw.median().as_secs_f64(), samples.median().as_secs_f64()),
        ]
    };
    let mut rows = vec![
        row("raw S3 GetObject (aws-sdk-s3, the harness)", &raw),
        row("through Hangar: current version, then its link (redirect to S3), reqwest", &hangar),
        row("· of which `GET …/current-state-version`", &metadata),
        row("· of which the link: Hangar's 307, then S3's GET", &link),
    ];
    match terraform {
        Some(_) => {
            rows.push(row("`terraform state pull` from Hangar (Terraform 1.0.3, a process a pull)", &cli));
            rows.push(row("`terraform state pull` of the same state in a local file (the CLI's own cost)", &cli_local));
        }
        None => rows.push(vec![
            "`terraform state pull`".into(),
            "not measured: no terraform on PATH".into(),
            String::new(),
            String::new(),
            String::new(),
        ]),
    }
    format!(
        "### State pull on DynamoDB and S3\n\ndev-server (`--store dynamodb --tls`) against moto behind the harness's proxy \
         adding {} ms to every AWS call, one workspace whose current state is {} bytes (SSE-KMS is moto's no-op). \
         {ROUNDS} rounds after one of warm-up, each reading the same bytes three ways, one after another; the ratio \
         is of the medians.\n\n{}",
        delay.as_millis(),
        state.len(),
        table(&HEADER, &rows)
    )
}

fn https_client(certificate: &Path) -> reqwest::Client {
    let pem = std::fs::read(certificate).expect("dev-server's certificate");
    let root = reqwest::Certificate::from_pem(&pem).expect("a PEM certificate");
    reqwest::Client::builder().add_root_certificate(root).build().expect("a client")
}

async fn send(client: &reqwest::Client, method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
    let mut request = client.request(method, url).bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        request = request.header("Content-Type", "application/vnd.api+json").body(body.to_string());
    }
    let response = request.send().await.expect("Hangar answers");
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{url}: {status} {body}");
    body
}

/// An organization, a workspace holding a 10 MB state; returns the workspace's id and the state.
async fn seed(client: &reqwest::Client, url: &str) -> (String, Vec<u8>) {
    use base64::Engine;
    use md5::Digest;
    let org = json!({"data": {"type": "organizations", "attributes": {"name": "bench", "email": "b@example.com"}}});
    send(client, reqwest::Method::POST, &format!("{url}/api/v2/organizations"), Some(org)).await;
    let ws = json!({"data": {"type": "workspaces", "attributes": {"name": "big", "execution-mode": "local"}}});
    let created =
        send(client, reqwest::Method::POST, &format!("{url}/api/v2/organizations/bench/workspaces"), Some(ws)).await;
    let workspace = created["data"]["id"].as_str().expect("an id").to_owned();
    send(client, reqwest::Method::POST, &format!("{url}/api/v2/workspaces/{workspace}/actions/lock"), Some(json!({})))
        .await;
    let state = large_state();
    let body = json!({"data": {"type": "state-versions", "attributes": {
        "serial": 1, "md5": hex::encode(md5::Md5::digest(&state)),
        "state": base64::engine::general_purpose::STANDARD.encode(&state),
    }}});
    send(client, reqwest::Method::POST, &format!("{url}/api/v2/workspaces/{workspace}/state-versions"), Some(body))
        .await;
    (workspace, state)
}

/// A state of about `STATE_BYTES`: many resources with a few attributes each, as a large
/// configuration's state is. Data sources of Terraform's built-in provider, so that `terraform
/// init` needs no provider from the network.
fn large_state() -> Vec<u8> {
    let instance =
        json!({"schema_version": 0, "attributes": {"id": "i-0123456789abcdef0", "tags": {"Name": "x".repeat(1500)}}});
    let one = serde_json::to_vec(&instance).expect("an instance").len();
    let resources: Vec<Value> = (0..STATE_BYTES / (one + 200))
        .map(|n| {
            json!({"mode": "data", "type": "terraform_remote_state", "name": format!("r{n}"),
            "provider": "provider[\"terraform.io/builtin/terraform\"]", "instances": [instance.clone()]})
        })
        .collect();
    let state = json!({"version": 4, "terraform_version": "1.0.3", "serial": 1, "lineage": "bench",
        "outputs": {}, "resources": resources});
    serde_json::to_vec(&state).expect("a state")
}

/// What a client does to read the current state: the current version, then its link; the state
/// and the time each took.
async fn download(client: &reqwest::Client, url: &str, workspace: &str) -> (bytes::Bytes, Duration, Duration) {
    let began = Instant::now();
    let current =
        send(client, reqwest::Method::GET, &format!("{url}/api/v2/workspaces/{workspace}/current-state-version"), None)
            .await;
    let metadata = began.elapsed();
    let link = current["data"]["attributes"]["hosted-state-download-url"].as_str().expect("a download link");
    let began = Instant::now();
    let response = client.get(link).bearer_auth(ADMIN_TOKEN).send().await.expect("the link answers");
    assert!(response.status().is_success(), "{}", response.status());
    let state = response.bytes().await.expect("the state");
    (state, metadata, began.elapsed())
}

async fn s3_client(endpoint: &str) -> aws_sdk_s3::Client {
    let sdk = harness_sdk(endpoint).await;
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build())
}

fn which(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(binary)).find(|candidate| candidate.is_file())
}

/// A configuration whose backend is the workspace, initialized once.
struct Cli {
    binary: PathBuf,
    work: tempfile::TempDir,
    certificate: PathBuf,
}

impl Cli {
    fn init(binary: &Path, host: &str, certificate: &Path) -> Cli {
        let work = tempfile::tempdir().expect("a working directory");
        let configuration = format!(
            "terraform {{\n  backend \"remote\" {{\n    hostname = \"{host}\"\n    organization = \"bench\"\n    workspaces {{\n      name = \"big\"\n    }}\n  }}\n}}\n"
        );
        std::fs::write(work.path().join("main.tf"), configuration).expect("main.tf");
        std::fs::write(
            work.path().join("terraformrc"),
            format!("credentials \"{host}\" {{\n  token = \"{ADMIN_TOKEN}\"\n}}\n"),
        )
        .expect("terraformrc");
        let cli = Cli { binary: binary.to_owned(), work, certificate: certificate.to_owned() };
        let output = cli.command(&["init", "-input=false", "-no-color"]).output().expect("terraform runs");
        assert!(output.status.success(), "terraform init: {}", String::from_utf8_lossy(&output.stderr));
        cli
    }

    /// A configuration with no backend whose local state file is `state`.
    fn local(binary: &Path, state: &[u8], certificate: &Path) -> Cli {
        let work = tempfile::tempdir().expect("a working directory");
        std::fs::write(work.path().join("main.tf"), "").expect("main.tf");
        std::fs::write(work.path().join("terraformrc"), "").expect("terraformrc");
        std::fs::write(work.path().join("terraform.tfstate"), state).expect("the state file");
        let cli = Cli { binary: binary.to_owned(), work, certificate: certificate.to_owned() };
        let output = cli.command(&["init", "-input=false", "-no-color"]).output().expect("terraform runs");
        assert!(output.status.success(), "terraform init: {}", String::from_utf8_lossy(&output.stderr));
        cli
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(&self.binary);
        command
            .args(args)
            .current_dir(self.work.path())
            .env("HOME", self.work.path())
            .env("TF_CLI_CONFIG_FILE", self.work.path().join("terraformrc"))
            .env("SSL_CERT_FILE", &self.certificate)
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1");
        command
    }

    /// One `terraform state pull`, timed; its output is the state (re-encoded by Terraform).
    fn pull(&self, expected: usize) -> Duration {
        let began = Instant::now();
        let output = self.command(&["state", "pull"]).output().expect("terraform runs");
        let took = began.elapsed();
        assert!(output.status.success(), "terraform state pull: {}", String::from_utf8_lossy(&output.stderr));
        assert!(output.stdout.len() * 2 > expected, "the whole state came back");
        took
    }
}
