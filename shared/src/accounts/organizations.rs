//! Organizations: created by the site admin with their `owners` team, renamed atomically,
//! deleted with everything they own.

use serde_json::Value;

use super::access::{authorized, require, NameMarker, Organization, ACTIVE, PRIVATE_PROVIDER_COUNT};
use super::cascade;
use super::error::{AccountsError, Result};
use super::teams::Team;
use crate::api::Field;
use crate::auth::{Permission, Principal};
use crate::blobs::BlobStore;
use crate::ids::{new_id, ORGANIZATION_PREFIX};
use crate::names;
use crate::store::{keys, parse_all, Condition, Item, ItemStore, Key, Transaction, UpdateOp, Write};

fn org_item(org: &Organization) -> Result<Item> {
    let (index, pk, sk) = keys::organization_index_key(&org.name);
    let mut item = Item::from_value(keys::organization(&org.id), org)?.with_index(index, pk, sk);
    item.set(ACTIVE, Value::Bool(true));
    Ok(item)
}

fn marker_item(name: &str, org_id: &str) -> Result<Item> {
    Ok(Item::from_value(keys::organization_name(name), &NameMarker { org_id: org_id.to_owned() })?)
}

pub struct NewOrganization {
    pub name: String,
    pub email: String,
}

/// Creates the organization and its owners team in one transaction.
pub async fn create(store: &dyn ItemStore, principal: &Principal, new: NewOrganization) -> Result<Organization> {
    if !principal.is_site_admin() {
        return Err(AccountsError::Forbidden("Only the site administrator can create organizations.".into()));
    }
    names::check(&new.name, names::ORGANIZATION).map_err(|e| AccountsError::name(Field::Attribute("name"), e))?;
    names::check_email(&new.email).map_err(|e| AccountsError::name(Field::Attribute("email"), e))?;
    let now = crate::api::timestamp(chrono::Utc::now());
    let mut org = Organization {
        id: new_id(ORGANIZATION_PREFIX),
        name: new.name,
        email: new.email,
        created_at: now.clone(),
        team_count: 1,
        workspace_count: 0,
        private_module_count: 0,
        public_module_count: 0,
        active: true,
    };
    let owners = Team::owners(&org.id, &now);
    let mut transaction = Transaction::new();
    let name_claim =
        transaction.add(Write::Put { item: marker_item(&org.name, &org.id)?, condition: Condition::NotExists });
    transaction.add(Write::Put { item: org_item(&org)?, condition: Condition::NotExists });
    owners.creation_writes(&mut transaction)?;
    transaction.add(count_created());
    match transaction.commit(store).await {
        Err(e) if e.failed_on(name_claim) => Err(AccountsError::taken(Field::Attribute("name"))),
        other => other.map_err(AccountsError::from),
    }?;
    org.team_count = 1;
    Ok(org)
}

pub struct OrganizationChanges {
    pub name: Option<String>,
    pub email: Option<String>,
}

