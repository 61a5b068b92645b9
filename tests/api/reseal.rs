//! Values sealed before each secret was bound to its record (format 1, which any function
//! allowed the legacy KMS context could open) are rewritten bound by their family's scheduled
//! function, once: what lets template.yaml's `LegacySealedValues=Resealed` drop the last grant
//! that opens them; dev-server does it at start. `Sealer::seal` still makes a format-1 value, so
//! a test plants one.

use hangar::broker::statics::{self, StaticRole};
use hangar::seal::SealContext;
use hangar::store::{keys, Condition, Item, ItemStore, Key};
use hangar_tests::TestApp;
use serde_json::{json, Value};

const ROOT: &str = "root-token";

/// The stored string at `path` (attribute names) of the item at `key`.
async fn sealed_at(store: &dyn ItemStore, key: &Key, path: &[&str]) -> String {
    let item = store.get(key).await.unwrap().expect("the item");
    let attrs = item.attrs().unwrap();
    let value = path[1..].iter().fold(&attrs[path[0]], |value, name| &value[*name]);
    value.as_str().expect("a sealed value").to_owned()
}

/// Replaces the string at `path` of the item at `key` with `value`.
async fn plant(store: &dyn ItemStore, key: &Key, path: &[&str], value: Value) {
    let mut item: Item = store.get(key).await.unwrap().expect("the item");
    match path {
        [name] => item.attrs_mut().unwrap().insert((*name).to_owned(), value),
        [name, inner] => {
            item.attrs_mut().unwrap()[*name].as_object_mut().expect("an object").insert((*inner).to_owned(), value)
        }
        _ => unreachable!(),
    };
    store.put(item, Condition::Always).await.unwrap();
}

#[tokio::test]
async fn key_rotation_rebinds_the_brokers_format_1_values_once_and_records_it() {
    let app =
        TestApp::spawn_with(hangar::config::Config { root_service_token: Some(ROOT.into()), ..Default::default() })
            .await;
    let vault = |path: &str| app.client.request(reqwest::Method::GET, format!("{}/v1/{path}", app.url));
    let root = json!({"access_key": "AKIAEXAMPLE", "secret_key": "bound-later", "iam_endpoint": "http://127.0.0.1:9"});
    let written = app.client.post(format!("{}/v1/aws/config/root", app.url)).header("X-Vault-Token", ROOT).json(&root);
    assert_eq!(written.send().await.unwrap().status(), 204);
    // Another mount whose root names no key (the default chain): its stored key is null, which
    // the pass passes over rather than stopping at.
    let post = |path: &str, body: Value| {
        app.client.post(format!("{}/v1/{path}", app.url)).header("X-Vault-Token", ROOT).json(&body)
    };
    assert!(post("sys/mounts/chain", json!({"type": "aws"})).send().await.unwrap().status().is_success());
    assert_eq!(post("chain/config/root", json!({"region": "us-east-1"})).send().await.unwrap().status(), 204);
    let mounts: Value = vault("sys/mounts").header("X-Vault-Token", ROOT).send().await.unwrap().json().await.unwrap();
    let uuid = mounts["data"]["aws/"]["uuid"].as_str().expect("the aws mount's uuid").to_owned();
    let chain = mounts["data"]["chain/"]["uuid"].as_str().expect("the other mount's uuid").to_owned();

    let (state, store) = (app.second_state().await, app.store());
    let chain_root = store.get(&keys::mount_config(&chain, "root")).await.unwrap().expect("its root");
    assert_eq!(chain_root.attrs().unwrap()["sealed_secret_key"], Value::Null, "stored with no key");
    let root_key = keys::mount_config(&uuid, "root");
    plant(&store, &root_key, &["sealed_secret_key"], json!(state.sealer.seal("the-root-secret").await.unwrap())).await;
    let role = StaticRole {
        name: "app".into(),
        mount_uuid: uuid.clone(),
        username: "app-user".into(),
        user_id: "AIDAEXAMPLE".into(),
        rotation_period: 3600,
        access_key: "AKIASTATIC".into(),
        sealed_secret_key: state.sealer.seal("the-static-secret").await.unwrap(),
        next_rotation: i64::MAX / 2,
        user_path: Some("/".into()),
        previous_access_key: None,
        claim: None,
    };
    store.put(statics::item(&role).unwrap(), Condition::Always).await.unwrap();
    // dev-server's timer ran the pass at its start, on nothing: let it look again.
    store.delete(&keys::broker_resealed(), Condition::Always).await.unwrap();

    hangar::jobs::rotate(&state, json!({})).await.expect("a key-rotation run");
    let static_key = keys::mount_static_role(&uuid, "app");
    for (key, context, secret) in [
        (&root_key, SealContext::broker_root_key(&uuid), "the-root-secret"),
        (&static_key, SealContext::static_role_key(&uuid, "app"), "the-static-secret"),
    ] {
        let sealed = sealed_at(&store, key, &["sealed_secret_key"]).await;
        assert!(state.sealer.is_bound(&sealed), "{context:?} is rebound");
        assert_eq!(state.sealer.unseal_for(&context, &sealed).await.unwrap(), secret, "it opens with its context");
        assert!(state.sealer.unseal(&sealed).await.is_err(), "and no longer without");
    }
    assert!(store.get(&keys::broker_resealed()).await.unwrap().is_some(), "the pass recorded that it finished");

    // Finished, later runs skip the pass: a value planted now stays as it is.
    let planted = state.sealer.seal("the-root-secret").await.unwrap();
    plant(&store, &root_key, &["sealed_secret_key"], json!(planted)).await;
    hangar::jobs::rotate(&state, json!({})).await.expect("a key-rotation run");
    assert_eq!(sealed_at(&store, &root_key, &["sealed_secret_key"]).await, planted);
    app.stop().await;
}

