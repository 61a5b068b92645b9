//! Every key string of the single-table layout, and nothing else.
//!
//! | item | PK | SK | GSI1 |
//! |---|---|---|---|
//! | organization | `ORG#<org-id>` | `ORG` | `ORGS` / `<name>` |
//! | organization name | `ORGNAME#<name>` | `ORGNAME` | |
//! | team | `ORG#<org-id>` | `TEAM#<name>` | |
//! | workspace | `ORG#<org-id>` | `WS#<name>` | |
//! | id pointer (team, workspace, …) | `ID#<id>` | `ID` | |
//! | token | `TOKEN#<sha256-hex>` | `TOKEN` | |
//!
//! Everything an organization owns lives in its partition, so deleting the organization is a
//! strongly consistent query of one partition; items outside it (id pointers, tokens) are
//! named by the owning item (see `accounts::cascade`).

use super::{Index, Key, Query};

const ORG_SK: &str = "ORG";

pub fn organization(org_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), ORG_SK)
}

pub fn organization_name(name: &str) -> Key {
    Key::new(format!("ORGNAME#{name}"), "ORGNAME")
}

/// Where organizations are listed, by name.
pub fn organizations_by_name() -> (Index, String, String) {
    (Index::Gsi1, "ORGS".to_owned(), String::new())
}

pub fn organization_index_key(name: &str) -> (Index, String, String) {
    (Index::Gsi1, "ORGS".to_owned(), name.to_owned())
}

/// Every item an organization owns, the organization item included.
pub fn organization_partition(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "")
}

pub fn team(org_id: &str, name: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("TEAM#{name}"))
}

pub fn teams(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "TEAM#")
}

pub fn workspace(org_id: &str, name: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WS#{name}"))
}

pub fn workspaces(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "WS#")
}

/// Points from a resource id (`team-…`, `ws-…`) to the item that holds the resource.
pub fn id_pointer(id: &str) -> Key {
    Key::new(format!("ID#{id}"), "ID")
}

pub fn token(hash_hex: &str) -> Key {
    Key::new(format!("TOKEN#{hash_hex}"), "TOKEN")
}

/// Present once dev-server has generated and printed a site-admin token.
pub fn site_admin_marker() -> Key {
    Key::new("SITE", "ADMIN_TOKEN_GENERATED")
}

/// The count of organizations, for the site admin's list total.
pub fn organization_total() -> Key {
    Key::new("SITE", "ORGANIZATION_COUNT")
}
