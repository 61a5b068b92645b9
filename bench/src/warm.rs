//! Warm request cost: dev-server (the `speed` profile's build, embedded store) on loopback with
//! 10,000 modules, each read path under the load generator, side by side with a bare hyper
//! "hello" server built the same way and measured in the same run. Credentials for a role go to
//! moto's STS.

use std::path::Path;
use std::time::Duration;

use crate::api::{module_path, Api};
use crate::endpoints::{endpoints, seed_all_but_modules};
use crate::load::{Load, Outcome};
use crate::local::{ADMIN_TOKEN, ROOT_TOKEN};
use crate::server::{start_dev_server, start_hello};
use crate::stats::{micros, ratio, table};

const MODULES: usize = 10_000;

pub async fn run(binaries: &Path, moto: &str) -> String {
    let load = Load { connections: 8, warmup: Duration::from_secs(1), window: Duration::from_secs(5) };
    let (_hello, hello_address) = start_hello(&binaries.join("hello-hyper"));
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    let (hangar, address) = start_dev_server(&binaries.join("dev-server"), data_dir.path(), &[], &[]);

    let api = Api::http(&format!("http://{address}"));
    api.create_organization(ADMIN_TOKEN).await;
    api.create_modules(ADMIN_TOKEN, 0, MODULES, 16).await;
    seed_all_but_modules(&api, ADMIN_TOKEN, ROOT_TOKEN, Some(moto)).await;

    let hello = load.run(hello_address, "/", &[]).await;
    let mut rows = vec![row("bare hyper hello", &hello, &hello)];
    for endpoint in endpoints() {
        let auth = if endpoint.vault {
            ("X-Vault-Token", ROOT_TOKEN.to_owned())
        } else {
            ("Authorization", format!("Bearer {ADMIN_TOKEN}"))
        };
        let outcome = load.run(address, &endpoint.path, &[auth]).await;
        rows.push(row(endpoint.name, &outcome, &hello));
    }
    let admin = ("Authorization", format!("Bearer {ADMIN_TOKEN}"));
    let against_nginx = crate::nginx::run(address, &module_path(0), admin.clone()).await;

    // The same read on the same data with the file shared with other processes: what holding
    // it alone saves.
    drop(hangar);
    let (_shared, address) = start_dev_server(&binaries.join("dev-server"), data_dir.path(), &["--shared-store"], &[]);
    let shared = load.run(address, &module_path(0), &[admin]).await;
    rows.push(row("GET module, `--shared-store`", &shared, &hello));
    format!(
        "### Warm requests\n\ndev-server (built with the `speed` profile, as the hyper hello is; embedded \
         store held alone, its default, {MODULES} modules) and the load generator on loopback: {} keep-alive connections, closed \
         loop, {}s measured after {}s of warm-up per row.\n\n{}",
        load.connections,
        load.window.as_secs(),
        load.warmup.as_secs(),
        table(&["request", "median", "p99", "requests/s", "throughput vs hello"], &rows)
    ) + "\n\n"
        + &against_nginx
}

fn row(name: &str, outcome: &Outcome, hello: &Outcome) -> Vec<String> {
    vec![
        name.to_owned(),
        micros(outcome.latencies.median()),
        micros(outcome.latencies.percentile(0.99)),
        format!("{:.0}", outcome.requests_per_second),
        ratio(outcome.requests_per_second, hello.requests_per_second),
    ]
}
