//! `hangar::aws` against IAM and STS on the moto emulator (see `support`): the broker's users,
//! keys and STS credentials exist only through these calls, so each is checked by reading the
//! result back with the plain SDK, and the error kinds the broker branches on (not found, the
//! two-keys limit) are pinned. What moto ignores (permissions boundaries, policy ARNs, MFA) or
//! never answers (throttling, denial) is checked against a canned stand-in that records requests.

use crate::support;

use std::sync::{Arc, Mutex};

use hangar::aws::{AwsBase, CloudError, CloudSettings, Deletion, SharedCloud};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The real client, on an SDK base of its own (as a fresh process has).
async fn connect(settings: &CloudSettings) -> SharedCloud {
    hangar::aws::connect(settings, &AwsBase::default()).await
}

const ASSUME_ROLE_TRUST: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sts:AssumeRole"}]}"#;
const READ_ONLY: &str =
    r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#;

/// The broker's cloud and a plain IAM client on the emulator (a failure when none is configured).
async fn moto() -> (SharedCloud, aws_sdk_iam::Client) {
    let support::Moto { endpoint, sdk } = support::moto().await;
    let cloud = connect(&CloudSettings {
        access_key: Some(crate::moto::ACCESS_KEY.into()),
        secret_key: Some(crate::moto::SECRET_KEY.into()),
        region: crate::moto::REGION.into(),
        iam_endpoint: Some(endpoint.clone()),
        sts_endpoint: Some(endpoint),
        max_retries: -1,
        connect_timeout: std::time::Duration::from_secs(3),
        operation_timeout: std::time::Duration::from_secs(20),
        web_identity: None,
    })
    .await;
    (cloud, aws_sdk_iam::Client::new(&sdk))
}

/// A new managed policy: its ARN.
async fn create_policy(iam: &aws_sdk_iam::Client) -> String {
    let created = iam
        .create_policy()
        .policy_name(support::unique_name("hangar-policy"))
        .policy_document(READ_ONLY)
        .send()
        .await
        .expect("create a managed policy");
    created.policy().and_then(|p| p.arn()).expect("policy ARN").to_owned()
}

