//! The console's home: the organizations the token can see (all of them for the site admin, its
//! own for a team token), as `GET /api/v2/organizations` lists them; and one organization's page:
//! what it holds (modules, agent pools, workspaces), each a link.

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;

use super::{page, params};
use crate::accounts::{organizations, workspaces};
use crate::api::PageRequest;
use crate::state::AppState;
use crate::web::error::WebError;
use crate::web::layout::{self, pager};
use crate::web::session::{Viewer, Who};

pub async fn list(State(state): State<AppState>, viewer: Viewer, query: RawQuery) -> Result<Response, WebError> {
    if let Who::Broker(_) = viewer.who {
        return Ok(Redirect::to("/app/broker").into_response());
    }
    let principal = viewer.principal()?;
    let params = params(query)?;
    let page = page(&params)?;
    let (orgs, total) = organizations::list(state.store.as_ref(), principal, &page).await?;
    let body = html! {
        h1 { "Organizations" }
        @if orgs.is_empty() {
            p.empty { "This token sees no organization." }
            p.summary { "Signed in as " (viewer.describe()) "." }
        } @else {
            table.list {
                thead { tr { th { "Organization" } th { "Modules" } th { "Agent pools" } th { "Created" } } }
                tbody {
                    @for org in &orgs {
                        tr {
                            td { a href={ "/app/organizations/" (org.name) } { strong { (org.name) } } }
                            td {
                                a href={ "/app/organizations/" (org.name) "/modules" } {
                                    (org.private_module_count + org.public_module_count) " modules"
                                }
                            }
                            td { a href={ "/app/organizations/" (org.name) "/agent-pools" } { "Agent pools" } }
                            td { (layout::time(&org.created_at)) }
                        }
                    }
                }
            }
            (pager("/app", &params, page, total))
        }
    };
    Ok(layout::page(viewer.chrome(), "Organizations", &[], body).into_response())
}

/// `/app/organizations/:org`: what the organization holds, as `GET /api/v2/organizations/:org`
/// and its workspaces' list show it to the token.
pub async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(org): Path<String>,
) -> Result<Response, WebError> {
    let principal = viewer.principal()?;
    let first = PageRequest { number: 1, size: 20 };
    let (shown, seen, org) = workspaces::list(state.store.as_ref(), principal, &org, None, &first).await?;
    let base = format!("/app/organizations/{}", org.name);
    let body = html! {
        h1 { (org.name) }
        p.summary { "Created " (layout::time(&org.created_at)) ". Signed in as " (viewer.describe()) "." }
        ul.holdings {
            li { a href={ (base) "/modules" } { (org.private_module_count + org.public_module_count) " modules" } }
            li { a href={ (base) "/providers" } { "Providers" } }
            li { a href={ (base) "/agent-pools" } { "Agent pools" } }
            li { (seen) " workspaces" }
        }
        h2 { "Workspaces" }
        @if shown.is_empty() { p.empty { "No workspace." } } @else {
            table.list {
                thead { tr { th { "Workspace" } th { "Execution" } th { "Created" } } }
                tbody {
                    @for (workspace, _) in &shown {
                        tr {
                            td { a href={ (base) "/workspaces/" (workspace.name) } { (workspace.name) } }
                            td { (workspace.execution_mode) }
                            td { (layout::time(&workspace.created_at)) }
                        }
                    }
                }
            }
            @if seen > shown.len() { p.note { "The first " (shown.len()) " of " (seen) "." } }
        }
    };
    let crumbs = [("Organizations", "/app".to_owned())];
    Ok(layout::page(viewer.chrome(), &org.name, &crumbs, body).into_response())
}
