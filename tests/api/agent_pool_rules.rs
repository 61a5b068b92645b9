//! The agent pool rules HCP Terraform holds and its clients rely on: a pool that workspaces run
//! on is not deleted, scoping a pool never moves a workspace off it, a deleted workspace leaves
//! every pool's `allowed-workspaces`, `remote` execution names no pool; and the filters and fields
//! go-tfe, pytfe and the tfe provider send (agent status, case-insensitive names, an
//! allowed-workspace name that names nothing, token descriptions and creators, projects and
//! exclusions refused by name).

use hangar_tests::builders::{
    acme_with, agent_token, detail, id, names, new_pool, new_workspace, pool, refs, restricted_pool, roomy, token_body,
};
use hangar_tests::{Reply, TestApp};
use serde_json::{json, Value};

const POOLS: &str = "/api/v2/organizations/acme/agent-pools";

/// The body the tfe provider's `tfe_agent_pool_allowed_workspaces` sends: the list only.
fn allowed_only(ids: &[&str]) -> Value {
    json!({"data": {"type": "agent-pools", "relationships": {"allowed-workspaces": {"data": refs("workspaces", ids)}}}})
}

fn on_pool(pool_id: &str) -> Value {
    json!({"data": {
        "type": "workspaces",
        "attributes": {"execution-mode": "agent"},
        "relationships": {"agent-pool": {"data": {"id": pool_id, "type": "agent-pools"}}},
    }})
}

fn remote() -> Value {
    json!({"data": {"type": "workspaces", "attributes": {"execution-mode": "remote"}}})
}

async fn run_on(app: &TestApp, token: &str, workspace: &str, pool_id: &str) {
    let reply = app.patch(&format!("/api/v2/workspaces/{workspace}"), token, on_pool(pool_id)).await;
    assert_eq!(reply.status, 200, "moving {workspace} onto {pool_id}: {:?}", reply.body);
}

async fn show_pool(app: &TestApp, token: &str, pool_id: &str) -> Value {
    let reply = app.get(&format!("/api/v2/agent-pools/{pool_id}"), token).await;
    assert_eq!(reply.status, 200, "showing {pool_id}: {:?}", reply.body);
    reply.body["data"].clone()
}

/// The workspace's pool as its `agent-pool` relationship names it.
async fn pool_of(app: &TestApp, token: &str, workspace: &str) -> Value {
    let reply = app.get(&format!("/api/v2/workspaces/{workspace}"), token).await;
    assert_eq!(reply.status, 200, "showing {workspace}: {:?}", reply.body);
    reply.body["data"]["relationships"]["agent-pool"]["data"]["id"].clone()
}

// ---------------------------------------------------------------------------------------------
// Deleting and scoping
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn deleting_a_pool_that_workspaces_run_on_is_a_422_that_names_them() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (web, db) =
        (new_workspace(&app, &owners, "acme", "web").await, new_workspace(&app, &owners, "acme", "db").await);
    run_on(&app, &owners, &web, &pool_id).await;
    run_on(&app, &owners, &db, &pool_id).await;
    let path = format!("/api/v2/agent-pools/{pool_id}");

    let refused = app.delete(&path, &owners).await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    for name in ["web", "db"] {
        assert!(detail(&refused).contains(name), "the refusal names {name}: {}", detail(&refused));
    }
    assert_eq!(app.get(&path, &owners).await.status, 200, "the pool is still there");
    assert_eq!(pool_of(&app, &owners, &web).await, pool_id.as_str(), "web still runs on it");

    for workspace in [&web, &db] {
        assert_eq!(app.patch(&format!("/api/v2/workspaces/{workspace}"), &owners, remote()).await.status, 200);
    }
    assert_eq!(app.delete(&path, &owners).await.status, 204, "a pool nobody runs on is deleted");
}

#[tokio::test]
async fn a_workspace_joining_a_pool_being_deleted_never_points_at_a_deleted_pool() {
    let (app, owners) = acme_with(roomy()).await;
    for round in 0..8 {
        let pool_id = new_pool(&app, &owners, "acme", pool(&format!("pool-{round}"))).await;
        let workspace = new_workspace(&app, &owners, "acme", &format!("ws-{round}")).await;
        let (workspace_path, pool_path) =
            (format!("/api/v2/workspaces/{workspace}"), format!("/api/v2/agent-pools/{pool_id}"));
        let (joined, deleted) =
            tokio::join!(app.patch(&workspace_path, &owners, on_pool(&pool_id)), app.delete(&pool_path, &owners));
        let on = pool_of(&app, &owners, &workspace).await;
        match app.get(&pool_path, &owners).await.status.as_u16() {
            404 => {
                assert_eq!(deleted.status, 204, "round {round}: {:?}", deleted.body);
                assert!(on.is_null(), "round {round}: the workspace points at deleted pool {on}: {:?}", joined.body);
            }
            _ => {
                assert_eq!(joined.status, 200, "round {round}: the pool stayed, so the join won: {:?}", joined.body);
                assert_eq!(on, pool_id.as_str(), "round {round}");
                assert!([409, 422].contains(&deleted.status.as_u16()), "round {round}: {:?}", deleted.body);
                assert_eq!(app.patch(&workspace_path, &owners, remote()).await.status, 200);
                assert_eq!(app.delete(&pool_path, &owners).await.status, 204, "round {round}");
            }
        }
    }
}

