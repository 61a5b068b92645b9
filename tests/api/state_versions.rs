//! Workspaces' state over HTTP: state versions written as the CLI's remote backend writes them,
//! read, listed, downloaded through signed links, their outputs; and the attacks on them.

use std::time::Duration;

use hangar::config::Config;
use hangar_tests::builders::{
    acme, acme_with, grant, id, lock, new_workspace, state_version_body, terraform_state, write_state,
};
use hangar_tests::{Reply, TestApp};
use serde_json::{json, Value};

/// Downloads a link as a client that sends no token.
async fn download(app: &TestApp, url: &str) -> (u16, Vec<u8>) {
    let response = app.client.get(url).send().await.expect("the link answers");
    let status = response.status().as_u16();
    (status, response.bytes().await.expect("a body").to_vec())
}

fn download_url(reply: &Reply) -> String {
    reply.body["data"]["attributes"]["hosted-state-download-url"].as_str().expect("a download link").to_owned()
}

#[tokio::test]
async fn the_entitlement_set_says_which_features_hangar_serves_to_whoever_may_read_the_organization() {
    let (app, owners) = TestApp::with_organization("acme").await;
    app.create_organization("globex").await;
    let admin = app.admin_token.clone();
    let org = app.get("/api/v2/organizations/acme", &owners).await;
    let reply = app.get("/api/v2/organizations/acme/entitlement-set", &owners).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let data = &reply.body["data"];
    assert_eq!(data["type"], "entitlement-sets");
    assert_eq!(data["id"], org.body["data"]["attributes"]["external-id"]);
    let attributes = &data["attributes"];
    for served in ["agents", "private-module-registry", "teams", "vcs-integrations", "state-storage", "operations"] {
        assert_eq!(attributes[served], true, "{served}");
    }
    for missing in ["sentinel", "sso", "cost-estimation", "run-tasks"] {
        assert_eq!(attributes[missing], false, "{missing}");
    }
    assert_eq!(app.get("/api/v2/organizations/acme/entitlement-set", &admin).await.status, 200);
    let other = app.owners_token("globex").await;
    let hidden = app.get("/api/v2/organizations/acme/entitlement-set", &other).await;
    assert_eq!(hidden.status, 404, "another organization's team learns nothing: {:?}", hidden.body);
    let anonymous = app.request(reqwest::Method::GET, "/api/v2/organizations/acme/entitlement-set", None, None).await;
    assert_eq!(anonymous.status, 401);
}

#[tokio::test]
async fn a_locked_workspace_takes_state_versions_and_serves_the_newest_as_current() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let none = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(none.status, 404, "no state yet");

    let first =
        terraform_state(1, "lin-1", &[("greeting", json!("hello"), false), ("password", json!("s3cret"), true)]);
    let unlocked = write_state(&app, &owners, &ws, &first, 1).await;
    assert_eq!(unlocked.status, 409, "only the lock's holder writes state: {:?}", unlocked.body);
    lock(&app, &owners, &ws).await;
    let created = write_state(&app, &owners, &ws, &first, 1).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let attributes = &created.body["data"]["attributes"];
    assert_eq!((attributes["serial"].as_u64(), attributes["status"].as_str()), (Some(1), Some("finalized")));
    assert_eq!(attributes["resources"][0]["type"], "null_resource");
    assert_eq!(attributes["terraform-version"], "1.0.3");
    assert_eq!(created.body["data"]["relationships"]["outputs"]["data"].as_array().map(Vec::len), Some(2));
    let (status, body) = download(&app, &download_url(&created)).await;
    assert_eq!((status, body), (200, first.clone()), "the link serves the state as written");

    let second = terraform_state(2, "lin-1", &[("greeting", json!("hello again"), false)]);
    let newer = write_state(&app, &owners, &ws, &second, 2).await;
    assert_eq!(newer.status, 201, "{:?}", newer.body);
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(current.status, 200);
    assert_eq!(id(&current), id(&newer));
    assert_eq!(download(&app, &download_url(&current)).await, (200, second));

    let workspace = app.get(&format!("/api/v2/workspaces/{ws}"), &owners).await;
    assert_eq!(workspace.body["data"]["relationships"]["current-state-version"]["data"]["id"], json!(id(&newer)));
    assert_eq!(workspace.body["data"]["attributes"]["resource-count"], 1);
    assert_eq!(workspace.body["data"]["attributes"]["permissions"]["can-create-state-versions"], true);

    let listed = app.get(&format!("/api/v2/workspaces/{ws}/state-versions"), &owners).await;
    let serials: Vec<u64> =
        listed.body["data"].as_array().unwrap().iter().map(|v| v["attributes"]["serial"].as_u64().unwrap()).collect();
    assert_eq!(serials, [2, 1], "newest first");
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 2);
    let by_name = app
        .get("/api/v2/state-versions?filter[workspace][name]=network&filter[organization][name]=acme", &owners)
        .await;
    let ids = |reply: &Reply| -> Vec<Value> {
        reply.body["data"].as_array().unwrap().iter().map(|v| v["id"].clone()).collect()
    };
    assert_eq!(ids(&by_name), ids(&listed), "go-tfe's list by names");
    let missing_filter = app.get("/api/v2/state-versions?filter[workspace][name]=network", &owners).await;
    assert_eq!(missing_filter.status, 422);
}

