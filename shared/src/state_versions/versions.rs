//! State versions: a workspace's states, newest current. A write is checked as HCP checks it
//! (the caller holds the workspace's lock, the MD5 matches, the serial advances, a new lineage
//! needs `force`), stores the state sealed, then records the version and advances the workspace
//! in one transaction conditioned on the workspace read: of two writers, one wins and the other
//! reads again. A write costs the same store calls however many versions the workspace has.

use std::time::Duration;

use md5::{Digest, Md5};

use super::error::{Result, StateError};
use serde::{Deserialize, Serialize};

use super::parse::{self, Output, StateFacts};
use super::record::{parse_output_id, StateVersion, Status, Uploads};
use crate::accounts::access::Organization;
use crate::accounts::workspaces::{self, CurrentState, Found, Workspace, WorkspaceAt, WorkspacePermissions};
use crate::api::{Field, PageRequest};
use crate::auth::Principal;
use crate::blobs::{BlobStore, ObjectId};
use crate::ids::new_id;
use crate::links::{LinkSigner, Signed};
use crate::state::AppState;
use crate::store::{keys, parse_all, pointer, retry_on_race, Condition, Item, ItemStore, Transaction, Write};

/// A state version a request asks for: HCP's attributes, the state decoded.
pub struct NewStateVersion {
    pub declared: Declared,
    pub force: bool,
    /// The state inline; without it, the version waits for it on an upload link.
    pub state: Option<bytes::Bytes>,
    pub json_state: Option<bytes::Bytes>,
}

/// What a writer says of the state it sends, checked against the state itself.
pub struct Declared {
    pub serial: u64,
    pub md5: String,
    pub lineage: Option<String>,
}

/// A workspace and what the caller may do with it.
pub struct Seen {
    pub workspace: Workspace,
    pub org: Organization,
    pub may: WorkspacePermissions,
}

/// A version just made, and for a pending one the links its state and JSON state go to.
pub struct Created {
    pub version: StateVersion,
    pub seen: Seen,
    pub upload_links: Option<(String, String)>,
}

/// The workspace at `at`, for a caller that may at least read its outputs: else not found.
async fn seen(store: &dyn ItemStore, principal: &Principal, at: WorkspaceAt<'_>) -> Result<Seen> {
    let Found { workspace, org, may } = workspaces::find(store, principal, at).await?;
    if !may.read_state_outputs {
        return Err(StateError::NotFound);
    }
    Ok(Seen { workspace, org, may })
}

