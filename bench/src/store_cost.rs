//! Store cost per request: items read and written by each read endpoint, counted by the
//! counting adapter, with 100 modules and then 10,000 in the same organization; and the time of
//! each request in-process (no network), median of many, at both sizes. Then the round trips of
//! the authenticated reads, for a team's token and the site admin's: what a request waits for
//! on DynamoDB.

use std::time::{Duration, Instant};

use axum::http::Method;
use hangar::config::Config;
use serde_json::json;

use crate::api::{module_path, Api, ORG};
use crate::counting::Cost;
use crate::endpoints::{call, endpoints, seed_all_but_modules};
use crate::local::{Local, ADMIN_TOKEN, ROOT_TOKEN};
use crate::stats::{micros, ratio, table, Samples};

const REPEATS: usize = 300;

struct Measured {
    cost: Cost,
    median: Duration,
}

pub async fn run() -> String {
    let local = Local::start(Config::default()).await;
    let api = &local.api;
    api.create_organization(ADMIN_TOKEN).await;
    api.create_modules(ADMIN_TOKEN, 0, 100, 1).await;
    seed_all_but_modules(api, ADMIN_TOKEN, ROOT_TOKEN, None).await;
    let small = measure(&local).await;
    let round_trips = round_trips(&local).await;
    assert!(local.cloud.calls() > 0, "the broker used the fake cloud");
    api.create_modules(ADMIN_TOKEN, 100, 10_000, 1).await;
    let large = measure(&local).await;

    let rows: Vec<Vec<String>> = endpoints()
        .iter()
        .zip(small.iter().zip(&large))
        .map(|(endpoint, (small, large))| {
            vec![
                endpoint.name.to_owned(),
                cost(small.cost),
                cost(large.cost),
                micros(small.median),
                micros(large.median),
                ratio(large.median.as_secs_f64(), small.median.as_secs_f64()),
            ]
        })
        .collect();
    let header = [
        "endpoint",
        "store calls / items read / written, 100 modules",
        "same, 10,000 modules",
        "median, 100",
        "median, 10,000",
        "10,000 ÷ 100",
    ];
    format!(
        "### Store cost per request\n\nIn-process (router called directly, embedded store), {REPEATS} requests each, same run.\n\n{}\n\n{round_trips}",
        table(&header, &rows)
    )
}

/// The authenticated reads the round-trip goal names, each called once with a read-only team's
/// token and once with the site admin's, at 100 modules.
async fn round_trips(local: &Local) -> String {
    let api = &local.api;
    let body = json!({"data": {"type": "teams", "attributes": {"name": "readers", "organization-access": {}}}});
    let team = send(api, Method::POST, &format!("/api/v2/organizations/{ORG}/teams"), ADMIN_TOKEN, Some(body)).await;
    let team_id = team["data"]["id"].as_str().expect("a team id");
    let path = format!("/api/v2/teams/{team_id}/authentication-token");
    let token = send(api, Method::POST, &path, ADMIN_TOKEN, None).await;
    let team_token = token["data"]["attributes"]["token"].as_str().expect("the secret").to_owned();
    let pools = send(api, Method::GET, &format!("/api/v2/organizations/{ORG}/agent-pools"), ADMIN_TOKEN, None).await;
    let pool = pools["data"][0]["id"].as_str().expect("a pool").to_owned();
    let versions = format!("/api/registry/v1/modules/{ORG}/mod-00000/aws/versions");
    let download = format!("/api/registry/v1/modules/{ORG}/mod-00000/aws/1.0.0/download");
    let reads = [
        ("GET module", module_path(0)),
        ("protocol: versions", versions),
        ("protocol: download", download),
        ("GET agent pool", format!("/api/v2/agent-pools/{pool}")),
    ];
    let mut rows = Vec::new();
    for (name, path) in reads {
        let mut row = vec![name.to_owned()];
        for token in [team_token.as_str(), ADMIN_TOKEN] {
            let before = local.counters.snapshot();
            send(api, Method::GET, &path, token, None).await;
            let cost = local.counters.snapshot() - before;
            row.push(format!("{} / {} / {}", cost.rounds, cost.calls, cost.items_written));
        }
        rows.push(row);
    }
    let header = ["read", "team token: round trips / calls / items written", "site admin: the same"];
    format!(
        "### Round trips per authenticated read\n\nThe same store, 100 modules: sequential round trips (calls in flight together share one), calls (a BatchGetItem or a transaction is one) and items written, per request.\n\n{}",
        table(&header, &rows)
    )
}

async fn send(
    api: &Api,
    method: Method,
    path: &str,
    token: &str,
    body: Option<serde_json::Value>,
) -> serde_json::Value {
    let reply = api.send(method.clone(), path, token, body).await;
    assert!(reply.status.is_success(), "{method} {path}: {} {}", reply.status, reply.body);
    reply.body
}

async fn measure(local: &Local) -> Vec<Measured> {
    let mut measured = Vec::new();
    for endpoint in endpoints() {
        let before = local.counters.snapshot();
        call(&local.api, &endpoint, ADMIN_TOKEN, ROOT_TOKEN).await;
        let cost = local.counters.snapshot() - before;
        let mut samples = Samples::default();
        for _ in 0..REPEATS {
            let started = Instant::now();
            call(&local.api, &endpoint, ADMIN_TOKEN, ROOT_TOKEN).await;
            samples.push(started.elapsed());
        }
        measured.push(Measured { cost, median: samples.median() });
    }
    measured
}

fn cost(cost: Cost) -> String {
    format!("{} / {} / {}", cost.calls, cost.items_read, cost.items_written)
}
