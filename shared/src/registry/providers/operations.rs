//! Providers: create, list, read, delete. A private provider's namespace is its
//! organization's name and it holds versions; a public one is the organization's record of a
//! provider in the public registry (curated as public modules are), with none.

use super::index;
use super::record::{Provider, ProviderType};
use crate::accounts::access::{self, Organization, ACTIVE, PRIVATE_PROVIDER_COUNT};
use crate::api::{Field, PageRequest};
use crate::auth::{Permission, Principal};
use crate::registry::error::{RegistryError, Result};
use crate::registry::modules::check_curation;
use crate::registry::names::{Namespace, RegistryName};
use crate::state::AppState;
use crate::store::{keys, query_all_as, Condition, Item, ItemStore, Key, Transaction, UpdateOp, Write};

/// Where a request points: `…/registry-providers/:registry/:namespace/:name`.
#[derive(Debug, Clone)]
pub struct ProviderAddress {
    pub registry: String,
    pub namespace: String,
    pub name: String,
}

pub struct NewProvider {
    pub name: String,
    pub namespace: Option<String>,
    pub registry: Option<String>,
}

/// What the list may be narrowed to (HCP's `filter[registry_name]` and `q`).
#[derive(Default)]
pub struct ProviderFilter {
    pub registry: Option<RegistryName>,
    pub q: Option<String>,
}

/// The stored namespace an address names in `org`: none for a private provider, whose
/// namespace must be the organization's name; any other names nothing.
fn stored_namespace(state: &AppState, org: &Organization, address: &ProviderAddress) -> Result<Option<Namespace>> {
    let registry = RegistryName::parse(Field::Document, &address.registry).map_err(|_| RegistryError::NotFound)?;
    check_curation(state, registry)?;
    match registry {
        RegistryName::Private if address.namespace == org.name => Ok(None),
        RegistryName::Private => Err(RegistryError::NotFound),
        RegistryName::Public => {
            Ok(Some(Namespace::parse(Field::Document, &address.namespace).map_err(|_| RegistryError::NotFound)?))
        }
    }
}

fn key_of(state: &AppState, org: &Organization, address: &ProviderAddress) -> Result<Key> {
    let namespace = stored_namespace(state, org, address)?;
    Ok(keys::registry_provider(&org.id, namespace.as_ref().map(Namespace::as_str), &address.name))
}

pub async fn create(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    new: NewProvider,
) -> Result<(Provider, Organization)> {
    let store = state.store.as_ref();
    let org = access::authorized(store, principal, org_name, Permission::ManageProviders).await?;
    let registry = match new.registry.as_deref() {
        None => RegistryName::Private,
        // go-tfe sends it empty when unset, and HCP refuses that.
        Some("") => {
            return Err(RegistryError::invalid(Field::Attribute("registry-name"), "Registry name can't be blank"))
        }
        Some(raw) => RegistryName::parse(Field::Attribute("registry-name"), raw)?,
    };
    check_curation(state, registry)?;
    let name = ProviderType::parse(Field::Attribute("name"), &new.name)?;
    let namespace = match (registry, new.namespace.as_deref()) {
        (RegistryName::Private, None | Some("")) => None,
        (RegistryName::Private, Some(ns)) if ns == org.name => None,
        (RegistryName::Private, Some(_)) => {
            return Err(RegistryError::invalid(
                Field::Attribute("namespace"),
                "a private provider's namespace is its organization's name",
            ))
        }
        (RegistryName::Public, None | Some("")) => {
            return Err(RegistryError::invalid(Field::Attribute("namespace"), "namespace is required"))
        }
        (RegistryName::Public, Some(ns)) => Some(Namespace::parse(Field::Attribute("namespace"), ns)?),
    };
    if registry == RegistryName::Private {
        check_namespace(&org.name)?;
    }
    let provider = Provider::new(&org.id, registry, namespace, name);
    let mut transaction = Transaction::new();
    let claim = transaction
        .add(Write::Put { item: Item::from_value(provider.key(), &provider)?, condition: Condition::NotExists });
    if provider.is_private() {
        transaction.add(index::created(&org.id, provider.name.as_str()));
        // Counted on the organization, under the name checked: a rename meanwhile makes the
        // create fail, and a rename to a name that is no namespace waits for none to be left.
        let unchanged = Condition::equals("name", org.name.clone()).and(Condition::equals(ACTIVE, true));
        transaction.add(private_count(&org.id, 1, unchanged));
    }
    match transaction.commit(store).await {
        Ok(()) => Ok((provider, org)),
        Err(e) if e.failed_on(claim) => Err(RegistryError::invalid(
            Field::Attribute("name"),
            format!("the provider {}/{} already exists", provider.namespace_in(&org), provider.name),
        )),
        Err(e) => Err(e.into()),
    }
}

pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    filter: &ProviderFilter,
    page: &PageRequest,
) -> Result<(Vec<Provider>, usize, Organization)> {
    let org = access::authorized(store, principal, org_name, Permission::Read).await?;
    let all: Vec<Provider> = query_all_as(store, keys::registry_providers(&org.id)).await?;
    let q = filter.q.as_deref().map(str::to_lowercase);
    let shown: Vec<Provider> = all
        .into_iter()
        .filter(|p| filter.registry.is_none_or(|r| r == p.registry))
        .filter(|p| {
            q.as_ref().is_none_or(|q| p.name.as_str().contains(q.as_str()) || p.namespace_in(&org).contains(q.as_str()))
        })
        .collect();
    let total = shown.len();
    Ok((page.slice(shown), total, org))
}

/// The provider at an address, if the caller holds `permission` in its organization.
pub async fn get(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &ProviderAddress,
    permission: Permission,
) -> Result<(Provider, Organization)> {
    let store = state.store.as_ref();
    let org = access::authorized(store, principal, org_name, permission).await?;
    let key = key_of(state, &org, address)?;
    let provider = store.get(&key).await?.ok_or(RegistryError::NotFound)?.parse()?;
    Ok((provider, org))
}

/// The write that records a version added to `provider`: a version can only be added to a
/// provider that is there, and a delete that read its versions before sees the change.
pub(super) fn version_added(provider: &Provider) -> Write {
    Write::Update { key: provider.key(), ops: vec![UpdateOp::Add("revision".into(), 1)], condition: Condition::Exists }
}

/// A private provider's namespace is its organization's name, which Terraform reads from a
/// source address as it reads a type name (lowercased, and only letters, digits and dashes): an
/// organization whose name it would change or refuse could publish providers no `terraform
/// init` finds.
fn check_namespace(org_name: &str) -> Result<()> {
    if crate::names::is_provider_part(org_name) {
        return Ok(());
    }
    Err(RegistryError::invalid(
        Field::Document,
        format!(
            "the organization's name `{org_name}` is not a provider namespace Terraform reads as it is \
             (lowercase letters, digits and dashes): its providers could not be installed"
        ),
    ))
}

/// The change of the organization's count of private providers by `delta`.
pub(super) fn private_count(org_id: &str, delta: i64, condition: Condition) -> Write {
    Write::Update {
        key: keys::organization(org_id),
        ops: vec![UpdateOp::Add(PRIVATE_PROVIDER_COUNT.into(), delta)],
        condition,
    }
}
