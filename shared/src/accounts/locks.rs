//! Workspace locks, as HCP Terraform's `actions/lock`, `actions/unlock` and
//! `actions/force-unlock` have them: a lock names who holds it and why; only its holder unlocks
//! it, and a principal with admin access to the workspace may force it open. A lock is
//! part of the workspace's record, so taking one is a conditional write of that record: of two
//! callers racing for it, one wins and the other is told it is locked.

use super::error::{AccountsError, Result};
use super::workspaces::{find, reread, Found, Lock, Workspace, WorkspaceAt};
use crate::api::{timestamp, Field};
use crate::auth::Principal;
use crate::state::AppState;
use crate::store::{retry_on_race, Write};

/// The longest reason a lock keeps, in bytes.
pub const MAX_REASON: usize = 1024;

/// What a request does to a workspace's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockChange {
    Lock {
        reason: Option<String>,
    },
    /// Only the holder may.
    Unlock,
    /// Whoever holds it.
    ForceUnlock,
}

/// Locks or unlocks the workspace `id` for a principal whose access allows it (workspace
/// locking; force-unlock: admin). A workspace locked already (by anyone) is a conflict, as is an unlock of an
/// unlocked workspace or of one another holds.
pub async fn change(state: &AppState, principal: &Principal, id: &str, change: LockChange) -> Result<Found> {
    let store = state.store.as_ref();
    let found = match change {
        LockChange::ForceUnlock => {
            find(store, principal, WorkspaceAt::Id(id)).await?.requiring(|may| may.force_unlock, "force-unlock")
        }
        _ => find(store, principal, WorkspaceAt::Id(id)).await?.requiring(|may| may.lock, "lock or unlock"),
    }?;
    if let LockChange::Lock { reason: Some(reason) } = &change {
        if reason.len() > MAX_REASON {
            let detail = format!("is longer than {MAX_REASON} bytes");
            return Err(AccountsError::invalid(Field::Attribute("reason"), detail));
        }
    }
    let caller = principal.user_id();
    let Found { workspace: found, org, may } = found;
    let (change, caller, mut first) = (&change, &caller, Some(found));
    let changed = retry_on_race(|| {
        let first = first.take();
        async move {
        let mut current = reread(store, id, first).await?;
        // What landed under the lock before is settled before a new one is taken (see
        // LockHooks), on every attempt: the lock's write is conditioned on what it then reads.
        if matches!(change, LockChange::Lock { .. }) && current.pending_state.is_some() {
            state.lock_hooks.before_lock(state, id).await.map_err(|e| {
                AccountsError::Conflict(format!("The workspace's last state could not be settled ({e}); retry."))
            })?;
            current = reread(store, id, None).await?;
        }
        let locked_by =
            match (change, &current.locked_by) {
                (LockChange::Lock { .. }, Some(_)) => return Err(conflict("The workspace is locked already.")),
                (LockChange::Lock { reason }, None) => {
                    let at = timestamp(chrono::Utc::now());
                    Some(Lock { holder: caller.clone(), reason: reason.clone(), at })
                }
                (LockChange::Unlock | LockChange::ForceUnlock, None) => {
                    return Err(conflict("The workspace is unlocked already."))
                }
                // go-tfe tells this from "unlocked already" by the words "is locked by User".
                (LockChange::Unlock, Some(lock)) if &lock.holder != caller => {
                    return Err(AccountsError::Conflict(format!(
                        "The workspace is locked by User {}: only they can unlock it; an administrator may force-unlock it.",
                        lock.holder
                    )))
                }
                (LockChange::Unlock | LockChange::ForceUnlock, Some(_)) => None,
            };
        let taken = u64::from(matches!(change, LockChange::Lock { .. }));
        let workspace = Workspace { locked_by, locks_taken: current.locks_taken + taken, ..current.next() };
        let write = Write::Put { item: workspace.to_item()?, condition: current.unchanged() };
        match store.transact(vec![write]).await {
            Ok(()) => Ok(Some(workspace)),
            Err(e) if e.is_condition_failed() => Ok(None),
            Err(e) => Err(e.into()),
        }
        }
    })
    .await?;
    let workspace = changed.ok_or_else(|| conflict("The workspace kept changing; retry."))?;
    if workspace.locked_by.is_none() {
        // The unlock stands whatever follows: a run left waiting starts on its next read.
        if let Err(e) = state.lock_hooks.after_unlock(state, id).await {
            tracing::warn!(workspace = %id, error = %e, "the run waiting for the unlocked workspace did not start");
        }
    }
    Ok(Found { workspace, org, may })
}

fn conflict(detail: &str) -> AccountsError {
    AccountsError::Conflict(detail.to_owned())
}

/// The workspace as a run's lock leaves it, and the write that stores it on the condition that it
/// is unchanged since read: `None` when someone holds the lock already (the run waits). A run
/// holds the lock as itself (`holder` is its id), so its job token's state writes pass the check
/// that only the lock's holder writes.
pub fn lock_for_run(workspace: &Workspace, run_id: &str) -> Result<Option<(Workspace, Write)>> {
    if workspace.locked_by.is_some() {
        return Ok(None);
    }
    let lock = Lock {
        holder: run_id.to_owned(),
        reason: Some(format!("Locked by Run {run_id}")),
        at: timestamp(chrono::Utc::now()),
    };
    let next = Workspace { locked_by: Some(lock), locks_taken: workspace.locks_taken + 1, ..workspace.next() };
    let write = Write::Put { item: next.to_item()?, condition: workspace.unchanged() };
    Ok(Some((next, write)))
}

/// The check, in a transaction, that `run_id` still holds the workspace's lock as read: `None`
/// when it does not (an administrator forced it open since).
pub fn run_holds_lock(workspace: &Workspace, run_id: &str) -> Option<Write> {
    let holds = workspace.locked_by.as_ref().is_some_and(|lock| lock.holder == run_id);
    holds.then(|| Write::Check { key: workspace.key(), condition: workspace.unchanged() })
}

/// The write that gives back the lock `run_id` holds on the workspace as read: `None` when the
/// run does not hold it (an administrator forced it open).
pub fn release_run_lock(workspace: &Workspace, run_id: &str) -> Result<Option<Write>> {
    if workspace.locked_by.as_ref().is_none_or(|lock| lock.holder != run_id) {
        return Ok(None);
    }
    let next = Workspace { locked_by: None, ..workspace.next() };
    Ok(Some(Write::Put { item: next.to_item()?, condition: workspace.unchanged() }))
}
