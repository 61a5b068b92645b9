//! The accounts family over HTTP: organizations, teams and tokens, workspaces, and the
//! 401 / 403 / 404 matrix.

use hangar_tests::builders::workspace;
use hangar_tests::TestApp;
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn ping_answers_204_with_the_headers_clients_read() {
    let app = TestApp::spawn().await;
    let reply = app.request(Method::GET, "/api/v2/ping", None, None).await;
    assert_eq!(reply.status, 204);
    assert_eq!(reply.headers["tfp-api-version"], "2.6");
    assert!(reply.headers.contains_key("x-ratelimit-limit"));
}

#[tokio::test]
async fn requests_without_a_valid_token_get_a_json_api_401() {
    let app = TestApp::spawn().await;
    for token in [None, Some("not-a-token"), Some("")] {
        let reply = app.request(Method::GET, "/api/v2/organizations", token, None).await;
        assert_eq!(reply.status, 401, "token {token:?}");
        assert_eq!(reply.headers["content-type"], "application/vnd.api+json");
        assert_eq!(reply.body["errors"][0]["status"], "401");
    }
}

#[tokio::test]
async fn the_site_admin_creates_an_organization_with_its_owners_team() {
    let app = TestApp::spawn().await;
    let created = app.create_organization("acme").await;
    assert_eq!(created.headers["content-type"], "application/vnd.api+json");
    let org = &created.body["data"];
    assert_eq!(org["type"], "organizations");
    assert_eq!(org["id"], "acme");
    assert_eq!(org["attributes"]["email"], "ops@example.com");
    assert!(org["attributes"]["external-id"].as_str().unwrap().starts_with("org-"));
    assert_eq!(org["links"]["self"], "/api/v2/organizations/acme");

    let teams = app.get("/api/v2/organizations/acme/teams", &app.admin_token).await;
    assert_eq!(teams.status, 200);
    assert_eq!(teams.body["data"][0]["attributes"]["name"], "owners");
    assert_eq!(teams.body["meta"]["pagination"]["total-count"], 1);
}

#[tokio::test]
async fn only_the_site_admin_creates_organizations() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let body = json!({"data": {"type": "organizations", "attributes": {"name": "other", "email": "a@b.io"}}});
    let reply = app.post("/api/v2/organizations", &owners, body).await;
    assert_eq!(reply.status, 403);
}

#[tokio::test]
async fn organization_names_follow_the_rules_and_are_unique() {
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    for (name, email) in [("acme", "ops@example.com"), ("has space", "ops@example.com"), ("ok-name", "nope")] {
        let body = json!({"data": {"type": "organizations", "attributes": {"name": name, "email": email}}});
        let reply = app.post("/api/v2/organizations", &app.admin_token, body).await;
        assert_eq!(reply.status, 422, "{name} / {email}: {:?}", reply.body);
        let expected = if email == "nope" { "/data/attributes/email" } else { "/data/attributes/name" };
        assert_eq!(reply.pointer(), expected);
    }
}

