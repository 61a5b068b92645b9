//! dev-server itself: bootstrap token, restart on the same data directory, TLS, key files.

use dev_server::{start, Options};
use hangar::config::Config;
use hangar_tests::builders::{module, version};
use hangar_tests::{options, tls_dev_server};

async fn ping(client: &reqwest::Client, url: &str) -> u16 {
    client.get(format!("{url}/api/v2/ping")).send().await.expect("ping").status().as_u16()
}

#[tokio::test]
async fn the_admin_token_is_generated_once_and_survives_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let first = start(options(dir.path()), Config::default()).await.unwrap();
    let token = first.generated_admin_token.clone().expect("generated at first start");
    first.stop().await.unwrap();

    let second = start(options(dir.path()), Config::default()).await.unwrap();
    assert_eq!(second.generated_admin_token, None, "never printed twice");
    let client = reqwest::Client::new();
    let reply = client.get(format!("{}/api/v2/account/details", second.url)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    second.stop().await.unwrap();

    let stored = std::fs::read(dir.path().join("hangar.db")).unwrap();
    assert!(!stored.windows(token.len()).any(|w| w == token.as_bytes()), "only the hash is stored");
}

#[tokio::test]
async fn an_admin_token_from_the_environment_is_used_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { admin_token: Some("my-chosen-admin-token".into()), ..Config::default() };
    let running = start(options(dir.path()), config).await.unwrap();
    assert_eq!(running.generated_admin_token, None);
    let client = reqwest::Client::new();
    let url = format!("{}/api/v2/account/details", running.url);
    assert_eq!(client.get(&url).bearer_auth("my-chosen-admin-token").send().await.unwrap().status(), 200);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn tls_serves_https_with_a_certificate_clients_can_trust() {
    let dir = tempfile::tempdir().unwrap();
    let (running, client) = tls_dev_server(dir.path()).await;
    assert!(running.url.starts_with("https://127.0.0.1:"));
    assert_eq!(ping(&client, &running.url).await, 204);
    running.stop().await.unwrap();
}

/// The permission bits of a file.
#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

/// The TLS private key and the seal key are readable by their owner only, also when an
/// earlier version left them readable by others.
#[cfg(unix)]
#[tokio::test]
async fn key_files_are_written_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (tls_key, seal_key) = (dir.path().join("tls").join("key.pem"), dir.path().join("broker-seal.key"));
    let (running, _) = tls_dev_server(dir.path()).await;
    running.stop().await.unwrap();
    assert_eq!(mode(&tls_key), 0o600, "the TLS private key");
    assert_eq!(mode(&seal_key), 0o600, "the seal key");

    for key in [&tls_key, &seal_key] {
        std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (running, _) = tls_dev_server(dir.path()).await;
    running.stop().await.unwrap();
    assert_eq!(mode(&tls_key), 0o600, "a TLS key left readable is made owner-only");
    assert_eq!(mode(&seal_key), 0o600, "a seal key left readable is made owner-only");
}

