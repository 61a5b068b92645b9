//! The credential broker's calls to AWS IAM and STS, behind the small [`Cloud`] trait so that
//! the engine's logic (roles, leases, rotation, rollback) does not depend on the SDK and can be
//! tested against a fake. [`connect`] builds the one real implementation, on aws-sdk-iam and
//! aws-sdk-sts.

mod base;
mod breaker;
mod errors;
mod sdk;
mod web_identity;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use base::AwsBase;
pub use breaker::Breaker;

/// How the broker reaches AWS: the engine's root configuration, already resolved.
#[derive(Clone, PartialEq, Eq)]
pub struct CloudSettings {
    /// Static root access key id; used only together with `secret_key`.
    pub access_key: Option<String>,
    /// Static root secret key; used only together with `access_key`.
    pub secret_key: Option<String>,
    /// The region of the STS endpoint and of request signing.
    pub region: String,
    /// A custom IAM endpoint URL; `None` (or empty) for AWS's own.
    pub iam_endpoint: Option<String>,
    /// A custom STS endpoint URL; `None` (or empty) for AWS's own.
    pub sts_endpoint: Option<String>,
    /// Retries of recoverable errors: -1 (or any negative) for the SDK's default, else
    /// `max_retries + 1` attempts in all.
    pub max_retries: i64,
    /// How long a connection may take to open.
    pub connect_timeout: std::time::Duration,
    /// How long one operation may take, all its attempts included.
    pub operation_timeout: std::time::Duration,
    /// Plugin workload identity: the calls are signed with credentials of `role_arn`, assumed
    /// with an identity token Hangar signs (instead of static keys or the default chain).
    pub web_identity: Option<WebIdentity>,
}

/// What [`CloudSettings::web_identity`] assumes, and with which tokens.
#[derive(Clone)]
pub struct WebIdentity {
    pub role_arn: String,
    pub token: crate::identity::TokenRequest,
    pub signer: crate::identity::SharedTokenSigner,
}

/// Two settings are the same client when they assume the same role with the same tokens.
impl PartialEq for WebIdentity {
    fn eq(&self, other: &Self) -> bool {
        self.role_arn == other.role_arn && self.token == other.token && Arc::ptr_eq(&self.signer, &other.signer)
    }
}

impl Eq for WebIdentity {}

impl fmt::Debug for WebIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebIdentity").field("role_arn", &self.role_arn).field("token", &self.token).finish()
    }
}

impl fmt::Debug for CloudSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudSettings")
            .field("access_key", &self.access_key)
            .field("secret_key", &self.secret_key.as_ref().map(|_| "<redacted>"))
            .field("region", &self.region)
            .field("iam_endpoint", &self.iam_endpoint)
            .field("sts_endpoint", &self.sts_endpoint)
            .field("max_retries", &self.max_retries)
            .field("connect_timeout", &self.connect_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("web_identity", &self.web_identity)
            .finish()
    }
}

/// An IAM user as IAM describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamUser {
    /// The user name.
    pub name: String,
    /// IAM's stable unique id (`AIDA…`).
    pub id: String,
    /// The user's ARN, path included.
    pub arn: String,
    /// Its tags, as (key, value).
    pub tags: Vec<(String, String)>,
}

/// What [`Cloud::delete_user`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// The user existed, and it is gone now with everything it held.
    Deleted,
    /// IAM knew no such user when asked first.
    Absent,
}

/// A newly created access key: the only time IAM reveals its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessKey {
    /// The access key id.
    pub id: String,
    /// The secret access key.
    pub secret: String,
}

impl fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessKey").field("id", &self.id).field("secret", &"<redacted>").finish()
    }
}

/// An existing access key of a user, as listed (without its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessKeyInfo {
    /// The access key id.
    pub id: String,
    /// When the key was created, which orders keys for rotation.
    pub created: Option<DateTime<Utc>>,
}

/// How long STS credentials are asked to live: whole seconds within what some STS call accepts
/// (15 minutes to 36 hours), so that it reaches the SDK's `i32` without a cast that could wrap.
/// Each call's own, narrower, limit is the caller's to check (`AssumeRole`: at most 12 hours).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StsDuration(i32);