#[tokio::test]
async fn malformed_bodies_get_400_or_a_422_that_points_at_the_member() {
    let app = TestApp::spawn().await;
    let raw = app
        .client
        .post(format!("{}/api/v2/organizations", app.url))
        .bearer_auth(&app.admin_token)
        .header("Content-Type", "application/vnd.api+json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 400);

    let cases = [
        (json!({}), "/data"),
        (json!({"data": {"type": "teams", "attributes": {"name": "x"}}}), "/data/type"),
        (json!({"data": {"type": "organizations", "attributes": {"email": "a@b.io"}}}), "/data/attributes/name"),
        (
            json!({"data": {"type": "organizations", "attributes": {"name": 7, "email": "a@b.io"}}}),
            "/data/attributes/name",
        ),
    ];
    for (body, pointer) in cases {
        let reply = app.post("/api/v2/organizations", &app.admin_token, body.clone()).await;
        assert_eq!(reply.status, 422, "{body}: {:?}", reply.body);
        assert_eq!(reply.pointer(), pointer, "{body}");
    }
}

#[tokio::test]
async fn a_token_of_one_organization_learns_nothing_about_another() {
    let app = TestApp::spawn().await;
    app.create_organization("alpha").await;
    app.create_organization("beta").await;
    let alpha = app.owners_token("alpha").await;
    let beta_owners = app.owners_token("beta").await;
    let ws = app.post("/api/v2/organizations/beta/workspaces", &beta_owners, workspace("prod")).await;
    let ws_id = ws.body["data"]["id"].as_str().unwrap().to_owned();
    let beta_teams = app.get("/api/v2/organizations/beta/teams", &app.admin_token).await;
    let beta_team = beta_teams.body["data"][0]["id"].as_str().unwrap().to_owned();

    let probes = [
        (Method::GET, "/api/v2/organizations/beta".to_owned()),
        (Method::PATCH, "/api/v2/organizations/beta".to_owned()),
        (Method::DELETE, "/api/v2/organizations/beta".to_owned()),
        (Method::GET, "/api/v2/organizations/beta/teams".to_owned()),
        (Method::POST, "/api/v2/organizations/beta/teams".to_owned()),
        (Method::GET, "/api/v2/organizations/beta/workspaces".to_owned()),
        (Method::GET, "/api/v2/organizations/beta/workspaces/prod".to_owned()),
        (Method::GET, format!("/api/v2/workspaces/{ws_id}")),
        (Method::DELETE, format!("/api/v2/workspaces/{ws_id}")),
        (Method::GET, format!("/api/v2/teams/{beta_team}")),
        (Method::POST, format!("/api/v2/teams/{beta_team}/authentication-token")),
        (Method::GET, "/api/v2/organizations/does-not-exist".to_owned()),
    ];
    for (method, path) in probes {
        let kind = match (&method, path.ends_with("authentication-token")) {
            (_, true) => "authentication-tokens",
            (&Method::PATCH, _) => "organizations",
            _ => "teams",
        };
        let body = matches!(method, Method::POST | Method::PATCH)
            .then(|| json!({"data": {"type": kind, "attributes": {"name": "sneaky"}}}));
        let reply = app.request(method.clone(), &path, Some(&alpha), body).await;
        assert_eq!(reply.status, 404, "{method} {path}: {:?}", reply.body);
        assert_eq!(reply.body["errors"][0]["status"], "404");
    }
    let listed = app.get("/api/v2/organizations", &alpha).await;
    let names: Vec<&str> = listed.body["data"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha"]);
    // Nothing was changed by the probes.
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws_id}"), &beta_owners).await.status, 200);
}

#[tokio::test]
async fn organization_access_flags_grant_what_they_name() {
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    let (_, modules) = app.team_with_token("acme", "modules", json!({"manage-modules": true})).await;
    let (_, workspaces) = app.team_with_token("acme", "platform", json!({"manage-workspaces": true})).await;

    let denied = app.post("/api/v2/organizations/acme/workspaces", &modules, workspace("one")).await;
    assert_eq!(denied.status, 403, "{:?}", denied.body);
    let allowed = app.post("/api/v2/organizations/acme/workspaces", &workspaces, workspace("one")).await;
    assert_eq!(allowed.status, 201, "{:?}", allowed.body);
    // Reading is open to every team of the organization; owning is not.
    assert_eq!(app.get("/api/v2/organizations/acme/workspaces", &modules).await.status, 200);
    let team_body = json!({"data": {"type": "teams", "attributes": {"name": "x"}}});
    assert_eq!(app.post("/api/v2/organizations/acme/teams", &workspaces, team_body).await.status, 403);
    assert_eq!(app.delete("/api/v2/organizations/acme", &workspaces).await.status, 403);

    let team = app.get("/api/v2/organizations/acme/teams", &modules).await;
    let platform =
        team.body["data"].as_array().unwrap().iter().find(|t| t["attributes"]["name"] == "platform").unwrap();
    assert_eq!(platform["attributes"]["organization-access"]["manage-workspaces"], true);
    assert_eq!(platform["attributes"]["organization-access"]["manage-modules"], false);
}

#[tokio::test]
async fn a_team_token_is_shown_once_and_replaced_or_revoked_for_good() {
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    let (team_id, first) = app.team_with_token("acme", "ci", json!({"manage-modules": true})).await;
    assert_eq!(app.get("/api/v2/account/details", &first).await.status, 200);

    let shown = app.get(&format!("/api/v2/teams/{team_id}"), &app.admin_token).await;
    assert!(!shown.body.to_string().contains(&first), "a team read never shows the secret");

    let second = app.token_for_team(&team_id).await;
    assert_eq!(app.get("/api/v2/account/details", &first).await.status, 401, "the old token is revoked");
    let details = app.get("/api/v2/account/details", &second).await;
    assert_eq!(details.status, 200);
    assert_eq!(details.body["data"]["type"], "users");
    assert_eq!(details.body["data"]["attributes"]["is-service-account"], true);

    let revoke = app.delete(&format!("/api/v2/teams/{team_id}/authentication-token"), &app.admin_token).await;
    assert_eq!(revoke.status, 204);
    assert_eq!(app.get("/api/v2/account/details", &second).await.status, 401);
    let again = app.delete(&format!("/api/v2/teams/{team_id}/authentication-token"), &app.admin_token).await;
    assert_eq!(again.status, 404);
}

#[tokio::test]
async fn a_token_with_a_past_expiry_is_refused() {
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    let teams = app.get("/api/v2/organizations/acme/teams", &app.admin_token).await;
    let owners = teams.body["data"][0]["id"].as_str().unwrap().to_owned();
    let body = json!({"data": {"type": "authentication-tokens", "attributes": {"expired-at": "2001-01-01T00:00:00Z"}}});
    let reply = app.post(&format!("/api/v2/teams/{owners}/authentication-token"), &app.admin_token, body).await;
    assert_eq!(reply.status, 422);
    assert_eq!(reply.pointer(), "/data/attributes/expired-at");
}

#[tokio::test]
async fn the_owners_team_cannot_be_deleted_but_other_teams_can() {
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    let (team_id, token) = app.team_with_token("acme", "temp", json!({})).await;
    let teams = app.get("/api/v2/organizations/acme/teams", &app.admin_token).await;
    let owners = teams.body["data"].as_array().unwrap().iter().find(|t| t["attributes"]["name"] == "owners").unwrap();
    let owners_id = owners["id"].as_str().unwrap();
    assert_eq!(app.delete(&format!("/api/v2/teams/{owners_id}"), &app.admin_token).await.status, 422);
    assert_eq!(app.delete(&format!("/api/v2/teams/{team_id}"), &app.admin_token).await.status, 204);
    assert_eq!(app.get("/api/v2/account/details", &token).await.status, 401, "its token went with it");
    let after = app.get("/api/v2/organizations/acme/teams", &app.admin_token).await;
    assert_eq!(after.body["meta"]["pagination"]["total-count"], 1);
}

#[tokio::test]
async fn workspaces_are_created_read_listed_and_deleted_with_unique_names() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let created = app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("prod")).await;
    assert_eq!(created.status, 201);
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ws-"));
    assert_eq!(created.body["data"]["relationships"]["organization"]["data"]["id"], "acme");

    let duplicate = app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("prod")).await;
    assert_eq!(duplicate.status, 422);
    assert_eq!(duplicate.pointer(), "/data/attributes/name");

    assert_eq!(app.get(&format!("/api/v2/workspaces/{id}"), &owners).await.body["data"]["attributes"]["name"], "prod");
    assert_eq!(app.get("/api/v2/organizations/acme/workspaces/prod", &owners).await.body["data"]["id"], id);
    app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("dev")).await;
    let listed = app.get("/api/v2/organizations/acme/workspaces", &owners).await;
    let names: Vec<&str> =
        listed.body["data"].as_array().unwrap().iter().map(|w| w["attributes"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["dev", "prod"]);
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 2);

    assert_eq!(app.delete(&format!("/api/v2/workspaces/{id}"), &owners).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/workspaces/{id}"), &owners).await.status, 404);
    assert_eq!(app.delete("/api/v2/organizations/acme/workspaces/dev", &owners).await.status, 204);
    let empty = app.get("/api/v2/organizations/acme/workspaces", &owners).await;
    assert_eq!(empty.body["meta"]["pagination"]["total-count"], 0);
    assert_eq!(app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("prod")).await.status, 201);
}

