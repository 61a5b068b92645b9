//! The public registry proxy over HTTP, against a local stand-in of the upstream registry: the
//! three operations relay its JSON for curated modules only, nothing else is forwarded, the
//! caller's token stays home, and every way the upstream can fail or misbehave becomes a 502.
//!
//! The stand-in speaks raw HTTP/1.1 on a tokio listener, which lets it lie about or omit
//! `Content-Length` and hang mid-answer.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hangar::config::Config;
use hangar_tests::builders::public_module;
use hangar_tests::{Reply, TestApp};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PROXY: &str = "/api/registry/public/v1/modules";
const MODULES: &str = "/api/v2/organizations/acme/registry-modules";
const MAX_BYTES: usize = 64 * 1024;
/// Module names whose stand-in answers misbehave; `acme` curates each of them.
const MISBEHAVING: [&str; 6] = ["unavailable", "slow", "huge", "endless", "garbled", "missing"];
/// Never to be relayed to a caller.
const UPSTREAM_DETAIL: &str = "upstream-internal-detail";

fn versions_json() -> Value {
    json!({"modules": [{
        "source": "hashicorp/consul/aws",
        "versions": [
            {"version": "0.1.0", "submodules": [], "root": {"dependencies": [], "providers": [{"name": "aws"}]}},
            {"version": "0.11.0", "submodules": [], "root": {"dependencies": [], "providers": [{"name": "aws"}]}}
        ]
    }]})
}

fn module_json(version: &str) -> Value {
    json!({
        "id": format!("hashicorp/consul/aws/{version}"),
        "namespace": "hashicorp",
        "name": "consul",
        "provider": "aws",
        "version": version,
        "source": "https://github.com/hashicorp/terraform-aws-consul",
        "published_at": "2017-09-14T23:22:44.793647Z",
        "verified": true
    })
}

/// What the stand-in saw: how many requests, and each one's `Authorization` and `Accept`.
#[derive(Default)]
struct Seen {
    hits: AtomicUsize,
    authorization: Mutex<Vec<Option<String>>>,
    accept: Mutex<Vec<Option<String>>>,
}

struct Upstream {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl Upstream {
    async fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a local port");
        let addr = listener.local_addr().expect("an address");
        let seen = Arc::new(Seen::default());
        let shared = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, shared.clone()));
            }
        });
        Upstream { addr, seen }
    }

    fn hits(&self) -> usize {
        self.seen.hits.load(Ordering::SeqCst)
    }
}