impl StsDuration {
    /// The shortest lifetime STS grants: 15 minutes.
    pub const MIN_SECS: u64 = 900;
    /// The longest `sts:AssumeRole` grants: 12 hours (a role's own maximum may be lower).
    pub const ASSUME_ROLE_MAX_SECS: u64 = 43_200;
    /// The longest `sts:GetFederationToken` and `sts:GetSessionToken` grant: 36 hours.
    pub const MAX_SECS: u64 = 129_600;

    /// `secs` seconds, if within [`Self::MIN_SECS`]..=[`Self::MAX_SECS`].
    pub fn from_secs(secs: u64) -> Option<Self> {
        (Self::MIN_SECS..=Self::MAX_SECS).contains(&secs).then(|| i32::try_from(secs).ok().map(Self)).flatten()
    }

    /// The lifetime in seconds.
    pub fn secs(self) -> u64 {
        u64::from(self.0.unsigned_abs())
    }

    /// The lifetime as the SDK's `DurationSeconds` takes it.
    pub fn as_duration_seconds(self) -> i32 {
        self.0
    }
}

/// An IAM group's policies, as STS calls combine them: the inline documents (decoded JSON) and
/// the attached managed policies' ARNs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupPolicies {
    /// The inline policy documents, in IAM's order.
    pub documents: Vec<String>,
    /// The ARNs of the attached managed policies.
    pub policy_arns: Vec<String>,
}

/// Temporary credentials from STS.
#[derive(Clone, PartialEq, Eq)]
pub struct StsCredentials {
    /// The temporary access key id.
    pub access_key: String,
    /// The temporary secret key.
    pub secret_key: String,
    /// The session token that must accompany the keys.
    pub session_token: String,
    /// When the credentials stop working.
    pub expiration: Option<DateTime<Utc>>,
    /// The assumed-role or federated user ARN; `None` for session tokens.
    pub arn: Option<String>,
}

impl fmt::Debug for StsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StsCredentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("session_token", &"<redacted>")
            .field("expiration", &self.expiration)
            .field("arn", &self.arn)
            .finish()
    }
}

/// Why a call to AWS failed, by what the caller can do about it. Each carries a [`Fault`]: it
/// reads (`Display`, and as a `str`) as the operation, AWS's error code and the service's
/// message, never credentials nor the SDK's debug output.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The entity does not exist (IAM's `NoSuchEntity`).
    #[error("{0}")]
    NotFound(Fault),
    /// An account quota is reached, e.g. a user already has two access keys.
    #[error("{0}")]
    LimitExceeded(Fault),
    /// AWS rate-limited the request, beyond the SDK's own retries.
    #[error("{0}")]
    Throttled(Fault),
    /// The root credentials are invalid, expired or not allowed to do this, or MFA failed.
    #[error("{0}")]
    Denied(Fault),
    /// AWS rejected the request's content: a malformed policy, a bad name or parameter.
    #[error("{0}")]
    Invalid(Fault),
    /// Anything else: a conflict or an unknown client error (the request's), a service failure or
    /// no answer at all (AWS's side: [`Fault::is_on_aws_side`]).
    #[error("{0}")]
    Other(Fault),
}

impl CloudError {
    /// What AWS said, or what kept it from saying anything.
    pub fn fault(&self) -> &Fault {
        match self {
            CloudError::NotFound(fault)
            | CloudError::LimitExceeded(fault)
            | CloudError::Throttled(fault)
            | CloudError::Denied(fault)
            | CloudError::Invalid(fault)
            | CloudError::Other(fault) => fault,
        }
    }

    /// The kind's name, for the log.
    pub fn kind(&self) -> &'static str {
        match self {
            CloudError::NotFound(_) => "NotFound",
            CloudError::LimitExceeded(_) => "LimitExceeded",
            CloudError::Throttled(_) => "Throttled",
            CloudError::Denied(_) => "Denied",
            CloudError::Invalid(_) => "Invalid",
            CloudError::Other(_) => "Other",
        }
    }

    /// Whether the failure is AWS's or the network's rather than the request's (throttling, a
    /// service failure, no answer): the request may succeed when retried, and the caller learns
    /// nothing from AWS's details.
    pub fn is_on_aws_side(&self) -> bool {
        match self {
            CloudError::Throttled(_) => true,
            CloudError::Other(fault) => fault.is_on_aws_side(),
            _ => false,
        }
    }
}

