//! Optimistic concurrency: a change reads an item, computes its writes, and commits them on the
//! condition that the item is unchanged; when another change won the race, it starts again.

/// How many times a change is tried before the caller gives up with its own "being changed by
/// other requests" answer.
pub const RACE_ATTEMPTS: usize = 10;

/// Runs `attempt` until it commits: `Ok(Some(_))` is done, `Ok(None)` lost a race and is tried
/// again (reading afresh), an error ends at once. `Ok(None)` after [`RACE_ATTEMPTS`] losses.
///
/// A closure returning a future rather than an async closure: the futures of async closures
/// cannot yet be shown to be `Send`, which every request handler's future must be.
pub async fn retry_on_race<T, E, Fut>(mut attempt: impl FnMut() -> Fut) -> Result<Option<T>, E>
where
    Fut: std::future::Future<Output = Result<Option<T>, E>>,
{
    for _ in 0..RACE_ATTEMPTS {
        if let Some(done) = attempt().await? {
            return Ok(Some(done));
        }
    }
    Ok(None)
}
