//! JSON:API documents: one resource or a page of them, with `included` and `meta`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};

use super::{Paginated, JSONAPI};

/// One resource object. `attributes` is any serializable value with hyphenated field names.
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
    pub fn new(kind: &'static str, id: impl Into<String>, attributes: impl Serialize) -> Self {
        Self {
            id: id.into(),
            kind,
            attributes: serde_json::to_value(attributes).expect("attributes serialize to JSON"),
            relationships: Map::new(),
            links: Map::new(),
        }
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

/// A response document. Build it, then return it from a handler.
#[derive(Debug, Clone)]
pub struct Document {
    status: StatusCode,
    body: Map<String, Value>,
}

impl Document {
    pub fn one(resource: Resource) -> Self {
        let mut body = Map::new();
        body.insert("data".into(), serde_json::to_value(resource).expect("a resource serializes"));
        Self { status: StatusCode::OK, body }
    }

    /// A page of resources with the pagination envelope (`links` and `meta.pagination`).
    pub fn page(resources: Vec<Resource>, page: &Paginated) -> Self {
        let mut body = Map::new();
        body.insert("data".into(), serde_json::to_value(resources).expect("resources serialize"));
        body.insert("links".into(), page.links());
        body.insert("meta".into(), serde_json::json!({ "pagination": page.meta() }));
        Self { status: StatusCode::OK, body }
    }

    pub fn created(mut self) -> Self {
        self.status = StatusCode::CREATED;
        self
    }

    pub fn included(mut self, resources: Vec<Resource>) -> Self {
        self.body.insert("included".into(), serde_json::to_value(resources).expect("resources serialize"));
        self
    }

    /// Adds a member to `meta` next to `pagination`.
    pub fn meta(mut self, name: &str, value: Value) -> Self {
        let meta = self.body.entry("meta").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(name.into(), value);
        }
        self
    }

    pub fn into_json(self) -> Value {
        Value::Object(self.body)
    }
}

impl IntoResponse for Document {
    fn into_response(self) -> Response {
        (self.status, [(header::CONTENT_TYPE, JSONAPI)], Value::Object(self.body).to_string()).into_response()
    }
}
