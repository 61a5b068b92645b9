//! The token tree, as Vault keeps it: a child records its parent and cannot outlive it, `ttl`
//! 0 is the default TTL, orphans need `create-orphan` or `sudo`, and revoking a token revokes
//! its descendants and the credentials issued to any of them, before the call answers.

use serde_json::{json, Value};

use super::{broker, broker_on_moto, first_error, iam_user_role, Aws, Vault};
use hangar::store::{keys, ItemStore};
use hangar_tests::TestApp;

/// Vault's default and maximum TTL for tokens without a role: 768 hours.
const MAX_TTL: i64 = 768 * 3600;

/// May create tokens and read `aws/creds/deploy`.
const CREATOR: &str = r#"
path "auth/token/create" { capabilities = ["update"] }
path "aws/creds/deploy" { capabilities = ["read"] }
"#;

/// Creates a token with `body`; returns (secret, accessor, the whole `auth`).
async fn create(vault: &Vault<'_>, path: &str, body: Value) -> (String, String, Value) {
    let reply = vault.post(path, body).await;
    assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
    let auth = reply.body["auth"].clone();
    let secret = auth["client_token"].as_str().expect("a client token").to_owned();
    let accessor = auth["accessor"].as_str().expect("an accessor").to_owned();
    (secret, accessor, auth)
}

/// A child of `vault` with the `creator` policy; returns its secret.
async fn creator(vault: &Vault<'_>, ttl: &str) -> String {
    create(vault, "auth/token/create", json!({"policies": ["creator"], "ttl": ttl})).await.0
}

async fn alive(app: &TestApp, secret: &str) -> bool {
    let reply = Vault::new(app, secret).get("auth/token/lookup-self").await;
    assert!(matches!(reply.status.as_u16(), 200 | 403), "{:?}", reply.body);
    reply.status == 200
}

async fn lookup(app: &TestApp, secret: &str) -> Value {
    let reply = Vault::new(app, secret).get("auth/token/lookup-self").await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.body["data"].clone()
}

/// Issues `aws/creds/deploy` to `vault`; returns the lease id.
async fn creds(vault: &Vault<'_>) -> (String, i64) {
    let reply = vault.get("aws/creds/deploy").await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let lease = reply.body["lease_id"].as_str().expect("a lease id").to_owned();
    (lease, reply.body["lease_duration"].as_i64().expect("a lease duration"))
}

async fn lease_exists(root: &Vault<'_>, lease: &str) -> bool {
    let reply = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert!(matches!(reply.status.as_u16(), 200 | 400), "{:?}", reply.body);
    reply.status == 200
}

/// The users under an IAM path that still exist.
async fn users_left(aws: &Aws, path: &str) -> Vec<String> {
    aws.users_under(path).await
}

/// An `expire_time`: RFC 3339 in UTC, so text order is time order.
fn expire_time(data: &Value) -> &str {
    data["expire_time"].as_str().unwrap_or_else(|| panic!("an expire_time: {data}"))
}

// ----- TTLs -----

#[tokio::test]
async fn a_child_token_cannot_outlive_its_parent() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let parent = creator(&root, "60s").await;
    for body in [json!({"ttl": "24h"}), json!({}), json!({"ttl": 0})] {
        let (child, _, auth) = create(&Vault::new(&app, &parent), "auth/token/create", body.clone()).await;
        let duration = auth["lease_duration"].as_i64().expect("a lease duration");
        assert!((55..=60).contains(&duration), "{body}: capped at the parent's remaining 60 s: {duration}");
        let (mine, parents) = (lookup(&app, &child).await, lookup(&app, &parent).await);
        assert!(mine["ttl"].as_i64().expect("a ttl") <= 60, "{body}: {mine}");
        assert!(expire_time(&mine) <= expire_time(&parents), "{body}: {mine} {parents}");
    }
    app.stop().await;
}

