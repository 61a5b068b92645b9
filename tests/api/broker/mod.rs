//! The credential broker over HTTP, as Vault clients drive it: Vault's conventions (envelope,
//! errors, LIST, tokens), service tokens, ACL policies, mounts, `config/root` and
//! `config/lease`, roles, credentials of all four types against the AWS emulator (checked in
//! IAM itself), leases, static roles and their scheduled rotation, and `config/rotate-root`.

mod acl;
mod bounds;
mod failures;
mod faults;
mod iam_policy;
mod invalid_roles;
mod jwt_auth;
mod lease_prefixes;
mod limits;
mod paths;
mod run_credentials;
mod static_roles;
mod sts;
mod token_parameters;
mod tokens;
mod workload_identity;

use std::time::{SystemTime, UNIX_EPOCH};

use hangar::config::Config;
use hangar::ids::random_token;
use hangar_tests::{moto, Moto, Reply, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const ROOT: &str = "root-token";
const ACCOUNT: &str = "123456789012";
const DOCUMENT: &str =
    r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#;

/// dev-server with a known broker root token.
async fn broker() -> TestApp {
    TestApp::spawn_with(Config { root_service_token: Some(ROOT.into()), ..Config::default() }).await
}

/// The emulator, and dev-server's broker with its `aws` mount pointed at it.
async fn broker_on_moto() -> (Aws, TestApp) {
    let aws = aws().await;
    let app = broker().await;
    aws.configure(&Vault::root(&app), "aws").await;
    (aws, app)
}

/// Sends a request to `/v1/<path>` with the given headers and JSON body.
async fn send(app: &TestApp, method: &str, path: &str, headers: &[(&str, &str)], body: Option<Value>) -> Reply {
    let method = Method::from_bytes(method.as_bytes()).expect("a method");
    let mut request = app.client.request(method, format!("{}/v1/{}", app.url, path.trim_start_matches('/')));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.header("Content-Type", "application/json").body(body.to_string());
    }
    Reply::read(request.send().await.expect("the request reaches dev-server")).await
}

/// A Vault client: one token, sent as `X-Vault-Token`.
struct Vault<'a> {
    app: &'a TestApp,
    token: String,
}

impl<'a> Vault<'a> {
    fn new(app: &'a TestApp, token: &str) -> Self {
        Vault { app, token: token.to_owned() }
    }

    fn root(app: &'a TestApp) -> Self {
        Self::new(app, ROOT)
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        send(self.app, method, path, &[("X-Vault-Token", &self.token)], body).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.call("GET", path, None).await
    }

    async fn list(&self, path: &str) -> Reply {
        self.call("LIST", path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> Reply {
        self.call("POST", path, Some(body)).await
    }

    async fn delete(&self, path: &str) -> Reply {
        self.call("DELETE", path, None).await
    }

    /// POSTs and expects 204 (or 200).
    async fn write(&self, path: &str, body: Value) {
        let reply = self.post(path, body).await;
        assert!(matches!(reply.status.as_u16(), 200 | 204), "writing {path}: {} {:?}", reply.status, reply.body);
    }

    /// Creates a child token and returns its secret.
    async fn token(&self, policies: &[&str], display_name: &str) -> String {
        let reply = self.post("auth/token/create", json!({"policies": policies, "display_name": display_name})).await;
        assert_eq!(reply.status, 200, "creating a token: {:?}", reply.body);
        reply.body["auth"]["client_token"].as_str().expect("a client token").to_owned()
    }

    async fn policy(&self, name: &str, hcl: &str) {
        self.write(&format!("sys/policies/acl/{name}"), json!({"policy": hcl})).await;
    }
}

fn first_error(reply: &Reply) -> String {
    reply.body["errors"][0].as_str().unwrap_or_default().to_owned()
}

fn suffix() -> String {
    random_token(10).to_lowercase()
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs() as i64
}

// ----- the AWS emulator -----

/// The emulator, with an IAM client for checking what the broker did there.
struct Aws {
    endpoint: String,
    iam: aws_sdk_iam::Client,
}

/// The emulator of `HANGAR_TEST_MOTO_ENDPOINT`; a failure when it is unset, so every test that
/// calls it (or [`broker_on_moto`]) is `#[ignore = "needs the AWS emulator"]`.
async fn aws() -> Aws {
    let Moto { endpoint, sdk } = moto::moto().await;
    Aws { endpoint, iam: aws_sdk_iam::Client::new(&sdk) }
}

impl Aws {
    /// Points a mount's engine at the emulator.
    async fn configure(&self, vault: &Vault<'_>, mount: &str) {
        vault
            .write(
                &format!("{mount}/config/root"),
                json!({
                    "access_key": moto::ACCESS_KEY,
                    "secret_key": moto::SECRET_KEY,
                    "region": moto::REGION,
                    "iam_endpoint": self.endpoint,
                    "sts_endpoint": self.endpoint,
                }),
            )
            .await;
    }

    async fn create_user(&self, name: &str) {
        self.iam.create_user().user_name(name).send().await.expect("CreateUser");
    }

    /// Creates an access key; returns (id, secret).
    async fn create_key(&self, user: &str) -> (String, String) {
        let output = self.iam.create_access_key().user_name(user).send().await.expect("CreateAccessKey");
        let key = output.access_key().expect("a key");
        (key.access_key_id().to_owned(), key.secret_access_key().to_owned())
    }

    async fn create_policy(&self, name: &str) -> String {
        let output =
            self.iam.create_policy().policy_name(name).policy_document(DOCUMENT).send().await.expect("CreatePolicy");
        output.policy().and_then(|p| p.arn()).expect("a policy ARN").to_owned()
    }

    async fn create_group(&self, name: &str) {
        self.iam.create_group().group_name(name).send().await.expect("CreateGroup");
    }

    async fn user_exists(&self, name: &str) -> bool {
        match self.iam.get_user().user_name(name).send().await {
            Ok(_) => true,
            Err(e) => {
                let e = e.into_service_error();
                assert!(e.is_no_such_entity_exception(), "GetUser {name}: {e:?}");
                false
            }
        }
    }

    async fn users_under(&self, path: &str) -> Vec<String> {
        let output = self.iam.list_users().path_prefix(path).send().await.expect("ListUsers");
        output.users().iter().map(|u| u.user_name().to_owned()).collect()
    }

    async fn access_keys(&self, user: &str) -> Vec<String> {
        let output = self.iam.list_access_keys().user_name(user).send().await.expect("ListAccessKeys");
        output.access_key_metadata().iter().filter_map(|k| k.access_key_id()).map(str::to_owned).collect()
    }

    async fn owner_of_key(&self, key: &str) -> String {
        let output = self.iam.get_access_key_last_used().access_key_id(key).send().await.expect("GetAccessKeyLastUsed");
        output.user_name().expect("the key's user").to_owned()
    }
}

/// IAM returns inline policy documents URL-encoded.
fn url_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%' && i + 2 < bytes.len())
            .then(|| std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|hex| u8::from_str_radix(hex, 16).ok()))
            .flatten();
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes `role` (such as `aws/roles/deploy`) as an `iam_user` role with the test policy, its
/// users under a fresh IAM path `/hangar-<label>-…/`; returns that path.
async fn iam_user_role(root: &Vault<'_>, role: &str, label: &str) -> String {
    let path = format!("/hangar-{label}-{}/", suffix());
    root.write(role, json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "user_path": path})).await;
    path
}

// ----- Vault's conventions -----

