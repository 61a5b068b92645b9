//! Which certificate authorities the AWS clients trust (`HANGAR_AWS_TRUST`).

use std::process::Command;

use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::DisplayErrorContext;
use hangar::aws::AwsBase;
use hangar::config::{AwsTrust, Config};
use hangar_tests::tls_dev_server;

/// An S3 client on `base`'s HTTP client, sent to `endpoint`.
fn s3(base: &AwsBase, endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(base.http_client())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Whether a list of buckets at `endpoint` got an HTTP answer (dev-server is no S3, so an
/// error, but one after the TLS handshake), or else why not.
async fn handshake(base: &AwsBase, endpoint: &str) -> Result<(), String> {
    match s3(base, endpoint).list_buckets().send().await {
        Err(e) if e.raw_response().is_none() => Err(DisplayErrorContext(&e).to_string()),
        _ => Ok(()),
    }
}

/// The environment variable that makes [`system_trust_probe`] run, naming the endpoint.
const PROBE_ENDPOINT: &str = "HANGAR_TEST_TRUST_PROBE_ENDPOINT";

/// Not a test of its own: the process that [`system_trust_follows_the_platforms_store`] starts
/// (this test binary, run again) with its own `SSL_CERT_FILE`, since the SDK reads the platform's
/// store once per process.
#[tokio::test]
#[ignore = "the child process of system_trust_follows_the_platforms_store"]
async fn system_trust_probe() {
    let Ok(endpoint) = std::env::var(PROBE_ENDPOINT) else { return };
    dev_server::install_crypto_provider();
    let outcome = handshake(&AwsBase::new(AwsTrust::System), &endpoint).await;
    println!("HANDSHAKE {}", outcome.err().unwrap_or_else(|| "ok".into()));
}

/// By default the clients trust Amazon's roots alone: an endpoint whose certificate another
/// authority issued (here dev-server's own, which an HTTPS client that trusts it reaches) is
/// refused in the TLS handshake, before any credential is sent.
#[tokio::test]
async fn by_default_aws_clients_trust_only_amazons_roots() {
    let dir = tempfile::tempdir().unwrap();
    let (running, trusting) = tls_dev_server(dir.path()).await;
    let ping = trusting.get(format!("{}/api/v2/ping", running.url)).send().await.expect("reached");
    assert_eq!(ping.status(), 204, "the endpoint answers a client that trusts it");

    assert_eq!(Config::default().aws_trust, AwsTrust::Amazon);
    let refused = handshake(&AwsBase::new(AwsTrust::Amazon), &running.url).await.expect_err("no answer");
    assert!(refused.contains("UnknownIssuer"), "refused for its issuer: {refused}");
    running.stop().await.unwrap();
}

/// `HANGAR_AWS_TRUST=system` trusts what the platform's store holds: the same endpoint, its
/// certificate in `SSL_CERT_FILE`, is reached.
#[tokio::test]
async fn system_trust_follows_the_platforms_store() {
    let dir = tempfile::tempdir().unwrap();
    let (running, _) = tls_dev_server(dir.path()).await;
    let empty = tempfile::tempdir().unwrap();
    let mut probe = Command::new(std::env::current_exe().expect("this test binary"));
    probe
        .args(["aws_trust::system_trust_probe", "--exact", "--ignored", "--nocapture"])
        .env(PROBE_ENDPOINT, &running.url)
        .env("SSL_CERT_FILE", running.certificate.as_ref().expect("a certificate path"))
        .env("SSL_CERT_DIR", empty.path());
    // Off the runtime's thread, which serves dev-server meanwhile.
    let output = tokio::task::spawn_blocking(move || probe.output()).await.unwrap().expect("the probe runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("HANDSHAKE ok"), "{stdout}");
    running.stop().await.unwrap();
}

#[test]
fn the_trust_setting_is_amazon_or_system() {
    let config = |value: &str| {
        let value = value.to_owned();
        Config::from_lookup(move |name| (name == "HANGAR_AWS_TRUST").then(|| value.clone()))
    };
    assert_eq!(config("amazon").unwrap().aws_trust, AwsTrust::Amazon);
    assert_eq!(config("system").unwrap().aws_trust, AwsTrust::System);
    let refused = config("mozilla").unwrap_err();
    assert_eq!(refused.name, "HANGAR_AWS_TRUST");
    assert!(refused.problem.contains("amazon or system"), "{}", refused.problem);
}
