//! dev-server with `--store dynamodb --init` against the AWS emulator: the accounts flows that
//! lean hardest on the store (transactions, counters, cascades) behave as on SQLite.

use hangar_tests::builders::{acme_on_dynamodb, new_module, new_version, private_module, version, workspace};
use hangar_tests::{module_archive, spawn_on_dynamodb, spawn_on_dynamodb_without_queue, targz, Entry, TestApp};
use serde_json::json;

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn the_accounts_flow_works_on_dynamodb_and_s3() {
    let app = spawn_on_dynamodb().await;
    app.create_organization("alpha").await;
    app.create_organization("beta").await;
    let duplicate = json!({"data": {"type": "organizations", "attributes": {"name": "alpha", "email": "a@b.io"}}});
    assert_eq!(app.post("/api/v2/organizations", &app.admin_token, duplicate).await.status, 422);

    let (team_id, token) = app.team_with_token("alpha", "platform", json!({"manage-workspaces": true})).await;
    let workspace = workspace("prod");
    let created = app.post("/api/v2/organizations/alpha/workspaces", &token, workspace.clone()).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let ws_id = created.body["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(app.post("/api/v2/organizations/alpha/workspaces", &token, workspace).await.status, 422);

    let beta = app.owners_token("beta").await;
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws_id}"), &beta).await.status, 404);
    assert_eq!(app.get("/api/v2/organizations/alpha", &beta).await.status, 404);

    let listed = app.get("/api/v2/organizations", &app.admin_token).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 2);

    assert_eq!(app.delete("/api/v2/organizations/alpha", &app.admin_token).await.status, 204);
    assert_eq!(app.get("/api/v2/account/details", &token).await.status, 401);
    assert_eq!(app.get(&format!("/api/v2/teams/{team_id}"), &app.admin_token).await.status, 404);
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws_id}"), &app.admin_token).await.status, 404);
    let after = app.get("/api/v2/organizations", &app.admin_token).await;
    assert_eq!(after.body["meta"]["pagination"]["total-count"], 1);
    app.stop().await;
}

/// The AWS path of an upload: a PUT on the pre-signed S3 link, then the `registry-ingest`
/// handler fed the ObjectCreated event S3 sends (the sample in `events/`, pointed at this key).
/// dev-server polls no queue here, so the handler is the only ingest.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_archive_put_on_s3_is_ingested_by_the_registry_ingest_handler() {
    let app = spawn_on_dynamodb_without_queue().await;
    let vpc = vpc(&app).await;
    let upload = upload_link(&app, &vpc, "1.0.0").await;
    assert!(upload.contains("/upload/") && upload.contains("X-Amz-Signature"), "{upload}");
    assert_eq!(app.upload(&upload, module_archive()).await, 200);
    let version_path = format!("{vpc}/version?module_version=1.0.0");
    let read = || app.get(&version_path, &app.admin_token);
    assert_eq!(read().await.body["data"]["attributes"]["status"], "pending", "S3 ingests on its event, not on the PUT");

    let key = upload.split('?').next().unwrap().split("/upload/").nth(1).unwrap();
    let event = app.s3_event(&format!("upload/{key}"));
    let state = app.second_state().await;
    let summary = hangar::jobs::ingest(&state, event.clone()).await.unwrap();
    assert_eq!(summary.ingested, [key]);
    assert_eq!(read().await.body["data"]["attributes"]["status"], "ok");

    // S3 may deliver an event twice: the second finds nothing waiting.
    let again = hangar::jobs::ingest(&state, event).await.unwrap();
    assert_eq!(again.ignored, [key]);
    app.stop().await;
}

/// The stack's two bootstrap secrets (site-admin, root service token) holding these values;
/// their ARNs in that order.
async fn bootstrap_secrets(secrets: &aws_sdk_secretsmanager::Client, admin: &str, root: &str) -> [String; 2] {
    let suffix = hangar::ids::random_token(8);
    let mut arns = [admin, root].map(|_| String::new());
    for ((name, value), arn) in [("admin", admin), ("root", root)].into_iter().zip(&mut arns) {
        let created =
            secrets.create_secret().name(format!("hangar-{name}-{suffix}")).secret_string(value).send().await.unwrap();
        *arn = created.arn().unwrap().to_owned();
    }
    arns
}