#[tokio::test]
async fn responses_carry_vaults_envelope_fields() {
    let app = broker().await;
    let root = Vault::root(&app);
    let reply = root.get("aws/config/lease").await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.headers["content-type"], "application/json");
    let body = reply.body.as_object().expect("an object");
    for field in ["request_id", "lease_id", "renewable", "lease_duration", "data", "warnings", "wrap_info", "auth"] {
        assert!(body.contains_key(field), "the envelope has {field}: {body:?}");
    }
    assert!(!body["request_id"].as_str().expect("a request id").is_empty());
    assert_eq!(body["lease_id"], "");
    assert_eq!(body["renewable"], false);
    assert_eq!(body["lease_duration"], 0);
    assert!(body["data"].is_object());
    let again = root.get("aws/config/lease").await;
    assert_ne!(again.body["request_id"], body["request_id"], "each request has its own id");
    app.stop().await;
}

#[tokio::test]
async fn errors_are_a_json_list_of_messages() {
    let app = broker().await;
    let root = Vault::root(&app);
    let invalid = root.post("aws/config/lease", json!({"lease": "1h"})).await;
    assert_eq!(invalid.status, 400);
    assert_eq!(invalid.headers["content-type"], "application/json");
    let errors = invalid.body["errors"].as_array().expect("an errors list");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].as_str().expect("a message").contains("lease_max"), "{errors:?}");
    assert_eq!(invalid.body.as_object().map(|o| o.len()), Some(1), "only `errors`: {:?}", invalid.body);

    let missing = root.get("aws/roles/nobody").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.headers["content-type"], "application/json");
    assert!(missing.body["errors"].is_array(), "{:?}", missing.body);

    let denied = send(&app, "GET", "aws/roles/nobody", &[], None).await;
    assert_eq!(denied.body, json!({"errors": ["permission denied"]}));
    app.stop().await;
}

#[tokio::test]
async fn the_list_verb_and_get_with_list_true_both_list() {
    let app = broker().await;
    let root = Vault::root(&app);
    for name in ["deploy", "audit"] {
        root.write(&format!("aws/roles/{name}"), json!({"credential_type": "session_token"})).await;
    }
    let by_verb = root.list("aws/roles").await;
    assert_eq!(by_verb.status, 200, "{:?}", by_verb.body);
    let by_query = root.get("aws/roles?list=true").await;
    assert_eq!(by_query.status, 200, "{:?}", by_query.body);
    for reply in [&by_verb, &by_query] {
        let mut keys: Vec<&str> =
            reply.body["data"]["keys"].as_array().expect("keys").iter().filter_map(Value::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["audit", "deploy"]);
    }
    root.policy("ops", r#"path "aws/*" { capabilities = ["read"] }"#).await;
    for (how, reply) in [
        ("GET ?list=true", root.get("sys/policies/acl?list=true").await),
        ("LIST", root.list("sys/policies/acl").await),
    ] {
        assert_eq!(reply.status, 200, "{how} sys/policies/acl: {:?}", reply.body);
        assert!(reply.body["data"]["keys"].as_array().expect("keys").contains(&json!("ops")), "{:?}", reply.body);
    }
    app.stop().await;
}

/// Vault answers a LIST that finds nothing with 404 (`vault list` prints "No value found").
#[tokio::test]
async fn listing_roles_of_a_mount_without_any_is_404_as_in_vault() {
    let app = broker().await;
    let root = Vault::root(&app);
    let empty = root.list("aws/roles").await;
    assert_eq!(empty.status, 404, "{:?}", empty.body);
    assert_eq!(empty.body, json!({"errors": []}));
    app.stop().await;
}

#[tokio::test]
async fn a_wrong_method_is_405_in_vaults_format() {
    let app = broker().await;
    let root = Vault::root(&app);
    let cases = [
        ("DELETE", "aws/config/lease", "GET,POST,PUT"),
        ("DELETE", "aws/config/root", "GET,POST,PUT"),
        ("DELETE", "aws/creds/deploy", "GET,POST,PUT"),
        ("POST", "aws/static-creds/app", "GET"),
        ("PATCH", "sys/mounts", "GET,HEAD"),
    ];
    for (method, path, allow) in cases {
        let reply = root.call(method, path, None).await;
        assert_eq!(reply.status, 405, "{method} {path}: {:?}", reply.body);
        assert_eq!(reply.headers["content-type"], "application/json", "{method} {path}");
        assert_eq!(reply.headers["allow"], allow, "{method} {path}: the methods it takes, as RFC 9110 asks");
        assert!(reply.body["errors"].is_array(), "{method} {path}: {:?}", reply.body);
    }
    app.stop().await;
}

#[tokio::test]
async fn requests_without_a_token_or_with_a_bad_one_are_403() {
    let app = broker().await;
    for path in ["aws/roles/deploy", "aws/config/root", "sys/mounts", "auth/token/lookup-self"] {
        let none = send(&app, "GET", path, &[], None).await;
        assert_eq!(none.status, 403, "{path} without a token: {:?}", none.body);
        let bad = send(&app, "GET", path, &[("X-Vault-Token", "hvs.not-a-token")], None).await;
        assert_eq!(bad.status, 403, "{path} with a bad token: {:?}", bad.body);
        assert_eq!(bad.body, json!({"errors": ["permission denied"]}));
    }
    let write = send(&app, "POST", "aws/roles/deploy", &[], Some(json!({"credential_type": "session_token"}))).await;
    assert_eq!(write.status, 403);
    app.stop().await;
}

#[tokio::test]
async fn x_service_token_works_like_x_vault_token() {
    let app = broker().await;
    let written = send(
        &app,
        "POST",
        "aws/roles/deploy",
        &[("X-Service-Token", ROOT)],
        Some(json!({"credential_type": "session_token"})),
    )
    .await;
    assert_eq!(written.status, 204, "{:?}", written.body);
    let read = send(&app, "GET", "aws/roles/deploy", &[("X-Service-Token", ROOT)], None).await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["data"]["credential_types"], json!(["session_token"]));
    let me = send(&app, "GET", "auth/token/lookup-self", &[("X-Service-Token", ROOT)], None).await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert!(me.body["data"]["policies"].as_array().expect("policies").contains(&json!("root")));
    app.stop().await;
}

// ----- tokens -----

#[tokio::test]
async fn a_created_token_carries_its_policies_ttl_and_display_name() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("dev", r#"path "aws/roles/*" { capabilities = ["read"] }"#).await;
    let created = root.post("auth/token/create", json!({"policies": ["dev"], "ttl": "1h", "display_name": "ci"})).await;
    assert_eq!(created.status, 200, "{:?}", created.body);
    let auth = &created.body["auth"];
    let token = auth["client_token"].as_str().expect("a client token");
    assert!(!token.is_empty() && token != ROOT);
    assert!(auth["policies"].as_array().expect("policies").contains(&json!("dev")), "{auth}");
    assert_eq!(auth["lease_duration"], 3600);
    assert_eq!(auth["renewable"], true);

    let me = Vault::new(&app, token).get("auth/token/lookup-self").await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    let data = &me.body["data"];
    assert_eq!(data["display_name"], "token-ci");
    let policies = data["policies"].as_array().expect("policies");
    assert!(policies.contains(&json!("dev")) && policies.contains(&json!("default")), "{policies:?}");
    let ttl = data["ttl"].as_i64().expect("a ttl");
    assert!((3590..=3600).contains(&ttl), "{ttl}");
    app.stop().await;
}

