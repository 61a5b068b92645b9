//! dev-server with `--store dynamodb --init` against the AWS emulator: the accounts flows that
//! lean hardest on the store (transactions, counters, cascades) behave as on SQLite.

use aws_lambda_events::event::s3::S3Event;
use hangar_tests::{module_archive, spawn_on_dynamodb};
use serde_json::json;

#[tokio::test]
async fn the_accounts_flow_works_on_dynamodb_and_s3() {
    let Some(app) = spawn_on_dynamodb().await else { return };
    app.create_organization("alpha").await;
    app.create_organization("beta").await;
    let duplicate = json!({"data": {"type": "organizations", "attributes": {"name": "alpha", "email": "a@b.io"}}});
    assert_eq!(app.post("/api/v2/organizations", &app.admin_token, duplicate).await.status, 422);

    let (team_id, token) = app.team_with_token("alpha", "platform", json!({"manage-workspaces": true})).await;
    let workspace = json!({"data": {"type": "workspaces", "attributes": {"name": "prod"}}});
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
#[tokio::test]
async fn an_archive_put_on_s3_is_ingested_by_the_registry_ingest_handler() {
    let Some(app) = spawn_on_dynamodb().await else { return };
    app.create_organization("acme").await;
    let module = json!({"data": {"type": "registry-modules", "attributes": {"name": "vpc", "provider": "aws"}}});
    assert_eq!(app.post("/api/v2/organizations/acme/registry-modules", &app.admin_token, module).await.status, 201);
    let vpc = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";
    let version = json!({"data": {"type": "registry-module-versions", "attributes": {"version": "1.0.0"}}});
    let created = app.post(&format!("{vpc}/versions"), &app.admin_token, version).await;
    let upload = created.body["data"]["links"]["upload"].as_str().unwrap().to_owned();
    assert!(upload.contains("/object/") && upload.contains("X-Amz-Signature"), "{upload}");
    assert_eq!(app.upload(&upload, module_archive()).await, 200);
    let version_path = format!("{vpc}/version?module_version=1.0.0");
    let read = || app.get(&version_path, &app.admin_token);
    assert_eq!(read().await.body["data"]["attributes"]["status"], "pending", "S3 ingests on its event, not on the PUT");

    let key = upload.split('?').next().unwrap().split("/object/").nth(1).unwrap();
    let sample = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../events/registry-ingest.01-object-created.json"
    ));
    let mut event: serde_json::Value = serde_json::from_str(&sample.unwrap()).unwrap();
    event["Records"][0]["s3"]["object"]["key"] = json!(format!("object/{key}"));
    event["Records"][0]["s3"]["bucket"]["name"] = json!(app.config.bucket);
    let event: S3Event = serde_json::from_value(event).unwrap();
    let state = app.second_state().await;
    let summary = hangar::jobs::ingest(&state, event.clone()).await.unwrap();
    assert_eq!(summary.ingested, [key]);
    assert_eq!(read().await.body["data"]["attributes"]["status"], "ok");

    // S3 may deliver an event twice: the second finds nothing waiting.
    let again = hangar::jobs::ingest(&state, event).await.unwrap();
    assert_eq!(again.ignored, [key]);
    app.stop().await;
}

/// In AWS the bootstrap tokens come from the stack's Secrets Manager secrets, read at cold
/// start by what every function's `main` calls.
#[tokio::test]
async fn a_cold_start_installs_the_bootstrap_tokens_from_secrets_manager() {
    let Some(moto) = hangar_tests::moto_in_environment().await else { return };
    let secrets = aws_sdk_secretsmanager::Client::new(&moto.sdk);
    let suffix = hangar::ids::random_token(8);
    let mut arns = Vec::new();
    for (name, value) in [("admin", "admin-from-secret"), ("root", "root-from-secret")] {
        let created =
            secrets.create_secret().name(format!("hangar-{name}-{suffix}")).secret_string(value).send().await.unwrap();
        arns.push(created.arn().unwrap().to_owned());
    }
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

#[tokio::test]
async fn an_over_long_version_is_a_422_on_dynamodb_too() {
    let Some(app) = spawn_on_dynamodb().await else { return };
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    let modules = "/api/v2/organizations/acme/registry-modules";
    let module = json!({"data": {"type": "registry-modules", "attributes": {"name": "vpc", "provider": "aws", "registry-name": "private"}}});
    assert_eq!(app.post(modules, &owners, module).await.status, 201);
    let versions = format!("{modules}/private/acme/vpc/aws/versions");
    for long in [format!("1.0.0-{}", "a".repeat(2_000)), format!("1.0.0+{}", "b".repeat(500_000))] {
        let body = json!({"data": {"type": "registry-module-versions", "attributes": {"version": long}}});
        let reply = app.post(&versions, &owners, body).await;
        assert_eq!(reply.status, 422, "{:?}", reply.body);
    }
    app.stop().await;
}
