//! Warm GET module against nginx serving the very bytes of that response as a static file on
//! loopback, both under wrk with the same threads, connections and duration, alternated.
//! nginx and wrk are the machine's (`bench/run` installs them with apt-get when missing);
//! without them the figure says so.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::api::{module_path, Api};
use crate::load::Connection;
use crate::local::ADMIN_TOKEN;
use crate::server::start_dev_server;
use crate::stats::{micros, ratio, table};

const THREADS: usize = 2;
const CONNECTIONS: usize = 8;
const SECONDS: u64 = 4;
const ROUNDS: usize = 3;

/// One wrk run: latency percentiles and throughput.
struct Wrk {
    median: Duration,
    p99: Duration,
    requests_per_second: f64,
}

/// The figure alone: dev-server on the embedded store with one module (GET module reads the
/// same items at any number of modules: see the store-cost figure).
pub async fn alone(binaries: &Path) -> String {
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    let (_hangar, address) = start_dev_server(&binaries.join("dev-server"), data_dir.path(), &[], &[]);
    let api = Api::http(&format!("http://{address}"));
    api.create_organization(ADMIN_TOKEN).await;
    api.create_modules(ADMIN_TOKEN, 0, 1, 1).await;
    run(address, &module_path(0), ("Authorization", format!("Bearer {ADMIN_TOKEN}"))).await
}

pub async fn run(hangar: SocketAddr, path: &str, auth: (&'static str, String)) -> String {
    let heading = "### Warm GET module vs nginx\n\n";
    let (Some(nginx), Some(wrk)) = (program("nginx"), program("wrk")) else {
        return format!("{heading}not measured: nginx or wrk is not installed (bench/run installs them with apt-get).");
    };
    let body = Connection::open(hangar).await.get(path, std::slice::from_ref(&auth)).await;
    let site = tempfile::tempdir().expect("a directory for nginx");
    let Some(server) = Nginx::start(&nginx, site.path(), &body) else {
        return format!("{heading}not measured: nginx did not start (see its error.log).");
    };
    let header = format!("{}: {}", auth.0, auth.1);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        ours.push(wrk_run(&wrk, &format!("http://{hangar}{path}"), &header));
        theirs.push(wrk_run(&wrk, &format!("http://{}/module", server.address), &header));
    }
    drop(server);
    let (ours, theirs) = (median_run(ours), median_run(theirs));
    let row = |name: &str, run: &Wrk| {
        vec![
            name.to_owned(),
            micros(run.median),
            micros(run.p99),
            format!("{:.0}", run.requests_per_second),
            ratio(run.requests_per_second, theirs.requests_per_second),
        ]
    };
    format!(
        "{heading}wrk, {THREADS} threads and {CONNECTIONS} connections for {SECONDS}s, {ROUNDS} runs of each \
         alternated, the run of median throughput shown; nginx ({} worker processes, no access log) serves the {} \
         bytes of dev-server's GET module response as a static file, on the same loopback and the same two cores.\n\n{}",
        THREADS,
        body.len(),
        table(
            &["server", "median", "p99", "requests/s", "throughput vs nginx"],
            &[row("nginx, static file", &theirs), row("dev-server GET module", &ours)]
        )
    )
}

/// `name` on the PATH, or in /usr/sbin where Debian puts nginx.
fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain([PathBuf::from("/usr/sbin")]).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// nginx in `site`, serving `body` at `/module`; stopped (workers included) when dropped.
struct Nginx {
    binary: PathBuf,
    site: PathBuf,
    address: SocketAddr,
    master: Child,
}

impl Nginx {
    fn start(binary: &Path, site: &Path, body: &[u8]) -> Option<Nginx> {
        use std::os::unix::fs::PermissionsExt;
        // The workers may run as another user: the files must be theirs to read.
        std::fs::set_permissions(site, std::fs::Permissions::from_mode(0o755)).ok()?;
        std::fs::write(site.join("module.json"), body).ok()?;
        let address = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?;
        let dir = site.display();
        let config = format!(
            "daemon off;\nworker_processes {THREADS};\npid {dir}/nginx.pid;\nerror_log {dir}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 1000000;\n  client_body_temp_path {dir}/body;\n\
             \x20 proxy_temp_path {dir}/proxy;\n  fastcgi_temp_path {dir}/fastcgi;\n  uwsgi_temp_path {dir}/uwsgi;\n\
             \x20 scgi_temp_path {dir}/scgi;\n  default_type application/vnd.api+json;\n\
             \x20 server {{\n    listen {address};\n    root {dir};\n    location = /module {{ try_files /module.json =404; }}\n  }}\n}}\n"
        );
        std::fs::write(site.join("nginx.conf"), config).ok()?;
        let master = Command::new(binary)
            .args(["-e", &format!("{dir}/error.log"), "-p"])
            .arg(site)
            .arg("-c")
            .arg(site.join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let nginx = Nginx { binary: binary.to_owned(), site: site.to_owned(), address, master };
        for _ in 0..100 {
            if std::net::TcpStream::connect(address).is_ok() {
                return Some(nginx);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // A killed master leaves its workers running: ask it to stop them.
        let _ = Command::new(&self.binary)
            .arg("-p")
            .arg(&self.site)
            .arg("-c")
            .arg(self.site.join("nginx.conf"))
            .args(["-s", "stop"])
            .stderr(Stdio::null())
            .status();
        if !exits_within(&mut self.master, Duration::from_secs(5)) {
            let _ = self.master.kill();
            let _ = self.master.wait();
        }
    }
}

fn exits_within(child: &mut Child, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn wrk_run(wrk: &Path, url: &str, header: &str) -> Wrk {
    let output = Command::new(wrk)
        .args(["-t", &THREADS.to_string(), "-c", &CONNECTIONS.to_string(), "-d", &format!("{SECONDS}s")])
        .args(["--latency", "-H", header, url])
        .output()
        .expect("wrk runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains("Non-2xx"), "wrk {url}: answers that were not 2xx\n{text}");
    let percentile = |label: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|line| line.strip_prefix(label))
            .and_then(|value| duration(value.trim()))
            .unwrap_or_else(|| panic!("wrk {url} printed no {label} latency\n{text}"))
    };
    let requests_per_second = text
        .lines()
        .find_map(|line| line.strip_prefix("Requests/sec:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("wrk {url} printed no throughput\n{text}"));
    Wrk { median: percentile("50%"), p99: percentile("99%"), requests_per_second }
}

/// wrk's `512.00us`, `1.20ms`, `1.01s`.
fn duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "us" => number / 1e6,
        "ms" => number / 1e3,
        "s" => number,
        "m" => number * 60.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(seconds))
}

fn median_run(mut runs: Vec<Wrk>) -> Wrk {
    runs.sort_by(|a, b| a.requests_per_second.total_cmp(&b.requests_per_second));
    runs.swap_remove(runs.len() / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_durations_parse_in_every_unit() {
        assert_eq!(duration("512.00us"), Some(Duration::from_micros(512)));
        assert_eq!(duration("1.50ms"), Some(Duration::from_micros(1500)));
        assert_eq!(duration("2.00s"), Some(Duration::from_secs(2)));
        assert_eq!(duration("fast"), None);
    }
}
