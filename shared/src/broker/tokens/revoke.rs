//! Revoking a token and its descendants, and the leases each holds, within one call's bounds;
//! what is left is marked (unusable at once) and scheduled for the job.

use super::{find, Pointer, ServiceToken};
use crate::broker::error::{BrokerError, Result};
use crate::broker::leases::Revoker;
use crate::state::AppState;
use crate::store::{keys, schedule, Condition, ItemStore, Write};

/// Tokens one revocation call marks revoked (store writes only) before it leaves the rest of the
/// tree to the scheduled job.
pub const REVOKE_TOKENS_PER_CALL: usize = 200;
/// Leases one revocation call revokes: each is about eight IAM calls, and the call must answer
/// within API Gateway's 29 seconds. The rest is left to the scheduled job.
pub const REVOKE_LEASES_PER_CALL: usize = 20;
/// What one run of the scheduled job does of the revocations left to it (it has 300 seconds).
const PENDING_PER_RUN: usize = 100;
const PENDING_TOKENS_PER_RUN: usize = 1000;
const PENDING_LEASES_PER_RUN: usize = 200;

/// How much of a revocation is left to do in this call or run.
struct Budget {
    tokens: usize,
    leases: usize,
}

/// Revokes `token`, its descendants, and the leases each of them holds (`revoke-self`,
/// `auth/token/revoke`). When it answers, all of that is gone, unless the tree was larger than
/// one call's bounds or IAM failed (the answer is then that failure). What is left is the
/// scheduled job's: the tokens reached are unusable at once, and so is any child of theirs (a
/// token whose parent is being revoked is refused); only tokens deeper than that, under a child
/// the bound left unreached, stay usable until the job reaches them.
pub async fn revoke(state: &AppState, token: &ServiceToken) -> Result<()> {
    if token.batch {
        return Err(BrokerError::invalid("batch tokens cannot be revoked"));
    }
    let mut budget = Budget { tokens: REVOKE_TOKENS_PER_CALL, leases: REVOKE_LEASES_PER_CALL };
    let mut revoker = Revoker::default();
    let finished = revoke_tree(state, token.clone(), chrono::Utc::now().timestamp(), &mut budget, &mut revoker).await?;
    if !finished {
        state.work.notify_one();
    }
    // The failure as AWS errors are always answered (the tokens are revoked all the same, and
    // the job retries the credentials), as Vault answers a revocation whose leases failed.
    revoker.failure.map_or(Ok(()), Err)
}

/// `auth/token/revoke`: as [`revoke`], for the token a secret names; none is no error (Vault).
pub async fn revoke_secret(state: &AppState, secret: &str) -> Result<()> {
    match find(state.store.as_ref(), secret).await? {
        Some(token) => revoke(state, &token).await,
        None => Ok(()),
    }
}

/// `auth/token/revoke-accessor`: as [`revoke`], for the token an accessor names.
pub async fn revoke_accessor(state: &AppState, accessor: &str) -> Result<()> {
    let store = state.store.as_ref();
    let invalid = || BrokerError::invalid("invalid accessor");
    let pointer: Pointer = store.get(&keys::service_token_accessor(accessor)).await?.ok_or_else(invalid)?.parse()?;
    let item = store.get(&keys::service_token(&pointer.hash)).await?.ok_or_else(invalid)?;
    revoke(state, &item.parse()?).await
}

