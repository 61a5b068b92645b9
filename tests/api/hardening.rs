//! No input makes Hangar fail (issue 17, §1): page numbers and offsets past any list, ids of
//! another kind, clients' URL habits, extreme settings, and errors in each family's own format,
//! with one log line per request whose secrets are redacted.

use std::sync::{Arc, Mutex};

use hangar::app::routers;
use hangar::config::Config;
use hangar_tests::builders::{self, new_pool, new_workspace, private_module};
use hangar_tests::{Reply, TestApp, JSONAPI};
use reqwest::Method;
use serde_json::{json, Value};
use tower::ServiceExt;
use tracing::instrument::WithSubscriber;

/// The largest `u64`, as the issue's requests send it.
const HUGE: &str = "18446744073709551615";

fn body(kind: &str, attributes: Value) -> Value {
    json!({"data": {"type": kind, "attributes": attributes}})
}

/// The id of the resource a reply created.
fn created_id(reply: &Reply) -> String {
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    reply.body["data"]["id"].as_str().expect("an id").to_owned()
}

/// One resource of every kind addressed by id: team, workspace, agent pool, agent token, agent,
/// VCS connection, its OAuth token and a registry module, all in `acme`.
struct Ids {
    team: String,
    workspace: String,
    pool: String,
    agent_token: String,
    agent: String,
    oauth_client: String,
    oauth_token: String,
    module: String,
}

impl Ids {
    fn all(&self) -> [&str; 8] {
        [
            &self.team,
            &self.workspace,
            &self.pool,
            &self.agent_token,
            &self.agent,
            &self.oauth_client,
            &self.oauth_token,
            &self.module,
        ]
    }
}

async fn one_of_each(app: &TestApp, owners: &str) -> Ids {
    let (team, _) = app.team_with_token("acme", "devs", json!({})).await;
    let workspace = new_workspace(app, owners, "acme", "w").await;
    let pool = new_pool(app, owners, "acme", builders::pool("p")).await;
    let path = format!("/api/v2/agent-pools/{pool}/authentication-tokens");
    let token = app.post(&path, owners, body("authentication-tokens", json!({"description": "r"}))).await;
    let agent_token = created_id(&token);
    let secret = token.body["data"]["attributes"]["token"].as_str().expect("the agent token's secret").to_owned();
    let registered = app.request(Method::POST, "/api/agent/register", Some(&secret), Some(json!({"name": "r"}))).await;
    let agent = created_id(&registered);
    let connection = body(
        "oauth-clients",
        json!({"service-provider": "github", "oauth-token-string": "ghp_hardening0123456789", "name": "GitHub"}),
    );
    let connection = app.post("/api/v2/organizations/acme/oauth-clients", owners, connection).await;
    let oauth_client = created_id(&connection);
    let oauth_token = connection.body["data"]["relationships"]["oauth-tokens"]["data"][0]["id"]
        .as_str()
        .expect("an OAuth token id")
        .to_owned();
    let module = app.post("/api/v2/organizations/acme/registry-modules", owners, private_module("vpc", "aws"));
    let module = created_id(&module.await);
    Ids { team, workspace, pool, agent_token, agent, oauth_client, oauth_token, module }
}

// 1. Pagination overflow.

#[tokio::test]
async fn a_page_number_past_every_list_is_an_empty_page_never_a_failure() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let ids = one_of_each(&app, &owners).await;
    let lists = [
        "/api/v2/organizations".to_owned(),
        "/api/v2/organizations/acme/teams".to_owned(),
        "/api/v2/organizations/acme/workspaces".to_owned(),
        "/api/v2/organizations/acme/agent-pools".to_owned(),
        "/api/v2/organizations/acme/registry-modules".to_owned(),
        "/api/v2/organizations/acme/oauth-clients".to_owned(),
        format!("/api/v2/oauth-clients/{}/oauth-tokens", ids.oauth_client),
        format!("/api/v2/agent-pools/{}/agents", ids.pool),
        format!("/api/v2/agent-pools/{}/authentication-tokens", ids.pool),
        "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws/versions".to_owned(),
    ];
    for list in &lists {
        for number in [HUGE, "99999999999999999999999999", "4294967297"] {
            let reply = app.get(&format!("{list}?page[number]={number}&page[size]=100"), &owners).await;
            assert_eq!(reply.status, 200, "{list} page {number}: {:?}", reply.body);
            assert_eq!(reply.body["data"], json!([]), "{list} page {number}");
            assert_eq!(reply.body["meta"]["pagination"]["next-page"], Value::Null, "{list}");
        }
        let reply = app.get(&format!("{list}?page[size]={HUGE}"), &owners).await;
        assert_eq!(reply.status, 200, "{list}: {:?}", reply.body);
        assert_eq!(reply.body["meta"]["pagination"]["page-size"], 100, "{list}: a huge size is served as 100");
        let reply = app.get(&format!("{list}?page[number]=first"), &owners).await;
        assert_eq!(reply.status, 422, "{list}: a page number that is not a number");
        assert_eq!(reply.body["errors"][0]["source"]["parameter"], "page[number]");
    }
}

