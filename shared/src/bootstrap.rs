//! The bootstrap tokens, installed once per start: the site-admin token of the management APIs
//! and the broker's root service token. The functions install the values they are configured
//! with; dev-server also generates the ones that were never configured nor generated before.

use crate::state::{AppState, BootError};

/// What to do about a bootstrap token that is not configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unconfigured {
    /// Leave it absent (the functions: the stack always configures both).
    Leave,
    /// Generate one on the first start and hand it back to be shown once (dev-server).
    Generate,
}

/// The secrets generated at this start, if any (they are never shown again).
#[derive(Debug, Default)]
pub struct Generated {
    pub admin_token: Option<String>,
    pub root_service_token: Option<String>,
}

/// Installs the configured tokens (hashed), then generates the missing ones when asked to.
pub async fn install_tokens(state: &AppState, unconfigured: Unconfigured) -> Result<Generated, BootError> {
    let store = state.store.as_ref();
    let broker = |e: crate::broker::BrokerError| BootError::Bootstrap(e.to_string());
    let mut generated = Generated::default();
    match &state.config.admin_token {
        Some(secret) => crate::auth::install_admin_token(store, secret).await?,
        None if unconfigured == Unconfigured::Generate && !crate::auth::admin_token_exists(store).await? => {
            let secret = crate::auth::new_secret();
            crate::auth::install_admin_token(store, &secret).await?;
            crate::auth::mark_admin_token_generated(store).await?;
            generated.admin_token = Some(secret);
        }
        None => {}
    }
    use crate::broker::tokens;
    match &state.config.root_service_token {
        Some(secret) => tokens::install_root(store, secret).await.map_err(broker)?,
        None if unconfigured == Unconfigured::Generate && !tokens::root_generated(store).await.map_err(broker)? => {
            let secret = format!("hvs.{}", crate::ids::random_token(24));
            tokens::install_root(store, &secret).await.map_err(broker)?;
            tokens::mark_root_generated(store).await.map_err(broker)?;
            generated.root_service_token = Some(secret);
        }
        None => {}
    }
    Ok(generated)
}
