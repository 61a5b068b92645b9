//! A workspace: its settings, its lock, its newest runs, and, for a token that may read them, its state versions
//! (serial, when, who wrote it) and the current state's outputs, sensitive values hidden. Read
//! through `workspaces::find` and the state-versions family, as the API reads them.

use axum::extract::{Path, RawQuery, State};
use maud::html;

use super::{page, params};
use crate::accounts::workspaces::{self, WorkspaceAt};
use crate::api::PageRequest;
use crate::runs::runs;
use crate::state::AppState;
use crate::state_versions::versions;
use crate::web::error::WebError;
use crate::web::layout::{self, badge, pager, Page};
use crate::web::session::Viewer;

/// How many of its newest runs a workspace's page lists.
const RECENT_RUNS: usize = 10;

pub async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((org, name)): Path<(String, String)>,
    query: RawQuery,
) -> Result<Page, WebError> {
    let principal = viewer.principal()?;
    let params = params(query)?;
    let page = page(&params)?;
    let store = state.store.as_ref();
    let found = workspaces::find(store, principal, WorkspaceAt::Name { org: &org, name: &name }).await?;
    let (workspace, org) = (&found.workspace, &found.org);
    let at = WorkspaceAt::Id(&workspace.id);
    let history = match found.may.read_state {
        true => Some(versions::list(store, principal, at, &page).await?),
        false => None,
    };
    let outputs = match (found.may.read_state_outputs, &workspace.current_state) {
        (true, Some(_)) => {
            let (current, _) = versions::current_stored(store, principal, at).await?;
            versions::outputs(state.blobs.as_ref(), &current).await?
        }
        _ => Vec::new(),
    };
    let recent = match found.may.read_runs {
        true => {
            Some(runs::list(store, principal, &workspace.id, &PageRequest { number: 1, size: RECENT_RUNS }).await?.0)
        }
        false => None,
    };
    let here = format!("/app/organizations/{}/workspaces/{}", org.name, workspace.name);
    let body = html! {
        h1 { (workspace.name) }
        p.summary {
            "Execution " (workspace.execution_mode) ", Terraform "
            (workspace.settings.terraform_version.as_deref().unwrap_or("latest"))
            ", " (workspace.resource_count) " resources. Created " (layout::time(&workspace.created_at)) "."
        }
        @match &workspace.locked_by {
            Some(lock) => p { (badge("locked")) " by " (lock.holder) " since " (layout::time(&lock.at))
                @if let Some(reason) = &lock.reason { ": " (reason) } },
            None => p { (badge("unlocked")) },
        }
        @if let Some(recent) = &recent {
            h2 { "Runs" }
            @if recent.is_empty() {
                p.empty { "No runs yet." }
            } @else {
                table.list {
                    thead { tr { th { "Run" } th { "Status" } th { "Message" } th { "Queued" } } }
                    tbody {
                        @for run in recent {
                            tr {
                                td { a href={ (here) "/runs/" (run.id) } { (run.id) } }
                                td { (super::runs::status(run)) }
                                td { (run.operation.message) }
                                td { (layout::time(&run.created_at)) }
                            }
                        }
                    }
                }
            }
        }
        h2 { "State versions" }
        @match &history {
            None => p.empty { "This token may not read this workspace's state versions." },
            Some((shown, _, _)) if shown.is_empty() => p.empty { "No state yet." },
            Some((shown, total, _)) => {
                table.list {
                    thead { tr { th { "Serial" } th { "Written" } th { "By" } th { "Resources" } th { "Size" } } }
                    tbody {
                        @for version in shown {
                            tr {
                                td { (version.serial) }
                                td { (layout::time(&version.created_at)) }
                                td { (version.created_by) }
                                td { (version.resource_count) }
                                td { (version.size) " bytes" }
                            }
                        }
                    }
                }
                (pager(&here, &params, page, *total))
            }
        }
        @if !outputs.is_empty() {
            h2 { "Outputs" }
            table.list {
                thead { tr { th { "Output" } th { "Type" } th { "Value" } } }
                tbody {
                    @for output in &outputs {
                        tr {
                            td { (output.name) }
                            td { (output.simple_type()) }
                            td { @if output.sensitive { em { "sensitive" } } @else { code { (output.value) } } }
                        }
                    }
                }
            }
        }
    };
    let crumbs =
        [("Organizations", "/app".to_owned()), (org.name.as_str(), format!("/app/organizations/{}", org.name))];
    Ok(layout::page(viewer.chrome(), &workspace.name, &crumbs, body))
}
