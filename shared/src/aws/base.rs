//! The AWS SDK configuration one process shares: region, credential chain and, above all, one
//! HTTP client, so that every AWS client of the process (DynamoDB, S3, KMS, Secrets Manager,
//! SQS, the broker's IAM and STS) uses one TLS configuration and one connection pool. Left to
//! itself the SDK gives each service client its own HTTPS client, and each of those builds its
//! own root certificate store from the system's certificates: the larger part of a function's
//! cold start (BENCHMARKS.md, "Cold init").
//!
//! Nothing is loaded until a client is first wanted, so a process that never calls AWS
//! (dev-server on its embedded store) never reads the environment's AWS settings or any
//! certificate.

use std::sync::{Arc, OnceLock};

use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use tokio::sync::OnceCell;

/// The process's shared SDK configuration and HTTP client, each made on first use; clones share
/// them.
#[derive(Clone, Default)]
pub struct AwsBase {
    http: Arc<OnceLock<SharedHttpClient>>,
    config: Arc<OnceCell<SdkConfig>>,
}

impl AwsBase {
    /// The configuration from the environment (the SDK's default chains), with the one HTTP
    /// client every service client built from it shares.
    pub async fn config(&self) -> &SdkConfig {
        let http = self.http_client();
        self.config.get_or_init(|| aws_config::defaults(BehaviorVersion::latest()).http_client(http).load()).await
    }

    /// The one HTTPS client, for clients configured apart from the environment (the broker's,
    /// from a mount's root configuration): rustls on aws-lc, the crypto the rest of Hangar uses,
    /// trusting the system's roots as the SDK does by default. Its connector and TLS
    /// configuration are built on the first call that needs them, then reused.
    pub fn http_client(&self) -> SharedHttpClient {
        let build = || aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc));
        self.http.get_or_init(|| build().build_https()).clone()
    }
}
