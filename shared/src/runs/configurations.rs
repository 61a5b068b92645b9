//! Configuration versions (`/workspaces/:id/configuration-versions`): the files a run plans.
//! One is made `pending` with an upload link; the archive that lands on the link is inspected
//! with the registry's limits (size, entries, paths, links, a gzip bomb's inflation) before it is
//! kept, sealed, and the version `uploaded`; a refused archive leaves it `errored` with the
//! reason, and nothing of it is kept. Its landing starts the runs that waited for it and, with
//! `auto-queue-runs`, queues one of its own.

use chrono::Utc;

use super::error::{Result, RunsError};
use super::queue;
use super::record::{
    count, counted, ConfigurationVersion, Operation, Run, UploadStatus, CONFIGURATION_COUNT, UPLOAD_LINK_LIFETIME,
};
use crate::accounts::workspaces::{self, Found, WorkspaceAt, WorkspacePermissions};
use crate::api::{timestamp, PageRequest};
use crate::archive::{self, ArchiveError};
use crate::auth::{JobGrant, Principal};
use crate::blobs::ObjectId;
use crate::ids::new_id;
use crate::links::{LinkSigner, Signed};
use crate::state::AppState;
use crate::store::{keys, parse_all, pointer, retry_on_race, Condition, ItemStore, Write};

/// A configuration version with what the caller may do in its workspace.
pub struct Seen {
    pub cv: ConfigurationVersion,
    pub may: WorkspacePermissions,
}

/// What a new configuration version asks for.
#[derive(Debug, Clone, Copy)]
pub struct NewConfiguration {
    pub auto_queue_runs: bool,
    pub speculative: bool,
}

/// Makes a pending configuration version of the workspace, for a caller that may queue runs.
pub async fn create(
    store: &dyn ItemStore,
    principal: &Principal,
    workspace_id: &str,
    new: NewConfiguration,
) -> Result<Seen> {
    let found = workspaces::find(store, principal, WorkspaceAt::Id(workspace_id)).await?;
    let Found { workspace, may, .. } = found.requiring(|may| may.queue_run, "upload configurations")?;
    let now = Utc::now();
    let cv = ConfigurationVersion {
        id: new_id("cv"),
        org_id: workspace.org_id.clone(),
        workspace_id: workspace.id.clone(),
        created_ms: now.timestamp_millis(),
        created_at: timestamp(now),
        created_by: principal.user_id(),
        status: UploadStatus::Pending,
        error: None,
        auto_queue_runs: new.auto_queue_runs,
        speculative: new.speculative,
        creator_may_apply: may.apply_run,
        sealed: Vec::new(),
        size: 0,
        awaiting: Vec::new(),
        status_timestamps: [("pending-at".to_owned(), timestamp(now))].into(),
        revision: 0,
    };
    let writes = vec![
        Write::Put { item: cv.to_item()?, condition: Condition::NotExists },
        pointer::create(&cv.id, &cv.key())?,
        // The workspace must still be there.
        Write::Check { key: workspace.key(), condition: Condition::Exists },
        counted(&cv.org_id, &cv.workspace_id, CONFIGURATION_COUNT),
    ];
    store.transact(writes).await?;
    Ok(Seen { cv, may })
}

/// A configuration version, for a caller that reads its workspace's runs.
pub async fn get(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<Seen> {
    let cv: ConfigurationVersion = pointer::resolve(store, id).await?.ok_or(RunsError::NotFound)?;
    let found = workspaces::find(store, principal, WorkspaceAt::Id(&cv.workspace_id)).await;
    let may = found?.may;
    if !may.read_runs {
        return Err(RunsError::NotFound);
    }
    Ok(Seen { cv, may })
}

/// A page of the workspace's configuration versions, newest first, with how many it has.
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    workspace_id: &str,
    page: &PageRequest,
) -> Result<(Vec<ConfigurationVersion>, usize)> {
    let Found { workspace, may, .. } = workspaces::find(store, principal, WorkspaceAt::Id(workspace_id)).await?;
    if !may.read_runs {
        return Err(RunsError::NotFound);
    }
    let query = keys::configuration_versions(&workspace.org_id, &workspace.id).reverse(true);
    let items = page.fetch(store, query).await?;
    let total = count(store, &workspace.org_id, &workspace.id, CONFIGURATION_COUNT).await?;
    Ok((parse_all(&items)?, total))
}

