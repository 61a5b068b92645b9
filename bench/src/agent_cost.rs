//! Store cost of the agent operations that once scanned one slot item per unit of
//! `HANGAR_MAX_AGENTS`: each request's store calls and items, counted by the counting adapter,
//! with the limit at 1 and at 1,000,000. The live-agent limit is one counter item, so both
//! columns must be equal.

use std::time::{Duration, Instant};

use axum::http::Method;
use hangar::config::Config;
use serde_json::{json, Value};

use crate::api::{Api, ORG};
use crate::counting::Cost;
use crate::local::{Local, ADMIN_TOKEN};
use crate::stats::{micros, table};

const LIMITS: [usize; 2] = [1, 1_000_000];

const OPERATIONS: [&str; 5] = [
    "register an agent",
    "status report (heartbeat)",
    "agent exit (report `exited`)",
    "delete an exited agent",
    "delete a pool with 3 agents (1 live)",
];

pub async fn run() -> String {
    let mut measured = Vec::new();
    for limit in LIMITS {
        measured.push(measure(limit).await);
    }
    let rows: Vec<Vec<String>> = OPERATIONS
        .iter()
        .enumerate()
        .map(|(n, name)| {
            let (small, large) = (&measured[0][n], &measured[1][n]);
            vec![(*name).to_owned(), cost(small.0), cost(large.0), micros(small.1), micros(large.1)]
        })
        .collect();
    let header = [
        "operation",
        "store calls / items read / written, HANGAR_MAX_AGENTS=1",
        "same, HANGAR_MAX_AGENTS=1,000,000",
        "time, 1",
        "time, 1,000,000",
    ];
    format!(
        "### Agent capacity: store cost per operation\n\nIn-process (router called directly, embedded store), one request each.\n\n{}",
        table(&header, &rows)
    )
}

pub(crate) async fn send(api: &Api, method: Method, path: &str, token: &str, body: Option<Value>, want: u16) -> Value {
    let reply = api.send(method.clone(), path, token, body).await;
    assert_eq!(reply.status.as_u16(), want, "{method} {path}: {}", reply.body);
    reply.body
}

pub(crate) fn id(body: &Value) -> String {
    body["data"]["id"].as_str().expect("an id").to_owned()
}

/// Each operation's cost and time at one limit, in [`OPERATIONS`]' order.
async fn measure(limit: usize) -> Vec<(Cost, Duration)> {
    let local = Local::start(Config { max_agents: limit, ..Config::default() }).await;
    let api = &local.api;
    api.create_organization(ADMIN_TOKEN).await;
    let body = json!({"data": {"type": "agent-pools", "attributes": {"name": "capacity"}}});
    let path = format!("/api/v2/organizations/{ORG}/agent-pools");
    let pool = id(&send(api, Method::POST, &path, ADMIN_TOKEN, Some(body), 201).await);
    let body = json!({"data": {"type": "authentication-tokens", "attributes": {"description": "bench"}}});
    let path = format!("/api/v2/agent-pools/{pool}/authentication-tokens");
    let token = send(api, Method::POST, &path, ADMIN_TOKEN, Some(body), 201).await;
    let secret = token["data"]["attributes"]["token"].as_str().expect("the secret").to_owned();

    let mut out = Vec::new();
    let timed = |out: &mut Vec<(Cost, Duration)>, before: Cost, started: Instant| {
        out.push((local.counters.snapshot() - before, started.elapsed()));
    };
    let register = || send(api, Method::POST, "/api/agent/register", &secret, Some(json!({"name": "runner"})), 201);
    let report = |agent: String, status: &'static str| {
        let path = format!("/api/agent/agents/{agent}/status");
        let secret = secret.clone();
        async move { send(api, Method::PUT, &path, &secret, Some(json!({ "status": status })), 200).await }
    };

    let (before, started) = (local.counters.snapshot(), Instant::now());
    let agent = id(&register().await);
    timed(&mut out, before, started);
    let (before, started) = (local.counters.snapshot(), Instant::now());
    report(agent.clone(), "idle").await;
    timed(&mut out, before, started);
    let (before, started) = (local.counters.snapshot(), Instant::now());
    report(agent.clone(), "exited").await;
    timed(&mut out, before, started);
    let (before, started) = (local.counters.snapshot(), Instant::now());
    send(api, Method::DELETE, &format!("/api/v2/agents/{agent}"), ADMIN_TOKEN, None, 204).await;
    timed(&mut out, before, started);

    // Three agents, two of them exited: the limit of 1 allows no more live at once.
    for _ in 0..2 {
        let agent = id(&register().await);
        report(agent, "exited").await;
    }
    register().await;
    let (before, started) = (local.counters.snapshot(), Instant::now());
    send(api, Method::DELETE, &format!("/api/v2/agent-pools/{pool}"), ADMIN_TOKEN, None, 204).await;
    timed(&mut out, before, started);
    out
}

fn cost(cost: Cost) -> String {
    format!("{} / {} / {}", cost.calls, cost.items_read, cost.items_written)
}
