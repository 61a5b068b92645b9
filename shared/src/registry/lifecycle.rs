//! A version's lifecycle, as HCP Terraform's "Manage module versions" sets it: deprecated (still
//! offered, with a reason and a link consumers see) and revoked (a deprecated version no longer
//! offered to new consumers: out of the protocol's versions list, its download refused). Both
//! are reverted the same way they are set, and both live on the version record and its status
//! entry, so no read of a module or of the protocol costs another round trip.

use reqwest::Url;

use super::error::{RegistryError, Result};
use super::modules::{self, latest_of, load, statuses, Address};
use super::status::{Deprecation, Revocation, OK};
use super::version_index;
use super::versions::ModuleVersion;
use crate::api::{timestamp, Field};
use crate::auth::{Permission, Principal};
use crate::config::Edition;
use crate::ids::new_id;
use crate::state::AppState;
use crate::store::{keys, retry_on_race, Condition, ItemStore, Key, Transaction, Write};

/// The longest reason or message kept, in characters: a paragraph, shown in `terraform init`'s
/// warning and beside the version.
pub const TEXT_MAX_CHARS: usize = 1000;
/// The longest link, in bytes.
pub const LINK_MAX_BYTES: usize = 2048;

/// `deprecation` of a PATCH: `deprecated-status` is `Deprecated` (with an optional reason and
/// link) or `Undeprecated`.
pub struct DeprecationRequest {
    pub status: Option<String>,
    pub reason: Option<String>,
    pub link: Option<String>,
}

/// `revocation` of a PATCH: `status` is `Revoked` (with an optional message and link) or
/// `Unrevoked`.
pub struct RevocationRequest {
    pub status: Option<String>,
    pub message: Option<String>,
    pub link: Option<String>,
}

/// What a PATCH of a version asks for; at least one of the two.
pub struct LifecycleChange {
    pub deprecation: Option<DeprecationRequest>,
    pub revocation: Option<RevocationRequest>,
}

/// A checked change: `Some((text, link))` sets, `None` reverts.
type Set = Option<(String, Option<String>)>;

struct Checked {
    deprecation: Option<Set>,
    revocation: Option<Set>,
}

fn status_of(field: Field, raw: Option<&str>, set: &str, revert: &str) -> Result<bool> {
    match raw {
        Some(status) if status.eq_ignore_ascii_case(set) => Ok(true),
        Some(status) if status.eq_ignore_ascii_case(revert) => Ok(false),
        _ => Err(RegistryError::invalid(field, format!("must be `{set}` or `{revert}`"))),
    }
}

fn text(field: Field, raw: Option<String>) -> Result<String> {
    let text = raw.unwrap_or_default().trim().to_owned();
    if text.chars().count() > TEXT_MAX_CHARS {
        return Err(RegistryError::invalid(field, format!("must be at most {TEXT_MAX_CHARS} characters")));
    }
    if text.chars().any(|c| c.is_control() && c != '\n') {
        return Err(RegistryError::invalid(field, "must not contain control characters other than newlines"));
    }
    Ok(text)
}

/// An absolute http(s) URL of at most [`LINK_MAX_BYTES`]; empty means none.
fn link(field: Field, raw: Option<String>) -> Result<Option<String>> {
    let raw = raw.unwrap_or_default().trim().to_owned();
    if raw.is_empty() {
        return Ok(None);
    }
    if raw.len() > LINK_MAX_BYTES {
        return Err(RegistryError::invalid(field, format!("must be at most {LINK_MAX_BYTES} bytes")));
    }
    match Url::parse(&raw) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(Some(raw)),
        _ => Err(RegistryError::invalid(field, "must be an absolute http:// or https:// URL")),
    }
}

