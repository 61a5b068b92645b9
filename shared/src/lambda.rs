//! What every function's `main` does: read the configuration, build the state once per cold
//! start, and serve the family's router (HTTP functions) or handle events.

use axum::Router;

use crate::app::{init_tracing, AppState};
use crate::config::Config;

pub type Error = lambda_http::Error;

/// Builds the state from the environment.
pub async fn state_from_env() -> Result<AppState, Error> {
    init_tracing(true);
    let config = Config::from_env()?;
    Ok(AppState::build(config, false).await?)
}

/// Serves an HTTP function: API Gateway events in, the family's router behind them.
pub async fn serve_http(router: fn(AppState) -> Router) -> Result<(), Error> {
    let state = state_from_env().await?;
    lambda_http::run(router(state)).await
}

/// Serves an event function: each event goes to `handler` with the state built at cold start.
pub async fn serve_events<E, R, F, Fut>(handler: F) -> Result<(), Error>
where
    E: serde::de::DeserializeOwned + Send + 'static,
    R: serde::Serialize + Send + 'static,
    F: Fn(AppState, E) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<R, Error>> + Send + 'static,
{
    let state = state_from_env().await?;
    let handler = &handler;
    lambda_runtime::run(lambda_runtime::service_fn(move |event: lambda_runtime::LambdaEvent<E>| {
        let state = state.clone();
        async move { handler(state, event.payload).await }
    }))
    .await
}