/// In AWS the bootstrap tokens come from the stack's Secrets Manager secrets, read at cold
/// start by what every function's `main` calls.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_cold_start_installs_the_bootstrap_tokens_from_secrets_manager() {
    let moto = hangar_tests::moto_in_environment().await;
    let secrets = aws_sdk_secretsmanager::Client::new(&moto.sdk);
    let arns = bootstrap_secrets(&secrets, "admin-from-secret", "root-from-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let state = hangar_tests::cold_start(&[
        ("HANGAR_DATA_DIR", dir.path().to_str().expect("a UTF-8 path")),
        ("HANGAR_ADMIN_TOKEN_SECRET_ARN", &arns[0]),
        ("HANGAR_ROOT_SERVICE_TOKEN_SECRET_ARN", &arns[1]),
    ])
    .await;
    let store = state.store.as_ref();
    let admin = hangar::auth::resolve(store, "admin-from-secret").await.unwrap();
    assert_eq!(admin, Some(hangar::auth::Principal::SiteAdmin));
    assert!(hangar::broker::tokens::resolve(store, "root-from-secret").await.unwrap().is_some_and(|t| t.is_root()));
}

/// Rotating in AWS: update the secret, and the next cold start installs the new value and
/// retires the old; a root secret of `none` removes the root token. A function not given the
/// root secret's ARN (accounts, registry-api, …) leaves the root token alone.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_cold_start_after_a_secret_update_replaces_the_bootstrap_tokens() {
    use hangar::auth::{self, Principal};
    use hangar::broker::tokens;
    let moto = hangar_tests::moto_in_environment().await;
    let secrets = aws_sdk_secretsmanager::Client::new(&moto.sdk);
    let arns = bootstrap_secrets(&secrets, "admin-before", "root-before").await;
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().expect("a UTF-8 path");
    let broker = [
        ("HANGAR_DATA_DIR", data_dir),
        ("HANGAR_ADMIN_TOKEN_SECRET_ARN", arns[0].as_str()),
        ("HANGAR_ROOT_SERVICE_TOKEN_SECRET_ARN", arns[1].as_str()),
    ];
    hangar_tests::cold_start(&broker).await;

    for (arn, value) in [(&arns[0], "admin-after"), (&arns[1], "root-after")] {
        secrets.put_secret_value().secret_id(arn).secret_string(value).send().await.unwrap();
    }
    let state = hangar_tests::cold_start(&broker).await;
    let store = state.store.as_ref();
    assert_eq!(auth::resolve(store, "admin-after").await.unwrap(), Some(Principal::SiteAdmin));
    assert_eq!(auth::resolve(store, "admin-before").await.unwrap(), None, "the old admin token is retired");
    assert!(tokens::resolve(store, "root-after").await.unwrap().is_some_and(|t| t.is_root()));
    assert!(tokens::resolve(store, "root-before").await.unwrap().is_none(), "the old root token is retired");

    let accounts = hangar_tests::cold_start(&broker[..2]).await;
    assert!(tokens::resolve(accounts.store.as_ref(), "root-after").await.unwrap().is_some(), "left alone");

    secrets.put_secret_value().secret_id(&arns[1]).secret_string("none").send().await.unwrap();
    let state = hangar_tests::cold_start(&broker).await;
    assert!(tokens::resolve(state.store.as_ref(), "root-after").await.unwrap().is_none(), "`none`: no root token");
    assert!(tokens::resolve(state.store.as_ref(), "none").await.unwrap().is_none());
    assert_eq!(auth::resolve(state.store.as_ref(), "admin-after").await.unwrap(), Some(Principal::SiteAdmin));
}

const MODULES: &str = "/api/v2/organizations/acme/registry-modules";

