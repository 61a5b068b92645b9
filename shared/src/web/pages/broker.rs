//! The credential broker's pages, for a broker token: its mounts, and a mount's roles (credential
//! types, TTLs) and static roles (user, period, last and next rotation). Each read is checked
//! against the token's policies on the path and capability the Vault API checks for it
//! (`policies::allowed`, as `engine::dispatch` does); a refused path is a 404 page. Secrets are
//! never read: no credential path is called and a static role's keys are never shown.

use std::time::Duration;

use axum::extract::{RawQuery, State};
use futures::{StreamExt as _, TryStreamExt as _};
use maud::{html, Markup};

use super::{filter, params};
use crate::broker::mounts::{self, Mount};
use crate::broker::roles::{self, Role};
use crate::broker::tokens::ServiceToken;
use crate::broker::{policies, statics, BrokerError};
use crate::state::AppState;
use crate::store::ItemStore;
use crate::web::error::WebError;
use crate::web::layout::{self, Page};
use crate::web::session::Viewer;

/// The most roles (and static roles) a mount's page reads and shows.
const MAX_ROLES_SHOWN: usize = 100;
/// How many rows' reads are in flight at once.
const CONCURRENT_READS: usize = 16;

pub async fn mounts(State(state): State<AppState>, viewer: Viewer) -> Result<Page, WebError> {
    let token = viewer.broker_token()?;
    let store = state.store.as_ref();
    if !policies::allowed(store, token, "sys/mounts", "read").await? {
        // A token that may not list the mounts still lands somewhere: who it is, what it may do.
        let body = html! {
            h1 { "Credential broker" }
            p.summary { "Signed in as " code { (token.display_name) } " with the policies " (token.policies.join(", ")) "." }
            p { "This token may not list the broker's mounts (that takes " code { "read" } " on " code { "sys/mounts" }
                "), so the console has nothing to show it. It may still call the API paths its policies allow." }
        };
        return Ok(layout::page(viewer.chrome(), "Credential broker", &[], body));
    }
    let mounts = mounts::all(store).await?;
    let body = html! {
        h1 { "Credential broker" }
        p.summary { "Signed in as " code { (token.display_name) } " with policies " (token.policies.join(", ")) }
        @if mounts.is_empty() { p.empty { "No secrets engine is mounted." } } @else {
            table.list {
                thead { tr { th { "Mount" } th { "Type" } th { "Description" } } }
                tbody {
                    @for mount in &mounts {
                        tr {
                            td { a href={ "/app/broker/mount?" (mount_query(&mount.path)) } { code { (mount.path) "/" } } }
                            td { (mount.kind) }
                            td { (mount.description) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout::page(viewer.chrome(), "Credential broker", &[], body))
}

pub async fn mount(State(state): State<AppState>, viewer: Viewer, query: RawQuery) -> Result<Page, WebError> {
    let token = viewer.broker_token()?;
    let store = state.store.as_ref();
    let params = params(query)?;
    let path = filter(&params, "path")?.ok_or(WebError::NotFound)?;
    let path = mounts::normalize(path).map_err(|_| WebError::NotFound)?;
    let mount = mounts::all(store).await?.into_iter().find(|m| m.path == path).ok_or(WebError::NotFound)?;
    let roles = listed(store, token, &format!("{path}/roles/"), roles::list(store, &mount)).await?;
    let statics = listed(store, token, &format!("{path}/static-roles/"), statics::list(store, &mount)).await?;
    if roles.is_none() && statics.is_none() {
        return Err(WebError::NotFound);
    }
    let roles = match &roles {
        Some(names) => Some(roles_table(store, token, &mount, names).await?),
        None => None,
    };
    let statics = match &statics {
        Some(names) => Some(statics_table(store, token, &mount, names).await?),
        None => None,
    };
    let root = root_status(store, token, &mount).await?;
    let leases = lease_count(store, token, &mount).await?;
    let body = html! {
        h1 { "Mount " code { (path) "/" } }
        p.summary { (mount.kind) @if !mount.description.is_empty() { " · " (mount.description) } }
        dl.facts {
            dt { code { "config/root" } } dd { (root) }
            dt { "Leases" } dd { (leases) }
        }
        section.roles {
            h2 { "Roles" }
            @match roles {
                None => p.empty { "This token may not list the roles." },
                Some(table) => (table),
            }
        }
        section.static-roles {
            h2 { "Static roles" }
            @match statics {
                None => p.empty { "This token may not list the static roles." },
                Some(table) => (table),
            }
        }
    };
    let crumbs = [("Credential broker", "/app/broker".to_owned())];
    Ok(layout::page(viewer.chrome(), &format!("Mount {path}/"), &crumbs, body))
}

/// The names a LIST on `checked` gives, if the token may list there (Vault checks a LIST on the
/// path with its trailing slash).
async fn listed(
    store: &dyn ItemStore,
    token: &ServiceToken,
    checked: &str,
    names: impl std::future::Future<Output = Result<Vec<String>, BrokerError>>,
) -> Result<Option<Vec<String>>, WebError> {
    if !policies::allowed(store, token, checked, "list").await? {
        return Ok(None);
    }
    Ok(Some(names.await?))
}

/// Whether the token may read the object at `path` (what showing its fields needs).
async fn readable(store: &dyn ItemStore, token: &ServiceToken, path: &str) -> Result<bool, WebError> {
    Ok(policies::allowed(store, token, path, "read").await?)
}

/// The first [`MAX_ROLES_SHOWN`] of a mount's objects of `kind` (`roles`, `static-roles`), each
/// with what `load` reads of it where the token may read it (`None` where it may not), in the
/// names' order. The rows are read a few at a time rather than one after another.
async fn shown<'a, T, F, Fut>(
    store: &dyn ItemStore,
    token: &ServiceToken,
    mount: &Mount,
    kind: &str,
    names: &'a [String],
    load: F,
) -> Result<Vec<(&'a String, Option<T>)>, WebError>
where
    F: Fn(&'a str) -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, BrokerError>>,
{
    let rows: Vec<_> =
        names.iter().take(MAX_ROLES_SHOWN).map(|name| row(store, token, mount, kind, name, &load)).collect();
    futures::stream::iter(rows).buffered(CONCURRENT_READS).try_collect().await
}

/// One row of [`shown`].
async fn row<'a, T, F, Fut>(
    store: &dyn ItemStore,
    token: &ServiceToken,
    mount: &Mount,
    kind: &str,
    name: &'a String,
    load: &F,
) -> Result<(&'a String, Option<T>), WebError>
where
    F: Fn(&'a str) -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, BrokerError>>,
{
    let object = match readable(store, token, &format!("{}/{kind}/{name}", mount.path)).await? {
        true => load(name).await?,
        false => None,
    };
    Ok((name, object))
}

async fn roles_table(
    store: &dyn ItemStore,
    token: &ServiceToken,
    mount: &Mount,
    names: &[String],
) -> Result<Markup, WebError> {
    let rows = shown(store, token, mount, "roles", names, |name| roles::load(store, mount, name)).await?;
    Ok(html! {
        @if names.is_empty() { p.empty { "No role." } } @else {
            table.list {
                thead { tr { th { "Role" } th { "Credential type" } th { "Policies" } th { "Role ARNs" } th { "Default STS TTL" } th { "Max STS TTL" } } }
                tbody {
                    @for (name, role) in &rows {
                        tr {
                            td { code { (name) } }
                            @match role {
                                Some(Ok(role)) => {
                                    td { (credential_types(role)) }
                                    td { (role_policies(role)) }
                                    td { @for arn in &role.role_arns { code { (arn) } br; } }
                                    td { (ttl(role.default_sts_ttl)) }
                                    td { (ttl(role.max_sts_ttl)) }
                                }
                                Some(Err(_)) => td colspan="5" { span.problem { "stored fields no longer validate" } },
                                None => td colspan="5" { span.note { "not readable with this token" } },
                            }
                        }
                    }
                }
            }
            (more(names.len()))
        }
    })
}

async fn statics_table(
    store: &dyn ItemStore,
    token: &ServiceToken,
    mount: &Mount,
    names: &[String],
) -> Result<Markup, WebError> {
    let rows = shown(store, token, mount, "static-roles", names, |name| statics::load(store, mount, name)).await?;
    Ok(html! {
        @if names.is_empty() { p.empty { "No static role." } } @else {
            table.list {
                thead { tr { th { "Static role" } th { "IAM user" } th { "Rotation period" } th { "Last rotation" } th { "Next rotation" } } }
                tbody {
                    @for (name, role) in &rows {
                        tr {
                            td { code { (name) } }
                            @match role {
                                Some(role) => {
                                    td { code { (role.username) } }
                                    td { (ttl(Some(role.rotation_period))) }
                                    // Each rotation schedules the next one period later.
                                    td { (layout::unix_time(role.next_rotation.saturating_sub(i64::try_from(role.rotation_period).unwrap_or(i64::MAX)))) }
                                    td { (layout::unix_time(role.next_rotation)) }
                                }
                                None => td colspan="4" { span.note { "not readable with this token" } },
                            }
                        }
                    }
                }
            }
            (more(names.len()))
        }
    })
}

fn more(total: usize) -> Markup {
    html! { @if total > MAX_ROLES_SHOWN { p.note { "Showing the first " (MAX_ROLES_SHOWN) " of " (total) "." } } }
}

/// What a role grants, by name (never a document's text): managed policies, an inline
/// document, groups.
fn role_policies(role: &Role) -> Markup {
    html! {
        @for arn in &role.policy_arns { code { (arn) } br; }
        @if !role.policy_document.is_empty() { "an inline policy document" br; }
        @for group in &role.iam_groups { "group " code { (group) } br; }
    }
}

/// Whether the mount's `config/root` is set, and how it reaches AWS, where the token may read
/// it (as `GET <mount>/config/root` shows it: never the secret key).
async fn root_status(store: &dyn ItemStore, token: &ServiceToken, mount: &Mount) -> Result<String, WebError> {
    if !readable(store, token, &format!("{}/config/root", mount.path)).await? {
        return Ok("not readable with this token".into());
    }
    if !crate::broker::config::root_exists(store, mount).await? {
        return Ok("not set: the engine signs in with the deployment's default AWS credentials".into());
    }
    let root = crate::broker::config::root(store, mount).await?;
    Ok(match (root.access_key.is_empty(), &root.role_arn) {
        (false, _) => "set, with an access key".into(),
        (true, Some(role)) => format!("set, with workload identity as {role}"),
        (true, None) => "set, with the deployment's default AWS credentials".into(),
    })
}

/// How many leases the mount holds, where the token may list them (`sys/leases/lookup/` takes
/// `list` and `sudo`, as in Vault); counted up to a bound.
async fn lease_count(store: &dyn ItemStore, token: &ServiceToken, mount: &Mount) -> Result<String, WebError> {
    const COUNTED: usize = 1000;
    let checked = format!("sys/leases/lookup/{}/", mount.path);
    let may = policies::allowed(store, token, &checked, "list").await?
        && policies::allowed(store, token, &checked, "sudo").await?;
    if !may {
        return Ok("not listable with this token".into());
    }
    Ok(match crate::broker::leases::count(store, mount, COUNTED).await? {
        0 => "none".into(),
        n if n > COUNTED => format!("more than {COUNTED}"),
        n => n.to_string(),
    })
}

fn credential_types(role: &Role) -> String {
    role.credential_types.iter().map(|kind| kind.as_str()).collect::<Vec<_>>().join(", ")
}

fn ttl(seconds: Option<u64>) -> String {
    match seconds {
        None | Some(0) => "—".into(),
        Some(seconds) => humantime::format_duration(Duration::from_secs(seconds)).to_string(),
    }
}

/// `path=…`, encoded.
fn mount_query(path: &str) -> String {
    serde_urlencoded::to_string([("path", path)]).unwrap_or_default()
}
