//! Request bodies: JSON:API documents checked member by member, so that every mistake is
//! answered with a 400 (not JSON at all) or a 422 whose `source.pointer` names the member.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::ApiError;
use crate::errors::Kind;

/// The raw document of a request; empty bodies are allowed (some endpoints take none).
#[derive(Debug, Clone, Default)]
pub struct JsonApiBody(Option<Value>);

/// One entry of a relationship's resource linkage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relationship {
    pub id: String,
    pub kind: String,
}

impl<S: Send + Sync> FromRequest<S> for JsonApiBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(Kind::of_refusal(e.status()), "unreadable body", e.body_text()))?;
        JsonApiBody::parse(&bytes)
    }
}

impl JsonApiBody {
    pub fn parse(bytes: &[u8]) -> Result<Self, ApiError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonApiBody(None));
        }
        serde_json::from_slice(bytes)
            .map(|v| JsonApiBody(Some(v)))
            .map_err(|e| ApiError::bad_request(format!("The request body is not valid JSON: {e}")))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The attributes of an optional body: their defaults when the request sent no document.
    /// Clients that always send a body say "none" as `{}` (terrasnek's `team_tokens.create`) or
    /// `null`; HCP Terraform takes both as no document.
    pub fn attributes_or_default<A: DeserializeOwned + Default>(&self, accepted_types: &[&str]) -> Result<A, ApiError> {
        let no_document = match &self.0 {
            None | Some(Value::Null) => true,
            Some(Value::Object(members)) => members.is_empty(),
            Some(_) => false,
        };
        if no_document {
            return Ok(A::default());
        }
        Ok(self.resource::<A>(accepted_types)?.attributes)
    }

    /// `data` as a resource of one of the accepted types, with attributes parsed as `A`.
    pub fn resource<A: DeserializeOwned>(&self, accepted_types: &[&str]) -> Result<Incoming<A>, ApiError> {
        let data = self.0.as_ref().and_then(|doc| doc.get("data")).and_then(Value::as_object).ok_or_else(|| {
            ApiError::invalid("/data", "The request body must be a JSON:API document with a `data` object.")
        })?;
        match data.get("type").and_then(Value::as_str) {
            Some(kind) if accepted_types.contains(&kind) => {}
            Some(kind) => {
                return Err(ApiError::invalid(
                    "/data/type",
                    format!("`data.type` is `{kind}`; this endpoint accepts `{}`.", accepted_types.join("` or `")),
                ))
            }
            None => return Err(ApiError::invalid("/data/type", "`data.type` is required.")),
        }
        let attributes = match data.get("attributes") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::Object(map)) => Value::Object(map.clone()),
            Some(_) => return Err(ApiError::invalid("/data/attributes", "`data.attributes` must be an object.")),
        };
        let attributes = parse_attributes(attributes)?;
        let relationships = match data.get("relationships") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => return Err(ApiError::invalid("/data/relationships", "`data.relationships` must be an object.")),
        };
        let id = data.get("id").and_then(Value::as_str).map(str::to_owned);
        Ok(Incoming { id, attributes, relationships })
    }
}

fn parse_attributes<A: DeserializeOwned>(attributes: Value) -> Result<A, ApiError> {
    serde_path_to_error::deserialize(attributes).map_err(|e| {
        let mut pointer = String::from("/data/attributes");
        for segment in e.path().iter() {
            if let serde_path_to_error::Segment::Map { key } | serde_path_to_error::Segment::Enum { variant: key } =
                segment
            {
                pointer.push('/');
                pointer.push_str(key);
            } else if let serde_path_to_error::Segment::Seq { index } = segment {
                pointer.push_str(&format!("/{index}"));
            }
        }
        let message = e.inner().to_string();
        // serde reports a missing field at its parent; point at the field itself.
        if let Some(field) = message.strip_prefix("missing field `").and_then(|rest| rest.split('`').next()) {
            pointer.push('/');
            pointer.push_str(field);
            return ApiError::invalid(pointer, format!("`{field}` is required."));
        }
        ApiError::invalid(pointer, message)
    })
}

/// A parsed `data` member.
#[derive(Debug, Clone)]
pub struct Incoming<A> {
    pub id: Option<String>,
    pub attributes: A,
    relationships: Map<String, Value>,
}

