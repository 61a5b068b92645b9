//! The deployment's allow-lists (`HANGAR_BROKER_*`): dynamic users under one IAM path with one
//! permissions boundary, managed policies, assumable roles and groups from lists, static-role
//! users from a path or a list. A role outside them is refused with a 400 when written, not
//! inside AWS, and again when credentials are asked for; a static role whose user is no longer
//! allowed is not rotated. Unset, they restrict nothing (every other broker test runs so).

use std::path::Path;

use hangar::config::{BrokerLimits, Config};
use hangar::state::AppState;
use serde_json::{json, Value};

use super::{an_hour_later, aws, first_error, suffix, Aws, Vault, ACCOUNT, DOCUMENT, ROOT};
use hangar_tests::TestApp;

/// The configuration of a dev-server (or a scheduled run) on `dir`'s data with `limits`.
/// The configuration dev-server runs with on `dir`'s data, `limits` set: also the scheduled
/// job's here, which runs in this process beside it and so opens the store as it does.
fn config_on(dir: &Path, limits: BrokerLimits) -> Config {
    let config = Config { root_service_token: Some(ROOT.into()), broker_limits: limits, ..Config::default() };
    hangar_tests::options(dir).configure(config)
}

/// dev-server on `dir`'s data with `limits`: started again on the same data, it is a deployment
/// whose settings changed since the roles were written.
async fn start_on(dir: &Path, limits: BrokerLimits) -> dev_server::Running {
    dev_server::start(hangar_tests::options(dir), config_on(dir, limits)).await.expect("dev-server starts")
}

/// A Vault call to the dev-server at `url` with the root token: (status, body).
async fn vault(url: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut request = reqwest::Client::new().request(method, format!("{url}/v1/{path}")).header("X-Vault-Token", ROOT);
    if let Some(body) = body {
        request = request.header("Content-Type", "application/json").body(body.to_string());
    }
    let reply = request.send().await.expect("a reply");
    let status = reply.status().as_u16();
    (status, reply.json::<Value>().await.unwrap_or_default())
}

/// The `config/root` pointing a mount at the emulator.
fn emulator_root(aws: &Aws) -> Value {
    json!({
        "access_key": hangar_tests::moto::ACCESS_KEY, "secret_key": hangar_tests::moto::SECRET_KEY,
        "region": hangar_tests::moto::REGION, "iam_endpoint": aws.endpoint, "sts_endpoint": aws.endpoint,
    })
}

/// dev-server's broker with `limits`, its `aws` mount pointed at the emulator.
async fn limited(limits: BrokerLimits) -> (Aws, TestApp) {
    let aws = aws().await;
    let app = TestApp::spawn_with(Config {
        root_service_token: Some(ROOT.into()),
        broker_limits: limits,
        ..Config::default()
    })
    .await;
    aws.configure(&Vault::root(&app), "aws").await;
    (aws, app)
}