#[tokio::test]
async fn a_registry_offset_past_every_list_is_an_empty_page_never_a_failure() {
    let (app, owners) = TestApp::with_organization("acme").await;
    for list in ["/api/registry/v1/modules", "/api/registry/v1/modules/acme", "/api/registry/v1/modules/search"] {
        for offset in [HUGE, "99999999999999999999999999"] {
            let path = format!("{list}?q=vpc&offset={offset}&limit={HUGE}");
            let reply = app.get(&path, &owners).await;
            assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
            assert_eq!(reply.body["modules"], json!([]), "{path}");
            assert!(reply.body["meta"].get("next_offset").is_none(), "{path}: {:?}", reply.body["meta"]);
        }
        let reply = app.get(&format!("{list}?q=vpc&offset=ten"), &owners).await;
        assert_eq!(reply.status, 400, "{list}: an offset that is not a number");
        assert!(reply.body["errors"][0].is_string(), "the protocol's error shape: {:?}", reply.body);
    }
}

// 2. Ids of another kind.

#[tokio::test]
async fn an_id_of_another_kind_is_a_404_on_every_id_route() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let ids = one_of_each(&app, &owners).await;
    // Each id route, the kind of id it takes, and the methods it answers.
    let routes: [(&str, &str, &[Method]); 11] = [
        ("/api/v2/teams/{}", &ids.team, &[Method::GET, Method::DELETE]),
        ("/api/v2/teams/{}/authentication-token", &ids.team, &[Method::GET, Method::POST, Method::DELETE]),
        ("/api/v2/workspaces/{}", &ids.workspace, &[Method::GET, Method::PATCH, Method::DELETE]),
        ("/api/v2/agent-pools/{}", &ids.pool, &[Method::GET, Method::PATCH, Method::DELETE]),
        ("/api/v2/agent-pools/{}/agents", &ids.pool, &[Method::GET]),
        ("/api/v2/agent-pools/{}/authentication-tokens", &ids.pool, &[Method::GET, Method::POST]),
        ("/api/v2/authentication-tokens/{}", &ids.agent_token, &[Method::GET, Method::DELETE]),
        ("/api/v2/agents/{}", &ids.agent, &[Method::GET, Method::DELETE]),
        ("/api/v2/oauth-clients/{}", &ids.oauth_client, &[Method::GET, Method::DELETE]),
        ("/api/v2/oauth-clients/{}/oauth-tokens", &ids.oauth_client, &[Method::GET]),
        ("/api/v2/oauth-tokens/{}", &ids.oauth_token, &[Method::GET]),
    ];
    // A valid document for each write, so that only the id can be what is refused.
    let payload = |method: &Method, route: &str| match *method {
        Method::POST => Some(body("authentication-tokens", json!({}))),
        Method::PATCH if route.contains("workspaces") => Some(body("workspaces", json!({"name": "renamed"}))),
        Method::PATCH => Some(body("agent-pools", json!({"name": "renamed"}))),
        _ => None,
    };
    let foreign = |own: &str| {
        let mut others: Vec<String> = ids.all().into_iter().filter(|id| *id != own).map(str::to_owned).collect();
        others.extend(["org-0000000000000000", "nonsense", "team-", "ws-doesnotexist00"].map(str::to_owned));
        others
    };
    for (route, own, methods) in &routes {
        for id in foreign(own) {
            let path = route.replace("{}", &id);
            for method in *methods {
                let reply = app.request(method.clone(), &path, Some(&owners), payload(method, route)).await;
                assert_eq!(reply.status, 404, "{method} {path}: {:?}", reply.body);
                assert_eq!(reply.headers["content-type"], JSONAPI, "{method} {path}");
            }
        }
        let path = route.replace("{}", own);
        let reply = app.get(&path, &owners).await;
        assert!(reply.status == 200 || reply.status == 405, "{path} with its own kind of id: {:?}", reply.body);
    }
    let status = |id: &str| format!("/api/agent/agents/{id}/status");
    let path = format!("/api/v2/agent-pools/{}/authentication-tokens", ids.pool);
    let token = app.post(&path, &owners, body("authentication-tokens", json!({"description": "ci"}))).await;
    let secret = token.body["data"]["attributes"]["token"].as_str().expect("a secret").to_owned();
    for id in foreign(&ids.agent) {
        let reply = app.request(Method::PUT, &status(&id), Some(&secret), Some(json!({"status": "idle"}))).await;
        assert_eq!(reply.status, 404, "agent status of {id}: {:?}", reply.body);
    }
}

