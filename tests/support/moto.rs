//! The AWS emulator (moto), for every test that talks to AWS: the one place that reads
//! `HANGAR_TEST_MOTO_ENDPOINT` and builds the SDK configuration for it. Every test that calls it
//! is `#[ignore = "needs the AWS emulator"]`, so a plain `cargo test` lists it as ignored; run
//! with `-- --include-ignored` (tests/run does, with moto started), it fails without the
//! endpoint instead of passing having done nothing. The domain crate's adapter tests cannot
//! depend on this crate, so they compile this file into their binary by path
//! (`shared/tests/adapters/main.rs`): it may use only what both crates depend on (`aws-config`,
//! `aws-sdk-iam`).

use aws_config::{BehaviorVersion, Region, SdkConfig};

/// The region, and the credentials moto accepts, of every client of the emulator.
pub const REGION: &str = "us-east-1";
pub const ACCESS_KEY: &str = "testing";
pub const SECRET_KEY: &str = "testing";

/// The emulator: its endpoint, and an SDK configuration that reaches it.
#[derive(Clone)]
pub struct Moto {
    pub endpoint: String,
    pub sdk: SdkConfig,
}

/// The emulator named by `HANGAR_TEST_MOTO_ENDPOINT`; a failure when it is unset.
pub async fn moto() -> Moto {
    at(endpoint("HANGAR_TEST_MOTO_ENDPOINT"), ACCESS_KEY, SECRET_KEY).await
}

/// A second emulator, `HANGAR_TEST_MOTO_POLICY_ENDPOINT`, that one test at a time may switch to
/// enforcing IAM policies ([`Moto::enforce_policies`]): on the shared one that would refuse
/// every other test's calls. As [`moto`], a failure when it is unset.
pub async fn policy_moto() -> Moto {
    at(endpoint("HANGAR_TEST_MOTO_POLICY_ENDPOINT"), ACCESS_KEY, SECRET_KEY).await
}

/// The emulator at `endpoint`, reached with these keys.
pub async fn at(endpoint: String, access_key: &str, secret_key: &str) -> Moto {
    let credentials = aws_sdk_iam::config::Credentials::new(access_key, secret_key, None, None, "moto");
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(credentials)
        .endpoint_url(&endpoint)
        .load()
        .await;
    Moto { endpoint, sdk }
}

impl Moto {
    /// Switches moto's IAM authorization on (every later request must be signed by an IAM
    /// user's key and allowed by its policies, `Resource: "*"` being the only resource moto
    /// matches for IAM actions) or off (any key does anything), through its `reset-auth` API.
    pub async fn enforce_policies(&self, on: bool) {
        let count = if on { "0" } else { "inf" };
        let answered = post(&format!("{}/moto-api/reset-auth", self.endpoint), count).await;
        assert!(answered, "moto's reset-auth answered");
    }
}

/// POSTs `body` to `url` with a bare HTTP/1.1 request (this file is also compiled where no HTTP
/// client is a dependency); true on a 2xx answer.
async fn post(url: &str, body: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("moto is served over http");
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("moto listens");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("the request is sent");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("an answer");
    String::from_utf8_lossy(&answer).split(' ').nth(1).is_some_and(|status| status.starts_with('2'))
}

/// The endpoint in `variable`. A test that needs the emulator is ignored unless asked for, and
/// one asked for must not pass without it: unset, that is a failure, saying how to start one.
fn endpoint(variable: &str) -> String {
    match std::env::var(variable) {
        Ok(endpoint) if !endpoint.is_empty() => endpoint,
        _ => panic!("this test needs the AWS emulator: set {variable} (tests/run starts moto)"),
    }
}