/// One failed call to AWS: what a caller may be told — the operation, AWS's error code and the
/// service's own message — apart from what only the log may hold: the SDK's account of a
/// failure that has no code (it names endpoints and addresses) and AWS's request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault(Box<FaultParts>);

/// Boxed, so that a `Result` carrying a [`CloudError`] stays small.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FaultParts {
    operation: String,
    code: Option<String>,
    request_id: Option<String>,
    cause: Option<String>,
    on_aws_side: bool,
    /// `<operation>: <code>: <message>`, or `<operation>: <what happened>` without a code.
    summary: String,
}

impl Fault {
    /// AWS answered `operation` with the error `code` and its `message`; `on_aws_side` when the
    /// code or the HTTP status puts the failure on AWS's side.
    pub fn answered(
        operation: &str,
        code: &str,
        message: Option<&str>,
        request_id: Option<String>,
        on_aws_side: bool,
    ) -> Self {
        let summary = match message {
            Some(message) => format!("{operation}: {}: {}", capped(code), capped(message)),
            None => format!("{operation}: {}", capped(code)),
        };
        Fault(Box::new(FaultParts {
            operation: operation.to_owned(),
            code: Some(capped(code).into_owned()),
            request_id,
            cause: None,
            on_aws_side,
            summary,
        }))
    }

    /// `operation` got no AWS error to read: `what` says what happened in a few words, `cause` is
    /// the SDK's account, for the log only, cut at [`MAX_MESSAGE_BYTES`] (in full it ran to
    /// 1.5 KB of debug output a failure).
    pub fn unanswered(operation: &str, what: &str, cause: String, request_id: Option<String>) -> Self {
        Fault(Box::new(FaultParts {
            operation: operation.to_owned(),
            code: None,
            request_id,
            cause: Some(capped(&cause).into_owned()),
            on_aws_side: true,
            summary: format!("{operation}: {what}"),
        }))
    }

    /// The adapter refused to send `operation`: `message` says why (the request's fault).
    pub fn refused(operation: &str, message: &str) -> Self {
        Fault(Box::new(FaultParts {
            operation: operation.to_owned(),
            code: None,
            request_id: None,
            cause: None,
            on_aws_side: false,
            summary: format!("{operation}: {message}"),
        }))
    }

    /// The operation, e.g. `iam:CreateUser`.
    pub fn operation(&self) -> &str {
        &self.0.operation
    }

    /// AWS's error code, e.g. `NoSuchEntity`, when AWS answered with one.
    pub fn code(&self) -> Option<&str> {
        self.0.code.as_deref()
    }

    /// AWS's id of the failed request, when AWS answered.
    pub fn request_id(&self) -> Option<&str> {
        self.0.request_id.as_deref()
    }

    /// The SDK's account of a failure without an AWS error: for the log, never for a caller.
    pub fn cause(&self) -> Option<&str> {
        self.0.cause.as_deref()
    }

    /// Whether the failure is AWS's or the network's rather than the request's.
    pub fn is_on_aws_side(&self) -> bool {
        self.0.on_aws_side
    }
}

/// The longest service message a [`Fault`] keeps, in bytes: a caller is shown it, and an
/// endpoint the mount's configuration names could answer anything.
pub const MAX_MESSAGE_BYTES: usize = 512;

/// `message` cut at [`MAX_MESSAGE_BYTES`] (on a character boundary), marked when cut.
fn capped(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.into();
    }
    let end = (0..=MAX_MESSAGE_BYTES).rev().find(|&i| message.is_char_boundary(i)).unwrap_or(0);
    format!("{}… ({} bytes in all)", &message[..end], message.len()).into()
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.summary)
    }
}