/// Continues the revocations left to the scheduled job, oldest first, within one run's bounds;
/// returns how many leases it revoked.
pub async fn revoke_pending(state: &AppState, now: i64) -> Result<usize> {
    let due = schedule::due(state.store.as_ref(), keys::TOKEN_REVOCATION_SCHEDULE, now, PENDING_PER_RUN).await?;
    let more_due = due.len() == PENDING_PER_RUN;
    let mut budget = Budget { tokens: PENDING_TOKENS_PER_RUN, leases: PENDING_LEASES_PER_RUN };
    let mut revoker = Revoker::default();
    for found in due {
        if budget.tokens == 0 || budget.leases == 0 {
            break;
        }
        let token: ServiceToken = found.parse()?;
        if let Err(e) = revoke_tree(state, token.clone(), now, &mut budget, &mut revoker).await {
            tracing::warn!(accessor = %token.accessor, error = %e, "token revocation not finished; retried next run");
        }
    }
    if (more_due || budget.tokens == 0 || budget.leases == 0) && revoker.failure.is_none() {
        // More is due than a run does: dev-server's runner goes again at once (in AWS the
        // schedule's next run picks it up); a failure waits for the next run instead.
        state.work.notify_one();
    }
    Ok(revoker.revoked)
}

/// Revokes a token and its descendants within `budget`: first marks the tree breadth first (the
/// tokens are unusable from then on), then, children before parents, revokes each token's
/// leases and deletes the token once it has neither children nor leases left. True when the
/// whole tree is gone; otherwise what is left is marked, so scheduled, or below a marked token.
async fn revoke_tree(
    state: &AppState,
    top: ServiceToken,
    now: i64,
    budget: &mut Budget,
    revoker: &mut Revoker,
) -> Result<bool> {
    const PAGE: usize = 25;
    let store = state.store.as_ref();
    let Some(top) = mark(store, top, now).await? else { return Ok(true) };
    // The tree as far as the budget reaches: each token, its parent's place, how many children
    // were found under it, and whether all were.
    let mut tree = vec![Node { token: top, parent: None, children: 0, complete: false }];
    let mut next = 0;
    while next < tree.len() {
        let mut query = keys::service_token_children(&tree[next].token.accessor).limit(PAGE);
        // Reads follow from the bound on tokens: a page per token reached, one per 25 marked.
        loop {
            let page = store.query(query.clone()).await?;
            let mut cut = false;
            for found in page.items {
                if budget.tokens == 0 {
                    cut = true;
                    break;
                }
                let Some(child) = mark(store, found.parse()?, now).await? else { continue };
                budget.tokens -= 1;
                tree[next].children += 1;
                tree.push(Node { token: child, parent: Some(next), children: 0, complete: false });
            }
            match (cut, page.next) {
                (false, Some(cursor)) => query.cursor = Some(cursor),
                (false, None) => {
                    tree[next].complete = true;
                    break;
                }
                (true, _) => break,
            }
        }
        next += 1;
    }
    let mut finished = true;
    for at in (0..tree.len()).rev() {
        let node = &tree[at];
        let leases_gone = revoker.revoke_held(state, &node.token.accessor, &mut budget.leases).await?;
        if !(leases_gone && node.complete && node.children == 0) {
            finished = false;
            continue;
        }
        let writes = vec![
            Write::Delete { key: node.token.key(), condition: Condition::Always },
            Write::Delete { key: keys::service_token_accessor(&node.token.accessor), condition: Condition::Always },
        ];
        store.transact(writes).await?;
        if let Some(parent) = node.parent {
            tree[parent].children -= 1;
        }
    }
    Ok(finished)
}

struct Node {
    token: ServiceToken,
    parent: Option<usize>,
    /// Children found and not yet deleted.
    children: usize,
    /// Whether every child was found.
    complete: bool,
}

/// Marks a token revoked (unusable, and scheduled for the job); `None` when it is gone.
async fn mark(store: &dyn ItemStore, token: ServiceToken, now: i64) -> Result<Option<ServiceToken>> {
    if token.revoked_at.is_some() {
        return Ok(Some(token));
    }
    let marked = ServiceToken { revoked_at: Some(now), ..token };
    match store.put(marked.to_item()?, Condition::Exists).await {
        Ok(()) => Ok(Some(marked)),
        Err(e) if e.is_condition_failed() => Ok(None),
        Err(e) => Err(e.into()),
    }
}
