//! Vault's HTTP conventions: the response envelope, `LIST` (a verb API Gateway cannot route,
//! so it is rewritten to `GET ?list=true`, which Vault accepts too), the request path in one
//! canonical form, and the caller's token (`X-Vault-Token`, `X-Service-Token` or a bearer token).

use std::fmt::Write as _;

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

/// A random (version 4) UUID, as Vault's request ids are.
fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Rewrites `LIST /v1/…` as `GET /v1/…?list=true`.
pub fn list_as_get(mut request: Request) -> Request {
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
    request
}

/// A request path under `/v1` in the one form that is routed, checked against policies and
/// served: percent-decoded, without slashes at either end (`aws/roles/deploy`). It is made by
/// [`refuse_unclean_paths`] alone, so a handler that takes it cannot see any other form.
#[derive(Debug, Clone)]
pub struct VaultPath(pub String);

/// A path under `/v1` in canonical form: percent-encoded only where a URI path must be, for
/// routing, and percent-decoded, for everything after.
struct Canonical {
    encoded: String,
    decoded: String,
}

/// A segment with its percent-escapes decoded; `None` when one is malformed.
fn unescape(segment: &str) -> Option<Vec<u8>> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Bytes a path segment carries as they are (RFC 3986 `pchar` but `%`); all others are escaped.
fn plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte)
}