#[tokio::test]
async fn scoping_a_pool_never_moves_a_workspace_off_it() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (web, db) =
        (new_workspace(&app, &owners, "acme", "web").await, new_workspace(&app, &owners, "acme", "db").await);
    run_on(&app, &owners, &web, &pool_id).await;
    let path = format!("/api/v2/agent-pools/{pool_id}");

    let mut scoped = allowed_only(&[&db]);
    scoped["data"]["attributes"] = json!({"organization-scoped": false});
    let reply = app.patch(&path, &owners, scoped).await;
    assert_eq!(reply.status, 200, "scoping a pool web runs on: {:?}", reply.body);
    assert_eq!(reply.body["data"]["relationships"]["workspaces"]["data"], refs("workspaces", &[&web]));
    // The tfe provider's destroy of `tfe_agent_pool_allowed_workspaces` sends an empty list.
    let destroyed = app.patch(&path, &owners, allowed_only(&[])).await;
    assert_eq!(destroyed.status, 200, "{:?}", destroyed.body);
    assert_eq!(destroyed.body["data"]["relationships"]["allowed-workspaces"]["data"], json!([]));

    assert_eq!(pool_of(&app, &owners, &web).await, pool_id.as_str(), "web still runs on the pool");
    let renamed = json!({"data": {"type": "workspaces", "attributes": {"description": "still here"}}});
    let reply = app.patch(&format!("/api/v2/workspaces/{web}"), &owners, renamed).await;
    assert_eq!(reply.status, 200, "a workspace on a pool that no longer lists it can still change: {:?}", reply.body);
    assert_eq!(reply.body["data"]["attributes"]["execution-mode"], "agent");
    let joined = app.patch(&format!("/api/v2/workspaces/{db}"), &owners, on_pool(&pool_id)).await;
    assert_eq!(joined.status, 422, "a workspace the pool does not allow still cannot join: {:?}", joined.body);
}

#[tokio::test]
async fn deleting_a_workspace_takes_it_out_of_every_pools_allowed_workspaces() {
    let (app, owners) = acme_with(roomy()).await;
    let (web, db) =
        (new_workspace(&app, &owners, "acme", "web").await, new_workspace(&app, &owners, "acme", "db").await);
    let first = new_pool(&app, &owners, "acme", restricted_pool("first", &[&web, &db])).await;
    let second = new_pool(&app, &owners, "acme", restricted_pool("second", &[&db])).await;
    let patched = app.patch(&format!("/api/v2/agent-pools/{second}"), &owners, allowed_only(&[&web, &db])).await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    run_on(&app, &owners, &web, &second).await;

    assert_eq!(app.delete(&format!("/api/v2/workspaces/{web}"), &owners).await.status, 204);
    for pool_id in [&first, &second] {
        let shown = show_pool(&app, &owners, pool_id).await;
        assert_eq!(shown["relationships"]["allowed-workspaces"]["data"], refs("workspaces", &[&db]), "{pool_id}");
        assert_eq!(shown["relationships"]["workspaces"]["data"], json!([]), "{pool_id}");
        // The list as read back is writable again (the tfe provider sends it so).
        let ids: Vec<&str> = shown["relationships"]["allowed-workspaces"]["data"]
            .as_array()
            .map(|list| list.iter().filter_map(|r| r["id"].as_str()).collect())
            .unwrap_or_default();
        let rewritten = app.patch(&format!("/api/v2/agent-pools/{pool_id}"), &owners, allowed_only(&ids)).await;
        assert_eq!(rewritten.status, 200, "{pool_id}: {:?}", rewritten.body);
    }
    assert_eq!(app.delete(&format!("/api/v2/agent-pools/{second}"), &owners).await.status, 204);
}

