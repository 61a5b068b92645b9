//! Fair work queues: work recorded by requests and done piece by piece by a scheduled job that
//! every organization shares, so that no organization holds the job up for the others. The VCS
//! sync job's queue (`registry::publishing::sync`) is one; each queue is a [`WorkQueue`] named by
//! its item type (a [`Payload`]) and done by a [`Worker`].
//!
//! - **Fairness: one turn per organization.** Work waits in its organization's queue (a schedule
//!   partition, ordered by when each piece is due), and an organization with work has a *turn*
//!   in the queue's schedule of turns, due when its earliest work is. A run ([`run`]) takes the
//!   organizations whose turn is due and serves them round-robin, one piece each in turn, an
//!   equal share of the run at most. A served organization's turn then moves behind those still
//!   waiting (due a second later at the soonest); one whose queue looks empty is marked idle,
//!   and removed if it still is at the next look (the queue is read through an index, which may
//!   not show work recorded a moment ago). Every turn change is conditional on the turn's
//!   stamp, new on every write that records work: work recorded since the run read the turn
//!   gave it a turn due at once, which stands.
//! - **Recording work.** [`queue_writes`] puts work in its organization's queue together with
//!   the organization's turn, to commit in the caller's transaction. A caller whose transaction
//!   cannot hold the turn too uses [`inbox_write`]: the work waits in the queue's *inbox*, and
//!   each run first admits (moves) up to [`Policy::admitted_per_run`] of it to the
//!   organizations' queues, giving each of those organizations a turn due at once.
//! - **Leases.** A piece is claimed with a conditional write (its attempt count, and its due
//!   time pushed [`Policy::lease`] ahead) before it is done, so overlapping runs never do it
//!   twice; past the lease, work a run died on is taken up again. The lease is longer than
//!   [`Policy::item_time`], so a piece still being done is never taken twice.
//! - **Backoff.** Work that fails (or takes longer than [`Policy::item_time`]) is retried after
//!   [`Policy::backoff`] (30 s doubling up to an hour by default), [`Policy::max_attempts`]
//!   times in all; the [`Worker`] records each failure's reason where its owners see it, and
//!   what to do when the work is given up.
//! - **Bounds.** A run does at most [`RunBounds::max_items`] pieces and starts none after its
//!   [`RunBounds::deadline`]; what is left waits for the next run.
//!
//! A new queue:
//! 1. names its keys in [`super::keys`]: the key of a piece under its id, the inbox partition,
//!    an organization's queue partition, an organization's turn key, and the turns partition;
//! 2. defines its item type (serialized with the piece's bookkeeping, [`Task`], flattened into
//!    one item: its attributes must not be `id`, `attempts`, `not_before` or `reason`) and
//!    implements [`Payload`] for it, with a `const QUEUE: WorkQueue` naming those keys and its
//!    [`Policy`];
//! 3. records work with [`queue_writes`] or [`inbox_write`] in the transactions that need it;
//! 4. implements [`Worker`] (what a piece does, and what its failures leave behind) and calls
//!    [`run`] from its scheduled job.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{
    now_epoch, schedule, Condition, Index, Item, ItemStore, Key, Query, StoreError, Transaction, UpdateOp, Write,
};

/// How a queue retries and bounds its pieces of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Attempts at one piece before it is given up.
    pub max_attempts: u32,
    /// The wait after a first failure (seconds); it doubles after each further one.
    pub first_backoff: i64,
    /// The longest wait between attempts (seconds).
    pub max_backoff: i64,
    /// How long one piece may take before it counts as failed.
    pub item_time: Duration,
    /// How long a claim holds (seconds): past it, a run that died mid-piece has its work taken
    /// up again. Longer than `item_time`, so a piece still running is never taken twice.
    pub lease: i64,
    /// Pieces a run moves from the inbox to their organizations' queues.
    pub admitted_per_run: usize,
    /// How long a turn whose queue looks empty stays before it is removed (seconds): the queue
    /// is read through an index, which may not show work recorded a moment ago.
    pub idle_turn: i64,
}

impl Policy {
    /// 8 attempts, 30 s doubling up to an hour between them, 120 s a piece under a 600 s
    /// lease, 500 admitted a run, idle turns kept 300 s.
    pub const DEFAULT: Policy = Policy {
        max_attempts: 8,
        first_backoff: 30,
        max_backoff: 3600,
        item_time: Duration::from_secs(120),
        lease: 600,
        admitted_per_run: 500,
        idle_turn: 300,
    };

