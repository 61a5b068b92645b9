//! A workspace's run: its status, what its plan found, and the logs of its plan and apply as the
//! agent writes them. The page reloads itself every few seconds while the run goes on (no
//! script). Read through the runs family's domain functions, as the API reads them.

use axum::extract::{Path, State};
use maud::{html, Markup};

use crate::runs::identity::{self, Issued};
use crate::runs::job_files;
use crate::runs::record::{Phase, Run};
use crate::runs::runs;
use crate::state::AppState;
use crate::web::error::WebError;
use crate::web::layout::{self, Page};
use crate::web::session::Viewer;

/// How often the page of a run still going reloads.
const REFRESH_SECONDS: u32 = 3;

/// A run's status as a badge.
pub fn status(run: &Run) -> Markup {
    let status = run.status.as_str();
    html! { span class={ "badge status-" (status.replace('_', "-")) } { (status.replace('_', " ")) } }
}

pub async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((org, name, run_id)): Path<(String, String, String)>,
) -> Result<Page, WebError> {
    let principal = viewer.principal()?;
    let seen = runs::get(&state, principal, &run_id).await?;
    // The run is the workspace's named in the path, or not found.
    if seen.workspace.name != name {
        return Err(crate::runs::RunsError::NotFound.into());
    }
    let run = &seen.run;
    let store = state.store.as_ref();
    let mut logs = Vec::new();
    for phase in [Phase::Plan, Phase::Apply] {
        let record = run.phase(phase);
        if matches!(record.status.as_str(), "pending" | "unreachable") {
            continue;
        }
        let framed = job_files::framed(store, run, phase).await?;
        let text: Vec<u8> = framed.into_iter().filter(|b| *b != 0x02 && *b != 0x03).collect();
        logs.push((phase, record, String::from_utf8_lossy(&text).into_owned()));
    }
    let issued = identity::issued(store, &seen.workspace.org_id, run).await?;
    let body = html! {
        h1 { "Run " (run.id) }
        p.summary {
            (status(run)) " " (run.operation.message)
            " · queued " (layout::time(&run.created_at))
            @if run.speculative { " · a speculative plan" }
            @if run.operation.is_destroy { " · destroys" }
        }
        @if let Some(error) = &run.error { p.message { (error) } }
        @if run.plan.status == "finished" {
            p { "The plan: " (run.plan.additions) " to add, " (run.plan.changes) " to change, "
                (run.plan.destructions) " to destroy"
                @if !run.plan.has_changes { " (no changes)" } "." }
        }
        @if !issued.is_empty() {
            h2 { "Dynamic credentials" }
            ul { @for phase in &issued { (credentials(phase)) } }
        }
        @for (phase, record, text) in &logs {
            h2 { (match phase { Phase::Plan => "Plan", Phase::Apply => "Apply" }) " · " (record.status) }
            pre.log { (text) }
        }
    };
    let here = format!("/app/organizations/{org}/workspaces/{name}");
    let crumbs = [
        ("Organizations", "/app".to_owned()),
        (org.as_str(), format!("/app/organizations/{org}")),
        (name.as_str(), here),
    ];
    let refresh = (!run.status.is_final()).then_some(REFRESH_SECONDS);
    Ok(layout::refreshing_page(viewer.chrome(), &run.id, &crumbs, body, refresh))
}

/// What a phase was given identity tokens for, and where it was to trade them: never a token.
fn credentials(issued: &Issued) -> Markup {
    let asked = &issued.requested;
    let tag = |tag: &Option<String>| tag.as_deref().map(|t| format!(" ({t})")).unwrap_or_default();
    html! {
        @for aws in &asked.aws {
            li { (issued.phase) (tag(&aws.tag)) ": AWS role " code { (aws.role_arn) } " by web identity (audience "
                (aws.audience) "), " (layout::time(&issued.at)) }
        }
        @for vault in &asked.vault {
            li { (issued.phase) (tag(&vault.tag)) ": Vault "
                (vault.address.as_deref().unwrap_or("(this Hangar's broker)")) ", auth/" (vault.auth_path)
                " role " code { (vault.role) }
                @if let Some(aws) = &vault.aws {
                    ", AWS keys from " code { (aws.mount_path) "/" (if aws.auth_type == "iam_user" { "creds" } else { "sts" }) "/" (aws.vault_role) }
                }
                ", " (layout::time(&issued.at)) }
        }
        @for bare in &asked.tokens {
            li { (issued.phase) (tag(&bare.tag)) ": an identity token for " (bare.audience) }
        }
    }
}
