//! No IAM user left behind: the broker driven through a proxy in front of the AWS emulator that
//! fails or stalls chosen actions, and a dev-server killed with SIGKILL mid-request. Whatever
//! dies, once the scheduled job has run every user the broker created has a lease or is gone,
//! with everything it held; a revocation that fails is retried by the job.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use hangar::config::Config;
use hangar_tests::aws_proxy::{AwsProxy, Fault};
use hangar_tests::{moto, options};
use serde_json::json;

use super::{aws, broker_on_moto, iam_user_role, now, suffix, Aws, Vault, DOCUMENT, ROOT};

/// A self-signed certificate, as IAM's signing certificates are.
const CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----
MIIBgDCCASegAwIBAgIUMd+zawDt/g7PN9z14WXgSwI4DmswCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLaGFuZ2FyLXRlc3QwHhcNMjYxMTIzMjM0NjU0WhcNMzYxMTIw
MjM0NjU0WjAWMRQwEgYDVQQDDAtoYW5nYXItdGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABP8RUwEO2UGhQO7COGEAhI7uMTVbAMkizGs/vsRsXFPuOwIzpctl
OU35rur2m5/Tp5Nn94pFR9zeuxTBhSRHmIijUzBRMB0GA1UdDgQWBBQE9MOIv4dx
gBkCFmWedpaHJut05jAfBgNVHSMEGDAWgBQE9MOIv4dxgBkCFmWedpaHJut05jAP
BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0cAMEQCIAE4ml8H7ee0lgZcXW2w
+7pTTLid0kzwFT1ZmAoeHNfeAiB2fUsWPHfjKSSfL8fmXbBv3JUM0N5nM3XcWTs0
BlKGpQ==
-----END CERTIFICATE-----";

/// The broker's settings in these tests: write-ahead records old enough to roll back after 1 s.
fn config() -> Config {
    Config {
        root_service_token: Some(ROOT.into()),
        broker_rollback_min_age: Duration::from_secs(1),
        ..Config::default()
    }
}

/// Points the `aws` mount at `endpoint` (the proxy), with one attempt per call.
async fn point_at(root: &Vault<'_>, endpoint: &str) {
    root.write(
        "aws/config/root",
        json!({
            "access_key": moto::ACCESS_KEY,
            "secret_key": moto::SECRET_KEY,
            "region": moto::REGION,
            "iam_endpoint": endpoint,
            "sts_endpoint": endpoint,
            "max_retries": 0,
        }),
    )
    .await;
}

