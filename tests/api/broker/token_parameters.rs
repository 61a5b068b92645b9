//! Token parameters are honoured as Vault honours them, or refused with Vault's message, never
//! dropped: use counts, an explicit max TTL, periodic tokens and renewal (`renew-self`, `renew`,
//! `renew-accessor`), `renewable`, `no_default_policy`, `meta`, batch tokens, token roles and
//! `create/:role_name`, and lookups that report the real values.

use serde_json::{json, Value};

use super::{broker, first_error, Vault};

/// Creates a token with `body` through `path`; returns (secret, the whole `auth`).
async fn create(vault: &Vault<'_>, path: &str, body: Value) -> (String, Value) {
    let reply = vault.post(path, body).await;
    assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
    let auth = reply.body["auth"].clone();
    (auth["client_token"].as_str().expect("a client token").to_owned(), auth)
}

/// A 400 whose message is `message`.
async fn refused(vault: &Vault<'_>, path: &str, body: Value, message: &str) {
    let reply = vault.post(path, body.clone()).await;
    assert_eq!(reply.status, 400, "{path} {body}: {:?}", reply.body);
    assert_eq!(first_error(&reply), message, "{path} {body}");
}

#[tokio::test]
async fn a_token_is_refused_once_its_uses_are_spent() {
    let app = broker().await;
    let root = Vault::root(&app);
    let (secret, auth) = create(&root, "auth/token/create", json!({"num_uses": 2, "policies": ["default"]})).await;
    assert_eq!(auth["num_uses"], 2);
    let token = Vault::new(&app, &secret);
    let first = token.get("auth/token/lookup-self").await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["data"]["num_uses"], 1, "the uses left after this one");
    assert_eq!(token.get("auth/token/lookup-self").await.status, 200, "the last use");
    for _ in 0..2 {
        assert_eq!(token.get("auth/token/lookup-self").await.status, 403, "no use left");
    }
    // A denied request spends a use too, as in Vault.
    let (once, _) = create(&root, "auth/token/create", json!({"num_uses": 1, "policies": ["default"]})).await;
    let once = Vault::new(&app, &once);
    assert_eq!(once.get("sys/mounts").await.status, 403);
    assert_eq!(once.get("auth/token/lookup-self").await.status, 403);

    refused(&root, "auth/token/create", json!({"num_uses": -1}), "number of uses cannot be negative").await;
    let (limited, _) = create(&root, "auth/token/create", json!({"num_uses": 5})).await;
    let limited = Vault::new(&app, &limited);
    let message = "restricted use token cannot generate child tokens";
    refused(&limited, "auth/token/create", json!({}), message).await;
    app.stop().await;
}

#[tokio::test]
async fn an_explicit_max_ttl_bounds_the_token_and_every_renewal() {
    let app = broker().await;
    let root = Vault::root(&app);
    let (secret, auth) = create(&root, "auth/token/create", json!({"explicit_max_ttl": "60s", "ttl": "1h"})).await;
    assert!(auth["lease_duration"].as_i64().expect("a duration") <= 60, "{auth}");
    let token = Vault::new(&app, &secret);
    let me = token.get("auth/token/lookup-self").await.body["data"].clone();
    assert_eq!(me["explicit_max_ttl"], 60);
    assert!(me["ttl"].as_i64().expect("a ttl") <= 60);
    let renewed = token.post("auth/token/renew-self", json!({"increment": "1h"})).await;
    assert_eq!(renewed.status, 200, "{:?}", renewed.body);
    assert!(renewed.body["auth"]["lease_duration"].as_i64().expect("a duration") <= 60, "{:?}", renewed.body);
    app.stop().await;
}

