//! Agent pools, agent tokens and agents over HTTP: every row of the spec's error table, the pool
//! and live-agent limits under concurrent requests, the agent lifecycle through the gateway
//! (including going silent past the ping timeout), the list's sort / search / filters /
//! include / counts, who may do what, and the pool delete cascade.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hangar::config::Config;
use hangar_tests::builders::{
    acme, acme_with, agent_count, agent_token, detail, id, names, new_pool, new_workspace, pool, refs, restricted_pool,
    roomy, token_body,
};
use hangar_tests::{Reply, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const POOLS: &str = "/api/v2/organizations/acme/agent-pools";
pub(super) const REGISTER: &str = "/api/agent/register";

/// A workspace body that runs on `pool_id` (or asks for agent mode without a pool).
fn agent_mode(pool_id: Option<&str>) -> Value {
    let mut body = json!({"data": {"type": "workspaces", "attributes": {"execution-mode": "agent"}}});
    if let Some(pool_id) = pool_id {
        body["data"]["relationships"] = json!({"agent-pool": {"data": {"id": pool_id, "type": "agent-pools"}}});
    }
    body
}

/// A request to the agent gateway as an agent sends it: plain `application/json`.
pub(super) async fn gateway(app: &TestApp, method: Method, path: &str, secret: Option<&str>, body: Value) -> Reply {
    let mut request = app
        .client
        .request(method, format!("{}{path}", app.url))
        .header("Content-Type", "application/json")
        .body(body.to_string());
    if let Some(secret) = secret {
        request = request.bearer_auth(secret);
    }
    Reply::read(request.send().await.expect("the request reaches dev-server")).await
}

pub(super) async fn register(app: &TestApp, secret: &str, name: &str) -> Reply {
    gateway(app, Method::POST, REGISTER, Some(secret), json!({"name": name})).await
}

/// Registers an agent that must be accepted and returns its id.
pub(super) async fn registered(app: &TestApp, secret: &str, name: &str) -> String {
    let reply = register(app, secret, name).await;
    assert_eq!(reply.status, 201, "registering {name}: {:?}", reply.body);
    id(&reply)
}

pub(super) async fn report(app: &TestApp, secret: &str, agent_id: &str, status: &str) -> Reply {
    let path = format!("/api/agent/agents/{agent_id}/status");
    gateway(app, Method::PUT, &path, Some(secret), json!({"status": status})).await
}

async fn agent_status(app: &TestApp, token: &str, agent_id: &str) -> Value {
    let reply = app.get(&format!("/api/v2/agents/{agent_id}"), token).await;
    assert_eq!(reply.status, 200, "showing agent {agent_id}: {:?}", reply.body);
    reply.body["data"]["attributes"]["status"].clone()
}

fn ids(data: &Value) -> Vec<String> {
    data.as_array()
        .unwrap_or_else(|| panic!("an array, not {data}"))
        .iter()
        .map(|r| r["id"].as_str().unwrap_or("").to_owned())
        .collect()
}

async fn join_statuses(tasks: Vec<tokio::task::JoinHandle<u16>>) -> Vec<u16> {
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.expect("the request task finishes"));
    }
    out.sort();
    out
}

/// `time` as the ISO 8601 UTC form the API writes (`2024-05-01T12:00:00.123Z`).
fn iso8601(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).expect("after 1970");
    let secs = since.as_secs() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rest / 3600, rest % 3600 / 60, rest % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{:03}Z", since.subsec_millis())
}

// ---------------------------------------------------------------------------------------------
// Pools: shape, rules, limits
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn create_show_and_list_return_one_identical_pool() {
    let (app, owners) = acme().await;
    let created = app.post(POOLS, &owners, pool("builders")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.headers["content-type"], "application/vnd.api+json");
    let data = &created.body["data"];
    let pool_id = data["id"].as_str().unwrap();
    assert!(pool_id.starts_with("apool-") && pool_id.len() > "apool-".len(), "{pool_id}");
    assert_eq!(data["type"], "agent-pools");
    let attributes = &data["attributes"];
    assert_eq!(attributes["name"], "builders");
    assert_eq!(attributes["organization-scoped"], true, "organization-scoped defaults to true");
    assert_eq!(attributes["agent-count"], 0);
    let created_at = attributes["created-at"].as_str().expect("created-at");
    assert!(created_at.ends_with('Z') && created_at.contains('T'), "ISO 8601: {created_at}");
    let relationships = &data["relationships"];
    assert_eq!(relationships["agents"]["links"]["related"], format!("/api/v2/agent-pools/{pool_id}/agents"));
    assert_eq!(
        relationships["authentication-tokens"]["links"]["related"],
        format!("/api/v2/agent-pools/{pool_id}/authentication-tokens")
    );
    assert_eq!(relationships["workspaces"]["data"], json!([]));
    assert_eq!(relationships["allowed-workspaces"]["data"], json!([]));
    assert_eq!(data["links"]["self"], format!("/api/v2/agent-pools/{pool_id}"));

    let shown = app.get(&format!("/api/v2/agent-pools/{pool_id}"), &owners).await;
    assert_eq!(shown.status, 200, "{:?}", shown.body);
    assert_eq!(&shown.body["data"], data, "show returns what create returned");
    let listed = app.get(POOLS, &owners).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(&listed.body["data"][0], data, "list returns what create returned");
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 1);
}

#[tokio::test]
async fn pool_names_follow_the_rules_and_are_unique() {
    let (app, owners) = acme_with(roomy()).await;
    let attrs = |a: Value| json!({"data": {"type": "agent-pools", "attributes": a}});
    let cases = [
        (attrs(json!({"name": "has space"})), "/data/attributes/name"),
        (attrs(json!({"name": "dot.ted"})), "/data/attributes/name"),
        (attrs(json!({"name": "slash/ed"})), "/data/attributes/name"),
        (attrs(json!({"name": "semi;colon"})), "/data/attributes/name"),
        (attrs(json!({"name": ""})), "/data/attributes/name"),
        (attrs(json!({})), "/data/attributes/name"),
        (attrs(json!({"name": 7})), "/data/attributes/name"),
        (attrs(json!({"name": "ok", "organization-scoped": "yes"})), "/data/attributes/organization-scoped"),
        (json!({"data": {"type": "workspaces", "attributes": {"name": "ok"}}}), "/data/type"),
        (json!({}), "/data"),
    ];
    for (body, pointer) in cases {
        let reply = app.post(POOLS, &owners, body.clone()).await;
        assert_eq!(reply.status, 422, "{body}: {:?}", reply.body);
        assert_eq!(reply.pointer(), pointer, "{body}: {:?}", reply.body);
    }
    assert_eq!(app.get(POOLS, &owners).await.body["meta"]["pagination"]["total-count"], 0, "nothing was created");

    let created = app.post(POOLS, &owners, pool("Build_pool-01")).await;
    assert_eq!(created.status, 201, "letters, digits, `-` and `_`: {:?}", created.body);
    let again = app.post(POOLS, &owners, pool("Build_pool-01")).await;
    assert_eq!(again.status, 422, "a name that is taken: {:?}", again.body);
    assert_eq!(again.pointer(), "/data/attributes/name");

    app.create_organization("other").await;
    let other = app.owners_token("other").await;
    new_pool(&app, &other, "other", pool("Build_pool-01")).await;
}

