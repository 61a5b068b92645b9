//! How runs move: each change of a run is one transaction with what goes with it (its entry in
//! a job queue, its place among the runs waiting for the workspace's lock, the lock itself, its
//! job token), conditioned on the run as read, so of two writers one wins and the other reads
//! again. Pull, never push: an agent claims the oldest job of its queue with one conditional
//! write, which hands it a job token and a lease; its reports renew the lease, and a job whose
//! lease runs out is errored by the scheduled sweep or the next read, giving the lock back.
//!
//! A claim reads the head of its queue (one query of at most [`CLAIM_WINDOW`] entries), the run
//! of the entry it tries and commits one transaction: the same store calls however long the
//! queue is.

use chrono::Utc;
use rand::Rng;
use serde::Serialize;

use super::error::{Result, RunsError};
use super::record::{
    ConfigurationVersion, Job, Phase, QueueEntry, Run, RunStatus, UploadStatus, WaitingEntry, ACTIVE_COUNT,
    MAX_ACTIVE_RUNS, MAX_AWAITING, RUN_COUNT,
};
use crate::accounts::locks;
use crate::accounts::workspaces::{self, Workspace};
use crate::accounts::AccountsError;
use crate::api::Field;
use crate::auth::{hash_secret, new_secret, AgentGrant, JobGrant};
use crate::blobs::ObjectId;
use crate::state::AppState;
use crate::store::{keys, pointer, retry_on_race, schedule, Condition, ItemStore, Transaction, UpdateOp, Write, TTL};

/// How many entries at the head of a queue a claim reads, to try them in turn from a random one
/// (agents claiming at once then rarely race for the same entry).
pub const CLAIM_WINDOW: usize = 8;

/// The most runs one sweep errors for their lost leases; the rest wait for the next.
pub const SWEEP_LIMIT: usize = 200;

/// The queue of Hangar's own runners (workspaces in `remote` execution mode): the site pool's.
pub const REMOTE_QUEUE: &str = crate::agents::pool::SITE_POOL;

/// Seconds the lease of a job lasts past each report: the agents' ping timeout.
fn lease_secs(state: &AppState) -> i64 {
    i64::try_from(state.config.agent_ping_timeout.as_secs()).unwrap_or(i64::MAX / 4).max(1)
}

/// When an agent should report next (see `Config::agent_report_in`).
pub fn report_in(state: &AppState) -> u64 {
    state.config.agent_report_in()
}