    /// The wait after the `attempt`th failure (seconds): `first_backoff`, doubling, up to
    /// `max_backoff`.
    pub fn backoff(&self, attempt: u32) -> i64 {
        (self.first_backoff << attempt.saturating_sub(1).min(16)).min(self.max_backoff)
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A queue: its keys (from [`super::keys`]) and its policy.
#[derive(Clone, Copy)]
pub struct WorkQueue {
    /// What the queue's log lines call its work ("VCS work failed").
    pub name: &'static str,
    /// The key of a piece of work recorded under an id.
    pub item: fn(&str) -> Key,
    /// The schedule partition (GSI1) of work recorded without its organization's turn.
    pub inbox: &'static str,
    /// The schedule partition (GSI1) of an organization's work, ordered by when each is due.
    pub queue: fn(&str) -> String,
    /// The key of an organization's turn.
    pub turn: fn(&str) -> Key,
    /// The schedule partition (GSI1) of the organizations' turns, ordered by when each is due.
    pub turns: &'static str,
    pub policy: Policy,
}

/// What a queue holds: the caller's description of a piece of work, stored as it serializes
/// (flattened into the [`Task`] item). Its type names the queue it goes to.
pub trait Payload: Serialize + DeserializeOwned + Send + Sync + 'static {
    const QUEUE: WorkQueue;

    /// The organization whose turn the work waits for.
    fn org_id(&self) -> &str;
}

/// What does a queue's work, and records what its failures leave behind.
pub trait Worker: Sync {
    type Work: Payload;
    type Error: From<StoreError> + std::fmt::Display + Send;

    /// Does one piece of work, within the policy's `item_time` (past it, the attempt fails).
    fn run(&self, work: &Self::Work) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Why the work failed, in words for its owners (the `reason` handed to the hooks below).
    fn reason_of(&self, error: &Self::Error) -> String;

    /// After a failed attempt that is retried at `at` (unix seconds): records the failure where
    /// its owners see it, and returns what it recorded, kept as the task's `reason` (for
    /// [`Worker::done`]). An error leaves the work to be taken up again when its lease ends.
    fn retrying(
        &self,
        task: &Task<Self::Work>,
        reason: &str,
        at: i64,
    ) -> impl Future<Output = Result<String, Self::Error>> + Send;

    /// After the last attempt failed, before the work is deleted. An error keeps the work, to
    /// be given up again when its lease ends.
    fn give_up(&self, task: &Task<Self::Work>, reason: &str) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// After the work succeeded and was deleted: e.g. takes back the reason an earlier failure
    /// left (`task.reason`). Its failures are its own to log.
    fn done(&self, task: &Task<Self::Work>) -> impl Future<Output = ()> + Send {
        let _ = task;
        std::future::ready(())
    }
}

/// What one run may do: the scheduled job's share of a Lambda invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBounds {
    /// Pieces of work started, across all organizations.
    pub max_items: usize,
    /// No piece is started once this much time has passed; what is left waits for the next run.
    pub deadline: Duration,
}

impl Default for RunBounds {
    /// 100 pieces and 60 s: a run (one a minute) ends within 3 minutes with its last piece.
    fn default() -> Self {
        Self { max_items: 100, deadline: Duration::from_secs(60) }
    }
}

/// A piece of work as stored, with its place in its organization's queue and its attempts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task<W> {
    /// What makes its queue position unique (absent from work recorded before queues existed).
    #[serde(default)]
    pub id: String,
    #[serde(flatten)]
    pub work: W,
    /// Runs that claimed it so far.
    #[serde(default)]
    pub attempts: u32,
    /// When it is next due (unix seconds), as its queue position says.
    #[serde(default)]
    pub not_before: i64,
    /// What its last failure left behind ([`Worker::retrying`]), to take back once it succeeds.
    #[serde(default)]
    pub reason: Option<String>,
}

impl<W: Payload> Task<W> {
    fn new(id: &str, work: W) -> Self {
        Self { id: id.to_owned(), work, attempts: 0, not_before: now_epoch(), reason: None }
    }