/// The upload link of a configuration version: signed, served by Hangar (Terraform before 1.6
/// sends its bearer token to it, which an S3 pre-signed link refuses), and expiring
/// [`UPLOAD_LINK_LIFETIME`] after the version was made however often it is read: a version not
/// uploaded by then never is, and the runs waiting for it go on without it.
pub fn upload_url(signer: &LinkSigner, base: &str, cv: &ConfigurationVersion) -> Option<String> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let ends_ms = cv.created_ms.saturating_add(UPLOAD_LINK_LIFETIME.as_millis() as i64);
    let left = std::time::Duration::from_millis(u64::try_from(ends_ms - now_ms).ok()?);
    (cv.status == UploadStatus::Pending && !cv.upload_expired(now_ms)).then(|| {
        let query = signer.query(&upload_subject(&cv.id), left);
        format!("{base}/api/v2/configuration-versions/{}/upload?{query}", cv.id)
    })
}

fn upload_subject(id: &str) -> String {
    format!("configuration-version\n{id}\nupload")
}

/// The archive that landed on a configuration version's upload link: inspected, then kept sealed
/// and the version `uploaded`, or refused (`errored`, the reason kept and returned). The link is
/// the whole authorization. The runs that waited for it start, and with `auto-queue-runs` one of
/// its own is queued.
pub async fn upload(state: &AppState, id: &str, signed: &Signed, body: bytes::Bytes) -> Result<ConfigurationVersion> {
    let signer = state.links.as_ref().ok_or(RunsError::NoLinkKey)?;
    if !signer.verify(&upload_subject(id), signed) {
        return Err(RunsError::BadLink);
    }
    let store = state.store.as_ref();
    let cv: ConfigurationVersion = pointer::resolve(store, id).await?.ok_or(RunsError::NotFound)?;
    if cv.status != UploadStatus::Pending {
        return Err(RunsError::Conflict(format!("Configuration version {id} is {} already.", cv.status.as_str())));
    }
    if cv.upload_expired(chrono::Utc::now().timestamp_millis()) {
        return Err(RunsError::BadLink);
    }
    let refusal = match inspect(state, body.clone()).await {
        Ok(()) => None,
        Err(ArchiveError::Io(e)) => return Err(RunsError::Blob(crate::blobs::BlobError::backend(e))),
        Err(e) => Some(e.to_string()),
    };
    let object = ObjectId::generate();
    if refusal.is_none() {
        state.blobs.put_sealed(&object, body.clone()).await?;
    }
    let (size, refusal_ref, object_ref) = (body.len() as u64, &refusal, &object);
    let mut first = Some(cv);
    let landed = retry_on_race(|| {
        let first = first.take();
        async move {
            let cv = match first {
                Some(cv) => cv,
                None => pointer::resolve::<ConfigurationVersion>(store, id).await?.ok_or(RunsError::NotFound)?,
            };
            if cv.status != UploadStatus::Pending {
                return Ok(Some(Err(cv)));
            }
            let mut next = cv.next();
            let now = timestamp(Utc::now());
            match refusal_ref {
                Some(why) => {
                    next.status = UploadStatus::Errored;
                    next.error = Some(why.clone());
                    next.status_timestamps.insert("errored-at".into(), now);
                }
                None => {
                    next.status = UploadStatus::Uploaded;
                    next.sealed = vec![object_ref.to_string()];
                    next.size = size;
                    next.status_timestamps.insert("uploaded-at".into(), now);
                }
            }
            let write = Write::Put { item: next.to_item()?, condition: cv.unchanged() };
            match store.transact(vec![write]).await {
                Ok(()) => Ok(Some(Ok(next))),
                Err(e) if e.is_condition_failed() => Ok(None),
                Err(e) => Err(RunsError::from(e)),
            }
        }
    })
    .await;
    let landed = match landed {
        Ok(Some(Ok(cv))) => cv,
        other => {
            // Nothing names the object: take it back (a crash here leaves it unnamed, unread).
            if refusal.is_none() {
                if let Err(e) = state.blobs.delete_sealed(&object).await {
                    tracing::warn!(object = %object, error = %e, "an unrecorded configuration is left behind");
                }
            }
            return match other {
                Ok(Some(Err(cv))) => {
                    Err(RunsError::Conflict(format!("Configuration version {id} is {} already.", cv.status.as_str())))
                }
                Ok(None) => Err(RunsError::Conflict("The configuration version kept changing; retry.".into())),
                Err(e) => Err(e),
                Ok(Some(Ok(_))) => unreachable!("matched above"),
            };
        }
    };
    for run_id in &landed.awaiting {
        // One run that cannot start now stops none of the others (each starts on its next read).
        let started = match pointer::resolve::<Run>(store, run_id).await {
            Ok(Some(run)) => queue::start(state, run).await.map(drop),
            Ok(None) => Ok(()),
            Err(e) => Err(e.into()),
        };
        if let Err(e) = started {
            tracing::warn!(run = %run_id, error = %e, "a run waiting for the upload did not start; it starts when read");
        }
    }
    if landed.auto_queue_runs && landed.status == UploadStatus::Uploaded {
        queue_own_run(state, &landed).await?;
    }
    if let Some(why) = refusal {
        return Err(RunsError::invalid(crate::api::Field::Member("configuration"), why));
    }
    Ok(landed)
}

