//! Runs on agents over HTTP: configuration versions and their archives' inspection, runs moving
//! through HCP's statuses, the job queue (two agents racing for one job, on SQLite and on
//! DynamoDB), leases (an agent that goes silent errors its run and gives the lock back; a stale
//! agent's state is refused), a cancel reaching Terraform as SIGINT, what a job token may reach,
//! and the signed log links.

use std::time::Duration;

use hangar::config::Config;
use hangar_tests::builders::{
    acme, acme_with, agent_token, detail, id, new_module, new_pool, new_workspace, pool, publish_version, roomy,
    state_version_body, terraform_state,
};
use hangar_tests::{targz, Entry, Reply, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

use super::agent_pools::{gateway, registered};

/// A workspace `name` of `acme` running on a new pool: (workspace id, pool id, agent token).
pub(super) async fn agent_workspace(app: &TestApp, owners: &str, name: &str) -> (String, String, String) {
    let pool_id = new_pool(app, owners, "acme", pool(&format!("{name}-pool"))).await;
    let (_, secret) = agent_token(app, owners, &pool_id).await;
    let body = json!({"data": {"type": "workspaces", "attributes": {"name": name, "execution-mode": "agent"},
        "relationships": {"agent-pool": {"data": {"type": "agent-pools", "id": pool_id}}}}});
    let reply = app.post("/api/v2/organizations/acme/workspaces", owners, body).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    (id(&reply), pool_id, secret)
}

fn configuration_body(speculative: bool) -> Value {
    json!({"data": {"type": "configuration-versions", "attributes": {"auto-queue-runs": false, "speculative": speculative}}})
}

/// A new configuration version of `ws`: (its id, its upload link).
async fn configuration(app: &TestApp, token: &str, ws: &str, speculative: bool) -> (String, String) {
    let reply = app
        .post(&format!("/api/v2/workspaces/{ws}/configuration-versions"), token, configuration_body(speculative))
        .await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    let url = reply.body["data"]["attributes"]["upload-url"].as_str().expect("an upload link").to_owned();
    (id(&reply), url)
}

async fn put(app: &TestApp, url: &str, body: Vec<u8>) -> Reply {
    let response = app.client.put(url).header("Content-Type", "application/octet-stream").body(body).send().await;
    Reply::read(response.expect("dev-server answers")).await
}

fn simple_archive() -> Vec<u8> {
    targz(&[Entry::File("main.tf", b"output \"x\" {\n  value = 1\n}\n")])
}

/// An uploaded configuration version of `ws`.
pub(super) async fn uploaded(app: &TestApp, token: &str, ws: &str) -> String {
    let (cv, url) = configuration(app, token, ws, false).await;
    let reply = put(app, &url, simple_archive()).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    cv
}

pub(super) async fn new_run(app: &TestApp, token: &str, ws: &str, cv: Option<&str>, attributes: Value) -> Reply {
    let mut body = json!({"data": {"type": "runs", "attributes": attributes,
        "relationships": {"workspace": {"data": {"type": "workspaces", "id": ws}}}}});
    if let Some(cv) = cv {
        body["data"]["relationships"]["configuration-version"] =
            json!({"data": {"type": "configuration-versions", "id": cv}});
    }
    app.post("/api/v2/runs", token, body).await
}

/// A run of `ws` on a fresh upload: its id.
pub(super) async fn queued_run(app: &TestApp, token: &str, ws: &str) -> String {
    let cv = uploaded(app, token, ws).await;
    let reply = new_run(app, token, ws, Some(&cv), json!({})).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    id(&reply)
}

pub(super) async fn run(app: &TestApp, token: &str, id: &str) -> Value {
    let reply = app.get(&format!("/api/v2/runs/{id}"), token).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.body["data"].clone()
}

pub(super) async fn status(app: &TestApp, token: &str, id: &str) -> String {
    run(app, token, id).await["attributes"]["status"].as_str().unwrap_or_default().to_owned()
}

async fn claim(app: &TestApp, secret: &str, agent: &str) -> Reply {
    gateway(app, Method::POST, "/api/agent/jobs", Some(secret), json!({"agent": agent})).await
}

/// Claims a job that must be there: its job token.
pub(super) async fn claimed(app: &TestApp, secret: &str, agent: &str) -> String {
    let reply = claim(app, secret, agent).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    reply.body["token"].as_str().expect("a job token").to_owned()
}

pub(super) async fn job(app: &TestApp, method: Method, path: &str, token: &str, body: Value) -> Reply {
    gateway(app, method, path, Some(token), body).await
}

pub(super) async fn finish(app: &TestApp, token: &str, body: Value) -> Reply {
    job(app, Method::POST, "/api/agent/job/finish", token, body).await
}

async fn locked(app: &TestApp, token: &str, ws: &str) -> bool {
    let reply = app.get(&format!("/api/v2/workspaces/{ws}"), token).await;
    reply.body["data"]["attributes"]["locked"].as_bool().expect("locked")
}

#[tokio::test]
async fn a_run_plans_on_an_agent_waits_for_confirmation_and_applies_holding_the_lock() {
    let (app, owners) = acme().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a1").await;
    assert_eq!(claim(&app, &secret, &agent).await.status, 204, "nothing queued yet");
    let run_id = queued_run(&app, &owners, &ws).await;
    assert_eq!(status(&app, &owners, &run_id).await, "plan_queued");
    assert!(locked(&app, &owners, &ws).await, "a non-speculative run holds the lock from its plan");
    let shown = app.get(&format!("/api/v2/workspaces/{ws}"), &owners).await;
    assert_eq!(shown.body["data"]["relationships"]["locked-by"]["data"], json!({"id": run_id, "type": "runs"}));

    // A second run waits behind the first.
    let second = queued_run(&app, &owners, &ws).await;
    assert_eq!(status(&app, &owners, &second).await, "pending");

    let token = claimed(&app, &secret, &agent).await;
    assert_eq!(status(&app, &owners, &run_id).await, "planning");
    let spec = job(&app, Method::GET, "/api/agent/job", &token, Value::Null).await;
    assert_eq!(spec.status, 200, "{:?}", spec.body);
    assert_eq!(spec.body["phase"], "plan");
    let archive =
        app.client.get(format!("{}/api/agent/job/configuration", app.url)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(archive.status(), 200);
    assert_eq!(archive.bytes().await.unwrap().to_vec(), simple_archive());
    let log = app
        .client
        .put(format!("{}/api/agent/job/log?offset=0", app.url))
        .bearer_auth(&token)
        .body("planning...\n")
        .send()
        .await
        .unwrap();
    assert_eq!(log.status(), 204);
    let plan = app
        .client
        .put(format!("{}/api/agent/job/plan", app.url))
        .bearer_auth(&token)
        .body("saved plan")
        .send()
        .await
        .unwrap();
    assert_eq!(plan.status(), 204);
    let done = finish(&app, &token, json!({"status": "finished", "has-changes": true, "resource-additions": 2})).await;
    assert_eq!(done.status, 200, "{:?}", done.body);

    let planned = run(&app, &owners, &run_id).await;
    assert_eq!(planned["attributes"]["status"], "planned");
    assert_eq!(planned["attributes"]["actions"]["is-confirmable"], true);
    assert_eq!(planned["attributes"]["has-changes"], true);
    let plan_id = planned["relationships"]["plan"]["data"]["id"].as_str().unwrap().to_owned();
    let plan = app.get(&format!("/api/v2/plans/{plan_id}"), &owners).await;
    assert_eq!(plan.body["data"]["attributes"]["status"], "finished");
    assert_eq!(plan.body["data"]["attributes"]["resource-additions"], 2);
    let log_url = plan.body["data"]["attributes"]["log-read-url"].as_str().unwrap().to_owned();
    let log = app.client.get(&log_url).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(&log[..], b"\x02planning...\n\x03", "STX, the log, ETX once the plan is over");

    let applied = app.post(&format!("/api/v2/runs/{run_id}/actions/apply"), &owners, json!({})).await;
    assert_eq!(applied.status, 202, "{:?}", applied.body);
    assert_eq!(status(&app, &owners, &run_id).await, "apply_queued");
    let token = claimed(&app, &secret, &agent).await;
    let saved = app.client.get(format!("{}/api/agent/job/plan", app.url)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(saved.bytes().await.unwrap().as_ref(), b"saved plan");
    // The apply's token writes the workspace's state, as the run that holds the lock.
    let state = terraform_state(1, "lineage-1", &[("x", json!("1"), false)]);
    let written = app
        .post(&format!("/api/v2/workspaces/{ws}/state-versions"), &token, state_version_body(&state, 1, false))
        .await;
    assert_eq!(written.status, 201, "{:?}", written.body);
    assert_eq!(finish(&app, &token, json!({"status": "finished"})).await.status, 200);
    assert_eq!(status(&app, &owners, &run_id).await, "applied");
    // The lock passes to the run that waited.
    assert_eq!(status(&app, &owners, &second).await, "plan_queued");
    let ended = job(&app, Method::GET, "/api/agent/job", &token, Value::Null).await;
    assert_eq!(ended.status, 401, "the job token ends with its job");
}

#[tokio::test]
async fn a_speculative_plan_takes_no_lock_and_a_run_without_changes_finishes_after_its_plan() {
    let (app, owners) = acme().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a1").await;
    let (cv, url) = configuration(&app, &owners, &ws, true).await;
    // Made before its upload: it waits for it.
    let speculative = id(&new_run(&app, &owners, &ws, Some(&cv), json!({})).await);
    assert_eq!(status(&app, &owners, &speculative).await, "pending");
    assert_eq!(put(&app, &url, simple_archive()).await.status, 200);
    assert_eq!(status(&app, &owners, &speculative).await, "plan_queued");
    assert!(!locked(&app, &owners, &ws).await, "a speculative plan takes no lock");
    let token = claimed(&app, &secret, &agent).await;
    let refused = app
        .post(
            &format!("/api/v2/workspaces/{ws}/state-versions"),
            &token,
            state_version_body(&terraform_state(1, "l", &[]), 1, false),
        )
        .await;
    assert_eq!(refused.status, 403, "a plan's token writes no state: {:?}", refused.body);
    assert_eq!(finish(&app, &token, json!({"status": "finished", "has-changes": true})).await.status, 200);
    assert_eq!(status(&app, &owners, &speculative).await, "planned_and_finished");

    let run_id = queued_run(&app, &owners, &ws).await;
    let token = claimed(&app, &secret, &agent).await;
    assert_eq!(finish(&app, &token, json!({"status": "finished", "has-changes": false})).await.status, 200);
    let shown = run(&app, &owners, &run_id).await;
    assert_eq!(shown["attributes"]["status"], "planned_and_finished");
    assert!(!locked(&app, &owners, &ws).await, "the lock is given back");
}

#[tokio::test]
async fn two_agents_racing_for_one_job_one_wins() {
    let (app, owners) = acme_with(roomy()).await;
    race(&app, &owners).await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn two_agents_racing_for_one_job_one_wins_on_dynamodb() {
    let app = hangar_tests::spawn_on_dynamodb_with(roomy()).await;
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    race(&app, &owners).await;
}

async fn race(app: &TestApp, owners: &str) {
    let (ws, _, secret) = agent_workspace(app, owners, "app").await;
    let (a, b) = (registered(app, &secret, "a").await, registered(app, &secret, "b").await);
    for _ in 0..3 {
        let run_id = queued_run(app, owners, &ws).await;
        let (first, second) = tokio::join!(claim(app, &secret, &a), claim(app, &secret, &b));
        let mut statuses = [first.status.as_u16(), second.status.as_u16()];
        statuses.sort();
        assert_eq!(statuses, [201, 204], "{:?} {:?}", first.body, second.body);
        let winner = if first.status == 201 { first } else { second };
        let token = winner.body["token"].as_str().unwrap();
        assert_eq!(winner.body["run"], run_id.as_str());
        let done = finish(app, token, json!({"status": "finished", "has-changes": false})).await;
        assert_eq!(done.status, 200, "{:?}", done.body);
        assert_eq!(status(app, owners, &run_id).await, "planned_and_finished");
    }
}

#[tokio::test]
async fn an_agent_claims_only_with_its_own_token_and_only_its_pools_jobs() {
    let (app, owners) = acme_with(roomy()).await;
    let (ws, pool_id, secret) = agent_workspace(&app, &owners, "app").await;
    let (_, _, other_secret) = agent_workspace(&app, &owners, "other").await;
    let agent = registered(&app, &secret, "a").await;
    let other_agent = registered(&app, &other_secret, "b").await;
    queued_run(&app, &owners, &ws).await;
    assert_eq!(claim(&app, &other_secret, &other_agent).await.status, 204, "another pool's job");
    assert_eq!(claim(&app, &other_secret, &agent).await.status, 204, "another pool's agent, its own empty queue");
    let (_, second_token) = agent_token(&app, &owners, &pool_id).await;
    assert_eq!(claim(&app, &second_token, &agent).await.status, 404, "only the token that registered the agent");
    assert_eq!(claim(&app, &owners, &agent).await.status, 401, "a team token is no agent's");
    assert_eq!(claim(&app, &secret, &agent).await.status, 201);
}

#[tokio::test]
async fn an_agent_that_stops_reporting_errors_its_run_and_releases_the_lock() {
    let config = Config { agent_ping_timeout: Duration::from_secs(1), ..Config::default() };
    let (app, owners) = acme_with(config).await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let run_id = queued_run(&app, &owners, &ws).await;
    let waiting = queued_run(&app, &owners, &ws).await;
    let token = claimed(&app, &secret, &agent).await;
    assert_eq!(job(&app, Method::POST, "/api/agent/job/heartbeat", &token, json!({})).await.status, 200);
    // Killed: it reports no more.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let shown = run(&app, &owners, &run_id).await;
    assert_eq!(shown["attributes"]["status"], "errored");
    let why = shown["attributes"]["error-message"].as_str().unwrap_or_default();
    assert!(why.contains("stopped reporting") && why.contains("HANGAR_AGENT_PING_TIMEOUT"), "{why}");
    assert_eq!(status(&app, &owners, &waiting).await, "plan_queued", "the lock passed to the next run");
    // The CLI reads the error at the end of the plan's log.
    let plan_id = shown["relationships"]["plan"]["data"]["id"].as_str().unwrap();
    let plan = app.get(&format!("/api/v2/plans/{plan_id}"), &owners).await;
    assert_eq!(plan.body["data"]["attributes"]["status"], "errored");
    let url = plan.body["data"]["attributes"]["log-read-url"].as_str().unwrap();
    let log = app.client.get(url).send().await.unwrap().text().await.unwrap();
    assert!(log.contains("stopped reporting") && log.ends_with('\u{3}'), "{log:?}");
    // The agent's job is over: its token no longer works.
    assert_eq!(job(&app, Method::POST, "/api/agent/job/heartbeat", &token, json!({})).await.status, 401);
}

#[tokio::test]
async fn the_scheduled_sweep_errors_runs_whose_agents_went_silent() {
    let config = Config { agent_ping_timeout: Duration::from_secs(1), ..Config::default() };
    let (app, owners) = acme_with(config).await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let run_id = queued_run(&app, &owners, &ws).await;
    claimed(&app, &secret, &agent).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let state = app.second_state().await;
    assert_eq!(hangar::runs::queue::sweep(&state).await.expect("the sweep runs"), 1);
    assert_eq!(hangar::runs::queue::sweep(&state).await.expect("the sweep runs"), 0, "once");
    assert!(!locked(&app, &owners, &ws).await);
    assert_eq!(status(&app, &owners, &run_id).await, "errored");
}

#[tokio::test]
async fn a_stale_agent_writing_state_is_refused() {
    let config = Config { agent_ping_timeout: Duration::from_secs(1), ..Config::default() };
    let (app, owners) = acme_with(config).await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let run_id = queued_run(&app, &owners, &ws).await;
    let token = claimed(&app, &secret, &agent).await;
    assert_eq!(finish(&app, &token, json!({"status": "finished", "has-changes": true})).await.status, 200);
    assert_eq!(app.post(&format!("/api/v2/runs/{run_id}/actions/apply"), &owners, json!({})).await.status, 202);
    let token = claimed(&app, &secret, &agent).await;
    let state = |serial| terraform_state(serial, "lineage", &[]);
    let body = |serial| state_version_body(&state(serial), serial, false);
    let path = format!("/api/v2/workspaces/{ws}/state-versions");
    assert_eq!(app.post(&path, &token, body(1)).await.status, 201, "while the lease holds");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // Before anything has read the run or swept: the token lived as long as the lease.
    let late = app.post(&path, &token, body(2)).await;
    assert_eq!(late.status, 401, "the stale agent's token is gone: {:?}", late.body);
    assert_eq!(status(&app, &owners, &run_id).await, "errored");
    let current = app.get(&format!("/api/v2/workspaces/{ws}/current-state-version"), &owners).await;
    assert_eq!(current.body["data"]["attributes"]["serial"], 1, "nothing it sent late was kept");
}

#[tokio::test]
async fn a_job_token_reaches_its_workspace_and_its_organizations_registry_alone() {
    let (app, owners) = acme().await;
    app.create_organization("globex").await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let other_ws = new_workspace(&app, &owners, "acme", "other").await;
    let agent = registered(&app, &secret, "a").await;
    queued_run(&app, &owners, &ws).await;
    let token = claimed(&app, &secret, &agent).await;
    let current = |ws: &str| format!("/api/v2/workspaces/{ws}/current-state-version");
    assert_eq!(app.get(&current(&ws), &token).await.status, 404, "its own workspace, no state yet");
    assert_eq!(app.get(&format!("/api/v2/workspaces/{ws}/vars"), &token).await.status, 200);
    for path in [
        current(&other_ws),
        format!("/api/v2/workspaces/{other_ws}/vars"),
        "/api/v2/organizations/acme".into(),
        "/api/v2/organizations/acme/workspaces".into(),
        "/api/v2/organizations/acme/agent-pools".into(),
        "/api/v2/organizations/acme/teams".into(),
    ] {
        let reply = app.get(&path, &token).await;
        assert_eq!(reply.status, 404, "{path}: {:?}", reply.body);
    }
    let lock = app.post(&format!("/api/v2/workspaces/{ws}/actions/unlock"), &token, json!({})).await;
    assert!(lock.status == 403 || lock.status == 404, "{:?}", lock.body);
    // The registry: its own organization's modules, not another's.
    let own = app.get("/api/registry/v1/modules/acme/missing/null/versions", &token).await;
    assert_eq!(own.status, 404);
    let mine = app.get("/api/v2/organizations/acme/registry-modules", &token).await;
    assert_eq!(mine.status, 404, "the registry's management API is not the job's");
    let globex = app.owners_token("globex").await;
    let module = new_module(&app, &globex, "globex", "net", "aws").await;
    publish_version(&app, &globex, &module, "1.0.0", simple_archive()).await;
    let versions = "/api/registry/v1/modules/globex/net/aws/versions";
    assert_eq!(app.get(versions, &globex).await.status, 200, "the module is there");
    let theirs = app.get(versions, &token).await;
    assert_eq!(theirs.status, 404, "another organization's registry: {:?}", theirs.body);
    let acme_module = new_module(&app, &owners, "acme", "net", "aws").await;
    publish_version(&app, &owners, &acme_module, "1.0.0", simple_archive()).await;
    let own = app.get("/api/registry/v1/modules/acme/net/aws/versions", &token).await;
    assert_eq!(own.status, 200, "its own organization's registry: {:?}", own.body);
    // After its job, nothing.
    assert_eq!(finish(&app, &token, json!({"status": "errored", "error": "boom"})).await.status, 200);
    assert_eq!(app.get(&current(&ws), &token).await.status, 401);
}

#[tokio::test]
async fn hostile_configuration_archives_are_refused_and_the_version_errored() {
    let (app, owners) = acme().await;
    let (ws, _, _) = agent_workspace(&app, &owners, "app").await;
    let bomb = {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1024 * 1024];
        for _ in 0..600 {
            encoder.write_all(&zeros).unwrap();
        }
        encoder.finish().unwrap()
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "a `..` path",
            targz(&[Entry::Raw { name: "../escape.tf", kind: tar::EntryType::Regular, link: None }]),
            "escapes",
        ),
        (
            "an escaping link",
            targz(&[Entry::Raw { name: "l", kind: tar::EntryType::Symlink, link: Some("../../etc/passwd") }]),
            "outside",
        ),
        (
            "an absolute link",
            targz(&[Entry::Raw { name: "l", kind: tar::EntryType::Symlink, link: Some("/etc/passwd") }]),
            "outside",
        ),
        ("a gzip bomb", bomb, "uncompressed limit"),
        ("no gzip at all", b"plain text".to_vec(), "gzip"),
    ];
    for (what, archive, reason) in cases {
        let (cv, url) = configuration(&app, &owners, &ws, false).await;
        let refused = put(&app, &url, archive).await;
        assert_eq!(refused.status, 422, "{what}: {:?}", refused.body);
        let shown = app.get(&format!("/api/v2/configuration-versions/{cv}"), &owners).await;
        assert_eq!(shown.body["data"]["attributes"]["status"], "errored", "{what}");
        let message = shown.body["data"]["attributes"]["error-message"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{what}: {message}");
        let run = new_run(&app, &owners, &ws, Some(&cv), json!({})).await;
        assert_eq!(run.status, 422, "{what}: no run on a refused configuration: {:?}", run.body);
    }
    let (_, url) = configuration(&app, &owners, &ws, false).await;
    assert_eq!(put(&app, &url, simple_archive()).await.status, 200);
    assert_eq!(put(&app, &url, simple_archive()).await.status, 409, "an upload lands once");
    let altered = url.replace("signature=", "signature=0");
    assert_eq!(put(&app, &altered, simple_archive()).await.status, 403);
}

#[tokio::test]
async fn log_links_work_unaltered_and_until_they_expire() {
    let config = Config { log_link_lifetime: Duration::from_secs(2), ..Config::default() };
    let (app, owners) = acme_with(config).await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let run_id = queued_run(&app, &owners, &ws).await;
    let token = claimed(&app, &secret, &agent).await;
    let chunk = |offset: u64, body: &'static str| {
        app.client.put(format!("{}/api/agent/job/log?offset={offset}", app.url)).bearer_auth(&token).body(body).send()
    };
    assert_eq!(chunk(0, "hello ").await.unwrap().status(), 204);
    assert_eq!(chunk(6, "world").await.unwrap().status(), 204);
    assert_eq!(chunk(0, "hello ").await.unwrap().status(), 204, "a chunk sent again changes nothing");
    assert_eq!(chunk(100, "gap").await.unwrap().status(), 409, "a chunk starts where the log ends");
    assert_eq!(chunk(3, "overlap").await.unwrap().status(), 409);
    let shown = run(&app, &owners, &run_id).await;
    let plan_id = shown["relationships"]["plan"]["data"]["id"].as_str().unwrap();
    let url = app.get(&format!("/api/v2/plans/{plan_id}"), &owners).await.body["data"]["attributes"]["log-read-url"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = app.client.clone();
    let read = |url: String| {
        let client = client.clone();
        async move {
            let response = client.get(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    assert_eq!(read(url.clone()).await, (200, "\u{2}hello world".into()), "no ETX while it runs");
    assert_eq!(read(format!("{url}?offset=3&limit=4")).await, (200, "llo ".into()), "go-tfe's window");
    let mut guessed = url.clone();
    let last = guessed.pop().unwrap();
    guessed.push(if last == '0' { '1' } else { '0' });
    assert_eq!(read(guessed).await.0, 403, "a guessed signature");
    let apply_id = plan_id.replace("plan-", "apply-");
    assert_eq!(read(url.replace(plan_id, &apply_id)).await.0, 403, "the signature names its log");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(read(url).await.0, 403, "an expired link");
}

#[tokio::test]
async fn cancel_interrupts_terraform_on_the_agent_and_force_cancel_ends_the_run_at_once() {
    let (app, owners) = acme().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let scratch = tempfile::tempdir().unwrap();
    let terraform = stand_in_terraform(scratch.path());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let settings = hangar_agent::Settings {
        address: app.url.clone(),
        token: secret.clone(),
        name: "stand-in".into(),
        terraform,
        single: false,
        work_dir: Some(scratch.path().to_path_buf()),
        poll: Duration::from_millis(200),
        ca_file: None,
    };
    let agent = tokio::spawn(hangar_agent::run(settings, stopped));
    let run_id = queued_run(&app, &owners, &ws).await;
    wait_for(&app, &owners, &run_id, "planning").await;
    let marker = scratch.path().join("plan-started");
    wait_until(|| marker.exists()).await;
    assert_eq!(
        app.post(&format!("/api/v2/runs/{run_id}/actions/force-cancel"), &owners, json!({})).await.status,
        409,
        "force-cancel comes after a cancel"
    );
    let canceled = app.post(&format!("/api/v2/runs/{run_id}/actions/cancel"), &owners, json!({})).await;
    assert_eq!(canceled.status, 202, "{:?}", canceled.body);
    wait_for(&app, &owners, &run_id, "canceled").await;
    let signals = std::fs::read_to_string(scratch.path().join("signals")).unwrap_or_default();
    assert!(signals.contains("INT"), "Terraform got SIGINT: {signals:?}");
    assert!(!locked(&app, &owners, &ws).await);

    // A Terraform that ignores SIGINT: force-cancel ends the run, and the agent kills it.
    std::fs::write(scratch.path().join("stubborn"), "").unwrap();
    let run_id = queued_run(&app, &owners, &ws).await;
    wait_for(&app, &owners, &run_id, "planning").await;
    assert_eq!(app.post(&format!("/api/v2/runs/{run_id}/actions/cancel"), &owners, json!({})).await.status, 202);
    let shown = run(&app, &owners, &run_id).await;
    assert_eq!(shown["attributes"]["actions"]["is-force-cancelable"], true);
    assert_eq!(app.post(&format!("/api/v2/runs/{run_id}/actions/force-cancel"), &owners, json!({})).await.status, 202);
    assert_eq!(status(&app, &owners, &run_id).await, "force_canceled");
    assert!(!locked(&app, &owners, &ws).await);
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(20), agent).await;
}

/// A `terraform` that succeeds at `init`, and at `plan` records that it started, then waits for
/// a signal (recording SIGINT, and exiting on it unless the scratch directory holds `stubborn`).
fn stand_in_terraform(scratch: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch.display();
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\n  init) exit 0 ;;\n  plan)\n    trap 'echo INT >> {dir}/signals; [ -e {dir}/stubborn ] || exit 130' INT\n    touch {dir}/plan-started\n    i=0\n    while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n    exit 0 ;;\n  *) exit 0 ;;\nesac\n"
    );
    let path = scratch.join("terraform");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

pub(super) async fn wait_until(mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gave up waiting");
}

pub(super) async fn wait_for(app: &TestApp, token: &str, run_id: &str, wanted: &str) {
    for _ in 0..200 {
        if status(app, token, run_id).await == wanted {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("run {run_id} never became {wanted}: {}", status(app, token, run_id).await);
}

#[tokio::test]
async fn who_may_queue_apply_and_cancel_runs_follows_the_teams_access() {
    let (app, owners) = acme().await;
    let (ws, _, _) = agent_workspace(&app, &owners, "app").await;
    let cv = uploaded(&app, &owners, &ws).await;
    let (reader_team, reader) = app.team_with_token("acme", "readers", json!({})).await;
    let (planner_team, planner) = app.team_with_token("acme", "planners", json!({})).await;
    let (_, stranger) = app.team_with_token("acme", "strangers", json!({})).await;
    hangar_tests::builders::grant(&app, &owners, &reader_team, &ws, json!({"access": "read"})).await;
    hangar_tests::builders::grant(&app, &owners, &planner_team, &ws, json!({"access": "plan"})).await;
    // The workspace auto-applies: but not a run queued by one who may not apply.
    let auto_apply = json!({"data": {"type": "workspaces", "attributes": {"auto-apply": true}}});
    assert_eq!(app.patch(&format!("/api/v2/workspaces/{ws}"), &owners, auto_apply).await.status, 200);
    let refused = new_run(&app, &reader, &ws, Some(&cv), json!({})).await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    let hidden = new_run(&app, &stranger, &ws, Some(&cv), json!({})).await;
    assert_eq!(hidden.status, 404, "{:?}", hidden.body);
    let run_id = id(&new_run(&app, &planner, &ws, Some(&cv), json!({})).await);
    assert_eq!(app.get(&format!("/api/v2/runs/{run_id}"), &reader).await.status, 200);
    assert_eq!(app.get(&format!("/api/v2/runs/{run_id}"), &stranger).await.status, 404);
    let auto = new_run(&app, &planner, &ws, Some(&cv), json!({"auto-apply": true})).await;
    assert_eq!(auto.status, 403, "plan access queues no run that applies itself: {:?}", auto.body);
    let shown = run(&app, &owners, &run_id).await;
    assert_eq!(shown["attributes"]["auto-apply"], false);
    let cancel = app.post(&format!("/api/v2/runs/{run_id}/actions/cancel"), &planner, json!({})).await;
    assert_eq!(cancel.status, 403, "plan access cancels no run that applies: {:?}", cancel.body);
    assert_eq!(app.post(&format!("/api/v2/runs/{run_id}/actions/cancel"), &owners, json!({})).await.status, 202);
    assert_eq!(status(&app, &owners, &run_id).await, "canceled");
    assert!(!locked(&app, &owners, &ws).await);
    let again = app.post(&format!("/api/v2/runs/{run_id}/actions/cancel"), &owners, json!({})).await;
    assert_eq!(again.status, 409, "{}", detail(&again));
}

#[tokio::test]
async fn bad_run_requests_get_clear_errors_and_local_workspaces_queue_nothing() {
    let (app, owners) = acme().await;
    let (ws, _, _) = agent_workspace(&app, &owners, "app").await;
    let cv = uploaded(&app, &owners, &ws).await;
    let long = "a".repeat(2000);
    let cases = [
        (json!({"target-addrs": ["-destroy"]}), "/data/attributes/target-addrs"),
        (json!({"replace-addrs": [long]}), "/data/attributes/replace-addrs"),
        (json!({"refresh-only": true, "is-destroy": true}), "/data/attributes/refresh-only"),
        (json!({"variables": [{"key": "bad key", "value": "1"}]}), "/data/attributes/variables"),
        (json!({"message": "bidi \u{202e} text"}), "/data/attributes/message"),
    ];
    for (attributes, pointer) in cases {
        let reply = new_run(&app, &owners, &ws, Some(&cv), attributes.clone()).await;
        assert_eq!(reply.status, 422, "{attributes}: {:?}", reply.body);
        assert_eq!(reply.pointer(), pointer, "{attributes}");
    }
    let body = json!({"data": {"type": "workspaces", "attributes": {"name": "laptop", "execution-mode": "local"}}});
    let local = id(&app.post("/api/v2/organizations/acme/workspaces", &owners, body).await);
    let local_cv = app
        .post(&format!("/api/v2/workspaces/{local}/configuration-versions"), &owners, configuration_body(false))
        .await;
    let reply = new_run(&app, &owners, &local, Some(&id(&local_cv)), json!({})).await;
    assert_eq!(reply.status, 409, "{:?}", reply.body);
    assert!(detail(&reply).contains("`local`"), "{}", detail(&reply));
    let elsewhere = new_run(&app, &owners, &local, Some(&cv), json!({})).await;
    assert_eq!(elsewhere.status, 409, "checked in order: the mode first");
}

#[tokio::test]
async fn the_console_shows_a_workspaces_runs_and_a_runs_log_reloading_while_it_runs() {
    let (app, owners) = acme().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let run_id = queued_run(&app, &owners, &ws).await;
    let token = claimed(&app, &secret, &agent).await;
    let log = app
        .client
        .put(format!("{}/api/agent/job/log?offset=0", app.url))
        .bearer_auth(&token)
        .body("Plan: 1 to add <b>\n");
    assert_eq!(log.send().await.unwrap().status(), 204);
    let mut browser = super::web_console::Browser::new(&app);
    browser.sign_in(&owners).await;
    let workspace = browser.get("/app/organizations/acme/workspaces/app").await;
    assert!(
        workspace.html.contains(&format!("/app/organizations/acme/workspaces/app/runs/{run_id}")),
        "{}",
        workspace.html
    );
    assert!(workspace.html.contains("status-planning"), "{}", workspace.html);
    let page = browser.get(&format!("/app/organizations/acme/workspaces/app/runs/{run_id}")).await;
    assert_eq!(page.status, 200, "{}", page.html);
    assert!(page.html.contains("Plan: 1 to add &lt;b&gt;"), "the log, escaped: {}", page.html);
    assert!(page.html.contains("http-equiv=\"refresh\""), "reloads while the run goes on");
    assert_eq!(finish(&app, &token, json!({"status": "finished", "has-changes": false})).await.status, 200);
    let done = browser.get(&format!("/app/organizations/acme/workspaces/app/runs/{run_id}")).await;
    assert!(done.html.contains("planned and finished") && !done.html.contains("http-equiv"), "{}", done.html);
    let elsewhere = browser.get(&format!("/app/organizations/acme/workspaces/other/runs/{run_id}")).await;
    assert_eq!(elsewhere.status, 404, "a run is shown under its own workspace only");
}

#[tokio::test]
async fn the_organizations_run_queue_and_capacity_show_queued_and_running_runs_to_those_who_read_them() {
    let (app, owners) = acme_with(roomy()).await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let (other, _, _) = agent_workspace(&app, &owners, "other").await;
    let agent = registered(&app, &secret, "a").await;
    let first = queued_run(&app, &owners, &ws).await;
    let waiting = queued_run(&app, &owners, &ws).await;
    let elsewhere = queued_run(&app, &owners, &other).await;
    claimed(&app, &secret, &agent).await;
    let queue = app.get("/api/v2/organizations/acme/runs/queue", &owners).await;
    assert_eq!(queue.status, 200, "{:?}", queue.body);
    let ids: Vec<&str> = queue.body["data"].as_array().unwrap().iter().filter_map(|run| run["id"].as_str()).collect();
    assert_eq!(ids, [first.as_str(), elsewhere.as_str()], "queued or running, oldest first; not {waiting}, pending");
    let capacity = app.get("/api/v2/organizations/acme/capacity", &owners).await;
    assert_eq!(capacity.body["data"]["type"], "organization-capacity");
    assert_eq!(capacity.body["data"]["attributes"], json!({"pending": 1, "running": 1}));
    // A team that reads one workspace's runs sees its runs alone; another organization, nothing.
    let (team, token) = app.team_with_token("acme", "app-readers", json!({})).await;
    hangar_tests::builders::grant(&app, &owners, &team, &ws, json!({"access": "read"})).await;
    let seen = app.get("/api/v2/organizations/acme/runs/queue", &token).await;
    assert_eq!(seen.body["data"].as_array().unwrap().len(), 1, "{:?}", seen.body);
    app.create_organization("globex").await;
    let globex = app.owners_token("globex").await;
    assert_eq!(app.get("/api/v2/organizations/acme/runs/queue", &globex).await.status, 404);
    assert_eq!(app.get("/api/v2/organizations/acme/capacity", &globex).await.status, 404);
    let workspace = app.get(&format!("/api/v2/workspaces/{ws}"), &owners).await;
    assert_eq!(workspace.body["data"]["relationships"]["current-run"]["data"]["id"], first.as_str());
    // The workspace's lists count what it has had, one page at a time.
    let runs = app.get(&format!("/api/v2/workspaces/{ws}/runs?page%5Bsize%5D=1"), &owners).await;
    assert_eq!(runs.body["meta"]["pagination"]["total-count"], 2, "{:?}", runs.body["meta"]);
    assert_eq!(runs.body["data"][0]["id"], waiting.as_str(), "newest first");
    let versions = app.get(&format!("/api/v2/workspaces/{ws}/configuration-versions"), &owners).await;
    assert_eq!(versions.body["meta"]["pagination"]["total-count"], 2);
}

#[tokio::test]
async fn a_remote_run_without_a_terraform_binary_errors_saying_so() {
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    let options = dev_server::Options {
        runners: 1,
        terraform: "/nonexistent/terraform".into(),
        ..hangar_tests::options(data_dir.path())
    };
    let app = TestApp::spawn_in(data_dir, options, Config::default()).await;
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    let body = json!({"data": {"type": "workspaces", "attributes": {"name": "web", "execution-mode": "remote"}}});
    let ws = id(&app.post("/api/v2/organizations/acme/workspaces", &owners, body).await);
    let run_id = queued_run(&app, &owners, &ws).await;
    wait_for(&app, &owners, &run_id, "errored").await;
    let shown = run(&app, &owners, &run_id).await;
    let why = shown["attributes"]["error-message"].as_str().unwrap_or_default();
    assert!(why.contains("No Terraform binary") && why.contains("HANGAR_TERRAFORM"), "{why}");
    assert!(!locked(&app, &owners, &ws).await);
}

#[tokio::test]
async fn a_workspace_holds_at_most_a_hundred_runs_not_over_yet() {
    let (app, owners) = acme().await;
    let (ws, _, _) = agent_workspace(&app, &owners, "app").await;
    let cv = uploaded(&app, &owners, &ws).await;
    let mut first = None;
    for _ in 0..100 {
        let reply = new_run(&app, &owners, &ws, Some(&cv), json!({})).await;
        assert_eq!(reply.status, 201, "{:?}", reply.body);
        first.get_or_insert(id(&reply));
    }
    let refused = new_run(&app, &owners, &ws, Some(&cv), json!({})).await;
    assert_eq!(refused.status, 409, "{:?}", refused.body);
    assert!(detail(&refused).contains("100 runs not over yet"), "{}", detail(&refused));
    // One ends: room for one more.
    let first = first.unwrap();
    assert_eq!(app.post(&format!("/api/v2/runs/{first}/actions/cancel"), &owners, json!({})).await.status, 202);
    assert_eq!(new_run(&app, &owners, &ws, Some(&cv), json!({})).await.status, 201);
    assert_eq!(new_run(&app, &owners, &ws, Some(&cv), json!({})).await.status, 409);
}

#[tokio::test]
async fn a_forced_unlock_starts_the_waiting_run_and_the_planned_run_it_overrode_is_never_applied() {
    let (app, owners) = acme().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let first = queued_run(&app, &owners, &ws).await;
    let second = queued_run(&app, &owners, &ws).await;
    let token = claimed(&app, &secret, &agent).await;
    let done = finish(&app, &token, json!({"status": "finished", "has-changes": true})).await;
    assert_eq!(done.status, 200, "{:?}", done.body);
    assert_eq!(status(&app, &owners, &first).await, "planned");

    let forced = app.post(&format!("/api/v2/workspaces/{ws}/actions/force-unlock"), &owners, json!({})).await;
    assert_eq!(forced.status, 200, "{:?}", forced.body);
    // The run that waited for the lock starts at once: an agent claims its plan, nobody read it.
    let claim = claim(&app, &secret, &agent).await;
    assert_eq!(claim.status, 201, "the waiting run's plan is queued by the unlock: {:?}", claim.body);
    assert_eq!(claim.body["run"], second);

    // The first run's plan was made under a lock since forced open: it is errored, not applied.
    let applied = app.post(&format!("/api/v2/runs/{first}/actions/apply"), &owners, json!({})).await;
    assert!(applied.status == 202 || applied.status == 409, "{:?}", applied.body);
    let shown = run(&app, &owners, &first).await;
    assert_eq!(shown["attributes"]["status"], "errored", "{shown:?}");
    assert!(shown["attributes"]["error-message"].as_str().unwrap_or_default().contains("forced open"), "{shown:?}");
    let holder = app.get(&format!("/api/v2/workspaces/{ws}"), &owners).await;
    assert_eq!(
        holder.body["data"]["relationships"]["locked-by"]["data"]["id"], second,
        "the lock stays the second run's"
    );
}

#[tokio::test]
async fn an_empty_log_chunk_is_refused_and_holds_no_offset_from_the_next() {
    let (app, owners) = acme().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let run_id = queued_run(&app, &owners, &ws).await;
    let token = claimed(&app, &secret, &agent).await;
    let chunk = |body: &'static str| {
        app.client.put(format!("{}/api/agent/job/log?offset=0", app.url)).bearer_auth(&token).body(body).send()
    };
    assert_eq!(chunk("").await.unwrap().status(), 422, "an empty chunk");
    assert_eq!(chunk("hello").await.unwrap().status(), 204);
    let plan_id = run(&app, &owners, &run_id).await["relationships"]["plan"]["data"]["id"].as_str().unwrap().to_owned();
    let url = app.get(&format!("/api/v2/plans/{plan_id}"), &owners).await.body["data"]["attributes"]["log-read-url"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = app.client.get(url).send().await.unwrap().text().await.unwrap();
    assert_eq!(log, "\u{2}hello", "the chunk after an empty one is kept");
}

#[tokio::test]
async fn a_cancel_asked_for_while_the_plan_ran_stops_an_auto_apply() {
    let (app, owners) = acme().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let cv = uploaded(&app, &owners, &ws).await;
    let created = new_run(&app, &owners, &ws, Some(&cv), json!({"auto-apply": true})).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let run_id = id(&created);
    let token = claimed(&app, &secret, &agent).await;
    assert_eq!(app.post(&format!("/api/v2/runs/{run_id}/actions/cancel"), &owners, json!({})).await.status, 202);
    // The agent's plan finished before it heard of the cancel.
    let done = finish(&app, &token, json!({"status": "finished", "has-changes": true})).await;
    assert_eq!(done.status, 200, "{:?}", done.body);
    assert_eq!(status(&app, &owners, &run_id).await, "canceled", "no apply is queued after a cancel");
    assert!(!locked(&app, &owners, &ws).await);
    assert_eq!(claim(&app, &secret, &agent).await.status, 204, "nothing to apply");
}

#[tokio::test]
async fn an_ended_runs_saved_plan_is_deleted_with_its_end() {
    let (app, owners) = acme().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let agent = registered(&app, &secret, "a").await;
    let run_id = queued_run(&app, &owners, &ws).await;
    let sealed = || std::fs::read_dir(app.data_dir.path().join("sealed")).unwrap().count();
    let token = claimed(&app, &secret, &agent).await;
    let before = sealed();
    let plan = app.client.put(format!("{}/api/agent/job/plan", app.url)).bearer_auth(&token).body("saved plan");
    assert_eq!(plan.send().await.unwrap().status(), 204);
    assert_eq!(sealed(), before + 1, "the saved plan, sealed");
    assert_eq!(finish(&app, &token, json!({"status": "finished", "has-changes": true})).await.status, 200);
    assert_eq!(app.post(&format!("/api/v2/runs/{run_id}/actions/discard"), &owners, json!({})).await.status, 202);
    assert_eq!(status(&app, &owners, &run_id).await, "discarded");
    assert_eq!(sealed(), before, "a discarded run's plan is never applied: it is gone");
}