    /// The stored item under `key`, in its organization's queue.
    pub fn queued(&self, key: Key) -> Result<Item, StoreError> {
        let queue = (W::QUEUE.queue)(self.work.org_id());
        let item = Item::from_value(key, self)?;
        Ok(item.with_index(Index::Gsi1, queue, schedule::sort_key(self.not_before, &self.id)))
    }
}

/// The write that records `work` in the queue's inbox under `id`, due now; it fails (at its
/// index in the caller's transaction) while work under that id waits. The next run moves it to
/// its organization's queue: one write cannot also give the organization its turn.
pub fn inbox_write<W: Payload>(id: &str, work: W) -> Result<Write, StoreError> {
    let task = Task::new(id, work);
    let item = Item::from_value((W::QUEUE.item)(id), &task)?;
    let item = item.with_index(Index::Gsi1, W::QUEUE.inbox, schedule::sort_key(task.not_before, id));
    Ok(Write::Put { item, condition: Condition::NotExists })
}

/// The writes that put `work` in its organization's queue, due now, and give the organization a
/// turn due now, to commit with whatever waits for the work.
pub fn queue_writes<W: Payload>(work: W) -> Result<Vec<Write>, StoreError> {
    let task = Task::new(&crate::ids::random_token(20), work);
    Ok(vec![
        Write::Put { item: task.queued((W::QUEUE.item)(&task.id))?, condition: Condition::NotExists },
        turn_at::<W>(task.work.org_id(), now_epoch())?,
    ])
}

/// An organization's turn: due when its earliest work is.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Turn {
    org_id: String,
    not_before: i64,
    /// New on every write that records work, so that a run moves or ends the turn only if no
    /// work was recorded since it read it.
    stamp: String,
    /// Set when a run found the queue empty; a turn still idle at the next look is removed.
    #[serde(default)]
    idle: bool,
}

/// The write that gives `org_id` a turn due `at`, recorded with its new work.
fn turn_at<W: Payload>(org_id: &str, at: i64) -> Result<Write, StoreError> {
    let turn = Turn { org_id: org_id.to_owned(), not_before: at, stamp: crate::ids::random_token(16), idle: false };
    let item = Item::from_value((W::QUEUE.turn)(org_id), &turn)?;
    let item = item.with_index(Index::Gsi1, W::QUEUE.turns, schedule::sort_key(turn.not_before, org_id));
    Ok(Write::Put { item, condition: Condition::Always })
}

/// Does the queue's work that is due by `now` (unix seconds), within `bounds`; returns how many
/// pieces finished. What fails is retried after `now` plus its backoff, so a test moves this
/// clock instead of waiting. A piece whose attempt failed to record its outcome is logged and
/// taken up again when its lease ends; a turn that could not be moved comes round again.
pub async fn run<H: Worker>(store: &dyn ItemStore, worker: &H, now: i64, bounds: RunBounds) -> Result<usize, H::Error> {
    let deadline = tokio::time::Instant::now() + bounds.deadline;
    let queue = <H::Work as Payload>::QUEUE;
    admit::<H::Work>(store, now).await?;
    let turns = schedule::due(store, queue.turns, now, bounds.max_items).await?;
    if turns.is_empty() {
        return Ok(0);
    }
    let share = bounds.max_items.div_ceil(turns.len());
    let mut shares = Vec::with_capacity(turns.len());
    for turn in &turns {
        let turn: Turn = turn.parse()?;
        let due = schedule::due(store, &(queue.queue)(&turn.org_id), now, share).await?;
        shares.push(Share { turn, due: VecDeque::from(due), served: false, retry_at: None });
    }
    let (mut started, mut finished) = (0, 0);
    'rounds: for _ in 0..share {
        for org in &mut shares {
            if started == bounds.max_items || tokio::time::Instant::now() >= deadline {
                break 'rounds;
            }
            let Some(item) = org.due.pop_front() else { continue };
            (started, org.served) = (started + 1, true);
            match attempt(store, worker, item, now).await {
                Ok(Attempt::Finished) => finished += 1,
                Ok(Attempt::Retried(at)) => org.retry_at = Some(org.retry_at.map_or(at, |soonest| soonest.min(at))),
                Ok(Attempt::GaveUp | Attempt::NotClaimed) => {}
                Err(e) => {
                    tracing::warn!(org = %org.turn.org_id, error = %e, "{} work not run; retried next run", queue.name)
                }
            }
        }
    }
    for org in &shares {
        if let Err(e) = pass_turn::<H::Work>(store, org, now).await {
            tracing::warn!(org = %org.turn.org_id, error = %e, "{} turn not moved; it comes round again", queue.name);
        }
    }
    Ok(finished)
}

