//! The item-store contract: one suite, run against both adapters through the port only, so
//! the SQLite store of local runs behaves as the DynamoDB store of production does. The
//! DynamoDB runs need the moto emulator (see `support`); each test gets a fresh table or file.

use crate::support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use hangar::store::{
    query_all, Condition, Cursor, DynamoStore, Index, Item, Key, Query, SqliteStore, Store, StoreError, Transaction,
    UpdateOp, Write,
};
use serde_json::{json, Value};

/// A store and whatever must outlive it.
struct Fixture {
    store: Store,
    _dir: Option<tempfile::TempDir>,
}

async fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("store.db")).expect("open the SQLite store");
    Fixture { store: Arc::new(store), _dir: Some(dir) }
}

async fn dynamo() -> Fixture {
    let support::Moto { endpoint, sdk } = support::moto().await;
    let dynamo_config =
        aws_sdk_dynamodb::config::Builder::from(&sdk).endpoint_url(one_request_at_a_time(endpoint).await).build();
    let client = aws_sdk_dynamodb::Client::from_conf(dynamo_config);
    let store = DynamoStore::new(client, support::unique_name("hangar-store"));
    store.create_table_if_missing().await.expect("create the table");
    store.create_table_if_missing().await.expect("creating an existing table is a no-op");
    Fixture { store: Arc::new(store), _dir: None }
}

/// A proxy that lets one request at a time into moto. DynamoDB applies each request
/// atomically; moto does not (it takes no lock, and undoes a failed transaction by restoring a
/// copy of the whole table), so concurrent requests could lose each other's writes there. The
/// adapter's own requests still interleave freely, as they do against DynamoDB.
async fn one_request_at_a_time(moto: String) -> String {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
    let address = listener.local_addr().expect("the proxy's address");
    let client = reqwest::Client::new();
    let forward = move |request: axum::extract::Request| {
        let (client, moto) = (client.clone(), moto.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX).await.expect("the request body");
            let url = format!("{moto}{}", parts.uri.path_and_query().map_or("/", |p| p.as_str()));
            let mut headers = parts.headers;
            headers.remove(HOST);
            headers.remove(CONTENT_LENGTH);
            let _turn = TURN.lock().await;
            let response = client.request(parts.method, url).headers(headers).body(body).send().await.expect("moto");
            let (status, mut headers) = (response.status(), response.headers().clone());
            for hop in [CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING] {
                headers.remove(hop);
            }
            (status, headers, response.bytes().await.expect("moto's answer"))
        }
    };
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(forward)).await });
    format!("http://{address}")
}

/// Runs every case once per adapter, as `sqlite::<case>` and `dynamo::<case>`.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let fixture = super::sqlite().await;
                    super::$case(fixture.store.clone()).await;
                }
            )*
        }
        mod dynamo {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                #[ignore = "needs the AWS emulator"]
                async fn $case() {
                    let fixture = super::dynamo().await;
                    super::$case(fixture.store.clone()).await;
                }
            )*
        }
    };
}

contract!(
    get_put_round_trip,
    batch_reads,
    conditional_put,
    equals_and_below_conditions,
    update_operations,
    delete_returns_old_item,
    failed_transaction_writes_nothing,
    partition_pagination,
    index_queries,
    expired_items_are_absent,
    concurrent_conditional_puts,
    concurrent_counter_limit,
    concurrent_unique_claims,
    invalid_cursor,
);

fn attrs(value: Value) -> hangar::store::Attrs {
    match value {
        Value::Object(attrs) => attrs,
        other => panic!("not an object: {other}"),
    }
}

fn item(pk: &str, sk: &str, value: Value) -> Item {
    Item::new(Key::new(pk, sk), attrs(value))
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs() as i64
}

fn assert_condition_failed<T: std::fmt::Debug>(result: Result<T, StoreError>, write: Option<usize>) {
    match result {
        Err(StoreError::ConditionFailed { write: failed }) => assert_eq!(failed, write, "failing write"),
        other => panic!("expected a failed condition, got {other:?}"),
    }
}

