//! The member of a request document that a rule is about. Domain code names the member; only
//! the API layer turns it into a JSON pointer (`source.pointer` of a JSON:API error).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The whole request (a rule about the resource rather than one member).
    Document,
    /// `/<name>`, a member of a plain JSON body (the agent gateway's).
    Member(&'static str),
    /// `/data/attributes/<name>`
    Attribute(&'static str),
    /// `/data/attributes/<name>/<member>`, a member of an object attribute.
    Nested(&'static str, &'static str),
    /// `/data/relationships/<name>`
    Relationship(&'static str),
    /// `/data/relationships/<name>/data/id`
    RelationshipId(&'static str),
    /// `/data/relationships/<name>/data/<index>`, one entry of a to-many relationship.
    RelationshipEntry(&'static str, usize),
}

impl Field {
    /// The JSON pointer into the request document.
    pub fn pointer(&self) -> String {
        match self {
            Field::Document => String::new(),
            Field::Member(name) => format!("/{name}"),
            Field::Attribute(name) => format!("/data/attributes/{name}"),
            Field::Nested(name, member) => format!("/data/attributes/{name}/{member}"),
            Field::Relationship(name) => format!("/data/relationships/{name}"),
            Field::RelationshipId(name) => format!("/data/relationships/{name}/data/id"),
            Field::RelationshipEntry(name, index) => format!("/data/relationships/{name}/data/{index}"),
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pointer())
    }
}

#[cfg(test)]
mod tests {
    use super::Field;

    #[test]
    fn fields_point_into_the_request_document() {
        assert_eq!(Field::Attribute("name").pointer(), "/data/attributes/name");
        assert_eq!(Field::Relationship("agent-pool").pointer(), "/data/relationships/agent-pool");
        assert_eq!(Field::RelationshipId("agent-pool").pointer(), "/data/relationships/agent-pool/data/id");
        assert_eq!(Field::RelationshipEntry("ws", 2).pointer(), "/data/relationships/ws/data/2");
    }
}
