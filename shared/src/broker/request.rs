//! One request to the secrets engine, as the path table hands it to a row's handler.

use serde_json::{Map, Value};

use super::error::Result;
use super::http::{self, Caller};
use super::mounts::Mount;
use crate::state::AppState;

/// What a request asks of a path, as Vault's logical operations name it. A LIST arrives as
/// `GET ?list=true`; POST and PUT are both an update (create and update are one operation
/// here until a row can tell them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Read,
    List,
    Update,
    Delete,
}

impl Operation {
    /// The policy capability the operation needs.
    pub fn capability(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::List => "list",
            Operation::Update => "update",
            Operation::Delete => "delete",
        }
    }
}

/// Who asks, on which mount, what, and the `{name}` the path carries.
pub struct EngineRequest<'a> {
    pub state: &'a AppState,
    pub caller: Caller,
    pub mount: Mount,
    pub operation: Operation,
    /// The `{name}` segment of the matched pattern (`roles/{name}`…); empty when it has none,
    /// as Vault's field data reads an absent field.
    pub name: &'a str,
    pub query: Option<String>,
    pub body: Option<Value>,
}

impl EngineRequest<'_> {
    /// The body as a JSON object (none, or `null`, is an empty one).
    pub fn object(&self) -> Result<Map<String, Value>> {
        http::object(self.body.as_ref())
    }
}