#[tokio::test]
async fn lists_carry_the_pagination_envelope() {
    let app = TestApp::spawn().await;
    for i in 0..25 {
        app.create_organization(&format!("org-{i:02}")).await;
    }
    let first = app.get("/api/v2/organizations?page%5Bsize%5D=10", &app.admin_token).await;
    assert_eq!(first.body["data"].as_array().unwrap().len(), 10);
    let meta = &first.body["meta"]["pagination"];
    assert_eq!(meta["current-page"], 1);
    assert_eq!(meta["page-size"], 10);
    assert_eq!(meta["prev-page"], Value::Null);
    assert_eq!(meta["next-page"], 2);
    assert_eq!(meta["total-pages"], 3);
    assert_eq!(meta["total-count"], 25);
    assert_eq!(first.body["links"]["prev"], Value::Null);
    let next = first.body["links"]["next"].as_str().unwrap();
    assert!(next.starts_with(&app.url), "links are URLs: {next}");

    let mut seen = Vec::new();
    for page in 1..=3 {
        let reply =
            app.get(&format!("/api/v2/organizations?page[number]={page}&page[size]=10"), &app.admin_token).await;
        seen.extend(reply.body["data"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap().to_owned()));
        if page == 3 {
            assert_eq!(reply.body["meta"]["pagination"]["next-page"], Value::Null);
            assert_eq!(reply.body["links"]["next"], Value::Null);
        }
    }
    let expected: Vec<String> = (0..25).map(|i| format!("org-{i:02}")).collect();
    assert_eq!(seen, expected, "every organization once, in name order");

    let bad = app.get("/api/v2/organizations?page[size]=0", &app.admin_token).await;
    assert_eq!(bad.status, 422);
    assert_eq!(bad.body["errors"][0]["source"]["parameter"], "page[size]");
}

