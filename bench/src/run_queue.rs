//! The run queue: what one claim costs the store with 1 and with 10,000 jobs queued (one query
//! of the queue's head, a read of the run, one transaction: the same either way), and a drain:
//! 500 runs over 50 workspaces, 10 `hangar-agent` loops with a no-op stand-in Terraform, each job
//! run exactly once, with the median time from a run's creation to its claim.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::http::Method;
use hangar::config::Config;
use serde_json::json;

use crate::agent_cost::{id, send};
use crate::api::{Api, ORG};
use crate::counting::Cost;
use crate::local::{Local, ADMIN_TOKEN};
use crate::stats::{micros, millis, table, Samples};

const QUEUED: [usize; 2] = [1, 10_000];
const WORKSPACES: usize = 50;
const RUNS_PER_WORKSPACE: usize = 10;
const AGENTS: usize = 10;

pub async fn run() -> String {
    let mut rows = Vec::new();
    for queued in QUEUED {
        let (cost, time) = claim_cost(queued).await;
        rows.push(vec![
            format!("{queued}"),
            format!("{} / {} / {}", cost.calls, cost.items_read, cost.items_written),
            micros(time),
        ]);
    }
    let claims = table(&["jobs queued", "store calls / items read / written, one claim", "time"], &rows);
    let drain = drain().await;
    format!(
        "### Run queue: a claim's store cost, and a drain by 10 agents\n\n\
         In-process (router called directly, embedded store), one claim (`POST /api/agent/jobs`) at the \
         queue's head.\n\n{claims}\n\n{drain}"
    )
}

fn archive() -> Vec<u8> {
    hangar_tests::targz(&[hangar_tests::Entry::File("main.tf", b"output \"x\" {\n  value = 1\n}\n")])
}

/// The store cost and time of one claim with `queued` speculative plans in the pool's queue.
async fn claim_cost(queued: usize) -> (Cost, Duration) {
    let local = Local::start(Config { max_agents: 5, ..Config::default() }).await;
    let api = &local.api;
    api.create_organization(ADMIN_TOKEN).await;
    let body = json!({"data": {"type": "agent-pools", "attributes": {"name": "runners"}}});
    let pool =
        id(&send(api, Method::POST, &format!("/api/v2/organizations/{ORG}/agent-pools"), ADMIN_TOKEN, Some(body), 201)
            .await);
    let body = json!({"data": {"type": "authentication-tokens", "attributes": {"description": "bench"}}});
    let token = send(
        api,
        Method::POST,
        &format!("/api/v2/agent-pools/{pool}/authentication-tokens"),
        ADMIN_TOKEN,
        Some(body),
        201,
    )
    .await;
    let secret = token["data"]["attributes"]["token"].as_str().expect("a secret").to_owned();
    let agent = id(&send(api, Method::POST, "/api/agent/register", &secret, Some(json!({"name": "a"})), 201).await);
    let body = json!({"data": {"type": "workspaces", "attributes": {"name": "app", "execution-mode": "agent"},
        "relationships": {"agent-pool": {"data": {"type": "agent-pools", "id": pool}}}}});
    let workspace =
        id(&send(api, Method::POST, &format!("/api/v2/organizations/{ORG}/workspaces"), ADMIN_TOKEN, Some(body), 201)
            .await);
    let body = json!({"data": {"type": "configuration-versions", "attributes": {"auto-queue-runs": false, "speculative": true}}});
    let cv = send(
        api,
        Method::POST,
        &format!("/api/v2/workspaces/{workspace}/configuration-versions"),
        ADMIN_TOKEN,
        Some(body),
        201,
    )
    .await;
    let link = cv["data"]["attributes"]["upload-url"].as_str().expect("an upload link");
    let path = &link[link.find("/api/").expect("a Hangar link")..];
    upload(api, path, archive()).await;
    let cv = id(&cv);
    for _ in 0..queued {
        let body = json!({"data": {"type": "runs", "relationships": {
            "workspace": {"data": {"type": "workspaces", "id": workspace}},
            "configuration-version": {"data": {"type": "configuration-versions", "id": cv}}}}});
        send(api, Method::POST, "/api/v2/runs", ADMIN_TOKEN, Some(body), 201).await;
    }
    let (before, started) = (local.counters.snapshot(), Instant::now());
    send(api, Method::POST, "/api/agent/jobs", &secret, Some(json!({"agent": agent})), 201).await;
    (local.counters.snapshot() - before, started.elapsed())
}

async fn upload(api: &Api, path: &str, archive: Vec<u8>) {
    let Api::InProcess(router) = api else { unreachable!("the claim figure runs in process") };
    use tower::ServiceExt;
    let request = axum::http::Request::builder().method(Method::PUT).uri(path).body(axum::body::Body::from(archive));
    let status = router.clone().oneshot(request.expect("a request")).await.expect("infallible").status();
    assert!(status.is_success(), "uploading a configuration: {status}");
}

/// A `terraform` that does nothing but what the agent reads: `plan -out` writes a plan, `show
/// -json` says it changes nothing, and each plan leaves a line in `plans`.
fn stand_in(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let plans = dir.join("plans");
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\n  plan)\n    echo plan >> {plans}\n    for a in \"$@\"; do case \"$a\" in -out=*) : > \"${{a#-out=}}\" ;; esac; done ;;\n  show) echo '{{\"resource_changes\":[],\"output_changes\":{{}}}}' ;;\nesac\nexit 0\n",
        plans = plans.display()
    );
    let path = dir.join("terraform");
    std::fs::write(&path, script).expect("the stand-in");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("executable");
    path
}