#[tokio::test]
async fn a_registry_module_read_by_an_id_of_another_kind_is_a_404() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let ids = one_of_each(&app, &owners).await;
    for id in ids.all().into_iter().filter(|id| *id != ids.module) {
        let reply = app.get(&format!("/api/v2/registry-modules/{id}"), &owners).await;
        assert_eq!(reply.status, 404, "registry-modules/{id}: {:?}", reply.body);
    }
    assert_eq!(app.get(&format!("/api/v2/registry-modules/{}", ids.module), &owners).await.status, 200);
}

// 3. Clients' URL habits.

#[tokio::test]
async fn trailing_and_repeated_slashes_reach_the_same_resource() {
    let (app, owners) = TestApp::with_organization("acme").await;
    for path in [
        "/api/v2/organizations/acme/",
        "/api/v2//organizations/acme",
        "//api/v2/organizations//acme//",
        "/api/v2/organizations/acme/teams/?page[size]=1",
    ] {
        let reply = app.get(path, &owners).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
    }
    for name in ["vpc", "db"] {
        let module = body("registry-modules", json!({"name": name, "provider": "aws", "registry-name": "private"}));
        created_id(&app.post("/api/v2/organizations/acme/registry-modules", &owners, module).await);
    }
    // terrasnek's registry_modules.destroy, without and with a provider.
    let gone = app.delete("/api/v2/organizations/acme/registry-modules/private/acme/vpc/", &owners).await;
    assert_eq!(gone.status, 204, "{:?}", gone.body);
    let gone = app.delete("/api/v2/organizations/acme/registry-modules/private/acme/db//aws", &owners).await;
    assert_eq!(gone.status, 204, "{:?}", gone.body);
    let listed = app.get("/api/v2/organizations/acme/registry-modules/", &owners).await;
    assert_eq!(listed.body["data"], json!([]));
    let protocol = app.get("/api/registry/v1/modules//acme/", &owners).await;
    assert_eq!(protocol.status, 200, "{:?}", protocol.body);
    // The broker keeps refusing empty segments: there the path is what the ACL checks.
    let vault = app.client.get(format!("{}/v1/aws//roles", app.url)).header("X-Vault-Token", "any");
    let vault = Reply::read(vault.send().await.unwrap()).await;
    assert_eq!(vault.status, 400, "{:?}", vault.body);
}

#[tokio::test]
async fn a_team_token_request_without_a_document_makes_a_token_that_never_expires() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let (team, _) = app.team_with_token("acme", "devs", json!({})).await;
    let path = format!("{}/api/v2/teams/{team}/authentication-token", app.url);
    // terrasnek's team_tokens.create sends `{}`; its other calls send `null`.
    for sent in ["{}", "null", ""] {
        let request = app.client.post(&path).bearer_auth(&owners).header("Content-Type", JSONAPI).body(sent);
        let reply = Reply::read(request.send().await.unwrap()).await;
        assert_eq!(reply.status, 201, "body {sent:?}: {:?}", reply.body);
        assert_eq!(reply.body["data"]["attributes"]["expired-at"], Value::Null, "body {sent:?}");
    }
}

// 4. Extreme settings.

