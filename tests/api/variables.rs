//! Workspace variables over HTTP, as go-tfe and pytfe send them: sensitive values sealed and
//! never shown again, keys unique per category, and who may see them.

use hangar::config::Config;
use hangar::store::{keys, ItemStore};
use hangar_tests::builders::{acme, acme_with, id, new_workspace};
use hangar_tests::TestApp;
use serde_json::{json, Value};

fn var(key: &str, value: &str, category: &str, sensitive: bool) -> Value {
    json!({"data": {"type": "vars", "attributes": {
        "key": key, "value": value, "category": category, "hcl": false, "sensitive": sensitive, "description": "d"
    }}})
}

#[tokio::test]
async fn variables_are_kept_per_workspace_and_sensitive_values_never_come_back() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/vars");
    let region = app.post(&path, &owners, var("region", "eu-west-1", "terraform", false)).await;
    assert_eq!(region.status, 201, "{:?}", region.body);
    assert_eq!(region.body["data"]["attributes"]["value"], "eu-west-1");
    assert_eq!(region.body["data"]["relationships"]["configurable"]["data"]["id"], json!(ws));
    let secret = app.post(&path, &owners, var("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI", "env", true)).await;
    assert_eq!(secret.status, 201, "{:?}", secret.body);
    assert_eq!(secret.body["data"]["attributes"]["value"], Value::Null, "not even on creation");
    let same_key_other_category = app.post(&path, &owners, var("region", "x", "env", false)).await;
    assert_eq!(same_key_other_category.status, 201, "a key is unique per category");
    let taken = app.post(&path, &owners, var("region", "x", "terraform", false)).await;
    assert_eq!(
        (taken.status.as_u16(), taken.body["errors"][0]["source"]["pointer"].as_str()),
        (422, Some("/data/attributes/key"))
    );

    let listed = app.get(&path, &owners).await;
    assert_eq!(listed.body["data"].as_array().map(Vec::len), Some(3));
    let secret_path = format!("{path}/{}", id(&secret));
    assert_eq!(app.get(&secret_path, &owners).await.body["data"]["attributes"]["value"], Value::Null);
    let unmask =
        app.patch(&secret_path, &owners, json!({"data": {"type": "vars", "attributes": {"sensitive": false}}})).await;
    assert_eq!(unmask.status, 422, "a sensitive variable stays sensitive: {:?}", unmask.body);
    let renamed = app
        .patch(&secret_path, &owners, json!({"data": {"type": "vars", "attributes": {"key": "TOKEN", "value": "v2"}}}))
        .await;
    assert_eq!(renamed.body["data"]["attributes"]["key"], "TOKEN");
    assert_eq!(renamed.body["data"]["attributes"]["value"], Value::Null);
    let reuse = app.post(&path, &owners, var("AWS_SECRET_ACCESS_KEY", "free again", "env", false)).await;
    assert_eq!(reuse.status, 201, "a renamed variable frees its old key");
    let region_path = format!("{path}/{}", id(&region));
    let made_sensitive =
        app.patch(&region_path, &owners, json!({"data": {"type": "vars", "attributes": {"sensitive": true}}})).await;
    assert_eq!(made_sensitive.body["data"]["attributes"]["value"], Value::Null, "its value is sealed now");

    // At rest, no value written sensitive is in the clear.
    for file in ["hangar.db", "hangar.db-wal"] {
        let bytes = std::fs::read(app.data_dir.path().join(file)).unwrap_or_default();
        let plain = b"wJalrXUtnFEMI";
        assert!(!bytes.windows(plain.len()).any(|w| w == plain), "{file} holds a sensitive value");
    }

    assert_eq!(app.delete(&region_path, &owners).await.status, 204);
    assert_eq!(app.get(&region_path, &owners).await.status, 404);
    assert_eq!(app.get(&path, &owners).await.body["data"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn bad_variables_are_refused_on_the_attribute_they_break() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/vars");
    let cases = [
        (var("1abc", "v", "terraform", false), "key"),
        (var("with space", "v", "terraform", false), "key"),
        (var("has-dash", "v", "env", false), "key"),
        (var("ok", "v", "other", false), "category"),
        (var(&"k".repeat(129), "v", "terraform", false), "key"),
        (var("big", &"x".repeat(4097), "env", true), "value"),
        (var("huge", &"x".repeat(256 * 1024 + 1), "env", false), "value"),
        (json!({"data": {"type": "vars", "attributes": {"value": "v", "category": "env"}}}), "key"),
        (json!({"data": {"type": "vars", "attributes": {"key": "k", "value": "v"}}}), "category"),
    ];
    for (body, field) in cases {
        let refused = app.post(&path, &owners, body).await;
        assert_eq!(refused.status, 422, "{field}: {:?}", refused.body);
        assert_eq!(refused.body["errors"][0]["source"]["pointer"], format!("/data/attributes/{field}"));
    }
    assert_eq!(app.get(&path, &owners).await.body["data"], json!([]), "nothing was stored");
}

#[tokio::test]
async fn only_those_who_manage_the_workspace_see_or_change_its_variables() {
    let (app, owners) = acme().await;
    app.create_organization("globex").await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/vars");
    let created = app.post(&path, &owners, var("region", "eu", "terraform", false)).await;
    let one = format!("{path}/{}", id(&created));
    let (_, readers) = app.team_with_token("acme", "readers", json!({})).await;
    let other = app.owners_token("globex").await;
    for token in [&readers, &other] {
        assert_eq!(app.get(&path, token).await.status, 404);
        assert_eq!(app.get(&one, token).await.status, 404);
        assert_eq!(app.post(&path, token, var("x", "y", "env", false)).await.status, 404);
        assert_eq!(app.delete(&one, token).await.status, 404);
    }
    let foreign_ws = new_workspace(&app, &other, "globex", "theirs").await;
    let cross = format!("/api/v2/workspaces/{foreign_ws}/vars/{}", id(&created));
    assert_eq!(app.get(&cross, &other).await.status, 404, "a variable is read under its own workspace only");
    let (_, operators) = app.team_with_token("acme", "operators", json!({"manage-workspaces": true})).await;
    assert_eq!(app.get(&one, &operators).await.status, 200);
}

#[tokio::test]
async fn deleting_a_workspace_deletes_its_variables() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/vars");
    let created = app.post(&path, &owners, var("region", "eu", "terraform", true)).await;
    assert_eq!(created.status, 201);
    let store = app.store();
    let marker = store.get(&keys::organization_name("acme")).await.unwrap().unwrap();
    let org_id = marker.attrs().unwrap()["org_id"].as_str().unwrap().to_owned();
    assert_eq!(
        store.query(keys::workspace_data(&org_id, &ws)).await.unwrap().items.len(),
        3,
        "the variable, its key, and the workspace's count of them"
    );
    assert_eq!(app.delete(&format!("/api/v2/workspaces/{ws}"), &owners).await.status, 204);
    assert!(store.query(keys::workspace_data(&org_id, &ws)).await.unwrap().items.is_empty());
    assert!(store.get(&keys::id_pointer(&id(&created))).await.unwrap().is_none(), "its pointer too");
}

