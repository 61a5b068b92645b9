//! An organization's modules, with search and a provider filter, a page at a time: the registry's
//! own list (`GET /api/v2/organizations/:org/registry-modules`), with its filters and paging.

use axum::extract::{Path, RawQuery, State};
use maud::html;

use super::{filter, page, params};
use crate::registry::modules::{self, ModuleFilter};
use crate::registry::status::OK;
use crate::state::AppState;
use crate::web::error::WebError;
use crate::web::layout::{self, badge, pager, Page};
use crate::web::session::Viewer;

pub async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(org): Path<String>,
    query: RawQuery,
) -> Result<Page, WebError> {
    let principal = viewer.principal()?;
    let params = params(query)?;
    let page = page(&params)?;
    let q = filter(&params, "q")?;
    let provider = filter(&params, "provider")?;
    let wanted =
        ModuleFilter { q: q.map(str::to_owned), provider: provider.map(str::to_owned), ..ModuleFilter::default() };
    let (shown, total, org) = modules::list(state.store.as_ref(), principal, &org, &wanted, &page).await?;
    let here = format!("/app/organizations/{}/modules", org.name);
    let body = html! {
        h1 { "Modules of " (org.name) }
        form.filters method="get" action=(here) role="search" {
            label for="q" { "Search" }
            input #q type="search" name="q" value=[q] maxlength=(super::MAX_FILTER_CHARS) placeholder="name, namespace or provider";
            label for="provider" { "Provider" }
            input #provider type="text" name="provider" value=[provider] maxlength=(super::MAX_FILTER_CHARS) placeholder="aws";
            button type="submit" { "Filter" }
            @if q.is_some() || provider.is_some() { a href=(here) { "Clear" } }
        }
        @if shown.is_empty() {
            p.empty { "No module matches." }
        } @else {
            table.list {
                thead { tr { th { "Module" } th { "Provider" } th { "Registry" } th { "Latest" } th { "Status" } th { "Description" } } }
                tbody {
                    @for module in &shown {
                        @let m = &module.module;
                        @let namespace = m.namespace_in(&org);
                        tr {
                            td {
                                a href={ (here) "/" (m.registry.as_str()) "/" (namespace) "/" (m.name.as_str()) "/" (m.provider.as_str()) } {
                                    strong { (namespace) "/" (m.name.as_str()) }
                                }
                            }
                            td { (m.provider.as_str()) }
                            td { (m.registry.as_str()) }
                            td { @if let Some(latest) = &m.latest { (latest.version) } @else { "—" } }
                            td {
                                (badge(&m.status))
                                @let failed = module.statuses.iter().filter(|s| s.status != OK && s.error.is_some()).count();
                                @if failed > 0 { " " span.note { (failed) " failed" } }
                            }
                            td { (m.description.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
        (pager(&here, &params, page, total))
    };
    let crumbs = [("Organizations", "/app".to_owned())];
    Ok(layout::page(viewer.chrome(), &format!("Modules of {}", org.name), &crumbs, body))
}
