//! The embedded adapter: one SQLite file in WAL mode. Writes run in `BEGIN IMMEDIATE`
//! transactions, so conditions and the writes they guard are atomic across threads and
//! across processes sharing the file (the functions under `cargo lambda watch`).
//!
//! Opened for one process alone ([`SqliteStore::open_exclusive`], dev-server's default), the
//! file is locked once, for as long as one of the process's connections to it is open (SQLite's
//! `unix-excl` VFS), and the WAL's index lives in memory: a read transaction then takes no lock
//! another process could see.
//! Shared, each one takes and releases a lock on the index's shared memory file, two `fcntl`
//! calls under a mutex that every thread of the process contends for (BENCHMARKS.md, "Warm
//! requests").

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params_from_iter, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde_json::{Map, Value};

use super::{
    apply_ops, expires_at, index_key, now_epoch, validate_transaction, Condition, Cursor, Index, Item, ItemStore, Key,
    Page, Query, StoreError, UpdateOp, Write,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS items (
    pk TEXT NOT NULL,
    sk TEXT NOT NULL,
    gsi1pk TEXT, gsi1sk TEXT,
    gsi2pk TEXT, gsi2sk TEXT,
    ttl INTEGER,
    attrs TEXT NOT NULL,
    PRIMARY KEY (pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_gsi1 ON items (gsi1pk, gsi1sk, pk, sk) WHERE gsi1pk IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_gsi2 ON items (gsi2pk, gsi2sk, pk, sk) WHERE gsi2pk IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_ttl ON items (ttl) WHERE ttl IS NOT NULL;
";

/// Sorts after any character a key uses, so `[prefix, prefix + MAX)` is the prefix's range.
const PREFIX_END: char = '\u{10FFFF}';

#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Pool>,
}

struct Pool {
    path: PathBuf,
    exclusive: bool,
    idle: Mutex<Vec<Connection>>,
    /// Opened alone, a connection never lent out: the process's lock lasts while one of its
    /// connections is open, so a connection dropped by a panic in `work` cannot release it.
    _holder: Option<Mutex<Connection>>,
}

/// How long an exclusive open waits for another process to let go of the file: long enough
/// for one that is stopping (a restart), short enough that a second server on the same data
/// says so at once.
const EXCLUSIVE_WAIT: Duration = Duration::from_secs(1);

/// How long a statement waits for another writer's lock before failing.
const BUSY_WAIT: Duration = Duration::from_secs(10);

impl SqliteStore {
    /// Opens (creating if needed) the store file, shared with any other process that opens it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path.as_ref(), false)
    }

    /// Opens (creating if needed) the store file for this process alone: other stores of this
    /// process may open it too, another process may not while this one runs. Refused when
    /// another process has the file open.
    pub fn open_exclusive(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path.as_ref(), true)
    }

    fn open_with(path: &Path, exclusive: bool) -> Result<Self, StoreError> {
        // The first statement takes an exclusive open's lock for the process.
        let wait = if exclusive { EXCLUSIVE_WAIT } else { BUSY_WAIT };
        let conn = connect(path, exclusive, wait)
            .and_then(|conn| conn.execute_batch(SCHEMA).map(|()| conn))
            .map_err(|e| refused(path, exclusive, e))?;
        conn.busy_timeout(BUSY_WAIT).map_err(StoreError::backend)?;
        conn.execute("DELETE FROM items WHERE ttl IS NOT NULL AND ttl <= ?1", [now_epoch()])
            .map_err(StoreError::backend)?;
        let (idle, holder) = if exclusive { (vec![], Some(Mutex::new(conn))) } else { (vec![conn], None) };
        let pool = Pool { path: path.to_path_buf(), exclusive, idle: Mutex::new(idle), _holder: holder };
        Ok(Self { inner: Arc::new(pool) })
    }

    /// Runs `work` on a pooled connection on a blocking thread: for writes, which may wait
    /// for another writer's lock.
    async fn with_conn<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let pool = self.inner.clone();
        tokio::task::spawn_blocking(move || pool.run(work)).await.map_err(StoreError::backend)?
    }

    /// Runs a read right here: in WAL mode readers never wait for a lock, and a point read or
    /// a page takes microseconds, less than handing it to a blocking thread would.
    fn read_now<T>(&self, work: impl FnOnce(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.inner.run(work)
    }

    /// Runs `work` inside one immediate (write-locking) transaction.
    async fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.with_conn(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(StoreError::backend)?;
            let out = work(&tx)?;
            tx.commit().map_err(StoreError::backend)?;
            Ok(out)
        })
        .await
    }
}