#[tokio::test]
async fn pytfe_shaped_updates_keep_what_they_leave_out() {
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/vars");
    let created = app.post(&path, &owners, var("region", "eu", "terraform", false)).await;
    let one = format!("{path}/{}", id(&created));
    let changed = app
        .patch(&one, &owners, json!({"data": {"type": "vars", "id": id(&created), "attributes": {"hcl": true}}}))
        .await;
    let attributes = &changed.body["data"]["attributes"];
    assert_eq!(
        (attributes["value"].as_str(), attributes["hcl"].as_bool(), attributes["description"].as_str()),
        (Some("eu"), Some(true), Some("d"))
    );
}

#[tokio::test]
async fn a_workspace_holds_at_most_the_configured_number_of_variables() {
    let (app, owners) = acme_with(Config { max_workspace_variables: 2, ..Config::default() }).await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let other = new_workspace(&app, &owners, "acme", "dns").await;
    let path = format!("/api/v2/workspaces/{ws}/vars");
    let first = app.post(&path, &owners, var("a", "1", "terraform", false)).await;
    assert_eq!(first.status, 201);
    assert_eq!(app.post(&path, &owners, var("b", "2", "env", false)).await.status, 201);
    let refused = app.post(&path, &owners, var("c", "3", "terraform", false)).await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    assert!(refused.body["errors"][0]["detail"].as_str().unwrap().contains("HANGAR_MAX_WORKSPACE_VARIABLES"));
    assert_eq!(app.get(&path, &owners).await.body["data"].as_array().map(Vec::len), Some(2), "nothing half-written");
    let other_path = format!("/api/v2/workspaces/{other}/vars");
    assert_eq!(app.post(&other_path, &owners, var("c", "3", "terraform", false)).await.status, 201, "per workspace");
    assert_eq!(app.delete(&format!("{path}/{}", id(&first)), &owners).await.status, 204);
    assert_eq!(
        app.post(&path, &owners, var("c", "3", "terraform", false)).await.status,
        201,
        "a delete frees its place"
    );
}