#[tokio::test]
async fn allowed_workspaces_must_be_workspaces_of_the_organization() {
    let (app, owners) = acme_with(roomy()).await;
    app.create_organization("other").await;
    let other = app.owners_token("other").await;
    let web = new_workspace(&app, &owners, "acme", "web").await;
    let foreign = new_workspace(&app, &other, "other", "web").await;

    let cases = [
        (restricted_pool("p", &[&web, &foreign]), "/data/relationships/allowed-workspaces/data/1"),
        (restricted_pool("p", &["ws-doesnotexist"]), "/data/relationships/allowed-workspaces/data/0"),
    ];
    for (body, pointer) in cases {
        let reply = app.post(POOLS, &owners, body.clone()).await;
        assert_eq!(reply.status, 422, "{body}: {:?}", reply.body);
        assert_eq!(reply.pointer(), pointer, "{body}");
    }

    let created = app.post(POOLS, &owners, restricted_pool("p", &[&web])).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["data"]["attributes"]["organization-scoped"], false);
    assert_eq!(created.body["data"]["relationships"]["allowed-workspaces"]["data"], refs("workspaces", &[&web]));

    let pool_id = id(&created);
    let patch = restricted_pool("p", &[&foreign]);
    let reply = app.patch(&format!("/api/v2/agent-pools/{pool_id}"), &owners, patch).await;
    assert_eq!(reply.status, 422, "update checks the same rule: {:?}", reply.body);
    assert_eq!(reply.pointer(), "/data/relationships/allowed-workspaces/data/0");
    let shown = app.get(&format!("/api/v2/agent-pools/{pool_id}"), &owners).await;
    assert_eq!(shown.body["data"]["relationships"]["allowed-workspaces"]["data"], refs("workspaces", &[&web]));
}

#[tokio::test]
async fn the_default_limit_is_one_pool_per_organization() {
    let (app, owners) = acme().await;
    let first = new_pool(&app, &owners, "acme", pool("first")).await;
    let second = app.post(POOLS, &owners, pool("second")).await;
    assert_eq!(second.status, 422, "{:?}", second.body);
    assert!(detail(&second).contains('1'), "the detail names the limit: {:?}", second.body);

    // The limit is per organization, and counts the pools that exist now.
    app.create_organization("other").await;
    let other = app.owners_token("other").await;
    new_pool(&app, &other, "other", pool("first")).await;
    assert_eq!(app.delete(&format!("/api/v2/agent-pools/{first}"), &owners).await.status, 204);
    new_pool(&app, &owners, "acme", pool("second")).await;
}

#[tokio::test]
async fn a_configured_limit_refuses_the_next_pool_with_a_detail_that_names_it() {
    let (app, owners) = acme_with(Config { max_agent_pools: 2, ..Config::default() }).await;
    new_pool(&app, &owners, "acme", pool("one")).await;
    new_pool(&app, &owners, "acme", pool("two")).await;
    let third = app.post(POOLS, &owners, pool("three")).await;
    assert_eq!(third.status, 422, "{:?}", third.body);
    assert!(detail(&third).contains('2'), "the detail names the limit of 2: {:?}", third.body);
}

