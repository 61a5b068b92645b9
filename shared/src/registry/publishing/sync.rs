//! The work queue the scheduled job runs: a *sync* reads a tag-based module's tags and adds a
//! version for each semantic-version tag it lacks; a *fetch* downloads one version's archive at
//! a tag or commit and hands it to ingest. A branch-based module's versions are queued here too.
//!
//! Every organization shares the job, so none may hold it up for the others:
//! - Work waits in its organization's queue, ordered by when it is due, and an organization with
//!   work has a *turn* in a schedule of turns. A run takes the organizations whose turn is due
//!   and serves them round-robin, one piece each in turn, an equal share of the run at most; a
//!   served organization's turn moves behind those still waiting.
//! - Work that fails is retried after a backoff (30 s, doubling up to an hour), `MAX_ATTEMPTS`
//!   times in all. Its reason shows in the module's `vcs-repo.error` from the first failure; after
//!   the last, the module is `setup_failed` (a sync) or the version failed (a fetch).
//! - A run does at most `RunBounds::max_items` pieces, starts none after its deadline, and gives
//!   each at most `ITEM_TIME`. A piece is claimed with a conditional write first, so overlapping
//!   runs never do it twice.
//!
//! Publishing records a sync as one write, without the organization's turn; such syncs wait in an
//! inbox, which each run first moves to their organizations' queues.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::monorepo::tag_version;
use crate::accounts::oauth;
use crate::api::{timestamp, Field};
use crate::blobs::ObjectId;
use crate::registry::error::{RegistryError, Result};
use crate::registry::ingest;
use crate::registry::modules::{load, modify, precedence, statuses, Module};
use crate::registry::versions::{self, AcceptedVersion, CreatedVersion, ModuleVersion, Taken};
use crate::state::AppState;
use crate::store::{keys, schedule, Condition, Index, Item, ItemStore, Key, Query, UpdateOp, Write};
use crate::vcs::{self, RepoId, ServiceProvider, VcsError};

/// Attempts at one piece of work before it is given up, its module or version failed.
pub const MAX_ATTEMPTS: u32 = 8;
/// The wait after a first failure (seconds); it doubles after each further one.
const FIRST_BACKOFF: i64 = 30;
/// The longest wait between attempts (seconds).
const MAX_BACKOFF: i64 = 3600;
/// How long one piece of work may take before it counts as failed.
const ITEM_TIME: Duration = Duration::from_secs(120);
/// How long a claim holds (seconds): past it, a run that died mid-piece has its work taken up
/// again. Longer than `ITEM_TIME`, so a piece still running is never taken twice.
const LEASE: i64 = 600;
/// New syncs a run moves from the inbox to their organizations' queues.
const ADMITTED_PER_RUN: usize = 500;
/// How long a turn whose queue looks empty stays before it is removed (seconds): the queue is
/// read through an index, which may not show work recorded a moment ago.
const IDLE_TURN: i64 = 300;

/// What one run may do: the scheduled job's share of a Lambda invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBounds {
    /// Pieces of work started, across all organizations.
    pub max_items: usize,
    /// No piece is started once this much time has passed; what is left waits for the next run.
    pub deadline: Duration,
}

impl Default for RunBounds {
    /// 100 pieces and 60 s: a run (one a minute) ends within 3 minutes with its last piece.
    fn default() -> Self {
        Self { max_items: 100, deadline: Duration::from_secs(60) }
    }
}

/// Work waiting for the scheduled job.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Work {
    /// Create a version for every semantic-version tag the module lacks.
    Sync { module: Key, org_id: String },
    /// Download a version's archive at `git_ref` and ingest it as `object`.
    Fetch { module: Key, org_id: String, object: String, git_ref: String },
}

impl Work {
    fn module(&self) -> &Key {
        match self {
            Work::Sync { module, .. } | Work::Fetch { module, .. } => module,
        }
    }

    fn org_id(&self) -> &str {
        match self {
            Work::Sync { org_id, .. } | Work::Fetch { org_id, .. } => org_id,
        }
    }