/// Stores `next` in place of `run` (as read) with everything the change brings: the queue entry
/// its job leaves or enters, its place among the waiting runs, the job token it no longer needs,
/// the lock it gives back. False when the run (or its workspace) changed meanwhile.
async fn commit(state: &AppState, run: &Run, next: &Run) -> Result<bool> {
    let store = state.store.as_ref();
    let mut writes = vec![Write::Put { item: next.to_item()?, condition: run.unchanged() }];
    if let Some(token) = run.job_token_key().filter(|key| Some(key) != next.job_token_key().as_ref()) {
        writes.push(Write::Delete { key: token, condition: Condition::Always });
    }
    // A job token lives as long as its job's lease: renewed with it, gone the moment it lapses,
    // whether or not the sweep has errored the run yet.
    if let (Some(was), Some(job)) = (&run.job, &next.job) {
        if was.token_hash == job.token_hash && was.lease_until != job.lease_until {
            let key = keys::token(&job.token_hash);
            let ops = vec![UpdateOp::set(TTL, job.lease_until)];
            writes.push(Write::Update { key, ops, condition: Condition::Exists });
        }
    }
    if run.queue_key() != next.queue_key() {
        if let Some(entry) = run.queue_key() {
            writes.push(Write::Delete { key: entry, condition: Condition::Always });
        }
        if next.queued_ms.is_some() {
            writes.push(next.queue_entry()?);
        }
    }
    if !run.status.is_final() && next.status.is_final() {
        let key = keys::run_counts(&run.org_id, &run.workspace_id);
        let ops = vec![UpdateOp::Add(ACTIVE_COUNT.into(), -1)];
        writes.push(Write::Update { key, ops, condition: Condition::Always });
    }
    if run.waiting && !next.waiting {
        writes.push(Write::Delete { key: run.waiting_key(), condition: Condition::Always });
    }
    if next.status == RunStatus::ApplyQueued && run.status != RunStatus::ApplyQueued && next.holds_lock {
        // An apply goes on only under the lock its plan took: one forced open since has let
        // others write the state its plan was made against.
        let workspace = workspaces::reread(store, &run.workspace_id, None).await?;
        writes.push(locks::run_holds_lock(&workspace, &run.id).ok_or(RunsError::LockLost)?);
    }
    if run.holds_lock && !next.holds_lock {
        // A workspace deleted meanwhile has no lock to give back.
        match workspaces::reread(store, &run.workspace_id, None).await {
            Ok(workspace) => writes.extend(locks::release_run_lock(&workspace, &run.id)?),
            Err(AccountsError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match store.transact(writes).await {
        Ok(()) => {}
        Err(e) if e.is_condition_failed() => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    if !run.status.is_final() && next.status.is_final() {
        // An ended run's saved plan is never applied: it goes now, not with the workspace. The
        // record keeps its name, so one whose deletion failed goes with the workspace after all.
        for id in next.sealed.iter().filter_map(|id| ObjectId::parse(id)) {
            if let Err(e) = state.blobs.delete_sealed(&id).await {
                tracing::warn!(run = %next.id, object = %id, error = %e, "an ended run's saved plan is left behind");
            }
        }
    }
    Ok(true)
}

/// Changes the run `run_id` as `change` says of it as read (`None`: nothing to change), tried
/// afresh when it changed meanwhile (the first attempt on `first`, when the caller read it). A
/// run that gives the lock back lets the next one start.
pub async fn change<F>(state: &AppState, run_id: &str, first: Option<Run>, change: F) -> Result<Run>
where
    F: Fn(&Run) -> Result<Option<Run>>,
{
    let (run, next) = stored_change(state, run_id, first, change).await?;
    let Some(next) = next else { return Ok(run) };
    if run.holds_lock && !next.holds_lock {
        advance(state, &next.workspace_id).await?;
    }
    Ok(next)
}

/// [`change`] without starting the next run: the run as read, and as changed if it was.
async fn stored_change<F>(state: &AppState, run_id: &str, first: Option<Run>, change: F) -> Result<(Run, Option<Run>)>
where
    F: Fn(&Run) -> Result<Option<Run>>,
{
    let store = state.store.as_ref();
    let (change, mut first) = (&change, first);
    let changed = retry_on_race(|| {
        let first = first.take();
        async move {
            let run = match first {
                Some(run) => run,
                None => pointer::resolve::<Run>(store, run_id).await?.ok_or(RunsError::NotFound)?,
            };
            let Some(mut next) = change(&run)? else { return Ok::<_, RunsError>(Some((run, None))) };
            let mut committed = commit(state, &run, &next).await;
            if let Err(RunsError::LockLost) = committed {
                next = ended(&run, RunStatus::Errored, Some(LOCK_LOST.into()));
                next.revision = run.revision + 1;
                committed = commit(state, &run, &next).await;
            }
            match committed? {
                true => Ok(Some((run, Some(next)))),
                false => Ok(None),
            }
        }
    })
    .await?;
    changed.ok_or_else(|| RunsError::Conflict("The run kept changing; retry.".into()))
}

/// Why a planned run whose workspace lock was forced open is errored rather than applied.
const LOCK_LOST: &str = "The workspace's lock was forced open after this run's plan, so others may have \
     changed its state since: the plan is not applied. Start a new run.";

/// `run` ended with `status`: its phases that never ran are unreachable, the one running ends
/// as the run does, and it lets go of its job, queue entry, place in line and lock.
pub fn ended(run: &Run, status: RunStatus, error: Option<String>) -> Run {
    let mut next = run.next();
    next.set_status(status);
    next.error = error.or(next.error);
    let phase_status = match status {
        RunStatus::Errored => "errored",
        RunStatus::Canceled | RunStatus::ForceCanceled => "canceled",
        _ => "unreachable",
    };
    for phase in [Phase::Plan, Phase::Apply] {
        let record = next.phase_mut(phase);
        match record.status.as_str() {
            "queued" | "running" => record.set_status(phase_status),
            "pending" => record.set_status("unreachable"),
            _ => {}
        }
    }
    next.job = None;
    next.queued_ms = None;
    next.waiting = false;
    next.holds_lock = false;
    next
}

/// `run` with its `phase` queued for an agent.
fn queued(run: &Run, phase: Phase) -> Run {
    let mut next = run.next();
    next.set_status(match phase {
        Phase::Plan => RunStatus::PlanQueued,
        Phase::Apply => RunStatus::ApplyQueued,
    });
    next.phase_mut(phase).set_status("queued");
    next.queued_ms = Some(Utc::now().timestamp_millis());
    next
}

/// The apply of a planned run queued (confirmed, or auto-applied).
pub fn apply_queued(run: &Run) -> Run {
    queued(run, Phase::Apply)
}

async fn configuration(store: &dyn ItemStore, run: &Run) -> Result<Option<ConfigurationVersion>> {
    Ok(pointer::resolve(store, &run.configuration_version_id).await?)
}

/// Why a run cannot start on its configuration version (`Err`), or whether it can yet. A version
/// whose upload link expired unused never will: the runs behind one waiting for it go on.
fn ready(cv: Option<&ConfigurationVersion>) -> std::result::Result<bool, String> {
    match cv {
        None => Err("Its configuration version was deleted.".into()),
        Some(cv) => match cv.status {
            UploadStatus::Pending if cv.upload_expired(Utc::now().timestamp_millis()) => {
                Err(format!("Its configuration version {} was never uploaded: its upload link expired.", cv.id))
            }
            UploadStatus::Pending => Ok(false),
            UploadStatus::Uploaded => Ok(true),
            UploadStatus::Errored => Err(format!(
                "Its configuration version {} was refused: {}",
                cv.id,
                cv.error.as_deref().unwrap_or("the upload failed")
            )),
        },
    }
}

/// Starts `run` if it can: a speculative one as soon as its configuration has landed; one that
/// needs the lock when its turn comes (see [`advance`]).
pub async fn start(state: &AppState, run: Run) -> Result<Run> {
    if run.status != RunStatus::Pending {
        return Ok(run);
    }
    if !run.speculative {
        advance(state, &run.workspace_id).await?;
        return Ok(pointer::resolve(state.store.as_ref(), &run.id).await?.unwrap_or(run));
    }
    let cv = configuration(state.store.as_ref(), &run).await?;
    let id = run.id.clone();
    change(state, &id, Some(run), |run| {
        if run.status != RunStatus::Pending {
            return Ok(None);
        }
        Ok(match ready(cv.as_ref()) {
            Ok(false) => None,
            Ok(true) => Some(queued(run, Phase::Plan)),
            Err(why) => Some(ended(run, RunStatus::Errored, Some(why))),
        })
    })
    .await
}

/// Starts the workspace's oldest run waiting for its lock, if the lock is free and the run's
/// configuration has landed: the lock, the run's move to `plan_queued`, its place in line and
/// its queue entry in one transaction. A waiting run whose configuration was refused is errored
/// and the next one considered.
pub async fn advance(state: &AppState, workspace_id: &str) -> Result<()> {
    let store = state.store.as_ref();
    // Each pass settles one thing (a state upload, a stale entry, a refused run, a lost race).
    for _ in 0..8 {
        let mut workspace = workspaces::reread(store, workspace_id, None).await?;
        if workspace.pending_state.is_some() && workspace.locked_by.is_none() {
            // What landed under the lock before is settled before a run takes it (as a lock does).
            state.lock_hooks.before_lock(state, workspace_id).await.map_err(|e| {
                RunsError::Conflict(format!("The workspace's last state could not be settled ({e}); retry."))
            })?;
            workspace = workspaces::reread(store, workspace_id, None).await?;
        }
        if workspace.locked_by.is_some() {
            return Ok(());
        }
        let head = store.query(keys::runs_waiting(&workspace.org_id, &workspace.id).limit(1)).await?;
        let Some(entry) = head.items.first() else { return Ok(()) };
        let waiting: WaitingEntry = entry.parse()?;
        let run: Option<Run> = pointer::resolve(store, &waiting.run_id).await?;
        let Some(run) = run.filter(|run| run.waiting && run.status == RunStatus::Pending) else {
            // Left by a run that no longer waits: nothing else removes it.
            store.delete(&entry.key, Condition::Always).await?;
            continue;
        };
        let cv = configuration(store, &run).await?;
        match ready(cv.as_ref()) {
            Ok(false) => return Ok(()),
            Err(why) => {
                let id = run.id.clone();
                // A waiting run holds no lock: nothing more to start but what this loop reads next.
                stored_change(state, &id, Some(run), |run| {
                    Ok((run.status == RunStatus::Pending).then(|| ended(run, RunStatus::Errored, Some(why.clone()))))
                })
                .await?;
                continue;
            }
            Ok(true) => {}
        }
        let Some((_, lock)) = locks::lock_for_run(&workspace, &run.id)? else { return Ok(()) };
        let mut next = queued(&run, Phase::Plan);
        next.waiting = false;
        next.holds_lock = true;
        let writes = vec![
            lock,
            Write::Put { item: next.to_item()?, condition: run.unchanged() },
            Write::Delete { key: run.waiting_key(), condition: Condition::Exists },
            next.queue_entry()?,
        ];
        match store.transact(writes).await {
            Ok(()) => return Ok(()),
            Err(e) if e.is_condition_failed() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The queue a workspace's runs go to: its agent pool's, or Hangar's own runners' in `remote`
/// execution mode; none in `local` mode, where Terraform runs where it is called.
pub fn queue_of(workspace: &Workspace) -> Option<String> {
    match workspace.execution_mode.as_str() {
        "agent" => workspace.agent_pool_id.clone(),
        "remote" => Some(REMOTE_QUEUE.to_owned()),
        _ => None,
    }
}

/// Stores a new run with its place in line (when it needs the lock) and, on a configuration
/// version still pending, its name among the runs the upload starts; then starts it if it can.
pub async fn record(state: &AppState, run: Run) -> Result<Run> {
    let store = state.store.as_ref();
    let run_ref = &run;
    let recorded = retry_on_race(|| async move {
        let cv: ConfigurationVersion =
            pointer::resolve(store, &run_ref.configuration_version_id).await?.ok_or_else(|| {
                RunsError::invalid(Field::Relationship("configuration-version"), "no such configuration version")
            })?;
        let mut transaction = Transaction::new();
        transaction.add(Write::Put { item: run_ref.to_item()?, condition: Condition::NotExists });
        transaction.add(pointer::create(&run_ref.id, &run_ref.key())?);
        // Counted, and bounded: the workspace's runs not over yet.
        let room = transaction.add(Write::Update {
            key: keys::run_counts(&run_ref.org_id, &run_ref.workspace_id),
            ops: vec![UpdateOp::Add(RUN_COUNT.into(), 1), UpdateOp::Add(ACTIVE_COUNT.into(), 1)],
            condition: Condition::Below(ACTIVE_COUNT.into(), MAX_ACTIVE_RUNS),
        });
        let mut writes = Vec::new();
        if run_ref.waiting {
            writes.push(WaitingEntry::write(run_ref)?);
        }
        if cv.status == UploadStatus::Pending {
            if cv.awaiting.len() >= MAX_AWAITING {
                return Err(RunsError::Conflict(format!(
                    "Configuration version {} already has {MAX_AWAITING} runs waiting for its upload.",
                    cv.id
                )));
            }
            let mut next = cv.next();
            next.awaiting.push(run_ref.id.clone());
            writes.push(Write::Put { item: next.to_item()?, condition: cv.unchanged() });
        } else {
            // Landed meanwhile: the run starts below.
            writes.push(Write::Check { key: cv.key(), condition: cv.unchanged() });
        }
        transaction.extend(writes);
        match transaction.commit(store).await {
            Ok(()) => Ok(Some(())),
            Err(e) if e.failed_on(room) => Err(RunsError::Conflict(format!(
                "The workspace has {MAX_ACTIVE_RUNS} runs not over yet, the most it holds: wait for them, or \
                 cancel or discard some."
            ))),
            Err(e) if e.is_condition_failed() => Ok(None),
            Err(e) => Err(RunsError::from(e)),
        }
    })
    .await?;
    recorded.ok_or_else(|| RunsError::Conflict("The configuration version kept changing; retry.".into()))?;
    // The run is stored: a start that fails now leaves it pending, to start on its next read,
    // rather than answering its creation with an error.
    let id = run.id.clone();
    match start(state, run.clone()).await {
        Ok(run) => Ok(run),
        Err(e) => {
            tracing::warn!(run = %id, error = %e, "a new run did not start; it starts when read");
            Ok(run)
        }
    }
}

/// A job an agent claimed: the run as it now stands, and the job token's secret (shown once).
pub struct Claimed {
    pub run: Run,
    pub phase: Phase,
    pub token: String,
    pub report_in: u64,
}

/// Claims the oldest job of the agent's queue for the agent `agent_id` (registered with the
/// caller's token), if one waits.
pub async fn claim(state: &AppState, queue: &str, grant: &AgentGrant, agent_id: &str) -> Result<Option<Claimed>> {
    let store = state.store.as_ref();
    let head = store.query(keys::job_queue(queue).limit(CLAIM_WINDOW)).await?.items;
    if head.is_empty() {
        return Ok(None);
    }
    let first = rand::thread_rng().gen_range(0..head.len());
    let agent_key = keys::agent(&grant.org_id, &grant.pool_id, agent_id);
    for entry_item in head.iter().cycle().skip(first).take(head.len()) {
        let entry: QueueEntry = entry_item.parse()?;
        let run: Option<Run> = store.get(&entry.run_key).await?.map(|item| item.parse()).transpose()?;
        // An entry is written and removed with its run's own writes: one its run does not name
        // (the run gone with a workspace whose deletion was cut short) names nothing; it goes.
        let Some(run) = run.filter(|run| run.queue_key().as_ref() == Some(&entry_item.key)) else {
            store.delete(&entry_item.key, Condition::Exists).await.map(drop).or_else(ignore_condition)?;
            continue;
        };
        let queued = matches!(run.status, RunStatus::PlanQueued | RunStatus::ApplyQueued);
        // A pool's queue holds its organization's runs alone; the check costs nothing.
        let own = queue == REMOTE_QUEUE || run.org_id == grant.org_id;
        if !queued || !own {
            continue;
        }
        let phase = run.queued_phase();
        let token = new_secret();
        let lease_until = Utc::now().timestamp() + lease_secs(state);
        let mut next = run.next();
        next.set_status(match phase {
            Phase::Plan => RunStatus::Planning,
            Phase::Apply => RunStatus::Applying,
        });
        next.phase_mut(phase).set_status("running");
        next.queued_ms = None;
        next.job = Some(Job {
            phase,
            agent_id: agent_id.to_owned(),
            token_hash: hash_secret(&token),
            lease_until,
            claimed_at: crate::api::timestamp(Utc::now()),
            cancel: false,
        });
        let writes = vec![
            Write::Delete { key: entry_item.key.clone(), condition: Condition::Exists },
            Write::Put { item: next.to_item()?, condition: run.unchanged() },
            Write::Put { item: run.job_token(phase, agent_id, &token, lease_until)?, condition: Condition::NotExists },
        ];
        let mut transaction = Transaction::new();
        for write in writes {
            transaction.add(write);
        }
        // Only the token that registered the agent claims for it.
        let agent_check = transaction.add(Write::Check {
            key: agent_key.clone(),
            condition: Condition::equals("token_id", grant.token_id.clone()),
        });
        match transaction.commit(store).await {
            Ok(()) => return Ok(Some(Claimed { run: next, phase, token, report_in: report_in(state) })),
            Err(e) if e.failed_on(agent_check) => return Err(RunsError::NotFound),
            // Another agent took it: the next entry.
            Err(e) if e.is_condition_failed() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

fn ignore_condition(e: crate::store::StoreError) -> std::result::Result<(), crate::store::StoreError> {
    if e.is_condition_failed() {
        Ok(())
    } else {
        Err(e)
    }
}

/// The run of a job token, if the job is still the run's: else the job is over (it ended, was
/// force-canceled, or its lease ran out).
pub async fn job_run(store: &dyn ItemStore, grant: &JobGrant) -> Result<Run> {
    let run: Run = pointer::resolve(store, &grant.run_id).await?.ok_or(RunsError::NotFound)?;
    check_job(&run, grant)?;
    Ok(run)
}

/// Checks that the job of `grant` is still the run's, and its lease alive.
pub fn check_job(run: &Run, grant: &JobGrant) -> Result<()> {
    let holds = run.job.as_ref().is_some_and(|job| job.agent_id == grant.agent_id && job.phase.as_str() == grant.phase);
    if !holds || run.workspace_id != grant.workspace_id {
        return Err(RunsError::JobOver("This job is no longer the agent's: it ended, or its lease ran out.".into()));
    }
    if lease_lost(run, Utc::now().timestamp()) {
        return Err(RunsError::JobOver("The job's lease ran out: the agent stopped reporting for too long.".into()));
    }
    Ok(())
}

/// Whether the job's lease has run out at `now`: at `lease_until` itself, as its job token's TTL
/// has (the store expires an item whose TTL is not after now).
fn lease_lost(run: &Run, now: i64) -> bool {
    run.job.as_ref().is_some_and(|job| job.lease_until <= now)
}

/// What an agent's report on its job answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Beat {
    /// Interrupt Terraform: a cancel was asked for.
    pub cancel: bool,
    /// Seconds until the agent should report again.
    pub report_in: u64,
}

/// Renews the lease of the job, and says whether it is to be canceled.
pub async fn renew(state: &AppState, grant: &JobGrant) -> Result<Beat> {
    let lease_until = Utc::now().timestamp() + lease_secs(state);
    let run = change(state, &grant.run_id, None, |run| {
        check_job(run, grant)?;
        let mut next = run.next();
        if let Some(job) = next.job.as_mut() {
            job.lease_until = lease_until;
        }
        Ok(Some(next))
    })
    .await?;
    Ok(Beat { cancel: run.job.is_some_and(|job| job.cancel), report_in: report_in(state) })
}

/// How a job ended, as its agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Finished,
    Errored,
    Canceled,
}

/// What an agent reports at the end of its job.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: JobStatus,
    pub has_changes: bool,
    pub additions: u64,
    pub changes: u64,
    pub destructions: u64,
    pub error: Option<String>,
}

/// The longest error message an agent's report keeps.
pub const MAX_ERROR: usize = 4096;

/// An agent's error message, cut to [`MAX_ERROR`] bytes on a character boundary, without control
/// characters but line breaks.
fn bounded(error: &str) -> String {
    let mut kept = String::new();
    for c in error.chars().filter(|c| *c == '\n' || !(c.is_control() || crate::names::deceptive(*c))) {
        if kept.len() + c.len_utf8() > MAX_ERROR {
            break;
        }
        kept.push(c);
    }
    kept
}

/// Ends the job as its agent reports, and moves the run on: a plan with changes to the apply
/// (queued at once with auto-apply, else waiting for a confirmation), anything else to its end.
pub async fn finish(state: &AppState, grant: &JobGrant, outcome: Outcome) -> Result<Run> {
    let error = outcome.error.as_deref().map(bounded);
    change(state, &grant.run_id, None, |run| {
        check_job(run, grant)?;
        let phase = run.job.as_ref().map_or(Phase::Plan, |job| job.phase);
        let mut next = match outcome.status {
            JobStatus::Errored => ended(run, RunStatus::Errored, error.clone()),
            JobStatus::Canceled => ended(run, RunStatus::Canceled, None),
            JobStatus::Finished => {
                let mut next = run.next();
                next.job = None;
                let record = next.phase_mut(phase);
                record.has_changes = outcome.has_changes;
                record.additions = outcome.additions;
                record.changes = outcome.changes;
                record.destructions = outcome.destructions;
                record.set_status("finished");
                match phase {
                    Phase::Apply => ended(&next, RunStatus::Applied, None),
                    Phase::Plan if run.speculative || !outcome.has_changes => {
                        ended(&next, RunStatus::PlannedAndFinished, None)
                    }
                    // A cancel asked for while the plan ran ends the run there, whatever it found.
                    Phase::Plan if run.job.as_ref().is_some_and(|job| job.cancel) => {
                        ended(&next, RunStatus::Canceled, None)
                    }
                    Phase::Plan if run.operation.auto_apply => queued(&next, Phase::Apply),
                    Phase::Plan => {
                        next.set_status(RunStatus::Planned);
                        next
                    }
                }
            }
        };
        // `ended` and `queued` start from a run one revision on: the write stays conditioned on
        // the run as read.
        next.revision = run.revision + 1;
        Ok(Some(next))
    })
    .await
}

/// Errors a run whose job's lease ran out: its agent stopped reporting.
pub async fn expire(state: &AppState, run: Run) -> Result<Run> {
    let timeout = humantime::format_duration(state.config.agent_ping_timeout);
    let why = format!(
        "The agent running this run's {} stopped reporting for longer than {timeout} \
         (HANGAR_AGENT_PING_TIMEOUT): the run is errored and the workspace unlocked.",
        run.queued_phase().as_str()
    );
    let id = run.id.clone();
    change(state, &id, Some(run), |run| {
        Ok(lease_lost(run, Utc::now().timestamp()).then(|| ended(run, RunStatus::Errored, Some(why.clone()))))
    })
    .await
}

/// `run` as a reader should see it: a lease that ran out errors the run, and a pending run that
/// can start is started (so a run never waits on the schedule alone).
/// A read never fails for what it tried on the side: the run as read is answered then.
pub async fn refreshed(state: &AppState, run: Run) -> Result<Run> {
    let moved = if lease_lost(&run, Utc::now().timestamp()) {
        expire(state, run.clone()).await
    } else if run.status == RunStatus::Pending {
        start(state, run.clone()).await
    } else {
        return Ok(run);
    };
    match moved {
        Ok(moved) => Ok(moved),
        Err(e @ RunsError::Store(_)) => Err(e),
        Err(e) => {
            tracing::warn!(run = %run.id, error = %e, "a read could not move the run on; answered as read");
            Ok(run)
        }
    }
}

/// The scheduled job's share: runs whose agent stopped reporting past their lease are errored.
pub async fn sweep(state: &AppState) -> Result<usize> {
    let now = Utc::now().timestamp();
    let mut errored = 0;
    for item in schedule::due(state.store.as_ref(), keys::JOB_LEASES, now, SWEEP_LIMIT).await? {
        let run: Run = item.parse()?;
        if lease_lost(&run, now) {
            let id = run.id.clone();
            // One run that cannot be ended now holds up none of the others.
            match expire(state, run).await {
                Ok(ended) => errored += usize::from(ended.status == RunStatus::Errored),
                Err(e) => {
                    tracing::warn!(run = %id, error = %e, "a run whose agent went silent is left for the next sweep")
                }
            }
        }
    }
    Ok(errored)
}
