//! What every function's `main` does: read the configuration, build the state once per cold
//! start, and serve the family's router (HTTP functions) or handle events.

use axum::Router;

use crate::app::init_tracing;
use crate::aws::AwsBase;
use crate::blobs::{DeployedBlobs, WithS3};
use crate::bootstrap::{install_tokens, Unconfigured};
use crate::config::Config;
use crate::state::AppState;

pub type Error = lambda_http::Error;

/// The functions, one per resource family (`functions/*`, each a resource of template.yaml), by
/// their package and binary names.
pub const FUNCTIONS: [&str; 12] = [
    "accounts",
    "state-versions",
    "runs",
    "registry-api",
    "registry-protocol",
    "registry-ingest",
    "agent-pools",
    "agent-gateway",
    "credential-broker",
    "key-rotation",
    "registry-sync",
    "web",
];

/// Builds the state from the environment, once per cold start, with `B` as the blob adapter.
pub async fn state_from_env<B: DeployedBlobs>() -> Result<AppState, Error> {
    init_tracing(true);
    let mut config = Config::from_env()?;
    let aws = AwsBase::new(config.aws_trust);
    bootstrap_tokens_from_secrets(&mut config, &aws).await?;
    let state = AppState::build_with::<B>(config, false, aws).await?;
    install_tokens(&state, Unconfigured::Leave).await?;
    Ok(state)
}

/// In AWS the site-admin and root service tokens, and the key that signs links, come from the
/// Secrets Manager secrets the stack generates (`HANGAR_ADMIN_TOKEN_SECRET_ARN`,
/// `HANGAR_ROOT_SERVICE_TOKEN_SECRET_ARN`, `HANGAR_LINK_KEY_SECRET_ARN`):
/// read once at cold start, installed (hashed) like the plain variables, never logged. A function
/// not given a secret's ARN leaves that token as it is (see `bootstrap`).
async fn bootstrap_tokens_from_secrets(config: &mut Config, aws: &AwsBase) -> Result<(), Error> {
    let arn = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let (admin, root) = (arn("HANGAR_ADMIN_TOKEN_SECRET_ARN"), arn("HANGAR_ROOT_SERVICE_TOKEN_SECRET_ARN"));
    let link_key = arn("HANGAR_LINK_KEY_SECRET_ARN");
    let runner = arn("HANGAR_RUNNER_TOKEN_SECRET_ARN");
    if admin.is_none() && root.is_none() && link_key.is_none() && runner.is_none() {
        return Ok(());
    }
    let secrets = aws_sdk_secretsmanager::Client::new(aws.config().await);
    let read = |arn: String| {
        let secrets = secrets.clone();
        async move {
            let value = secrets.get_secret_value().secret_id(&arn).send().await;
            let value = value.map_err(|e| {
                format!("reading secret {arn}: {}", aws_sdk_secretsmanager::error::DisplayErrorContext(&e))
            })?;
            value.secret_string().map(str::to_owned).ok_or_else(|| format!("secret {arn} holds no string"))
        }
    };
    if let Some(arn) = admin {
        config.admin_token = Some(read(arn).await?);
    }
    if let Some(arn) = root {
        config.root_service_token = Some(read(arn).await?);
    }
    if let Some(arn) = link_key {
        config.link_key = Some(read(arn).await?);
    }
    if let Some(arn) = runner {
        config.runner_token = Some(read(arn).await?);
    }
    Ok(())
}

/// Serves an HTTP function: API Gateway events in, the family's router behind them. `B` is
/// [`WithS3`](crate::blobs::WithS3) for the families that keep archives, else
/// [`WithoutBlobs`](crate::blobs::WithoutBlobs).
pub async fn serve_http<B: DeployedBlobs>(router: fn(AppState) -> Router) -> Result<(), Error> {
    let state = state_from_env::<B>().await?;
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
    let state = state_from_env::<WithS3>().await?;
    let handler = &handler;
    lambda_runtime::run(lambda_runtime::service_fn(move |event: lambda_runtime::LambdaEvent<E>| {
        let state = state.clone();
        async move { handler(state, event.payload).await }
    }))
    .await
}
