//! A fault-injecting proxy in front of the AWS emulator, one per test: it forwards AWS query-API
//! requests (IAM, STS) to moto, records each call's action and parameters, and on the actions a
//! test chooses delays, fails, fails after moto did the work (AWS acted, the answer was lost), or
//! never answers. What a broker does when AWS misbehaves is then seen from outside.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::http::{HeaderMap, Request, Response, StatusCode};

/// What the proxy does to a chosen action.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answers an AWS error without forwarding: AWS did nothing.
    Fail { status: u16, code: &'static str },
    /// Forwards, then answers an AWS error instead of moto's answer: AWS did it, the caller
    /// cannot know.
    FailAfter { status: u16, code: &'static str },
    /// Waits, then forwards.
    Delay(Duration),
    /// Forwards, then never answers (a request that dies here).
    HangAfter,
    /// Answers this instead of forwarding: a stand-in for what moto cannot say.
    Respond { status: u16, body: String },
    /// The fault, on the next call of the action only (the SDK's retry then goes through).
    Once(Box<Fault>),
}

/// One call the proxy saw.
#[derive(Debug, Clone)]
pub struct Call {
    pub action: String,
    pub params: BTreeMap<String, String>,
    /// The access key id the request was signed with (SigV4's `Credential=`), if signed.
    pub access_key: Option<String>,
}

#[derive(Default)]
struct Inner {
    faults: Vec<(String, Fault)>,
    calls: Vec<Call>,
}

/// The proxy; dropping it does not stop it (it lives as long as the test's runtime).
#[derive(Clone)]
pub struct AwsProxy {
    pub endpoint: String,
    inner: Arc<Mutex<Inner>>,
}

impl AwsProxy {
    /// Starts a proxy to `upstream` (moto's endpoint) on a port of its own.
    pub async fn start(upstream: &str) -> AwsProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the AWS proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
        let proxy = AwsProxy { endpoint, inner: Arc::default() };
        let upstream = upstream.trim_end_matches('/').to_owned();
        let client = reqwest::Client::new();
        let served = proxy.clone();
        let app = axum::Router::new().fallback(move |request: Request<Body>| {
            let (proxy, upstream, client) = (served.clone(), upstream.clone(), client.clone());
            async move { proxy.handle(&client, &upstream, request).await }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        proxy
    }

    /// Applies `fault` to every later call of `action` (e.g. `CreateAccessKey`).
    pub fn inject(&self, action: &str, fault: Fault) {
        self.inner.lock().expect("proxy state").faults.push((action.to_owned(), fault));
    }

    /// Removes every fault.
    pub fn heal(&self) {
        self.inner.lock().expect("proxy state").faults.clear();
    }

    /// Every call seen so far, in order.
    pub fn all_calls(&self) -> Vec<Call> {
        self.inner.lock().expect("proxy state").calls.clone()
    }

    /// The calls of `action` seen so far.
    pub fn calls(&self, action: &str) -> Vec<Call> {
        let inner = self.inner.lock().expect("proxy state");
        inner.calls.iter().filter(|call| call.action == action).cloned().collect()
    }

    async fn handle(&self, client: &reqwest::Client, upstream: &str, request: Request<Body>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let body = to_bytes(body, 16 * 1024 * 1024).await.unwrap_or_default();
        let query = parts.uri.query().unwrap_or_default();
        let mut params: BTreeMap<String, String> = serde_urlencoded::from_str(query).unwrap_or_default();
        params.extend(serde_urlencoded::from_bytes::<BTreeMap<String, String>>(&body).unwrap_or_default());
        let action = params.get("Action").cloned().unwrap_or_default();
        let authorization = parts.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
        let access_key = authorization
            .split("Credential=")
            .nth(1)
            .and_then(|credential| credential.split('/').next())
            .map(str::to_owned);
        let fault = {
            let mut inner = self.inner.lock().expect("proxy state");
            inner.calls.push(Call { action: action.clone(), params, access_key });
            match inner.faults.iter().position(|(wanted, _)| *wanted == action) {
                Some(at) => match inner.faults[at].1.clone() {
                    Fault::Once(fault) => {
                        inner.faults.remove(at);
                        Some(*fault)
                    }
                    fault => Some(fault),
                },
                None => None,
            }
        };
        match fault {
            Some(Fault::Fail { status, code }) => return aws_error(status, code),
            Some(Fault::Respond { status, body }) => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let answer = Response::builder().status(status).header("content-type", "text/xml");
                return answer.body(Body::from(body)).expect("a response");
            }
            _ => {}
        }
        if let Some(Fault::Delay(delay)) = &fault {
            tokio::time::sleep(*delay).await;
        }
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut forwarded = client.request(parts.method.clone(), format!("{upstream}{path}")).body(body.to_vec());
        for (name, value) in &parts.headers {
            if name != "host" && name != "content-length" {
                forwarded = forwarded.header(name, value);
            }
        }
        let answered = forwarded.send().await;
        match fault {
            Some(Fault::FailAfter { status, code }) => return aws_error(status, code),
            Some(Fault::HangAfter) => std::future::pending::<()>().await,
            _ => {}
        }
        let Ok(answered) = answered else { return aws_error(502, "ProxyUpstreamUnavailable") };
        let status = answered.status().as_u16();
        let headers: HeaderMap = answered.headers().clone();
        let bytes = answered.bytes().await.unwrap_or_default();
        let mut response = Response::builder().status(status);
        for name in ["content-type", "x-amzn-requestid"] {
            if let Some(value) = headers.get(name) {
                response = response.header(name, value);
            }
        }
        response.body(Body::from(bytes)).expect("a response")
    }
}

/// AWS's query-API error document.
fn aws_error(status: u16, code: &str) -> Response<Body> {
    let kind = if status >= 500 { "Receiver" } else { "Sender" };
    let body = format!(
        "<ErrorResponse><Error><Type>{kind}</Type><Code>{code}</Code><Message>injected by the test's AWS proxy</Message>\
         </Error><RequestId>hangar-proxy</RequestId></ErrorResponse>"
    );
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "text/xml")
        .body(Body::from(body))
        .expect("a response")
}