/// Stores a new state version of the workspace `workspace_id`: with its state inline, made
/// current at once; without, pending until its state arrives on the returned upload link
/// (`uploads.rs`).
pub async fn create(
    state: &AppState,
    principal: &Principal,
    workspace_id: &str,
    new: NewStateVersion,
) -> Result<Created> {
    let store = state.store.as_ref();
    let found = workspaces::find(store, principal, WorkspaceAt::Id(workspace_id)).await?;
    let Found { workspace, org, may } = found.requiring(|may| may.write_state, "create state versions")?;
    let declared = &new.declared;
    if declared.md5.len() != 32 || !declared.md5.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StateError::invalid(Field::Attribute("md5"), "must be an MD5 digest in hex (32 characters)"));
    }
    if declared.lineage.as_ref().is_some_and(|lineage| lineage.is_empty() || lineage.len() > parse::MAX_LABEL) {
        let detail = format!("must be 1 to {} bytes", parse::MAX_LABEL);
        return Err(StateError::invalid(Field::Attribute("lineage"), detail));
    }
    if new.state.is_none() && new.json_state.is_some() {
        let detail = "is sent on its upload link when `state` is: not inline without it";
        return Err(StateError::invalid(Field::Attribute("json-state"), detail));
    }
    // What an earlier write uploaded is settled first, so this write is checked against it; one
    // that never landed is superseded by this write, in its own transaction.
    let workspace = super::uploads::settle_pending(state, workspace).await?;
    check_write(&workspace, Some(principal), declared.serial, declared.lineage.as_deref(), new.force)?;
    let Some(body) = new.state.clone() else {
        let (version, upload_links) = create_pending(state, principal, &workspace, &new).await?;
        return Ok(Created { version, seen: Seen { workspace, org, may }, upload_links: Some(upload_links) });
    };
    let limit = state.config.max_state_bytes;
    for body in std::iter::once(&body).chain(&new.json_state) {
        if body.len() as u64 > limit {
            return Err(StateError::TooLarge { size: body.len() as u64, limit });
        }
    }
    let facts = verify(&body, declared)?;
    let object = ObjectId::generate();
    state.blobs.put_sealed(&object, body.clone()).await?;
    let json_object = match &new.json_state {
        Some(json) => {
            let id = ObjectId::generate();
            state.blobs.put_sealed(&id, json.clone()).await?;
            Some(id)
        }
        None => None,
    };
    let version = StateVersion {
        object: object.to_string(),
        json_object: json_object.as_ref().map(ToString::to_string),
        ..described(&workspace, principal, declared, new.force)
    }
    .finalized(&facts, body.len() as u64);
    let recorded = record(store, workspace.clone(), version, Writer::Holder(principal)).await;
    // A store error may come after the transaction was applied: the objects are then kept (an
    // orphan at worst) rather than taken from under a version that names them.
    if matches!(recorded, Ok(None) | Err(StateError::Conflict(_) | StateError::Workspace(_))) {
        // Nothing names the objects: take them back (a crash here leaves them unnamed, unread).
        for id in std::iter::once(&object).chain(&json_object) {
            if let Err(e) = state.blobs.delete_sealed(id).await {
                tracing::warn!(object = %id, error = %e, "an unrecorded state object is left behind");
            }
        }
    }
    let Recorded { version, superseded } = recorded?.ok_or_else(busy)?;
    forget_superseded(state, superseded).await;
    Ok(Created { version, seen: Seen { workspace, org, may }, upload_links: None })
}

/// Takes back what a superseded version had sealed, after the write that superseded it: a
/// failure is logged, not the write's (it committed; the objects are unnamed, unread).
async fn forget_superseded(state: &AppState, superseded: Option<StateVersion>) {
    let Some(superseded) = superseded else { return };
    if let Err(e) = super::uploads::forget(state, &superseded).await {
        tracing::warn!(version = %superseded.id, error = %e, "a superseded version's objects are left behind");
    }
}

fn busy() -> StateError {
    StateError::Conflict("The workspace's state is being written by others; retry.".into())
}

/// A version of `workspace` as its writer describes it, before its state is read.
fn described(workspace: &Workspace, principal: &Principal, declared: &Declared, force: bool) -> StateVersion {
    StateVersion {
        id: new_id("sv"),
        org_id: workspace.org_id.clone(),
        workspace_id: workspace.id.clone(),
        sequence: 0,
        serial: declared.serial,
        lineage: declared.lineage.clone().unwrap_or_default(),
        md5: declared.md5.to_ascii_lowercase(),
        size: 0,
        terraform_version: None,
        state_version: 0,
        created_at: crate::api::timestamp(chrono::Utc::now()),
        created_by: principal.user_id(),
        object: ObjectId::generate().to_string(),
        json_object: None,
        output_count: 0,
        resource_count: 0,
        resources: Vec::new(),
        providers: Default::default(),
        status: Status::Finalized,
        uploads: None,
        force,
        lock_generation: workspace.locks_taken,
    }
}