#[tokio::test]
async fn renaming_an_organization_keeps_what_it_owns() {
    let (app, owners) = TestApp::with_organization("old-name").await;
    app.post("/api/v2/organizations/old-name/workspaces", &owners, workspace("prod")).await;
    let body = json!({"data": {"type": "organizations", "attributes": {"name": "new-name"}}});
    let renamed = app.patch("/api/v2/organizations/old-name", &owners, body).await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.body);
    assert_eq!(renamed.body["data"]["id"], "new-name");
    assert_eq!(app.get("/api/v2/organizations/old-name", &owners).await.status, 404);
    assert_eq!(app.get("/api/v2/organizations/new-name/workspaces/prod", &owners).await.status, 200);
    app.create_organization("taken").await;
    let clash = json!({"data": {"type": "organizations", "attributes": {"name": "taken"}}});
    assert_eq!(app.patch("/api/v2/organizations/new-name", &owners, clash).await.status, 422);
}

#[tokio::test]
async fn deleting_an_organization_leaves_nothing_behind() {
    let (app, owners) = TestApp::with_organization("doomed").await;
    let (team_id, team_token) = app.team_with_token("doomed", "ci", json!({"manage-workspaces": true})).await;
    let ws = app.post("/api/v2/organizations/doomed/workspaces", &team_token, workspace("prod")).await;
    let ws_id = ws.body["data"]["id"].as_str().unwrap().to_owned();

    assert_eq!(app.delete("/api/v2/organizations/doomed", &owners).await.status, 204);
    assert_eq!(app.get("/api/v2/organizations/doomed", &app.admin_token).await.status, 404);
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws_id}"), &app.admin_token).await.status, 404);
    assert_eq!(app.get(&format!("/api/v2/teams/{team_id}"), &app.admin_token).await.status, 404);
    assert_eq!(app.get("/api/v2/account/details", &team_token).await.status, 401);
    assert_eq!(app.get("/api/v2/account/details", &owners).await.status, 401);

    let listed = app.get("/api/v2/organizations", &app.admin_token).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 0);
    // The name is free again, and the new organization starts empty.
    app.create_organization("doomed").await;
    let fresh = app.get("/api/v2/organizations/doomed/workspaces", &app.admin_token).await;
    assert_eq!(fresh.body["meta"]["pagination"]["total-count"], 0);
    assert_eq!(fresh.body["data"], json!([]));
}

#[tokio::test]
async fn unknown_paths_get_a_json_api_404() {
    let app = TestApp::spawn().await;
    let reply = app.get("/api/v2/nothing-here", &app.admin_token).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.body["errors"][0]["status"], "404");
}

#[tokio::test]
async fn an_interrupted_organization_delete_can_be_finished() {
    use hangar::store::{keys, Condition, ItemStore, UpdateOp};
    let (app, owners) = TestApp::with_organization("halfway").await;
    let ws = app.post("/api/v2/organizations/halfway/workspaces", &owners, workspace("prod")).await;
    let ws_id = ws.body["data"]["id"].as_str().unwrap().to_owned();

    // A delete that stopped right after marking the organization inactive (the second connection
    // to the same file stands in for the process that died).
    let store = app.store();
    let marker = store.get(&keys::organization_name("halfway")).await.unwrap().unwrap();
    let org_id = marker.attrs().unwrap()["org_id"].as_str().unwrap().to_owned();
    store.update(&keys::organization(&org_id), vec![UpdateOp::set("active", false)], Condition::Exists).await.unwrap();
    assert_eq!(app.get("/api/v2/organizations/halfway", &app.admin_token).await.status, 404, "hidden meanwhile");

    assert_eq!(app.delete("/api/v2/organizations/halfway", &app.admin_token).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws_id}"), &app.admin_token).await.status, 404);
    assert_eq!(app.delete("/api/v2/organizations/halfway", &app.admin_token).await.status, 404);
    app.create_organization("halfway").await;
}

