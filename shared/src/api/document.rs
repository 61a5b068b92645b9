//! JSON:API documents: one resource or a page of them, with `included` and `meta`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};

use super::{Paginated, JSONAPI};

/// One resource object. `attributes` is a JSON object with hyphenated member names.
#[derive(Debug, Clone, Serialize)]
pub struct Resource {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub attributes: Value,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub relationships: Map<String, Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub links: Map<String, Value>,
}

impl Resource {
    pub fn new(kind: &'static str, id: impl Into<String>, attributes: Value) -> Self {
        Self { id: id.into(), kind, attributes, relationships: Map::new(), links: Map::new() }
    }

    /// A to-one relationship: `{"data": {"id", "type"}}`.
    pub fn to_one(mut self, name: &str, kind: &str, id: impl Into<String>) -> Self {
        self.relationships.insert(name.into(), serde_json::json!({ "data": { "id": id.into(), "type": kind } }));
        self
    }

    /// A to-one relationship that may be empty: `{"data": null}` then.
    pub fn to_one_or_null(self, name: &str, kind: &str, id: Option<&str>) -> Self {
        match id {
            Some(id) => self.to_one(name, kind, id),
            None => {
                let mut resource = self;
                resource.relationships.insert(name.into(), serde_json::json!({ "data": null }));
                resource
            }
        }
    }

    /// A to-many relationship given as resource linkage.
    pub fn to_many<I: Into<String>>(mut self, name: &str, kind: &str, ids: impl IntoIterator<Item = I>) -> Self {
        let data: Vec<Value> = ids.into_iter().map(|id| serde_json::json!({ "id": id.into(), "type": kind })).collect();
        self.relationships.insert(name.into(), serde_json::json!({ "data": data }));
        self
    }

    /// A relationship given only as a link to the related collection.
    pub fn related_link(mut self, name: &str, href: impl Into<String>) -> Self {
        self.relationships.insert(name.into(), serde_json::json!({ "links": { "related": href.into() } }));
        self
    }

    pub fn link(mut self, name: &str, href: impl Into<String>) -> Self {
        self.links.insert(name.into(), Value::String(href.into()));
        self
    }
}

/// A response document. Build it, then return it from a handler. Its resources stay as they
/// are until the response is written: serialized once, straight into the body.
#[derive(Debug, Clone, Serialize)]
pub struct Document {
    #[serde(skip)]
    status: StatusCode,
    data: Data,
    #[serde(skip_serializing_if = "Option::is_none")]
    included: Option<Vec<Resource>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    meta: Map<String, Value>,
}

/// A document's primary data: one resource or a list of them.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
enum Data {
    One(Box<Resource>),
    Many(Vec<Resource>),
}

impl Document {
    pub fn one(resource: Resource) -> Self {
        Self::of(Data::One(Box::new(resource)))
    }

    /// A page of resources with the pagination envelope (`links` and `meta.pagination`).
    pub fn page(resources: Vec<Resource>, page: &Paginated) -> Self {
        let mut document = Self::of(Data::Many(resources));
        document.links = Some(page.links());
        document.meta("pagination", page.meta())
    }

    fn of(data: Data) -> Self {
        Self { status: StatusCode::OK, data, included: None, links: None, meta: Map::new() }
    }

    pub fn created(mut self) -> Self {
        self.status = StatusCode::CREATED;
        self
    }

    pub fn included(mut self, resources: Vec<Resource>) -> Self {
        self.included = Some(resources);
        self
    }

    /// Adds a member to `meta` next to `pagination`.
    pub fn meta(mut self, name: &str, value: Value) -> Self {
        self.meta.insert(name.into(), value);
        self
    }
}

impl IntoResponse for Document {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self).expect("a document serializes");
        (self.status, [(header::CONTENT_TYPE, JSONAPI)], body).into_response()
    }
}
