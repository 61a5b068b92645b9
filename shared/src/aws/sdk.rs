//! The real [`Cloud`]: one IAM and one STS client, built once from the engine's root settings
//! and shared by every call, as the Vault AWS secrets engine's client is.

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_iam::config::Credentials;
use aws_sdk_iam::types::Tag;
use aws_sdk_sts::types::PolicyDescriptorType;

use super::errors::{incomplete, timestamp, unless_gone, OrCloudError};
use super::web_identity::WebIdentityCredentials;
use super::{
    AccessKey, AccessKeyInfo, Cloud, CloudError, CloudSettings, Deletion, Fault, GroupPolicies, IamUser,
    StsCredentials, StsDuration,
};

/// The provider name the SDK reports for the engine's static root keys.
const STATIC_PROVIDER: &str = "broker-config";

/// [`Cloud`] on aws-sdk-iam and aws-sdk-sts.
pub(super) struct SdkCloud {
    iam: aws_sdk_iam::Client,
    sts: aws_sdk_sts::Client,
}

impl SdkCloud {
    pub(super) async fn connect(
        settings: &CloudSettings,
        http: aws_smithy_runtime_api::client::http::SharedHttpClient,
    ) -> Self {
        let region = Region::new(settings.region.clone());
        let mut loader = aws_config::defaults(BehaviorVersion::latest()).region(region).http_client(http);
        if settings.web_identity.is_some() {
            // The identity's credentials are set on each client below; no chain is searched.
            loader = loader.no_credentials();
        } else if let (Some(access_key), Some(secret_key)) = (&settings.access_key, &settings.secret_key) {
            let credentials = Credentials::new(access_key, secret_key, None, None, STATIC_PROVIDER);
            loader = loader.credentials_provider(credentials);
        }
        // No call may hang the broker: a black-holed endpoint fails the call (an AWS-side
        // failure) once these run out, retries included.
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(settings.connect_timeout)
            .operation_timeout(settings.operation_timeout)
            .build();
        loader = loader.timeout_config(timeouts);
        if settings.max_retries >= 0 {
            let attempts = u32::try_from(settings.max_retries.saturating_add(1)).unwrap_or(u32::MAX);
            loader = loader.retry_config(RetryConfig::standard().with_max_attempts(attempts));
        }
        let sdk = loader.load().await;

        let mut iam = aws_sdk_iam::config::Builder::from(&sdk);
        if let Some(endpoint) = endpoint(&settings.iam_endpoint) {
            iam = iam.endpoint_url(endpoint);
        }
        let mut sts = aws_sdk_sts::config::Builder::from(&sdk);
        if let Some(endpoint) = endpoint(&settings.sts_endpoint) {
            sts = sts.endpoint_url(endpoint);
        }
        if let Some(identity) = &settings.web_identity {
            let assumer = aws_sdk_sts::Client::from_conf(sts.clone().build());
            let provider = WebIdentityCredentials { sts: assumer, identity: identity.clone() };
            let provider = aws_credential_types::provider::SharedCredentialsProvider::new(provider);
            iam = iam.credentials_provider(provider.clone());
            sts = sts.credentials_provider(provider);
        }
        Self { iam: aws_sdk_iam::Client::from_conf(iam.build()), sts: aws_sdk_sts::Client::from_conf(sts.build()) }
    }
}