/// A role whose users go through every step of creation: a managed policy, an inline policy,
/// a group and an access key, under a fresh path; returns the path and the role's body.
async fn every_step_role(aws: &Aws) -> (String, serde_json::Value) {
    let id = suffix();
    let arn = aws.create_policy(&format!("hangar-faults-{id}")).await;
    let group = format!("hangar-faults-{id}");
    aws.create_group(&group).await;
    let path = format!("/hangar-faults-{id}/");
    let body = json!({
        "credential_type": "iam_user",
        "policy_arns": [arn],
        "policy_document": DOCUMENT,
        "iam_groups": [group],
        "user_path": path,
    });
    (path, body)
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_user_whose_creation_fails_at_any_step_is_gone_once_the_job_has_run() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    point_at(&root, &proxy.endpoint).await;
    let steps = ["CreateUser", "AttachUserPolicy", "PutUserPolicy", "AddUserToGroup", "CreateAccessKey"];
    let mut paths = Vec::new();
    for step in steps {
        let (path, role) = every_step_role(&aws).await;
        root.write(&format!("aws/roles/{step}"), role).await;
        // AWS does the step but the answer is lost, and the broker cannot undo the user.
        proxy.inject(step, Fault::FailAfter { status: 500, code: "ServiceFailure" });
        proxy.inject("DeleteUser", Fault::Fail { status: 500, code: "ServiceFailure" });
        let creds = root.get(&format!("aws/creds/{step}")).await;
        proxy.heal();
        assert_eq!(creds.status, 502, "{step}: {:?}", creds.body);
        assert_eq!(aws.users_under(&path).await.len(), 1, "{step}: the fault leaves a user in IAM");
        paths.push((step, path));
    }

    tokio::time::sleep(Duration::from_millis(1100)).await;
    hangar::broker::scheduled_run(&app.second_state().await).await.expect("a scheduled run");
    for (step, path) in paths {
        assert_eq!(aws.users_under(&path).await, Vec::<String>::new(), "{step}: the job rolled the user back");
    }
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_slow_creation_is_not_rolled_back_before_the_minimum_age() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let config = Config { broker_rollback_min_age: Duration::from_secs(300), ..config() };
    let app = hangar_tests::TestApp::spawn_with(config).await;
    let root = Vault::root(&app);
    point_at(&root, &proxy.endpoint).await;
    let path = iam_user_role(&root, "aws/roles/slow", "slow").await;
    proxy.inject("CreateAccessKey", Fault::Delay(Duration::from_millis(1500)));
    let request = {
        let (url, client) = (app.url.clone(), app.client.clone());
        tokio::spawn(async move {
            let reply = client.get(format!("{url}/v1/aws/creds/slow")).header("X-Vault-Token", ROOT).send().await;
            reply.expect("an answer").status().as_u16()
        })
    };
    while proxy.calls("CreateAccessKey").is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hangar::broker::scheduled_run(&app.second_state().await).await.expect("a scheduled run");
    assert_eq!(request.await.expect("the request"), 200, "the job left the request alone");
    assert_eq!(aws.users_under(&path).await.len(), 1);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_revocation_that_fails_is_retried_by_the_job_until_the_user_is_gone() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    point_at(&root, &proxy.endpoint).await;
    root.write("aws/config/lease", json!({"lease": "1h", "lease_max": "1h"})).await;
    let path = iam_user_role(&root, "aws/roles/retried", "retried").await;
    let creds = root.get("aws/creds/retried").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let lease = creds.body["lease_id"].as_str().expect("a lease id").to_owned();

    proxy.inject("ListAccessKeys", Fault::Fail { status: 503, code: "ServiceUnavailable" });
    let revoked = root.call("PUT", "sys/leases/revoke", Some(json!({"lease_id": lease}))).await;
    assert_eq!(revoked.status, 502, "{:?}", revoked.body);
    proxy.heal();
    assert_eq!(aws.users_under(&path).await.len(), 1, "the user is still there");

    hangar::broker::scheduled_run(&app.second_state().await).await.expect("a scheduled run");
    assert_eq!(aws.users_under(&path).await, Vec::<String>::new(), "the job finished the revocation");
    let lookup = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert_eq!(lookup.status, 400, "the lease is gone: {:?}", lookup.body);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_user_iam_does_not_show_right_after_creation_is_not_taken_as_revoked() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let path = iam_user_role(&root, "aws/roles/unseen", "unseen").await;
    let creds = root.get("aws/creds/unseen").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let lease = creds.body["lease_id"].as_str().expect("a lease id").to_owned();
    let user = aws.users_under(&path).await.pop().expect("the created user");
    // As IAM may answer right after creation, before the user shows everywhere.
    for key in aws.access_keys(&user).await {
        aws.iam.delete_access_key().user_name(&user).access_key_id(key).send().await.expect("DeleteAccessKey");
    }
    let inline = aws.iam.list_user_policies().user_name(&user).send().await.expect("ListUserPolicies");
    for name in inline.policy_names() {
        aws.iam.delete_user_policy().user_name(&user).policy_name(name).send().await.expect("DeleteUserPolicy");
    }
    aws.iam.delete_user().user_name(&user).send().await.expect("DeleteUser");

    let revoked = root.call("PUT", "sys/leases/revoke", Some(json!({"lease_id": lease}))).await;
    assert_eq!(revoked.status, 502, "not taken as revoked yet: {:?}", revoked.body);
    let lookup = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert_eq!(lookup.status, 200, "the lease is kept: {:?}", lookup.body);

    let past_the_window = now() + 301;
    let state = app.second_state().await;
    hangar::broker::scheduled_run_at(&state, past_the_window).await.expect("a scheduled run");
    let lookup = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert_eq!(lookup.status, 400, "gone once IAM has had its window: {:?}", lookup.body);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn revoking_a_user_deletes_everything_it_holds() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let id = suffix();
    let arn = aws.create_policy(&format!("hangar-holds-{id}")).await;
    let group = format!("hangar-holds-{id}");
    aws.create_group(&group).await;
    let path = format!("/hangar-holds-{id}/");
    // The tag opts the user into IAM's DeleteConflict and service-specific credentials, which
    // stock moto lacks (tests/moto_server.py).
    let role = json!({
        "credential_type": "iam_user", "policy_arns": [arn], "policy_document": DOCUMENT,
        "iam_groups": [group], "user_path": path, "iam_tags": {"hangar-test-iam": "strict"},
    });
    root.write("aws/roles/holds", role).await;
    let creds = root.get("aws/creds/holds").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let lease = creds.body["lease_id"].as_str().expect("a lease id").to_owned();
    let user = aws.users_under(&path).await.pop().expect("the created user");

    // What the user's holder may have added with the key: IAM refuses to delete a user with any.
    let iam = &aws.iam;
    iam.create_login_profile().user_name(&user).password("Hangar-test-1!").send().await.expect("CreateLoginProfile");
    let ssh = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 hangar-test";
    iam.upload_ssh_public_key().user_name(&user).ssh_public_key_body(ssh).send().await.expect("UploadSSHPublicKey");
    let certificate = iam.upload_signing_certificate().user_name(&user).certificate_body(CERTIFICATE).send().await;
    certificate.expect("UploadSigningCertificate");
    let device = iam.create_virtual_mfa_device().virtual_mfa_device_name(format!("hangar-{id}")).send().await;
    let serial = device.expect("CreateVirtualMFADevice").virtual_mfa_device().map(|d| d.serial_number().to_owned());
    let serial = serial.expect("a serial");
    let enabled = iam.enable_mfa_device().user_name(&user).serial_number(&serial);
    enabled.authentication_code1("123456").authentication_code2("654321").send().await.expect("EnableMFADevice");
    let service = iam.create_service_specific_credential().user_name(&user).service_name("codecommit.amazonaws.com");
    service.send().await.expect("CreateServiceSpecificCredential");

    let revoked = root.call("PUT", "sys/leases/revoke", Some(json!({"lease_id": lease}))).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    assert!(!aws.user_exists(&user).await, "the user is deleted");
    let devices = iam.list_virtual_mfa_devices().send().await.expect("ListVirtualMFADevices");
    assert!(devices.virtual_mfa_devices().iter().all(|d| d.serial_number() != serial), "its MFA device too");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn dynamic_users_are_created_with_the_deployments_permissions_boundary() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let boundary = format!("arn:aws:iam::{}:policy/hangar-boundary", super::ACCOUNT);
    let mut config = config();
    config.broker_limits.permissions_boundary = Some(boundary.clone());
    let app = hangar_tests::TestApp::spawn_with(config).await;
    let root = Vault::root(&app);
    point_at(&root, &proxy.endpoint).await;
    iam_user_role(&root, "aws/roles/bounded", "bounded").await;
    let creds = root.get("aws/creds/bounded").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let created = proxy.calls("CreateUser");
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].params.get("PermissionsBoundary"), Some(&boundary), "{:?}", created[0].params);
    app.stop().await;
}