/// One organization's part of a run.
struct Share {
    turn: Turn,
    due: VecDeque<Item>,
    /// Whether the run took any of its work.
    served: bool,
    /// The soonest retry this run scheduled: the index the queue is read through may not show it yet.
    retry_at: Option<i64>,
}

enum Attempt {
    Finished,
    /// Failed, and due again at this time.
    Retried(i64),
    /// Failed for the last time.
    GaveUp,
    /// Another run holds it, or it is gone.
    NotClaimed,
}

/// Moves the inbox's work to their organizations' queues, due when it was recorded, and gives
/// each of those organizations a turn due `now`.
async fn admit<W: Payload>(store: &dyn ItemStore, now: i64) -> Result<(), StoreError> {
    let queue = W::QUEUE;
    let inbox = store.query(Query::index(Index::Gsi1, queue.inbox, "").limit(queue.policy.admitted_per_run)).await?;
    let mut turned = HashSet::new();
    for item in inbox.items {
        let Some(mut task) = readable::<W>(store, &item).await? else { continue };
        if task.id.is_empty() {
            task.id = crate::ids::random_token(20);
        }
        let still_in_inbox = Condition::equals(Index::Gsi1.key_attrs().0, queue.inbox);
        let mut transaction = Transaction::new();
        let still_waiting =
            transaction.add(Write::Put { item: task.queued(item.key.clone())?, condition: still_in_inbox });
        if turned.insert(task.work.org_id().to_owned()) {
            transaction.add(turn_at::<W>(task.work.org_id(), now)?);
        }
        match transaction.commit(store).await {
            // Another run moved it first.
            Err(e) if e.failed_on(still_waiting) => {}
            other => other?,
        }
    }
    Ok(())
}

/// Claims a due piece of work, has the worker do it, and then deletes it, or schedules its
/// retry, or gives it up after its last attempt.
async fn attempt<H: Worker>(store: &dyn ItemStore, worker: &H, item: Item, now: i64) -> Result<Attempt, H::Error> {
    let WorkQueue { name, policy, .. } = <H::Work as Payload>::QUEUE;
    let Some(mut task) = readable::<H::Work>(store, &item).await? else { return Ok(Attempt::NotClaimed) };
    let unclaimed = Condition::Exists.and(Condition::Below("attempts".into(), i64::from(task.attempts) + 1));
    task.attempts += 1;
    let lease = now + policy.lease;
    let claim = vec![
        UpdateOp::set("attempts", task.attempts),
        UpdateOp::set("not_before", lease),
        schedule::reschedule(lease, &task.id),
    ];
    match store.update(&item.key, claim, unclaimed).await {
        Err(e) if e.is_condition_failed() => return Ok(Attempt::NotClaimed),
        other => drop(other?),
    }
    let failure = match tokio::time::timeout(policy.item_time, worker.run(&task.work)).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => {
            tracing::warn!(org = %task.work.org_id(), attempt = task.attempts, error = %e, "{name} work failed");
            Some(worker.reason_of(&e))
        }
        Err(_) => Some(format!("it did not finish within {} seconds", policy.item_time.as_secs())),
    };
    let Some(reason) = failure else {
        store.delete(&item.key, Condition::Always).await?;
        worker.done(&task).await;
        return Ok(Attempt::Finished);
    };
    if task.attempts >= policy.max_attempts {
        worker.give_up(&task, &reason).await?;
        store.delete(&item.key, Condition::Always).await?;
        return Ok(Attempt::GaveUp);
    }
    let at = now + policy.backoff(task.attempts);
    let shown = worker.retrying(&task, &reason, at).await?;
    let retry =
        vec![UpdateOp::set("not_before", at), UpdateOp::set("reason", shown), schedule::reschedule(at, &task.id)];
    let ours = Condition::Exists.and(Condition::Below("attempts".into(), i64::from(task.attempts) + 1));
    match store.update(&item.key, retry, ours).await {
        Err(e) if e.is_condition_failed() => {}
        other => drop(other?),
    }
    Ok(Attempt::Retried(at))
}