#[tokio::test]
async fn outputs_hide_sensitive_values_in_lists_and_show_them_read_alone() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let state = terraform_state(1, "lin", &[("b_public", json!("hello"), false), ("a_secret", json!("s3cret"), true)]);
    let version = write_state(&app, &owners, &ws, &state, 1).await;
    assert_eq!(version.status, 201);
    let listed = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version-outputs"), &owners).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let outputs = listed.body["data"].as_array().unwrap();
    assert_eq!(
        outputs.iter().map(|o| o["attributes"]["name"].clone()).collect::<Vec<_>>(),
        [json!("a_secret"), json!("b_public")]
    );
    assert_eq!(outputs[0]["attributes"]["value"], Value::Null, "a sensitive value is not listed");
    assert_eq!(outputs[1]["attributes"]["value"], "hello");
    let secret_id = outputs[0]["id"].as_str().unwrap();
    assert!(secret_id.starts_with("wsout-"));
    let alone = app.get(&format!("/api/v2/state-version-outputs/{secret_id}"), &owners).await;
    assert_eq!(alone.body["data"]["attributes"]["value"], "s3cret");
    let by_version = app.get(&format!("/api/v2/state-versions/{}/outputs", id(&version)), &owners).await;
    assert_eq!(by_version.body["data"], listed.body["data"]);
    let included = app.get(&format!("/api/v2/state-versions/{}?include=outputs", id(&version)), &owners).await;
    assert_eq!(included.body["included"], listed.body["data"]);
    assert_eq!(app.get(&format!("/api/v2/state-versions/{}?include=run", id(&version)), &owners).await.status, 400);
    for forged in ["wsout-nothing-0", &secret_id.replace("-0", "-9"), "wsout-x"] {
        assert_eq!(app.get(&format!("/api/v2/state-version-outputs/{forged}"), &owners).await.status, 404, "{forged}");
    }

    // At rest the state is sealed: its file holds neither value in the clear.
    let sealed = app.data_dir.path().join("sealed");
    for entry in std::fs::read_dir(&sealed).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!bytes.windows(6).any(|w| w == b"s3cret" || w == b"hello\""), "plaintext at rest");
    }
}

#[tokio::test]
async fn a_write_is_refused_when_its_serial_lineage_or_md5_do_not_hold() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/state-versions");
    lock(&app, &owners, &ws).await;
    assert_eq!(write_state(&app, &owners, &ws, &terraform_state(5, "lin", &[]), 5).await.status, 201);

    let stale = write_state(&app, &owners, &ws, &terraform_state(5, "lin", &[]), 5).await;
    assert_eq!(stale.status, 409, "the serial must advance: {:?}", stale.body);
    let other_lineage = terraform_state(9, "another", &[]);
    let replaced = write_state(&app, &owners, &ws, &other_lineage, 9).await;
    assert_eq!(replaced.status, 409, "a lineage change needs force: {:?}", replaced.body);
    let forced = app.post(&path, &owners, state_version_body(&other_lineage, 9, true)).await;
    assert_eq!(forced.status, 201, "with force it replaces the state: {:?}", forced.body);

    let mut wrong_md5 = state_version_body(&terraform_state(10, "another", &[]), 10, false);
    wrong_md5["data"]["attributes"]["md5"] = json!("0123456789abcdef0123456789abcdef");
    let refused = app.post(&path, &owners, wrong_md5).await;
    assert_eq!(refused.status, 422);
    assert_eq!(refused.body["errors"][0]["source"]["pointer"], "/data/attributes/md5");
    let mismatched = write_state(&app, &owners, &ws, &terraform_state(11, "another", &[]), 12).await;
    assert_eq!(mismatched.status, 422, "the serial sent is the state's own: {:?}", mismatched.body);
    let not_state = write_state(&app, &owners, &ws, b"{\"hello\": 1}", 12).await;
    assert_eq!(not_state.status, 422);
    let long_lineage = write_state(&app, &owners, &ws, &terraform_state(12, &"l".repeat(65), &[]), 12).await;
    assert_eq!(long_lineage.status, 422, "a lineage is a UUID, not a payload: {:?}", long_lineage.body);
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(current.body["data"]["attributes"]["serial"], 9, "no refused write changed anything");
    assert_eq!(app.get(&path, &owners).await.body["meta"]["pagination"]["total-count"], 2);
}

