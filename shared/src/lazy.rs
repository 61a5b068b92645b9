//! A client built on first use. A function builds every adapter at its cold start, but most of
//! its requests call few of them: registry-api's GET module reads DynamoDB and never calls S3 or
//! KMS. Building an AWS SDK client parses the SDK's endpoint rules and partition table, a share
//! of a start worth not paying for a client the function may never call (BENCHMARKS.md, "Cold
//! init"). The AWS clients held this way build infallibly, so nothing fails later that would
//! have failed at the start; the HTTPS clients for calls out (the public registry proxy, VCS) are
//! held as a `Result` whose error the call reports, for a TLS configuration rustls would refuse
//! (the one compiled in never is).

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use aws_config::SdkConfig;

/// A `C` built by the first dereference, on the thread that makes it; clones share it.
pub struct LazyClient<C>(Arc<LazyLock<C, Box<dyn FnOnce() -> C + Send>>>);

impl<C> LazyClient<C> {
    /// A client `build` makes when it is first wanted.
    pub fn new(build: impl FnOnce() -> C + Send + 'static) -> Self {
        Self(Arc::new(LazyLock::new(Box::new(build))))
    }

    /// An AWS service client `build` makes from the process's shared configuration.
    pub fn of_sdk(sdk: &SdkConfig, build: fn(&SdkConfig) -> C) -> Self
    where
        C: 'static,
    {
        let sdk = sdk.clone();
        Self::new(move || build(&sdk))
    }
}

/// A client built already (tests, or a caller that has one).
impl<C: Send + 'static> From<C> for LazyClient<C> {
    fn from(client: C) -> Self {
        Self::new(move || client)
    }
}

impl<C> Deref for LazyClient<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.0
    }
}

impl<C> Clone for LazyClient<C> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<C> fmt::Debug for LazyClient<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyClient").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::LazyClient;

    #[test]
    fn a_client_is_built_once_on_first_use_and_shared_by_clones() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&builds);
        let client = LazyClient::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            "client".to_owned()
        });
        let clone = client.clone();
        assert_eq!(builds.load(Ordering::SeqCst), 0, "built before it was wanted");
        assert_eq!(clone.as_str(), "client");
        assert_eq!(client.as_str(), "client");
        assert_eq!(builds.load(Ordering::SeqCst), 1);
    }
}
