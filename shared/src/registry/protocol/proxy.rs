//! The public registry proxy under `/api/registry/public/v1/modules`: exactly the three
//! operations the spec allows for public modules (list versions, latest version for a
//! provider, get a module), only for modules the caller's organization has curated, forwarded
//! to the upstream registry. Everything coming back is bounded (a timeout and a size cap) and
//! every upstream failure becomes a 502, so a slow or hostile upstream cannot hold or flood
//! Hangar, and the caller's token never leaves it.

use std::fmt;
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;

use super::error::{ProtocolError, Result};
use crate::api::{ApiError, Field};
use crate::auth::Principal;
use crate::registry::names::{ModuleName, Namespace, ProviderName};
use crate::registry::RegistryError;
use crate::state::AppState;
use crate::store::keys;

const PROVIDER: &str = "/api/registry/public/v1/modules/{namespace}/{name}/{provider}";

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(&format!("{PROVIDER}/versions"), get(list_versions))
        .route(PROVIDER, get(latest_for_provider))
        .route(&format!("{PROVIDER}/{{version}}"), get(get_module))
}

/// A public module's address, every segment validated so it can go into the upstream URL as
/// is: no segment can add a path level, a query or an escape.
struct Address {
    namespace: Namespace,
    name: ModuleName,
    provider: ProviderName,
}

impl Address {
    /// A segment that is not a valid name names no module: 404, not the core's 422.
    fn parse(namespace: &str, name: &str, provider: &str) -> Result<Self> {
        let not_found = |_: RegistryError| ProtocolError::NotFound;
        Ok(Address {
            namespace: Namespace::parse(Field::Document, namespace).map_err(not_found)?,
            name: ModuleName::parse(Field::Document, name).map_err(not_found)?,
            provider: ProviderName::parse(Field::Document, provider).map_err(not_found)?,
        })
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.name, self.provider)
    }
}

/// `GET …/{namespace}/{name}/{provider}/versions`: the versions the upstream lists.
async fn list_versions(
    State(state): State<AppState>,
    principal: std::result::Result<Principal, ApiError>,
    path: std::result::Result<Path<(String, String, String)>, PathRejection>,
) -> Result<Response> {
    let principal = principal?;
    let Path((namespace, name, provider)) = path?;
    let address = Address::parse(&namespace, &name, &provider)?;
    proxy(&state, &principal, &address, "versions").await
}

/// `GET …/{namespace}/{name}/{provider}`: the latest version for one provider.
async fn latest_for_provider(
    State(state): State<AppState>,
    principal: std::result::Result<Principal, ApiError>,
    path: std::result::Result<Path<(String, String, String)>, PathRejection>,
) -> Result<Response> {
    let principal = principal?;
    let Path((namespace, name, provider)) = path?;
    let address = Address::parse(&namespace, &name, &provider)?;
    proxy(&state, &principal, &address, "").await
}

/// `GET …/{namespace}/{name}/{provider}/{version}`: one version of a module.
async fn get_module(
    State(state): State<AppState>,
    principal: std::result::Result<Principal, ApiError>,
    path: std::result::Result<Path<(String, String, String, String)>, PathRejection>,
) -> Result<Response> {
    let principal = principal?;
    let Path((namespace, name, provider, version)) = path?;
    let address = Address::parse(&namespace, &name, &provider)?;
    let version = semver::Version::parse(&version).map_err(|_| ProtocolError::NotFound)?;
    proxy(&state, &principal, &address, &version.to_string()).await
}

/// Checks curation, then relays the upstream's answer at `{base}/{address}[/{tail}]`.
async fn proxy(state: &AppState, principal: &Principal, address: &Address, tail: &str) -> Result<Response> {
    let org_id = principal.org_id().ok_or(ProtocolError::NotFound)?;
    let key = keys::module(org_id, Some(address.namespace.as_str()), address.name.as_str(), address.provider.as_str());
    if state.store.get(&key).await?.is_none() {
        return Err(ProtocolError::NotFound);
    }
    let base = &state.config.public_registry_url;
    let url = if tail.is_empty() { format!("{base}/{address}") } else { format!("{base}/{address}/{tail}") };
    let body = fetch(state, &url).await.inspect_err(|e| {
        if let ProtocolError::BadGateway(problem) = e {
            tracing::warn!(module = %address, operation = operation(tail), problem, "public registry proxy failed");
        }
    })?;
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// The operation's name for the log, never the URL (the configured base could hold credentials).
fn operation(tail: &str) -> &'static str {
    match tail {
        "" => "latest-for-provider",
        "versions" => "list-versions",
        _ => "get-module",
    }
}

/// GETs `url` without the caller's credentials and returns its body if it is a 200 with JSON
/// of at most `public_registry_max_bytes`; an upstream 404 stays a 404.
async fn fetch(state: &AppState, url: &str) -> Result<Bytes> {
    let config = &state.config;
    let (timeout, max_bytes) = (config.public_registry_timeout, config.public_registry_max_bytes);
    let failed = |e: reqwest::Error| ProtocolError::BadGateway(describe(&e, timeout));
    let too_large = || ProtocolError::BadGateway(format!("the upstream response exceeds {max_bytes} bytes"));

    let http = state.http.as_ref().map_err(|why| ProtocolError::BadGateway(format!("no HTTPS client: {why}")))?;
    let mut response =
        http.get(url).header(header::ACCEPT, "application/json").timeout(timeout).send().await.map_err(failed)?;
    match response.status() {
        StatusCode::OK => {}
        StatusCode::NOT_FOUND => return Err(ProtocolError::NotFound),
        status => return Err(ProtocolError::BadGateway(format!("the upstream registry answered {}", status.as_u16()))),
    }
    let declared = response.content_length();
    if declared.is_some_and(|length| length > max_bytes as u64) {
        return Err(too_large());
    }
    let capacity = declared.map_or(0, |length| length as usize);
    let mut body = Vec::with_capacity(capacity);
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > max_bytes {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(&body)
        .map_err(|_| ProtocolError::BadGateway("the upstream registry answered invalid JSON".into()))?;
    Ok(Bytes::from(body))
}

/// What went wrong calling the upstream, in words for the caller and the log.
fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        format!("the upstream registry did not answer within {}", seconds(timeout))
    } else if e.is_builder() {
        "the upstream registry's address is not a valid URL".into()
    } else if e.is_connect() {
        "the upstream registry could not be reached".into()
    } else if e.is_body() || e.is_decode() {
        "the upstream registry's response was cut off".into()
    } else {
        "the request to the upstream registry failed".into()
    }
}

/// `10 s`, `0.5 s`.
fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_seconds() {
        assert_eq!(seconds(Duration::from_secs(10)), "10 s");
        assert_eq!(seconds(Duration::from_millis(500)), "0.5 s");
    }

    #[test]
    fn addresses_reject_anything_that_could_reshape_the_upstream_url() {
        assert!(Address::parse("hashicorp", "consul", "aws").is_ok());
        for (namespace, name, provider) in [
            ("..", "consul", "aws"),
            ("hashicorp", "con/sul", "aws"),
            ("hashicorp", "consul?x=1", "aws"),
            ("hashicorp", "consul", "AWS"),
            ("hashicorp", "consul", "aws#x"),
            ("", "consul", "aws"),
        ] {
            assert!(Address::parse(namespace, name, provider).is_err(), "{namespace}/{name}/{provider}");
        }
    }
}