#[tokio::test]
async fn a_child_token_cannot_get_a_policy_its_parent_lacks() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy("creator", r#"path "auth/token/create" { capabilities = ["update"] }"#).await;
    root.policy("admin", r#"path "*" { capabilities = ["create", "read", "update", "delete", "list"] }"#).await;
    let parent_token = root.token(&["creator"], "parent").await;
    let parent = Vault::new(&app, &parent_token);

    let escalation = parent.post("auth/token/create", json!({"policies": ["admin"]})).await;
    assert_eq!(escalation.status, 400, "{:?}", escalation.body);
    assert!(first_error(&escalation).contains("subset"), "{:?}", escalation.body);

    let same = parent.post("auth/token/create", json!({"policies": ["creator"]})).await;
    assert_eq!(same.status, 200, "a parent may hand out its own policies: {:?}", same.body);
    let root_child = parent.post("auth/token/create", json!({"policies": ["root"]})).await;
    assert_eq!(root_child.status, 400, "{:?}", root_child.body);
    app.stop().await;
}

#[tokio::test]
async fn a_token_that_revoked_itself_is_refused_afterwards() {
    let app = broker().await;
    let root = Vault::root(&app);
    let token = root.token(&["default"], "short").await;
    let child = Vault::new(&app, &token);
    assert_eq!(child.get("auth/token/lookup-self").await.status, 200);
    let revoked = child.post("auth/token/revoke-self", json!({})).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    let after = child.get("auth/token/lookup-self").await;
    assert_eq!(after.status, 403, "{:?}", after.body);
    assert_eq!(root.get("auth/token/lookup-self").await.status, 200, "only that token is revoked");
    app.stop().await;
}

// ----- ACL policies -----

#[tokio::test]
async fn acl_policies_are_written_read_listed_and_deleted() {
    let app = broker().await;
    let root = Vault::root(&app);
    let hcl = "path \"aws/creds/deploy\" {\n  capabilities = [\"read\"]\n}\n";
    let written = root.post("sys/policies/acl/deployer", json!({"policy": hcl})).await;
    assert_eq!(written.status, 204, "{:?}", written.body);
    let read = root.get("sys/policies/acl/deployer").await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["data"]["name"], "deployer");
    assert_eq!(read.body["data"]["policy"], hcl);

    // (The LIST verb is covered with the other listing conventions.)
    let listed = root.get("sys/policies/acl?list=true").await;
    let keys = listed.body["data"]["keys"].as_array().expect("keys").clone();
    for name in ["default", "deployer", "root"] {
        assert!(keys.contains(&json!(name)), "{name} in {keys:?}");
    }
    let bad = root.post("sys/policies/acl/broken", json!({"policy": "path \"x\" { capabilities = [\"fly\"] }"})).await;
    assert_eq!(bad.status, 400, "{:?}", bad.body);

    assert_eq!(root.delete("sys/policies/acl/deployer").await.status, 204);
    assert_eq!(root.get("sys/policies/acl/deployer").await.status, 404);
    let after = root.get("sys/policies/acl?list=true").await;
    assert!(!after.body["data"]["keys"].as_array().expect("keys").contains(&json!("deployer")));
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_token_with_read_on_creds_of_deploy_gets_them_but_cannot_read_roles() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let path = iam_user_role(&root, "aws/roles/deploy", "acl").await;
    root.write("aws/roles/other", json!({"credential_type": "session_token"})).await;
    root.policy("deployer", r#"path "aws/creds/deploy" { capabilities = ["read"] }"#).await;
    let token = root.token(&["deployer"], "ci").await;
    let ci = Vault::new(&app, &token);

    let creds = ci.get("aws/creds/deploy").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    assert!(creds.body["data"]["access_key"].is_string());
    let users = aws.users_under(&path).await;
    assert_eq!(users.len(), 1, "{users:?}");
    assert!(users[0].contains("token-ci-deploy"), "the caller's display name is in the username: {users:?}");

    assert_eq!(ci.get("aws/roles/deploy").await.status, 403);
    assert_eq!(ci.get("aws/creds/other").await.status, 403);
    assert_eq!(ci.post("aws/creds/deploy", json!({})).await.status, 403, "read does not grant update");
    assert_eq!(ci.get("aws/config/root").await.status, 403);
    assert_eq!(ci.get("sys/mounts").await.status, 403);

    let lease = creds.body["lease_id"].as_str().expect("a lease");
    root.write("sys/leases/revoke", json!({"lease_id": lease})).await;
    app.stop().await;
}

#[tokio::test]
async fn star_globs_match_prefixes_and_plus_globs_one_segment() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("sys/mounts/team", json!({"type": "aws"})).await;
    root.write("sys/mounts/a/b", json!({"type": "aws"})).await;
    for mount in ["aws", "team", "a/b"] {
        for role in ["deploy", "deployer", "other"] {
            root.write(&format!("{mount}/roles/{role}"), json!({"credential_type": "session_token"})).await;
        }
    }
    root.policy("star", r#"path "aws/roles/dep*" { capabilities = ["read"] }"#).await;
    root.policy("plus", r#"path "+/roles/deploy" { capabilities = ["read"] }"#).await;
    let (star_token, plus_token) = (root.token(&["star"], "star").await, root.token(&["plus"], "plus").await);
    let (star, plus) = (Vault::new(&app, &star_token), Vault::new(&app, &plus_token));

    assert_eq!(star.get("aws/roles/deploy").await.status, 200);
    assert_eq!(star.get("aws/roles/deployer").await.status, 200);
    assert_eq!(star.get("aws/roles/other").await.status, 403);
    assert_eq!(star.get("team/roles/deploy").await.status, 403);

    assert_eq!(plus.get("aws/roles/deploy").await.status, 200);
    assert_eq!(plus.get("team/roles/deploy").await.status, 200);
    assert_eq!(plus.get("aws/roles/deployer").await.status, 403);
    assert_eq!(plus.get("a/b/roles/deploy").await.status, 403, "+ stands for exactly one segment");
    app.stop().await;
}

/// Vault checks a LIST against the path with a trailing slash (`aws/roles/`), so `aws/roles/*`
/// with `list` lets a token list the roles.
#[tokio::test]
async fn list_on_a_glob_lets_a_token_list_the_paths_below_it() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("aws/roles/deploy", json!({"credential_type": "session_token"})).await;
    root.policy("lister", r#"path "aws/roles/*" { capabilities = ["list"] }"#).await;
    let lister_token = root.token(&["lister"], "lister").await;
    let lister = Vault::new(&app, &lister_token);
    let listed = lister.list("aws/roles").await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(listed.body["data"]["keys"], json!(["deploy"]));
    assert_eq!(lister.get("aws/roles/deploy").await.status, 403, "list does not grant read");
    app.stop().await;
}

#[tokio::test]
async fn deny_beats_a_broader_grant_in_the_same_policy() {
    let app = broker().await;
    let root = Vault::root(&app);
    for role in ["deploy", "secret"] {
        root.write(&format!("aws/roles/{role}"), json!({"credential_type": "session_token"})).await;
    }
    root.policy(
        "mostly",
        r#"
path "aws/roles/*" { capabilities = ["read"] }
path "aws/roles/secret" { capabilities = ["deny"] }
"#,
    )
    .await;
    let token = root.token(&["mostly"], "mostly").await;
    let mostly = Vault::new(&app, &token);
    assert_eq!(mostly.get("aws/roles/deploy").await.status, 200);
    assert_eq!(mostly.get("aws/roles/secret").await.status, 403);
    app.stop().await;
}

/// Vault merges the rules of a token's policies per path; a `deny` on a path wins over any grant
/// on the same path, whichever policy holds which.
#[tokio::test]
async fn deny_in_one_policy_beats_a_grant_in_another_on_the_same_path() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("aws/roles/secret", json!({"credential_type": "session_token"})).await;
    // Both orders of policy names, so the outcome cannot depend on which policy is read first.
    root.policy("a-deny", r#"path "aws/roles/secret" { capabilities = ["deny"] }"#).await;
    root.policy("b-allow", r#"path "aws/roles/secret" { capabilities = ["read"] }"#).await;
    root.policy("c-deny", r#"path "aws/roles/secret" { capabilities = ["deny"] }"#).await;
    for pair in [["a-deny", "b-allow"], ["b-allow", "c-deny"]] {
        let token = root.token(&pair, "pair").await;
        let reply = Vault::new(&app, &token).get("aws/roles/secret").await;
        assert_eq!(reply.status, 403, "policies {pair:?}: {:?}", reply.body);
    }
    app.stop().await;
}

// ----- mounts -----

#[tokio::test]
async fn aws_is_mounted_by_default_and_more_mounts_can_be_added() {
    let app = broker().await;
    let root = Vault::root(&app);
    let mounts = root.get("sys/mounts").await;
    assert_eq!(mounts.status, 200, "{:?}", mounts.body);
    assert_eq!(mounts.body["data"]["aws/"]["type"], "aws");

    let created = root.post("sys/mounts/team/aws", json!({"type": "aws"})).await;
    assert_eq!(created.status, 204, "{:?}", created.body);
    let mounts = root.get("sys/mounts").await;
    assert_eq!(mounts.body["data"]["team/aws/"]["type"], "aws", "{:?}", mounts.body);
    assert_ne!(mounts.body["data"]["team/aws/"]["uuid"], mounts.body["data"]["aws/"]["uuid"]);

    root.write("team/aws/roles/deploy", json!({"credential_type": "session_token"})).await;
    assert_eq!(root.get("team/aws/roles/deploy").await.status, 200);

    let again = root.post("sys/mounts/team/aws", json!({"type": "aws"})).await;
    assert_eq!(again.status, 400, "the path is in use: {:?}", again.body);
    let kv = root.post("sys/mounts/kv", json!({"type": "kv"})).await;
    assert_eq!(kv.status, 400, "only the aws engine: {:?}", kv.body);
    let nowhere = root.get("nowhere/roles/deploy").await;
    assert_eq!(nowhere.status, 404, "{:?}", nowhere.body);
    app.stop().await;
}

#[tokio::test]
async fn roles_of_one_mount_are_invisible_in_another() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("sys/mounts/team/aws", json!({"type": "aws"})).await;
    root.write("team/aws/roles/only-team", json!({"credential_type": "session_token"})).await;
    root.write("aws/roles/only-default", json!({"credential_type": "session_token"})).await;

    assert_eq!(root.get("aws/roles/only-team").await.status, 404);
    assert_eq!(root.get("team/aws/roles/only-default").await.status, 404);
    assert_eq!(root.list("aws/roles").await.body["data"]["keys"], json!(["only-default"]));
    assert_eq!(root.list("team/aws/roles").await.body["data"]["keys"], json!(["only-team"]));
    assert_eq!(root.delete("aws/roles/only-team").await.status, 404);
    assert_eq!(root.get("team/aws/roles/only-team").await.status, 200, "untouched by the other mount's delete");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn unmounting_revokes_its_leases_and_removes_its_roles() {
    let aws = aws().await;
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("sys/mounts/team", json!({"type": "aws"})).await;
    aws.configure(&root, "team").await;
    let path = iam_user_role(&root, "team/roles/deploy", "unmount").await;
    let creds = root.get("team/creds/deploy").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let lease = creds.body["lease_id"].as_str().expect("a lease").to_owned();
    assert!(lease.starts_with("team/creds/deploy/"), "{lease}");
    let users = aws.users_under(&path).await;
    assert_eq!(users.len(), 1);

    let unmounted = root.delete("sys/mounts/team").await;
    assert_eq!(unmounted.status, 204, "{:?}", unmounted.body);
    assert!(!aws.user_exists(&users[0]).await, "the lease's IAM user is deleted with the mount");
    assert!(root.get("sys/mounts").await.body["data"].get("team/").is_none());
    assert_eq!(root.get("team/roles/deploy").await.status, 404);

    root.write("sys/mounts/team", json!({"type": "aws"})).await;
    assert_eq!(root.get("team/roles/deploy").await.status, 404, "a new mount at the same path starts empty");
    let lookup = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert_eq!(lookup.status, 400, "the lease is gone: {:?}", lookup.body);
    app.stop().await;
}

// ----- config/root and config/lease -----

#[tokio::test]
async fn config_root_never_returns_the_secret_key() {
    let app = broker().await;
    let root = Vault::root(&app);
    let secret = format!("s3cr3t-{}", suffix());
    let written = root
        .post(
            "aws/config/root",
            json!({
                "access_key": "AKIAEXAMPLE",
                "secret_key": secret,
                "region": "eu-west-1",
                "iam_endpoint": "http://127.0.0.1:9/iam",
                "sts_endpoint": "http://127.0.0.1:9/sts",
                "max_retries": 3,
            }),
        )
        .await;
    assert_eq!(written.status, 204, "{:?}", written.body);
    let read = root.get("aws/config/root").await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    let data = &read.body["data"];
    assert_eq!(data["access_key"], "AKIAEXAMPLE");
    assert_eq!(data["region"], "eu-west-1");
    assert_eq!(data["iam_endpoint"], "http://127.0.0.1:9/iam");
    assert_eq!(data["sts_endpoint"], "http://127.0.0.1:9/sts");
    assert_eq!(data["max_retries"], 3);
    assert!(data.get("secret_key").is_none(), "{data}");
    assert!(!read.body.to_string().contains(&secret), "the secret appears nowhere: {}", read.body);

    let half = root.post("aws/config/root", json!({"access_key": "AKIAONLY"})).await;
    assert_eq!(half.status, 400, "secret_key must come with access_key: {:?}", half.body);
    app.stop().await;
}

#[tokio::test]
async fn enterprise_only_root_fields_are_refused_on_the_default_edition() {
    let app = broker().await;
    let root = Vault::root(&app);
    for (field, value) in [
        ("role_arn", json!(format!("arn:aws:iam::{ACCOUNT}:role/federated"))),
        ("identity_token_audience", json!("sts.amazonaws.com")),
        ("identity_token_ttl", json!(600)),
    ] {
        let mut body = json!({});
        body[field] = value;
        let reply = root.post("aws/config/root", body).await;
        assert_eq!(reply.status, 400, "{field}: {:?}", reply.body);
        assert!(first_error(&reply).contains(field), "the message names {field}: {:?}", reply.body);
    }
    app.stop().await;
}

#[tokio::test]
async fn the_region_falls_back_to_the_environment_then_us_east_1() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("aws/config/root", json!({"access_key": "AKIAEXAMPLE", "secret_key": "secret"})).await;
    let read = root.get("aws/config/root").await;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let expected = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")).unwrap_or_else(|| "us-east-1".into());
    assert_eq!(read.body["data"]["region"], expected.as_str(), "{:?}", read.body);
    app.stop().await;
}

#[tokio::test]
async fn config_lease_requires_both_fields_and_reads_back_normalized() {
    let app = broker().await;
    let root = Vault::root(&app);
    for body in [json!({"lease": "30m"}), json!({"lease_max": "2h"}), json!({})] {
        let reply = root.post("aws/config/lease", body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {:?}", reply.body);
    }
    let bad = root.post("aws/config/lease", json!({"lease": "30x", "lease_max": "2h"})).await;
    assert_eq!(bad.status, 400, "{:?}", bad.body);

    root.write("aws/config/lease", json!({"lease": "1800s", "lease_max": "2h"})).await;
    let read = root.get("aws/config/lease").await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["data"], json!({"lease": "30m0s", "lease_max": "2h0m0s"}));
    root.write("aws/config/lease", json!({"lease": "90s", "lease_max": "1h30m"})).await;
    assert_eq!(root.get("aws/config/lease").await.body["data"], json!({"lease": "1m30s", "lease_max": "1h30m0s"}));
    app.stop().await;
}

// ----- roles -----

#[tokio::test]
async fn role_writes_are_validated_with_clear_messages() {
    let app = broker().await;
    let root = Vault::root(&app);
    let role_arn = format!("arn:aws:iam::{ACCOUNT}:role/deployer");
    let cases = [
        (json!({"policy_document": DOCUMENT}), "credential_type"),
        (json!({"credential_type": "superuser"}), "credential_type"),
        (json!({"credential_type": "assumed_role"}), "role_arns is required"),
        (json!({"credential_type": "iam_user"}), "at least one of policy_arns or policy_document"),
        (json!({"credential_type": "federation_token"}), "at least one of policy_arns or policy_document"),
        (json!({"credential_type": "session_token", "policy_document": DOCUMENT}), "policy_document"),
        (json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "role_arns": role_arn}), "role_arns"),
        (json!({"credential_type": "iam_user", "policy_document": "{not json"}), "policy_document"),
        (
            json!({"credential_type": "assumed_role", "role_arns": role_arn, "default_sts_ttl": "2h", "max_sts_ttl": "1h"}),
            "max_sts_ttl",
        ),
        (
            json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "default_sts_ttl": "1h"}),
            "default_sts_ttl",
        ),
        (json!({"credential_type": "iam_user", "policy": DOCUMENT}), "legacy"),
    ];
    for (body, words) in cases {
        let reply = root.post("aws/roles/invalid", body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {:?}", reply.body);
        assert!(first_error(&reply).contains(words), "{body}: the message mentions {words:?}: {:?}", reply.body);
    }
    assert_eq!(root.get("aws/roles/invalid").await.status, 404, "nothing was stored");
    app.stop().await;
}

