//! An in-memory stand-in for IAM and STS, so in-process figures measure Hangar and not AWS (or
//! moto): every call answers at once and is counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use hangar::aws::{
    AccessKey, AccessKeyInfo, Cloud, CloudError, CloudSettings, Deletion, GroupPolicies, IamUser, StsCredentials,
    StsDuration,
};
use hangar::ids::random_token;

#[derive(Default)]
pub struct FakeCloud {
    pub calls: AtomicU64,
}

/// The settings the broker derives from [`crate::api::Api::mount_aws`] without endpoints: the
/// key under which the fake must be installed in the state's client cache.
pub fn settings_of_bench_mount() -> CloudSettings {
    CloudSettings {
        access_key: Some("bench".into()),
        secret_key: Some("bench-secret".into()),
        region: "us-east-1".into(),
        iam_endpoint: None,
        sts_endpoint: None,
        max_retries: -1,
        connect_timeout: std::time::Duration::from_secs(3),
        operation_timeout: std::time::Duration::from_secs(20),
        web_identity: None,
    }
}

/// Installs a fake as the client of the bench mount's root configuration.
pub async fn install(state: &hangar::state::AppState) -> Arc<FakeCloud> {
    let fake = Arc::new(FakeCloud::default());
    state.clouds.lock().await.push((settings_of_bench_mount(), fake.clone()));
    fake
}

impl FakeCloud {
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn user(&self, name: &str) -> IamUser {
        self.calls.fetch_add(1, Ordering::Relaxed);
        IamUser {
            name: name.into(),
            // Stable per name, as IAM's is for a user that is not deleted: rotation compares it.
            id: format!("AIDA{}", hangar::auth::hash_secret(name)[..16].to_uppercase()),
            arn: format!("arn:aws:iam::123456789012:user/{name}"),
            tags: Vec::new(),
        }
    }

    /// Credentials that live as long as asked, as STS grants them.
    fn credentials(&self, arn: Option<String>, duration: StsDuration) -> StsCredentials {
        self.calls.fetch_add(1, Ordering::Relaxed);
        StsCredentials {
            access_key: format!("ASIA{}", random_token(16)),
            secret_key: random_token(40),
            session_token: random_token(64),
            expiration: Some(chrono::Utc::now() + chrono::Duration::seconds(duration.as_duration_seconds().into())),
            arn,
        }
    }

    fn done(&self) -> Result<(), CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[async_trait]
impl Cloud for FakeCloud {
    async fn get_user(&self, name: Option<&str>) -> Result<IamUser, CloudError> {
        Ok(self.user(name.unwrap_or("root")))
    }

    async fn create_user(
        &self,
        name: &str,
        _path: Option<&str>,
        _boundary: Option<&str>,
        _tags: &[(String, String)],
    ) -> Result<IamUser, CloudError> {
        Ok(self.user(name))
    }

    async fn attach_user_policy(&self, _user: &str, _policy_arn: &str) -> Result<(), CloudError> {
        self.done()
    }

    async fn put_user_policy(&self, _user: &str, _name: &str, _document: &str) -> Result<(), CloudError> {
        self.done()
    }

    async fn add_user_to_group(&self, _user: &str, _group: &str) -> Result<(), CloudError> {
        self.done()
    }

    async fn create_access_key(&self, _user: Option<&str>) -> Result<AccessKey, CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(AccessKey { id: format!("AKIA{}", random_token(16)), secret: random_token(40) })
    }

    async fn list_access_keys(&self, _user: Option<&str>) -> Result<Vec<AccessKeyInfo>, CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(Vec::new())
    }

    async fn delete_access_key(&self, _user: Option<&str>, _key_id: &str) -> Result<(), CloudError> {
        self.done()
    }

    async fn delete_user(&self, _name: &str) -> Result<Deletion, CloudError> {
        self.done().map(|()| Deletion::Deleted)
    }

    async fn group_policies(&self, _group: &str) -> Result<GroupPolicies, CloudError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(GroupPolicies::default())
    }

    async fn assume_role(
        &self,
        role_arn: &str,
        session_name: &str,
        _policy: Option<&str>,
        _policy_arns: &[String],
        duration: StsDuration,
    ) -> Result<StsCredentials, CloudError> {
        Ok(self.credentials(Some(format!("{role_arn}/{session_name}")), duration))
    }

    async fn get_federation_token(
        &self,
        name: &str,
        _policy: Option<&str>,
        _policy_arns: &[String],
        duration: StsDuration,
    ) -> Result<StsCredentials, CloudError> {
        Ok(self.credentials(Some(format!("arn:aws:sts::123456789012:federated-user/{name}")), duration))
    }

    async fn get_session_token(
        &self,
        duration: StsDuration,
        _mfa_serial: Option<&str>,
        _mfa_code: Option<&str>,
    ) -> Result<StsCredentials, CloudError> {
        Ok(self.credentials(None, duration))
    }
}