    /// What the work does, as a reason for its failure begins.
    fn what(&self) -> String {
        match self {
            Work::Sync { .. } => "reading the repository's tags".to_owned(),
            Work::Fetch { git_ref, .. } => format!("fetching the repository archive at {git_ref}"),
        }
    }
}

/// A piece of work as stored, with its place in its organization's queue and its attempts.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Task {
    /// What makes its queue position unique (absent from work recorded before queues existed).
    #[serde(default)]
    id: String,
    #[serde(flatten)]
    work: Work,
    /// Runs that claimed it so far.
    #[serde(default)]
    attempts: u32,
    /// When it is next due (unix seconds), as its queue position says.
    #[serde(default)]
    not_before: i64,
    /// The reason its last failure left on the module, taken off again once it succeeds.
    #[serde(default)]
    reason: Option<String>,
}

impl Task {
    fn new(id: &str, work: Work) -> Self {
        Self { id: id.to_owned(), work, attempts: 0, not_before: unix_now(), reason: None }
    }

    /// The stored item under `key`, in its organization's queue.
    fn queued(&self, key: Key) -> Result<Item> {
        let queue = keys::vcs_work_queue(self.work.org_id());
        let item = Item::from_value(key, self)?;
        Ok(item.with_index(Index::Gsi1, queue, schedule::sort_key(self.not_before, &self.id)))
    }
}

/// An organization's turn: due when its earliest work is.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Turn {
    org_id: String,
    not_before: i64,
    /// New on every write that records work, so that a run moves or ends the turn only if no
    /// work was recorded since it read it.
    stamp: String,
    /// Set when a run found the queue empty; a turn still idle at the next look is removed.
    #[serde(default)]
    idle: bool,
}

/// The write that gives `org_id` a turn due `at`, recorded with its new work.
fn turn_at(org_id: &str, at: i64) -> Result<Write> {
    let turn = Turn { org_id: org_id.to_owned(), not_before: at, stamp: crate::ids::random_token(16), idle: false };
    let item = Item::from_value(keys::vcs_work_turn(org_id), &turn)?;
    let item = item.with_index(Index::Gsi1, keys::VCS_WORK_TURNS, schedule::sort_key(turn.not_before, org_id));
    Ok(Write::Put { item, condition: Condition::Always })
}

fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The write that queues a read of the module's tags (on publishing, or switching to tags). It
/// lands in the inbox: one write cannot also give the organization its turn.
pub(super) fn sync_work(module: &Module) -> Result<Write> {
    let id = crate::ids::random_token(20);
    let task = Task::new(&id, Work::Sync { module: module.key(), org_id: module.org_id.clone() });
    let item = Item::from_value(keys::vcs_work(&id), &task)?;
    let item = item.with_index(Index::Gsi1, keys::VCS_WORK_INBOX, schedule::sort_key(task.not_before, &id));
    Ok(Write::Put { item, condition: Condition::NotExists })
}

/// The write that queues a resync of the module: a sync under an id of the module's own, so that
/// it fails (at its index in the caller's transaction) while one already waits.
pub(super) fn resync_work(module: &Module) -> Result<Write> {
    let id = format!("resync-{}", module.id);
    let task = Task::new(&id, Work::Sync { module: module.key(), org_id: module.org_id.clone() });
    let item = Item::from_value(keys::vcs_work(&id), &task)?;
    let item = item.with_index(Index::Gsi1, keys::VCS_WORK_INBOX, schedule::sort_key(task.not_before, &id));
    Ok(Write::Put { item, condition: Condition::NotExists })
}

/// Adds `version` to the module, `pending` until the job has fetched its archive at `git_ref`,
/// with the work that fetches it and the organization's turn, in one transaction. A version the
/// module has (or one equal to it but for build metadata) is `Taken`: nothing is added.
pub(super) async fn add_fetched_version(
    store: &dyn ItemStore,
    module: &Module,
    version: &semver::Version,
    git_ref: &str,
    commit_sha: Option<String>,
) -> Result<std::result::Result<ModuleVersion, Taken>> {
    let object = ObjectId::generate();
    let source = module.vcs_repo.as_ref().map_or("vcs".into(), |r| r.service_provider.clone());
    let stored = ModuleVersion::pending(module, version, &source, commit_sha, &object);
    let extra = fetch_writes(module, &object, git_ref)?;
    Ok(versions::insert_pending(store, module, &stored, extra).await?.map(|()| stored))
}