impl SdkCloud {
    /// Removes what a user may hold that the broker never gave it: a login profile, MFA devices
    /// (deactivated, and deleted when virtual), SSH public keys, signing certificates and
    /// service-specific credentials. Called only once IAM has refused to delete the user
    /// (`DeleteConflict`): Vault's IAM policy for the engine grants none of these calls, and an
    /// emulator may lack some, so each kind that cannot be listed or removed is logged and
    /// passed over; the second `DeleteUser` then says whether anything is left.
    async fn delete_strays(&self, name: &str) {
        let profile = self.iam.delete_login_profile().user_name(name).send().await;
        stray(name, unless_gone(profile.or_cloud("iam:DeleteLoginProfile").map(drop)));

        let devices = self.iam.list_mfa_devices().user_name(name).into_paginator().items().send();
        for device in stray(name, unless_gone(devices.try_collect().await.or_cloud("iam:ListMFADevices"))) {
            let serial = device.serial_number();
            let request = self.iam.deactivate_mfa_device().user_name(name).serial_number(serial);
            stray(name, unless_gone(request.send().await.or_cloud("iam:DeactivateMFADevice").map(drop)));
            // A virtual device's serial is its ARN (`arn:aws:iam::<account>:mfa/<name>`).
            if serial.starts_with("arn:") {
                let request = self.iam.delete_virtual_mfa_device().serial_number(serial);
                stray(name, unless_gone(request.send().await.or_cloud("iam:DeleteVirtualMFADevice").map(drop)));
            }
        }

        let ssh_keys = self.iam.list_ssh_public_keys().user_name(name).into_paginator().items().send();
        for key in stray(name, unless_gone(ssh_keys.try_collect().await.or_cloud("iam:ListSSHPublicKeys"))) {
            let request = self.iam.delete_ssh_public_key().user_name(name).ssh_public_key_id(key.ssh_public_key_id());
            stray(name, unless_gone(request.send().await.or_cloud("iam:DeleteSSHPublicKey").map(drop)));
        }

        let certificates = self.iam.list_signing_certificates().user_name(name).into_paginator().items().send();
        let certificates = unless_gone(certificates.try_collect().await.or_cloud("iam:ListSigningCertificates"));
        for certificate in stray(name, certificates) {
            let request =
                self.iam.delete_signing_certificate().user_name(name).certificate_id(certificate.certificate_id());
            stray(name, unless_gone(request.send().await.or_cloud("iam:DeleteSigningCertificate").map(drop)));
        }

        let listed = self.iam.list_service_specific_credentials().user_name(name).send().await;
        let listed = listed
            .or_cloud("iam:ListServiceSpecificCredentials")
            .map(|output| output.service_specific_credentials.unwrap_or_default());
        for credential in stray(name, unless_gone(listed)) {
            let request = self
                .iam
                .delete_service_specific_credential()
                .user_name(name)
                .service_specific_credential_id(credential.service_specific_credential_id());
            stray(name, unless_gone(request.send().await.or_cloud("iam:DeleteServiceSpecificCredential").map(drop)));
        }
    }
}

/// What a call about a user's strays gave, or nothing when it failed: the failure is logged,
/// since only the user's deletion decides whether it mattered.
fn stray<T: Default>(user: &str, result: Result<T, CloudError>) -> T {
    result.unwrap_or_else(|e| {
        tracing::warn!(user, operation = e.fault().operation(), error = %e, "passed over while deleting an IAM user");
        T::default()
    })
}

/// Whether IAM refused to delete an entity because it still holds something.
fn is_delete_conflict(e: &CloudError) -> bool {
    e.fault().code() == Some("DeleteConflict")
}

fn endpoint(configured: &Option<String>) -> Option<&str> {
    configured.as_deref().filter(|url| !url.is_empty())
}

fn iam_user(operation: &str, user: Option<&aws_sdk_iam::types::User>) -> Result<IamUser, CloudError> {
    let user = user.ok_or_else(|| incomplete(operation, "user"))?;
    Ok(IamUser {
        name: user.user_name().to_owned(),
        id: user.user_id().to_owned(),
        arn: user.arn().to_owned(),
        tags: user.tags().iter().map(|tag| (tag.key().to_owned(), tag.value().to_owned())).collect(),
    })
}

fn sts_credentials(
    operation: &str,
    credentials: Option<&aws_sdk_sts::types::Credentials>,
    arn: Option<&str>,
) -> Result<StsCredentials, CloudError> {
    let credentials = credentials.ok_or_else(|| incomplete(operation, "credentials"))?;
    Ok(StsCredentials {
        access_key: credentials.access_key_id().to_owned(),
        secret_key: credentials.secret_access_key().to_owned(),
        session_token: credentials.session_token().to_owned(),
        expiration: timestamp(credentials.expiration()),
        arn: arn.map(str::to_owned),
    })
}

/// `raw` with its `%XX` escapes decoded; `None` when an escape is malformed or the result is
/// not UTF-8.
fn percent_decoded(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))?;
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn policy_descriptors(policy_arns: &[String]) -> Option<Vec<PolicyDescriptorType>> {
    let descriptors: Vec<_> = policy_arns.iter().map(|arn| PolicyDescriptorType::builder().arn(arn).build()).collect();
    (!descriptors.is_empty()).then_some(descriptors)
}

