//! Teams, their organization access, and their token (one per team, as HCP Terraform's legacy
//! team token: making a new one revokes the old).

use serde::{Deserialize, Serialize};

use super::access::{self, join, Organization, TEAM_COUNT};
use super::error::{AccountsError, Result};
use crate::api::Field;
use crate::api::PageRequest;
use crate::auth::{hash_secret, new_team_secret, OrganizationAccess, Permission, Principal, TeamGrant, TokenRecord};
use crate::ids::{new_id, Kind};
use crate::names;
use crate::store::owned::{satellites, SATELLITES};
use crate::store::{keys, parse_all, pointer, Condition, Item, ItemStore, Key, Transaction, UpdateOp, Write, Writes};

pub const OWNERS: &str = "owners";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Team {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub access: OrganizationAccess,
    pub visibility: String,
    pub created_at: String,
    #[serde(default)]
    pub token: Option<TeamToken>,
}

impl pointer::Addressed for Team {
    const KIND: Kind = Kind::Team;
}

/// What is kept of a team's token: never the secret, only its hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TeamToken {
    pub id: String,
    pub hash: String,
    pub created_at: String,
    pub description: Option<String>,
    pub expired_at: Option<String>,
}

impl Team {
    pub fn owners(org_id: &str, now: &str) -> Team {
        Team {
            id: new_id("team"),
            org_id: org_id.to_owned(),
            name: OWNERS.into(),
            access: OrganizationAccess {
                manage_modules: true,
                manage_providers: true,
                manage_agent_pools: true,
                manage_workspaces: true,
            },
            visibility: "secret".into(),
            created_at: now.to_owned(),
            token: None,
        }
    }

    pub fn is_owners(&self) -> bool {
        self.name == OWNERS
    }

    pub fn key(&self) -> Key {
        keys::team(&self.org_id, &self.name)
    }

    fn owned(&self) -> Vec<Key> {
        let mut owned = vec![keys::id_pointer(&self.id)];
        owned.extend(self.token.iter().map(|t| keys::token(&t.hash)));
        owned
    }

    fn to_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&self.owned()))
    }

    /// Adds the team's item and its id pointer, both new, to `transaction`. Returns the item's
    /// write, the claim on the team's name (the name is its key): it fails when the name is
    /// taken in the organization.
    pub fn creation_writes(&self, transaction: &mut Transaction) -> Result<Writes> {
        let name_claim = transaction.add(Write::Put { item: self.to_item()?, condition: Condition::NotExists });
        transaction.add(pointer::create(&self.id, &self.key())?);
        Ok(name_claim)
    }

    pub(super) fn grant(&self) -> TeamGrant {
        TeamGrant {
            org_id: self.org_id.clone(),
            team_id: self.id.clone(),
            owners: self.is_owners(),
            access: self.access,
        }
    }
}

pub struct NewTeam {
    pub name: String,
    pub access: OrganizationAccess,
    pub visibility: Option<String>,
}

fn check_visibility(visibility: Option<String>) -> Result<String> {
    match visibility.as_deref() {
        None => Ok("secret".into()),
        Some(v @ ("secret" | "organization")) => Ok(v.to_owned()),
        Some(_) => Err(AccountsError::invalid(Field::Attribute("visibility"), "must be `secret` or `organization`")),
    }
}

pub async fn create(store: &dyn ItemStore, principal: &Principal, org_name: &str, new: NewTeam) -> Result<Team> {
    let org = access::authorized(store, principal, org_name, Permission::Own).await?;
    names::check(&new.name, names::TEAM).map_err(|e| AccountsError::name(Field::Attribute("name"), e))?;
    let team = Team {
        id: new_id("team"),
        org_id: org.id.clone(),
        name: new.name,
        access: new.access,
        visibility: check_visibility(new.visibility)?,
        created_at: crate::api::timestamp(chrono::Utc::now()),
        token: None,
    };
    let mut transaction = Transaction::new();
    let name_claim = team.creation_writes(&mut transaction)?;
    let org_active = transaction.add(join(&org.id, TEAM_COUNT, 1));
    match transaction.commit(store).await {
        Err(e) if e.failed_on(name_claim) => Err(AccountsError::taken(Field::Attribute("name"))),
        Err(e) if e.failed_on(org_active) => Err(AccountsError::NotFound),
        other => other.map_err(AccountsError::from),
    }?;
    Ok(team)
}

/// The team with this id, if the principal holds `permission` in its organization.
pub async fn get(store: &dyn ItemStore, principal: &Principal, team_id: &str, permission: Permission) -> Result<Team> {
    let team: Team = pointer::resolve(store, team_id).await?.ok_or(AccountsError::NotFound)?;
    access::require(principal, &team.org_id, permission)?;
    Ok(team)
}