/// The writes that queue a fetch of the archive at `git_ref` as `object`, and the
/// organization's turn, to commit with the version that waits for it.
pub(super) fn fetch_writes(module: &Module, object: &ObjectId, git_ref: &str) -> Result<Vec<Write>> {
    let fetch = Work::Fetch {
        module: module.key(),
        org_id: module.org_id.clone(),
        object: object.to_string(),
        git_ref: git_ref.to_owned(),
    };
    let task = Task::new(&crate::ids::random_token(20), fetch);
    Ok(vec![
        Write::Put { item: task.queued(keys::vcs_work(&task.id))?, condition: Condition::NotExists },
        turn_at(&module.org_id, unix_now())?,
    ])
}

pub(super) fn connection_of(connection: oauth::VcsConnection) -> vcs::Connection {
    vcs::Connection {
        provider: ServiceProvider::parse(&connection.service_provider).unwrap_or(ServiceProvider::GitHub),
        api_url: connection.api_url,
        http_url: connection.http_url,
        token: connection.token,
    }
}

/// The provider client and repository of a VCS module.
async fn repository_of(state: &AppState, module: &Module) -> Result<(Box<dyn vcs::VcsProvider>, RepoId)> {
    let repo = module.vcs_repo.as_ref().ok_or(RegistryError::NotFound)?;
    let connection = oauth::token_for(state, &module.org_id, &repo.oauth_token_id).await?.ok_or_else(|| {
        RegistryError::Conflict(format!("the module's OAuth token {} no longer exists", repo.oauth_token_id))
    })?;
    let kind = ServiceProvider::parse(&connection.service_provider).unwrap_or(ServiceProvider::GitHub);
    let id = RepoId::parse(&kind, &repo.identifier).map_err(RegistryError::Conflict)?;
    Ok((vcs::provider(connection_of(connection), state.vcs.clone()), id))
}

/// Runs the VCS work that is due, within `bounds`; returns how many pieces finished.
pub async fn run_pending(state: &AppState, bounds: RunBounds) -> Result<usize> {
    run_pending_at(state, unix_now(), bounds).await
}

/// The same run as if the time were `now` (unix seconds): what is due by then is done, and what
/// fails is retried after `now` plus its backoff, so a test moves this clock instead of waiting.
pub async fn run_pending_at(state: &AppState, now: i64, bounds: RunBounds) -> Result<usize> {
    let deadline = tokio::time::Instant::now() + bounds.deadline;
    let store = state.store.as_ref();
    admit(store, now).await?;
    let turns = schedule::due(store, keys::VCS_WORK_TURNS, now, bounds.max_items).await?;
    if turns.is_empty() {
        return Ok(0);
    }
    let share = bounds.max_items.div_ceil(turns.len());
    let mut queues = Vec::with_capacity(turns.len());
    for turn in &turns {
        let turn: Turn = turn.parse()?;
        let due = schedule::due(store, &keys::vcs_work_queue(&turn.org_id), now, share).await?;
        queues.push(Queue { turn, due: VecDeque::from(due), served: false, retry_at: None });
    }
    let (mut started, mut finished) = (0, 0);
    'rounds: for _ in 0..share {
        for queue in &mut queues {
            if started == bounds.max_items || tokio::time::Instant::now() >= deadline {
                break 'rounds;
            }
            let Some(item) = queue.due.pop_front() else { continue };
            (started, queue.served) = (started + 1, true);
            match attempt(state, item, now).await {
                Ok(Attempt::Finished) => finished += 1,
                Ok(Attempt::Retried(at)) => queue.retry_at = Some(queue.retry_at.map_or(at, |soonest| soonest.min(at))),
                Ok(Attempt::GaveUp | Attempt::NotClaimed) => {}
                Err(e) => tracing::warn!(org = %queue.turn.org_id, error = %e, "VCS work not run; retried next run"),
            }
        }
    }
    for queue in &queues {
        if let Err(e) = pass_turn(store, queue, now).await {
            tracing::warn!(org = %queue.turn.org_id, error = %e, "VCS turn not moved; it comes round again");
        }
    }
    Ok(finished)
}

