//! The bootstrap tokens across restarts: the site-admin token and the broker's root service
//! token are replaced when their configured value changes (the old value stops working at
//! once), a revoked root token stays revoked until a new value is configured, and the broker
//! runs with no root token at all when told `none`.

use dev_server::{start, Running};
use hangar::config::Config;
use hangar_tests::options;
use serde_json::{json, Value};

/// dev-server on `dir`, with the given bootstrap settings, as an operator restarts it.
async fn restart(dir: &tempfile::TempDir, admin: Option<&str>, root: Option<&str>) -> Running {
    let config = Config {
        admin_token: admin.map(str::to_owned),
        root_service_token: root.map(str::to_owned),
        ..Config::default()
    };
    start(options(dir.path()), config).await.expect("dev-server starts")
}

/// The status of `GET /api/v2/account/details` with `token`.
async fn admin_status(running: &Running, token: &str) -> u16 {
    let url = format!("{}/api/v2/account/details", running.url);
    reqwest::Client::new().get(url).bearer_auth(token).send().await.expect("a reply").status().as_u16()
}

/// A `/v1` call with `token` as `X-Vault-Token`: (status, body).
async fn vault(running: &Running, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut request = reqwest::Client::new().request(method, format!("{}/v1/{path}", running.url));
    request = request.header("X-Vault-Token", token);
    if let Some(body) = body {
        request = request.header("Content-Type", "application/json").body(body.to_string());
    }
    let response = request.send().await.expect("a reply");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// `lookup-self`'s data when the token works, `None` when it is refused.
async fn lookup(running: &Running, token: &str) -> Option<Value> {
    let (status, body) = vault(running, token, "GET", "auth/token/lookup-self", None).await;
    assert!(matches!(status, 200 | 403), "{status} {body:?}");
    (status == 200).then(|| body["data"].clone())
}

/// Creates a token through `path` (`auth/token/create`, `create-orphan`); returns its secret.
async fn create_token(running: &Running, parent: &str, path: &str, body: Value) -> String {
    let (status, reply) = vault(running, parent, "POST", path, Some(body)).await;
    assert_eq!(status, 200, "{path}: {reply:?}");
    reply["auth"]["client_token"].as_str().expect("a client token").to_owned()
}

#[tokio::test]
async fn a_new_admin_token_replaces_the_old_one_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let first = restart(&dir, Some("admin-one"), None).await;
    assert_eq!(admin_status(&first, "admin-one").await, 200);
    first.stop().await.unwrap();

    let second = restart(&dir, Some("admin-two"), None).await;
    assert_eq!(admin_status(&second, "admin-two").await, 200);
    assert_eq!(admin_status(&second, "admin-one").await, 401, "the old value stops working at once");
    second.stop().await.unwrap();

    let third = restart(&dir, Some("admin-two"), None).await;
    assert_eq!(admin_status(&third, "admin-two").await, 200, "the same value again changes nothing");
    assert_eq!(admin_status(&third, "admin-one").await, 401);
    third.stop().await.unwrap();
}

#[tokio::test]
async fn a_configured_admin_token_replaces_the_generated_one_and_stays_once_unset() {
    let dir = tempfile::tempdir().unwrap();
    let first = restart(&dir, None, None).await;
    let generated = first.generated_admin_token.clone().expect("generated at first start");
    first.stop().await.unwrap();

    let second = restart(&dir, Some("chosen-admin"), None).await;
    assert_eq!(admin_status(&second, "chosen-admin").await, 200);
    assert_eq!(admin_status(&second, &generated).await, 401);
    second.stop().await.unwrap();

    let third = restart(&dir, None, None).await;
    assert_eq!(third.generated_admin_token, None, "an installed token is not replaced by a generated one");
    assert_eq!(admin_status(&third, "chosen-admin").await, 200);
    assert_eq!(admin_status(&third, &generated).await, 401);
    third.stop().await.unwrap();
}

