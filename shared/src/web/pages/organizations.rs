//! The console's home: the organizations the token can see (all of them for the site admin, its
//! own for a team token), as `GET /api/v2/organizations` lists them.

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;

use super::{page, params};
use crate::accounts::organizations;
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
        } @else {
            table.list {
                thead { tr { th { "Organization" } th { "Modules" } th { "Agent pools" } th { "Created" } } }
                tbody {
                    @for org in &orgs {
                        tr {
                            td { strong { (org.name) } }
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