/// The environment variable that makes [`dev_server_for_a_kill`] run, naming its data directory.
const CHILD_DIR: &str = "HANGAR_TEST_KILLED_DEV_SERVER_DIR";

/// Not a test of its own: the dev-server process that
/// [`a_dev_server_killed_at_any_step_of_creating_a_user_leaves_it_to_the_job`] starts (this test binary,
/// run again) and kills.
#[tokio::test]
#[ignore = "the child process of a_dev_server_killed_at_any_step_of_creating_a_user_leaves_it_to_the_job"]
async fn dev_server_for_a_kill() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let config = Config { data_dir: dir.clone().into(), ..config() };
    let running = dev_server::start(options(dir.as_ref()), config).await.expect("dev-server starts");
    println!("LISTENING {}", running.url);
    std::future::pending::<()>().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_dev_server_killed_at_any_step_of_creating_a_user_leaves_it_to_the_job() {
    let aws = aws().await;
    for step in ["CreateUser", "AttachUserPolicy", "PutUserPolicy", "AddUserToGroup", "CreateAccessKey"] {
        killed_at(&aws, step).await;
    }
}

/// dev-server as a process of its own on `dir` ([`dev_server_for_a_kill`]), with its URL.
fn dev_server_to_kill(dir: &std::path::Path) -> (std::process::Child, String) {
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["broker::faults::dev_server_for_a_kill", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the dev-server process starts");
    let stdout = BufReader::new(child.stdout.take().expect("its output"));
    let url = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("LISTENING ").map(str::to_owned))
        .expect("dev-server says where it listens");
    (child, url)
}

