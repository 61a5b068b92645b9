//! Vault's HTTP conventions: the response envelope, `LIST` (a verb API Gateway cannot route,
//! so it is rewritten to `GET ?list=true`, which Vault accepts too), and the caller's token
//! (`X-Vault-Token`, `X-Service-Token` or a bearer token).

use axum::extract::{FromRequestParts, Request};
use axum::http::{request::Parts, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::error::BrokerError;
use super::tokens::{self, ServiceToken};
use crate::state::AppState;

/// A Vault response: `{request_id, lease_id, renewable, lease_duration, data, wrap_info,
/// warnings, auth}`.
#[derive(Debug, Clone)]
pub struct VaultResponse(Map<String, Value>);

impl VaultResponse {
    pub fn data(data: Value) -> Self {
        let mut body = Map::new();
        body.insert("request_id".into(), Value::String(request_id()));
        body.insert("lease_id".into(), Value::String(String::new()));
        body.insert("renewable".into(), Value::Bool(false));
        body.insert("lease_duration".into(), json!(0));
        body.insert("data".into(), data);
        body.insert("wrap_info".into(), Value::Null);
        body.insert("warnings".into(), Value::Null);
        body.insert("auth".into(), Value::Null);
        VaultResponse(body)
    }

    /// A response carrying a lease.
    pub fn leased(data: Value, lease_id: &str, duration_secs: u64, renewable: bool) -> Self {
        let mut response = Self::data(data);
        response.0.insert("lease_id".into(), Value::String(lease_id.to_owned()));
        response.0.insert("lease_duration".into(), json!(duration_secs));
        response.0.insert("renewable".into(), Value::Bool(renewable));
        response
    }

    /// A response whose payload is in `auth` (token creation).
    pub fn auth(auth: Value) -> Self {
        let mut response = Self::data(Value::Null);
        response.0.insert("auth".into(), auth);
        response
    }

    /// The `keys` of a LIST; nothing to list is a 404, as Vault answers it.
    pub fn keys(keys: Vec<String>) -> Result<Self, BrokerError> {
        if keys.is_empty() {
            return Err(BrokerError::NotFound);
        }
        Ok(Self::data(json!({ "keys": keys })))
    }

    /// `data` whose fields are at the top level too, where the spec asks for no `data` wrapper
    /// (and older clients read them); Vault clients look in `data`.
    pub fn top_level(fields: Value) -> Self {
        let map = fields.as_object().cloned().unwrap_or_default();
        let mut response = Self::data(fields);
        response.0.extend(map);
        response
    }
}

impl IntoResponse for VaultResponse {
    fn into_response(self) -> Response {
        (StatusCode::OK, Json(Value::Object(self.0))).into_response()
    }
}

fn request_id() -> String {
    let raw = crate::ids::random_token(32).to_lowercase();
    format!("{}-{}-{}-{}-{}", &raw[..8], &raw[8..12], &raw[12..16], &raw[16..20], &raw[20..32])
}

/// Rewrites `LIST /v1/…` as `GET /v1/…?list=true`.
pub async fn list_as_get(mut request: Request, next: Next) -> Response {
    if request.method().as_str() == "LIST" && request.uri().path().starts_with("/v1/") {
        *request.method_mut() = Method::GET;
        let uri = request.uri();
        let query = match uri.query() {
            Some(query) if !query.is_empty() => format!("{query}&list=true"),
            _ => "list=true".to_owned(),
        };
        if let Ok(rewritten) = format!("{}?{query}", uri.path()).parse::<Uri>() {
            *request.uri_mut() = rewritten;
        }
    }
    next.run(request).await
}

/// Whether a GET is a LIST.
pub fn is_list(parts_query: Option<&str>) -> bool {
    parts_query.is_some_and(|query| {
        query.split('&').any(|pair| matches!(pair, "list=true" | "list=1" | "list=t" | "list=True"))
    })
}

/// The caller: a valid service token.
pub struct Caller(pub ServiceToken);

fn presented(parts: &Parts) -> Option<&str> {
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    header("x-vault-token")
        .or_else(|| header("x-service-token"))
        .or_else(|| header("authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::trim))
        .filter(|token| !token.is_empty())
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = BrokerError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let secret = presented(parts).ok_or(BrokerError::PermissionDenied)?;
        let token = tokens::resolve(state.store.as_ref(), secret).await?.ok_or(BrokerError::PermissionDenied)?;
        Ok(Caller(token))
    }
}

/// A request body as Vault reads it: JSON whatever the `Content-Type` (curl's `-d` sends a form
/// type, and Vault clients do not all set one); empty is none.
pub struct VaultBody(pub Option<Value>);

impl VaultBody {
    /// The body as a JSON object (none, or `null`, is an empty one).
    pub fn object(&self) -> Result<Map<String, Value>, BrokerError> {
        object(self.0.as_ref())
    }
}

/// A request body as a JSON object: none, or `null`, is an empty one.
pub fn object(body: Option<&Value>) -> Result<Map<String, Value>, BrokerError> {
    match body {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map.clone()),
        Some(_) => Err(BrokerError::invalid("the request body must be a JSON object")),
    }
}

impl<S: Send + Sync> axum::extract::FromRequest<S> for VaultBody {
    type Rejection = BrokerError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|e| BrokerError::invalid(format!("failed to read the request body: {e}")))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(VaultBody(None));
        }
        serde_json::from_slice(&bytes)
            .map(|value| VaultBody(Some(value)))
            .map_err(|e| BrokerError::invalid(format!("failed to parse JSON input: {e}")))
    }
}