async fn get_put_round_trip(store: Store) {
    let key = Key::new("ROUND", "TRIP");
    assert_eq!(store.get(&key).await.unwrap(), None);
    let stored = item(
        "ROUND",
        "TRIP",
        json!({
            "text": "hello", "empty": "", "int": 42, "negative": -7, "big": 1_i64 << 53, "float": 2.5,
            "yes": true, "no": false, "nothing": null,
            "list": [1, "two", [3], {"four": 4}], "map": {"nested": {"deep": "value"}, "n": 1}, "no_list": []
        }),
    )
    .with_index(Index::Gsi1, "G", "g")
    .with_ttl(now() + 3600);
    store.put(stored.clone(), Condition::Always).await.unwrap();
    assert_eq!(store.get(&key).await.unwrap(), Some(stored));

    let replacement = item("ROUND", "TRIP", json!({"only": "this"}));
    store.put(replacement.clone(), Condition::Always).await.unwrap();
    assert_eq!(store.get(&key).await.unwrap(), Some(replacement));
    assert_eq!(store.get(&Key::new("ROUND", "TRIP2")).await.unwrap(), None);
    assert_eq!(store.get(&Key::new("ROUND2", "TRIP")).await.unwrap(), None);
}

/// A batch answers each key in the order asked, a key asked twice twice, and an absent or
/// expired item as absent, whatever the characters of its keys.
async fn batch_reads(store: Store) {
    assert!(store.get_many(&[]).await.unwrap().is_empty());
    let odd = item("BATCH#\"quoted\"\\", "SK ->> 0 [é] \u{1F600}", json!({"n": 1}));
    let plain = item("BATCH", "PLAIN", json!({"n": 2, "list": [1, 2]}));
    let expired = item("BATCH", "EXPIRED", json!({"n": 3})).with_ttl(now() - 60);
    for stored in [&odd, &plain, &expired] {
        store.put(stored.clone(), Condition::Always).await.unwrap();
    }
    let absent = Key::new("BATCH", "ABSENT");
    let wanted = [plain.key.clone(), absent.clone(), odd.key.clone(), expired.key.clone(), plain.key.clone()];
    let found = store.get_many(&wanted).await.unwrap();
    assert_eq!(found, vec![Some(plain.clone()), None, Some(odd.clone()), None, Some(plain)]);
    assert_eq!(store.get_many(&[absent]).await.unwrap(), vec![None]);
}

async fn conditional_put(store: Store) {
    let first = item("USER#1", "PROFILE", json!({"name": "first"}));
    store.put(first.clone(), Condition::NotExists).await.unwrap();
    let second = item("USER#1", "PROFILE", json!({"name": "second"}));
    assert_condition_failed(store.put(second.clone(), Condition::NotExists).await, None);
    assert_eq!(store.get(&first.key).await.unwrap(), Some(first));

    store.put(second.clone(), Condition::Exists).await.unwrap();
    assert_eq!(store.get(&second.key).await.unwrap(), Some(second));
    let absent = item("USER#2", "PROFILE", json!({}));
    assert_condition_failed(store.put(absent.clone(), Condition::Exists).await, None);
    assert_eq!(store.get(&absent.key).await.unwrap(), None);
}

async fn equals_and_below_conditions(store: Store) {
    let key = Key::new("DOOR", "STATE");
    store.put(Item::new(key.clone(), attrs(json!({"state": "open", "gone": null}))), Condition::Always).await.unwrap();
    let close = || vec![UpdateOp::set("state", "closed")];
    store.update(&key, close(), Condition::equals("state", "open")).await.unwrap();
    assert_condition_failed(store.update(&key, close(), Condition::equals("state", "open")).await, None);
    assert_condition_failed(store.update(&key, close(), Condition::equals("missing", "open")).await, None);
    assert_condition_failed(
        store.update(&Key::new("DOOR", "NONE"), close(), Condition::equals("state", "open")).await,
        None,
    );
    assert_eq!(store.get(&Key::new("DOOR", "NONE")).await.unwrap(), None);
    store.update(&key, vec![], Condition::equals("gone", Value::Null)).await.unwrap();
    assert_condition_failed(store.update(&key, vec![], Condition::equals("state", Value::Null)).await, None);

    let either = Condition::Or(vec![Condition::equals("state", "ajar"), Condition::equals("state", "closed")]);
    store.update(&key, vec![], either).await.unwrap();
    let both = Condition::equals("state", "closed").and(Condition::equals("gone", "x"));
    assert_condition_failed(store.update(&key, vec![], both).await, None);
    store.update(&key, vec![], Condition::And(vec![])).await.unwrap();
    assert_condition_failed(store.update(&key, vec![], Condition::Or(vec![])).await, None);
    store.update(&key, vec![], Condition::Or(vec![Condition::Always, Condition::NotExists])).await.unwrap();

    let counter = Key::new("LIMIT", "COUNTER");
    let mut granted = 0;
    for _ in 0..5 {
        match store.update(&counter, vec![UpdateOp::Add("count".into(), 1)], Condition::Below("count".into(), 3)).await
        {
            Ok(item) => {
                granted += 1;
                assert_eq!(item.attrs().unwrap()["count"], json!(granted));
            }
            Err(e) => assert!(e.is_condition_failed(), "{e}"),
        }
    }
    assert_eq!(granted, 3);
    assert_eq!(store.get(&counter).await.unwrap().unwrap().attrs().unwrap()["count"], json!(3));
    let zero_bound = Condition::Below("count".into(), 0);
    assert_condition_failed(store.update(&Key::new("LIMIT", "OTHER"), vec![], zero_bound).await, None);
    assert_condition_failed(store.update(&key, vec![], Condition::Below("state".into(), 10)).await, None);
}