#[tokio::test]
async fn a_state_over_the_bound_is_refused_with_413() {
    let (app, owners) = acme_with(Config { max_state_bytes: 2048, ..Config::default() }).await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let big = terraform_state(1, "lin", &[("blob", json!("x".repeat(4096)), false)]);
    let refused = write_state(&app, &owners, &ws, &big, 1).await;
    assert_eq!(refused.status, 413, "{:?}", refused.body);
    let huge = terraform_state(1, "lin", &[("blob", json!("x".repeat(4 * 1024 * 1024)), false)]);
    assert_eq!(write_state(&app, &owners, &ws, &huge, 1).await.status, 413, "a body past the bound is not read");
    assert_eq!(write_state(&app, &owners, &ws, &terraform_state(1, "lin", &[]), 1).await.status, 201);
}

#[tokio::test]
async fn download_links_work_alone_unaltered_and_until_they_expire() {
    let config = Config { state_link_lifetime: Duration::from_secs(2), ..Config::default() };
    let (app, owners) = acme_with(config).await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let state = terraform_state(1, "lin", &[]);
    let link = download_url(&write_state(&app, &owners, &ws, &state, 1).await);
    assert_eq!(download(&app, &link).await.0, 200);
    let other = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    let other_id = id(&other);
    let mut altered = link.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == '0' { '1' } else { '0' });
    assert_eq!(download(&app, &altered).await.0, 403, "an altered signature");
    let stretched = link.replace("expires=", "expires=9");
    assert_eq!(download(&app, &stretched).await.0, 403, "an altered expiry");
    assert_eq!(download(&app, link.split('?').next().unwrap()).await.0, 403, "no signature");
    let moved = link.replace(&other_id, "sv-AAAAAAAAAAAAAAAA");
    assert_eq!(download(&app, &moved).await.0, 403, "the signature names its version");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(download(&app, &link).await.0, 403, "an expired link");
}