/// One organization's part of a run.
struct Queue {
    turn: Turn,
    due: VecDeque<Item>,
    /// Whether the run took any of its work.
    served: bool,
    /// The soonest retry this run scheduled: the index the queue is read through may not show it yet.
    retry_at: Option<i64>,
}

enum Attempt {
    Finished,
    /// Failed, and due again at this time.
    Retried(i64),
    /// Failed for the last time.
    GaveUp,
    /// Another run holds it, or it is gone.
    NotClaimed,
}

/// Moves the inbox's syncs to their organizations' queues, due when they were recorded, and
/// gives each of those organizations a turn due `now`.
async fn admit(store: &dyn ItemStore, now: i64) -> Result<()> {
    let inbox = store.query(Query::index(Index::Gsi1, keys::VCS_WORK_INBOX, "").limit(ADMITTED_PER_RUN)).await?;
    let mut turned = HashSet::new();
    for item in inbox.items {
        let Some(mut task) = readable(store, &item).await? else { continue };
        if task.id.is_empty() {
            task.id = crate::ids::random_token(20);
        }
        let still_in_inbox = Condition::equals(Index::Gsi1.key_attrs().0, keys::VCS_WORK_INBOX);
        let mut writes = vec![Write::Put { item: task.queued(item.key.clone())?, condition: still_in_inbox }];
        if turned.insert(task.work.org_id().to_owned()) {
            writes.push(turn_at(task.work.org_id(), now)?);
        }
        match store.transact(writes).await {
            // Another run moved it first.
            Err(e) if e.failed_write() == Some(0) => {}
            other => other?,
        }
    }
    Ok(())
}

/// Claims a due piece of work, runs it, and then deletes it, or schedules its retry, or gives
/// it up after its last attempt.
async fn attempt(state: &AppState, item: Item, now: i64) -> Result<Attempt> {
    let store = state.store.as_ref();
    let Some(mut task) = readable(store, &item).await? else { return Ok(Attempt::NotClaimed) };
    let unclaimed = Condition::Exists.and(Condition::Below("attempts".into(), i64::from(task.attempts) + 1));
    task.attempts += 1;
    let lease = now + LEASE;
    let claim = vec![
        UpdateOp::set("attempts", task.attempts),
        UpdateOp::set("not_before", lease),
        schedule::reschedule(lease, &task.id),
    ];
    match store.update(&item.key, claim, unclaimed).await {
        Err(e) if e.is_condition_failed() => return Ok(Attempt::NotClaimed),
        other => drop(other?),
    }
    let failure = match tokio::time::timeout(ITEM_TIME, run(state, &task.work)).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => {
            tracing::warn!(org = %task.work.org_id(), attempt = task.attempts, error = %e, "VCS work failed");
            Some(reason_of(&e))
        }
        Err(_) => Some(format!("it did not finish within {} seconds", ITEM_TIME.as_secs())),
    };
    let Some(reason) = failure else {
        store.delete(&item.key, Condition::Always).await?;
        if let Some(left) = &task.reason {
            // The work is done; a reason left showing is only stale.
            if let Err(e) = take_reason_back(store, task.work.module(), left).await {
                tracing::warn!(org = %task.work.org_id(), error = %e, "a VCS failure's reason left on its module");
            }
        }
        return Ok(Attempt::Finished);
    };
    if task.attempts >= MAX_ATTEMPTS {
        give_up(state, &task, &reason).await?;
        store.delete(&item.key, Condition::Always).await?;
        return Ok(Attempt::GaveUp);
    }
    let at = now + backoff(task.attempts);
    let when = chrono::DateTime::from_timestamp(at, 0).map(timestamp).unwrap_or_default();
    let shown =
        format!("{}: {reason} (attempt {} of {MAX_ATTEMPTS}; retried from {when})", task.work.what(), task.attempts);
    show_reason(store, task.work.module(), Some(&shown), None).await?;
    let retry =
        vec![UpdateOp::set("not_before", at), UpdateOp::set("reason", shown), schedule::reschedule(at, &task.id)];
    let ours = Condition::Exists.and(Condition::Below("attempts".into(), i64::from(task.attempts) + 1));
    match store.update(&item.key, retry, ours).await {
        Err(e) if e.is_condition_failed() => {}
        other => drop(other?),
    }
    Ok(Attempt::Retried(at))
}