impl<A> Incoming<A> {
    /// A to-many relationship's linkage, `None` when the relationship was not sent. Every entry
    /// must be `{id, type}` with the expected type.
    pub fn to_many(&self, name: &str, kind: &str) -> Result<Option<Vec<Relationship>>, ApiError> {
        let Some(relationship) = self.relationships.get(name) else { return Ok(None) };
        let pointer = format!("/data/relationships/{name}/data");
        let entries = relationship
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| ApiError::invalid(pointer.clone(), format!("`{name}` must carry a `data` array.")))?;
        entries
            .iter()
            .enumerate()
            .map(|(i, entry)| linkage(entry, kind, &format!("{pointer}/{i}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A to-one relationship's linkage: `None` when not sent, `Some(None)` when sent as null.
    pub fn to_one(&self, name: &str, kind: &str) -> Result<Option<Option<Relationship>>, ApiError> {
        let Some(relationship) = self.relationships.get(name) else { return Ok(None) };
        let pointer = format!("/data/relationships/{name}/data");
        match relationship.get("data") {
            Some(Value::Null) => Ok(Some(None)),
            Some(entry) => linkage(entry, kind, &pointer).map(|r| Some(Some(r))),
            None => Err(ApiError::invalid(pointer, format!("`{name}` must carry `data`."))),
        }
    }
}

fn linkage(entry: &Value, kind: &str, pointer: &str) -> Result<Relationship, ApiError> {
    let id = entry.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
    let found = entry.get("type").and_then(Value::as_str);
    match (id, found) {
        (Some(id), Some(found)) if found == kind => Ok(Relationship { id: id.to_owned(), kind: found.to_owned() }),
        (Some(_), _) => {
            Err(ApiError::invalid(format!("{pointer}/type"), format!("Each entry's `type` must be `{kind}`.")))
        }
        (None, _) => Err(ApiError::invalid(format!("{pointer}/id"), "Each entry needs an `id`.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct Attrs {
        name: String,
        #[serde(default)]
        organization_scoped: Option<bool>,
    }

    fn parse(raw: &str) -> Result<Incoming<Attrs>, ApiError> {
        JsonApiBody::parse(raw.as_bytes())?.resource::<Attrs>(&["things"])
    }

    fn pointer(e: ApiError) -> String {
        e.source.expect("a source").1
    }

    #[test]
    fn every_mistake_points_at_its_member() {
        assert_eq!(parse("{not json").unwrap_err().status().as_u16(), 400);
        assert_eq!(pointer(parse("{}").unwrap_err()), "/data");
        assert_eq!(pointer(parse(r#"{"data":{"type":"other"}}"#).unwrap_err()), "/data/type");
        assert_eq!(
            pointer(parse(r#"{"data":{"type":"things","attributes":{}}}"#).unwrap_err()),
            "/data/attributes/name"
        );
        let mistyped = parse(r#"{"data":{"type":"things","attributes":{"name":"a","organization-scoped":"yes"}}}"#);
        assert_eq!(pointer(mistyped.unwrap_err()), "/data/attributes/organization-scoped");
        let ok = parse(r#"{"data":{"type":"things","attributes":{"name":"a"}}}"#).unwrap();
        assert_eq!(ok.attributes.name, "a");
        assert_eq!(ok.attributes.organization_scoped, None);
    }

    #[test]
    fn an_optional_body_may_be_absent_null_or_an_empty_object() {
        #[derive(Debug, Default, Deserialize, PartialEq)]
        struct Optional {
            description: Option<String>,
        }
        for raw in ["", " ", "null", "{}", " { } "] {
            let body = JsonApiBody::parse(raw.as_bytes()).unwrap();
            assert_eq!(body.attributes_or_default::<Optional>(&["things"]).unwrap(), Optional::default(), "{raw:?}");
        }
        let wrong = JsonApiBody::parse(br#"{"data": 1}"#).unwrap().attributes_or_default::<Optional>(&["things"]);
        assert_eq!(pointer(wrong.unwrap_err()), "/data");
        assert!(JsonApiBody::parse(b"[]").unwrap().attributes_or_default::<Optional>(&["things"]).is_err());
    }

    #[test]
    fn relationships_are_checked_entry_by_entry() {
        let body = r#"{"data":{"type":"things","attributes":{"name":"a"},
            "relationships":{"ws":{"data":[{"id":"ws-1","type":"workspaces"},{"id":"ws-2","type":"teams"}]}}}}"#;
        let incoming = parse(body).unwrap();
        assert_eq!(pointer(incoming.to_many("ws", "workspaces").unwrap_err()), "/data/relationships/ws/data/1/type");
        assert_eq!(incoming.to_many("absent", "workspaces").unwrap(), None);
    }
}