#[tokio::test]
async fn each_team_reads_and_writes_state_as_its_access_allows_and_others_learn_nothing() {
    let (app, owners) = acme().await;
    app.create_organization("globex").await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let version = write_state(&app, &owners, &ws, &terraform_state(1, "lin", &[("x", json!("y"), false)]), 1).await;
    let version_id = id(&version);
    let (_, strangers) = app.team_with_token("acme", "strangers", json!({})).await;
    let (readers_id, readers) = app.team_with_token("acme", "readers", json!({})).await;
    grant(&app, &owners, &readers_id, &ws, json!({"access": "read"})).await;
    let (outputs_id, outputs_only) = app.team_with_token("acme", "outputs", json!({})).await;
    grant(&app, &owners, &outputs_id, &ws, json!({"access": "custom", "state-versions": "read-outputs"})).await;
    let (blind_id, blind) = app.team_with_token("acme", "blind", json!({})).await;
    grant(&app, &owners, &blind_id, &ws, json!({"access": "custom", "state-versions": "none"})).await;
    let other = app.owners_token("globex").await;
    let reads = [
        format!("/api/v2/state-versions/{version_id}"),
        format!("/api/v2/workspaces/{ws}/current-state-version"),
        format!("/api/v2/workspaces/{ws}/state-versions"),
        format!("/api/v2/workspaces/{ws}/current-state-version-outputs"),
        format!("/api/v2/state-versions/{version_id}/outputs"),
        "/api/v2/state-versions?filter[workspace][name]=network&filter[organization][name]=acme".to_owned(),
    ];
    for path in &reads {
        assert_eq!(app.get(path, &strangers).await.status, 404, "{path}: a team without access");
        assert_eq!(app.get(path, &blind).await.status, 404, "{path}: a team whose access holds no state");
        assert_eq!(app.get(path, &other).await.status, 404, "{path}: another organization");
        assert_eq!(app.get(path, &readers).await.status, 200, "{path}: read access reads state");
        let history = path.ends_with("/state-versions") || path.contains("filter[");
        let expected = if history { 403 } else { 200 };
        assert_eq!(
            app.get(path, &outputs_only).await.status,
            expected,
            "{path}: read-outputs reads the current outputs"
        );
    }
    let shown = app.get(&format!("/api/v2/state-versions/{version_id}"), &outputs_only).await;
    assert_eq!(shown.body["data"]["attributes"]["hosted-state-download-url"], Value::Null, "outputs, not the state");
    assert!(
        download_url(&app.get(&format!("/api/v2/state-versions/{version_id}"), &readers).await).contains("signature=")
    );
    let seen = app.get(&format!("/api/v2/workspaces/{ws}"), &blind).await;
    assert_eq!(seen.body["data"]["attributes"]["permissions"]["can-read-state-versions"], false);
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws}"), &strangers).await.status, 404);
    let state = terraform_state(2, "lin", &[]);
    assert_eq!(write_state(&app, &readers, &ws, &state, 2).await.status, 403, "readers may not write");
    assert_eq!(write_state(&app, &strangers, &ws, &state, 2).await.status, 404, "strangers do not see it");
    assert_eq!(write_state(&app, &other, &ws, &state, 2).await.status, 404, "another organization");
    let lock_path = format!("/api/v2/workspaces/{ws}/actions/unlock");
    assert_eq!(app.post(&lock_path, &readers, json!({})).await.status, 403, "readers may not unlock");

    // A team with write access writes state once it holds the lock.
    let (writers_id, writers) = app.team_with_token("acme", "writers", json!({})).await;
    grant(&app, &owners, &writers_id, &ws, json!({"access": "write"})).await;
    assert_eq!(write_state(&app, &writers, &ws, &state, 2).await.status, 409, "the owners hold the lock");
    assert_eq!(app.post(&lock_path, &owners, json!({})).await.status, 200);
    lock(&app, &writers, &ws).await;
    assert_eq!(write_state(&app, &writers, &ws, &state, 2).await.status, 201);
    let state = terraform_state(3, "lin", &[]);

    // A team that manages workspaces may, but not while someone else holds the lock.
    let (_, operators) = app.team_with_token("acme", "operators", json!({"manage-workspaces": true})).await;
    let held = write_state(&app, &operators, &ws, &state, 3).await;
    assert_eq!(held.status, 409, "the writers hold the lock: {:?}", held.body);
    assert_eq!(app.get(&format!("/api/v2/state-versions/{version_id}"), &operators).await.status, 200);

    // Once it is not current, a team limited to outputs reads nothing of the first version.
    let old_output = version.body["data"]["relationships"]["outputs"]["data"][0]["id"].as_str().unwrap().to_owned();
    for path in [
        format!("/api/v2/state-versions/{version_id}"),
        format!("/api/v2/state-versions/{version_id}/outputs"),
        format!("/api/v2/state-version-outputs/{old_output}"),
    ] {
        assert_eq!(app.get(&path, &outputs_only).await.status, 404, "{path}: an old version's outputs");
        assert_eq!(app.get(&path, &readers).await.status, 200, "{path}: read access reads the history");
    }
}

#[tokio::test]
async fn concurrent_writers_of_one_workspace_leave_one_unbroken_sequence() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let writes = (1..=8u64).map(|serial| {
        let (app, owners, ws) = (&app, &owners, &ws);
        async move { (serial, write_state(app, owners, ws, &terraform_state(serial, "lin", &[]), serial).await.status) }
    });
    let results = futures::future::join_all(writes).await;
    let won: Vec<u64> = results.iter().filter(|(_, status)| *status == 201).map(|(serial, _)| *serial).collect();
    assert!(results.iter().all(|(_, status)| [201, 409].contains(&status.as_u16())), "{results:?}");
    assert!(won.contains(&8), "the highest serial always lands: {results:?}");
    let listed = app.get(&format!("/api/v2/workspaces/{ws}/state-versions?page[size]=100"), &owners).await;
    let serials: Vec<u64> =
        listed.body["data"].as_array().unwrap().iter().map(|v| v["attributes"]["serial"].as_u64().unwrap()).collect();
    assert_eq!(serials.len(), won.len(), "every accepted write is one version: {results:?}");
    assert!(serials.windows(2).all(|pair| pair[0] > pair[1]), "each accepted write advanced the serial: {serials:?}");
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(current.body["data"]["attributes"]["serial"], 8);
}