/// dev-server on DynamoDB with `acme` and its private module vpc/aws (no version): the app and
/// the owners' token.
async fn acme_with_vpc_on_dynamodb() -> (TestApp, String) {
    let (app, owners) = acme_on_dynamodb().await;
    assert_eq!(app.post(MODULES, &owners, private_module("vpc", "aws")).await.status, 201);
    (app, owners)
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_over_long_version_is_a_422_on_dynamodb_too() {
    let (app, owners) = acme_with_vpc_on_dynamodb().await;
    let versions = format!("{MODULES}/private/acme/vpc/aws/versions");
    for long in [format!("1.0.0-{}", "a".repeat(2_000)), format!("1.0.0+{}", "b".repeat(500_000))] {
        let body = version(&long);
        let reply = app.post(&versions, &owners, body).await;
        assert_eq!(reply.status, 422, "{:?}", reply.body);
    }
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn distinct_versions_created_at_once_all_succeed_on_dynamodb() {
    let (app, owners) = acme_on_dynamodb().await;
    crate::registry::distinct_versions_created_at_once_all_succeed_and_downloads_count(app, owners).await;
}

/// On DynamoDB an item holds at most 400 KB, so a module's item must not grow with its versions:
/// 5,000 versions are shown on SQLite (`registry`); here, where the emulator copies the whole
/// table on each transaction, the module's item is shown to stay the same size from 1 version
/// to 60 with long version strings.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_module_s_item_does_not_grow_with_its_versions_on_dynamodb() {
    use hangar::store::keys;
    let (app, owners) = acme_with_vpc_on_dynamodb().await;
    let versions = format!("{MODULES}/private/acme/vpc/aws/versions");
    let create = |patch: usize| {
        let long = format!("1.0.{patch}-{}", "r".repeat(100));
        let body = version(&long);
        let (app, owners, versions) = (&app, &owners, &versions);
        async move { app.post(versions, owners, body).await.status }
    };
    let org_id = app.get("/api/v2/organizations/acme", &owners).await.body["data"]["attributes"]["external-id"]
        .as_str()
        .expect("the organization's id")
        .to_owned();
    let state = app.second_state().await;
    let module_size = || async {
        let item = state.store.get(&keys::module(&org_id, None, "vpc", "aws")).await.unwrap().expect("the module");
        serde_json::to_vec(&*item.attrs().unwrap()).unwrap().len()
    };
    assert_eq!(create(0).await, 201);
    let with_one = module_size().await;
    for patch in 1..60 {
        assert_eq!(create(patch).await, 201);
    }
    // Only its revision number may have grown a digit or two.
    let with_sixty = module_size().await;
    assert!(with_sixty < with_one + 8, "the module's item grew from {with_one} to {with_sixty} bytes");
    let shown = app.get(&format!("{MODULES}/private/acme/vpc/aws"), &owners).await;
    assert_eq!(shown.body["data"]["attributes"]["version-statuses"].as_array().map(Vec::len), Some(60));
    app.stop().await;
}

/// The bucket's keys under `prefix`.
async fn keys_under(app: &TestApp, prefix: &str) -> Vec<String> {
    let moto = hangar_tests::moto_in_environment().await;
    let config = aws_sdk_s3::config::Builder::from(&moto.sdk).force_path_style(true).build();
    let listed = aws_sdk_s3::Client::from_conf(config)
        .list_objects_v2()
        .bucket(&app.config.bucket)
        .prefix(prefix)
        .send()
        .await
        .expect("the bucket lists");
    listed.contents().iter().filter_map(|object| object.key().map(str::to_owned)).collect()
}

/// A private module `acme/vpc/aws`, made by the site admin on a fresh dev-server; its path.
async fn vpc(app: &TestApp) -> String {
    app.create_organization("acme").await;
    new_module(app, &app.admin_token, "acme", "vpc", "aws").await
}

/// Creates version `v` of the module at `path` as the site admin; its upload link.
async fn upload_link(app: &TestApp, path: &str, v: &str) -> String {
    new_version(app, &app.admin_token, path, v).await
}

/// dev-server on DynamoDB and S3 ingests as AWS does: the bucket's ObjectCreated events go to a
/// queue it polls. A sound archive becomes `ok`, a hostile one failed; uploads are removed and
/// only the served archive stays.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_upload_on_dynamodb_and_s3_is_ingested_from_the_bucket_s_events() {
    let app = spawn_on_dynamodb().await;
    let path = vpc(&app).await;
    let sound = upload_link(&app, &path, "1.0.0").await;
    assert_eq!(app.upload(&sound, module_archive()).await, 200);
    let hostile = upload_link(&app, &path, "1.0.1").await;
    let escape = Entry::Raw { name: "../escape.tf", kind: tar::EntryType::Regular, link: None };
    assert_eq!(app.upload(&hostile, targz(&[escape])).await, 200);
    let status = |v: &str| {
        let path = format!("{path}/version?module_version={v}");
        let app = &app;
        async move { app.settled(&path, &app.admin_token).await.body["data"]["attributes"]["status"].clone() }
    };
    assert_eq!(status("1.0.0").await, "ok");
    assert_eq!(status("1.0.1").await, "reg_ingress_failed");
    assert_eq!(keys_under(&app, "object/").await.len(), 1, "only the sound archive is kept");
    assert!(keys_under(&app, "upload/").await.is_empty(), "every upload was removed after ingest");
    app.stop().await;
}