#[test]
fn numeric_settings_out_of_range_are_refused_naming_the_variable_and_its_range() {
    let cases = [
        ("HANGAR_AGENT_PING_TIMEOUT", HUGE),
        ("HANGAR_AGENT_PING_TIMEOUT", "0"),
        ("HANGAR_MAX_AGENT_POOLS", HUGE),
        ("HANGAR_MAX_AGENTS", HUGE),
        ("HANGAR_MAX_UPLOAD_BYTES", "99999999999999999999999"),
        ("HANGAR_ARCHIVE_MAX_COMPRESSED_BYTES", "0"),
        ("HANGAR_ARCHIVE_MAX_UNCOMPRESSED_BYTES", HUGE),
        ("HANGAR_ARCHIVE_MAX_ENTRIES", HUGE),
        ("HANGAR_ARCHIVE_MAX_PATH_LENGTH", HUGE),
        ("HANGAR_PUBLIC_REGISTRY_TIMEOUT_SECONDS", HUGE),
        ("HANGAR_PUBLIC_REGISTRY_MAX_BYTES", HUGE),
        ("HANGAR_AGENT_PING_TIMEOUT", "-1"),
        ("HANGAR_MAX_AGENTS", "many"),
    ];
    for (name, value) in cases {
        let lookup = |asked: &str| (asked == name).then(|| value.to_owned());
        let refused = Config::from_lookup(lookup).expect_err(&format!("{name}={value} is refused"));
        let message = refused.to_string();
        assert!(message.starts_with(&format!("{name}: ")), "{message}");
        assert!(message.contains(value), "{message}");
        assert!(message.contains(" to "), "the range is named: {message}");
    }
    let defaults = Config::from_lookup(|_| None).expect("no setting: the defaults");
    assert_eq!(defaults.agent_ping_timeout.as_secs(), 120);
    let widest = |name: &str| {
        let lookup = |asked: &str| (asked == "HANGAR_AGENT_PING_TIMEOUT").then(|| name.to_owned());
        Config::from_lookup(lookup)
    };
    assert_eq!(widest("604800").expect("a week is allowed").agent_ping_timeout.as_secs(), 604_800);
}

// 5. Every error in its family's format, and every request logged.

#[tokio::test]
async fn a_path_segment_that_is_not_utf8_is_refused_in_each_familys_format() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let pool = app.post("/api/v2/organizations/acme/agent-pools", &owners, body("agent-pools", json!({"name": "p"})));
    let pool = created_id(&pool.await);
    let path = format!("/api/v2/agent-pools/{pool}/authentication-tokens");
    let token = app.post(&path, &owners, body("authentication-tokens", json!({"description": "ci"}))).await;
    let agent = token.body["data"]["attributes"]["token"].as_str().expect("a secret").to_owned();
    for (method, path, token) in [
        (Method::GET, "/api/v2/teams/%FF", &owners),
        (Method::DELETE, "/api/v2/teams/%FF/authentication-token", &owners),
        (Method::GET, "/api/v2/organizations/%C3%28/workspaces", &owners),
        (Method::PUT, "/api/agent/agents/%FF/status", &agent),
    ] {
        let reply = app.request(method.clone(), path, Some(token), Some(json!({"status": "idle"}))).await;
        assert_eq!(reply.status, 400, "{method} {path}: {:?}", reply.body);
        assert_eq!(reply.headers["content-type"], JSONAPI, "{method} {path}");
        assert_eq!(reply.body["errors"][0]["status"], "400", "{method} {path}");
    }
    for path in ["/api/registry/v1/modules/%FF/vpc/aws/versions", "/api/registry/public/v1/modules/%FF/vpc/aws"] {
        // The proxy reads a path that does not parse as naming no module: a 404.
        let reply = app.get(path, &owners).await;
        assert!(reply.status == 400 || reply.status == 404, "{path}: {:?}", reply.body);
        assert_eq!(reply.headers["content-type"], "application/json", "{path}");
        assert!(reply.body["errors"][0].is_string(), "{path}: {:?}", reply.body);
    }
    let vault = app.client.get(format!("{}/v1/aws/roles/%FF", app.url)).header("X-Vault-Token", "x");
    let vault = Reply::read(vault.send().await.unwrap()).await;
    assert_eq!(vault.status, 400, "{:?}", vault.body);
    assert!(vault.body["errors"][0].is_string(), "{:?}", vault.body);
}

#[tokio::test]
async fn a_wrong_method_on_an_upload_link_is_a_json_api_405() {
    let app = TestApp::spawn().await;
    for (method, path, allowed) in [
        (Method::DELETE, "/object/abc", "GET"),
        (Method::POST, "/upload/abc", "PUT"),
        (Method::GET, "/upload/abc", "PUT"),
    ] {
        let reply = app.request(method.clone(), path, None, None).await;
        assert_eq!(reply.status, 405, "{method} {path}");
        assert_eq!(reply.headers["content-type"], JSONAPI, "{method} {path}");
        assert_eq!(reply.body["errors"][0]["status"], "405", "{method} {path}");
        let allow = reply.headers["allow"].to_str().unwrap();
        assert!(allow.contains(allowed), "{method} {path}: Allow {allow}");
    }
}