/// Records a version that waits for its state: the version, its pointer and what its two upload
/// links lead to, in one transaction; returns it with the links.
async fn create_pending(
    state: &AppState,
    principal: &Principal,
    workspace: &Workspace,
    new: &NewStateVersion,
) -> Result<(StateVersion, (String, String))> {
    let lifetime = state.config.state_link_lifetime;
    let uploads = Uploads { state: ObjectId::generate().to_string(), json: ObjectId::generate().to_string() };
    let version = StateVersion {
        status: Status::Pending,
        json_object: Some(ObjectId::generate().to_string()),
        uploads: Some(uploads.clone()),
        ..described(workspace, principal, &new.declared, new.force)
    };
    // The links first: a store that cannot make them leaves nothing behind.
    let link = |id: &str| {
        let id = ObjectId::parse(id).expect("generated ids parse");
        async move { state.blobs.upload_url(&id, lifetime).await }
    };
    let links = (link(&uploads.state).await?, link(&uploads.json).await?);
    // Kept past the links' lifetime, so that a late event for an upload made in time still finds
    // its version.
    let expires = chrono::Utc::now().timestamp() + lifetime.as_secs() as i64 + 24 * 3600;
    let store = state.store.as_ref();
    let (version, uploads, mut first) = (&version, &uploads, Some(workspace.clone()));
    let made = retry_on_race(|| {
        let first = first.take();
        async move {
            // A write of the workspace that won meanwhile (a setting, a pool) is read, and the
            // lock and serial checked again.
            let workspace = workspaces::reread(store, &version.workspace_id, first).await?;
            check_write(&workspace, Some(principal), version.serial, Some(&version.lineage), version.force)?;
            let version = StateVersion { lock_generation: workspace.locks_taken, ..version.clone() };
            let mut transaction = Transaction::new();
            transaction.add(Write::Put { item: version.to_item()?, condition: Condition::NotExists });
            transaction.add(pointer::create(&version.id, &version.key())?);
            let json_object = version.json_object.clone().unwrap_or_default();
            for (upload, form, sealed) in
                [(&uploads.state, Form::State, &version.object), (&uploads.json, Form::Json, &json_object)]
            {
                let awaited = AwaitedUpload { version_id: version.id.clone(), form, sealed: sealed.clone() };
                let item = Item::from_value(keys::pending_state_upload(upload), &awaited)?.with_ttl(expires);
                transaction.add(Write::Put { item, condition: Condition::NotExists });
            }
            // The workspace waits for it, as read, and no longer for one before it that never
            // landed.
            transaction.add(workspaces::await_state(&workspace, Some(version.id.clone()))?);
            let superseded = supersede(store, &workspace).await?.map(|(pending, discard)| {
                transaction.add(discard);
                pending
            });
            // The workspace, or the version it waited for, changed meanwhile: read again.
            match transaction.commit(store).await {
                Err(e) if e.is_condition_failed() => Ok(None),
                other => other.map(|()| Some((version, superseded))).map_err(StateError::from),
            }
        }
    })
    .await?;
    let (version, superseded) = made.ok_or_else(busy)?;
    forget_superseded(state, superseded).await;
    Ok((version, links))
}

/// What an upload link of a pending version leads to.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct AwaitedUpload {
    pub version_id: String,
    pub form: Form,
    /// The sealed object the body goes to once checked.
    pub sealed: String,
}

/// Checks a state against what its writer declared (the MD5 of its bytes, the serial and the
/// lineage it carries), and reads what Hangar keeps of it.
pub(super) fn verify(body: &[u8], declared: &Declared) -> Result<StateFacts> {
    let md5 = hex::encode(Md5::digest(body));
    if !declared.md5.eq_ignore_ascii_case(&md5) {
        return Err(StateError::invalid(Field::Attribute("md5"), "does not match the MD5 of `state`"));
    }
    let facts = parse::facts(body).map_err(|e| StateError::invalid(Field::Attribute("state"), e.to_string()))?;
    if facts.serial != declared.serial {
        let detail = format!("is {}, but the state's own serial is {}", declared.serial, facts.serial);
        return Err(StateError::invalid(Field::Attribute("serial"), detail));
    }
    if declared.lineage.as_ref().is_some_and(|lineage| *lineage != facts.lineage) {
        return Err(StateError::invalid(Field::Attribute("lineage"), "does not match the state's own lineage"));
    }
    Ok(facts)
}

