//! What the adapter tests share: the AWS emulator (moto) for the DynamoDB, S3, KMS, IAM and
//! STS runs, which go to `HANGAR_TEST_MOTO_ENDPOINT` (those tests are `#[ignore = "needs the AWS
//! emulator"]`: run with `-- --include-ignored`, they fail when it is unset); and names no other
//! test uses.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub use crate::moto::{moto, Moto};

/// A name no other test (in this run or an earlier one) uses, valid for tables and buckets.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() % 1_000_000_000_000);
    format!("{prefix}-{}-{nanos}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}
