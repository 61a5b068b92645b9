//! The scheduled job (function `key-rotation`, dev-server's timer): static roles that are due
//! get a new key (unless the deployment no longer allows their user), token revocations left
//! unfinished are continued, and expired leases are revoked. Until it has finished once, each
//! run first rebinds the broker's format-1 sealed values to their records ([`reseal`]).
//!
//! A due role is claimed by moving its next rotation forward with a conditional write, so two
//! overlapping runs never rotate it twice; the new key replaces the stored one only once it
//! exists, so a role always keeps a working key.

use serde_json::json;

use super::config::{self, MountClouds};
use super::error::{BrokerError, Result};
use super::mounts::{self, Mount};
use super::static_claims;
use super::statics::{self, Claim, StaticRole};
use super::tokens;
use super::{intents, leases};
use crate::seal::{Resealed, RESEAL_PER_RUN};
use crate::state::AppState;
use crate::store::{keys, schedule, Condition, Item};

/// One run of the scheduled job: static roles that are due, unfinished token revocations, then
/// expired leases. Returns how many roles were rotated and how many leases revoked.
pub async fn scheduled_run(state: &AppState) -> Result<(usize, usize)> {
    scheduled_run_at(state, chrono::Utc::now().timestamp()).await
}

/// The same run as if the time were `now` (unix seconds): what is due by then is done, so a
/// test moves this clock rather than the stored schedule.
pub async fn scheduled_run_at(state: &AppState, now: i64) -> Result<(usize, usize)> {
    const PER_RUN: usize = 500;
    // Before rotating, so no claim of this run races the pass; a failure is retried next run.
    if let Err(e) = reseal(state, now).await {
        tracing::warn!(error = %e, "the broker's format-1 sealed values are not all rebound; retried next run");
    }
    // One client a mount for the whole run: a mount AWS does not answer is given up on once.
    let mut clouds = MountClouds::default();
    let rotated = rotate_due(state, &mut clouds, PER_RUN, now).await?;
    let with_tokens = tokens::revoke_pending(state, now).await?;
    let revoked = leases::revoke_expired(state, &mut clouds, PER_RUN, now).await?;
    let min_age = state.config.broker_rollback_min_age.as_secs() as i64;
    let rolled_back = intents::roll_back_due(state, &mut clouds, now, min_age, PER_RUN).await?;
    Ok((rotated, with_tokens + revoked + rolled_back))
}

/// Rebinds every format-1 sealed value of the broker (mount root keys, static-role keys) to its
/// record, up to [`RESEAL_PER_RUN`] a run, and records when none is left, after which a run
/// reads that one item and stops (`None`).
pub async fn reseal(state: &AppState, now: i64) -> Result<Option<Resealed>> {
    let store = state.store.as_ref();
    if store.get(&keys::broker_resealed()).await?.is_some() {
        return Ok(None);
    }
    let mut tally = Resealed::default();
    for mount in mounts::all(store).await? {
        config::reseal_root_key(state, &mount, &mut tally).await?;
        statics::reseal_keys(state, &mount, RESEAL_PER_RUN, &mut tally).await?;
    }
    let Resealed { rewritten, unreadable, left } = tally;
    if tally.finished() {
        let marker = json!({"finished_at": now, "rewritten": rewritten, "unreadable": unreadable});
        store.put(Item::from_value(keys::broker_resealed(), &marker)?, Condition::Always).await?;
        if rewritten + unreadable > 0 {
            tracing::info!(
            rewritten,
            unreadable,
            "reseal finished: the broker's sealed values are all bound (LegacySealedValues=Resealed may be deployed)"
        );
        } else {
            tracing::debug!("reseal: nothing sealed in format 1; the pass is done");
        }
    } else {
        tracing::info!(rewritten, left, "reseal: the broker's format-1 sealed values are being rebound");
    }
    Ok(Some(tally))
}

/// Rotates up to `limit` static roles that are due; returns how many were rotated. The root
/// configuration and AWS client of each mount are looked up once per run, not once per role.
async fn rotate_due(state: &AppState, clouds: &mut MountClouds, limit: usize, now: i64) -> Result<usize> {
    let due = schedule::due(state.store.as_ref(), statics::SCHEDULE_PARTITION, now, limit).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let mounts = mounts::all(state.store.as_ref()).await?;
    let mut rotated = 0;
    for found in due {
        let role: StaticRole = found.parse()?;
        let mount = mounts.iter().find(|m| m.uuid == role.mount_uuid);
        match rotate(state, role, mount, clouds, now).await {
            Ok(true) => rotated += 1,
            Ok(false) => {}
            Err((name, e)) => tracing::warn!(role = %name, error = %e, "static role not rotated; retried next run"),
        }
    }
    Ok(rotated)
}

