//! SQLite's promise to dev-server and `cargo lambda watch` sharing one data directory: several
//! processes writing one file at once lose nothing, and a conditional write has one winner.
//! The test runs copies of its own binary as the other processes.

use std::process::{Command, Stdio};

use hangar::store::{Condition, Item, ItemStore, Key, SqliteStore, UpdateOp};

const CHILD_DB: &str = "HANGAR_SQLITE_CHILD_DB";
const PROCESSES: usize = 4;
const INCREMENTS: i64 = 50;

/// The child's test name in this binary: its module path without the binary's name.
fn child_test() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    format!("{module}::child_process_writer")
}

#[tokio::test]
async fn several_processes_writing_one_file_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    SqliteStore::open(&path).unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", &child_test(), "--ignored", "--nocapture"])
                .env(CHILD_DB, &path)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut winners = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a writer process failed: {}", String::from_utf8_lossy(&output.stdout));
        winners += usize::from(String::from_utf8_lossy(&output.stdout).contains("CLAIM=won"));
    }
    assert_eq!(winners, 1, "exactly one process wins the conditional put");
    let store = SqliteStore::open(&path).unwrap();
    let counter = store.get(&Key::new("counter", "c")).await.unwrap().unwrap();
    assert_eq!(counter.attrs["n"], PROCESSES as i64 * INCREMENTS, "no increment lost");
}

#[tokio::test]
#[ignore = "a child process of several_processes_writing_one_file_lose_nothing"]
async fn child_process_writer() {
    let Ok(path) = std::env::var(CHILD_DB) else { return };
    let store = SqliteStore::open(path).unwrap();
    let claim = store.put(Item::new(Key::new("claim", "c"), Default::default()), Condition::NotExists).await;
    assert!(claim.as_ref().err().is_none_or(|e| e.is_condition_failed()), "{claim:?}");
    println!("CLAIM={}", if claim.is_ok() { "won" } else { "lost" });
    for _ in 0..INCREMENTS {
        store.update(&Key::new("counter", "c"), vec![UpdateOp::Add("n".into(), 1)], Condition::Always).await.unwrap();
    }
}