/// The work an item holds; an item that holds none this version reads is dropped (and logged)
/// rather than kept at the head of its queue for good.
async fn readable(store: &dyn ItemStore, item: &Item) -> Result<Option<Task>> {
    match item.parse() {
        Ok(task) => Ok(Some(task)),
        Err(e) => {
            tracing::error!(error = %e, key = ?item.key, "unreadable VCS work dropped");
            store.delete(&item.key, Condition::Always).await?;
            Ok(None)
        }
    }
}

/// The wait after the `attempt`th failure: 30 s, 60 s, 2 min, … up to an hour.
fn backoff(attempt: u32) -> i64 {
    (FIRST_BACKOFF << attempt.saturating_sub(1).min(16)).min(MAX_BACKOFF)
}

/// Why work failed, as the module's owners may read it: the provider's answer, or a conflict
/// Hangar found; anything else is Hangar's own failure, whose cause stays in the log.
fn reason_of(e: &RegistryError) -> String {
    match e {
        RegistryError::Vcs(e) => e.to_string(),
        RegistryError::Conflict(detail) => detail.clone(),
        _ => "Hangar failed to do it (the cause is in its log)".to_owned(),
    }
}

/// After the last attempt: a sync leaves its module `setup_failed`, a fetch fails its version;
/// either way the reason stays in the module's `vcs-repo.error`.
async fn give_up(state: &AppState, task: &Task, reason: &str) -> Result<()> {
    let store = state.store.as_ref();
    let shown = format!("{}: {reason} (gave up after {MAX_ATTEMPTS} attempts)", task.work.what());
    match &task.work {
        Work::Sync { module, .. } => show_reason(store, module, Some(&shown), Some("setup_failed")).await,
        Work::Fetch { module, object, .. } => {
            if let Some(object) = ObjectId::parse(object) {
                ingest::fail(state, &object, &shown).await?;
            }
            show_reason(store, module, Some(&shown), None).await
        }
    }
}