#[tokio::test]
async fn concurrent_creates_never_exceed_the_pool_limit() {
    let (app, owners) = acme_with(Config { max_agent_pools: 2, ..Config::default() }).await;
    let app = Arc::new(app);
    let creates = (0..8)
        .map(|i| {
            let (app, owners) = (app.clone(), owners.clone());
            tokio::spawn(async move { app.post(POOLS, &owners, pool(&format!("pool-{i}"))).await.status.as_u16() })
        })
        .collect();
    let statuses = join_statuses(creates).await;
    assert_eq!(statuses, [201, 201, 422, 422, 422, 422, 422, 422]);
    let listed = app.get(POOLS, &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 2, "{:?}", listed.body);
    assert_eq!(listed.body["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn concurrent_creates_of_one_name_have_exactly_one_winner() {
    let (app, owners) = acme_with(Config { max_agent_pools: 10, ..Config::default() }).await;
    let app = Arc::new(app);
    let creates = (0..8)
        .map(|_| {
            let (app, owners) = (app.clone(), owners.clone());
            tokio::spawn(async move { app.post(POOLS, &owners, pool("race")).await.status.as_u16() })
        })
        .collect();
    let statuses = join_statuses(creates).await;
    assert_eq!(statuses, [201, 422, 422, 422, 422, 422, 422, 422]);
    let listed = app.get(POOLS, &owners).await;
    assert_eq!(names(&listed), ["race"]);
    // The losers claimed nothing: the remaining room is still there.
    new_pool(&app, &owners, "acme", pool("another")).await;
}

#[tokio::test]
async fn update_keeps_omitted_attributes_and_replaces_or_clears_allowed_workspaces() {
    let (app, owners) = acme_with(roomy()).await;
    let web = new_workspace(&app, &owners, "acme", "web").await;
    let db = new_workspace(&app, &owners, "acme", "db").await;
    let created = app.post(POOLS, &owners, restricted_pool("build", &[&web])).await;
    let pool_id = id(&created);
    let path = format!("/api/v2/agent-pools/{pool_id}");
    let patch = |attributes: Value, relationships: Option<Value>| {
        let mut body = json!({"data": {"type": "agent-pools", "id": pool_id, "attributes": attributes}});
        if let Some(relationships) = relationships {
            body["data"]["relationships"] = relationships;
        }
        body
    };

    let renamed = app.patch(&path, &owners, patch(json!({"name": "build-2"}), None)).await;
    assert_eq!(renamed.status, 200, "{:?}", renamed.body);
    let data = &renamed.body["data"];
    assert_eq!(data["id"], pool_id.as_str());
    assert_eq!(data["attributes"]["name"], "build-2");
    assert_eq!(data["attributes"]["organization-scoped"], false, "an omitted attribute keeps its value");
    assert_eq!(data["attributes"]["created-at"], created.body["data"]["attributes"]["created-at"]);
    assert_eq!(data["relationships"]["allowed-workspaces"]["data"], refs("workspaces", &[&web]), "not sent: kept");
    assert_eq!(&app.get(&path, &owners).await.body["data"], data, "the update is what a read returns");

    let replaced = app
        .patch(
            &path,
            &owners,
            patch(json!({}), Some(json!({"allowed-workspaces": {"data": refs("workspaces", &[&db])}}))),
        )
        .await;
    assert_eq!(replaced.status, 200, "{:?}", replaced.body);
    assert_eq!(replaced.body["data"]["relationships"]["allowed-workspaces"]["data"], refs("workspaces", &[&db]));
    assert_eq!(replaced.body["data"]["attributes"]["name"], "build-2");

    let cleared = app.patch(&path, &owners, patch(json!({}), Some(json!({"allowed-workspaces": {"data": []}})))).await;
    assert_eq!(cleared.status, 200, "{:?}", cleared.body);
    assert_eq!(cleared.body["data"]["relationships"]["allowed-workspaces"]["data"], json!([]));

    let scoped = app.patch(&path, &owners, patch(json!({"organization-scoped": true}), None)).await;
    assert_eq!(scoped.status, 200, "{:?}", scoped.body);
    assert_eq!(scoped.body["data"]["attributes"]["organization-scoped"], true);
    assert_eq!(scoped.body["data"]["attributes"]["name"], "build-2");

    // The old name is free again; a taken or invalid name is refused.
    new_pool(&app, &owners, "acme", pool("build")).await;
    for name in ["build", "not valid!"] {
        let reply = app.patch(&path, &owners, patch(json!({"name": name}), None)).await;
        assert_eq!(reply.status, 422, "{name}: {:?}", reply.body);
        assert_eq!(reply.pointer(), "/data/attributes/name", "{name}");
    }
    let wrong_type = json!({"data": {"type": "workspaces", "attributes": {"name": "x"}}});
    assert_eq!(app.patch(&path, &owners, wrong_type).await.status, 422);
    assert_eq!(app.get(&path, &owners).await.body["data"]["attributes"]["name"], "build-2", "refusals change nothing");
    let missing = app.patch("/api/v2/agent-pools/apool-doesnotexist", &owners, patch(json!({"name": "x"}), None)).await;
    assert_eq!(missing.status, 404, "{:?}", missing.body);
}

// ---------------------------------------------------------------------------------------------
// The list: sort, search, filters, include, counts, pages
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_list_sorts_searches_and_pages_with_status_counts() {
    let (app, owners) = acme_with(roomy()).await;
    for name in ["beta", "alpha", "gamma-build", "delta-build"] {
        new_pool(&app, &owners, "acme", pool(name)).await;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let list = |query: &str| {
        let (app, owners, path) = (&app, &owners, format!("{POOLS}?{query}"));
        async move { app.get(&path, owners).await }
    };

    assert_eq!(names(&list("sort=name").await), ["alpha", "beta", "delta-build", "gamma-build"]);
    assert_eq!(names(&list("sort=-name").await), ["gamma-build", "delta-build", "beta", "alpha"]);
    assert_eq!(names(&list("sort=created-at").await), ["beta", "alpha", "gamma-build", "delta-build"]);
    assert_eq!(names(&list("sort=-created-at").await), ["delta-build", "gamma-build", "alpha", "beta"]);
    for bad in ["sort=size", "sort=--name", "sort=name,created-at"] {
        let reply = list(bad).await;
        assert_eq!(reply.status, 422, "{bad}: {:?}", reply.body);
        assert_eq!(reply.body["errors"][0]["source"]["parameter"], "sort", "{bad}");
    }

    let all = list("sort=name").await;
    assert_eq!(all.body["meta"]["status-counts"], json!({"total": 4, "matching": 4}));
    assert_eq!(all.body["meta"]["pagination"]["total-count"], 4);

    let searched = list("q=build&sort=name").await;
    assert_eq!(names(&searched), ["delta-build", "gamma-build"]);
    assert_eq!(searched.body["meta"]["status-counts"], json!({"total": 4, "matching": 2}));
    assert_eq!(searched.body["meta"]["pagination"]["total-count"], 2);
    assert_eq!(names(&list("q=nothing-like-it").await), Vec::<String>::new());

    let page = list("sort=name&page%5Bsize%5D=3&page%5Bnumber%5D=2").await;
    assert_eq!(page.status, 200, "{:?}", page.body);
    assert_eq!(names(&page), ["gamma-build"]);
    let meta = &page.body["meta"]["pagination"];
    assert_eq!(meta["current-page"], 2);
    assert_eq!(meta["prev-page"], 1);
    assert_eq!(meta["next-page"], Value::Null);
    assert_eq!(meta["total-pages"], 2);
    assert_eq!(meta["total-count"], 4);
    assert_eq!(page.body["meta"]["status-counts"], json!({"total": 4, "matching": 4}));
    for link in ["self", "first", "prev", "next", "last"] {
        assert!(page.body["links"].get(link).is_some(), "links.{link} in {:?}", page.body["links"]);
    }
    let bad_page = list("page%5Bsize%5D=0").await;
    assert_eq!(bad_page.status, 422, "{:?}", bad_page.body);
    assert_eq!(bad_page.body["errors"][0]["source"]["parameter"], "page[size]");
}

#[tokio::test]
async fn the_allowed_workspace_filter_returns_its_pools_and_the_organization_scoped_ones() {
    let (app, owners) = acme_with(roomy()).await;
    let web = new_workspace(&app, &owners, "acme", "web").await;
    let db = new_workspace(&app, &owners, "acme", "db").await;
    new_pool(&app, &owners, "acme", pool("shared")).await;
    new_pool(&app, &owners, "acme", restricted_pool("web-only", &[&web])).await;
    new_pool(&app, &owners, "acme", restricted_pool("db-only", &[&db])).await;
    new_pool(&app, &owners, "acme", restricted_pool("nobody", &[])).await;

    let filtered = |name: &str| {
        let (app, owners) = (&app, &owners);
        let path = format!("{POOLS}?sort=name&filter%5Ballowed_workspaces%5D%5Bname%5D={name}");
        async move { app.get(&path, owners).await }
    };
    let for_web = filtered("web").await;
    assert_eq!(for_web.status, 200, "{:?}", for_web.body);
    assert_eq!(names(&for_web), ["shared", "web-only"]);
    assert_eq!(for_web.body["meta"]["status-counts"], json!({"total": 4, "matching": 2}));
    assert_eq!(names(&filtered("db").await), ["db-only", "shared"]);
    // Unencoded brackets are read the same way.
    let raw = app.get(&format!("{POOLS}?sort=name&filter[allowed_workspaces][name]=web"), &owners).await;
    assert_eq!(names(&raw), ["shared", "web-only"]);
}

#[tokio::test]
async fn include_workspaces_renders_the_attached_workspaces() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    new_pool(&app, &owners, "acme", pool("idle-pool")).await;
    let web = new_workspace(&app, &owners, "acme", "web").await;
    new_workspace(&app, &owners, "acme", "db").await;
    let attached = app.patch(&format!("/api/v2/workspaces/{web}"), &owners, agent_mode(Some(&pool_id))).await;
    assert_eq!(attached.status, 200, "{:?}", attached.body);

    let plain = app.get(&format!("{POOLS}?sort=name"), &owners).await;
    assert_eq!(plain.body["data"][0]["relationships"]["workspaces"]["data"], refs("workspaces", &[&web]));
    assert_eq!(plain.body["data"][1]["relationships"]["workspaces"]["data"], json!([]));
    assert!(
        plain.body["included"].is_null() || plain.body["included"] == json!([]),
        "nothing included unless asked: {:?}",
        plain.body["included"]
    );

    let paths =
        [format!("{POOLS}?sort=name&include=workspaces"), format!("/api/v2/agent-pools/{pool_id}?include=workspaces")];
    for path in paths {
        let reply = app.get(&path, &owners).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
        let included =
            reply.body["included"].as_array().unwrap_or_else(|| panic!("{path}: included in {:?}", reply.body));
        assert_eq!(included.len(), 1, "{path}: only the attached workspace: {included:?}");
        assert_eq!(included[0]["type"], "workspaces");
        assert_eq!(included[0]["id"], web.as_str());
        assert_eq!(included[0]["attributes"]["name"], "web");
        assert_eq!(included[0]["attributes"]["execution-mode"], "agent");
    }
    // A team without access to the workspace is not shown it.
    let (readers_id, readers) = app.team_with_token("acme", "readers", json!({})).await;
    let theirs = app.get(&format!("/api/v2/agent-pools/{pool_id}?include=workspaces"), &readers).await;
    assert_eq!(theirs.status, 200);
    assert!(theirs.body["included"].as_array().is_none_or(Vec::is_empty), "{:?}", theirs.body["included"]);
    // Nor its id, nor its name through the list's filter: the filter answers as for a name that
    // names no workspace.
    assert_eq!(theirs.body["data"]["relationships"]["workspaces"]["data"], json!([]));
    let by_name = |name: &str| format!("{POOLS}?filter[allowed_workspaces][name]={name}");
    let probed = app.get(&by_name("web"), &readers).await;
    let missing = app.get(&by_name("no-such-workspace"), &readers).await;
    assert_eq!((probed.status.as_u16(), &probed.body["data"]), (200, &json!([])), "{:?}", probed.body);
    assert_eq!(probed.body["data"], missing.body["data"]);
    assert_eq!(
        app.get(&by_name("web"), &owners).await.body["data"].as_array().map(Vec::len),
        Some(2),
        "both: one is organization-scoped"
    );
    // A team granted access to the workspace sees it named.
    hangar_tests::builders::grant(&app, &owners, &readers_id, &web, json!({"access": "read"})).await;
    let granted = app.get(&format!("/api/v2/agent-pools/{pool_id}"), &readers).await;
    assert_eq!(granted.body["data"]["relationships"]["workspaces"]["data"], refs("workspaces", &[&web]));
    assert_eq!(app.get(&by_name("web"), &readers).await.body["data"].as_array().map(Vec::len), Some(2));
}

// ---------------------------------------------------------------------------------------------
// Workspaces on a pool
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_workspace_runs_on_agents_only_through_a_pool_it_may_use() {
    let (app, owners) = acme_with(roomy()).await;
    app.create_organization("other").await;
    let other = app.owners_token("other").await;
    let web = new_workspace(&app, &owners, "acme", "web").await;
    let db = new_workspace(&app, &owners, "acme", "db").await;
    let shared = new_pool(&app, &owners, "acme", pool("shared")).await;
    let db_only = new_pool(&app, &owners, "acme", restricted_pool("db-only", &[&db])).await;
    let foreign = new_pool(&app, &other, "other", pool("theirs")).await;
    let web_path = format!("/api/v2/workspaces/{web}");

    for (body, why) in [
        (agent_mode(None), "agent mode without a pool"),
        (agent_mode(Some(&db_only)), "a pool that does not allow the workspace"),
        (agent_mode(Some(&foreign)), "another organization's pool"),
        (agent_mode(Some("apool-doesnotexist")), "a pool that does not exist"),
    ] {
        let reply = app.patch(&web_path, &owners, body).await;
        assert_eq!(reply.status, 422, "{why}: {:?}", reply.body);
    }
    let unchanged = app.get(&web_path, &owners).await;
    assert_eq!(unchanged.body["data"]["attributes"]["execution-mode"], "remote", "refusals change nothing");
    assert!(unchanged.body["data"]["relationships"]["agent-pool"]["data"].is_null());

    let on_shared = app.patch(&web_path, &owners, agent_mode(Some(&shared))).await;
    assert_eq!(on_shared.status, 200, "an organization-scoped pool: {:?}", on_shared.body);
    assert_eq!(on_shared.body["data"]["attributes"]["execution-mode"], "agent");
    assert_eq!(
        on_shared.body["data"]["relationships"]["agent-pool"]["data"],
        json!({"id": shared, "type": "agent-pools"})
    );
    assert_eq!(&app.get(&web_path, &owners).await.body["data"], &on_shared.body["data"], "a read shows the update");

    let by_name = app.patch("/api/v2/organizations/acme/workspaces/db", &owners, agent_mode(Some(&db_only))).await;
    assert_eq!(by_name.status, 200, "a pool that allows the workspace, by name: {:?}", by_name.body);
    assert_eq!(by_name.body["data"]["relationships"]["agent-pool"]["data"]["id"], db_only.as_str());

    let mut created = agent_mode(Some(&shared));
    created["data"]["attributes"]["name"] = json!("api");
    let api = app.post("/api/v2/organizations/acme/workspaces", &owners, created).await;
    assert_eq!(api.status, 201, "created straight onto a pool: {:?}", api.body);
    assert_eq!(api.body["data"]["attributes"]["execution-mode"], "agent");
    let api_id = id(&api);

    let shared_pool = app.get(&format!("/api/v2/agent-pools/{shared}"), &owners).await;
    let mut attached = ids(&shared_pool.body["data"]["relationships"]["workspaces"]["data"]);
    attached.sort();
    let mut expected = vec![web.clone(), api_id];
    expected.sort();
    assert_eq!(attached, expected);
    let db_pool = app.get(&format!("/api/v2/agent-pools/{db_only}"), &owners).await;
    assert_eq!(db_pool.body["data"]["relationships"]["workspaces"]["data"], refs("workspaces", &[&db]));

    let foreign_ws = app.patch(&web_path, &other, agent_mode(Some(&foreign))).await;
    assert_eq!(foreign_ws.status, 404, "another organization's workspace: {:?}", foreign_ws.body);
}

// ---------------------------------------------------------------------------------------------
// Who may do what
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn who_may_do_what_and_everyone_else_gets_404() {
    let (app, owners) = acme_with(roomy()).await;
    app.create_organization("other").await;
    let outsider = app.owners_token("other").await;
    let (_, reader) = app.team_with_token("acme", "readers", json!({})).await;
    let (_, platform) = app.team_with_token("acme", "platform", json!({"manage-workspaces": true})).await;
    let (_, operators) = app.team_with_token("acme", "operators", json!({"manage-agent-pools": true})).await;

    for (token, who) in [(&reader, "a reader"), (&platform, "manage-workspaces"), (&outsider, "another organization")] {
        let reply = app.post(POOLS, token, pool("denied")).await;
        assert_eq!(reply.status, 404, "{who} cannot create: {:?}", reply.body);
        assert_eq!(reply.body["errors"][0]["status"], "404");
    }
    let pool_id = new_pool(&app, &operators, "acme", pool("ops")).await;
    let pool_path = format!("/api/v2/agent-pools/{pool_id}");
    let tokens_path = format!("{pool_path}/authentication-tokens");
    let agents_path = format!("{pool_path}/agents");
    let (token_id, secret) = agent_token(&app, &operators, &pool_id).await;
    let agent_id = registered(&app, &secret, "runner").await;
    let token_path = format!("/api/v2/authentication-tokens/{token_id}");
    let agent_path = format!("/api/v2/agents/{agent_id}");

    for token in [&reader, &platform, &operators, &owners] {
        for path in [
            POOLS.to_owned(),
            pool_path.clone(),
            tokens_path.clone(),
            agents_path.clone(),
            token_path.clone(),
            agent_path.clone(),
        ] {
            let reply = app.get(&path, token).await;
            assert_eq!(reply.status, 200, "any member reads {path}: {:?}", reply.body);
        }
    }
    for path in [
        POOLS.to_owned(),
        pool_path.clone(),
        tokens_path.clone(),
        agents_path.clone(),
        token_path.clone(),
        agent_path.clone(),
    ] {
        let reply = app.get(&path, &outsider).await;
        assert_eq!(reply.status, 404, "another organization reads nothing at {path}: {:?}", reply.body);
    }

    let rename = json!({"data": {"type": "agent-pools", "attributes": {"name": "renamed"}}});
    for (token, who) in [(&reader, "a reader"), (&platform, "manage-workspaces"), (&outsider, "another organization")] {
        assert_eq!(app.patch(&pool_path, token, rename.clone()).await.status, 404, "{who} cannot update");
        assert_eq!(app.post(&tokens_path, token, token_body("x")).await.status, 404, "{who} cannot make tokens");
        assert_eq!(app.delete(&token_path, token).await.status, 404, "{who} cannot delete tokens");
        assert_eq!(app.delete(&agent_path, token).await.status, 404, "{who} cannot delete agents");
        assert_eq!(app.delete(&pool_path, token).await.status, 404, "{who} cannot delete the pool");
    }
    assert_eq!(app.get(&pool_path, &owners).await.body["data"]["attributes"]["name"], "ops", "nothing changed");

    let renamed = app.patch(&pool_path, &operators, rename).await;
    assert_eq!(renamed.status, 200, "manage-agent-pools updates: {:?}", renamed.body);
    let (second_token, _) = agent_token(&app, &operators, &pool_id).await;
    assert_eq!(app.delete(&format!("/api/v2/authentication-tokens/{second_token}"), &operators).await.status, 204);
    let (third_token, _) = agent_token(&app, &owners, &pool_id).await;
    assert_eq!(app.delete(&format!("/api/v2/authentication-tokens/{third_token}"), &owners).await.status, 204);
    assert_eq!(report(&app, &secret, &agent_id, "exited").await.status, 200);
    assert_eq!(app.delete(&agent_path, &operators).await.status, 204, "manage-agent-pools deletes an exited agent");
    assert_eq!(app.delete(&pool_path, &operators).await.status, 204, "manage-agent-pools deletes the pool");
    new_pool(&app, &owners, "acme", pool("owners-pool")).await;
}

#[tokio::test]
async fn missing_organizations_pools_agents_and_tokens_get_404() {
    let (app, owners) = acme().await;
    let probes = [
        (Method::GET, "/api/v2/organizations/nobody/agent-pools"),
        (Method::POST, "/api/v2/organizations/nobody/agent-pools"),
        (Method::GET, "/api/v2/agent-pools/apool-doesnotexist"),
        (Method::PATCH, "/api/v2/agent-pools/apool-doesnotexist"),
        (Method::DELETE, "/api/v2/agent-pools/apool-doesnotexist"),
        (Method::GET, "/api/v2/agent-pools/apool-doesnotexist/agents"),
        (Method::GET, "/api/v2/agent-pools/apool-doesnotexist/authentication-tokens"),
        (Method::POST, "/api/v2/agent-pools/apool-doesnotexist/authentication-tokens"),
        (Method::GET, "/api/v2/agents/agent-doesnotexist"),
        (Method::DELETE, "/api/v2/agents/agent-doesnotexist"),
        (Method::GET, "/api/v2/authentication-tokens/at-doesnotexist"),
        (Method::DELETE, "/api/v2/authentication-tokens/at-doesnotexist"),
    ];
    for (method, path) in probes {
        let body = match (&method, path.ends_with("tokens")) {
            (&Method::POST, true) => Some(token_body("x")),
            (&Method::POST | &Method::PATCH, _) => Some(pool("x")),
            _ => None,
        };
        let reply = app.request(method.clone(), path, Some(&owners), body).await;
        assert_eq!(reply.status, 404, "{method} {path}: {:?}", reply.body);
        assert_eq!(reply.body["errors"][0]["status"], "404", "{method} {path}");
    }
}

#[tokio::test]
async fn the_management_api_refuses_missing_bogus_and_agent_tokens_with_401() {
    let (app, owners) = acme().await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (_, secret) = agent_token(&app, &owners, &pool_id).await;
    let agent_id = registered(&app, &secret, "runner").await;
    let paths = [
        POOLS.to_owned(),
        format!("/api/v2/agent-pools/{pool_id}"),
        format!("/api/v2/agent-pools/{pool_id}/agents"),
        format!("/api/v2/agent-pools/{pool_id}/authentication-tokens"),
        format!("/api/v2/agents/{agent_id}"),
        "/api/v2/account/details".to_owned(),
    ];
    for path in &paths {
        for token in [None, Some("not-a-token"), Some(secret.as_str())] {
            let reply = app.request(Method::GET, path, token, None).await;
            assert_eq!(reply.status, 401, "{path} with {token:?}: {:?}", reply.body);
            assert_eq!(reply.body["errors"][0]["status"], "401");
        }
    }
    let create = app.post(POOLS, &secret, pool("sneaky")).await;
    assert_eq!(create.status, 401, "an agent token cannot create pools: {:?}", create.body);
    let minted =
        app.post(&format!("/api/v2/agent-pools/{pool_id}/authentication-tokens"), &secret, token_body("x")).await;
    assert_eq!(minted.status, 401, "an agent token cannot mint tokens: {:?}", minted.body);
}

// ---------------------------------------------------------------------------------------------
// Agent tokens
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_agent_token_is_shown_once_listed_without_its_secret_and_revoked_for_good() {
    let (app, owners) = acme().await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let tokens_path = format!("/api/v2/agent-pools/{pool_id}/authentication-tokens");
    let created = app.post(&tokens_path, &owners, token_body("ci runner")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let data = &created.body["data"];
    let token_id = data["id"].as_str().unwrap().to_owned();
    assert!(token_id.starts_with("at-"), "{token_id}");
    assert_eq!(data["type"], "authentication-tokens");
    let secret = data["attributes"]["token"].as_str().expect("the secret").to_owned();
    assert!(secret.len() >= 20, "a real secret: {secret}");
    assert_eq!(data["attributes"]["description"], "ci runner");
    assert!(data["attributes"]["created-at"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert!(data["attributes"]["last-used-at"].is_null(), "unused so far");

    let listed = app.get(&tokens_path, &owners).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(ids(&listed.body["data"]), vec![token_id.clone()]);
    assert!(listed.body["data"][0]["attributes"]["token"].is_null(), "the list hides the secret");
    assert_eq!(listed.body["data"][0]["attributes"]["description"], "ci runner");
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 1);
    let token_path = format!("/api/v2/authentication-tokens/{token_id}");
    let shown = app.get(&token_path, &owners).await;
    assert_eq!(shown.status, 200, "{:?}", shown.body);
    assert!(shown.body["data"]["attributes"]["token"].is_null(), "a read hides the secret");
    for reply in [&listed, &shown] {
        assert!(!reply.body.to_string().contains(&secret), "the secret is never shown again");
    }

    let agent_id = registered(&app, &secret, "runner").await;
    let used = app.get(&token_path, &owners).await;
    assert!(used.body["data"]["attributes"]["last-used-at"].as_str().is_some(), "registering uses it: {:?}", used.body);

    // The other spelling of the type is accepted too.
    let legacy = json!({"data": {"type": "agent-tokens", "attributes": {"description": "legacy"}}});
    assert_eq!(app.post(&tokens_path, &owners, legacy).await.status, 201);
    let wrong = json!({"data": {"type": "agent-pools", "attributes": {"description": "x"}}});
    assert_eq!(app.post(&tokens_path, &owners, wrong).await.status, 422);

    assert_eq!(app.delete(&token_path, &owners).await.status, 204);
    assert_eq!(register(&app, &secret, "again").await.status, 401, "a deleted token registers nothing");
    let heartbeat = report(&app, &secret, &agent_id, "idle").await;
    assert_eq!(heartbeat.status, 401, "a deleted token reports nothing: {:?}", heartbeat.body);
    assert_eq!(heartbeat.body["errors"][0]["status"], "401");
    assert_eq!(app.get(&token_path, &owners).await.status, 404);
    assert_eq!(app.delete(&token_path, &owners).await.status, 404);
    let after = app.get(&tokens_path, &owners).await;
    assert_eq!(names_of_tokens(&after), ["legacy"]);
}

fn names_of_tokens(reply: &Reply) -> Vec<String> {
    reply.body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("a list in {:?}", reply.body))
        .iter()
        .map(|t| t["attributes"]["description"].as_str().unwrap_or("").to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The agent gateway
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_gateway_accepts_only_agent_tokens() {
    let (app, owners) = acme().await;
    let (_, operators) = app.team_with_token("acme", "operators", json!({"manage-agent-pools": true})).await;
    let admin = app.admin_token.clone();
    for (secret, who) in [
        (None, "no token"),
        (Some("not-a-token"), "a bogus token"),
        (Some(owners.as_str()), "the owners token"),
        (Some(operators.as_str()), "a manage-agent-pools team token"),
        (Some(admin.as_str()), "the site-admin token"),
    ] {
        let reply = gateway(&app, Method::POST, REGISTER, secret, json!({"name": "runner"})).await;
        assert_eq!(reply.status, 401, "{who}: {:?}", reply.body);
        assert_eq!(reply.body["errors"][0]["status"], "401", "{who}: a JSON:API error");
    }
}

#[tokio::test]
async fn an_agent_registers_idle_from_the_callers_address() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (_, secret) = agent_token(&app, &owners, &pool_id).await;
    let reply = register(&app, &secret, "runner-1").await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    assert_eq!(reply.headers["content-type"], "application/vnd.api+json", "a JSON:API document");
    let data = &reply.body["data"];
    let agent_id = data["id"].as_str().unwrap().to_owned();
    assert!(agent_id.starts_with("agent-"), "{agent_id}");
    assert_eq!(data["type"], "agents");
    assert_eq!(data["attributes"]["name"], "runner-1");
    assert_eq!(data["attributes"]["status"], "idle");
    assert_eq!(data["attributes"]["ip-address"], "127.0.0.1");
    assert!(data["attributes"]["last-ping-at"].as_str().is_some_and(|t| t.ends_with('Z')), "{data}");
    assert_eq!(data["links"]["self"], format!("/api/v2/agents/{agent_id}"));

    let shown = app.get(&format!("/api/v2/agents/{agent_id}"), &owners).await;
    assert_eq!(shown.status, 200, "{:?}", shown.body);
    assert_eq!(shown.body["data"]["id"], agent_id.as_str());
    assert_eq!(shown.body["data"]["attributes"], data["attributes"], "the gateway and the API agree");
    let listed = app.get(&format!("/api/v2/agent-pools/{pool_id}/agents"), &owners).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(listed.body["data"], json!([shown.body["data"].clone()]));
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 1);
    assert_eq!(agent_count(&app, &owners, &pool_id).await, 1);

    // A name is optional.
    let anonymous = gateway(&app, Method::POST, REGISTER, Some(&secret), json!({})).await;
    assert_eq!(anonymous.status, 201, "{:?}", anonymous.body);
    assert!(anonymous.body["data"]["attributes"]["name"].is_null());
}

#[tokio::test]
async fn the_agent_lifecycle_from_idle_through_busy_and_silence_to_deletion() {
    let config = Config { max_agents: 1, agent_ping_timeout: Duration::from_secs(1), ..Config::default() };
    let (app, owners) = acme_with(config).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (_, secret) = agent_token(&app, &owners, &pool_id).await;
    let first = register(&app, &secret, "first").await;
    assert_eq!(first.status, 201, "{:?}", first.body);
    let first_id = id(&first);
    let first_path = format!("/api/v2/agents/{first_id}");

    let idle_delete = app.delete(&first_path, &owners).await;
    assert_eq!(idle_delete.status, 412, "an idle agent stays: {:?}", idle_delete.body);
    assert!(detail(&idle_delete).contains("idle"), "the detail says why: {:?}", idle_delete.body);

    let busy = report(&app, &secret, &first_id, "busy").await;
    assert_eq!(busy.status, 200, "{:?}", busy.body);
    assert_eq!(busy.body["data"]["id"], first_id.as_str());
    assert_eq!(busy.body["data"]["type"], "agents");
    assert_eq!(busy.body["data"]["attributes"]["status"], "busy");
    assert_eq!(agent_status(&app, &owners, &first_id).await, "busy");
    let busy_delete = app.delete(&first_path, &owners).await;
    assert_eq!(busy_delete.status, 412, "a busy agent stays: {:?}", busy_delete.body);
    assert!(detail(&busy_delete).contains("busy"), "the detail says why: {:?}", busy_delete.body);
    assert_eq!(register(&app, &secret, "too-many").await.status, 409, "the one live agent is busy");

    // Silent for longer than the timeout: unknown everywhere, still counted, deletable.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert_eq!(agent_status(&app, &owners, &first_id).await, "unknown");
    let listed = app.get(&format!("/api/v2/agent-pools/{pool_id}/agents"), &owners).await;
    assert_eq!(listed.body["data"][0]["attributes"]["status"], "unknown", "{:?}", listed.body);
    assert_eq!(agent_count(&app, &owners, &pool_id).await, 1, "unknown agents are counted");
    let pools = app.get(POOLS, &owners).await;
    assert_eq!(pools.body["data"][0]["attributes"]["agent-count"], 1);

    // An unknown agent still holds the live-agent slot, until it is deleted.
    assert_eq!(register(&app, &secret, "second").await.status, 409, "an unknown agent still counts");
    assert_eq!(app.delete(&first_path, &owners).await.status, 204, "an unknown agent can be deleted");
    assert_eq!(app.get(&first_path, &owners).await.status, 404);
    assert_eq!(app.delete(&first_path, &owners).await.status, 404);
    let second_id = registered(&app, &secret, "second").await;
    assert_eq!(agent_count(&app, &owners, &pool_id).await, 1);

    let exited = report(&app, &secret, &second_id, "exited").await;
    assert_eq!(exited.status, 200, "{:?}", exited.body);
    assert_eq!(exited.body["data"]["attributes"]["status"], "exited");
    assert_eq!(agent_count(&app, &owners, &pool_id).await, 0, "exited agents are not counted");
    let third_id = registered(&app, &secret, "third").await;
    assert_eq!(app.delete(&format!("/api/v2/agents/{second_id}"), &owners).await.status, 204, "exited: deletable");

    let errored = report(&app, &secret, &third_id, "errored").await;
    assert_eq!(errored.status, 200, "{:?}", errored.body);
    assert_eq!(agent_count(&app, &owners, &pool_id).await, 0, "errored agents are not counted");
    let fourth_id = registered(&app, &secret, "fourth").await;
    assert_eq!(app.delete(&format!("/api/v2/agents/{third_id}"), &owners).await.status, 204, "errored: deletable");
    assert_eq!(app.delete(&format!("/api/v2/agents/{fourth_id}"), &owners).await.status, 412, "idle: not deletable");
    let remaining = app.get(&format!("/api/v2/agent-pools/{pool_id}/agents"), &owners).await;
    assert_eq!(ids(&remaining.body["data"]), [fourth_id]);
}

#[tokio::test]
async fn the_default_edition_has_one_live_agent_per_organization() {
    let (app, owners) = acme_with(Config { max_agent_pools: 2, ..Config::default() }).await;
    let first_pool = new_pool(&app, &owners, "acme", pool("first")).await;
    let second_pool = new_pool(&app, &owners, "acme", pool("second")).await;
    let (_, first_secret) = agent_token(&app, &owners, &first_pool).await;
    let (_, second_secret) = agent_token(&app, &owners, &second_pool).await;
    let agent_id = registered(&app, &first_secret, "one").await;

    for secret in [&first_secret, &second_secret] {
        let refused = register(&app, secret, "two").await;
        assert_eq!(refused.status, 409, "the organization's one live agent is taken: {:?}", refused.body);
        assert!(!detail(&refused).is_empty(), "a clear detail: {:?}", refused.body);
        assert_eq!(refused.body["errors"][0]["status"], "409");
    }
    app.create_organization("other").await;
    let other = app.owners_token("other").await;
    let other_pool = new_pool(&app, &other, "other", pool("theirs")).await;
    let (_, other_secret) = agent_token(&app, &other, &other_pool).await;
    registered(&app, &other_secret, "elsewhere").await;

    assert_eq!(report(&app, &first_secret, &agent_id, "exited").await.status, 200);
    registered(&app, &second_secret, "two").await;
}

#[tokio::test]
async fn concurrent_registrations_never_exceed_the_live_agent_limit() {
    let (app, owners) = acme().await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (_, secret) = agent_token(&app, &owners, &pool_id).await;
    let app = Arc::new(app);
    let registrations = (0..6)
        .map(|i| {
            let (app, secret) = (app.clone(), secret.clone());
            tokio::spawn(async move { register(&app, &secret, &format!("runner-{i}")).await.status.as_u16() })
        })
        .collect();
    assert_eq!(join_statuses(registrations).await, [201, 409, 409, 409, 409, 409]);
    let agents = app.get(&format!("/api/v2/agent-pools/{pool_id}/agents"), &owners).await;
    assert_eq!(agents.body["meta"]["pagination"]["total-count"], 1, "{:?}", agents.body);
}

#[tokio::test]
async fn status_reports_are_checked() {
    let (app, owners) = acme_with(roomy()).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let other_pool = new_pool(&app, &owners, "acme", pool("others")).await;
    let (_, secret) = agent_token(&app, &owners, &pool_id).await;
    let (_, other_secret) = agent_token(&app, &owners, &other_pool).await;
    let agent_id = registered(&app, &secret, "runner").await;

    for status in ["sleeping", "unknown", ""] {
        let reply = report(&app, &secret, &agent_id, status).await;
        assert_eq!(reply.status, 422, "{status:?}: {:?}", reply.body);
        assert_eq!(reply.pointer(), "/status", "{status:?}");
    }
    let path = format!("/api/agent/agents/{agent_id}/status");
    let missing = gateway(&app, Method::PUT, &path, Some(&secret), json!({})).await;
    assert_eq!(missing.status, 422, "{:?}", missing.body);
    assert_eq!(missing.pointer(), "/status");
    let wrong_type = gateway(&app, Method::PUT, &path, Some(&secret), json!({"status": 3})).await;
    assert_eq!(wrong_type.status, 422, "{:?}", wrong_type.body);

    let foreign = report(&app, &other_secret, &agent_id, "busy").await;
    assert_eq!(foreign.status, 404, "another pool's token: {:?}", foreign.body);
    assert_eq!(report(&app, &secret, "agent-doesnotexist", "busy").await.status, 404);
    app.create_organization("other").await;
    let outsider = app.owners_token("other").await;
    let outside_pool = new_pool(&app, &outsider, "other", pool("theirs")).await;
    let (_, outside_secret) = agent_token(&app, &outsider, &outside_pool).await;
    let across = report(&app, &outside_secret, &agent_id, "busy").await;
    assert_eq!(across.status, 404, "another organization's token: {:?}", across.body);
    assert_eq!(agent_status(&app, &owners, &agent_id).await, "idle", "refused reports change nothing");

    let before = app.get(&format!("/api/v2/agents/{agent_id}"), &owners).await.body["data"]["attributes"]
        ["last-ping-at"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let idle = report(&app, &secret, &agent_id, "idle").await;
    assert_eq!(idle.status, 200, "idle is also a heartbeat: {:?}", idle.body);
    let after = idle.body["data"]["attributes"]["last-ping-at"].as_str().unwrap_or("").to_owned();
    assert!(after > before, "a report sets last-ping-at: {before} then {after}");
    let shown = app.get(&format!("/api/v2/agents/{agent_id}"), &owners).await;
    assert_eq!(shown.body["data"]["attributes"]["last-ping-at"], after.as_str());
    assert_eq!(report(&app, &secret, &agent_id, "exited").await.status, 200);
    for status in ["idle", "busy", "errored", "exited"] {
        let reply = report(&app, &secret, &agent_id, status).await;
        assert_eq!(reply.status, 409, "{status} after exited: {:?}", reply.body);
    }
    let errored_id = registered(&app, &secret, "crashes").await;
    assert_eq!(report(&app, &secret, &errored_id, "errored").await.status, 200);
    let after = report(&app, &secret, &errored_id, "idle").await;
    assert_eq!(after.status, 409, "a report after errored: {:?}", after.body);
    assert_eq!(agent_status(&app, &owners, &errored_id).await, "errored");
}

#[tokio::test]
async fn agents_are_listed_by_page_and_filtered_by_last_ping() {
    let (app, owners) = acme_with(Config { max_agents: 3, ..Config::default() }).await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (_, secret) = agent_token(&app, &owners, &pool_id).await;
    let agents_path = format!("/api/v2/agent-pools/{pool_id}/agents");
    let early = registered(&app, &secret, "early").await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let since = iso8601(SystemTime::now());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let late = registered(&app, &secret, "late").await;
    let later = registered(&app, &secret, "later").await;

    let filtered = |since: &str| {
        let (app, owners, path) = (&app, &owners, format!("{agents_path}?filter%5Blast-ping-since%5D={since}"));
        async move { app.get(&path, owners).await }
    };
    let recent = filtered(&since).await;
    assert_eq!(recent.status, 200, "{:?}", recent.body);
    let mut recent_ids = ids(&recent.body["data"]);
    recent_ids.sort();
    let mut expected = vec![late.clone(), later.clone()];
    expected.sort();
    assert_eq!(recent_ids, expected, "pinged since {since}");
    assert_eq!(recent.body["meta"]["pagination"]["total-count"], 2);
    assert_eq!(ids(&filtered("2000-01-01T00:00:00Z").await.body["data"]).len(), 3);
    assert_eq!(ids(&filtered("2999-01-01T00:00:00Z").await.body["data"]), Vec::<String>::new());

    assert_eq!(report(&app, &secret, &early, "idle").await.status, 200);
    assert_eq!(ids(&filtered(&since).await.body["data"]).len(), 3, "a heartbeat counts as a ping");

    let first_page = app.get(&format!("{agents_path}?page%5Bsize%5D=2"), &owners).await;
    assert_eq!(first_page.body["data"].as_array().unwrap().len(), 2, "{:?}", first_page.body);
    assert_eq!(first_page.body["meta"]["pagination"]["next-page"], 2);
    assert_eq!(first_page.body["meta"]["pagination"]["total-count"], 3);
    let second_page = app.get(&format!("{agents_path}?page%5Bsize%5D=2&page%5Bnumber%5D=2"), &owners).await;
    assert_eq!(second_page.body["data"].as_array().unwrap().len(), 1);
    let mut seen = ids(&first_page.body["data"]);
    seen.extend(ids(&second_page.body["data"]));
    seen.sort();
    let mut all = vec![early, late, later];
    all.sort();
    assert_eq!(seen, all, "every agent once across the pages");
}

// ---------------------------------------------------------------------------------------------
// Deleting a pool
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn deleting_a_pool_its_workspaces_left_removes_its_tokens_and_agents() {
    let (app, owners) = acme().await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let pool_path = format!("/api/v2/agent-pools/{pool_id}");
    let (token_id, secret) = agent_token(&app, &owners, &pool_id).await;
    let agent_id = registered(&app, &secret, "runner").await;
    let web = new_workspace(&app, &owners, "acme", "web").await;
    let attached = app.patch(&format!("/api/v2/workspaces/{web}"), &owners, agent_mode(Some(&pool_id))).await;
    assert_eq!(attached.status, 200, "{:?}", attached.body);
    // A pool that workspaces run on cannot be deleted (tests/api/agent_pool_rules.rs).
    let remote = json!({"data": {"type": "workspaces", "attributes": {"execution-mode": "remote"}}});
    assert_eq!(app.patch(&format!("/api/v2/workspaces/{web}"), &owners, remote).await.status, 200);

    let deleted = app.delete(&pool_path, &owners).await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    assert!(deleted.body.is_null(), "no body: {:?}", deleted.body);
    assert_eq!(app.get(&pool_path, &owners).await.status, 404);
    assert_eq!(app.delete(&pool_path, &owners).await.status, 404);
    assert_eq!(app.get(&format!("/api/v2/authentication-tokens/{token_id}"), &owners).await.status, 404);
    assert_eq!(app.get(&format!("/api/v2/agents/{agent_id}"), &owners).await.status, 404);
    assert_eq!(register(&app, &secret, "again").await.status, 401, "its tokens stop working");
    assert_eq!(report(&app, &secret, &agent_id, "idle").await.status, 401);
    assert_eq!(app.get(POOLS, &owners).await.body["data"], json!([]));

    let workspace = app.get(&format!("/api/v2/workspaces/{web}"), &owners).await;
    assert_eq!(workspace.status, 200);
    assert!(
        workspace.body["data"]["relationships"]["agent-pool"]["data"].is_null(),
        "the workspace no longer points at the pool: {:?}",
        workspace.body["data"]
    );
    assert_ne!(workspace.body["data"]["attributes"]["execution-mode"], "agent");

    // Nothing of the old pool holds the limits: a new pool and a new agent fit.
    let fresh = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (_, fresh_secret) = agent_token(&app, &owners, &fresh).await;
    registered(&app, &fresh_secret, "runner").await;
}

#[tokio::test]
async fn deleting_the_organization_takes_its_pools_tokens_and_agents_with_it() {
    let (app, owners) = acme().await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (token_id, secret) = agent_token(&app, &owners, &pool_id).await;
    let agent_id = registered(&app, &secret, "runner").await;

    assert_eq!(app.delete("/api/v2/organizations/acme", &app.admin_token).await.status, 204);
    for path in [
        format!("/api/v2/agent-pools/{pool_id}"),
        format!("/api/v2/authentication-tokens/{token_id}"),
        format!("/api/v2/agents/{agent_id}"),
    ] {
        assert_eq!(app.get(&path, &app.admin_token).await.status, 404, "{path}");
    }
    assert_eq!(register(&app, &secret, "again").await.status, 401, "the organization's agent tokens die with it");
    assert_eq!(report(&app, &secret, &agent_id, "idle").await.status, 401);

    app.create_organization("acme").await;
    let fresh = app.get(POOLS, &app.admin_token).await;
    assert_eq!(fresh.body["data"], json!([]), "a new organization of the same name starts empty");
    let owners = app.owners_token("acme").await;
    let pool_id = new_pool(&app, &owners, "acme", pool("builders")).await;
    let (_, secret) = agent_token(&app, &owners, &pool_id).await;
    registered(&app, &secret, "runner").await;
}