#[tokio::test]
async fn a_malformed_json_body_is_refused_in_each_familys_format() {
    let config = Config { root_service_token: Some("root-token".into()), ..Config::default() };
    let (app, owners) = TestApp::spawn_with_organization(config, "acme").await;
    let pool = app.post("/api/v2/organizations/acme/agent-pools", &owners, body("agent-pools", json!({"name": "p"})));
    let pool = created_id(&pool.await);
    let path = format!("/api/v2/agent-pools/{pool}/authentication-tokens");
    let token = app.post(&path, &owners, body("authentication-tokens", json!({"description": "ci"}))).await;
    let secret = token.body["data"]["attributes"]["token"].as_str().expect("a secret").to_owned();
    let send = |method: Method, path: &str, token: &str, content_type: &str| {
        let request = app.client.request(method, format!("{}{path}", app.url));
        request.bearer_auth(token).header("Content-Type", content_type).body("{\"data\": {")
    };
    for (request, what) in [
        (send(Method::POST, "/api/v2/organizations/acme/teams", &owners, JSONAPI), "JSON:API"),
        (send(Method::POST, "/api/agent/register", &secret, "application/json"), "agent gateway"),
        (send(Method::PUT, "/api/agent/agents/agent-x/status", &secret, "application/json"), "agent status"),
    ] {
        let reply = Reply::read(request.send().await.unwrap()).await;
        assert_eq!(reply.status, 400, "{what}: {:?}", reply.body);
        assert_eq!(reply.headers["content-type"], JSONAPI, "{what}");
        assert_eq!(reply.body["errors"][0]["status"], "400", "{what}");
    }
    let vault = send(Method::POST, "/v1/aws/roles/deploy", "root-token", "application/json");
    let vault = Reply::read(vault.send().await.unwrap()).await;
    assert_eq!(vault.status, 400, "{:?}", vault.body);
    assert!(vault.body["errors"][0].is_string(), "Vault's shape: {:?}", vault.body);
}

/// What a log subscriber wrote, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn every_request_gets_one_log_line_with_its_secrets_redacted() {
    let app = TestApp::spawn().await;
    let router = routers::all(app.second_state().await);
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    let webhook = "/webhooks/vcs/0123456789abcdef0123456789abcdef";
    let requests = [
        (Method::GET, "/api/v2/ping".to_owned()),
        (Method::GET, "/object/abc?expires=1&signature=SIGNATURE-SECRET".to_owned()),
        (Method::DELETE, "/object/abc?expires=1&signature=SIGNATURE-SECRET".to_owned()),
        (Method::PUT, "/upload/abc?expires=1&signature=SIGNATURE-SECRET".to_owned()),
        (Method::POST, webhook.to_owned()),
        (Method::GET, "/v1/sys/mounts".to_owned()),
        (Method::GET, "/api/registry/v1/modules/acme".to_owned()),
        (Method::GET, "/nowhere".to_owned()),
    ];
    for (method, uri) in &requests {
        let request = axum::http::Request::builder().method(method).uri(uri).body(axum::body::Body::empty()).unwrap();
        router.clone().oneshot(request).with_subscriber(dispatch.clone()).await.unwrap();
    }
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> =
        log.lines().filter(|line| line.contains(" request ") || line.ends_with(" request")).collect();
    assert_eq!(lines.len(), requests.len(), "one line per request:\n{log}");
    for ((method, uri), line) in requests.iter().zip(&lines) {
        assert!(line.contains(&format!("method={method}")), "{line}");
        let path = uri.split('?').next().unwrap();
        if !path.starts_with("/webhooks/") {
            assert!(line.contains(&format!("path=\"{path}\"")) || line.contains(&format!("path={path}")), "{line}");
        }
    }
    assert!(!log.contains("SIGNATURE-SECRET"), "link signatures are never logged:\n{log}");
    assert!(!log.contains("0123456789abcdef0123456789abcdef"), "webhook ids are never logged:\n{log}");
    assert!(log.contains("/webhooks/vcs/"), "the webhook request is logged, redacted:\n{log}");
}