/// 500 runs over 50 workspaces drained by 10 agents over HTTP: each job run once, and the median
/// time from a run's creation to its claim.
async fn drain() -> String {
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let terraform = stand_in(scratch.path());
    let config = Config { max_agents: AGENTS * 2, max_agent_pools: 2, ..Config::default() };
    let app = hangar_tests::TestApp::spawn_with(config).await;
    app.create_organization(ORG).await;
    let owners = app.owners_token(ORG).await;
    let pool = hangar_tests::builders::new_pool(&app, &owners, ORG, hangar_tests::builders::pool("drain")).await;
    let (_, secret) = hangar_tests::builders::agent_token(&app, &owners, &pool).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let agents: Vec<_> = (0..AGENTS)
        .map(|n| {
            let settings = hangar_agent::Settings {
                address: app.url.clone(),
                token: secret.clone(),
                name: format!("bench-{n}"),
                terraform: terraform.clone(),
                single: false,
                work_dir: Some(scratch.path().to_path_buf()),
                poll: Duration::from_secs(1),
                ca_file: None,
            };
            tokio::spawn(hangar_agent::run(settings, stopped.clone()))
        })
        .collect();
    let mut workspaces = Vec::new();
    for n in 0..WORKSPACES {
        let body = json!({"data": {"type": "workspaces", "attributes": {"name": format!("ws-{n}"), "execution-mode": "agent"},
            "relationships": {"agent-pool": {"data": {"type": "agent-pools", "id": pool}}}}});
        let reply = app.post(&format!("/api/v2/organizations/{ORG}/workspaces"), &owners, body).await;
        assert_eq!(reply.status, 201, "{:?}", reply.body);
        let workspace = hangar_tests::builders::id(&reply);
        let body = json!({"data": {"type": "configuration-versions", "attributes": {"auto-queue-runs": false}}});
        let cv = app.post(&format!("/api/v2/workspaces/{workspace}/configuration-versions"), &owners, body).await;
        let link = cv.body["data"]["attributes"]["upload-url"].as_str().expect("an upload link").to_owned();
        let uploaded = app.client.put(link).body(archive()).send().await.expect("the upload");
        assert!(uploaded.status().is_success());
        workspaces.push((workspace, hangar_tests::builders::id(&cv)));
    }
    let started = Instant::now();
    let mut runs = Vec::new();
    for _ in 0..RUNS_PER_WORKSPACE {
        for (workspace, cv) in &workspaces {
            let body = json!({"data": {"type": "runs", "relationships": {
                "workspace": {"data": {"type": "workspaces", "id": workspace}},
                "configuration-version": {"data": {"type": "configuration-versions", "id": cv}}}}});
            let reply = app.post("/api/v2/runs", &owners, body).await;
            assert_eq!(reply.status, 201, "{:?}", reply.body);
            runs.push(hangar_tests::builders::id(&reply));
        }
    }
    let created = started.elapsed();
    let mut waits = Samples::default();
    let mut queued_waits = Samples::default();
    let deadline = Instant::now() + Duration::from_secs(1800);
    for run in &runs {
        let shown = loop {
            let reply = app.get(&format!("/api/v2/runs/{run}"), &owners).await;
            let status = reply.body["data"]["attributes"]["status"].as_str().unwrap_or_default().to_owned();
            if status == "planned_and_finished" {
                break reply.body;
            }
            assert!(!["errored", "canceled"].contains(&status.as_str()), "run {run} ended {status}");
            assert!(Instant::now() < deadline, "the drain did not finish");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let at = |name: &str| {
            let text = shown["data"]["attributes"]["status-timestamps"][name].as_str().expect(name).to_owned();
            chrono::DateTime::parse_from_rfc3339(&text).expect("a timestamp")
        };
        let to_claim = |from: &str| (at("planning-at") - at(from)).to_std().unwrap_or_default();
        waits.push(to_claim("pending-at"));
        queued_waits.push(to_claim("plan-queued-at"));
    }
    let drained = started.elapsed();
    let _ = stop.send(true);
    for agent in agents {
        let _ = tokio::time::timeout(Duration::from_secs(10), agent).await;
    }
    let plans = std::fs::read_to_string(scratch.path().join("plans")).unwrap_or_default().lines().count();
    assert_eq!(plans, runs.len(), "each job ran exactly once");
    let rows = vec![vec![
        format!("{}", runs.len()),
        format!("{plans}"),
        millis(created),
        format!("{:.1} s", drained.as_secs_f64()),
        millis(waits.median()),
        millis(queued_waits.median()),
        millis(queued_waits.percentile(0.95)),
    ]];
    let header = [
        "runs (50 workspaces × 10)",
        "plans run by the stand-in",
        "all created in",
        "all finished after",
        "median creation → claim",
        "median queued → claim",
        "p95 queued → claim",
    ];
    format!(
        "Over HTTP, dev-server on the embedded store, 10 `hangar-agent` loops (polling every second) with a \
         no-op stand-in Terraform; each run plans once and finds no changes, so each is one job. A run waits \
         for its workspace's lock behind the runs before it: creation → claim is mostly that wait; queued → \
         claim is the queue's own latency.\n\n{}",
        table(&header, &rows)
    )
}
