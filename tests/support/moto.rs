//! The AWS emulator (moto), for every test that talks to AWS: the one place that reads
//! `HANGAR_TEST_MOTO_ENDPOINT`, skips without it (or fails, under `CI=true`), and builds the SDK
//! configuration for it. The domain crate's adapter tests cannot depend on this crate, so they
//! compile this file into their binary by path (`shared/tests/adapters/main.rs`): it may use
//! only what both crates depend on (`aws-config`, `aws-sdk-iam`).

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

/// The emulator named by `HANGAR_TEST_MOTO_ENDPOINT`, or `None` (having said so) when none is
/// configured; under `CI=true` that is a failure instead.
pub async fn moto() -> Option<Moto> {
    let endpoint = endpoint()?;
    let credentials = aws_sdk_iam::config::Credentials::new(ACCESS_KEY, SECRET_KEY, None, None, "moto");
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(credentials)
        .endpoint_url(&endpoint)
        .load()
        .await;
    Some(Moto { endpoint, sdk })
}

fn endpoint() -> Option<String> {
    match std::env::var("HANGAR_TEST_MOTO_ENDPOINT") {
        Ok(endpoint) if !endpoint.is_empty() => Some(endpoint),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("the AWS emulator is required under CI: set HANGAR_TEST_MOTO_ENDPOINT (tests/run does)")
        }
        _ => {
            eprintln!("skipped: HANGAR_TEST_MOTO_ENDPOINT is not set (run tests/run to start moto)");
            None
        }
    }
}