async fn update_operations(store: Store) {
    let key = Key::new("UPDATE", "ME");
    let created = store
        .update(
            &key,
            vec![UpdateOp::set("a", 1), UpdateOp::Add("n".into(), 5), UpdateOp::Remove("x".into())],
            Condition::Always,
        )
        .await
        .unwrap();
    assert_eq!(created, item("UPDATE", "ME", json!({"a": 1, "n": 5})));

    let ops = vec![
        UpdateOp::Add("n".into(), 2),
        UpdateOp::Remove("a".into()),
        UpdateOp::set("b", json!({"k": ["v"]})),
        UpdateOp::set("c", 10),
        UpdateOp::Add("c".into(), 1),
        UpdateOp::Add("d".into(), 1),
        UpdateOp::Add("d".into(), 1),
        UpdateOp::Add("e".into(), 1),
        UpdateOp::set("e", "text"),
        UpdateOp::Remove("n".into()),
        UpdateOp::Add("n".into(), 3),
    ];
    let updated = store.update(&key, ops, Condition::Exists).await.unwrap();
    let expected = item("UPDATE", "ME", json!({"n": 3, "b": {"k": ["v"]}, "c": 11, "d": 2, "e": "text"}));
    assert_eq!(updated, expected);
    assert_eq!(store.get(&key).await.unwrap(), Some(expected.clone()));

    let failed = store.update(&key, vec![UpdateOp::Add("e".into(), 1)], Condition::Always).await;
    assert!(matches!(failed, Err(ref e) if !e.is_condition_failed()), "ADD on a string: {failed:?}");
    assert_eq!(store.get(&key).await.unwrap(), Some(expected));

    let empty = Key::new("UPDATE", "EMPTY");
    assert_eq!(store.update(&empty, vec![], Condition::Always).await.unwrap(), item("UPDATE", "EMPTY", json!({})));
    assert_eq!(store.get(&empty).await.unwrap(), Some(item("UPDATE", "EMPTY", json!({}))));
    let missing = Key::new("UPDATE", "MISSING");
    assert_condition_failed(store.update(&missing, vec![UpdateOp::set("a", 1)], Condition::Exists).await, None);
    assert_eq!(store.get(&missing).await.unwrap(), None);
}

async fn delete_returns_old_item(store: Store) {
    let stored = item("DELETE", "ME", json!({"version": 2}));
    store.put(stored.clone(), Condition::Always).await.unwrap();
    assert_condition_failed(store.delete(&stored.key, Condition::equals("version", 1)).await, None);
    assert_eq!(store.get(&stored.key).await.unwrap(), Some(stored.clone()));
    assert_eq!(store.delete(&stored.key, Condition::equals("version", 2)).await.unwrap(), Some(stored.clone()));
    assert_eq!(store.get(&stored.key).await.unwrap(), None);
    assert_eq!(store.delete(&stored.key, Condition::Always).await.unwrap(), None);
    assert_condition_failed(store.delete(&stored.key, Condition::Exists).await, None);
}

