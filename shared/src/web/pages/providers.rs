//! An organization's providers, a page at a time (the registry's own list), each private one
//! with its latest versions, their platforms and whether each is served, and the
//! `required_providers` snippet of its latest installable version.

use axum::extract::{Path, RawQuery, State};
use maud::{html, Markup};

use super::{page, params};
use crate::api::BaseUrl;
use crate::auth::{Permission, Principal};
use crate::registry::providers::{self, ProviderAddress, ProviderFilter, ProviderVersion};
use crate::state::AppState;
use crate::web::error::WebError;
use crate::web::layout::{self, badge, pager, Page};
use crate::web::session::Viewer;

/// How many of a provider's versions the page shows, the latest first.
const VERSIONS_SHOWN: usize = 10;

pub async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(org): Path<String>,
    BaseUrl(base): BaseUrl,
    query: RawQuery,
) -> Result<Page, WebError> {
    let principal = viewer.principal()?;
    let params = params(query)?;
    let page = page(&params)?;
    let (shown, total, org) =
        providers::list(state.store.as_ref(), principal, &org, &ProviderFilter::default(), &page).await?;
    let host = super::registry_host(&base);
    let here = format!("/app/organizations/{}/providers", org.name);
    let mut sections = Vec::with_capacity(shown.len());
    for provider in &shown {
        let namespace = provider.namespace_in(&org).to_owned();
        let versions = if provider.is_private() {
            let address = ProviderAddress {
                registry: provider.registry.as_str().to_owned(),
                namespace: namespace.clone(),
                name: provider.name.to_string(),
            };
            providers::latest_versions(&state, principal, &org.name, &address, VERSIONS_SHOWN).await?
        } else {
            Vec::new()
        };
        let installable = versions.iter().find(|v| v.platforms.iter().any(|p| v.serves(p)));
        let usage = installable.map(|version| usage(host, &namespace, provider.name.as_str(), &version.version));
        sections.push(html! {
            section.provider {
                h2 { (namespace) "/" (provider.name.as_str()) " " span.note { (provider.registry.as_str()) } }
                @if provider.is_private() {
                    @if versions.is_empty() { p.empty { "No version yet." } } @else { (version_table(&versions)) }
                    @if let Some(usage) = usage { (usage) }
                } @else {
                    p.note { "A record of a provider in the public registry." }
                }
            }
        });
    }
    let manages = can_manage(principal, &org.id);
    let body = html! {
        h1 { "Providers of " (org.name) }
        @if shown.is_empty() { p.empty { "No provider." } }
        @for section in &sections { (section) }
        @if manages { p.note { "Publishing a provider: docs/providers.md." } }
        (pager(&here, &params, page, total))
    };
    let crumbs =
        [("Organizations", "/app".to_owned()), (org.name.as_str(), format!("/app/organizations/{}", org.name))];
    Ok(layout::page(viewer.chrome(), &format!("Providers of {}", org.name), &crumbs, body))
}

fn can_manage(principal: &Principal, org_id: &str) -> bool {
    principal.can(org_id, Permission::ManageProviders)
}

fn version_table(versions: &[ProviderVersion]) -> Markup {
    html! {
        table.list {
            thead { tr { th { "Version" } th { "Key" } th { "Protocols" } th { "Platforms" } th { "Problem" } } }
            tbody {
                @for version in versions {
                    tr {
                        td { strong { (version.version) } }
                        td { code { (version.key_id) } }
                        td { (version.protocols.join(", ")) }
                        td {
                            @for platform in &version.platforms {
                                @let status = if version.serves(platform) { "ok" } else if version.platform_problem(platform).is_some() { "failed" } else { "pending" };
                                span.platform { (platform.os) "_" (platform.arch) " " (badge(status)) } " "
                            }
                        }
                        td {
                            @if let Some(problem) = version.problem() { (problem) }
                            @for platform in &version.platforms {
                                @if let Some(problem) = version.platform_problem(platform) {
                                    div { (platform.os) "_" (platform.arch) ": " (problem) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `terraform { required_providers { … } }` for a provider's version.
fn usage(host: &str, namespace: &str, name: &str, version: &str) -> Markup {
    let snippet = format!(
        "terraform {{\n  required_providers {{\n    {name} = {{\n      source  = \"{host}/{namespace}/{name}\"\n      version = \"{version}\"\n    }}\n  }}\n}}"
    );
    let id = format!("usage-{namespace}-{name}");
    html! {
        div.usage {
            pre { code id=(id) { (snippet) } }
            (layout::copy_button(&id))
        }
    }
}
