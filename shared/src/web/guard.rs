//! What protects every console page: the security headers on every answer, errors rendered as
//! pages (never axum's bare bodies), and the same-origin check of every POST form.

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::WebError;

/// No scripts at all; styles only from the console's own stylesheet; images only over https
/// (README badges); forms post only back here; never framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src https:; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

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
    set(headers, header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY);
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    if !headers.contains_key(header::CACHE_CONTROL) {
        // Pages show what one token may see: no shared or back-button cache keeps them.
        set(headers, header::CACHE_CONTROL, "no-store");
    }
    response
}

/// Whether a POST came from a page of this site: its `Origin` (or, when a browser sends none,
/// its `Referer`) names the host the request was sent to. With `SameSite=Strict` cookies this
/// refuses cross-site forms, the sign-in form included (login CSRF), whatever cookies they carry.
pub fn same_origin(headers: &HeaderMap) -> Result<(), WebError> {
    let value = |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let host = value(header::HOST).ok_or(WebError::CrossSite)?;
    let origin = value(header::ORIGIN).or_else(|| value(header::REFERER)).ok_or(WebError::CrossSite)?;
    let authority = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
    match authority {
        Some(authority) if authority.eq_ignore_ascii_case(host) => Ok(()),
        _ => Err(WebError::CrossSite),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(HeaderName, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.clone(), HeaderValue::from_static(value))).collect()
    }

    #[test]
    fn a_post_from_the_same_host_passes_and_any_other_is_refused() {
        let host = (header::HOST, "127.0.0.1:8080");
        assert!(same_origin(&headers(&[host.clone(), (header::ORIGIN, "http://127.0.0.1:8080")])).is_ok());
        assert!(same_origin(&headers(&[host.clone(), (header::REFERER, "http://127.0.0.1:8080/app/sign-in")])).is_ok());
        for origin in ["http://evil.example", "null", "http://127.0.0.1:8080.evil.example", "http://127.0.0.1:9090"] {
            assert!(same_origin(&headers(&[host.clone(), (header::ORIGIN, origin)])).is_err(), "{origin}");
        }
        assert!(same_origin(&headers(&[host])).is_err(), "neither Origin nor Referer");
    }
}