async fn failed_transaction_writes_nothing(store: Store) {
    let b = item("TX", "B", json!({"v": 1}));
    let c = item("TX", "C", json!({"v": 1}));
    store.put(b.clone(), Condition::Always).await.unwrap();
    store.put(c.clone(), Condition::Always).await.unwrap();
    let writes = |d_condition: Condition| {
        vec![
            Write::Put { item: item("TX", "A", json!({"v": 1})), condition: Condition::NotExists },
            Write::Update { key: b.key.clone(), ops: vec![UpdateOp::Add("v".into(), 1)], condition: Condition::Exists },
            Write::Delete { key: c.key.clone(), condition: Condition::equals("v", 1) },
            Write::Check { key: Key::new("TX", "D"), condition: d_condition },
            Write::Update { key: Key::new("TX", "E"), ops: vec![], condition: Condition::Always },
        ]
    };
    assert_condition_failed(store.transact(writes(Condition::Exists)).await, Some(3));
    let mut first_fails = writes(Condition::Always);
    first_fails[0] = Write::Put { item: item("TX", "A", json!({})), condition: Condition::Exists };
    assert_condition_failed(store.transact(first_fails).await, Some(0));
    assert_eq!(store.get(&Key::new("TX", "A")).await.unwrap(), None);
    assert_eq!(store.get(&b.key).await.unwrap(), Some(b.clone()));
    assert_eq!(store.get(&c.key).await.unwrap(), Some(c.clone()));
    assert_eq!(store.get(&Key::new("TX", "E")).await.unwrap(), None);

    store.transact(writes(Condition::NotExists)).await.unwrap();
    assert_eq!(store.get(&Key::new("TX", "A")).await.unwrap(), Some(item("TX", "A", json!({"v": 1}))));
    assert_eq!(store.get(&b.key).await.unwrap(), Some(item("TX", "B", json!({"v": 2}))));
    assert_eq!(store.get(&c.key).await.unwrap(), None);
    assert_eq!(store.get(&Key::new("TX", "E")).await.unwrap(), Some(item("TX", "E", json!({}))));

    let twice = vec![
        Write::Check { key: b.key.clone(), condition: Condition::Always },
        Write::Delete { key: b.key.clone(), condition: Condition::Always },
    ];
    assert!(matches!(store.transact(twice).await, Err(StoreError::Backend(_))));
    let too_many: Vec<_> =
        (0..101).map(|i| Write::Check { key: Key::new("TX", format!("{i}")), condition: Condition::Always }).collect();
    assert!(matches!(store.transact(too_many).await, Err(StoreError::TooManyWrites(101))));
    store.transact(vec![]).await.unwrap();
}

/// Every page of a query, checking that only the last one lacks a `next` and none is empty
/// unless the whole result is.
async fn pages(store: &Store, query: Query) -> Vec<Vec<Item>> {
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let page = store.query(query.clone().after(cursor)).await.unwrap();
        assert!(!page.items.is_empty() || (pages.is_empty() && page.next.is_none()), "empty page with more");
        assert!(page.items.len() <= query.limit);
        pages.push(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return pages,
        }
    }
}

fn sort_keys(items: &[Item]) -> Vec<String> {
    items.iter().map(|item| item.key.sk.clone()).collect()
}

async fn partition_pagination(store: Store) {
    let expected: Vec<String> = (0..57).map(|i| format!("ITEM#{i:03}")).collect();
    let neighbours = ["A", "ITEM", "ITEMS#1", "ITEM$", "Z"];
    for sk in expected.iter().rev().map(String::as_str).chain(neighbours) {
        store.put(item("P", sk, json!({"sk": sk})), Condition::Always).await.unwrap();
    }
    store.put(item("P2", "ITEM#000", json!({})), Condition::Always).await.unwrap();
    store.put(item("Q", "ITEM#001", json!({})), Condition::Always).await.unwrap();

    let forward = pages(&store, Query::partition("P", "ITEM#").limit(10)).await;
    assert_eq!(forward.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 10, 10, 10, 7]);
    assert_eq!(sort_keys(&forward.concat()), expected);
    assert!(forward
        .concat()
        .iter()
        .all(|item| item.key.pk == "P" && item.attrs().unwrap()["sk"] == json!(item.key.sk)));

    let backward = pages(&store, Query::partition("P", "ITEM#").limit(10).reverse(true)).await;
    assert_eq!(backward.len(), 6);
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(sort_keys(&backward.concat()), reversed);

    let exact = pages(&store, Query::partition("P", "ITEM#").limit(57)).await;
    assert_eq!(exact.iter().map(Vec::len).collect::<Vec<_>>(), [57]);
    let whole = query_all(store.as_ref(), Query::partition("P", "").limit(7)).await.unwrap();
    let mut all: Vec<String> = expected.iter().cloned().chain(neighbours.map(String::from)).collect();
    all.sort();
    assert_eq!(sort_keys(&whole), all);
    assert_eq!(pages(&store, Query::partition("NOBODY", "")).await, [Vec::<Item>::new()]);
    assert_eq!(pages(&store, Query::partition("P", "ITEM#1").limit(3)).await.concat().len(), 0);
}

