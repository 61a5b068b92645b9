//! Child processes the figures measure over HTTP: dev-server, a bare hyper server.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::local::{ADMIN_TOKEN, ROOT_TOKEN};

/// A child process killed when dropped, so no server outlives the run.
pub struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_hello(binary: &Path) -> (Server, SocketAddr) {
    let mut child = Command::new(binary).arg("127.0.0.1:0").stdout(Stdio::piped()).spawn().expect("hello-hyper starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("its stdout")).read_line(&mut line).expect("its address");
    let address = line.trim().parse().expect("an address");
    (Server(child), address)
}

/// dev-server on a free loopback port with the bench's bootstrap tokens, `args` and `env` added
/// (the embedded store in `data_dir` unless `args` say otherwise).
pub fn start_dev_server(binary: &Path, data_dir: &Path, args: &[&str], env: &[(&str, String)]) -> (Server, SocketAddr) {
    let mut child = Command::new(binary)
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(args)
        .env("HANGAR_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("HANGAR_ROOT_SERVICE_TOKEN", ROOT_TOKEN)
        .env("HANGAR_MAX_AGENT_POOLS", crate::endpoints::AGENT_POOLS.to_string())
        .env("RUST_LOG", "info")
        .envs(env.iter().map(|(name, value)| (name, value)))
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
    let bare = url.trim_start_matches("https://").trim_start_matches("http://");
    let address = bare.trim_end_matches('/').parse().expect("an address");
    (Server(child), address)
}
