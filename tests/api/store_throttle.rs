//! A store that throttles is one failure, answered alike by every family: a 503 with
//! `Retry-After`, each in its own format (JSON:API, the registry protocol, Vault's, the console).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use hangar::config::Config;
use hangar::store::{Condition, Item, ItemStore, Key, Page, Query, Store, StoreError, UpdateOp, Write};
use hangar_tests::TestApp;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

/// A store that answers every call with DynamoDB's throttle once `throttling` is set.
struct ThrottlingStore {
    inner: Store,
    throttling: Arc<AtomicBool>,
}

impl ThrottlingStore {
    fn check(&self) -> Result<(), StoreError> {
        if self.throttling.load(Ordering::SeqCst) {
            return Err(StoreError::Throttled);
        }
        Ok(())
    }
}

#[async_trait]
impl ItemStore for ThrottlingStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        self.check()?;
        self.inner.get(key).await
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        self.check()?;
        self.inner.get_many(keys).await
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        self.check()?;
        self.inner.put(item, condition).await
    }

    async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError> {
        self.check()?;
        self.inner.update(key, ops, condition).await
    }

    async fn delete(&self, key: &Key, condition: Condition) -> Result<Option<Item>, StoreError> {
        self.check()?;
        self.inner.delete(key, condition).await
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.check()?;
        self.inner.query(query).await
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        self.check()?;
        self.inner.transact(writes).await
    }
}

/// Every family's router over the app's data, through a store that throttles on demand.
async fn throttled(app: &TestApp) -> (Router, Arc<AtomicBool>) {
    let mut state = app.second_state().await;
    let throttling = Arc::new(AtomicBool::new(false));
    state.store = Arc::new(ThrottlingStore { inner: state.store.clone(), throttling: throttling.clone() });
    (hangar::app::routers::all(state), throttling)
}

/// The status, the `Retry-After` and `Content-Type` headers, and the body of a request.
async fn send(router: &Router, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Option<String>, String, String) {
    let mut request = Request::builder().uri(path).header("Host", "hangar.local");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router.clone().oneshot(request.body(Body::empty()).expect("a request")).await.expect("infallible");
    let header = |name: &str| response.headers().get(name).map(|v| v.to_str().expect("text").to_owned());
    let (status, retry_after, content_type) = (response.status(), header("retry-after"), header("content-type"));
    let body = response.into_body().collect().await.expect("a body").to_bytes();
    (status, retry_after, content_type.unwrap_or_default(), String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_throttled_store_is_a_503_with_retry_after_in_every_familys_format() {
    let root = "root-token";
    let app = TestApp::spawn_with(Config { root_service_token: Some(root.into()), ..Config::default() }).await;
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    let module = json!({"data": {"type": "registry-modules", "attributes": {"name": "vpc", "provider": "aws"}}});
    assert_eq!(app.post("/api/v2/organizations/acme/registry-modules", &owners, module).await.status, 201);
    let (router, throttling) = throttled(&app).await;
    let bearer = format!("Bearer {owners}");
    let json_api: [&str; 3] = [
        "/api/v2/organizations/acme",
        "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws",
        "/api/v2/organizations/acme/agent-pools",
    ];
    let module_versions = "/api/registry/v1/modules/acme/vpc/aws/versions";

    // Before the throttle, each answers as usual.
    assert_eq!(send(&router, json_api[1], &[("Authorization", &bearer)]).await.0, StatusCode::OK);
    throttling.store(true, Ordering::SeqCst);

    for path in json_api {
        let (status, retry_after, content_type, body) = send(&router, path, &[("Authorization", &bearer)]).await;
        assert_eq!((status, retry_after.as_deref()), (StatusCode::SERVICE_UNAVAILABLE, Some("1")), "{path}: {body}");
        assert_eq!(content_type, "application/vnd.api+json", "{path}");
        let body: Value = serde_json::from_str(&body).expect("JSON:API");
        assert_eq!(body["errors"][0]["status"], "503", "{path}: {body}");
    }

    let (status, retry_after, content_type, body) = send(&router, module_versions, &[("Authorization", &bearer)]).await;
    assert_eq!((status, retry_after.as_deref()), (StatusCode::SERVICE_UNAVAILABLE, Some("1")), "protocol: {body}");
    assert_eq!(content_type, "application/json");
    let body: Value = serde_json::from_str(&body).expect("the protocol's JSON");
    assert!(body["errors"][0].is_string(), "the protocol's error list: {body}");

    let (status, retry_after, content_type, body) = send(&router, "/v1/aws/roles", &[("X-Vault-Token", root)]).await;
    assert_eq!((status, retry_after.as_deref()), (StatusCode::SERVICE_UNAVAILABLE, Some("1")), "broker: {body}");
    assert_eq!(content_type, "application/json");
    let body: Value = serde_json::from_str(&body).expect("Vault's JSON");
    assert_eq!(body, json!({"errors": ["the store is busy; retry shortly"]}));

    // A session id of the right shape, which the console looks up in the store.
    let cookie = format!("hangar_session={}", "a".repeat(43));
    let (status, retry_after, content_type, body) = send(&router, "/app", &[("Cookie", &cookie)]).await;
    assert_eq!((status, retry_after.as_deref()), (StatusCode::SERVICE_UNAVAILABLE, Some("1")), "console: {body}");
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(body.contains("busy"), "{body}");
}
