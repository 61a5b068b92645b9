//! The HTTP plumbing both providers share: authenticated requests with a timeout, pagination,
//! archive streaming across redirects, and statuses mapped to [`VcsError`] kinds with messages
//! that name the call but never the token or a signed download URL.

use std::time::Duration;

use futures::TryStreamExt;
use reqwest::{header, Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use tokio_util::io::StreamReader;

use super::{ArchiveReader, ServiceProvider, VcsError};

const API_TIMEOUT: Duration = Duration::from_secs(30);
const ARCHIVE_TIMEOUT: Duration = Duration::from_secs(300);
const MAX_REDIRECTS: usize = 5;
const PER_PAGE: usize = 100;
const MAX_PAGES: usize = 100;
const MAX_DETAIL_CHARS: usize = 200;

/// One provider's API: its base URL, token and the headers it wants on every call.
pub(super) struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
    vendor: &'static str,
    headers: &'static [(&'static str, &'static str)],
}

impl Api {
    pub(super) fn new(
        http: reqwest::Client,
        provider: ServiceProvider,
        api_url: &str,
        token: String,
        headers: &'static [(&'static str, &'static str)],
    ) -> Self {
        Self { http, base: api_url.trim_end_matches('/').to_owned(), token, vendor: provider.vendor(), headers }
    }

    fn request(&self, method: Method, path: &str, timeout: Duration) -> RequestBuilder {
        let url = format!("{}{path}", self.base);
        let request = self.http.request(method, url).bearer_auth(&self.token).timeout(timeout);
        self.headers.iter().fold(request.header(header::USER_AGENT, "hangar"), |r, (k, v)| r.header(*k, *v))
    }

    /// GETs JSON; statuses in `missing` count as not found besides 404.
    pub(super) async fn get_where<T: DeserializeOwned>(
        &self,
        call: &str,
        path: &str,
        missing: &[StatusCode],
    ) -> Result<T, VcsError> {
        let response = self.request(Method::GET, path, API_TIMEOUT).send().await;
        let response = self.check(call, response.map_err(|e| self.failed(call, &e, API_TIMEOUT))?, missing).await?;
        self.decode(call, response).await
    }

    pub(super) async fn get<T: DeserializeOwned>(&self, call: &str, path: &str) -> Result<T, VcsError> {
        self.get_where(call, path, &[]).await
    }

