//! How many sequential store round trips each authenticated read waits for: the router called
//! in-process on a second state over dev-server's data, its store wrapped in the counting
//! adapter. On DynamoDB a request's latency is mostly these round trips; a BatchGetItem or a
//! transaction is one call, and calls made in parallel share one round trip. Counts only, no
//! timings. A state reads a module with the token once it knows the organization's id: from a
//! team token's secret, which carries it, or from having read under the organization before
//! (`OrgHints`); otherwise (the site admin's first read) it is two calls.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use chrono::Utc;
use hangar::agents::agents;
use hangar::config::Config;
use hangar::state::AppState;
use hangar_tests::builders::{new_module, new_pool, pool, pool_and_token, publish_version, version};
use hangar_tests::counting::{Cost, Counters, CountingStore};
use hangar_tests::{module_archive, TestApp};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const MODULE: &str = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";
const VERSIONS: &str = "/api/registry/v1/modules/acme/vpc/aws/versions";
const DOWNLOAD: &str = "/api/registry/v1/modules/acme/vpc/aws/1.0.0/download";
const DETAIL: &str = "/api/registry/v1/modules/acme/vpc/aws/1.0.0";

/// The router of a second state on the app's data, counting its store calls.
struct Counted {
    router: Router,
    counters: Arc<Counters>,
}

impl Counted {
    async fn on(app: &TestApp) -> Counted {
        let mut state = app.second_state().await;
        let (store, counters) = CountingStore::wrap(state.store.clone());
        state.store = store;
        Counted { router: hangar::app::routers::all(state), counters }
    }

    /// Sends a GET with the bearer token; the status, the body and what it cost.
    async fn get(&self, path: &str, token: &str) -> (StatusCode, Value, Cost) {
        self.send(Method::GET, path, token, Body::empty()).await
    }

    /// Sends a JSON:API POST with the bearer token; the status, the body and what it cost.
    async fn post(&self, path: &str, token: &str, body: &Value) -> (StatusCode, Value, Cost) {
        self.send(Method::POST, path, token, Body::from(body.to_string())).await
    }

    async fn send(&self, method: Method, path: &str, token: &str, body: Body) -> (StatusCode, Value, Cost) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("Host", "hangar.local")
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/vnd.api+json")
            .body(body)
            .expect("a request");
        let before = self.counters.snapshot();
        let response = self.router.clone().oneshot(request).await.expect("infallible");
        let cost = self.counters.snapshot() - before;
        let status = response.status();
        let bytes = response.into_body().collect().await.expect("a body").to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null), cost)
    }
}

/// `acme` with module vpc/aws at version 1.0.0 (`ok`), an agent pool, and a read-only team's
/// token; returns (app, that token, the pool's id).
async fn acme_with_vpc_and_a_pool() -> (TestApp, String, String) {
    let app = TestApp::spawn().await;
    let (readers, pool_id) = seed(&app).await;
    (app, readers, pool_id)
}

/// What [`acme_with_vpc_and_a_pool`] makes, on an app already started; returns (the read-only
/// token, the pool's id).
async fn seed(app: &TestApp) -> (String, String) {
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    new_module(app, &owners, "acme", "vpc", "aws").await;
    publish_version(app, &owners, MODULE, "1.0.0", module_archive()).await;
    let pool_id = new_pool(app, &owners, "acme", pool("builders")).await;
    let (_, readers) = app.team_with_token("acme", "readers", json!({})).await;
    (readers, pool_id)
}

fn downloads(detail: &Value) -> u64 {
    detail["downloads"].as_u64().expect("a download count")
}