/// Updates the email and, atomically, the name (moving the name marker).
pub async fn update(
    store: &dyn ItemStore,
    principal: &Principal,
    name: &str,
    changes: OrganizationChanges,
) -> Result<Organization> {
    let mut org = authorized(store, principal, name, Permission::Own).await?;
    let mut ops = Vec::new();
    let mut transaction = Transaction::new();
    // The claim on the new name, when the organization is renamed.
    let mut name_claim = None;
    // A new name that is no provider namespace, which only an organization without private
    // providers may take.
    let mut stranding = None;
    if let Some(email) = changes.email {
        names::check_email(&email).map_err(|e| AccountsError::name(Field::Attribute("email"), e))?;
        ops.push(UpdateOp::set("email", email.clone()));
        org.email = email;
    }
    if let Some(new_name) = changes.name.filter(|n| *n != org.name) {
        names::check(&new_name, names::ORGANIZATION).map_err(|e| AccountsError::name(Field::Attribute("name"), e))?;
        // A private provider's namespace is the organization's name: a name Terraform would
        // lowercase or refuse in a source address would strand every one of them, so such a
        // rename is conditioned on the organization holding none.
        if !names::is_provider_part(&new_name) {
            stranding = Some(new_name.clone());
        }
        let (index, _, index_sk) = keys::organization_index_key(&new_name);
        name_claim = Some(
            transaction.add(Write::Put { item: marker_item(&new_name, &org.id)?, condition: Condition::NotExists }),
        );
        transaction.add(Write::Delete {
            key: keys::organization_name(&org.name),
            condition: Condition::equals("org_id", org.id.clone()),
        });
        ops.push(UpdateOp::set("name", new_name.clone()));
        ops.push(UpdateOp::set_index_sort_key(index, index_sk));
        org.name = new_name;
    }
    if ops.is_empty() {
        return Ok(org);
    }
    let mut condition = Condition::equals(ACTIVE, true);
    if stranding.is_some() {
        condition = condition.and(Condition::Below(PRIVATE_PROVIDER_COUNT.into(), 1));
    }
    let org_write = transaction.add(Write::Update { key: keys::organization(&org.id), ops, condition });
    match transaction.commit(store).await {
        Err(e) if name_claim.is_some_and(|claim| e.failed_on(claim)) => {
            Err(AccountsError::taken(Field::Attribute("name")))
        }
        Err(e) if e.failed_on(org_write) && stranding.is_some() => Err(AccountsError::invalid(
            Field::Attribute("name"),
            format!(
                "the organization has private providers, whose namespace is its name: `{}` is not a namespace \
                 Terraform reads as it is (lowercase letters, digits and dashes)",
                stranding.unwrap_or_default()
            ),
        )),
        other => other.map_err(AccountsError::from),
    }?;
    Ok(org)
}

/// Deletes the organization and everything it owns. First the organization stops accepting
/// new items, then its partition is purged, then it goes; an interrupted delete can be rerun.
pub async fn delete(store: &dyn ItemStore, blobs: &dyn BlobStore, principal: &Principal, name: &str) -> Result<()> {
    // Found whether or not a deletion already started, so an interrupted one can be finished.
    let org_id = super::access::own_id(store, name).await?.ok_or(AccountsError::NotFound)?;
    let org_key: Key = keys::organization(&org_id);
    let org: Organization = store.get(&org_key).await?.ok_or(AccountsError::NotFound)?.parse()?;
    require(principal, &org.id, Permission::Own)?;
    store.update(&org_key, vec![UpdateOp::set(ACTIVE, false)], Condition::Exists).await?;
    cascade::purge_partition(store, blobs, &org.id).await?;
    let mut transaction = Transaction::new();
    transaction.add(Write::Delete { key: keys::organization_name(&org.name), condition: Condition::Always });
    let org_exists = transaction.add(Write::Delete { key: org_key, condition: Condition::Exists });
    transaction.add(Write::Update {
        key: keys::organization_total(),
        ops: vec![UpdateOp::Add("count".into(), -1)],
        condition: Condition::Always,
    });
    transaction
        .commit(store)
        .await
        .map_err(|e| if e.failed_on(org_exists) { AccountsError::NotFound } else { e.into() })
}

/// The organizations the principal can see, by name: all of them for the site admin, its
/// own for a team token.
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    page: &crate::api::PageRequest,
) -> Result<(Vec<Organization>, usize)> {
    match principal.org_id() {
        // A run's job token reads its workspace, not its organization.
        Some(org_id) if !principal.can(org_id, Permission::Read) => Ok((Vec::new(), 0)),
        Some(org_id) => {
            let own: Vec<Organization> = super::access::by_id(store, org_id).await?.into_iter().collect();
            let total = own.len();
            Ok((page.slice(own), total))
        }
        None => {
            let (index, partition, _) = keys::organizations_by_name();
            let items = page.fetch(store, crate::store::Query::index(index, partition, "")).await?;
            let total_item = store.get(&keys::organization_total()).await?;
            let total = total_item.map(|item| item.count("count")).transpose()?.unwrap_or(0);
            let orgs = parse_all::<Organization>(&items)?.into_iter().filter(|org| org.active).collect();
            Ok((orgs, total))
        }
    }
}

/// The write that counts a new organization in the site-wide total.
pub fn count_created() -> Write {
    Write::Update {
        key: keys::organization_total(),
        ops: vec![UpdateOp::Add("count".into(), 1)],
        condition: Condition::Always,
    }
}
