//! Credentials from plugin workload identity: an identity token Hangar signs for the mount,
//! traded with STS `AssumeRoleWithWebIdentity` for the configured role's credentials. The SDK's
//! identity cache keeps them until shortly before they expire, then asks again.

use std::fmt;

use aws_credential_types::provider::{self, error::CredentialsError, future, ProvideCredentials};
use aws_credential_types::Credentials;
use aws_sdk_sts::error::DisplayErrorContext;

use super::WebIdentity;
use crate::identity;

/// The provider name the SDK reports for these credentials.
const PROVIDER: &str = "hangar-workload-identity";

pub(super) struct WebIdentityCredentials {
    /// An STS client that signs nothing: `AssumeRoleWithWebIdentity` takes no credentials.
    pub(super) sts: aws_sdk_sts::Client,
    pub(super) identity: WebIdentity,
}

impl fmt::Debug for WebIdentityCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebIdentityCredentials").field("identity", &self.identity).finish()
    }
}

impl WebIdentityCredentials {
    async fn assume(&self) -> provider::Result {
        let token = identity::mint(self.identity.signer.as_ref(), &self.identity.token)
            .await
            .map_err(CredentialsError::provider_error)?;
        let output = self
            .sts
            .assume_role_with_web_identity()
            .role_arn(&self.identity.role_arn)
            .role_session_name(session_name(&self.identity.token.subject))
            .web_identity_token(token)
            .send()
            .await
            .map_err(|err| CredentialsError::provider_error(DisplayErrorContext(&err).to_string()))?;
        let credentials = output
            .credentials()
            .ok_or_else(|| CredentialsError::provider_error("AssumeRoleWithWebIdentity returned no credentials"))?;
        let expires = std::time::SystemTime::try_from(*credentials.expiration()).ok();
        Ok(Credentials::new(
            credentials.access_key_id(),
            credentials.secret_access_key(),
            Some(credentials.session_token().to_owned()),
            expires,
            PROVIDER,
        ))
    }
}

impl ProvideCredentials for WebIdentityCredentials {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.assume())
    }
}

/// A role session name from the token's subject: IAM allows `[\w+=,.@-]`, 2 to 64 characters.
fn session_name(subject: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c);
    let name: String = subject.chars().map(|c| if allowed(c) { c } else { '-' }).take(64).collect();
    if name.len() < 2 {
        "hangar".to_owned()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::session_name;

    #[test]
    fn session_names_hold_only_what_iam_allows() {
        assert_eq!(session_name("plugin-identity:root:secret:abc"), "plugin-identity-root-secret-abc");
        assert_eq!(session_name(":"), "hangar");
        assert_eq!(session_name(&"a".repeat(100)).len(), 64);
    }
}