#[tokio::test]
async fn a_team_reads_a_module_and_its_versions_in_one_round_trip_from_the_first() {
    let (app, readers, pool_id) = acme_with_vpc_and_a_pool().await;
    // A state that has never read under acme (a cold function instance): the team token's secret
    // names the organization, so its first read is the token, the name marker, the organization,
    // the module and its version index in one batch.
    let counted = Counted::on(&app).await;
    for path in [MODULE, VERSIONS, MODULE] {
        let (status, body, cost) = counted.get(path, &readers).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!((cost.rounds, cost.calls), (1, 1), "{path}: {cost:?}");
    }
    // The token's item; then the organization, the pool and its index of live agents in one batch.
    let (status, body, cost) = counted.get(&format!("/api/v2/agent-pools/{pool_id}"), &readers).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((cost.rounds, cost.calls), (2, 2), "{cost:?}");
    let (_, body, _) = counted.get(MODULE, &readers).await;
    assert_eq!(body["data"]["attributes"]["version-statuses"][0]["version"], "1.0.0", "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_download_is_counted_beside_its_reads_in_two_round_trips() {
    let (app, readers, _) = acme_with_vpc_and_a_pool().await;
    let counted = Counted::on(&app).await;
    let (_, detail, _) = counted.get(DETAIL, &readers).await;
    let before = downloads(&detail);
    let (status, body, cost) = counted.get(DOWNLOAD, &readers).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(cost.rounds, 2, "{cost:?}");
    assert_eq!(cost.calls, 3, "token, one batch of reads, the count's transaction: {cost:?}");
    assert_eq!(cost.items_written, 1 + 2, "the count, and its checks of the version and the organization: {cost:?}");
    let (_, detail, _) = counted.get(DETAIL, &readers).await;
    assert_eq!(downloads(&detail), before + 1);
    app.stop().await;
}

#[tokio::test]
async fn the_site_admin_reads_the_organizations_name_with_its_token() {
    let (app, _, pool_id) = acme_with_vpc_and_a_pool().await;
    let counted = Counted::on(&app).await;
    // The site admin's token names no organization: the name marker is read in the token's batch
    // (and the organization's items with it, once its id is known).
    for (path, rounds, calls) in [(MODULE, 2, 2), (VERSIONS, 1, 1), (DOWNLOAD, 2, 3)] {
        let (status, body, cost) = counted.get(path, &app.admin_token).await;
        assert!(status.is_success(), "{path}: {status} {body}");
        assert_eq!((cost.rounds, cost.calls), (rounds, calls), "{path}: {cost:?}");
    }
    // A pool is reached by its id: the id's pointer names the organization, then the pool, its
    // organization and its live index in one batch (before: 5 in turn).
    let (status, body, cost) = counted.get(&format!("/api/v2/agent-pools/{pool_id}"), &app.admin_token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((cost.rounds, cost.calls), (3, 3), "{cost:?}");
    assert_eq!(body["data"]["attributes"]["name"], "builders", "{body}");
    let unknown = "/api/v2/organizations/nope/registry-modules/private/nope/vpc/aws";
    assert_eq!(counted.get(unknown, &app.admin_token).await.0, 404);
    assert_eq!(counted.get("/api/registry/v1/modules/nope/vpc/aws/versions", &app.admin_token).await.0, 404);
    assert_eq!(counted.get(MODULE, "not-a-token").await.0, 401);
    app.stop().await;
}

#[tokio::test]
async fn another_organizations_team_neither_reads_nor_counts_a_download() {
    let (app, readers, pool_id) = acme_with_vpc_and_a_pool().await;
    app.create_organization("beta").await;
    let (_, outsider) = app.team_with_token("beta", "outsiders", json!({})).await;
    let counted = Counted::on(&app).await;
    let (_, detail, _) = counted.get(DETAIL, &readers).await;
    let before = downloads(&detail);
    let pool = format!("/api/v2/agent-pools/{pool_id}");
    for path in [MODULE, VERSIONS, DOWNLOAD, DETAIL, pool.as_str()] {
        let (status, body, _) = counted.get(path, &outsider).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    // Nor a secret made up to name acme's id the way a team token's does: nothing read with the
    // guess is answered before the token resolves.
    let org = app.get("/api/v2/organizations/acme", &app.admin_token).await;
    let org_id = org.body["data"]["attributes"]["external-id"].as_str().unwrap().to_owned();
    let forged = format!("abcdefghijklmn.atlasv1.{}{}", &org_id["org-".len()..], "x".repeat(48));
    for path in [MODULE, VERSIONS, DOWNLOAD] {
        let (status, body, _) = counted.get(path, &forged).await;
        assert_eq!(status, 401, "{path}: {body}");
    }
    // Nor does a download of a version that is not there.
    let missing = "/api/registry/v1/modules/acme/vpc/aws/9.9.9/download";
    assert_eq!(counted.get(missing, &readers).await.0, 404);
    let (_, detail, _) = counted.get(DETAIL, &readers).await;
    assert_eq!(downloads(&detail), before, "refused downloads count nothing");
    app.stop().await;
}

#[tokio::test]
async fn a_deleted_team_token_or_team_stops_reading_at_once() {
    let (app, _, _) = acme_with_vpc_and_a_pool().await;
    let body = json!({"data": {"type": "teams", "attributes": {"name": "gone", "organization-access": {}}}});
    let team = app.post("/api/v2/organizations/acme/teams", &app.admin_token, body).await;
    let team_id = team.body["data"]["id"].as_str().unwrap().to_owned();
    let token = app.token_for_team(&team_id).await;
    let counted = Counted::on(&app).await;
    assert_eq!(counted.get(MODULE, &token).await.0, 200);
    let path = format!("/api/v2/teams/{team_id}/authentication-token");
    assert_eq!(app.delete(&path, &app.admin_token).await.status, 204);
    assert_eq!(counted.get(MODULE, &token).await.0, 401, "a revoked token, on another warm state");
    let token = app.token_for_team(&team_id).await;
    assert_eq!(counted.get(VERSIONS, &token).await.0, 200);
    assert_eq!(app.delete(&format!("/api/v2/teams/{team_id}"), &app.admin_token).await.status, 204);
    assert_eq!(counted.get(VERSIONS, &token).await.0, 401, "a deleted team's token");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn on_dynamodb_a_team_reads_in_one_round_trip_and_a_download_counts_once() {
    let app = hangar_tests::spawn_on_dynamodb().await;
    let (readers, pool_id) = seed(&app).await;
    let counted = Counted::on(&app).await;
    let pool = format!("/api/v2/agent-pools/{pool_id}");
    for (path, rounds_and_calls) in [(MODULE, 1), (VERSIONS, 1), (MODULE, 1), (pool.as_str(), 2)] {
        let (status, body, cost) = counted.get(path, &readers).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!((cost.rounds, cost.calls), (rounds_and_calls, rounds_and_calls), "{path}: {cost:?}");
    }
    let (_, detail, _) = counted.get(DETAIL, &readers).await;
    let before = downloads(&detail);
    let (status, body, cost) = counted.get(DOWNLOAD, &readers).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!((cost.rounds, cost.calls), (2, 3), "{cost:?}");
    let missing = "/api/registry/v1/modules/acme/vpc/aws/9.9.9/download";
    assert_eq!(counted.get(missing, &readers).await.0, 404);
    let (_, detail, _) = counted.get(DETAIL, &readers).await;
    assert_eq!(downloads(&detail), before + 1, "the transaction's checks hold on DynamoDB's expressions");
    app.stop().await;
}

/// A module stored before version indexes existed (here: its index removed from under it) is
/// read in full, its versions queried once, and the read repairs its index: the next read takes
/// two calls again and sees every version, the ones published since included.
#[tokio::test]
async fn a_module_without_a_version_index_is_read_in_full_and_repaired() {
    let (app, readers, _) = acme_with_vpc_and_a_pool().await;
    let owners = app.owners_token("acme").await;
    let org = app.get("/api/v2/organizations/acme", &owners).await;
    let org_id = org.body["data"]["attributes"]["external-id"].as_str().unwrap().to_owned();
    let state = app.second_state().await;
    let index = hangar::store::keys::version_index(&org_id, "vpc", "aws");
    state.store.delete(&index, hangar::store::Condition::Always).await.unwrap();
    // A version published while the index is missing adds to it, but does not complete it.
    assert_eq!(app.post(&format!("{MODULE}/versions"), &owners, version("1.1.0")).await.status, 201);

    let counted = Counted::on(&app).await;
    let versions = |body: &Value| -> Vec<String> {
        let statuses = body["data"]["attributes"]["version-statuses"].as_array().cloned().unwrap_or_default();
        statuses
            .iter()
            .map(|s| format!("{} {}", s["version"].as_str().unwrap(), s["status"].as_str().unwrap()))
            .collect()
    };
    let (status, body, cost) = counted.get(MODULE, &readers).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(versions(&body), ["1.0.0 ok", "1.1.0 pending"]);
    assert!(cost.calls > 2, "the versions were queried: {cost:?}");
    let (status, body, cost) = counted.get(MODULE, &readers).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(versions(&body), ["1.0.0 ok", "1.1.0 pending"]);
    assert_eq!((cost.rounds, cost.calls), (1, 1), "repaired, and read with the token: {cost:?}");
    let listed = app.get("/api/registry/v1/modules/acme/vpc/aws/versions", &readers).await;
    assert_eq!(listed.body["modules"][0]["versions"].as_array().map(Vec::len), Some(1), "{:?}", listed.body);
    app.stop().await;
}

/// Agents unknown after 60 s of silence, errored 120 s after that: an entry's two bounds then
/// leave a read sure of an agent except within 60 s of its errored time.
fn agents_config() -> Config {
    Config {
        max_agents: 10,
        agent_ping_timeout: Duration::from_secs(60),
        agent_errored_after: Duration::from_secs(120),
        ..Config::default()
    }
}

/// Registers an agent of the secret's pool as if at `seconds_ago`; its id.
async fn registered_ago(state: &AppState, secret: &str, seconds_ago: i64) -> String {
    let grant = super::agent_capacity::grant(state, secret).await;
    let at = Utc::now() - chrono::Duration::seconds(seconds_ago);
    agents::register_at(state, &grant, None, None, at).await.expect("registered").id
}

/// Reports `status` for an agent as if at `seconds_ago`.
async fn reported_ago(state: &AppState, secret: &str, agent_id: &str, status: &str, seconds_ago: i64) {
    let grant = super::agent_capacity::grant(state, secret).await;
    let at = Utc::now() - chrono::Duration::seconds(seconds_ago);
    agents::report_at(state, &grant, agent_id, status, at).await.expect("reported");
}

fn agent_count(body: &Value) -> &Value {
    &body["data"]["attributes"]["agent-count"]
}

/// A pool's `agent-count` comes from its index of live agents, read in the pool's batch: idle,
/// busy and unknown agents count, errored and exited ones do not, whatever time has made of
/// them since they last wrote; only an agent within a ping timeout of becoming errored sends the
/// read to the agents themselves.
#[tokio::test]
async fn a_pools_live_agents_are_counted_from_its_index_in_two_round_trips() {
    let (app, owners) = TestApp::spawn_with_organization(agents_config(), "acme").await;
    let (pool_id, secret) = pool_and_token(&app, &owners).await;
    let state = app.second_state().await;
    let _idle = registered_ago(&state, &secret, 10).await;
    let busy = registered_ago(&state, &secret, 20).await;
    reported_ago(&state, &secret, &busy, "busy", 15).await;
    let _unknown = registered_ago(&state, &secret, 100).await;
    let _errored_long_ago = registered_ago(&state, &secret, 400).await;
    let exited = registered_ago(&state, &secret, 30).await;
    reported_ago(&state, &secret, &exited, "exited", 25).await;
    let pool = format!("/api/v2/agent-pools/{pool_id}");
    let counted = Counted::on(&app).await;
    let (status, body, cost) = counted.get(&pool, &owners).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(agent_count(&body), 3, "idle, busy and unknown: {body}");
    assert_eq!((cost.rounds, cost.calls), (2, 2), "{cost:?}");
    let (_, list, cost) = counted.get("/api/v2/organizations/acme/agent-pools", &owners).await;
    assert_eq!(list["data"][0]["attributes"]["agent-count"], 3, "{list}");
    assert_eq!(cost.calls, 4, "token, organization, pools, their indexes in one batch: {cost:?}");

    // Registered 200 s ago and heard from 150 s ago: its heartbeat did not rewrite its entry
    // (written 200 s ago, good until 140 s ago), which alone would say errored 20 s ago; the
    // read must not trust it and asks the agents, which say unknown.
    let lagging = registered_ago(&state, &secret, 200).await;
    reported_ago(&state, &secret, &lagging, "idle", 150).await;
    let (_, body, cost) = counted.get(&pool, &owners).await;
    assert_eq!(agent_count(&body), 4, "the lagging agent is unknown, so counted: {body}");
    assert_eq!(cost.calls, 3, "the agents were queried: {cost:?}");
    // Its next heartbeat passes its entry's bound and rewrites it: two calls again.
    reported_ago(&state, &secret, &lagging, "idle", 5).await;
    let (_, body, cost) = counted.get(&pool, &owners).await;
    assert_eq!(agent_count(&body), 4, "{body}");
    assert_eq!(cost.calls, 2, "{cost:?}");
    // Gone: its entry goes with it.
    reported_ago(&state, &secret, &lagging, "exited", 1).await;
    let (_, body, cost) = counted.get(&pool, &owners).await;
    assert_eq!((agent_count(&body), cost.calls), (&json!(3), 2), "{body} {cost:?}");
    app.stop().await;
}

/// Heartbeats rewrite only the agent's own item, and its index entry once a ping timeout: the
/// index is not a hot item.
#[tokio::test]
async fn heartbeats_rewrite_a_pools_live_index_once_a_ping_timeout() {
    let (app, owners) = TestApp::spawn_with_organization(agents_config(), "acme").await;
    let (_, secret) = pool_and_token(&app, &owners).await;
    let mut state = app.second_state().await;
    let (store, counters) = CountingStore::wrap(state.store.clone());
    state.store = store;
    let agent = registered_ago(&state, &secret, 100).await;
    let mut written = Vec::new();
    for seconds_ago in [90, 60, 41, 39, 10] {
        let before = counters.snapshot();
        reported_ago(&state, &secret, &agent, "idle", seconds_ago).await;
        written.push((counters.snapshot() - before).items_written);
    }
    // Its entry says good until 40 s ago: the report 39 s ago is the first to reach it.
    assert_eq!(written, [2, 2, 2, 3, 2], "the agent and its token's last use; the index with the fourth report");
    app.stop().await;
}

/// A pool stored before live indexes existed (here: its index removed from under it) counts its
/// agents by a query once, and that read repairs the index.
#[tokio::test]
async fn a_pool_without_a_live_index_counts_its_agents_and_repairs_it() {
    let (app, owners) = TestApp::spawn_with_organization(agents_config(), "acme").await;
    let (pool_id, secret) = pool_and_token(&app, &owners).await;
    let state = app.second_state().await;
    registered_ago(&state, &secret, 10).await;
    let org = app.get("/api/v2/organizations/acme", &owners).await;
    let org_id = org.body["data"]["attributes"]["external-id"].as_str().unwrap().to_owned();
    let index = hangar::store::keys::pool_live_agents(&org_id, &pool_id);
    state.store.delete(&index, hangar::store::Condition::Always).await.unwrap();
    // An agent registered while the index is missing adds to it, but does not complete it.
    registered_ago(&state, &secret, 5).await;

    let pool = format!("/api/v2/agent-pools/{pool_id}");
    let counted = Counted::on(&app).await;
    let (_, body, cost) = counted.get(&pool, &owners).await;
    assert_eq!(agent_count(&body), 2, "{body}");
    assert_eq!(cost.calls, 4, "the agents queried, the index repaired: {cost:?}");
    let (_, body, cost) = counted.get(&pool, &owners).await;
    assert_eq!((agent_count(&body), cost.calls), (&json!(2), 2), "repaired: {body} {cost:?}");
    app.stop().await;
}

/// A guess of an organization's id that has gone stale (the name now belongs to another
/// organization) costs the read it would have saved, never a wrong answer: the name marker read
/// with the token says where the organization is, and the read goes there.
#[tokio::test]
async fn a_stale_guess_of_an_organizations_id_costs_a_read_never_an_answer() {
    let (app, readers, _) = acme_with_vpc_and_a_pool().await;
    let counted = Counted::on(&app).await;
    assert_eq!(counted.get(MODULE, &readers).await.0, 200);
    let owners = app.owners_token("acme").await;
    let rename = json!({"data": {"type": "organizations", "attributes": {"name": "acme-old"}}});
    assert_eq!(app.patch("/api/v2/organizations/acme", &owners, rename).await.status, 200);
    app.create_organization("acme").await;
    let new_owners = app.owners_token("acme").await;
    new_module(&app, &new_owners, "acme", "vpc", "aws").await;

    let (status, body, cost) = counted.get(MODULE, &new_owners).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["attributes"]["version-statuses"], json!([]), "the new organization's module: {body}");
    assert_eq!(cost.calls, 2, "the guess missed: {cost:?}");
    assert_eq!(counted.get(MODULE, &new_owners).await.2.calls, 1, "and was corrected");
    assert_eq!(counted.get(MODULE, &readers).await.0, 404, "the old organization's team reads it no more");
    let old = MODULE.replace("acme", "acme-old");
    let (status, body, _) = counted.get(&old, &readers).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["attributes"]["version-statuses"][0]["version"], "1.0.0", "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_state_write_costs_the_same_store_calls_at_one_and_ten_thousand_versions() {
    use hangar::store::{keys, ItemStore, Write};
    use hangar_tests::builders::{lock, new_workspace, state_version_body, terraform_state};
    let app = TestApp::spawn().await;
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let counted = Counted::on(&app).await;
    let path = format!("/api/v2/workspaces/{ws}/state-versions");
    let write = |serial: u64| {
        let body = state_version_body(&terraform_state(serial, "lin", &[]), serial, false);
        let (counted, path, owners) = (&counted, &path, &owners);
        async move { counted.post(path, owners, &body).await }
    };
    let (status, first, _) = write(1).await;
    assert_eq!(status, StatusCode::CREATED, "{first:?}");
    let (status, created, at_one) = write(2).await;
    assert_eq!(status, StatusCode::CREATED, "{created:?}");

    // Ten thousand more versions, stored as the writes stored the last one.
    let store = app.store();
    let org = store.get(&keys::organization_name("acme")).await.unwrap().unwrap();
    let org_id = org.attrs().unwrap()["org_id"].as_str().unwrap().to_owned();
    let last = store.get(&keys::state_version(&org_id, &ws, 2)).await.unwrap().expect("the second version");
    let seeded: Vec<Write> = (3..10_003u64)
        .map(|sequence| {
            let mut item = last.clone();
            item.key = keys::state_version(&org_id, &ws, sequence);
            Write::Put { item, condition: hangar::store::Condition::Always }
        })
        .collect();
    for chunk in seeded.chunks(100) {
        store.transact(chunk.to_vec()).await.unwrap();
    }
    let counted_versions = vec![hangar::store::UpdateOp::set("state_versions", 10_002)];
    store
        .update(&keys::workspace(&org_id, "network"), counted_versions, hangar::store::Condition::Exists)
        .await
        .unwrap();
    let listed = app.get(&format!("/api/v2/workspaces/{ws}/state-versions?page[size]=1"), &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 10_002);
    let (status, _, at_ten_thousand) = write(3).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(at_ten_thousand, at_one, "a write reads and writes the same at 10,000 versions as at 2");

    // The current version is read by its key, in one more round than the workspace itself.
    let (_, _, workspace) = counted.get(&format!("/api/v2/workspaces/{ws}"), &owners).await;
    let (status, body, current) = counted.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["attributes"]["serial"], 3);
    assert_eq!(current.rounds, workspace.rounds + 1, "{current:?} against {workspace:?}");
}

#[tokio::test]
async fn a_provider_download_costs_the_same_at_one_and_a_thousand_versions_and_versions_one_batch() {
    use crate::providers::{acme_with_widget, publish, Release, SIGNER};
    use hangar::store::{keys, Condition, ItemStore, Write};
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    assert_eq!(publish(&app, &owners, &key_id, &gpg, SIGNER, &Release::new("1.0.0")).await, [200, 200, 200]);
    let (_, readers) = app.team_with_token("acme", "readers", json!({})).await;
    let counted = Counted::on(&app).await;
    let download = "/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64";
    let versions = "/api/registry/v1/providers/acme/widget/versions";
    let (status, body, at_one) = counted.get(download, &readers).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A team token names its organization: the token, the name marker, the organization and
    // the version in one batch.
    assert_eq!((at_one.rounds, at_one.calls), (1, 1), "{at_one:?}");
    let (status, body, listed) = counted.get(versions, &readers).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((listed.rounds, listed.calls), (1, 1), "the provider and its index with the token: {listed:?}");
    // The site admin's first read on a fresh instance locates acme first; the next reads ahead.
    let fresh = Counted::on(&app).await;
    let (status, _, first) = fresh.get(versions, &app.admin_token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((first.rounds, first.calls), (2, 2), "{first:?}");
    let (_, _, next) = fresh.get(versions, &app.admin_token).await;
    assert_eq!((next.rounds, next.calls), (1, 1), "{next:?}");

    // 999 more versions, stored as the first one.
    let store = app.store();
    let org = store.get(&keys::organization_name("acme")).await.unwrap().unwrap();
    let org_id = org.attrs().unwrap()["org_id"].as_str().unwrap().to_owned();
    let first = store.get(&keys::provider_version(&org_id, "widget", "1.0.0")).await.unwrap().expect("1.0.0");
    let seeded: Vec<Write> = (1..1000u64)
        .map(|n| {
            let mut item = first.clone();
            item.key = keys::provider_version(&org_id, "widget", &format!("2.0.{n}"));
            Write::Put { item, condition: Condition::Always }
        })
        .collect();
    for chunk in seeded.chunks(100) {
        store.transact(chunk.to_vec()).await.unwrap();
    }
    let (status, _, at_thousand) = counted.get(download, &readers).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(at_thousand, at_one, "a download reads the same at 1,000 versions as at 1");
    app.stop().await;
}