#[tokio::test]
async fn a_wrong_method_or_an_oversized_body_gets_a_json_api_error() {
    let app = TestApp::spawn().await;
    let reply = app.request(Method::PUT, "/api/v2/organizations", Some(&app.admin_token), None).await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.body["errors"][0]["status"], "405");

    let huge = json!({"data": {"type": "organizations", "attributes": {"name": "x".repeat(3 << 20)}}});
    let reply = app.post("/api/v2/organizations", &app.admin_token, huge).await;
    assert_eq!(reply.status, 413);
    assert_eq!(reply.body["errors"][0]["status"], "413");
}

#[tokio::test]
async fn a_team_token_is_made_with_either_type_or_no_body_and_read_without_its_secret() {
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    let (team_id, _) = app.team_with_token("acme", "ci", json!({})).await;
    let path = format!("/api/v2/teams/{team_id}/authentication-token");

    let singular =
        json!({"data": {"type": "authentication-token", "attributes": {"description": "as HCP's docs write it"}}});
    let made = app.post(&path, &app.admin_token, singular).await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    let secret = made.body["data"]["attributes"]["token"].as_str().expect("the secret, once").to_owned();

    let shown = app.get(&path, &app.admin_token).await;
    assert_eq!(shown.status, 200, "{:?}", shown.body);
    assert_eq!(shown.body["data"]["id"], made.body["data"]["id"]);
    assert_eq!(shown.body["data"]["attributes"]["description"], "as HCP's docs write it");
    assert_eq!(shown.body["data"]["attributes"]["token"], Value::Null);
    assert!(!shown.body.to_string().contains(&secret), "the metadata never holds the secret");
    let member = app.get(&path, &secret).await;
    assert_eq!(member.status, 403, "only owners read a team's token");

    let bare = app.request(Method::POST, &path, Some(&app.admin_token), None).await;
    assert_eq!(bare.status, 201, "no body makes a token without expiry: {:?}", bare.body);
    assert_eq!(bare.body["data"]["attributes"]["expired-at"], Value::Null);
    assert_eq!(app.delete(&path, &app.admin_token).await.status, 204);
    assert_eq!(app.get(&path, &app.admin_token).await.status, 404, "no token, nothing to show");
}

#[tokio::test]
async fn an_organization_token_acts_with_the_owners_rights_and_is_shown_without_its_secret() {
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    app.create_organization("other").await;
    let path = "/api/v2/organizations/acme/authentication-token";
    assert_eq!(app.get(path, &app.admin_token).await.status, 404, "none yet");

    let made = app.request(Method::POST, path, Some(&app.admin_token), None).await;
    assert_eq!(made.status, 201, "a POST without a body makes one without expiry: {:?}", made.body);
    assert_eq!(made.body["data"]["attributes"]["expired-at"], Value::Null);
    let secret = made.body["data"]["attributes"]["token"].as_str().expect("the secret, once").to_owned();

    let shown = app.get(path, &secret).await;
    assert_eq!(shown.status, 200, "it acts with the owners' rights: {:?}", shown.body);
    assert_eq!(shown.body["data"]["id"], made.body["data"]["id"]);
    assert_eq!(shown.body["data"]["attributes"]["token"], Value::Null);
    assert!(!shown.body.to_string().contains(&secret));
    let team = json!({"data": {"type": "teams", "attributes": {"name": "platform"}}});
    assert_eq!(app.post("/api/v2/organizations/acme/teams", &secret, team).await.status, 201);
    assert_eq!(app.get("/api/v2/organizations/other", &secret).await.status, 404, "only its own organization");
    let (_, member) = app.team_with_token("acme", "readers", json!({})).await;
    assert_eq!(app.get(path, &member).await.status, 403, "only owners see it");

    let replaced = app.post(path, &app.admin_token, json!({"data": {"type": "authentication-token"}})).await;
    assert_eq!(replaced.status, 201);
    assert_eq!(app.get(path, &secret).await.status, 401, "a new token revokes the old one");
    let second = replaced.body["data"]["attributes"]["token"].as_str().unwrap().to_owned();
    assert_eq!(app.delete(path, &app.admin_token).await.status, 204);
    assert_eq!(app.get("/api/v2/organizations/acme", &second).await.status, 401, "revoked");
    assert_eq!(app.delete(path, &app.admin_token).await.status, 404);
}

