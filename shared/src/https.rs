//! The TLS configuration of Hangar's own HTTPS clients (the public registry proxy's upstream
//! calls, VCS fetches): rustls on aws-lc-rs, the crypto provider the AWS SDK's client already
//! links, so that the functions carry one crypto library, not two (reqwest's default is ring);
//! and Mozilla's roots compiled in (webpki-roots), the trust reqwest's default had.

use std::sync::Arc;

/// A client configuration for reqwest's `use_preconfigured_tls`.
pub fn client_tls() -> Result<rustls::ClientConfig, rustls::Error> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