/// The data directory is its owner's alone: made 0700 with its subdirectories, its files 0600
/// (the embedded store and its journal, archives, uploads), and one an earlier version left
/// readable by others is tightened at start.
#[cfg(unix)]
#[tokio::test]
async fn the_data_directory_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("fresh");
    let running = start(options(&dir), Config { data_dir: dir.clone(), ..Config::default() }).await.unwrap();
    let token = running.generated_admin_token.clone().expect("a token");
    let app = reqwest::Client::new();
    let org = serde_json::json!({"data": {"type": "organizations", "attributes": {"name": "acme", "email": "a@example.com"}}});
    let post = |path: &str, body: serde_json::Value| {
        app.post(format!("{}{path}", running.url))
            .bearer_auth(&token)
            .header("Content-Type", hangar_tests::JSONAPI)
            .body(body.to_string())
            .send()
    };
    assert_eq!(post("/api/v2/organizations", org).await.unwrap().status(), 201);
    assert_eq!(post("/api/v2/organizations/acme/registry-modules", module("vpc", "aws")).await.unwrap().status(), 201);
    let created = post("/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws/versions", version("1.0.0"))
        .await
        .unwrap();
    let created: serde_json::Value = created.json().await.unwrap();
    let upload = created["data"]["links"]["upload"].as_str().expect("an upload link").to_owned();
    let uploaded = app.put(&upload).body(hangar_tests::module_archive()).send().await.unwrap();
    assert_eq!(uploaded.status(), 200);
    running.stop().await.unwrap();

    let mut seen = 0;
    let mut pending = vec![dir.clone()];
    while let Some(path) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        if metadata.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
        }
        let expected = if metadata.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), expected, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 6, "the store, the archive and their directories: {seen} entries");

    // As an earlier version left it: the directory 0755, its files 0644.
    for (path, mode) in [(dir.clone(), 0o755), (dir.join("objects"), 0o755), (dir.join("hangar.db"), 0o644)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let again = start(options(&dir), Config { data_dir: dir.clone(), ..Config::default() }).await.unwrap();
    again.stop().await.unwrap();
    assert_eq!((mode(&dir), mode(&dir.join("objects")), mode(&dir.join("hangar.db"))), (0o700, 0o700, 0o600));
}

/// Reads what the server sends on `stream` until it closes the connection, waiting at most
/// `limit`; `None` if it is still open then.
async fn closed_within(stream: &mut tokio::net::TcpStream, limit: std::time::Duration) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    tokio::time::timeout(limit, async {
        let mut buffer = [0u8; 1024];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .ok()
    .map(|()| received)
}

#[tokio::test]
async fn a_half_sent_request_is_not_held_open() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let options = Options { header_timeout: 1, body_timeout: 1, ..options(dir.path()) };
    let running = start(options, Config::default()).await.unwrap();
    let addr = running.url.trim_start_matches("http://").to_owned();

    let mut headers_only = tokio::net::TcpStream::connect(&addr).await.unwrap();
    headers_only.write_all(b"GET /api/v2/ping HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    assert!(
        closed_within(&mut headers_only, std::time::Duration::from_secs(5)).await.is_some(),
        "unfinished headers are dropped"
    );

    let admin = running.generated_admin_token.clone().expect("a generated admin token");
    let mut body_half = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let request = format!(
        "POST /api/v2/organizations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin}\r\n\
         Content-Type: application/vnd.api+json\r\nContent-Length: 1000\r\n\r\n{{\"data\": "
    );
    body_half.write_all(request.as_bytes()).await.unwrap();
    let answer = closed_within(&mut body_half, std::time::Duration::from_secs(5)).await;
    let answer = String::from_utf8_lossy(&answer.expect("an unfinished body is not waited for forever")).into_owned();
    assert!(answer.starts_with("HTTP/1.1 4"), "answered with a client error: {answer}");
    assert_eq!(ping(&reqwest::Client::new(), &running.url).await, 204, "the server still answers");
    running.stop().await.unwrap();
}

/// dev-server's own settings (its flags, or their variables) out of range stop it at start with
/// the range named, as the shared settings do; a huge interval would otherwise overflow a timer.
#[test]
fn dev_server_settings_out_of_range_are_refused_naming_their_range() {
    use clap::Parser;
    const HUGE: &str = "18446744073709551615";
    for flag in ["--rotation-interval", "--header-timeout", "--body-timeout"] {
        for value in [HUGE, "0"] {
            let refused = Options::try_parse_from(["dev-server", flag, value]).expect_err(&format!("{flag} {value}"));
            let message = refused.to_string();
            assert!(message.contains(flag) && message.contains("1..="), "{message}");
        }
    }
    assert!(Options::try_parse_from(["dev-server", "--rotation-interval", "1"]).is_ok());
}