/// A fault reads as its summary, so that it can be searched and compared like the message it is.
impl std::ops::Deref for Fault {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0.summary
    }
}

/// The IAM and STS operations the credential broker uses.
#[async_trait]
pub trait Cloud: Send + Sync + 'static {
    /// Reads a user; `None`: the caller's own user (GetUser without a name).
    async fn get_user(&self, name: Option<&str>) -> Result<IamUser, CloudError>;

    /// Creates a user; `path` defaults to `/`, and no boundary is attached without one.
    async fn create_user(
        &self,
        name: &str,
        path: Option<&str>,
        permissions_boundary: Option<&str>,
        tags: &[(String, String)],
    ) -> Result<IamUser, CloudError>;

    /// Attaches a managed policy to a user.
    async fn attach_user_policy(&self, user: &str, policy_arn: &str) -> Result<(), CloudError>;

    /// Adds or replaces an inline policy of a user.
    async fn put_user_policy(&self, user: &str, policy_name: &str, document: &str) -> Result<(), CloudError>;

    /// Adds a user to an existing group.
    async fn add_user_to_group(&self, user: &str, group: &str) -> Result<(), CloudError>;

    /// Creates an access key for a user; `None`: for the caller's own user.
    async fn create_access_key(&self, user: Option<&str>) -> Result<AccessKey, CloudError>;

    /// Lists a user's access keys (all pages); `None`: the caller's own.
    async fn list_access_keys(&self, user: Option<&str>) -> Result<Vec<AccessKeyInfo>, CloudError>;

    /// Deletes an access key of a user; `None`: of the caller's own user.
    async fn delete_access_key(&self, user: Option<&str>, key_id: &str) -> Result<(), CloudError>;

    /// Deletes a user and everything it holds, as Vault does and with the calls its IAM policy
    /// grants: the access keys, inline and attached policies and group memberships (what the
    /// broker gives a user), then the user. Only when IAM refuses that (`DeleteConflict`) are
    /// the rest listed and removed (login profile, MFA devices, SSH public keys, signing
    /// certificates, service-specific credentials), each kind passed over, logged, where IAM
    /// denies or lacks the call; then the user once more. A piece already gone is not an
    /// error; a user IAM did not know from the first call is
    /// [`Deletion::Absent`], which right after creation may be IAM's eventual consistency, so
    /// the caller decides what it means.
    async fn delete_user(&self, name: &str) -> Result<Deletion, CloudError>;

    /// Reads a group's inline policy documents and attached managed policy ARNs (all pages), as
    /// Vault's `getGroupPolicies` does for STS roles with `iam_groups`.
    async fn group_policies(&self, group: &str) -> Result<GroupPolicies, CloudError>;

    /// Assumes a role; `policy` and `policy_arns` narrow what the session may do.
    async fn assume_role(
        &self,
        role_arn: &str,
        session_name: &str,
        policy: Option<&str>,
        policy_arns: &[String],
        duration: StsDuration,
    ) -> Result<StsCredentials, CloudError>;

    /// Gets credentials of a federated user `name`, limited by `policy` and `policy_arns`.
    async fn get_federation_token(
        &self,
        name: &str,
        policy: Option<&str>,
        policy_arns: &[String],
        duration: StsDuration,
    ) -> Result<StsCredentials, CloudError>;

    /// Gets a session token for the caller's own user, with MFA when `mfa_serial` is given.
    async fn get_session_token(
        &self,
        duration: StsDuration,
        mfa_serial: Option<&str>,
        mfa_code: Option<&str>,
    ) -> Result<StsCredentials, CloudError>;
}

/// A [`Cloud`] shared between requests.
pub type SharedCloud = Arc<dyn Cloud>;

/// Builds the real implementation: workload identity when configured, else static keys when
/// given, else the default AWS credential chain (env vars, shared files, then the container/instance
/// role — on Lambda the function's role). Honours region, the two endpoints and max_retries.
/// The clients are built once here and reused by every call.
pub async fn connect(settings: &CloudSettings, base: &AwsBase) -> SharedCloud {
    Arc::new(sdk::SdkCloud::connect(settings, base.http_client()).await)
}