#[tokio::test]
async fn a_role_write_creates_or_updates_keeping_unsent_fields() {
    let app = broker().await;
    let root = Vault::root(&app);
    let arn = format!("arn:aws:iam::{ACCOUNT}:policy/read-only");
    root.write("aws/roles/deploy", json!({"credential_type": "iam_user", "policy_arns": [arn]})).await;
    root.write("aws/roles/deploy", json!({"iam_groups": "ops,dev"})).await;
    root.write("aws/roles/deploy", json!({"policy_document": DOCUMENT})).await;
    let data = root.get("aws/roles/deploy").await.body["data"].clone();
    assert_eq!(data["credential_types"], json!(["iam_user"]));
    assert_eq!(data["policy_arns"], json!([arn]));
    assert_eq!(data["iam_groups"], json!(["ops", "dev"]));
    let document: Value = serde_json::from_str(data["policy_document"].as_str().expect("a document")).expect("JSON");
    assert_eq!(document, serde_json::from_str::<Value>(DOCUMENT).unwrap());

    let invalid = root.post("aws/roles/deploy", json!({"policy_arns": [], "policy_document": ""})).await;
    assert_eq!(invalid.status, 400, "an update is validated as a whole: {:?}", invalid.body);
    assert_eq!(root.get("aws/roles/deploy").await.body["data"]["policy_arns"], json!([arn]), "unchanged");
    app.stop().await;
}