async fn index_queries(store: Store) {
    // Twelve items over three equal index sort keys in GSI1, and the even ones in GSI2.
    for i in 0..12 {
        let mut stored = item(&format!("THING#{i:02}"), "THING", json!({"i": i})).with_index(
            Index::Gsi1,
            "G",
            format!("score#{}", i % 3),
        );
        if i % 2 == 0 {
            stored = stored.with_index(Index::Gsi2, "EVEN", format!("{:02}", 20 - i));
        }
        store.put(stored, Condition::Always).await.unwrap();
    }
    store
        .put(item("OTHER", "THING", json!({})).with_index(Index::Gsi1, "H", "score#0"), Condition::Always)
        .await
        .unwrap();
    store.put(item("NONE", "THING", json!({})), Condition::Always).await.unwrap();

    for reverse in [false, true] {
        let found = pages(&store, Query::index(Index::Gsi1, "G", "score#").limit(5).reverse(reverse)).await.concat();
        let scores: Vec<String> = found.iter().map(|item| item.index_key(Index::Gsi1).unwrap().unwrap().1).collect();
        let mut sorted = scores.clone();
        sorted.sort();
        if reverse {
            sorted.reverse();
        }
        assert_eq!(scores, sorted, "index sort order");
        let keys: BTreeSet<&str> = found.iter().map(|item| item.key.pk.as_str()).collect();
        assert_eq!((found.len(), keys.len()), (12, 12), "each item exactly once");
        for limit in [1, 2, 4] {
            let paged = pages(&store, Query::index(Index::Gsi1, "G", "").limit(limit).reverse(reverse)).await.concat();
            let keys: BTreeSet<&str> = paged.iter().map(|item| item.key.pk.as_str()).collect();
            assert_eq!((paged.len(), keys.len()), (12, 12), "limit {limit}, reverse {reverse}");
        }
    }
    let ones = query_all(store.as_ref(), Query::index(Index::Gsi1, "G", "score#1").limit(2)).await.unwrap();
    assert_eq!(
        ones.iter().map(|item| item.attrs().unwrap()["i"].as_i64().unwrap() % 3).collect::<Vec<_>>(),
        [1, 1, 1, 1]
    );

    let even = pages(&store, Query::index(Index::Gsi2, "EVEN", "").limit(4)).await.concat();
    let order: Vec<i64> = even.iter().map(|item| item.attrs().unwrap()["i"].as_i64().unwrap()).collect();
    assert_eq!(order, [10, 8, 6, 4, 2, 0]);
    let teens = query_all(store.as_ref(), Query::index(Index::Gsi2, "EVEN", "1").reverse(true)).await.unwrap();
    assert_eq!(
        teens.iter().map(|item| item.attrs().unwrap()["i"].as_i64().unwrap()).collect::<Vec<_>>(),
        [2, 4, 6, 8, 10]
    );
    assert!(query_all(store.as_ref(), Query::index(Index::Gsi2, "G", "")).await.unwrap().is_empty());
}