/// POSTs `body` (raw text, as clients send it) to a workspace action.
async fn action(app: &TestApp, id: &str, action: &str, token: &str, body: &str) -> hangar_tests::Reply {
    let response = app
        .client
        .post(format!("{}/api/v2/workspaces/{id}/actions/{action}", app.url))
        .bearer_auth(token)
        .header("Content-Type", "application/vnd.api+json")
        .body(body.to_owned())
        .send()
        .await
        .expect("dev-server answers");
    hangar_tests::Reply::read(response).await
}

#[tokio::test]
async fn a_workspace_lock_is_held_by_whoever_took_it_until_they_or_an_administrator_let_it_go() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let created = app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("prod")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["data"]["attributes"]["locked"], false);
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    let (_, operators) = app.team_with_token("acme", "operators", json!({"manage-workspaces": true})).await;

    let locked = action(&app, &id, "lock", &owners, r#"{"reason": "maintenance"}"#).await;
    assert_eq!(locked.status, 200, "{:?}", locked.body);
    let attributes = &locked.body["data"]["attributes"];
    assert_eq!(
        (attributes["locked"].clone(), attributes["locked-reason"].clone()),
        (json!(true), json!("maintenance"))
    );
    let holder = locked.body["data"]["relationships"]["locked-by"]["data"].clone();
    assert_eq!(holder["type"], "users");
    assert!(holder["id"].as_str().unwrap().starts_with("user-"), "{holder}");
    let shown = app.get(&format!("/api/v2/workspaces/{id}"), &operators).await;
    assert_eq!(shown.body["data"]["relationships"]["locked-by"]["data"], holder, "the lock is stored");

    // Locked already, by anyone: 409, as HCP answers (go-tfe's ErrWorkspaceLocked).
    for token in [&owners, &operators] {
        let again = action(&app, &id, "lock", token, "").await;
        assert_eq!(again.status, 409, "{:?}", again.body);
        assert_eq!(again.body["errors"][0]["status"], "409");
    }
    // Only the holder unlocks, told apart from "unlocked already" as go-tfe tells them (by
    // "is locked by User"); an administrator forces it. A locked workspace is not safe-deleted.
    let refused = action(&app, &id, "unlock", &operators, "").await;
    assert_eq!(refused.status, 409);
    let detail = refused.body["errors"][0]["detail"].as_str().unwrap();
    assert!(detail.contains(&format!("is locked by User {}", holder["id"].as_str().unwrap())), "{detail}");
    let refused = action(&app, &id, "safe-delete", &owners, "").await;
    assert_eq!(refused.status, 409);
    assert!(refused.body["errors"][0]["detail"].as_str().unwrap().contains("locked"), "{:?}", refused.body);
    let forced = action(&app, &id, "force-unlock", &operators, "").await;
    assert_eq!(forced.status, 200, "{:?}", forced.body);
    assert_eq!(forced.body["data"]["attributes"]["locked"], false);
    assert_eq!(forced.body["data"]["relationships"]["locked-by"]["data"], Value::Null);
    assert_eq!(action(&app, &id, "unlock", &owners, "").await.status, 409, "unlocked already");
    assert_eq!(action(&app, &id, "force-unlock", &owners, "").await.status, 409, "unlocked already");

    // A JSON:API body works too, and the holder lets it go.
    let body = r#"{"data": {"attributes": {"reason": "deploy"}}}"#;
    let locked = action(&app, &id, "lock", &operators, body).await;
    assert_eq!(locked.body["data"]["attributes"]["locked-reason"], "deploy", "{:?}", locked.body);
    assert_eq!(action(&app, &id, "unlock", &operators, "").await.status, 200);
}

