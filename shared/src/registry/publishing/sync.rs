//! The registry's VCS work, done by the scheduled job through a fair work queue
//! ([`crate::store::work_queue`]): a *sync* reads a tag-based module's tags and adds a version for
//! each semantic-version tag it lacks; a *fetch* downloads one version's archive at a tag or
//! commit and hands it to ingest. A branch-based module's versions are queued here too.
//!
//! Every organization shares the job, so none may hold it up for the others: the queue serves
//! organizations one turn each, claims each piece under a lease, retries failures after a
//! backoff (30 s, doubling up to an hour), `MAX_ATTEMPTS` times in all, and bounds each run
//! ([`RunBounds`]). What this module adds is the registry's part:
//! - what a piece of work is (`Work`) and how it is done (`sync`, `fetch`);
//! - what a failure leaves: its reason shows in the module's `vcs-repo.error` from the first
//!   failure, and is taken off again once the work succeeds; after the last, the module is
//!   `setup_failed` (a sync) or the version failed (a fetch).
//!
//! Publishing records a sync as one write, without the organization's turn; such syncs wait in
//! the queue's inbox, which each run first moves to their organizations' queues.

use std::collections::HashSet;

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
use crate::store::work_queue::{self, Payload, Policy, WorkQueue, Worker};
use crate::store::{keys, ItemStore, Key, Write};
use crate::vcs::{self, RepoId, ServiceProvider, VcsError};

pub use crate::store::work_queue::RunBounds;

/// Attempts at one piece of work before it is given up, its module or version failed.
pub const MAX_ATTEMPTS: u32 = 8;

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

    /// What the work does, as a reason for its failure begins.
    fn what(&self) -> String {
        match self {
            Work::Sync { .. } => "reading the repository's tags".to_owned(),
            Work::Fetch { git_ref, .. } => format!("fetching the repository archive at {git_ref}"),
        }
    }
}

/// The VCS queue: its keys, and the default policy but for `MAX_ATTEMPTS`.
impl Payload for Work {
    const QUEUE: WorkQueue = WorkQueue {
        name: "VCS",
        item: keys::vcs_work,
        inbox: keys::VCS_WORK_INBOX,
        queue: keys::vcs_work_queue,
        turn: keys::vcs_work_turn,
        turns: keys::VCS_WORK_TURNS,
        policy: Policy { max_attempts: MAX_ATTEMPTS, ..Policy::DEFAULT },
    };

    fn org_id(&self) -> &str {
        match self {
            Work::Sync { org_id, .. } | Work::Fetch { org_id, .. } => org_id,
        }
    }
}

/// A piece of VCS work as stored, with its place in its organization's queue and its attempts.
type Task = work_queue::Task<Work>;

/// The write that queues a read of the module's tags (on publishing, or switching to tags). It
/// lands in the inbox: one write cannot also give the organization its turn.
pub(super) fn sync_work(module: &Module) -> Result<Write> {
    let id = crate::ids::random_token(20);
    Ok(work_queue::inbox_write(&id, Work::Sync { module: module.key(), org_id: module.org_id.clone() })?)
}

/// The write that queues a resync of the module: a sync under an id of the module's own, so that
/// it fails while one already waits (the caller tells by the handle it added it as).
pub(super) fn resync_work(module: &Module) -> Result<Write> {
    let id = format!("resync-{}", module.id);
    Ok(work_queue::inbox_write(&id, Work::Sync { module: module.key(), org_id: module.org_id.clone() })?)
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
    Ok(work_queue::queue_writes(fetch)?)
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
    run_pending_at(state, chrono::Utc::now().timestamp(), bounds).await
}

/// The same run as if the time were `now` (unix seconds): what is due by then is done, and what
/// fails is retried after `now` plus its backoff, so a test moves this clock instead of waiting.
pub async fn run_pending_at(state: &AppState, now: i64, bounds: RunBounds) -> Result<usize> {
    work_queue::run(state.store.as_ref(), &Vcs(state), now, bounds).await
}

