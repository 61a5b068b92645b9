//! Store cost per request: items read and written by each read endpoint, counted by the
//! counting adapter, with 100 modules and then 10,000 in the same organization; and the time of
//! each request in-process (no network), median of many, at both sizes.

use std::time::{Duration, Instant};

use hangar::config::Config;

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
        "### Store cost per request\n\nIn-process (router called directly, embedded store), {REPEATS} requests each, same run.\n\n{}",
        table(&header, &rows)
    )
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