/// Starts dev-server as a process of its own, kills it (SIGKILL) once IAM has done `step` of
/// creating a user, starts it again on the same data, and waits for its job to roll back.
async fn killed_at(aws: &Aws, step: &str) {
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let dir = tempfile::tempdir().expect("a data directory");
    let (mut child, url) = dev_server_to_kill(dir.path());
    let client = reqwest::Client::new();
    let write = |path: &str, body: serde_json::Value| {
        let request = client.post(format!("{url}/v1/{path}")).header("X-Vault-Token", ROOT).json(&body);
        async move { assert!(request.send().await.expect("an answer").status().is_success()) }
    };
    let root_config = json!({
        "access_key": moto::ACCESS_KEY, "secret_key": moto::SECRET_KEY, "region": moto::REGION,
        "iam_endpoint": proxy.endpoint, "sts_endpoint": proxy.endpoint, "max_retries": 0,
    });
    write("aws/config/root", root_config).await;
    let (path, role) = every_step_role(aws).await;
    write("aws/roles/killed", role).await;

    // IAM does the step; dev-server dies before it hears so.
    proxy.inject(step, Fault::HangAfter);
    let creds = client.get(format!("{url}/v1/aws/creds/killed")).header("X-Vault-Token", ROOT).send();
    let pending = tokio::spawn(creds);
    while proxy.calls(step).is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("the process is gone");
    assert!(pending.await.expect("the request task").is_err(), "{step}: the request died with the process");
    assert_eq!(aws.users_under(&path).await.len(), 1, "{step}: IAM holds the user");
    proxy.heal();

    // dev-server starts again on the same data and runs the job every second.
    let options = dev_server::Options { rotation_interval: 1, ..options(dir.path()) };
    let config = Config { data_dir: dir.path().to_path_buf(), ..config() };
    let restarted = dev_server::start(options, config).await.expect("dev-server starts again");
    let mut waited = Duration::ZERO;
    while !aws.users_under(&path).await.is_empty() && waited < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        waited += Duration::from_millis(200);
    }
    assert_eq!(aws.users_under(&path).await, Vec::<String>::new(), "{step}: the job rolled the user back");
    restarted.stop().await.expect("dev-server stops");
}