fn policy(name: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:policy/{name}")
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn roles_outside_the_allowed_policies_roles_path_or_boundary_are_refused_when_written() {
    let limits = BrokerLimits {
        user_path: Some("/hangar/".into()),
        permissions_boundary: Some(policy("hangar-boundary")),
        policy_arns: Some(vec![policy("hangar-*"), policy("ReadOnly")]),
        role_arns: Some(vec![format!("arn:aws:iam::{ACCOUNT}:role/deployer")]),
        groups: None,
        static_users: None,
    };
    let (_aws, app) = limited(limits).await;
    let root = Vault::root(&app);

    let refused = [
        (
            json!({"credential_type": "iam_user", "policy_arns": "arn:aws:iam::aws:policy/AdministratorAccess"}),
            "HANGAR_BROKER_ALLOWED_POLICY_ARNS",
        ),
        (
            json!({"credential_type": "iam_user", "policy_arns": policy("ReadOnlyAccess")}),
            "HANGAR_BROKER_ALLOWED_POLICY_ARNS",
        ),
        (
            json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "user_path": "/other/"}),
            "HANGAR_BROKER_USER_PATH",
        ),
        (
            json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "permissions_boundary_arn": policy("other")}),
            "HANGAR_BROKER_PERMISSIONS_BOUNDARY",
        ),
        (
            json!({"credential_type": "assumed_role", "role_arns": format!("arn:aws:iam::{ACCOUNT}:role/admin")}),
            "HANGAR_BROKER_ALLOWED_ROLE_ARNS",
        ),
    ];
    for (body, setting) in refused {
        let reply = root.post("aws/roles/wide", body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {:?}", reply.body);
        let error = first_error(&reply);
        assert!(error.contains("not allowed by this deployment") && error.contains(setting), "{body}: {error}");
        assert_eq!(root.get("aws/roles/wide").await.status, 404, "nothing was stored for {body}");
    }

    let allowed = [
        json!({"credential_type": "iam_user", "policy_arns": [policy("hangar-ci"), policy("ReadOnly")]}),
        json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "user_path": "/hangar/ci/"}),
        json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "permissions_boundary_arn": policy("hangar-boundary")}),
        json!({"credential_type": "assumed_role", "role_arns": format!("arn:aws:iam::{ACCOUNT}:role/deployer")}),
        json!({"credential_type": "federation_token", "policy_arns": "arn:aws:iam::aws:policy/AdministratorAccess"}),
    ];
    for (i, body) in allowed.into_iter().enumerate() {
        let reply = root.post(&format!("aws/roles/narrow-{i}"), body.clone()).await;
        assert_eq!(reply.status, 204, "{body}: {:?}", reply.body);
    }
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn dynamic_users_are_created_under_the_deployments_path() {
    let path = format!("/hangar-limits-{}/", suffix());
    let limits = BrokerLimits {
        user_path: Some(path.clone()),
        permissions_boundary: Some(policy("hangar-boundary")),
        ..BrokerLimits::default()
    };
    let (aws, app) = limited(limits).await;
    let root = Vault::root(&app);
    root.write("aws/roles/deploy", json!({"credential_type": "iam_user", "policy_document": DOCUMENT})).await;

    let creds = root.get("aws/creds/deploy").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let users = aws.users_under(&path).await;
    assert_eq!(users.len(), 1, "the user is under the deployment's path: {users:?}");
    // The boundary goes with CreateUser too; the emulator does not record users' boundaries, so
    // only a refused role shows it here (the first test).
    let read = root.get("aws/roles/deploy").await;
    assert_eq!(read.body["data"]["user_path"], "/", "the stored role is unchanged: {:?}", read.body);
    root.write("sys/leases/revoke", json!({"lease_id": creds.body["lease_id"]})).await;
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn static_roles_hold_only_the_allowed_users() {
    let path = format!("/hangar-static-{}/", suffix());
    let listed = format!("listed-{}", suffix());
    let limits = BrokerLimits { static_users: Some(vec![path.clone(), listed.clone()]), ..BrokerLimits::default() };
    let (aws, app) = limited(limits).await;
    let root = Vault::root(&app);

    let inside = format!("inside-{}", suffix());
    aws.iam.create_user().user_name(&inside).path(&path).send().await.expect("CreateUser");
    let outside = format!("outside-{}", suffix());
    aws.create_user(&outside).await;
    aws.create_user(&listed).await;

    let reply = root.post("aws/static-roles/out", json!({"username": outside, "rotation_period": "1h"})).await;
    assert_eq!(reply.status, 400, "{:?}", reply.body);
    let error = first_error(&reply);
    assert!(
        error.contains("not allowed by this deployment") && error.contains("HANGAR_BROKER_STATIC_USERS"),
        "{error}"
    );
    assert!(aws.access_keys(&outside).await.is_empty(), "no key was made for a refused user");

    for (role, user) in [("in", &inside), ("listed", &listed)] {
        let reply =
            root.post(&format!("aws/static-roles/{role}"), json!({"username": user, "rotation_period": "1h"})).await;
        assert_eq!(reply.status, 204, "{user}: {:?}", reply.body);
        assert_eq!(root.get(&format!("aws/static-creds/{role}")).await.status, 200);
    }
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_role_written_before_the_limits_is_refused_at_creds_time() {
    let aws = aws().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let before = start_on(dir.path(), BrokerLimits::default()).await;
    assert_eq!(vault(&before.url, "POST", "aws/config/root", Some(emulator_root(&aws))).await.0, 204);
    let role = json!({"credential_type": "assumed_role", "role_arns": format!("arn:aws:iam::{ACCOUNT}:role/admin")});
    assert_eq!(vault(&before.url, "POST", "aws/roles/wide", Some(role)).await.0, 204);
    before.stop().await.unwrap();

    let limits =
        BrokerLimits { role_arns: Some(vec![format!("arn:aws:iam::{ACCOUNT}:role/deployer")]), ..Default::default() };
    let after = start_on(dir.path(), limits).await;
    let (status, body) = vault(&after.url, "GET", "aws/sts/wide", None).await;
    assert_eq!(status, 400, "{body:?}");
    let error = body["errors"][0].as_str().unwrap_or_default();
    assert!(error.contains("not allowed by this deployment (HANGAR_BROKER_ALLOWED_ROLE_ARNS)"), "{error}");
    after.stop().await.unwrap();
}

#[tokio::test]
async fn roles_adding_users_to_groups_outside_the_allowed_ones_are_refused_when_written_and_at_creds_time() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let groups = BrokerLimits { groups: Some(vec!["hangar-ops".into(), "hangar-ci-*".into()]), ..Default::default() };
    let role = |groups: &str| json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "iam_groups": groups});

    let limited = start_on(dir.path(), groups.clone()).await;
    for outside in ["admins", "hangar-ops,Administrators", "hangar-ci"] {
        let (status, body) = vault(&limited.url, "POST", "aws/roles/grouped", Some(role(outside))).await;
        assert_eq!(status, 400, "{outside}: {body:?}");
        let error = body["errors"][0].as_str().unwrap_or_default();
        let group = outside.split(',').next_back().unwrap();
        assert!(error.contains(&format!("iam_groups entry {group} ")), "the group is named: {error}");
        assert!(error.contains("not allowed by this deployment (HANGAR_BROKER_ALLOWED_GROUPS)"), "{error}");
        assert_eq!(vault(&limited.url, "GET", "aws/roles/grouped", None).await.0, 404, "nothing was stored");
    }
    let (status, body) =
        vault(&limited.url, "POST", "aws/roles/grouped", Some(role("hangar-ops,hangar-ci-deploy"))).await;
    assert_eq!(status, 204, "{body:?}");
    limited.stop().await.unwrap();

    // Written while groups were unrestricted, then asked for under the list: refused before AWS.
    let open = start_on(dir.path(), BrokerLimits::default()).await;
    assert_eq!(vault(&open.url, "POST", "aws/roles/admins", Some(role("admins"))).await.0, 204);
    open.stop().await.unwrap();
    let limited = start_on(dir.path(), groups).await;
    let (status, body) = vault(&limited.url, "GET", "aws/creds/admins", None).await;
    assert_eq!(status, 400, "{body:?}");
    let error = body["errors"][0].as_str().unwrap_or_default();
    assert!(error.contains("iam_groups entry admins ") && error.contains("(HANGAR_BROKER_ALLOWED_GROUPS)"), "{error}");
    limited.stop().await.unwrap();
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_static_role_whose_user_is_no_longer_allowed_is_not_rotated_but_kept() {
    let aws = aws().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let user = format!("hangar-kept-{}", suffix());
    aws.create_user(&user).await;
    let allowing = BrokerLimits { static_users: Some(vec![user.clone()]), ..Default::default() };
    let narrowed = BrokerLimits { static_users: Some(vec!["someone-else".into()]), ..Default::default() };

    let before = start_on(dir.path(), allowing.clone()).await;
    assert_eq!(vault(&before.url, "POST", "aws/config/root", Some(emulator_root(&aws))).await.0, 204);
    let role = json!({"username": user, "rotation_period": "1h"});
    assert_eq!(vault(&before.url, "POST", "aws/static-roles/app", Some(role)).await.0, 204);
    let (_, creds) = vault(&before.url, "GET", "aws/static-creds/app", None).await;
    let first = creds["data"]["access_key"].as_str().or(creds["access_key"].as_str()).expect("a key").to_owned();
    before.stop().await.unwrap();

    let after = start_on(dir.path(), narrowed.clone()).await;
    let (status, read) = vault(&after.url, "GET", "aws/static-roles/app", None).await;
    assert_eq!(status, 200, "the role can still be read: {read:?}");
    assert_eq!(vault(&after.url, "GET", "aws/static-creds/app", None).await.0, 400, "its keys are not handed out");

    let later = an_hour_later();
    let run = AppState::build(config_on(dir.path(), narrowed), false).await.expect("a state");
    let (rotated, _) = hangar::broker::scheduled_run_at(&run, later).await.expect("a run");
    assert_eq!(rotated, 0, "a user the deployment no longer allows gets no new key");
    assert_eq!(aws.access_keys(&user).await, [first.as_str()], "no key was created in IAM");
    assert_eq!(vault(&after.url, "GET", "aws/static-roles/app", None).await.0, 200, "the role is kept");
    after.stop().await.unwrap();

    // The list widened again: the role rotates at its next turn.
    let run = AppState::build(config_on(dir.path(), allowing), false).await.expect("a state");
    let (rotated, _) = hangar::broker::scheduled_run_at(&run, later + 3600 + 10).await.expect("a run");
    assert_eq!(rotated, 1, "allowed again, it rotates");
    let keys = aws.access_keys(&user).await;
    assert!(keys.len() == 2 && keys.contains(&first), "a second key: {keys:?}");
}