#[tokio::test]
async fn ttl_zero_means_the_default_not_forever() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    for ttl in [json!("0"), json!(0), json!("0s"), Value::Null] {
        for policies in [json!(["creator"]), json!(["root"])] {
            let body = json!({"ttl": ttl, "policies": policies});
            let (secret, _, auth) = create(&root, "auth/token/create", body.clone()).await;
            assert_eq!(auth["lease_duration"], MAX_TTL, "{body}: {auth}");
            let me = lookup(&app, &secret).await;
            let left = me["ttl"].as_i64().expect("a ttl");
            assert!((MAX_TTL - 10..=MAX_TTL).contains(&left), "{body}: {me}");
            assert!(!expire_time(&me).is_empty(), "{body}: {me}");
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn a_ttl_over_the_system_max_is_capped_at_768_hours() {
    let app = broker().await;
    let root = Vault::root(&app);
    let (_, _, auth) = create(&root, "auth/token/create", json!({"ttl": "10000h"})).await;
    assert_eq!(auth["lease_duration"], MAX_TTL, "{auth}");
    app.stop().await;
}

#[tokio::test]
async fn lookup_self_shows_vaults_token_fields() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let body = json!({"policies": ["creator"], "ttl": "1h", "display_name": "ci"});
    let (secret, accessor, auth) = create(&root, "auth/token/create", body).await;
    assert_eq!(auth["orphan"], false, "{auth}");
    let me = lookup(&app, &secret).await;
    assert_eq!(me["accessor"], accessor.as_str());
    assert_eq!(me["display_name"], "token-ci");
    assert_eq!(me["creation_ttl"], 3600);
    assert_eq!(me["orphan"], false);
    assert_eq!(me["policies"], json!(["creator", "default"]));
    assert!((3590..=3600).contains(&me["ttl"].as_i64().expect("a ttl")), "{me}");
    assert!(!expire_time(&me).is_empty(), "{me}");
    assert_eq!(me["id"], secret.as_str());

    let root_me = lookup(&app, super::ROOT).await;
    assert_eq!(root_me["orphan"], true, "the root token has no parent: {root_me}");
    assert_eq!(root_me["ttl"], 0);
    assert_eq!(root_me["expire_time"], Value::Null);
    app.stop().await;
}

// ----- orphans -----

#[tokio::test]
async fn an_orphan_needs_sudo() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    root.policy("orphaner", r#"path "auth/token/create" { capabilities = ["update", "sudo"] }"#).await;
    let plain = creator(&root, "1h").await;
    let refused = Vault::new(&app, &plain).post("auth/token/create", json!({"no_parent": true})).await;
    assert_eq!(refused.status, 400, "{:?}", refused.body);
    assert_eq!(first_error(&refused), "root or sudo privileges required to create orphan token");

    let sudo = create(&root, "auth/token/create", json!({"policies": ["orphaner"], "ttl": "1m"})).await.0;
    let (orphan, _, auth) = create(&Vault::new(&app, &sudo), "auth/token/create", json!({"no_parent": true})).await;
    assert_eq!(auth["orphan"], true, "{auth}");
    assert_eq!(lookup(&app, &orphan).await["orphan"], true);
    let duration = auth["lease_duration"].as_i64().expect("a lease duration");
    assert!(duration > 60, "an orphan is not capped by its creator's TTL: {duration}");

    let (by_root, _, auth) = create(&root, "auth/token/create", json!({"no_parent": "true"})).await;
    assert_eq!(auth["orphan"], true, "root may always: {auth}");

    assert_eq!(Vault::new(&app, &sudo).post("auth/token/revoke-self", json!({})).await.status, 204);
    assert!(alive(&app, &orphan).await, "an orphan survives its creator");
    assert!(alive(&app, &by_root).await);
    app.stop().await;
}

#[tokio::test]
async fn create_orphan_makes_a_token_that_survives_its_creator() {
    let app = broker().await;
    let root = Vault::root(&app);
    let policy = r#"path "auth/token/create-orphan" { capabilities = ["update"] }"#;
    root.policy("orphans", policy).await;
    root.policy("creator", CREATOR).await;
    let plain = creator(&root, "1h").await;
    let denied = Vault::new(&app, &plain).post("auth/token/create-orphan", json!({})).await;
    assert_eq!(denied.status, 403, "create-orphan is gated by its own path: {:?}", denied.body);

    let maker = create(&root, "auth/token/create", json!({"policies": ["orphans"], "ttl": "1m"})).await.0;
    let body = json!({"policies": ["orphans"], "ttl": "2h"});
    let (orphan, _, auth) = create(&Vault::new(&app, &maker), "auth/token/create-orphan", body).await;
    assert_eq!(auth["orphan"], true, "{auth}");
    assert_eq!(auth["lease_duration"], 7200, "{auth}");
    let escalation = Vault::new(&app, &maker).post("auth/token/create-orphan", json!({"policies": ["creator"]})).await;
    assert_eq!(escalation.status, 400, "an orphan still gets only its creator's policies: {:?}", escalation.body);

    assert_eq!(Vault::new(&app, &maker).post("auth/token/revoke-self", json!({})).await.status, 204);
    assert!(alive(&app, &orphan).await);
    app.stop().await;
}

// ----- revocation -----

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn revoking_a_parent_revokes_its_children_and_their_iam_users() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let path = iam_user_role(&root, "aws/roles/deploy", "tree").await;
    let parent = creator(&root, "60s").await;
    let child = creator(&Vault::new(&app, &parent), "1h").await;
    let grandchild = creator(&Vault::new(&app, &child), "1h").await;
    let sibling = creator(&Vault::new(&app, &parent), "1h").await;
    let mut leases = Vec::new();
    for holder in [&parent, &child, &grandchild, &grandchild, &sibling] {
        leases.push(creds(&Vault::new(&app, holder)).await.0);
    }
    assert_eq!(users_left(&aws, &path).await.len(), 5);
    let unrelated = creator(&root, "1h").await;
    let kept = creds(&Vault::new(&app, &unrelated)).await.0;

    let revoked = Vault::new(&app, &parent).post("auth/token/revoke-self", json!({})).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    for token in [&parent, &child, &grandchild, &sibling] {
        assert!(!alive(&app, token).await, "every descendant is revoked");
    }
    assert_eq!(users_left(&aws, &path).await.len(), 1, "the tree's IAM users are gone when the call answers");
    for lease in &leases {
        assert!(!lease_exists(&root, lease).await, "{lease}");
    }
    assert!(alive(&app, &unrelated).await, "another branch is untouched");
    assert!(lease_exists(&root, &kept).await);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn revoking_a_token_revokes_the_credentials_issued_to_it() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let path = iam_user_role(&root, "aws/roles/deploy", "holder").await;
    let token = creator(&root, "1h").await;
    let (lease, _) = creds(&Vault::new(&app, &token)).await;
    let user = users_left(&aws, &path).await.pop().expect("the created user");
    let revoked = Vault::new(&app, &token).post("auth/token/revoke-self", json!({})).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    assert!(!aws.user_exists(&user).await);
    assert!(!lease_exists(&root, &lease).await);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_lease_cannot_outlive_the_token_that_holds_it() {
    let (_aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    root.write("aws/config/lease", json!({"lease": "1h", "lease_max": "2h"})).await;
    iam_user_role(&root, "aws/roles/deploy", "capped").await;
    let token = creator(&root, "60s").await;
    let (lease, duration) = creds(&Vault::new(&app, &token)).await;
    assert!((55..=60).contains(&duration), "capped at the token's 60 s: {duration}");
    let renewed = root.call("PUT", "sys/leases/renew", Some(json!({"lease_id": lease, "increment": "1h"}))).await;
    assert_eq!(renewed.status, 200, "{:?}", renewed.body);
    let duration = renewed.body["lease_duration"].as_i64().expect("a duration");
    assert!(duration <= 60, "a renewal stays within the token's life: {duration}");
    app.stop().await;
}

#[tokio::test]
async fn revoke_and_revoke_accessor_revoke_a_token_and_its_tree() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    root.policy(
        "revoker",
        r#"
        path "auth/token/revoke" { capabilities = ["update"] }
        path "auth/token/revoke-accessor" { capabilities = ["update"] }
        "#,
    )
    .await;
    let by_token = creator(&root, "1h").await;
    let child_of_token = creator(&Vault::new(&app, &by_token), "1h").await;
    let (by_accessor, accessor, _) =
        create(&root, "auth/token/create", json!({"policies": ["creator"], "ttl": "1h"})).await;
    let child_of_accessor = creator(&Vault::new(&app, &by_accessor), "1h").await;

    let plain = creator(&root, "1h").await;
    let denied = Vault::new(&app, &plain).post("auth/token/revoke", json!({"token": by_token})).await;
    assert_eq!(denied.status, 403, "{:?}", denied.body);
    assert!(alive(&app, &by_token).await);

    let revoker = create(&root, "auth/token/create", json!({"policies": ["revoker"]})).await.0;
    let revoker = Vault::new(&app, &revoker);
    assert_eq!(revoker.post("auth/token/revoke", json!({"token": by_token})).await.status, 204);
    assert!(!alive(&app, &by_token).await && !alive(&app, &child_of_token).await);
    assert_eq!(revoker.post("auth/token/revoke-accessor", json!({"accessor": accessor})).await.status, 204);
    assert!(!alive(&app, &by_accessor).await && !alive(&app, &child_of_accessor).await);

    let unknown = revoker.post("auth/token/revoke-accessor", json!({"accessor": accessor})).await;
    assert_eq!(unknown.status, 400, "{:?}", unknown.body);
    let missing = revoker.post("auth/token/revoke", json!({})).await;
    assert_eq!(missing.status, 400, "{:?}", missing.body);
    assert!(alive(&app, &plain).await);
    app.stop().await;
}

#[tokio::test]
async fn a_revoked_parent_cannot_create_children() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let parent = creator(&root, "1h").await;
    let vault = Vault::new(&app, &parent);
    assert_eq!(vault.post("auth/token/revoke-self", json!({})).await.status, 204);
    let refused = vault.post("auth/token/create", json!({})).await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    app.stop().await;
}