#[async_trait]
impl Cloud for SdkCloud {
    async fn get_user(&self, name: Option<&str>) -> Result<IamUser, CloudError> {
        const OP: &str = "iam:GetUser";
        let output = self.iam.get_user().set_user_name(name.map(str::to_owned)).send().await.or_cloud(OP)?;
        iam_user(OP, output.user())
    }

    async fn create_user(
        &self,
        name: &str,
        path: Option<&str>,
        permissions_boundary: Option<&str>,
        tags: &[(String, String)],
    ) -> Result<IamUser, CloudError> {
        const OP: &str = "iam:CreateUser";
        let tags = tags
            .iter()
            .map(|(key, value)| Tag::builder().key(key).value(value).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CloudError::Invalid(Fault::refused(OP, &e.to_string())))?;
        let output = self
            .iam
            .create_user()
            .user_name(name)
            .set_path(path.map(str::to_owned))
            .set_permissions_boundary(permissions_boundary.map(str::to_owned))
            .set_tags((!tags.is_empty()).then_some(tags))
            .send()
            .await
            .or_cloud(OP)?;
        iam_user(OP, output.user())
    }

    async fn attach_user_policy(&self, user: &str, policy_arn: &str) -> Result<(), CloudError> {
        let request = self.iam.attach_user_policy().user_name(user).policy_arn(policy_arn);
        request.send().await.or_cloud("iam:AttachUserPolicy").map(drop)
    }

    async fn put_user_policy(&self, user: &str, policy_name: &str, document: &str) -> Result<(), CloudError> {
        let request = self.iam.put_user_policy().user_name(user).policy_name(policy_name).policy_document(document);
        request.send().await.or_cloud("iam:PutUserPolicy").map(drop)
    }

    async fn add_user_to_group(&self, user: &str, group: &str) -> Result<(), CloudError> {
        let request = self.iam.add_user_to_group().user_name(user).group_name(group);
        request.send().await.or_cloud("iam:AddUserToGroup").map(drop)
    }

    async fn create_access_key(&self, user: Option<&str>) -> Result<AccessKey, CloudError> {
        const OP: &str = "iam:CreateAccessKey";
        let output = self.iam.create_access_key().set_user_name(user.map(str::to_owned)).send().await.or_cloud(OP)?;
        let key = output.access_key().ok_or_else(|| incomplete(OP, "access key"))?;
        Ok(AccessKey { id: key.access_key_id().to_owned(), secret: key.secret_access_key().to_owned() })
    }

    async fn list_access_keys(&self, user: Option<&str>) -> Result<Vec<AccessKeyInfo>, CloudError> {
        let request = self.iam.list_access_keys().set_user_name(user.map(str::to_owned));
        let keys = request.into_paginator().items().send().try_collect().await.or_cloud("iam:ListAccessKeys")?;
        let info = keys.into_iter().filter_map(|key| {
            let created = key.create_date().and_then(timestamp);
            key.access_key_id.map(|id| AccessKeyInfo { id, created })
        });
        Ok(info.collect())
    }

    async fn delete_access_key(&self, user: Option<&str>, key_id: &str) -> Result<(), CloudError> {
        let request = self.iam.delete_access_key().set_user_name(user.map(str::to_owned)).access_key_id(key_id);
        request.send().await.or_cloud("iam:DeleteAccessKey").map(drop)
    }