/// Reads one request head and answers it by path, closing the connection after.
async fn answer(mut stream: TcpStream, seen: Arc<Seen>) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next().and_then(|line| line.split(' ').nth(1)).unwrap_or("").to_owned();
    let header = |name: &str| {
        lines.clone().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
        })
    };
    seen.hits.fetch_add(1, Ordering::SeqCst);
    seen.authorization.lock().unwrap().push(header("authorization"));
    seen.accept.lock().unwrap().push(header("accept"));

    let big = format!("{{\"padding\": \"{}\"}}", "x".repeat(2 * MAX_BYTES));
    let (status, body, length) = match path.as_str() {
        "/v1/modules/hashicorp/consul/aws/versions" => ("200 OK", versions_json().to_string(), true),
        "/v1/modules/hashicorp/consul/aws" => ("200 OK", module_json("0.11.0").to_string(), true),
        "/v1/modules/hashicorp/consul/aws/0.1.0" => ("200 OK", module_json("0.1.0").to_string(), true),
        "/v1/modules/hashicorp/unavailable/aws" => {
            ("503 Service Unavailable", json!({"errors": [UPSTREAM_DETAIL]}).to_string(), true)
        }
        "/v1/modules/hashicorp/slow/aws" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            ("200 OK", module_json("0.1.0").to_string(), true)
        }
        "/v1/modules/hashicorp/huge/aws" => ("200 OK", big, true),
        "/v1/modules/hashicorp/endless/aws" => ("200 OK", big, false),
        "/v1/modules/hashicorp/garbled/aws" => ("200 OK", format!("<html>{UPSTREAM_DETAIL}"), true),
        _ => ("404 Not Found", json!({"errors": ["Not Found"]}).to_string(), true),
    };
    let mut response = format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n");
    if length {
        response.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    response.push_str("\r\n");
    if stream.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    for chunk in body.as_bytes().chunks(8 * 1024) {
        if stream.write_all(chunk).await.is_err() {
            return;
        }
        if !length {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let _ = stream.shutdown().await;
}

/// The stand-in upstream, a dev-server proxying to it, and organization `acme` (with its owners
/// token) curating `hashicorp/consul/aws` and every misbehaving module.
async fn setup() -> (Upstream, TestApp, String) {
    let upstream = Upstream::start().await;
    let (app, owners) = TestApp::spawn_with_organization(
        Config {
            public_registry_url: format!("http://{}/v1/modules", upstream.addr),
            public_registry_timeout: Duration::from_millis(500),
            public_registry_max_bytes: MAX_BYTES,
            ..Config::default()
        },
        "acme",
    )
    .await;
    for name in ["consul"].into_iter().chain(MISBEHAVING) {
        let created = app.post(MODULES, &owners, public_module("hashicorp", name, "aws")).await;
        assert_eq!(created.status, 201, "curating {name}: {:?}", created.body);
    }
    (upstream, app, owners)
}

/// A reply's body for a failure message, cut short: a relayed oversized body would flood it.
fn brief(reply: &Reply) -> String {
    reply.body.to_string().chars().take(300).collect()
}

fn assert_bad_gateway(reply: &Reply, problem: &str) {
    assert_eq!(reply.status, 502, "{}", brief(reply));
    let message = reply.body["errors"][0].as_str().expect("an error message");
    assert!(message.contains(problem), "{message:?} names {problem:?}");
    assert!(!reply.body.to_string().contains(UPSTREAM_DETAIL), "the upstream's body leaked: {}", brief(reply));
}

#[tokio::test]
async fn the_three_operations_relay_the_upstream_json_for_a_curated_module() {
    let (upstream, app, owners) = setup().await;
    let (_, member) = app.team_with_token("acme", "readers", json!({})).await;
    for token in [&owners, &member] {
        let versions = app.get(&format!("{PROXY}/hashicorp/consul/aws/versions"), token).await;
        assert_eq!(versions.status, 200, "{:?}", versions.body);
        assert_eq!(versions.body, versions_json());
        assert_eq!(versions.headers["content-type"], "application/json");

        let latest = app.get(&format!("{PROXY}/hashicorp/consul/aws"), token).await;
        assert_eq!(latest.status, 200, "{:?}", latest.body);
        assert_eq!(latest.body, module_json("0.11.0"));

        let module = app.get(&format!("{PROXY}/hashicorp/consul/aws/0.1.0"), token).await;
        assert_eq!(module.status, 200, "{:?}", module.body);
        assert_eq!(module.body, module_json("0.1.0"));
        assert_eq!(module.headers["content-type"], "application/json");
    }
    assert_eq!(upstream.hits(), 6);
    let accept = upstream.seen.accept.lock().unwrap().clone();
    assert!(accept.iter().all(|a| a.as_deref() == Some("application/json")), "{accept:?}");
    app.stop().await;
}

#[tokio::test]
async fn the_callers_authorization_header_never_reaches_the_upstream() {
    let (upstream, app, owners) = setup().await;
    for path in ["versions", "", "0.1.0"] {
        let path = format!("{PROXY}/hashicorp/consul/aws/{path}");
        let reply = app.get(path.trim_end_matches('/'), &owners).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
    }
    let authorization = upstream.seen.authorization.lock().unwrap().clone();
    assert_eq!(authorization, vec![None, None, None]);
    app.stop().await;
}

#[tokio::test]
async fn a_module_the_organization_has_not_curated_is_404_without_asking_the_upstream() {
    let (upstream, app, owners) = setup().await;
    for path in ["hashicorp/vault/aws/versions", "hashicorp/vault/aws", "hashicorp/vault/aws/0.1.0", "other/consul/aws"]
    {
        let reply = app.get(&format!("{PROXY}/{path}"), &owners).await;
        assert_eq!(reply.status, 404, "{path}: {:?}", reply.body);
        assert!(reply.body["errors"][0].is_string(), "{:?}", reply.body);
    }
    assert_eq!(upstream.hits(), 0);
    app.stop().await;
}

#[tokio::test]
async fn another_organizations_token_and_the_site_admin_get_404() {
    let (upstream, app, _) = setup().await;
    app.create_organization("globex").await;
    let globex = app.owners_token("globex").await;
    for token in [&globex, &app.admin_token] {
        for path in ["versions", "", "0.1.0"] {
            let path = format!("{PROXY}/hashicorp/consul/aws/{path}");
            let reply = app.get(path.trim_end_matches('/'), token).await;
            assert_eq!(reply.status, 404, "{path}: {:?}", reply.body);
        }
    }
    assert_eq!(upstream.hits(), 0);
    app.stop().await;
}

#[tokio::test]
async fn no_token_or_an_unknown_token_is_401_in_the_protocols_error_format() {
    let (upstream, app, _) = setup().await;
    for token in [None, Some("not-a-token")] {
        let reply = app.request(Method::GET, &format!("{PROXY}/hashicorp/consul/aws/versions"), token, None).await;
        assert_eq!(reply.status, 401, "{:?}", reply.body);
        let errors = reply.body["errors"].as_array().expect("an errors array");
        assert!(!errors.is_empty() && errors.iter().all(Value::is_string), "{:?}", reply.body);
    }
    assert_eq!(upstream.hits(), 0);
    app.stop().await;
}

#[tokio::test]
async fn an_upstream_error_status_is_502_naming_the_status_and_not_relaying_its_body() {
    let (_upstream, app, owners) = setup().await;
    let reply = app.get(&format!("{PROXY}/hashicorp/unavailable/aws"), &owners).await;
    assert_bad_gateway(&reply, "the upstream registry answered 503");
    assert_eq!(reply.headers["content-type"], "application/json");
    app.stop().await;
}

#[tokio::test]
async fn an_upstream_that_does_not_answer_in_time_is_502() {
    let (_upstream, app, owners) = setup().await;
    let started = std::time::Instant::now();
    let reply = app.get(&format!("{PROXY}/hashicorp/slow/aws"), &owners).await;
    assert_bad_gateway(&reply, "did not answer within 0.5 s");
    assert!(started.elapsed() < Duration::from_secs(2), "gave up after {:?}", started.elapsed());
    app.stop().await;
}

#[tokio::test]
async fn an_upstream_body_over_the_cap_is_502_whether_declared_or_streamed() {
    let (_upstream, app, owners) = setup().await;
    for name in ["huge", "endless"] {
        let reply = app.get(&format!("{PROXY}/hashicorp/{name}/aws"), &owners).await;
        assert_bad_gateway(&reply, &format!("the upstream response exceeds {MAX_BYTES} bytes"));
    }
    app.stop().await;
}

#[tokio::test]
async fn an_upstream_body_that_is_not_json_is_502() {
    let (_upstream, app, owners) = setup().await;
    let reply = app.get(&format!("{PROXY}/hashicorp/garbled/aws"), &owners).await;
    assert_bad_gateway(&reply, "invalid JSON");
    app.stop().await;
}

#[tokio::test]
async fn an_upstream_404_stays_a_404() {
    let (upstream, app, owners) = setup().await;
    for path in ["hashicorp/missing/aws/versions", "hashicorp/missing/aws", "hashicorp/consul/aws/9.9.9"] {
        let reply = app.get(&format!("{PROXY}/{path}"), &owners).await;
        assert_eq!(reply.status, 404, "{path}: {:?}", reply.body);
        assert_eq!(reply.body, json!({"errors": ["not found"]}));
    }
    assert_eq!(upstream.hits(), 3);
    app.stop().await;
}

#[tokio::test]
async fn an_unreachable_upstream_is_502() {
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("a local port");
    let addr = closed.local_addr().expect("an address");
    drop(closed);
    let (app, owners) = TestApp::spawn_with_organization(
        Config {
            public_registry_url: format!("http://{addr}/v1/modules"),
            public_registry_timeout: Duration::from_millis(500),
            ..Config::default()
        },
        "acme",
    )
    .await;
    let created = app.post(MODULES, &owners, public_module("hashicorp", "consul", "aws")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let reply = app.get(&format!("{PROXY}/hashicorp/consul/aws/versions"), &owners).await;
    assert_bad_gateway(&reply, "could not be reached");
    app.stop().await;
}

#[tokio::test]
async fn invalid_segments_are_404_without_asking_the_upstream() {
    let (upstream, app, owners) = setup().await;
    for path in [
        "hashicorp/consul/aws/..%2Fx",
        "hashicorp/consul/aws/0.1.0%3Fx=1",
        "hashicorp/consul/aws/v0.1.0",
        "hashicorp/consul/aws/0.1",
        "hashicorp/consul/AWS",
        "hashicorp/consul/AWS/versions",
        "hashicorp%2Fconsul/consul/aws",
        "hashicorp/con%23sul/aws/versions",
        "hashicorp/consul/aws%3Fx=1",
        "-hashicorp/consul/aws",
    ] {
        let reply = app.get(&format!("{PROXY}/{path}"), &owners).await;
        assert_eq!(reply.status, 404, "{path}: {:?}", reply.body);
    }
    assert_eq!(upstream.hits(), 0);
    app.stop().await;
}

#[tokio::test]
async fn nothing_else_under_the_prefix_exists() {
    let (upstream, app, owners) = setup().await;
    for path in [
        "/hashicorp/consul/aws/0.1.0/download",
        "/hashicorp/consul/aws/download",
        "/hashicorp/consul/aws/versions/extra",
        "/hashicorp/consul",
        "/hashicorp",
        "/search?q=consul",
        "",
    ] {
        let reply = app.get(&format!("{PROXY}{path}"), &owners).await;
        assert_eq!(reply.status, 404, "{path}: {:?}", reply.body);
    }
    assert_eq!(upstream.hits(), 0);
    app.stop().await;
}