/// A revoke answers within a bound; what it could not do is finished by the scheduled job,
/// never forgotten.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_revocation_beyond_its_bound_is_finished_by_the_scheduled_job() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let path = iam_user_role(&root, "aws/roles/deploy", "bound").await;
    let token = creator(&root, "1h").await;
    let holder = Vault::new(&app, &token);
    let issued = hangar::broker::tokens::REVOKE_LEASES_PER_CALL + 2;
    for _ in 0..issued {
        creds(&holder).await;
    }
    assert_eq!(users_left(&aws, &path).await.len(), issued);
    let revoked = holder.post("auth/token/revoke-self", json!({})).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    assert!(!alive(&app, &token).await, "the token itself is revoked at once");
    // dev-server's job wakes when work is left (in AWS the schedule runs it every minute).
    for _ in 0..100 {
        if users_left(&aws, &path).await.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(users_left(&aws, &path).await, Vec::<String>::new());
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_revocation_that_fails_in_iam_is_finished_by_the_scheduled_job() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let path = iam_user_role(&root, "aws/roles/deploy", "retry").await;
    let parent = creator(&root, "1h").await;
    let child = creator(&Vault::new(&app, &parent), "1h").await;
    let (lease, _) = creds(&Vault::new(&app, &child)).await;
    let user = users_left(&aws, &path).await.pop().expect("the created user");

    let unreachable = json!({
        "access_key": hangar_tests::moto::ACCESS_KEY,
        "secret_key": hangar_tests::moto::SECRET_KEY,
        "region": hangar_tests::moto::REGION,
        "iam_endpoint": "http://127.0.0.1:9",
        "max_retries": 0,
    });
    root.write("aws/config/root", unreachable).await;
    let failed = Vault::new(&app, &parent).post("auth/token/revoke-self", json!({})).await;
    assert!(failed.status.is_server_error(), "the caller hears of the failure: {:?}", failed.body);
    assert!(!alive(&app, &parent).await && !alive(&app, &child).await, "the tokens are revoked all the same");
    assert!(aws.user_exists(&user).await);

    aws.configure(&root, "aws").await;
    let state = app.second_state().await;
    hangar::broker::scheduled_run(&state).await.expect("a scheduled run");
    assert!(!aws.user_exists(&user).await, "the job retried the revocation");
    assert!(!lease_exists(&root, &lease).await);
    app.stop().await;
}

