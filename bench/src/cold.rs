//! Cold init: each function's release binary exec'd against a local stand-in of the Lambda
//! Runtime API, timed from exec to its first `GET /runtime/invocation/next`, the moment Lambda
//! considers init done; beside a `lambda_http` hello function, interleaved in the same run.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use tokio::sync::mpsc;

use crate::stats::{micros, ratio, table, Samples};

pub use hangar::lambda::FUNCTIONS;
const BASELINE: &str = "hello-lambda";
const ROUNDS: usize = 25;

/// A start to time: its label in the table, the binary, and settings beyond the template's.
pub struct Start {
    pub label: String,
    pub binary: &'static str,
    pub settings: Vec<(&'static str, &'static str)>,
}

impl Start {
    pub fn of(binary: &'static str) -> Start {
        Start { label: binary.to_owned(), binary, settings: Vec::new() }
    }

    /// `binary` with its AWS clients trusting the platform's store (`HANGAR_AWS_TRUST=system`),
    /// beside the default (Amazon's roots compiled in): the figure behind the choice.
    pub fn with_system_trust(binary: &'static str) -> Start {
        Start {
            label: format!("{binary}, `HANGAR_AWS_TRUST=system`"),
            binary,
            settings: vec![("HANGAR_AWS_TRUST", "system")],
        }
    }
}

pub async fn run(binaries: &Path) -> String {
    let (polled, mut first_polls) = mpsc::unbounded_channel::<Instant>();
    let app = Router::new().route(
        "/2018-06-01/runtime/invocation/next",
        get(move || {
            let _ = polled.send(Instant::now());
            // Init is over; the process is killed before it would get an event.
            std::future::pending::<&'static str>()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let runtime_api = listener.local_addr().expect("an address").to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut starts: Vec<Start> = std::iter::once(BASELINE).chain(FUNCTIONS).map(Start::of).collect();
    starts.push(Start::with_system_trust("registry-api"));
    let mut samples = vec![[Samples::default(), Samples::default()]; starts.len()];
    for _ in 0..ROUNDS {
        for (start, samples) in starts.iter().zip(samples.iter_mut()) {
            for (trust_store, samples) in TrustStore::BOTH.into_iter().zip(samples.iter_mut()) {
                samples.push(init_time(binaries, start, trust_store, &runtime_api, &mut first_polls).await);
            }
        }
    }
    let rows = trust_store_rows(&starts, &samples);
    format!(
        "### Cold init\n\nExec to first `GET /2018-06-01/runtime/invocation/next` against a local Runtime API \
         stand-in, {ROUNDS} rounds interleaved; the environment is the template's (DynamoDB store, KMS sealing) \
         with static credentials and no bootstrap-token secrets. Right: with `SSL_CERT_FILE` naming the host's \
         bundle file, so that only it is read, as on Lambda's images (which only `HANGAR_AWS_TRUST=system` \
         reads).\n\n{}",
        table(
            &["binary", "median", "p90", "vs lambda_http hello", "median, bundle only", "vs hello, bundle only"],
            &rows
        )
    )
}

/// One row per start: median, p90 and ratio against the first start's median with the host's
/// store, then median and ratio with the bundle only.
pub fn trust_store_rows(starts: &[Start], samples: &[[Samples; 2]]) -> Vec<Vec<String>> {
    let baseline = [samples[0][0].median().as_secs_f64(), samples[0][1].median().as_secs_f64()];
    starts
        .iter()
        .zip(samples)
        .map(|(start, [host, bundle])| {
            vec![
                start.label.clone(),
                micros(host.median()),
                micros(host.percentile(0.9)),
                ratio(host.median().as_secs_f64(), baseline[0]),
                micros(bundle.median()),
                ratio(bundle.median().as_secs_f64(), baseline[1]),
            ]
        })
        .collect()
}

async fn init_time(
    binaries: &Path,
    start: &Start,
    trust_store: TrustStore,
    runtime_api: &str,
    first_polls: &mut mpsc::UnboundedReceiver<Instant>,
) -> Duration {
    let (binary, name) = (binaries.join(start.binary), start.label.as_str());
    let mut command = Command::new(&binary);
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(lambda_environment(start.binary, runtime_api))
        .envs(start.settings.iter().copied());
    trust_store.apply(&mut command);
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
    let polled = tokio::time::timeout(Duration::from_secs(10), first_polls.recv()).await;
    let _ = child.kill();
    let _ = child.wait();
    let polled = polled.unwrap_or_else(|_| panic!("{name} never polled for an invocation")).expect("the stand-in runs");
    polled - started
}

/// Which roots a function's HTTPS clients load at start: the host's store as it is (on Debian
/// a bundle file plus a directory of one file per root, every file of which is read), or the
/// bundle file alone, as on Lambda's Amazon Linux images, which have no such directory.
#[derive(Debug, Clone, Copy)]
pub enum TrustStore {
    Host,
    BundleOnly,
}

impl TrustStore {
    pub const BOTH: [TrustStore; 2] = [TrustStore::Host, TrustStore::BundleOnly];
    /// Debian's bundle of every root.
    const BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

    /// rustls-native-certs reads only `SSL_CERT_FILE` and `SSL_CERT_DIR` when either is set:
    /// naming the bundle alone leaves the directory out. (An empty `SSL_CERT_DIR` alone would
    /// leave no roots at all, and the first HTTPS client built would panic.)
    pub fn apply(self, command: &mut Command) {
        if let TrustStore::BundleOnly = self {
            command.env("SSL_CERT_FILE", Self::BUNDLE);
        }
    }
}

/// What Lambda sets, and what template.yaml sets for every function.
pub fn lambda_environment(name: &str, runtime_api: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_LAMBDA_RUNTIME_API", runtime_api.to_owned()),
        ("AWS_LAMBDA_FUNCTION_NAME", name.to_owned()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "bench".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "AKIABENCH".into()),
        ("AWS_SECRET_ACCESS_KEY", "bench-secret".into()),
        ("AWS_SESSION_TOKEN", "bench-session".into()),
        ("HANGAR_STORE", "dynamodb".into()),
        ("HANGAR_TABLE", "hangar".into()),
        ("HANGAR_BUCKET", "hangar-archives-bench".into()),
        ("HANGAR_KMS_KEY_ID", "arn:aws:kms:us-east-1:123456789012:key/bench".into()),
        ("RUST_LOG", "info".into()),
    ]
}
