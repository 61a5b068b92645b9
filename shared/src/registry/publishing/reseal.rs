//! The registry's share of rebinding values sealed before contexts existed (format 1, which any
//! function allowed the legacy KMS context could open): every organization's VCS credentials
//! (OAuth tokens) and its modules' webhook secrets, sealed again bound to their records. Run by
//! `registry-sync` (and dev-server's timer) until it has finished once, which it records; from
//! then on a run reads that one item.

use serde_json::Value;

use crate::accounts::oauth;
use crate::registry::error::Result;
use crate::seal::{self, Rebound, Resealed, SealContext, RESEAL_PER_RUN};
use crate::state::AppState;
use crate::store::{keys, query_all, Condition, Item, Query, UpdateOp};

/// Rebinds up to [`RESEAL_PER_RUN`] format-1 values a run, and records when none is left: `None`
/// when the pass had finished before.
pub async fn reseal(state: &AppState, now: i64) -> Result<Option<Resealed>> {
    let store = state.store.as_ref();
    if store.get(&keys::registry_resealed()).await?.is_some() {
        return Ok(None);
    }
    let mut tally = Resealed::default();
    let (index, partition, _) = keys::organizations_by_name();
    for organization in query_all(store, Query::index(index, partition, "")).await? {
        let Some(org_id) = organization.attr::<String>("id")? else { continue };
        oauth::reseal_tokens(state, &org_id, RESEAL_PER_RUN, &mut tally).await?;
        webhook_secrets(state, &org_id, RESEAL_PER_RUN, &mut tally).await?;
    }
    let Resealed { rewritten, unreadable, left } = tally;
    if tally.finished() {
        let marker = serde_json::json!({"finished_at": now, "rewritten": rewritten, "unreadable": unreadable});
        store.put(Item::from_value(keys::registry_resealed(), &marker)?, Condition::Always).await?;
        if rewritten + unreadable > 0 {
            tracing::info!(
            rewritten,
            unreadable,
            "reseal finished: the registry's sealed values are all bound (LegacySealedValues=Resealed may be deployed)"
        );
        } else {
            tracing::debug!("reseal: nothing sealed in format 1; the pass is done");
        }
    } else {
        tracing::info!(rewritten, left, "reseal: the registry's format-1 sealed values are being rebound");
    }
    Ok(Some(tally))
}

/// The organization's modules published from VCS whose webhook secret is still in format 1: each
/// rewritten on the module's revision (which it bumps), as every change to a module is, so a
/// concurrent change wins and the value is left for the next run.
async fn webhook_secrets(state: &AppState, org_id: &str, limit: usize, tally: &mut Resealed) -> Result<()> {
    const SEALED: &str = "sealed_webhook_secret";
    for module in query_all(state.store.as_ref(), keys::modules(org_id, None)).await? {
        let attrs = module.attrs()?;
        let Some(repo) = attrs.get("vcs_repo").filter(|repo| repo.is_object()) else { continue };
        let (Some(uuid), Some(sealed)) =
            (repo.get("webhook_uuid").and_then(Value::as_str), repo.get(SEALED).and_then(Value::as_str))
        else {
            continue;
        };
        if tally.rewritten >= limit {
            tally.left += 1;
            continue;
        }
        let outcome = seal::rebind(state.sealer.as_ref(), &SealContext::webhook_secret(uuid), sealed).await?;
        let written = match &outcome {
            Rebound::Rewritten(bound) => {
                let mut rebound = repo.clone();
                rebound[SEALED] = Value::from(bound.as_str());
                let mut ops = vec![UpdateOp::set("vcs_repo", rebound)];
                let unchanged = match attrs.get("revision").and_then(Value::as_u64) {
                    Some(revision) => {
                        ops.push(UpdateOp::set("revision", revision + 1));
                        Condition::equals("revision", revision)
                    }
                    None => Condition::equals("vcs_repo", repo.clone()),
                };
                match state.store.update(&module.key, ops, unchanged).await {
                    Ok(_) => true,
                    Err(e) if e.is_condition_failed() => false,
                    Err(e) => return Err(e.into()),
                }
            }
            Rebound::Unreadable => {
                tracing::warn!(
                    webhook = uuid,
                    "a format-1 sealed webhook secret opens with no key here; left as it is"
                );
                false
            }
            Rebound::Bound => false,
        };
        tally.count(&outcome, written);
    }
    Ok(())
}