#[tokio::test]
async fn a_workspace_lock_refuses_callers_without_the_permission_and_reasons_it_cannot_keep() {
    let (app, owners) = TestApp::with_organization("acme").await;
    app.create_organization("globex").await;
    let created = app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("prod")).await;
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    let (readers_id, readers) = app.team_with_token("acme", "readers", json!({})).await;
    hangar_tests::builders::grant(&app, &owners, &readers_id, &id, json!({"access": "read"})).await;
    let (_, strangers) = app.team_with_token("acme", "strangers", json!({})).await;
    let other = app.owners_token("globex").await;

    let too_long = json!({ "reason": "x".repeat(1025) }).to_string();
    for name in ["lock", "unlock", "force-unlock"] {
        assert_eq!(action(&app, &id, name, &readers, &too_long).await.status, 403, "{name}: readers may not");
        assert_eq!(action(&app, &id, name, &strangers, &too_long).await.status, 404, "{name}: no access, not seen");
        assert_eq!(action(&app, &id, name, &other, &too_long).await.status, 404, "{name}: another organization's");
    }
    let huge = json!({ "reason": "x".repeat(64 * 1024) }).to_string();
    assert_eq!(action(&app, &id, "lock", &owners, &huge).await.status, 413, "the body is bounded before it is read");
    let refused = action(&app, &id, "lock", &owners, &too_long).await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    let refused = action(&app, &id, "lock", &owners, r#"{"reason": 7}"#).await;
    assert_eq!((refused.status.as_u16(), refused.pointer()), (422, "/reason"), "{:?}", refused.body);
    assert_eq!(action(&app, &id, "lock", &owners, "{not json").await.status, 400);
    let shown = app.get(&format!("/api/v2/workspaces/{id}"), &owners).await;
    assert_eq!(shown.body["data"]["attributes"]["locked"], false, "nothing refused took the lock");
}

#[tokio::test]
async fn workspaces_are_searched_by_name_and_show_what_the_caller_may_do() {
    let (app, owners) = TestApp::with_organization("acme").await;
    for name in ["prod-network", "staging-network", "prod-db"] {
        assert_eq!(app.post("/api/v2/organizations/acme/workspaces", &owners, workspace(name)).await.status, 201);
    }
    let found = app.get("/api/v2/organizations/acme/workspaces?search[name]=PROD", &owners).await;
    assert_eq!(found.status, 200, "{:?}", found.body);
    let names: Vec<&str> =
        found.body["data"].as_array().unwrap().iter().map(|w| w["attributes"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["prod-db", "prod-network"]);
    assert_eq!(found.body["meta"]["pagination"]["total-count"], 2);
    let paged = app
        .get("/api/v2/organizations/acme/workspaces?search[name]=network&page[size]=1&page[number]=2", &owners)
        .await;
    assert_eq!(paged.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(paged.body["meta"]["pagination"]["total-count"], 2);
    let all = app.get("/api/v2/organizations/acme/workspaces", &owners).await;
    assert_eq!(all.body["meta"]["pagination"]["total-count"], 3);
    for filter in ["search[tags]=a", "search[wildcard-name]=prod*", "filter[project][id]=prj-1"] {
        let refused = app.get(&format!("/api/v2/organizations/acme/workspaces?{filter}"), &owners).await;
        assert_eq!(refused.status, 422, "{filter} is refused, never ignored: {:?}", refused.body);
    }

    let (readers_id, readers) = app.team_with_token("acme", "readers", json!({})).await;
    let prod_db = all.body["data"][0]["id"].as_str().unwrap().to_owned();
    hangar_tests::builders::grant(&app, &owners, &readers_id, &prod_db, json!({"access": "read"})).await;
    let visible = app.get("/api/v2/organizations/acme/workspaces", &readers).await;
    assert_eq!(visible.body["meta"]["pagination"]["total-count"], 1, "a team lists the workspaces it has access to");
    let mine = &all.body["data"][0]["attributes"];
    let theirs = app.get("/api/v2/organizations/acme/workspaces/prod-db", &readers).await;
    let theirs = &theirs.body["data"]["attributes"];
    for flag in ["can-update", "can-destroy", "can-lock", "can-force-unlock"] {
        assert_eq!(
            (mine["permissions"][flag].clone(), theirs["permissions"][flag].clone()),
            (json!(true), json!(false)),
            "{flag}"
        );
    }
    assert_eq!(theirs["permissions"]["can-read-settings"], true);
    assert_eq!(theirs["resource-count"], 0);
    assert!(theirs["updated-at"].is_string());
}

#[tokio::test]
async fn safe_delete_removes_a_workspace_whose_state_holds_nothing_for_those_who_manage_workspaces() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let (readers_id, readers) = app.team_with_token("acme", "readers", json!({})).await;
    let created = app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("prod")).await;
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("dev")).await.status, 201);
    hangar_tests::builders::grant(&app, &owners, &readers_id, &id, json!({"access": "read"})).await;

    assert_eq!(action(&app, &id, "safe-delete", &readers, "").await.status, 403);
    // A state that holds resources (as a state version will record it) refuses it.
    let org = app.get("/api/v2/organizations/acme", &owners).await;
    let org_id = org.body["data"]["attributes"]["external-id"].as_str().unwrap().to_owned();
    let store = app.second_state().await.store.clone();
    let key = hangar::store::keys::workspace(&org_id, "prod");
    let stored = store.get(&key).await.unwrap().expect("the workspace's item");
    let mut holding = stored.clone();
    holding.attrs_mut().unwrap().insert("resource_count".into(), json!(3));
    store.put(holding, hangar::store::Condition::Always).await.unwrap();
    let refused = action(&app, &id, "safe-delete", &owners, "").await;
    assert_eq!(refused.status, 409, "{:?}", refused.body);
    assert_eq!(
        app.get(&format!("/api/v2/workspaces/{id}"), &owners).await.body["data"]["attributes"]["resource-count"],
        3
    );
    store.put(stored, hangar::store::Condition::Always).await.unwrap();
    assert_eq!(action(&app, &id, "safe-delete", &owners, "").await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/workspaces/{id}"), &owners).await.status, 404);
    let by_name = app
        .request(Method::POST, "/api/v2/organizations/acme/workspaces/dev/actions/safe-delete", Some(&owners), None)
        .await;
    assert_eq!(by_name.status, 204, "{:?}", by_name.body);
    assert_eq!(app.get("/api/v2/organizations/acme/workspaces/dev", &owners).await.status, 404);
}