    pub(super) async fn post<T: DeserializeOwned>(
        &self,
        call: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, VcsError> {
        let response = self.request(Method::POST, path, API_TIMEOUT).json(body).send().await;
        let response = self.check(call, response.map_err(|e| self.failed(call, &e, API_TIMEOUT))?, &[]).await?;
        self.decode(call, response).await
    }

    /// Every item of a paginated list; `path` ends in `?` or `&`. A page shorter than the page
    /// size is the last, which needs no `Link` header (whose host may not be `api_url`'s).
    pub(super) async fn all_pages<T: DeserializeOwned>(&self, call: &str, path: &str) -> Result<Vec<T>, VcsError> {
        let mut items = Vec::new();
        for page in 1..=MAX_PAGES {
            let batch: Vec<T> =
                self.get(&format!("{call} (page {page})"), &format!("{path}per_page={PER_PAGE}&page={page}")).await?;
            let last = batch.len() < PER_PAGE;
            items.extend(batch);
            if last {
                return Ok(items);
            }
        }
        Err(VcsError::Upstream(format!("{call}: more than {} items, which Hangar does not read", PER_PAGE * MAX_PAGES)))
    }

    /// Streams a body, following redirects itself when the caller's client does not. The
    /// token goes only to the API's own origin, never to a download host.
    pub(super) async fn stream(&self, call: &str, path: &str) -> Result<ArchiveReader, VcsError> {
        let failed = |e: reqwest::Error| self.failed(call, &e, ARCHIVE_TIMEOUT);
        let mut response = self.request(Method::GET, path, ARCHIVE_TIMEOUT).send().await.map_err(failed)?;
        for _ in 0..MAX_REDIRECTS {
            if !response.status().is_redirection() {
                break;
            }
            let target = response.headers().get(header::LOCATION).and_then(|v| v.to_str().ok());
            let Some(next) = target.and_then(|location| response.url().join(location).ok()) else {
                return Err(VcsError::Upstream(format!(
                    "{call}: {} redirected without a usable Location",
                    self.vendor
                )));
            };
            let mut request = self.http.get(next.clone()).header(header::USER_AGENT, "hangar").timeout(ARCHIVE_TIMEOUT);
            if next.origin() == response.url().origin() {
                request = request.bearer_auth(&self.token);
            }
            response = request.send().await.map_err(failed)?;
        }
        let response = self.check(call, response, &[]).await?;
        let (call, vendor) = (call.to_owned(), self.vendor);
        let body = response.bytes_stream().map_err(move |e| {
            std::io::Error::other(format!("{call}: {vendor}'s archive download failed: {}", kind(&e, ARCHIVE_TIMEOUT)))
        });
        Ok(Box::pin(StreamReader::new(body)))
    }

    /// The response if it succeeded; otherwise the error its status stands for.
    async fn check(&self, call: &str, response: Response, missing: &[StatusCode]) -> Result<Response, VcsError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let exhausted = response.headers().get("x-ratelimit-remaining").is_some_and(|v| v == "0");
        let rate_limited = status == StatusCode::TOO_MANY_REQUESTS || (status == StatusCode::FORBIDDEN && exhausted);
        let answered = match self.detail(response).await {
            Some(detail) => format!("{call}: {} answered {} ({detail})", self.vendor, status.as_u16()),
            None => format!("{call}: {} answered {}", self.vendor, status.as_u16()),
        };
        Err(match status {
            _ if rate_limited => VcsError::Upstream(format!("{answered}; the token is rate-limited, retry later")),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                VcsError::Unauthorized(format!("{answered}; the token is invalid or lacks access"))
            }
            _ if status == StatusCode::NOT_FOUND || missing.contains(&status) => {
                VcsError::NotFound(format!("{answered}; it does not exist or the token cannot see it"))
            }
            _ => VcsError::Upstream(answered),
        })
    }

    /// The provider's own explanation of an error (`message`, or OAuth's `error_description`),
    /// shortened and with the token masked in case the provider echoes it.
    async fn detail(&self, response: Response) -> Option<String> {
        #[derive(Deserialize)]
        struct ErrorBody {
            message: Option<serde_json::Value>,
            error_description: Option<String>,
            error: Option<String>,
        }
        let body: ErrorBody = serde_json::from_slice(&response.bytes().await.ok()?).ok()?;
        let text = match body.message {
            Some(serde_json::Value::String(message)) => message,
            Some(other) => other.to_string(),
            None => body.error_description.or(body.error)?,
        };
        let text: String = text.chars().take(MAX_DETAIL_CHARS).collect();
        Some(if self.token.is_empty() { text } else { text.replace(&self.token, "<redacted>") })
    }

    async fn decode<T: DeserializeOwned>(&self, call: &str, response: Response) -> Result<T, VcsError> {
        let body = response.bytes().await.map_err(|e| self.failed(call, &e, API_TIMEOUT))?;
        serde_json::from_slice(&body)
            .map_err(|e| VcsError::Upstream(format!("{call}: {} answered an unexpected payload ({e})", self.vendor)))
    }

    fn failed(&self, call: &str, e: &reqwest::Error, timeout: Duration) -> VcsError {
        VcsError::Upstream(format!("{call}: {} {}", self.vendor, kind(e, timeout)))
    }
}

/// What went wrong with a request, in words; never reqwest's own text, which holds the URL.
fn kind(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        format!("did not answer within {} s", timeout.as_secs())
    } else if e.is_connect() {
        "could not be reached".into()
    } else if e.is_redirect() {
        "redirected too many times".into()
    } else if e.is_body() || e.is_decode() {
        "cut the response off".into()
    } else if e.is_builder() {
        "has an API URL that is not valid".into()
    } else {
        "could not be called".into()
    }
}

/// Percent-encodes one path segment, `/` included, leaving only RFC 3986's unreserved
/// characters. `.` and `..` would be resolved as dot segments, so they are refused.
pub(super) fn segment(value: &str) -> Result<String, VcsError> {
    if matches!(value, "" | "." | "..") {
        return Err(VcsError::NotFound(format!("{value:?} cannot name a repository, ref or commit")));
    }
    let mut encoded = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => encoded.push(char::from(b)),
            _ => encoded.push_str(&format!("%{b:02X}")),
        }
    }
    Ok(encoded)
}

/// A hook id, which providers send as a number.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum HookId {
    Number(u64),
    Text(String),
}

#[derive(Deserialize)]
pub(super) struct Created {
    pub(super) id: HookId,
}

impl Created {
    pub(super) fn id(self) -> String {
        match self.id {
            HookId::Number(n) => n.to_string(),
            HookId::Text(text) => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_encode_slashes_and_refuse_dot_segments() {
        assert_eq!(segment("group/sub project").unwrap(), "group%2Fsub%20project");
        assert_eq!(segment("v1.2.0-rc_1~x").unwrap(), "v1.2.0-rc_1~x");
        assert!(segment("..").is_err() && segment("").is_err());
    }
}