#[tokio::test]
async fn a_periodic_token_renews_to_its_period_and_needs_sudo() {
    let app = broker().await;
    let root = Vault::root(&app);
    let (secret, auth) = create(&root, "auth/token/create", json!({"period": "1h", "ttl": "5m"})).await;
    assert_eq!(auth["lease_duration"], 3600, "the period, not the ttl");
    assert_eq!(auth["renewable"], true);
    let token = Vault::new(&app, &secret);
    assert_eq!(token.get("auth/token/lookup-self").await.body["data"]["period"], 3600);
    let renewed = token.post("auth/token/renew-self", json!({"increment": "10s"})).await;
    assert_eq!(renewed.status, 200, "{:?}", renewed.body);
    assert_eq!(renewed.body["auth"]["lease_duration"], 3600, "the period again, whatever the increment");
    assert!(token.get("auth/token/lookup-self").await.body["data"]["last_renewal"].is_string());

    root.policy("creator", r#"path "auth/token/create" { capabilities = ["update"] }"#).await;
    let creator = Vault::new(&app, &create(&root, "auth/token/create", json!({"policies": ["creator"]})).await.0);
    let message = "root or sudo privileges required to create periodic token";
    refused(&creator, "auth/token/create", json!({"period": "1h"}), message).await;
    app.stop().await;
}

#[tokio::test]
async fn renew_and_renew_accessor_renew_another_token_and_a_non_renewable_one_is_refused() {
    let app = broker().await;
    let root = Vault::root(&app);
    let (secret, auth) = create(&root, "auth/token/create", json!({"ttl": "10m"})).await;
    let accessor = auth["accessor"].as_str().expect("an accessor").to_owned();
    let renewed = root.post("auth/token/renew", json!({"token": secret, "increment": "20m"})).await;
    assert_eq!(renewed.status, 200, "{:?}", renewed.body);
    assert_eq!(renewed.body["auth"]["client_token"], secret.as_str());
    assert_eq!(renewed.body["auth"]["lease_duration"], 1200);
    let by_accessor = root.post("auth/token/renew-accessor", json!({"accessor": accessor})).await;
    assert_eq!(by_accessor.status, 200, "{:?}", by_accessor.body);
    assert_eq!(by_accessor.body["auth"]["client_token"], "", "an accessor shows no secret");
    refused(&root, "auth/token/renew", json!({"token": "hvs.nothing"}), "token not found").await;
    refused(&root, "auth/token/renew-accessor", json!({"accessor": "nothing"}), "invalid accessor").await;

    let (fixed, auth) = create(&root, "auth/token/create", json!({"renewable": false})).await;
    assert_eq!(auth["renewable"], false);
    refused(&Vault::new(&app, &fixed), "auth/token/renew-self", json!({}), "lease is not renewable").await;
    refused(&root, "auth/token/renew-self", json!({}), "lease is not renewable").await;
    app.stop().await;
}

#[tokio::test]
async fn no_default_policy_meta_and_lookups_report_what_was_asked() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("dev", r#"path "aws/roles/*" { capabilities = ["read"] }"#).await;
    let body = json!({"policies": ["dev"], "no_default_policy": true, "meta": {"team": "ci", "run": 7}});
    let (secret, auth) = create(&root, "auth/token/create", body).await;
    assert_eq!(auth["policies"], json!(["dev"]), "{auth}");
    assert_eq!(auth["metadata"], json!({"team": "ci", "run": "7"}));
    let looked = root.post("auth/token/lookup", json!({"token": secret})).await;
    assert_eq!(looked.body["data"]["meta"], json!({"team": "ci", "run": "7"}));
    assert_eq!(looked.body["data"]["policies"], json!(["dev"]));
    assert_eq!(looked.body["data"]["accessor"], auth["accessor"]);
    let by_accessor = root.post("auth/token/lookup-accessor", json!({"accessor": auth["accessor"]})).await;
    assert_eq!(by_accessor.body["data"]["id"], "");
    // Presented as a bearer token, lookup-self still shows the token as its id.
    let (secret, _) = create(&root, "auth/token/create", json!({"policies": ["default"]})).await;
    let header = format!("Bearer {secret}");
    let bearer = super::send(&app, "GET", "auth/token/lookup-self", &[("Authorization", &header)], None).await;
    assert_eq!(bearer.body["data"]["id"], secret.as_str(), "{:?}", bearer.body);
    let missing = root.post("auth/token/lookup", json!({"token": "hvs.nothing"})).await;
    assert_eq!((missing.status.as_u16(), first_error(&missing)), (403, "bad token".to_owned()));
    app.stop().await;
}

#[tokio::test]
async fn batch_tokens_are_made_as_vault_makes_them_and_refused_what_vault_refuses() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("tokens", r#"path "auth/token/*" { capabilities = ["read", "update"] }"#).await;
    let (secret, auth) = create(&root, "auth/token/create", json!({"type": "batch", "policies": ["tokens"]})).await;
    assert_eq!(auth["token_type"], "batch");
    assert_eq!(auth["renewable"], false);
    let batch = Vault::new(&app, &secret);
    assert_eq!(batch.get("auth/token/lookup-self").await.body["data"]["type"], "batch");
    refused(&batch, "auth/token/renew-self", json!({}), "batch tokens cannot be renewed").await;
    refused(&batch, "auth/token/create", json!({}), "batch tokens cannot create more tokens").await;
    refused(&batch, "auth/token/revoke-self", json!({}), "batch tokens cannot be revoked").await;
    for field in ["num_uses", "period", "explicit_max_ttl"] {
        let value = if field == "num_uses" { json!(3) } else { json!("1h") };
        let message = format!("batch tokens cannot have \"{field}\" set");
        refused(&root, "auth/token/create", json!({"type": "batch", field: value}), &message).await;
    }
    refused(&root, "auth/token/create", json!({"type": "default"}), "invalid 'token_type' value").await;
    app.stop().await;
}

#[tokio::test]
async fn a_token_role_grants_its_policies_period_and_orphan_status_to_whoever_may_use_it() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("dev", r#"path "aws/roles/*" { capabilities = ["read"] }"#).await;
    let role = json!({"allowed_policies": ["dev"], "orphan": true, "token_period": "30m", "path_suffix": "ci-run"});
    root.write("auth/token/roles/ci", role).await;
    let read = root.get("auth/token/roles/ci").await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["data"]["allowed_policies"], json!(["dev"]));
    assert_eq!(read.body["data"]["token_period"], 1800);
    assert_eq!(read.body["data"]["token_type"], "default-service");
    assert_eq!(root.list("auth/token/roles").await.body["data"]["keys"], json!(["ci"]));

    // A caller that may only create against the role gets what the role allows.
    root.policy("use-ci", r#"path "auth/token/create/ci" { capabilities = ["update"] }"#).await;
    let user = Vault::new(&app, &create(&root, "auth/token/create", json!({"policies": ["use-ci"]})).await.0);
    let (secret, auth) = create(&user, "auth/token/create/ci", json!({})).await;
    assert_eq!(auth["policies"], json!(["default", "dev"]), "{auth}");
    assert_eq!(auth["orphan"], true);
    assert_eq!(auth["lease_duration"], 1800, "the role's period");
    let me = Vault::new(&app, &secret).get("auth/token/lookup-self").await.body["data"].clone();
    assert_eq!(me["role"], "ci");
    assert_eq!(me["path"], "auth/token/create/ci/ci-run");
    let outside = user.post("auth/token/create/ci", json!({"policies": ["root"]})).await;
    assert_eq!(outside.status, 400, "{:?}", outside.body);

    // `role_name` in the body is the role, checked on its own path.
    let named = user.post("auth/token/create", json!({"role_name": "ci"})).await;
    assert_eq!(named.status, 200, "{:?}", named.body);
    assert_eq!(named.body["auth"]["orphan"], true);
    refused(&root, "auth/token/create/nope", json!({}), "unknown role nope").await;
    let batch_role = root.post("auth/token/roles/b", json!({"token_type": "batch"})).await;
    assert_eq!(batch_role.status, 400, "a batch role must make orphans that do not renew: {:?}", batch_role.body);
    assert_eq!(root.delete("auth/token/roles/ci").await.status, 204);
    assert_eq!(root.get("auth/token/roles/ci").await.status, 404);
    app.stop().await;
}

#[tokio::test]
async fn a_custom_id_needs_sudo_and_may_not_look_like_a_generated_one() {
    let app = broker().await;
    let root = Vault::root(&app);
    let (secret, _) = create(&root, "auth/token/create", json!({"id": "my-ci-token"})).await;
    assert_eq!(secret, "my-ci-token");
    assert_eq!(Vault::new(&app, "my-ci-token").get("auth/token/lookup-self").await.status, 200);
    refused(&root, "auth/token/create", json!({"id": "my-ci-token"}), "cannot create a token with a duplicate ID")
        .await;
    refused(&root, "auth/token/create", json!({"id": "hvs.x"}), "custom token ID cannot have the 'hvs.' prefix").await;
    let plain = Vault::new(&app, &create(&root, "auth/token/create", json!({"policies": ["default"]})).await.0);
    root.policy("creator", r#"path "auth/token/create" { capabilities = ["update"] }"#).await;
    let creator = Vault::new(&app, &create(&root, "auth/token/create", json!({"policies": ["creator"]})).await.0);
    let message = "root or sudo privileges required to specify token id";
    refused(&creator, "auth/token/create", json!({"id": "theirs"}), message).await;
    assert_eq!(plain.post("auth/token/create", json!({})).await.status, 403, "no update on the path");
    app.stop().await;
}

/// A parent without `default` cannot hand it out, as Vault refuses any policy the parent lacks.
#[tokio::test]
async fn a_child_gets_default_only_from_a_parent_that_holds_it() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", r#"path "auth/token/create" { capabilities = ["update"] }"#).await;
    let body = json!({"policies": ["creator"], "no_default_policy": true});
    let parent = Vault::new(&app, &create(&root, "auth/token/create", body).await.0);
    let message = "child policies must be subset of parent: `default` is not";
    refused(&parent, "auth/token/create", json!({"policies": ["default"]}), message).await;
    let (_, auth) = create(&parent, "auth/token/create", json!({"policies": ["creator"]})).await;
    assert_eq!(auth["policies"], json!(["creator"]), "no default added where the parent has none");
    app.stop().await;
}
