//! A [`Cloud`] for one run of the scheduled job over one mount: once a call gets no answer from
//! AWS (a timeout, a refused or black-holed connection), every later call of the run fails at
//! once instead of waiting out its own timeout, so a mount whose endpoint is down costs the run
//! one timeout, not one a role or a lease, and the other mounts' work goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    AccessKey, AccessKeyInfo, Cloud, CloudError, Deletion, Fault, GroupPolicies, IamUser, SharedCloud, StsCredentials,
    StsDuration,
};

/// `inner`, given up on after its first call that AWS did not answer.
pub struct Breaker {
    inner: SharedCloud,
    open: AtomicBool,
}

impl Breaker {
    pub fn wrap(inner: SharedCloud) -> SharedCloud {
        Arc::new(Breaker { inner, open: AtomicBool::new(false) })
    }

    /// Runs `call` unless an earlier one went unanswered; notes it if this one does.
    async fn call<T>(
        &self,
        operation: &str,
        call: impl std::future::Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        if self.open.load(Ordering::Relaxed) {
            let what = "skipped: AWS did not answer an earlier call of this run";
            return Err(CloudError::Other(Fault::unanswered(operation, what, what.to_owned(), None)));
        }
        let result = call.await;
        if let Err(e) = &result {
            if e.fault().code().is_none() && e.is_on_aws_side() {
                self.open.store(true, Ordering::Relaxed);
            }
        }
        result
    }
}

#[async_trait]
impl Cloud for Breaker {
    async fn get_user(&self, name: Option<&str>) -> Result<IamUser, CloudError> {
        self.call("iam:GetUser", self.inner.get_user(name)).await
    }

    async fn create_user(
        &self,
        name: &str,
        path: Option<&str>,
        permissions_boundary: Option<&str>,
        tags: &[(String, String)],
    ) -> Result<IamUser, CloudError> {
        self.call("iam:CreateUser", self.inner.create_user(name, path, permissions_boundary, tags)).await
    }

    async fn attach_user_policy(&self, user: &str, policy_arn: &str) -> Result<(), CloudError> {
        self.call("iam:AttachUserPolicy", self.inner.attach_user_policy(user, policy_arn)).await
    }

    async fn put_user_policy(&self, user: &str, policy_name: &str, document: &str) -> Result<(), CloudError> {
        self.call("iam:PutUserPolicy", self.inner.put_user_policy(user, policy_name, document)).await
    }

    async fn add_user_to_group(&self, user: &str, group: &str) -> Result<(), CloudError> {
        self.call("iam:AddUserToGroup", self.inner.add_user_to_group(user, group)).await
    }

    async fn create_access_key(&self, user: Option<&str>) -> Result<AccessKey, CloudError> {
        self.call("iam:CreateAccessKey", self.inner.create_access_key(user)).await
    }

    async fn list_access_keys(&self, user: Option<&str>) -> Result<Vec<AccessKeyInfo>, CloudError> {
        self.call("iam:ListAccessKeys", self.inner.list_access_keys(user)).await
    }

    async fn delete_access_key(&self, user: Option<&str>, key_id: &str) -> Result<(), CloudError> {
        self.call("iam:DeleteAccessKey", self.inner.delete_access_key(user, key_id)).await
    }

    async fn delete_user(&self, name: &str) -> Result<Deletion, CloudError> {
        self.call("iam:DeleteUser", self.inner.delete_user(name)).await
    }

    async fn group_policies(&self, group: &str) -> Result<GroupPolicies, CloudError> {
        self.call("iam:ListGroupPolicies", self.inner.group_policies(group)).await
    }

    async fn assume_role(
        &self,
        role_arn: &str,
        session_name: &str,
        policy: Option<&str>,
        policy_arns: &[String],
        duration: StsDuration,
    ) -> Result<StsCredentials, CloudError> {
        let call = self.inner.assume_role(role_arn, session_name, policy, policy_arns, duration);
        self.call("sts:AssumeRole", call).await
    }

    async fn get_federation_token(
        &self,
        name: &str,
        policy: Option<&str>,
        policy_arns: &[String],
        duration: StsDuration,
    ) -> Result<StsCredentials, CloudError> {
        self.call("sts:GetFederationToken", self.inner.get_federation_token(name, policy, policy_arns, duration)).await
    }

    async fn get_session_token(
        &self,
        duration: StsDuration,
        mfa_serial: Option<&str>,
        mfa_code: Option<&str>,
    ) -> Result<StsCredentials, CloudError> {
        self.call("sts:GetSessionToken", self.inner.get_session_token(duration, mfa_serial, mfa_code)).await
    }
}