#[tokio::test]
async fn a_new_root_token_replaces_the_old_one_and_keeps_the_tokens_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let first = restart(&dir, None, Some("root-one")).await;
    let before = lookup(&first, "root-one").await.expect("the configured root works");
    let child = create_token(&first, "root-one", "auth/token/create", json!({"policies": ["default"]})).await;
    first.stop().await.unwrap();

    let second = restart(&dir, None, Some("root-two")).await;
    assert_eq!(second.generated_root_token, None);
    assert_eq!(lookup(&second, "root-one").await, None, "the old value stops working at once");
    let after = lookup(&second, "root-two").await.expect("the new value works");
    assert_eq!(after["policies"], json!(["root"]));
    assert_eq!(after["accessor"], before["accessor"], "the same root token, with a new secret");
    let child = lookup(&second, &child).await.expect("what the root made before survives its rotation");
    assert_eq!(child["orphan"], false);
    create_token(&second, "root-two", "auth/token/create", json!({"policies": ["default"]})).await;
    second.stop().await.unwrap();
}

#[tokio::test]
async fn a_revoked_root_token_stays_revoked_until_a_new_value_is_configured() {
    let dir = tempfile::tempdir().unwrap();
    let first = restart(&dir, None, Some("root-to-revoke")).await;
    let (status, body) = vault(&first, "root-to-revoke", "POST", "auth/token/revoke-self", Some(json!({}))).await;
    assert_eq!(status, 204, "{body:?}");
    assert_eq!(lookup(&first, "root-to-revoke").await, None);
    first.stop().await.unwrap();

    let second = restart(&dir, None, Some("root-to-revoke")).await;
    assert_eq!(lookup(&second, "root-to-revoke").await, None, "a restart does not bring it back");
    second.stop().await.unwrap();

    let unset = restart(&dir, None, None).await;
    assert_eq!(unset.generated_root_token, None, "nor does dev-server generate another");
    unset.stop().await.unwrap();

    let third = restart(&dir, None, Some("root-new")).await;
    assert!(lookup(&third, "root-new").await.is_some(), "a new value is installed");
    assert_eq!(lookup(&third, "root-to-revoke").await, None);
    third.stop().await.unwrap();
}

#[tokio::test]
async fn the_broker_runs_with_no_root_token_when_told_none() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = restart(&dir, None, Some("none")).await;
    assert_eq!(fresh.generated_root_token, None, "none means none, not a generated one");
    assert_eq!(lookup(&fresh, "none").await, None, "`none` is not a token");
    let admin = fresh.generated_admin_token.clone().expect("the site-admin token is generated as usual");
    assert_eq!(admin_status(&fresh, &admin).await, 200);
    fresh.stop().await.unwrap();

    let unset = restart(&dir, None, None).await;
    assert_eq!(unset.generated_root_token, None, "the choice holds once the setting is unset");
    unset.stop().await.unwrap();
}

#[tokio::test]
async fn removing_the_root_token_leaves_the_broker_to_the_orphan_tokens_it_issued() {
    let dir = tempfile::tempdir().unwrap();
    let first = restart(&dir, None, Some("root-to-remove")).await;
    let body = json!({"policies": ["root"], "display_name": "operator"});
    let operator = create_token(&first, "root-to-remove", "auth/token/create-orphan", body).await;
    let child = create_token(&first, "root-to-remove", "auth/token/create", json!({"policies": ["default"]})).await;
    first.stop().await.unwrap();

    let second = restart(&dir, None, Some("none")).await;
    assert_eq!(lookup(&second, "root-to-remove").await, None, "the root token is gone at once");
    assert_eq!(lookup(&second, &child).await, None, "and its children with it, as revoking it does");
    assert!(lookup(&second, &operator).await.is_some(), "an orphan it issued still works");
    let policy = json!({"policy": "path \"aws/creds/deploy\" { capabilities = [\"read\"] }"});
    let (status, reply) = vault(&second, &operator, "PUT", "sys/policies/acl/deployer", Some(policy)).await;
    assert!(matches!(status, 200 | 204), "the orphan manages the broker: {status} {reply:?}");
    second.stop().await.unwrap();

    let third = restart(&dir, None, Some("root-after-none")).await;
    assert!(lookup(&third, "root-after-none").await.is_some(), "configuring a value installs a root again");
    assert_eq!(lookup(&third, &child).await, None, "a new root token: the old one's children stay revoked");
    assert_eq!(lookup(&third, "root-to-remove").await, None);
    third.stop().await.unwrap();
}
