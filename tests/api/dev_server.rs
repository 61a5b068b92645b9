//! dev-server itself: bootstrap token, restart on the same data directory, TLS.

use dev_server::{start, Options};
use hangar::config::Config;
use hangar_tests::options;

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
    dev_server::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let running = start(Options { tls: true, ..options(dir.path()) }, Config::default()).await.unwrap();
    assert!(running.url.starts_with("https://127.0.0.1:"));
    let pem = std::fs::read(running.certificate.as_ref().expect("a certificate path")).unwrap();
    let client =
        reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap()).build().unwrap();
    assert_eq!(ping(&client, &running.url).await, 204);
    running.stop().await.unwrap();
}