#[tokio::test]
async fn a_role_reads_back_with_its_credential_types_and_lists() {
    let app = broker().await;
    let root = Vault::root(&app);
    let arns = [format!("arn:aws:iam::{ACCOUNT}:role/a"), format!("arn:aws:iam::{ACCOUNT}:role/b")];
    root.write(
        "aws/roles/assume",
        json!({"credential_type": "assumed_role", "role_arns": arns.join(","), "default_sts_ttl": "30m", "max_sts_ttl": 7200}),
    )
    .await;
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;
    let read = root.get("aws/roles/assume").await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    let data = &read.body["data"];
    assert_eq!(data["credential_types"], json!(["assumed_role"]));
    assert_eq!(data["role_arns"], json!(arns));
    assert_eq!(data["policy_arns"], json!([]));
    assert_eq!(data["policy_document"], "");
    assert_eq!(data["iam_groups"], json!([]));
    assert_eq!(data["default_sts_ttl"], 1800);
    assert_eq!(data["max_sts_ttl"], 7200);

    let listed = root.list("aws/roles").await;
    let mut keys: Vec<&str> =
        listed.body["data"]["keys"].as_array().expect("keys").iter().filter_map(Value::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["assume", "session"]);
    assert_eq!(root.delete("aws/roles/session").await.status, 204);
    assert_eq!(root.list("aws/roles").await.body["data"]["keys"], json!(["assume"]));
    app.stop().await;
}

#[tokio::test]
async fn reading_or_deleting_a_missing_role_is_404() {
    let app = broker().await;
    let root = Vault::root(&app);
    assert_eq!(root.get("aws/roles/missing").await.status, 404);
    assert_eq!(root.delete("aws/roles/missing").await.status, 404);
    root.write("aws/roles/once", json!({"credential_type": "session_token"})).await;
    assert_eq!(root.delete("aws/roles/once").await.status, 204);
    assert_eq!(root.delete("aws/roles/once").await.status, 404);
    let creds = root.get("aws/creds/missing").await;
    assert!(creds.status.is_client_error(), "credentials of a missing role: {:?}", creds.body);
    app.stop().await;
}