#[tokio::test]
async fn deleting_a_workspace_deletes_its_state() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let version = write_state(&app, &owners, &ws, &terraform_state(1, "lin", &[]), 1).await;
    let link = download_url(&version);
    assert_eq!(std::fs::read_dir(app.data_dir.path().join("sealed")).unwrap().count(), 1);
    assert_eq!(app.delete(&format!("/api/v2/workspaces/{ws}"), &owners).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/state-versions/{}", id(&version)), &owners).await.status, 404);
    assert_eq!(download(&app, &link).await.0, 404, "a link outlives nothing");
    assert_eq!(std::fs::read_dir(app.data_dir.path().join("sealed")).unwrap().count(), 0, "the state is gone");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn on_dynamodb_and_s3_state_is_written_locked_raced_served_from_s3_and_deleted() {
    let (app, owners) = hangar_tests::builders::acme_on_dynamodb().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let state = terraform_state(1, "lin", &[("greeting", json!("hello"), false)]);
    assert_eq!(write_state(&app, &owners, &ws, &state, 1).await.status, 409, "unlocked");
    lock(&app, &owners, &ws).await;
    let version = write_state(&app, &owners, &ws, &state, 1).await;
    assert_eq!(version.status, 201, "{:?}", version.body);

    // The link is Hangar's; it sends the client on to S3, dropping any bearer token on the way.
    let link = download_url(&version);
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let answer = no_redirects.get(&link).bearer_auth(&owners).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 307);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.contains("X-Amz-Signature"), "a pre-signed S3 link: {location}");
    assert_eq!(download(&app, &link).await, (200, state.clone()));
    let outputs = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version-outputs"), &owners).await;
    assert_eq!(outputs.body["data"][0]["attributes"]["value"], "hello");

    let writes = (2..=6u64).map(|serial| {
        let (app, owners, ws) = (&app, &owners, &ws);
        async move { write_state(app, owners, ws, &terraform_state(serial, "lin", &[]), serial).await.status.as_u16() }
    });
    let statuses = futures::future::join_all(writes).await;
    assert!(statuses.iter().all(|status| [201, 409].contains(status)), "{statuses:?}");
    let listed = app.get(&format!("/api/v2/workspaces/{ws}/state-versions"), &owners).await;
    let accepted = statuses.iter().filter(|status| **status == 201).count();
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], json!(accepted + 1), "{statuses:?}");
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(current.body["data"]["attributes"]["serial"], 6);

    assert_eq!(app.delete(&format!("/api/v2/workspaces/{ws}"), &owners).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/state-versions/{}", id(&version)), &owners).await.status, 404);
    assert_eq!(download(&app, &link).await.0, 404);
}

// ----- versions made without their state: upload links -----

/// A state version's attributes without the state, as go-tfe's Upload sends them.
fn pending_body(state: &[u8], serial: u64, lineage: Option<&str>) -> Value {
    use md5::Digest;
    json!({"data": {"type": "state-versions", "attributes": {
        "serial": serial, "md5": hex::encode(md5::Md5::digest(state)), "lineage": lineage,
    }}})
}

fn attribute(reply: &Reply, name: &str) -> String {
    reply.body["data"]["attributes"][name].as_str().unwrap_or_else(|| panic!("{name} in {:?}", reply.body)).to_owned()
}

