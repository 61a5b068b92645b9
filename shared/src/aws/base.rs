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
//!
//! Which authorities that client trusts is [`AwsTrust`]: by default Amazon Trust Services'
//! five roots, compiled in (`amazon-roots.pem`), which every AWS endpoint chains to. Parsing the
//! platform's bundle of some 140 roots (or, on a host, a directory of them) was the largest
//! single cost of a cold start (BENCHMARKS.md, "Cold init"), and trusting only AWS's own CAs for
//! calls that carry AWS credentials narrows who could intercept them. `HANGAR_AWS_TRUST=system`
//! trusts the platform's store instead, for an endpoint behind a private CA.

use std::sync::{Arc, OnceLock};

use aws_config::environment::credentials::EnvironmentVariableCredentialsProvider;
use aws_config::{BehaviorVersion, ConfigLoader, Region, SdkConfig};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use tokio::sync::OnceCell;

use crate::config::AwsTrust;

/// Amazon Root CA 1–4 and Starfield Services Root CA G2 (which cross-signs Amazon Root CA 1 for
/// older clients), as Mozilla's list (Debian's ca-certificates) has them.
const AMAZON_ROOTS: &str = include_str!("amazon-roots.pem");

/// The process's shared SDK configuration and HTTP client, each made on first use; clones share
/// them.
#[derive(Clone, Default)]
pub struct AwsBase {
    trust: AwsTrust,
    http: Arc<OnceLock<SharedHttpClient>>,
    config: Arc<OnceCell<SdkConfig>>,
}

impl AwsBase {
    /// A base whose clients trust `trust`'s authorities.
    pub fn new(trust: AwsTrust) -> Self {
        Self { trust, ..Self::default() }
    }

    /// The configuration from the environment (the SDK's default chains), with the one HTTP
    /// client every service client built from it shares.
    pub async fn config(&self) -> &SdkConfig {
        let http = self.http_client();
        self.config.get_or_init(|| loader(http).load()).await
    }

    /// The one HTTPS client, for clients configured apart from the environment (the broker's,
    /// from a mount's root configuration): rustls on aws-lc, the crypto the rest of Hangar uses,
    /// trusting [`AwsTrust`]'s roots. Its connector and TLS configuration are built on the first
    /// call that needs them, then reused.
    pub fn http_client(&self) -> SharedHttpClient {
        let trust = match self.trust {
            AwsTrust::Amazon => TrustStore::empty().with_native_roots(false).with_pem_certificate(AMAZON_ROOTS),
            AwsTrust::System => TrustStore::default(),
        };
        let build = || {
            let tls = TlsContext::builder().with_trust_store(trust).build().expect("a TLS context of roots alone");
            aws_smithy_http_client::Builder::new()
                .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
                .tls_context(tls)
                .build_https()
        };
        self.http.get_or_init(build).clone()
    }
}

/// The SDK's default loader, told outright what the environment already says. A region in
/// `AWS_REGION` and keys in `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (as Lambda sets them)
/// are what the default chains would take first, so building the rest of those chains at every
/// start (an STS client for web identity, the container and instance metadata clients, each with
/// its partition table) is work for nothing. Without them, the default chains as ever.
fn loader(http: SharedHttpClient) -> ConfigLoader {
    let set = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http);
    if let Some(region) = set("AWS_REGION") {
        loader = loader.region(Region::new(region));
    }
    if set("AWS_ACCESS_KEY_ID").is_some() && set("AWS_SECRET_ACCESS_KEY").is_some() {
        loader = loader.credentials_provider(EnvironmentVariableCredentialsProvider::new());
    }
    loader
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    use super::AMAZON_ROOTS;

    /// The SDK parses the compiled-in roots when it builds its connector and panics on a bad one.
    #[test]
    fn the_compiled_in_roots_are_amazons_five_and_all_parse() {
        let roots: Vec<CertificateDer> =
            CertificateDer::pem_slice_iter(AMAZON_ROOTS.as_bytes()).collect::<Result<_, _>>().unwrap();
        assert_eq!(roots.len(), 5);
        let mut store = rustls::RootCertStore::empty();
        let (valid, invalid) = store.add_parsable_certificates(roots);
        assert_eq!((valid, invalid), (5, 0));
        let subjects = AMAZON_ROOTS.lines().filter(|line| line.starts_with("# ")).collect::<Vec<_>>().join("\n");
        for name in [
            "Amazon Root CA 1",
            "Amazon Root CA 2",
            "Amazon Root CA 3",
            "Amazon Root CA 4",
            "Starfield Services Root Certificate Authority - G2",
        ] {
            assert!(subjects.contains(&format!("CN = {name} ")), "{name}: {subjects}");
        }
    }
}