/// The team with this id and its organization, if the principal may read them.
pub async fn show(store: &dyn ItemStore, principal: &Principal, team_id: &str) -> Result<(Team, Organization)> {
    let team = get(store, principal, team_id, Permission::Read).await?;
    let org = access::get_by_id(store, &team.org_id).await?;
    Ok((team, org))
}

pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    page: &PageRequest,
) -> Result<(Vec<Team>, usize)> {
    let org = access::visible(store, principal, org_name).await?;
    let items = page.fetch(store, keys::teams(&org.id)).await?;
    let teams = parse_all::<Team>(&items)?;
    Ok((teams, org.team_count))
}

pub async fn delete(store: &dyn ItemStore, principal: &Principal, team_id: &str) -> Result<()> {
    let team = get(store, principal, team_id, Permission::Own).await?;
    if team.is_owners() {
        return Err(AccountsError::invalid(Field::Document, "The owners team cannot be deleted."));
    }
    let mut writes = vec![Write::Delete { key: team.key(), condition: Condition::Exists }, pointer::remove(&team.id)];
    writes.extend(team.token.iter().map(|t| Write::Delete { key: keys::token(&t.hash), condition: Condition::Always }));
    writes.push(join(&team.org_id, TEAM_COUNT, -1));
    store.transact(writes).await?;
    super::team_access::forget_team(store, &team.org_id, &team.id).await
}

pub struct NewToken {
    pub description: Option<String>,
    pub expired_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A new token acting as `grant`: its metadata, its secret (shown once) and the record item that
/// resolves it, expiring with it.
pub(super) fn mint(new: NewToken, grant: TeamGrant) -> Result<(TeamToken, String, Item)> {
    let now = chrono::Utc::now();
    if new.expired_at.is_some_and(|at| at <= now) {
        return Err(AccountsError::invalid(Field::Attribute("expired-at"), "must be in the future"));
    }
    let secret = new_team_secret(&grant.org_id);
    let token = TeamToken {
        id: new_id("at"),
        hash: hash_secret(&secret),
        created_at: crate::api::timestamp(now),
        description: new.description,
        expired_at: new.expired_at.map(crate::api::timestamp),
    };
    let record = TokenRecord {
        hash: token.hash.clone(),
        token_id: token.id.clone(),
        principal: Principal::Team(grant),
        created_at: token.created_at.clone(),
    };
    let mut record_item = record.to_item()?;
    if let Some(at) = new.expired_at {
        record_item = record_item.with_ttl(at.timestamp());
    }
    Ok((token, secret, record_item))
}

/// Makes a new token for the team, revoking its previous one. Returns the team and the secret,
/// which exists only in this response.
pub async fn create_token(
    store: &dyn ItemStore,
    principal: &Principal,
    team_id: &str,
    new: NewToken,
) -> Result<(Team, TeamToken, String)> {
    let mut team = get(store, principal, team_id, Permission::Own).await?;
    let (token, secret, record_item) = mint(new, team.grant())?;
    let previous = team.token.replace(token.clone());
    let mut writes = vec![Write::Put { item: record_item, condition: Condition::NotExists }];
    writes.extend(previous.iter().map(|t| Write::Delete { key: keys::token(&t.hash), condition: Condition::Always }));
    writes.push(Write::Update {
        key: team.key(),
        ops: vec![
            UpdateOp::set("token", serde_json::to_value(&token).map_err(crate::store::StoreError::backend)?),
            UpdateOp::set(SATELLITES, satellites(&team.owned())),
        ],
        condition: Condition::equals("id", team.id.clone()),
    });
    store.transact(writes).await?;
    Ok((team, token, secret))
}

/// The team's token, if it has one, for a principal with the owners' rights.
pub async fn token(store: &dyn ItemStore, principal: &Principal, team_id: &str) -> Result<(Team, TeamToken)> {
    let team = get(store, principal, team_id, Permission::Own).await?;
    let token = team.token.clone().ok_or(AccountsError::NotFound)?;
    Ok((team, token))
}

pub async fn delete_token(store: &dyn ItemStore, principal: &Principal, team_id: &str) -> Result<()> {
    let mut team = get(store, principal, team_id, Permission::Own).await?;
    let token = team.token.take().ok_or(AccountsError::NotFound)?;
    store
        .transact(vec![
            Write::Delete { key: keys::token(&token.hash), condition: Condition::Always },
            Write::Update {
                key: team.key(),
                ops: vec![UpdateOp::Remove("token".into()), UpdateOp::set(SATELLITES, satellites(&team.owned()))],
                condition: Condition::equals("id", team.id.clone()),
            },
        ])
        .await?;
    Ok(())
}
