//! What bounds the broker's work whatever AWS, a mount's configuration or a caller sends: no
//! call to AWS hangs a request or the scheduled job (timeouts, and a mount AWS does not answer
//! given up on for the rest of a run), identity tokens live at most a day and go only to AWS's
//! STS, and requests, AWS's messages and static roles have their limits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hangar::config::{Config, Edition};
use hangar_tests::moto;
use serde_json::json;
use tokio::net::TcpListener;

use super::{aws, first_error, iam_user_role, now, suffix, Vault, ROOT};

/// The broker's settings here: AWS gets a second to connect and two to answer.
fn config() -> Config {
    let mut config = Config { root_service_token: Some(ROOT.into()), ..Config::default() };
    config.broker_aws.connect_timeout = Duration::from_secs(1);
    config.broker_aws.operation_timeout = Duration::from_secs(2);
    config
}

/// An endpoint that takes connections and never answers; counts the connections.
async fn black_hole() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (endpoint, connections)
}

/// Points `mount` at `endpoint` with moto's keys and one attempt a call.
async fn point(root: &Vault<'_>, mount: &str, endpoint: &str) {
    let body = json!({
        "access_key": moto::ACCESS_KEY, "secret_key": moto::SECRET_KEY, "region": moto::REGION,
        "iam_endpoint": endpoint, "sts_endpoint": endpoint, "max_retries": 0,
    });
    root.write(&format!("{mount}/config/root"), body).await;
}

/// Before the timeouts, a black-holed endpoint held a `creds` request past 100 s; the bound
/// here only tells a hang from an answer.
#[tokio::test]
async fn a_black_holed_aws_endpoint_fails_the_request_instead_of_hanging_it() {
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    let (endpoint, _) = black_hole().await;
    point(&root, "aws", &endpoint).await;
    iam_user_role(&root, "aws/roles/stuck", "stuck").await;
    let creds = tokio::time::timeout(Duration::from_secs(60), root.get("aws/creds/stuck")).await;
    let creds = creds.expect("the request is answered, not held");
    assert_eq!(creds.status, 502, "{:?}", creds.body);
    let sts =
        root.post("aws/roles/fed", json!({"credential_type": "federation_token", "policy_document": super::DOCUMENT}));
    sts.await;
    let federated = tokio::time::timeout(Duration::from_secs(60), root.get("aws/sts/fed")).await;
    assert_eq!(federated.expect("answered").status, 502);
    app.stop().await;
}

/// Three due static roles on a mount whose AWS endpoint hangs cost the scheduled run one call
/// there, and the role of a mount that answers rotates in the same run.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_mount_aws_does_not_answer_does_not_stall_the_other_mounts_rotation() {
    let aws = aws().await;
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    root.write("sys/mounts/well", json!({"type": "aws"})).await;
    point(&root, "aws", &aws.endpoint).await;
    point(&root, "well", &aws.endpoint).await;
    for (mount, name) in [("aws", "a"), ("aws", "b"), ("aws", "c"), ("well", "w")] {
        let user = format!("hangar-stall-{}", suffix());
        aws.create_user(&user).await;
        root.write(&format!("{mount}/static-roles/{name}"), json!({"username": user, "rotation_period": "1h"})).await;
    }
    let before = root.get("well/static-creds/w").await.body["access_key"].clone();
    let (endpoint, connections) = black_hole().await;
    point(&root, "aws", &endpoint).await;

    let state = app.second_state().await;
    let run = hangar::broker::scheduled_run_at(&state, now() + 3610);
    let (rotated, _) = tokio::time::timeout(Duration::from_secs(60), run).await.expect("the run ends").expect("a run");
    assert_eq!(rotated, 1, "the mount that answers rotated");
    assert_ne!(root.get("well/static-creds/w").await.body["access_key"], before);
    assert_eq!(connections.load(Ordering::SeqCst), 1, "one call to the mount that hangs, then it is given up on");
    app.stop().await;
}

#[test]
fn the_aws_timeouts_and_the_identity_token_cap_are_settings_with_ranges() {
    let with = |name: &'static str, value: &'static str| {
        Config::from_lookup(move |asked| (asked == name).then(|| value.to_owned()))
    };
    let defaults = Config::from_lookup(|_| None).expect("the defaults").broker_aws;
    assert_eq!(defaults.connect_timeout, Duration::from_secs(3));
    assert_eq!(defaults.operation_timeout, Duration::from_secs(20));
    assert_eq!(defaults.max_identity_token_ttl, Duration::from_secs(24 * 3600));
    assert!(defaults.identity_sts_endpoints.is_empty());
    let set = with("HANGAR_BROKER_AWS_OPERATION_TIMEOUT", "45s").expect("45s");
    assert_eq!(set.broker_aws.operation_timeout, Duration::from_secs(45));
    for (name, refused) in [
        ("HANGAR_BROKER_AWS_CONNECT_TIMEOUT", "0s"),
        ("HANGAR_BROKER_AWS_CONNECT_TIMEOUT", "2m"),
        ("HANGAR_BROKER_AWS_OPERATION_TIMEOUT", "1h"),
        ("HANGAR_BROKER_MAX_IDENTITY_TOKEN_TTL", "10s"),
        ("HANGAR_BROKER_IDENTITY_STS_ENDPOINTS", "sts.example.com"),
    ] {
        let message = with(name, refused).expect_err(refused).to_string();
        assert!(message.starts_with(name), "{message}");
    }
    let listed = with("HANGAR_BROKER_IDENTITY_STS_ENDPOINTS", "https://sts.example.com/, http://127.0.0.1:4566");
    let listed = listed.expect("two URLs").broker_aws.identity_sts_endpoints;
    assert_eq!(listed, ["https://sts.example.com", "http://127.0.0.1:4566"]);
}