#[tokio::test]
async fn a_workspace_deleted_while_a_pool_allows_it_is_never_left_on_the_pool() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", restricted_pool("builders", &[])).await;
    for round in 0..8 {
        let workspace = new_workspace(&app, &owners, "acme", &format!("ws-{round}")).await;
        let (pool_path, workspace_path) =
            (format!("/api/v2/agent-pools/{pool_id}"), format!("/api/v2/workspaces/{workspace}"));
        let (allow, delete) = tokio::join!(
            app.patch(&pool_path, &owners, allowed_only(&[&workspace])),
            app.delete(&workspace_path, &owners),
        );
        assert!([200, 422, 409].contains(&allow.status.as_u16()), "round {round}: {:?}", allow.body);
        assert_eq!(delete.status, 204, "round {round}: {:?}", delete.body);
        let shown = show_pool(&app, &owners, &pool_id).await;
        assert_eq!(
            shown["relationships"]["allowed-workspaces"]["data"],
            json!([]),
            "round {round}: the pool lists a deleted workspace"
        );
    }
}

#[tokio::test]
async fn remote_execution_with_an_agent_pool_is_a_422_and_agent_execution_shows_its_pool() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let web = new_workspace(&app, &owners, "acme", "web").await;
    let path = format!("/api/v2/workspaces/{web}");

    let mut relationship = on_pool(&pool_id);
    relationship["data"]["attributes"]["execution-mode"] = json!("remote");
    let attribute =
        json!({"data": {"type": "workspaces", "attributes": {"execution-mode": "remote", "agent-pool-id": pool_id}}});
    for (body, how) in [(relationship, "relationship"), (attribute, "go-tfe's agent-pool-id")] {
        let reply = app.patch(&path, &owners, body.clone()).await;
        assert_eq!(reply.status, 422, "{how}: {:?}", reply.body);
        assert_eq!(reply.pointer(), "/data/attributes/execution-mode", "{how}");
        let mut created = body;
        created["data"]["attributes"]["name"] = json!(format!("new-{}", how.len()));
        let reply = app.post("/api/v2/organizations/acme/workspaces", &owners, created).await;
        assert_eq!(reply.status, 422, "created with {how}: {:?}", reply.body);
    }
    assert!(pool_of(&app, &owners, &web).await.is_null(), "refusals change nothing");

    let by_attribute = json!({"data": {"type": "workspaces", "attributes": {"agent-pool-id": pool_id}}});
    let reply = app.patch(&path, &owners, by_attribute).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["data"]["attributes"]["execution-mode"], "agent");
    assert_eq!(
        reply.body["data"]["relationships"]["agent-pool"]["data"],
        json!({"id": pool_id, "type": "agent-pools"})
    );
    let back = app.patch(&path, &owners, remote()).await;
    assert_eq!(back.status, 200, "remote alone moves it off the pool: {:?}", back.body);
    assert!(back.body["data"]["relationships"]["agent-pool"]["data"].is_null());
}

// ---------------------------------------------------------------------------------------------
// Filters and fields
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn agents_are_filtered_by_status() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (_, secret) = agent_token(&app, &owners, &pool_id).await;
    let mut agents = Vec::new();
    for name in ["first", "second"] {
        let reply = app
            .client
            .post(format!("{}/api/agent/register", app.url))
            .bearer_auth(&secret)
            .json(&json!({"name": name}))
            .send()
            .await
            .expect("dev-server answers");
        let reply = Reply::read(reply).await;
        assert_eq!(reply.status, 201, "{:?}", reply.body);
        agents.push(id(&reply));
    }
    let exited = app
        .client
        .put(format!("{}/api/agent/agents/{}/status", app.url, agents[1]))
        .bearer_auth(&secret)
        .json(&json!({"status": "exited"}))
        .send()
        .await
        .expect("dev-server answers");
    assert_eq!(exited.status(), 200);

    let list = |query: &str| {
        let (app, owners, path) = (&app, &owners, format!("/api/v2/agent-pools/{pool_id}/agents?{query}"));
        async move { app.get(&path, owners).await }
    };
    for (status, expected) in [("idle", vec![&agents[0]]), ("exited", vec![&agents[1]]), ("busy", vec![])] {
        let reply = list(&format!("filter%5Bstatus%5D={status}")).await;
        assert_eq!(reply.status, 200, "{status}: {:?}", reply.body);
        let ids: Vec<&str> = reply.body["data"].as_array().unwrap().iter().filter_map(|a| a["id"].as_str()).collect();
        assert_eq!(ids, expected, "{status}");
        assert_eq!(reply.body["meta"]["pagination"]["total-count"], expected.len(), "{status}");
    }
    let bogus = list("filter%5Bstatus%5D=sleeping").await;
    assert_eq!(bogus.status, 422, "{:?}", bogus.body);
    assert_eq!(bogus.body["errors"][0]["source"]["parameter"], "filter[status]");
}