#[test]
fn the_rollback_age_is_a_duration_within_a_day() {
    let setting = |value: &'static str| {
        Config::from_lookup(move |name| (name == "HANGAR_BROKER_ROLLBACK_MIN_AGE").then(|| value.to_owned()))
    };
    let defaults = Config::from_lookup(|_| None).expect("the defaults");
    assert_eq!(defaults.broker_rollback_min_age, Duration::from_secs(300), "Vault's 5 minutes");
    assert_eq!(setting("5m").expect("5m").broker_rollback_min_age, Duration::from_secs(300));
    assert_eq!(setting("1s").expect("1s").broker_rollback_min_age, Duration::from_secs(1));
    assert_eq!(setting("1h 30m").expect("1h 30m").broker_rollback_min_age, Duration::from_secs(5400));
    for refused in ["0s", "2days", "soon", "1500ms", "-5m"] {
        let message = setting(refused).expect_err(refused).to_string();
        assert!(message.starts_with("HANGAR_BROKER_ROLLBACK_MIN_AGE: "), "{message}");
        assert!(message.contains(refused) && message.contains(" to "), "{message}");
    }
}

/// `CreateUser` succeeds but its answer is lost; the SDK's retry is told `EntityAlreadyExists`.
/// The user is the request's own (created after its write-ahead record): it gets its keys and
/// lease, and no user is left to nobody.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_lost_create_user_answer_is_taken_as_the_requests_own_user() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    root.write(
        "aws/config/root",
        json!({
            "access_key": moto::ACCESS_KEY, "secret_key": moto::SECRET_KEY, "region": moto::REGION,
            "iam_endpoint": proxy.endpoint, "sts_endpoint": proxy.endpoint, "max_retries": 2,
        }),
    )
    .await;
    let path = iam_user_role(&root, "aws/roles/lost", "lost").await;
    proxy.inject("CreateUser", Fault::Once(Box::new(Fault::FailAfter { status: 500, code: "ServiceFailure" })));

    let creds = root.get("aws/creds/lost").await;
    assert_eq!(proxy.calls("CreateUser").len(), 2, "the SDK retried the lost call");
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let users = aws.users_under(&path).await;
    assert_eq!(users.len(), 1, "{users:?}");
    let key = creds.body["data"]["access_key"].as_str().expect("an access key");
    assert_eq!(aws.owner_of_key(key).await, users[0], "the key is the user's");

    // Revoking the lease deletes it: the user was leased, not left to the job or to nobody.
    let lease = creds.body["lease_id"].as_str().expect("a lease id");
    assert_eq!(root.call("PUT", "sys/leases/revoke", Some(json!({"lease_id": lease}))).await.status, 204);
    assert_eq!(aws.users_under(&path).await, Vec::<String>::new());
    app.stop().await;
}

/// A name the template renders that some user already had before the request is not taken:
/// the request is refused with IAM's answer and the user is left alone.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_existing_user_of_the_same_name_is_not_taken_as_the_requests() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let id = suffix();
    let name = format!("fixed-{id}");
    aws.create_user(&name).await;
    root.write(
        "aws/config/root",
        json!({
            "access_key": moto::ACCESS_KEY, "secret_key": moto::SECRET_KEY, "region": moto::REGION,
            "iam_endpoint": aws.endpoint, "sts_endpoint": aws.endpoint, "username_template": name,
        }),
    )
    .await;
    root.write("aws/roles/fixed", json!({"credential_type": "iam_user", "policy_document": DOCUMENT})).await;
    let creds = root.get("aws/creds/fixed").await;
    assert_eq!(creds.status, 400, "{:?}", creds.body);
    assert!(super::first_error(&creds).contains("EntityAlreadyExists"), "{:?}", creds.body);
    assert!(aws.access_keys(&name).await.is_empty(), "the stranger's user got no key");
    app.stop().await;
}