async fn expired_items_are_absent(store: Store) {
    let past = now() - 60;
    let expired = item("TTL", "OLD", json!({"count": 3, "state": "open"})).with_ttl(past);
    let live = item("TTL", "NEW", json!({"count": 3})).with_ttl(now() + 3600);
    store.put(expired.clone(), Condition::Always).await.unwrap();
    store.put(live.clone(), Condition::Always).await.unwrap();
    store
        .put(item("TTL", "OLD2", json!({})).with_ttl(past).with_index(Index::Gsi1, "T", "x"), Condition::Always)
        .await
        .unwrap();
    store.put(item("TTL", "NEW2", json!({})).with_index(Index::Gsi1, "T", "x"), Condition::Always).await.unwrap();

    assert_eq!(store.get(&expired.key).await.unwrap(), None);
    assert_eq!(store.get(&live.key).await.unwrap(), Some(live.clone()));
    assert_eq!(sort_keys(&query_all(store.as_ref(), Query::partition("TTL", "")).await.unwrap()), ["NEW", "NEW2"]);
    let indexed = pages(&store, Query::index(Index::Gsi1, "T", "").limit(1)).await.concat();
    assert_eq!(sort_keys(&indexed), ["NEW2"]);

    assert_condition_failed(store.put(expired.clone(), Condition::Exists).await, None);
    let counted =
        store.update(&expired.key, vec![UpdateOp::Add("count".into(), 1)], Condition::Below("count".into(), 3)).await;
    assert_eq!(counted.unwrap(), item("TTL", "OLD", json!({"count": 1})), "an update starts afresh");
    store.put(expired.clone(), Condition::Always).await.unwrap();
    assert_condition_failed(store.update(&expired.key, vec![], Condition::equals("state", "open")).await, None);
    assert_eq!(store.get(&expired.key).await.unwrap(), None);
    assert_condition_failed(
        store.update(&live.key, vec![UpdateOp::Add("count".into(), 1)], Condition::Below("count".into(), 3)).await,
        None,
    );

    store.put(expired.clone(), Condition::Always).await.unwrap();
    assert_eq!(store.delete(&expired.key, Condition::Always).await.unwrap(), None);
    store.put(expired.clone(), Condition::Always).await.unwrap();
    let fresh = item("TTL", "OLD", json!({"fresh": true}));
    store.put(fresh.clone(), Condition::NotExists).await.unwrap();
    assert_eq!(store.get(&expired.key).await.unwrap(), Some(fresh));

    store.put(expired.clone(), Condition::Always).await.unwrap();
    let claim = vec![
        Write::Update {
            key: expired.key.clone(),
            ops: vec![UpdateOp::Add("count".into(), 1)],
            condition: Condition::Below("count".into(), 3),
        },
        Write::Check { key: Key::new("TTL", "OLD2"), condition: Condition::NotExists },
    ];
    store.transact(claim).await.unwrap();
    assert_eq!(store.get(&expired.key).await.unwrap(), Some(item("TTL", "OLD", json!({"count": 1}))));
}

async fn concurrent_conditional_puts(store: Store) {
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(
                async move { store.put(item("RACE", "KEY", json!({"winner": i})), Condition::NotExists).await },
            )
        })
        .collect();
    let mut winners = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await.unwrap() {
            Ok(()) => winners.push(i),
            Err(e) => assert!(e.is_condition_failed(), "{e}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one writer wins");
    let stored = store.get(&Key::new("RACE", "KEY")).await.unwrap().unwrap();
    assert_eq!(stored.attrs().unwrap()["winner"], json!(winners[0]));
}

async fn concurrent_counter_limit(store: Store) {
    let key = Key::new("RATE", "WINDOW");
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (store, key) = (store.clone(), key.clone());
            tokio::spawn(async move {
                store.update(&key, vec![UpdateOp::Add("count".into(), 1)], Condition::Below("count".into(), 5)).await
            })
        })
        .collect();
    let mut granted = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => granted += 1,
            Err(e) => assert!(e.is_condition_failed(), "{e}"),
        }
    }
    assert_eq!(granted, 5);
    assert_eq!(store.get(&key).await.unwrap().unwrap().attrs().unwrap()["count"], json!(5));
}

async fn concurrent_unique_claims(store: Store) {
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut transaction = Transaction::new();
                let name_claim = transaction.add(Write::Put {
                    item: item("NAME#taken", "NAME", json!({"owner": i})),
                    condition: Condition::NotExists,
                });
                transaction.add(Write::Put {
                    item: item(&format!("USER#{i}"), "USER", json!({"name": "taken"})),
                    condition: Condition::NotExists,
                });
                (name_claim, transaction.commit(store.as_ref()).await)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await.unwrap() {
            (_, Ok(())) => winners.push(i),
            (name_claim, Err(e)) => assert!(e.failed_on(name_claim), "the name claim failed: {e}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one claim wins");
    let owner = store.get(&Key::new("NAME#taken", "NAME")).await.unwrap().unwrap();
    assert_eq!(owner.attrs().unwrap()["owner"], json!(winners[0]));
    for i in 0..16 {
        let user = store.get(&Key::new(format!("USER#{i}"), "USER")).await.unwrap();
        assert_eq!(user.is_some(), winners == [i], "user {i} exists only if it won");
    }
}

async fn invalid_cursor(store: Store) {
    for raw in ["not a cursor!", "W10", "e30", "eyJQSyI6MX0"] {
        for query in [Query::partition("P", ""), Query::index(Index::Gsi1, "G", "")] {
            let result = store.query(query.after(Some(Cursor::from_string(raw.into())))).await;
            assert!(matches!(result, Err(StoreError::InvalidCursor)), "{raw}: {result:?}");
        }
    }
}