#[tokio::test]
async fn pools_sort_and_search_by_name_whatever_the_case() {
    let (app, owners) = acme_with(roomy()).await;
    for name in ["gamma", "Beta", "alpha-build"] {
        new_pool(&app, &owners, "acme", pool(name)).await;
    }
    assert_eq!(names(&app.get(&format!("{POOLS}?sort=name"), &owners).await), ["alpha-build", "Beta", "gamma"]);
    assert_eq!(names(&app.get(&format!("{POOLS}?sort=-name"), &owners).await), ["gamma", "Beta", "alpha-build"]);
    assert_eq!(names(&app.get(&format!("{POOLS}?q=BETA"), &owners).await), ["Beta"]);
    assert_eq!(names(&app.get(&format!("{POOLS}?q=Build"), &owners).await), ["alpha-build"]);
}

#[tokio::test]
async fn the_allowed_workspace_filter_naming_no_workspace_returns_no_pool() {
    let (app, owners) = acme_with(roomy()).await;
    new_workspace(&app, &owners, "acme", "web").await;
    new_pool(&app, &owners, "acme", pool("shared")).await;
    let reply = app.get(&format!("{POOLS}?filter%5Ballowed_workspaces%5D%5Bname%5D=nosuch"), &owners).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(names(&reply), Vec::<String>::new());
    assert_eq!(reply.body["meta"]["status-counts"], json!({"total": 1, "matching": 0}));
    let web = app.get(&format!("{POOLS}?filter%5Ballowed_workspaces%5D%5Bname%5D=web"), &owners).await;
    assert_eq!(names(&web), ["shared"], "a workspace's name still finds the organization-scoped pools");
}

#[tokio::test]
async fn agent_tokens_need_a_description_and_name_their_creator() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let path = format!("/api/v2/agent-pools/{pool_id}/authentication-tokens");
    for attributes in [json!({}), json!({"description": ""}), json!({"description": "  "})] {
        let body = json!({"data": {"type": "authentication-tokens", "attributes": attributes}});
        let reply = app.post(&path, &owners, body).await;
        assert_eq!(reply.status, 422, "{attributes}: {:?}", reply.body);
        assert_eq!(reply.pointer(), "/data/attributes/description", "{attributes}");
    }

    let created = app.post(&path, &owners, token_body("ci")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let me = app.get("/api/v2/account/details", &owners).await;
    let creator = json!({"id": me.body["data"]["id"], "type": "users"});
    assert_eq!(created.body["data"]["relationships"]["created-by"]["data"], creator);
    let shown = app.get(&format!("/api/v2/authentication-tokens/{}", id(&created)), &owners).await;
    assert_eq!(shown.body["data"]["relationships"]["created-by"]["data"], creator);
}

#[tokio::test]
async fn allowed_projects_and_excluded_workspaces_are_refused_by_name() {
    let (app, owners) = acme_with(roomy()).await;
    let web = new_workspace(&app, &owners, "acme", "web").await;
    let with = |name: &str, kind: &str, ids: &[&str]| {
        let mut body = pool("builders");
        body["data"]["relationships"] = json!({ name: {"data": refs(kind, ids)} });
        body
    };
    for (name, kind, id) in
        [("allowed-projects", "projects", "prj-abc123"), ("excluded-workspaces", "workspaces", &web)]
    {
        let reply = app.post(POOLS, &owners, with(name, kind, &[id])).await;
        assert_eq!(reply.status, 422, "{name}: {:?}", reply.body);
        assert_eq!(reply.pointer(), format!("/data/relationships/{name}"), "{name}");
        assert!(!detail(&reply).is_empty(), "{name}: a detail says why");
    }
    let project = app.post(POOLS, &owners, with("allowed-projects", "projects", &["prj-abc123"])).await;
    assert!(detail(&project).contains("projects"), "{}", detail(&project));
    assert_eq!(app.get(POOLS, &owners).await.body["data"], json!([]), "nothing was created");

    // An empty list asks for nothing (the tfe provider's destroy sends one).
    let created = app.post(POOLS, &owners, with("excluded-workspaces", "workspaces", &[])).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let path = format!("/api/v2/agent-pools/{}", id(&created));
    let mut update = with("allowed-projects", "projects", &["prj-abc123"]);
    update["data"]["attributes"] = json!({});
    assert_eq!(app.patch(&path, &owners, update).await.status, 422);
    let mut cleared = with("allowed-projects", "projects", &[]);
    cleared["data"]["attributes"] = json!({});
    assert_eq!(app.patch(&path, &owners, cleared).await.status, 200);

    let filtered = app.get(&format!("{POOLS}?filter%5Ballowed_projects%5D%5Bname%5D=core"), &owners).await;
    assert_eq!(filtered.status, 422, "{:?}", filtered.body);
    assert_eq!(filtered.body["errors"][0]["source"]["parameter"], "filter[allowed_projects][name]");
}