// ----- dynamic credentials against the emulator -----

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn iam_user_credentials_create_a_user_with_the_roles_policies_groups_and_tags() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let id = suffix();
    let policy_arn = aws.create_policy(&format!("hangar-{id}")).await;
    let group = format!("hangar-{id}");
    aws.create_group(&group).await;
    let path = format!("/hangar-{id}/");
    root.write("aws/config/lease", json!({"lease": "1h", "lease_max": "2h"})).await;
    root.write(
        "aws/roles/deploy",
        json!({
            "credential_type": "iam_user",
            "policy_arns": [policy_arn],
            "policy_document": DOCUMENT,
            "iam_groups": [group],
            "iam_tags": ["team=ops", "env=test"],
            "user_path": path,
        }),
    )
    .await;

    let creds = root.get("aws/creds/deploy").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let lease = creds.body["lease_id"].as_str().expect("a lease id");
    assert!(lease.starts_with("aws/creds/deploy/") && lease.len() > "aws/creds/deploy/".len(), "{lease}");
    assert_eq!(creds.body["renewable"], true);
    assert_eq!(creds.body["lease_duration"], 3600);
    let data = &creds.body["data"];
    let access_key = data["access_key"].as_str().expect("an access key");
    assert!(!data["secret_key"].as_str().expect("a secret key").is_empty());
    assert!(data["session_token"].is_null());

    let users = aws.users_under(&path).await;
    assert_eq!(users.len(), 1, "{users:?}");
    let user = &users[0];
    assert!(user.len() <= 64);
    assert_eq!(aws.access_keys(user).await, [access_key]);
    let attached = aws.iam.list_attached_user_policies().user_name(user).send().await.unwrap();
    let attached: Vec<&str> = attached.attached_policies().iter().filter_map(|p| p.policy_arn()).collect();
    assert_eq!(attached, [policy_arn.as_str()]);
    let inline = aws.iam.list_user_policies().user_name(user).send().await.unwrap();
    assert_eq!(inline.policy_names().len(), 1, "{inline:?}");
    let document =
        aws.iam.get_user_policy().user_name(user).policy_name(&inline.policy_names()[0]).send().await.unwrap();
    let document: Value = serde_json::from_str(&url_decode(document.policy_document())).expect("a JSON policy");
    assert_eq!(document, serde_json::from_str::<Value>(DOCUMENT).unwrap());
    let groups = aws.iam.list_groups_for_user().user_name(user).send().await.unwrap();
    let groups: Vec<&str> = groups.groups().iter().map(|g| g.group_name()).collect();
    assert_eq!(groups, [group.as_str()]);
    let tags = aws.iam.list_user_tags().user_name(user).send().await.unwrap();
    let mut tags: Vec<(String, String)> =
        tags.tags().iter().map(|t| (t.key().to_owned(), t.value().to_owned())).collect();
    tags.sort();
    let request = tags.iter().position(|(key, _)| key == "hangar:request").expect("the write-ahead record's tag");
    assert_eq!(tags.remove(request).1.len(), 20, "a nonce");
    assert_eq!(tags, [("env".to_owned(), "test".to_owned()), ("team".to_owned(), "ops".to_owned())]);

    root.write("sys/leases/revoke", json!({"lease_id": lease})).await;
    assert!(!aws.user_exists(user).await);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_iam_user_lease_is_looked_up_renewed_and_revoked() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/config/lease", json!({"lease": "1h", "lease_max": "2h"})).await;
    let path = iam_user_role(&root, "aws/roles/deploy", "lease").await;
    let creds = root.get("aws/creds/deploy").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let lease = creds.body["lease_id"].as_str().expect("a lease id").to_owned();
    let user = aws.users_under(&path).await.pop().expect("the created user");

    let lookup = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert_eq!(lookup.status, 200, "{:?}", lookup.body);
    assert_eq!(lookup.body["data"]["id"], lease.as_str());
    assert_eq!(lookup.body["data"]["renewable"], true);
    let ttl = lookup.body["data"]["ttl"].as_i64().expect("a ttl");
    assert!((3590..=3600).contains(&ttl), "{ttl}");
    let lookup_put = root.call("PUT", "sys/leases/lookup", Some(json!({"lease_id": lease}))).await;
    assert_eq!(lookup_put.status, 200, "Vault clients send PUT: {:?}", lookup_put.body);

    let renewed = root.call("PUT", "sys/leases/renew", Some(json!({"lease_id": lease, "increment": "30m"}))).await;
    assert_eq!(renewed.status, 200, "{:?}", renewed.body);
    assert_eq!(renewed.body["lease_id"], lease.as_str());
    assert_eq!(renewed.body["renewable"], true);
    assert_eq!(renewed.body["lease_duration"], 1800);
    let capped = root.call("PUT", "sys/leases/renew", Some(json!({"lease_id": lease, "increment": "5h"}))).await;
    assert_eq!(capped.status, 200, "{:?}", capped.body);
    let duration = capped.body["lease_duration"].as_i64().expect("a duration");
    assert!((7190..=7200).contains(&duration), "capped by lease_max: {duration}");
    let after_renewal = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert!(after_renewal.body["data"]["last_renewal"].is_string(), "{:?}", after_renewal.body);

    assert!(aws.user_exists(&user).await);
    let revoked = root.call("PUT", "sys/leases/revoke", Some(json!({"lease_id": lease}))).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    assert!(!aws.user_exists(&user).await, "revoking the lease deletes the IAM user");
    let gone = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert_eq!(gone.status, 400, "{:?}", gone.body);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_expired_lease_is_revoked_by_the_scheduled_run() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/config/lease", json!({"lease": "1s", "lease_max": "1s"})).await;
    let path = iam_user_role(&root, "aws/roles/deploy", "expiry").await;
    let creds = root.get("aws/creds/deploy").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    assert_eq!(creds.body["lease_duration"], 1);
    let user = aws.users_under(&path).await.pop().expect("the created user");
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let state = app.second_state().await;
    let (_, revoked) = hangar::broker::scheduled_run(&state).await.expect("a scheduled run");
    assert_eq!(revoked, 1);
    assert!(!aws.user_exists(&user).await);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_failed_iam_user_creation_leaves_no_user_behind() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let id = suffix();
    let path = format!("/hangar-rollback-{id}/");
    root.write(
        "aws/roles/broken",
        json!({
            "credential_type": "iam_user",
            "policy_document": DOCUMENT,
            "iam_groups": [format!("hangar-missing-{id}")],
            "user_path": path,
        }),
    )
    .await;
    let creds = root.get("aws/creds/broken").await;
    assert!(creds.status.is_client_error() || creds.status.is_server_error(), "{} {:?}", creds.status, creds.body);
    assert!(!first_error(&creds).is_empty(), "{:?}", creds.body);
    assert_eq!(aws.users_under(&path).await, Vec::<String>::new(), "the half-created user is deleted");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn assumed_role_needs_role_arn_when_several_are_allowed() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let id = suffix();
    let (first, second) =
        (format!("arn:aws:iam::{ACCOUNT}:role/hangar-a-{id}"), format!("arn:aws:iam::{ACCOUNT}:role/hangar-b-{id}"));
    root.write("aws/roles/two", json!({"credential_type": "assumed_role", "role_arns": [first, second]})).await;
    root.write("aws/roles/one", json!({"credential_type": "assumed_role", "role_arns": [first]})).await;

    let ambiguous = root.get("aws/creds/two").await;
    assert_eq!(ambiguous.status, 400, "{:?}", ambiguous.body);
    assert!(first_error(&ambiguous).contains("role_arn"), "{:?}", ambiguous.body);
    let other = format!("arn:aws:iam::{ACCOUNT}:role/hangar-other-{id}");
    let refused = root.get(&format!("aws/creds/two?role_arn={other}")).await;
    assert_eq!(refused.status, 400, "{:?}", refused.body);
    assert!(first_error(&refused).contains(&other), "{:?}", refused.body);

    let chosen = root.get(&format!("aws/creds/two?role_arn={second}")).await;
    assert_eq!(chosen.status, 200, "{:?}", chosen.body);
    let data = &chosen.body["data"];
    assert!(data["arn"].as_str().expect("an arn").contains(&format!("assumed-role/hangar-b-{id}/")), "{data}");
    assert!(!data["access_key"].as_str().expect("a key").is_empty());
    assert!(!data["session_token"].as_str().expect("a session token").is_empty());
    assert_eq!(chosen.body["lease_duration"], 3600);
    assert_eq!(chosen.body["renewable"], false);

    let only = root.post("aws/sts/one", json!({"role_session_name": "nightly-build"})).await;
    assert_eq!(only.status, 200, "{:?}", only.body);
    let arn = only.body["data"]["arn"].as_str().expect("an arn");
    assert!(arn.ends_with(&format!("assumed-role/hangar-a-{id}/nightly-build")), "{arn}");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn federation_tokens_take_the_requested_ttl_else_the_roles_default_capped_by_its_max() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write(
        "aws/roles/federated",
        json!({"credential_type": "federation_token", "policy_document": DOCUMENT, "default_sts_ttl": "20m", "max_sts_ttl": "1h"}),
    )
    .await;
    for (body, expected) in
        [(json!({}), 1200), (json!({"ttl": "30m"}), 1800), (json!({"ttl": 2700}), 2700), (json!({"ttl": "3h"}), 3600)]
    {
        let reply = root.post("aws/sts/federated", body.clone()).await;
        assert_eq!(reply.status, 200, "{body}: {:?}", reply.body);
        assert_eq!(reply.body["lease_duration"], expected, "{body}");
        let data = &reply.body["data"];
        assert!(!data["access_key"].as_str().expect("a key").is_empty());
        assert!(!data["secret_key"].as_str().expect("a secret").is_empty());
        assert!(!data["session_token"].as_str().expect("a session token").is_empty());
    }
    let through_creds = root.get("aws/creds/federated?ttl=15m").await;
    assert_eq!(through_creds.status, 200, "{:?}", through_creds.body);
    assert_eq!(through_creds.body["lease_duration"], 900);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn session_token_credentials_carry_a_session_token() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;
    let creds = root.get("aws/creds/session").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    assert!(!creds.body["data"]["session_token"].as_str().expect("a session token").is_empty());
    assert!(!creds.body["data"]["access_key"].as_str().expect("a key").is_empty());
    assert_eq!(creds.body["lease_duration"], 3600);
    let sts = root.post("aws/sts/session", json!({"ttl": "15m"})).await;
    assert_eq!(sts.status, 200, "{:?}", sts.body);
    assert_eq!(sts.body["lease_duration"], 900);
    app.stop().await;
}

