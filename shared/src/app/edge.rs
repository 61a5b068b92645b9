//! What every request meets first, in every function and in dev-server: its log line, and its
//! path in the one form the routes know. HCP Terraform's API takes a trailing slash and
//! repeated slashes, and clients rely on it (terrasnek deletes `…/private/acme/vpc/` and
//! `…/private/acme/db//aws`), so `/api/v2` and `/api/registry` paths lose them before routing;
//! there authorization is per resource, so another spelling of a path reaches nothing more.
//! The broker's `/v1` paths are left to the broker, which refuses empty segments: there the
//! path is what the ACL checks.

use std::borrow::Cow;
use std::time::Instant;

use axum::extract::Request;
use axum::http::Uri;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use tower::util::MapRequestLayer;
use tower::Layer;

/// Wraps a function's whole router: the log line outermost (so it sees every request, the
/// path as sent, and the final status), then the path in its one form.
pub fn edge(router: Router) -> Router {
    let normalised = MapRequestLayer::new(normalise_path).layer(router);
    Router::new().fallback_service(middleware::from_fn(log_request).layer(normalised))
}

/// One log line per request: method, path (secret segments redacted; never the query, which
/// holds a link's signature), status and latency. Headers, and so tokens, are never logged.
async fn log_request(request: Request, next: Next) -> Response {
    let (method, path, started) = (request.method().clone(), shown(request.uri().path()).into_owned(), Instant::now());
    let response = next.run(request).await;
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        // Hundredths of a millisecond: more digits are the clock's noise, not the request's.
        latency_ms = (started.elapsed().as_secs_f64() * 100_000.0).round() / 100.0,
        "request"
    );
    response
}

/// A path as logged. A webhook's id is its credential (whoever knows it may deliver), so
/// everything after `/webhooks/<provider>/` is replaced.
fn shown(path: &str) -> Cow<'_, str> {
    let mut segments = path.split('/').filter(|segment| !segment.is_empty());
    if segments.next() != Some("webhooks") {
        return Cow::Borrowed(path);
    }
    match segments.next() {
        Some(provider) => Cow::Owned(format!("/webhooks/{provider}/[redacted]")),
        None => Cow::Borrowed(path),
    }
}

/// Rewrites an `/api/v2` or `/api/registry` path without empty segments or a trailing slash.
fn normalise_path(mut request: Request) -> Request {
    if let Some(path) = normalised(request.uri().path()) {
        let query = request.uri().query().map(|query| format!("?{query}")).unwrap_or_default();
        let mut parts = request.uri().clone().into_parts();
        parts.path_and_query = format!("{path}{query}").parse().ok();
        if let Ok(rewritten) = Uri::from_parts(parts) {
            *request.uri_mut() = rewritten;
        }
    }
    request
}

/// The path without empty segments and trailing slash, when it is under `/api/v2` or
/// `/api/registry` and differs; percent-escapes are left as sent.
fn normalised(path: &str) -> Option<String> {
    let clean = path.split('/').filter(|segment| !segment.is_empty()).fold(String::new(), |mut clean, segment| {
        clean.push('/');
        clean.push_str(segment);
        clean
    });
    let under = |prefix: &str| clean == prefix || clean.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'));
    (clean != path && (under("/api/v2") || under("/api/registry"))).then_some(clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_lose_empty_segments_and_the_trailing_slash() {
        let cases = [
            ("/api/v2/organizations/acme/", Some("/api/v2/organizations/acme")),
            ("//api/v2//organizations//acme//", Some("/api/v2/organizations/acme")),
            ("/api/v2/", Some("/api/v2")),
            ("/api/registry/v1/modules/", Some("/api/registry/v1/modules")),
            ("/api/v2/organizations/acme%2F/teams/", Some("/api/v2/organizations/acme%2F/teams")),
            ("/api/v2/organizations/acme", None),
            ("/v1/aws//roles/", None),
            ("/api/v2x/", None),
            ("/object/abc/", None),
            ("/", None),
        ];
        for (path, expected) in cases {
            assert_eq!(normalised(path).as_deref(), expected, "{path}");
        }
    }

    #[test]
    fn a_webhooks_id_never_reaches_the_log() {
        assert_eq!(shown("/webhooks/vcs/0123abcd"), "/webhooks/vcs/[redacted]");
        assert_eq!(shown("//webhooks/vcs/0123abcd/x"), "/webhooks/vcs/[redacted]");
        assert_eq!(shown("/api/v2/ping"), "/api/v2/ping");
        assert_eq!(shown("/object/abc"), "/object/abc");
    }
}