#[tokio::test]
async fn registry_sync_rebinds_the_registrys_format_1_values_once_and_records_it() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let client = json!({"data": {"type": "oauth-clients", "attributes": {
        "service-provider": "github", "oauth-token-string": "ghp-legacy", "name": "GitHub.com"}}});
    let created = app.post("/api/v2/organizations/acme/oauth-clients", &owners, client).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let token = created.body["data"]["relationships"]["oauth-tokens"]["data"][0]["id"].as_str().unwrap().to_owned();
    let module = json!({"data": {"type": "registry-modules",
        "attributes": {"name": "vpc", "provider": "aws", "registry-name": "private"}}});
    let created = app.post("/api/v2/organizations/acme/registry-modules", &owners, module).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let org = app.get("/api/v2/organizations/acme", &owners).await;
    let org_id = org.body["data"]["attributes"]["external-id"].as_str().unwrap().to_owned();

    let (state, store) = (app.second_state().await, app.store());
    let token_key = keys::oauth_token(&org_id, &token);
    plant(&store, &token_key, &["sealed_token"], json!(state.sealer.seal("ghp-legacy").await.unwrap())).await;
    let module_key = keys::module(&org_id, None, "vpc", "aws");
    let repo = json!({
        "identifier": "acme/terraform-aws-vpc", "display_identifier": "acme/terraform-aws-vpc", "branch": "",
        "ingress_submodules": false, "oauth_token_id": token, "service_provider": "github",
        "repository_http_url": "https://github.com/acme/terraform-aws-vpc",
        "webhook_url": "https://hangar.example/webhooks/vcs/hook-uuid", "webhook_uuid": "hook-uuid",
        "sealed_webhook_secret": state.sealer.seal("the-hook-secret").await.unwrap(),
    });
    plant(&store, &module_key, &["vcs_repo"], repo).await;
    let revision = store.get(&module_key).await.unwrap().unwrap().attrs().unwrap()["revision"].as_u64().unwrap();
    store.delete(&keys::registry_resealed(), Condition::Always).await.unwrap();

    hangar::jobs::sync(&state, json!({})).await.expect("a registry-sync run");
    let sealed = sealed_at(&store, &token_key, &["sealed_token"]).await;
    assert!(state.sealer.is_bound(&sealed), "the connection's token is rebound");
    let connection = hangar::accounts::oauth::token_for(&state, &org_id, &token).await.unwrap().expect("a connection");
    assert_eq!(connection.token, "ghp-legacy", "and opens with its context");
    let sealed = sealed_at(&store, &module_key, &["vcs_repo", "sealed_webhook_secret"]).await;
    assert!(state.sealer.is_bound(&sealed), "the webhook secret is rebound");
    let context = SealContext::webhook_secret("hook-uuid");
    assert_eq!(state.sealer.unseal_for(&context, &sealed).await.unwrap(), "the-hook-secret");
    let module = store.get(&module_key).await.unwrap().unwrap();
    assert_eq!(module.attrs().unwrap()["revision"], json!(revision + 1), "a change to the module, on its revision");
    assert!(store.get(&keys::registry_resealed()).await.unwrap().is_some(), "the pass recorded that it finished");

    let planted = state.sealer.seal("ghp-legacy").await.unwrap();
    plant(&store, &token_key, &["sealed_token"], json!(planted)).await;
    hangar::jobs::sync(&state, json!({})).await.expect("a registry-sync run");
    assert_eq!(sealed_at(&store, &token_key, &["sealed_token"]).await, planted, "finished: later runs skip it");
    app.stop().await;
}

#[tokio::test]
async fn dev_server_rebinds_format_1_values_at_start() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = || hangar::config::Config {
        root_service_token: Some(ROOT.into()),
        data_dir: dir.path().to_path_buf(),
        ..Default::default()
    };
    let first = dev_server::start(hangar_tests::options(dir.path()), config()).await.expect("dev-server starts");
    let root = json!({"access_key": "AKIAEXAMPLE", "secret_key": "bound-later", "iam_endpoint": "http://127.0.0.1:9"});
    let client = reqwest::Client::new();
    let written = client.post(format!("{}/v1/aws/config/root", first.url)).header("X-Vault-Token", ROOT).json(&root);
    assert_eq!(written.send().await.unwrap().status(), 204);
    let mounts = client.get(format!("{}/v1/sys/mounts", first.url)).header("X-Vault-Token", ROOT).send().await;
    let mounts: Value = mounts.unwrap().json().await.unwrap();
    let uuid = mounts["data"]["aws/"]["uuid"].as_str().expect("the aws mount's uuid").to_owned();
    first.stop().await.unwrap();

    // Data from before records were bound: a format-1 root key, and no record of a finished pass.
    let state = hangar::state::AppState::build(config(), false).await.expect("a state");
    let store = state.store.as_ref();
    let root_key = keys::mount_config(&uuid, "root");
    plant(store, &root_key, &["sealed_secret_key"], json!(state.sealer.seal("the-root-secret").await.unwrap())).await;
    store.delete(&keys::broker_resealed(), Condition::Always).await.unwrap();

    let again = dev_server::start(hangar_tests::options(dir.path()), config()).await.expect("dev-server starts");
    let mut sealed = String::new();
    for _ in 0..100 {
        sealed = sealed_at(store, &root_key, &["sealed_secret_key"]).await;
        if state.sealer.is_bound(&sealed) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(state.sealer.is_bound(&sealed), "rebound at start");
    let context = SealContext::broker_root_key(&uuid);
    assert_eq!(state.sealer.unseal_for(&context, &sealed).await.unwrap(), "the-root-secret");
    again.stop().await.unwrap();
}