/// Vault names every lease after the request path: `aws/creds/<role>/…` through creds/,
/// `aws/sts/<role>/…` through sts/, STS credentials included.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn sts_credentials_lease_ids_follow_the_request_path() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;
    let creds = root.get("aws/creds/session").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let sts = root.post("aws/sts/session", json!({})).await;
    assert_eq!(sts.status, 200, "{:?}", sts.body);
    let sts_lease = sts.body["lease_id"].as_str().unwrap_or_default();
    assert!(sts_lease.starts_with("aws/sts/session/"), "{sts_lease}");
    let creds_lease = creds.body["lease_id"].as_str().unwrap_or_default();
    assert!(creds_lease.starts_with("aws/creds/session/"), "through creds/: {creds_lease}");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_legacy_policy_role_gives_iam_users_through_creds_and_federation_tokens_through_sts() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/roles/legacy", json!({"policy": DOCUMENT})).await;
    let read = root.get("aws/roles/legacy").await;
    assert_eq!(read.body["data"]["credential_types"], json!(["iam_user", "federation_token"]), "{:?}", read.body);

    let creds = root.get("aws/creds/legacy").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    assert_eq!(creds.body["renewable"], true);
    let lease = creds.body["lease_id"].as_str().expect("a lease");
    assert!(lease.starts_with("aws/creds/legacy/"), "{lease}");
    assert!(creds.body["data"]["session_token"].is_null(), "an IAM user's key: {:?}", creds.body);
    let user = aws.owner_of_key(creds.body["data"]["access_key"].as_str().expect("a key")).await;
    assert!(aws.user_exists(&user).await);

    let sts = root.post("aws/sts/legacy", json!({})).await;
    assert_eq!(sts.status, 200, "{:?}", sts.body);
    assert!(!sts.body["data"]["session_token"].as_str().expect("a federation token").is_empty());
    assert_eq!(sts.body["renewable"], false);

    root.write("sys/leases/revoke", json!({"lease_id": lease})).await;
    assert!(!aws.user_exists(&user).await);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn legacy_arn_roles_are_refused_through_the_wrong_endpoint() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let id = suffix();
    let role_arn = format!("arn:aws:iam::{ACCOUNT}:role/hangar-legacy-{id}");
    root.write("aws/roles/assume", json!({"arn": role_arn})).await;
    let sts = root.post("aws/sts/assume", json!({})).await;
    assert_eq!(sts.status, 200, "{:?}", sts.body);
    assert!(sts.body["data"]["arn"].as_str().expect("an arn").contains(&format!("assumed-role/hangar-legacy-{id}/")));
    let creds = root.get("aws/creds/assume").await;
    assert_eq!(creds.status, 400, "a legacy assumed_role role through creds/: {:?}", creds.body);

    let policy_arn = aws.create_policy(&format!("hangar-legacy-{id}")).await;
    root.write("aws/roles/managed", json!({"arn": policy_arn})).await;
    let user_creds = root.get("aws/creds/managed").await;
    assert_eq!(user_creds.status, 200, "{:?}", user_creds.body);
    let refused = root.post("aws/sts/managed", json!({})).await;
    assert_eq!(refused.status, 400, "a legacy iam_user role through sts/: {:?}", refused.body);
    let lease = user_creds.body["lease_id"].as_str().expect("a lease");
    root.write("sys/leases/revoke", json!({"lease_id": lease})).await;
    app.stop().await;
}

#[tokio::test]
async fn a_username_over_its_cap_is_a_500_naming_the_limit() {
    let app = broker().await;
    let root = Vault::root(&app);
    let unreachable = "http://127.0.0.1:9";
    for (template, role, body, limit) in [
        ("{{ random 70 }}", "user", json!({"credential_type": "iam_user", "policy_document": DOCUMENT}), "64"),
        (
            "{{ random 40 }}",
            "federated",
            json!({"credential_type": "federation_token", "policy_document": DOCUMENT}),
            "32",
        ),
    ] {
        root.write(
            "aws/config/root",
            json!({
                "access_key": "testing",
                "secret_key": "testing",
                "region": "us-east-1",
                "iam_endpoint": unreachable,
                "sts_endpoint": unreachable,
                "max_retries": 0,
                "username_template": template,
            }),
        )
        .await;
        root.write(&format!("aws/roles/{role}"), body).await;
        let creds = root.get(&format!("aws/creds/{role}")).await;
        assert_eq!(creds.status, 500, "{template}: {:?}", creds.body);
        let message = first_error(&creds);
        assert!(message.contains(limit), "{template}: the message names the limit {limit}: {message:?}");
    }
    let bad = root.post("aws/config/root", json!({"username_template": "{{ nope"})).await;
    assert_eq!(bad.status, 400, "an unparsable template is refused when written: {:?}", bad.body);
    app.stop().await;
}

// ----- static roles -----

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_static_role_needs_an_existing_iam_user_and_a_period_of_a_minute() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let id = suffix();
    let missing = root
        .post("aws/static-roles/ghost", json!({"username": format!("hangar-ghost-{id}"), "rotation_period": "1h"}))
        .await;
    assert_eq!(missing.status, 400, "{:?}", missing.body);
    assert_eq!(root.get("aws/static-roles/ghost").await.status, 404);

    let user = format!("hangar-static-{id}");
    aws.create_user(&user).await;
    for period in [json!("30s"), json!(59), json!("59s")] {
        let short = root.post("aws/static-roles/fast", json!({"username": user, "rotation_period": period})).await;
        assert_eq!(short.status, 400, "{period}: {:?}", short.body);
    }
    assert!(aws.access_keys(&user).await.is_empty(), "refused writes create no key");
    let missing_period = root.post("aws/static-roles/fast", json!({"username": user})).await;
    assert_eq!(missing_period.status, 400, "{:?}", missing_period.body);
    app.stop().await;
}

