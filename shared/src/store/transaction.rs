//! Transactions whose writes have names: adding a write hands back a handle, and a failed
//! transaction is asked whether the condition of *that* write failed
//! (`Err(e) if e.failed_on(claim)`), so a caller says what failed, not where it stood, and a
//! write added later moves nothing.

use super::{ItemStore, StoreError, Write};

/// A transaction being built.
#[derive(Debug, Default, Clone)]
#[must_use = "a transaction does nothing until it is committed"]
pub struct Transaction {
    /// Open to the store's mechanisms that rewrite one write in place (`collection_index`).
    pub(super) writes: Vec<Write>,
}

/// The writes one call to [`Transaction::add`] or [`Transaction::extend`] added, by the place
/// they took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writes {
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Writes {
    fn holds(self, index: usize) -> bool {
        (self.start..self.end).contains(&index)
    }
}

impl Transaction {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one write.
    pub fn add(&mut self, write: Write) -> Writes {
        self.extend([write])
    }

    /// Adds writes that fail or succeed as one group as far as the caller cares (the checks of
    /// `access::still_there`, a cascade's deletions): one handle for all of them.
    pub fn extend(&mut self, writes: impl IntoIterator<Item = Write>) -> Writes {
        let start = self.writes.len();
        self.writes.extend(writes);
        Writes { start, end: self.writes.len() }
    }

    /// Puts `write` in the place of the one write `held` names: how a write whose contents are
    /// known only once the rest are added keeps its place first (a record whose revision the
    /// other writes are conditioned on).
    pub fn replace(&mut self, held: Writes, write: Write) {
        debug_assert_eq!(held.end - held.start, 1, "a place held for one write");
        self.writes[held.start] = write;
    }

    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Applies every write or none ([`ItemStore::transact`]).
    pub async fn commit(self, store: &dyn ItemStore) -> Result<(), StoreError> {
        store.transact(self.writes).await
    }

    /// The writes, for a caller that hands them on (a batch split by the store's limit).
    pub fn into_writes(self) -> Vec<Write> {
        self.writes
    }
}

/// A transaction of writes no caller names apart.
impl From<Vec<Write>> for Transaction {
    fn from(writes: Vec<Write>) -> Self {
        Transaction { writes }
    }
}

impl StoreError {
    /// Whether the transaction failed because the condition of one of `writes` failed.
    pub fn failed_on(&self, writes: Writes) -> bool {
        matches!(self, StoreError::ConditionFailed { write: Some(index) } if writes.holds(*index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Condition, Key};

    fn check(sk: &str) -> Write {
        Write::Check { key: Key::new("P", sk), condition: Condition::Exists }
    }

    #[test]
    fn a_failure_names_the_write_it_was_added_as_wherever_it_stands() {
        let mut transaction = Transaction::new();
        let first = transaction.add(check("a"));
        let group = transaction.extend([check("b"), check("c")]);
        let last = transaction.add(check("d"));
        let failed = |index| StoreError::ConditionFailed { write: Some(index) };
        assert!(failed(0).failed_on(first) && !failed(0).failed_on(group));
        assert!(failed(1).failed_on(group) && failed(2).failed_on(group) && !failed(2).failed_on(last));
        assert!(failed(3).failed_on(last));
        let unplaced = StoreError::ConditionFailed { write: None };
        assert!(!unplaced.failed_on(first) && !StoreError::Throttled.failed_on(first));
        transaction.replace(first, check("e"));
        assert!(matches!(&transaction.writes[0], Write::Check { key, .. } if key.sk == "e"));
        let empty = Transaction::new().extend([]);
        assert!(!failed(0).failed_on(empty));
        assert_eq!(transaction.len(), 4);
    }
}
