//! The console's pages, one file per area: each handler parses and bounds its input, calls the
//! family's domain function with the viewer's principal (or broker token), and renders.

pub mod agents;
pub mod broker;
pub mod module;
pub mod modules;
pub mod organizations;
pub mod providers;
pub mod runs;
pub mod sign_in;
pub mod workspace;

use axum::extract::RawQuery;

use super::error::WebError;
use crate::api::{PageRequest, QueryParams};

/// The longest query string a page reads.
const MAX_QUERY_BYTES: usize = 2048;
/// The longest search term or filter value.
pub const MAX_FILTER_CHARS: usize = 100;

/// A page's query parameters, bounded.
pub fn params(RawQuery(raw): RawQuery) -> Result<QueryParams, WebError> {
    let raw = raw.unwrap_or_default();
    if raw.len() > MAX_QUERY_BYTES {
        return Err(WebError::bad_request("The query string is too long."));
    }
    QueryParams::parse(&raw).map_err(|_| WebError::bad_request("The query string is malformed."))
}

/// A filter parameter, trimmed, empty as none, refused past [`MAX_FILTER_CHARS`].
pub fn filter<'a>(params: &'a QueryParams, name: &str) -> Result<Option<&'a str>, WebError> {
    match params.non_empty(name) {
        Some(value) if value.chars().count() > MAX_FILTER_CHARS => {
            Err(WebError::bad_request(format!("{name} is longer than {MAX_FILTER_CHARS} characters.")))
        }
        value => Ok(value),
    }
}

/// The page a list shows: the API's own `page[number]` and `page[size]` rules.
pub fn page(params: &QueryParams) -> Result<PageRequest, WebError> {
    PageRequest::from_query(params).map_err(|e| WebError::bad_request(e.detail))
}

/// The host (and port) of Hangar's public URL, as Terraform names a registry in a source address.
pub fn registry_host(base: &str) -> &str {
    base.split_once("://").map_or(base, |(_, host)| host).trim_end_matches('/')
}
