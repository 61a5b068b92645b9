//! Warm request cost: dev-server (release build, embedded store) on loopback with 10,000
//! modules, each read path under the load generator, side by side with a bare hyper "hello"
//! server measured in the same run. Credentials for a role go to moto's STS.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::api::Api;
use crate::endpoints::{endpoints, seed_all_but_modules};
use crate::load::{Load, Outcome};
use crate::local::{ADMIN_TOKEN, ROOT_TOKEN};
use crate::stats::{micros, ratio, table};

const MODULES: usize = 10_000;

/// A child process killed when dropped, so no server outlives the run.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub async fn run(binaries: &Path, moto: &str) -> String {
    let load = Load { connections: 8, warmup: Duration::from_secs(1), window: Duration::from_secs(5) };
    let (_hello, hello_address) = start_hello(&binaries.join("hello-hyper"));
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    let (_hangar, address) = start_dev_server(&binaries.join("dev-server"), data_dir.path());

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
    format!(
        "### Warm requests\n\ndev-server (release build, embedded store, {MODULES} modules) and the load generator on \
         loopback: {} keep-alive connections, closed loop, {}s measured after {}s of warm-up per row.\n\n{}",
        load.connections,
        load.window.as_secs(),
        load.warmup.as_secs(),
        table(&["request", "median", "p99", "requests/s", "throughput vs hello"], &rows)
    )
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

fn start_hello(binary: &Path) -> (Server, SocketAddr) {
    let mut child = Command::new(binary).arg("127.0.0.1:0").stdout(Stdio::piped()).spawn().expect("hello-hyper starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("its stdout")).read_line(&mut line).expect("its address");
    let address = line.trim().parse().expect("an address");
    (Server(child), address)
}

fn start_dev_server(binary: &Path, data_dir: &Path) -> (Server, SocketAddr) {
    let mut child = Command::new(binary)
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env("HANGAR_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("HANGAR_ROOT_SERVICE_TOKEN", ROOT_TOKEN)
        .env("HANGAR_MAX_AGENT_POOLS", crate::endpoints::AGENT_POOLS.to_string())
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dev-server starts");
    let stdout = BufReader::new(child.stdout.take().expect("its stdout"));
    let mut lines = stdout.lines();
    let url = loop {
        let line = lines.next().expect("dev-server prints its address").expect("a line");
        if let Some(url) = line.strip_prefix("Hangar is listening on ") {
            break url.trim().to_owned();
        }
    };
    // The request log goes on to stdout: drained, as a terminal or a log collector would.
    std::thread::spawn(move || lines.for_each(drop));
    let address = url.trim_start_matches("http://").trim_end_matches('/').parse().expect("an address");
    (Server(child), address)
}