fn check(change: LifecycleChange) -> Result<Checked> {
    if change.deprecation.is_none() && change.revocation.is_none() {
        return Err(RegistryError::invalid(Field::Document, "send `deprecation` or `revocation` in the attributes"));
    }
    let deprecation = match change.deprecation {
        None => None,
        Some(request) => {
            let status = Field::Nested("deprecation", "deprecated-status");
            let set = status_of(status, request.status.as_deref(), "Deprecated", "Undeprecated")?;
            let reason = text(Field::Nested("deprecation", "reason"), request.reason)?;
            let link = link(Field::Nested("deprecation", "link"), request.link)?;
            Some(set.then_some((reason, link)))
        }
    };
    let revocation = match change.revocation {
        None => None,
        Some(request) => {
            let set =
                status_of(Field::Nested("revocation", "status"), request.status.as_deref(), "Revoked", "Unrevoked")?;
            let message = text(Field::Nested("revocation", "message"), request.message)?;
            let link = link(Field::Nested("revocation", "link"), request.link)?;
            Some(set.then_some((message, link)))
        }
    };
    Ok(Checked { deprecation, revocation })
}

/// The version with the change applied. Setting again replaces the reason and link (and keeps
/// when it was first set); a revoked version must stay deprecated, as in HCP Terraform, where
/// reverting a revocation leaves the version deprecated.
fn applied(version: &ModuleVersion, checked: &Checked, now: &str) -> Result<ModuleVersion> {
    let mut next = version.clone();
    if let Some(deprecation) = &checked.deprecation {
        next.deprecation = deprecation.as_ref().map(|(reason, link)| Deprecation {
            id: version.deprecation.as_ref().map_or_else(|| new_id("moddep"), |d| d.id.clone()),
            reason: reason.clone(),
            link: link.clone(),
            deprecated_at: version.deprecation.as_ref().map_or_else(|| now.to_owned(), |d| d.deprecated_at.clone()),
        });
    }
    if let Some(revocation) = &checked.revocation {
        next.revocation = revocation.as_ref().map(|(message, link)| Revocation {
            message: message.clone(),
            link: link.clone(),
            revoked_at: version.revocation.as_ref().map_or_else(|| now.to_owned(), |r| r.revoked_at.clone()),
        });
    }
    if next.revocation.is_some() && next.deprecation.is_none() {
        let detail = if matches!(checked.revocation, Some(Some(_))) {
            (Field::Nested("revocation", "status"), "a version must be deprecated before it is revoked")
        } else {
            (
                Field::Nested("deprecation", "deprecated-status"),
                "a revoked version stays deprecated: revert its revocation first",
            )
        };
        return Err(RegistryError::invalid(detail.0, detail.1));
    }
    Ok(next)
}

/// Deprecates, revokes or reverts one version of a private module, for a principal that
/// manages the organization's modules (others get 404). Revoking is for the hosted edition
/// only, as in HCP Terraform: Terraform Enterprise has no revocation.
pub async fn change(
    state: &AppState,
    principal: &Principal,
    org_name: &str,
    address: &Address,
    (provider, version): (&str, &str),
    change: LifecycleChange,
) -> Result<ModuleVersion> {
    let store = state.store.as_ref();
    let org = modules::managing_versions(state, principal, org_name, address, Permission::ManageModules).await?;
    let module_key = address.key(&org, provider)?;
    let checked = check(change)?;
    if matches!(checked.revocation, Some(Some(_))) && state.config.edition == Edition::SelfHosted {
        return Err(RegistryError::Forbidden(
            "Revoking module versions is available on the hosted edition only; deprecate the version instead.".into(),
        ));
    }
    let version_key = keys::module_version(&org.id, &address.name, provider, version);
    let (checked, module_key, version_key) = (&checked, &module_key, &version_key);
    let changed = retry_on_race(|| async move { attempt(store, module_key, version_key, checked).await }).await?;
    changed.ok_or_else(|| RegistryError::Conflict("The version is being changed by other requests; retry.".into()))
}

