//! What a job writes besides the run's status: its log, appended in chunks as Terraform prints
//! it and read through a signed link while it is written and after, and the saved plan an apply
//! applies. A log is served as HCP serves it: STX (0x02) first, ETX (0x03) once its phase is
//! over, which is how go-tfe's reader knows it has it all.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::error::{Result, RunsError};
use super::queue;
use super::record::{phase_id, Phase, Run};
use crate::api::Field;
use crate::auth::JobGrant;
use crate::blobs::ObjectId;
use crate::links::LinkSigner;
use crate::state::AppState;
use crate::store::{keys, pointer, query_all, Condition, Item, ItemStore, Transaction, UpdateOp, Write};

/// The most bytes one phase's log keeps; what an agent sends past it is refused.
pub const MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// The most bytes one append carries (a store item holds at most 400 KB, base64 takes 4 for 3).
pub const MAX_CHUNK_BYTES: usize = 256 * 1024;

/// The most chunks one phase's log keeps: what a read of the log reads at most.
pub const MAX_LOG_CHUNKS: i64 = 4096;

/// The largest saved plan kept.
pub const MAX_PLAN_FILE_BYTES: usize = 64 * 1024 * 1024;

const STX: u8 = 0x02;
const ETX: u8 = 0x03;

#[derive(Debug, Serialize, Deserialize)]
struct Chunk {
    offset: u64,
    /// The bytes, base64 (Terraform's output is text, but a chunk may split a character).
    data: String,
}

/// Appends what Terraform printed to the log of the job's phase, at `offset` (the bytes the agent
/// sent before): a chunk sent again (a retried request) changes nothing.
pub async fn append(state: &AppState, grant: &JobGrant, offset: u64, body: &[u8]) -> Result<()> {
    if body.len() > MAX_CHUNK_BYTES {
        return Err(RunsError::TooLarge(format!("A log chunk carries at most {MAX_CHUNK_BYTES} bytes.")));
    }
    // An empty chunk would hold the offset of the next one, which would then never be kept.
    if body.is_empty() {
        return Err(RunsError::invalid(Field::Document, "A log chunk carries at least one byte."));
    }
    let end = offset.saturating_add(body.len() as u64);
    if end > MAX_LOG_BYTES {
        return Err(RunsError::TooLarge(format!("A phase's log holds at most {MAX_LOG_BYTES} bytes.")));
    }
    let store = state.store.as_ref();
    let run = queue::job_run(store, grant).await?;
    let phase = run.job.as_ref().map_or(Phase::Plan, |job| job.phase).as_str();
    let key = keys::run_log_chunk(&run.org_id, &run.workspace_id, &run.id, phase, offset);
    let chunk = Chunk { offset, data: BASE64.encode(body) };
    // Each chunk starts where the log ends, so the log is one run of bytes, and their number is
    // bounded: both on the log's head, in the chunk's own transaction.
    let head = keys::run_log_head(&run.org_id, &run.workspace_id, &run.id, phase);
    let starts_at_the_end = match offset {
        0 => Condition::Below(LENGTH.into(), 1),
        _ => Condition::equals(LENGTH, offset),
    };
    let ops = vec![UpdateOp::set(LENGTH, end), UpdateOp::Add(CHUNKS.into(), 1)];
    let mut transaction = Transaction::new();
    let at_the_end = transaction.add(Write::Update {
        key: head.clone(),
        ops,
        condition: starts_at_the_end.and(Condition::Below(CHUNKS.into(), MAX_LOG_CHUNKS)),
    });
    transaction.add(Write::Put { item: Item::from_value(key.clone(), &chunk)?, condition: Condition::NotExists });
    match transaction.commit(store).await {
        Ok(()) => Ok(()),
        Err(e) if e.failed_on(at_the_end) => {
            // The same chunk sent again (its answer lost) changes nothing; anything else is not
            // where the log ends.
            let sent: Option<Chunk> = store.get(&key).await?.map(|item| item.parse()).transpose()?;
            if sent.is_some_and(|sent| sent.data == chunk.data) {
                return Ok(());
            }
            let kept: Option<LogHead> = store.get(&head).await?.map(|item| item.parse()).transpose()?;
            let kept = kept.unwrap_or_default();
            if kept.chunks >= MAX_LOG_CHUNKS as u64 {
                return Err(RunsError::TooLarge(format!("A phase's log holds at most {MAX_LOG_CHUNKS} chunks.")));
            }
            Err(RunsError::Conflict(format!("The log holds {} bytes: a chunk starts there.", kept.length)))
        }
        // A chunk kept at this offset though the log ends here: never dropped in silence.
        Err(e) if e.is_condition_failed() => {
            Err(RunsError::Conflict("A chunk is kept at this offset already; the log is not where it ends.".into()))
        }
        Err(e) => Err(e.into()),
    }
}

const LENGTH: &str = "length";
const CHUNKS: &str = "chunks";

/// A log's head: how many bytes and chunks it holds.
#[derive(Debug, Default, Deserialize)]
struct LogHead {
    #[serde(default)]
    length: u64,
    #[serde(default)]
    chunks: u64,
}