#[tokio::test]
async fn a_tree_larger_than_one_call_is_refused_at_once_and_removed_by_the_job() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let parent = creator(&root, "1h").await;
    let vault = Vault::new(&app, &parent);
    let mut children = Vec::new();
    for _ in 0..hangar::broker::tokens::REVOKE_TOKENS_PER_CALL + 5 {
        children.push(create(&vault, "auth/token/create", json!({})).await);
    }
    assert_eq!(vault.post("auth/token/revoke-self", json!({})).await.status, 204);
    for (secret, _, _) in children.iter().rev().take(10) {
        assert!(!alive(&app, secret).await, "a child beyond the call's bound is refused already");
    }
    // dev-server's job wakes when work is left, and removes the rest of the tree.
    let store = app.store();
    let mut left = children.len();
    for _ in 0..100 {
        left = 0;
        for (_, accessor, _) in &children {
            let pointer = store.get(&keys::service_token_accessor(accessor)).await.expect("a read");
            left += usize::from(pointer.is_some());
        }
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(left, 0, "every child is gone");
    app.stop().await;
}

/// The indexes and conditions the tree rests on, on DynamoDB (in the emulator) as on SQLite.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn the_token_tree_holds_on_dynamodb() {
    use hangar::config::{Config, StoreKind};
    hangar_tests::moto_in_environment().await;
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    let suffix = hangar::ids::random_token(10).to_lowercase();
    let config = Config {
        store: StoreKind::Dynamodb,
        table: format!("hangar-{suffix}"),
        bucket: format!("hangar-{suffix}"),
        root_service_token: Some(super::ROOT.into()),
        ..Config::default()
    };
    let options = dev_server::Options {
        store: dev_server::Store::Dynamodb,
        init: true,
        ..hangar_tests::options(data_dir.path())
    };
    let app = TestApp::spawn_in(data_dir, options, config).await;
    let root = Vault::root(&app);
    root.policy("creator", CREATOR).await;
    let parent = creator(&root, "60s").await;
    let (child, _, auth) = create(&Vault::new(&app, &parent), "auth/token/create", json!({"ttl": "1h"})).await;
    assert!(auth["lease_duration"].as_i64().expect("a lease duration") <= 60, "{auth}");
    let grandchild = creator(&Vault::new(&app, &child), "1h").await;
    assert_eq!(Vault::new(&app, &parent).post("auth/token/revoke-self", json!({})).await.status, 204);
    for token in [&parent, &child, &grandchild] {
        assert!(!alive(&app, token).await);
    }
    let refused = Vault::new(&app, &child).post("auth/token/create", json!({})).await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    app.stop().await;
}
