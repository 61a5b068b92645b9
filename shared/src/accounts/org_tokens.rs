//! The organization token (HCP Terraform's `/organizations/:org/authentication-token`): one per
//! organization, made, shown (never its secret) and revoked by owners, acting with the owners
//! team's rights. Its item lives in the organization's partition and names the token record as
//! a satellite, so deleting the organization revokes it.

use super::access;
use super::error::{AccountsError, Result};
use super::teams::{self, NewToken, Team, TeamToken, OWNERS};
use crate::auth::{Permission, Principal};
use crate::store::{keys, Condition, Item, ItemStore, Write};

/// Makes the organization's token, revoking the previous one. The secret exists only in the
/// answer.
pub async fn create(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    new: NewToken,
) -> Result<(TeamToken, String)> {
    let org = access::authorized(store, principal, org_name, Permission::Own).await?;
    let owners: Team = store.get(&keys::team(&org.id, OWNERS)).await?.ok_or(AccountsError::NotFound)?.parse()?;
    let (token, secret, record_item) = teams::mint(new, owners.grant())?;
    let key = keys::organization_token(&org.id);
    let previous = current(store, &org.id).await?;
    let mut writes = vec![Write::Put { item: record_item, condition: Condition::NotExists }];
    writes.extend(previous.iter().map(|t| Write::Delete { key: keys::token(&t.hash), condition: Condition::Always }));
    let condition = match &previous {
        Some(previous) => Condition::equals("id", previous.id.clone()),
        None => Condition::NotExists,
    };
    let item = Item::from_value(key, &token)?.with_satellites(&[keys::token(&token.hash)]);
    writes.push(Write::Put { item, condition });
    writes.push(access::still_active(&org.id));
    store.transact(writes).await?;
    Ok((token, secret))
}

/// The organization's token, without its secret, for owners.
pub async fn show(store: &dyn ItemStore, principal: &Principal, org_name: &str) -> Result<TeamToken> {
    let org = access::authorized(store, principal, org_name, Permission::Own).await?;
    current(store, &org.id).await?.ok_or(AccountsError::NotFound)
}

/// Revokes the organization's token.
pub async fn delete(store: &dyn ItemStore, principal: &Principal, org_name: &str) -> Result<()> {
    let org = access::authorized(store, principal, org_name, Permission::Own).await?;
    let token = current(store, &org.id).await?.ok_or(AccountsError::NotFound)?;
    store
        .transact(vec![
            Write::Delete { key: keys::token(&token.hash), condition: Condition::Always },
            Write::Delete { key: keys::organization_token(&org.id), condition: Condition::equals("id", token.id) },
        ])
        .await
        .map_err(|e| if e.is_condition_failed() { AccountsError::NotFound } else { e.into() })
}

async fn current(store: &dyn ItemStore, org_id: &str) -> Result<Option<TeamToken>> {
    Ok(store.get(&keys::organization_token(org_id)).await?.map(|item| item.parse()).transpose()?)
}
