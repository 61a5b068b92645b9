//! SQLite's promise to the functions under `cargo lambda watch` (and dev-server with
//! `--shared-store`) sharing one data directory: several processes writing one file at once
//! lose nothing, and a conditional write has one winner. And dev-server's default, a file held
//! by one process: other stores of that process share it, another process is refused at once
//! and told why, and may open it once the holder is gone. The tests run copies of their own
//! binary as the other processes.

use std::process::{Command, Stdio};

use hangar::store::{Condition, Item, ItemStore, Key, SqliteStore, UpdateOp};

const CHILD_DB: &str = "HANGAR_SQLITE_CHILD_DB";
const PROCESSES: usize = 4;
const INCREMENTS: i64 = 50;

/// A child test's name in this binary: its module path without the binary's name.
fn child_test(name: &str) -> String {
    let module = module_path!().split_once("::").map_or("", |(_, path)| path);
    format!("{module}::{name}")
}

/// Starts the child test `name` on the store file `path`, its output piped.
fn run_child(name: &str, path: &std::path::Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &child_test(name), "--ignored", "--nocapture"])
        .env(CHILD_DB, path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn several_processes_writing_one_file_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    SqliteStore::open(&path).unwrap();
    let children: Vec<_> = (0..PROCESSES).map(|_| run_child("child_process_writer", &path)).collect();
    let mut winners = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a writer process failed: {}", String::from_utf8_lossy(&output.stdout));
        winners += usize::from(String::from_utf8_lossy(&output.stdout).contains("CLAIM=won"));
    }
    assert_eq!(winners, 1, "exactly one process wins the conditional put");
    let store = SqliteStore::open(&path).unwrap();
    let counter = store.get(&Key::new("counter", "c")).await.unwrap().unwrap();
    assert_eq!(counter.attrs().unwrap()["n"], PROCESSES as i64 * INCREMENTS, "no increment lost");
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

#[tokio::test]
async fn a_file_held_by_one_process_is_refused_to_another_and_shared_within() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.db");
    let holder = SqliteStore::open_exclusive(&path).unwrap();
    holder.put(Item::new(Key::new("claim", "c"), Default::default()), Condition::NotExists).await.unwrap();

    // Another store of this process: the same file, the same items, its writes seen.
    let second = SqliteStore::open_exclusive(&path).unwrap();
    assert!(second.get(&Key::new("claim", "c")).await.unwrap().is_some());
    second.update(&Key::new("counter", "c"), vec![UpdateOp::Add("n".into(), 1)], Condition::Always).await.unwrap();
    assert_eq!(holder.get(&Key::new("counter", "c")).await.unwrap().unwrap().attrs().unwrap()["n"], 1);

    // Another process: refused, with the reason.
    let output = run_child("child_process_opener", &path).wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    assert!(printed.contains("OPEN=refused") && printed.contains("is in use by another process"), "{printed}");
    // One that would share it (a function under `cargo lambda watch`): refused once a store's
    // wait for a writer is over, and told that the file is held alone.
    let output = run_child("child_process_sharing_opener", &path).wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("OPEN=refused") && printed.contains("opened it alone"), "{printed}");

    // Once every store of the holder is gone, another process opens it and finds its items.
    drop((holder, second));
    let output = run_child("child_process_opener", &path).wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("OPEN=opened COUNTER=1"), "{printed}");
}

#[tokio::test]
#[ignore = "a child process of a_file_held_by_one_process_is_refused_to_another_and_shared_within"]
async fn child_process_opener() {
    let Ok(path) = std::env::var(CHILD_DB) else { return };
    match SqliteStore::open_exclusive(path) {
        Ok(store) => {
            let counter = store.get(&Key::new("counter", "c")).await.unwrap().unwrap();
            println!("OPEN=opened COUNTER={}", counter.attrs().unwrap()["n"]);
        }
        Err(e) => println!("OPEN=refused {e}"),
    }
}

#[tokio::test]
#[ignore = "a child process of a_file_held_by_one_process_is_refused_to_another_and_shared_within"]
async fn child_process_sharing_opener() {
    let Ok(path) = std::env::var(CHILD_DB) else { return };
    match SqliteStore::open(path) {
        Ok(_) => println!("OPEN=opened"),
        Err(e) => println!("OPEN=refused {e}"),
    }
}