impl Pool {
    fn run<T>(&self, work: impl FnOnce(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let idle = self.idle.lock().expect("pool lock").pop();
        let mut conn = match idle {
            Some(conn) => conn,
            None => connect(&self.path, self.exclusive, BUSY_WAIT).map_err(StoreError::backend)?,
        };
        let result = work(&mut conn);
        self.idle.lock().expect("pool lock").push(conn);
        result
    }
}

/// Why the store file could not be opened. Writers hold it for milliseconds: still locked
/// after the wait, it is held by a process that opened it alone, or this one asks for it alone.
fn refused(path: &Path, exclusive: bool, e: rusqlite::Error) -> StoreError {
    if e.sqlite_error_code() != Some(rusqlite::ErrorCode::DatabaseBusy) {
        return StoreError::backend(e);
    }
    let path = path.display();
    StoreError::Backend(if exclusive {
        format!(
            "{path} is in use by another process, and this one asks for it alone: stop the other, \
             or share the file (dev-server's --shared-store)"
        )
    } else {
        format!(
            "{path} is held by another process that opened it alone (dev-server does, unless \
             started with --shared-store)"
        )
    })
}

/// A connection in WAL mode that waits up to `wait` for another writer's lock.
fn connect(path: &Path, exclusive: bool, wait: Duration) -> rusqlite::Result<Connection> {
    let conn = if exclusive {
        Connection::open_with_flags_and_vfs(path, OpenFlags::default(), c"unix-excl")?
    } else {
        Connection::open(path)?
    };
    conn.busy_timeout(wait)?;
    // Room for every statement Hangar runs (each query shape is its own), so none is evicted
    // and parsed again; rusqlite keeps 16 by default.
    conn.set_prepared_statement_cache_capacity(64);
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF;")?;
    Ok(conn)
}

/// Runs a statement without parameters or rows (BEGIN, COMMIT), prepared once per connection.
fn run_cached(conn: &Connection, sql: &str) -> Result<(), StoreError> {
    conn.prepare_cached(sql).and_then(|mut statement| statement.execute([])).map(drop).map_err(StoreError::backend)
}

/// A point read. Cached: preparing it costs more than the read itself.
const READ: &str = "SELECT attrs FROM items WHERE pk = ?1 AND sk = ?2 AND (ttl IS NULL OR ttl > ?3)";

/// The item at `key` unless absent or expired by `now` (unix seconds).
fn read(conn: &Connection, key: &Key, now: i64) -> Result<Option<Item>, StoreError> {
    Ok(read_all(conn, std::slice::from_ref(key), now)?.pop().flatten())
}

/// The items at `keys`, in order, each absent if missing or expired by `now`, read with one
/// statement taken from rusqlite's cache once for the batch (finding it hashes its text).
fn read_all(conn: &Connection, keys: &[Key], now: i64) -> Result<Vec<Option<Item>>, StoreError> {
    let mut statement = conn.prepare_cached(READ).map_err(StoreError::backend)?;
    keys.iter()
        .map(|key| statement.query_row((&key.pk, &key.sk, now), |row| item_at(row, 0, key.clone())).optional())
        .collect::<rusqlite::Result<_>>()
        .map_err(StoreError::backend)
}

/// The item at `key` whose attributes are the JSON text in `column`, left unparsed: its reader
/// parses the text into the type it wants (`Item::parse`).
fn item_at(row: &rusqlite::Row<'_>, column: usize, key: Key) -> rusqlite::Result<Item> {
    let json = row
        .get_ref(column)?
        .as_str()
        .map_err(|err| rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(err)))?;
    Ok(Item::stored(key, json))
}

