//! A state version as stored: one item in its organization's partition, under its workspace's
//! data (`WSD#<workspace>#SV#<sequence>`; while it waits for its state, `…#SVPENDING#<id>`, out
//! of the list), found by id through its pointer. The state itself is a
//! sealed object the item names (and owns, for cascades); the item keeps what HCP shows of it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::parse::{ResourceSummary, StateFacts};
use crate::ids::Kind;
use crate::store::owned::SEALED;
use crate::store::{keys, pointer, Item, Key, StoreError};

/// An item holding more than this is stored without its resource and provider summaries
/// (DynamoDB's items end at 400 KB); the counts stay.
const MAX_SUMMARY_BYTES: usize = 256 * 1024;

/// HCP's statuses: a version made with its state inline is `finalized` at once; one made without
/// is `pending` until its state arrives on its upload link, then `finalized`, or `discarded` if
/// another state became current meanwhile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    #[default]
    Finalized,
    Pending,
    Discarded,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Finalized => "finalized",
            Status::Pending => "pending",
            Status::Discarded => "discarded",
        }
    }
}

/// The uploads a pending version's links take (ids of `upload/` objects).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Uploads {
    pub state: String,
    pub json: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateVersion {
    pub id: String,
    pub org_id: String,
    pub workspace_id: String,
    /// Its place among the workspace's state versions, from 1.
    pub sequence: u64,
    pub serial: u64,
    pub lineage: String,
    /// The MD5 of the state, hex.
    pub md5: String,
    pub size: u64,
    pub terraform_version: Option<String>,
    /// The state's format version.
    pub state_version: u64,
    pub created_at: String,
    /// The user id the writer acted as.
    pub created_by: String,
    /// The sealed object holding the state.
    pub object: String,
    /// The sealed object holding the state's JSON form (`terraform show -json`), when the writer
    /// sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_object: Option<String>,
    pub output_count: usize,
    pub resource_count: u64,
    #[serde(default)]
    pub resources: Vec<ResourceSummary>,
    #[serde(default)]
    pub providers: BTreeMap<String, BTreeMap<String, u64>>,
    #[serde(default)]
    pub status: Status,
    /// Whether its writer sent `force` (a pending version's lineage is checked on arrival).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// The workspace's lock count when it was made (its writer's lock): a state landing after
    /// another lock was taken is not kept.
    #[serde(default)]
    pub lock_generation: u64,
    /// While pending: the uploads its links take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploads: Option<Uploads>,
}

impl pointer::Addressed for StateVersion {
    const KIND: Kind = Kind::StateVersion;
}

impl StateVersion {
    pub fn key(&self) -> Key {
        match self.status {
            Status::Finalized => keys::state_version(&self.org_id, &self.workspace_id, self.sequence),
            Status::Pending | Status::Discarded => {
                keys::pending_state_version(&self.org_id, &self.workspace_id, &self.id)
            }
        }
    }

    /// The item, owning its pointer and its objects; without the summaries if they would not fit.
    pub fn to_item(&self) -> Result<Item, StoreError> {
        let summaries = serde_json::to_vec(&(&self.resources, &self.providers)).map(|v| v.len()).unwrap_or(usize::MAX);
        let mut item = if summaries > MAX_SUMMARY_BYTES {
            let bare = Self { resources: Vec::new(), providers: BTreeMap::new(), ..self.clone() };
            Item::from_value(self.key(), &bare)?
        } else {
            Item::from_value(self.key(), self)?
        };
        let objects: Vec<&str> = std::iter::once(self.object.as_str()).chain(self.json_object.as_deref()).collect();
        item.set(SEALED, serde_json::json!(objects));
        let mut satellites = vec![keys::id_pointer(&self.id)];
        satellites
            .extend(self.uploads.iter().flat_map(|u| [&u.state, &u.json]).map(|id| keys::pending_state_upload(id)));
        Ok(item.with_satellites(&satellites))
    }

    /// The version with what its state says of itself, finalized.
    pub fn finalized(self, facts: &StateFacts, size: u64) -> Self {
        Self {
            lineage: facts.lineage.clone(),
            size,
            terraform_version: facts.terraform_version.clone(),
            state_version: facts.state_version,
            output_count: facts.output_count,
            resource_count: facts.resource_count,
            resources: facts.resources.clone(),
            providers: facts.providers.clone(),
            status: Status::Finalized,
            uploads: None,
            ..self
        }
    }

    /// The id of its `index`th output (in name order): HCP's `wsout-` ids, made from the
    /// version's own id so that an output needs no item of its own.
    pub fn output_id(&self, index: usize) -> String {
        format!("wsout-{}-{index}", self.id.trim_start_matches("sv-"))
    }
}

/// The state version and the index of the output an output id names, if it names one.
pub fn parse_output_id(id: &str) -> Option<(String, usize)> {
    let (version, index) = id.strip_prefix("wsout-")?.rsplit_once('-')?;
    let valid = !version.is_empty() && version.bytes().all(|b| b.is_ascii_alphanumeric());
    let index = index.parse().ok().filter(|_| valid && !index.starts_with('+'))?;
    Some((format!("sv-{version}"), index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_ids_name_their_version_and_place() {
        assert_eq!(parse_output_id("wsout-AbC123-4"), Some(("sv-AbC123".to_owned(), 4)));
        for bad in ["wsout-AbC123", "wsout--4", "wsout-a/b-1", "sv-AbC-1", "wsout-AbC-+1", "wsout-AbC-x"] {
            assert_eq!(parse_output_id(bad), None, "{bad}");
        }
    }
}
