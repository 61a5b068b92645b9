//! The HTTP plumbing both providers share: authenticated requests with a timeout through the
//! checked [`Client`], pagination, redirects followed one checked hop at a time, bodies read
//! under a cap, and statuses mapped to [`VcsError`] kinds. A connection's URL may point at a
//! host whose words nobody should relay, so the caller reads only that the VCS provider "could
//! not be reached" or "answered with an error" (with what a 401, 403 or 404 means for the token
//! or repository); the status and the provider's own text go to the log. Neither carries the
//! token or a signed download URL.

use std::time::Duration;

use futures::StreamExt;
use reqwest::{header, Method, Response, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use tokio_util::io::StreamReader;

use super::client::{check_url, may_follow, Client, UrlProblem};
use super::networks::Refused;
use super::{ArchiveReader, ServiceProvider, VcsError};

const API_TIMEOUT: Duration = Duration::from_secs(30);
const ARCHIVE_TIMEOUT: Duration = Duration::from_secs(300);
const MAX_REDIRECTS: usize = 5;
const PER_PAGE: usize = 100;
const MAX_PAGES: usize = 100;
/// The largest JSON answer read: a page of 100 tags is tens of KiB.
const MAX_API_BYTES: usize = 4 * 1024 * 1024;
/// How much of an error answer is read, for the log.
const MAX_ERROR_BYTES: usize = 64 * 1024;
/// How much of a provider's text the log keeps.
const MAX_DETAIL_CHARS: usize = 200;

/// What the caller reads when a provider cannot be called.
pub(super) const UNREACHABLE: &str = "the VCS provider could not be reached";
/// What the caller reads when a provider's answer is an error, or unusable.
pub(super) const ANSWERED_ERROR: &str = "the VCS provider answered with an error";

/// One provider's API: its base URL, token and the headers it wants on every call.
pub(super) struct Api {
    client: Client,
    base: String,
    token: String,
    vendor: &'static str,
    headers: &'static [(&'static str, &'static str)],
}

impl Api {
    pub(super) fn new(
        client: Client,
        provider: ServiceProvider,
        api_url: &str,
        token: String,
        headers: &'static [(&'static str, &'static str)],
    ) -> Self {
        Self { client, base: api_url.trim_end_matches('/').to_owned(), token, vendor: provider.vendor(), headers }
    }

    /// GETs JSON; statuses in `missing` count as not found besides 404.
    pub(super) async fn get_where<T: DeserializeOwned>(
        &self,
        call: &str,
        path: &str,
        missing: &[StatusCode],
    ) -> Result<T, VcsError> {
        let response = self.send(call, Method::GET, path, None, API_TIMEOUT, false).await?;
        let response = self.check(call, response, missing).await?;
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
        let response = self.send(call, Method::POST, path, Some(body), API_TIMEOUT, false).await?;
        let response = self.check(call, response, &[]).await?;
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

    /// Streams an archive, cut off past `HANGAR_ARCHIVE_MAX_COMPRESSED_BYTES`. A download may
    /// be redirected to a host beside the API's (see [`may_follow`]).
    pub(super) async fn stream(&self, call: &str, path: &str) -> Result<ArchiveReader, VcsError> {
        let response = self.send(call, Method::GET, path, None, ARCHIVE_TIMEOUT, true).await?;
        let response = self.check(call, response, &[]).await?;
        let limit = self.client.max_archive_bytes;
        let too_large = format!("{call}: the archive is larger than {}, the limit for module archives", size(limit));
        if response.content_length().is_some_and(|length| length > limit) {
            let refused =
                futures::stream::once(async move { Err::<bytes::Bytes, _>(std::io::Error::other(too_large)) });
            return Ok(Box::pin(StreamReader::new(refused)));
        }
        let (call, vendor, mut read) = (call.to_owned(), self.vendor, 0u64);
        let body = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| {
                tracing::warn!(call, vendor, error = %causes(&e), "VCS archive download failed");
                std::io::Error::other(format!("{call}: {UNREACHABLE}"))
            })?;
            read += chunk.len() as u64;
            if read > limit {
                return Err(std::io::Error::other(too_large.clone()));
            }
            Ok(chunk)
        });
        Ok(Box::pin(StreamReader::new(body)))
    }

    /// Sends a request on the API and follows up to [`MAX_REDIRECTS`] redirects of a GET that
    /// [`may_follow`] allows, each hop's host checked again. The token and the provider's
    /// headers go only to the API's own origin.
    async fn send(
        &self,
        call: &str,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        timeout: Duration,
        download: bool,
    ) -> Result<Response, VcsError> {
        let base = self.base(call)?;
        let mut url =
            Url::parse(&format!("{}{path}", self.base)).map_err(|_| self.refused(call, "a path it cannot hold"))?;
        for hop in 0..=MAX_REDIRECTS {
            if let Err(refused) = self.client.check_target(&url) {
                return Err(self.refused(call, &refused.to_string()));
            }
            let http = self.client.http().map_err(|why| self.unbuilt(call, why))?;
            let mut request = http.request(method.clone(), url.clone()).timeout(timeout);
            request = request.header(header::USER_AGENT, "hangar");
            if url.origin() == base.origin() {
                request = self.headers.iter().fold(request.bearer_auth(&self.token), |r, (k, v)| r.header(*k, *v));
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(|e| self.failed(call, &e))?;
            let redirected = matches!(response.status().as_u16(), 301 | 302 | 303 | 307 | 308);
            if !redirected || method != Method::GET {
                return Ok(response);
            }
            let location = response.headers().get(header::LOCATION).and_then(|v| v.to_str().ok());
            let Some(next) = location.and_then(|location| url.join(location).ok()) else {
                tracing::warn!(call, vendor = self.vendor, "VCS provider redirected without a usable Location");
                return Err(VcsError::Upstream(format!("{call}: {ANSWERED_ERROR}")));
            };
            if !may_follow(&base, &next, download) {
                let to = next.host_str().unwrap_or_default();
                tracing::warn!(
                    call,
                    vendor = self.vendor,
                    to,
                    "VCS redirect not followed: it leaves the provider's host"
                );
                return Err(VcsError::Upstream(format!("{call}: {ANSWERED_ERROR}")));
            }
            tracing::debug!(call, hop, to = next.host_str().unwrap_or_default(), "following a VCS redirect");
            url = next;
        }
        tracing::warn!(call, vendor = self.vendor, "VCS provider redirected more than {MAX_REDIRECTS} times");
        Err(VcsError::Upstream(format!("{call}: {ANSWERED_ERROR}")))
    }

    /// The API's base URL, checked before every call: a connection stored before the checks
    /// existed, or whose address an operator no longer allows, is refused here.
    fn base(&self, call: &str) -> Result<Url, VcsError> {
        check_url(&self.base, self.client.allowed()).map_err(|problem| match problem {
            UrlProblem::Malformed => {
                self.refused(call, "an API URL that is not an http(s) URL without query or credentials")
            }
            UrlProblem::Refused(refused) => self.refused(call, &refused.to_string()),
        })
    }

    /// A call Hangar would not make: logged with why, told as unreachable.
    fn refused(&self, call: &str, why: &str) -> VcsError {
        tracing::warn!(call, vendor = self.vendor, why, "VCS call refused");
        VcsError::Upstream(format!("{call}: {UNREACHABLE}"))
    }

    /// The response if it succeeded; otherwise the error its status stands for.
    async fn check(&self, call: &str, response: Response, missing: &[StatusCode]) -> Result<Response, VcsError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let exhausted = response.headers().get("x-ratelimit-remaining").is_some_and(|v| v == "0");
        let rate_limited = status == StatusCode::TOO_MANY_REQUESTS || (status == StatusCode::FORBIDDEN && exhausted);
        let detail = self.detail(response).await.unwrap_or_default();
        let status_code = status.as_u16();
        tracing::warn!(
            call,
            vendor = self.vendor,
            status = status_code,
            rate_limited,
            detail,
            "VCS provider answered with an error"
        );
        Err(match status {
            _ if rate_limited => VcsError::Upstream(format!("{call}: {ANSWERED_ERROR}")),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                VcsError::Unauthorized(format!("{call}: {ANSWERED_ERROR}: the token is invalid or lacks access"))
            }
            _ if status == StatusCode::NOT_FOUND || missing.contains(&status) => {
                VcsError::NotFound(format!("{call}: {ANSWERED_ERROR}: it does not exist or the token cannot see it"))
            }
            _ => VcsError::Upstream(format!("{call}: {ANSWERED_ERROR}")),
        })
    }

    /// The provider's own explanation of an error (`message`, or OAuth's `error_description`),
    /// for the log: read under a cap, shortened, and with the token masked in case the provider
    /// echoes it.
    async fn detail(&self, response: Response) -> Option<String> {
        #[derive(Deserialize)]
        struct ErrorBody {
            message: Option<serde_json::Value>,
            error_description: Option<String>,
            error: Option<String>,
        }
        let body: ErrorBody = serde_json::from_slice(&read_capped(response, MAX_ERROR_BYTES).await.ok()?).ok()?;
        let text = match body.message {
            Some(serde_json::Value::String(message)) => message,
            Some(other) => other.to_string(),
            None => body.error_description.or(body.error)?,
        };
        let text = if self.token.is_empty() { text } else { text.replace(&self.token, "<redacted>") };
        Some(shortened(&text))
    }

    async fn decode<T: DeserializeOwned>(&self, call: &str, response: Response) -> Result<T, VcsError> {
        let body = match read_capped(response, MAX_API_BYTES).await {
            Ok(body) => body,
            Err(Capped::TooLarge) => {
                tracing::warn!(
                    call,
                    vendor = self.vendor,
                    limit = MAX_API_BYTES,
                    "VCS provider answered more than the limit"
                );
                return Err(VcsError::Upstream(format!("{call}: {ANSWERED_ERROR}")));
            }
            Err(Capped::Failed(e)) => return Err(self.failed(call, &e)),
        };
        serde_json::from_slice(&body).map_err(|e| {
            let error = shortened(&e.to_string());
            tracing::warn!(call, vendor = self.vendor, error, "VCS provider answered an unexpected payload");
            VcsError::Upstream(format!("{call}: {ANSWERED_ERROR}"))
        })
    }

    /// A request that could not be made: the HTTPS client could not be built (logged), told as
    /// unreachable.
    fn unbuilt(&self, call: &str, why: &str) -> VcsError {
        tracing::error!(call, vendor = self.vendor, why, "VCS client could not be built");
        VcsError::Upstream(format!("{call}: {UNREACHABLE}"))
    }

    /// A request that failed before an answer: logged with its causes (never reqwest's own
    /// text, which holds the URL), told as unreachable.
    fn failed(&self, call: &str, e: &reqwest::Error) -> VcsError {
        let causes = causes(e);
        if refusal(e).is_some() {
            tracing::warn!(call, vendor = self.vendor, error = %causes, "VCS call refused");
        } else {
            tracing::warn!(call, vendor = self.vendor, error = %causes, "VCS provider could not be reached");
        }
        VcsError::Upstream(format!("{call}: {UNREACHABLE}"))
    }
}

enum Capped {
    TooLarge,
    Failed(reqwest::Error),
}

/// A body read whole, refused as soon as it is longer than `limit` (or says it will be).
async fn read_capped(mut response: Response, limit: usize) -> Result<Vec<u8>, Capped> {
    if response.content_length().is_some_and(|length| length > limit as u64) {
        return Err(Capped::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Capped::Failed)? {
        if body.len() + chunk.len() > limit {
            return Err(Capped::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The address refusal behind a failed connection, if that is why it failed.
fn refusal(e: &reqwest::Error) -> Option<&Refused> {
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return Some(refused);
        }
        source = cause.source();
    }
    None
}

/// What went wrong with a request, in words: its kind and causes, without the URL.
fn causes(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "the response was cut off"
    } else if e.is_builder() {
        "the request could not be built"
    } else {
        "the request failed"
    };
    let mut text = kind.to_owned();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    shortened(&text)
}

/// At most [`MAX_DETAIL_CHARS`] characters, control characters blanked so that a provider's
/// text cannot forge log lines.
fn shortened(text: &str) -> String {
    text.chars().take(MAX_DETAIL_CHARS).map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// A byte count as limits are written: `100 MiB`, or bytes.
fn size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
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