async fn create_group(iam: &aws_sdk_iam::Client) -> String {
    let name = support::unique_name("hangar-group");
    iam.create_group().group_name(&name).send().await.expect("create a group");
    name
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn create_user_with_path_boundary_and_tags() {
    let (cloud, iam) = moto().await;
    let name = support::unique_name("hangar-user");
    let boundary = create_policy(&iam).await;
    let tags = [("team".to_owned(), "core".to_owned()), ("purpose".to_owned(), "test".to_owned())];

    let created = cloud.create_user(&name, Some("/hangar/"), Some(&boundary), &tags).await.expect("create user");
    assert_eq!(created.name, name);
    assert!(created.arn.ends_with(&format!(":user/hangar/{name}")), "{}", created.arn);
    assert!(!created.id.is_empty());
    assert_eq!(cloud.get_user(Some(&name)).await.expect("read the user back"), created);

    let described = iam.get_user().user_name(&name).send().await.expect("get user");
    assert_eq!(described.user().expect("user").path(), "/hangar/");
    let listed = iam.list_user_tags().user_name(&name).send().await.expect("list user tags");
    let mut listed: Vec<_> = listed.tags().iter().map(|t| (t.key().to_owned(), t.value().to_owned())).collect();
    listed.sort();
    let mut expected = tags.to_vec();
    expected.sort();
    assert_eq!(listed, expected);

    let plain = support::unique_name("hangar-user");
    let user = cloud.create_user(&plain, None, None, &[]).await.expect("create a user without extras");
    assert!(user.arn.ends_with(&format!(":user/{plain}")), "{}", user.arn);
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn get_user_of_a_missing_user_is_not_found() {
    let (cloud, _) = moto().await;
    let missing = support::unique_name("hangar-missing");
    match cloud.get_user(Some(&missing)).await {
        Err(CloudError::NotFound(message)) => {
            assert!(message.contains("iam:GetUser") && message.contains("NoSuchEntity"), "{message}")
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    let own = cloud.get_user(None).await.expect("the caller's own user");
    assert!(!own.name.is_empty() && own.arn.starts_with("arn:aws:iam::"), "{own:?}");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn policies_and_groups_reach_the_user() {
    let (cloud, iam) = moto().await;
    let name = support::unique_name("hangar-user");
    cloud.create_user(&name, None, None, &[]).await.expect("create user");
    let policy_arn = create_policy(&iam).await;
    let group = create_group(&iam).await;

    cloud.attach_user_policy(&name, &policy_arn).await.expect("attach a managed policy");
    cloud.put_user_policy(&name, "vault-inline", READ_ONLY).await.expect("put an inline policy");
    cloud.add_user_to_group(&name, &group).await.expect("add to a group");

    let attached = iam.list_attached_user_policies().user_name(&name).send().await.expect("list attached");
    let attached: Vec<_> = attached.attached_policies().iter().filter_map(|p| p.policy_arn()).collect();
    assert_eq!(attached, [policy_arn.as_str()]);
    let inline = iam.list_user_policies().user_name(&name).send().await.expect("list inline");
    assert_eq!(inline.policy_names(), ["vault-inline"]);
    let groups = iam.list_groups_for_user().user_name(&name).send().await.expect("list groups");
    let groups: Vec<_> = groups.groups().iter().map(|g| g.group_name()).collect();
    assert_eq!(groups, [group.as_str()]);

    let missing_group = support::unique_name("hangar-missing");
    let err = cloud.add_user_to_group(&name, &missing_group).await.expect_err("a missing group");
    assert!(matches!(err, CloudError::NotFound(_)), "{err:?}");
    let missing_policy = "arn:aws:iam::123456789012:policy/hangar-missing-policy";
    let err = cloud.attach_user_policy(&name, missing_policy).await.expect_err("a missing policy");
    assert!(matches!(err, CloudError::NotFound(_)), "{err:?}");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn access_keys_are_created_listed_limited_and_deleted() {
    let (cloud, _) = moto().await;
    let name = support::unique_name("hangar-user");
    cloud.create_user(&name, None, None, &[]).await.expect("create user");
    assert!(cloud.list_access_keys(Some(&name)).await.expect("list no keys").is_empty());

    let first = cloud.create_access_key(Some(&name)).await.expect("first key");
    let second = cloud.create_access_key(Some(&name)).await.expect("second key");
    assert!(!first.secret.is_empty() && first.id != second.id);
    assert!(!format!("{first:?}").contains(&first.secret), "Debug must not reveal the secret");

    let listed = cloud.list_access_keys(Some(&name)).await.expect("list keys");
    let mut ids: Vec<_> = listed.iter().map(|k| k.id.as_str()).collect();
    ids.sort();
    let mut expected = [first.id.as_str(), second.id.as_str()];
    expected.sort();
    assert_eq!(ids, expected);
    assert!(listed.iter().all(|k| k.created.is_some()), "{listed:?}");

    let err = cloud.create_access_key(Some(&name)).await.expect_err("a third key");
    assert!(matches!(err, CloudError::LimitExceeded(_)), "{err:?}");

    cloud.delete_access_key(Some(&name), &first.id).await.expect("delete a key");
    let listed = cloud.list_access_keys(Some(&name)).await.expect("list keys");
    assert_eq!(listed.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(), [second.id.as_str()]);
    let err = cloud.delete_access_key(Some(&name), &first.id).await.expect_err("a deleted key");
    assert!(matches!(err, CloudError::NotFound(_)), "{err:?}");

    let missing = support::unique_name("hangar-missing");
    let err = cloud.list_access_keys(Some(&missing)).await.expect_err("keys of a missing user");
    assert!(matches!(err, CloudError::NotFound(_)), "{err:?}");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn delete_user_removes_everything_and_is_idempotent() {
    let (cloud, iam) = moto().await;
    let name = support::unique_name("hangar-user");
    cloud.create_user(&name, Some("/hangar/"), None, &[("k".into(), "v".into())]).await.expect("create user");
    let policy_arn = create_policy(&iam).await;
    let group = create_group(&iam).await;
    cloud.attach_user_policy(&name, &policy_arn).await.expect("attach");
    cloud.put_user_policy(&name, "inline", READ_ONLY).await.expect("put");
    cloud.add_user_to_group(&name, &group).await.expect("add to group");
    cloud.create_access_key(Some(&name)).await.expect("first key");
    cloud.create_access_key(Some(&name)).await.expect("second key");
    iam.create_login_profile().user_name(&name).password("Hangar-Test-Pa55!").send().await.expect("login profile");

    let deleted = cloud.delete_user(&name).await.expect("delete the user and all it has");
    assert_eq!(deleted, Deletion::Deleted);

    let err = cloud.get_user(Some(&name)).await.expect_err("the user is gone");
    assert!(matches!(err, CloudError::NotFound(_)), "{err:?}");
    let members = iam.get_group().group_name(&group).send().await.expect("get group");
    assert!(members.users().is_empty(), "{:?}", members.users());
    let policy = iam.get_policy().policy_arn(&policy_arn).send().await.expect("get policy");
    assert_eq!(policy.policy().and_then(|p| p.attachment_count()), Some(0));

    let again = cloud.delete_user(&name).await.expect("deleting a deleted user is Ok");
    assert_eq!(again, Deletion::Absent, "IAM knows no such user: the caller decides what that means");
    let never = cloud.delete_user(&support::unique_name("hangar-never")).await;
    assert_eq!(never.expect("deleting a never-created user is Ok"), Deletion::Absent);
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn sts_operations_return_credentials() {
    let (cloud, iam) = moto().await;
    let role = support::unique_name("hangar-role");
    let created = iam
        .create_role()
        .role_name(&role)
        .assume_role_policy_document(ASSUME_ROLE_TRUST)
        .send()
        .await
        .expect("create a role");
    let role_arn = created.role().expect("role").arn().to_owned();
    let policy_arn = create_policy(&iam).await;

    let assumed = cloud
        .assume_role(&role_arn, "hangar-session", Some(READ_ONLY), std::slice::from_ref(&policy_arn), secs(900))
        .await
        .expect("assume the role");
    assert_complete(&assumed);
    let arn = assumed.arn.as_deref().expect("assumed-role ARN");
    assert!(arn.ends_with(&format!(":assumed-role/{role}/hangar-session")), "{arn}");

    let federated_name = format!("fed-{}", std::process::id());
    let federated = cloud
        .get_federation_token(&federated_name, Some(READ_ONLY), &[policy_arn], secs(900))
        .await
        .expect("a federation token");
    assert_complete(&federated);
    let arn = federated.arn.as_deref().expect("federated user ARN");
    assert!(arn.ends_with(&format!(":federated-user/{federated_name}")), "{arn}");

    let session = cloud.get_session_token(secs(900), None, None).await.expect("a session token");
    assert_complete(&session);
    assert_eq!(session.arn, None);
}

fn assert_complete(credentials: &hangar::aws::StsCredentials) {
    assert!(!credentials.access_key.is_empty());
    assert!(!credentials.secret_key.is_empty());
    assert!(!credentials.session_token.is_empty());
    let expiration = credentials.expiration.expect("an expiration");
    assert!(expiration > chrono::Utc::now(), "{expiration}");
    let shown = format!("{credentials:?}");
    assert!(!shown.contains(&credentials.secret_key) && !shown.contains(&credentials.session_token), "{shown}");
}

/// The form parameters of each request a stand-in received.
type Requests = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// A cloud on a stand-in for AWS on an ephemeral port, which answers every request with `status`
/// and `body`, and what the stand-in received.
async fn canned(status: u16, body: impl Into<String>, max_retries: i64) -> (SharedCloud, Requests) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let requests = Requests::default();
    let seen = requests.clone();
    let body = body.into();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let form = serde_urlencoded::from_bytes(&read_body(&mut stream).await).expect("a form body");
            seen.lock().expect("requests").push(form);
            let response = format!(
                "HTTP/1.1 {status} Canned\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(response.as_bytes()).await.expect("respond");
        }
    });
    let cloud = connect(&CloudSettings {
        access_key: Some("AKIAHANGARTEST".into()),
        secret_key: Some("hangar-secret-never-shown".into()),
        region: "eu-west-1".into(),
        iam_endpoint: Some(endpoint.clone()),
        sts_endpoint: Some(endpoint),
        max_retries,
        connect_timeout: std::time::Duration::from_secs(3),
        operation_timeout: std::time::Duration::from_secs(20),
        web_identity: None,
    })
    .await;
    (cloud, requests)
}

async fn read_body(stream: &mut TcpStream) -> Vec<u8> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = stream.read(&mut chunk).await.expect("read a request");
        assert!(read > 0, "the request ended early");
        buffer.extend_from_slice(&chunk[..read]);
        let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
        let length = head.lines().find_map(|line| line.strip_prefix("content-length:"));
        let length: usize = length.map_or(0, |value| value.trim().parse().expect("a content length"));
        if buffer.len() >= end + 4 + length {
            return buffer[end + 4..end + 4 + length].to_vec();
        }
    }
}

fn param<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
}

const CREATED_USER: &str = "<CreateUserResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"><CreateUserResult><User>\
    <Path>/hangar/</Path><UserName>u</UserName><UserId>AIDAHANGAR</UserId><Arn>arn:aws:iam::123456789012:user/hangar/u</Arn>\
    <CreateDate>2024-01-01T00:00:00Z</CreateDate></User></CreateUserResult></CreateUserResponse>";
const SESSION: &str = "<GetSessionTokenResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><GetSessionTokenResult>\
    <Credentials><AccessKeyId>ASIAHANGAR</AccessKeyId><SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken>\
    <Expiration>2030-01-01T00:00:00Z</Expiration></Credentials></GetSessionTokenResult></GetSessionTokenResponse>";

#[tokio::test]
async fn requests_carry_what_moto_ignores() {
    let (cloud, requests) = canned(200, CREATED_USER, 0).await;
    let boundary = "arn:aws:iam::123456789012:policy/boundary";
    let user = cloud.create_user("u", Some("/hangar/"), Some(boundary), &[("team".into(), "core".into())]).await;
    assert_eq!(user.expect("create user").id, "AIDAHANGAR");
    let form = requests.lock().expect("requests")[0].clone();
    assert_eq!(param(&form, "Action"), Some("CreateUser"));
    assert_eq!(param(&form, "Path"), Some("/hangar/"));
    assert_eq!(param(&form, "PermissionsBoundary"), Some(boundary));
    assert_eq!((param(&form, "Tags.member.1.Key"), param(&form, "Tags.member.1.Value")), (Some("team"), Some("core")));

    let (cloud, requests) = canned(200, SESSION, 0).await;
    let session = cloud.get_session_token(secs(3600), Some("arn:aws:iam::123456789012:mfa/u"), Some("123456")).await;
    assert_eq!(
        session.expect("a session token").expiration.map(|e| e.to_rfc3339()).as_deref(),
        Some("2030-01-01T00:00:00+00:00")
    );
    let form = requests.lock().expect("requests")[0].clone();
    assert_eq!(param(&form, "SerialNumber"), Some("arn:aws:iam::123456789012:mfa/u"));
    assert_eq!(param(&form, "TokenCode"), Some("123456"));
    assert_eq!(param(&form, "DurationSeconds"), Some("3600"));

    let (cloud, requests) = canned(500, "", 0).await;
    let policy_arns = ["arn:aws:iam::aws:policy/ReadOnlyAccess".to_owned()];
    let _ = cloud.get_federation_token("fed", None, &policy_arns, secs(900)).await;
    let _ = cloud.assume_role("arn:aws:iam::123456789012:role/r", "s", None, &policy_arns, secs(900)).await;
    let requests = requests.lock().expect("requests");
    assert_eq!(requests.len(), 2);
    for form in requests.iter() {
        assert_eq!(param(form, "PolicyArns.member.1.arn"), Some(policy_arns[0].as_str()), "{form:?}");
        assert_eq!(param(form, "Policy"), None, "{form:?}");
    }
}

fn error_body(code: &str) -> String {
    format!(
        "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>canned {code}</Message></Error>\
         <RequestId>r</RequestId></ErrorResponse>"
    )
}

#[tokio::test]
async fn error_codes_map_to_kinds() {
    let cases = [
        ("NoSuchEntity", "NotFound"),
        ("LimitExceeded", "LimitExceeded"),
        ("Throttling", "Throttled"),
        ("AccessDenied", "Denied"),
        ("ExpiredToken", "Denied"),
        ("InvalidClientTokenId", "Denied"),
        ("MalformedPolicyDocument", "Invalid"),
        ("ValidationError", "Invalid"),
        ("DeleteConflict", "Other"),
    ];
    for (code, expected) in cases {
        let (cloud, _) = canned(400, error_body(code), 0).await;
        let err = cloud.put_user_policy("u", "p", "{}").await.expect_err(code);
        assert_eq!(err.kind(), expected, "{code}: {err:?}");
        assert_eq!(err.to_string(), format!("iam:PutUserPolicy: {code}: canned {code}"));
    }
    let (cloud, _) = canned(500, "<html>upstream broke</html>", 0).await;
    let err = cloud.get_session_token(secs(900), None, None).await.expect_err("not an AWS error");
    assert!(matches!(&err, CloudError::Other(m) if m.starts_with("sts:GetSessionToken: ")), "{err:?}");
}

#[tokio::test]
async fn max_retries_bounds_the_attempts() {
    for (max_retries, attempts) in [(0, 1), (1, 2)] {
        let (cloud, requests) = canned(400, error_body("Throttling"), max_retries).await;
        let err = cloud.get_user(Some("u")).await.expect_err("always throttled");
        assert!(matches!(err, CloudError::Throttled(_)), "{err:?}");
        assert_eq!(requests.lock().expect("requests").len(), attempts, "max_retries {max_retries}");
    }
}

#[tokio::test]
async fn an_unreachable_cloud_is_other_and_keeps_the_secret_out() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    drop(listener);
    let settings = CloudSettings {
        access_key: Some("AKIAHANGARTEST".into()),
        secret_key: Some("hangar-secret-never-shown".into()),
        region: "eu-west-1".into(),
        iam_endpoint: Some(endpoint.clone()),
        sts_endpoint: Some(endpoint),
        max_retries: 0,
        connect_timeout: std::time::Duration::from_secs(3),
        operation_timeout: std::time::Duration::from_secs(20),
        web_identity: None,
    };
    assert!(!format!("{settings:?}").contains("hangar-secret-never-shown"));
    let cloud = connect(&settings).await;

    let err = cloud.get_user(Some("anyone")).await.expect_err("nothing listens");
    assert!(matches!(err, CloudError::Other(_)), "{err:?}");
    let err = cloud.get_session_token(secs(900), None, None).await.expect_err("nothing listens");
    let CloudError::Other(message) = err else { panic!("expected Other, got {err:?}") };
    assert!(
        message.starts_with("sts:GetSessionToken: ") && !message.contains("hangar-secret-never-shown"),
        "{message}"
    );
}

fn secs(secs: u64) -> hangar::aws::StsDuration {
    hangar::aws::StsDuration::from_secs(secs).expect("within what STS grants")
}
