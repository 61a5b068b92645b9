//! Hangar's agent API and the few management calls a job makes with its job token (the
//! workspace's current state, a new state version), over one HTTPS client that trusts what the
//! platform trusts.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use md5::{Digest, Md5};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("Hangar could not be reached: {0}")]
    Transport(#[from] reqwest::Error),
    /// The job is over for this agent (it ended, was force-canceled, or its lease ran out): the
    /// job token no longer works.
    #[error("the job is over: {0}")]
    JobOver(String),
    #[error("Hangar answered {status}: {body}")]
    Refused { status: StatusCode, body: String },
    #[error("Hangar's answer is not understood: {0}")]
    Answer(String),
    #[error("the TLS configuration could not be built: {0}")]
    Tls(String),
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// A client of one Hangar: its address and the agent token.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    address: Arc<str>,
    agent_token: Arc<str>,
    ca_file: Option<Arc<std::path::Path>>,
}

/// The platform's certificate authorities (`SSL_CERT_FILE` and `SSL_CERT_DIR` included), on
/// rustls with aws-lc.
fn tls(ca_file: Option<&std::path::Path>, extra_pem: Option<&[u8]>) -> Result<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        // One certificate the platform lists but rustls cannot parse does not stop the rest.
        let _ = roots.add(cert);
    }
    if let Some(file) = ca_file {
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(file)
            .map_err(|e| ClientError::Tls(format!("{}: {e}", file.display())))?;
        for cert in certs {
            roots
                .add(cert.map_err(|e| ClientError::Tls(e.to_string()))?)
                .map_err(|e| ClientError::Tls(e.to_string()))?;
        }
    }
    if let Some(pem) = extra_pem {
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pem) {
            roots
                .add(cert.map_err(|e| ClientError::Tls(e.to_string()))?)
                .map_err(|e| ClientError::Tls(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A job the agent claimed.
#[derive(Debug, Clone, Deserialize)]
pub struct Claim {
    pub run: String,
    pub phase: String,
    pub token: String,
    #[serde(rename = "report-in")]
    pub report_in: u64,
}

/// What the job's heartbeat answers.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Beat {
    pub cancel: bool,
    #[serde(rename = "report-in")]
    pub report_in: u64,
}

impl Client {
    /// A client of the Hangar at `address`, trusting the platform's authorities and `ca_file`'s.
    pub fn new(address: &str, agent_token: &str, ca_file: Option<&std::path::Path>) -> Result<Self> {
        Ok(Self {
            http: http_client(ca_file, None)?,
            address: address.trim_end_matches('/').into(),
            agent_token: agent_token.into(),
            ca_file: ca_file.map(Into::into),
        })
    }

    /// A client for a Vault (Hangar's broker, or another), trusting `extra_ca` (a PEM bundle,
    /// `TFC_VAULT_ENCODED_CACERT`) besides what this one trusts.
    pub fn for_vault(&self, extra_ca: Option<&[u8]>) -> Result<Self> {
        // Its own client, following no redirect: reqwest would carry `X-Vault-Token` along.
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls(self.ca_file.as_deref(), extra_ca)?)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(300))
            .build()?;
        Ok(Self { http, ..self.clone() })
    }

    /// A Vault API call: `address` + `path`, with a Vault token and namespace when given; the
    /// answer's JSON (or `null` for a 204). A refusal carries Vault's `errors`.
    #[allow(clippy::too_many_arguments)]
    pub async fn vault_call(
        &self,
        method: Method,
        address: &str,
        path: &str,
        token: Option<&str>,
        namespace: Option<&str>,
        body: Option<&Value>,
        query: &[(&str, &str)],
    ) -> Result<Value> {
        let mut request = self.http.request(method, format!("{}{path}", address.trim_end_matches('/'))).query(query);
        if let Some(token) = token {
            request = request.header("X-Vault-Token", token);
        }
        if let Some(namespace) = namespace {
            request = request.header("X-Vault-Namespace", namespace);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = Self::send(request, false).await?;
        if response.status() == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        Self::json(response).await
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    fn request(&self, method: Method, path: &str, token: &str) -> RequestBuilder {
        self.http.request(method, format!("{}{path}", self.address)).bearer_auth(token)
    }

    /// Sends a request; an answer outside 2xx is an error (401 and 409 from a job's calls: the
    /// job is over).
    async fn send(builder: RequestBuilder, job: bool) -> Result<reqwest::Response> {
        let response = builder.send().await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        let body = readable(&body);
        if job && job_over(status) {
            return Err(ClientError::JobOver(body));
        }
        Err(ClientError::Refused { status, body })
    }

    async fn json(response: reqwest::Response) -> Result<Value> {
        response.json().await.map_err(|e| ClientError::Answer(e.to_string()))
    }

    /// Registers the agent: its id, and when to report next.
    pub async fn register(&self, name: &str) -> Result<(String, u64)> {
        let request =
            self.request(Method::POST, "/api/agent/register", &self.agent_token).json(&json!({ "name": name }));
        let answer = Self::json(Self::send(request, false).await?).await?;
        let id = answer["data"]["id"].as_str().ok_or_else(|| ClientError::Answer("no agent id".into()))?;
        Ok((id.to_owned(), report_in(&answer)))
    }

    /// Reports the agent's status (its heartbeat): when to report next.
    pub async fn report(&self, agent_id: &str, status: &str) -> Result<u64> {
        let path = format!("/api/agent/agents/{agent_id}/status");
        let request = self.request(Method::PUT, &path, &self.agent_token).json(&json!({ "status": status }));
        Ok(report_in(&Self::json(Self::send(request, false).await?).await?))
    }

    /// Claims the oldest job waiting in the agent's queue, if one does.
    pub async fn claim(&self, agent_id: &str) -> Result<Option<Claim>> {
        let request =
            self.request(Method::POST, "/api/agent/jobs", &self.agent_token).json(&json!({ "agent": agent_id }));
        let response = Self::send(request, false).await?;
        if response.status() == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        response.json().await.map(Some).map_err(|e| ClientError::Answer(e.to_string()))
    }

    /// What the job runs.
    pub async fn job(&self, token: &str) -> Result<Value> {
        Self::json(Self::send(self.request(Method::GET, "/api/agent/job", token), true).await?).await
    }

    /// Bytes from a job's path (its configuration, its saved plan).
    pub async fn job_bytes(&self, token: &str, path: &str) -> Result<bytes::Bytes> {
        Ok(Self::send(self.request(Method::GET, path, token), true).await?.bytes().await?)
    }

    pub async fn put_plan(&self, token: &str, plan: Vec<u8>) -> Result<()> {
        Self::send(self.request(Method::PUT, "/api/agent/job/plan", token).body(plan), true).await.map(drop)
    }

    pub async fn heartbeat(&self, token: &str) -> Result<Beat> {
        let response = Self::send(self.request(Method::POST, "/api/agent/job/heartbeat", token), true).await?;
        response.json().await.map_err(|e| ClientError::Answer(e.to_string()))
    }

    pub async fn append_log(&self, token: &str, offset: u64, chunk: Vec<u8>) -> Result<()> {
        let path = format!("/api/agent/job/log?offset={offset}");
        Self::send(self.request(Method::PUT, &path, token).body(chunk), true).await.map(drop)
    }

    pub async fn finish(&self, token: &str, outcome: &Value) -> Result<()> {
        Self::send(self.request(Method::POST, "/api/agent/job/finish", token).json(outcome), true).await.map(drop)
    }

    /// The workspace's current state, if it has one.
    pub async fn current_state(&self, token: &str, workspace_id: &str) -> Result<Option<bytes::Bytes>> {
        let path = format!("/api/v2/workspaces/{workspace_id}/current-state-version");
        let response = self.request(Method::GET, &path, token).send().await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let answer = Self::json(Self::send_checked(response, true).await?).await?;
        let url = answer["data"]["attributes"]["hosted-state-download-url"]
            .as_str()
            .ok_or_else(|| ClientError::Answer("the current state version has no download link".into()))?;
        let state = Self::send(self.http.get(url), true).await?.bytes().await?;
        Ok(Some(state))
    }

    async fn send_checked(response: reqwest::Response, job: bool) -> Result<reqwest::Response> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = readable(&response.text().await.unwrap_or_default());
        if job && job_over(status) {
            return Err(ClientError::JobOver(body));
        }
        Err(ClientError::Refused { status, body })
    }

    /// Stores `state` as the workspace's new state version (the run holds the workspace's lock;
    /// its job token writes as the run).
    pub async fn put_state(&self, token: &str, workspace_id: &str, state: &[u8]) -> Result<()> {
        let parsed: Value =
            serde_json::from_slice(state).map_err(|e| ClientError::Answer(format!("the state: {e}")))?;
        let body = json!({
            "data": {
                "type": "state-versions",
                "attributes": {
                    "serial": parsed["serial"].as_u64().unwrap_or(0),
                    "lineage": parsed["lineage"].as_str().unwrap_or_default(),
                    "md5": hex::encode(Md5::digest(state)),
                    "state": BASE64.encode(state),
                }
            }
        });
        let path = format!("/api/v2/workspaces/{workspace_id}/state-versions");
        let request =
            self.request(Method::POST, &path, token).header("content-type", "application/vnd.api+json").json(&body);
        Self::send(request, true).await.map(drop)
    }
}

/// An error answer as a person reads it: the `detail`s of a JSON:API error document, Vault's
/// `errors`, else the body itself; at most 2000 characters.
fn readable(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let messages: Vec<String> = parsed
        .as_ref()
        .and_then(|v| v["errors"].as_array())
        .map(|errors| {
            errors
                .iter()
                .filter_map(|e| e.as_str().map(str::to_owned).or_else(|| e["detail"].as_str().map(str::to_owned)))
                .collect()
        })
        .unwrap_or_default();
    let text = if messages.is_empty() { body.to_owned() } else { messages.join("; ") };
    text.chars().take(2000).collect()
}

/// Whether a job call's answer says the job is no longer this agent's: its token is gone (401),
/// or Hangar says the job is over (410; 404 for what the job no longer reaches). A 409 is a
/// conflict to report or retry, not the job's end.
fn job_over(status: StatusCode) -> bool {
    matches!(status, StatusCode::UNAUTHORIZED | StatusCode::GONE | StatusCode::NOT_FOUND)
}

fn http_client(ca_file: Option<&std::path::Path>, extra_pem: Option<&[u8]>) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(tls(ca_file, extra_pem)?)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(300))
        .build()?)
}

/// The `report-in` an answer carries in its `meta`, else a safe default.
fn report_in(answer: &Value) -> u64 {
    answer["meta"]["report-in"].as_u64().unwrap_or(5).max(1)
}