/// A static-role write killed (SIGKILL) while `CreateAccessKey` is in flight: IAM made the key,
/// the role holds the write's claim. Once the claim expires the job deletes the key nobody holds
/// and removes the role, which can then be written and deleted again.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_static_role_write_killed_while_its_key_is_made_is_rolled_back_by_the_job() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let dir = tempfile::tempdir().expect("a data directory");
    let (mut child, url) = dev_server_to_kill(dir.path());
    let client = reqwest::Client::new();
    let send = |method: reqwest::Method, url: String, body: serde_json::Value| {
        let request = client.request(method, url).header("X-Vault-Token", ROOT).json(&body);
        async move { request.send().await.expect("an answer").status().as_u16() }
    };
    let root_config = json!({
        "access_key": moto::ACCESS_KEY, "secret_key": moto::SECRET_KEY, "region": moto::REGION,
        "iam_endpoint": proxy.endpoint, "sts_endpoint": proxy.endpoint, "max_retries": 0,
    });
    assert_eq!(send(reqwest::Method::POST, format!("{url}/v1/aws/config/root"), root_config).await, 204);
    let user = format!("hangar-killed-{}", suffix());
    aws.create_user(&user).await;
    let (own, _) = aws.create_key(&user).await;

    proxy.inject("CreateAccessKey", Fault::HangAfter);
    let body = json!({"username": user, "rotation_period": "1h"});
    let write = client.post(format!("{url}/v1/aws/static-roles/killed")).header("X-Vault-Token", ROOT).json(&body);
    let pending = tokio::spawn(write.send());
    while proxy.calls("CreateAccessKey").is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("the process is gone");
    assert!(pending.await.expect("the request task").is_err(), "the write died with the process");
    assert_eq!(aws.access_keys(&user).await.len(), 2, "IAM made the key");
    proxy.heal();

    // dev-server starts again on the same data and runs the job every second.
    let options = dev_server::Options { rotation_interval: 1, ..options(dir.path()) };
    let config = Config { data_dir: dir.path().to_path_buf(), ..config() };
    let restarted = dev_server::start(options, config).await.expect("dev-server starts again");
    let mut waited = Duration::ZERO;
    while aws.access_keys(&user).await.len() > 1 && waited < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        waited += Duration::from_millis(200);
    }
    assert_eq!(
        aws.access_keys(&user).await,
        std::slice::from_ref(&own),
        "the key nobody holds is gone, the user's own stays"
    );
    let role = format!("{}/v1/aws/static-roles/killed", restarted.url);
    assert_eq!(send(reqwest::Method::GET, role.clone(), json!(null)).await, 404, "the new role is rolled back");
    assert_eq!(send(reqwest::Method::POST, role.clone(), body).await, 204, "and can be written again");
    assert_eq!(aws.access_keys(&user).await.len(), 2);
    assert_eq!(send(reqwest::Method::DELETE, role, json!(null)).await, 204);
    assert_eq!(aws.access_keys(&user).await, [own], "deleting the role deletes its key");
    restarted.stop().await.expect("dev-server stops");
}

/// The role a static-role write that died leaves: claimed `age` seconds ago, its user holding
/// `keys_before` then, and a key made since that nobody holds; returns that key.
async fn plant_claim(app: &hangar_tests::TestApp, aws: &Aws, name: &str, user: &str, age: i64) -> String {
    use hangar::broker::statics::{self, Claim, StaticRole};
    let keys_before = aws.access_keys(user).await;
    let (stray, _) = aws.create_key(user).await;
    let mounts = Vault::root(app).get("sys/mounts").await;
    let uuid = mounts.body["data"]["aws/"]["uuid"].as_str().expect("the mount's uuid").to_owned();
    let at = now() - age;
    let role = StaticRole {
        name: name.into(),
        mount_uuid: uuid,
        username: user.into(),
        user_id: String::new(),
        rotation_period: 3600,
        access_key: String::new(),
        sealed_secret_key: format!("being-written:{}", suffix()),
        // Not due for the job: what settles it here is the next write or delete.
        next_rotation: now() + 3600,
        user_path: Some("/".into()),
        previous_access_key: None,
        claim: Some(Claim { at, keys_before, replaced: None }),
    };
    let store = app.store();
    hangar::store::ItemStore::put(&store, statics::item(&role).expect("an item"), hangar::store::Condition::Always)
        .await
        .expect("planted");
    stray
}

