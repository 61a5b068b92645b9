//! One request to the secrets engine, as the path table hands it to a row's handler.

use serde_json::{Map, Value};

use super::error::Result;
use super::http::{self, Caller};
use super::mounts::Mount;
use crate::state::AppState;

/// What a request asks of a path, as Vault's logical operations name it. A LIST arrives as
/// `GET ?list=true`; POST and PUT are an update, or a create where the path names a stored
/// object that does not exist yet ([`Operation::write`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Read,
    List,
    Create,
    Update,
    Delete,
}

impl Operation {
    /// The policy capability the operation needs.
    pub fn capability(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::List => "list",
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Delete => "delete",
        }
    }

    /// A write to a path that names a stored object: a create while the object does not exist,
    /// an update once it does, as Vault's existence check decides, so that a token allowed to
    /// create cannot rewrite, nor one allowed to update bring into being. Writes to any other
    /// path (an action: credentials, rotations, leases) are updates.
    pub fn write(exists: bool) -> Self {
        if exists {
            Operation::Update
        } else {
            Operation::Create
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
