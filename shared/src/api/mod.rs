//! The JSON:API toolkit shared by every `/api/v2` family: documents and resources, error
//! objects, the pagination envelope, request-body and query-string parsing.

mod base_url;
mod body;
mod document;
mod error;
mod field;
mod pagination;
mod query;
pub mod refusal;

pub use base_url::BaseUrl;
pub use body::{Incoming, JsonApiBody, Relationship};
pub use document::{Document, Resource};
pub use error::ApiError;
pub use field::Field;
pub use pagination::{whole_number, Listing, PageRequest, Paginated, MAX_PAGE_SIZE};
pub use query::QueryParams;

/// The media type of every JSON:API request and response.
pub const JSONAPI: &str = "application/vnd.api+json";

/// The `created-at` / `updated-at` form: ISO 8601, UTC, milliseconds.
pub fn timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