/// Takes the reason a failure left on the module off again, unless something has replaced it.
async fn take_reason_back(store: &dyn ItemStore, module_key: &Key, left: &str) -> Result<()> {
    let changed = modify(store, module_key, |module| {
        if let Some(repo) = module.vcs_repo.as_mut().filter(|r| r.setup_error.as_deref() == Some(left)) {
            repo.setup_error = None;
        }
        Ok((Vec::new(), ()))
    });
    match changed.await {
        Err(RegistryError::NotFound) | Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sets the module's `vcs-repo.error` and, if given, its status. A module deleted meanwhile has
/// nothing to show.
async fn show_reason(
    store: &dyn ItemStore,
    module_key: &Key,
    reason: Option<&str>,
    status: Option<&str>,
) -> Result<()> {
    let changed = modify(store, module_key, |module| {
        if let Some(status) = status {
            module.status = status.to_owned();
        }
        if let Some(repo) = module.vcs_repo.as_mut() {
            repo.setup_error = reason.map(str::to_owned);
        }
        Ok((Vec::new(), ()))
    });
    match changed.await {
        Err(RegistryError::NotFound) | Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Moves an organization's turn to when its next work is due; one that was served goes behind
/// those still waiting. A turn whose queue is empty is marked idle, and removed if it still is
/// at the next look. Every change is conditional on the turn's stamp: work recorded since the
/// run read the turn gave it a turn due at once, which stands.
async fn pass_turn(store: &dyn ItemStore, queue: &Queue, now: i64) -> Result<()> {
    let Queue { turn, served, retry_at, .. } = queue;
    let first = store.query(Query::index(Index::Gsi1, keys::vcs_work_queue(&turn.org_id), "").limit(1)).await?;
    let queued = match first.items.first() {
        Some(item) => Some(item.parse::<Task>()?.not_before),
        None => None,
    };
    let next = match (queued, *retry_at) {
        (Some(queued), Some(retry)) => Some(queued.min(retry)),
        (queued, retry) => queued.or(retry),
    };
    let key = keys::vcs_work_turn(&turn.org_id);
    let unchanged = Condition::equals("stamp", turn.stamp.clone());
    let (at, idle) = match next {
        None if turn.idle => {
            return match store.delete(&key, unchanged).await {
                Err(e) if e.is_condition_failed() => Ok(()),
                other => other.map(drop).map_err(Into::into),
            };
        }
        None => (now + IDLE_TURN, true),
        Some(at) if *served => (at.max(now + 1), false),
        Some(at) => (at, false),
    };
    let moved =
        vec![UpdateOp::set("not_before", at), UpdateOp::set("idle", idle), schedule::reschedule(at, &turn.org_id)];
    match store.update(&key, moved, unchanged).await {
        Err(e) if e.is_condition_failed() => Ok(()),
        other => other.map(drop).map_err(Into::into),
    }
}

async fn run(state: &AppState, work: &Work) -> Result<()> {
    match work {
        Work::Sync { module, .. } => sync(state, module).await,
        Work::Fetch { object, git_ref, module, .. } => fetch(state, module, object, git_ref).await,
    }
}

/// Reads the repository's tags (those with the module's prefix); settles the module's status
/// when there is nothing to publish. For a branch-based module (a resync), reads its branch.
async fn sync(state: &AppState, module_key: &Key) -> Result<()> {
    let store = state.store.as_ref();
    let module = match load(store, module_key).await {
        Err(RegistryError::NotFound) => return Ok(()),
        other => other?,
    };
    let (provider, repo) = repository_of(state, &module).await?;
    let Some(vcs_repo) = module.vcs_repo.as_ref() else { return Ok(()) };
    if module.publishes_from_branch() {
        return match provider.branch_head(&repo, &vcs_repo.branch).await {
            Ok(_) => show_reason(store, module_key, None, None).await,
            Err(e @ VcsError::Upstream(_)) => Err(e.into()),
            Err(unreadable) => {
                let reason = format!("branch {}: {unreadable}", vcs_repo.branch);
                show_reason(store, module_key, Some(&reason), Some("setup_failed")).await
            }
        };
    }
    let prefix = vcs_repo.tag_prefix.as_str();
    let tags = match provider.tags(&repo).await {
        Ok(tags) => tags,
        Err(e @ VcsError::Upstream(_)) => return Err(e.into()),
        Err(unreadable) => {
            let reason = unreadable.to_string();
            return show_reason(store, module_key, Some(&reason), Some("setup_failed")).await;
        }
    };
    let versions: Vec<(semver::Version, String)> =
        tags.iter().filter_map(|t| Some((tag_version(&t.name, prefix)?, t.name.clone()))).collect();
    if versions.is_empty() {
        return show_reason(store, module_key, None, Some("no_version_tags")).await;
    }
    // One version per transaction: a repository may have more tags than one transaction holds.
    let known: HashSet<String> =
        statuses(store, &module).await?.iter().map(|s| precedence(&s.version).to_owned()).collect();
    for (version, tag) in &versions {
        if known.contains(precedence(&version.to_string())) {
            continue;
        }
        let commit = tags.iter().find(|t| &t.name == tag).map(|t| t.commit_sha.clone());
        // A tag naming a version added meanwhile (a webhook's) adds nothing.
        let _ = add_fetched_version(store, &module, version, tag, commit).await?;
    }
    state.work.notify_one();
    Ok(())
}

/// Downloads the archive at `git_ref`, keeps the module's folder of it (the whole repository
/// without its top-level directory, or the module's `source-directory`), stores that as the
/// version's upload and ingests it.
async fn fetch(state: &AppState, module_key: &Key, object: &str, git_ref: &str) -> Result<()> {
    let object = ObjectId::parse(object).ok_or(RegistryError::NotFound)?;
    let module = match load(state.store.as_ref(), module_key).await {
        Err(RegistryError::NotFound) => return Ok(()),
        other => other?,
    };
    let (provider, repo) = repository_of(state, &module).await?;
    let archive = match provider.archive(&repo, git_ref).await {
        Ok(archive) => archive,
        Err(e @ VcsError::Upstream(_)) => return Err(e.into()),
        Err(unreadable) => {
            let reason = format!("the repository archive at {git_ref} could not be read: {unreadable}");
            return ingest::fail(state, &object, &reason).await;
        }
    };
    let limits = state.config.archive_limits;
    let directory = module.vcs_repo.as_ref().map(|r| r.source_directory.clone()).unwrap_or_default();
    let stripped = tokio::task::spawn_blocking(move || -> std::result::Result<tempfile::NamedTempFile, String> {
        let mut file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
        let source = tokio_util::io::SyncIoBridge::new(archive);
        crate::archive::repack(source, file.as_file_mut(), limits, &directory).map_err(|e| e.to_string())?;
        Ok(file)
    })
    .await?;
    match stripped {
        Ok(file) => {
            state.blobs.put_file(&object, file.path()).await?;
            ingest::object_created(state, &object).await?;
        }
        Err(reason) => ingest::fail(state, &object, &reason).await?,
    }
    Ok(())
}

/// A branch-based module's new version: the archive at the request's commit, fetched by the
/// job. Its upload link works as well, and whichever archive lands first is the version's.
pub async fn create_branch_version(state: &AppState, accepted: AcceptedVersion) -> Result<CreatedVersion> {
    let AcceptedVersion { module, version, commit_sha } = accepted;
    let commit = commit_sha.filter(|c| !c.trim().is_empty()).ok_or_else(|| {
        RegistryError::invalid(
            Field::Attribute("commit-sha"),
            "commit-sha is required for a version of a branch-based VCS module",
        )
    })?;
    let (provider, repo) = repository_of(state, &module).await?;
    let sha = provider
        .commit(&repo, &commit)
        .await
        .map_err(|e| RegistryError::invalid(Field::Attribute("commit-sha"), e.to_string()))?;
    let created = add_fetched_version(state.store.as_ref(), &module, &version, &sha, Some(sha.clone()))
        .await?
        .map_err(|taken| taken.refusal(&version.to_string()))?;
    state.work.notify_one();
    let upload_url = versions::upload_url(state.blobs.as_ref(), &created).await?;
    Ok(CreatedVersion { version: created, module, upload_url })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_thirty_seconds_doubling_up_to_an_hour() {
        let waits: Vec<i64> = (1..MAX_ATTEMPTS).map(backoff).collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 960, 1920]);
        assert_eq!((backoff(8), backoff(40), backoff(u32::MAX)), (3600, 3600, 3600));
    }

    #[test]
    fn work_recorded_before_queues_existed_is_still_read() {
        let work = Work::Fetch {
            module: Key::new("p", "s"),
            org_id: "org-1".into(),
            object: "o".into(),
            git_ref: "v1.0.0".into(),
        };
        let task: Task = Item::from_value(Key::new("k", "k"), &work).unwrap().parse().unwrap();
        assert_eq!((task.id.as_str(), task.attempts, task.not_before, task.reason), ("", 0, 0, None));
        assert_eq!(task.work.org_id(), "org-1");

        let queued = Task { id: "id".into(), attempts: 3, not_before: 42, reason: Some("why".into()), ..task };
        let again: Task = queued.queued(Key::new("k", "k")).unwrap().parse().unwrap();
        assert_eq!((again.id, again.attempts, again.not_before), ("id".into(), 3, 42));
        assert!(matches!(again.work, Work::Fetch { git_ref, .. } if git_ref == "v1.0.0"));
    }
}