/// Checks and canonicalises a path under `/v1` (`raw` as the URI carries it, from the slash
/// after `/v1`). The policy check and the route must read the same path (a check of
/// `aws//creds/prod` must not pass a deny on `aws/creds/prod` that routing then ignores), so
/// every form a client, a proxy or a path resolver could read two ways is refused: empty
/// segments, `.` and `..` however escaped, a slash escaped inside a segment, malformed escapes
/// and bytes that are not UTF-8. One trailing slash is taken, as Vault's LIST sends it
/// (`LIST /v1/aws/roles/`).
fn canonical(raw: &str) -> Result<Canonical, BrokerError> {
    let shown = raw.strip_prefix('/').unwrap_or(raw);
    let refuse = |reason: &str| BrokerError::invalid(format!("invalid path \"{shown}\": {reason}"));
    let Some(rest) = raw.strip_prefix('/') else {
        return if raw.is_empty() {
            Ok(Canonical { encoded: String::new(), decoded: String::new() })
        } else {
            Err(refuse("it must start with a slash"))
        };
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (mut encoded, mut decoded) = (String::with_capacity(raw.len()), String::with_capacity(raw.len()));
    if rest.is_empty() {
        return Ok(Canonical { encoded, decoded });
    }
    for segment in rest.split('/') {
        if segment.is_empty() {
            return Err(refuse("empty segments are not allowed"));
        }
        let bytes = unescape(segment).ok_or_else(|| refuse("malformed percent-encoding"))?;
        if bytes.contains(&b'/') {
            return Err(refuse("a slash encoded inside a segment is not allowed"));
        }
        let text = String::from_utf8(bytes).map_err(|_| refuse("it is not UTF-8"))?;
        if text == "." || text == ".." {
            return Err(refuse("\".\" and \"..\" segments are not allowed"));
        }
        encoded.push('/');
        for byte in text.bytes() {
            if plain(byte) {
                encoded.push(char::from(byte));
            } else {
                let _ = write!(encoded, "%{byte:02X}");
            }
        }
        if !decoded.is_empty() {
            decoded.push('/');
        }
        decoded.push_str(&text);
    }
    Ok(Canonical { encoded, decoded })
}

/// Rewrites a `/v1/…` URI to its canonical path before routing, so that a route matches the same
/// path whatever escapes or trailing slash the client sent (`/v1/sys/policies/acl/` is
/// `sys/policies/acl`). A path it refuses passes unchanged, to be answered by
/// [`refuse_unclean_paths`] where the broker's routes are.
pub fn canonical_uri(mut request: Request) -> Request {
    let uri = request.uri();
    let Some(under) = under_v1(uri.path()) else {
        return request;
    };
    if let Some(Canonical { encoded, .. }) = canonical(under).ok().filter(|c| c.encoded != under) {
        let query = uri.query().map(|query| format!("?{query}")).unwrap_or_default();
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = format!("/v1{encoded}{query}").parse().ok();
        if let Ok(rewritten) = Uri::from_parts(parts) {
            *request.uri_mut() = rewritten;
        }
    }
    request
}

/// The path after `/v1`, for a path under it.
fn under_v1(path: &str) -> Option<&str> {
    path.strip_prefix("/v1").filter(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Refuses an unclean path (see [`canonical`]) with a 400 before any handler, token or policy
/// sees it; hands every other request its [`VaultPath`]. It wraps the broker's `/v1` routes.
pub async fn refuse_unclean_paths(mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    match canonical(under_v1(path).unwrap_or(path)) {
        Ok(Canonical { decoded, .. }) => {
            request.extensions_mut().insert(VaultPath(decoded));
            next.run(request).await
        }
        Err(refused) => refused.into_response(),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for VaultPath {
    type Rejection = BrokerError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<VaultPath>().cloned().ok_or_else(|| {
            BrokerError::Internal("the request path was not checked: serve the broker through broker::router".into())
        })
    }
}

/// Whether a GET is a LIST.
pub fn is_list(parts_query: Option<&str>) -> bool {
    parts_query.is_some_and(|query| {
        query.split('&').any(|pair| matches!(pair, "list=true" | "list=1" | "list=t" | "list=True"))
    })
}

/// The caller: a valid token, one of whose uses this request spent if they are limited.
pub struct Caller(pub ServiceToken);

/// The token a request presents: `X-Vault-Token`, `X-Service-Token`, or a bearer token.
pub fn presented(headers: &axum::http::HeaderMap) -> Option<&str> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    header("x-vault-token")
        .or_else(|| header("x-service-token"))
        .or_else(|| header("authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::trim))
        .filter(|token| !token.is_empty())
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = BrokerError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        authenticated(state, &parts.headers).await.map(Caller)
    }
}

/// The token a request's headers present, one of its uses spent: what [`Caller`] extracts, for
/// a handler that authenticates only some of its requests (an auth method's login needs none).
pub async fn authenticated(state: &AppState, headers: &axum::http::HeaderMap) -> Result<ServiceToken, BrokerError> {
    let secret = presented(headers).ok_or(BrokerError::PermissionDenied)?;
    let now = chrono::Utc::now().timestamp();
    let token = tokens::authenticate(state.store.as_ref(), secret, now).await?;
    let token = token.ok_or(BrokerError::PermissionDenied)?;
    if token.is_being_revoked() {
        // Its last use: the job revokes it and what it holds.
        state.work.notify_one();
    }
    Ok(token)
}

/// A boolean field as Vault's field data reads one: a JSON boolean or its string form; `None`
/// when absent.
pub fn flag(body: &Map<String, Value>, name: &str) -> Result<Option<bool>, BrokerError> {
    match body.get(name) {
        None => Ok(None),
        Some(Value::Bool(value)) => Ok(Some(*value)),
        Some(Value::String(raw)) => match raw.to_ascii_lowercase().as_str() {
            "" | "false" | "f" | "0" => Ok(Some(false)),
            "true" | "t" | "1" => Ok(Some(true)),
            _ => Err(BrokerError::invalid(format!("{name} must be a boolean"))),
        },
        Some(_) => Err(BrokerError::invalid(format!("{name} must be a boolean"))),
    }
}

/// The largest request body the broker reads (a policy, a role's documents): 2 MiB.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// A request body as Vault reads it: JSON whatever the `Content-Type` (curl's `-d` sends a form
/// type, and Vault clients do not all set one); empty is none.
pub struct VaultBody(pub Option<Value>);

impl VaultBody {
    /// The body as a JSON object (none, or `null`, is an empty one).
    pub fn object(&self) -> Result<Map<String, Value>, BrokerError> {
        object(self.0.as_ref())
    }
}

/// A request body as a JSON object: none, or `null`, is an empty one. A member that is `null`
/// is left out, as Vault's field data takes it as unset: clients send optional fields that way
/// (hvac's `enable_secrets_engine` sends `"description": null`).
pub fn object(body: Option<&Value>) -> Result<Map<String, Value>, BrokerError> {
    match body {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => {
            Ok(map.iter().filter(|(_, value)| !value.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect())
        }
        Some(_) => Err(BrokerError::invalid("the request body must be a JSON object")),
    }
}

impl<S: Send + Sync> axum::extract::FromRequest<S> for VaultBody {
    type Rejection = BrokerError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(request, state).await.map_err(|e| match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => BrokerError::TooLarge(MAX_BODY_BYTES),
            _ => BrokerError::invalid(format!("failed to read the request body: {e}")),
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(VaultBody(None));
        }
        serde_json::from_slice(&bytes)
            .map(|value| VaultBody(Some(value)))
            .map_err(|e| BrokerError::invalid(format!("failed to parse JSON input: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(raw: &str) -> Option<String> {
        canonical(raw).ok().map(|c| c.decoded)
    }

    fn encoded(raw: &str) -> Option<String> {
        canonical(raw).ok().map(|c| c.encoded)
    }

    #[test]
    fn clean_paths_keep_their_segments_and_lose_one_trailing_slash() {
        assert_eq!(decoded("/aws/creds/prod").as_deref(), Some("aws/creds/prod"));
        assert_eq!(decoded("/aws/roles/").as_deref(), Some("aws/roles"));
        assert_eq!(encoded("/aws/roles/").as_deref(), Some("/aws/roles"));
        assert_eq!(decoded("/").as_deref(), Some(""));
        assert_eq!(decoded("").as_deref(), Some(""));
        assert_eq!(decoded("/a.b/..c/.d/e..").as_deref(), Some("a.b/..c/.d/e.."), "dots inside a name are plain");
    }

    #[test]
    fn escapes_are_decoded_once_and_kept_only_where_a_path_needs_them() {
        assert_eq!(decoded("/sys/polic%69es/acl").as_deref(), Some("sys/policies/acl"));
        assert_eq!(encoded("/sys/polic%69es/acl").as_deref(), Some("/sys/policies/acl"));
        assert_eq!(decoded("/aws/roles/a%20b").as_deref(), Some("aws/roles/a b"));
        assert_eq!(encoded("/aws/roles/a%20b").as_deref(), Some("/aws/roles/a%20b"));
        assert_eq!(decoded("/aws/roles/%252e%252e").as_deref(), Some("aws/roles/%2e%2e"), "decoded once only");
        assert_eq!(encoded("/aws/roles/%252e%252e").as_deref(), Some("/aws/roles/%252e%252e"));
        assert_eq!(encoded("/aws/roles/%C3%A9").as_deref(), Some("/aws/roles/%C3%A9"));
    }

    #[test]
    fn empty_and_dot_segments_encoded_slashes_and_bad_escapes_are_refused() {
        for raw in [
            "//aws/roles",
            "/aws//roles",
            "/aws/roles//",
            "/aws/./roles",
            "/aws/roles/..",
            "/aws/%2e/roles",
            "/aws/%2E%2e/roles",
            "/aws/.%2E/roles",
            "/aws/%2e./roles",
            "/aws/roles%2Fx",
            "/aws/roles%2fx",
            "/aws/roles/%",
            "/aws/roles/%zz",
            "/aws/roles/%FF",
            "aws/roles",
        ] {
            assert!(canonical(raw).is_err(), "{raw}");
        }
    }
}