#[tokio::test]
async fn of_requests_racing_for_a_workspace_lock_exactly_one_takes_it() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let created = app.post("/api/v2/organizations/acme/workspaces", &owners, workspace("prod")).await;
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    let racers = (0..8).map(|i| {
        let (app, id, owners) = (&app, &id, &owners);
        async move { action(app, id, "lock", owners, &format!(r#"{{"reason": "racer {i}"}}"#)).await.status.as_u16() }
    });
    let mut statuses = futures::future::join_all(racers).await;
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409, 409, 409, 409, 409, 409, 409]);
    let shown = app.get(&format!("/api/v2/workspaces/{id}"), &owners).await;
    assert!(shown.body["data"]["attributes"]["locked-reason"].as_str().unwrap().starts_with("racer "));
}

#[tokio::test]
async fn a_workspace_keeps_its_terraform_version_working_directory_and_auto_apply() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let created = app.post("/api/v2/organizations/acme/workspaces", &owners, json!({"data": {"type": "workspaces",
        "attributes": {"name": "net", "terraform-version": "1.5.7", "working-directory": "envs/prod/", "auto-apply": true}}})).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let attributes = &created.body["data"]["attributes"];
    assert_eq!(
        (attributes["terraform-version"].as_str(), attributes["working-directory"].as_str()),
        (Some("1.5.7"), Some("envs/prod"))
    );
    assert_eq!(attributes["auto-apply"], true);
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v2/workspaces/{id}");
    let changed = app
        .patch(&path, &owners, json!({"data": {"type": "workspaces", "attributes": {"terraform-version": "~> 1.6"}}}))
        .await;
    assert_eq!(changed.body["data"]["attributes"]["terraform-version"], "~> 1.6");
    assert_eq!(changed.body["data"]["attributes"]["auto-apply"], true, "what a change leaves out stays");
    let latest = app
        .patch(
            &path,
            &owners,
            json!({"data": {"type": "workspaces", "attributes": {"terraform-version": "latest", "auto-apply": false}}}),
        )
        .await;
    assert_eq!(
        (
            latest.body["data"]["attributes"]["terraform-version"].as_str(),
            latest.body["data"]["attributes"]["auto-apply"].as_bool()
        ),
        (Some("latest"), Some(false))
    );
    for (name, value) in [
        ("terraform-version", json!("banana")),
        ("working-directory", json!("../etc")),
        ("working-directory", json!("a//b")),
        ("auto-apply", json!("yes")),
    ] {
        let refused =
            app.patch(&path, &owners, json!({"data": {"type": "workspaces", "attributes": {name: value}}})).await;
        assert_eq!(refused.status, 422, "{name} = {value}: {:?}", refused.body);
        assert_eq!(refused.body["errors"][0]["source"]["pointer"], format!("/data/attributes/{name}"));
    }
    assert_eq!(
        app.get(&path, &owners).await.body["data"]["attributes"]["working-directory"],
        "envs/prod",
        "refused changes change nothing"
    );
}