/// Inspects a configuration archive as the registry inspects a module's: whatever would be unsafe
/// to unpack or is over a limit is refused; a configuration need not hold Terraform files at its
/// root (the workspace's working directory may be below it).
async fn inspect(state: &AppState, body: bytes::Bytes) -> std::result::Result<(), ArchiveError> {
    let limits = state.config.archive_limits;
    if body.len() as u64 > limits.max_compressed_bytes {
        return Err(ArchiveError::CompressedTooLarge { limit: limits.max_compressed_bytes });
    }
    match archive::inspect(std::io::Cursor::new(body), limits).await {
        Ok(_) | Err(ArchiveError::NoRootModule | ArchiveError::ModuleInSubdirectory { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The run a configuration version with `auto-queue-runs` queues once it lands, made by whoever
/// made the version.
async fn queue_own_run(state: &AppState, cv: &ConfigurationVersion) -> Result<()> {
    let store = state.store.as_ref();
    let workspace = workspaces::reread(store, &cv.workspace_id, None).await?;
    let Some(queue) = queue::queue_of(&workspace) else { return Ok(()) };
    let operation = Operation {
        message: "Queued automatically on upload".into(),
        refresh: true,
        auto_apply: workspace.settings.auto_apply && cv.creator_may_apply,
        ..Operation::default()
    };
    let run = Run::new(&cv.workspace_id, &cv.org_id, cv, operation, queue, cv.created_by.clone());
    queue::record(state, run).await?;
    Ok(())
}

/// The archive of the configuration version a job's run plans, for its job token.
pub async fn archive(state: &AppState, grant: &JobGrant) -> Result<bytes::Bytes> {
    let store = state.store.as_ref();
    let run = queue::job_run(store, grant).await?;
    let cv: ConfigurationVersion =
        pointer::resolve(store, &run.configuration_version_id).await?.ok_or(RunsError::NotFound)?;
    let object = cv.archive().and_then(ObjectId::parse).ok_or(RunsError::NotFound)?;
    Ok(state.blobs.open_sealed(&object).await?)
}