/// IAM's own rule for a user name (at most 64 of `[A-Za-z0-9_+=,.@-]`) is checked before AWS
/// is asked: a name AWS could not hold is the caller's 400, not an upstream failure.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_static_role_whose_username_iam_cannot_hold_is_a_400() {
    let (_aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    for username in ["÷J\u{10}x", "has space", "a/b", &"u".repeat(65)] {
        let refused = root.post("aws/static-roles/odd", json!({"username": username, "rotation_period": "1h"})).await;
        assert_eq!(refused.status, 400, "{username:?}: {:?}", refused.body);
        assert!(first_error(&refused).contains("username"), "{:?}", refused.body);
    }
    assert_eq!(root.get("aws/static-roles/odd").await.status, 404);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn static_roles_and_static_creds_answer_at_the_top_level() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let user = format!("hangar-static-{}", suffix());
    aws.create_user(&user).await;
    let written = root.post("aws/static-roles/app", json!({"username": user, "rotation_period": "1h"})).await;
    assert!(matches!(written.status.as_u16(), 200 | 204), "{:?}", written.body);

    let read = root.get("aws/static-roles/app").await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    assert_eq!(read.body["name"], "app");
    assert_eq!(read.body["username"], user.as_str());
    assert_eq!(read.body["rotation_period"].as_f64(), Some(3600.0), "{:?}", read.body);

    let creds = root.get("aws/static-creds/app").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    let access_key = creds.body["access_key"].as_str().expect("an access key at the top level");
    assert!(!creds.body["secret_key"].as_str().expect("a secret key at the top level").is_empty());
    assert_eq!(aws.access_keys(&user).await, [access_key], "onboarding gives the user its first key");

    root.write("aws/static-roles/daily", json!({"username": user, "rotation_period": 86400})).await;
    assert_eq!(root.get("aws/static-roles/daily").await.body["rotation_period"].as_f64(), Some(86400.0));
    assert_eq!(root.get("aws/static-creds/missing").await.status, 404);

    assert_eq!(root.delete("aws/static-roles/app").await.status, 204);
    assert_eq!(root.get("aws/static-roles/app").await.status, 404);
    assert!(aws.user_exists(&user).await, "deleting a static role leaves the IAM user");
    app.stop().await;
}

// ----- rotation -----

/// A time past a static role's first rotation period ("1h"), for running the job as if then.
fn an_hour_later() -> i64 {
    now() + 3600 + 10
}

/// A static role on a new IAM user; returns the user name and the role's first key.
async fn static_role(root: &Vault<'_>, aws: &Aws, name: &str) -> (String, String) {
    let user = format!("hangar-rotate-{}", suffix());
    aws.create_user(&user).await;
    root.write(&format!("aws/static-roles/{name}"), json!({"username": user, "rotation_period": "1h"})).await;
    let key = static_key(root, name).await;
    (user, key)
}

async fn static_key(root: &Vault<'_>, name: &str) -> String {
    let creds = root.get(&format!("aws/static-creds/{name}")).await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    creds.body["access_key"].as_str().expect("an access key").to_owned()
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_due_static_role_is_rotated_keeping_at_most_two_keys() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let (user, first) = static_role(&root, &aws, "app").await;
    let state = app.second_state().await;

    let (rotated, _) = hangar::broker::scheduled_run(&state).await.expect("a run");
    assert_eq!(rotated, 0, "nothing is due yet");
    assert_eq!(static_key(&root, "app").await, first);

    let later = an_hour_later();
    let (rotated, _) = hangar::broker::scheduled_run_at(&state, later).await.expect("a run");
    assert_eq!(rotated, 1);
    let second = static_key(&root, "app").await;
    assert_ne!(second, first, "the key changed");
    let mut keys = aws.access_keys(&user).await;
    keys.sort();
    let mut expected = vec![first.clone(), second.clone()];
    expected.sort();
    assert_eq!(keys, expected, "the first key stays until the next rotation");

    let (rotated, _) = hangar::broker::scheduled_run_at(&state, later).await.expect("a run");
    assert_eq!(rotated, 0, "the next rotation is a period away");

    let (rotated, _) = hangar::broker::scheduled_run_at(&state, later + 3600 + 10).await.expect("a run");
    assert_eq!(rotated, 1);
    let third = static_key(&root, "app").await;
    let keys = aws.access_keys(&user).await;
    assert!(keys.len() <= 2, "{keys:?}");
    assert!(keys.contains(&third), "the stored key is one of the user's: {keys:?}");
    assert!(keys.contains(&second) && !keys.contains(&first), "the oldest key was replaced: {keys:?}");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn overlapping_runs_rotate_a_due_role_once() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let (user, first) = static_role(&root, &aws, "app").await;
    let (one, two) = (app.second_state().await, app.second_state().await);

    let later = an_hour_later();
    let (a, b) =
        tokio::join!(hangar::broker::scheduled_run_at(&one, later), hangar::broker::scheduled_run_at(&two, later));
    let rotated = a.expect("a run").0 + b.expect("a run").0;
    assert_eq!(rotated, 1, "the role is rotated by exactly one run");
    let stored = static_key(&root, "app").await;
    assert_ne!(stored, first);
    let mut keys = aws.access_keys(&user).await;
    keys.sort();
    let mut expected = vec![first, stored];
    expected.sort();
    assert_eq!(keys, expected, "one new key, the stored one");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn twenty_due_roles_all_rotate_in_one_run() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let state = app.second_state().await;
    let mut before = Vec::new();
    for i in 0..20 {
        let name = format!("app-{i:02}");
        let (user, key) = static_role(&root, &aws, &name).await;
        before.push((name, user, key));
    }
    let later = an_hour_later();
    let (rotated, _) = hangar::broker::scheduled_run_at(&state, later).await.expect("a run");
    assert_eq!(rotated, 20);
    for (name, user, old) in before {
        let new = static_key(&root, &name).await;
        assert_ne!(new, old, "{name} was rotated");
        assert!(aws.access_keys(&user).await.contains(&new), "{name}");
    }
    let (rotated, _) = hangar::broker::scheduled_run_at(&state, later).await.expect("a run");
    assert_eq!(rotated, 0);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn rotate_root_replaces_the_engines_key_and_deletes_the_old_one() {
    let aws = aws().await;
    let app = broker().await;
    let root = Vault::root(&app);
    let user = format!("hangar-engine-{}", suffix());
    aws.create_user(&user).await;
    let (old, secret) = aws.create_key(&user).await;
    root.write(
        "aws/config/root",
        json!({
            "access_key": old,
            "secret_key": secret,
            "region": "us-east-1",
            "iam_endpoint": aws.endpoint,
            "sts_endpoint": aws.endpoint,
        }),
    )
    .await;

    let rotated = root.post("aws/config/rotate-root", json!({})).await;
    assert_eq!(rotated.status, 200, "{:?}", rotated.body);
    let new = rotated.body["data"]["access_key"].as_str().expect("the new key").to_owned();
    assert_ne!(new, old);
    assert_eq!(aws.access_keys(&user).await, [new.as_str()], "the old key is deleted");
    assert_eq!(root.get("aws/config/root").await.body["data"]["access_key"], new.as_str());

    // The engine keeps working with its new key.
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;
    assert_eq!(root.get("aws/creds/session").await.status, 200);

    aws.create_key(&user).await;
    let refused = root.post("aws/config/rotate-root", json!({})).await;
    assert!(refused.status.is_client_error(), "a second key on the user: {:?}", refused.body);
    app.stop().await;
}