fn store(conn: &Connection, item: &Item) -> Result<(), StoreError> {
    let attrs = item.attrs()?;
    let index_col = |index: Index, part: usize| {
        index_key(&attrs, index).map(|(pk, sk)| if part == 0 { pk.to_owned() } else { sk.to_owned() })
    };
    let mut statement = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO items (pk, sk, gsi1pk, gsi1sk, gsi2pk, gsi2sk, ttl, attrs)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(StoreError::backend)?;
    statement
        .execute((
            &item.key.pk,
            &item.key.sk,
            index_col(Index::Gsi1, 0),
            index_col(Index::Gsi1, 1),
            index_col(Index::Gsi2, 0),
            index_col(Index::Gsi2, 1),
            expires_at(&attrs),
            serde_json::to_string(&*attrs).map_err(StoreError::backend)?,
        ))
        .map_err(StoreError::backend)?;
    Ok(())
}

fn remove(conn: &Connection, key: &Key) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM items WHERE pk = ?1 AND sk = ?2")
        .and_then(|mut statement| statement.execute((&key.pk, &key.sk)))
        .map_err(StoreError::backend)?;
    Ok(())
}

fn check(
    conn: &Connection,
    key: &Key,
    condition: &Condition,
    write: Option<usize>,
) -> Result<Option<Item>, StoreError> {
    // Parsed once here, for the condition and for what the write does with the stored item.
    let stored = read(conn, key, now_epoch())?.map(parsed).transpose()?;
    let attrs = stored.as_ref().map(Item::attrs).transpose()?;
    if condition.holds(attrs.as_deref()) {
        Ok(stored)
    } else {
        Err(StoreError::ConditionFailed { write })
    }
}

/// The item with its attributes parsed into a map.
fn parsed(item: Item) -> Result<Item, StoreError> {
    let key = item.key.clone();
    Ok(Item::new(key, item.into_attrs()?))
}

fn updated(key: &Key, stored: Option<Item>, ops: &[UpdateOp]) -> Result<Item, StoreError> {
    let mut attrs = stored.map(Item::into_attrs).transpose()?.unwrap_or_default();
    apply_ops(&mut attrs, ops)?;
    Ok(Item::new(key.clone(), attrs))
}

/// Applies one write of a transaction (or a single write, with `position` None).
fn apply(conn: &Connection, write: &Write, position: Option<usize>) -> Result<Option<Item>, StoreError> {
    match write {
        Write::Put { item, condition } => {
            check(conn, &item.key, condition, position)?;
            store(conn, item)?;
            Ok(Some(item.clone()))
        }
        Write::Update { key, ops, condition } => {
            let stored = check(conn, key, condition, position)?;
            let item = updated(key, stored, ops)?;
            store(conn, &item)?;
            Ok(Some(item))
        }
        Write::Delete { key, condition } => {
            let stored = check(conn, key, condition, position)?;
            remove(conn, key)?;
            Ok(stored)
        }
        Write::Check { key, condition } => {
            check(conn, key, condition, position)?;
            Ok(None)
        }
    }
}

/// The columns a query reads its partition and sort key from.
fn columns(index: Option<Index>) -> (&'static str, &'static str) {
    match index {
        None => ("pk", "sk"),
        Some(Index::Gsi1) => ("gsi1pk", "gsi1sk"),
        Some(Index::Gsi2) => ("gsi2pk", "gsi2sk"),
    }
}

