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
use super::statics::{self, StaticRole};
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
        tracing::info!(
            rewritten,
            unreadable,
            "reseal finished: the broker's sealed values are all bound (LegacySealedValues=Resealed may be deployed)"
        );
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

/// Claims a due role (conditional on its schedule being unchanged) and rotates its key. A lost
/// claim, or a role whose mount is gone, is `Ok(false)`; a failure leaves the stored key as it
/// was and reschedules soon.
async fn rotate(
    state: &AppState,
    role: StaticRole,
    mount: Option<&Mount>,
    clouds: &mut MountClouds,
    now: i64,
) -> std::result::Result<bool, (String, BrokerError)> {
    let name = role.name.clone();
    let fail = |e: BrokerError| (name.clone(), e);
    if role.is_being_written() {
        // A claimed role is due once its claim has expired: the write that claimed it died, so
        // its claim is rolled back. Until then the role rotates from the schedule the write sets.
        let Some(mount) = mount.filter(|_| statics::claim_expired(state, &role, now)) else { return Ok(false) };
        let cloud = clouds.get(state, mount).await.map_err(fail)?;
        statics::roll_back(state, &cloud, &role).await.map_err(fail)?;
        return Ok(false);
    }
    let mut claimed = role.clone();
    claimed.next_rotation = now + role.rotation_period as i64;
    let claim = statics::item(&claimed).map_err(fail)?;
    // On the key read too, so a claim never writes back a key the reseal pass has rebound.
    let unchanged = Condition::equals("next_rotation", role.next_rotation)
        .and(Condition::equals("sealed_secret_key", role.sealed_secret_key.clone()));
    match state.store.put(claim, unchanged).await {
        Err(e) if e.is_condition_failed() => return Ok(false),
        other => other.map_err(|e| fail(e.into()))?,
    }
    let Some(mount) = mount else { return Ok(false) };
    // A user the deployment no longer allows gets no new key; the role stays, claimed for a
    // period, and rotates again once the list allows its user.
    if !statics::user_allowed(state, &role) {
        tracing::warn!(
            role = %name,
            user = %role.username,
            "static role not rotated: its IAM user is not allowed by this deployment (HANGAR_BROKER_STATIC_USERS)"
        );
        return Ok(false);
    }
    let rotated: Result<StaticRole> = async {
        let cloud = clouds.get(state, mount).await?;
        statics::check_same_user(&cloud, &role).await?;
        let key = statics::new_key(&cloud, &role.username, Some(&role.access_key)).await?;
        let mut next = claimed.clone();
        next.previous_access_key = Some(std::mem::replace(&mut next.access_key, key.id));
        let context = statics::key_context(&next.mount_uuid, &next.name);
        next.sealed_secret_key = state.sealer.seal_for(&context, &key.secret).await?;
        Ok(next)
    }
    .await;
    match rotated {
        Ok(next) => {
            let written = statics::item(&next).map_err(fail)?;
            state
                .store
                .put(written, Condition::equals("next_rotation", claimed.next_rotation))
                .await
                .map_err(|e| fail(e.into()))?;
            Ok(true)
        }
        Err(e) => {
            // Retry on the next run rather than a whole period later.
            let mut retry = claimed;
            retry.next_rotation = now;
            if let Ok(written) = statics::item(&retry) {
                let claim = Condition::equals("next_rotation", now + role.rotation_period as i64)
                    .and(Condition::equals("sealed_secret_key", role.sealed_secret_key.clone()));
                let _ = state.store.put(written, claim).await;
            }
            Err(fail(e))
        }
    }
}