/// Who makes a version current: the lock's holder writing inline, or the state arriving on a
/// pending version's upload link (its writer's lock was checked when it was made).
pub(super) enum Writer<'a> {
    Holder(&'a Principal),
    Upload { pending: &'a StateVersion },
}

/// A version recorded, and the pending version it superseded, if one was waiting.
pub(super) struct Recorded {
    pub version: StateVersion,
    pub superseded: Option<StateVersion>,
}

/// The pending version the workspace waits for, and the write that discards it as superseded by
/// the write being made: in that write's transaction, so that only a write that happens does.
async fn supersede(store: &dyn ItemStore, workspace: &Workspace) -> Result<Option<(StateVersion, Write)>> {
    let Some(id) = &workspace.pending_state else { return Ok(None) };
    let pending: Option<StateVersion> = pointer::resolve(store, id).await?;
    match pending.filter(|pending| pending.status == Status::Pending) {
        Some(pending) => {
            let write = super::uploads::discarded(&pending)?;
            Ok(Some((pending, write)))
        }
        None => Ok(None),
    }
}

/// Records `version` as the workspace's newest, checked against the workspace as each attempt
/// reads it (the first attempt: as the caller read it). `None`: others kept changing it.
pub(super) async fn record(
    store: &dyn ItemStore,
    workspace: Workspace,
    version: StateVersion,
    writer: Writer<'_>,
) -> Result<Option<Recorded>> {
    let (id, version, writer, mut first) = (workspace.id.clone(), &version, &writer, Some(workspace));
    let id = &id;
    retry_on_race(|| {
        let first = first.take();
        async move {
            let workspace = workspaces::reread(store, id, first).await?;
            let holder = match writer {
                Writer::Holder(principal) => Some(*principal),
                Writer::Upload { pending } => {
                    check_arrival(&workspace, pending)?;
                    None
                }
            };
            check_write(&workspace, holder, version.serial, Some(&version.lineage), version.force)?;
            let mut version = StateVersion { sequence: workspace.state_versions + 1, ..version.clone() };
            // A JSON form still awaited is not named yet: its arrival names it, after this commits
            // (which it checks for), or before, and this attempt then fails and reads again.
            let json_awaited = match writer {
                Writer::Upload { pending: StateVersion { uploads: Some(uploads), .. } } => {
                    let key = keys::pending_state_upload(&uploads.json);
                    store.get(&key).await?.is_some().then_some(key)
                }
                _ => None,
            };
            if json_awaited.is_some() {
                version.json_object = None;
            }
            let current = CurrentState {
                id: version.id.clone(),
                serial: version.serial,
                lineage: version.lineage.clone(),
                sequence: version.sequence,
            };
            let (_, advance) = workspaces::advance_state(&workspace, current, version.resource_count)?;
            let mut transaction = Transaction::new();
            transaction.add(Write::Put { item: version.to_item()?, condition: Condition::NotExists });
            let mut superseded = None;
            match writer {
                Writer::Holder(_) => {
                    transaction.add(pointer::create(&version.id, &version.key())?);
                    if let Some((pending, discard)) = supersede(store, &workspace).await? {
                        transaction.add(discard);
                        superseded = Some(pending);
                    }
                }
                Writer::Upload { pending } => {
                    let waiting = Condition::equals("status", Status::Pending.as_str());
                    transaction.add(Write::Delete { key: pending.key(), condition: waiting });
                    transaction.add(pointer::retarget(&version.id, &version.key())?);
                    let uploads = pending.uploads.iter();
                    transaction.extend(uploads.map(|u| Write::Delete {
                        key: keys::pending_state_upload(&u.state),
                        condition: Condition::Always,
                    }));
                    transaction.extend(json_awaited.map(|key| Write::Check { key, condition: Condition::Exists }));
                }
            }
            transaction.add(advance);
            match transaction.commit(store).await {
                Ok(()) => Ok(Some(Recorded { version, superseded })),
                Err(e) if e.is_condition_failed() => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
    })
    .await
}

/// A pending version's state that lands is made current only if the workspace still waits for
/// it (no write superseded it) and no lock was taken since the one its writer held: a link used
/// late, after its writer let the lock go and another took it, changes nothing. (Taking a lock
/// first settles what landed before.)
fn check_arrival(workspace: &Workspace, pending: &StateVersion) -> Result<()> {
    if workspace.pending_state.as_deref() != Some(pending.id.as_str()) {
        return Err(StateError::Conflict("A newer state version superseded it.".into()));
    }
    if workspace.locks_taken != pending.lock_generation {
        return Err(StateError::Conflict("It landed after the workspace's lock changed hands.".into()));
    }
    Ok(())
}

/// HCP's rules for a state write, against the workspace as the write read it: the lock's holder
/// writes (`holder`, when one writes), the serial advances, and a new lineage needs `force`. A
/// lineage not yet known (a pending version's writer need not say it) is checked on arrival.
fn check_write(
    workspace: &Workspace,
    holder: Option<&Principal>,
    serial: u64,
    lineage: Option<&str>,
    force: bool,
) -> Result<()> {
    if let Some(principal) = holder {
        match &workspace.locked_by {
            Some(lock) if lock.holder == principal.user_id() => {}
            Some(lock) => {
                return Err(StateError::Conflict(format!(
                    "The workspace is locked by {}: only the lock's holder may write its state.",
                    lock.holder
                )))
            }
            None => return Err(StateError::Conflict("The workspace must be locked by you to write its state.".into())),
        }
    }
    let Some(current) = workspace.current_state.as_ref().filter(|_| !force) else { return Ok(()) };
    if let Some(lineage) = lineage.filter(|lineage| !lineage.is_empty() && *lineage != current.lineage) {
        return Err(StateError::Conflict(format!(
            "The state's lineage {lineage} is not the workspace's ({}): it is another state. Send `force` to replace it.",
            current.lineage
        )));
    }
    if serial <= current.serial {
        return Err(StateError::Conflict(format!(
            "The state's serial {serial} does not advance the workspace's current serial {}.",
            current.serial
        )));
    }
    Ok(())
}

/// A state version by id, with its workspace and what the caller may do there: any of the
/// workspace's for a caller that may read its state, only the current one for a caller limited to
/// its outputs (HCP's `read-outputs` reads the latest state's outputs, not the history).
pub async fn get(store: &dyn ItemStore, principal: &Principal, id: &str) -> Result<(StateVersion, Seen)> {
    let version: StateVersion = pointer::resolve(store, id).await?.ok_or(StateError::NotFound)?;
    let seen = seen(store, principal, WorkspaceAt::Id(&version.workspace_id)).await?;
    let current = seen.workspace.current_state.as_ref().is_some_and(|current| current.id == version.id);
    if !seen.may.read_state && !current {
        return Err(StateError::NotFound);
    }
    Ok((version, seen))
}

/// The workspace's current state version.
pub async fn current(state: &AppState, principal: &Principal, at: WorkspaceAt<'_>) -> Result<(StateVersion, Seen)> {
    let store = state.store.as_ref();
    let mut seen = seen(store, principal, at).await?;
    // A state that has landed but is not settled yet (its event still on its way) is settled
    // here: a run that locks the workspace and reads its state reads the last one written.
    if seen.workspace.pending_state.is_some() {
        seen.workspace = super::uploads::settle_pending(state, seen.workspace).await?;
    }
    Ok((read_current(store, &seen.workspace).await?, seen))
}

/// The workspace's current state version as stored, settling nothing: the console's read (it
/// writes nothing).
pub async fn current_stored(
    store: &dyn ItemStore,
    principal: &Principal,
    at: WorkspaceAt<'_>,
) -> Result<(StateVersion, Seen)> {
    let seen = seen(store, principal, at).await?;
    Ok((read_current(store, &seen.workspace).await?, seen))
}

/// The version the workspace records as current, read by its key.
async fn read_current(store: &dyn ItemStore, workspace: &Workspace) -> Result<StateVersion> {
    let current = workspace.current_state.as_ref().ok_or(StateError::NotFound)?;
    let version = match current.sequence {
        0 => pointer::resolve(store, &current.id).await?,
        sequence => store
            .get(&keys::state_version(&workspace.org_id, &workspace.id, sequence))
            .await?
            .map(|item| item.parse())
            .transpose()?,
    };
    version.ok_or(StateError::NotFound)
}

/// A page of the workspace's state versions, newest first, with how many it has.
pub async fn list(
    store: &dyn ItemStore,
    principal: &Principal,
    at: WorkspaceAt<'_>,
    page: &PageRequest,
) -> Result<(Vec<StateVersion>, usize, Seen)> {
    let seen = seen(store, principal, at).await?;
    if !seen.may.read_state {
        return Err(StateError::Forbidden(
            "You may read this workspace's current outputs, not its state versions.".into(),
        ));
    }
    let query = keys::state_versions(&seen.workspace.org_id, &seen.workspace.id).reverse(true);
    let items = page.fetch(store, query).await?;
    Ok((parse_all(&items)?, seen.workspace.state_versions as usize, seen))
}

/// The outputs of a state version, read from its state.
pub async fn outputs(blobs: &dyn BlobStore, version: &StateVersion) -> Result<Vec<Output>> {
    if version.status != Status::Finalized {
        return Ok(Vec::new());
    }
    let object = ObjectId::parse(&version.object).ok_or(StateError::NotFound)?;
    let state = blobs.open_sealed(&object).await?;
    parse::outputs(&state).map_err(|e| StateError::Blob(crate::blobs::BlobError::backend(e)))
}

/// One output by its `wsout-` id, with its state version.
pub async fn output(
    store: &dyn ItemStore,
    blobs: &dyn BlobStore,
    principal: &Principal,
    output_id: &str,
) -> Result<(Output, StateVersion)> {
    let (version_id, index) = parse_output_id(output_id).ok_or(StateError::NotFound)?;
    let (version, _) = get(store, principal, &version_id).await?;
    if index >= version.output_count {
        return Err(StateError::NotFound);
    }
    let output = outputs(blobs, &version).await?.into_iter().nth(index).ok_or(StateError::NotFound)?;
    Ok((output, version))
}

/// Which body of a state version a link serves or takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    /// The state as Terraform wrote it.
    State,
    /// Its JSON form (`terraform show -json`).
    Json,
}

impl Form {
    fn path(self) -> &'static str {
        match self {
            Form::State => "download",
            Form::Json => "json-download",
        }
    }
}

/// Makes a state version's download links: signed, expiring, and served by Hangar with no bearer
/// token (go-tfe sends its token to any link it downloads, which S3 would refuse), which then
/// sends the client to S3 or serves the state itself.
pub struct Links<'a> {
    signer: &'a LinkSigner,
    base: &'a str,
    lifetime: Duration,
}

