//! Speaks to Hangar the way its clients do, either over HTTP (a dev-server process) or straight
//! into the router (in-process figures, where the network would only add noise); and seeds the
//! data every benchmark reads: an organization, its modules, a version with an archive, agent
//! pools, and a credential-broker mount.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

pub const ORG: &str = "bench";
pub const JSONAPI: &str = "application/vnd.api+json";

#[derive(Clone)]
pub enum Api {
    Http { client: reqwest::Client, url: String },
    InProcess(Router),
}

/// A reply: status and body (JSON when it parses, else a string; Null when empty).
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

impl Api {
    pub fn http(url: &str) -> Self {
        Api::Http { client: reqwest::Client::new(), url: url.trim_end_matches('/').to_owned() }
    }

    /// Sends `body` as JSON:API (`/api/…`) or plain JSON (`/v1/…`), with `token` as a bearer
    /// token or, under `/v1`, as Vault's `X-Vault-Token`.
    pub async fn send(&self, method: Method, path: &str, token: &str, body: Option<Value>) -> Reply {
        let vault = path.starts_with("/v1/");
        let (auth_name, auth_value) =
            if vault { ("X-Vault-Token", token.to_owned()) } else { ("Authorization", format!("Bearer {token}")) };
        let content_type = if vault { "application/json" } else { JSONAPI };
        let (status, bytes) = match self {
            Api::Http { client, url } => {
                let mut request = client.request(method, format!("{url}{path}")).header(auth_name, auth_value);
                if let Some(body) = body {
                    request = request.header("Content-Type", content_type).body(body.to_string());
                }
                let response = request.send().await.expect("the request reaches Hangar");
                (response.status(), response.bytes().await.expect("a body").to_vec())
            }
            Api::InProcess(router) => {
                let request = Request::builder()
                    .method(method)
                    .uri(path)
                    .header("Host", "hangar.local")
                    .header(auth_name, auth_value);
                let request = match body {
                    Some(body) => request.header("Content-Type", content_type).body(Body::from(body.to_string())),
                    None => request.body(Body::empty()),
                };
                let response = router.clone().oneshot(request.expect("a request")).await.expect("infallible");
                let status = response.status();
                (status, response.into_body().collect().await.expect("a body").to_bytes().to_vec())
            }
        };
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        Reply { status, body }
    }

    async fn expect(&self, method: Method, path: &str, token: &str, body: Option<Value>, want: u16) -> Value {
        let reply = self.send(method.clone(), path, token, body).await;
        assert_eq!(reply.status.as_u16(), want, "{method} {path}: {}", reply.body);
        reply.body
    }

    /// Uploads an archive to a version's upload link (as clients do: no Authorization).
    pub async fn upload(&self, link: &str, archive: Vec<u8>) {
        let status = match self {
            Api::Http { client, url } => {
                let link = if link.starts_with('/') { format!("{url}{link}") } else { link.to_owned() };
                client.put(link).body(archive).send().await.expect("the upload reaches Hangar").status()
            }
            Api::InProcess(router) => {
                let path = link.find("/upload/").map(|at| &link[at..]).expect("a local upload link");
                let request = Request::builder().method(Method::PUT).uri(path).body(Body::from(archive));
                router.clone().oneshot(request.expect("a request")).await.expect("infallible").status()
            }
        };
        assert!(status.is_success(), "uploading an archive: {status}");
    }

    pub async fn create_organization(&self, admin: &str) {
        let body =
            json!({"data": {"type": "organizations", "attributes": {"name": ORG, "email": "bench@example.com"}}});
        self.expect(Method::POST, "/api/v2/organizations", admin, Some(body), 201).await;
    }

    /// Creates private modules `mod-00000…` (provider `aws`) from `first` up to `end`, `parallel`
    /// requests at a time.
    pub async fn create_modules(&self, token: &str, first: usize, end: usize, parallel: usize) {
        let path = format!("/api/v2/organizations/{ORG}/registry-modules");
        let mut next = first;
        while next < end {
            let batch = (next..end.min(next + parallel)).map(|n| {
                let body = json!({"data": {"type": "registry-modules", "attributes": {
                    "name": module_name(n), "provider": "aws", "registry-name": "private"}}});
                self.expect(Method::POST, &path, token, Some(body), 201)
            });
            futures::future::join_all(batch).await;
            next = end.min(next + parallel);
        }
    }

    /// Publishes `version` of module `n` with `archive`; returns once it is `ok`.
    pub async fn publish(&self, token: &str, n: usize, version: &str, archive: Vec<u8>) {
        let path = format!("{}/versions", module_path(n));
        let body = json!({"data": {"type": "registry-module-versions", "attributes": {"version": version}}});
        let created = self.expect(Method::POST, &path, token, Some(body), 201).await;
        let link = created["data"]["links"]["upload"].as_str().expect("an upload link").to_owned();
        self.upload(&link, archive).await;
        let show = format!("{}/version?module_version={version}", module_path(n));
        for _ in 0..200 {
            let reply = self.expect(Method::GET, &show, token, None, 200).await;
            if reply["data"]["attributes"]["status"] == "ok" {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("version {version} of module {n} never became ok");
    }

    /// Creates agent pools `pool-000…`; returns their ids.
    pub async fn create_agent_pools(&self, token: &str, count: usize) -> Vec<String> {
        let path = format!("/api/v2/organizations/{ORG}/agent-pools");
        let mut ids = Vec::with_capacity(count);
        for n in 0..count {
            let body = json!({"data": {"type": "agent-pools", "attributes": {"name": format!("pool-{n:03}")}}});
            let created = self.expect(Method::POST, &path, token, Some(body), 201).await;
            ids.push(created["data"]["id"].as_str().expect("a pool id").to_owned());
        }
        ids
    }

    /// A team `name` of the organization with no extra permissions (members read its modules
    /// and pools); returns the team's token.
    pub async fn team_token(&self, admin: &str, name: &str) -> String {
        let body = json!({"data": {"type": "teams", "attributes": {"name": name, "organization-access": {}}}});
        let team =
            self.expect(Method::POST, &format!("/api/v2/organizations/{ORG}/teams"), admin, Some(body), 201).await;
        let id = team["data"]["id"].as_str().expect("a team id");
        let path = format!("/api/v2/teams/{id}/authentication-token");
        let token = self.expect(Method::POST, &path, admin, None, 201).await;
        token["data"]["attributes"]["token"].as_str().expect("the token, shown once").to_owned()
    }

    /// Configures the AWS engine mounted by default at `aws/`: root credentials and endpoints
    /// (moto's, or none).
    pub async fn configure_aws(&self, root: &str, endpoint: Option<&str>) {
        let mut config = json!({"access_key": "bench", "secret_key": "bench-secret", "region": "us-east-1"});
        if let Some(endpoint) = endpoint {
            config["iam_endpoint"] = json!(endpoint);
            config["sts_endpoint"] = json!(endpoint);
        }
        self.expect(Method::POST, "/v1/aws/config/root", root, Some(config), 204).await;
    }

    pub async fn write_vault(&self, root: &str, path: &str, body: Value) {
        let reply = self.send(Method::POST, path, root, Some(body)).await;
        assert!(reply.status.is_success(), "POST {path}: {} {}", reply.status, reply.body);
    }
}

pub fn module_name(n: usize) -> String {
    format!("mod-{n:05}")
}

pub fn module_path(n: usize) -> String {
    format!("/api/v2/organizations/{ORG}/registry-modules/private/{ORG}/{}/aws", module_name(n))
}
