//! The production path: dev-server on DynamoDB and S3 (moto) behind the delaying, counting proxy
//! (`aws_delay.rs`), so that each AWS call costs what a same-region round trip does. For each
//! authenticated read: the AWS calls a request makes (the proxy's counts), and its latency
//! against one raw GetItem the harness sends through the same proxy, interleaved. Then the cold
//! first response of `registry-api` on the same table (`cold_response.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;

use crate::api::{module_path, Api, ORG};
use crate::aws_delay::{difference, Counts, DelayProxy};
use crate::load::Connection;
use crate::local::ADMIN_TOKEN;
use crate::server::start_dev_server;
use crate::stats::{micros, ratio, table, Samples};

pub const DEFAULT_DELAY_MS: u64 = 3;
/// One full page for the list.
const MODULES: usize = 20;
const WARMUP: usize = 10;
/// Requests whose AWS calls are counted (nothing else runs meanwhile).
const COUNTED: usize = 10;
/// Requests timed, each followed by one raw GetItem: up to `ROUNDS`, fewer (never under
/// `MIN_ROUNDS`) once a read has taken `BUDGET`, so that slow reads keep the figure short.
const ROUNDS: usize = 100;
const MIN_ROUNDS: usize = 30;
const BUDGET: Duration = Duration::from_secs(10);
const HEADER: [&str; 7] =
    ["read", "AWS calls per request", "requests timed", "median", "p90", "raw GetItem median", "vs one GetItem"];
/// Static credentials moto accepts without checking.
pub const AWS_ENVIRONMENT: [(&str, &str); 3] =
    [("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench-secret"), ("AWS_REGION", "us-east-1")];

/// What the seeded deployment is: its table, bucket, a team's token, and one item's key.
pub struct Deployment {
    pub proxy: DelayProxy,
    pub table: String,
    pub bucket: String,
    pub team_token: String,
    /// The `PK` and `SK` of an item the raw GetItem reads.
    pub item: (String, String),
}

pub async fn run(binaries: &Path, moto: &str, delay: Duration) -> String {
    let proxy = DelayProxy::start(moto, delay).await;
    let suffix = hangar::ids::random_token(10).to_lowercase();
    let (table_name, bucket) = (format!("hangar-bench-{suffix}"), format!("hangar-bench-{suffix}"));
    let env = dev_server_env(&proxy.endpoint, &suffix);
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    // No rotation run during the figure: its reads would be counted as the requests'.
    let args = ["--store", "dynamodb", "--init", "--rotation-interval", "86400"];
    let (_hangar, address) = start_dev_server(&binaries.join("dev-server"), data_dir.path(), &args, &env);
    let (pool, team_token) = seed(&Api::http(&format!("http://{address}"))).await;

    let dynamo = dynamodb_client(&proxy.endpoint).await;
    let item = any_item(&dynamo, &table_name).await;
    let raw = RawGetItem { client: dynamo, table: table_name.clone(), item: item.clone() };
    let reads = [
        ("GET module", module_path(0)),
        ("protocol: versions", format!("/api/registry/v1/modules/{ORG}/mod-00000/aws/versions")),
        ("protocol: download", format!("/api/registry/v1/modules/{ORG}/mod-00000/aws/1.0.0/download")),
        ("GET agent pool", format!("/api/v2/agent-pools/{pool}")),
        ("list modules (page 1)", format!("/api/v2/organizations/{ORG}/registry-modules")),
    ];
    let mut reader = Reader {
        connection: Connection::open(address).await,
        auth: [("Authorization", format!("Bearer {team_token}"))],
        proxy: &proxy,
        raw: &raw,
    };
    let mut all_raw = Samples::default();
    let mut rows = Vec::new();
    for (name, path) in &reads {
        let Measured { calls, request, getitem } = reader.measure(path).await;
        rows.push(vec![
            name.to_string(),
            per_request(&calls),
            request.len().to_string(),
            micros(request.median()),
            micros(request.percentile(0.9)),
            micros(getitem.median()),
            ratio(request.median().as_secs_f64(), getitem.median().as_secs_f64()),
        ]);
        all_raw.extend(getitem);
    }
    let raw_row = vec![
        "one raw GetItem (aws-sdk-dynamodb, the harness)".into(),
        "1 (GetItem 1)".into(),
        all_raw.len().to_string(),
        micros(all_raw.median()),
        micros(all_raw.percentile(0.9)),
        micros(all_raw.median()),
        "1.00×".into(),
    ];
    rows.insert(0, raw_row);
    let warm = format!(
        "### Production path: reads on DynamoDB\n\ndev-server (`--store dynamodb`) against moto behind a proxy in the \
         harness that adds {} ms to every AWS call and counts them, {MODULES} modules, a team token (no extra \
         permissions). Per read: the AWS calls of one request ({COUNTED} counted, SQS polls for uploads left out), \
         then up to {ROUNDS} requests (at least {MIN_ROUNDS}, fewer than {ROUNDS} once {}s have passed) on one \
         keep-alive connection, closed loop after {WARMUP} of warm-up, each followed by one raw GetItem of a small \
         item through the same proxy; the ratio is of the two medians.\n\n{}",
        delay.as_millis(),
        BUDGET.as_secs(),
        table(&HEADER, &rows)
    );
    let deployment = Deployment { proxy, table: table_name, bucket, team_token, item };
    let cold = crate::cold_response::run(binaries, &deployment).await;
    format!("{warm}\n\n{cold}")
}

