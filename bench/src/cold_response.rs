//! Cold first response: `registry-api`'s release binary exec'd against a local Runtime API
//! stand-in with the template's environment on DynamoDB (through the delaying proxy), handed
//! one API Gateway HTTP API (v2) event for GET module with a team token seeded in the same
//! table, and timed from exec to its response posted back; beside `hello-getitem` (a
//! `lambda_http` function doing one GetItem through the same proxy), interleaved.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::api::{module_path, ORG};
use crate::cold::{lambda_environment, trust_store_rows, Start, TrustStore};
use crate::prod_path::Deployment;
use crate::stats::{table, Samples};

const FUNCTION: &str = "registry-api";
const BASELINE: &str = "hello-getitem";
const ROUNDS: usize = 15;
/// API Gateway's event for GET module, as the sample in `events/` has it.
const SAMPLE_EVENT: &str = include_str!("../../events/registry-api.04-show-module.json");

/// What a function posted back for its invocation, and when.
type Answer = (Instant, Result<Value, String>);

/// The Runtime API: `next` hands out the armed event once, then never answers (the process is
/// killed before it would ask again); responses and errors go to the channel.
struct StandIn {
    address: String,
    event: Arc<Mutex<Option<Bytes>>>,
    answers: mpsc::UnboundedReceiver<Answer>,
}

impl StandIn {
    async fn start() -> StandIn {
        let event: Arc<Mutex<Option<Bytes>>> = Arc::default();
        let (answered, answers) = mpsc::unbounded_channel::<Answer>();
        let armed = event.clone();
        let failed = answered.clone();
        let app = Router::new()
            .route(
                "/2018-06-01/runtime/invocation/next",
                get(move || {
                    let event = armed.lock().expect("the armed event").take();
                    async move {
                        match event {
                            Some(event) => (invocation_headers(), event).into_response(),
                            None => std::future::pending().await,
                        }
                    }
                }),
            )
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(move |body: Bytes| async move {
                    let parsed = serde_json::from_slice(&body).map_err(|e| format!("{e}: {body:?}"));
                    let _ = answered.send((Instant::now(), parsed));
                    StatusCode::ACCEPTED
                }),
            )
            .fallback(move |body: Bytes| async move {
                // An invocation or init error.
                let _ = failed.send((Instant::now(), Err(String::from_utf8_lossy(&body).into_owned())));
                StatusCode::ACCEPTED
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let address = listener.local_addr().expect("an address").to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        StandIn { address, event, answers }
    }

    /// Execs `command`, hands it `event`, and returns the time to its answer.
    async fn first_response(&mut self, mut command: Command, event: &Bytes, name: &str) -> Duration {
        while self.answers.try_recv().is_ok() {}
        *self.event.lock().expect("the armed event") = Some(event.clone());
        let started = Instant::now();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        let answer = tokio::time::timeout(Duration::from_secs(30), self.answers.recv()).await;
        let _ = child.kill();
        let _ = child.wait();
        let (at, answer) = answer.unwrap_or_else(|_| panic!("{name} never answered")).expect("the stand-in runs");
        let answer = answer.unwrap_or_else(|error| panic!("{name} failed: {error}"));
        assert_eq!(answer["statusCode"], 200, "{name} answered {answer}");
        at - started
    }
}

fn invocation_headers() -> HeaderMap {
    let deadline = std::time::SystemTime::now() + Duration::from_secs(30);
    let deadline = deadline.duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis();
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("lambda-runtime-aws-request-id", "bench-request".to_owned()),
        ("lambda-runtime-deadline-ms", deadline.to_string()),
        ("lambda-runtime-invoked-function-arn", "arn:aws:lambda:us-east-1:123456789012:function:bench".to_owned()),
        ("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".to_owned()),
    ] {
        headers.insert(name, value.parse().expect("a header value"));
    }
    headers
}

/// The sample GET module event, pointed at the bench's module and carrying `token`.
fn get_module_event(token: &str) -> Bytes {
    let mut event: Value = serde_json::from_str(SAMPLE_EVENT).expect("the sample event is JSON");
    let path = module_path(0);
    event["rawPath"] = path.clone().into();
    event["requestContext"]["http"]["path"] = path.into();
    event["headers"]["authorization"] = format!("Bearer {token}").into();
    event["pathParameters"]["org"] = ORG.into();
    event["pathParameters"]["proxy"] = format!("private/{ORG}/mod-00000/aws").into();
    Bytes::from(event.to_string())
}

pub async fn run(binaries: &Path, deployment: &Deployment) -> String {
    let mut stand_in = StandIn::start().await;
    let event = get_module_event(&deployment.team_token);
    let starts = [Start::of(BASELINE), Start::of(FUNCTION), Start::with_system_trust(FUNCTION)];
    let mut samples = vec![[Samples::default(), Samples::default()]; starts.len()];
    for _ in 0..ROUNDS {
        for (start, samples) in starts.iter().zip(samples.iter_mut()) {
            for (trust_store, samples) in TrustStore::BOTH.into_iter().zip(samples.iter_mut()) {
                let command = command(binaries, start, trust_store, &stand_in.address, deployment);
                samples.push(stand_in.first_response(command, &event, &start.label).await);
            }
        }
    }
    let rows = trust_store_rows(&starts, &samples);
    format!(
        "### Cold first response\n\nExec to the first response posted to `/2018-06-01/runtime/invocation/{{id}}/response` \
         against a local Runtime API stand-in that hands out one API Gateway HTTP API (v2) event, GET module with a \
         team token; {ROUNDS} rounds interleaved. The environment is the template's (DynamoDB store, KMS sealing, no \
         bootstrap-token secrets) with static credentials and every AWS call through the proxy above ({} ms each). \
         Baseline: `hello-getitem`, a `lambda_http` function doing one GetItem of a small item per request. Right: \
         with `SSL_CERT_FILE` naming the host's bundle file, so that only it is read, as on Lambda's images.\n\n{}",
        deployment.proxy.delay.as_millis(),
        table(
            &["binary", "median", "p90", "vs hello + GetItem", "median, bundle only", "vs hello + GetItem, bundle only"],
            &rows
        )
    )
}

fn command(
    binaries: &Path,
    start: &Start,
    trust_store: TrustStore,
    runtime_api: &str,
    deployment: &Deployment,
) -> Command {
    let mut command = Command::new(binaries.join(start.binary));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(lambda_environment(start.binary, runtime_api))
        .envs(start.settings.iter().copied())
        .env("AWS_ENDPOINT_URL", &deployment.proxy.endpoint)
        .env("HANGAR_TABLE", &deployment.table)
        .env("HANGAR_BUCKET", &deployment.bucket)
        .env("BENCH_TABLE", &deployment.table)
        .env("BENCH_PK", &deployment.item.0)
        .env("BENCH_SK", &deployment.item.1);
    trust_store.apply(&mut command);
    command
}
