//! dev-server with `--store dynamodb --init` against the AWS emulator: the accounts flows that
//! lean hardest on the store (transactions, counters, cascades) behave as on SQLite.
//! (Its own test binary: it points the AWS SDK's environment at the emulator.)

use hangar_tests::spawn_on_dynamodb;
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
