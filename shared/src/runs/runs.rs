//! Runs (`/runs`, `/workspaces/:id/runs`), their plans and applies, and the actions on them, as
//! HCP Terraform has them. A run is checked and recorded here; how it then moves (its place in
//! line for the workspace's lock, its jobs on agents) is `queue.rs`.

use super::error::{Result, RunsError};
use super::record::{ConfigurationVersion, Operation, Phase, Run, RunStatus, UploadStatus};
use super::{credentials, identity, queue};
use crate::accounts::access;
use crate::accounts::variables::{self, RunVariable};
use crate::accounts::workspaces::{self, Found, Workspace, WorkspaceAt, WorkspacePermissions};
use crate::api::{Field, PageRequest};
use crate::auth::{JobGrant, Principal};
use crate::identity::TokenSigner;
use crate::state::AppState;
use crate::store::{keys, parse_all, pointer, query_all, ItemStore};

/// The most addresses a run targets or replaces, the longest one, message and run variable.
pub const MAX_ADDRESSES: usize = 100;
pub const MAX_ADDRESS: usize = 1024;
pub const MAX_MESSAGE: usize = 2048;
pub const MAX_RUN_VARIABLES: usize = 100;
pub const MAX_RUN_VARIABLE_VALUE: usize = 64 * 1024;

/// A run with its workspace and what the caller may do there.
pub struct Seen {
    pub run: Run,
    pub workspace: Workspace,
    pub may: WorkspacePermissions,
}

/// What a request asks a new run to do; `None` takes the workspace's or HCP's default.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    pub workspace_id: String,
    pub configuration_version_id: Option<String>,
    pub message: Option<String>,
    pub is_destroy: bool,
    pub refresh: Option<bool>,
    pub refresh_only: bool,
    pub plan_only: bool,
    pub auto_apply: Option<bool>,
    pub target_addrs: Vec<String>,
    pub replace_addrs: Vec<String>,
    pub variables: Vec<(String, String)>,
}

fn check_text(text: &str, limit: usize, field: Field) -> Result<()> {
    if text.len() > limit || text.chars().any(|c| (c.is_control() && c != '\n') || crate::names::deceptive(c)) {
        return Err(RunsError::invalid(field, format!("must be at most {limit} bytes, without control characters")));
    }
    Ok(())
}

impl NewRun {
    /// The operation it asks for, checked against what Terraform accepts. A run auto-applies
    /// only for a caller that may apply runs itself: anyone else's waits for one who may.
    fn operation(&self, workspace: &Workspace, may_apply: bool) -> Result<Operation> {
        if self.auto_apply == Some(true) && !may_apply {
            return Err(RunsError::Forbidden(
                "You may queue plans in this workspace, not apply them: queue the run without auto-apply.".into(),
            ));
        }
        let message = self.message.clone().unwrap_or_else(|| "Queued manually via the API".into());
        check_text(&message, MAX_MESSAGE, Field::Attribute("message"))?;
        for (addresses, name) in [(&self.target_addrs, "target-addrs"), (&self.replace_addrs, "replace-addrs")] {
            if addresses.len() > MAX_ADDRESSES {
                let detail = format!("names more than {MAX_ADDRESSES} addresses");
                return Err(RunsError::invalid(Field::Attribute(name), detail));
            }
            for address in addresses {
                check_text(address, MAX_ADDRESS, Field::Attribute(name))?;
                // Each becomes one `-target=` or `-replace=` argument: never another flag.
                if address.is_empty() || address.starts_with('-') || address.contains('\n') {
                    return Err(RunsError::invalid(Field::Attribute(name), "must hold resource addresses"));
                }
            }
        }
        if self.refresh_only && (self.is_destroy || !self.replace_addrs.is_empty()) {
            return Err(RunsError::invalid(
                Field::Attribute("refresh-only"),
                "a refresh-only run cannot destroy or replace resources",
            ));
        }
        if self.refresh == Some(false) && self.refresh_only {
            return Err(RunsError::invalid(Field::Attribute("refresh"), "a refresh-only run refreshes"));
        }
        if self.variables.len() > MAX_RUN_VARIABLES {
            let detail = format!("holds more than {MAX_RUN_VARIABLES} variables");
            return Err(RunsError::invalid(Field::Attribute("variables"), detail));
        }
        for (key, value) in &self.variables {
            let valid_key = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && key.len() <= variables::MAX_KEY
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid_key || value.len() > MAX_RUN_VARIABLE_VALUE {
                return Err(RunsError::invalid(
                    Field::Attribute("variables"),
                    format!(
                        "each needs a variable name as `key` and a `value` of at most {MAX_RUN_VARIABLE_VALUE} bytes"
                    ),
                ));
            }
        }
        Ok(Operation {
            message,
            is_destroy: self.is_destroy,
            refresh: self.refresh.unwrap_or(true),
            refresh_only: self.refresh_only,
            plan_only: self.plan_only,
            auto_apply: self.auto_apply.unwrap_or(workspace.settings.auto_apply) && may_apply,
            target_addrs: self.target_addrs.clone(),
            replace_addrs: self.replace_addrs.clone(),
            variables: self.variables.clone(),
        })
    }
}