/// The work an item holds; an item that holds none this version reads is dropped (and logged)
/// rather than kept at the head of its queue for good.
async fn readable<W: Payload>(store: &dyn ItemStore, item: &Item) -> Result<Option<Task<W>>, StoreError> {
    match item.parse() {
        Ok(task) => Ok(Some(task)),
        Err(e) => {
            tracing::error!(error = %e, key = ?item.key, "unreadable {} work dropped", W::QUEUE.name);
            store.delete(&item.key, Condition::Always).await?;
            Ok(None)
        }
    }
}

/// Moves an organization's turn to when its next work is due; one that was served goes behind
/// those still waiting. A turn whose queue is empty is marked idle, and removed if it still is
/// at the next look. Every change is conditional on the turn's stamp: work recorded since the
/// run read the turn gave it a turn due at once, which stands.
async fn pass_turn<W: Payload>(store: &dyn ItemStore, share: &Share, now: i64) -> Result<(), StoreError> {
    let queue = W::QUEUE;
    let Share { turn, served, retry_at, .. } = share;
    let first = store.query(Query::index(Index::Gsi1, (queue.queue)(&turn.org_id), "").limit(1)).await?;
    let queued = match first.items.first() {
        Some(item) => Some(item.parse::<Task<W>>()?.not_before),
        None => None,
    };
    let next = match (queued, *retry_at) {
        (Some(queued), Some(retry)) => Some(queued.min(retry)),
        (queued, retry) => queued.or(retry),
    };
    let key = (queue.turn)(&turn.org_id);
    let unchanged = Condition::equals("stamp", turn.stamp.clone());
    let (at, idle) = match next {
        None if turn.idle => {
            return match store.delete(&key, unchanged).await {
                Err(e) if e.is_condition_failed() => Ok(()),
                other => other.map(drop),
            };
        }
        None => (now + queue.policy.idle_turn, true),
        Some(at) if *served => (at.max(now + 1), false),
        Some(at) => (at, false),
    };
    let moved =
        vec![UpdateOp::set("not_before", at), UpdateOp::set("idle", idle), schedule::reschedule(at, &turn.org_id)];
    match store.update(&key, moved, unchanged).await {
        Err(e) if e.is_condition_failed() => Ok(()),
        other => other.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_backoff_is_thirty_seconds_doubling_up_to_an_hour() {
        let policy = Policy::DEFAULT;
        let waits: Vec<i64> = (1..policy.max_attempts).map(|n| policy.backoff(n)).collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 960, 1920]);
        assert_eq!((policy.backoff(0), policy.backoff(8), policy.backoff(u32::MAX)), (30, 3600, 3600));
        let short = Policy { first_backoff: 5, max_backoff: 15, ..Policy::DEFAULT };
        assert_eq!((1..=4).map(|n| short.backoff(n)).collect::<Vec<_>>(), [5, 10, 15, 15]);
    }

    #[cfg(feature = "sqlite")]
    mod runs {
        use std::sync::Mutex;

        use super::*;
        use crate::store::SqliteStore;

        /// A test queue's work: `fail` makes every attempt at it fail.
        #[derive(Debug, Clone, Serialize, Deserialize)]
        struct Job {
            org_id: String,
            name: String,
            #[serde(default)]
            fail: bool,
        }

        fn job(org_id: &str, name: &str, fail: bool) -> Job {
            Job { org_id: org_id.into(), name: name.into(), fail }
        }

        fn item_key(id: &str) -> Key {
            Key::new(format!("TESTWORK#{id}"), "WORK")
        }

        fn queue_of(org_id: &str) -> String {
            format!("TESTQUEUE#{org_id}")
        }

        fn turn_key(org_id: &str) -> Key {
            Key::new(format!("TESTTURN#{org_id}"), "TESTTURN")
        }

        impl Payload for Job {
            const QUEUE: WorkQueue = WorkQueue {
                name: "test",
                item: item_key,
                inbox: "TESTINBOX",
                queue: queue_of,
                turn: turn_key,
                turns: "TESTTURNS",
                policy: Policy { max_attempts: 2, ..Policy::DEFAULT },
            };

            fn org_id(&self) -> &str {
                &self.org_id
            }
        }

        /// Does jobs and records what it did, gave up and took back.
        #[derive(Default)]
        struct Recorder {
            finished: Mutex<Vec<String>>,
            given_up: Mutex<Vec<String>>,
            taken_back: Mutex<Vec<String>>,
        }

        impl Worker for Recorder {
            type Work = Job;
            type Error = StoreError;

            async fn run(&self, job: &Job) -> Result<(), StoreError> {
                if job.fail {
                    return Err(StoreError::Backend("it failed".into()));
                }
                self.finished.lock().unwrap().push(job.name.clone());
                Ok(())
            }

            fn reason_of(&self, error: &StoreError) -> String {
                error.to_string()
            }

            async fn retrying(&self, task: &Task<Job>, reason: &str, _at: i64) -> Result<String, StoreError> {
                Ok(format!("{reason} (attempt {})", task.attempts))
            }

            async fn give_up(&self, task: &Task<Job>, _reason: &str) -> Result<(), StoreError> {
                self.given_up.lock().unwrap().push(task.work.name.clone());
                Ok(())
            }

            async fn done(&self, task: &Task<Job>) {
                if let Some(reason) = &task.reason {
                    self.taken_back.lock().unwrap().push(reason.clone());
                }
            }
        }

        fn open() -> (tempfile::TempDir, SqliteStore) {
            let dir = tempfile::tempdir().unwrap();
            let store = SqliteStore::open(dir.path().join("db")).unwrap();
            (dir, store)
        }

        async fn queue_in(store: &SqliteStore, org: &str) -> Vec<Task<Job>> {
            let page = store.query(Query::index(Index::Gsi1, queue_of(org), "")).await.unwrap();
            page.items.iter().map(|item| item.parse().unwrap()).collect()
        }

        #[tokio::test]
        async fn a_run_serves_the_organizations_in_turn_not_the_oldest_work_first() {
            let (_dir, store) = open();
            for n in 1..=5 {
                store.transact(queue_writes(job("acme", &format!("acme-{n}"), false)).unwrap()).await.unwrap();
            }
            store.transact(queue_writes(job("globex", "globex-1", false)).unwrap()).await.unwrap();
            let worker = Recorder::default();
            let three = RunBounds { max_items: 3, deadline: Duration::from_secs(60) };
            let finished = run(&store, &worker, now_epoch() + 10, three).await.unwrap();
            assert_eq!(finished, 3);
            let finished_jobs = worker.finished.lock().unwrap().clone();
            let from_acme = finished_jobs.iter().filter(|name| name.starts_with("acme")).count();
            assert_eq!(from_acme, 2, "{finished_jobs:?}");
            assert_eq!(finished_jobs[1], "globex-1", "globex's turn comes second: {finished_jobs:?}");
            assert_eq!((queue_in(&store, "acme").await.len(), queue_in(&store, "globex").await.len()), (3, 0));
        }

        #[tokio::test]
        async fn work_from_the_inbox_is_admitted_retried_after_its_backoff_and_given_up() {
            let (_dir, store) = open();
            store.transact(vec![inbox_write("once", job("acme", "bad", true)).unwrap()]).await.unwrap();
            let mut again = Transaction::new();
            let second_piece = again.add(inbox_write("once", job("acme", "bad", true)).unwrap());
            let refused = again.commit(&store).await.unwrap_err();
            assert!(refused.failed_on(second_piece), "one piece per id waits: {refused}");
            let worker = Recorder::default();
            let now = now_epoch() + 10;
            assert_eq!(run(&store, &worker, now, RunBounds::default()).await.unwrap(), 0);
            let tasks = queue_in(&store, "acme").await;
            let [task] = &tasks[..] else { panic!("the job is queued once: {tasks:?}") };
            assert_eq!((task.id.as_str(), task.attempts, task.not_before), ("once", 1, now + 30));
            assert_eq!(task.reason.as_deref(), Some("store error: it failed (attempt 1)"));

            // Not due before its backoff; the last attempt gives it up.
            run(&store, &worker, now + 29, RunBounds::default()).await.unwrap();
            assert_eq!(queue_in(&store, "acme").await[0].attempts, 1);
            run(&store, &worker, now + 30, RunBounds::default()).await.unwrap();
            assert!(queue_in(&store, "acme").await.is_empty());
            assert_eq!(*worker.given_up.lock().unwrap(), ["bad"]);
            assert!(worker.finished.lock().unwrap().is_empty() && worker.taken_back.lock().unwrap().is_empty());
        }
    }
}
