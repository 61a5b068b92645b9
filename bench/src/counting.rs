//! The counting store adapter the store-cost figures use: the tests' own (`hangar_tests::counting`),
//! so the figures and the tests that hold the round-trip claims count the same way.

pub use hangar_tests::counting::{Cost, Counters, CountingStore};