    async fn delete_user(&self, name: &str) -> Result<Deletion, CloudError> {
        let keys = match self.list_access_keys(Some(name)).await {
            Err(CloudError::NotFound(_)) => return Ok(Deletion::Absent),
            keys => keys?,
        };
        for key in keys {
            unless_gone(self.delete_access_key(Some(name), &key.id).await)?;
        }

        let inline = self.iam.list_user_policies().user_name(name).into_paginator().items().send();
        for policy in unless_gone(inline.try_collect().await.or_cloud("iam:ListUserPolicies"))? {
            let request = self.iam.delete_user_policy().user_name(name).policy_name(policy);
            unless_gone(request.send().await.or_cloud("iam:DeleteUserPolicy").map(drop))?;
        }

        let attached = self.iam.list_attached_user_policies().user_name(name).into_paginator().items().send();
        let attached = unless_gone(attached.try_collect().await.or_cloud("iam:ListAttachedUserPolicies"))?;
        for arn in attached.iter().filter_map(|policy| policy.policy_arn()) {
            let request = self.iam.detach_user_policy().user_name(name).policy_arn(arn);
            unless_gone(request.send().await.or_cloud("iam:DetachUserPolicy").map(drop))?;
        }

        let groups = self.iam.list_groups_for_user().user_name(name).into_paginator().items().send();
        for group in unless_gone(groups.try_collect().await.or_cloud("iam:ListGroupsForUser"))? {
            let request = self.iam.remove_user_from_group().user_name(name).group_name(group.group_name());
            unless_gone(request.send().await.or_cloud("iam:RemoveUserFromGroup").map(drop))?;
        }

        let deleted = self.iam.delete_user().user_name(name).send().await.or_cloud("iam:DeleteUser").map(drop);
        match unless_gone(deleted) {
            Err(e) if is_delete_conflict(&e) => {
                self.delete_strays(name).await;
                let again = self.iam.delete_user().user_name(name).send().await.or_cloud("iam:DeleteUser");
                unless_gone(again.map(drop))?;
            }
            other => other?,
        }
        Ok(Deletion::Deleted)
    }

    async fn group_policies(&self, group: &str) -> Result<GroupPolicies, CloudError> {
        let attached = self.iam.list_attached_group_policies().group_name(group).into_paginator().items().send();
        let attached = attached.try_collect().await.or_cloud("iam:ListAttachedGroupPolicies")?;
        let policy_arns = attached.iter().filter_map(|policy| policy.policy_arn()).map(str::to_owned).collect();
        let names = self.iam.list_group_policies().group_name(group).into_paginator().items().send();
        let names = names.try_collect().await.or_cloud("iam:ListGroupPolicies")?;
        let mut documents = Vec::with_capacity(names.len());
        for name in names {
            const OP: &str = "iam:GetGroupPolicy";
            let output = self.iam.get_group_policy().group_name(group).policy_name(name).send().await.or_cloud(OP)?;
            // IAM returns inline documents URL-encoded (RFC 3986), as Vault's QueryUnescape expects.
            let document = percent_decoded(output.policy_document()).ok_or_else(|| {
                CloudError::Invalid(Fault::refused(OP, "the policy document is not URL-encoded UTF-8"))
            })?;
            documents.push(document);
        }
        Ok(GroupPolicies { documents, policy_arns })
    }

    async fn assume_role(
        &self,
        role_arn: &str,
        session_name: &str,
        policy: Option<&str>,
        policy_arns: &[String],
        duration: StsDuration,
    ) -> Result<StsCredentials, CloudError> {
        const OP: &str = "sts:AssumeRole";
        let output = self
            .sts
            .assume_role()
            .role_arn(role_arn)
            .role_session_name(session_name)
            .set_policy(policy.map(str::to_owned))
            .set_policy_arns(policy_descriptors(policy_arns))
            .duration_seconds(duration.as_duration_seconds())
            .send()
            .await
            .or_cloud(OP)?;
        sts_credentials(OP, output.credentials(), output.assumed_role_user().map(|user| user.arn()))
    }

    async fn get_federation_token(
        &self,
        name: &str,
        policy: Option<&str>,
        policy_arns: &[String],
        duration: StsDuration,
    ) -> Result<StsCredentials, CloudError> {
        const OP: &str = "sts:GetFederationToken";
        let output = self
            .sts
            .get_federation_token()
            .name(name)
            .set_policy(policy.map(str::to_owned))
            .set_policy_arns(policy_descriptors(policy_arns))
            .duration_seconds(duration.as_duration_seconds())
            .send()
            .await
            .or_cloud(OP)?;
        sts_credentials(OP, output.credentials(), output.federated_user().map(|user| user.arn()))
    }

    async fn get_session_token(
        &self,
        duration: StsDuration,
        mfa_serial: Option<&str>,
        mfa_code: Option<&str>,
    ) -> Result<StsCredentials, CloudError> {
        const OP: &str = "sts:GetSessionToken";
        let output = self
            .sts
            .get_session_token()
            .duration_seconds(duration.as_duration_seconds())
            .set_serial_number(mfa_serial.map(str::to_owned))
            .set_token_code(mfa_code.map(str::to_owned))
            .send()
            .await
            .or_cloud(OP)?;
        sts_credentials(OP, output.credentials(), None)
    }
}