/// The version `id` once its status is no longer `pending` (settling runs off the upload's
/// request, as S3's event does).
async fn settled(app: &TestApp, token: &str, id: &str) -> Reply {
    for _ in 0..200 {
        let reply = app.get(&format!("/api/v2/state-versions/{id}"), token).await;
        if reply.body["data"]["attributes"]["status"] != "pending" {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} is still pending");
}

#[tokio::test]
async fn a_version_made_without_its_state_waits_for_it_on_its_upload_links_then_is_current() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/state-versions");
    let first = terraform_state(1, "lin", &[("greeting", json!("hello"), false)]);
    assert_eq!(app.post(&path, &owners, pending_body(&first, 1, Some("lin"))).await.status, 409, "unlocked");
    lock(&app, &owners, &ws).await;
    let mut bad_md5 = pending_body(&first, 1, None);
    bad_md5["data"]["attributes"]["md5"] = json!("not-an-md5");
    assert_eq!(app.post(&path, &owners, bad_md5).await.status, 422);

    let pending = app.post(&path, &owners, pending_body(&first, 1, Some("lin"))).await;
    assert_eq!(pending.status, 201, "{:?}", pending.body);
    assert_eq!(attribute(&pending, "status"), "pending");
    assert_eq!(pending.body["data"]["attributes"]["hosted-state-download-url"], Value::Null, "nothing to serve yet");
    let (state_link, json_link) =
        (attribute(&pending, "hosted-state-upload-url"), attribute(&pending, "hosted-json-state-upload-url"));
    let none = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(none.status, 404, "a pending version is not current");
    let shown = app.get(&format!("/api/v2/state-versions/{}", id(&pending)), &owners).await;
    assert_eq!(shown.body["data"]["attributes"]["hosted-state-upload-url"], Value::Null, "links only to their writer");
    assert_eq!(app.get(&format!("/api/v2/state-versions/{}/outputs", id(&pending)), &owners).await.status, 200);

    assert_eq!(app.upload(&state_link, first.clone()).await, 200);
    let finalized = settled(&app, &owners, &id(&pending)).await;
    assert_eq!(attribute(&finalized, "status"), "finalized", "{:?}", finalized.body);
    assert_eq!(finalized.body["data"]["attributes"]["resources"][0]["type"], "null_resource");
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(id(&current), id(&pending));
    assert_eq!(download(&app, &download_url(&current)).await, (200, first.clone()));
    let json_url = |reply: &Reply| reply.body["data"]["attributes"]["hosted-json-state-download-url"].clone();
    assert_eq!(json_url(&current), Value::Null, "no JSON form yet");

    // The JSON form may land after the state: the version names it then.
    let json_state = br#"{"format_version": "1.0", "values": {}}"#;
    assert_eq!(app.upload(&json_link, json_state.to_vec()).await, 200);
    let mut named = Value::Null;
    for _ in 0..200 {
        named = json_url(&app.get(&format!("/api/v2/state-versions/{}", id(&pending)), &owners).await);
        if !named.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(download(&app, named.as_str().expect("a JSON link")).await, (200, json_state.to_vec()));
    let outputs = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version-outputs"), &owners).await;
    assert_eq!(outputs.body["data"][0]["attributes"]["value"], "hello");
    let listed = app.get(&path, &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 1);
    let workspace = app.get(&format!("/api/v2/workspaces/{ws}"), &owners).await;
    assert_eq!(workspace.body["data"]["relationships"]["current-state-version"]["data"]["id"], json!(id(&pending)));

    let replaced = terraform_state(1, "lin", &[("greeting", json!("forged"), false)]);
    assert_eq!(app.upload(&state_link, replaced).await.as_u16(), 409, "a used link takes nothing more");
    assert_eq!(download(&app, &download_url(&current)).await, (200, first), "the state is the one checked");
}

#[tokio::test]
async fn an_upload_that_is_not_the_declared_state_is_refused_and_the_version_waits_on() {
    let (app, owners) = acme_with(Config { max_state_bytes: 4096, ..Config::default() }).await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let state = terraform_state(3, "lin", &[]);
    let pending =
        app.post(&format!("/api/v2/workspaces/{ws}/state-versions"), &owners, pending_body(&state, 3, None)).await;
    assert_eq!(pending.status, 201, "{:?}", pending.body);
    let link = attribute(&pending, "hosted-state-upload-url");

    // Each refused in turn: another MD5, another serial, not a state, too large.
    let wrong = [
        terraform_state(3, "lin", &[("extra", json!("x"), false)]),
        b"{\"version\": 4, \"serial\": 3}".to_vec(),
        vec![b' '; 8192],
    ];
    for body in wrong {
        assert_eq!(app.upload(&link, body).await.as_u16(), 422, "its writer learns the state was refused");
    }
    assert_eq!(app.upload(&link, state.clone()).await, 200, "and the link takes the declared state after");
    let finalized = settled(&app, &owners, &id(&pending)).await;
    assert_eq!(attribute(&finalized, "status"), "finalized");
    assert_eq!(
        (finalized.body["data"]["attributes"]["serial"].as_u64(), attribute(&finalized, "lineage")),
        (Some(3), "lin".into())
    );
    assert_eq!(download(&app, &download_url(&finalized)).await, (200, state), "only the declared state is kept");
    let json = &finalized.body["data"]["attributes"]["hosted-json-state-download-url"];
    assert_eq!(json, &Value::Null, "no JSON form was sent");
    assert_eq!(
        std::fs::read_dir(app.data_dir.path().join("uploads")).map(|d| d.count()).unwrap_or(0),
        0,
        "uploads are removed"
    );
}

#[tokio::test]
async fn a_pending_version_is_superseded_by_its_writers_next_write_and_by_a_lock_taken_before_it_landed() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/state-versions");
    lock(&app, &owners, &ws).await;
    // A version whose state never came is superseded by the next write.
    let late = terraform_state(2, "lin", &[]);
    let pending = app.post(&path, &owners, pending_body(&late, 2, Some("lin"))).await;
    assert_eq!(pending.status, 201, "{:?}", pending.body);
    assert_eq!(write_state(&app, &owners, &ws, &terraform_state(3, "lin", &[]), 3).await.status, 201);
    let discarded = app.get(&format!("/api/v2/state-versions/{}", id(&pending)), &owners).await;
    assert_eq!(attribute(&discarded, "status"), "discarded", "{:?}", discarded.body);
    assert_eq!(discarded.body["data"]["attributes"]["hosted-state-download-url"], Value::Null);
    assert_eq!(app.upload(&attribute(&pending, "hosted-state-upload-url"), late).await.as_u16(), 409);

    // A link used after its writer let the lock go and another writer took it changes nothing.
    let state = terraform_state(4, "lin", &[]);
    let pending = app.post(&path, &owners, pending_body(&state, 4, Some("lin"))).await;
    assert_eq!(app.post(&format!("/api/v2/workspaces/{ws}/actions/unlock"), &owners, json!({})).await.status, 200);
    let (writers_id, writers) = app.team_with_token("acme", "writers", json!({})).await;
    grant(&app, &owners, &writers_id, &ws, json!({"access": "write"})).await;
    lock(&app, &writers, &ws).await;
    let answer = app.upload(&attribute(&pending, "hosted-state-upload-url"), state).await;
    assert_eq!(answer.as_u16(), 409, "the late writer learns its state was not kept");
    let version = app.get(&format!("/api/v2/state-versions/{}", id(&pending)), &owners).await;
    assert_eq!(attribute(&version, "status"), "discarded");
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &writers).await;
    assert_eq!(current.body["data"]["attributes"]["serial"], 3, "the lock's holder reads what it locked");
    assert_eq!(std::fs::read_dir(app.data_dir.path().join("sealed")).unwrap().count(), 1, "only serial 3 is kept");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn on_dynamodb_and_s3_a_state_uploaded_to_its_presigned_link_becomes_current_by_the_bucket_event() {
    let (app, owners) = hangar_tests::builders::acme_on_dynamodb_without_queue().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let state = terraform_state(1, "lin", &[("greeting", json!("hello"), false)]);
    let pending =
        app.post(&format!("/api/v2/workspaces/{ws}/state-versions"), &owners, pending_body(&state, 1, None)).await;
    assert_eq!(pending.status, 201, "{:?}", pending.body);
    let link = attribute(&pending, "hosted-state-upload-url");
    assert!(link.contains("X-Amz-Signature"), "a pre-signed S3 link: {link}");
    let json_link = attribute(&pending, "hosted-json-state-upload-url");
    let json_state = br#"{"format_version": "1.0"}"#.to_vec();
    assert_eq!(app.upload(&json_link, json_state.clone()).await, 200);
    assert_eq!(app.upload(&link, state.clone()).await, 200);

    // The bucket's ObjectCreated events, as the registry-ingest function receives them: the JSON
    // form's first, then the state's.
    let worker = app.second_state().await;
    for link in [&json_link, &link] {
        let key = link.split('?').next().unwrap().split(&format!("/{}/", app.config.bucket)).nth(1).unwrap();
        let summary = hangar::jobs::ingest(&worker, app.s3_event(key)).await.unwrap();
        assert_eq!(summary.ingested.len(), 1, "{summary:?}");
    }
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(id(&current), id(&pending));
    assert_eq!(download(&app, &download_url(&current)).await, (200, state));
    assert_eq!(download(&app, &attribute(&current, "hosted-json-state-download-url")).await, (200, json_state));

    // A state that landed while its event is still on its way: the next holder of the lock reads
    // it all the same, settled as the lock changed hands.
    let path = format!("/api/v2/workspaces/{ws}/state-versions");
    let second = terraform_state(2, "lin", &[]);
    let pending = app.post(&path, &owners, pending_body(&second, 2, None)).await;
    assert_eq!(app.upload(&attribute(&pending, "hosted-state-upload-url"), second).await, 200);
    assert_eq!(app.post(&format!("/api/v2/workspaces/{ws}/actions/unlock"), &owners, json!({})).await.status, 200);
    let (writers_id, writers) = app.team_with_token("acme", "writers", json!({})).await;
    grant(&app, &owners, &writers_id, &ws, json!({"access": "write"})).await;
    lock(&app, &writers, &ws).await;
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &writers).await;
    assert_eq!(id(&current), id(&pending), "{:?}", current.body);

    // A link used after its writer let the lock go and another took it: the state is not kept.
    let third = terraform_state(3, "lin", &[]);
    let pending = app.post(&path, &writers, pending_body(&third, 3, None)).await;
    assert_eq!(app.post(&format!("/api/v2/workspaces/{ws}/actions/unlock"), &writers, json!({})).await.status, 200);
    lock(&app, &owners, &ws).await;
    assert_eq!(app.upload(&attribute(&pending, "hosted-state-upload-url"), third).await, 200);
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(current.body["data"]["attributes"]["serial"], 2);
    let discarded = app.get(&format!("/api/v2/state-versions/{}", id(&pending)), &owners).await;
    assert_eq!(attribute(&discarded, "status"), "discarded");
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn in_a_versioned_bucket_removing_a_read_upload_removes_that_version_for_good_and_nothing_after() {
    use hangar::blobs::{DeployedBlobs, ObjectId, WithS3};
    let moto = hangar_tests::moto_in_environment().await;
    let bucket = format!("hangar-versions-{}", hangar::ids::random_token(8).to_lowercase());
    let blobs = WithS3::connect(&moto.sdk, &bucket, None, true).await.unwrap();
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&moto.sdk).force_path_style(true).build());
    let enabled = aws_sdk_s3::types::VersioningConfiguration::builder()
        .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
        .build();
    s3.put_bucket_versioning().bucket(&bucket).versioning_configuration(enabled).send().await.unwrap();

    let upload = ObjectId::generate();
    let files = tempfile::tempdir().unwrap();
    let (first, second) = (files.path().join("first"), files.path().join("second"));
    std::fs::write(&first, b"the state read").unwrap();
    std::fs::write(&second, b"a later upload").unwrap();
    blobs.put_file(&upload, &first).await.unwrap();
    let read = blobs.read_upload(&upload, 1024).await.unwrap();
    assert_eq!(&read.body[..], b"the state read");
    assert!(read.version.is_some(), "the bucket keeps versions");
    blobs.put_file(&upload, &second).await.unwrap();
    blobs.remove_read_upload(&upload, &read).await.unwrap();

    let later = blobs.read_upload(&upload, 1024).await.unwrap();
    assert_eq!(&later.body[..], b"a later upload", "an upload that landed since stays for its own event");
    let versions = s3.list_object_versions().bucket(&bucket).prefix(upload.upload_key()).send().await.unwrap();
    assert_eq!(versions.versions().len(), 1, "the version read is gone, not kept behind a marker");
    assert!(versions.delete_markers().is_empty());
    let over = blobs.read_upload(&upload, 4).await.unwrap();
    assert_eq!((over.size, over.body.len()), (14, 0), "over the limit: looked at, not read");
}

