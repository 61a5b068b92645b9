//! Rotation run: the key-rotation function's handler over 10,000 static roles of which 100 are
//! due, against 100 roles that are all due, in the same run. Work (store items, AWS calls, time)
//! should follow the 100 due, not the 10,000 stored.

use std::time::{Duration, Instant};

use axum::http::Method;
use hangar::config::Config;
use hangar::store::{keys, query_all, Index, Item, Key};
use serde_json::{json, Value};

use crate::counting::Cost;
use crate::local::{Local, ROOT_TOKEN};
use crate::stats::{millis, ratio, table, Samples};

const DUE: usize = 100;
const RUNS: usize = 5;

struct Scenario {
    roles: usize,
    cost: Cost,
    cloud_calls: u64,
    median: Duration,
}

pub async fn run() -> String {
    let small = scenario(DUE).await;
    let large = scenario(10_000).await;
    let rows: Vec<Vec<String>> = [&small, &large]
        .iter()
        .map(|s| {
            vec![
                format!("{} roles, {DUE} due", s.roles),
                s.cost.items_read.to_string(),
                s.cost.items_written.to_string(),
                s.cloud_calls.to_string(),
                millis(s.median),
                ratio(s.median.as_secs_f64(), small.median.as_secs_f64()),
            ]
        })
        .collect();
    let header = ["stored", "items read per run", "items written", "IAM calls", "median run", "vs all-due"];
    format!(
        "### Rotation run\n\n`hangar::jobs::rotate` (the key-rotation function's handler) in-process on the embedded \
         store, IAM replaced by a counting fake; median of {RUNS} runs, {DUE} roles made due before each.\n\n{}",
        table(&header, &rows)
    )
}

async fn scenario(roles: usize) -> Scenario {
    let local = Local::start(Config::default()).await;
    local.api.configure_aws(ROOT_TOKEN, None).await;
    for n in 0..roles {
        let body = json!({"username": format!("user-{n:05}"), "rotation_period": "720h"});
        local.api.write_vault(ROOT_TOKEN, &format!("/v1/aws/static-roles/role-{n:05}"), body).await;
    }
    let mounts = local.api.send(Method::GET, "/v1/sys/mounts", ROOT_TOKEN, None).await.body;
    let uuid = mounts["data"]["aws/"]["uuid"].as_str().or_else(|| mounts["aws/"]["uuid"].as_str());
    let uuid = uuid.expect("the aws/ mount's uuid").to_owned();
    let stored = query_all(local.state.store.as_ref(), keys::mount_static_roles(&uuid)).await.expect("the roles");
    assert_eq!(stored.len(), roles);
    // Every hundredth role (all of them in the small scenario) falls due.
    let step = roles / DUE;
    let due: Vec<Key> = stored.iter().step_by(step).take(DUE).map(|item| item.key.clone()).collect();

    let (mut samples, mut cost, mut cloud_calls) = (Samples::default(), Cost::default(), 0);
    for _ in 0..RUNS {
        for key in &due {
            make_due(&local, key).await;
        }
        let (before, calls_before, started) = (local.counters.snapshot(), local.cloud.calls(), Instant::now());
        let summary = hangar::jobs::rotate(&local.state, json!({})).await.expect("a rotation run");
        samples.push(started.elapsed());
        (cost, cloud_calls) = (local.counters.snapshot() - before, local.cloud.calls() - calls_before);
        assert_eq!(summary.rotated, DUE, "every due role rotated, and only those");
    }
    Scenario { roles, cost, cloud_calls, median: samples.median() }
}

/// Moves a role's next rotation into the past, where the schedule index will find it. The
/// index's sort key mirrors the broker's (`{next_rotation:012}#{mount}#{name}`); were it to
/// change, the run's assertion that exactly the due roles rotated would fail.
async fn make_due(local: &Local, key: &Key) {
    let store = local.state.store.as_ref();
    let mut item: Item = store.get(key).await.expect("a read").expect("the role");
    let past = chrono::Utc::now().timestamp() - 60;
    let attrs = item.attrs_mut().expect("the role's attributes");
    let name = attrs["name"].as_str().expect("a name").to_owned();
    let mount = attrs["mount_uuid"].as_str().expect("a mount").to_owned();
    attrs.insert("next_rotation".into(), Value::from(past));
    let (_, sort_attr) = Index::Gsi1.key_attrs();
    attrs.insert(sort_attr.into(), Value::from(format!("{past:012}#{mount}#{name}")));
    store.put(item, hangar::store::Condition::Always).await.expect("a write");
}
