//! What protects every console page: the security headers on every answer, errors rendered as
//! pages (never axum's bare bodies), and the refusal of POST forms that name another site.

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ErrorPage, WebError};
use super::layout;
use super::session;
use crate::state::AppState;

/// No script but the console's one (`layout::COPY_SCRIPT`, by its hash); styles only from the
/// console's own stylesheet; images only over https (README badges); forms post only back here;
/// never framed.
fn content_security_policy() -> &'static HeaderValue {
    static POLICY: std::sync::OnceLock<HeaderValue> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        use base64::Engine as _;
        use sha2::Digest as _;
        let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(layout::COPY_SCRIPT));
        let policy = format!(
            "default-src 'none'; script-src 'sha256-{hash}'; style-src 'self'; img-src https:; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        );
        HeaderValue::from_str(&policy).expect("a header value of ASCII")
    })
}

/// Adds the security headers to every console answer, and turns an answer axum made on its own
/// (a 405, a form it refused, a body over the limit: no `Content-Type` or plain text) into a page.
pub async fn headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let status = response.status();
    let ours = response.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"text/html"))
        || response.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"text/css"));
    if (status.is_client_error() || status.is_server_error()) && !ours {
        let refused = if status.is_server_error() {
            WebError::Internal
        } else {
            WebError::Refused(status, status.canonical_reason().unwrap_or("Refused").to_owned())
        };
        let allow = response.headers().get(header::ALLOW).cloned();
        response = refused.into_response();
        if let Some(allow) = allow {
            response.headers_mut().insert(header::ALLOW, allow);
        }
    }
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    headers.insert(header::CONTENT_SECURITY_POLICY, content_security_policy().clone());
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    if !headers.contains_key(header::CACHE_CONTROL) {
        // Pages show what one token may see: no shared or back-button cache keeps them.
        set(headers, header::CACHE_CONTROL, "no-store");
    }
    response
}

/// Refuses a POST that says it comes from another site: an `Origin` (or, without one, a
/// `Referer`) naming another host than the one the request was sent to. The pages send
/// `Referrer-Policy: no-referrer`, under which browsers send `Origin: null` (or nothing) with
/// their own forms, so an absent or `null` origin passes here: the form token decides then
/// (`Viewer::check_form`, `session::check_sign_in_form`), with `SameSite=Strict` cookies.
pub fn refuse_foreign_origin(headers: &HeaderMap) -> Result<(), WebError> {
    let value = |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(origin) = value(header::ORIGIN).filter(|o| *o != "null").or_else(|| value(header::REFERER)) else {
        return Ok(());
    };
    let host = value(header::HOST).ok_or(WebError::CrossSite)?;
    let authority = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
    match authority {
        Some(authority) if authority.eq_ignore_ascii_case(host) => Ok(()),
        _ => Err(WebError::CrossSite),
    }
}

/// Shows an error page inside the signed-in header when the request came with a live session:
/// a page the token may not see, a 404, a refused form all keep the way back to the console and
/// the sign-out form. The session is read only for an error page, and only then.
pub async fn signed_in_errors(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let id = session::presented(request.headers()).map(str::to_owned);
    let response = next.run(request).await;
    let (Some(error), Some(id)) = (response.extensions().get::<ErrorPage>().cloned(), id) else { return response };
    let now = chrono::Utc::now().timestamp();
    let Ok(Some(viewer)) = session::open(state.store.as_ref(), &id, now).await else { return response };
    let (mut parts, _) = response.into_parts();
    let page = layout::signed_in_message_page(viewer.chrome(), error.title, &error.text).into_response();
    let (page_parts, body) = page.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    if let Some(content_type) = page_parts.headers.get(header::CONTENT_TYPE) {
        parts.headers.insert(header::CONTENT_TYPE, content_type.clone());
    }
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(HeaderName, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.clone(), HeaderValue::from_static(value))).collect()
    }

    #[test]
    fn a_post_naming_another_host_is_refused_and_one_naming_none_is_left_to_the_form_token() {
        let host = (header::HOST, "127.0.0.1:8080");
        assert!(refuse_foreign_origin(&headers(&[host.clone(), (header::ORIGIN, "http://127.0.0.1:8080")])).is_ok());
        let referer = (header::REFERER, "http://127.0.0.1:8080/app/sign-in");
        assert!(refuse_foreign_origin(&headers(&[host.clone(), referer])).is_ok());
        for origin in ["http://evil.example", "http://127.0.0.1:8080.evil.example", "http://127.0.0.1:9090", "x"] {
            assert!(refuse_foreign_origin(&headers(&[host.clone(), (header::ORIGIN, origin)])).is_err(), "{origin}");
        }
        let evil_referer = (header::REFERER, "https://evil.example/page");
        assert!(refuse_foreign_origin(&headers(&[host.clone(), (header::ORIGIN, "null"), evil_referer])).is_err());
        assert!(refuse_foreign_origin(&headers(&[host.clone(), (header::ORIGIN, "null")])).is_ok());
        assert!(refuse_foreign_origin(&headers(&[host])).is_ok());
    }
}