/// Does the queue's VCS work, and shows its failures on the module.
struct Vcs<'a>(&'a AppState);

impl Worker for Vcs<'_> {
    type Work = Work;
    type Error = RegistryError;

    async fn run(&self, work: &Work) -> Result<()> {
        match work {
            Work::Sync { module, .. } => sync(self.0, module).await,
            Work::Fetch { object, git_ref, module, .. } => fetch(self.0, module, object, git_ref).await,
        }
    }

    /// Why work failed, as the module's owners may read it: the provider's answer, or a conflict
    /// Hangar found; anything else is Hangar's own failure, whose cause stays in the log.
    fn reason_of(&self, e: &RegistryError) -> String {
        match e {
            RegistryError::Vcs(e) => e.to_string(),
            RegistryError::Conflict(detail) => detail.clone(),
            _ => "Hangar failed to do it (the cause is in its log)".to_owned(),
        }
    }

    /// Shows the failure, and when the work is retried, in the module's `vcs-repo.error`.
    async fn retrying(&self, task: &Task, reason: &str, at: i64) -> Result<String> {
        let when = chrono::DateTime::from_timestamp(at, 0).map(timestamp).unwrap_or_default();
        let shown = format!(
            "{}: {reason} (attempt {} of {MAX_ATTEMPTS}; retried from {when})",
            task.work.what(),
            task.attempts
        );
        show_reason(self.0.store.as_ref(), task.work.module(), Some(&shown), None).await?;
        Ok(shown)
    }

    /// After the last attempt: a sync leaves its module `setup_failed`, a fetch fails its
    /// version; either way the reason stays in the module's `vcs-repo.error`.
    async fn give_up(&self, task: &Task, reason: &str) -> Result<()> {
        let state = self.0;
        let store = state.store.as_ref();
        let shown = format!("{}: {reason} (gave up after {MAX_ATTEMPTS} attempts)", task.work.what());
        match &task.work {
            Work::Sync { module, .. } => show_reason(store, module, Some(&shown), Some("setup_failed")).await,
            Work::Fetch { module, object, .. } => {
                if let Some(object) = ObjectId::parse(object) {
                    ingest::fail(state.store.as_ref(), &object, &shown).await?;
                }
                show_reason(store, module, Some(&shown), None).await
            }
        }
    }

    /// The work is done; a reason its failure left showing is only stale.
    async fn done(&self, task: &Task) {
        if let Some(left) = &task.reason {
            if let Err(e) = take_reason_back(self.0.store.as_ref(), task.work.module(), left).await {
                tracing::warn!(org = %task.work.org_id(), error = %e, "a VCS failure's reason left on its module");
            }
        }
    }
}

/// Takes the reason a failure left on the module off again, unless something has replaced it.
async fn take_reason_back(store: &dyn ItemStore, module_key: &Key, left: &str) -> Result<()> {
    let changed = modify(store, module_key, |module, _| {
        if let Some(repo) = module.vcs_repo.as_mut().filter(|r| r.setup_error.as_deref() == Some(left)) {
            repo.setup_error = None;
        }
        Ok(())
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
    let changed = modify(store, module_key, |module, _| {
        if let Some(status) = status {
            module.status = status.to_owned();
        }
        if let Some(repo) = module.vcs_repo.as_mut() {
            repo.setup_error = reason.map(str::to_owned);
        }
        Ok(())
    });
    match changed.await {
        Err(RegistryError::NotFound) | Ok(_) => Ok(()),
        Err(e) => Err(e),
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
            return ingest::fail(state.store.as_ref(), &object, &reason).await;
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
        Err(reason) => ingest::fail(state.store.as_ref(), &object, &reason).await?,
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
use crate::store::Item;

/// The VCS queue's wait after the `attempt`th failure, as its tests name it.
#[cfg(test)]
fn backoff(attempt: u32) -> i64 {
    Work::QUEUE.policy.backoff(attempt)
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
