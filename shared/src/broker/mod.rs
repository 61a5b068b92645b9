//! The cloud credential broker (function `credential-broker`): the Vault AWS secrets engine's
//! API under `/v1/{mount}`, Vault's token, policy, mount and lease endpoints under `/v1/sys`
//! and `/v1/auth/token`, and the scheduled rotation of static-role keys (function
//! `key-rotation`).

mod config;
mod credentials;
pub mod duration;
mod engine;
mod error;
mod http;
pub mod leases;
pub mod mounts;
pub mod policies;
pub mod roles;
pub mod seal;
pub mod statics;
mod sys;
pub mod template;
pub mod tokens;

use axum::routing::any;
use axum::Router;
use tower::Layer;

pub use error::BrokerError;

use crate::app::AppState;
use crate::store::{Index, Item, ItemStore, Query};

/// Everything under `/v1`: Vault's format for errors, and `LIST` served as `GET ?list=true`.
pub fn router() -> Router<AppState> {
    let v1 = Router::new()
        .merge(sys::routes())
        .merge(leases::routes())
        .route("/{*path}", any(engine::dispatch))
        .fallback(|| async { BrokerError::NotFound })
        .layer(axum::middleware::from_fn(vault_method_not_allowed));
    Router::new().nest("/v1", v1)
}

/// Serves `LIST` as `GET ?list=true`. It must run before routing (a layer on a router runs
/// after it, when a GET-only route has already refused the verb), so it wraps a whole router.
pub fn with_list_verb(router: Router) -> Router {
    Router::new().fallback_service(axum::middleware::from_fn(http::list_as_get).layer(router))
}

/// axum's bare 405, in Vault's format.
async fn vault_method_not_allowed(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let response = next.run(request).await;
    if response.status() == axum::http::StatusCode::METHOD_NOT_ALLOWED
        && !response.headers().contains_key(axum::http::header::CONTENT_TYPE)
    {
        return axum::response::IntoResponse::into_response(BrokerError::MethodNotAllowed);
    }
    response
}

/// Unmounts a path: revokes its leases, then removes its configuration, roles and leases.
pub(crate) async fn unmount(state: &AppState, path: &str) -> error::Result<()> {
    let path = mounts::normalize(path)?;
    if let Some(mount) = mounts::all(state.store.as_ref()).await?.into_iter().find(|m| m.path == path) {
        leases::revoke_all(state, &mount).await?;
        mounts::delete(state.store.as_ref(), &path).await?;
    }
    Ok(())
}

/// The sort key of an item in a schedule partition (a GSI1 partition ordered by time): the unix
/// time, zero-padded so that text order is time order, then what makes the key unique.
pub(crate) fn schedule_sort_key(at: i64, unique: &str) -> String {
    format!("{at:012}#{unique}")
}

/// The items of a schedule partition that are due by `now`, oldest first, at most `limit`. Read
/// in small pages that stop at the first item not yet due, so a run reads what is due plus at
/// most one page, however many items are scheduled later.
pub(crate) async fn due(store: &dyn ItemStore, partition: &str, now: i64, limit: usize) -> error::Result<Vec<Item>> {
    const PAGE: usize = 25;
    let due_by_now = |item: &Item| {
        let at = item.index_key(Index::Gsi1).and_then(|(_, sort)| sort.split('#').next()?.parse::<i64>().ok());
        at.is_some_and(|at| at <= now)
    };
    let mut query = Query::index(Index::Gsi1, partition, "").limit(PAGE.min(limit));
    let mut due = Vec::new();
    loop {
        let page = store.query(query.clone()).await?;
        let (read, before) = (page.items.len(), due.len());
        due.extend(page.items.into_iter().take_while(due_by_now));
        if due.len() - before < read || due.len() >= limit {
            break;
        }
        match page.next {
            Some(next) => query.cursor = Some(next),
            None => break,
        }
    }
    due.truncate(limit);
    Ok(due)
}

/// One run of the scheduled job: static roles that are due, then expired leases.
pub async fn scheduled_run(state: &AppState) -> error::Result<(usize, usize)> {
    const PER_RUN: usize = 500;
    let rotated = statics::rotate_due(state, PER_RUN).await?;
    let revoked = leases::revoke_expired(state, PER_RUN).await?;
    Ok((rotated, revoked))
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::store::{Condition, Key, SqliteStore};

    async fn scheduled(store: &SqliteStore, times: impl Iterator<Item = i64>) {
        for (n, at) in times.enumerate() {
            let item = Item::new(Key::new(format!("T#{n}"), "T"), Default::default());
            let item = item.with_index(Index::Gsi1, "SCHEDULE", schedule_sort_key(at, &n.to_string()));
            store.put(item, Condition::Always).await.unwrap();
        }
    }

    #[tokio::test]
    async fn due_items_are_read_oldest_first_and_stop_at_the_first_not_due() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("db")).unwrap();
        // 60 items due at 1000..1059, 200 more due later.
        scheduled(&store, (1000..1060).chain(5000..5200)).await;
        let due_by = |now, limit| {
            let store = &store;
            async move {
                due(store, "SCHEDULE", now, limit)
                    .await
                    .unwrap()
                    .iter()
                    .map(|item| item.index_key(Index::Gsi1).unwrap().1.split('#').next().unwrap().parse().unwrap())
                    .collect::<Vec<i64>>()
            }
        };
        assert_eq!(due_by(1059, 500).await, (1000..1060).collect::<Vec<_>>());
        assert_eq!(due_by(1009, 500).await, (1000..1010).collect::<Vec<_>>());
        assert_eq!(due_by(1059, 30).await, (1000..1030).collect::<Vec<_>>());
        assert!(due_by(999, 500).await.is_empty());
        assert_eq!(due_by(9999, 1000).await.len(), 260);
    }
}
