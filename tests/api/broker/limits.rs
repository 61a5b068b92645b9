//! The deployment's allow-lists (`HANGAR_BROKER_*`): dynamic users under one IAM path with one
//! permissions boundary, managed policies and assumable roles from lists, static-role users
//! from a path or a list. A role outside them is refused with a 400 when written, not inside
//! AWS; unset, they restrict nothing (every other broker test runs so).

use hangar::config::{BrokerLimits, Config};
use serde_json::json;

use super::{aws, first_error, suffix, Aws, Vault, ACCOUNT, DOCUMENT, ROOT};
use hangar_tests::TestApp;

/// dev-server's broker with `limits`, its `aws` mount pointed at the emulator.
async fn limited(limits: BrokerLimits) -> Option<(Aws, TestApp)> {
    let aws = aws().await?;
    let app = TestApp::spawn_with(Config {
        root_service_token: Some(ROOT.into()),
        broker_limits: limits,
        ..Config::default()
    })
    .await;
    aws.configure(&Vault::root(&app), "aws").await;
    Some((aws, app))
}

fn policy(name: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:policy/{name}")
}

#[tokio::test]
async fn roles_outside_the_allowed_policies_roles_path_or_boundary_are_refused_when_written() {
    let limits = BrokerLimits {
        user_path: Some("/hangar/".into()),
        permissions_boundary: Some(policy("hangar-boundary")),
        policy_arns: Some(vec![policy("hangar-*"), policy("ReadOnly")]),
        role_arns: Some(vec![format!("arn:aws:iam::{ACCOUNT}:role/deployer")]),
        static_users: None,
    };
    let Some((_aws, app)) = limited(limits).await else { return };
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
async fn dynamic_users_are_created_under_the_deployments_path() {
    let path = format!("/hangar-limits-{}/", suffix());
    let limits = BrokerLimits {
        user_path: Some(path.clone()),
        permissions_boundary: Some(policy("hangar-boundary")),
        ..BrokerLimits::default()
    };
    let Some((aws, app)) = limited(limits).await else { return };
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
async fn static_roles_hold_only_the_allowed_users() {
    let path = format!("/hangar-static-{}/", suffix());
    let listed = format!("listed-{}", suffix());
    let limits = BrokerLimits { static_users: Some(vec![path.clone(), listed.clone()]), ..BrokerLimits::default() };
    let Some((aws, app)) = limited(limits).await else { return };
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
async fn a_role_written_before_the_limits_is_refused_at_creds_time() {
    let Some(aws) = aws().await else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let start = |limits: BrokerLimits| {
        let config = Config { root_service_token: Some(ROOT.into()), broker_limits: limits, ..Config::default() };
        dev_server::start(hangar_tests::options(dir.path()), config)
    };
    let vault = |url: &str, method: &str, path: &str, body: Option<serde_json::Value>| {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request =
            reqwest::Client::new().request(method, format!("{url}/v1/{path}")).header("X-Vault-Token", ROOT);
        if let Some(body) = body {
            request = request.header("Content-Type", "application/json").body(body.to_string());
        }
        async move {
            let reply = request.send().await.expect("a reply");
            let status = reply.status().as_u16();
            (status, reply.json::<serde_json::Value>().await.unwrap_or_default())
        }
    };
    let before = start(BrokerLimits::default()).await.expect("dev-server starts");
    let root_config = json!({
        "access_key": hangar_tests::moto::ACCESS_KEY, "secret_key": hangar_tests::moto::SECRET_KEY,
        "region": hangar_tests::moto::REGION, "iam_endpoint": aws.endpoint, "sts_endpoint": aws.endpoint,
    });
    assert_eq!(vault(&before.url, "POST", "aws/config/root", Some(root_config)).await.0, 204);
    let role = json!({"credential_type": "assumed_role", "role_arns": format!("arn:aws:iam::{ACCOUNT}:role/admin")});
    assert_eq!(vault(&before.url, "POST", "aws/roles/wide", Some(role)).await.0, 204);
    before.stop().await.unwrap();

    let limits =
        BrokerLimits { role_arns: Some(vec![format!("arn:aws:iam::{ACCOUNT}:role/deployer")]), ..Default::default() };
    let after = start(limits).await.expect("dev-server starts");
    let (status, body) = vault(&after.url, "GET", "aws/sts/wide", None).await;
    assert_eq!(status, 400, "{body:?}");
    let error = body["errors"][0].as_str().unwrap_or_default();
    assert!(error.contains("not allowed by this deployment (HANGAR_BROKER_ALLOWED_ROLE_ARNS)"), "{error}");
    after.stop().await.unwrap();
}
