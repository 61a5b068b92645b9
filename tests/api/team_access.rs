//! Team access to workspaces (`/team-workspaces`) over HTTP: HCP's permission sets and custom
//! permissions, who may grant them, and what a team sees without one.

use hangar_tests::builders::{acme, grant, id, new_workspace};
use serde_json::{json, Value};

fn body(team: &str, workspace: &str, attributes: Value) -> Value {
    json!({"data": {"type": "team-workspaces", "attributes": attributes, "relationships": {
        "team": {"data": {"type": "teams", "id": team}},
        "workspace": {"data": {"type": "workspaces", "id": workspace}},
    }}})
}

#[tokio::test]
async fn permission_sets_grant_what_hcp_documents_and_custom_grants_what_it_names() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let (readers, _) = app.team_with_token("acme", "readers", json!({})).await;
    let (writers, _) = app.team_with_token("acme", "writers", json!({})).await;
    let (auditors, _) = app.team_with_token("acme", "auditors", json!({})).await;

    let read = app.post("/api/v2/team-workspaces", &owners, body(&readers, &ws, json!({"access": "read"}))).await;
    assert_eq!(read.status, 201, "{:?}", read.body);
    let attributes = &read.body["data"]["attributes"];
    assert_eq!(
        (
            &attributes["runs"],
            &attributes["variables"],
            &attributes["state-versions"],
            &attributes["workspace-locking"]
        ),
        (&json!("read"), &json!("read"), &json!("read"), &json!(false))
    );
    assert_eq!(read.body["data"]["relationships"]["team"]["data"]["id"], json!(readers));
    let write = app.post("/api/v2/team-workspaces", &owners, body(&writers, &ws, json!({"access": "write"}))).await;
    let attributes = &write.body["data"]["attributes"];
    assert_eq!(
        (
            &attributes["runs"],
            &attributes["variables"],
            &attributes["state-versions"],
            &attributes["workspace-locking"]
        ),
        (&json!("apply"), &json!("write"), &json!("write"), &json!(true))
    );
    let custom = json!({"access": "custom", "state-versions": "read-outputs", "variables": "none"});
    let audit = app.post("/api/v2/team-workspaces", &owners, body(&auditors, &ws, custom)).await;
    assert_eq!(audit.body["data"]["attributes"]["state-versions"], "read-outputs");
    assert_eq!(audit.body["data"]["attributes"]["runs"], "read", "custom starts from HCP's defaults");
    let other = new_workspace(&app, &owners, "acme", "dns").await;
    let bare = app.post("/api/v2/team-workspaces", &owners, body(&auditors, &other, json!({"access": "custom"}))).await;
    let attributes = &bare.body["data"]["attributes"];
    assert_eq!(
        (&attributes["runs"], &attributes["variables"], &attributes["state-versions"]),
        (&json!("read"), &json!("none"), &json!("none")),
        "a custom access names what it grants: runs read, and nothing else unless named"
    );

    let listed = app.get(&format!("/api/v2/team-workspaces?filter[workspace][id]={ws}"), &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 3);
    assert_eq!(app.get("/api/v2/team-workspaces", &owners).await.status, 422, "the workspace filter is required");
    let path = format!("/api/v2/team-workspaces/{}", id(&audit));
    let widened = app
        .patch(&path, &owners, json!({"data": {"type": "team-workspaces", "attributes": {"variables": "write"}}}))
        .await;
    assert_eq!(
        (
            widened.body["data"]["attributes"]["variables"].as_str(),
            widened.body["data"]["attributes"]["state-versions"].as_str()
        ),
        (Some("write"), Some("read-outputs"))
    );
    let fixed = app
        .patch(&path, &owners, json!({"data": {"type": "team-workspaces", "attributes": {"access": "admin"}}}))
        .await;
    assert_eq!(fixed.body["data"]["attributes"]["run-tasks"], true);
    assert_eq!(app.get(&path, &owners).await.body["data"]["attributes"]["access"], "admin");
}

#[tokio::test]
async fn bad_grants_are_refused_and_change_nothing() {
    let (app, owners) = acme().await;
    app.create_organization("globex").await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let (readers, _) = app.team_with_token("acme", "readers", json!({})).await;
    let (foreign, _) = app.team_with_token("globex", "theirs", json!({})).await;
    let cases = [
        (body(&readers, &ws, json!({"access": "superuser"})), "/data/attributes/access"),
        (body(&readers, &ws, json!({"access": "read", "runs": "apply"})), "/data/attributes/access"),
        (body(&readers, &ws, json!({"access": "custom", "state-versions": "all"})), "/data/attributes/state-versions"),
        (body(&readers, &ws, json!({})), "/data/attributes/access"),
        (body(&foreign, &ws, json!({"access": "read"})), "/data/relationships/team/data/id"),
        (
            json!({"data": {"type": "team-workspaces", "attributes": {"access": "read"}}}),
            "/data/relationships/workspace",
        ),
    ];
    for (request, pointer) in cases {
        let refused = app.post("/api/v2/team-workspaces", &owners, request).await;
        assert_eq!((refused.status.as_u16(), refused.pointer()), (422, pointer), "{:?}", refused.body);
    }
    grant(&app, &owners, &readers, &ws, json!({"access": "read"})).await;
    let twice = app.post("/api/v2/team-workspaces", &owners, body(&readers, &ws, json!({"access": "write"}))).await;
    assert_eq!(twice.status, 422, "one access per team and workspace: {:?}", twice.body);
    let listed = app.get(&format!("/api/v2/team-workspaces?filter[workspace][id]={ws}"), &owners).await;
    assert_eq!(listed.body["data"][0]["attributes"]["access"], "read");
}