/// A claim still standing is a conflict (409) to a write, a delete and `static-creds`; once it
/// has expired the next write or delete rolls it back (the key nobody holds goes) and goes on.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_expired_claim_is_rolled_back_by_the_next_write_or_delete() {
    let aws = aws().await;
    // A claim stands a minute here: one made now stands, one two minutes old has expired.
    let config = Config { broker_rollback_min_age: Duration::from_secs(60), ..config() };
    let app = hangar_tests::TestApp::spawn_with(config).await;
    let root = Vault::root(&app);
    aws.configure(&root, "aws").await;
    let user = format!("hangar-claim-{}", suffix());
    aws.create_user(&user).await;

    plant_claim(&app, &aws, "standing", &user, 0).await;
    let body = json!({"username": user, "rotation_period": "1h"});
    for reply in [
        root.post("aws/static-roles/standing", body.clone()).await,
        root.delete("aws/static-roles/standing").await,
        root.get("aws/static-creds/standing").await,
    ] {
        assert_eq!(reply.status, 409, "{:?}", reply.body);
        assert!(super::first_error(&reply).contains("being written"), "{:?}", reply.body);
    }
    let stray = plant_claim(&app, &aws, "standing", &user, 120).await;
    root.write("aws/static-roles/standing", body.clone()).await;
    let stored = super::static_key(&root, "standing").await;
    let keys = aws.access_keys(&user).await;
    assert!(keys.contains(&stored) && !keys.contains(&stray), "{keys:?}");

    let other = format!("hangar-claim-{}", suffix());
    aws.create_user(&other).await;
    let stray = plant_claim(&app, &aws, "deleted", &other, 120).await;
    assert_eq!(root.delete("aws/static-roles/deleted").await.status, 204);
    assert!(!aws.access_keys(&other).await.contains(&stray), "the stray key went with the claim");
    assert_eq!(root.get("aws/static-roles/deleted").await.status, 404);
    app.stop().await;
}

/// A rotation whose `CreateAccessKey` answer is lost leaves a key nobody holds; its claim says
/// so, and the next rotation deletes that key before it makes its own.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_rotation_whose_key_answer_was_lost_leaves_no_key_behind() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    point_at(&root, &proxy.endpoint).await;
    let user = format!("hangar-lost-rotation-{}", suffix());
    aws.create_user(&user).await;
    root.write("aws/static-roles/lost", json!({"username": user, "rotation_period": "1h"})).await;
    let stored = super::static_key(&root, "lost").await;

    proxy.inject("CreateAccessKey", Fault::FailAfter { status: 500, code: "ServiceFailure" });
    let state = app.second_state().await;
    let (rotated, _) = hangar::broker::scheduled_run_at(&state, now() + 3610).await.expect("a run");
    proxy.heal();
    assert_eq!(rotated, 0);
    assert_eq!(aws.access_keys(&user).await.len(), 2, "IAM made the key whose answer was lost");
    assert_eq!(super::static_key(&root, "lost").await, stored, "the role keeps its key");

    let stray = aws.access_keys(&user).await.into_iter().find(|key| *key != stored).expect("the stray key");

    // Due again at once: the next run deletes the stray key, then rotates.
    let (rotated, _) = hangar::broker::scheduled_run_at(&state, now() + 3620).await.expect("a run");
    assert_eq!(rotated, 1);
    let current = super::static_key(&root, "lost").await;
    let mut keys = aws.access_keys(&user).await;
    keys.sort();
    let mut expected = vec![stored, current];
    expected.sort();
    assert_eq!(keys, expected, "the stray {stray} is gone; the previous and the new key stay");
    assert_eq!(root.delete("aws/static-roles/lost").await.status, 204);
    assert_eq!(aws.access_keys(&user).await, Vec::<String>::new(), "both keys went with the role");
    app.stop().await;
}