/// Claims a due role (conditional on its schedule being unchanged, with a write-ahead
/// [`Claim`] of the user's keys) and rotates its key. A lost claim, or a role whose mount is
/// gone, is `Ok(false)`; a failure leaves the stored key as it was and the role due at once, its
/// claim kept, so the next run deletes a key whose answer was lost before it rotates again.
async fn rotate(
    state: &AppState,
    role: StaticRole,
    mount: Option<&Mount>,
    clouds: &mut MountClouds,
    now: i64,
) -> std::result::Result<bool, (String, BrokerError)> {
    let name = role.name.clone();
    let fail = |e: BrokerError| (name.clone(), e);
    let period = role.rotation_period as i64;
    if role.is_being_written() {
        // A written role is due once its claim has expired: the write that claimed it died, so
        // its claim is rolled back. Until then the role rotates from the schedule the write sets.
        let Some(mount) = mount.filter(|_| static_claims::expired(state, &role, now)) else { return Ok(false) };
        let cloud = clouds.get(state, mount).await.map_err(fail)?;
        static_claims::roll_back(state.store.as_ref(), &cloud, &role).await.map_err(fail)?;
        return Ok(false);
    }
    // A user the deployment no longer allows gets no new key; the role stays, moved on a
    // period, and rotates again once the list allows its user. So does a role whose mount is
    // gone, which unmounting removes.
    let Some(mount) = mount.filter(|_| statics::user_allowed(state, &role)) else {
        if mount.is_some() {
            tracing::warn!(
                role = %name,
                user = %role.username,
                "static role not rotated: its IAM user is not allowed by this deployment (HANGAR_BROKER_STATIC_USERS)"
            );
        }
        let moved = StaticRole { next_rotation: now + period, ..role.clone() };
        let _ = state.store.put(statics::item(&moved).map_err(fail)?, unchanged(&role)).await;
        return Ok(false);
    };
    let cloud = clouds.get(state, mount).await.map_err(fail)?;
    let mut role = role;
    if role.claim.is_some() {
        // A rotation that died after `CreateAccessKey`: the key nobody holds goes first.
        static_claims::roll_back(state.store.as_ref(), &cloud, &role).await.map_err(fail)?;
        match statics::load(state.store.as_ref(), mount, &name).await.map_err(fail)? {
            Some(fresh) if fresh.claim.is_none() && !fresh.is_being_written() => role = fresh,
            _ => return Ok(false),
        }
    }
    statics::check_same_user(&cloud, &role).await.map_err(fail)?;
    let keys_before = cloud.list_access_keys(Some(&role.username)).await.map_err(|e| fail(e.into()))?;
    let ids = keys_before.iter().map(|key| key.id.clone()).collect();
    let claimed = StaticRole {
        next_rotation: now + period,
        claim: Some(Claim { at: now, keys_before: ids, replaced: None }),
        ..role.clone()
    };
    // On the key read too, so a claim never writes back a key the reseal pass has rebound.
    match state.store.put(statics::item(&claimed).map_err(fail)?, unchanged(&role)).await {
        Err(e) if e.is_condition_failed() => return Ok(false),
        other => other.map_err(|e| fail(e.into()))?,
    }
    let made = statics::new_key_beside(&cloud, &role.username, keys_before, Some(&role.access_key)).await;
    let stored = match made {
        Ok(key) => store_rotated(state, &cloud, &claimed, &role, key).await,
        Err(e) => Err(e),
    };
    match stored {
        Ok(()) => Ok(true),
        Err(e) => {
            // Due again at once, its claim kept: the next run deletes what this one may have made.
            let retry = StaticRole { next_rotation: now, ..claimed.clone() };
            if let Ok(written) = statics::item(&retry) {
                let _ = state.store.put(written, unchanged(&claimed)).await;
            }
            Err(fail(e))
        }
    }
}

/// Stores `key` as the role's (the one it had becomes its previous), over the claimed role as
/// read; a key that cannot be stored is deleted (the claim keeps it, if that fails too).
async fn store_rotated(
    state: &AppState,
    cloud: &crate::aws::SharedCloud,
    claimed: &StaticRole,
    role: &StaticRole,
    key: crate::aws::AccessKey,
) -> Result<()> {
    let stored = async {
        let context = statics::key_context(&role.mount_uuid, &role.name);
        let next = StaticRole {
            access_key: key.id.clone(),
            previous_access_key: Some(role.access_key.clone()),
            sealed_secret_key: state.sealer.seal_for(&context, &key.secret).await?,
            claim: None,
            ..claimed.clone()
        };
        // Deleted or rewritten meanwhile: the new key is nobody's.
        state.store.put(statics::item(&next)?, unchanged(claimed)).await?;
        Ok::<_, BrokerError>(())
    }
    .await;
    if stored.is_err() {
        if let Err(undo) = cloud.delete_access_key(Some(&role.username), &key.id).await {
            tracing::warn!(role = %role.name, key = %key.id, error = %undo, "an unstored rotated key could not be deleted; the claim keeps it");
        }
    }
    stored
}

/// The condition that a role's schedule and key are as read.
fn unchanged(role: &StaticRole) -> Condition {
    Condition::equals("next_rotation", role.next_rotation)
        .and(Condition::equals("sealed_secret_key", role.sealed_secret_key.clone()))
}