impl<'a> Links<'a> {
    pub fn new(state: &'a AppState, base: &'a str) -> Result<Self> {
        let signer = state.links.as_ref().ok_or(StateError::NoLinkKey)?;
        Ok(Self { signer, base, lifetime: state.config.state_link_lifetime })
    }

    fn subject(id: &str, form: Form) -> String {
        format!("state-version\n{id}\n{}", form.path())
    }

    /// The link to `form` of `version`, for a caller that may read the whole state.
    pub fn url(&self, version: &StateVersion, form: Form, may: &WorkspacePermissions) -> Option<String> {
        let present = version.status == Status::Finalized && (form == Form::State || version.json_object.is_some());
        let query = self.signer.query(&Self::subject(&version.id, form), self.lifetime);
        (present && may.read_state)
            .then(|| format!("{}/api/v2/state-versions/{}/{}?{query}", self.base, version.id, form.path()))
    }
}

/// What a download link leads to.
pub enum Download {
    /// A link of the object store's that serves the state (S3's, pre-signed).
    Redirect(String),
    /// The state itself (local blobs, opened by Hangar).
    Body(bytes::Bytes),
}

/// What a signed download link serves: the link is the whole authorization, as S3's are.
pub async fn download(state: &AppState, id: &str, form: Form, signed: &Signed) -> Result<Download> {
    let signer = state.links.as_ref().ok_or(StateError::NoLinkKey)?;
    if !signer.verify(&Links::subject(id, form), signed) {
        return Err(StateError::BadLink);
    }
    let version: StateVersion = pointer::resolve(state.store.as_ref(), id).await?.ok_or(StateError::NotFound)?;
    if version.status != Status::Finalized {
        return Err(StateError::NotFound);
    }
    let object = match form {
        Form::State => Some(version.object.as_str()),
        Form::Json => version.json_object.as_deref(),
    };
    let object = object.and_then(ObjectId::parse).ok_or(StateError::NotFound)?;
    // Long enough to follow the redirect at once, no longer.
    match state.blobs.sealed_download_url(&object, Duration::from_secs(60)).await? {
        Some(url) => Ok(Download::Redirect(url)),
        None => Ok(Download::Body(state.blobs.open_sealed(&object).await?)),
    }
}