/// One conditional write of the change: the version record on its lifecycle revision, its
/// status entry, and, when its revocation changes, the module (whose latest version may move)
/// on its revision. `None` when another write came first.
async fn attempt(
    store: &dyn ItemStore,
    module_key: &Key,
    version_key: &Key,
    checked: &Checked,
) -> Result<Option<ModuleVersion>> {
    // The module is read before the versions' statuses, so a version ingested or deleted
    // between the two reads has bumped the module's revision and this write fails.
    let module = match checked.revocation {
        Some(_) => Some(load(store, module_key).await?),
        None => None,
    };
    let version: ModuleVersion = store.get(version_key).await?.ok_or(RegistryError::NotFound)?.parse()?;
    if version.status != OK {
        let field = if checked.deprecation.is_some() { "deprecation" } else { "revocation" };
        return Err(RegistryError::invalid(
            Field::Attribute(field),
            format!(
                "version {} is `{}`: only an ingested (`ok`) version can be deprecated or revoked",
                version.version, version.status
            ),
        ));
    }
    let next = applied(&version, checked, &timestamp(chrono::Utc::now()))?;
    if next.deprecation == version.deprecation && next.revocation == version.revocation {
        return Ok(Some(version));
    }
    let mut next = next;
    next.lifecycle_revision = version.lifecycle_revision + 1;
    let unchanged =
        Condition::Exists.and(Condition::Below("lifecycle_revision".into(), next.lifecycle_revision as i64));
    let mut transaction = Transaction::new();
    transaction.extend([
        Write::Put { item: next.to_item()?, condition: unchanged },
        Write::Put { item: next.status_item()?, condition: Condition::Exists },
    ]);
    if let Some(mut module) = module.filter(|_| next.revocation != version.revocation) {
        let mut all = statuses(store, &module).await?;
        if let Some(entry) = all.iter_mut().find(|entry| entry.version == next.version) {
            *entry = next.status_entry();
        }
        let latest = latest_of(&all).cloned();
        if latest.as_ref().map(|l| &l.version) != module.latest.as_ref().map(|l| &l.version) {
            module.latest = None;
            module.description = None;
            if let Some(latest) = latest {
                let description = if latest.version == next.version {
                    next.description()
                } else {
                    let key = keys::module_version(&module.org_id, &next.name, &next.provider, &latest.version);
                    let stored: Option<ModuleVersion> = store.get(&key).await?.map(|item| item.parse()).transpose()?;
                    stored.and_then(|v| v.description())
                };
                module.offer(&latest, description);
            }
        }
        let revision = module.revision;
        module.revision += 1;
        transaction.add(Write::Put { item: module.to_item()?, condition: Condition::equals("revision", revision) });
    }
    let index = version_index::key(&next.org_id, &next.name, &next.provider);
    transaction.add(version_index::change(index, Some(&version.status_entry()), &next.status_entry())?);
    match version_index::transact(store, transaction).await {
        Ok(()) => Ok(Some(next)),
        Err(e) if e.is_condition_failed() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::{link, text, Field, LINK_MAX_BYTES, TEXT_MAX_CHARS};

    #[test]
    fn links_are_bounded_absolute_http_urls() {
        let field = Field::Nested("deprecation", "link");
        assert_eq!(
            link(field, Some("https://example.com/why".into())).unwrap().as_deref(),
            Some("https://example.com/why")
        );
        assert_eq!(link(field, Some("  ".into())).unwrap(), None);
        for bad in ["javascript:alert(1)", "ftp://example.com", "/relative", "https://", "not a url"] {
            assert!(link(field, Some(bad.into())).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(LINK_MAX_BYTES));
        assert!(link(field, Some(long)).is_err());
    }

    #[test]
    fn texts_are_bounded_in_characters() {
        let field = Field::Nested("deprecation", "reason");
        assert!(text(field, Some("é".repeat(TEXT_MAX_CHARS))).is_ok());
        assert!(text(field, Some("é".repeat(TEXT_MAX_CHARS + 1))).is_err());
        assert!(text(field, Some("bell\u{7}".into())).is_err());
    }
}
