//! Schedule partitions: GSI1 partitions ordered by time (the broker's static roles by next
//! rotation, its leases by expiry), so that the scheduled job reads only what is due.

use super::{Index, Item, ItemStore, Query, StoreError, UpdateOp};

/// The sort key of an item in a schedule partition: the unix time, zero-padded so that text
/// order is time order, then what makes the key unique.
pub fn sort_key(at: i64, unique: &str) -> String {
    format!("{at:012}#{unique}")
}

/// The update that moves an item already in a schedule partition to a new time.
pub fn reschedule(at: i64, unique: &str) -> UpdateOp {
    UpdateOp::set_index_sort_key(Index::Gsi1, sort_key(at, unique))
}

/// The items of a schedule partition that are due by `now`, oldest first, at most `limit`. Read
/// in small pages that stop at the first item not yet due, so a run reads what is due plus at
/// most one page, however many items are scheduled later.
pub async fn due(store: &dyn ItemStore, partition: &str, now: i64, limit: usize) -> Result<Vec<Item>, StoreError> {
    const PAGE: usize = 25;
    let due_by_now = |item: &Item| -> Result<bool, StoreError> {
        let at = item.index_key(Index::Gsi1)?.and_then(|(_, sort)| sort.split('#').next()?.parse::<i64>().ok());
        Ok(at.is_some_and(|at| at <= now))
    };
    let mut query = Query::index(Index::Gsi1, partition, "").limit(PAGE.min(limit));
    let mut due = Vec::new();
    loop {
        let page = store.query(query.clone()).await?;
        let (read, before) = (page.items.len(), due.len());
        for item in page.items {
            if !due_by_now(&item)? {
                break;
            }
            due.push(item);
        }
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

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::store::{keys, Condition, SqliteStore};

    async fn scheduled(store: &SqliteStore, times: impl Iterator<Item = i64>) {
        for (n, at) in times.enumerate() {
            let item = Item::new(keys::mount_static_role("mount", &n.to_string()), Default::default());
            let item = item.with_index(Index::Gsi1, "SCHEDULE", sort_key(at, &n.to_string()));
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
                    .map(|item| {
                        item.index_key(Index::Gsi1).unwrap().unwrap().1.split('#').next().unwrap().parse().unwrap()
                    })
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