#[tokio::test]
async fn only_the_lock_holders_accepted_write_supersedes_its_pending_version() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let path = format!("/api/v2/workspaces/{ws}/state-versions");
    lock(&app, &owners, &ws).await;
    assert_eq!(write_state(&app, &owners, &ws, &terraform_state(1, "lin", &[]), 1).await.status, 201);
    let state = terraform_state(2, "lin", &[]);
    let pending = app.post(&path, &owners, pending_body(&state, 2, Some("lin"))).await;
    assert_eq!(pending.status, 201, "{:?}", pending.body);

    // A writer without the lock is refused, and the holder's upload is still awaited.
    let (writers_id, writers) = app.team_with_token("acme", "writers", json!({})).await;
    grant(&app, &owners, &writers_id, &ws, json!({"access": "write"})).await;
    let intruder = write_state(&app, &writers, &ws, &terraform_state(9, "lin", &[]), 9).await;
    assert_eq!(intruder.status, 409, "{:?}", intruder.body);
    let intruding_pending = app.post(&path, &writers, pending_body(&state, 9, None)).await;
    assert_eq!(intruding_pending.status, 409);
    // Nor does the holder's own refused write.
    assert_eq!(write_state(&app, &owners, &ws, &terraform_state(1, "lin", &[]), 1).await.status, 409, "stale");
    let waiting = app.get(&format!("/api/v2/state-versions/{}", id(&pending)), &owners).await;
    assert_eq!(attribute(&waiting, "status"), "pending");

    assert_eq!(app.upload(&attribute(&pending, "hosted-state-upload-url"), state).await, 200);
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(id(&current), id(&pending), "the holder's state is kept");
}