/// A pre-signed S3 link cannot refuse a second PUT, so the rule is kept by construction: of ten
/// concurrent uploads, whichever event is ingested first makes the version; every other event
/// finds nothing waiting, and the archive served is the one inspected. The events are delivered
/// one after another: the emulator cannot settle concurrent conditional writes atomically.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn of_concurrent_uploads_to_an_s3_link_one_is_ingested_once_and_served() {
    let app = spawn_on_dynamodb_without_queue().await;
    let path = vpc(&app).await;
    let link = upload_link(&app, &path, "1.0.0").await;
    let archives: Vec<Vec<u8>> = (0..10)
        .map(|i| {
            let readme = format!("# vpc\nUpload number {i}.\n");
            targz(&[Entry::File("./main.tf", b"variable \"cidr\" {}\n"), Entry::File("./README.md", readme.as_bytes())])
        })
        .collect();
    let puts = archives.iter().map(|archive| app.upload(&link, archive.clone()));
    for status in futures::future::join_all(puts).await {
        assert_eq!(status, 200);
    }
    let key = link.split('?').next().unwrap().split("/upload/").nth(1).unwrap().to_owned();
    let state = app.second_state().await;
    let mut ingested = Vec::new();
    for _ in 0..10 {
        let summary = hangar::jobs::ingest(&state, app.s3_event(&format!("upload/{key}"))).await.unwrap();
        ingested.extend(summary.ingested);
    }
    assert_eq!(ingested, [key], "one event is ingested, the others ignored");
    let read = app.get(&format!("{path}/version?module_version=1.0.0"), &app.admin_token).await;
    assert_eq!(read.body["data"]["attributes"]["status"], "ok");
    assert_eq!(keys_under(&app, "object/").await.len(), 1, "one archive is served");
    let shown = app.get("/api/registry/v1/modules/acme/vpc/aws/1.0.0", &app.admin_token).await;
    let readme = shown.body["root"]["readme"].as_str().unwrap_or_default().to_owned();
    assert!(readme.starts_with("# vpc\nUpload number "), "the README shown is one that was uploaded: {readme}");
    app.stop().await;
}

/// A read naming an item no key can (a module name past DynamoDB's 1,024-byte sort key) is a
/// 404, also when the read is made ahead with the token's (the organization's id known).
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_read_of_an_over_long_name_is_a_404_on_dynamodb() {
    let (app, owners) = acme_with_vpc_on_dynamodb().await;
    assert_eq!(app.get(&format!("{MODULES}/private/acme/vpc/aws"), &owners).await.status, 200);
    let long = "a".repeat(2_000);
    for path in [
        format!("{MODULES}/private/acme/{long}/aws"),
        format!("/api/registry/v1/modules/acme/{long}/aws/versions"),
        format!("/api/registry/v1/modules/acme/vpc/{long}/versions"),
    ] {
        let reply = app.get(&path, &owners).await;
        assert_eq!(reply.status, 404, "{:?}", reply.body);
    }
    app.stop().await;
}

/// A default nested past what DynamoDB stores (32 levels an item) is dropped at ingest, so the
/// version's records are written and read back on DynamoDB as on the embedded store.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_deeply_nested_default_is_dropped_so_the_version_stores_on_dynamodb() {
    let app = spawn_on_dynamodb_without_queue().await;
    let vpc = vpc(&app).await;
    let upload = upload_link(&app, &vpc, "1.0.0").await;
    let deep = format!("{}1{}", "[".repeat(60), "]".repeat(60));
    let variables = format!(r#"{{"variable": {{"deep": {{"default": {deep}}}, "fine": {{"default": [[1]]}}}}}}"#);
    assert_eq!(app.upload(&upload, targz(&[Entry::File("./main.tf.json", variables.as_bytes())])).await, 200);
    let key = upload.split('?').next().unwrap().split("/upload/").nth(1).unwrap();
    let state = app.second_state().await;
    let summary = hangar::jobs::ingest(&state, app.s3_event(&format!("upload/{key}"))).await.unwrap();
    assert_eq!(summary.ingested, [key]);
    let read = app.get(&format!("{vpc}/version?module_version=1.0.0"), &app.admin_token).await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["data"]["attributes"]["status"], "ok", "{:?}", read.body);
    assert!(read.body.to_string().contains("variable deep"), "the note says what was dropped: {:?}", read.body);
    assert_eq!(app.delete(&format!("{vpc}/1.0.0"), &app.admin_token).await.status, 204);
    app.stop().await;
}