/// An organization with `MODULES` modules, version 1.0.0 of the first (ingested from S3 through
/// the upload queue), an agent pool and a read-only team; returns the pool's id and the team's
/// token.
async fn seed(api: &Api) -> (String, String) {
    api.create_organization(ADMIN_TOKEN).await;
    api.create_modules(ADMIN_TOKEN, 0, MODULES, 8).await;
    api.publish(ADMIN_TOKEN, 0, "1.0.0", hangar_tests::module_archive()).await;
    let pool = api.create_agent_pools(ADMIN_TOKEN, 1).await.remove(0);
    (pool, api.team_token(ADMIN_TOKEN, "readers").await)
}

/// One read's figures: the AWS calls of `COUNTED` requests, then the timed requests and the
/// raw GetItems interleaved with them.
struct Measured {
    calls: Counts,
    request: Samples,
    getitem: Samples,
}

/// Reads on one keep-alive connection, beside raw GetItems.
struct Reader<'a> {
    connection: Connection,
    auth: [(&'static str, String); 1],
    proxy: &'a DelayProxy,
    raw: &'a RawGetItem,
}

impl Reader<'_> {
    async fn measure(&mut self, path: &str) -> Measured {
        for _ in 0..WARMUP {
            self.connection.get(path, &self.auth).await;
            self.raw.time().await;
        }
        // Nothing else calls AWS meanwhile but the upload queue's polls, which are left out.
        let before = self.proxy.counts();
        for _ in 0..COUNTED {
            self.connection.get(path, &self.auth).await;
        }
        let calls = difference(&self.proxy.counts(), &before);
        let (mut request, mut getitem) = (Samples::default(), Samples::default());
        let timed = Instant::now();
        while request.len() < MIN_ROUNDS || (request.len() < ROUNDS && timed.elapsed() < BUDGET) {
            let began = Instant::now();
            self.connection.get(path, &self.auth).await;
            request.push(began.elapsed());
            getitem.push(self.raw.time().await);
        }
        Measured { calls, request, getitem }
    }
}

/// `BatchGetItem 2, Query 1` for one request, from the calls of `COUNTED`; SQS (the upload
/// queue's long polls) left out.
fn per_request(calls: &Counts) -> String {
    let per = |n: u64| {
        let each = n as f64 / COUNTED as f64;
        if each.fract() == 0.0 {
            format!("{each:.0}")
        } else {
            format!("{each:.1}")
        }
    };
    let made: Vec<(&str, u64)> = calls
        .iter()
        .filter(|(call, _)| !call.starts_with("sqs:"))
        .map(|(call, n)| (call.split_once(':').map_or(call.as_str(), |(_, action)| action), *n))
        .collect();
    let total: u64 = made.iter().map(|(_, n)| n).sum();
    let each: Vec<String> = made.iter().map(|(action, n)| format!("{action} {}", per(*n))).collect();
    format!("{} ({})", per(total), each.join(", "))
}

/// The SDK configuration of the harness's own AWS clients, through the proxy at `endpoint`.
pub async fn harness_sdk(endpoint: &str) -> aws_config::SdkConfig {
    let [(_, access_key), (_, secret_key), (_, region)] = AWS_ENVIRONMENT;
    let credentials = aws_sdk_dynamodb::config::Credentials::new(access_key, secret_key, None, None, "bench");
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region))
        .credentials_provider(credentials)
        .endpoint_url(endpoint)
        .load()
        .await
}

/// dev-server's environment on DynamoDB and S3 through the proxy at `endpoint`: its table,
/// bucket and upload queue all named `hangar-bench-{suffix}`.
pub fn dev_server_env(endpoint: &str, suffix: &str) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&str, String)> = AWS_ENVIRONMENT.iter().map(|(name, value)| (*name, value.to_string())).collect();
    let name = format!("hangar-bench-{suffix}");
    env.extend([
        ("AWS_ENDPOINT_URL", endpoint.to_owned()),
        ("HANGAR_TABLE", name.clone()),
        ("HANGAR_BUCKET", name.clone()),
        ("HANGAR_UPLOAD_QUEUE", name),
    ]);
    env
}

/// A DynamoDB client of the harness, through the proxy.
async fn dynamodb_client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&harness_sdk(endpoint).await)
}

/// The key of some item of the table (the raw GetItem reads it; which one does not matter).
async fn any_item(client: &aws_sdk_dynamodb::Client, table: &str) -> (String, String) {
    let scan = client.scan().table_name(table).limit(1).send().await.expect("a scan of the table");
    let item = scan.items().first().expect("an item in the table");
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).expect("a string key").to_owned();
    (text(hangar::store::PK), text(hangar::store::SK))
}

struct RawGetItem {
    client: aws_sdk_dynamodb::Client,
    table: String,
    item: (String, String),
}

impl RawGetItem {
    async fn time(&self) -> Duration {
        let began = Instant::now();
        let read = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(hangar::store::PK, AttributeValue::S(self.item.0.clone()))
            .key(hangar::store::SK, AttributeValue::S(self.item.1.clone()))
            .send()
            .await
            .expect("a raw GetItem");
        assert!(read.item().is_some(), "the raw GetItem finds its item");
        began.elapsed()
    }
}