/// Queues a run in a workspace, for a caller that may queue plans there; it plans the
/// configuration version named, or else the workspace's newest.
pub async fn create(state: &AppState, principal: &Principal, new: NewRun) -> Result<Seen> {
    let store = state.store.as_ref();
    let found = workspaces::find(store, principal, WorkspaceAt::Id(&new.workspace_id)).await?;
    let Found { workspace, may, .. } = found.requiring(|may| may.queue_run, "queue runs")?;
    let queue = queue::queue_of(&workspace).ok_or_else(|| {
        RunsError::Conflict(
            "The workspace's execution mode is `local`: Terraform runs where it is called. \
             Set it to `remote` or `agent` to queue runs here."
                .into(),
        )
    })?;
    let operation = new.operation(&workspace, may.apply_run)?;
    let cv = match &new.configuration_version_id {
        Some(id) => pointer::resolve::<ConfigurationVersion>(store, id).await?,
        None => latest_configuration(store, &workspace).await?,
    };
    let missing = || {
        RunsError::invalid(
            Field::Relationship("configuration-version"),
            "no such configuration version in the workspace",
        )
    };
    let cv = cv.filter(|cv| cv.workspace_id == workspace.id).ok_or_else(missing)?;
    if cv.status == UploadStatus::Errored {
        let why = cv.error.clone().unwrap_or_default();
        return Err(RunsError::invalid(Field::Relationship("configuration-version"), format!("was refused: {why}")));
    }
    let run = Run::new(&workspace.id, &workspace.org_id, &cv, operation, queue, principal.user_id());
    let run = queue::record(state, run).await?;
    Ok(Seen { run, workspace, may })
}

async fn latest_configuration(store: &dyn ItemStore, workspace: &Workspace) -> Result<Option<ConfigurationVersion>> {
    let query = keys::configuration_versions(&workspace.org_id, &workspace.id).reverse(true).limit(1);
    Ok(store.query(query).await?.items.first().map(|item| item.parse()).transpose()?)
}

/// A run, for a caller that reads its workspace's runs: a run whose agent went silent is errored
/// on the way, and a pending one started if it can.
pub async fn get(state: &AppState, principal: &Principal, id: &str) -> Result<Seen> {
    let store = state.store.as_ref();
    let run: Run = pointer::resolve(store, id).await?.ok_or(RunsError::NotFound)?;
    let found = workspaces::find(store, principal, WorkspaceAt::Id(&run.workspace_id)).await;
    let Found { workspace, may, .. } = found?;
    if !may.read_runs {
        return Err(RunsError::NotFound);
    }
    let run = queue::refreshed(state, run).await?;
    Ok(Seen { run, workspace, may })
}

/// A run's plan or apply, by its id (`plan-…`, `apply-…`).
pub async fn phase(state: &AppState, principal: &Principal, phase_id: &str) -> Result<(Seen, Phase)> {
    let (run_id, phase) = super::record::run_of_phase(phase_id).ok_or(RunsError::NotFound)?;
    Ok((get(state, principal, &run_id).await?, phase))
}

/// A page of the workspace's runs, newest first, with how many it has.
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    workspace_id: &str,
    page: &PageRequest,
) -> Result<(Vec<Run>, usize, WorkspacePermissions)> {
    let Found { workspace, may, .. } = workspaces::find(store, principal, WorkspaceAt::Id(workspace_id)).await?;
    if !may.read_runs {
        return Err(RunsError::NotFound);
    }
    let query = keys::runs(&workspace.org_id, &workspace.id).reverse(true);
    let items = page.fetch(store, query).await?;
    let total = super::record::count(store, &workspace.org_id, &workspace.id, super::record::RUN_COUNT).await?;
    Ok((parse_all(&items)?, total, may))
}

/// What an action does to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Confirms a planned run: its apply is queued.
    Apply,
    Discard,
    /// Interrupts the job an agent runs (it ends `canceled`), or ends a run not started yet.
    Cancel,
    /// Ends a run whose cancel was asked for, at once, whatever its agent does.
    ForceCancel,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Apply => "apply",
            Action::Discard => "discard",
            Action::Cancel => "cancel",
            Action::ForceCancel => "force-cancel",
        }
    }
}

/// What the actions allow for `run` now, as HCP's `actions` flags say.
pub fn allowed(run: &Run, action: Action) -> bool {
    match action {
        Action::Apply | Action::Discard => run.status == RunStatus::Planned,
        Action::Cancel => !run.status.is_final() && run.status != RunStatus::Planned,
        Action::ForceCancel => run.canceled_by.is_some() && run.status.is_running(),
    }
}

