//! Access to the AWS emulator (moto) for the adapter contract tests: the DynamoDB and S3 runs
//! go to `HANGAR_TEST_MOTO_ENDPOINT`, are skipped locally when it is unset, and fail in CI.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::Credentials;

/// The emulator's SDK configuration, or `None` (having said so) when no emulator is configured.
pub async fn moto_config() -> Option<SdkConfig> {
    let endpoint = std::env::var("HANGAR_TEST_MOTO_ENDPOINT").ok().filter(|e| !e.is_empty());
    let Some(endpoint) = endpoint else {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("the moto emulator is required in CI: set HANGAR_TEST_MOTO_ENDPOINT (e.g. http://127.0.0.1:5123)");
        }
        eprintln!("skipped: HANGAR_TEST_MOTO_ENDPOINT is unset, so this moto emulator test does not run");
        return None;
    };
    let config = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .endpoint_url(endpoint)
        .load()
        .await;
    Some(config)
}

/// A name no other test (in this run or an earlier one) uses, valid for tables and buckets.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() % 1_000_000_000_000);
    format!("{prefix}-{}-{nanos}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}