fn run_query(conn: &Connection, query: &Query) -> Result<Page, StoreError> {
    let (part_col, sort_col) = columns(query.index);
    let mut sql =
        format!("SELECT pk, sk, attrs, {sort_col} FROM items WHERE {part_col} = ?1 AND (ttl IS NULL OR ttl > ?2)");
    let mut params: Vec<rusqlite::types::Value> = vec![query.partition.clone().into(), now_epoch().into()];
    if !query.sk_prefix.is_empty() {
        params.push(query.sk_prefix.clone().into());
        params.push(format!("{}{PREFIX_END}", query.sk_prefix).into());
        sql += &format!(" AND {sort_col} >= ?{} AND {sort_col} < ?{}", params.len() - 1, params.len());
    }
    let (cmp, order) = if query.reverse { ("<", "DESC") } else { (">", "ASC") };
    if let Some(cursor) = &query.cursor {
        let position = cursor.decode()?;
        let field = |name: &str| -> Result<String, StoreError> {
            position.get(name).and_then(Value::as_str).map(str::to_owned).ok_or(StoreError::InvalidCursor)
        };
        let (pk, sk) = (field("pk")?, field("sk")?);
        if query.index.is_some() {
            params.extend([field("isk")?.into(), pk.into(), sk.into()]);
            let n = params.len();
            sql += &format!(" AND ({sort_col}, pk, sk) {cmp} (?{}, ?{}, ?{n})", n - 2, n - 1);
        } else {
            params.push(sk.into());
            sql += &format!(" AND sk {cmp} ?{}", params.len());
        }
    }
    let tie_break = if query.index.is_some() { format!(", pk {order}, sk {order}") } else { String::new() };
    sql += &format!(" ORDER BY {sort_col} {order}{tie_break} LIMIT {}", query.limit + 1);

    let mut statement = conn.prepare_cached(&sql).map_err(StoreError::backend)?;
    let mut rows = statement.query(params_from_iter(params)).map_err(StoreError::backend)?;
    let mut items = Vec::new();
    let mut last_sort = String::new();
    let mut more = false;
    while let Some(row) = rows.next().map_err(StoreError::backend)? {
        if items.len() == query.limit {
            more = true;
            break;
        }
        let key = Key::new(
            row.get::<_, String>(0).map_err(StoreError::backend)?,
            row.get::<_, String>(1).map_err(StoreError::backend)?,
        );
        let item = item_at(row, 2, key).map_err(StoreError::backend)?;
        last_sort = row.get(3).map_err(StoreError::backend)?;
        items.push(item);
    }
    let next = match (more, items.last()) {
        (true, Some(last)) => {
            let mut position = Map::new();
            position.insert("pk".into(), last.key.pk.clone().into());
            position.insert("sk".into(), last.key.sk.clone().into());
            if query.index.is_some() {
                position.insert("isk".into(), last_sort.into());
            }
            Some(Cursor::encode(&position))
        }
        _ => None,
    };
    Ok(Page { items, next })
}

#[async_trait]
impl ItemStore for SqliteStore {
    async fn get(&self, key: &Key) -> Result<Option<Item>, StoreError> {
        self.read_now(|conn| read(conn, key, now_epoch()))
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, StoreError> {
        self.read_now(|conn| {
            // One read transaction for the batch: SQLite takes its WAL read lock once, not once
            // per key, and the items are one snapshot. BEGIN and its end are cached statements
            // too: rusqlite's `transaction()` parses them again each time, which cost more than
            // the reads in a profile. (One statement for the batch, the keys as a JSON array
            // joined to the table, cost more: SQLite's extraction of the keys from the JSON
            // took more than the point reads it saved.)
            run_cached(conn, "BEGIN")?;
            let items = read_all(conn, keys, now_epoch());
            run_cached(conn, if items.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
            items
        })
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        self.write(move |tx| apply(tx, &Write::Put { item, condition }, None).map(drop)).await
    }

    async fn update(&self, key: &Key, ops: Vec<UpdateOp>, condition: Condition) -> Result<Item, StoreError> {
        let key = key.clone();
        self.write(move |tx| {
            let item = apply(tx, &Write::Update { key, ops, condition }, None)?;
            Ok(item.expect("an update always yields the item"))
        })
        .await
    }

    async fn delete(&self, key: &Key, condition: Condition) -> Result<Option<Item>, StoreError> {
        let key = key.clone();
        self.write(move |tx| apply(tx, &Write::Delete { key, condition }, None)).await
    }

    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.read_now(|conn| run_query(conn, &query))
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        validate_transaction(&writes)?;
        // Conditions are all checked against the state before the transaction, as DynamoDB does;
        // writes touch distinct keys, so checking each just before applying it is equivalent.
        self.write(move |tx| {
            for (position, write) in writes.iter().enumerate() {
                apply(tx, write, Some(position))?;
            }
            Ok(())
        })
        .await
    }
}