/// A mount's configuration cannot mint a long-lived Hangar-signed token, nor send one to an
/// endpoint of its own.
#[tokio::test]
async fn identity_tokens_live_at_most_the_cap_and_go_only_to_awss_sts() {
    let config = Config { edition: Edition::Enterprise, root_service_token: Some(ROOT.into()), ..Config::default() };
    let app = hangar_tests::TestApp::spawn_with(config).await;
    let root = Vault::root(&app);
    let identity = |extra: serde_json::Value| {
        let mut body = json!({"role_arn": "arn:aws:iam::123456789012:role/broker", "identity_token_audience": "sts"});
        body.as_object_mut().expect("an object").extend(extra.as_object().expect("an object").clone());
        body
    };
    let refused = [
        identity(json!({"identity_token_ttl": "2562047h"})),
        identity(json!({"identity_token_ttl": "25h"})),
        identity(json!({"sts_endpoint": "https://attacker.example.com"})),
        identity(json!({"sts_endpoint": "http://sts.amazonaws.com"})),
        identity(json!({"sts_endpoint": "https://sts.amazonaws.com.attacker.example"})),
    ];
    for body in refused {
        let reply = root.post("aws/config/root", body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {:?}", reply.body);
    }
    for body in [
        identity(json!({"identity_token_ttl": "24h"})),
        identity(json!({"sts_endpoint": "https://sts.eu-west-1.amazonaws.com"})),
        identity(json!({"sts_endpoint": "https://sts.amazonaws.com/"})),
    ] {
        let reply = root.post("aws/config/root", body.clone()).await;
        assert_eq!(reply.status, 204, "{body}: {:?}", reply.body);
    }
    // Without workload identity the endpoints are the operator's to choose, as in Vault.
    point(&root, "aws", "http://127.0.0.1:1").await;
    app.stop().await;
}

#[tokio::test]
async fn max_retries_is_bounded() {
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    for (retries, status) in [(json!(1000), 400), (json!(-2), 400), (json!(10), 204), (json!(-1), 204)] {
        let reply = root.post("aws/config/root", json!({"region": "us-east-1", "max_retries": retries})).await;
        assert_eq!(reply.status, status, "{retries}: {:?}", reply.body);
    }
    app.stop().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413_in_vaults_format() {
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    let policy = format!("# {}\npath \"aws/*\" {{ capabilities = [\"read\"] }}", "x".repeat(3 * 1024 * 1024));
    let reply = root.post("sys/policies/acl/big", json!({"policy": policy})).await;
    assert_eq!(reply.status, 413, "{:?}", reply.body);
    assert!(first_error(&reply).contains("larger than"), "{:?}", reply.body);
    app.stop().await;
}

/// An endpoint the mount names can answer anything; a caller sees at most 512 bytes of it.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_aws_message_shown_to_a_caller_is_capped() {
    let aws = aws().await;
    let proxy = hangar_tests::aws_proxy::AwsProxy::start(&aws.endpoint).await;
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    point(&root, "aws", &proxy.endpoint).await;
    iam_user_role(&root, "aws/roles/loud", "loud").await;
    let message = "m".repeat(100_000);
    let body = format!(
        "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>{message}</Message></Error>\
         <RequestId>r</RequestId></ErrorResponse>"
    );
    proxy.inject("CreateUser", hangar_tests::aws_proxy::Fault::Respond { status: 403, body });
    let reply = root.get("aws/creds/loud").await;
    assert_eq!(reply.status, 400, "{:?}", reply.body);
    let shown = first_error(&reply);
    assert!(shown.starts_with("iam:CreateUser: AccessDenied: mmm"), "{shown:.80}");
    assert!(shown.len() < 700, "{} bytes", shown.len());
    app.stop().await;
}

/// A static role rotating the key config/root signs in with would lock the engine out.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_static_role_may_not_hold_the_engines_own_user() {
    let aws = aws().await;
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    let user = format!("hangar-engine-{}", suffix());
    aws.create_user(&user).await;
    let (key, secret) = aws.create_key(&user).await;
    let body = json!({
        "access_key": key, "secret_key": secret, "region": moto::REGION,
        "iam_endpoint": aws.endpoint, "sts_endpoint": aws.endpoint,
    });
    root.write("aws/config/root", body).await;
    let reply = root.post("aws/static-roles/engine", json!({"username": user, "rotation_period": "1h"})).await;
    assert_eq!(reply.status, 400, "{:?}", reply.body);
    assert!(first_error(&reply).contains("config/root signs in as"), "{:?}", reply.body);
    assert_eq!(aws.access_keys(&user).await, [key], "no key was made or deleted");
    app.stop().await;
}

/// Vault takes a `null` field as unset; hvac sends optional fields that way.
#[tokio::test]
async fn null_fields_are_unset() {
    let app = hangar_tests::TestApp::spawn_with(config()).await;
    let root = Vault::root(&app);
    let mount = json!({"type": "aws", "description": null, "config": null, "options": null, "plugin_name": null});
    let reply = root.post("sys/mounts/team-a", mount).await;
    assert_eq!(reply.status, 204, "{:?}", reply.body);
    let role =
        json!({"credential_type": "federation_token", "policy_document": super::DOCUMENT, "default_sts_ttl": null});
    assert_eq!(root.post("team-a/roles/deploy", role).await.status, 204);
    let token = root.post("auth/token/create", json!({"policies": ["default"], "ttl": null, "meta": null})).await;
    assert_eq!(token.status, 200, "{:?}", token.body);
    app.stop().await;
}
