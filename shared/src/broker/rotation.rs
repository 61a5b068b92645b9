//! The scheduled job (function `key-rotation`, dev-server's timer): static roles that are due
//! get a new key, token revocations left unfinished are continued, and expired leases are
//! revoked.
//!
//! A due role is claimed by moving its next rotation forward with a conditional write, so two
//! overlapping runs never rotate it twice; the new key replaces the stored one only once it
//! exists, so a role always keeps a working key.

use super::config::MountClouds;
use super::error::{BrokerError, Result};
use super::leases;
use super::mounts::{self, Mount};
use super::statics::{self, StaticRole};
use super::tokens;
use crate::state::AppState;
use crate::store::{schedule, Condition};

/// One run of the scheduled job: static roles that are due, unfinished token revocations, then
/// expired leases. Returns how many roles were rotated and how many leases revoked.
pub async fn scheduled_run(state: &AppState) -> Result<(usize, usize)> {
    scheduled_run_at(state, chrono::Utc::now().timestamp()).await
}

/// The same run as if the time were `now` (unix seconds): what is due by then is done, so a
/// test moves this clock rather than the stored schedule.
pub async fn scheduled_run_at(state: &AppState, now: i64) -> Result<(usize, usize)> {
    const PER_RUN: usize = 500;
    let rotated = rotate_due(state, PER_RUN, now).await?;
    let with_tokens = tokens::revoke_pending(state, now).await?;
    let revoked = leases::revoke_expired(state, PER_RUN, now).await?;
    Ok((rotated, with_tokens + revoked))
}

/// Rotates up to `limit` static roles that are due; returns how many were rotated. The root
/// configuration and AWS client of each mount are looked up once per run, not once per role.
async fn rotate_due(state: &AppState, limit: usize, now: i64) -> Result<usize> {
    let due = schedule::due(state.store.as_ref(), statics::SCHEDULE_PARTITION, now, limit).await?;
    if due.is_empty() {
        return Ok(0);
    }
    let mounts = mounts::all(state.store.as_ref()).await?;
    let mut clouds = MountClouds::default();
    let mut rotated = 0;
    for found in due {
        let role: StaticRole = found.parse()?;
        let mount = mounts.iter().find(|m| m.uuid == role.mount_uuid);
        match rotate(state, role, mount, &mut clouds, now).await {
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
    let mut claimed = role.clone();
    claimed.next_rotation = now + role.rotation_period as i64;
    let claim = statics::item(&claimed).map_err(fail)?;
    match state.store.put(claim, Condition::equals("next_rotation", role.next_rotation)).await {
        Err(e) if e.is_condition_failed() => return Ok(false),
        other => other.map_err(|e| fail(e.into()))?,
    }
    let Some(mount) = mount else { return Ok(false) };
    let rotated: Result<StaticRole> = async {
        let cloud = clouds.get(state, mount).await?;
        let key = statics::new_key(&cloud, &role.username, Some(&role.access_key)).await?;
        let mut next = claimed.clone();
        next.access_key = key.id;
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
                let _ = state
                    .store
                    .put(written, Condition::equals("next_rotation", now + role.rotation_period as i64))
                    .await;
            }
            Err(fail(e))
        }
    }
}