#[tokio::test]
async fn only_admins_of_a_workspace_manage_its_access_and_a_team_sees_only_what_it_was_granted() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let hidden = new_workspace(&app, &owners, "acme", "hidden").await;
    let (readers_id, readers) = app.team_with_token("acme", "readers", json!({})).await;
    let (admins_id, admins) = app.team_with_token("acme", "admins", json!({})).await;
    let (others_id, others) = app.team_with_token("acme", "others", json!({})).await;
    grant(&app, &owners, &readers_id, &ws, json!({"access": "read"})).await;
    grant(&app, &owners, &admins_id, &ws, json!({"access": "admin"})).await;

    let listed = app.get("/api/v2/organizations/acme/workspaces", &readers).await;
    let names: Vec<&str> =
        listed.body["data"].as_array().unwrap().iter().map(|w| w["attributes"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["network"]);
    assert_eq!(app.get(&format!("/api/v2/workspaces/{hidden}"), &readers).await.status, 404);
    assert_eq!(app.get("/api/v2/organizations/acme/workspaces/hidden", &readers).await.status, 404);
    let by_readers =
        app.post("/api/v2/team-workspaces", &readers, body(&others_id, &ws, json!({"access": "read"}))).await;
    assert_eq!(by_readers.status, 403, "read access grants nothing to others");
    assert_eq!(app.get(&format!("/api/v2/team-workspaces?filter[workspace][id]={ws}"), &readers).await.status, 403);
    let on_hidden =
        app.post("/api/v2/team-workspaces", &admins, body(&others_id, &hidden, json!({"access": "read"}))).await;
    assert_eq!(on_hidden.status, 404, "admin of one workspace is nothing on another");
    let granted = grant(&app, &admins, &others_id, &ws, json!({"access": "plan"})).await;
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws}"), &others).await.status, 200);
    let renamed = app
        .patch(
            &format!("/api/v2/workspaces/{ws}"),
            &admins,
            json!({"data": {"type": "workspaces", "attributes": {"description": "by admins"}}}),
        )
        .await;
    assert_eq!(renamed.status, 200, "admin access changes settings");
    assert_eq!(
        app.patch(
            &format!("/api/v2/workspaces/{ws}"),
            &readers,
            json!({"data": {"type": "workspaces", "attributes": {"description": "x"}}})
        )
        .await
        .status,
        403
    );

    assert_eq!(app.delete(&format!("/api/v2/team-workspaces/{granted}"), &admins).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws}"), &others).await.status, 404, "access taken away");
    assert_eq!(app.get(&format!("/api/v2/team-workspaces/{granted}"), &owners).await.status, 404);
}

#[tokio::test]
async fn accesses_go_with_their_team_and_their_workspace() {
    let (app, owners) = acme().await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    let other_ws = new_workspace(&app, &owners, "acme", "db").await;
    let (gone_id, _) = app.team_with_token("acme", "gone", json!({})).await;
    let (stays_id, stays) = app.team_with_token("acme", "stays", json!({})).await;
    let access = grant(&app, &owners, &gone_id, &ws, json!({"access": "write"})).await;
    grant(&app, &owners, &stays_id, &ws, json!({"access": "read"})).await;
    let on_db = grant(&app, &owners, &stays_id, &other_ws, json!({"access": "read"})).await;

    assert_eq!(app.delete(&format!("/api/v2/teams/{gone_id}"), &app.admin_token).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/team-workspaces/{access}"), &owners).await.status, 404);
    let listed = app.get(&format!("/api/v2/team-workspaces?filter[workspace][id]={ws}"), &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 1, "{:?}", listed.body);

    assert_eq!(app.delete(&format!("/api/v2/workspaces/{other_ws}"), &owners).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/team-workspaces/{on_db}"), &owners).await.status, 404);
    let seen = app.get("/api/v2/organizations/acme/workspaces", &stays).await;
    assert_eq!(seen.body["meta"]["pagination"]["total-count"], 1, "the deleted workspace is gone from its list");
}