/// Does `action` to the run `id`, for a caller that may apply runs in its workspace (a plan's
/// caller may cancel and discard what it queued: HCP lets `plan` access do so to speculative runs).
pub async fn act(state: &AppState, principal: &Principal, id: &str, action: Action) -> Result<Run> {
    let Seen { run, may, .. } = get(state, principal, id).await?;
    let permitted = may.apply_run || (may.queue_run && run.speculative && action != Action::Apply);
    if !permitted {
        return Err(RunsError::Forbidden(format!("You may not {} runs in this workspace.", action.name())));
    }
    let who = principal.user_id();
    let run_id = run.id.clone();
    queue::change(state, &run_id, Some(run), |run| {
        if !allowed(run, action) {
            return Err(RunsError::Conflict(format!(
                "The run is {}: it cannot be {}.",
                run.status.as_str(),
                match action {
                    Action::Apply => "applied",
                    Action::Discard => "discarded",
                    Action::Cancel => "canceled",
                    Action::ForceCancel => "force-canceled (cancel it first, while it runs)",
                }
            )));
        }
        let next = match action {
            Action::Apply => queue::apply_queued(run),
            Action::Discard => queue::ended(run, RunStatus::Discarded, None),
            Action::ForceCancel => queue::ended(run, RunStatus::ForceCanceled, None),
            Action::Cancel if run.status.is_running() => {
                let mut next = run.next();
                next.canceled_by = Some(who.clone());
                if let Some(job) = next.job.as_mut() {
                    job.cancel = true;
                }
                next
            }
            Action::Cancel => {
                let mut next = queue::ended(run, RunStatus::Canceled, None);
                next.canceled_by = Some(who.clone());
                next
            }
        };
        Ok(Some(next))
    })
    .await
}

/// What a job's agent needs to run it: the run, its workspace, and the workspace's variables with
/// their values (sensitive ones unsealed for the job token alone).
pub struct JobSpec {
    pub run: Run,
    pub phase: Phase,
    pub workspace: Workspace,
    pub org_name: String,
    pub variables: Vec<RunVariable>,
    /// The dynamic credentials its variables ask for, each with its identity token.
    pub credentials: serde_json::Value,
}

/// What the job a job token names runs: its run, workspace, variables (sensitive ones too) and
/// the identity tokens of the credentials they ask for (recorded, without the tokens).
pub async fn job_spec(state: &AppState, principal: &Principal, grant: &JobGrant) -> Result<JobSpec> {
    let store = state.store.as_ref();
    let run = queue::job_run(store, grant).await?;
    let found = workspaces::find(store, principal, WorkspaceAt::Id(&run.workspace_id)).await?;
    let variables = variables::for_run(store, state.sealer.as_ref(), principal, &found).await?;
    let Found { workspace, org, .. } = found;
    let phase = Phase::parse(&grant.phase).ok_or(RunsError::NotFound)?;
    let requested = credentials::requested(&variables, phase)?;
    let who = identity::RunIdentity { org: &org, workspace: &workspace, run: &run, phase };
    let signer = state.identity.as_deref();
    let public_url = state.config.public_url.as_deref();
    let credentials = identity::issue(signer.map(|s| s as &dyn TokenSigner), public_url, &who, &requested).await?;
    if !requested.is_empty() {
        identity::record(store, &who, &requested).await?;
    }
    Ok(JobSpec { run, phase, workspace, org_name: org.name, variables, credentials })
}

/// The organization's run queue (HCP's `/organizations/:org/runs/queue`): its runs queued or
/// running, oldest first, those of the workspaces the caller reads runs of, with what it may do
/// in each.
pub async fn organization_queue(
    store: &dyn ItemStore,
    principal: &Principal,
    org_name: &str,
    page: &PageRequest,
) -> Result<(Vec<(Run, WorkspacePermissions)>, usize)> {
    let org = access::visible(store, principal, org_name).await?;
    let runs: Vec<Run> = parse_all(&query_all(store, keys::active_runs(&org.id)).await?)?;
    let mut seen: std::collections::HashMap<String, WorkspacePermissions> = Default::default();
    let mut shown = Vec::new();
    for run in runs {
        let may = match seen.get(&run.workspace_id) {
            Some(may) => *may,
            None => {
                let may = WorkspacePermissions::of(store, principal, &org.id, &run.workspace_id).await?;
                seen.insert(run.workspace_id.clone(), may);
                may
            }
        };
        if may.read_runs {
            shown.push((run, may));
        }
    }
    let total = shown.len();
    Ok((page.slice(shown), total))
}

/// How many of the organization's runs wait for an agent and how many run (HCP's
/// `organization-capacity`).
pub async fn capacity(store: &dyn ItemStore, principal: &Principal, org_name: &str) -> Result<(String, usize, usize)> {
    let org = access::visible(store, principal, org_name).await?;
    let runs: Vec<Run> = parse_all(&query_all(store, keys::active_runs(&org.id)).await?)?;
    let running = runs.iter().filter(|run| run.status.is_running()).count();
    Ok((org.name, runs.len() - running, running))
}
