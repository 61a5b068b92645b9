//! A delaying, counting proxy in front of the AWS emulator: every call waits a fixed delay (a
//! same-region round trip that moto on loopback does not have) and is then forwarded to moto
//! unchanged (moto does not check SigV4 signatures), and each is counted by service and action
//! (`dynamodb:GetItem`, `sqs:ReceiveMessage`, `s3:PUT`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::http::{HeaderMap, Request, Response, StatusCode};

/// Calls seen, by `service:action`.
pub type Counts = BTreeMap<String, u64>;

/// Headers that belong to one hop: the client and the server each set their own.
const HOP_BY_HOP: [&str; 5] = ["host", "content-length", "connection", "transfer-encoding", "keep-alive"];
/// The largest body forwarded (a module archive on its way to S3).
const MAX_BODY: usize = 64 * 1024 * 1024;

#[derive(Clone)]
pub struct DelayProxy {
    /// Where AWS clients are pointed (`AWS_ENDPOINT_URL`).
    pub endpoint: String,
    pub delay: Duration,
    counts: Arc<Mutex<Counts>>,
}

impl DelayProxy {
    /// Starts a proxy to `upstream` (moto) on a port of its own, for the harness's lifetime.
    pub async fn start(upstream: &str, delay: Duration) -> DelayProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port for the AWS proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
        let proxy = DelayProxy { endpoint, delay, counts: Arc::default() };
        let upstream = upstream.trim_end_matches('/').to_owned();
        let client = reqwest::Client::new();
        let served = proxy.clone();
        let app = axum::Router::new().fallback(move |request: Request<Body>| {
            let (proxy, upstream, client) = (served.clone(), upstream.clone(), client.clone());
            async move { proxy.forward(&client, &upstream, request).await }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        proxy
    }

    /// The calls seen so far.
    pub fn counts(&self) -> Counts {
        self.counts.lock().expect("the proxy's counts").clone()
    }

    async fn forward(&self, client: &reqwest::Client, upstream: &str, request: Request<Body>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let Ok(body) = to_bytes(body, MAX_BODY).await else { return refusal(StatusCode::PAYLOAD_TOO_LARGE) };
        let call = call_name(parts.method.as_str(), parts.uri.query().unwrap_or_default(), &parts.headers, &body);
        *self.counts.lock().expect("the proxy's counts").entry(call).or_default() += 1;
        tokio::time::sleep(self.delay).await;

        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut forwarded = client.request(parts.method.clone(), format!("{upstream}{path}")).body(body);
        for (name, value) in parts.headers.iter().filter(|(name, _)| !HOP_BY_HOP.contains(&name.as_str())) {
            forwarded = forwarded.header(name, value);
        }
        let Ok(answered) = forwarded.send().await else { return refusal(StatusCode::BAD_GATEWAY) };
        let mut response = Response::builder().status(answered.status().as_u16());
        for (name, value) in answered.headers().iter().filter(|(name, _)| !HOP_BY_HOP.contains(&name.as_str())) {
            response = response.header(name, value);
        }
        let Ok(bytes) = answered.bytes().await else { return refusal(StatusCode::BAD_GATEWAY) };
        response.body(Body::from(bytes)).expect("a response")
    }
}

fn refusal(status: StatusCode) -> Response<Body> {
    Response::builder().status(status).body(Body::empty()).expect("a response")
}

/// `service:action` of one call: the service from SigV4's credential scope (header or
/// pre-signed query), the action from `X-Amz-Target` (JSON protocols: DynamoDB, KMS, SQS),
/// an `Action` parameter (query protocols), or else the method (S3's REST).
fn call_name(method: &str, query: &str, headers: &HeaderMap, body: &[u8]) -> String {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let query: BTreeMap<String, String> = serde_urlencoded::from_str(query).unwrap_or_default();
    let credential = match header("authorization").split("Credential=").nth(1) {
        Some(credential) => credential.to_owned(),
        None => query.get("X-Amz-Credential").cloned().unwrap_or_default(),
    };
    // AKID/date/region/service/aws4_request
    let service = credential.split(['/', ',']).nth(3).filter(|s| !s.is_empty()).unwrap_or("unsigned");
    let target = header("x-amz-target");
    let action = if let Some((_, action)) = target.split_once('.') {
        action.to_owned()
    } else if let Some(action) = query.get("Action") {
        action.clone()
    } else {
        let form: BTreeMap<String, String> = serde_urlencoded::from_bytes(body).unwrap_or_default();
        form.get("Action").cloned().unwrap_or_else(|| method.to_owned())
    };
    format!("{service}:{action}")
}

/// The calls between two snapshots, by `service:action`.
pub fn difference(after: &Counts, before: &Counts) -> Counts {
    after
        .iter()
        .map(|(call, n)| (call.clone(), n - before.get(call).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.parse().unwrap(), value.parse().unwrap())).collect()
    }

    #[test]
    fn calls_are_named_by_service_and_action() {
        let signed = "AWS4-HMAC-SHA256 Credential=AKID/20261124/us-east-1/dynamodb/aws4_request, SignedHeaders=host";
        let dynamo = headers(&[("authorization", signed), ("x-amz-target", "DynamoDB_20120810.BatchGetItem")]);
        assert_eq!(call_name("POST", "", &dynamo, b"{}"), "dynamodb:BatchGetItem");

        let sqs = signed.replace("dynamodb", "sqs");
        assert_eq!(
            call_name("POST", "", &headers(&[("authorization", &sqs)]), b"Action=ReceiveMessage"),
            "sqs:ReceiveMessage"
        );

        let presigned = "X-Amz-Credential=AKID%2F20261124%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00";
        assert_eq!(call_name("PUT", presigned, &HeaderMap::new(), b"archive"), "s3:PUT");
        assert_eq!(call_name("GET", "", &HeaderMap::new(), b""), "unsigned:GET");
    }

    #[test]
    fn a_difference_keeps_only_what_changed() {
        let before = Counts::from([("dynamodb:GetItem".into(), 2), ("sqs:ReceiveMessage".into(), 1)]);
        let after = Counts::from([("dynamodb:GetItem".into(), 5), ("sqs:ReceiveMessage".into(), 1)]);
        assert_eq!(difference(&after, &before), Counts::from([("dynamodb:GetItem".into(), 3)]));
    }
}