fn log_subject(phase_id: &str) -> String {
    format!("run-log\n{phase_id}")
}

/// The signed link to a run's phase log (`log-read-url`), read with no token: go-tfe replaces a
/// link's query with its own `offset` and `limit`, so the signature is in the path.
pub fn log_url(signer: &LinkSigner, lifetime: Duration, base: &str, run: &Run, phase: Phase) -> String {
    let id = phase_id(&run.id, phase);
    let query = signer.query(&log_subject(&id), lifetime);
    let signed: crate::links::Signed = serde_urlencoded::from_str(&query).expect("the signer's own query parses");
    format!("{base}/api/v2/logs/{id}/{}/{}", signed.expires, signed.signature)
}

/// The bytes of a phase's log from `offset`, at most `limit`, for a signed link: the log framed
/// by STX and (once its phase is over) ETX, with the run's error after the log when the phase
/// ended in it.
pub async fn read(
    state: &AppState,
    phase_id: &str,
    signed: &crate::links::Signed,
    offset: u64,
    limit: usize,
) -> Result<Vec<u8>> {
    let signer = state.links.as_ref().ok_or(RunsError::NoLinkKey)?;
    if !signer.verify(&log_subject(phase_id), signed) {
        return Err(RunsError::BadLink);
    }
    let (run_id, phase) = super::record::run_of_phase(phase_id).ok_or(RunsError::NotFound)?;
    let store = state.store.as_ref();
    let run: Run = pointer::resolve(store, &run_id).await?.ok_or(RunsError::NotFound)?;
    // A reader is what polls a run whose agent went silent: its lease is checked here too.
    let run = queue::refreshed(state, run).await?;
    let framed = framed(store, &run, phase).await?;
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(framed.len());
    let end = start.saturating_add(limit).min(framed.len());
    Ok(framed[start..end].to_vec())
}

/// The whole log of a phase, framed: what the console shows, and what a link's reads slice.
pub async fn framed(store: &dyn ItemStore, run: &Run, phase: Phase) -> Result<Vec<u8>> {
    let items = query_all(store, keys::run_log(&run.org_id, &run.workspace_id, &run.id, phase.as_str())).await?;
    let mut log = vec![STX];
    let mut expected = 0;
    for item in items {
        let chunk: Chunk = item.parse()?;
        let data = BASE64.decode(chunk.data.as_bytes()).map_err(crate::store::StoreError::backend)?;
        // Chunks are keyed by offset: one sent again after a lost answer overlaps what is kept.
        if chunk.offset > expected {
            break;
        }
        let skip = usize::try_from(expected - chunk.offset).unwrap_or(usize::MAX);
        if skip < data.len() {
            log.extend_from_slice(&data[skip..]);
            expected += (data.len() - skip) as u64;
        }
    }
    let record = run.phase(phase);
    if record.is_done() {
        if let (Some(error), "errored") = (&run.error, record.status.as_str()) {
            log.extend_from_slice(format!("\n\nError: {error}\n").as_bytes());
        }
        log.push(ETX);
    }
    Ok(log)
}

/// Keeps the saved plan of the job's plan (sealed: it holds the variables' values), for the
/// apply to apply.
pub async fn put_plan(state: &AppState, grant: &JobGrant, body: bytes::Bytes) -> Result<()> {
    if body.len() > MAX_PLAN_FILE_BYTES {
        return Err(RunsError::TooLarge(format!("A saved plan is at most {MAX_PLAN_FILE_BYTES} bytes.")));
    }
    if grant.phase != Phase::Plan.as_str() {
        return Err(RunsError::Forbidden("Only a plan's job saves the plan.".into()));
    }
    let run = queue::job_run(state.store.as_ref(), grant).await?;
    let before = run.sealed.clone();
    let object = ObjectId::generate();
    state.blobs.put_sealed(&object, body).await?;
    let named = object.to_string();
    let stored = queue::change(state, &grant.run_id, Some(run), |run| {
        queue::check_job(run, grant)?;
        let mut next = run.next();
        next.sealed = vec![named.clone()];
        Ok(Some(next))
    })
    .await;
    // What no record names any more: the plan saved before (a job saving twice), or this one.
    let unnamed = match &stored {
        Ok(_) => before.iter().filter_map(|id| ObjectId::parse(id)).collect(),
        Err(_) => vec![object],
    };
    for id in unnamed {
        if let Err(e) = state.blobs.delete_sealed(&id).await {
            tracing::warn!(object = %id, error = %e, "an unnamed saved plan is left behind");
        }
    }
    stored.map(drop)
}

/// The saved plan the job's apply applies.
pub async fn plan_file(state: &AppState, grant: &JobGrant) -> Result<bytes::Bytes> {
    let run = queue::job_run(state.store.as_ref(), grant).await?;
    let object = run.sealed.first().and_then(|id| ObjectId::parse(id)).ok_or(RunsError::NotFound)?;
    Ok(state.blobs.open_sealed(&object).await?)
}
