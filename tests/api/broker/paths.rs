//! The path a policy is checked against is the path that is served, and a write needs the
//! capability of what it does: Vault's `create` for an object that does not exist yet, `update`
//! for one that does and for every action path. Paths with empty, `.` or `..` segments (however
//! spelled) or an encoded slash are refused before any policy is read.

use hangar_tests::{Reply, TestApp};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{broker, broker_on_moto, first_error, send, suffix, Vault, ROOT};

/// A token holding one policy of `hcl`, written by root.
async fn token_with<'a>(app: &'a TestApp, name: &str, hcl: &str) -> Vault<'a> {
    let root = Vault::root(app);
    root.policy(name, hcl).await;
    let token = root.token(&[name], name).await;
    Vault::new(app, &token)
}

/// Sends `target` to dev-server byte for byte: reqwest, as browsers do, resolves `.` and `..`
/// segments (the `%2e` spellings too) before a request leaves it.
async fn raw(app: &TestApp, method: &str, target: &str, token: &str) -> Reply {
    let host = app.url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("dev-server listens");
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\nX-Vault-Token: {token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("the request is sent");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).await.expect("a response");
    let text = String::from_utf8(bytes).expect("a UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let mut lines = head.lines();
    let status = lines.next().and_then(|line| line.split(' ').nth(1)).expect("a status line");
    let mut headers = HeaderMap::new();
    for line in lines {
        let (name, value) = line.split_once(':').expect("a header");
        let name = HeaderName::from_bytes(name.trim().as_bytes()).expect("a header name");
        headers.insert(name, HeaderValue::from_str(value.trim()).expect("a header value"));
    }
    let chunked = headers.get("transfer-encoding").is_some_and(|v| v == "chunked");
    let body = if chunked { unchunk(body) } else { body.to_owned() };
    let body = if body.is_empty() { Value::Null } else { serde_json::from_str(&body).unwrap_or(Value::String(body)) };
    Reply { status: StatusCode::from_bytes(status.as_bytes()).expect("a status"), headers, body }
}

/// The payload of a chunked body.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A 400 in Vault's format naming what is wrong with the path.
fn assert_refused(reply: &Reply, what: &str) {
    assert_eq!(reply.status, 400, "{what}: {:?}", reply.body);
    assert_eq!(reply.headers["content-type"], "application/json", "{what}");
    let errors = reply.body["errors"].as_array().unwrap_or_else(|| panic!("{what}: {:?}", reply.body));
    assert_eq!(errors.len(), 1, "{what}: {errors:?}");
    assert!(first_error(reply).contains("path"), "{what}: {:?}", reply.body);
}

/// Root writes role `name` as a federation-token role with `arn` as its policy.
async fn federated_role(root: &Vault<'_>, name: &str, arn: &str) {
    root.write(&format!("aws/roles/{name}"), json!({"credential_type": "federation_token", "policy_arns": [arn]}))
        .await;
}

const READ_ONLY: &str = "arn:aws:iam::aws:policy/ReadOnlyAccess";
const ADMINISTRATOR: &str = "arn:aws:iam::aws:policy/AdministratorAccess";

/// `aws/*` readable, `aws/roles/secret` denied: the policy of the issue's report.
const ALL_BUT_SECRET: &str = r#"
path "aws/*" { capabilities = ["read", "list"] }
path "aws/roles/secret" { capabilities = ["deny"] }
"#;

// ----- one path for the check and for the route -----

#[tokio::test]
async fn an_empty_segment_is_refused_before_the_policy_is_checked() {
    let app = broker().await;
    federated_role(&Vault::root(&app), "secret", READ_ONLY).await;
    let reader = token_with(&app, "all-but-secret", ALL_BUT_SECRET).await;
    assert_eq!(reader.get("aws/roles/secret").await.status, 403);

    for path in ["aws//roles/secret", "aws/roles//secret", "aws/roles/secret//"] {
        assert_refused(&reader.get(path).await, path);
    }
    assert_refused(&raw(&app, "GET", "/v1//aws/roles/secret", &reader.token).await, "a leading empty segment");
    let written = reader.post("aws//roles/secret", json!({"policy_arns": [ADMINISTRATOR]})).await;
    assert_refused(&written, "a write");
    let role = Vault::root(&app).get("aws/roles/secret").await;
    assert_eq!(role.body["data"]["policy_arns"], json!([READ_ONLY]), "{:?}", role.body);
    app.stop().await;
}

#[tokio::test]
async fn dot_segments_are_refused_however_they_are_spelled() {
    let app = broker().await;
    federated_role(&Vault::root(&app), "secret", READ_ONLY).await;
    let reader = token_with(&app, "all-but-secret", ALL_BUT_SECRET).await;
    for target in [
        "/v1/aws/./roles/secret",
        "/v1/aws/roles/./secret",
        "/v1/aws/roles/x/../secret",
        "/v1/aws/roles/secret/..",
        "/v1/aws/roles/%2e/secret",
        "/v1/aws/roles/x/%2e%2E/secret",
        "/v1/aws/roles/x/.%2e/secret",
        "/v1/aws/roles/x/%2E./secret",
    ] {
        assert_refused(&raw(&app, "GET", target, &reader.token).await, target);
        assert_refused(&raw(&app, "GET", target, ROOT).await, target);
    }
    app.stop().await;
}

#[tokio::test]
async fn an_encoded_slash_inside_a_segment_is_refused() {
    let app = broker().await;
    federated_role(&Vault::root(&app), "secret", READ_ONLY).await;
    let reader = token_with(&app, "all-but-secret", ALL_BUT_SECRET).await;
    for path in ["aws/roles%2Fsecret", "aws%2froles/secret", "aws/roles/x%2F..%2Fsecret"] {
        assert_refused(&reader.get(path).await, path);
        assert_refused(&Vault::root(&app).get(path).await, path);
    }
    app.stop().await;
}

#[tokio::test]
async fn one_trailing_slash_is_taken_as_vaults_list_sends_it_and_no_more() {
    let app = broker().await;
    let root = Vault::root(&app);
    federated_role(&root, "deploy", READ_ONLY).await;
    let lister = token_with(&app, "lister", r#"path "aws/roles/*" { capabilities = ["list"] }"#).await;
    for vault in [&root, &lister] {
        let listed = vault.list("aws/roles/").await;
        assert_eq!(listed.status, 200, "{:?}", listed.body);
        assert_eq!(listed.body["data"]["keys"], json!(["deploy"]));
        assert_eq!(vault.get("aws/roles/?list=true").await.status, 200);
    }
    let policies = root.list("sys/policies/acl/").await;
    assert_eq!(policies.status, 200, "{:?}", policies.body);
    assert_eq!(root.get("aws/roles/deploy/").await.status, 200, "a read takes the slash too");
    for path in ["aws/roles//", "sys/policies/acl//"] {
        assert_refused(&root.list(path).await, path);
    }
    app.stop().await;
}

#[tokio::test]
async fn sys_paths_are_refused_the_same_way() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("ops", r#"path "aws/*" { capabilities = ["read"] }"#).await;
    for path in
        ["sys//mounts", "sys/mounts//aws", "sys/policies/acl//ops", "sys/policy%2Fops", "auth//token/lookup-self"]
    {
        assert_refused(&root.get(path).await, path);
    }
    for target in ["/v1/sys/mounts/./aws", "/v1/sys/policies/acl/%2e%2e", "/v1/sys/policy/x/../ops"] {
        assert_refused(&raw(&app, "GET", target, ROOT).await, target);
    }
    let written =
        root.post("sys//policies/acl/ops", json!({"policy": r#"path "*" { capabilities = ["sudo"] }"#})).await;
    assert_refused(&written, "a policy write");
    let mounted = raw(&app, "POST", "/v1/sys/mounts/team/./aws", ROOT).await;
    assert_refused(&mounted, "a mount");
    assert!(root.get("sys/mounts").await.body["data"].get("team/aws/").is_none());
    app.stop().await;
}

#[tokio::test]
async fn a_refused_path_is_refused_before_the_token_is_read() {
    let app = broker().await;
    let reply = send(&app, "GET", "aws//roles/secret", &[], None).await;
    assert_refused(&reply, "without a token");
    app.stop().await;
}

// ----- create is not update -----

#[tokio::test]
async fn a_create_only_token_cannot_rewrite_an_existing_role() {
    let app = broker().await;
    let root = Vault::root(&app);
    federated_role(&root, "dev", READ_ONLY).await;
    let creator = token_with(&app, "creator", r#"path "aws/roles/*" { capabilities = ["create"] }"#).await;

    let rewrite = creator.post("aws/roles/dev", json!({"policy_arns": [ADMINISTRATOR]})).await;
    assert_eq!(rewrite.status, 403, "{:?}", rewrite.body);
    let dev = root.get("aws/roles/dev").await;
    assert_eq!(dev.body["data"]["policy_arns"], json!([READ_ONLY]), "{:?}", dev.body);

    let put = creator.call("PUT", "aws/roles/dev", Some(json!({"policy_arns": [ADMINISTRATOR]}))).await;
    assert_eq!(put.status, 403, "PUT is a write as POST is: {:?}", put.body);

    let created = creator.post("aws/roles/new", json!({"credential_type": "session_token"})).await;
    assert_eq!(created.status, 204, "{:?}", created.body);
    let again = creator.post("aws/roles/new", json!({"policy_arns": [ADMINISTRATOR]})).await;
    assert_eq!(again.status, 403, "once it exists, it is an update: {:?}", again.body);
    app.stop().await;
}

#[tokio::test]
async fn an_update_only_token_updates_existing_roles_but_cannot_create_one() {
    let app = broker().await;
    let root = Vault::root(&app);
    federated_role(&root, "dev", READ_ONLY).await;
    let updater = token_with(&app, "updater", r#"path "aws/roles/*" { capabilities = ["update"] }"#).await;

    let updated = updater.post("aws/roles/dev", json!({"default_sts_ttl": "1h"})).await;
    assert_eq!(updated.status, 204, "{:?}", updated.body);
    let created = updater.post("aws/roles/new", json!({"credential_type": "session_token"})).await;
    assert_eq!(created.status, 403, "{:?}", created.body);
    assert_eq!(root.get("aws/roles/new").await.status, 404);
    app.stop().await;
}

#[tokio::test]
async fn a_token_with_create_and_update_writes_new_and_existing_roles() {
    let app = broker().await;
    let root = Vault::root(&app);
    federated_role(&root, "dev", READ_ONLY).await;
    let writer = token_with(&app, "writer", r#"path "aws/roles/*" { capabilities = ["create", "update"] }"#).await;
    writer.write("aws/roles/dev", json!({"policy_arns": [ADMINISTRATOR]})).await;
    writer.write("aws/roles/new", json!({"credential_type": "session_token"})).await;
    assert_eq!(root.get("aws/roles/new").await.status, 200);
    app.stop().await;
}

#[tokio::test]
async fn config_root_and_config_lease_are_created_once_then_updated() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("sys/mounts/fresh", json!({"type": "aws"})).await;
    root.write("sys/mounts/configured", json!({"type": "aws"})).await;
    root.write("configured/config/root", json!({"region": "eu-west-1"})).await;
    root.write("configured/config/lease", json!({"lease": "1h", "lease_max": "2h"})).await;
    let creator = token_with(&app, "creator", r#"path "+/config/*" { capabilities = ["create"] }"#).await;
    let updater = token_with(&app, "updater", r#"path "+/config/*" { capabilities = ["update"] }"#).await;
    let writes = [("root", json!({"region": "us-west-2"})), ("lease", json!({"lease": "2h", "lease_max": "3h"}))];

    for (config, body) in &writes {
        let (fresh, configured) = (format!("fresh/config/{config}"), format!("configured/config/{config}"));
        assert_eq!(updater.post(&fresh, body.clone()).await.status, 403, "update-only on a new {fresh}");
        assert_eq!(creator.post(&configured, body.clone()).await.status, 403, "create-only on {configured}");
        assert_eq!(updater.post(&configured, body.clone()).await.status, 204, "update on {configured}");
        assert_eq!(creator.post(&fresh, body.clone()).await.status, 204, "create on a new {fresh}");
        assert_eq!(creator.post(&fresh, body.clone()).await.status, 403, "{fresh} now exists");
    }
    assert_eq!(root.get("configured/config/root").await.body["data"]["region"], "us-west-2");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn static_roles_need_create_when_new_and_update_when_they_exist() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let user = format!("hangar-paths-{}", suffix());
    aws.create_user(&user).await;
    root.write("aws/static-roles/app", json!({"username": user, "rotation_period": "1h"})).await;
    let creator = token_with(&app, "creator", r#"path "aws/static-roles/*" { capabilities = ["create"] }"#).await;
    let updater = token_with(&app, "updater", r#"path "aws/static-roles/*" { capabilities = ["update"] }"#).await;

    let rewrite = creator.post("aws/static-roles/app", json!({"rotation_period": "2h"})).await;
    assert_eq!(rewrite.status, 403, "{:?}", rewrite.body);
    let new = json!({"username": user, "rotation_period": "1h"});
    assert_eq!(updater.post("aws/static-roles/other", new.clone()).await.status, 403);
    assert_eq!(root.get("aws/static-roles/other").await.status, 404);

    let updated = updater.post("aws/static-roles/app", json!({"rotation_period": "2h"})).await;
    assert_eq!(updated.status, 204, "{:?}", updated.body);
    let created = creator.post("aws/static-roles/other", new).await;
    assert_eq!(created.status, 204, "{:?}", created.body);
    app.stop().await;
}

#[tokio::test]
async fn acl_policies_need_create_when_new_and_update_when_they_exist() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("existing", r#"path "aws/roles/*" { capabilities = ["read"] }"#).await;
    let grant = r#"path "aws/*" { capabilities = ["sudo"] }"#;
    let creator = token_with(
        &app,
        "creator",
        r#"
path "sys/policies/acl/*" { capabilities = ["create"] }
path "sys/policy/*" { capabilities = ["create"] }
"#,
    )
    .await;
    let updater = token_with(
        &app,
        "updater",
        r#"
path "sys/policies/acl/*" { capabilities = ["update"] }
path "sys/policy/*" { capabilities = ["update"] }
"#,
    )
    .await;

    for prefix in ["sys/policies/acl", "sys/policy"] {
        let existing = format!("{prefix}/existing");
        assert_eq!(creator.post(&existing, json!({"policy": grant})).await.status, 403, "create-only on {existing}");
        let new = format!("{prefix}/new-{}", suffix());
        assert_eq!(updater.post(&new, json!({"policy": grant})).await.status, 403, "update-only on {new}");
        assert_eq!(creator.post(&new, json!({"policy": grant})).await.status, 204, "create on {new}");
        let update = updater.post(&existing, json!({"policy": r#"path "aws/*" { capabilities = ["read"] }"#})).await;
        assert_eq!(update.status, 204, "update on {existing}: {:?}", update.body);
    }
    app.stop().await;
}

#[tokio::test]
async fn mounts_need_create_when_new_and_update_when_they_exist() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("sys/mounts/team", json!({"type": "aws"})).await;
    let creator = token_with(&app, "creator", r#"path "sys/mounts/*" { capabilities = ["create"] }"#).await;
    let updater = token_with(&app, "updater", r#"path "sys/mounts/*" { capabilities = ["update"] }"#).await;

    let over = creator.post("sys/mounts/team", json!({"type": "aws"})).await;
    assert_eq!(over.status, 403, "create-only on a mounted path: {:?}", over.body);
    let new = updater.post("sys/mounts/other", json!({"type": "aws"})).await;
    assert_eq!(new.status, 403, "update-only on a new mount: {:?}", new.body);
    assert_eq!(creator.post("sys/mounts/other", json!({"type": "aws"})).await.status, 204);
    let in_use = updater.post("sys/mounts/team", json!({"type": "aws"})).await;
    assert_eq!(in_use.status, 400, "allowed, then refused as in use: {:?}", in_use.body);
    app.stop().await;
}

#[tokio::test]
async fn credentials_and_other_actions_need_update_not_create() {
    let app = broker().await;
    let creator = token_with(
        &app,
        "creator",
        r#"
path "aws/creds/*" { capabilities = ["create"] }
path "aws/sts/*" { capabilities = ["create"] }
path "aws/config/rotate-root" { capabilities = ["create"] }
"#,
    )
    .await;
    let updater = token_with(&app, "updater", r#"path "aws/creds/*" { capabilities = ["update"] }"#).await;
    for path in ["aws/creds/missing", "aws/sts/missing", "aws/config/rotate-root"] {
        let reply = creator.post(path, json!({})).await;
        assert_eq!(reply.status, 403, "create-only on {path}: {:?}", reply.body);
    }
    let allowed = updater.post("aws/creds/missing", json!({})).await;
    assert_eq!(allowed.status, 400, "allowed, then the role is missing: {:?}", allowed.body);
    app.stop().await;
}

/// `sys/policy/{name}` writes the same policies as `sys/policies/acl/{name}`, but a request is
/// checked on the path it came by, as Vault checks it: a deny there holds.
#[tokio::test]
async fn a_policy_written_by_the_older_path_is_checked_on_that_path() {
    let app = broker().await;
    let grant = r#"path "aws/*" { capabilities = ["read"] }"#;
    let writer = token_with(
        &app,
        "writer",
        r#"
path "sys/*" { capabilities = ["create", "update", "delete"] }
path "sys/policy/*" { capabilities = ["deny"] }
"#,
    )
    .await;
    assert_eq!(writer.post("sys/policy/other", json!({"policy": grant})).await.status, 403);
    assert_eq!(writer.delete("sys/policy/writer").await.status, 403);
    assert_eq!(writer.post("sys/policies/acl/other", json!({"policy": grant})).await.status, 204);
    app.stop().await;
}

/// `LIST` is checked on `<path>/`, so a path naming one object must not list it: with a deny on
/// `aws/roles/prod`, a token that may read and list `aws/*` would otherwise read the role, and a
/// list-only token every role and `config/root`. Only directories list, as in Vault.
#[tokio::test]
async fn list_on_an_object_path_reads_nothing_past_a_deny() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("aws/roles/prod", json!({"credential_type": "federation_token", "policy_arns": [READ_ONLY]})).await;
    root.write("aws/config/root", json!({"access_key": "AKIAEXAMPLE", "secret_key": "s", "region": "us-east-1"})).await;
    root.write("aws/config/lease", json!({"lease": "1h", "lease_max": "2h"})).await;
    let denied = r#"
        path "aws/*" { capabilities = ["read", "list"] }
        path "aws/roles/prod" { capabilities = ["deny"] }
    "#;
    let reader = token_with(&app, "list-past-deny", denied).await;
    let lister = token_with(&app, "list-only", r#"path "aws/*" { capabilities = ["list"] }"#).await;

    assert_eq!(reader.get("aws/roles/prod").await.status, 403, "the deny holds for a read");
    for vault in [&reader, &lister] {
        for path in ["aws/roles/prod", "aws/config/root", "aws/config/lease"] {
            for reply in [vault.list(path).await, vault.get(&format!("{path}?list=true")).await] {
                assert_eq!(reply.status, 405, "{path}: {:?}", reply.body);
                let shown = reply.body.to_string();
                assert!(!shown.contains("AKIAEXAMPLE") && !shown.contains(READ_ONLY), "{path}: {shown}");
            }
        }
    }
    // The directory still lists.
    assert_eq!(lister.list("aws/roles").await.body["data"]["keys"], json!(["prod"]));
    app.stop().await;
}
